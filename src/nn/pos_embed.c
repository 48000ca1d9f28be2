/* Learned position embedding (torchvision's Encoder.pos_embedding
 * [1, T, D]), added to every sample's tokens. */
#include "layers.h"

static int params(const cdp_layer *ly, cdp_param_desc *d)
{
    d[0] = (cdp_param_desc){ "pos_embedding", CDP_TENSOR_PARAM, 3,
                             { 1, ly->xs.c * ly->xs.h, ly->xs.w }, CDP_INIT_NORMAL, 0.02f };
    return 1;
}

static void fwd(const cdp_layer *ly, const cdp_layer_io *io, int train)
{
    (void)train;
    io->be->add_rows(io->B, (int)cdp_shape_n(ly->xs), io->x, io->p, io->y);
}

static void bwd(const cdp_layer *ly, const cdp_layer_io *io)
{
    const size_t n = cdp_shape_n(ly->xs);
    if (io->dx)
        io->be->copy(io->dx, io->dy, (size_t)io->B * n * sizeof(float));
    io->be->sum_rows(io->B, (int)n, io->dy, io->g, io->accumulate);
}

static double flops(const cdp_layer *ly, int B, int need_dx)
{
    (void)need_dx;
    return 2.0 * B * (double)cdp_shape_n(ly->xs);
}

const cdp_layer_ops cdp_pos_embed_ops = {
    .name = "pos_embedding", .shape = cdp_layer_shape_same, .params = params, .fwd = fwd,
    .bwd = bwd, .flops = flops,
};
