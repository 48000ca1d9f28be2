/* Patch tokens and the class token (torchvision's VisionTransformer:
 * _process_input's reshape and permute, then torch.cat with class_token):
 * the patch embedding's output [D, h, w] becomes the tokens [1 + h*w, 1, D],
 * the class token first. */
#include "layers.h"

static int shape(cdp_layer *ly, char *err, size_t errlen)
{
    (void)err; (void)errlen;
    ly->ys = (cdp_shape){ 1 + ly->xs.h * ly->xs.w, 1, ly->xs.c };
    return 0;
}

/* the module's own parameter, not a submodule's: named without a prefix */
static int params(const cdp_layer *ly, cdp_param_desc *d)
{
    d[0] = (cdp_param_desc){ "class_token", CDP_TENSOR_PARAM, 3, { 1, 1, ly->xs.c },
                             CDP_INIT_CONST, 0.0f };
    return 1;
}

static void fwd(const cdp_layer *ly, const cdp_layer_io *io, int train)
{
    (void)train;
    io->be->tokens_fwd(io->B, ly->xs.c, ly->xs.h * ly->xs.w, io->x, io->p, io->y);
}

static void bwd(const cdp_layer *ly, const cdp_layer_io *io)
{
    io->be->tokens_bwd(io->B, ly->xs.c, ly->xs.h * ly->xs.w, io->dy, io->dx, io->g,
                       io->accumulate);
}

static double flops(const cdp_layer *ly, int B, int need_dx)
{
    (void)need_dx;
    return (double)B * ly->xs.c;
}

const cdp_layer_ops cdp_class_token_ops = {
    .name = "class_token", .shape = shape, .params = params, .fwd = fwd, .bwd = bwd,
    .flops = flops,
};
