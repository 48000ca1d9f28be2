/* BatchNorm2d (doc/reference.md section 3.5): training normalises each micro-batch with
 * its own statistics and keeps them, (mean, M2) per channel in double, for
 * the step's running statistics, which the stage's update computes
 * (cdp_stage_update); evaluation uses the running statistics. */
#include <stdio.h>

#include "layers.h"

static int params(const cdp_layer *ly, cdp_param_desc *d)
{
    const int C = ly->xs.c;
    d[0] = (cdp_param_desc){ "weight", CDP_TENSOR_PARAM, 1, { C }, CDP_INIT_CONST, 1.0f };
    d[1] = (cdp_param_desc){ "bias", CDP_TENSOR_PARAM, 1, { C }, CDP_INIT_CONST, 0.0f };
    d[2] = (cdp_param_desc){ "running_mean", CDP_TENSOR_BUFFER, 1, { C }, CDP_INIT_CONST, 0.0f };
    d[3] = (cdp_param_desc){ "running_var", CDP_TENSOR_BUFFER, 1, { C }, CDP_INIT_CONST, 1.0f };
    d[4] = (cdp_param_desc){ "num_batches_tracked", CDP_TENSOR_COUNTER, 0, { 0 }, CDP_INIT_CONST, 0.0f };
    return 5;
}

/* mean and invstd as float, for the backward */
static size_t save_fixed(const cdp_layer *ly) { return 2 * (size_t)ly->xs.c; }
static size_t stat_doubles(const cdp_layer *ly) { return 2 * (size_t)ly->xs.c; }

static void fwd(const cdp_layer *ly, const cdp_layer_io *io, int train)
{
    const int C = ly->xs.c, HW = ly->xs.h * ly->xs.w;
    if (io->y16 && train)
        io->be->bf16->bn_fwd_train(io->B, C, HW, io->x, io->x16, io->p, io->p + C, ly->eps,
                                   io->y16, io->save, io->stats);
    else if (io->y16)
        io->be->bf16->bn_fwd_eval(io->B, C, HW, io->x, io->x16, io->p, io->p + C, io->bufs,
                                  io->bufs + C, ly->eps, io->y16);
    else if (train)
        io->be->bn_fwd_train(io->B, C, HW, io->x, io->p, io->p + C, ly->eps, io->y, io->save,
                             io->stats);
    else
        io->be->bn_fwd_eval(io->B, C, HW, io->x, io->p, io->p + C, io->bufs, io->bufs + C,
                            ly->eps, io->y);
}

static void bwd(const cdp_layer *ly, const cdp_layer_io *io)
{
    const int C = ly->xs.c, HW = ly->xs.h * ly->xs.w;
    io->be->bn_bwd(io->B, C, HW, io->x, io->p, io->save, io->dy, io->dx, io->g, io->g + C,
                   io->accumulate);
}

/* per element: forward ~4, backward ~6 */
static double flops(const cdp_layer *ly, int B, int need_dx)
{
    (void)need_dx;
    return 10.0 * B * (double)cdp_shape_n(ly->xs);
}

/* the running variance is unbiased over the step's N*B*H*W values per
 * channel: one value gives 0/0 */
static int check_step(const cdp_layer *ly, int N, int B, char *err, size_t errlen)
{
    if ((long long)N * B * ly->xs.h * ly->xs.w >= 2)
        return 0;
    snprintf(err, errlen, "%s normalises 1 value per channel in a step (N=%d x B=%d samples "
             "of %dx%d pixels), whose running variance (over n - 1) is undefined: give larger "
             "images, --batch or --workers", ly->name, N, B, ly->xs.h, ly->xs.w);
    return -1;
}

/* running mean and variance (buffers: mean, then var) as torch's, from the
 * statistics of the step's micro-batches, each over B*H*W values */
static void update_buffers(const cdp_layer *ly, const cdp_backend *be, int N, int B,
                           const double *stats, size_t stride, const float *buf_in,
                           float *buf_out)
{
    const int C = ly->xs.c;
    const double n = (double)B * ly->xs.h * ly->xs.w;
    be->bn_running_update(C, N, n, stats, stride, buf_in, buf_in + C, ly->momentum, buf_out,
                          buf_out + C);
}

const cdp_layer_ops cdp_batchnorm2d_ops = {
    .name = "batchnorm2d", .shape = cdp_layer_shape_same, .params = params,
    .save_fixed = save_fixed, .stat_doubles = stat_doubles, .check_step = check_step,
    .update_buffers = update_buffers,
    .fwd = fwd, .bwd = bwd, .reads_input = 1, .bf16_io = CDP_BF16_IO_FWD, .flops = flops,
};
