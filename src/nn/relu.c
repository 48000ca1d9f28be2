/* ReLU, in place: its output is its input's storage (the model aliases
 * them), and its backward masks the gradient by the output, in place too. */
#include "layers.h"

static int shape(cdp_layer *ly, char *err, size_t errlen)
{
    (void)err; (void)errlen;
    ly->ys = ly->xs;
    return 0;
}

static void fwd(const cdp_layer *ly, const cdp_layer_io *io, int train)
{
    (void)train;
    io->be->relu_fwd((size_t)io->B * cdp_shape_n(ly->ys), io->y);
}

static void bwd(const cdp_layer *ly, const cdp_layer_io *io)
{
    io->be->relu_bwd((size_t)io->B * cdp_shape_n(ly->ys), io->y, io->dx);
}

static double flops(const cdp_layer *ly, int B, int need_dx)
{
    (void)ly; (void)B; (void)need_dx;
    return 0.0;
}

static int supported(const cdp_backend *be)
{
    return be->relu_fwd && be->relu_bwd;
}

const cdp_layer_ops cdp_relu_ops = {
    .name = "relu", .shape = shape, .fwd = fwd, .bwd = bwd, .reads_output = 1,
    .flops = flops, .supported = supported,
};
