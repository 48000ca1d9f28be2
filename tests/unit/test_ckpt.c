/* Tests of the safetensors weight files (io/safetensors.h), the checkpoints
 * (io/checkpoint.h), the --keep-checkpoints files and the stale temporaries
 * (io/output.h).  The JSON module's tests are in test_json.c. */
#include <check.h>
#include <fcntl.h>
#include <ftw.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "io/json.h"
#include "io/output.h"
#include "../lib/check_run.h"

static char g_dir[64];

/* mlp:5-4-3: W0 [4,5] at 0, b0 [4] at 20, W1 [3,4] at 24, b1 [3] at 36. */
static void make_model(cdp_model *m)
{
    char err[256];
    ck_assert_msg(cdp_model_parse("mlp:5-4-3", 1, m, err, sizeof err) == 0, "%s", err);
    ck_assert_uint_eq(m->nparams, 39);
    ck_assert_uint_eq(m->tensors[1].off, 20);
    ck_assert_uint_eq(m->tensors[2].off, 24);
}

static void fill_params(float *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (float)((int)((i * 37u) % 101u) - 50) / 7.0f;
    /* values whose bits must survive */
    p[3] = -0.0f;
    p[7] = 1e-40f; /* subnormal */
    p[11] = 3.4028235e38f;
    p[13] = -3.4028235e38f;
}

static void path_of(char *buf, size_t n, const char *name)
{
    snprintf(buf, n, "%s/%s", g_dir, name);
}

/* Writes a raw safetensors file: header text (length as given, or its real
 * length when hlen is UINT64_MAX) and data bytes. */
static void write_raw(const char *path, const char *header, uint64_t hlen, const void *data,
                      size_t nd)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    uint64_t n = hlen == UINT64_MAX ? strlen(header) : hlen;
    unsigned char lb[8];
    for (int j = 0; j < 8; j++)
        lb[j] = (unsigned char)(n >> (8 * j));
    ck_assert_uint_eq(fwrite(lb, 1, 8, f), 8);
    if (header)
        ck_assert_uint_eq(fwrite(header, 1, strlen(header), f), strlen(header));
    if (nd)
        ck_assert_uint_eq(fwrite(data, 1, nd, f), nd);
    ck_assert_int_eq(fclose(f), 0);
}

/* Loads path into a model of dims 5-4-3, expects -1 and `want` in err; the
 * destination must not be touched when the header is refused. */
static void expect_refusal(const char *path, const char *want)
{
    cdp_model m;
    make_model(&m);
    float p[64];
    for (int i = 0; i < 64; i++)
        p[i] = 42.0f;
    char err[512] = "";
    int rc = cdp_load_weights(path, &m, p, err, sizeof err);
    ck_assert_msg(rc == -1, "load of %s succeeded, expected \"%s\"", path, want);
    ck_assert_msg(strstr(err, want) != NULL, "err \"%s\" lacks \"%s\"", err, want);
    ck_assert_msg(strncmp(err, path, strlen(path)) == 0 && err[strlen(path)] == ':',
                  "err \"%s\" does not start with the path", err);
    ck_assert_msg(strchr(err, '\n') == NULL, "err has several lines");
    for (int i = 0; i < 64; i++)
        ck_assert(p[i] == 42.0f);
}

/* --------------------------------------------------------------- weights */

START_TEST(test_round_trip)
{
    cdp_model m;
    make_model(&m);
    float p[39], q[39];
    fill_params(p, m.nparams);
    memset(q, 0x5a, sizeof q);
    char path[128], err[256] = "";
    path_of(path, sizeof path, "rt.safetensors");
    ck_assert_msg(cdp_save_weights(path, &m, p, 0, NULL, err, sizeof err) == 0, "%s", err);
    ck_assert_msg(cdp_load_weights(path, &m, q, err, sizeof err) == 0, "%s", err);
    ck_assert(memcmp(p, q, sizeof p) == 0);
    /* overwrite in place, atomically, and no temporary file left behind */
    p[0] = 1.25f;
    ck_assert_msg(cdp_save_weights(path, &m, p, 0, NULL, err, sizeof err) == 0, "%s", err);
    ck_assert_msg(cdp_load_weights(path, &m, q, err, sizeof err) == 0, "%s", err);
    ck_assert(memcmp(p, q, sizeof p) == 0);
    char tmp[512];
    ck_assert_int_eq(cdp_output_tmp_name(path, tmp, sizeof tmp), 0);
    ck_assert_int_ne(access(tmp, F_OK), 0);
    unlink(path);
}
END_TEST

START_TEST(test_metadata)
{
    cdp_model m;
    make_model(&m);
    float p[39];
    fill_params(p, m.nparams);
    const char *meta[] = {"epoch", "3", "note", "a \"quoted\" \\ line\nnext\ttab \xc3\xbc", NULL};
    char path[128], err[256] = "", out[128];
    path_of(path, sizeof path, "meta.safetensors");
    ck_assert_msg(cdp_save_weights(path, &m, p, 0, meta, err, sizeof err) == 0, "%s", err);
    ck_assert_msg(cdp_st_read_meta(path, "epoch", out, sizeof out, err, sizeof err) == 0, "%s", err);
    ck_assert_str_eq(out, "3");
    ck_assert_msg(cdp_st_read_meta(path, "note", out, sizeof out, err, sizeof err) == 0, "%s", err);
    ck_assert_str_eq(out, meta[3]);
    ck_assert_int_eq(cdp_st_read_meta(path, "absent", out, sizeof out, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "absent"));
    ck_assert_int_eq(cdp_st_read_meta(path, "note", out, 4, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "too long"));
    /* weights still load with metadata present */
    float q[39];
    ck_assert_msg(cdp_load_weights(path, &m, q, err, sizeof err) == 0, "%s", err);
    ck_assert(memcmp(p, q, sizeof p) == 0);
    /* a file without metadata */
    ck_assert_msg(cdp_save_weights(path, &m, p, 0, NULL, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(cdp_st_read_meta(path, "epoch", out, sizeof out, err, sizeof err), -1);
    unlink(path);
}
END_TEST

static uint64_t le64(const unsigned char *b)
{
    uint64_t x = 0;
    for (int j = 7; j >= 0; j--)
        x = x << 8 | b[j];
    return x;
}

START_TEST(test_byte_layout)
{
    cdp_model m;
    make_model(&m);
    float p[39];
    fill_params(p, m.nparams);
    char path[128], err[256] = "";
    path_of(path, sizeof path, "layout.safetensors");
    ck_assert_msg(cdp_save_weights(path, &m, p, 0, NULL, err, sizeof err) == 0, "%s", err);

    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    unsigned char buf[4096];
    size_t size = fread(buf, 1, sizeof buf, f);
    fclose(f);
    ck_assert_uint_ge(size, 8);
    uint64_t n = le64(buf);
    ck_assert_uint_eq((8 + n) % 8, 0);
    ck_assert_uint_eq(size, 8 + n + 39 * 4);
    char *hdr = malloc(n + 1);
    memcpy(hdr, buf + 8, n);
    hdr[n] = '\0';
    ck_assert_int_eq(hdr[0], '{');
    ck_assert_ptr_nonnull(strstr(hdr, "\"fc0.weight\""));
    ck_assert_ptr_nonnull(strstr(hdr, "\"F32\""));
    /* layer order fc0.weight, fc0.bias, fc1.weight, fc1.bias */
    char *a = strstr(hdr, "fc0.weight"), *b = strstr(hdr, "fc0.bias"), *c = strstr(hdr, "fc1.weight"),
         *d = strstr(hdr, "fc1.bias");
    ck_assert(a && b && c && d && a < b && b < c && c < d);

    /* the header through the JSON parser */
    char jerr[128];
    cdp_json *root = cdp_json_parse(hdr, n, NULL, jerr, sizeof jerr);
    ck_assert_msg(root != NULL, "%s", jerr);
    const cdp_json *t = cdp_json_get(root, "fc0.bias");
    ck_assert_ptr_nonnull(t);
    const cdp_json *sh = cdp_json_get(t, "shape"), *off = cdp_json_get(t, "data_offsets");
    ck_assert(sh && sh->type == CDP_JSON_ARRAY && sh->n == 1 && sh->child[0].i == 4);
    ck_assert(off && off->n == 2 && off->child[0].i == 80 && off->child[1].i == 96);
    t = cdp_json_get(root, "fc1.weight");
    sh = cdp_json_get(t, "shape");
    ck_assert(sh && sh->n == 2 && sh->child[0].i == 3 && sh->child[1].i == 4);
    cdp_json_free(root);
    free(hdr);

    /* data: little-endian floats in layer order */
    const unsigned char *data = buf + 8 + n;
    for (size_t i = 0; i < 39; i++) {
        uint32_t bits = (uint32_t)data[4 * i] | (uint32_t)data[4 * i + 1] << 8 |
                        (uint32_t)data[4 * i + 2] << 16 | (uint32_t)data[4 * i + 3] << 24;
        float v;
        memcpy(&v, &bits, 4);
        ck_assert_msg(memcmp(&v, &p[i], 4) == 0, "float %zu differs", i);
    }
    float first;
    uint32_t bits0 = (uint32_t)data[0] | (uint32_t)data[1] << 8 | (uint32_t)data[2] << 16 |
                     (uint32_t)data[3] << 24;
    memcpy(&first, &bits0, 4);
    ck_assert(first == p[m.tensors[0].off]);
    unlink(path);
}
END_TEST

START_TEST(test_generic)
{
    float w[6] = {1, 2, 3, 4, 5, 6}, s = 0.5f;
    int64_t steps[3] = {7, -1, INT64_MAX};
    cdp_st_tensor t[3] = {
        {"opt.w", "F32", 2, {2, 3}, w, NULL},
        {"step", "I64", 1, {3}, steps, NULL},
        {"scalar", "F32", 0, {0}, &s, NULL},
    };
    const char *meta[] = {"kind", "checkpoint", NULL};
    char path[128], err[256] = "", out[32];
    path_of(path, sizeof path, "gen.safetensors");
    ck_assert_msg(cdp_st_write(path, t, 3, meta, err, sizeof err) == 0, "%s", err);

    float w2[6] = {0}, s2 = 0;
    int64_t steps2[3] = {0};
    cdp_st_tensor r[3] = {
        {"step", "I64", 1, {3}, NULL, steps2},
        {"opt.w", "F32", 2, {2, 3}, NULL, w2},
        {"scalar", "F32", 0, {0}, NULL, &s2},
    };
    ck_assert_msg(cdp_st_read(path, r, 3, 1, err, sizeof err) == 0, "%s", err);
    ck_assert(memcmp(w, w2, sizeof w) == 0);
    ck_assert(memcmp(steps, steps2, sizeof steps) == 0);
    ck_assert(s2 == 0.5f);
    ck_assert_int_eq(cdp_st_read_meta(path, "kind", out, sizeof out, err, sizeof err), 0);
    ck_assert_str_eq(out, "checkpoint");

    /* subset: fine unless strict */
    memset(steps2, 0, sizeof steps2);
    ck_assert_msg(cdp_st_read(path, r, 1, 0, err, sizeof err) == 0, "%s", err);
    ck_assert(steps2[2] == INT64_MAX);
    ck_assert_int_eq(cdp_st_read(path, r, 1, 1, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "unexpected tensor"));
    /* dtype and shape mismatches */
    cdp_st_tensor bad = {"step", "F32", 1, {3}, NULL, w2};
    ck_assert_int_eq(cdp_st_read(path, &bad, 1, 0, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "step has dtype I64, expected F32"));
    cdp_st_tensor bad2 = {"opt.w", "F32", 2, {3, 2}, NULL, w2};
    ck_assert_int_eq(cdp_st_read(path, &bad2, 1, 0, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "opt.w has shape [2, 3], expected [3, 2]"));

    /* writer refusals */
    cdp_st_tensor dup[2] = {t[0], t[0]};
    ck_assert_int_eq(cdp_st_write(path, dup, 2, NULL, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "duplicate"));
    cdp_st_tensor f16 = {"x", "F16", 1, {2}, w, NULL};
    ck_assert_int_eq(cdp_st_write(path, &f16, 1, NULL, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "F16"));
    char nodir[160];
    snprintf(nodir, sizeof nodir, "%s/no/such/dir/x.safetensors", g_dir);
    ck_assert_int_eq(cdp_st_write(nodir, t, 1, NULL, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "No such file"));
    /* the earlier file is intact */
    ck_assert_msg(cdp_st_read(path, r, 3, 1, err, sizeof err) == 0, "%s", err);
    unlink(path);
}
END_TEST

/* -------------------------------------------------------------- refusals */

static const char *HDR_OK_FMT =
    "{\"fc0.weight\":{\"dtype\":\"%s\",\"shape\":[4,5],\"data_offsets\":[0,%d]},"
    "\"fc0.bias\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[%d,%d]},"
    "\"fc1.weight\":{\"dtype\":\"F32\",\"shape\":[3,4],\"data_offsets\":[%d,%d]},"
    "\"fc1.bias\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[%d,%d]}}";

START_TEST(test_refusals)
{
    char path[128], hdr[1024], err[256];
    unsigned char zeros[1024];
    memset(zeros, 0, sizeof zeros);
    cdp_model m;
    make_model(&m);
    float p[39];
    fill_params(p, m.nparams);

    /* missing file */
    path_of(path, sizeof path, "does-not-exist.safetensors");
    expect_refusal(path, "No such file or directory");

    /* shorter than 8 bytes */
    path_of(path, sizeof path, "short.safetensors");
    FILE *f = fopen(path, "wb");
    fwrite("abc", 1, 3, f);
    fclose(f);
    expect_refusal(path, "too short");

    /* header length larger than the file, and larger than 100 MB */
    path_of(path, sizeof path, "hlen.safetensors");
    write_raw(path, "{}", 1000, NULL, 0);
    expect_refusal(path, "header length 1000 exceeds the file size");
    write_raw(path, "{}", (uint64_t)1 << 40, NULL, 0);
    expect_refusal(path, "exceeds the 100 MB limit");

    /* garbage JSON, non-object JSON, trailing garbage */
    path_of(path, sizeof path, "garbage.safetensors");
    write_raw(path, "{\"fc0.weight\": [1,2,,]}", UINT64_MAX, NULL, 0);
    expect_refusal(path, "malformed JSON header");
    write_raw(path, "\x89PNG\r\n\x1a\n garbage", UINT64_MAX, NULL, 0);
    expect_refusal(path, "malformed JSON header");
    write_raw(path, "[1, 2]", UINT64_MAX, NULL, 0);
    expect_refusal(path, "not an object");
    write_raw(path, "{} {}", UINT64_MAX, NULL, 0);
    expect_refusal(path, "trailing characters");

    /* wrong dtype (sizes consistent for F16) */
    path_of(path, sizeof path, "f16.safetensors");
    snprintf(hdr, sizeof hdr, HDR_OK_FMT, "F16", 40, 40, 56, 56, 104, 104, 116);
    write_raw(path, hdr, UINT64_MAX, zeros, 116);
    expect_refusal(path, "fc0.weight has dtype F16, expected F32");

    /* non-finite weights are written as they are but never loaded */
    {
        float bad[39];
        memcpy(bad, p, sizeof bad);
        bad[11] = INFINITY;
        path_of(path, sizeof path, "inf.safetensors");
        ck_assert_msg(cdp_save_weights(path, &m, bad, 0, NULL, err, sizeof err) == 0, "%s", err);
        expect_refusal(path, "fc0.weight[11] is inf: weights must be finite");
        bad[11] = p[11];
        bad[37] = NAN;
        ck_assert_msg(cdp_save_weights(path, &m, bad, 0, NULL, err, sizeof err) == 0, "%s", err);
        expect_refusal(path, "fc1.bias[1] is nan: weights must be finite");
        unlink(path);
    }

    /* a well-formed hand-made file loads */
    path_of(path, sizeof path, "manual.safetensors");
    snprintf(hdr, sizeof hdr, HDR_OK_FMT, "F32", 80, 80, 96, 96, 144, 144, 156);
    write_raw(path, hdr, UINT64_MAX, p, sizeof p);
    float q[39];
    ck_assert_msg(cdp_load_weights(path, &m, q, err, sizeof err) == 0, "%s", err);
    ck_assert(memcmp(p, q, sizeof p) == 0);

    /* missing tensor, extra tensor, wrong shape */
    cdp_st_tensor t[5] = {
        {"fc0.weight", "F32", 2, {4, 5}, p, NULL},
        {"fc0.bias", "F32", 1, {4}, p + 20, NULL},
        {"fc1.weight", "F32", 2, {3, 4}, p + 24, NULL},
        {"fc1.bias", "F32", 1, {3}, p + 36, NULL},
        {"fc2.weight", "F32", 2, {2, 3}, p, NULL},
    };
    path_of(path, sizeof path, "missing.safetensors");
    ck_assert_msg(cdp_st_write(path, t, 3, NULL, err, sizeof err) == 0, "%s", err);
    expect_refusal(path, "missing tensor fc1.bias");
    path_of(path, sizeof path, "extra.safetensors");
    ck_assert_msg(cdp_st_write(path, t, 5, NULL, err, sizeof err) == 0, "%s", err);
    expect_refusal(path, "unexpected tensor fc2.weight");
    path_of(path, sizeof path, "shape.safetensors");
    t[0].shape[0] = 5;
    t[0].shape[1] = 4;
    ck_assert_msg(cdp_st_write(path, t, 4, NULL, err, sizeof err) == 0, "%s", err);
    expect_refusal(path, "fc0.weight has shape [5, 4], model expects [4, 5]");
    t[0].shape[0] = 4;
    t[0].shape[1] = 5;

    /* truncated data */
    path_of(path, sizeof path, "trunc.safetensors");
    ck_assert_msg(cdp_save_weights(path, &m, p, 0, NULL, err, sizeof err) == 0, "%s", err);
    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_int_eq(truncate(path, st.st_size - 4), 0);
    expect_refusal(path, "truncated data");
    /* truncated inside the header */
    ck_assert_int_eq(truncate(path, 20), 0);
    expect_refusal(path, "header length");

    /* offsets out of range, data_offsets not matching the shape, overlap */
    path_of(path, sizeof path, "offsets.safetensors");
    snprintf(hdr, sizeof hdr, HDR_OK_FMT, "F32", 80, 80, 96, 96, 144, 1000, 1012);
    write_raw(path, hdr, UINT64_MAX, p, sizeof p);
    expect_refusal(path, "data_offsets of fc1.bias [1000, 1012] are out of range");
    snprintf(hdr, sizeof hdr, HDR_OK_FMT, "F32", 80, 80, 96, 96, 144, 144, 160);
    write_raw(path, hdr, UINT64_MAX, p, sizeof p);
    expect_refusal(path, "fc1.bias: data_offsets [144, 160] span 16 bytes");
    snprintf(hdr, sizeof hdr, HDR_OK_FMT, "F32", 80, 76, 92, 96, 144, 144, 156);
    write_raw(path, hdr, UINT64_MAX, p, sizeof p);
    expect_refusal(path, "overlap");
    snprintf(hdr, sizeof hdr, HDR_OK_FMT, "F32", 80, 96, 80, 96, 144, 144, 156);
    write_raw(path, hdr, UINT64_MAX, p, sizeof p);
    expect_refusal(path, "data_offsets must be [begin, end]");
    write_raw(path, "{\"fc0.bias\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[-1,15]}}",
              UINT64_MAX, zeros, 16);
    expect_refusal(path, "data_offsets must be");
    write_raw(path, "{\"fc0.bias\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0]}}",
              UINT64_MAX, zeros, 16);
    expect_refusal(path, "data_offsets must be");

    /* the data must be fully indexed: bytes after the last tensor, or
     * between two tensors, are refused (and never written by cdp) */
    {
        unsigned char more[160];
        memcpy(more, p, sizeof p);
        memset(more + sizeof p, 0xab, sizeof more - sizeof p);
        snprintf(hdr, sizeof hdr, HDR_OK_FMT, "F32", 80, 80, 96, 96, 144, 144, 156);
        write_raw(path, hdr, UINT64_MAX, more, sizeof p + 1);
        expect_refusal(path, "1 byte after the last tensor (fc1.bias ends at 156 of 157 bytes "
                             "of data)");
        write_raw(path, hdr, UINT64_MAX, more, sizeof more);
        expect_refusal(path, "4 bytes after the last tensor");
        expect_refusal(path, "must be fully indexed");
        /* a hole between fc0.bias and fc1.weight */
        snprintf(hdr, sizeof hdr, HDR_OK_FMT, "F32", 80, 80, 96, 100, 148, 148, 160);
        write_raw(path, hdr, UINT64_MAX, more, 160);
        expect_refusal(path, "4 unindexed bytes [96, 100) before fc1.weight");
        /* metadata only, then data nothing indexes */
        write_raw(path, "{\"__metadata__\":{\"a\":\"b\"}}", UINT64_MAX, more, 8);
        expect_refusal(path, "8 bytes of data but no tensors");
        /* cdp's own files end with their last tensor (weights and generic) */
        path_of(path, sizeof path, "indexed.safetensors");
        const char *meta[] = {"k", "v", NULL};
        ck_assert_msg(cdp_save_weights(path, &m, p, 3, meta, err, sizeof err) == 0, "%s", err);
        float q2[39];
        ck_assert_msg(cdp_load_weights(path, &m, q2, err, sizeof err) == 0, "%s", err);
        int64_t one = 1;
        cdp_st_tensor g[2] = {{"empty", "F32", 1, {0}, NULL, NULL}, {"n", "I64", 0, {0}, &one, NULL}};
        ck_assert_msg(cdp_st_write(path, g, 2, meta, err, sizeof err) == 0, "%s", err);
        ck_assert_msg(cdp_st_read(path, g, 2, 1, err, sizeof err) == 0, "%s", err);
        ck_assert_msg(cdp_st_write(path, g, 0, meta, err, sizeof err) == 0, "%s", err);
        ck_assert_msg(cdp_st_read(path, g, 0, 1, err, sizeof err) == 0, "%s", err);
        unlink(path);
        path_of(path, sizeof path, "misc.safetensors");
    }

    /* unknown dtype, bad shape element, bad metadata, duplicate name */
    path_of(path, sizeof path, "misc.safetensors");
    write_raw(path, "{\"fc0.weight\":{\"dtype\":\"Q7\",\"shape\":[4,5],\"data_offsets\":[0,80]}}",
              UINT64_MAX, zeros, 80);
    expect_refusal(path, "unknown dtype \"Q7\"");
    write_raw(path, "{\"fc0.weight\":{\"dtype\":\"F32\",\"shape\":[4,-5],\"data_offsets\":[0,80]}}",
              UINT64_MAX, zeros, 80);
    expect_refusal(path, "shape must hold non-negative integers");
    write_raw(path, "{\"__metadata__\":{\"a\":1}}", UINT64_MAX, NULL, 0);
    expect_refusal(path, "__metadata__ value of a is not a string");
    write_raw(path,
              "{\"fc0.bias\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
              "\"fc0.bias\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[16,32]}}",
              UINT64_MAX, zeros, 32);
    expect_refusal(path, "duplicate tensor fc0.bias");
    /* a name with a newline stays on one line in err */
    write_raw(path, "{\"a\\nb\":3}", UINT64_MAX, NULL, 0);
    expect_refusal(path, "a?b");
}
END_TEST

/* ------------------------------------------------------------ checkpoints */

static size_t file_bytes(const char *path, unsigned char *buf, size_t cap)
{
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    size_t n = fread(buf, 1, cap, f);
    ck_assert(n < cap);
    fclose(f);
    return n;
}

static void file_put(const char *path, const unsigned char *buf, size_t n)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(buf, 1, n, f), n);
    ck_assert_int_eq(fclose(f), 0);
}

/* A checkpoint of mlp:5-4-3 at step 5: cur = p, prev = p/2, momentum = -p. */
static void write_ckpt(const char *path, const cdp_model *m, float *p, float *prev, float *mom)
{
    char err[256] = "";
    fill_params(p, m->nparams);
    for (size_t i = 0; i < m->nparams; i++) {
        prev[i] = p[i] / 2;
        mom[i] = -p[i];
    }
    ck_assert_msg(cdp_checkpoint_write(path, m, 5, 77, NULL, CDP_OPTIM_SGD, p, prev, mom, err, sizeof err) == 0, "%s",
                  err);
}

/* Refused with want in err, on one line starting with the path. */
static void expect_ckpt_refusal(const char *path, const cdp_model *m, const char *want)
{
    float a[39], b[39], c[39];
    int64_t step = -7;
    char err[512] = "";
    int rc = cdp_checkpoint_read(path, m, 77, NULL, CDP_OPTIM_SGD, &step, a, b, c, err, sizeof err);
    ck_assert_msg(rc == -1 || rc == CDP_CKPT_FOREIGN, "checkpoint %s was resumed (step %lld), "
                  "expected \"%s\"", path,
                  (long long)step, want);
    ck_assert_msg(strstr(err, want) != NULL, "err \"%s\" lacks \"%s\"", err, want);
    ck_assert_msg(strncmp(err, path, strlen(path)) == 0, "err \"%s\" does not name the file", err);
    ck_assert_msg(strchr(err, '\n') == NULL, "err has several lines");
}

START_TEST(test_checkpoint_round_trip)
{
    cdp_model m;
    make_model(&m);
    float p[39], prev[39], mom[39], a[39], b[39], c[39];
    char path[128], err[256] = "";
    path_of(path, sizeof path, "ckpt.safetensors");
    write_ckpt(path, &m, p, prev, mom);
    int64_t step = -1;
    ck_assert_msg(cdp_checkpoint_read(path, &m, 77, NULL, CDP_OPTIM_SGD, &step, a, b, c, err, sizeof err) == 0, "%s",
                  err);
    ck_assert_int_eq(step, 5);
    ck_assert(!memcmp(a, p, sizeof p) && !memcmp(b, prev, sizeof p) && !memcmp(c, mom, sizeof p));
    /* other options */
    ck_assert_int_eq(cdp_checkpoint_read(path, &m, 78, NULL, CDP_OPTIM_SGD, &step, a, b, c, err, sizeof err),
                     CDP_CKPT_FOREIGN);
    ck_assert_ptr_nonnull(strstr(err, "other --model"));
    /* another optimizer's: another run's too */
    float d[78];
    ck_assert_int_eq(cdp_checkpoint_read(path, &m, 77, NULL, CDP_OPTIM_ADAMW, &step, a, b, d, err, sizeof err),
                     CDP_CKPT_FOREIGN);
    ck_assert_ptr_nonnull(strstr(err, "written by an --optimizer sgd run"));
    unlink(path);
}
END_TEST

/* One bit flipped anywhere in the data section: refused, whichever tensor
 * (params, params_prev, momentum or step) it lands in. */
START_TEST(test_checkpoint_bit_flips)
{
    cdp_model m;
    make_model(&m);
    float p[39], prev[39], mom[39];
    char path[128], bad[128];
    path_of(path, sizeof path, "flip-src.safetensors");
    path_of(bad, sizeof bad, "flip.safetensors");
    write_ckpt(path, &m, p, prev, mom);
    unsigned char buf[8192], c[8192];
    size_t size = file_bytes(path, buf, sizeof buf);
    const size_t data = 8 + (size_t)le64(buf);
    ck_assert_uint_eq(size - data, 3 * 39 * 4 + 8);
    for (size_t at = data; at < size; at++) {
        memcpy(c, buf, size);
        c[at] ^= (unsigned char)(1u << (at * 5 % 8));
        file_put(bad, c, size);
        expect_ckpt_refusal(bad, &m, "checksum");
    }
    unlink(bad);
    unlink(path);
}
END_TEST

START_TEST(test_crc32c)
{
    /* RFC 3720 B.4 and the usual check value */
    ck_assert_uint_eq(cdp_crc32c(0, "123456789", 9), 0xE3069283u);
    ck_assert_uint_eq(cdp_crc32c(0, "", 0), 0);
    unsigned char z[32], o[32], inc[32];
    memset(z, 0, 32);
    memset(o, 0xff, 32);
    for (int i = 0; i < 32; i++)
        inc[i] = (unsigned char)i;
    ck_assert_uint_eq(cdp_crc32c(0, z, 32), 0x8A9136AAu);
    ck_assert_uint_eq(cdp_crc32c(0, o, 32), 0x62A8AB43u);
    ck_assert_uint_eq(cdp_crc32c(0, inc, 32), 0x46DD794Eu);
    /* chained over every split, and at every alignment */
    unsigned char big[1000];
    for (int i = 0; i < 1000; i++)
        big[i] = (unsigned char)(i * 131 + 7);
    const uint32_t whole = cdp_crc32c(0, big, sizeof big);
    for (size_t cut = 0; cut <= 40; cut++)
        ck_assert_uint_eq(cdp_crc32c(cdp_crc32c(0, big, cut), big + cut, sizeof big - cut), whole);
    /* the tensors' CRC is the data section's */
    float w[6] = {1, 2, 3, 4, 5, 6};
    int64_t st = 42;
    cdp_st_tensor t[3] = {{"w", "F32", 2, {2, 3}, w, NULL},
                          {"e", "F32", 1, {0}, NULL, NULL},
                          {"s", "I64", 1, {1}, &st, NULL}};
    char path[128], err[256] = "";
    path_of(path, sizeof path, "crc.safetensors");
    ck_assert_msg(cdp_st_write(path, t, 3, NULL, err, sizeof err) == 0, "%s", err);
    uint32_t crc = 1;
    ck_assert_msg(cdp_st_data_crc32c(path, &crc, err, sizeof err) == 0, "%s", err);
    ck_assert_uint_eq(crc, cdp_st_tensors_crc32c(t, 3));
    unlink(path);
}
END_TEST

/* A checkpoint rewritten with these tensors (step as given) and metadata:
 * data_crc32c computed from the data when crc is NULL, none when "". */
static void craft_ckpt(const char *path, const cdp_model *m, const float *p, const float *prev,
                       const float *mom, int64_t step, const char *version, const char *meta_step,
                       const char *crc)
{
    const int64_t n = (int64_t)m->nparams;
    cdp_st_tensor t[4] = {{"params", "F32", 1, {n}, p, NULL},
                          {"params_prev", "F32", 1, {n}, prev, NULL},
                          {"momentum", "F32", 1, {n}, mom, NULL},
                          {"step", "I64", 1, {1}, &step, NULL}};
    char c[16], err[256] = "";
    snprintf(c, sizeof c, "%08x", (unsigned)cdp_st_tensors_crc32c(t, 4));
    const char *meta[] = {"cdp_checkpoint", version, "numerics", "000000000000004d", /* 77 */
                          "step", meta_step, "data_crc32c", crc ? crc : c, NULL};
    if (crc && !crc[0])
        meta[6] = NULL; /* no checksum at all */
    ck_assert_msg(cdp_st_write(path, t, 4, meta, err, sizeof err) == 0, "%s", err);
}

START_TEST(test_checkpoint_refusals)
{
    cdp_model m;
    make_model(&m);
    float p[39], prev[39], mom[39], a[39], b[39], c[39];
    char path[128], err[512] = "";
    int64_t step;
    path_of(path, sizeof path, "crafted.safetensors");
    write_ckpt(path, &m, p, prev, mom);
    /* the crafting helper writes what cdp_checkpoint_write writes */
    unsigned char x[8192], y[8192];
    size_t nx = file_bytes(path, x, sizeof x);
    craft_ckpt(path, &m, p, prev, mom, 5, "2", "5", NULL);
    ck_assert_uint_eq(file_bytes(path, y, sizeof y), nx);
    ck_assert(memcmp(x, y, nx) == 0);
    ck_assert_msg(cdp_checkpoint_read(path, &m, 77, NULL, CDP_OPTIM_SGD, &step, a, b, c, err, sizeof err) == 0, "%s",
                  err);

    /* the step tensor and the metadata disagree (checksum right) */
    craft_ckpt(path, &m, p, prev, mom, 6, "2", "5", NULL);
    expect_ckpt_refusal(path, &m, "step tensor says 6, its metadata says step 5");
    craft_ckpt(path, &m, p, prev, mom, 5, "2", "05", NULL);
    expect_ckpt_refusal(path, &m, "no step, or not a number");
    craft_ckpt(path, &m, p, prev, mom, 5, "2", "5x", NULL);
    expect_ckpt_refusal(path, &m, "no step, or not a number");
    /* format versions: 1 (no checksum), unknown ones */
    craft_ckpt(path, &m, p, prev, mom, 5, "1", "5", NULL);
    expect_ckpt_refusal(path, &m, "checkpoint format version 1");
    craft_ckpt(path, &m, p, prev, mom, 5, "3", "5", NULL);
    expect_ckpt_refusal(path, &m, "unknown checkpoint format version \"3\"");
    craft_ckpt(path, &m, p, prev, mom, 5, "", "5", NULL);
    expect_ckpt_refusal(path, &m, "unknown checkpoint format version \"\"");
    /* checksum missing or not the data's */
    craft_ckpt(path, &m, p, prev, mom, 5, "2", "5", "");
    expect_ckpt_refusal(path, &m, "no data_crc32c checksum");
    craft_ckpt(path, &m, p, prev, mom, 5, "2", "5", "0badc0de");
    expect_ckpt_refusal(path, &m, "file says 0badc0de");
    /* a weights file is not a checkpoint */
    ck_assert_msg(cdp_save_weights(path, &m, p, 0, NULL, err, sizeof err) == 0, "%s", err);
    expect_ckpt_refusal(path, &m, "not a cdp checkpoint");
    unlink(path);
}
END_TEST

/* Every truncation of a valid file is refused; corrupted bytes never crash. */
START_TEST(test_garbage_never_crashes)
{
    cdp_model m;
    make_model(&m);
    float p[39], q[39];
    fill_params(p, m.nparams);
    const char *meta[] = {"k", "v", NULL};
    char path[128], bad[128], err[256];
    path_of(path, sizeof path, "fuzz-src.safetensors");
    path_of(bad, sizeof bad, "fuzz.safetensors");
    ck_assert_msg(cdp_save_weights(path, &m, p, 0, meta, err, sizeof err) == 0, "%s", err);
    unsigned char buf[4096];
    FILE *f = fopen(path, "rb");
    size_t size = fread(buf, 1, sizeof buf, f);
    fclose(f);
    for (size_t len = 0; len < size; len++) {
        f = fopen(bad, "wb");
        fwrite(buf, 1, len, f);
        fclose(f);
        err[0] = '\0';
        ck_assert_int_eq(cdp_load_weights(bad, &m, q, err, sizeof err), -1);
        ck_assert(err[0] != '\0' && strchr(err, '\n') == NULL);
    }
    uint64_t s = 12345;
    unsigned char c[4096];
    for (int it = 0; it < 4000; it++) {
        memcpy(c, buf, size);
        int flips = 1 + it % 4;
        for (int k = 0; k < flips; k++) {
            s = s * 6364136223846793005ULL + 1442695040888963407ULL;
            size_t pos = (size_t)(s >> 33) % size;
            c[pos] = (unsigned char)(s >> 13);
        }
        f = fopen(bad, "wb");
        fwrite(c, 1, size, f);
        fclose(f);
        err[0] = '\0';
        int rc = cdp_load_weights(bad, &m, q, err, sizeof err);
        ck_assert(rc == 0 || (rc == -1 && err[0] != '\0' && strchr(err, '\n') == NULL));
        char out[16];
        (void)cdp_st_read_meta(bad, "k", out, sizeof out, err, sizeof err);
    }
    unlink(path);
    unlink(bad);
}
END_TEST

/* --keep-checkpoints: the names, the listing newest first (temporary and
 * other files left out), and the pruning that keeps the newest M of the
 * steps up to the one written, never stem itself nor later steps. */
START_TEST(test_checkpoint_files)
{
    cdp_model m;
    make_model(&m);
    float p[39], prev[39], mom[39];
    char dir[128], stem[160], name[4200], err[512] = "";
    path_of(dir, sizeof dir, "rot");
    ck_assert_int_eq(mkdir(dir, 0700), 0);
    snprintf(stem, sizeof stem, "%s/c.st", dir);
    cdp_checkpoint_name(stem, 1, 128, name, sizeof name);
    ck_assert_str_eq(name, stem);
    cdp_checkpoint_name("c.st", 2, 128, name, sizeof name);
    ck_assert_str_eq(name, "c.st.step-00000128");
    cdp_checkpoint_name("c.st", 3, 1234567890123LL, name, sizeof name);
    ck_assert_str_eq(name, "c.st.step-1234567890123");
    cdp_checkpoint_file *f;
    size_t n;
    ck_assert_int_eq(cdp_checkpoint_list(stem, &f, &n, err, sizeof err), 0);
    ck_assert_uint_eq(n, 0);
    free(f);
    write_ckpt(stem, &m, p, prev, mom);   /* step 5 in its metadata */
    const int64_t steps[] = { 32, 7, 64, 100, 96 };
    for (int j = 0; j < 5; j++) {
        cdp_checkpoint_name(stem, 2, steps[j], name, sizeof name);
        file_put(name, (const unsigned char *)"x", 1);
    }
    const char *others[] = { "c.st.step-00000200.tmp.123", "c.st.step-", "c.st.step-12a",
                             "c.st.tmp.9", "d.st.step-00000300", "c.st.step--1" };
    for (int j = 0; j < 6; j++) {
        snprintf(name, sizeof name, "%s/%s", dir, others[j]);
        file_put(name, (const unsigned char *)"x", 1);
    }
    ck_assert_int_eq(cdp_checkpoint_list(stem, &f, &n, err, sizeof err), 0);
    ck_assert_uint_eq(n, 6);
    const int64_t want[] = { 100, 96, 64, 32, 7, 5 };
    for (size_t j = 0; j < n; j++) {
        ck_assert_int_eq(f[j].step, want[j]);
        ck_assert_int_eq(f[j].numbered, want[j] != 5);
    }
    ck_assert_str_eq(f[5].path, stem);
    cdp_checkpoint_name(stem, 2, 100, name, sizeof name);
    ck_assert_str_eq(f[0].path, name);
    free(f);
    /* written step 64, keep 2: 64 and 32 stay, 7 goes; 96 and 100 (later
     * steps) and stem stay */
    ck_assert_int_eq(cdp_checkpoint_prune(stem, 2, 64, err, sizeof err), 0);
    ck_assert_int_eq(cdp_checkpoint_list(stem, &f, &n, err, sizeof err), 0);
    ck_assert_uint_eq(n, 5);
    const int64_t left[] = { 100, 96, 64, 32, 5 };
    for (size_t j = 0; j < n; j++)
        ck_assert_int_eq(f[j].step, left[j]);
    free(f);
    /* keep 1 is the one-file naming: nothing pruned */
    ck_assert_int_eq(cdp_checkpoint_prune(stem, 1, 100, err, sizeof err), 0);
    ck_assert_int_eq(cdp_checkpoint_list(stem, &f, &n, err, sizeof err), 0);
    ck_assert_uint_eq(n, 5);
    free(f);
    ck_assert_int_eq(cdp_checkpoint_prune(stem, 1 + 1, 100, err, sizeof err), 0);
    ck_assert_int_eq(cdp_checkpoint_list(stem, &f, &n, err, sizeof err), 0);
    ck_assert_uint_eq(n, 3);   /* 100, 96 and stem */
    ck_assert_int_eq(f[0].step, 100);
    ck_assert_int_eq(f[1].step, 96);
    ck_assert_int_eq(f[2].numbered, 0);
    free(f);
    /* a stem in a directory that does not exist: no checkpoints */
    ck_assert_int_eq(cdp_checkpoint_list("/nonexistent-cdp-dir/c.st", &f, &n, err, sizeof err), 0);
    ck_assert_uint_eq(n, 0);
    free(f);
}
END_TEST

/* A PID no process has: a child's, once it has been waited for (reused
 * only after the PID space wraps). */
static long dead_pid(void)
{
    pid_t c = fork();
    ck_assert_int_ge(c, 0);
    if (c == 0)
        _exit(0);
    ck_assert_int_eq(waitpid(c, NULL, 0), c);
    return (long)c;
}

/* The temporary files of dead writers of this host are removed, exactly
 * those: of a live process, of another host, of another stem, and every
 * name that is not exactly STEM[.step-N].tmp.HOST.PID stay. */
START_TEST(test_stale_temporaries)
{
    char dir[128], stem[160], me[256], name[8400], msg[4096], err[256] = "";
    ck_assert_int_eq(cdp_output_host(me, sizeof me), 0);
    path_of(dir, sizeof dir, "stale");
    ck_assert_int_eq(mkdir(dir, 0700), 0);
    snprintf(stem, sizeof stem, "%s/c.st", dir);
    const long dead = dead_pid(), live = (long)getppid();
    char gone[2][512], stay[16][512];
    int ns = 0;
    snprintf(gone[0], sizeof gone[0], "c.st.step-00000064.tmp.%s.%ld", me, dead);
    snprintf(gone[1], sizeof gone[1], "c.st.tmp.%s.%ld", me, dead);
    snprintf(stay[ns++], 512, "c.st.step-00000064.tmp.%s.%ld", me, live);
    snprintf(stay[ns++], 512, "c.st.step-00000064.tmp.%s.%ld", me, (long)getpid());
    snprintf(stay[ns++], 512, "c.st.step-00000064.tmp.other-%s.%ld", me, dead);
    snprintf(stay[ns++], 512, "c.st.tmp.%ld", dead);   /* no host: cdp before hosts */
    snprintf(stay[ns++], 512, "d.st.tmp.%s.%ld", me, dead);
    snprintf(stay[ns++], 512, "xc.st.tmp.%s.%ld", me, dead);
    snprintf(stay[ns++], 512, "c.st.step-12a.tmp.%s.%ld", me, dead);
    snprintf(stay[ns++], 512, "c.st.step-.tmp.%s.%ld", me, dead);
    snprintf(stay[ns++], 512, "c.st.tmp.%s.0%ld", me, dead);
    snprintf(stay[ns++], 512, "c.st.tmp.%s.%ld~", me, dead);
    snprintf(stay[ns++], 512, "c.st.tmp.%s.%ld.x", me, dead);
    snprintf(stay[ns++], 512, "c.st.tmp..%ld", dead);
    snprintf(stay[ns++], 512, "c.st.tmp.%s/x.%ld", me, dead);   /* a directory: not a file */
    for (int j = 0; j < 2; j++) {
        snprintf(name, sizeof name, "%s/%s", dir, gone[j]);
        file_put(name, (const unsigned char *)"xy", 2);
    }
    for (int j = 0; j < ns; j++) {
        snprintf(name, sizeof name, "%s/%s", dir, stay[j]);
        char *sl = strrchr(name, '/');
        if (sl > name + strlen(dir)) {   /* the last one: a directory and a file in it */
            *sl = '\0';
            ck_assert_int_eq(mkdir(name, 0700), 0);
            *sl = '/';
        }
        file_put(name, (const unsigned char *)"xy", 2);
    }
    ck_assert_int_eq(cdp_checkpoint_clean_stale(stem, msg, sizeof msg, err, sizeof err), 2);
    ck_assert_msg(strstr(msg, "removed 2 temporary files of dead processes") && strstr(msg, gone[0]) &&
                  strstr(msg, gone[1]) && !strchr(msg, '\n'), "%s", msg);
    ck_assert_msg(strstr(msg, "left 3 temporary files of live processes or other hosts alone"),
                  "%s", msg);
    for (int j = 0; j < 2; j++) {
        snprintf(name, sizeof name, "%s/%s", dir, gone[j]);
        ck_assert_msg(access(name, F_OK) != 0, "%s was left", gone[j]);
    }
    for (int j = 0; j < ns; j++) {
        snprintf(name, sizeof name, "%s/%s", dir, stay[j]);
        ck_assert_msg(access(name, F_OK) == 0, "%s was removed", stay[j]);
    }
    /* nothing left to remove: nothing removed, the rest still said */
    ck_assert_int_eq(cdp_checkpoint_clean_stale(stem, msg, sizeof msg, err, sizeof err), 0);
    ck_assert_msg(!strncmp(msg, "left 3 ", 7), "%s", msg);
    /* the parse on its own: a host name with dots, and refusals */
    char host[64];
    long pid = 0;
    ck_assert_int_eq(cdp_output_tmp_parse("w.st.tmp.n1.cluster.org.42", "w.st", host, sizeof host,
                                          &pid), 0);
    ck_assert_str_eq(host, "n1.cluster.org");
    ck_assert_int_eq(pid, 42);
    ck_assert_int_eq(cdp_output_tmp_parse("w.st.tmp.h.1234567890", "w.st", host, sizeof host, &pid),
                     -1);
    ck_assert_int_eq(cdp_output_tmp_parse("w.st.tmp.h.-1", "w.st", host, sizeof host, &pid), -1);
    ck_assert_int_eq(cdp_output_tmp_parse("w.st.tmp.h.", "w.st", host, sizeof host, &pid), -1);
}
END_TEST

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(p);
}

int main(void)
{
    snprintf(g_dir, sizeof g_dir, "/tmp/cdp_test_ckpt_XXXXXX");
    if (!mkdtemp(g_dir)) {
        perror("mkdtemp");
        return EXIT_FAILURE;
    }
    Suite *s = suite_create("ckpt");
    TCase *tw = tcase_create("weights");
    tcase_add_test(tw, test_round_trip);
    tcase_add_test(tw, test_metadata);
    tcase_add_test(tw, test_byte_layout);
    tcase_add_test(tw, test_generic);
    tcase_add_test(tw, test_refusals);
    tcase_add_test(tw, test_garbage_never_crashes);
    tcase_add_test(tw, test_checkpoint_round_trip);
    tcase_add_test(tw, test_checkpoint_bit_flips);
    tcase_add_test(tw, test_checkpoint_refusals);
    tcase_add_test(tw, test_checkpoint_files);
    tcase_add_test(tw, test_stale_temporaries);
    tcase_add_test(tw, test_crc32c);
    tcase_set_timeout(tw, 120);
    suite_add_tcase(s, tw);
    int failed = check_run(s);
    nftw(g_dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
