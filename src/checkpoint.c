#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include "cdp/checkpoint.h"
#include "cdp/ckpt.h"

static void tensors(cdp_st_tensor t[4], const cdp_model *m, int64_t *step)
{
    const int64_t n = (int64_t)m->nparams;
    t[0] = (cdp_st_tensor){ "params", "F32", 1, { n }, NULL, NULL };
    t[1] = (cdp_st_tensor){ "params_prev", "F32", 1, { n }, NULL, NULL };
    t[2] = (cdp_st_tensor){ "momentum", "F32", 1, { n }, NULL, NULL };
    t[3] = (cdp_st_tensor){ "step", "I64", 1, { 1 }, step, step };
}

int cdp_checkpoint_write(const char *path, const cdp_model *m, int64_t step, uint64_t numerics,
                         const float *cur, const float *prev, const float *momentum,
                         char *err, size_t errlen)
{
    cdp_st_tensor t[4];
    tensors(t, m, &step);
    t[0].data = cur;
    t[1].data = prev;
    t[2].data = momentum;
    char hash[32], st[32];
    snprintf(hash, sizeof hash, "%016" PRIx64, numerics);
    snprintf(st, sizeof st, "%" PRId64, step);
    const char *meta[] = { "cdp_checkpoint", "1", "numerics", hash, "step", st, NULL };
    return cdp_st_write(path, t, 4, meta, err, errlen);
}

int cdp_checkpoint_read(const char *path, const cdp_model *m, uint64_t numerics, int64_t *step,
                        float *cur, float *prev, float *momentum, char *err, size_t errlen)
{
    char v[64], want[32];
    if (cdp_st_read_meta(path, "cdp_checkpoint", v, sizeof v, err, errlen)) {
        if (!strstr(err, path))
            snprintf(err, errlen, "%s: not a cdp checkpoint (no cdp_checkpoint metadata)", path);
        return -1;
    }
    snprintf(want, sizeof want, "%016" PRIx64, numerics);
    if (cdp_st_read_meta(path, "numerics", v, sizeof v, err, errlen) || strcmp(v, want)) {
        snprintf(err, errlen, "%s: written with other --model/--stages/--workers/--batch/--rule/"
                 "SGD/--seed/data options; resume with the options of the run that wrote it", path);
        return -1;
    }
    cdp_st_tensor t[4];
    tensors(t, m, step);
    t[0].dst = cur;
    t[1].dst = prev;
    t[2].dst = momentum;
    if (cdp_st_read(path, t, 4, 1, err, errlen))
        return -1;
    if (*step < 0) {
        snprintf(err, errlen, "%s: negative step %" PRId64, path, *step);
        return -1;
    }
    return 0;
}
