/* libFuzzer harness: the safetensors reader (src/io/safetensors.c, its JSON
 * header through src/io/json.c): the input is one file, read as the weights
 * of mlp:16-8-10 (cdp_load_weights), generically (cdp_st_read, strict and
 * not), for its metadata and for its data checksum. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "io/safetensors.h"
#include "models/model.h"
#include "fuzz_common.h"

static cdp_model model;
static float *params;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fuzz_model(&model);
    params = calloc(model.nparams, sizeof *params);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_file(0, data, size);
    char err[512] = "";
    int rc = cdp_load_weights(path, &model, params, err, sizeof err);
    fuzz_check_err(rc, err);

    /* the tensors of a checkpoint of that model, as cdp_checkpoint_read asks */
    const int64_t n = (int64_t)model.nparams;
    static float a[1024], b[1024];
    int64_t step = 0;
    cdp_st_tensor t[3] = {
        { "params", "F32", 1, { n }, NULL, a },
        { "params_prev", "F32", 1, { n }, NULL, b },
        { "step", "I64", 1, { 1 }, NULL, &step },
    };
    for (int strict = 0; strict < 2; strict++) {
        err[0] = '\0';
        rc = cdp_st_read(path, t, 3, strict, err, sizeof err);
        fuzz_check_err(rc, err);
    }
    err[0] = '\0';
    rc = cdp_st_read(path, NULL, 0, 0, err, sizeof err);
    fuzz_check_err(rc, err);

    char out[16];
    static const char *const keys[] = { "cdp_checkpoint", "step", "format", "" };
    for (int k = 0; k < 4; k++) {
        err[0] = '\0';
        rc = cdp_st_read_meta(path, keys[k], out, sizeof out, err, sizeof err);
        fuzz_check_err(rc, err);
        if (rc == 0 && strlen(out) >= sizeof out)
            abort();
    }
    uint32_t crc;
    err[0] = '\0';
    rc = cdp_st_data_crc32c(path, &crc, err, sizeof err);
    fuzz_check_err(rc, err);
    return 0;
}
