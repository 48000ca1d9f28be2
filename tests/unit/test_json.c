/* Unit tests of the JSON module (io/json.h, src/io/json.c): the parser's
 * values, escapes and UTF-8, its refusals with their messages, its depth and
 * size limits, and the writers' escaping, truncation and numbers read back
 * by the parser. */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/json.h"
#include "../lib/check_run.h"

static cdp_json *parse(const char *s)
{
    char err[128];
    return cdp_json_parse(s, strlen(s), NULL, err, sizeof err);
}

static void expect_bad(const char *s, const char *want)
{
    char err[128] = "";
    cdp_json *v = cdp_json_parse(s, strlen(s), NULL, err, sizeof err);
    ck_assert_msg(v == NULL, "accepted %s", s);
    ck_assert_msg(strstr(err, want) != NULL, "%s: err \"%s\" lacks \"%s\"", s, err, want);
}

START_TEST(test_json_parse)
{
    const char *doc = " {\"a\": [1, -2, 3.5, -0.25e2, true, false, null, {\"b\": {}}, []],"
                      " \"s\": \"q\\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\\ud83d\\ude00\xc3\xbc\","
                      " \"big\": 9223372036854775807, \"min\": -9223372036854775808,"
                      " \"huge\": 9223372036854775808, \"e\": 1E3 } \n";
    cdp_json *v = parse(doc);
    ck_assert_ptr_nonnull(v);
    ck_assert_int_eq(v->type, CDP_JSON_OBJECT);
    ck_assert_uint_eq(v->n, 6);
    const cdp_json *a = cdp_json_get(v, "a");
    ck_assert(a && a->type == CDP_JSON_ARRAY && a->n == 9);
    ck_assert(a->child[0].type == CDP_JSON_INT && a->child[0].i == 1);
    ck_assert(a->child[1].type == CDP_JSON_INT && a->child[1].i == -2);
    ck_assert(a->child[2].type == CDP_JSON_DOUBLE && a->child[2].d == 3.5);
    ck_assert(a->child[3].type == CDP_JSON_DOUBLE && a->child[3].d == -25.0);
    ck_assert(a->child[4].type == CDP_JSON_BOOL && a->child[4].boolean == 1);
    ck_assert(a->child[5].type == CDP_JSON_BOOL && a->child[5].boolean == 0);
    ck_assert(a->child[6].type == CDP_JSON_NULL);
    ck_assert(a->child[7].type == CDP_JSON_OBJECT && a->child[7].n == 1);
    const cdp_json *b = cdp_json_get(&a->child[7], "b");
    ck_assert(b && b->type == CDP_JSON_OBJECT && b->n == 0);
    ck_assert(a->child[8].type == CDP_JSON_ARRAY && a->child[8].n == 0);
    const cdp_json *s = cdp_json_get(v, "s");
    ck_assert(s && s->type == CDP_JSON_STRING);
    ck_assert_str_eq(s->str, "q\"\\/\b\f\n\r\t\xc3\xa9\xf0\x9f\x98\x80\xc3\xbc");
    ck_assert_uint_eq(s->len, strlen(s->str));
    ck_assert(cdp_json_get(v, "big")->i == INT64_MAX);
    ck_assert(cdp_json_get(v, "min")->i == INT64_MIN);
    ck_assert(cdp_json_get(v, "huge")->type == CDP_JSON_DOUBLE);
    ck_assert(cdp_json_get(v, "e")->type == CDP_JSON_DOUBLE && cdp_json_get(v, "e")->d == 1000.0);
    ck_assert_ptr_null(cdp_json_get(v, "nope"));
    ck_assert_ptr_null(cdp_json_get(a, "a"));
    cdp_json_free(v);

    v = parse("\"x\"");
    ck_assert(v && v->type == CDP_JSON_STRING);
    cdp_json_free(v);
    v = parse("-0");
    ck_assert(v && v->type == CDP_JSON_INT && v->i == 0);
    cdp_json_free(v);

    expect_bad("{} x", "trailing characters");
    expect_bad("[1,]", "unexpected character ']'");
    expect_bad("{\"a\":1,}", "expected a string key");
    expect_bad("{\"a\" 1}", "expected ':'");
    expect_bad("[1 2]", "expected ','");
    expect_bad("", "unexpected end of input");
    expect_bad("[1,", "unexpected end of input");
    expect_bad("{'a':1}", "expected a string key");
    expect_bad("01", "leading zero");
    expect_bad("1.", "digit expected after '.'");
    expect_bad(".5", "unexpected character");
    expect_bad("+1", "unexpected character");
    expect_bad("1e", "exponent");
    expect_bad("1e999", "out of range");
    expect_bad("NaN", "unexpected character");
    expect_bad("tru", "invalid literal");
    expect_bad("nulls", "trailing characters");
    expect_bad("\"abc", "unterminated string");
    expect_bad("\"a\\x\"", "invalid escape");
    expect_bad("\"\\u12g4\"", "invalid \\u escape");
    expect_bad("\"\\ud800\"", "unpaired high surrogate");
    expect_bad("\"\\udc00\"", "lone low surrogate");
    expect_bad("\"\\u0000\"", "\\u0000");
    expect_bad("\"a\nb\"", "control character");
    expect_bad("\"\xff\"", "invalid UTF-8");
    expect_bad("\"\xc0\xaf\"", "invalid UTF-8");      /* overlong */
    expect_bad("\"\xed\xa0\x80\"", "invalid UTF-8");  /* surrogate */
    expect_bad("[1] /* c */", "trailing characters");

    /* depth and size limits */
    char deep[300];
    memset(deep, '[', 100);
    memset(deep + 100, ']', 100);
    deep[200] = '\0';
    expect_bad(deep, "nesting deeper than 64");
    cdp_json_limits lim = {128, 0, 0};
    char err[128];
    v = cdp_json_parse(deep, strlen(deep), &lim, err, sizeof err);
    ck_assert_msg(v != NULL, "%s", err);
    cdp_json_free(v);
    lim = (cdp_json_limits){0, 10, 0};
    ck_assert_ptr_null(cdp_json_parse("[1,2,3,4,5,6]", 13, &lim, err, sizeof err));
    ck_assert_ptr_nonnull(strstr(err, "exceeds the limit"));
    lim = (cdp_json_limits){0, 0, 5};
    ck_assert_ptr_null(cdp_json_parse("[1,2,3,4,5,6]", 13, &lim, err, sizeof err));
    ck_assert_ptr_nonnull(strstr(err, "more than 5 values"));
    /* embedded NUL: the length counts, not strlen */
    ck_assert_ptr_null(cdp_json_parse("[1]\0", 4, NULL, err, sizeof err));
}
END_TEST

START_TEST(test_json_write)
{
    char buf[256];
    const char *src = "a\"b\\c\n\t\x01\x7f \xc3\xa9 \xf0\x9f\x98\x80";
    size_t n = cdp_json_escape(buf, sizeof buf, src);
    ck_assert_uint_eq(n, strlen(buf));
    ck_assert_str_eq(buf, "\"a\\\"b\\\\c\\n\\t\\u0001\x7f \xc3\xa9 \xf0\x9f\x98\x80\"");
    /* round trip through the parser */
    cdp_json *v = parse(buf);
    ck_assert(v && v->type == CDP_JSON_STRING);
    ck_assert_str_eq(v->str, src);
    cdp_json_free(v);
    /* invalid UTF-8 becomes U+FFFD */
    cdp_json_escape(buf, sizeof buf, "x\xff\xc3y");
    ck_assert_str_eq(buf, "\"x\\ufffd\\ufffdy\"");
    /* truncation like snprintf */
    char small[5];
    n = cdp_json_escape(small, sizeof small, "abcdef");
    ck_assert_uint_eq(n, 8);
    ck_assert_str_eq(small, "\"abc");
    ck_assert_uint_eq(cdp_json_escape(NULL, 0, "ab"), 4);

    /* FILE writers */
    FILE *f = tmpfile();
    ck_assert_ptr_nonnull(f);
    fputc('[', f);
    cdp_json_write_string(f, "t\"ab");
    fputc(',', f);
    cdp_json_write_double(f, 0.1);
    fputc(',', f);
    cdp_json_write_double(f, NAN);
    fputc(',', f);
    cdp_json_write_double(f, -INFINITY);
    fputc(',', f);
    cdp_json_write_string(f, NULL);
    fputc(',', f);
    cdp_json_write_double(f, 1e300);
    fputc(']', f);
    rewind(f);
    size_t got = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[got] = '\0';
    ck_assert_str_eq(buf, "[\"t\\\"ab\",0.10000000000000001,null,null,null,1.0000000000000001e+300]");
    v = parse(buf);
    ck_assert(v && v->n == 6 && v->child[1].d == 0.1 && v->child[5].d == 1e300);
    cdp_json_free(v);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("json");
    TCase *tj = tcase_create("json");
    tcase_add_test(tj, test_json_parse);
    tcase_add_test(tj, test_json_write);
    suite_add_tcase(s, tj);
    int failed = check_run(s);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
