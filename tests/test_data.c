/* Tests of the data module: IDX (gzipped and plain), CIFAR-10 binary,
 * synthetic data, the epoch permutation, and cdp_data_load. */
#include "cdp/data.h"

#include <check.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
    SRunner *sr = srunner_create(data_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    nftw(tmpdir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
