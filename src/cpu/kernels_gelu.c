/* Exact (erf-form) GELU in float, vectorised.
 *
 * libm's erf in double costs ~30 ns an element, which made GELU a quarter
 * of a ViT step; these kernels compute, per element and in float,
 *     Phi(x) = x < 0 ? E/2 : 1 - E/2,   E = erfc(|x| / sqrt 2)
 *     gelu(x) = x * Phi(x),   gelu'(x) = Phi(x) + x * phi(x),
 *     phi(x) = exp(-x*x/2) / sqrt(2 pi)
 * with erfc from the Chebyshev fit of Press et al. (Numerical Recipes,
 * erfcc: erfc(z) = t exp(-z^2 + P(t)), t = 1 / (1 + z/2), fractional error
 * below 1.2e-7 for every z >= 0) and exp from its own range reduction and
 * polynomial (relative error ~2e-7).  Taking Phi from erfc keeps its
 * relative accuracy where x is very negative (no 1 + erf(x) cancellation).
 *
 * Every operation is written out (fmaf, rintf, one division), so the bits
 * are the same on every x86-64 and for every instruction set the loop is
 * compiled for: the clones below only pick faster instructions for the same
 * IEEE operations (-std=c11: no FP contraction). */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "cpu_internal.h"

/* exp(x) for x <= 0 (the only arguments here): 2^n * e^r, n = rint(x /
 * ln 2), r = x - n ln 2 in two parts (Cody-Waite), e^r by a degree-6
 * polynomial; below -87 the result is 0 */
static inline float exp_neg(float x)
{
    x = x < -87.0f ? -87.0f : x;
    const float n = rintf(x * 1.44269504088896341f);
    float r = fmaf(n, -0.693145751953125f, x);
    r = fmaf(n, -1.428606765330187e-06f, r);
    float p = 1.3981999507e-3f;
    p = fmaf(p, r, 8.3334519073e-3f);
    p = fmaf(p, r, 4.1665795894e-2f);
    p = fmaf(p, r, 1.6666665459e-1f);
    p = fmaf(p, r, 5.0000001201e-1f);
    p = fmaf(p, r * r, r) + 1.0f;
    /* a NaN x leaves p a NaN: its exponent is not touched (converting a
     * NaN n to an integer would be undefined) */
    const int32_t ni = n == n ? (int32_t)n : 0;
    int32_t bits;
    memcpy(&bits, &p, sizeof bits);
    bits += ni * (1 << 23);
    memcpy(&p, &bits, sizeof p);
    return p;
}

/* Phi(x), the standard normal CDF */
static inline float norm_cdf(float x)
{
    const float z = fabsf(x) * 0.70710678118654752f;
    const float t = 1.0f / fmaf(0.5f, z, 1.0f);
    float p = 0.17087277f;
    p = fmaf(p, t, -0.82215223f);
    p = fmaf(p, t, 1.48851587f);
    p = fmaf(p, t, -1.13520398f);
    p = fmaf(p, t, 0.27886807f);
    p = fmaf(p, t, -0.18628806f);
    p = fmaf(p, t, 0.09678418f);
    p = fmaf(p, t, 0.37409196f);
    p = fmaf(p, t, 1.00002368f);
    p = fmaf(p, t, -1.26551223f);
    const float half_e = 0.5f * t * exp_neg(fmaf(-z, z, p));
    return x < 0.0f ? half_e : 1.0f - half_e;
}

static inline float gelu(float x)
{
    return x * norm_cdf(x);
}

/* dy * gelu'(x) */
static inline float gelu_grad(float x, float dy)
{
    const float phi = exp_neg(-0.5f * x * x) * 0.398942280401432678f;
    return dy * fmaf(x, phi, norm_cdf(x));
}

CDP_CPU_CLONES static void fwd_span(size_t n, const float *x, float *y)
{
    for (size_t k = 0; k < n; k++)
        y[k] = gelu(x[k]);
}

CDP_CPU_CLONES static void bwd_span(size_t n, const float *x, const float *dy, float *dx)
{
    for (size_t k = 0; k < n; k++)
        dx[k] = gelu_grad(x[k], dy[k]);
}

/* elements per OpenMP iteration: spans are independent, so the bits do not
 * depend on the thread count */
#define SPAN 4096
#define SPANS(n) (((n) + SPAN - 1) / SPAN)
#define SPAN_LEN(n, k) ((n) - (k) < SPAN ? (n) - (k) : SPAN)

void cdp_cpu_gelu_fwd(size_t n, const float *x, float *y)
{
#pragma omp parallel for CDP_CPU_PAR(n * 8)
    for (size_t s = 0; s < SPANS(n); s++)
        fwd_span(SPAN_LEN(n, s * SPAN), x + s * SPAN, y + s * SPAN);
}

void cdp_cpu_gelu_bwd(size_t n, const float *x, const float *dy, float *dx)
{
#pragma omp parallel for CDP_CPU_PAR(n * 8)
    for (size_t s = 0; s < SPANS(n); s++)
        bwd_span(SPAN_LEN(n, s * SPAN), x + s * SPAN, dy + s * SPAN, dx + s * SPAN);
}

/* --precision bf16 on bfloat16 storage: the same values as gelu_fwd and
 * gelu_bwd on the widened x (the forward's x may also be floats), the
 * forward's y rounded as bf16_pack does.
 * A span at a time through a float buffer on the thread's stack (16 KiB,
 * in its L1/L2), so that each loop vectorises as gelu_fwd's */
void cdp_cpu_bf16_gelu_fwd(size_t n, const float *xf, const uint16_t *x16, uint16_t *y)
{
#pragma omp parallel for CDP_CPU_PAR(n * 8)
    for (size_t s = 0; s < SPANS(n); s++) {
        float v[SPAN];
        const size_t k = s * SPAN, len = SPAN_LEN(n, k);
        if (x16) {
            cdp_cpu_bf16_widen_span(len, x16 + k, v);
            fwd_span(len, v, v);
        } else {
            fwd_span(len, xf + k, v);
        }
        cdp_cpu_bf16_pack_span(len, v, y + k);
    }
}

void cdp_cpu_bf16_gelu_bwd(size_t n, const uint16_t *x, const float *dy, float *dx)
{
#pragma omp parallel for CDP_CPU_PAR(n * 8)
    for (size_t s = 0; s < SPANS(n); s++) {
        float v[SPAN];
        const size_t k = s * SPAN, len = SPAN_LEN(n, k);
        cdp_cpu_bf16_widen_span(len, x + k, v);
        bwd_span(len, v, dy + k, dx + k);
    }
}
