/* GELU, exact (nn.GELU(), erf form); its backward reads its input. */
#include "layers.h"

static void fwd(const cdp_layer *ly, const cdp_layer_io *io, int train)
{
    (void)train;
    const size_t n = (size_t)io->B * cdp_shape_n(ly->ys);
    if (io->y16)
        io->be->bf16->gelu_fwd(n, io->x, io->x16, io->y16);
    else
        io->be->gelu_fwd(n, io->x, io->y);
}

static void bwd(const cdp_layer *ly, const cdp_layer_io *io)
{
    const size_t n = (size_t)io->B * cdp_shape_n(ly->ys);
    if (io->x16)
        io->be->bf16->gelu_bwd(n, io->x16, io->dy, io->dx);
    else
        io->be->gelu_bwd(n, io->x, io->dy, io->dx);
}

static double flops(const cdp_layer *ly, int B, int need_dx)
{
    (void)need_dx;
    return 20.0 * B * (double)cdp_shape_n(ly->ys);
}

const cdp_layer_ops cdp_gelu_ops = {
    .name = "gelu", .shape = cdp_layer_shape_same, .fwd = fwd, .bwd = bwd, .reads_input = 1,
    .bf16_io = CDP_BF16_IO, .flops = flops,
};
