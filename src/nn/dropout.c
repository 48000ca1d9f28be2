/* Dropout (nn.Dropout(p)).  In training each element is zeroed with
 * probability p and the others are multiplied by 1/(1-p), in float as
 * PyTorch: y = x * noise, noise = kept ? 1.0f / (float)(1 - p) : 0; the
 * backward is dx = dy * noise.  In evaluation it is the identity.
 *
 * The draws are counter-based, from the call's context (cdp_layer_ctx):
 * element e of sample s of the step (s = sample0 + b) at layer index j and
 * step k is kept when
 *     cdp_rand_unit(seed, cdp_rand_u64(STREAM_DROPOUT, k, j), s * n + e) >= p
 * (n: the floats of one sample).  So the mask is the same whichever rank,
 * worker slot, stage cut or thread count computes it, the backward draws
 * the same numbers again instead of keeping the mask, and the layer keeps
 * nothing from forward to backward: its output is a tensor of its own that
 * only the forward writes. */
#include <math.h>
#include <stdio.h>
#include "util/rng.h"
#include "layers.h"

#define STREAM_DROPOUT 0x6364702d64726f70ULL   /* "cdp-drop", fixed forever */

static int shape(cdp_layer *ly, char *err, size_t errlen)
{
    if (!(ly->drop_p >= 0.0 && ly->drop_p <= 1.0)) {
        snprintf(err, errlen, "%s: the dropout probability %g is not in [0, 1]",
                 ly->name[0] ? ly->name : "dropout", ly->drop_p);
        return -1;
    }
    ly->ys = ly->xs;
    return 0;
}

/* out = in * noise, the noise of this call's samples */
static void apply_noise(const cdp_layer *ly, const cdp_layer_io *io, const float *in, float *out)
{
    static const cdp_layer_ctx none;
    const cdp_layer_ctx *c = io->ctx ? io->ctx : &none;
    const size_t n = cdp_shape_n(ly->ys);
    const uint64_t stream = cdp_rand_u64(STREAM_DROPOUT, (uint64_t)c->step,
                                         (uint64_t)io->layer_index);
    /* u = r / 2^24 >= p exactly when r >= ceil(p * 2^24) (p * 2^24 is exact) */
    const uint32_t keep_from = (uint32_t)ceil(ly->drop_p * 16777216.0);
    const float scale = ly->drop_p < 1.0 ? 1.0f / (float)(1.0 - ly->drop_p) : 0.0f;
    io->be->dropout((size_t)io->B * n, c->seed, stream, (uint64_t)c->sample0 * n, keep_from,
                    scale, in, out);
}

static void fwd(const cdp_layer *ly, const cdp_layer_io *io, int train)
{
    if (train)
        apply_noise(ly, io, io->x, io->y);
    else
        io->be->copy(io->y, io->x, (size_t)io->B * cdp_shape_n(ly->ys) * sizeof(float));
}

static void bwd(const cdp_layer *ly, const cdp_layer_io *io)
{
    apply_noise(ly, io, io->dy, io->dx);
}

const cdp_layer_ops cdp_dropout_ops = {
    .name = "dropout", .shape = shape, .fwd = fwd, .bwd = bwd, .flops = cdp_layer_no_flops,
};
