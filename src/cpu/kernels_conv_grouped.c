/* CPU grouped and depthwise convolution (cdp_conv_shape.groups > 1),
 * called from cdp_cpu_conv2d_fwd/bwd for every grouped shape; db stays
 * with kernels_conv.c (cdp_cpu_conv_db: the groups do not change it).
 *
 * Why direct loops, not per-group GEMMs: a depthwise convolution (one
 * input channel per group, MobileNet's) is a GEMM of one row, where
 * im2col's copies cost more than the arithmetic; the loops below read x,
 * w and dy in place and need no workspace.
 *
 * Determinism.  Every output element is computed by one thread, from +0,
 * in a fixed order that depends on the shape only, and the threads split
 * only the outer loop over independent elements, so the bits never depend
 * on the thread count:
 *   - y[b][o]: a plane of partial sums, adding for each input channel c of
 *     o's group, kh, kw (in that order) w * x over the plane; then + b[o];
 *   - dx[b][c]: likewise, adding for each output channel o of c's group,
 *     kh, kw the products w * dy into the plane (each dx element gathers
 *     its contributions in that order);
 *   - dw[o][c][kh][kw]: in double, over b, then oh, then ow, rounded to
 *     float once (then added to dw with accumulate: the bits of a separate
 *     result added with add()).
 * No FP contraction: the build is -std=c11 (and the clang pragma below). */
#include <string.h>

#include "backend/backend.h"
#include "cpu_internal.h"

#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

/* the output columns [*o0, *o1) whose input column o*stride - pad + k lies
 * in [0, n) (the same rule for rows) */
static void valid_range(int out, int n, int stride, int pad, int k, int *o0, int *o1)
{
    int lo = pad - k, hi = n - 1 + pad - k;   /* o*stride within [lo, hi] */
    *o0 = lo <= 0 ? 0 : (lo + stride - 1) / stride;
    *o1 = hi < 0 ? 0 : hi / stride + 1;
    if (*o1 > out)
        *o1 = out;
    if (*o0 > *o1)
        *o0 = *o1;
}

/* out[oh][ow] += wv * in[oh*stride - pad + kh][ow*stride - pad + kw] over
 * the valid pixels (the forward's step; the backward's with in and out
 * swapped, scatter) */
static void plane_fma(const cdp_conv_shape *s, int kh, int kw, float wv, const float *x,
                      float *y)
{
    int h0, h1, w0, w1;
    valid_range(s->OH, s->H, s->stride, s->pad, kh, &h0, &h1);
    valid_range(s->OW, s->W, s->stride, s->pad, kw, &w0, &w1);
    for (int oh = h0; oh < h1; oh++) {
        const float *xr = x + (size_t)(oh * s->stride - s->pad + kh) * (size_t)s->W;
        float *yr = y + (size_t)oh * (size_t)s->OW;
        for (int ow = w0; ow < w1; ow++)
            yr[ow] += wv * xr[ow * s->stride - s->pad + kw];
    }
}

static void plane_scatter(const cdp_conv_shape *s, int kh, int kw, float wv, const float *dy,
                          float *dx)
{
    int h0, h1, w0, w1;
    valid_range(s->OH, s->H, s->stride, s->pad, kh, &h0, &h1);
    valid_range(s->OW, s->W, s->stride, s->pad, kw, &w0, &w1);
    for (int oh = h0; oh < h1; oh++) {
        float *dr = dx + (size_t)(oh * s->stride - s->pad + kh) * (size_t)s->W;
        const float *gr = dy + (size_t)oh * (size_t)s->OW;
        for (int ow = w0; ow < w1; ow++)
            dr[ow * s->stride - s->pad + kw] += wv * gr[ow];
    }
}

void cdp_cpu_conv2d_grouped_fwd(const cdp_conv_shape *s, const float *x, const float *w,
                                const float *b, float *y)
{
    const int G = cdp_conv_groups(s), Cg = s->Cin / G, Og = s->Cout / G;
    const size_t HW = (size_t)s->H * (size_t)s->W, P = (size_t)s->OH * (size_t)s->OW;
    const size_t KK = (size_t)s->KH * (size_t)s->KW;
    const long planes = (long)s->B * s->Cout;
#pragma omp parallel for CDP_CPU_PAR((size_t)planes * P * (size_t)Cg * KK)
    for (long bo = 0; bo < planes; bo++) {
        const int bi = (int)(bo / s->Cout), o = (int)(bo % s->Cout), g = o / Og;
        float *yp = y + (size_t)bo * P;
        memset(yp, 0, P * sizeof *yp);
        for (int c = 0; c < Cg; c++) {
            const float *xp = x + ((size_t)bi * (size_t)s->Cin + (size_t)(g * Cg + c)) * HW;
            const float *wp = w + ((size_t)o * (size_t)Cg + (size_t)c) * KK;
            for (int kh = 0; kh < s->KH; kh++)
                for (int kw = 0; kw < s->KW; kw++)
                    plane_fma(s, kh, kw, wp[kh * s->KW + kw], xp, yp);
        }
        if (b)
            for (size_t q = 0; q < P; q++)
                yp[q] += b[o];
    }
}

void cdp_cpu_conv2d_grouped_bwd(const cdp_conv_shape *s, const float *x, const float *w,
                                const float *dy, float *dx, float *dw, int accumulate)
{
    const int G = cdp_conv_groups(s), Cg = s->Cin / G, Og = s->Cout / G;
    const size_t HW = (size_t)s->H * (size_t)s->W, P = (size_t)s->OH * (size_t)s->OW;
    const size_t KK = (size_t)s->KH * (size_t)s->KW;
    const size_t work = (size_t)s->B * (size_t)s->Cout * P * (size_t)Cg * KK;
    const long nw = (long)s->Cout * Cg;
#pragma omp parallel for CDP_CPU_PAR(work)
    for (long oc = 0; oc < nw; oc++) {
        const int o = (int)(oc / Cg), c = (int)(oc % Cg), ci = (o / Og) * Cg + c;
        for (int kh = 0; kh < s->KH; kh++)
            for (int kw = 0; kw < s->KW; kw++) {
                int h0, h1, w0, w1;
                valid_range(s->OH, s->H, s->stride, s->pad, kh, &h0, &h1);
                valid_range(s->OW, s->W, s->stride, s->pad, kw, &w0, &w1);
                double sum = 0.0;
                for (int bi = 0; bi < s->B; bi++) {
                    const float *xp = x + ((size_t)bi * (size_t)s->Cin + (size_t)ci) * HW;
                    const float *gp = dy + ((size_t)bi * (size_t)s->Cout + (size_t)o) * P;
                    for (int oh = h0; oh < h1; oh++) {
                        const float *xr = xp + (size_t)(oh * s->stride - s->pad + kh) *
                                               (size_t)s->W;
                        const float *gr = gp + (size_t)oh * (size_t)s->OW;
                        for (int ow = w0; ow < w1; ow++)
                            sum += (double)gr[ow] * (double)xr[ow * s->stride - s->pad + kw];
                    }
                }
                float *d = dw + (size_t)oc * KK + (size_t)(kh * s->KW + kw);
                *d = accumulate ? *d + (float)sum : (float)sum;
            }
    }
    if (!dx)
        return;
    const long planes = (long)s->B * s->Cin;
#pragma omp parallel for CDP_CPU_PAR(work)
    for (long bc = 0; bc < planes; bc++) {
        const int bi = (int)(bc / s->Cin), ci = (int)(bc % s->Cin);
        const int g = ci / Cg, c = ci % Cg;
        float *dp = dx + (size_t)bc * HW;
        memset(dp, 0, HW * sizeof *dp);
        for (int o = g * Og; o < (g + 1) * Og; o++) {
            const float *gp = dy + ((size_t)bi * (size_t)s->Cout + (size_t)o) * P;
            const float *wp = w + ((size_t)o * (size_t)Cg + (size_t)c) * KK;
            for (int kh = 0; kh < s->KH; kh++)
                for (int kw = 0; kw < s->KW; kw++)
                    plane_scatter(s, kh, kw, wp[kh * s->KW + kw], gp, dp);
        }
    }
}
