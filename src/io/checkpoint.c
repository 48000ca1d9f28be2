/* Checkpoints, format version 2: a safetensors file with the tensors
 * params, params_prev, then the optimizer state (F32, nparams each: SGD's
 * momentum; AdamW's exp_avg and exp_avg_sq), and step (I64 [1]), in that
 * order, and the metadata
 *   cdp_checkpoint  "2"
 *   numerics        16 hex digits: cdp_options_numerics_hash of the run
 *   step            the step, in decimal (the step tensor's value)
 *   data_crc32c     8 hex digits: CRC-32C (cdp_crc32c) of the whole data
 *                   section, every byte after the header
 *   optimizer       "adamw" (absent: SGD, as in the files cdp wrote before
 *                   AdamW)
 *   options         the options that numerics hashes, as text
 *                   (cdp_options_numerics_text): a refused --resume names
 *                   those that differ (absent from earlier files)
 * Version 1 (cdp before the checksum) had no data_crc32c; it is refused. */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "util/strbuf.h"
#include "ckpt_dir.h"

#define CKPT_VERSION "2"

/* The tensors of a checkpoint of optimizer kind; returns how many.  The
 * optimizer state is nbuf arrays of nparams floats one after the other. */
static int tensors(cdp_st_tensor t[5], const cdp_model *m, cdp_optim_kind kind, int64_t *step)
{
    const int64_t n = (int64_t)m->nparams;
    int k = 0;
    t[k++] = (cdp_st_tensor){ "params", "F32", 1, { n }, NULL, NULL };
    t[k++] = (cdp_st_tensor){ "params_prev", "F32", 1, { n }, NULL, NULL };
    if (kind == CDP_OPTIM_ADAMW) {
        t[k++] = (cdp_st_tensor){ "exp_avg", "F32", 1, { n }, NULL, NULL };
        t[k++] = (cdp_st_tensor){ "exp_avg_sq", "F32", 1, { n }, NULL, NULL };
    } else {
        t[k++] = (cdp_st_tensor){ "momentum", "F32", 1, { n }, NULL, NULL };
    }
    t[k++] = (cdp_st_tensor){ "step", "I64", 1, { 1 }, step, step };
    return k;
}

int cdp_checkpoint_write(const char *path, const cdp_model *m, int64_t step, uint64_t numerics,
                         const char *options, cdp_optim_kind kind, const float *cur, const float *prev,
                         const float *state, char *err, size_t errlen)
{
    cdp_st_tensor t[5];
    const int nt = tensors(t, m, kind, &step);
    t[0].data = cur;
    t[1].data = prev;
    for (int j = 2; j < nt - 1; j++)
        t[j].data = state + (size_t)(j - 2) * m->nparams;
    char hash[32], st[32], crc[16];
    snprintf(hash, sizeof hash, "%016" PRIx64, numerics);
    snprintf(st, sizeof st, "%" PRId64, step);
    snprintf(crc, sizeof crc, "%08" PRIx32, cdp_st_tensors_crc32c(t, nt));
    const char *meta[] = { "cdp_checkpoint", CKPT_VERSION, "numerics", hash, "step", st,
                           "data_crc32c", crc, NULL, NULL, NULL, NULL, NULL };
    int nm = 8;
    if (kind != CDP_OPTIM_SGD) {
        meta[nm++] = "optimizer";
        meta[nm++] = cdp_optim_name(kind);
    }
    if (options) {
        meta[nm++] = "options";
        meta[nm++] = options;
    }
    return cdp_st_write(path, t, nt, meta, err, errlen);
}

/* The value of the entry NAME=VALUE in text (its length in *n), or NULL. */
static const char *value_of(const char *text, const char *name, size_t name_n, size_t *n)
{
    for (const char *p = text; *p;) {
        p += strspn(p, " ");
        const size_t entry = strcspn(p, " ");
        if (entry > name_n && p[name_n] == '=' && !memcmp(p, name, name_n)) {
            *n = entry - name_n - 1;
            return p + name_n + 1;
        }
        p += entry;
    }
    return NULL;
}

/* The entries in which two such texts differ, written into out as "--NAME
 * THEIRS (this run: OURS), ..."; returns how many. */
static int numerics_diff(const char *theirs, const char *ours, char *out, size_t len)
{
    size_t at = 0;
    int count = 0;
    out[0] = '\0';
    /* every entry of ours, then those of theirs that ours lacks (another
     * optimizer's, a cosine schedule's) */
    for (int side = 0; side < 2; side++) {
        const char *text = side ? theirs : ours, *other = side ? ours : theirs;
        for (const char *p = text; *p;) {
            p += strspn(p, " ");
            const size_t entry = strcspn(p, " "), name_n = strcspn(p, "=");
            if (!entry)
                break;
            if (name_n < entry) {
                size_t vn = entry - name_n - 1, on = 0;
                const char *v = p + name_n + 1;
                const char *ov = value_of(other, p, name_n, &on);
                if (side == 0 ? !ov || on != vn || memcmp(ov, v, vn) : !ov) {
                    const char *tv = side ? v : ov, *uv = side ? ov : v;
                    const int tn = side ? (int)vn : (int)on, un = side ? (int)on : (int)vn;
                    cdp_strbuf_add(out, len, &at, "%s%.*s %.*s (this run: %.*s)", count ? ", " : "",
                        (int)name_n, p, tv ? tn : 5, tv ? tv : "unset", uv ? un : 5,
                        uv ? uv : "unset");
                    count++;
                }
            }
            p += entry;
        }
    }
    return count;
}

/* s as a whole decimal int64 ("-0", "+1", " 1", "01" are not the writer's) */
static int parse_step(const char *s, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || s[0] == '+' || s[0] == ' ' ||
        (s[0] == '0' && s[1]) || (s[0] == '-' && (s[1] == '0' || !s[1])))
        return -1;
    *out = v;
    return 0;
}

int cdp_checkpoint_read(const char *path, const cdp_model *m, uint64_t numerics,
                        const char *options, cdp_optim_kind kind, int64_t *step, float *cur, float *prev,
                        float *state, char *err, size_t errlen)
{
    char v[64], want[32];
    if (cdp_st_read_meta(path, "cdp_checkpoint", v, sizeof v, err, errlen)) {
        if (!strstr(err, path) || strstr(err, "no metadata"))
            snprintf(err, errlen, "%s: not a cdp checkpoint (no cdp_checkpoint metadata)", path);
        return -1;
    }
    if (strcmp(v, CKPT_VERSION)) {
        if (!strcmp(v, "1"))
            snprintf(err, errlen, "%s: checkpoint format version 1 (written by an earlier cdp, "
                     "without a checksum) is no longer read; this cdp reads version "
                     CKPT_VERSION ": start the run again, or finish it with the cdp that wrote it",
                     path);
        else
            snprintf(err, errlen, "%s: unknown checkpoint format version \"%.32s\" (this cdp "
                     "reads version " CKPT_VERSION ")", path, v);
        return -1;
    }
    /* the optimizer before the hash, which it changes: the one line then
     * names what differs */
    char opt[32] = "sgd";
    if (cdp_st_read_meta(path, "optimizer", v, sizeof v, err, errlen) == 0)
        snprintf(opt, sizeof opt, "%.20s", v);
    if (strcmp(opt, cdp_optim_name(kind))) {
        snprintf(err, errlen, "%s: written by an --optimizer %s run, cannot resume with "
                 "--optimizer %s (its state is another optimizer's)", path, opt,
                 cdp_optim_name(kind));
        return CDP_CKPT_FOREIGN;
    }
    snprintf(want, sizeof want, "%016" PRIx64, numerics);
    if (cdp_st_read_meta(path, "numerics", v, sizeof v, err, errlen) || strcmp(v, want)) {
        char theirs[4096], diff[4096];
        if (options && cdp_st_read_meta(path, "options", theirs, sizeof theirs, err, errlen) == 0 &&
            numerics_diff(theirs, options, diff, sizeof diff) > 0) {
            snprintf(err, errlen, "%s: written by a run with %s; resume with the options of the "
                     "run that wrote it", path, diff);
            return CDP_CKPT_FOREIGN;
        }
        snprintf(err, errlen, "%s: written with other --model/--stages/--workers/--batch/--rule/"
                 "optimizer/schedule/--seed/data/--flush-denormals options; resume with the options "
                 "of the run that wrote it", path);
        return CDP_CKPT_FOREIGN;
    }
    /* the checksum first: a damaged file is reported as damaged */
    char crc_meta[16], crc_file[16];
    uint32_t crc;
    if (cdp_st_read_meta(path, "data_crc32c", crc_meta, sizeof crc_meta, err, errlen)) {
        snprintf(err, errlen, "%s: damaged checkpoint: no data_crc32c checksum in its metadata",
                 path);
        return -1;
    }
    if (cdp_st_data_crc32c(path, &crc, err, errlen))
        return -1;
    snprintf(crc_file, sizeof crc_file, "%08" PRIx32, crc);
    if (strcmp(crc_meta, crc_file)) {
        snprintf(err, errlen, "%s: damaged checkpoint: the data's CRC-32C checksum is %s, the "
                 "file says %.12s (a changed or corrupted byte)", path, crc_file, crc_meta);
        return -1;
    }
    int64_t meta_step;
    if (cdp_st_read_meta(path, "step", v, sizeof v, err, errlen) || parse_step(v, &meta_step)) {
        snprintf(err, errlen, "%s: damaged checkpoint: no step, or not a number, in its metadata",
                 path);
        return -1;
    }
    cdp_st_tensor t[5];
    const int nt = tensors(t, m, kind, step);
    t[0].dst = cur;
    t[1].dst = prev;
    for (int j = 2; j < nt - 1; j++)
        t[j].dst = state + (size_t)(j - 2) * m->nparams;
    if (cdp_st_read(path, t, nt, 1, err, errlen))
        return -1;
    if (*step != meta_step) {
        snprintf(err, errlen, "%s: inconsistent checkpoint: its step tensor says %" PRId64
                 ", its metadata says step %" PRId64, path, *step, meta_step);
        return -1;
    }
    if (*step < 0) {
        snprintf(err, errlen, "%s: negative step %" PRId64, path, *step);
        return -1;
    }
    return 0;
}

/* ------------------------------------------------- names, rotation, latest */

void cdp_checkpoint_name(const char *stem, int keep, int64_t step, char *out, size_t n)
{
    if (keep <= 1)
        snprintf(out, n, "%s", stem);
    else
        snprintf(out, n, "%s.step-%08" PRId64, stem, step);
}

/* The directory and the last component of stem. */
int cdp_ckpt_dir_open(const char *stem, char *dir, size_t dirlen, const char **base, DIR **d,
                      char *err, size_t errlen)
{
    const char *slash = strrchr(stem, '/');
    *base = slash ? slash + 1 : stem;
    if (!slash)
        snprintf(dir, dirlen, ".");
    else
        snprintf(dir, dirlen, "%.*s", slash == stem ? 1 : (int)(slash - stem), stem);
    *d = opendir(dir);
    if (*d || errno == ENOENT)
        return 0;
    snprintf(err, errlen, "%s: cannot list the directory: %s", dir, strerror(errno));
    return -1;
}

/* The step of a directory entry named base.step-DIGITS, else -1 (temporary
 * files base.step-N.tmp.HOST.PID and anything else do not match). */
static int64_t entry_step(const char *name, const char *base)
{
    const size_t bl = strlen(base);
    if (strncmp(name, base, bl) || strncmp(name + bl, ".step-", 6))
        return -1;
    const char *d = name + bl + 6;
    if (!*d || strlen(d) > 18)
        return -1;
    for (const char *c = d; *c; c++)
        if (*c < '0' || *c > '9')
            return -1;
    return (int64_t)strtoll(d, NULL, 10);
}

static int by_step_desc(const void *a, const void *b)
{
    const cdp_checkpoint_file *x = a, *y = b;
    if (x->step != y->step)
        return x->step < y->step ? 1 : -1;
    return x->numbered < y->numbered ? 1 : x->numbered > y->numbered ? -1 : 0;
}

int cdp_checkpoint_list(const char *stem, cdp_checkpoint_file **files, size_t *count,
                        char *err, size_t errlen)
{
    char dir[4096];
    const char *base;
    *files = NULL;
    *count = 0;
    size_t cap = 0;
    DIR *d;
    if (cdp_ckpt_dir_open(stem, dir, sizeof dir, &base, &d, err, errlen))
        return -1;
    if (!d)   /* no directory: no checkpoint */
        return 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        int64_t step = -1;
        int numbered = 0;
        if (!strcmp(e->d_name, base)) {
            char v[64];
            char why[256];
            if (cdp_st_read_meta(stem, "step", v, sizeof v, why, sizeof why) ||
                parse_step(v, &step))
                step = -1;   /* still a candidate: reading it says what is wrong */
        } else if ((step = entry_step(e->d_name, base)) >= 0) {
            numbered = 1;
        } else {
            continue;
        }
        if (*count == cap) {
            cap = cap ? 2 * cap : 8;
            cdp_checkpoint_file *f = realloc(*files, cap * sizeof **files);
            if (!f) {
                closedir(d);
                free(*files);
                *files = NULL;
                *count = 0;
                snprintf(err, errlen, "out of memory listing the checkpoints of %s", stem);
                return -1;
            }
            *files = f;
        }
        cdp_checkpoint_file *f = &(*files)[(*count)++];
        f->step = step;
        f->numbered = numbered;
        if (numbered)
            cdp_checkpoint_name(stem, 2, step, f->path, sizeof f->path);
        else
            snprintf(f->path, sizeof f->path, "%s", stem);
    }
    closedir(d);
    if (*count > 1)
        qsort(*files, *count, sizeof **files, by_step_desc);
    return 0;
}

int cdp_checkpoint_prune(const char *stem, int keep, int64_t step, char *err, size_t errlen)
{
    cdp_checkpoint_file *f;
    size_t n;
    if (keep <= 1)
        return 0;
    if (cdp_checkpoint_list(stem, &f, &n, err, errlen))
        return -1;
    int rc = 0, kept = 0;
    for (size_t j = 0; j < n; j++) {
        if (!f[j].numbered || f[j].step > step)
            continue;   /* the plain file, and another run's later ones, are not ours */
        if (kept < keep) {
            kept++;
            continue;
        }
        if (unlink(f[j].path) && errno != ENOENT && !rc) {
            snprintf(err, errlen, "%s: cannot remove an old checkpoint: %s", f[j].path,
                     strerror(errno));
            rc = -1;
        }
    }
    free(f);
    return rc;
}
