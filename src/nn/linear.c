/* Linear (nn.Linear): y[R,out] = x[R,in] W^T + b, W [out,in], with R = B
 * (the flattened sample) or R = B*T (tokens: applied to each of the T
 * tokens of [T, 1, in]). */
#include <math.h>
#include "layers.h"

static int in_features(const cdp_layer *ly)
{
    return ly->tokens ? ly->xs.w : (int)cdp_shape_n(ly->xs);
}

/* rows of the GEMM for B samples */
static int rows(const cdp_layer *ly, int B)
{
    return ly->tokens ? B * ly->xs.c * ly->xs.h : B;
}

static int shape(cdp_layer *ly, char *err, size_t errlen)
{
    (void)err; (void)errlen;
    /* out features set by the builder in ys.c (flattened) or ys.w (tokens) */
    if (ly->tokens)
        ly->ys = (cdp_shape){ ly->xs.c, ly->xs.h, ly->ys.w };
    else
        ly->ys = (cdp_shape){ ly->ys.c, 1, 1 };
    return 0;
}

static int out_features(const cdp_layer *ly)
{
    return ly->tokens ? ly->ys.w : ly->ys.c;
}

static int params(const cdp_layer *ly, cdp_param_desc *d)
{
    const int in = in_features(ly), out = out_features(ly);
    /* nn.Linear's default: W and b uniform in [-1/sqrt(in), 1/sqrt(in)] */
    cdp_init_kind wk = CDP_INIT_UNIFORM, bk = CDP_INIT_UNIFORM;
    float wa = 1.0f / sqrtf((float)in), ba = wa;
    if (ly->init == CDP_INIT_STYLE_XAVIER) {
        wa = sqrtf(6.0f / (float)(in + out));
        bk = CDP_INIT_NORMAL;
        ba = 1e-6f;
    } else if (ly->init == CDP_INIT_STYLE_ZERO) {
        wk = bk = CDP_INIT_CONST;
        wa = ba = 0.0f;
    }
    d[0] = (cdp_param_desc){ "weight", CDP_TENSOR_PARAM, 2, { out, in }, wk, wa };
    d[1] = (cdp_param_desc){ "bias", CDP_TENSOR_PARAM, 1, { out }, bk, ba };
    return 2;
}

static void fwd(const cdp_layer *ly, const cdp_layer_io *io, int train)
{
    (void)train;
    const int in = in_features(ly), out = out_features(ly);
    if (io->p16) {   /* --precision bf16 on bfloat16 storage (nn.h, reads_bf16) */
        io->be->bf16->linear_fwd(rows(ly, io->B), in, out, io->x, io->x16, io->p16,
                                 io->p + (size_t)in * out, io->y, ly->fuse_relu);
        return;
    }
    CDP_LINEAR_FWD(io)(rows(ly, io->B), in, out, io->x, io->p, io->p + (size_t)in * out, io->y,
                       ly->fuse_relu);
}

static void bwd(const cdp_layer *ly, const cdp_layer_io *io)
{
    const int in = in_features(ly), out = out_features(ly);
    if (io->p16) {
        io->be->bf16->linear_bwd(rows(ly, io->B), in, out, io->x, io->x16, io->p16, io->dy16,
                                 io->dx, io->g, io->g + (size_t)in * out, io->relu_dx,
                                 io->accumulate);
        return;
    }
    CDP_LINEAR_BWD(io)(rows(ly, io->B), in, out, io->x, io->p, io->dy, io->dx, io->g,
                       io->g + (size_t)in * out, io->relu_dx, io->accumulate);
}

/* forward GEMM and bias, dW GEMM and bias column sums, dx GEMM if needed */
static double flops(const cdp_layer *ly, int B, int need_dx)
{
    double in = in_features(ly), out = out_features(ly), r = rows(ly, B);
    double mm = 2.0 * r * in * out;
    return mm * (need_dx ? 3.0 : 2.0) + 2.0 * r * out;
}

static int accumulate_exact(const cdp_layer *ly, const cdp_backend *be, int B)
{
    return be->accumulate_exact &&
           be->accumulate_exact(rows(ly, B), in_features(ly), out_features(ly));
}

const cdp_layer_ops cdp_linear_ops = {
    .name = "linear", .fuses_relu = 1, .shape = shape, .params = params, .fwd = fwd, .bwd = bwd,
    .reads_input = 1, .lowp_operands = 1, .lowp_params = 1u, .reads_bf16 = 1, .flops = flops,
    .accumulate_exact = accumulate_exact,
};
