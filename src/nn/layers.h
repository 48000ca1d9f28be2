/* Internal: the layer kinds of src/nn, one file each. */
#ifndef CDP_NN_LAYERS_H
#define CDP_NN_LAYERS_H

#include "nn/nn.h"

#define CDP_LAYER_KIND(KIND, ops) extern const cdp_layer_ops cdp_##ops##_ops;
#include "nn/layer_kinds.def"
#undef CDP_LAYER_KIND

/* Shared by several kinds: the output has the input's shape; no FLOPs. */
int cdp_layer_shape_same(cdp_layer *ly, char *err, size_t errlen);
double cdp_layer_no_flops(const cdp_layer *ly, int B, int need_dx);

#endif
