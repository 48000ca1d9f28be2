/* The model as cdp/model.h hands it out: built on the heap from a name,
 * and what a user may ask of it (its stages, its tensors). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/model.h"

int cdp_model_create(const char *name, cdp_shape input, int classes, int stages,
                     cdp_model **m, char *err, size_t errlen)
{
    *m = NULL;
    if (input.c < 0 || input.h < 0 || input.w < 0 || classes < 0 ||
        (input.c > 0 && (input.h < 1 || input.w < 1))) {
        snprintf(err, errlen, "cdp_model_create: input %dx%dx%d, classes %d: expected positive "
                 "sizes (or 0 for the model's own)", input.c, input.h, input.w, classes);
        return -1;
    }
    cdp_model *built = malloc(sizeof *built);
    if (!built) abort();
    cdp_model_config c = { name, stages, input, classes, 1, CDP_BALANCE_FLOPS,
                           CDP_PRECISION_FP32 };
    if (cdp_model_build(&c, built, err, errlen)) {
        free(built);
        return -1;
    }
    *m = built;
    return 0;
}

void cdp_model_destroy(cdp_model *m)
{
    if (!m)
        return;
    cdp_model_free(m);
    free(m);
}

int cdp_model_stage_count(const cdp_model *m)
{
    return m->nstages;
}

size_t cdp_model_param_floats(const cdp_model *m)
{
    return m->nparams;
}

int cdp_model_tensor_count(const cdp_model *m)
{
    return m->ntensors;
}

const char *cdp_model_tensor(const cdp_model *m, int j, int *ndim, int64_t shape[4],
                             size_t *offset, size_t *count)
{
    if (j < 0 || j >= m->ntensors)
        return NULL;
    const cdp_tensor_info *t = &m->tensors[j];
    if (ndim)
        *ndim = t->ndim;
    if (shape)
        memcpy(shape, t->shape, sizeof t->shape);
    if (offset)
        *offset = t->off;
    if (count)
        *count = t->kind == CDP_TENSOR_COUNTER ? 0 : t->n;
    return t->name;
}
