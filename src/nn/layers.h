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

/* The Linear kernels of a call (Linear, attention's projections): the
 * bfloat16 ones under --precision bf16, whose operands the stage and the
 * layer have rounded (doc/reference.md section 3.12). */
#define CDP_LINEAR_FWD(io) ((io)->lowp ? (io)->be->linear_fwd_bf16 : (io)->be->linear_fwd)
#define CDP_LINEAR_BWD(io) ((io)->lowp ? (io)->be->linear_bwd_bf16 : (io)->be->linear_bwd)

#endif
