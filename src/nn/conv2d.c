/* Conv2d (nn.Conv2d, square kernel, zero padding, optional bias, groups:
 * grouped and depthwise convolutions). */
#include <math.h>
#include <stdio.h>
#include "layers.h"

static cdp_conv_shape conv_shape(const cdp_layer *ly, int B)
{
    return (cdp_conv_shape){ B, ly->xs.c, ly->xs.h, ly->xs.w, ly->ys.c, ly->k, ly->k,
                             ly->stride, ly->pad, ly->ys.h, ly->ys.w, ly->groups };
}

/* the input channels each output channel reads */
static int in_per_group(const cdp_layer *ly)
{
    return ly->xs.c / (ly->groups > 1 ? ly->groups : 1);
}

static int shape(cdp_layer *ly, char *err, size_t errlen)
{
    const int G = ly->groups > 1 ? ly->groups : 1;
    if (ly->groups < 0 || ly->xs.c % G || ly->ys.c % G) {
        snprintf(err, errlen, "%s: %d groups do not divide its %d input and %d output channels",
                 ly->name, ly->groups, ly->xs.c, ly->ys.c);
        return -1;
    }
    int oh = (ly->xs.h + 2 * ly->pad - ly->k) / ly->stride + 1;
    int ow = (ly->xs.w + 2 * ly->pad - ly->k) / ly->stride + 1;
    if (ly->xs.h + 2 * ly->pad < ly->k || ly->xs.w + 2 * ly->pad < ly->k || oh < 1 || ow < 1) {
        snprintf(err, errlen, "%s: a %dx%d input is smaller than its %dx%d kernel "
                 "(the image is too small for this network)", ly->name, ly->xs.h, ly->xs.w,
                 ly->k, ly->k);
        return -1;
    }
    ly->ys.h = oh;
    ly->ys.w = ow;
    return 0;
}

/* torchvision's ResNets: kaiming_normal_(mode="fan_out", relu), std =
 * sqrt(2 / (out * k * k)); a bias (which they never have) as nn.Conv2d's,
 * uniform in [-1/sqrt(fan_in), 1/sqrt(fan_in)].  With groups the weight is
 * [out, in/groups, k, k] and fan_in = in/groups * k * k (PyTorch's fans
 * are the weight tensor's: fan_out stays out * k * k). */
static int params(const cdp_layer *ly, cdp_param_desc *d)
{
    const int o = ly->ys.c, i = in_per_group(ly), k = ly->k;
    if (ly->init == CDP_INIT_STYLE_PATCH) {   /* ViT's conv_proj */
        d[0] = (cdp_param_desc){ "weight", CDP_TENSOR_PARAM, 4, { o, i, k, k },
                                 CDP_INIT_TRUNC_NORMAL, sqrtf(1.0f / (float)(i * k * k)) };
        d[1] = (cdp_param_desc){ "bias", CDP_TENSOR_PARAM, 1, { o }, CDP_INIT_CONST, 0.0f };
        return ly->bias ? 2 : 1;
    }
    d[0] = (cdp_param_desc){ "weight", CDP_TENSOR_PARAM, 4, { o, i, k, k }, CDP_INIT_NORMAL,
                             sqrtf(2.0f / (float)(o * k * k)) };
    if (!ly->bias)
        return 1;
    d[1] = (cdp_param_desc){ "bias", CDP_TENSOR_PARAM, 1, { o }, CDP_INIT_UNIFORM,
                             1.0f / sqrtf((float)(i * k * k)) };
    return 2;
}

static size_t wsize(const cdp_layer *ly)
{
    return (size_t)ly->ys.c * in_per_group(ly) * ly->k * ly->k;
}

/* under --precision bf16 (io->lowp, ly->lowp) the bfloat16 kernels, whose
 * operands the stage has rounded (doc/reference.md section 3.12) */
static void fwd(const cdp_layer *ly, const cdp_layer_io *io, int train)
{
    (void)train;
    cdp_conv_shape s = conv_shape(ly, io->B);
    (io->lowp ? io->be->conv2d_fwd_bf16 : io->be->conv2d_fwd)(
        &s, io->x, io->p, ly->bias ? io->p + wsize(ly) : NULL, io->y, io->ws);
}

static void bwd(const cdp_layer *ly, const cdp_layer_io *io)
{
    cdp_conv_shape s = conv_shape(ly, io->B);
    (io->lowp ? io->be->conv2d_bwd_bf16 : io->be->conv2d_bwd)(
        &s, io->x, io->p, io->dy, io->dx, io->g, ly->bias ? io->g + wsize(ly) : NULL,
        io->accumulate, io->ws);
}

static double flops(const cdp_layer *ly, int B, int need_dx)
{
    double mm = 2.0 * B * (double)ly->ys.c * ly->ys.h * ly->ys.w * (double)in_per_group(ly) *
                ly->k * ly->k;
    return mm * (need_dx ? 3.0 : 2.0);
}

static size_t ws_floats(const cdp_layer *ly, const cdp_backend *be, int B)
{
    cdp_conv_shape s = conv_shape(ly, B);
    size_t (*f)(const struct cdp_conv_shape *) =
        ly->lowp ? be->conv2d_bf16_ws_floats : be->conv2d_ws_floats;
    return f ? f(&s) : 0;
}

const cdp_layer_ops cdp_conv2d_ops = {
    .name = "conv2d", .shape = shape, .params = params, .fwd = fwd, .bwd = bwd,
    .reads_input = 1, .lowp_operands = 1, .lowp_params = 1u, .flops = flops, .ws_floats = ws_floats,
};
