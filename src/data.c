/* Data sets: IDX (MNIST / Fashion-MNIST) through zlib, CIFAR-10 binary
 * batches, a synthetic set, and the per-epoch permutation.
 *
 * Every loader returns 0 or -1 with a single-line "<path>: <problem>" message
 * in err; nothing is printed and nothing exits.  On failure the output is
 * left zeroed and everything allocated on the way is freed. */
#include "cdp/data.h"
#include "cdp/rng.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#define CDP_CLASSES 10
/* Refuse data sets larger than this many pixel bytes (16 GiB) before
 * allocating anything: such a header is corrupt or hostile. */
#define CDP_MAX_BYTES ((uint64_t)1 << 34)
/* Largest accepted image (bytes per sample). */
#define CDP_MAX_DIM ((uint64_t)1 << 24)
#define CDP_IDX_IMAGES_MAGIC 0x00000803u
#define CDP_IDX_LABELS_MAGIC 0x00000801u
#define CDP_CIFAR_DIM 3072
#define CDP_CIFAR_RECORD (1 + CDP_CIFAR_DIM)
/* gzread takes an unsigned length but returns an int: read in chunks. */
#define CDP_GZ_CHUNK ((uint64_t)1 << 30)

/* Random streams (any distinct constants; fixed forever so that runs and
 * checkpoints stay reproducible). */
#define STREAM_EPOCH_PERM    0x6364702d7065726dULL /* "cdp-perm" */
#define STREAM_SYN_TEMPLATE  0x6364702d74706c74ULL /* "cdp-tplt" */
#define STREAM_SYN_TRAIN     0x6364702d7472616eULL /* "cdp-tran" */
#define STREAM_SYN_TEST      0x6364702d74657374ULL /* "cdp-test" */
#define STREAM_SYN_LABEL_XOR 0x6c6162656c736875ULL /* "labelshu" */

#define SYN_TRAIN_N 8192
#define SYN_TEST_N  2048
#define SYN_DIM     784

static void set_err(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void set_err(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || errlen == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    /* One line: no newline may leak through (paths could hold one). */
    for (char *p = err; *p; p++)
        if (*p == '\n' || *p == '\r')
            *p = ' ';
}

static uint32_t be32(const unsigned char *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) |
           ((uint32_t)p[2] << 8) | (uint32_t)p[3];
}

void cdp_dataset_free(cdp_dataset *d)
{
    if (!d)
        return;
    free(d->pixels);
    free(d->labels);
    memset(d, 0, sizeof *d);
}

void cdp_data_free(cdp_data *d)
{
    if (!d)
        return;
    cdp_dataset_free(&d->train);
    cdp_dataset_free(&d->test);
    memset(d, 0, sizeof *d);
}

/* ------------------------------------------------------------------ zlib */

/* Describe the error state of f (after a failed gzread) without repeating
 * the path that zlib puts in front of its own messages. */
static void gz_describe(gzFile f, const char *path, int saved_errno,
                        char *buf, size_t len)
{
    int errnum = Z_OK;
    const char *msg = gzerror(f, &errnum);
    if (errnum == Z_ERRNO) {
        snprintf(buf, len, "read error: %s",
                 strerror(saved_errno ? saved_errno : EIO));
        return;
    }
    if (!msg)
        msg = "";
    size_t pl = strlen(path);
    if (strncmp(msg, path, pl) == 0 && msg[pl] == ':' && msg[pl + 1] == ' ')
        msg += pl + 2;
    if (errnum == Z_BUF_ERROR)
        snprintf(buf, len, "truncated gzip stream: %s", *msg ? msg : "unexpected end of file");
    else if (errnum == Z_MEM_ERROR)
        snprintf(buf, len, "out of memory while decompressing");
    else
        snprintf(buf, len, "corrupt gzip stream: %s", *msg ? msg : "unknown zlib error");
}

/* Reads up to len bytes; *got receives the count.  Returns 0 when all len
 * bytes came, 1 on a short read (end of data), -1 on a read or zlib error
 * (described in why).  A gzip stream cut short reads as an error. */
static int gz_read_full(gzFile f, const char *path, void *buf, uint64_t len,
                        uint64_t *got, char *why, size_t whylen)
{
    unsigned char *p = buf;
    uint64_t done = 0;
    while (done < len) {
        uint64_t want = len - done;
        if (want > CDP_GZ_CHUNK)
            want = CDP_GZ_CHUNK;
        errno = 0;
        int r = gzread(f, p + done, (unsigned)want);
        int saved = errno;
        if (r < 0) {
            *got = done;
            gz_describe(f, path, saved, why, whylen);
            return -1;
        }
        if (r == 0)
            break;
        done += (uint64_t)r;
    }
    *got = done;
    if (done == len)
        return 0;
    /* A short read: plain end of file, or a gzip stream that ended early
     * (zlib returns what it could and flags Z_BUF_ERROR). */
    int errnum = Z_OK;
    gzerror(f, &errnum);
    if (errnum != Z_OK) {
        gz_describe(f, path, errno, why, whylen);
        return -1;
    }
    return 1;
}

/* After the data: 0 if the stream ends here (and, for gzip, its trailer
 * checks out), 1 if bytes remain, -1 on an error described in why. */
static int gz_expect_eof(gzFile f, const char *path, char *why, size_t whylen)
{
    unsigned char extra[64];
    uint64_t got = 0;
    int rc = gz_read_full(f, path, extra, sizeof extra, &got, why, whylen);
    if (rc < 0)
        return -1;
    return got > 0 ? 1 : 0;
}

static gzFile gz_open_read(const char *path, char *err, size_t errlen)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        set_err(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    if (S_ISDIR(st.st_mode)) {
        set_err(err, errlen, "%s: cannot open: %s", path, strerror(EISDIR));
        return NULL;
    }
    errno = 0;
    gzFile f = gzopen(path, "rb");
    if (!f) {
        set_err(err, errlen, "%s: cannot open: %s", path,
                strerror(errno ? errno : ENOMEM));
        return NULL;
    }
    gzbuffer(f, 1u << 18);
    return f;
}

/* ------------------------------------------------------------------- IDX */

int cdp_load_idx(const char *images_path, const char *labels_path,
                 cdp_dataset *out, char *err, size_t errlen)
{
    char why[256];
    gzFile fi = NULL, fl = NULL;
    uint8_t *pixels = NULL, *lab8 = NULL;
    int32_t *labels = NULL;
    unsigned char hdr[16];
    uint64_t got = 0;
    int rc;

    if (out)
        memset(out, 0, sizeof *out);
    if (!images_path || !labels_path || !out) {
        set_err(err, errlen, "cdp_load_idx: missing argument");
        return -1;
    }

    /* ---- images header */
    fi = gz_open_read(images_path, err, errlen);
    if (!fi)
        goto fail;
    rc = gz_read_full(fi, images_path, hdr, 16, &got, why, sizeof why);
    if (rc < 0) {
        set_err(err, errlen, "%s: %s", images_path, why);
        goto fail;
    }
    if (got >= 4 && be32(hdr) != CDP_IDX_IMAGES_MAGIC) {
        set_err(err, errlen,
                "%s: bad magic number 0x%08x, expected 0x%08x (IDX images)",
                images_path, (unsigned)be32(hdr), CDP_IDX_IMAGES_MAGIC);
        goto fail;
    }
    if (rc > 0) {
        set_err(err, errlen,
                "%s: truncated: expected a 16-byte IDX images header, got %llu bytes",
                images_path, (unsigned long long)got);
        goto fail;
    }
    uint64_t n = be32(hdr + 4), rows = be32(hdr + 8), cols = be32(hdr + 12);
    if (n == 0 || rows == 0 || cols == 0) {
        set_err(err, errlen,
                "%s: zero-size dimension in IDX images header (%llu images of %llu x %llu)",
                images_path, (unsigned long long)n, (unsigned long long)rows,
                (unsigned long long)cols);
        goto fail;
    }
    uint64_t dim = rows * cols; /* both < 2^32: no overflow */
    if (dim > CDP_MAX_DIM || n * dim > CDP_MAX_BYTES) {
        set_err(err, errlen,
                "%s: absurd size in IDX images header (%llu images of %llu x %llu); refusing to allocate",
                images_path, (unsigned long long)n, (unsigned long long)rows,
                (unsigned long long)cols);
        goto fail;
    }

    /* ---- labels header */
    fl = gz_open_read(labels_path, err, errlen);
    if (!fl)
        goto fail;
    rc = gz_read_full(fl, labels_path, hdr, 8, &got, why, sizeof why);
    if (rc < 0) {
        set_err(err, errlen, "%s: %s", labels_path, why);
        goto fail;
    }
    if (got >= 4 && be32(hdr) != CDP_IDX_LABELS_MAGIC) {
        set_err(err, errlen,
                "%s: bad magic number 0x%08x, expected 0x%08x (IDX labels)",
                labels_path, (unsigned)be32(hdr), CDP_IDX_LABELS_MAGIC);
        goto fail;
    }
    if (rc > 0) {
        set_err(err, errlen,
                "%s: truncated: expected an 8-byte IDX labels header, got %llu bytes",
                labels_path, (unsigned long long)got);
        goto fail;
    }
    uint64_t nl = be32(hdr + 4);
    if (nl == 0) {
        set_err(err, errlen, "%s: zero-size dimension in IDX labels header (0 labels)",
                labels_path);
        goto fail;
    }
    if (nl != n) {
        set_err(err, errlen, "%s: %llu images but labels file %s has %llu labels",
                images_path, (unsigned long long)n, labels_path,
                (unsigned long long)nl);
        goto fail;
    }

    /* ---- images data */
    pixels = malloc((size_t)(n * dim));
    lab8 = malloc((size_t)n);
    labels = malloc((size_t)n * sizeof *labels);
    if (!pixels || !lab8 || !labels) {
        set_err(err, errlen, "%s: out of memory for %llu images of %llu bytes",
                images_path, (unsigned long long)n, (unsigned long long)dim);
        goto fail;
    }
    rc = gz_read_full(fi, images_path, pixels, n * dim, &got, why, sizeof why);
    if (rc < 0) {
        set_err(err, errlen, "%s: %s", images_path, why);
        goto fail;
    }
    if (rc > 0) {
        set_err(err, errlen, "%s: truncated: expected %llu pixel bytes, got %llu",
                images_path, (unsigned long long)(n * dim), (unsigned long long)got);
        goto fail;
    }
    rc = gz_expect_eof(fi, images_path, why, sizeof why);
    if (rc < 0) {
        set_err(err, errlen, "%s: %s", images_path, why);
        goto fail;
    }
    if (rc > 0) {
        set_err(err, errlen, "%s: trailing bytes after the %llu images",
                images_path, (unsigned long long)n);
        goto fail;
    }

    /* ---- labels data */
    rc = gz_read_full(fl, labels_path, lab8, n, &got, why, sizeof why);
    if (rc < 0) {
        set_err(err, errlen, "%s: %s", labels_path, why);
        goto fail;
    }
    if (rc > 0) {
        set_err(err, errlen, "%s: truncated: expected %llu label bytes, got %llu",
                labels_path, (unsigned long long)n, (unsigned long long)got);
        goto fail;
    }
    rc = gz_expect_eof(fl, labels_path, why, sizeof why);
    if (rc < 0) {
        set_err(err, errlen, "%s: %s", labels_path, why);
        goto fail;
    }
    if (rc > 0) {
        set_err(err, errlen, "%s: trailing bytes after the %llu labels",
                labels_path, (unsigned long long)n);
        goto fail;
    }
    for (uint64_t i = 0; i < n; i++) {
        if (lab8[i] >= CDP_CLASSES) {
            set_err(err, errlen, "%s: label %u at index %llu out of range [0, %d)",
                    labels_path, (unsigned)lab8[i], (unsigned long long)i,
                    CDP_CLASSES);
            goto fail;
        }
        labels[i] = lab8[i];
    }

    gzclose_r(fi);
    gzclose_r(fl);
    free(lab8);
    out->n = (int64_t)n;
    out->dim = (int)dim;
    out->classes = CDP_CLASSES;
    out->pixels = pixels;
    out->labels = labels;
    return 0;

fail:
    if (fi)
        gzclose_r(fi);
    if (fl)
        gzclose_r(fl);
    free(pixels);
    free(lab8);
    free(labels);
    return -1;
}

/* -------------------------------------------------------------- CIFAR-10 */

int cdp_load_cifar10(const char *const *paths, int npaths,
                     cdp_dataset *out, char *err, size_t errlen)
{
    FILE *f = NULL;
    uint8_t *pixels = NULL;
    int32_t *labels = NULL;
    uint64_t total = 0;
    unsigned char rec[CDP_CIFAR_RECORD];

    if (out)
        memset(out, 0, sizeof *out);
    if (!out || !paths || npaths <= 0) {
        set_err(err, errlen, "cdp_load_cifar10: no CIFAR-10 batch files given");
        return -1;
    }

    /* Pass 1: sizes. */
    for (int k = 0; k < npaths; k++) {
        const char *path = paths[k];
        struct stat st;
        if (!path) {
            set_err(err, errlen, "cdp_load_cifar10: file %d of %d is NULL", k, npaths);
            return -1;
        }
        if (stat(path, &st) != 0) {
            set_err(err, errlen, "%s: cannot open: %s", path, strerror(errno));
            return -1;
        }
        if (!S_ISREG(st.st_mode)) {
            set_err(err, errlen, "%s: not a regular file", path);
            return -1;
        }
        uint64_t size = (uint64_t)st.st_size;
        if (size == 0) {
            set_err(err, errlen,
                    "%s: empty file, expected %d-byte CIFAR-10 records (1 label byte + %d pixel bytes)",
                    path, CDP_CIFAR_RECORD, CDP_CIFAR_DIM);
            return -1;
        }
        if (size % CDP_CIFAR_RECORD != 0) {
            set_err(err, errlen,
                    "%s: size %llu bytes is not a whole number of %d-byte CIFAR-10 records "
                    "(%llu records + %llu bytes)",
                    path, (unsigned long long)size, CDP_CIFAR_RECORD,
                    (unsigned long long)(size / CDP_CIFAR_RECORD),
                    (unsigned long long)(size % CDP_CIFAR_RECORD));
            return -1;
        }
        total += size / CDP_CIFAR_RECORD;
        if (total * CDP_CIFAR_DIM > CDP_MAX_BYTES) {
            set_err(err, errlen, "%s: absurd total size (%llu records so far); refusing to allocate",
                    path, (unsigned long long)total);
            return -1;
        }
    }

    pixels = malloc((size_t)(total * CDP_CIFAR_DIM));
    labels = malloc((size_t)total * sizeof *labels);
    if (!pixels || !labels) {
        set_err(err, errlen, "%s: out of memory for %llu CIFAR-10 records",
                paths[0], (unsigned long long)total);
        goto fail;
    }

    /* Pass 2: records. */
    uint64_t i = 0;
    for (int k = 0; k < npaths; k++) {
        const char *path = paths[k];
        f = fopen(path, "rb");
        if (!f) {
            set_err(err, errlen, "%s: cannot open: %s", path, strerror(errno));
            goto fail;
        }
        struct stat st;
        if (fstat(fileno(f), &st) != 0) {
            set_err(err, errlen, "%s: cannot stat: %s", path, strerror(errno));
            goto fail;
        }
        uint64_t nrec = (uint64_t)st.st_size / CDP_CIFAR_RECORD;
        if ((uint64_t)st.st_size % CDP_CIFAR_RECORD != 0 || i + nrec > total) {
            set_err(err, errlen, "%s: file changed while being read", path);
            goto fail;
        }
        for (uint64_t r = 0; r < nrec; r++, i++) {
            size_t got = fread(rec, 1, sizeof rec, f);
            if (got != sizeof rec) {
                if (ferror(f))
                    set_err(err, errlen, "%s: read error: %s", path, strerror(errno));
                else
                    set_err(err, errlen, "%s: truncated: record %llu has %zu of %d bytes",
                            path, (unsigned long long)r, got, CDP_CIFAR_RECORD);
                goto fail;
            }
            if (rec[0] >= CDP_CLASSES) {
                set_err(err, errlen, "%s: label %u in record %llu out of range [0, %d)",
                        path, (unsigned)rec[0], (unsigned long long)r, CDP_CLASSES);
                goto fail;
            }
            labels[i] = rec[0];
            memcpy(pixels + i * CDP_CIFAR_DIM, rec + 1, CDP_CIFAR_DIM);
        }
        fclose(f);
        f = NULL;
    }
    if (i != total) {
        set_err(err, errlen, "%s: files changed while being read", paths[0]);
        goto fail;
    }

    out->n = (int64_t)total;
    out->dim = CDP_CIFAR_DIM;
    out->classes = CDP_CLASSES;
    out->pixels = pixels;
    out->labels = labels;
    return 0;

fail:
    if (f)
        fclose(f);
    free(pixels);
    free(labels);
    return -1;
}

/* ------------------------------------------------------------- synthetic */

/* Fisher-Yates driven by cdp_rand_u64(seed, stream, j). */
static void shuffle_i64(int64_t *a, int64_t n, uint64_t seed, uint64_t stream)
{
    for (int64_t j = n - 1; j > 0; j--) {
        uint64_t r = cdp_rand_u64(seed, stream, (uint64_t)j);
        int64_t k = (int64_t)(r % (uint64_t)(j + 1));
        int64_t t = a[j];
        a[j] = a[k];
        a[k] = t;
    }
}

/* Class templates come from (seed, STREAM_SYN_TEMPLATE) whatever the sample
 * stream, so train and test sets drawn from different sample streams of the
 * same seed share their classes. */
static int make_synthetic_stream(int64_t n, int dim, uint64_t seed,
                                 uint64_t stream, cdp_dataset *out)
{
    if (!out)
        return -1;
    memset(out, 0, sizeof *out);
    if (n <= 0 || dim <= 0 || (uint64_t)dim > CDP_MAX_DIM ||
        (uint64_t)n * (uint64_t)dim > CDP_MAX_BYTES)
        return -1;

    uint8_t *tmpl = malloc((size_t)CDP_CLASSES * (size_t)dim);
    uint8_t *pixels = malloc((size_t)n * (size_t)dim);
    int32_t *labels = malloc((size_t)n * sizeof *labels);
    int64_t *order = malloc((size_t)n * sizeof *order);
    if (!tmpl || !pixels || !labels || !order) {
        free(tmpl);
        free(pixels);
        free(labels);
        free(order);
        return -1;
    }

    /* Templates: per-pixel levels in [48, 208), so that noise still leaves
     * the classes apart but is not trivially small. */
    for (int c = 0; c < CDP_CLASSES; c++)
        for (int p = 0; p < dim; p++) {
            uint64_t r = cdp_rand_u64(seed, STREAM_SYN_TEMPLATE,
                                      (uint64_t)c * (uint64_t)dim + (uint64_t)p);
            tmpl[(size_t)c * (size_t)dim + (size_t)p] = (uint8_t)(48 + (r >> 32) % 160);
        }

    /* Balanced labels (i mod 10) in a seeded random order: every class is
     * present as soon as n >= 10. */
    for (int64_t i = 0; i < n; i++)
        order[i] = i % CDP_CLASSES;
    shuffle_i64(order, n, seed, stream ^ STREAM_SYN_LABEL_XOR);

    for (int64_t i = 0; i < n; i++) {
        int c = (int)order[i];
        labels[i] = c;
        const uint8_t *t = tmpl + (size_t)c * (size_t)dim;
        uint8_t *px = pixels + (size_t)i * (size_t)dim;
        for (int p = 0; p < dim; p++) {
            uint64_t r = cdp_rand_u64(seed, stream,
                                      (uint64_t)i * (uint64_t)dim + (uint64_t)p);
            int noise = (int)((r >> 32) % 193) - 96; /* [-96, 96] */
            int v = (int)t[p] + noise;
            px[p] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
        }
    }

    free(tmpl);
    free(order);
    out->n = n;
    out->dim = dim;
    out->classes = CDP_CLASSES;
    out->pixels = pixels;
    out->labels = labels;
    return 0;
}

int cdp_make_synthetic(int64_t n, int dim, uint64_t seed, cdp_dataset *out)
{
    return make_synthetic_stream(n, dim, seed, STREAM_SYN_TRAIN, out);
}

/* ----------------------------------------------------------- high level */

static int file_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && !S_ISDIR(st.st_mode);
}

/* dir/name.gz if present, else dir/name; 0 or -1 (error written). */
static int find_idx_file(const char *dir, const char *name, char *path,
                         size_t pathlen, char *err, size_t errlen)
{
    int w = snprintf(path, pathlen, "%s/%s.gz", dir, name);
    if (w < 0 || (size_t)w >= pathlen) {
        set_err(err, errlen, "%s: path too long", dir);
        return -1;
    }
    if (file_exists(path))
        return 0;
    snprintf(path, pathlen, "%s/%s", dir, name);
    if (file_exists(path))
        return 0;
    set_err(err, errlen, "%s/%s.gz: cannot open: %s (nor %s)", dir, name,
            strerror(ENOENT), name);
    return -1;
}

static int check_dir(const char *dir, const char *kind, char *err, size_t errlen)
{
    struct stat st;
    int fm = strcmp(kind, "fashion-mnist") == 0;
    if (stat(dir, &st) != 0) {
        int e = errno;
        if (fm)
            set_err(err, errlen,
                    "%s: data directory: %s (the Debian package dataset-fashion-mnist "
                    "provides /usr/share/datasets/fashion-mnist)",
                    dir, strerror(e));
        else
            set_err(err, errlen, "%s: %s data directory: %s", dir, kind, strerror(e));
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        set_err(err, errlen, "%s: %s data directory: %s", dir, kind, strerror(ENOTDIR));
        return -1;
    }
    return 0;
}

int cdp_data_synthetic(int dim, uint64_t seed, cdp_data *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (dim < 1 || dim > (1 << 24)) {
        set_err(err, errlen, "synthetic: bad image size %d", dim);
        return -1;
    }
    if (make_synthetic_stream(SYN_TRAIN_N, dim, seed, STREAM_SYN_TRAIN, &out->train) != 0 ||
        make_synthetic_stream(SYN_TEST_N, dim, seed, STREAM_SYN_TEST, &out->test) != 0) {
        cdp_data_free(out);
        set_err(err, errlen, "synthetic: out of memory");
        return -1;
    }
    snprintf(out->name, sizeof out->name, "%s", "synthetic");
    return 0;
}

int cdp_data_load(const char *kind, const char *dir, uint64_t seed,
                  cdp_data *out, char *err, size_t errlen)
{
    char p1[4096], p2[4096];

    if (out)
        memset(out, 0, sizeof *out);
    if (!out || !kind) {
        set_err(err, errlen, "cdp_data_load: missing argument");
        return -1;
    }

    if (strcmp(kind, "synthetic") == 0)
        return cdp_data_synthetic(SYN_DIM, seed, out, err, errlen);

    if (strcmp(kind, "fashion-mnist") == 0 || strcmp(kind, "mnist") == 0) {
        if (!dir) {
            set_err(err, errlen, "%s: no data directory given", kind);
            return -1;
        }
        if (check_dir(dir, kind, err, errlen) != 0)
            return -1;
        static const char *const names[2][2] = {
            {"train-images-idx3-ubyte", "train-labels-idx1-ubyte"},
            {"t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"},
        };
        for (int s = 0; s < 2; s++) {
            if (find_idx_file(dir, names[s][0], p1, sizeof p1, err, errlen) != 0 ||
                find_idx_file(dir, names[s][1], p2, sizeof p2, err, errlen) != 0)
                goto fail;
            if (cdp_load_idx(p1, p2, s == 0 ? &out->train : &out->test,
                             err, errlen) != 0)
                goto fail;
        }
        if (out->train.dim != out->test.dim) {
            set_err(err, errlen, "%s: training images have %d pixels but test images %d",
                    dir, out->train.dim, out->test.dim);
            goto fail;
        }
        snprintf(out->name, sizeof out->name, "%s", kind);
        return 0;
    }

    if (strcmp(kind, "cifar10") == 0) {
        if (!dir) {
            set_err(err, errlen, "cifar10: no data directory given");
            return -1;
        }
        if (check_dir(dir, kind, err, errlen) != 0)
            return -1;
        /* Accept the directory of the extracted archive, or its parent. */
        const char *base = dir;
        char sub[4000];  /* leaves room in p1 for the file name */
        snprintf(p1, sizeof p1, "%s/data_batch_1.bin", dir);
        if (!file_exists(p1)) {
            int w = snprintf(sub, sizeof sub, "%s/cifar-10-batches-bin", dir);
            if (w > 0 && (size_t)w < sizeof sub) {
                w = snprintf(p1, sizeof p1, "%s/data_batch_1.bin", sub);
                if (w > 0 && (size_t)w < sizeof p1 && file_exists(p1))
                    base = sub;
            }
        }
        char train_paths[5][4096];
        const char *tp[5];
        for (int k = 0; k < 5; k++) {
            int w = snprintf(train_paths[k], sizeof train_paths[k],
                             "%s/data_batch_%d.bin", base, k + 1);
            if (w < 0 || (size_t)w >= sizeof train_paths[k]) {
                set_err(err, errlen, "%s: path too long", dir);
                return -1;
            }
            tp[k] = train_paths[k];
        }
        int w = snprintf(p2, sizeof p2, "%s/test_batch.bin", base);
        if (w < 0 || (size_t)w >= sizeof p2) {
            set_err(err, errlen, "%s: path too long", dir);
            return -1;
        }
        const char *testp[1] = {p2};
        if (cdp_load_cifar10(tp, 5, &out->train, err, errlen) != 0 ||
            cdp_load_cifar10(testp, 1, &out->test, err, errlen) != 0)
            goto fail;
        snprintf(out->name, sizeof out->name, "%s", "cifar10");
        return 0;
    }

    set_err(err, errlen,
            "%s: unknown data set kind (expected fashion-mnist, mnist, cifar10 or synthetic)",
            kind);
    return -1;

fail:
    cdp_data_free(out);
    return -1;
}

/* ---------------------------------------------------------- permutation */

void cdp_epoch_permutation(int64_t n, uint64_t seed, int64_t epoch, int shuffle,
                           int64_t *perm)
{
    if (!perm || n <= 0)
        return;
    for (int64_t i = 0; i < n; i++)
        perm[i] = i;
    if (!shuffle)
        return;
    uint64_t stream = STREAM_EPOCH_PERM ^ cdp_mix64((uint64_t)epoch);
    shuffle_i64(perm, n, seed, stream);
}
