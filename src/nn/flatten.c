/* Flatten: [C,H,W] -> [C*H*W], a view of the same storage: no work. */
#include "layers.h"

static int shape(cdp_layer *ly, char *err, size_t errlen)
{
    (void)err; (void)errlen;
    ly->ys = (cdp_shape){ (int)cdp_shape_n(ly->xs), 1, 1 };
    return 0;
}

const cdp_layer_ops cdp_flatten_ops = {
    .name = "flatten", .storage = CDP_STORAGE_VIEW, .shape = shape, .flops = cdp_layer_no_flops,
};
