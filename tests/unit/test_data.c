/* Tests of the data module: IDX (gzipped and plain), CIFAR-10 binary,
 * synthetic data, the epoch permutation, cdp_data_load / cdp_data_open
 * (shapes, per-kind directories), the batcher's augmentation, the
 * normalisation, and the data options of the option parser. */
#include "backend/backend.h"
#include "io/batch.h"
#include "io/data.h"
#include "run/options.h"
#include "util/rng.h"

#include <check.h>
#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include "../lib/check_run.h"

static char tmpdir[256];

/* ---------------------------------------------------------------- helpers */

static void tmp_path(char *buf, size_t len, const char *name)
{
    int w = snprintf(buf, len, "%s/%s", tmpdir, name);
    ck_assert(w > 0 && (size_t)w < len);
}

/* The test program is not linked with zlib (only libcdp is), so gzip files
 * are written here by hand: a gzip header, stored deflate blocks, CRC-32 and
 * size.  zlib reads them like any other gzip file. */
static uint32_t crc32_update(uint32_t crc, const unsigned char *p, size_t len)
{
    crc = ~crc;
    for (size_t i = 0; i < len; i++) {
        crc ^= p[i];
        for (int k = 0; k < 8; k++)
            crc = (crc >> 1) ^ (0xedb88320u & (0u - (crc & 1u)));
    }
    return ~crc;
}

static void put_le32(FILE *f, uint32_t v)
{
    for (int k = 0; k < 4; k++)
        ck_assert_int_ne(fputc((int)((v >> (8 * k)) & 0xff), f), EOF);
}

static void write_bytes(const char *path, int gz, const void *buf, size_t len)
{
    FILE *f = fopen(path, "wb");
    ck_assert_msg(f != NULL, "fopen %s", path);
    if (!gz) {
        if (len > 0)
            ck_assert_uint_eq(fwrite(buf, 1, len, f), len);
    } else {
        static const unsigned char hdr[10] = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3};
        const unsigned char *p = buf;
        ck_assert_uint_eq(fwrite(hdr, 1, 10, f), 10);
        size_t off = 0;
        do {
            size_t blk = len - off > 65535 ? 65535 : len - off;
            unsigned char bh[5];
            bh[0] = off + blk == len ? 1 : 0; /* BFINAL, BTYPE = stored */
            bh[1] = (unsigned char)(blk & 0xff);
            bh[2] = (unsigned char)(blk >> 8);
            bh[3] = (unsigned char)(~blk & 0xff);
            bh[4] = (unsigned char)((~blk >> 8) & 0xff);
            ck_assert_uint_eq(fwrite(bh, 1, 5, f), 5);
            if (blk > 0)
                ck_assert_uint_eq(fwrite(p + off, 1, blk, f), blk);
            off += blk;
        } while (off < len);
        put_le32(f, crc32_update(0, p, len));
        put_le32(f, (uint32_t)len);
    }
    ck_assert_int_eq(fclose(f), 0);
}

static unsigned char *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    ck_assert(f != NULL);
    ck_assert_int_eq(fseek(f, 0, SEEK_END), 0);
    long sz = ftell(f);
    ck_assert(sz >= 0);
    rewind(f);
    unsigned char *buf = malloc((size_t)sz + 1);
    ck_assert(buf != NULL);
    ck_assert_uint_eq(fread(buf, 1, (size_t)sz, f), (size_t)sz);
    fclose(f);
    *len = (size_t)sz;
    return buf;
}

static void put_be32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

static uint8_t pix_value(int64_t i, int p) { return (uint8_t)((i * 7 + p * 3 + 1) & 0xff); }

/* An IDX images file with the header (magic, n, rows, cols), then `npix`
 * pixel bytes (pix_value), then `extra` more bytes. */
static void write_images(const char *path, int gz, uint32_t magic, uint32_t n,
                         uint32_t rows, uint32_t cols, size_t npix, size_t extra)
{
    size_t len = 16 + npix + extra;
    unsigned char *buf = malloc(len);
    ck_assert(buf != NULL);
    put_be32(buf, magic);
    put_be32(buf + 4, n);
    put_be32(buf + 8, rows);
    put_be32(buf + 12, cols);
    size_t dim = (size_t)rows * cols;
    for (size_t k = 0; k < npix; k++)
        buf[16 + k] = dim ? pix_value((int64_t)(k / dim), (int)(k % dim)) : 0;
    memset(buf + 16 + npix, 0x5a, extra);
    write_bytes(path, gz, buf, len);
    free(buf);
}

/* An IDX labels file: header (magic, n), `nlab` labels i % 10 (or
 * `bad_label` at index `bad_at` when bad_at >= 0), then `extra` bytes. */
static void write_labels(const char *path, int gz, uint32_t magic, uint32_t n,
                         size_t nlab, size_t extra, long bad_at, int bad_label)
{
    size_t len = 8 + nlab + extra;
    unsigned char *buf = malloc(len);
    ck_assert(buf != NULL);
    put_be32(buf, magic);
    put_be32(buf + 4, n);
    for (size_t k = 0; k < nlab; k++)
        buf[8 + k] = (unsigned char)(k % 10);
    if (bad_at >= 0 && (size_t)bad_at < nlab)
        buf[8 + bad_at] = (unsigned char)bad_label;
    memset(buf + 8 + nlab, 3, extra);
    write_bytes(path, gz, buf, len);
    free(buf);
}

static int dataset_is_zero(const cdp_dataset *d)
{
    return d->n == 0 && d->dim == 0 && d->classes == 0 && d->pixels == NULL &&
           d->labels == NULL;
}

/* Loading must fail, leave the output zeroed, and produce one line naming
 * `path` and containing `word`. */
static void expect_idx_failure(const char *img, const char *lab,
                               const char *path, const char *word)
{
    cdp_dataset d;
    memset(&d, 0x11, sizeof d);
    char err[1024] = "";
    int rc = cdp_load_idx(img, lab, &d, err, sizeof err);
    ck_assert_int_eq(rc, -1);
    ck_assert(dataset_is_zero(&d));
    ck_assert_msg(strstr(err, path) != NULL, "error '%s' does not name %s", err, path);
    ck_assert_msg(strstr(err, word) != NULL, "error '%s' lacks '%s'", err, word);
    ck_assert_msg(strchr(err, '\n') == NULL, "error '%s' is not one line", err);
    cdp_dataset_free(&d);
}

/* Names for loop tests: _i is 0 (plain) or 1 (gzipped). */
static void names(int gz, const char *tag, char *img, char *lab, size_t len)
{
    char a[128], b[128];
    snprintf(a, sizeof a, "%s-images%s", tag, gz ? ".gz" : "");
    snprintf(b, sizeof b, "%s-labels%s", tag, gz ? ".gz" : "");
    tmp_path(img, len, a);
    tmp_path(lab, len, b);
}

/* The "good" IDX pair of idx_good (25 images of 3x4, pix_value, labels
 * i % 10) compressed by gzip -9: exercises real inflate (Huffman blocks). */
static const unsigned char deflated_images[270] = {
    0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x03, 0x63, 0x60,
    0xe0, 0x60, 0x66, 0x60, 0x60, 0x90, 0x04, 0x62, 0x10, 0xcd, 0xc2, 0xc8,
    0xc2, 0xce, 0xc5, 0x2b, 0x20, 0x2c, 0x26, 0x29, 0x23, 0xaf, 0xc4, 0xc1,
    0xcd, 0x27, 0x28, 0x22, 0x2e, 0x25, 0xab, 0xa0, 0xac, 0xa6, 0xc9, 0x2f,
    0x24, 0x2a, 0x21, 0x2d, 0xa7, 0xa8, 0xa2, 0xae, 0xa5, 0x6b, 0x00, 0x96,
    0x54, 0xd5, 0xd0, 0xd6, 0x33, 0x34, 0x31, 0x07, 0x4b, 0xea, 0xe8, 0x1b,
    0x99, 0x5a, 0x58, 0xdb, 0x81, 0x25, 0x8d, 0xcd, 0x2c, 0x6d, 0xec, 0x9d,
    0x5c, 0xc1, 0x92, 0x56, 0xb6, 0x0e, 0xce, 0x6e, 0x9e, 0x3e, 0x60, 0x49,
    0x47, 0x17, 0x77, 0x2f, 0xdf, 0x80, 0x60, 0xb0, 0xa4, 0x87, 0xb7, 0x5f,
    0x60, 0x48, 0x78, 0x14, 0x58, 0xd2, 0x3f, 0x28, 0x34, 0x22, 0x3a, 0x2e,
    0x11, 0x2c, 0x19, 0x16, 0x19, 0x13, 0x9f, 0x94, 0x9a, 0x01, 0x96, 0x8c,
    0x4d, 0x48, 0x4e, 0xcb, 0xcc, 0xc9, 0x07, 0x4b, 0xa6, 0xa4, 0x67, 0xe5,
    0x16, 0x14, 0x97, 0x81, 0x25, 0xb3, 0xf3, 0x0a, 0x4b, 0xca, 0xab, 0x6a,
    0xc1, 0x92, 0x45, 0xa5, 0x15, 0xd5, 0x75, 0x8d, 0x2d, 0x60, 0xc9, 0xca,
    0x9a, 0xfa, 0xa6, 0xd6, 0x8e, 0x6e, 0xb0, 0x64, 0x43, 0x73, 0x5b, 0x67,
    0x4f, 0xff, 0x24, 0xb0, 0x64, 0x7b, 0x57, 0xef, 0x84, 0xc9, 0xd3, 0x66,
    0x82, 0x25, 0xfb, 0x26, 0x4e, 0x99, 0x3e, 0x6b, 0xee, 0x02, 0xb0, 0xe4,
    0xd4, 0x19, 0xb3, 0xe7, 0x2d, 0x5c, 0xb2, 0x1c, 0x2c, 0x39, 0x67, 0xfe,
    0xa2, 0xa5, 0x2b, 0x56, 0xaf, 0x03, 0x4b, 0x2e, 0x5e, 0xb6, 0x72, 0xcd,
    0xfa, 0x4d, 0x5b, 0xc1, 0x92, 0xab, 0xd6, 0x6e, 0xd8, 0xbc, 0x6d, 0xe7,
    0x1e, 0xb0, 0xe4, 0xc6, 0x2d, 0xdb, 0x77, 0xed, 0x3d, 0x70, 0x18, 0x2c,
    0xb9, 0x63, 0xf7, 0xbe, 0x83, 0x47, 0x8e, 0x9f, 0x02, 0x00, 0x13, 0x36,
    0xb4, 0xc3, 0x3c, 0x01, 0x00, 0x00
};
static const unsigned char deflated_labels[40] = {
    0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x03, 0x63, 0x60,
    0xe0, 0x60, 0x64, 0x60, 0x60, 0x90, 0x64, 0x60, 0x64, 0x62, 0x66, 0x61,
    0x65, 0x63, 0xe7, 0xe0, 0x44, 0x63, 0x01, 0x00, 0xa5, 0xb5, 0x1e, 0x24,
    0x21, 0x00, 0x00, 0x00
};

/* ------------------------------------------------------------------- IDX */

START_TEST(idx_good)
{
    int gz = _i;
    char img[512], lab[512];
    names(gz, "good", img, lab, sizeof img);
    write_images(img, gz, 0x803, 25, 3, 4, 25 * 12, 0);
    write_labels(lab, gz, 0x801, 25, 25, 0, -1, 0);

    cdp_dataset d = {0};
    char err[1024] = "";
    ck_assert_msg(cdp_load_idx(img, lab, &d, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(d.n, 25);
    ck_assert_int_eq(d.dim, 12);
    ck_assert_int_eq(d.channels, 1);
    ck_assert_int_eq(d.height, 3);
    ck_assert_int_eq(d.width, 4);
    ck_assert_int_eq(d.classes, 10);
    for (int64_t i = 0; i < d.n; i++) {
        ck_assert_int_eq(d.labels[i], (int)(i % 10));
        for (int p = 0; p < d.dim; p++)
            ck_assert_uint_eq(d.pixels[i * d.dim + p], pix_value(i, p));
    }
    cdp_dataset_free(&d);
    ck_assert(dataset_is_zero(&d));
    cdp_dataset_free(&d); /* twice is fine */
}
END_TEST

START_TEST(idx_deflated)
{
    char img[512], lab[512];
    names(1, "deflated", img, lab, sizeof img);
    write_bytes(img, 0, deflated_images, sizeof deflated_images);
    write_bytes(lab, 0, deflated_labels, sizeof deflated_labels);
    cdp_dataset d = {0};
    char err[1024] = "";
    ck_assert_msg(cdp_load_idx(img, lab, &d, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(d.n, 25);
    ck_assert_int_eq(d.dim, 12);
    for (int64_t i = 0; i < d.n; i++) {
        ck_assert_int_eq(d.labels[i], (int)(i % 10));
        for (int p = 0; p < d.dim; p++)
            ck_assert_uint_eq(d.pixels[i * d.dim + p], pix_value(i, p));
    }
    cdp_dataset_free(&d);

    /* a damaged byte inside the compressed data */
    unsigned char bad[sizeof deflated_images];
    memcpy(bad, deflated_images, sizeof bad);
    bad[sizeof bad / 2] ^= 0x5a;
    write_bytes(img, 0, bad, sizeof bad);
    expect_idx_failure(img, lab, img, "gzip");
    /* cut in the middle */
    write_bytes(img, 0, deflated_images, sizeof deflated_images / 2);
    expect_idx_failure(img, lab, img, "truncated");
}
END_TEST

START_TEST(idx_mixed_gz_plain)
{
    char img[512], lab[512];
    tmp_path(img, sizeof img, "mixed-images.gz");
    tmp_path(lab, sizeof lab, "mixed-labels");
    write_images(img, 1, 0x803, 7, 2, 2, 28, 0);
    write_labels(lab, 0, 0x801, 7, 7, 0, -1, 0);
    cdp_dataset d = {0};
    char err[1024] = "";
    ck_assert_msg(cdp_load_idx(img, lab, &d, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(d.n, 7);
    ck_assert_int_eq(d.dim, 4);
    ck_assert_uint_eq(d.pixels[6 * 4 + 3], pix_value(6, 3));
    ck_assert_int_eq(d.labels[6], 6);
    cdp_dataset_free(&d);
}
END_TEST

START_TEST(idx_bad_magic)
{
    int gz = _i;
    char img[512], lab[512];
    names(gz, "magic", img, lab, sizeof img);
    /* a labels file given as images */
    write_images(img, gz, 0x801, 5, 2, 2, 20, 0);
    write_labels(lab, gz, 0x801, 5, 5, 0, -1, 0);
    expect_idx_failure(img, lab, img, "magic");
    expect_idx_failure(img, lab, img, "0x00000801");
    expect_idx_failure(img, lab, img, "0x00000803");
    /* an images file given as labels */
    write_images(img, gz, 0x803, 5, 2, 2, 20, 0);
    write_labels(lab, gz, 0x803, 5, 5, 0, -1, 0);
    expect_idx_failure(img, lab, lab, "magic");
}
END_TEST

START_TEST(idx_truncated_images)
{
    int gz = _i;
    char img[512], lab[512];
    names(gz, "trunc-img", img, lab, sizeof img);
    write_images(img, gz, 0x803, 5, 2, 2, 19, 0);
    write_labels(lab, gz, 0x801, 5, 5, 0, -1, 0);
    expect_idx_failure(img, lab, img, "truncated");
    expect_idx_failure(img, lab, img, "expected 20 pixel bytes, got 19");
    /* header cut short */
    write_bytes(img, gz, "\0\0\x08\x03\0\0", 6);
    expect_idx_failure(img, lab, img, "truncated");
    /* empty file */
    write_bytes(img, gz, "", 0);
    expect_idx_failure(img, lab, img, "truncated");
}
END_TEST

START_TEST(idx_truncated_labels)
{
    int gz = _i;
    char img[512], lab[512];
    names(gz, "trunc-lab", img, lab, sizeof img);
    write_images(img, gz, 0x803, 5, 2, 2, 20, 0);
    write_labels(lab, gz, 0x801, 5, 4, 0, -1, 0);
    expect_idx_failure(img, lab, lab, "truncated");
    expect_idx_failure(img, lab, lab, "label");
}
END_TEST

START_TEST(idx_count_mismatch)
{
    int gz = _i;
    char img[512], lab[512];
    names(gz, "count", img, lab, sizeof img);
    write_images(img, gz, 0x803, 5, 2, 2, 20, 0);
    write_labels(lab, gz, 0x801, 4, 4, 0, -1, 0);
    expect_idx_failure(img, lab, img, "labels");
    expect_idx_failure(img, lab, lab, "5 images");
    expect_idx_failure(img, lab, lab, "has 4 labels");
}
END_TEST

START_TEST(idx_label_range)
{
    int gz = _i;
    char img[512], lab[512];
    names(gz, "range", img, lab, sizeof img);
    write_images(img, gz, 0x803, 5, 2, 2, 20, 0);
    write_labels(lab, gz, 0x801, 5, 5, 0, 3, 10);
    expect_idx_failure(img, lab, lab, "range");
    expect_idx_failure(img, lab, lab, "label 10");
    write_labels(lab, gz, 0x801, 5, 5, 0, 4, 255);
    expect_idx_failure(img, lab, lab, "range");
}
END_TEST

START_TEST(idx_trailing)
{
    int gz = _i;
    char img[512], lab[512];
    names(gz, "trailing", img, lab, sizeof img);
    write_images(img, gz, 0x803, 5, 2, 2, 20, 1);
    write_labels(lab, gz, 0x801, 5, 5, 0, -1, 0);
    expect_idx_failure(img, lab, img, "trailing");
    write_images(img, gz, 0x803, 5, 2, 2, 20, 0);
    write_labels(lab, gz, 0x801, 5, 5, 100, -1, 0);
    expect_idx_failure(img, lab, lab, "trailing");
}
END_TEST

START_TEST(idx_zero_and_absurd)
{
    int gz = _i;
    char img[512], lab[512];
    names(gz, "zero", img, lab, sizeof img);
    write_labels(lab, gz, 0x801, 5, 5, 0, -1, 0);
    write_images(img, gz, 0x803, 0, 2, 2, 0, 0);
    expect_idx_failure(img, lab, img, "zero");
    write_images(img, gz, 0x803, 5, 0, 2, 0, 0);
    expect_idx_failure(img, lab, img, "zero");
    write_images(img, gz, 0x803, 5, 2, 0, 0, 0);
    expect_idx_failure(img, lab, img, "zero");
    write_images(img, gz, 0x803, 5, 2, 2, 20, 0);
    write_labels(lab, gz, 0x801, 0, 0, 0, -1, 0);
    expect_idx_failure(img, lab, lab, "zero");
    /* 4e9 images of 1000x1000: refused before any allocation */
    write_images(img, gz, 0x803, 4000000000u, 1000, 1000, 0, 0);
    expect_idx_failure(img, lab, img, "absurd");
    write_images(img, gz, 0x803, 1, 65536, 65536, 0, 0);
    expect_idx_failure(img, lab, img, "absurd");
}
END_TEST

/* This process's data size (VmData), in bytes; 0 if unknown. */
static uint64_t vm_data_bytes(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    unsigned long long kb = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmData: %llu kB", &kb) == 1)
            break;
    if (f)
        fclose(f);
    return (uint64_t)kb << 10;
}

/* A header's size is a claim, not an allocation (found by fuzz/fuzz_idx):
 * a 100-byte file that claims 1000 images of 4096x4096 (16 GB, under the
 * 16 GiB limit) is refused as truncated, with at most 1 GiB more data
 * segment than the process has (RLIMIT_DATA), where it used to allocate
 * the 16 GB up front (and, under that limit, failed "out of memory"). */
START_TEST(idx_huge_claim)
{
    int gz = _i;
    char img[512], lab[512];
    names(gz, "huge", img, lab, sizeof img);
    write_images(img, gz, 0x803, 1000, 4096, 4096, 100, 0);
    write_labels(lab, gz, 0x801, 1000, 1000, 0, -1, 0);
    struct rlimit old, lim;
    ck_assert_int_eq(getrlimit(RLIMIT_DATA, &old), 0);
    uint64_t now = vm_data_bytes();
    ck_assert(now > 0);
    lim = old;
    lim.rlim_cur = (rlim_t)(now + ((uint64_t)1 << 30));
    if (old.rlim_cur != RLIM_INFINITY && old.rlim_cur < lim.rlim_cur)
        lim.rlim_cur = old.rlim_cur;
    ck_assert_int_eq(setrlimit(RLIMIT_DATA, &lim), 0);
    expect_idx_failure(img, lab, img, "truncated: expected 16777216000 pixel bytes, got 100");
    ck_assert_int_eq(setrlimit(RLIMIT_DATA, &old), 0);
}
END_TEST

START_TEST(idx_missing_file)
{
    char img[512], lab[512], dir[512];
    names(0, "present", img, lab, sizeof img);
    write_images(img, 0, 0x803, 5, 2, 2, 20, 0);
    write_labels(lab, 0, 0x801, 5, 5, 0, -1, 0);
    char nope[512];
    tmp_path(nope, sizeof nope, "no-such-file.gz");
    expect_idx_failure(nope, lab, nope, "No such file");
    expect_idx_failure(img, nope, nope, "No such file");
    /* a directory is not a data file */
    tmp_path(dir, sizeof dir, "a-directory");
    ck_assert_int_eq(mkdir(dir, 0700), 0);
    expect_idx_failure(dir, lab, dir, "directory");
}
END_TEST

START_TEST(idx_corrupt_gzip)
{
    char img[512], lab[512];
    names(1, "corrupt", img, lab, sizeof img);
    write_images(img, 1, 0x803, 50, 28, 28, 50 * 784, 0);
    write_labels(lab, 1, 0x801, 50, 50, 0, -1, 0);
    size_t len;
    unsigned char *raw = read_all(img, &len);
    ck_assert(len > 40);
    /* keep the 10-byte gzip header, garble the deflate data */
    memset(raw + 10, 0xff, len - 18);
    write_bytes(img, 0, raw, len);
    free(raw);
    expect_idx_failure(img, lab, img, "gzip");
    expect_idx_failure(img, lab, img, "corrupt");

    /* a damaged CRC in the trailer is noticed too */
    write_labels(lab, 1, 0x801, 50, 50, 0, -1, 0);
    raw = read_all(lab, &len);
    raw[len - 8] ^= 0x55;
    write_bytes(lab, 0, raw, len);
    free(raw);
    write_images(img, 1, 0x803, 50, 28, 28, 50 * 784, 0);
    expect_idx_failure(img, lab, lab, "gzip");
}
END_TEST

START_TEST(idx_cut_gzip)
{
    char img[512], lab[512];
    names(1, "cut", img, lab, sizeof img);
    /* pseudo-random pixels so that the compressed file is large */
    uint32_t n = 200, dim = 784;
    size_t len = 16 + (size_t)n * dim;
    unsigned char *buf = malloc(len);
    put_be32(buf, 0x803);
    put_be32(buf + 4, n);
    put_be32(buf + 8, 28);
    put_be32(buf + 12, 28);
    uint32_t x = 12345;
    for (size_t k = 16; k < len; k++) {
        x = x * 1103515245u + 12345u;
        buf[k] = (unsigned char)(x >> 16);
    }
    write_bytes(img, 1, buf, len);
    free(buf);
    write_labels(lab, 1, 0x801, n, n, 0, -1, 0);
    size_t glen;
    unsigned char *raw = read_all(img, &glen);
    write_bytes(img, 0, raw, glen / 2);
    free(raw);
    expect_idx_failure(img, lab, img, "truncated");
}
END_TEST

/* -------------------------------------------------------------- CIFAR-10 */

static void write_cifar(const char *path, int nrec, int first_label,
                        int bad_rec, int bad_label, size_t extra)
{
    size_t len = (size_t)nrec * 3073 + extra;
    unsigned char *buf = malloc(len + 1);
    ck_assert(buf != NULL);
    for (int r = 0; r < nrec; r++) {
        unsigned char *rec = buf + (size_t)r * 3073;
        rec[0] = (unsigned char)((first_label + r) % 10);
        if (r == bad_rec)
            rec[0] = (unsigned char)bad_label;
        for (int p = 0; p < 3072; p++)
            rec[1 + p] = (unsigned char)((first_label + r) * 31 + p);
    }
    memset(buf + (size_t)nrec * 3073, 9, extra);
    write_bytes(path, 0, buf, len);
    free(buf);
}

static void expect_cifar_failure(const char *const *paths, int np,
                                 const char *path, const char *word)
{
    cdp_dataset d;
    memset(&d, 0x22, sizeof d);
    char err[1024] = "";
    ck_assert_int_eq(cdp_load_cifar10(paths, np, &d, err, sizeof err), -1);
    ck_assert(dataset_is_zero(&d));
    ck_assert_msg(strstr(err, path) != NULL, "error '%s' does not name %s", err, path);
    ck_assert_msg(strstr(err, word) != NULL, "error '%s' lacks '%s'", err, word);
}

START_TEST(cifar_good_and_concat)
{
    char a[512], b[512];
    tmp_path(a, sizeof a, "cifar-a.bin");
    tmp_path(b, sizeof b, "cifar-b.bin");
    write_cifar(a, 3, 0, -1, 0, 0);
    write_cifar(b, 2, 3, -1, 0, 0);

    cdp_dataset d = {0};
    char err[1024] = "";
    const char *one[] = {a};
    ck_assert_msg(cdp_load_cifar10(one, 1, &d, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(d.n, 3);
    ck_assert_int_eq(d.dim, 3072);
    ck_assert_int_eq(d.classes, 10);
    ck_assert_int_eq(d.channels, 3);
    ck_assert_int_eq(d.height, 32);
    ck_assert_int_eq(d.width, 32);
    /* a record is 1024 red, 1024 green, then 1024 blue bytes, each plane
     * row-major: already CHW, so byte p of record r is at (c, y, x) =
     * (p / 1024, p % 1024 / 32, p % 32) of image r */
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 3; c++)
            for (int y = 0; y < 32; y += 7)
                for (int x = 0; x < 32; x += 5)
                    ck_assert_uint_eq(d.pixels[(size_t)r * 3072 + ((size_t)c * 32 + y) * 32 + x],
                                      (uint8_t)(r * 31 + c * 1024 + y * 32 + x));
    for (int r = 0; r < 3; r++) {
        ck_assert_int_eq(d.labels[r], r);
        ck_assert_uint_eq(d.pixels[r * 3072 + 100], (uint8_t)(r * 31 + 100));
    }
    cdp_dataset_free(&d);

    const char *two[] = {a, b};
    ck_assert_msg(cdp_load_cifar10(two, 2, &d, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(d.n, 5);
    for (int r = 0; r < 5; r++) {
        ck_assert_int_eq(d.labels[r], r);
        ck_assert_uint_eq(d.pixels[r * 3072 + 3071], (uint8_t)(r * 31 + 3071));
    }
    cdp_dataset_free(&d);
}
END_TEST

START_TEST(cifar_bad)
{
    char a[512], b[512], nope[512];
    tmp_path(a, sizeof a, "cifar-good.bin");
    tmp_path(b, sizeof b, "cifar-bad.bin");
    tmp_path(nope, sizeof nope, "cifar-missing.bin");
    write_cifar(a, 3, 0, -1, 0, 0);
    const char *two[] = {a, b};

    write_cifar(b, 3, 0, -1, 0, 5);
    expect_cifar_failure(two, 2, b, "records");

    write_cifar(b, 3, 0, 1, 10, 0);
    expect_cifar_failure(two, 2, b, "range");
    expect_cifar_failure(two, 2, b, "label 10");

    write_cifar(b, 0, 0, -1, 0, 0);
    expect_cifar_failure(two, 2, b, "empty");

    const char *missing[] = {a, nope};
    expect_cifar_failure(missing, 2, nope, "No such file");

    cdp_dataset d = {0};
    char err[256];
    ck_assert_int_eq(cdp_load_cifar10(two, 0, &d, err, sizeof err), -1);
}
END_TEST

/* ------------------------------------------------------------- synthetic */

START_TEST(synthetic_deterministic)
{
    cdp_dataset a = {0}, b = {0}, c = {0};
    ck_assert_int_eq(cdp_make_synthetic(1000, 784, 42, &a), 0);
    ck_assert_int_eq(cdp_make_synthetic(1000, 784, 42, &b), 0);
    ck_assert_int_eq(cdp_make_synthetic(1000, 784, 43, &c), 0);
    ck_assert_int_eq(a.n, 1000);
    ck_assert_int_eq(a.dim, 784);
    ck_assert_int_eq(a.classes, 10);
    ck_assert(memcmp(a.pixels, b.pixels, 1000 * 784) == 0);
    ck_assert(memcmp(a.labels, b.labels, 1000 * sizeof(int32_t)) == 0);
    ck_assert(memcmp(a.pixels, c.pixels, 1000 * 784) != 0);
    ck_assert(memcmp(a.labels, c.labels, 1000 * sizeof(int32_t)) != 0);
    int count[10] = {0};
    for (int i = 0; i < 1000; i++) {
        ck_assert(a.labels[i] >= 0 && a.labels[i] < 10);
        count[a.labels[i]]++;
    }
    for (int k = 0; k < 10; k++)
        ck_assert_int_gt(count[k], 0);
    /* not all one value: there is noise */
    int distinct = 0;
    for (int p = 1; p < 784; p++)
        distinct += a.pixels[p] != a.pixels[0];
    ck_assert_int_gt(distinct, 100);
    cdp_dataset_free(&a);
    cdp_dataset_free(&b);
    cdp_dataset_free(&c);

    ck_assert_int_eq(cdp_make_synthetic(0, 784, 1, &a), -1);
    ck_assert_int_eq(cdp_make_synthetic(10, 0, 1, &a), -1);
    ck_assert(dataset_is_zero(&a));
}
END_TEST

/* Nearest class mean (computed on train) classifies test well: the set is
 * learnable and train/test share their classes. */
START_TEST(synthetic_load_learnable)
{
    cdp_data d;
    memset(&d, 0, sizeof d);
    char err[256] = "";
    ck_assert_msg(cdp_data_load("synthetic", NULL, 7, &d, err, sizeof err) == 0, "%s", err);
    ck_assert_str_eq(d.name, "synthetic");
    ck_assert_int_eq(d.train.n, 8192);
    ck_assert_int_eq(d.test.n, 2048);
    ck_assert_int_eq(d.train.dim, 784);
    ck_assert_int_eq(d.test.dim, 784);
    ck_assert_int_eq(d.train.classes, 10);
    ck_assert(d.train.channels == 1 && d.train.height == 28 && d.train.width == 28);
    ck_assert(d.test.channels == 1 && d.test.height == 28 && d.test.width == 28);
    ck_assert(d.train.norm == NULL && d.test.norm == NULL);
    ck_assert(!cdp_augment_active(&d.train.augment));
    ck_assert(memcmp(d.train.pixels, d.test.pixels, 2048 * 784) != 0);

    int dim = 784;
    double *mean = calloc(10 * (size_t)dim, sizeof *mean);
    int cnt[10] = {0};
    for (int64_t i = 0; i < d.train.n; i++) {
        int c = d.train.labels[i];
        cnt[c]++;
        for (int p = 0; p < dim; p++)
            mean[c * dim + p] += d.train.pixels[i * dim + p];
    }
    for (int c = 0; c < 10; c++) {
        ck_assert_int_gt(cnt[c], 0);
        for (int p = 0; p < dim; p++)
            mean[c * dim + p] /= cnt[c];
    }
    int correct = 0, tcnt[10] = {0};
    for (int64_t i = 0; i < d.test.n; i++) {
        int best = -1;
        double bestd = 0;
        tcnt[d.test.labels[i]]++;
        for (int c = 0; c < 10; c++) {
            double s = 0;
            for (int p = 0; p < dim; p++) {
                double e = d.test.pixels[i * dim + p] - mean[c * dim + p];
                s += e * e;
            }
            if (best < 0 || s < bestd) {
                best = c;
                bestd = s;
            }
        }
        correct += best == d.test.labels[i];
    }
    for (int c = 0; c < 10; c++)
        ck_assert_int_gt(tcnt[c], 0);
    ck_assert_msg(correct > 0.9 * d.test.n, "nearest mean: %d / %lld", correct,
                  (long long)d.test.n);
    free(mean);

    /* same seed, same data */
    cdp_data e;
    ck_assert_int_eq(cdp_data_load("synthetic", "/ignored", 7, &e, err, sizeof err), 0);
    ck_assert(memcmp(d.train.pixels, e.train.pixels, 8192 * 784) == 0);
    ck_assert(memcmp(d.test.labels, e.test.labels, 2048 * sizeof(int32_t)) == 0);
    cdp_data_free(&e);
    cdp_data_free(&d);
    cdp_data_free(&d);
}
END_TEST

/* ----------------------------------------------------------- permutation */

static int is_permutation(const int64_t *p, int64_t n)
{
    char *seen = calloc((size_t)n, 1);
    int ok = 1;
    for (int64_t i = 0; i < n && ok; i++) {
        if (p[i] < 0 || p[i] >= n || seen[p[i]])
            ok = 0;
        else
            seen[p[i]] = 1;
    }
    free(seen);
    return ok;
}

START_TEST(permutation)
{
    enum { N = 1000 };
    static int64_t a[N], b[N], c[N], s[N];
    cdp_epoch_permutation(N, 5, 0, 1, a);
    cdp_epoch_permutation(N, 5, 0, 1, b);
    cdp_epoch_permutation(N, 5, 1, 1, c);
    cdp_epoch_permutation(N, 6, 0, 1, s);
    ck_assert(is_permutation(a, N));
    ck_assert(is_permutation(c, N));
    ck_assert(is_permutation(s, N));
    ck_assert(memcmp(a, b, sizeof a) == 0);
    ck_assert(memcmp(a, c, sizeof a) != 0);
    ck_assert(memcmp(a, s, sizeof a) != 0);
    int fixed = 0;
    for (int i = 0; i < N; i++)
        fixed += a[i] == i;
    ck_assert_int_lt(fixed, 20);
    cdp_epoch_permutation(N, 5, 3, 0, a);
    for (int i = 0; i < N; i++)
        ck_assert_int_eq(a[i], i);
    int64_t one = 77;
    cdp_epoch_permutation(1, 5, 0, 1, &one);
    ck_assert_int_eq(one, 0);
    cdp_epoch_permutation(0, 5, 0, 1, NULL);
}
END_TEST

/* ------------------------------------------------------------ high level */

START_TEST(load_fashion_dir)
{
    int gz = _i;
    char dir[512], p[1024];
    tmp_path(dir, sizeof dir, gz ? "fm-gz" : "fm-plain");
    ck_assert_int_eq(mkdir(dir, 0700), 0);
    const char *sfx = gz ? ".gz" : "";
    snprintf(p, sizeof p, "%s/train-images-idx3-ubyte%s", dir, sfx);
    write_images(p, gz, 0x803, 30, 28, 28, 30 * 784, 0);
    snprintf(p, sizeof p, "%s/train-labels-idx1-ubyte%s", dir, sfx);
    write_labels(p, gz, 0x801, 30, 30, 0, -1, 0);
    snprintf(p, sizeof p, "%s/t10k-images-idx3-ubyte%s", dir, sfx);
    write_images(p, gz, 0x803, 12, 28, 28, 12 * 784, 0);
    snprintf(p, sizeof p, "%s/t10k-labels-idx1-ubyte%s", dir, sfx);
    write_labels(p, gz, 0x801, 12, 12, 0, -1, 0);

    cdp_data d;
    char err[1024] = "";
    ck_assert_msg(cdp_data_load("fashion-mnist", dir, 1, &d, err, sizeof err) == 0, "%s", err);
    ck_assert_str_eq(d.name, "fashion-mnist");
    ck_assert_int_eq(d.train.n, 30);
    ck_assert_int_eq(d.test.n, 12);
    ck_assert_int_eq(d.train.dim, 784);
    ck_assert(d.train.channels == 1 && d.train.height == 28 && d.train.width == 28);
    ck_assert(d.test.channels == 1 && d.test.height == 28 && d.test.width == 28);
    ck_assert_uint_eq(d.test.pixels[11 * 784 + 5], pix_value(11, 5));
    cdp_data_free(&d);

    ck_assert_msg(cdp_data_load("mnist", dir, 1, &d, err, sizeof err) == 0, "%s", err);
    ck_assert_str_eq(d.name, "mnist");
    cdp_data_free(&d);

    /* a bad file inside the directory is named in the error */
    snprintf(p, sizeof p, "%s/t10k-labels-idx1-ubyte%s", dir, sfx);
    write_labels(p, gz, 0x801, 11, 11, 0, -1, 0);
    memset(&d, 0x33, sizeof d);
    ck_assert_int_eq(cdp_data_load("fashion-mnist", dir, 1, &d, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "t10k-labels-idx1-ubyte") != NULL, "%s", err);
    ck_assert(dataset_is_zero(&d.train) && dataset_is_zero(&d.test));

    /* a missing file */
    ck_assert_int_eq(unlink(p), 0);
    ck_assert_int_eq(cdp_data_load("fashion-mnist", dir, 1, &d, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "t10k-labels-idx1-ubyte") != NULL, "%s", err);
    ck_assert_msg(strstr(err, "No such file") != NULL, "%s", err);
}
END_TEST

START_TEST(load_errors)
{
    cdp_data d;
    char err[1024] = "";
    char nodir[512];
    tmp_path(nodir, sizeof nodir, "no-such-dir");
    ck_assert_int_eq(cdp_data_load("fashion-mnist", nodir, 1, &d, err, sizeof err), -1);
    ck_assert_msg(strstr(err, nodir) != NULL, "%s", err);
    ck_assert_msg(strstr(err, "dataset-fashion-mnist") != NULL, "%s", err);
    ck_assert_msg(strstr(err, "/usr/share/datasets/fashion-mnist") != NULL, "%s", err);

    ck_assert_int_eq(cdp_data_load("cifar10", nodir, 1, &d, err, sizeof err), -1);
    ck_assert_msg(strstr(err, nodir) != NULL, "%s", err);

    ck_assert_int_eq(cdp_data_load("imagenet", tmpdir, 1, &d, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "imagenet") != NULL, "%s", err);
    ck_assert_msg(strstr(err, "unknown") != NULL, "%s", err);

    /* a tiny error buffer is respected */
    char small[8];
    memset(small, 'x', sizeof small);
    ck_assert_int_eq(cdp_data_load("imagenet", tmpdir, 1, &d, small, sizeof small), -1);
    ck_assert_int_eq(small[7], '\0');
    ck_assert_int_eq(cdp_data_load("imagenet", tmpdir, 1, &d, NULL, 0), -1);

    cdp_data z;
    memset(&z, 0, sizeof z);
    cdp_data_free(&z);
    cdp_dataset_free(&z.train);
    cdp_data_free(NULL);
    cdp_dataset_free(NULL);
}
END_TEST

START_TEST(load_cifar_dir)
{
    char dir[512], p[1024];
    tmp_path(dir, sizeof dir, "cifar-dir");
    ck_assert_int_eq(mkdir(dir, 0700), 0);
    for (int k = 1; k <= 5; k++) {
        snprintf(p, sizeof p, "%s/data_batch_%d.bin", dir, k);
        write_cifar(p, 2, 2 * (k - 1), -1, 0, 0);
    }
    snprintf(p, sizeof p, "%s/test_batch.bin", dir);
    write_cifar(p, 3, 0, -1, 0, 0);
    cdp_data d;
    char err[1024] = "";
    ck_assert_msg(cdp_data_load("cifar10", dir, 1, &d, err, sizeof err) == 0, "%s", err);
    ck_assert_str_eq(d.name, "cifar10");
    ck_assert_int_eq(d.train.n, 10);
    ck_assert_int_eq(d.test.n, 3);
    ck_assert_int_eq(d.train.dim, 3072);
    ck_assert(d.train.channels == 3 && d.train.height == 32 && d.train.width == 32);
    ck_assert(d.test.channels == 3 && d.test.height == 32 && d.test.width == 32);
    for (int r = 0; r < 10; r++)
        ck_assert_int_eq(d.train.labels[r], r);
    cdp_data_free(&d);

    snprintf(p, sizeof p, "%s/data_batch_4.bin", dir);
    ck_assert_int_eq(unlink(p), 0);
    ck_assert_int_eq(cdp_data_load("cifar10", dir, 1, &d, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "data_batch_4.bin") != NULL, "%s", err);
}
END_TEST

#define REAL_FM "/usr/share/datasets/fashion-mnist"

START_TEST(real_fashion_mnist)
{
    struct stat st;
    if (stat(REAL_FM, &st) != 0) {
        printf("note: %s not present (Debian package dataset-fashion-mnist); "
               "skipping the real-data check\n", REAL_FM);
        return;
    }
    cdp_data d;
    char err[1024] = "";
    ck_assert_msg(cdp_data_load("fashion-mnist", REAL_FM, 1, &d, err, sizeof err) == 0,
                  "%s", err);
    ck_assert_int_eq(d.train.n, 60000);
    ck_assert_int_eq(d.test.n, 10000);
    ck_assert_int_eq(d.train.dim, 784);
    ck_assert_int_eq(d.test.dim, 784);
    ck_assert_int_eq(d.train.classes, 10);
    int ctr[10] = {0}, cte[10] = {0};
    for (int64_t i = 0; i < d.train.n; i++)
        ctr[d.train.labels[i]]++;
    for (int64_t i = 0; i < d.test.n; i++)
        cte[d.test.labels[i]]++;
    for (int c = 0; c < 10; c++) {
        ck_assert_int_eq(ctr[c], 6000);
        ck_assert_int_eq(cte[c], 1000);
    }
    cdp_data_free(&d);
}
END_TEST

/* --------------------------------------------------- file types (IDX) */

/* A FIFO, a directory or a symbolic-link loop in place of a data file is
 * reported for what it is, at once (the tcase has a short timeout: a FIFO
 * opened for a blocking read would hang the test). */
START_TEST(idx_not_regular)
{
    char img[512], lab[512], fifo[512], dir[512], la[512], lb[512];
    names(0, "nr", img, lab, sizeof img);
    write_images(img, 0, 0x803, 5, 2, 2, 20, 0);
    write_labels(lab, 0, 0x801, 5, 5, 0, -1, 0);
    tmp_path(fifo, sizeof fifo, "a-fifo");
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    expect_idx_failure(fifo, lab, fifo, "FIFO");
    expect_idx_failure(img, fifo, fifo, "FIFO");
    tmp_path(dir, sizeof dir, "nr-directory");
    ck_assert_int_eq(mkdir(dir, 0700), 0);
    expect_idx_failure(dir, lab, dir, "directory");
    tmp_path(la, sizeof la, "loop-a");
    tmp_path(lb, sizeof lb, "loop-b");
    ck_assert_int_eq(symlink(lb, la), 0);
    ck_assert_int_eq(symlink(la, lb), 0);
    expect_idx_failure(la, lab, la, "symbolic link loop");
    expect_idx_failure(img, la, la, "symbolic link loop");

    /* CIFAR-10 too */
    const char *one[1] = {fifo};
    cdp_dataset d;
    char err[1024];
    ck_assert_int_eq(cdp_load_cifar10(one, 1, &d, err, sizeof err), -1);
    ck_assert_msg(strstr(err, fifo) && strstr(err, "FIFO"), "%s", err);
    one[0] = la;
    ck_assert_int_eq(cdp_load_cifar10(one, 1, &d, err, sizeof err), -1);
    ck_assert_msg(strstr(err, la) && strstr(err, "symbolic link loop"), "%s", err);

    /* in a data directory: the .gz name holds the odd thing, the plain one
     * is absent; the error names the odd thing, not "No such file" */
    const char *what[3] = {"FIFO", "directory", "symbolic link loop"};
    for (int k = 0; k < 3; k++) {
        char dd[512], p[1024], q[1024];
        snprintf(q, sizeof q, "odd-dir-%d", k);
        tmp_path(dd, sizeof dd, q);
        ck_assert_int_eq(mkdir(dd, 0700), 0);
        snprintf(p, sizeof p, "%s/train-images-idx3-ubyte.gz", dd);
        if (k == 0)
            ck_assert_int_eq(mkfifo(p, 0600), 0);
        else if (k == 1)
            ck_assert_int_eq(mkdir(p, 0700), 0);
        else
            ck_assert_int_eq(symlink(p, p), 0);
        snprintf(q, sizeof q, "%s/train-labels-idx1-ubyte", dd);
        write_labels(q, 0, 0x801, 5, 5, 0, -1, 0);
        cdp_data dt;
        ck_assert_int_eq(cdp_data_load("fashion-mnist", dd, 1, &dt, err, sizeof err), -1);
        ck_assert_msg(strstr(err, p) && strstr(err, what[k]), "%s", err);
        ck_assert_msg(!strstr(err, "No such file"), "%s", err);
    }
}
END_TEST

/* ---------------------------------------------------- per-kind directory */

static void write_idx_dir(const char *dir, uint32_t ntrain, uint32_t ntest)
{
    char p[2048];
    ck_assert_int_eq(mkdir(dir, 0700), 0);
    snprintf(p, sizeof p, "%s/train-images-idx3-ubyte.gz", dir);
    write_images(p, 1, 0x803, ntrain, 28, 28, (size_t)ntrain * 784, 0);
    snprintf(p, sizeof p, "%s/train-labels-idx1-ubyte.gz", dir);
    write_labels(p, 1, 0x801, ntrain, ntrain, 0, -1, 0);
    snprintf(p, sizeof p, "%s/t10k-images-idx3-ubyte.gz", dir);
    write_images(p, 1, 0x803, ntest, 28, 28, (size_t)ntest * 784, 0);
    snprintf(p, sizeof p, "%s/t10k-labels-idx1-ubyte.gz", dir);
    write_labels(p, 1, 0x801, ntest, ntest, 0, -1, 0);
}

START_TEST(default_dirs)
{
    char buf[1024], root[512], want[1024];
    unsetenv("CDP_DATA_DIR");
    ck_assert_int_eq(cdp_data_default_dir("fashion-mnist", buf, sizeof buf), 0);
    ck_assert_str_eq(buf, "/usr/share/datasets/fashion-mnist");
    ck_assert_int_eq(cdp_data_default_dir("mnist", buf, sizeof buf), 0);
    ck_assert_str_eq(buf, "/usr/share/datasets/mnist");
    ck_assert_int_eq(cdp_data_default_dir("cifar10", buf, sizeof buf), 0);
    ck_assert_str_eq(buf, "/usr/share/datasets/cifar10");
    ck_assert_int_eq(cdp_data_default_dir("synthetic", buf, sizeof buf), 0);
    ck_assert_str_eq(buf, "");
    ck_assert_int_eq(cdp_data_default_dir("imagenet", buf, sizeof buf), -1);
    ck_assert_int_eq(cdp_data_default_dir("mnist", buf, 8), -1);

    /* a root with Fashion-MNIST only */
    tmp_path(root, sizeof root, "root");
    ck_assert_int_eq(mkdir(root, 0700), 0);
    snprintf(want, sizeof want, "%s/fashion-mnist", root);
    write_idx_dir(want, 20, 8);
    char slash[600];
    snprintf(slash, sizeof slash, "%s//", root);
    ck_assert_int_eq(setenv("CDP_DATA_DIR", slash, 1), 0);
    ck_assert_int_eq(cdp_data_default_dir("mnist", buf, sizeof buf), 0);
    snprintf(want, sizeof want, "%s/mnist", root);
    ck_assert_str_eq(buf, want);

    cdp_data d;
    char err[2048] = "";
    ck_assert_msg(cdp_data_load("fashion-mnist", NULL, 1, &d, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(d.train.n, 20);
    ck_assert_str_eq(d.name, "fashion-mnist");
    cdp_data_free(&d);
    ck_assert_msg(cdp_data_open("fashion-mnist", "", 1, 0, 0, &d, err, sizeof err) == 0, "%s", err);
    cdp_data_free(&d);

    /* mnist never falls back to the Fashion-MNIST files */
    ck_assert_int_eq(cdp_data_load("mnist", NULL, 1, &d, err, sizeof err), -1);
    snprintf(want, sizeof want, "%s/mnist/train-images-idx3-ubyte", root);
    ck_assert_msg(strstr(err, want) != NULL, "error '%s' does not name %s", err, want);
    ck_assert_msg(strstr(err, "MNIST") && strstr(err, "https://"), "no source in '%s'", err);
    ck_assert_msg(!strstr(err, "fashion"), "'%s' mentions fashion", err);
    ck_assert(strchr(err, '\n') == NULL);
    /* an mnist directory that lacks the test files names the missing one */
    snprintf(want, sizeof want, "%s/mnist", root);
    ck_assert_int_eq(mkdir(want, 0700), 0);
    char p[2048];
    snprintf(p, sizeof p, "%s/train-images-idx3-ubyte", want);
    write_images(p, 0, 0x803, 10, 28, 28, 10 * 784, 0);
    snprintf(p, sizeof p, "%s/train-labels-idx1-ubyte", want);
    write_labels(p, 0, 0x801, 10, 10, 0, -1, 0);
    ck_assert_int_eq(cdp_data_load("mnist", NULL, 1, &d, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "mnist/t10k-images-idx3-ubyte") && strstr(err, "ossci-datasets"),
                  "%s", err);
    ck_assert_msg(!strstr(err, "fashion"), "'%s' mentions fashion", err);

    /* cifar10 looks in its own directory */
    ck_assert_int_eq(cdp_data_load("cifar10", NULL, 1, &d, err, sizeof err), -1);
    snprintf(want, sizeof want, "%s/cifar10/data_batch_1.bin", root);
    ck_assert_msg(strstr(err, want) && strstr(err, "cifar-10-binary.tar.gz"), "%s", err);

    /* the option parser resolves the same directories; --data-dir wins */
    cdp_options o;
    char *a1[] = {"cdp_run", "--data", "mnist", NULL};
    cdp_options_defaults(&o);
    ck_assert_int_eq(cdp_options_parse(&o, 3, a1, err, sizeof err), 0);
    snprintf(want, sizeof want, "%s/mnist", root);
    ck_assert_str_eq(o.data_dir, want);
    unsetenv("CDP_DATA_DIR");
    char *a2[] = {"cdp_run", "--data", "cifar10", NULL};
    cdp_options_defaults(&o);
    ck_assert_int_eq(cdp_options_parse(&o, 3, a2, err, sizeof err), 0);
    ck_assert_str_eq(o.data_dir, "/usr/share/datasets/cifar10");
    char *a3[] = {"cdp_run", NULL};
    cdp_options_defaults(&o);
    ck_assert_int_eq(cdp_options_parse(&o, 1, a3, err, sizeof err), 0);
    ck_assert_str_eq(o.data, "fashion-mnist");
    ck_assert_str_eq(o.data_dir, "/usr/share/datasets/fashion-mnist");
    char *a4[] = {"cdp_run", "--data-dir", "/x/y", "--data", "mnist", NULL};
    cdp_options_defaults(&o);
    ck_assert_int_eq(cdp_options_parse(&o, 5, a4, err, sizeof err), 0);
    ck_assert_str_eq(o.data_dir, "/x/y");
    /* the help shows the per-kind default */
    char *help = NULL;
    size_t hl = 0;
    FILE *hf = open_memstream(&help, &hl);
    ck_assert_ptr_nonnull(hf);
    cdp_options_help(hf);
    fclose(hf);
    ck_assert_msg(strstr(help, "per data set: /usr/share/datasets/KIND") &&
                  strstr(help, "CDP_DATA_DIR") && strstr(help, "--augment") &&
                  strstr(help, "--normalize") && strstr(help, "synthetic[:CxHxW]"), "%s", help);
    free(help);
}
END_TEST

/* ---------------------------------------------------------- folder spec */

START_TEST(folder_spec)
{
    cdp_data_spec s;
    char err[512], num[1200];
    ck_assert_int_eq(cdp_data_spec_parse("folder:/data/imgs/", &s, err, sizeof err), 0);
    ck_assert_str_eq(s.kind, "folder");
    ck_assert_str_eq(s.dir, "/data/imgs");
    /* torchvision's ImageNet recipe by default: 224 from 256, 2 steps ahead */
    ck_assert(s.size == 224 && s.resize == 256 && !s.skip_bad && s.decoders == 0 &&
              s.prefetch == 2);
    ck_assert_int_eq(cdp_data_spec_parse("folder:d:prefetch=0:resize=40:bad=skip:size=32:decoders=3",
                                         &s, err, sizeof err), 0);
    ck_assert(s.size == 32 && s.resize == 40 && s.skip_bad && s.decoders == 3 && s.prefetch == 0);
    ck_assert_int_eq(cdp_data_spec_parse("folder:d:size=13", &s, err, sizeof err), 0);
    ck_assert_int_eq(s.resize, 15);   /* round(13 * 256 / 224) = round(14.86) */
    /* what a resume checks: not DIR, decoders= or prefetch= */
    cdp_data_spec_numerics("folder:/a:size=32:decoders=4:prefetch=1", num, sizeof num);
    ck_assert_str_eq(num, "folder:size=32:resize=37");
    cdp_data_spec_numerics("synthetic:3x8x8", num, sizeof num);
    ck_assert_str_eq(num, "synthetic:3x8x8");

    static const struct { const char *spec, *word; } bad[] = {
        {"folder", "folder is missing"},
        {"folder:", "folder is missing"},
        {"folder::size=3", "folder is missing"},
        {"folder:d:size=0", "size=0"},
        {"folder:d:size=4097", "size=4097"},
        {"folder:d:size=3:size=3", "twice"},
        {"folder:d:resize=3:resize=3", "twice"},
        {"folder:d:size=32:resize=31", "smaller than"},
        {"folder:d:bad=maybe", "bad=error or bad=skip"},
        {"folder:d:bad=skip:bad=skip", "twice"},
        {"folder:d:prefetch=257", "prefetch=257"},
        {"folder:d:decoders=x", "decoders=x"},
        {"folder:d:decoders=1:decoders=2", "twice"},
        {"folder:C:/imgs", "unknown folder field"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        err[0] = '\0';
        ck_assert_msg(cdp_data_spec_parse(bad[k].spec, &s, err, sizeof err) == -1,
                      "'%s' accepted", bad[k].spec);
        ck_assert_msg(strstr(err, bad[k].word) != NULL, "'%s': error '%s' lacks '%s'",
                      bad[k].spec, err, bad[k].word);
    }
}
END_TEST

/* ------------------------------------------------------- synthetic spec */

START_TEST(synthetic_spec)
{
    cdp_data_spec s;
    char err[512];
    ck_assert_int_eq(cdp_data_spec_parse("synthetic", &s, err, sizeof err), 0);
    ck_assert_str_eq(s.kind, "synthetic");
    ck_assert(s.channels == 0 && s.train_n == 0 && s.test_n == 0);
    ck_assert_int_eq(cdp_data_spec_parse("synthetic:3x224x224", &s, err, sizeof err), 0);
    ck_assert(s.channels == 3 && s.height == 224 && s.width == 224 && s.train_n == 0);
    ck_assert_int_eq(cdp_data_spec_parse("synthetic:3x224x224:n=512", &s, err, sizeof err), 0);
    ck_assert(s.channels == 3 && s.train_n == 512 && s.test_n == 0);
    ck_assert_int_eq(cdp_data_spec_parse("synthetic:test=7:n=100:1x5x6", &s, err, sizeof err), 0);
    ck_assert(s.channels == 1 && s.height == 5 && s.width == 6 && s.train_n == 100 &&
              s.test_n == 7);
    ck_assert_int_eq(cdp_data_spec_parse("cifar10", &s, err, sizeof err), 0);
    ck_assert_str_eq(s.kind, "cifar10");
    ck_assert_int_eq(cdp_data_spec_parse("mnist", &s, err, sizeof err), 0);
    ck_assert_str_eq(s.kind, "mnist");

    static const struct { const char *spec, *word; } bad[] = {
        {"synthetic:", "unknown synthetic field"},
        {"synthetic:3x32", "CxHxW"},
        {"synthetic:3x32x32x2", "CxHxW"},
        {"synthetic:0x1x1", "CxHxW"},
        {"synthetic:3x-1x2", "CxHxW"},
        {"synthetic:3x 1x2", "CxHxW"},
        {"synthetic:3xx2", "CxHxW"},
        {"synthetic:3x2x", "CxHxW"},
        {"synthetic:4096x4096x2", "larger than"},
        {"synthetic:3x32x32:3x32x32", "twice"},
        {"synthetic:n=0", "n=0"},
        {"synthetic:n=", "unknown synthetic field"},
        {"synthetic:n=12a", "n=12a"},
        {"synthetic:n=-5", "n=-5"},
        {"synthetic:n=5:n=6", "twice"},
        {"synthetic:test=0", "test=0"},
        {"synthetic:n=99999999999", "n=99999999999"},
        {"synthetic:1024x1024x16:n=2000", "more than"},
        {"synthetic:foo", "unknown synthetic field"},
        {"synthetic3x3x3", "unknown data set"},
        {"mnist:1x28x28", "takes no options"},
        {"imagenet", "unknown data set"},
        {"", "unknown data set"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        err[0] = '\0';
        ck_assert_msg(cdp_data_spec_parse(bad[k].spec, &s, err, sizeof err) == -1,
                      "'%s' accepted", bad[k].spec);
        ck_assert_msg(strstr(err, bad[k].word) != NULL, "'%s': error '%s' lacks '%s'",
                      bad[k].spec, err, bad[k].word);
        ck_assert_msg(strstr(err, bad[k].spec) != NULL || !*bad[k].spec,
                      "'%s': error '%s' does not name it", bad[k].spec, err);
    }

    /* the default counts: max(min(8192, 256 MiB / dim), N*B), test a quarter */
    int64_t tr, te;
    cdp_data_spec none = {0};
    cdp_data_synthetic_counts(&none, 784, 0, &tr, &te);
    ck_assert(tr == 8192 && te == 2048);
    cdp_data_synthetic_counts(&none, 784, 128, &tr, &te);
    ck_assert(tr == 8192 && te == 2048);
    cdp_data_synthetic_counts(&none, 784, 10000, &tr, &te);
    ck_assert(tr == 10000 && te == 2500);
    cdp_data_synthetic_counts(&none, 3 * 224 * 224, 128, &tr, &te);
    ck_assert_int_eq(tr, 1783);            /* 268435456 / 150528 = 1783.3 */
    ck_assert_int_eq(te, 445);
    cdp_data_synthetic_counts(&none, 3 * 224 * 224, 4096, &tr, &te);
    ck_assert(tr == 4096 && te == 1024);
    ck_assert_int_eq(cdp_data_spec_parse("synthetic:3x224x224:n=512", &s, err, sizeof err), 0);
    cdp_data_synthetic_counts(&s, 150528, 4096, &tr, &te);
    ck_assert(tr == 512 && te == 128);     /* given: kept, even below a step */
    ck_assert_int_eq(cdp_data_spec_parse("synthetic:n=3", &s, err, sizeof err), 0);
    cdp_data_synthetic_counts(&s, 784, 0, &tr, &te);
    ck_assert(tr == 3 && te == 1);
    ck_assert_int_eq(cdp_data_spec_parse("synthetic:test=7", &s, err, sizeof err), 0);
    cdp_data_synthetic_counts(&s, 784, 0, &tr, &te);
    ck_assert(tr == 8192 && te == 7);
}
END_TEST

START_TEST(synthetic_open)
{
    cdp_data d;
    char err[512] = "";
    ck_assert_msg(cdp_data_open("synthetic:3x8x8:n=64", NULL, 5, 0, 0, &d, err, sizeof err) == 0,
                  "%s", err);
    ck_assert(d.train.n == 64 && d.test.n == 16);
    ck_assert(d.train.channels == 3 && d.train.height == 8 && d.train.width == 8);
    ck_assert(d.test.channels == 3 && d.test.height == 8 && d.test.width == 8);
    ck_assert(d.train.dim == 192 && d.test.dim == 192);
    cdp_data_free(&d);
    /* a step larger than the default count */
    ck_assert(cdp_data_open("synthetic:2x4x4", NULL, 5, 9000, 0, &d, err, sizeof err) == 0);
    ck_assert(d.train.n == 9000 && d.test.n == 2250 && d.train.dim == 32);
    cdp_data_free(&d);
    /* plain synthetic: the model's input; 784 (or none) is 1x28x28 and the
     * same bytes as always */
    ck_assert(cdp_data_open("synthetic", NULL, 7, 128, 784, &d, err, sizeof err) == 0);
    ck_assert(d.train.n == 8192 && d.test.n == 2048);
    ck_assert(d.train.channels == 1 && d.train.height == 28 && d.train.width == 28);
    cdp_dataset ref;
    ck_assert_int_eq(cdp_make_synthetic(8192, 784, 7, &ref), 0);
    ck_assert(memcmp(ref.pixels, d.train.pixels, 8192 * 784) == 0);
    ck_assert(memcmp(ref.labels, d.train.labels, 8192 * sizeof(int32_t)) == 0);
    cdp_dataset_free(&ref);
    cdp_data_free(&d);
    ck_assert(cdp_data_open("synthetic", NULL, 7, 0, 512, &d, err, sizeof err) == 0);
    ck_assert(d.train.channels == 1 && d.train.height == 1 && d.train.width == 512);
    cdp_data_free(&d);
    ck_assert(cdp_data_open("synthetic", NULL, 7, 0, 100, &d, err, sizeof err) == 0);
    ck_assert(d.train.channels == 1 && d.train.height == 10 && d.train.width == 10);
    cdp_data_free(&d);
    ck_assert_int_eq(cdp_data_open("synthetic:3x", NULL, 7, 0, 0, &d, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "CxHxW"), "%s", err);
}
END_TEST

/* --------------------------------------------------------- augmentation */

/* The documented draws, written out again here (batch.h):
 *   es = cdp_mix64(epoch)
 *   dy = cdp_rand_u64(seed, CROP_Y ^ es, index) % (2P+1), dx likewise
 *   flip = cdp_rand_unit(seed, FLIP ^ es, index) < 0.5f */
static void my_draws(uint64_t seed, int64_t epoch, int64_t index, int P, int flip_on,
                     int *dy, int *dx, int *flip)
{
    const uint64_t es = cdp_mix64((uint64_t)epoch);
    *dy = *dx = *flip = 0;
    if (P > 0) {
        *dy = (int)(cdp_rand_u64(seed, 0x6364702d63726f79ULL ^ es, (uint64_t)index) %
                    (uint64_t)(2 * P + 1));
        *dx = (int)(cdp_rand_u64(seed, 0x6364702d63726f78ULL ^ es, (uint64_t)index) %
                    (uint64_t)(2 * P + 1));
    }
    if (flip_on)
        *flip = cdp_rand_unit(seed, 0x6364702d666c6970ULL ^ es, (uint64_t)index) < 0.5f;
}

/* An independent reference: pad the image with P zeros, take the H x W
 * window at (dy, dx), then mirror each row if flip. */
static void my_augment(const uint8_t *in, int C, int H, int W, int P, int dy, int dx,
                       int flip, uint8_t *out)
{
    const int PH = H + 2 * P, PW = W + 2 * P;
    uint8_t *pad = calloc((size_t)C * PH * PW, 1), *crop = malloc((size_t)C * H * W);
    ck_assert(pad && crop);
    for (int c = 0; c < C; c++)
        for (int y = 0; y < H; y++)
            for (int x = 0; x < W; x++)
                pad[((size_t)c * PH + y + P) * PW + x + P] = in[((size_t)c * H + y) * W + x];
    for (int c = 0; c < C; c++)
        for (int y = 0; y < H; y++)
            for (int x = 0; x < W; x++)
                crop[((size_t)c * H + y) * W + x] = pad[((size_t)c * PH + y + dy) * PW + x + dx];
    for (int c = 0; c < C; c++)
        for (int y = 0; y < H; y++)
            for (int x = 0; x < W; x++)
                out[((size_t)c * H + y) * W + x] =
                    crop[((size_t)c * H + y) * W + (flip ? W - 1 - x : x)];
    free(pad);
    free(crop);
}

/* n copies of the 2 x 3 x 4 image: plane 0 is 1..12 row by row, plane 1
 * is 101..112. */
static void tiny_set(cdp_dataset *d, int n)
{
    memset(d, 0, sizeof *d);
    d->n = n;
    d->channels = 2;
    d->height = 3;
    d->width = 4;
    d->dim = 24;
    d->classes = 10;
    d->pixels = malloc((size_t)n * 24);
    d->labels = malloc((size_t)n * sizeof(int32_t));
    ck_assert(d->pixels && d->labels);
    for (int i = 0; i < n; i++) {
        for (int p = 0; p < 12; p++) {
            d->pixels[(size_t)i * 24 + p] = (uint8_t)(1 + p);
            d->pixels[(size_t)i * 24 + 12 + p] = (uint8_t)(101 + p);
        }
        d->labels[i] = i % 10;
    }
}

/* Crop with P = 1 and flip against hand-written outputs of the tiny image:
 * for each (dy, dx, flip) below, a sample whose documented draws give it
 * is found, gathered by the batcher, and compared. */
START_TEST(augment_hand)
{
    static const struct { int dy, dx, flip; uint8_t out[12]; } cases[] = {
        {0, 0, 0, {0, 0, 0, 0,   0, 1, 2, 3,   0, 5, 6, 7}},
        {1, 1, 0, {1, 2, 3, 4,   5, 6, 7, 8,   9, 10, 11, 12}},
        {2, 1, 1, {8, 7, 6, 5,   12, 11, 10, 9,   0, 0, 0, 0}},
        {0, 2, 1, {0, 0, 0, 0,   0, 4, 3, 2,   0, 8, 7, 6}},
        {2, 2, 0, {6, 7, 8, 0,   10, 11, 12, 0,   0, 0, 0, 0}},
        {1, 0, 1, {3, 2, 1, 0,   7, 6, 5, 0,   11, 10, 9, 0}},
    };
    enum { NS = 400 };
    const uint64_t seed = 11;
    cdp_dataset d;
    tiny_set(&d, NS);
    d.augment.crop_pad = 1;
    d.augment.flip = 1;
    cdp_batcher b;
    ck_assert_int_eq(cdp_batcher_init(&b, &d, 1, NS, seed, 0), 0);  /* identity order */
    uint8_t *px = malloc((size_t)NS * 24);
    int32_t *lab = malloc(NS * sizeof(int32_t));
    cdp_batcher_gather(&b, 0, 0, px, lab);                          /* epoch 0 */
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        int found = -1;
        for (int i = 0; i < NS && found < 0; i++) {
            int dy, dx, fl;
            my_draws(seed, 0, i, 1, 1, &dy, &dx, &fl);
            if (dy == cases[k].dy && dx == cases[k].dx && fl == cases[k].flip)
                found = i;
        }
        ck_assert_msg(found >= 0, "no sample draws (%d, %d, %d)", cases[k].dy, cases[k].dx,
                      cases[k].flip);
        cdp_augment_draw dr = cdp_augment_draws(&d.augment, seed, 0, found);
        ck_assert(dr.dy == cases[k].dy && dr.dx == cases[k].dx && dr.flip == cases[k].flip);
        const uint8_t *got = px + (size_t)found * 24;
        for (int p = 0; p < 12; p++) {
            ck_assert_msg(got[p] == cases[k].out[p], "(%d,%d,%d) sample %d pixel %d: %u, "
                          "want %u", cases[k].dy, cases[k].dx, cases[k].flip, found, p,
                          got[p], cases[k].out[p]);
            uint8_t w1 = cases[k].out[p] ? (uint8_t)(cases[k].out[p] + 100) : 0;
            ck_assert_msg(got[12 + p] == w1, "plane 1 pixel %d: %u, want %u", p, got[12 + p], w1);
        }
        ck_assert_int_eq(lab[found], found % 10);
    }
    /* the offsets cover [0, 2P] and flips are about half */
    int seen[3] = {0, 0, 0}, flips = 0;
    for (int i = 0; i < NS; i++) {
        cdp_augment_draw dr = cdp_augment_draws(&d.augment, seed, 0, i);
        ck_assert(dr.dy >= 0 && dr.dy <= 2 && dr.dx >= 0 && dr.dx <= 2);
        seen[dr.dy]++;
        flips += dr.flip;
    }
    ck_assert(seen[0] > 90 && seen[1] > 90 && seen[2] > 90);
    ck_assert(flips > 150 && flips < 250);

    /* flip only: no shift, each row mirrored; crop only: never mirrored */
    d.augment.crop_pad = 0;
    cdp_batcher_gather(&b, 0, 0, px, NULL);
    int nflip = 0;
    for (int i = 0; i < NS; i++) {
        int dy, dx, fl;
        my_draws(seed, 0, i, 0, 1, &dy, &dx, &fl);
        ck_assert(dy == 0 && dx == 0);
        nflip += fl;
        for (int y = 0; y < 3; y++)
            for (int x = 0; x < 4; x++)
                ck_assert(px[(size_t)i * 24 + y * 4 + x] == 1 + y * 4 + (fl ? 3 - x : x));
    }
    ck_assert(nflip > 0 && nflip < NS);
    d.augment.crop_pad = 1;
    d.augment.flip = 0;
    cdp_batcher_gather(&b, 0, 0, px, NULL);
    for (int i = 0; i < NS; i++) {
        int dy, dx, fl;
        my_draws(seed, 0, i, 1, 0, &dy, &dx, &fl);
        uint8_t want[24];
        my_augment(d.pixels + (size_t)i * 24, 2, 3, 4, 1, dy, dx, 0, want);
        ck_assert(memcmp(px + (size_t)i * 24, want, 24) == 0);
    }
    /* none: the plain bytes */
    memset(&d.augment, 0, sizeof d.augment);
    cdp_batcher_gather(&b, 0, 0, px, NULL);
    ck_assert(memcmp(px, d.pixels, (size_t)NS * 24) == 0);
    cdp_batcher_free(&b);
    free(px);
    free(lab);
    cdp_dataset_free(&d);
}
END_TEST

/* Whatever N, B and worker a sample lands on, the batcher gives it the
 * pixels of (seed, epoch, index): the independent reference's. */
START_TEST(augment_any_position)
{
    cdp_data data;
    char err[256];
    ck_assert(cdp_data_open("synthetic:3x5x6:n=240", NULL, 3, 0, 0, &data, err, sizeof err) == 0);
    cdp_augment aug = {2, 1};
    ck_assert_int_eq(cdp_data_set_transforms(&data, &aug, 0, NULL, NULL, err, sizeof err), 0);
    const cdp_dataset *d = &data.train;
    uint8_t *copy = malloc((size_t)d->n * d->dim);
    memcpy(copy, d->pixels, (size_t)d->n * d->dim);
    static const int NB[][2] = {{1, 8}, {4, 6}, {3, 5}, {2, 120}};
    const uint64_t seed = 99;
    uint8_t px[240 * 90], want[90];
    int64_t changed = 0;
    for (size_t c = 0; c < sizeof NB / sizeof NB[0]; c++) {
        const int N = NB[c][0], B = NB[c][1];
        cdp_batcher b;
        ck_assert_int_eq(cdp_batcher_init(&b, d, N, B, seed, 1), 0);
        for (int64_t k = 0; k < 3 * b.steps_per_epoch; k++) {
            const int64_t epoch = k / b.steps_per_epoch;
            for (int i = 0; i < N; i++) {
                cdp_batcher_gather(&b, k, i, px, NULL);
                const int64_t *idx = cdp_batcher_indices(&b, k, i);
                for (int j = 0; j < B; j++) {
                    int dy, dx, fl;
                    my_draws(seed, epoch, idx[j], 2, 1, &dy, &dx, &fl);
                    my_augment(d->pixels + (size_t)idx[j] * 90, 3, 5, 6, 2, dy, dx, fl, want);
                    ck_assert_msg(memcmp(px + (size_t)j * 90, want, 90) == 0,
                                  "N=%d B=%d step %lld worker %d sample %lld", N, B,
                                  (long long)k, i, (long long)idx[j]);
                    changed += memcmp(want, d->pixels + (size_t)idx[j] * 90, 90) != 0;
                    uint8_t again[90];
                    cdp_augment_sample(d, seed, epoch, idx[j], again);
                    ck_assert(memcmp(again, want, 90) == 0);
                }
            }
        }
        cdp_batcher_free(&b);
    }
    ck_assert(changed > 100);
    /* the data set itself is never modified */
    ck_assert(memcmp(copy, d->pixels, (size_t)d->n * d->dim) == 0);

    /* determinism by (seed, epoch, index): different epochs and seeds differ */
    int diff_epoch = 0, diff_seed = 0;
    for (int64_t i = 0; i < d->n; i++) {
        uint8_t a[90], b2[90], c2[90], a2[90];
        cdp_augment_sample(d, seed, 0, i, a);
        cdp_augment_sample(d, seed, 0, i, a2);
        cdp_augment_sample(d, seed, 1, i, b2);
        cdp_augment_sample(d, seed + 1, 0, i, c2);
        ck_assert(memcmp(a, a2, 90) == 0);
        diff_epoch += memcmp(a, b2, 90) != 0;
        diff_seed += memcmp(a, c2, 90) != 0;
    }
    ck_assert_msg(diff_epoch > d->n / 2 && diff_seed > d->n / 2, "%d %d", diff_epoch, diff_seed);

    /* evaluation sees none of it: the test set has no augmentation */
    ck_assert(!cdp_augment_active(&data.test.augment));
    ck_assert(cdp_augment_active(&data.train.augment));
    cdp_batcher bt;
    ck_assert_int_eq(cdp_batcher_init(&bt, &data.test, 1, 60, seed, 0), 0);
    cdp_batcher_gather(&bt, 0, 0, px, NULL);
    ck_assert(memcmp(px, data.test.pixels, 60 * 90) == 0);
    cdp_batcher_free(&bt);
    free(copy);
    cdp_data_free(&data);
}
END_TEST

/* -------------------------------------------------------- normalisation */

START_TEST(normalize_values)
{
    cdp_data data;
    char err[256];
    ck_assert(cdp_data_open("synthetic:3x4x4:n=40", NULL, 3, 0, 0, &data, err, sizeof err) == 0);
    const float mean[3] = {0.4914f, 0.4822f, 0.4465f}, std[3] = {0.2470f, 0.2435f, 0.2616f};
    /* bad counts and values change nothing */
    ck_assert_int_eq(cdp_data_set_transforms(&data, NULL, 2, mean, std, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "3 channels") != NULL, "%s", err);
    const float zero[3] = {0.5f, 0.0f, 0.5f}, neg[1] = {-1.0f}, nan1[1] = {NAN};
    ck_assert_int_eq(cdp_data_set_transforms(&data, NULL, 3, mean, zero, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "std") != NULL, "%s", err);
    ck_assert_int_eq(cdp_data_set_transforms(&data, NULL, 1, mean, neg, err, sizeof err), -1);
    ck_assert_int_eq(cdp_data_set_transforms(&data, NULL, 1, nan1, std, err, sizeof err), -1);
    ck_assert(data.train.norm == NULL && data.test.norm == NULL);

    ck_assert_int_eq(cdp_data_set_transforms(&data, NULL, 3, mean, std, err, sizeof err), 0);
    for (int k = 0; k < 2; k++) {
        const float *nm = k ? data.test.norm : data.train.norm;
        ck_assert_ptr_nonnull(nm);
        for (int c = 0; c < 3; c++)
            ck_assert(nm[c] == mean[c] && nm[3 + c] == std[c]);
    }
    /* through the CPU kernel, against the formula */
    const cdp_backend *be = cdp_backend_cpu(1);
    float x[40 * 48];
    be->pixels_to_input(40, 3, 16, data.train.pixels, data.train.norm, x);
    for (int i = 0; i < 40 * 48; i++) {
        int c = (i / 16) % 3;
        float v = (float)data.train.pixels[i] / 255.0f;
        ck_assert(x[i] == (v - mean[c]) / std[c]);
    }
    /* one value for every channel */
    const float m1 = 0.5f, s1 = 0.25f;
    ck_assert_int_eq(cdp_data_set_transforms(&data, NULL, 1, &m1, &s1, err, sizeof err), 0);
    for (int c = 0; c < 3; c++)
        ck_assert(data.test.norm[c] == 0.5f && data.test.norm[3 + c] == 0.25f);
    be->pixels_to_input(10, 3, 16, data.test.pixels, data.test.norm, x);
    for (int i = 0; i < 10 * 48; i++)
        ck_assert(x[i] == ((float)data.test.pixels[i] / 255.0f - 0.5f) / 0.25f);
    /* none again: plain / 255 */
    ck_assert_int_eq(cdp_data_set_transforms(&data, NULL, 0, NULL, NULL, err, sizeof err), 0);
    ck_assert(data.train.norm == NULL && data.test.norm == NULL);
    cdp_data_free(&data);
}
END_TEST

/* ------------------------------------------------------------- options */

static int parse_args(cdp_options *o, char *err, size_t errlen, ...)
{
    char *argv[32];
    int argc = 0;
    va_list ap;
    va_start(ap, errlen);
    argv[argc++] = "cdp_run";
    for (char *a; (a = va_arg(ap, char *)) != NULL;)
        argv[argc++] = a;
    va_end(ap);
    argv[argc] = NULL;
    cdp_options_defaults(o);
    err[0] = '\0';
    return cdp_options_parse(o, argc, argv, err, errlen);
}

static void expect_option_error(const char *want1, const char *want2, int rc, const char *err)
{
    ck_assert_int_eq(rc, -1);
    ck_assert_msg(strstr(err, want1) != NULL, "error '%s' lacks '%s'", err, want1);
    if (want2)
        ck_assert_msg(strstr(err, want2) != NULL, "error '%s' lacks '%s'", err, want2);
    for (const char *p = err; *p; p++)
        ck_assert_msg(isprint((unsigned char)*p), "error '%s' has a control byte", err);
}

START_TEST(options_data)
{
    cdp_options o;
    char err[512];
    /* a missing value names the option */
    expect_option_error("--epochs", "missing", parse_args(&o, err, sizeof err, "--epochs", NULL), err);
    expect_option_error("--lr", "missing", parse_args(&o, err, sizeof err, "--lr", NULL), err);
    expect_option_error("--data-dir", "missing",
                        parse_args(&o, err, sizeof err, "--data-dir", NULL), err);
    expect_option_error("--epochs", "missing",
                        parse_args(&o, err, sizeof err, "--epochs", "--lr", "0.1", NULL), err);
    expect_option_error("--quiet", "no value",
                        parse_args(&o, err, sizeof err, "--quiet=1", NULL), err);
    expect_option_error("--frobnicate", "unknown",
                        parse_args(&o, err, sizeof err, "--frobnicate", NULL), err);
    expect_option_error("-x", "unknown", parse_args(&o, err, sizeof err, "-x", NULL), err);

    /* --data */
    ck_assert_int_eq(parse_args(&o, err, sizeof err, "--data", "synthetic:3x32x32:n=64", NULL), 0);
    ck_assert_str_eq(o.data, "synthetic:3x32x32:n=64");
    ck_assert_str_eq(o.data_dir, "");
    expect_option_error("--data", "CxHxW",
                        parse_args(&o, err, sizeof err, "--data", "synthetic:3x32", NULL), err);
    expect_option_error("--data", "unknown",
                        parse_args(&o, err, sizeof err, "--data", "imagenet", NULL), err);

    /* --augment */
    ck_assert_int_eq(parse_args(&o, err, sizeof err, NULL), 0);
    ck_assert(o.augment.crop_pad == 0 && o.augment.flip == 0);
    ck_assert_int_eq(parse_args(&o, err, sizeof err, "--augment", "crop=4,flip", NULL), 0);
    ck_assert(o.augment.crop_pad == 4 && o.augment.flip == 1);
    ck_assert_int_eq(parse_args(&o, err, sizeof err, "--augment", "flip", NULL), 0);
    ck_assert(o.augment.crop_pad == 0 && o.augment.flip == 1);
    ck_assert_int_eq(parse_args(&o, err, sizeof err, "--augment", "flip,crop=2", NULL), 0);
    ck_assert(o.augment.crop_pad == 2 && o.augment.flip == 1);
    ck_assert_int_eq(parse_args(&o, err, sizeof err, "--augment", "crop=3", NULL), 0);
    ck_assert(o.augment.crop_pad == 3 && o.augment.flip == 0);
    ck_assert_int_eq(parse_args(&o, err, sizeof err, "--augment", "none", NULL), 0);
    ck_assert(o.augment.crop_pad == 0 && o.augment.flip == 0);
    static const char *bad_aug[] = {"crop=0", "crop=-1", "crop=x", "crop=", "crop=4,,flip",
                                    "flip,flip", "crop=1,crop=2", "rotate", "", "crop=99999"};
    for (size_t k = 0; k < sizeof bad_aug / sizeof bad_aug[0]; k++)
        expect_option_error("--augment", NULL,
                            parse_args(&o, err, sizeof err, "--augment", bad_aug[k], NULL), err);

    /* --normalize */
    ck_assert_int_eq(parse_args(&o, err, sizeof err, "--normalize",
                                "0.4914,0.4822,0.4465/0.2470,0.2435,0.2616", NULL), 0);
    ck_assert_int_eq(o.norm_count, 3);
    ck_assert(o.norm_mean[1] == 0.4822f && o.norm_std[2] == 0.2616f);
    ck_assert_int_eq(parse_args(&o, err, sizeof err, "--normalize", "0.5/0.25", NULL), 0);
    ck_assert(o.norm_count == 1 && o.norm_mean[0] == 0.5f && o.norm_std[0] == 0.25f);
    ck_assert_int_eq(parse_args(&o, err, sizeof err, "--normalize", "none", NULL), 0);
    ck_assert_int_eq(o.norm_count, 0);
    static const char *bad_norm[] = {"0.5", "0.5/0", "0.5/-1", "1,2/3", "a/b", "0.5/0.5/0.5",
                                     "/0.5", "0.5/", "0.5,/0.5,1", "nan/1", "0.5/inf"};
    for (size_t k = 0; k < sizeof bad_norm / sizeof bad_norm[0]; k++)
        expect_option_error("--normalize", NULL,
                            parse_args(&o, err, sizeof err, "--normalize", bad_norm[k], NULL), err);

    /* the transforms enter the numerics hash only when set */
    cdp_options a, b;
    ck_assert_int_eq(parse_args(&a, err, sizeof err, NULL), 0);
    ck_assert_int_eq(parse_args(&b, err, sizeof err, "--augment", "none", "--normalize", "none",
                                NULL), 0);
    ck_assert(cdp_options_numerics_hash(&a) == cdp_options_numerics_hash(&b));
    ck_assert_int_eq(parse_args(&b, err, sizeof err, "--augment", "flip", NULL), 0);
    ck_assert(cdp_options_numerics_hash(&a) != cdp_options_numerics_hash(&b));
    ck_assert_int_eq(parse_args(&b, err, sizeof err, "--normalize", "0.5/0.5", NULL), 0);
    ck_assert(cdp_options_numerics_hash(&a) != cdp_options_numerics_hash(&b));
}
END_TEST

/* ------------------------------------------------------------------ main */

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static Suite *data_suite(void)
{
    Suite *s = suite_create("data");
    TCase *tc = tcase_create("idx");
    tcase_add_loop_test(tc, idx_good, 0, 2);
    tcase_add_test(tc, idx_deflated);
    tcase_add_test(tc, idx_mixed_gz_plain);
    tcase_add_loop_test(tc, idx_bad_magic, 0, 2);
    tcase_add_loop_test(tc, idx_truncated_images, 0, 2);
    tcase_add_loop_test(tc, idx_truncated_labels, 0, 2);
    tcase_add_loop_test(tc, idx_count_mismatch, 0, 2);
    tcase_add_loop_test(tc, idx_label_range, 0, 2);
    tcase_add_loop_test(tc, idx_trailing, 0, 2);
    tcase_add_loop_test(tc, idx_zero_and_absurd, 0, 2);
    tcase_add_loop_test(tc, idx_huge_claim, 0, 2);
    tcase_add_test(tc, idx_missing_file);
    tcase_add_test(tc, idx_corrupt_gzip);
    tcase_add_test(tc, idx_cut_gzip);
    suite_add_tcase(s, tc);

    tc = tcase_create("cifar10");
    tcase_add_test(tc, cifar_good_and_concat);
    tcase_add_test(tc, cifar_bad);
    suite_add_tcase(s, tc);

    tc = tcase_create("synthetic");
    tcase_add_test(tc, synthetic_deterministic);
    tcase_add_test(tc, synthetic_load_learnable);
    suite_add_tcase(s, tc);

    tc = tcase_create("permutation");
    tcase_add_test(tc, permutation);
    suite_add_tcase(s, tc);

    tc = tcase_create("load");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, load_fashion_dir, 0, 2);
    tcase_add_test(tc, load_errors);
    tcase_add_test(tc, load_cifar_dir);
    tcase_add_test(tc, real_fashion_mnist);
    tcase_add_test(tc, default_dirs);
    suite_add_tcase(s, tc);

    tc = tcase_create("file types");
    tcase_set_timeout(tc, 10);   /* a blocking open of a FIFO would hang */
    tcase_add_test(tc, idx_not_regular);
    suite_add_tcase(s, tc);

    tc = tcase_create("shapes and transforms");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, synthetic_spec);
    tcase_add_test(tc, folder_spec);
    tcase_add_test(tc, synthetic_open);
    tcase_add_test(tc, augment_hand);
    tcase_add_test(tc, augment_any_position);
    tcase_add_test(tc, normalize_values);
    tcase_add_test(tc, options_data);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    const char *base = getenv("TMPDIR");
    if (!base || !*base)
        base = "/tmp";
    snprintf(tmpdir, sizeof tmpdir, "%s/cdp-test-data-XXXXXX", base);
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return EXIT_FAILURE;
    }
    int failed = check_run(data_suite());
    nftw(tmpdir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
