/* ReLU6 (nn.ReLU6), in place like ReLU: its output is its input's storage,
 * and its backward masks the gradient by the output, in place too.  It is
 * not a ReLU to the fusion of cdp_layer_ops.relu: the layers that fuse a
 * ReLU apply max(x, 0), not the clamp to 6. */
#include "layers.h"

static void fwd(const cdp_layer *ly, const cdp_layer_io *io, int train)
{
    (void)train;
    io->be->relu6_fwd((size_t)io->B * cdp_shape_n(ly->ys), io->y);
}

static void bwd(const cdp_layer *ly, const cdp_layer_io *io)
{
    io->be->relu6_bwd((size_t)io->B * cdp_shape_n(ly->ys), io->y, io->dx);
}

const cdp_layer_ops cdp_relu6_ops = {
    .name = "relu6", .storage = CDP_STORAGE_IN_PLACE, .shape = cdp_layer_shape_same,
    .fwd = fwd, .bwd = bwd, .reads_output = 1, .flops = cdp_layer_no_flops,
};
