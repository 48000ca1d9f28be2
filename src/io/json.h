/* A small, strict JSON reader (RFC 8259) and helpers to write JSON.
 *
 * The parser builds a tree of cdp_json values.  It accepts exactly one value
 * surrounded by optional whitespace, rejects trailing characters, comments,
 * trailing commas, leading zeros, NaN/Infinity, control characters and
 * invalid UTF-8 inside strings, lone surrogates and "\u0000" (strings are
 * NUL-terminated).  Duplicate object keys are kept (callers that care check
 * for them).  Numbers without fraction or exponent that fit in int64 are
 * CDP_JSON_INT, all others CDP_JSON_DOUBLE.  Depth, input size and the number
 * of values are limited, so hostile input cannot exhaust the stack or memory. */
#ifndef CDP_JSON_H
#define CDP_JSON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef enum cdp_json_type {
    CDP_JSON_NULL,
    CDP_JSON_BOOL,
    CDP_JSON_INT,
    CDP_JSON_DOUBLE,
    CDP_JSON_STRING,
    CDP_JSON_ARRAY,
    CDP_JSON_OBJECT
} cdp_json_type;

typedef struct cdp_json {
    cdp_json_type type;
    char *key;               /* member name when inside an object, else NULL */
    int boolean;             /* CDP_JSON_BOOL */
    int64_t i;               /* CDP_JSON_INT */
    double d;                /* CDP_JSON_INT and CDP_JSON_DOUBLE */
    char *str;               /* CDP_JSON_STRING: UTF-8, NUL-terminated */
    size_t len;              /* its length in bytes */
    struct cdp_json *child;  /* CDP_JSON_ARRAY / CDP_JSON_OBJECT: n elements/members, in order */
    size_t n;
} cdp_json;

typedef struct cdp_json_limits {
    int max_depth;           /* nesting of arrays/objects; default 64 */
    size_t max_bytes;        /* input length; default 100 MiB */
    size_t max_values;       /* values in the whole document; default 1 << 20 */
} cdp_json_limits;

/* Parses text[0..len).  lim: NULL for the defaults (zero fields also mean the
 * default).  Returns the root (free with cdp_json_free), or NULL with one
 * line in err ("<problem> at byte <offset>"). */
cdp_json *cdp_json_parse(const char *text, size_t len, const cdp_json_limits *lim,
                         char *err, size_t errlen);
void cdp_json_free(cdp_json *v);

/* The first member of object obj named key, or NULL (also when obj is NULL or
 * not an object). */
const cdp_json *cdp_json_get(const cdp_json *obj, const char *key);
/* "null", "boolean", "integer", "number", "string", "array", "object". */
const char *cdp_json_type_name(cdp_json_type t);

/* Writes s as a quoted JSON string: '"' and '\\' escaped, control characters
 * as \n, \t, ... or \u00XX, invalid UTF-8 bytes replaced by \ufffd.  NULL is
 * written as null. */
void cdp_json_write_string(FILE *f, const char *s);
/* The same into a buffer, NUL-terminated and truncated to outlen like
 * snprintf; returns the length the whole escaped string needs (without NUL). */
size_t cdp_json_escape(char *out, size_t outlen, const char *s);
/* Writes a double that reads back bit for bit (%.17g); NaN and infinities,
 * which JSON cannot express, as null. */
void cdp_json_write_double(FILE *f, double x);

#endif
