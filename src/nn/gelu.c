/* GELU, exact (nn.GELU(), erf form); its backward reads its input. */
#include "layers.h"

static void fwd(const cdp_layer *ly, const cdp_layer_io *io, int train)
{
    (void)train;
    io->be->gelu_fwd((size_t)io->B * cdp_shape_n(ly->ys), io->x, io->y);
}

static void bwd(const cdp_layer *ly, const cdp_layer_io *io)
{
    io->be->gelu_bwd((size_t)io->B * cdp_shape_n(ly->ys), io->x, io->dy, io->dx);
}

static double flops(const cdp_layer *ly, int B, int need_dx)
{
    (void)need_dx;
    return 20.0 * B * (double)cdp_shape_n(ly->ys);
}

const cdp_layer_ops cdp_gelu_ops = {
    .name = "gelu", .shape = cdp_layer_shape_same, .fwd = fwd, .bwd = bwd, .reads_input = 1,
    .flops = flops,
};
