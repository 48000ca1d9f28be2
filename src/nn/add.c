/* Residual add: y = a + b; both inputs receive the output's gradient. */
#include <stdio.h>
#include "layers.h"

static void fwd(const cdp_layer *ly, const cdp_layer_io *io, int train)
{
    (void)train;
    const size_t n = (size_t)io->B * cdp_shape_n(ly->ys);
    if (io->y16)
        io->be->bf16->add3(n, io->x, io->x16, io->x2, io->x2_16, io->y16);
    else
        io->be->add3(n, io->x, io->x2, io->y);
}

static void bwd(const cdp_layer *ly, const cdp_layer_io *io)
{
    const size_t bytes = (size_t)io->B * cdp_shape_n(ly->ys) * sizeof(float);
    if (io->dx)
        io->be->copy(io->dx, io->dy, bytes);
    if (io->dx2)
        io->be->copy(io->dx2, io->dy, bytes);
}

static double flops(const cdp_layer *ly, int B, int need_dx)
{
    (void)need_dx;
    return (double)B * cdp_shape_n(ly->ys);
}

const cdp_layer_ops cdp_add_ops = {
    .name = "add", .shape = cdp_layer_shape_same, .fwd = fwd, .bwd = bwd, .bf16_io = CDP_BF16_IO,
    .flops = flops,
};
