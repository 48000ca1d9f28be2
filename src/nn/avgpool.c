/* Average pooling as nn.AdaptiveAvgPool2d(o): [C,H,W] -> [C,o,o].  o = 1
 * (ly->k 0 or 1): global average pooling; o > 1: adaptive windows
 * (backend's adaptive_avgpool), which may also enlarge the image (a 1x1
 * input pooled to 7x7 is that value in every place, as VGG's classifier
 * reads it on small images). */
#include <stdio.h>
#include "layers.h"

static int shape(cdp_layer *ly, char *err, size_t errlen)
{
    const int o = ly->k > 1 ? ly->k : 1;
    if (ly->k < 0 || ly->k > 65536) {
        snprintf(err, errlen, "avgpool: output size %d outside [1, 65536]", ly->k);
        return -1;
    }
    ly->ys = (cdp_shape){ ly->xs.c, o, o };
    return 0;
}

static void fwd(const cdp_layer *ly, const cdp_layer_io *io, int train)
{
    (void)train;
    if (ly->k > 1)
        io->be->adaptive_avgpool_fwd(io->B, ly->xs.c, ly->xs.h, ly->xs.w, ly->ys.h, ly->ys.w,
                                     io->x, io->y);
    else
        io->be->avgpool_fwd(io->B, ly->xs.c, ly->xs.h * ly->xs.w, io->x, io->y);
}

static void bwd(const cdp_layer *ly, const cdp_layer_io *io)
{
    if (ly->k > 1)
        io->be->adaptive_avgpool_bwd(io->B, ly->xs.c, ly->xs.h, ly->xs.w, ly->ys.h, ly->ys.w,
                                     io->dy, io->dx);
    else
        io->be->avgpool_bwd(io->B, ly->xs.c, ly->xs.h * ly->xs.w, io->dy, io->dx);
}

static double flops(const cdp_layer *ly, int B, int need_dx)
{
    (void)need_dx;
    /* every input read once per window holding it: about once, or once per
     * output where the output is the larger */
    const double in = (double)cdp_shape_n(ly->xs), out = (double)cdp_shape_n(ly->ys);
    return 2.0 * B * (in > out ? in : out);
}

const cdp_layer_ops cdp_avgpool_ops = {
    .name = "avgpool", .shape = shape, .fwd = fwd, .bwd = bwd, .flops = flops,
};
