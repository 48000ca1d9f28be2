/* libFuzzer harness: the checkpoint reader (cdp_checkpoint_read,
 * src/io/checkpoint.c) for mlp:16-8-10, the model of the seed checkpoints
 * (written by cdp_run: fuzz/seeds.sh).  Each input is read under SGD and
 * AdamW, once with a numerics hash no file has and once with the file's own
 * (so that the reader goes past the hash check to the checksum, the step
 * and the tensors). */
#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "models/model.h"
#include "fuzz_common.h"

static cdp_model model;
static float *cur, *prev, *state;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fuzz_model(&model);
    cur = calloc(model.nparams, sizeof *cur);
    prev = calloc(model.nparams, sizeof *prev);
    state = calloc(2 * model.nparams, sizeof *state);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_file(0, data, size);
    char err[512], v[64];
    uint64_t own = 0x0123456789abcdefULL;
    if (cdp_st_read_meta(path, "numerics", v, sizeof v, err, sizeof err) == 0)
        own = strtoull(v, NULL, 16);
    const uint64_t hashes[2] = { 0x0123456789abcdefULL, own };
    const cdp_optim_kind kinds[2] = { CDP_OPTIM_SGD, CDP_OPTIM_ADAMW };
    for (int h = 0; h < 2; h++)
        for (int k = 0; k < 2; k++) {
            int64_t step = -1;
            err[0] = '\0';
            int rc = cdp_checkpoint_read(path, &model, hashes[h], NULL, kinds[k], &step, cur, prev,
                                         state, err, sizeof err);
            fuzz_check_err(rc, err);
            if (rc == 0 && step < 0)
                abort(); /* a negative step resumed */
        }
    return 0;
}
