/* The output files of a run, checked before it starts: two options naming
 * one file, and outputs that cannot be written where they are named. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "run/options.h"
#include "io/output.h"

/* The file an output path names: its inode when it exists; else the real
 * path of its directory and its last component, after following dangling
 * symbolic links (key). */
typedef struct out_file {
    int exists, chr;
    dev_t dev;
    ino_t ino;
    char key[2 * PATH_MAX + 2];
} out_file;

static void out_file_of(const char *path, out_file *f)
{
    char cur[PATH_MAX], next[PATH_MAX];
    memset(f, 0, sizeof *f);
    snprintf(cur, sizeof cur, "%s", path);
    for (int hop = 0; hop < 40; hop++) {   /* 40: the kernel's own limit */
        struct stat st;
        if (stat(cur, &st) == 0) {
            f->exists = 1;
            f->chr = S_ISCHR(st.st_mode);
            f->dev = st.st_dev;
            f->ino = st.st_ino;
            return;
        }
        char target[PATH_MAX];
        ssize_t n;
        if (lstat(cur, &st) != 0 || !S_ISLNK(st.st_mode) ||
            (n = readlink(cur, target, sizeof target - 1)) <= 0)
            break;
        target[n] = '\0';
        const char *slash = strrchr(cur, '/');
        int k = target[0] == '/' || !slash
                    ? snprintf(next, sizeof next, "%s", target)
                    : snprintf(next, sizeof next, "%.*s/%s", (int)(slash - cur), cur, target);
        if (k < 0 || (size_t)k >= sizeof next)
            break;
        memcpy(cur, next, (size_t)k + 1);
    }
    char dir[PATH_MAX], real[PATH_MAX];
    const char *slash = strrchr(cur, '/'), *base = slash ? slash + 1 : cur;
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else
        snprintf(dir, sizeof dir, "%.*s", slash == cur ? 1 : (int)(slash - cur), cur);
    if (realpath(dir, real))
        snprintf(f->key, sizeof f->key, "%s/%s", strcmp(real, "/") ? real : "", base);
    else   /* a directory that is not there: the write will say so */
        snprintf(f->key, sizeof f->key, "%s", cur);
}

int cdp_options_check_outputs(const cdp_options *o, char *err, size_t errlen)
{
    const struct { const char *opt, *path; } out[] = {
        { "--checkpoint", o->checkpoint }, { "--save-weights", o->save_weights },
        { "--metrics", o->metrics }, { "--trace", o->trace },
    };
    enum { NOUT = sizeof out / sizeof out[0] };
    out_file *f = calloc(NOUT, sizeof *f);
    if (!f) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (int i = 0; i < NOUT; i++)
        if (out[i].path[0])
            out_file_of(out[i].path, &f[i]);
    int rc = 0;
    for (int i = 0; i < NOUT && !rc; i++)
        for (int j = i + 1; j < NOUT && !rc; j++) {
            if (!out[i].path[0] || !out[j].path[0] || f[i].exists != f[j].exists)
                continue;
            int same = f[i].exists ? f[i].dev == f[j].dev && f[i].ino == f[j].ino && !f[i].chr
                                   : strcmp(f[i].key, f[j].key) == 0;
            if (same) {
                snprintf(err, errlen, "%s %.400s and %s %.400s name the same file: each output "
                         "needs a file of its own", out[i].opt, out[i].path, out[j].opt,
                         out[j].path);
                rc = -1;
            }
        }
    free(f);
    return rc;
}

int cdp_options_check_output_dirs(const cdp_options *o, char *err, size_t errlen)
{
    const struct { const char *opt, *path; int dir; } out[] = {
        { "--checkpoint", o->checkpoint, 1 }, { "--save-weights", o->save_weights, 1 },
        { "--metrics", o->metrics, 0 }, { "--trace", o->trace, 0 },
    };
    for (size_t i = 0; i < sizeof out / sizeof out[0]; i++) {
        if (!out[i].path[0])
            continue;
        /* what the path names decides how it is written (io/output.h) */
        const char *what;
        const cdp_output_kind kind = cdp_output_kind_of(out[i].path, &what);
        if (kind == CDP_OUTPUT_REFUSED) {
            snprintf(err, errlen, "%s %.900s: it is %s: an output must be a regular file "
                     "(replaced), a character device or a FIFO (written in place)", out[i].opt,
                     out[i].path, what);
            return -1;
        }
        /* the files replaced through a temporary file in their directory;
         * the streams and the devices written in place need none */
        if (!out[i].dir || kind == CDP_OUTPUT_IN_PLACE)
            continue;
        char dir[PATH_MAX];
        const char *slash = strrchr(out[i].path, '/');
        if (!slash)
            snprintf(dir, sizeof dir, ".");
        else if (slash == out[i].path)
            snprintf(dir, sizeof dir, "/");
        else
            snprintf(dir, sizeof dir, "%.*s", (int)(slash - out[i].path), out[i].path);
        struct stat st;
        const char *why = stat(dir, &st) != 0      ? strerror(errno)
                          : !S_ISDIR(st.st_mode)    ? "not a directory"
                          : access(dir, W_OK | X_OK) ? strerror(errno)
                                                     : NULL;
        if (why) {
            snprintf(err, errlen, "%s %.900s: the directory %.900s cannot take it (%s); it is "
                     "written by rank 0, on rank 0's host", out[i].opt, out[i].path, dir, why);
            return -1;
        }
    }
    return 0;
}

