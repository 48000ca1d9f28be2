/* Conv2d (nn.Conv2d, square kernel, zero padding, optional bias). */
#include <math.h>
#include <stdio.h>
#include "layers.h"

static cdp_conv_shape conv_shape(const cdp_layer *ly, int B)
{
    return (cdp_conv_shape){ B, ly->xs.c, ly->xs.h, ly->xs.w, ly->ys.c, ly->k, ly->k,
                             ly->stride, ly->pad, ly->ys.h, ly->ys.w };
}

static int shape(cdp_layer *ly, char *err, size_t errlen)
{
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
 * uniform in [-1/sqrt(fan_in), 1/sqrt(fan_in)] */
static int params(const cdp_layer *ly, cdp_param_desc *d)
{
    const int o = ly->ys.c, i = ly->xs.c, k = ly->k;
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
    return (size_t)ly->ys.c * ly->xs.c * ly->k * ly->k;
}

static void fwd(const cdp_layer *ly, const cdp_layer_io *io, int train)
{
    (void)train;
    cdp_conv_shape s = conv_shape(ly, io->B);
    io->be->conv2d_fwd(&s, io->x, io->p, ly->bias ? io->p + wsize(ly) : NULL, io->y, io->ws);
}

static void bwd(const cdp_layer *ly, const cdp_layer_io *io)
{
    cdp_conv_shape s = conv_shape(ly, io->B);
    io->be->conv2d_bwd(&s, io->x, io->p, io->dy, io->dx, io->g,
                       ly->bias ? io->g + wsize(ly) : NULL, io->accumulate, io->ws);
}

static double flops(const cdp_layer *ly, int B, int need_dx)
{
    double mm = 2.0 * B * (double)ly->ys.c * ly->ys.h * ly->ys.w * (double)ly->xs.c * ly->k * ly->k;
    return mm * (need_dx ? 3.0 : 2.0);
}

static size_t ws_floats(const cdp_layer *ly, const cdp_backend *be, int B)
{
    cdp_conv_shape s = conv_shape(ly, B);
    return be->conv2d_ws_floats ? be->conv2d_ws_floats(&s) : 0;
}

const cdp_layer_ops cdp_conv2d_ops = {
    .name = "conv2d", .shape = shape, .params = params, .fwd = fwd, .bwd = bwd,
    .reads_input = 1, .flops = flops, .ws_floats = ws_floats,
};
