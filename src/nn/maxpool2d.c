/* MaxPool2d (square window; padding never wins), keeping the argmax. */
#include <stdio.h>
#include "layers.h"

static int shape(cdp_layer *ly, char *err, size_t errlen)
{
    int oh = (ly->xs.h + 2 * ly->pad - ly->k) / ly->stride + 1;
    int ow = (ly->xs.w + 2 * ly->pad - ly->k) / ly->stride + 1;
    if (ly->xs.h + 2 * ly->pad < ly->k || ly->xs.w + 2 * ly->pad < ly->k || oh < 1 || ow < 1) {
        snprintf(err, errlen, "maxpool after %s: a %dx%d input is smaller than its %dx%d window",
                 ly->name, ly->xs.h, ly->xs.w, ly->k, ly->k);
        return -1;
    }
    ly->ys = (cdp_shape){ ly->xs.c, oh, ow };
    return 0;
}

/* the argmax of each output, an int32 in a float's place */
static size_t save_per_sample(const cdp_layer *ly) { return cdp_shape_n(ly->ys); }

static void fwd(const cdp_layer *ly, const cdp_layer_io *io, int train)
{
    (void)train;
    io->be->maxpool_fwd(io->B, ly->xs.c, ly->xs.h, ly->xs.w, ly->k, ly->stride, ly->pad,
                        ly->ys.h, ly->ys.w, io->x, io->y, (int32_t *)io->save);
}

static void bwd(const cdp_layer *ly, const cdp_layer_io *io)
{
    io->be->maxpool_bwd(io->B, ly->xs.c, ly->xs.h, ly->xs.w, ly->ys.h, ly->ys.w,
                        (const int32_t *)io->save, io->dy, io->dx);
}

static double flops(const cdp_layer *ly, int B, int need_dx)
{
    (void)need_dx;
    return (double)B * cdp_shape_n(ly->ys) * ly->k * ly->k;
}

const cdp_layer_ops cdp_maxpool2d_ops = {
    .name = "maxpool2d", .shape = shape, .save_per_sample = save_per_sample, .fwd = fwd,
    .bwd = bwd, .flops = flops,
};
