/* safetensors files: the generic reader/writer (cdp_st_*) and the model's
 * weight files on top of it.
 *
 * Layout: u64 little-endian header length N, N bytes of JSON (padded with
 * spaces so that the data starts 8-byte aligned), then the tensors' raw
 * little-endian bytes at data_offsets relative to the start of the data. */
#include "io/safetensors.h"
#include "io/output.h"
#include "io/json.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define ST_MAX_HEADER ((uint64_t)100000000) /* 100 MB, as in the reference implementation */
#define ST_MAX_VALUES ((size_t)1 << 21)

/* ------------------------------------------------------------- utilities */

/* "<path>: <problem>" into err, on one line; returns -1. */
static int st_fail(char *err, size_t errlen, const char *path, const char *fmt, ...)
{
    if (!err || !errlen)
        return -1;
    int k = snprintf(err, errlen, "%s: ", path ? path : "(null)");
    if (k >= 0 && (size_t)k < errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err + k, errlen - (size_t)k, fmt, ap);
        va_end(ap);
    }
    for (char *c = err; *c; c++) /* names come from the file: keep one line */
        if ((unsigned char)*c < 0x20 || *c == 0x7F)
            *c = '?';
    return -1;
}

static int host_is_le(void)
{
    const uint16_t one = 1;
    return *(const unsigned char *)&one == 1;
}

static void bswap_elems(void *p, size_t count, int esize)
{
    unsigned char *b = p;
    for (size_t i = 0; i < count; i++, b += esize)
        for (int j = 0; j < esize / 2; j++) {
            unsigned char t = b[j];
            b[j] = b[esize - 1 - j];
            b[esize - 1 - j] = t;
        }
}

static int pread_full(int fd, void *buf, size_t n, uint64_t off, size_t *got)
{
    size_t done = 0;
    while (done < n) {
        size_t chunk = n - done > ((size_t)1 << 30) ? (size_t)1 << 30 : n - done;
        ssize_t r = pread(fd, (char *)buf + done, chunk, (off_t)(off + done));
        if (r < 0) {
            if (errno == EINTR)
                continue;
            *got = done;
            return -1;
        }
        if (r == 0)
            break;
        done += (size_t)r;
    }
    *got = done;
    return 0;
}

static int write_full(int fd, const void *buf, size_t n)
{
    size_t done = 0;
    while (done < n) {
        size_t chunk = n - done > ((size_t)1 << 30) ? (size_t)1 << 30 : n - done;
        ssize_t r = write(fd, (const char *)buf + done, chunk);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        done += (size_t)r;
    }
    return 0;
}

static const struct {
    const char *name;
    int size;
} st_dtypes[] = {
    {"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"F8_E4M3", 1}, {"F8_E5M2", 1},
    {"I64", 8}, {"I32", 4}, {"I16", 2}, {"I8", 1},   {"U64", 8},     {"U32", 4},
    {"U16", 2}, {"U8", 1},  {"BOOL", 1},
};

static int dtype_size(const char *d)
{
    for (size_t j = 0; j < sizeof st_dtypes / sizeof st_dtypes[0]; j++)
        if (strcmp(d, st_dtypes[j].name) == 0)
            return st_dtypes[j].size;
    return 0;
}

/* Elements of a shape times esize, 0 on success, -1 on overflow. */
static int shape_bytes(int ndim, const int64_t *shape, int esize, uint64_t *out)
{
    uint64_t n = (uint64_t)esize;
    for (int d = 0; d < ndim; d++) {
        uint64_t s = (uint64_t)shape[d];
        if (s && n > UINT64_MAX / s)
            return -1;
        n *= s;
    }
    *out = n;
    return 0;
}

static void fmt_shape(char *buf, size_t len, int ndim, const int64_t *shape)
{
    size_t k = 0;
    k += (size_t)snprintf(buf + k, len - k, "[");
    for (int d = 0; d < ndim && k < len; d++)
        k += (size_t)snprintf(buf + k, len - k, "%s%" PRId64, d ? ", " : "", shape[d]);
    if (k < len)
        snprintf(buf + k, len - k, "]");
}

/* ----------------------------------------------------------------- reader */

#define ST_MAX_NDIM 8 /* in files; requests have at most 4 */

typedef struct st_entry {
    const char *name;
    const char *dtype;
    int esize;
    int ndim;
    int64_t shape[ST_MAX_NDIM];
    uint64_t begin, end;
    int used;
} st_entry;

typedef struct st_file {
    const char *path;
    int fd;
    uint64_t size, hlen, data_size;
    cdp_json *root;
    const cdp_json *meta;
    st_entry *e; /* sorted by name */
    size_t ne;
} st_file;

static void st_close(st_file *f)
{
    if (f->fd >= 0)
        close(f->fd);
    f->fd = -1;
    cdp_json_free(f->root);
    f->root = NULL;
    free(f->e);
    f->e = NULL;
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp(((const st_entry *)a)->name, ((const st_entry *)b)->name);
}

static int cmp_range(const void *a, const void *b)
{
    const st_entry *x = *(const st_entry *const *)a, *y = *(const st_entry *const *)b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end)
        return x->end < y->end ? -1 : 1;
    return 0;
}

static int st_entry_parse(st_file *f, const cdp_json *v, st_entry *e, char *err, size_t errlen)
{
    const char *nm = v->key, *p = f->path;
    e->name = nm;
    if (v->type != CDP_JSON_OBJECT)
        return st_fail(err, errlen, p, "tensor %s: entry is not an object (found %s)", nm,
                       cdp_json_type_name(v->type));
    const cdp_json *dt = cdp_json_get(v, "dtype");
    if (!dt || dt->type != CDP_JSON_STRING)
        return st_fail(err, errlen, p, "tensor %s: missing or non-string \"dtype\"", nm);
    e->dtype = dt->str;
    e->esize = dtype_size(dt->str);
    if (!e->esize)
        return st_fail(err, errlen, p, "tensor %s: unknown dtype \"%s\"", nm, dt->str);
    const cdp_json *sh = cdp_json_get(v, "shape");
    if (!sh || sh->type != CDP_JSON_ARRAY)
        return st_fail(err, errlen, p, "tensor %s: missing or non-array \"shape\"", nm);
    if (sh->n > ST_MAX_NDIM)
        return st_fail(err, errlen, p, "tensor %s: shape has %zu dimensions, at most %d supported",
                       nm, sh->n, ST_MAX_NDIM);
    e->ndim = (int)sh->n;
    for (size_t d = 0; d < sh->n; d++) {
        if (sh->child[d].type != CDP_JSON_INT || sh->child[d].i < 0)
            return st_fail(err, errlen, p, "tensor %s: shape must hold non-negative integers", nm);
        e->shape[d] = sh->child[d].i;
    }
    uint64_t nbytes;
    if (shape_bytes(e->ndim, e->shape, e->esize, &nbytes))
        return st_fail(err, errlen, p, "tensor %s: shape too large", nm);
    const cdp_json *off = cdp_json_get(v, "data_offsets");
    if (!off || off->type != CDP_JSON_ARRAY || off->n != 2 || off->child[0].type != CDP_JSON_INT ||
        off->child[1].type != CDP_JSON_INT || off->child[0].i < 0 ||
        off->child[1].i < off->child[0].i)
        return st_fail(err, errlen, p,
                       "tensor %s: data_offsets must be [begin, end] with 0 <= begin <= end", nm);
    e->begin = (uint64_t)off->child[0].i;
    e->end = (uint64_t)off->child[1].i;
    if (e->end - e->begin != nbytes) {
        char s[160];
        fmt_shape(s, sizeof s, e->ndim, e->shape);
        return st_fail(err, errlen, p,
                       "tensor %s: data_offsets [%" PRIu64 ", %" PRIu64 "] span %" PRIu64
                       " bytes, but shape %s of %s needs %" PRIu64,
                       nm, e->begin, e->end, e->end - e->begin, s, e->dtype, nbytes);
    }
    return 0;
}

/* Opens path read-only when it names a regular file; f->size: its size. */
static int st_open_file(st_file *f, const char *path, char *err, size_t errlen)
{
    memset(f, 0, sizeof *f);
    f->fd = -1;
    f->path = path;
    if (!path)
        return st_fail(err, errlen, path, "no file name");
    f->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (f->fd < 0)
        return st_fail(err, errlen, path, "cannot open: %s", strerror(errno));
    struct stat st;
    if (fstat(f->fd, &st) != 0)
        return st_fail(err, errlen, path, "cannot stat: %s", strerror(errno));
    if (!S_ISREG(st.st_mode))
        return st_fail(err, errlen, path, "not a regular file");
    f->size = (uint64_t)st.st_size;
    return 0;
}

/* The header length: within the format's limit and the file, so that it
 * can be allocated and read; what follows is the data. */
static int st_read_hlen(st_file *f, char *err, size_t errlen)
{
    const char *path = f->path;
    if (f->size < 8)
        return st_fail(err, errlen, path,
                       "file too short (%" PRIu64 " bytes) to hold a safetensors header length",
                       f->size);
    unsigned char lb[8];
    size_t got;
    if (pread_full(f->fd, lb, 8, 0, &got) != 0)
        return st_fail(err, errlen, path, "cannot read: %s", strerror(errno));
    if (got != 8)
        return st_fail(err, errlen, path, "file too short to hold a safetensors header length");
    for (int j = 7; j >= 0; j--)
        f->hlen = f->hlen << 8 | lb[j];
    if (f->hlen > ST_MAX_HEADER)
        return st_fail(err, errlen, path, "header length %" PRIu64 " exceeds the 100 MB limit",
                       f->hlen);
    if (f->hlen > f->size - 8)
        return st_fail(err, errlen, path,
                       "header length %" PRIu64 " exceeds the file size (%" PRIu64 " bytes)",
                       f->hlen, f->size);
    f->data_size = f->size - 8 - f->hlen;
    return 0;
}

/* The JSON header into f->root: an object. */
static int st_parse_header(st_file *f, char *err, size_t errlen)
{
    const char *path = f->path;
    char *hdr = malloc(f->hlen ? (size_t)f->hlen : 1);
    if (!hdr)
        return st_fail(err, errlen, path, "out of memory for a %" PRIu64 "-byte header", f->hlen);
    size_t got;
    if (pread_full(f->fd, hdr, (size_t)f->hlen, 8, &got) != 0) {
        int e = errno;
        free(hdr);
        return st_fail(err, errlen, path, "cannot read: %s", strerror(e));
    }
    if (got != f->hlen) {
        free(hdr);
        return st_fail(err, errlen, path, "truncated header");
    }
    char jerr[200];
    cdp_json_limits lim = {64, (size_t)ST_MAX_HEADER, ST_MAX_VALUES};
    f->root = cdp_json_parse(hdr, (size_t)f->hlen, &lim, jerr, sizeof jerr);
    free(hdr);
    if (!f->root)
        return st_fail(err, errlen, path, "malformed JSON header: %s", jerr);
    if (f->root->type != CDP_JSON_OBJECT)
        return st_fail(err, errlen, path, "JSON header is not an object (found %s)",
                       cdp_json_type_name(f->root->type));
    return 0;
}

/* The one __metadata__ entry, v: an object of strings. */
static int st_take_metadata(st_file *f, const cdp_json *v, char *err, size_t errlen)
{
    if (f->meta)
        return st_fail(err, errlen, f->path, "duplicate __metadata__");
    if (v->type != CDP_JSON_OBJECT)
        return st_fail(err, errlen, f->path, "__metadata__ is not an object");
    for (size_t k = 0; k < v->n; k++)
        if (v->child[k].type != CDP_JSON_STRING)
            return st_fail(err, errlen, f->path, "__metadata__ value of %s is not a string",
                           v->child[k].key);
    f->meta = v;
    return 0;
}

/* Every other entry of the header is a tensor: f->e, sorted by name, the
 * names unique. */
static int st_collect_tensors(st_file *f, char *err, size_t errlen)
{
    const char *path = f->path;
    size_t cap = 1;
    for (size_t j = 0; j < f->root->n; j++)
        cap += f->root->child[j].type == CDP_JSON_OBJECT;
    f->e = calloc(cap, sizeof *f->e);
    if (!f->e)
        return st_fail(err, errlen, path, "out of memory");
    for (size_t j = 0; j < f->root->n; j++) {
        const cdp_json *v = &f->root->child[j];
        if (strcmp(v->key, "__metadata__") == 0) {
            if (st_take_metadata(f, v, err, errlen))
                return -1;
            continue;
        }
        /* checked here too: only objects have a slot in f->e */
        if (v->type != CDP_JSON_OBJECT)
            return st_fail(err, errlen, path, "tensor %s: entry is not an object (found %s)",
                           v->key, cdp_json_type_name(v->type));
        if (st_entry_parse(f, v, &f->e[f->ne], err, errlen))
            return -1;
        f->ne++;
    }
    qsort(f->e, f->ne, sizeof *f->e, cmp_name);
    for (size_t j = 1; j < f->ne; j++)
        if (strcmp(f->e[j - 1].name, f->e[j].name) == 0)
            return st_fail(err, errlen, path, "duplicate tensor %s", f->e[j].name);
    return 0;
}

/* Data past its end (prev_end, the end of the last range): a truncated
 * file when the ranges leave no gap, else the first tensor out of range
 * (r: the entries by range). */
static int st_range_error(const st_file *f, st_entry *const *r, uint64_t prev_end, int gaps,
                          char *err, size_t errlen)
{
    if (!gaps)
        return st_fail(err, errlen, f->path,
                       "truncated data: the tensors need %" PRIu64
                       " bytes of data, the file has %" PRIu64,
                       prev_end, f->data_size);
    const st_entry *bad = NULL;
    for (size_t j = 0; j < f->ne && !bad; j++)
        if (r[j]->end > f->data_size)
            bad = r[j];
    return st_fail(err, errlen, f->path,
                   "data_offsets of %s [%" PRIu64 ", %" PRIu64
                   "] are out of range: the file has %" PRIu64 " bytes of data",
                   bad->name, bad->begin, bad->end, f->data_size);
}

/* The ranges r (sorted by begin, then end): no overlaps, inside the data,
 * and every byte of the data in one. */
static int st_check_ranges(const st_file *f, st_entry *const *r, char *err, size_t errlen)
{
    const char *path = f->path;
    uint64_t prev_end = 0, hole_begin = 0;
    const st_entry *hole = NULL; /* the first tensor after unindexed bytes */
    for (size_t j = 0; j < f->ne; j++) {
        if (j && r[j]->begin < prev_end)
            return st_fail(err, errlen, path,
                           "data_offsets of %s [%" PRIu64 ", %" PRIu64 "] and %s [%" PRIu64
                           ", %" PRIu64 "] overlap",
                           r[j - 1]->name, r[j - 1]->begin, r[j - 1]->end, r[j]->name,
                           r[j]->begin, r[j]->end);
        if (r[j]->begin > prev_end && !hole) {
            hole = r[j];
            hole_begin = prev_end;
        }
        prev_end = r[j]->end;
    }
    if (prev_end > f->data_size)
        return st_range_error(f, r, prev_end, hole != NULL, err, errlen);
    if (hole)
        return st_fail(err, errlen, path,
                       "%" PRIu64 " unindexed bytes [%" PRIu64 ", %" PRIu64
                       ") before %s: safetensors data must be fully indexed",
                       hole->begin - hole_begin, hole_begin, hole->begin, hole->name);
    if (prev_end < f->data_size)
        return st_fail(err, errlen, path,
                       "%" PRIu64 " byte%s after the last tensor (%s ends at %" PRIu64
                       " of %" PRIu64 " bytes of data): safetensors data must be fully "
                       "indexed",
                       f->data_size - prev_end, f->data_size - prev_end == 1 ? "" : "s",
                       r[f->ne - 1]->name, prev_end, f->data_size);
    return 0;
}

/* Offsets: no overlaps, inside the data, and the data fully indexed (the
 * format's rule: no byte that no tensor owns, between tensors or after the
 * last; such bytes would let a file carry a second payload, and cdp's
 * writer never leaves any). */
static int st_check_offsets(const st_file *f, char *err, size_t errlen)
{
    if (!f->ne && f->data_size)
        return st_fail(err, errlen, f->path,
                       "%" PRIu64 " bytes of data but no tensors: safetensors data must be "
                       "fully indexed",
                       f->data_size);
    if (!f->ne)
        return 0;
    st_entry **r = malloc(f->ne * sizeof *r);
    if (!r)
        return st_fail(err, errlen, f->path, "out of memory");
    for (size_t j = 0; j < f->ne; j++)
        r[j] = &f->e[j];
    qsort(r, f->ne, sizeof *r, cmp_range);
    const int rc = st_check_ranges(f, r, err, errlen);
    free(r);
    return rc;
}

/* Opens and validates the whole header against the file.  The caller
 * closes f (st_close) whatever the outcome. */
static int st_open(st_file *f, const char *path, char *err, size_t errlen)
{
    if (st_open_file(f, path, err, errlen) || st_read_hlen(f, err, errlen) ||
        st_parse_header(f, err, errlen) || st_collect_tensors(f, err, errlen))
        return -1;
    return st_check_offsets(f, err, errlen);
}

static st_entry *st_find(st_file *f, const char *name)
{
    st_entry key;
    memset(&key, 0, sizeof key);
    key.name = name;
    return f->ne ? bsearch(&key, f->e, f->ne, sizeof *f->e, cmp_name) : NULL;
}

/* Checks the requests against the file (expects: wording for the shape
 * error), then reads the data into the requests' dst. */
static int st_load(st_file *f, cdp_st_tensor *t, int n, int strict, const char *expects,
                   char *err, size_t errlen)
{
    const char *p = f->path;
    if (n < 0 || (n > 0 && !t))
        return st_fail(err, errlen, p, "invalid tensor list");
    for (int i = 0; i < n; i++) {
        if (!t[i].name || !t[i].dtype || !dtype_size(t[i].dtype) || t[i].ndim < 0 || t[i].ndim > 4)
            return st_fail(err, errlen, p, "invalid request for tensor %s",
                           t[i].name ? t[i].name : "(null)");
        st_entry *e = st_find(f, t[i].name);
        if (!e)
            return st_fail(err, errlen, p, "missing tensor %s", t[i].name);
        if (strcmp(e->dtype, t[i].dtype) != 0)
            return st_fail(err, errlen, p, "%s has dtype %s, expected %s", t[i].name, e->dtype,
                           t[i].dtype);
        int same = e->ndim == t[i].ndim;
        for (int d = 0; same && d < e->ndim; d++)
            same = e->shape[d] == t[i].shape[d];
        if (!same) {
            char a[160], b[160];
            fmt_shape(a, sizeof a, e->ndim, e->shape);
            fmt_shape(b, sizeof b, t[i].ndim, t[i].shape);
            return st_fail(err, errlen, p, "%s has shape %s, %s %s", t[i].name, a, expects, b);
        }
        e->used = 1;
    }
    if (strict)
        for (size_t j = 0; j < f->ne; j++)
            if (!f->e[j].used)
                return st_fail(err, errlen, p, "unexpected tensor %s", f->e[j].name);
    for (int i = 0; i < n; i++) {
        st_entry *e = st_find(f, t[i].name);
        size_t nbytes = (size_t)(e->end - e->begin), got;
        if (!t[i].dst || !nbytes)
            continue;
        if ((uint64_t)nbytes != e->end - e->begin)
            return st_fail(err, errlen, p, "tensor %s too large for this machine", e->name);
        if (pread_full(f->fd, t[i].dst, nbytes, 8 + f->hlen + e->begin, &got) != 0)
            return st_fail(err, errlen, p, "cannot read: %s", strerror(errno));
        if (got != nbytes)
            return st_fail(err, errlen, p, "truncated data in tensor %s", e->name);
        if (!host_is_le())
            bswap_elems(t[i].dst, nbytes / (size_t)e->esize, e->esize);
    }
    return 0;
}

int cdp_st_read(const char *path, cdp_st_tensor *t, int n, int strict, char *err, size_t errlen)
{
    st_file f;
    int rc = st_open(&f, path, err, errlen);
    if (rc == 0)
        rc = st_load(&f, t, n, strict, "expected", err, errlen);
    st_close(&f);
    return rc;
}

int cdp_st_read_meta(const char *path, const char *key, char *out, size_t outlen, char *err,
                     size_t errlen)
{
    st_file f;
    int rc = st_open(&f, path, err, errlen);
    if (rc == 0) {
        const cdp_json *v = key ? cdp_json_get(f.meta, key) : NULL;
        if (!v)
            rc = st_fail(err, errlen, path, "no metadata \"%s\"", key ? key : "(null)");
        else if (!out || v->len >= outlen)
            rc = st_fail(err, errlen, path, "metadata \"%s\" is too long (%zu bytes)", key, v->len);
        else
            memcpy(out, v->str, v->len + 1);
    }
    st_close(&f);
    return rc;
}

/* ---------------------------------------------------------------- CRC-32C */

#define CRC32C_POLY 0x82F63B78u /* x^32 + x^28 + x^27 + ... + 1, bits reversed */

static uint32_t crc_table[8][256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

/* crc_table[0]: one byte at a time; crc_table[k][b]: byte b followed by
 * k zero bytes, so that 8 bytes fold in with 8 look-ups. */
static void crc_init(void)
{
    for (uint32_t b = 0; b < 256; b++) {
        uint32_t c = b;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? (c >> 1) ^ CRC32C_POLY : c >> 1;
        crc_table[0][b] = c;
    }
    for (int k = 1; k < 8; k++)
        for (int b = 0; b < 256; b++)
            crc_table[k][b] = (crc_table[k - 1][b] >> 8) ^ crc_table[0][crc_table[k - 1][b] & 0xFF];
}

uint32_t cdp_crc32c(uint32_t crc, const void *data, size_t n)
{
    pthread_once(&crc_once, crc_init);
    const unsigned char *p = data;
    uint32_t c = ~crc;
    for (; n >= 8; n -= 8, p += 8) {
        const uint32_t lo = c ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                                 (uint32_t)p[3] << 24);
        c = crc_table[7][lo & 0xFF] ^ crc_table[6][(lo >> 8) & 0xFF] ^
            crc_table[5][(lo >> 16) & 0xFF] ^ crc_table[4][lo >> 24] ^ crc_table[3][p[4]] ^
            crc_table[2][p[5]] ^ crc_table[1][p[6]] ^ crc_table[0][p[7]];
    }
    while (n--)
        c = crc_table[0][(c ^ *p++) & 0xFF] ^ (c >> 8);
    return ~c;
}

uint32_t cdp_st_tensors_crc32c(const cdp_st_tensor *t, int n)
{
    uint32_t crc = 0;
    for (int i = 0; i < n; i++) {
        const int es = t[i].dtype ? dtype_size(t[i].dtype) : 0;
        uint64_t nb;
        if (!es || t[i].ndim < 0 || t[i].ndim > 4 || shape_bytes(t[i].ndim, t[i].shape, es, &nb) ||
            nb > (uint64_t)SIZE_MAX || !t[i].data)
            continue; /* cdp_st_write refuses these */
        if (host_is_le()) {
            crc = cdp_crc32c(crc, t[i].data, (size_t)nb);
            continue;
        }
        unsigned char chunk[1 << 12];
        for (size_t done = 0; done < nb;) {
            size_t m = nb - done < sizeof chunk ? (size_t)(nb - done) : sizeof chunk;
            memcpy(chunk, (const unsigned char *)t[i].data + done, m);
            bswap_elems(chunk, m / (size_t)es, es);
            crc = cdp_crc32c(crc, chunk, m);
            done += m;
        }
    }
    return crc;
}

int cdp_st_data_crc32c(const char *path, uint32_t *crc, char *err, size_t errlen)
{
    st_file f;
    int rc = st_open(&f, path, err, errlen);
    if (rc == 0) {
        enum { CHUNK = 1 << 20 };
        unsigned char *buf = malloc(CHUNK);
        uint32_t c = 0;
        if (!buf)
            rc = st_fail(err, errlen, path, "out of memory");
        for (uint64_t done = 0; rc == 0 && done < f.data_size;) {
            size_t want = f.data_size - done < CHUNK ? (size_t)(f.data_size - done) : CHUNK, got;
            if (pread_full(f.fd, buf, want, 8 + f.hlen + done, &got) != 0)
                rc = st_fail(err, errlen, path, "cannot read: %s", strerror(errno));
            else if (got != want)
                rc = st_fail(err, errlen, path, "truncated data");
            else
                c = cdp_crc32c(c, buf, want);
            done += want;
        }
        free(buf);
        if (rc == 0)
            *crc = c;
    }
    st_close(&f);
    return rc;
}

/* ----------------------------------------------------------------- writer */

typedef struct sbuf {
    char *s;
    size_t n, cap;
    int oom;
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (b->n + n + 1 > b->cap) {
        size_t nc = b->cap ? b->cap : 256;
        while (nc < b->n + n + 1)
            nc *= 2;
        char *x = realloc(b->s, nc);
        if (!x) {
            b->oom = 1;
            return;
        }
        b->s = x;
        b->cap = nc;
    }
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = '\0';
}

static void sb_str(sbuf *b, const char *s) { sb_put(b, s, strlen(s)); }

static void sb_json(sbuf *b, const char *s)
{
    char small[256];
    size_t need = cdp_json_escape(small, sizeof small, s);
    if (need < sizeof small) {
        sb_put(b, small, need);
        return;
    }
    char *big = malloc(need + 1);
    if (!big) {
        b->oom = 1;
        return;
    }
    cdp_json_escape(big, need + 1, s);
    sb_put(b, big, need);
    free(big);
}

static void sb_u64(sbuf *b, uint64_t x)
{
    char t[24];
    sb_put(b, t, (size_t)snprintf(t, sizeof t, "%" PRIu64, x));
}

static void fsync_dir_of(const char *path)
{
    char *d = strdup(path);
    if (!d)
        return;
    char *slash = strrchr(d, '/');
    const char *dir = ".";
    if (slash) {
        slash[slash == d ? 1 : 0] = '\0';
        dir = d;
    }
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
    free(d);
}

/* The temporary file being written, for cdp_st_discard_pending: set after
 * the name is complete, cleared before it is renamed or removed. */
static char pending_tmp[4096];
static volatile sig_atomic_t pending_set;

void cdp_st_discard_pending(void)
{
    if (pending_set)
        unlink(pending_tmp);
}

/* Tensor i of t is one cdp_st_write can write (a name of its own, F32 or
 * I64, at most 4 dimensions, data when it has bytes); *nb: its bytes. */
static int st_check_tensor(const cdp_st_tensor *t, int i, uint64_t *nb, const char *path,
                           char *err, size_t errlen)
{
    const cdp_st_tensor *x = &t[i];
    int es = x->dtype ? dtype_size(x->dtype) : 0;
    if (!x->name || strcmp(x->name, "__metadata__") == 0)
        return st_fail(err, errlen, path, "invalid tensor name %s", x->name ? x->name : "(null)");
    if (!es || (strcmp(x->dtype, "F32") != 0 && strcmp(x->dtype, "I64") != 0))
        return st_fail(err, errlen, path, "tensor %s: unsupported dtype %s", x->name,
                       x->dtype ? x->dtype : "(null)");
    int bad = x->ndim < 0 || x->ndim > 4;
    for (int d = 0; !bad && d < x->ndim; d++)
        bad = x->shape[d] < 0;
    if (bad || shape_bytes(x->ndim, x->shape, es, nb) || *nb > (uint64_t)SIZE_MAX)
        return st_fail(err, errlen, path, "tensor %s: invalid shape", x->name);
    if (*nb && !x->data)
        return st_fail(err, errlen, path, "tensor %s: no data", x->name);
    for (int k = 0; k < i; k++)
        if (strcmp(t[k].name, x->name) == 0)
            return st_fail(err, errlen, path, "duplicate tensor name %s", x->name);
    return 0;
}

/* "__metadata__":{key:value,...} of the NULL-terminated key, value list. */
static int sb_metadata(sbuf *h, const char *const *metadata, const char *path, char *err,
                       size_t errlen)
{
    sb_str(h, "\"__metadata__\":{");
    for (int k = 0; metadata[k]; k += 2) {
        if (!metadata[k + 1])
            return st_fail(err, errlen, path, "metadata %s has no value", metadata[k]);
        if (k)
            sb_str(h, ",");
        sb_json(h, metadata[k]);
        sb_str(h, ":");
        sb_json(h, metadata[k + 1]);
    }
    sb_str(h, "}");
    return 0;
}

/* name:{"dtype":..,"shape":[..],"data_offsets":[off, off + nb]} of tensor
 * x, whose data starts at *off; *off moves past it. */
static int sb_tensor(sbuf *h, const cdp_st_tensor *x, uint64_t nb, uint64_t *off,
                     const char *path, char *err, size_t errlen)
{
    sb_json(h, x->name);
    sb_str(h, ":{\"dtype\":\"");
    sb_str(h, x->dtype);
    sb_str(h, "\",\"shape\":[");
    for (int d = 0; d < x->ndim; d++) {
        if (d)
            sb_str(h, ",");
        sb_u64(h, (uint64_t)x->shape[d]);
    }
    sb_str(h, "],\"data_offsets\":[");
    sb_u64(h, *off);
    sb_str(h, ",");
    if (nb > (uint64_t)INT64_MAX - *off) /* readers take offsets as int64 */
        return st_fail(err, errlen, path, "tensors too large");
    *off += nb;
    sb_u64(h, *off);
    sb_str(h, "]}");
    return 0;
}

/* The JSON header of the checked tensors t (nb: their bytes), padded with
 * spaces so that the data starts 8-byte aligned. */
static int st_build_header(sbuf *h, const cdp_st_tensor *t, int n, const uint64_t *nb,
                           const char *const *metadata, const char *path, char *err,
                           size_t errlen)
{
    sb_str(h, "{");
    int first = 1;
    if (metadata && metadata[0]) {
        if (sb_metadata(h, metadata, path, err, errlen))
            return -1;
        first = 0;
    }
    uint64_t off = 0;
    for (int i = 0; i < n; i++) {
        if (!first)
            sb_str(h, ",");
        first = 0;
        if (sb_tensor(h, &t[i], nb[i], &off, path, err, errlen))
            return -1;
    }
    sb_str(h, "}");
    while (!h->oom && (8 + h->n) % 8)   /* out of memory, h->n stops growing */
        sb_str(h, " ");
    if (h->oom)
        return st_fail(err, errlen, path, "out of memory");
    if ((uint64_t)h->n > ST_MAX_HEADER)
        return st_fail(err, errlen, path, "header of %zu bytes exceeds the 100 MB limit", h->n);
    return 0;
}

/* The data of tensor x (nb bytes), little-endian.  0, or -1 with errno. */
static int st_write_tensor(int fd, const cdp_st_tensor *x, uint64_t nb)
{
    if (host_is_le())
        return write_full(fd, x->data, (size_t)nb);
    int es = dtype_size(x->dtype);
    unsigned char chunk[1 << 16];
    for (size_t done = 0; done < nb;) {
        size_t m = nb - done < sizeof chunk ? (size_t)(nb - done) : sizeof chunk;
        memcpy(chunk, (const unsigned char *)x->data + done, m);
        bswap_elems(chunk, m / (size_t)es, es);
        if (write_full(fd, chunk, m))
            return -1;
        done += m;
    }
    return 0;
}

/* The whole file: header length, header h, the tensors' data.  0, or -1
 * with errno. */
static int st_write_contents(int fd, const sbuf *h, const cdp_st_tensor *t, int n,
                             const uint64_t *nb)
{
    unsigned char lb[8];
    for (int j = 0; j < 8; j++)
        lb[j] = (unsigned char)((uint64_t)h->n >> (8 * j));
    if (write_full(fd, lb, 8) || write_full(fd, h->s, h->n))
        return -1;
    for (int i = 0; i < n; i++)
        if (nb[i] && st_write_tensor(fd, &t[i], nb[i]))
            return -1;
    return 0;
}

/* Where cdp_st_write puts the bytes: path itself (in place) or the
 * temporary file tmp that is renamed onto path. */
typedef struct st_output {
    const char *path;
    char *tmp;
    int fd, in_place;
} st_output;

/* A character device or a FIFO, opened as it is. */
static int st_output_open_in_place(st_output *o, char *err, size_t errlen)
{
    o->fd = open(o->path, O_WRONLY | O_NOCTTY | O_CLOEXEC);
    if (o->fd < 0)
        return st_fail(err, errlen, o->path, "cannot open for writing: %s", strerror(errno));
    return 0;
}

/* PATH.tmp.HOST.PID, recorded for cdp_st_discard_pending before it
 * exists so that a signal cannot leave it behind. */
static int st_output_create_tmp(st_output *o, char *err, size_t errlen)
{
    size_t tl = strlen(o->path) + 300;
    o->tmp = malloc(tl);
    if (!o->tmp)
        return st_fail(err, errlen, o->path, "out of memory");
    cdp_output_tmp_name(o->path, o->tmp, tl);
    if (tl <= sizeof pending_tmp) {
        memcpy(pending_tmp, o->tmp, tl);
        pending_set = 1;
    }
    o->fd = open(o->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (o->fd < 0)
        return st_fail(err, errlen, o->path, "cannot create %s: %s", o->tmp, strerror(errno));
    return 0;
}

/* A regular file (or none): a temporary file, fsync, rename, so that a
 * reader never sees half a file.  A character device or a FIFO: in place,
 * never replaced (a rename would put a regular file where /dev/null was)
 * and not synced (devices need not support fsync). */
static int st_output_open(st_output *o, char *err, size_t errlen)
{
    const char *what;
    const cdp_output_kind kind = cdp_output_kind_of(o->path, &what);
    if (kind == CDP_OUTPUT_REFUSED)
        return st_fail(err, errlen, o->path, "cannot write to %s", what);
    o->in_place = kind == CDP_OUTPUT_IN_PLACE;
    return o->in_place ? st_output_open_in_place(o, err, errlen)
                       : st_output_create_tmp(o, err, errlen);
}

/* A write, fsync or close of the output failed with errno. */
static int st_output_write_error(const st_output *o, char *err, size_t errlen)
{
    if (o->in_place)
        return st_fail(err, errlen, o->path, "cannot write: %s", strerror(errno));
    return st_fail(err, errlen, o->path, "cannot write %s: %s", o->tmp, strerror(errno));
}

/* The bytes are all written: sync and close, and put the temporary file
 * in place of path. */
static int st_output_commit(st_output *o, char *err, size_t errlen)
{
    if (!o->in_place && fsync(o->fd) != 0)
        return st_output_write_error(o, err, errlen);
    const int c = close(o->fd);
    o->fd = -1;
    if (c != 0)
        return st_output_write_error(o, err, errlen);
    if (o->in_place)
        return 0;
    pending_set = 0;
    if (rename(o->tmp, o->path) != 0)
        return st_fail(err, errlen, o->path, "cannot rename %s: %s", o->tmp, strerror(errno));
    fsync_dir_of(o->path);
    return 0;
}

/* After success or failure (rc): nothing left open, and a failed write
 * leaves no temporary file. */
static void st_output_end(st_output *o, int rc)
{
    pending_set = 0;
    if (o->fd >= 0)
        close(o->fd);
    if (rc != 0 && o->tmp)
        unlink(o->tmp);
    free(o->tmp);
}

int cdp_st_write(const char *path, const cdp_st_tensor *t, int n, const char *const *metadata,
                 char *err, size_t errlen)
{
    if (!path)
        return st_fail(err, errlen, path, "no file name");
    if (n < 0 || (n > 0 && !t))
        return st_fail(err, errlen, path, "invalid tensor list");
    uint64_t *nb = calloc((size_t)n + 1, sizeof *nb);
    if (!nb)
        return st_fail(err, errlen, path, "out of memory");
    sbuf h = {NULL, 0, 0, 0};
    st_output o = {path, NULL, -1, 0};
    int rc = 0;
    for (int i = 0; rc == 0 && i < n; i++)
        rc = st_check_tensor(t, i, &nb[i], path, err, errlen);
    if (rc == 0)
        rc = st_build_header(&h, t, n, nb, metadata, path, err, errlen);
    if (rc == 0)
        rc = st_output_open(&o, err, errlen);
    if (rc == 0 && st_write_contents(o.fd, &h, t, n, nb) != 0)
        rc = st_output_write_error(&o, err, errlen);
    if (rc == 0)
        rc = st_output_commit(&o, err, errlen);
    st_output_end(&o, rc);
    free(h.s);
    free(nb);
    return rc;
}

/* --------------------------------------------------------------- weights */

/* The model's tensors (cdp_model.tensors) as safetensors entries: float
 * tensors at their offsets, the update counters as int64 scalars. */
static cdp_st_tensor *model_tensors(const cdp_model *m, const char *path, char *err,
                                    size_t errlen)
{
    if (!m || m->ntensors < 1 || !m->tensors) {
        st_fail(err, errlen, path, "invalid model");
        return NULL;
    }
    cdp_st_tensor *t = calloc((size_t)m->ntensors, sizeof *t);
    if (!t) {
        st_fail(err, errlen, path, "out of memory");
        return NULL;
    }
    for (int j = 0; j < m->ntensors; j++) {
        const cdp_tensor_info *ti = &m->tensors[j];
        t[j].name = ti->name;
        t[j].ndim = ti->ndim;
        memcpy(t[j].shape, ti->shape, sizeof t[j].shape);
        t[j].dtype = ti->kind == CDP_TENSOR_COUNTER ? "I64" : "F32";
        if (ti->kind != CDP_TENSOR_COUNTER && ti->off + ti->n > m->nparams) {
            free(t);
            st_fail(err, errlen, path, "invalid model layout at %s", ti->name);
            return NULL;
        }
    }
    return t;
}

int cdp_save_weights(const char *path, const cdp_model *m, const float *host_params,
                     int64_t updates, const char *const *metadata, char *err, size_t errlen)
{
    if (!host_params)
        return st_fail(err, errlen, path, "no parameters");
    cdp_st_tensor *t = model_tensors(m, path, err, errlen);
    if (!t)
        return -1;
    for (int j = 0; j < m->ntensors; j++)
        t[j].data = m->tensors[j].kind == CDP_TENSOR_COUNTER ? (const void *)&updates
                                                              : host_params + m->tensors[j].off;
    int rc = cdp_st_write(path, t, m->ntensors, metadata, err, errlen);
    free(t);
    return rc;
}

int cdp_load_weights(const char *path, const cdp_model *m, float *host_params, char *err,
                     size_t errlen)
{
    if (!host_params)
        return st_fail(err, errlen, path, "no parameter buffer");
    cdp_st_tensor *t = model_tensors(m, path, err, errlen);
    if (!t)
        return -1;
    /* into a buffer of its own first: a refused file leaves host_params
     * as it was */
    int64_t *counters = calloc((size_t)m->ntensors, sizeof *counters);
    float *tmp = malloc((m->nparams ? m->nparams : 1) * sizeof(float));
    if (!counters || !tmp) {
        free(t);
        free(counters);
        free(tmp);
        return st_fail(err, errlen, path, "out of memory");
    }
    for (int j = 0; j < m->ntensors; j++)
        t[j].dst = m->tensors[j].kind == CDP_TENSOR_COUNTER ? (void *)&counters[j]
                                                           : tmp + m->tensors[j].off;
    st_file f;
    int rc = st_open(&f, path, err, errlen);
    if (rc == 0)
        rc = st_load(&f, t, m->ntensors, 1, "model expects", err, errlen);
    st_close(&f);
    for (int j = 0; rc == 0 && j < m->ntensors; j++) {
        const cdp_tensor_info *ti = &m->tensors[j];
        for (size_t k = 0; ti->kind != CDP_TENSOR_COUNTER && k < ti->n; k++)
            if (!isfinite(tmp[ti->off + k])) {
                rc = st_fail(err, errlen, path, "%s[%zu] is %s: weights must be finite",
                             ti->name, k, isnan(tmp[ti->off + k]) ? "nan" : "inf");
                break;
            }
        /* update counters carry no state of cdp's (the step does): only sane */
        if (ti->kind == CDP_TENSOR_COUNTER && counters[j] < 0)
            rc = st_fail(err, errlen, path, "%s is negative (%lld)", ti->name,
                         (long long)counters[j]);
    }
    for (int j = 0; rc == 0 && j < m->ntensors; j++)
        if (m->tensors[j].kind != CDP_TENSOR_COUNTER)
            memcpy(host_params + m->tensors[j].off, tmp + m->tensors[j].off,
                   m->tensors[j].n * sizeof(float));
    free(counters);
    free(tmp);
    free(t);
    return rc;
}
