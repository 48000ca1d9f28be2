/* LayerNorm (nn.LayerNorm over the last dim, elementwise affine): each
 * token of [T, 1, D] normalised by its own mean and biased variance, in
 * training and evaluation alike. */
#include "layers.h"

static int dim(const cdp_layer *ly) { return ly->xs.w; }
static int rows(const cdp_layer *ly, int B) { return B * ly->xs.c * ly->xs.h; }

static int params(const cdp_layer *ly, cdp_param_desc *d)
{
    const int D = dim(ly);
    d[0] = (cdp_param_desc){ "weight", CDP_TENSOR_PARAM, 1, { D }, CDP_INIT_CONST, 1.0f };
    d[1] = (cdp_param_desc){ "bias", CDP_TENSOR_PARAM, 1, { D }, CDP_INIT_CONST, 0.0f };
    return 2;
}

/* mean and rstd of each token */
static size_t save_per_sample(const cdp_layer *ly)
{
    return 2 * (size_t)ly->xs.c * (size_t)ly->xs.h;
}

static void fwd(const cdp_layer *ly, const cdp_layer_io *io, int train)
{
    (void)train;
    const int D = dim(ly);
    if (io->y16)
        io->be->bf16->ln_fwd(rows(ly, io->B), D, io->x, io->x16, io->p, io->p + D, ly->eps,
                             io->y16, io->save);
    else
        io->be->ln_fwd(rows(ly, io->B), D, io->x, io->p, io->p + D, ly->eps, io->y, io->save);
}

static void bwd(const cdp_layer *ly, const cdp_layer_io *io)
{
    const int D = dim(ly);
    if (io->x16)
        io->be->bf16->ln_bwd(rows(ly, io->B), D, io->x16, io->p, io->save, io->dy, io->dx,
                             io->g, io->g + D, io->accumulate);
    else
        io->be->ln_bwd(rows(ly, io->B), D, io->x, io->p, io->save, io->dy, io->dx, io->g,
                       io->g + D, io->accumulate);
}

/* per element: forward ~5, backward ~8 */
static double flops(const cdp_layer *ly, int B, int need_dx)
{
    (void)need_dx;
    return 13.0 * B * (double)cdp_shape_n(ly->xs);
}

const cdp_layer_ops cdp_layernorm_ops = {
    .name = "layernorm", .shape = cdp_layer_shape_same, .params = params,
    .save_per_sample = save_per_sample, .fwd = fwd, .bwd = bwd, .reads_input = 1,
    .bf16_io = CDP_BF16_IO, .flops = flops,
};
