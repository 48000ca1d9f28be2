/* Tests of mlp: models read their Linear layers through this view of the
 * model's tensor list (fc{j}.weight, fc{j}.bias in order): widths and
 * offsets, as the tests' own double-precision MLPs need them. */
#ifndef CDP_TESTS_MLP_VIEW_H
#define CDP_TESTS_MLP_VIEW_H

#include <stdlib.h>
#include "models/model.h"

typedef struct mlp_view {
    int nlayers;
    int dims[CDP_MAX_LAYERS + 1];
    size_t w_off[CDP_MAX_LAYERS], b_off[CDP_MAX_LAYERS];
} mlp_view;

static inline const mlp_view *MV(const cdp_model *m)
{
    static mlp_view v;
    v.nlayers = m->ntensors / 2;
    if (v.nlayers > CDP_MAX_LAYERS) abort();
    for (int j = 0; j < v.nlayers; j++) {
        v.w_off[j] = m->tensors[2 * j].off;
        v.b_off[j] = m->tensors[2 * j + 1].off;
        v.dims[j] = (int)m->tensors[2 * j].shape[1];
        v.dims[j + 1] = (int)m->tensors[2 * j].shape[0];
    }
    return &v;
}

#endif
