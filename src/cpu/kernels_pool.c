/* CPU pooling (NCHW) and the three-operand add of residual blocks.
 *
 * Determinism.  Loops run in parallel over (sample, channel) planes or over
 * independent elements only; each plane's work, reductions included, is
 * done by one thread in a fixed order.  No FP contraction (-std=c11, clang
 * pragma below), no allocation. */
#include <math.h>
#include <string.h>

#include "cpu_internal.h"

#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

/* Max pooling as nn.MaxPool2d (dilation 1): the window of output (oh, ow)
 * covers rows oh*stride - pad .. + k-1 and likewise columns; positions
 * outside the plane are skipped (padding never wins).  The window is read
 * in order (row, then column): the first maximum wins (a later equal value
 * does not replace it), a NaN wins at once and ends the window, as in
 * PyTorch's CPU kernel where NaN propagates.  A window with no position in
 * the plane gives -inf and idx -1. */
void cdp_cpu_maxpool_fwd(int B, int C, int H, int W, int k, int stride, int pad, int OH,
                         int OW, const float *x, float *y, int32_t *idx)
{
    const size_t planes = (size_t)(B > 0 ? B : 0) * (size_t)(C > 0 ? C : 0);
    const size_t HWi = (size_t)H * (size_t)W, HWo = (size_t)OH * (size_t)OW;
#pragma omp parallel for CDP_CPU_PAR(planes * (HWi + HWo))
    for (size_t pl = 0; pl < planes; pl++) {
        const float *xp = x + pl * HWi;
        float *yp = y + pl * HWo;
        int32_t *ip = idx + pl * HWo;
        for (int oh = 0; oh < OH; oh++) {
            int h0 = oh * stride - pad, h1 = h0 + k;
            h0 = h0 < 0 ? 0 : h0;
            h1 = h1 > H ? H : h1;
            for (int ow = 0; ow < OW; ow++) {
                int w0 = ow * stride - pad, w1 = w0 + k;
                w0 = w0 < 0 ? 0 : w0;
                w1 = w1 > W ? W : w1;
                float best = -INFINITY;
                int32_t at = h0 < h1 && w0 < w1 ? (int32_t)(h0 * W + w0) : -1;
                for (int ih = h0; ih < h1; ih++)
                    for (int iw = w0; iw < w1; iw++) {
                        float v = xp[(size_t)ih * (size_t)W + (size_t)iw];
                        if (v > best || isnan(v)) {
                            best = v;
                            at = (int32_t)(ih * W + iw);
                            if (isnan(v))
                                goto done;
                        }
                    }
done:
                yp[(size_t)oh * (size_t)OW + (size_t)ow] = best;
                ip[(size_t)oh * (size_t)OW + (size_t)ow] = at;
            }
        }
    }
}

/* dx = 0, then dx[idx] += dy in output order, plane by plane */
void cdp_cpu_maxpool_bwd(int B, int C, int H, int W, int OH, int OW, const int32_t *idx,
                         const float *dy, float *dx)
{
    const size_t planes = (size_t)(B > 0 ? B : 0) * (size_t)(C > 0 ? C : 0);
    const size_t HWi = (size_t)H * (size_t)W, HWo = (size_t)OH * (size_t)OW;
#pragma omp parallel for CDP_CPU_PAR(planes * (HWi + HWo))
    for (size_t pl = 0; pl < planes; pl++) {
        float *dp = dx + pl * HWi;
        const float *gp = dy + pl * HWo;
        const int32_t *ip = idx + pl * HWo;
        memset(dp, 0, HWi * sizeof *dp);
        for (size_t q = 0; q < HWo; q++)
            if (ip[q] >= 0)
                dp[ip[q]] = dp[ip[q]] + gp[q];
    }
}

/* y[b,c] = (sum over p = 0..HW-1, in float, in order) * (1.0f / HW) */
void cdp_cpu_avgpool_fwd(int B, int C, int HW, const float *x, float *y)
{
    const size_t planes = (size_t)(B > 0 ? B : 0) * (size_t)(C > 0 ? C : 0);
    const float inv = 1.0f / (float)HW;
#pragma omp parallel for CDP_CPU_PAR(planes * (size_t)(HW > 0 ? HW : 0))
    for (size_t pl = 0; pl < planes; pl++) {
        const float *xp = x + pl * (size_t)HW;
        float s = 0.0f;
        for (int p = 0; p < HW; p++)
            s = s + xp[p];
        y[pl] = s * inv;
    }
}

/* dx[b,c,p] = dy[b,c] * (1.0f / HW) */
void cdp_cpu_avgpool_bwd(int B, int C, int HW, const float *dy, float *dx)
{
    const size_t planes = (size_t)(B > 0 ? B : 0) * (size_t)(C > 0 ? C : 0);
    const float inv = 1.0f / (float)HW;
#pragma omp parallel for CDP_CPU_PAR(planes * (size_t)(HW > 0 ? HW : 0))
    for (size_t pl = 0; pl < planes; pl++) {
        float v = dy[pl] * inv;
        float *dp = dx + pl * (size_t)HW;
        for (int p = 0; p < HW; p++)
            dp[p] = v;
    }
}

/* adaptive pooling's window of output (i, j): rows [w->r0, w->r1), columns
 * [w->c0, w->c1) (PyTorch's start_index and end_index), and 1 / its size */
typedef struct apool_window {
    int r0, r1, c0, c1;
    float inv;
} apool_window;

static apool_window apool_cell(int i, int j, int H, int W, int OH, int OW)
{
    apool_window w;
    w.r0 = (int)(((long long)i * H) / OH);
    w.r1 = (int)(((long long)(i + 1) * H + OH - 1) / OH);
    w.c0 = (int)(((long long)j * W) / OW);
    w.c1 = (int)(((long long)(j + 1) * W + OW - 1) / OW);
    w.inv = 1.0f / (float)((w.r1 - w.r0) * (w.c1 - w.c0));
    return w;
}

void cdp_cpu_adaptive_avgpool_fwd(int B, int C, int H, int W, int OH, int OW, const float *x,
                                  float *y)
{
    if (B <= 0 || C <= 0 || OH <= 0 || OW <= 0)
        return;
    const size_t planes = (size_t)B * (size_t)C;
    const size_t HWi = (size_t)H * (size_t)W, HWo = (size_t)OH * (size_t)OW;
#pragma omp parallel for CDP_CPU_PAR(planes * (HWi + HWo))
    for (size_t pl = 0; pl < planes; pl++) {
        const float *xp = x + pl * HWi;
        for (size_t q = 0; q < HWo; q++) {
            const apool_window w = apool_cell((int)(q / (size_t)OW), (int)(q % (size_t)OW), H, W,
                                              OH, OW);
            float s = 0.0f;
            for (int r = w.r0; r < w.r1; r++)
                for (int c = w.c0; c < w.c1; c++)
                    s = s + xp[(size_t)r * (size_t)W + (size_t)c];
            y[pl * HWo + q] = s * w.inv;
        }
    }
}

void cdp_cpu_adaptive_avgpool_bwd(int B, int C, int H, int W, int OH, int OW, const float *dy,
                                  float *dx)
{
    if (B <= 0 || C <= 0 || H <= 0 || W <= 0)
        return;
    const size_t planes = (size_t)B * (size_t)C;
    const size_t HWi = (size_t)H * (size_t)W, HWo = (size_t)(OH > 0 ? OH : 0) * (size_t)(OW > 0 ? OW : 0);
#pragma omp parallel for CDP_CPU_PAR(planes * (HWi + HWo))
    for (size_t pl = 0; pl < planes; pl++) {
        float *dp = dx + pl * HWi;
        memset(dp, 0, HWi * sizeof *dp);
        for (size_t q = 0; q < HWo; q++) {   /* in output order: windows overlap */
            const apool_window w = apool_cell((int)(q / (size_t)OW), (int)(q % (size_t)OW), H, W,
                                              OH, OW);
            const float v = dy[pl * HWo + q] * w.inv;
            for (int r = w.r0; r < w.r1; r++)
                for (int c = w.c0; c < w.c1; c++) {
                    float *d = dp + (size_t)r * (size_t)W + (size_t)c;
                    *d = *d + v;
                }
        }
    }
}

/* y = a + b; y may alias a or b (one element read, then written) */
void cdp_cpu_add3(size_t n, const float *a, const float *b, float *y)
{
#pragma omp parallel for CDP_CPU_PAR(n)
    for (size_t k = 0; k < n; k++)
        y[k] = a[k] + b[k];
}
