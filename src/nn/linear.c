/* Linear (nn.Linear): y[B,out] = x[B,in] W^T + b, W [out,in]. */
#include <math.h>
#include "layers.h"

static int shape(cdp_layer *ly, char *err, size_t errlen)
{
    (void)err; (void)errlen;
    ly->ys = (cdp_shape){ ly->ys.c, 1, 1 };   /* out features set by the builder */
    return 0;
}

/* nn.Linear's default: W and b uniform in [-1/sqrt(in), 1/sqrt(in)] */
static int params(const cdp_layer *ly, cdp_param_desc *d)
{
    const int in = (int)cdp_shape_n(ly->xs), out = ly->ys.c;
    const float bound = 1.0f / sqrtf((float)in);
    d[0] = (cdp_param_desc){ "weight", CDP_TENSOR_PARAM, 2, { out, in }, CDP_INIT_UNIFORM, bound };
    d[1] = (cdp_param_desc){ "bias", CDP_TENSOR_PARAM, 1, { out }, CDP_INIT_UNIFORM, bound };
    return 2;
}

static void fwd(const cdp_layer *ly, const cdp_layer_io *io, int train)
{
    (void)train;
    const int in = (int)cdp_shape_n(ly->xs), out = ly->ys.c;
    io->be->linear_fwd(io->B, in, out, io->x, io->p, io->p + (size_t)in * out, io->y,
                       ly->fuse_relu);
}

static void bwd(const cdp_layer *ly, const cdp_layer_io *io)
{
    const int in = (int)cdp_shape_n(ly->xs), out = ly->ys.c;
    io->be->linear_bwd(io->B, in, out, io->x, io->p, io->dy, io->dx, io->g,
                       io->g + (size_t)in * out, io->relu_dx, io->accumulate);
}

/* forward GEMM and bias, dW GEMM and bias column sums, dx GEMM if needed */
static double flops(const cdp_layer *ly, int B, int need_dx)
{
    double in = (double)cdp_shape_n(ly->xs), out = ly->ys.c, b = B;
    double mm = 2.0 * b * in * out;
    return mm * (need_dx ? 3.0 : 2.0) + 2.0 * b * out;
}

static int supported(const cdp_backend *be)
{
    return be->linear_fwd && be->linear_bwd;
}

const cdp_layer_ops cdp_linear_ops = {
    .name = "linear", .shape = shape, .params = params, .fwd = fwd, .bwd = bwd,
    .reads_input = 1, .flops = flops, .supported = supported,
};
