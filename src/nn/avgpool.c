/* Global average pooling (nn.AdaptiveAvgPool2d(1)): [C,H,W] -> [C,1,1]. */
#include "layers.h"

static int shape(cdp_layer *ly, char *err, size_t errlen)
{
    (void)err; (void)errlen;
    ly->ys = (cdp_shape){ ly->xs.c, 1, 1 };
    return 0;
}

static void fwd(const cdp_layer *ly, const cdp_layer_io *io, int train)
{
    (void)train;
    io->be->avgpool_fwd(io->B, ly->xs.c, ly->xs.h * ly->xs.w, io->x, io->y);
}

static void bwd(const cdp_layer *ly, const cdp_layer_io *io)
{
    io->be->avgpool_bwd(io->B, ly->xs.c, ly->xs.h * ly->xs.w, io->dy, io->dx);
}

static double flops(const cdp_layer *ly, int B, int need_dx)
{
    (void)need_dx;
    return 2.0 * B * (double)cdp_shape_n(ly->xs);
}

const cdp_layer_ops cdp_avgpool_ops = {
    .name = "avgpool", .shape = shape, .fwd = fwd, .bwd = bwd, .flops = flops,
};
