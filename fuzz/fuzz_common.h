/* Shared by the libFuzzer harnesses: the readers take file names, so each
 * input is written to a scratch file of the process (in /dev/shm when it
 * can be written, else $TMPDIR or /tmp), removed at exit. */
#ifndef CDP_FUZZ_COMMON_H
#define CDP_FUZZ_COMMON_H

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FUZZ_MAX_FILES 4

static char fuzz_paths[FUZZ_MAX_FILES][256];

static void fuzz_cleanup(void)
{
    for (int k = 0; k < FUZZ_MAX_FILES; k++)
        if (fuzz_paths[k][0])
            unlink(fuzz_paths[k]);
}

/* The name of scratch file k (created on first use). */
static const char *fuzz_path(int k)
{
    if (!fuzz_paths[k][0]) {
        const char *dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : getenv("TMPDIR");
        if (!dir || !*dir)
            dir = "/tmp";
        if (k == 0 || !fuzz_paths[0][0])
            atexit(fuzz_cleanup);
        snprintf(fuzz_paths[k], sizeof fuzz_paths[k], "%s/cdp-fuzz-%d-XXXXXX", dir, k);
        int fd = mkstemp(fuzz_paths[k]);
        if (fd < 0) {
            perror("mkstemp");
            abort();
        }
        close(fd);
    }
    return fuzz_paths[k];
}

/* Writes data[0..n) as scratch file k; returns its name. */
static const char *fuzz_file(int k, const uint8_t *data, size_t n)
{
    const char *p = fuzz_path(k);
    int fd = open(p, O_WRONLY | O_TRUNC);
    if (fd < 0) {
        perror(p);
        abort();
    }
    size_t done = 0;
    while (done < n) {
        ssize_t w = write(fd, data + done, n - done);
        if (w <= 0) {
            perror(p);
            abort();
        }
        done += (size_t)w;
    }
    close(fd);
    return p;
}

/* The readers' contract: on failure, one non-empty line in err. */
static void fuzz_check_err(int rc, const char *err)
{
    if (rc != 0 && (!err[0] || strchr(err, '\n'))) {
        fprintf(stderr, "reader failed (%d) without one line of error: \"%s\"\n", rc, err);
        abort();
    }
}

#ifdef CDP_MODELS_MODEL_H
/* The model of the seed weights and checkpoints (fuzz/seeds.sh). */
static void fuzz_model(cdp_model *m)
{
    char err[256];
    if (cdp_model_parse("mlp:16-8-10", 1, m, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        abort();
    }
}
#endif

#endif
