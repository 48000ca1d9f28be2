/* The class token's output (torchvision's x[:, 0]): tokens [T, 1, D] ->
 * features [D, 1, 1]; its backward scatters the gradient back into a
 * zeroed [T, 1, D]. */
#include "layers.h"

static int shape(cdp_layer *ly, char *err, size_t errlen)
{
    (void)err; (void)errlen;
    ly->ys = (cdp_shape){ ly->xs.w, 1, 1 };
    return 0;
}

static void fwd(const cdp_layer *ly, const cdp_layer_io *io, int train)
{
    (void)train;
    const int D = ly->xs.w;
    io->be->copy_rows(io->B, D, io->x, cdp_shape_n(ly->xs), io->y, (size_t)D);
}

static void bwd(const cdp_layer *ly, const cdp_layer_io *io)
{
    const int D = ly->xs.w;
    const size_t n = cdp_shape_n(ly->xs);
    io->be->zero(io->dx, (size_t)io->B * n * sizeof(float));
    io->be->copy_rows(io->B, D, io->dy, (size_t)D, io->dx, n);
}

const cdp_layer_ops cdp_token_select_ops = {
    .name = "token_select", .shape = shape, .fwd = fwd, .bwd = bwd,
    .flops = cdp_layer_no_flops,
};
