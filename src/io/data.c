/* Data sets: IDX (MNIST / Fashion-MNIST) through zlib, CIFAR-10 binary
 * batches, a synthetic set, and the per-epoch permutation.
 *
 * Every loader returns 0 or -1 with a single-line "<path>: <problem>" message
 * in err; nothing is printed and nothing exits.  On failure the output is
 * left zeroed and everything allocated on the way is freed. */
#include "io/data.h"
#include "io/image_folder.h"
#include "util/rng.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
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
/* The pixel buffer of an IDX file starts at this size (or the header's, if
 * smaller) and doubles as the data arrives. */
#define CDP_IDX_FIRST_ALLOC ((uint64_t)64 << 20)
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
/* Default synthetic training sets stay under this many pixel bytes. */
#define SYN_DEFAULT_BYTES ((int64_t)256 << 20)

#define set_err cdp_data_err

void cdp_data_err(char *err, size_t errlen, const char *fmt, ...)
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
    free(d->norm);
    cdp_image_folder_free(d->folder);
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

static const char *file_type_name(mode_t m)
{
    if (S_ISDIR(m)) return "a directory";
    if (S_ISFIFO(m)) return "a FIFO (named pipe)";
    if (S_ISCHR(m)) return "a character device";
    if (S_ISBLK(m)) return "a block device";
    if (S_ISSOCK(m)) return "a socket";
    return "not a plain file";
}

/* Opens path for reading when it is a regular file, and only then: the
 * open is non-blocking (a FIFO in place of a data file must not block it
 * forever), the type is checked on the open descriptor (no race with a
 * rename), and the descriptor is made blocking again.  Returns the
 * descriptor, or -1 with one line in err. */
int cdp_open_regular(const char *path, char *err, size_t errlen)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        if (e == ELOOP)
            set_err(err, errlen, "%s: cannot open: a symbolic link loop (%s)", path, strerror(e));
        else
            set_err(err, errlen, "%s: cannot open: %s", path, strerror(e));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        set_err(err, errlen, "%s: cannot stat: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        set_err(err, errlen, "%s: not a regular file: it is %s", path, file_type_name(st.st_mode));
        close(fd);
        return -1;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0) {
        set_err(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

static gzFile gz_open_read(const char *path, char *err, size_t errlen)
{
    int fd = cdp_open_regular(path, err, errlen);
    if (fd < 0)
        return NULL;
    errno = 0;
    gzFile f = gzdopen(fd, "rb");
    if (!f) {
        set_err(err, errlen, "%s: cannot open: %s", path,
                strerror(errno ? errno : ENOMEM));
        close(fd);
        return NULL;
    }
    gzbuffer(f, 1u << 18);
    return f;
}

/* ------------------------------------------------------------------- IDX */

/* Opens an IDX file and reads its header of len bytes, which starts with
 * magic; what: "images" or "labels", size: "a 16-byte" or "an 8-byte" (for
 * the messages).  A wrong magic number is reported before a short header:
 * four bytes are enough to tell that the file is something else. */
static gzFile idx_open(const char *path, unsigned char *hdr, uint64_t len, uint32_t magic,
                       const char *what, const char *size, char *err, size_t errlen)
{
    char why[256];
    uint64_t got = 0;
    gzFile f = gz_open_read(path, err, errlen);
    if (!f)
        return NULL;
    const int rc = gz_read_full(f, path, hdr, len, &got, why, sizeof why);
    if (rc < 0)
        set_err(err, errlen, "%s: %s", path, why);
    else if (got >= 4 && be32(hdr) != magic)
        set_err(err, errlen, "%s: bad magic number 0x%08x, expected 0x%08x (IDX %s)",
                path, (unsigned)be32(hdr), magic, what);
    else if (rc > 0)
        set_err(err, errlen, "%s: truncated: expected %s IDX %s header, got %llu bytes",
                path, size, what, (unsigned long long)got);
    else
        return f;
    gzclose_r(f);
    return NULL;
}

/* After n images or labels: the end of the stream (and, for gzip, a
 * trailer that checks out).  what: "images" or "labels". */
static int idx_expect_end(gzFile f, const char *path, uint64_t n, const char *what,
                          char *err, size_t errlen)
{
    char why[256];
    const int rc = gz_expect_eof(f, path, why, sizeof why);
    if (rc < 0)
        set_err(err, errlen, "%s: %s", path, why);
    else if (rc > 0)
        set_err(err, errlen, "%s: trailing bytes after the %llu %s", path,
                (unsigned long long)n, what);
    return rc ? -1 : 0;
}

/* Opens the images file and reads its header: *n images of *rows x *cols,
 * each dimension non-zero and the whole within the limits. */
static gzFile idx_open_images(const char *path, uint64_t *n, uint64_t *rows, uint64_t *cols,
                              char *err, size_t errlen)
{
    unsigned char hdr[16];
    gzFile f = idx_open(path, hdr, 16, CDP_IDX_IMAGES_MAGIC, "images", "a 16-byte", err,
                        errlen);
    if (!f)
        return NULL;
    *n = be32(hdr + 4);
    *rows = be32(hdr + 8);
    *cols = be32(hdr + 12);
    if (*n == 0 || *rows == 0 || *cols == 0) {
        set_err(err, errlen,
                "%s: zero-size dimension in IDX images header (%llu images of %llu x %llu)",
                path, (unsigned long long)*n, (unsigned long long)*rows,
                (unsigned long long)*cols);
        goto fail;
    }
    const uint64_t dim = *rows * *cols; /* both < 2^32: no overflow */
    if (dim > CDP_MAX_DIM || *n * dim > CDP_MAX_BYTES) {
        set_err(err, errlen,
                "%s: absurd size in IDX images header (%llu images of %llu x %llu); refusing to allocate",
                path, (unsigned long long)*n, (unsigned long long)*rows,
                (unsigned long long)*cols);
        goto fail;
    }
    return f;
fail:
    gzclose_r(f);
    return NULL;
}

/* Opens the labels file and reads its header, which must count the n
 * images of images_path. */
static gzFile idx_open_labels(const char *path, const char *images_path, uint64_t n,
                              char *err, size_t errlen)
{
    unsigned char hdr[8];
    gzFile f = idx_open(path, hdr, 8, CDP_IDX_LABELS_MAGIC, "labels", "an 8-byte", err, errlen);
    if (!f)
        return NULL;
    const uint64_t nl = be32(hdr + 4);
    if (nl == 0) {
        set_err(err, errlen, "%s: zero-size dimension in IDX labels header (0 labels)", path);
        goto fail;
    }
    if (nl != n) {
        set_err(err, errlen, "%s: %llu images but labels file %s has %llu labels",
                images_path, (unsigned long long)n, path, (unsigned long long)nl);
        goto fail;
    }
    return f;
fail:
    gzclose_r(f);
    return NULL;
}

/* len bytes of an IDX body of total bytes (pixel or label bytes: what)
 * into buf, of which *done came before: *done counts the new ones too.
 * 0, or -1 with the read error or the truncation in err. */
static int idx_read_body(gzFile f, const char *path, uint8_t *buf, uint64_t len,
                         uint64_t *done, uint64_t total, const char *what, char *err,
                         size_t errlen)
{
    char why[256];
    uint64_t got = 0;
    const int rc = gz_read_full(f, path, buf, len, &got, why, sizeof why);
    *done += got;
    if (rc < 0)
        set_err(err, errlen, "%s: %s", path, why);
    else if (rc > 0)
        set_err(err, errlen, "%s: truncated: expected %llu %s bytes, got %llu", path,
                (unsigned long long)total, what, (unsigned long long)*done);
    return rc ? -1 : 0;
}

/* The n images of dim bytes after the header, and nothing after them.
 * The header's size is only a claim, so the buffer grows as the bytes
 * arrive: a file of a few bytes that claims 16 GiB is refused as
 * truncated, without allocating them. */
static uint8_t *idx_read_images(gzFile f, const char *path, uint64_t n, uint64_t dim,
                                char *err, size_t errlen)
{
    const uint64_t total = n * dim;
    uint64_t cap = total < CDP_IDX_FIRST_ALLOC ? total : CDP_IDX_FIRST_ALLOC, done = 0;
    uint8_t *pixels = NULL;
    for (;;) {
        uint8_t *grown = realloc(pixels, (size_t)cap);
        if (!grown) {
            set_err(err, errlen, "%s: out of memory for %llu images of %llu bytes", path,
                    (unsigned long long)n, (unsigned long long)dim);
            goto fail;
        }
        pixels = grown;
        if (idx_read_body(f, path, pixels + done, cap - done, &done, total, "pixel", err,
                          errlen))
            goto fail;
        if (done == total)
            break;
        cap = total - cap < cap ? total : 2 * cap;
    }
    if (idx_expect_end(f, path, n, "images", err, errlen) == 0)
        return pixels;
fail:
    free(pixels);
    return NULL;
}

/* The n labels after the header (no more than the images that came), each
 * a class, and nothing after them. */
static int32_t *idx_read_labels(gzFile f, const char *path, uint64_t n, char *err,
                                size_t errlen)
{
    uint64_t got = 0;
    uint8_t *lab8 = malloc((size_t)n);
    int32_t *labels = malloc((size_t)n * sizeof *labels);
    if (!lab8 || !labels) {
        set_err(err, errlen, "%s: out of memory for %llu labels", path, (unsigned long long)n);
        goto fail;
    }
    if (idx_read_body(f, path, lab8, n, &got, n, "label", err, errlen) ||
        idx_expect_end(f, path, n, "labels", err, errlen))
        goto fail;
    for (uint64_t i = 0; i < n; i++) {
        if (lab8[i] >= CDP_CLASSES) {
            set_err(err, errlen, "%s: label %u at index %llu out of range [0, %d)", path,
                    (unsigned)lab8[i], (unsigned long long)i, CDP_CLASSES);
            goto fail;
        }
        labels[i] = lab8[i];
    }
    free(lab8);
    return labels;
fail:
    free(lab8);
    free(labels);
    return NULL;
}

/* Both headers are read before any data, so that a mismatched pair is
 * refused before the pixels are. */
int cdp_load_idx(const char *images_path, const char *labels_path,
                 cdp_dataset *out, char *err, size_t errlen)
{
    if (out)
        memset(out, 0, sizeof *out);
    if (!images_path || !labels_path || !out) {
        set_err(err, errlen, "cdp_load_idx: missing argument");
        return -1;
    }
    uint64_t n = 0, rows = 0, cols = 0;
    uint8_t *pixels = NULL;
    int32_t *labels = NULL;
    gzFile fl = NULL, fi = idx_open_images(images_path, &n, &rows, &cols, err, errlen);
    if (fi)
        fl = idx_open_labels(labels_path, images_path, n, err, errlen);
    if (fl)
        pixels = idx_read_images(fi, images_path, n, rows * cols, err, errlen);
    if (pixels)
        labels = idx_read_labels(fl, labels_path, n, err, errlen);
    if (fi)
        gzclose_r(fi);
    if (fl)
        gzclose_r(fl);
    if (!labels) {
        free(pixels);
        return -1;
    }
    out->n = (int64_t)n;
    out->dim = (int)(rows * cols);
    out->channels = 1;
    out->height = (int)rows;
    out->width = (int)cols;
    out->classes = CDP_CLASSES;
    out->pixels = pixels;
    out->labels = labels;
    return 0;
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
        int fd = cdp_open_regular(path, err, errlen);
        if (fd < 0)
            return -1;
        int sr = fstat(fd, &st);
        int se = errno;
        close(fd);
        if (sr != 0) {
            set_err(err, errlen, "%s: cannot stat: %s", path, strerror(se));
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
        int fd = cdp_open_regular(path, err, errlen);
        if (fd < 0)
            goto fail;
        f = fdopen(fd, "rb");
        if (!f) {
            set_err(err, errlen, "%s: cannot open: %s", path, strerror(errno));
            close(fd);
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
    out->channels = 3;
    out->height = 32;
    out->width = 32;
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
    cdp_data_flat_shape(dim, &out->channels, &out->height, &out->width);
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

void cdp_data_flat_shape(int dim, int *channels, int *height, int *width)
{
    int s = 0;
    while ((int64_t)(s + 1) * (s + 1) <= dim)
        s++;
    *channels = 1;
    if (dim > 0 && s * s == dim) {
        *height = s;
        *width = s;
    } else {
        *height = 1;
        *width = dim;
    }
}

/* A decimal number of digits only, in [lo, hi]; 0 or -1. */
static int parse_count(const char *s, size_t len, int64_t lo, int64_t hi, int64_t *out)
{
    if (len == 0 || len > 18)
        return -1;
    int64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    if (v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

/* The value (len bytes at v) of the sample count field NAME= of --data s,
 * which may be given once: into *slot (0 until then).  what: the set it
 * counts, for the message. */
static int spec_count(const char *s, const char *name, const char *what, const char *v,
                      size_t len, int64_t *slot, char *err, size_t errlen)
{
    if (*slot) {
        set_err(err, errlen, "'%s': %s= is given twice", s, name);
        return -1;
    }
    if (parse_count(v, len, 1, (int64_t)1 << 34, slot) != 0) {
        set_err(err, errlen, "'%s': %s=%.*s: expected a %s sample count in [1, %lld]", s, name,
                (int)len, v, what, (long long)1 << 34);
        return -1;
    }
    return 0;
}

/* The fields after "folder:" of --data s (at p): DIR, then size=S,
 * resize=R, bad=error|skip in any order, each at most once. */
static int folder_spec_parse(const char *s, const char *p, cdp_data_spec *out, char *err,
                             size_t errlen)
{
    const char *usage = "folder:DIR[:size=S][:resize=R][:bad=error|skip][:decoders=T]"
                        "[:prefetch=K]";
    size_t len = strcspn(p, ":");
    if (len == 0) {
        set_err(err, errlen, "'%s': the folder is missing (expected %s)", s, usage);
        return -1;
    }
    if (len >= sizeof out->dir) {
        set_err(err, errlen, "'%.200s...': the folder's path is longer than %zu bytes", s,
                sizeof out->dir - 1);
        return -1;
    }
    memcpy(out->dir, p, len);
    out->dir[len] = '\0';
    while (len > 1 && out->dir[len - 1] == '/')
        out->dir[--len] = '\0';
    p += len;
    int64_t size = 0, resize = 0, decoders = -1, prefetch = -1;
    int bad_given = 0;
    while (*p == ':') {
        p++;
        len = strcspn(p, ":");
        int64_t *slot = len > 5 && !strncmp(p, "size=", 5) ? &size
                      : len > 7 && !strncmp(p, "resize=", 7) ? &resize : NULL;
        if (slot) {
            const size_t nl = slot == &size ? 5 : 7;
            if (*slot) {
                set_err(err, errlen, "'%s': %.*s is given twice", s, (int)nl, p);
                return -1;
            }
            if (parse_count(p + nl, len - nl, 1, 4096, slot) != 0) {
                set_err(err, errlen, "'%s': %.*s: expected a side in pixels in [1, 4096]", s,
                        (int)len, p);
                return -1;
            }
        } else if ((len > 9 && !strncmp(p, "decoders=", 9)) ||
                   (len > 9 && !strncmp(p, "prefetch=", 9))) {
            int64_t *v = p[0] == 'd' ? &decoders : &prefetch;
            if (*v >= 0) {
                set_err(err, errlen, "'%s': %.9s is given twice", s, p);
                return -1;
            }
            if (parse_count(p + 9, len - 9, 0, 256, v) != 0) {
                set_err(err, errlen, "'%s': %.*s: expected a count in [0, 256]", s, (int)len, p);
                return -1;
            }
        } else if (len > 4 && !strncmp(p, "bad=", 4)) {
            if (bad_given++) {
                set_err(err, errlen, "'%s': bad= is given twice", s);
                return -1;
            }
            if (len == 9 && !strncmp(p + 4, "error", 5))
                out->skip_bad = 0;
            else if (len == 8 && !strncmp(p + 4, "skip", 4))
                out->skip_bad = 1;
            else {
                set_err(err, errlen, "'%s': %.*s: expected bad=error or bad=skip", s, (int)len, p);
                return -1;
            }
        } else {
            set_err(err, errlen, "'%s': unknown folder field '%.*s' (expected %s; the folder's "
                    "path cannot hold ':')", s, (int)len, p, usage);
            return -1;
        }
        p += len;
    }
    out->decoders = decoders > 0 ? (int)decoders : 0;
    out->prefetch = prefetch >= 0 ? (int)prefetch : 2;
    out->size = size ? (int)size : 224;
    /* torchvision's ImageNet recipe: Resize(256) for CenterCrop(224) */
    out->resize = resize ? (int)resize : (int)((out->size * 256 + 112) / 224);
    if (out->resize < out->size) {
        set_err(err, errlen, "'%s': resize=%d is smaller than size=%d (the centre crop "
                "must fit)", s, out->resize, out->size);
        return -1;
    }
    return 0;
}

int cdp_data_spec_parse(const char *s, cdp_data_spec *out, char *err, size_t errlen)
{
    static const char *const kinds[] = {"fashion-mnist", "mnist", "cifar10", "synthetic",
                                        "folder"};
    if (!out || !s) {
        set_err(err, errlen, "cdp_data_spec_parse: missing argument");
        return -1;
    }
    memset(out, 0, sizeof *out);
    size_t klen = strcspn(s, ":");
    int k;
    for (k = 0; k < 5; k++)
        if (strlen(kinds[k]) == klen && strncmp(s, kinds[k], klen) == 0)
            break;
    if (k == 5) {
        set_err(err, errlen,
                "'%s': unknown data set (expected fashion-mnist, mnist, cifar10, "
                "synthetic[:CxHxW][:n=TRAIN][:test=TEST] or folder:DIR[:size=S][:resize=R])", s);
        return -1;
    }
    if (k < 3 && s[klen]) {
        set_err(err, errlen, "'%s': %s takes no options after ':' (only synthetic does)",
                s, kinds[k]);
        return -1;
    }
    snprintf(out->kind, sizeof out->kind, "%s", kinds[k]);
    if (k == 4)
        return folder_spec_parse(s, s[klen] ? s + klen + 1 : s + klen, out, err, errlen);
    const char *p = s + klen;
    while (*p == ':') {
        p++;
        size_t len = strcspn(p, ":");
        if (len > 2 && strncmp(p, "n=", 2) == 0) {
            if (spec_count(s, "n", "training", p + 2, len - 2, &out->train_n, err, errlen))
                return -1;
        } else if (len > 5 && strncmp(p, "test=", 5) == 0) {
            if (spec_count(s, "test", "test", p + 5, len - 5, &out->test_n, err, errlen))
                return -1;
        } else if (len > 0 && p[0] >= '0' && p[0] <= '9') {
            if (out->channels) {
                set_err(err, errlen, "'%s': the image shape is given twice", s);
                return -1;
            }
            int64_t d[3];
            const char *q = p, *end = p + len;
            int nd = 0, ok = 1;
            while (ok && nd < 3) {
                const char *x = memchr(q, 'x', (size_t)(end - q));
                const char *e = x ? x : end;
                ok = parse_count(q, (size_t)(e - q), 1, 1 << 20, &d[nd]) == 0;
                nd++;
                if (!x)
                    break;
                q = x + 1;
                if (nd == 3)
                    ok = 0;     /* a fourth dimension */
            }
            if (!ok || nd != 3) {
                set_err(err, errlen, "'%s': bad image shape '%.*s': expected CxHxW, three "
                        "numbers in [1, %d] such as 3x32x32", s, (int)len, p, 1 << 20);
                return -1;
            }
            if ((uint64_t)d[0] * (uint64_t)d[1] * (uint64_t)d[2] > CDP_MAX_DIM) {
                set_err(err, errlen, "'%s': images of %.*s = %llu bytes are larger than the "
                        "%llu bytes allowed", s, (int)len, p,
                        (unsigned long long)((uint64_t)d[0] * (uint64_t)d[1] * (uint64_t)d[2]),
                        (unsigned long long)CDP_MAX_DIM);
                return -1;
            }
            out->channels = (int)d[0];
            out->height = (int)d[1];
            out->width = (int)d[2];
        } else {
            set_err(err, errlen, "'%s': unknown synthetic field '%.*s' (expected CxHxW, n=TRAIN "
                    "or test=TEST)", s, (int)len, p);
            return -1;
        }
        p += len;
    }
    if (out->channels) {
        uint64_t dim = (uint64_t)out->channels * (uint64_t)out->height * (uint64_t)out->width;
        int64_t m = out->train_n > out->test_n ? out->train_n : out->test_n;
        if ((uint64_t)m * dim > CDP_MAX_BYTES) {
            set_err(err, errlen, "'%s': %lld images of %llu bytes are more than the %llu "
                    "bytes allowed", s, (long long)m, (unsigned long long)dim,
                    (unsigned long long)CDP_MAX_BYTES);
            return -1;
        }
    }
    return 0;
}

void cdp_data_spec_numerics(const char *spec, char *buf, size_t len)
{
    cdp_data_spec s;
    if (strncmp(spec, "folder:", 7) || cdp_data_spec_parse(spec, &s, NULL, 0) != 0)
        snprintf(buf, len, "%s", spec);
    else
        snprintf(buf, len, "folder:size=%d:resize=%d%s", s.size, s.resize,
                 s.skip_bad ? ":bad=skip" : "");
}

void cdp_data_synthetic_counts(const cdp_data_spec *s, int dim, int64_t step_samples,
                               int64_t *train_n, int64_t *test_n)
{
    int64_t tr = s ? s->train_n : 0, te = s ? s->test_n : 0;
    if (dim < 1)
        dim = 1;
    if (!tr) {
        int64_t cap = SYN_DEFAULT_BYTES / dim;
        tr = cap < SYN_TRAIN_N ? cap : SYN_TRAIN_N;
        if (tr < step_samples)
            tr = step_samples;
        if (tr < 1)
            tr = 1;
    }
    if (!te)
        te = tr / 4 > 1 ? tr / 4 : 1;
    *train_n = tr;
    *test_n = te;
}

int cdp_data_default_dir(const char *kind, char *buf, size_t len)
{
    if (!buf || len == 0)
        return -1;
    buf[0] = '\0';
    if (!kind)
        return -1;
    if (strcmp(kind, "synthetic") == 0 || strcmp(kind, "folder") == 0)
        return 0;
    if (strcmp(kind, "fashion-mnist") && strcmp(kind, "mnist") && strcmp(kind, "cifar10"))
        return -1;
    const char *root = getenv("CDP_DATA_DIR");
    int w;
    if (root && *root) {
        size_t rl = strlen(root);
        while (rl > 1 && root[rl - 1] == '/')
            rl--;
        w = snprintf(buf, len, "%.*s/%s", (int)rl, root, kind);
    } else {
        w = snprintf(buf, len, "/usr/share/datasets/%s", kind);
    }
    if (w < 0 || (size_t)w >= len) {
        buf[0] = '\0';
        return -1;
    }
    return 0;
}

/* Where to get the files of a kind (one clause, no newline). */
static void kind_hint(const char *kind, const char *dir, char *buf, size_t len)
{
    if (strcmp(kind, "fashion-mnist") == 0)
        snprintf(buf, len, "the Debian package dataset-fashion-mnist provides "
                 "/usr/share/datasets/fashion-mnist");
    else if (strcmp(kind, "mnist") == 0)
        snprintf(buf, len, "MNIST: download train-images-idx3-ubyte.gz, "
                 "train-labels-idx1-ubyte.gz, t10k-images-idx3-ubyte.gz and "
                 "t10k-labels-idx1-ubyte.gz from https://ossci-datasets.s3.amazonaws.com/mnist/ "
                 "into %.512s, or give --data-dir", dir);
    else
        snprintf(buf, len, "CIFAR-10: extract "
                 "https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz into %.512s, "
                 "or give --data-dir", dir);
}

/* Whether anything (even a dangling link, a FIFO or a loop) is at path:
 * such a thing is then opened and reported for what it is, not skipped. */
static int path_present(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0;
}

/* dir/name.gz if present, else dir/name; 0 or -1 (error written). */
static int find_idx_file(const char *kind, const char *dir, const char *name, char *path,
                         size_t pathlen, char *err, size_t errlen)
{
    int w = snprintf(path, pathlen, "%s/%s.gz", dir, name);
    if (w < 0 || (size_t)w >= pathlen) {
        set_err(err, errlen, "%s: path too long", dir);
        return -1;
    }
    if (path_present(path))
        return 0;
    snprintf(path, pathlen, "%s/%s", dir, name);
    if (path_present(path))
        return 0;
    char hint[1024];
    kind_hint(kind, dir, hint, sizeof hint);
    set_err(err, errlen, "%s/%s.gz: cannot open: %s (nor %s); %s", dir, name,
            strerror(ENOENT), name, hint);
    return -1;
}

/* The directory must exist; if not, the error names the first file that
 * was looked for, and where to get it. */
static int check_dir(const char *dir, const char *kind, const char *first,
                     char *err, size_t errlen)
{
    struct stat st;
    if (stat(dir, &st) != 0) {
        int e = errno;
        char hint[1024];
        kind_hint(kind, dir, hint, sizeof hint);
        if (e == ENOENT)
            set_err(err, errlen, "%s/%s: cannot open: the directory %s does not exist; %s",
                    dir, first, dir, hint);
        else
            set_err(err, errlen, "%s/%s: cannot open: directory %s: %s; %s",
                    dir, first, dir, strerror(e), hint);
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        set_err(err, errlen, "%s: %s data directory: %s", dir, kind, strerror(ENOTDIR));
        return -1;
    }
    return 0;
}

static int synthetic_sets(int64_t ntrain, int64_t ntest, int c, int h, int w,
                          uint64_t seed, cdp_data *out, char *err, size_t errlen)
{
    int64_t dim = (int64_t)c * h * w;
    if (dim < 1 || (uint64_t)dim > CDP_MAX_DIM) {
        set_err(err, errlen, "synthetic: bad image size %lld", (long long)dim);
        return -1;
    }
    int64_t m = ntrain > ntest ? ntrain : ntest;
    if (ntrain < 1 || ntest < 1 || (uint64_t)m * (uint64_t)dim > CDP_MAX_BYTES) {
        set_err(err, errlen, "synthetic: %lld train and %lld test samples of %lld bytes: "
                "bad counts (at most %llu bytes per set)", (long long)ntrain,
                (long long)ntest, (long long)dim, (unsigned long long)CDP_MAX_BYTES);
        return -1;
    }
    if (make_synthetic_stream(ntrain, (int)dim, seed, STREAM_SYN_TRAIN, &out->train) != 0 ||
        make_synthetic_stream(ntest, (int)dim, seed, STREAM_SYN_TEST, &out->test) != 0) {
        cdp_data_free(out);
        set_err(err, errlen, "synthetic: out of memory for %lld + %lld samples of %lld bytes",
                (long long)ntrain, (long long)ntest, (long long)dim);
        return -1;
    }
    cdp_dataset *sets[2] = {&out->train, &out->test};
    for (int k = 0; k < 2; k++) {
        sets[k]->channels = c;
        sets[k]->height = h;
        sets[k]->width = w;
    }
    snprintf(out->name, sizeof out->name, "%s", "synthetic");
    return 0;
}

int cdp_data_synthetic(int dim, uint64_t seed, cdp_data *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (dim < 1 || dim > (1 << 24)) {
        set_err(err, errlen, "synthetic: bad image size %d", dim);
        return -1;
    }
    int c, h, w;
    cdp_data_flat_shape(dim, &c, &h, &w);
    return synthetic_sets(SYN_TRAIN_N, SYN_TEST_N, c, h, w, seed, out, err, errlen);
}

static int load_idx_dir(const char *kind, const char *dir, cdp_data *out,
                        char *err, size_t errlen)
{
    static const char *const names[2][2] = {
        {"train-images-idx3-ubyte", "train-labels-idx1-ubyte"},
        {"t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"},
    };
    char p1[4096], p2[4096];
    if (check_dir(dir, kind, "train-images-idx3-ubyte.gz", err, errlen) != 0)
        return -1;
    for (int s = 0; s < 2; s++) {
        if (find_idx_file(kind, dir, names[s][0], p1, sizeof p1, err, errlen) != 0 ||
            find_idx_file(kind, dir, names[s][1], p2, sizeof p2, err, errlen) != 0)
            return -1;
        if (cdp_load_idx(p1, p2, s == 0 ? &out->train : &out->test, err, errlen) != 0)
            return -1;
    }
    if (out->train.dim != out->test.dim || out->train.height != out->test.height) {
        set_err(err, errlen, "%s: training images are %dx%d but test images %dx%d",
                dir, out->train.height, out->train.width, out->test.height, out->test.width);
        return -1;
    }
    return 0;
}

static int load_cifar_dir(const char *dir, cdp_data *out, char *err, size_t errlen)
{
    char p1[4096], p2[4096];
    if (check_dir(dir, "cifar10", "data_batch_1.bin", err, errlen) != 0)
        return -1;
    /* Accept the directory of the extracted archive, or its parent. */
    const char *base = dir;
    char sub[4000];  /* leaves room in p1 for the file name */
    if (strlen(dir) >= sizeof sub - 32) {
        set_err(err, errlen, "%.200s...: path too long", dir);
        return -1;
    }
    int w = snprintf(p1, sizeof p1, "%s/data_batch_1.bin", dir);
    if (w > 0 && (size_t)w < sizeof p1 && !path_present(p1)) {
        w = snprintf(sub, sizeof sub, "%s/cifar-10-batches-bin", dir);
        if (w > 0 && (size_t)w < sizeof sub) {
            w = snprintf(p1, sizeof p1, "%s/data_batch_1.bin", sub);
            if (w > 0 && (size_t)w < sizeof p1 && path_present(p1))
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
    w = snprintf(p2, sizeof p2, "%s/test_batch.bin", base);
    if (w < 0 || (size_t)w >= sizeof p2) {
        set_err(err, errlen, "%s: path too long", dir);
        return -1;
    }
    /* a missing file says where to get the set */
    for (int k = 0; k < 6; k++) {
        const char *q = k < 5 ? tp[k] : p2;
        if (!path_present(q)) {
            char hint[1024];
            kind_hint("cifar10", dir, hint, sizeof hint);
            set_err(err, errlen, "%s: cannot open: %s; %s", q, strerror(ENOENT), hint);
            return -1;
        }
    }
    const char *testp[1] = {p2};
    if (cdp_load_cifar10(tp, 5, &out->train, err, errlen) != 0 ||
        cdp_load_cifar10(testp, 1, &out->test, err, errlen) != 0)
        return -1;
    return 0;
}

int cdp_data_open(const char *spec, const char *dir, uint64_t seed, int64_t step_samples,
                  int input_dim, cdp_data *out, char *err, size_t errlen)
{
    cdp_data_spec s;
    char defdir[4096];

    if (out)
        memset(out, 0, sizeof *out);
    if (!out || !spec) {
        set_err(err, errlen, "cdp_data_open: missing argument");
        return -1;
    }
    if (cdp_data_spec_parse(spec, &s, err, errlen) != 0)
        return -1;

    if (strcmp(s.kind, "synthetic") == 0) {
        int c = s.channels, h = s.height, w = s.width;
        if (!c) {
            int dim = input_dim > 0 ? input_dim : SYN_DIM;
            if (dim > (1 << 24)) {
                set_err(err, errlen, "synthetic: bad image size %d", dim);
                return -1;
            }
            cdp_data_flat_shape(dim, &c, &h, &w);
        }
        int64_t ntrain, ntest;
        cdp_data_synthetic_counts(&s, c * h * w, step_samples, &ntrain, &ntest);
        return synthetic_sets(ntrain, ntest, c, h, w, seed, out, err, errlen);
    }

    if (strcmp(s.kind, "folder") == 0)
        return cdp_image_folder_open(&s, out, err, errlen);

    if (!dir || !*dir) {
        if (cdp_data_default_dir(s.kind, defdir, sizeof defdir) != 0) {
            set_err(err, errlen, "%s: no data directory given and $CDP_DATA_DIR is too long",
                    s.kind);
            return -1;
        }
        dir = defdir;
    }
    int rc = strcmp(s.kind, "cifar10") == 0 ? load_cifar_dir(dir, out, err, errlen)
                                             : load_idx_dir(s.kind, dir, out, err, errlen);
    if (rc != 0) {
        cdp_data_free(out);
        return -1;
    }
    snprintf(out->name, sizeof out->name, "%s", s.kind);
    return 0;
}

int cdp_data_load(const char *kind, const char *dir, uint64_t seed,
                  cdp_data *out, char *err, size_t errlen)
{
    return cdp_data_open(kind, dir, seed, 0, 0, out, err, errlen);
}

int cdp_data_set_transforms(cdp_data *d, const cdp_augment *augment, int norm_count,
                            const float *mean, const float *std, char *err, size_t errlen)
{
    if (!d) {
        set_err(err, errlen, "cdp_data_set_transforms: missing argument");
        return -1;
    }
    const int C = d->train.channels;
    if (d->train.folder && augment && (augment->crop_pad || augment->flip)) {
        set_err(err, errlen, "--augment: the training images of --data folder are already "
                "RandomResizedCrop and RandomHorizontalFlip (drop --augment)");
        return -1;
    }
    if (augment && (augment->crop_pad < 0 || augment->crop_pad > (1 << 20) ||
                    augment->flip < 0 || augment->flip > 1)) {
        set_err(err, errlen, "--augment: bad values (crop=%d, flip=%d)", augment->crop_pad,
                augment->flip);
        return -1;
    }
    float *norm[2] = {NULL, NULL};
    if (norm_count) {
        if (!mean || !std || norm_count < 0 || (norm_count != 1 && norm_count != C)) {
            char give[32] = "give 1 mean and 1 std";
            if (C > 1)
                snprintf(give, sizeof give, "give 1 or %d of each", C);
            set_err(err, errlen, "--normalize: %d means and stds but %s images have "
                    "%d channel%s (%s)", norm_count, d->name[0] ? d->name : "the",
                    C, C == 1 ? "" : "s", give);
            return -1;
        }
        for (int c = 0; c < norm_count; c++)
            if (!isfinite(mean[c]) || !isfinite(std[c]) || !(std[c] > 0.0f)) {
                set_err(err, errlen, "--normalize: channel %d: mean %g, std %g (finite "
                        "values and std > 0 expected)", c, (double)mean[c], (double)std[c]);
                return -1;
            }
        if (d->test.channels != C) {
            set_err(err, errlen, "--normalize: training images have %d channels but test "
                    "images %d", C, d->test.channels);
            return -1;
        }
        for (int k = 0; k < 2; k++) {
            norm[k] = malloc(2 * (size_t)C * sizeof(float));
            if (!norm[k]) {
                free(norm[0]);
                set_err(err, errlen, "--normalize: out of memory");
                return -1;
            }
            for (int c = 0; c < C; c++) {
                norm[k][c] = mean[norm_count == 1 ? 0 : c];
                norm[k][C + c] = std[norm_count == 1 ? 0 : c];
            }
        }
    }
    free(d->train.norm);
    free(d->test.norm);
    d->train.norm = norm[0];
    d->test.norm = norm[1];
    memset(&d->train.augment, 0, sizeof d->train.augment);
    memset(&d->test.augment, 0, sizeof d->test.augment);
    if (augment)
        d->train.augment = *augment;
    return 0;
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
