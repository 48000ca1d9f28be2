/* The table of layer kinds (nn/layer_kinds.def). */
#include <stddef.h>
#include "layers.h"

static const cdp_layer_ops *const ops_table[CDP_LAYER_KINDS] = {
#define CDP_LAYER_KIND(KIND, ops) [CDP_LAYER_##KIND] = &cdp_##ops##_ops,
#include "nn/layer_kinds.def"
#undef CDP_LAYER_KIND
};

const cdp_layer_ops *cdp_layer_ops_of(cdp_layer_kind kind)
{
    return (unsigned)kind < CDP_LAYER_KINDS ? ops_table[kind] : NULL;
}

int cdp_layer_shape_same(cdp_layer *ly, char *err, size_t errlen)
{
    (void)err; (void)errlen;
    ly->ys = ly->xs;
    return 0;
}

double cdp_layer_no_flops(const cdp_layer *ly, int B, int need_dx)
{
    (void)ly; (void)B; (void)need_dx;
    return 0.0;
}
