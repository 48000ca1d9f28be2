/* The CUDA backend's grouped and depthwise convolutions (groups > 1) where
 * cuDNN does not run them (built without it, CDP_CUDNN=0, or a shape it
 * refuses): called by kernels_image.cu's conv2d entry points after
 * conv_cudnn.cu declined; db stays with kernels_image.cu (k_conv_db).
 *
 * One thread per output element, summing its terms from +0 in the order
 * of the CPU's loops (src/cpu/kernels_conv_grouped.c), each product and
 * sum rounded on its own (__fmul_rn, __fadd_rn, __dadd_rn: no FMA), so
 * that y, dx and dw are the CPU's bits:
 *   - y[b][o][oh][ow]: over the input channels c of o's group, kh, kw, then
 *     + bias;
 *   - dx[b][ci][ih][iw]: over the output channels o of ci's group, kh, kw;
 *   - dw[o][c][kh][kw]: in double over b, oh, ow, rounded to float once
 *     (then added to dw with accumulate, the bits of add()).
 * No atomics, no reduction across threads: deterministic by construction.
 * The weight gradient's threads each walk B*OH*OW products, so this path is
 * slow on large shapes; cuDNN's (cudnnSetConvolutionGroupCount) is the
 * fast one. */
#include "cuda_internal.h"

template <typename I>
__global__ static void k_gconv_fwd(cdp_conv_shape s, const float *__restrict__ x,
                                   const float *__restrict__ w, const float *__restrict__ b,
                                   float *__restrict__ y)
{
    const int G = s.groups > 1 ? s.groups : 1, Cg = s.Cin / G, Og = s.Cout / G;
    const I n = (I)s.B * (I)s.Cout * (I)s.OH * (I)s.OW;
    GRID_STRIDE_I(I, i, n) {
        const int ow = (int)(i % (I)s.OW), oh = (int)(i / (I)s.OW % (I)s.OH);
        const I t = i / ((I)s.OW * (I)s.OH);
        const int o = (int)(t % (I)s.Cout);
        const size_t bi = (size_t)(t / (I)s.Cout);
        const int g = o / Og;
        float acc = 0.0f;
        for (int c = 0; c < Cg; c++) {
            const float *xp = x + (bi * (size_t)s.Cin + (size_t)(g * Cg + c)) * (size_t)s.H *
                                      (size_t)s.W;
            const float *wp = w + ((size_t)o * (size_t)Cg + (size_t)c) * (size_t)s.KH * s.KW;
            for (int kh = 0; kh < s.KH; kh++) {
                const int ih = oh * s.stride - s.pad + kh;
                if (ih < 0 || ih >= s.H)
                    continue;
                for (int kw = 0; kw < s.KW; kw++) {
                    const int iw = ow * s.stride - s.pad + kw;
                    if (iw < 0 || iw >= s.W)
                        continue;
                    acc = __fadd_rn(acc, __fmul_rn(wp[kh * s.KW + kw],
                                                   xp[(size_t)ih * s.W + (size_t)iw]));
                }
            }
        }
        y[i] = b ? __fadd_rn(acc, b[o]) : acc;
    }
}

template <typename I>
__global__ static void k_gconv_dx(cdp_conv_shape s, const float *__restrict__ w,
                                  const float *__restrict__ dy, float *__restrict__ dx)
{
    const int G = s.groups > 1 ? s.groups : 1, Cg = s.Cin / G, Og = s.Cout / G;
    const I n = (I)s.B * (I)s.Cin * (I)s.H * (I)s.W;
    const size_t P = (size_t)s.OH * (size_t)s.OW;
    GRID_STRIDE_I(I, i, n) {
        const int iw = (int)(i % (I)s.W), ih = (int)(i / (I)s.W % (I)s.H);
        const I t = i / ((I)s.W * (I)s.H);
        const int ci = (int)(t % (I)s.Cin);
        const size_t bi = (size_t)(t / (I)s.Cin);
        const int g = ci / Cg, c = ci % Cg;
        float acc = 0.0f;
        for (int o = g * Og; o < (g + 1) * Og; o++) {
            const float *gp = dy + (bi * (size_t)s.Cout + (size_t)o) * P;
            const float *wp = w + ((size_t)o * (size_t)Cg + (size_t)c) * (size_t)s.KH * s.KW;
            for (int kh = 0; kh < s.KH; kh++) {
                const int th = ih + s.pad - kh;
                if (th < 0 || th % s.stride || th / s.stride >= s.OH)
                    continue;
                for (int kw = 0; kw < s.KW; kw++) {
                    const int tw = iw + s.pad - kw;
                    if (tw < 0 || tw % s.stride || tw / s.stride >= s.OW)
                        continue;
                    acc = __fadd_rn(acc, __fmul_rn(wp[kh * s.KW + kw],
                                                   gp[(size_t)(th / s.stride) * s.OW +
                                                      (size_t)(tw / s.stride)]));
                }
            }
        }
        dx[i] = acc;
    }
}

template <typename I>
__global__ static void k_gconv_dw(cdp_conv_shape s, const float *__restrict__ x,
                                  const float *__restrict__ dy, float *__restrict__ dw,
                                  int accumulate)
{
    const int G = s.groups > 1 ? s.groups : 1, Cg = s.Cin / G, Og = s.Cout / G;
    const I n = (I)s.Cout * (I)Cg * (I)s.KH * (I)s.KW;
    const size_t HW = (size_t)s.H * (size_t)s.W, P = (size_t)s.OH * (size_t)s.OW;
    GRID_STRIDE_I(I, i, n) {
        const int kw = (int)(i % (I)s.KW), kh = (int)(i / (I)s.KW % (I)s.KH);
        const I t = i / ((I)s.KW * (I)s.KH);
        const int c = (int)(t % (I)Cg), o = (int)(t / (I)Cg);
        const int ci = (o / Og) * Cg + c;
        double sum = 0.0;
        for (int bi = 0; bi < s.B; bi++) {
            const float *xp = x + ((size_t)bi * (size_t)s.Cin + (size_t)ci) * HW;
            const float *gp = dy + ((size_t)bi * (size_t)s.Cout + (size_t)o) * P;
            for (int oh = 0; oh < s.OH; oh++) {
                const int ih = oh * s.stride - s.pad + kh;
                if (ih < 0 || ih >= s.H)
                    continue;
                for (int ow = 0; ow < s.OW; ow++) {
                    const int iw = ow * s.stride - s.pad + kw;
                    if (iw < 0 || iw >= s.W)
                        continue;
                    sum = __dadd_rn(sum, __dmul_rn((double)gp[(size_t)oh * s.OW + ow],
                                                   (double)xp[(size_t)ih * s.W + iw]));
                }
            }
        }
        const float r = __double2float_rn(sum);
        dw[i] = accumulate ? __fadd_rn(dw[i], r) : r;
    }
}

void cdp_cuda_conv2d_grouped_fwd(const cdp_conv_shape *s, const float *x, const float *w,
                                 const float *b, float *y)
{
    const size_t n = (size_t)s->B * (size_t)s->Cout * (size_t)s->OH * (size_t)s->OW;
    if (n)
        LAUNCH_I(k_gconv_fwd, n, grid_for(n), CDP_THREADS, *s, x, w, b, y);
}

void cdp_cuda_conv2d_grouped_bwd(const cdp_conv_shape *s, const float *x, const float *w,
                                 const float *dy, float *dx, float *dw, int accumulate)
{
    const size_t nw = cdp_conv_weight_count(s);
    if (nw)
        LAUNCH_I(k_gconv_dw, nw, grid_for(nw), CDP_THREADS, *s, x, dy, dw, accumulate);
    const size_t nx = (size_t)s->B * (size_t)s->Cin * (size_t)s->H * (size_t)s->W;
    if (dx && nx)
        LAUNCH_I(k_gconv_dx, nx, grid_for(nx), CDP_THREADS, *s, w, dy, dx);
}
