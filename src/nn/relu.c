/* ReLU, in place: its output is its input's storage (the model aliases
 * them), and its backward masks the gradient by the output, in place too. */
#include "layers.h"

static void fwd(const cdp_layer *ly, const cdp_layer_io *io, int train)
{
    (void)train;
    io->be->relu_fwd((size_t)io->B * cdp_shape_n(ly->ys), io->y);
}

static void bwd(const cdp_layer *ly, const cdp_layer_io *io)
{
    io->be->relu_bwd((size_t)io->B * cdp_shape_n(ly->ys), io->y, io->dx);
}

const cdp_layer_ops cdp_relu_ops = {
    .name = "relu", .storage = CDP_STORAGE_IN_PLACE, .relu = 1, .shape = cdp_layer_shape_same,
    .fwd = fwd, .bwd = bwd, .reads_output = 1, .flops = cdp_layer_no_flops,
};
