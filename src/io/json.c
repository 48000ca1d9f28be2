/* A small, strict JSON reader and JSON string/number writers (see io/json.h). */
#include "io/json.h"

#include <errno.h>
#include <locale.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define JSON_DEFAULT_DEPTH 64
#define JSON_HARD_DEPTH 1024 /* the parser recurses: never deeper than this */
#define JSON_DEFAULT_BYTES ((size_t)100 << 20)
#define JSON_DEFAULT_VALUES ((size_t)1 << 20)

/* ------------------------------------------------------------------ UTF-8 */

/* Length (1-4) of the well-formed UTF-8 sequence at s (n bytes available),
 * or 0 when it is not one: overlong forms, surrogates and code points past
 * U+10FFFF are refused. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    unsigned char lo = 0x80, hi = 0xBF;
    size_t k;
    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF)
        k = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        k = 3;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        k = 4;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
    } else
        return 0;
    if (n < k || s[1] < lo || s[1] > hi)
        return 0;
    for (size_t j = 2; j < k; j++)
        if ((s[j] & 0xC0) != 0x80)
            return 0;
    return k;
}

static size_t utf8_put(char *o, uint32_t cp)
{
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xC0 | (cp >> 6));
        o[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | (cp >> 12));
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | (cp >> 18));
    o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* ----------------------------------------------------------------- parser */

typedef struct jp {
    const char *s;
    size_t len, pos;
    int depth, max_depth;
    size_t nvals, max_values;
    char *err;
    size_t errlen;
} jp;

static int jp_fail(jp *p, const char *fmt, ...)
{
    if (p->err && p->errlen) {
        char msg[160];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        snprintf(p->err, p->errlen, "%s at byte %zu", msg, p->pos);
    }
    return -1;
}

/* The character at pos, printable, for error messages. */
static const char *jp_show(const jp *p, char buf[8])
{
    unsigned char c = (unsigned char)p->s[p->pos];
    if (c >= 0x20 && c < 0x7F)
        snprintf(buf, 8, "'%c'", c);
    else
        snprintf(buf, 8, "0x%02x", c);
    return buf;
}

static void jp_ws(jp *p)
{
    while (p->pos < p->len) {
        char c = p->s[p->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r')
            break;
        p->pos++;
    }
}

static void json_clear(cdp_json *v)
{
    free(v->key);
    free(v->str);
    for (size_t j = 0; j < v->n; j++)
        json_clear(&v->child[j]);
    free(v->child);
    memset(v, 0, sizeof *v);
}

static int hex4(const char *s, uint32_t *out)
{
    uint32_t x = 0;
    for (int j = 0; j < 4; j++) {
        char c = s[j];
        int d;
        if (c >= '0' && c <= '9') d = c - '0';
        else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
        else return -1;
        x = x << 4 | (uint32_t)d;
    }
    *out = x;
    return 0;
}

/* At the opening quote.  On success *out is a malloc'd NUL-terminated string. */
static int jp_string(jp *p, char **out, size_t *outlen)
{
    size_t start = ++p->pos, end = start;
    /* Find the closing quote first, to size the buffer. */
    while (end < p->len && p->s[end] != '"')
        end += p->s[end] == '\\' ? 2 : 1;
    if (end >= p->len) {
        p->pos = p->len;
        return jp_fail(p, "unterminated string");
    }
    char *o = malloc(end - start + 1);
    if (!o)
        return jp_fail(p, "out of memory");
    size_t n = 0;
    while (p->pos < end) {
        unsigned char c = (unsigned char)p->s[p->pos];
        if (c < 0x20) {
            free(o);
            return jp_fail(p, "control character 0x%02x in string", c);
        }
        if (c >= 0x80) {
            size_t k = utf8_len((const unsigned char *)p->s + p->pos, end - p->pos);
            if (!k) {
                free(o);
                return jp_fail(p, "invalid UTF-8 in string");
            }
            memcpy(o + n, p->s + p->pos, k);
            n += k;
            p->pos += k;
            continue;
        }
        if (c != '\\') {
            o[n++] = (char)c;
            p->pos++;
            continue;
        }
        /* escape: end points at a quote, so pos + 1 < len */
        char e = p->s[p->pos + 1];
        const char *simple = strchr("\"\\/bfnrt", e);
        if (e && simple) {
            o[n++] = "\"\\/\b\f\n\r\t"[simple - "\"\\/bfnrt"];
            p->pos += 2;
            continue;
        }
        if (e != 'u') {
            free(o);
            return jp_fail(p, "invalid escape in string");
        }
        uint32_t cp, lo;
        if (end - p->pos < 6 || hex4(p->s + p->pos + 2, &cp)) {
            free(o);
            return jp_fail(p, "invalid \\u escape");
        }
        if (cp >= 0xDC00 && cp <= 0xDFFF) {
            free(o);
            return jp_fail(p, "lone low surrogate in \\u escape");
        }
        if (cp >= 0xD800 && cp <= 0xDBFF) {
            if (end - p->pos < 12 || p->s[p->pos + 6] != '\\' || p->s[p->pos + 7] != 'u' ||
                hex4(p->s + p->pos + 8, &lo) || lo < 0xDC00 || lo > 0xDFFF) {
                free(o);
                return jp_fail(p, "unpaired high surrogate in \\u escape");
            }
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            p->pos += 6;
        }
        if (cp == 0) {
            free(o);
            return jp_fail(p, "\\u0000 in string is not supported");
        }
        n += utf8_put(o + n, cp);
        p->pos += 6;
    }
    o[n] = '\0';
    p->pos = end + 1;
    *out = o;
    *outlen = n;
    return 0;
}

static int is_digit(char c) { return c >= '0' && c <= '9'; }

static int jp_number(jp *p, cdp_json *v)
{
    size_t start = p->pos, q = p->pos;
    int neg = 0, integral = 1;
    if (q < p->len && p->s[q] == '-') {
        neg = 1;
        q++;
    }
    if (q >= p->len || !is_digit(p->s[q])) {
        p->pos = q;
        return jp_fail(p, "invalid number");
    }
    if (p->s[q] == '0') {
        q++;
        if (q < p->len && is_digit(p->s[q])) {
            p->pos = q;
            return jp_fail(p, "leading zero in number");
        }
    } else
        while (q < p->len && is_digit(p->s[q]))
            q++;
    size_t int_end = q;
    if (q < p->len && p->s[q] == '.') {
        integral = 0;
        q++;
        if (q >= p->len || !is_digit(p->s[q])) {
            p->pos = q;
            return jp_fail(p, "invalid number: digit expected after '.'");
        }
        while (q < p->len && is_digit(p->s[q]))
            q++;
    }
    if (q < p->len && (p->s[q] == 'e' || p->s[q] == 'E')) {
        integral = 0;
        q++;
        if (q < p->len && (p->s[q] == '+' || p->s[q] == '-'))
            q++;
        if (q >= p->len || !is_digit(p->s[q])) {
            p->pos = q;
            return jp_fail(p, "invalid number: digit expected in exponent");
        }
        while (q < p->len && is_digit(p->s[q]))
            q++;
    }
    if (integral) {
        /* magnitude up to 2^63 for negatives, 2^63 - 1 otherwise */
        uint64_t lim = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX, x = 0;
        size_t j = start + (size_t)neg;
        for (; j < int_end; j++) {
            unsigned d = (unsigned)(p->s[j] - '0');
            if (x > (lim - d) / 10)
                break;
            x = x * 10 + d;
        }
        if (j == int_end) {
            v->type = CDP_JSON_INT;
            v->i = neg ? (x == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)x) : (int64_t)x;
            v->d = (double)v->i;
            p->pos = q;
            return 0;
        }
        /* too large for int64: a double */
    }
    /* strtod follows the locale's decimal point: translate '.' to it. */
    const char *dp = localeconv()->decimal_point;
    size_t dpl = dp && *dp ? strlen(dp) : 1;
    char *tmp = malloc((q - start) + dpl + 1);
    if (!tmp)
        return jp_fail(p, "out of memory");
    size_t n = 0;
    for (size_t j = start; j < q; j++) {
        if (p->s[j] == '.' && dp && *dp) {
            memcpy(tmp + n, dp, dpl);
            n += dpl;
        } else
            tmp[n++] = p->s[j];
    }
    tmp[n] = '\0';
    errno = 0;
    double d = strtod(tmp, NULL);
    free(tmp);
    if (isinf(d))
        return jp_fail(p, "number out of range");
    v->type = CDP_JSON_DOUBLE;
    v->d = d;
    p->pos = q;
    return 0;
}

static int jp_value(jp *p, cdp_json *v);

static int jp_append(jp *p, cdp_json *parent, size_t *cap, cdp_json *item)
{
    if (parent->n == *cap) {
        size_t nc = *cap ? *cap * 2 : 4;
        cdp_json *c = realloc(parent->child, nc * sizeof *c);
        if (!c) {
            json_clear(item);
            return jp_fail(p, "out of memory");
        }
        parent->child = c;
        *cap = nc;
    }
    parent->child[parent->n++] = *item;
    return 0;
}

/* At '[' or '{'. */
static int jp_container(jp *p, cdp_json *v)
{
    int obj = p->s[p->pos] == '{';
    char close = obj ? '}' : ']';
    size_t cap = 0;
    char sh[8];
    v->type = obj ? CDP_JSON_OBJECT : CDP_JSON_ARRAY;
    if (++p->depth > p->max_depth)
        return jp_fail(p, "nesting deeper than %d", p->max_depth);
    p->pos++;
    jp_ws(p);
    if (p->pos < p->len && p->s[p->pos] == close) {
        p->pos++;
        p->depth--;
        return 0;
    }
    for (;;) {
        cdp_json item;
        memset(&item, 0, sizeof item);
        char *key = NULL;
        if (obj) {
            size_t klen;
            jp_ws(p);
            if (p->pos >= p->len)
                return jp_fail(p, "unexpected end of input, expected a string key");
            if (p->s[p->pos] != '"')
                return jp_fail(p, "expected a string key, found %s", jp_show(p, sh));
            if (jp_string(p, &key, &klen))
                return -1;
            jp_ws(p);
            if (p->pos >= p->len || p->s[p->pos] != ':') {
                free(key);
                return jp_fail(p, "expected ':' after object key");
            }
            p->pos++;
        }
        if (jp_value(p, &item)) {
            free(key);
            json_clear(&item);
            return -1;
        }
        item.key = key;
        if (jp_append(p, v, &cap, &item))
            return -1;
        jp_ws(p);
        if (p->pos >= p->len)
            return jp_fail(p, "unexpected end of input in %s", obj ? "object" : "array");
        if (p->s[p->pos] == close)
            break;
        if (p->s[p->pos] != ',')
            return jp_fail(p, "expected ',' or '%c', found %s", close, jp_show(p, sh));
        p->pos++;
    }
    p->pos++;
    p->depth--;
    return 0;
}

static int jp_literal(jp *p, const char *word)
{
    size_t k = strlen(word);
    if (p->len - p->pos < k || memcmp(p->s + p->pos, word, k) != 0)
        return jp_fail(p, "invalid literal");
    p->pos += k;
    return 0;
}

static int jp_value(jp *p, cdp_json *v)
{
    char sh[8];
    jp_ws(p);
    if (p->pos >= p->len)
        return jp_fail(p, "unexpected end of input, expected a value");
    if (++p->nvals > p->max_values)
        return jp_fail(p, "more than %zu values", p->max_values);
    char c = p->s[p->pos];
    switch (c) {
    case '{':
    case '[':
        return jp_container(p, v);
    case '"':
        v->type = CDP_JSON_STRING;
        return jp_string(p, &v->str, &v->len);
    case 't':
        v->type = CDP_JSON_BOOL;
        v->boolean = 1;
        return jp_literal(p, "true");
    case 'f':
        v->type = CDP_JSON_BOOL;
        return jp_literal(p, "false");
    case 'n':
        v->type = CDP_JSON_NULL;
        return jp_literal(p, "null");
    default:
        if (c == '-' || is_digit(c))
            return jp_number(p, v);
        return jp_fail(p, "unexpected character %s", jp_show(p, sh));
    }
}

cdp_json *cdp_json_parse(const char *text, size_t len, const cdp_json_limits *lim,
                         char *err, size_t errlen)
{
    jp p;
    memset(&p, 0, sizeof p);
    p.s = text;
    p.len = len;
    p.err = err;
    p.errlen = errlen;
    p.max_depth = lim && lim->max_depth > 0 ? lim->max_depth : JSON_DEFAULT_DEPTH;
    if (p.max_depth > JSON_HARD_DEPTH)
        p.max_depth = JSON_HARD_DEPTH;
    p.max_values = lim && lim->max_values ? lim->max_values : JSON_DEFAULT_VALUES;
    size_t max_bytes = lim && lim->max_bytes ? lim->max_bytes : JSON_DEFAULT_BYTES;
    if (!text && len) {
        jp_fail(&p, "no input");
        return NULL;
    }
    if (len > max_bytes) {
        jp_fail(&p, "input of %zu bytes exceeds the limit of %zu", len, max_bytes);
        return NULL;
    }
    cdp_json *root = calloc(1, sizeof *root);
    if (!root) {
        jp_fail(&p, "out of memory");
        return NULL;
    }
    if (jp_value(&p, root) == 0) {
        jp_ws(&p);
        if (p.pos == p.len)
            return root;
        char sh[8];
        jp_fail(&p, "trailing characters after the JSON value, starting with %s",
                jp_show(&p, sh));
    }
    cdp_json_free(root);
    return NULL;
}

void cdp_json_free(cdp_json *v)
{
    if (!v)
        return;
    json_clear(v);
    free(v);
}

const cdp_json *cdp_json_get(const cdp_json *obj, const char *key)
{
    if (!obj || obj->type != CDP_JSON_OBJECT || !key)
        return NULL;
    for (size_t j = 0; j < obj->n; j++)
        if (obj->child[j].key && strcmp(obj->child[j].key, key) == 0)
            return &obj->child[j];
    return NULL;
}

const char *cdp_json_type_name(cdp_json_type t)
{
    switch (t) {
    case CDP_JSON_NULL: return "null";
    case CDP_JSON_BOOL: return "boolean";
    case CDP_JSON_INT: return "integer";
    case CDP_JSON_DOUBLE: return "number";
    case CDP_JSON_STRING: return "string";
    case CDP_JSON_ARRAY: return "array";
    case CDP_JSON_OBJECT: return "object";
    }
    return "?";
}

/* ----------------------------------------------------------------- writer */

typedef struct esc_sink {
    FILE *f;
    char *out;
    size_t outlen, n;
} esc_sink;

static void esc_put(esc_sink *k, const char *b, size_t m)
{
    if (k->f)
        fwrite(b, 1, m, k->f);
    else if (k->out && k->n + 1 < k->outlen) {
        size_t room = k->outlen - 1 - k->n;
        memcpy(k->out + k->n, b, m < room ? m : room);
    }
    k->n += m;
}

static void esc_string(esc_sink *k, const char *s)
{
    if (!s) {
        esc_put(k, "null", 4);
        return;
    }
    const unsigned char *u = (const unsigned char *)s;
    size_t n = strlen(s), j = 0, run = 0;
    esc_put(k, "\"", 1);
    while (j < n) {
        unsigned char c = u[j];
        char buf[8];
        const char *rep = NULL;
        size_t rl = 2, adv = 1;
        if (c == '"') rep = "\\\"";
        else if (c == '\\') rep = "\\\\";
        else if (c == '\n') rep = "\\n";
        else if (c == '\r') rep = "\\r";
        else if (c == '\t') rep = "\\t";
        else if (c == '\b') rep = "\\b";
        else if (c == '\f') rep = "\\f";
        else if (c < 0x20) {
            snprintf(buf, sizeof buf, "\\u%04x", c);
            rep = buf;
            rl = 6;
        } else if (c >= 0x80) {
            adv = utf8_len(u + j, n - j);
            if (!adv) {
                rep = "\\ufffd";
                rl = 6;
                adv = 1;
            }
        }
        if (rep) {
            esc_put(k, s + j - run, run);
            run = 0;
            esc_put(k, rep, rl);
        } else
            run += adv;
        j += adv;
    }
    esc_put(k, s + j - run, run);
    esc_put(k, "\"", 1);
}

void cdp_json_write_string(FILE *f, const char *s)
{
    esc_sink k = {f, NULL, 0, 0};
    esc_string(&k, s);
}

size_t cdp_json_escape(char *out, size_t outlen, const char *s)
{
    esc_sink k = {NULL, out, outlen, 0};
    esc_string(&k, s);
    if (out && outlen)
        out[k.n < outlen ? k.n : outlen - 1] = '\0';
    return k.n;
}

void cdp_json_write_double(FILE *f, double x)
{
    if (!isfinite(x)) {
        fputs("null", f);
        return;
    }
    char buf[64], out[64];
    snprintf(buf, sizeof buf, "%.17g", x);
    /* undo a locale's decimal separator */
    const char *dp = localeconv()->decimal_point;
    size_t dpl = dp && *dp ? strlen(dp) : 0, n = 0;
    for (size_t j = 0; buf[j] && n + 1 < sizeof out;) {
        if (dpl && strncmp(buf + j, dp, dpl) == 0 && !(dpl == 1 && *dp == '.')) {
            out[n++] = '.';
            j += dpl;
        } else
            out[n++] = buf[j++];
    }
    out[n] = '\0';
    fputs(out, f);
}
