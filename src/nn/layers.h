/* Internal: the layer kinds of src/nn, one file each. */
#ifndef CDP_NN_LAYERS_H
#define CDP_NN_LAYERS_H

#include "cdp/nn.h"

extern const cdp_layer_ops cdp_linear_ops, cdp_conv2d_ops, cdp_batchnorm2d_ops, cdp_relu_ops,
    cdp_maxpool2d_ops, cdp_avgpool_ops, cdp_flatten_ops, cdp_add_ops, cdp_layernorm_ops,
    cdp_gelu_ops, cdp_attention_ops, cdp_class_token_ops, cdp_pos_embed_ops,
    cdp_token_select_ops;

/* Shared by several kinds: the output has the input's shape; no FLOPs. */
int cdp_layer_shape_same(cdp_layer *ly, char *err, size_t errlen);
double cdp_layer_no_flops(const cdp_layer *ly, int B, int need_dx);

#endif
