/* ReLU, in place: its output is its input's storage (the model aliases
 * them), and its backward masks the gradient by the output, in place too. */
#include "layers.h"

static void fwd(const cdp_layer *ly, const cdp_layer_io *io, int train)
{
    (void)train;
    const size_t n = (size_t)io->B * cdp_shape_n(ly->ys);
    if (io->y16)
        io->be->bf16->relu_fwd(n, io->y16);
    else
        io->be->relu_fwd(n, io->y);
}

static void bwd(const cdp_layer *ly, const cdp_layer_io *io)
{
    const size_t n = (size_t)io->B * cdp_shape_n(ly->ys);
    if (io->y16)
        io->be->bf16->relu_bwd(n, io->y16, io->dx);
    else
        io->be->relu_bwd(n, io->y, io->dx);
}

const cdp_layer_ops cdp_relu_ops = {
    .name = "relu", .storage = CDP_STORAGE_IN_PLACE, .relu = 1, .shape = cdp_layer_shape_same,
    .fwd = fwd, .bwd = bwd, .reads_output = 1, .bf16_io = CDP_BF16_IO, .flops = cdp_layer_no_flops,
};
