/* CPU batch normalisation (NCHW, x[B][C][HW]): training forward, evaluation
 * forward, backward and the step's running statistics.
 *
 * Determinism.  Every loop runs in parallel over channels only; each
 * channel's reductions are made by one thread, in double, in the order
 * b = 0..B-1, p = 0..HW-1, so the bits never depend on the thread count.
 * Per-element arithmetic is in float, operation by operation as written
 * (no FP contraction: -std=c11, clang pragma below).  No allocation, but
 * the per-thread buffer where the bf16 forwards stage a channel group
 * (cdp_cpu_thread_buf).
 * cdp_cpu_bn_simd = 0 forces the portable loops (the same bits; tests
 * compare them). */
#include "config.h"   /* HAVE_DNNL */

#include <math.h>
#include <string.h>

#include "backend/backend.h"
#include "cpu_internal.h"

#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

#define PLANE(x, b, c) ((x) + ((size_t)(b) * (size_t)C + (size_t)(c)) * (size_t)HW)

/* Channels are taken BN_G at a time, so that BN_G independent double
 * chains overlap in the core: a channel's reductions still run in the order
 * b = 0..B-1, p = 0..HW-1 (its bits are those of the channel alone), but a
 * lone chain waits for the previous add at every element, which made the
 * sums ~4x slower than the loads that feed them.  With AVX-512 a group is
 * one vector of BN_G doubles, lane j channel c0 + j: 8 planes' next 8
 * values are loaded and transposed, then added lane-wise in order p. */
enum { BN_G = 8 };

#if defined(__x86_64__) && defined(__GNUC__) && !defined(CDP_NO_AVX512)
#include <immintrin.h>
#define HAVE_AVX512 1
#define AVX __attribute__((target("avx512f")))
/* ASan's fake stack frames (detect_stack_use_after_return, .ci/sanitize)
 * do not keep the 64-byte alignment of AVX-512 locals, and the -O1
 * sanitizer build keeps these in memory: the kernels below segfaulted there.
 * They are left out of ASan's instrumentation; their loads stay within the
 * planes (tests check the bits against the plain formula).  The helper they
 * inline must be left out too: an instrumented inlinee's scope marks poison
 * its arrays' shadow when their scope ends, and the uninstrumented caller
 * never clears it on return, so that stack was later reported as
 * "stack-use-after-scope" in whatever function reused it (Open MPI's send
 * of a message header, an OpenMP region's argument block). */
#if defined(__SANITIZE_ADDRESS__)
#define NO_ASAN __attribute__((no_sanitize_address))
#else
#define NO_ASAN
#endif
#endif

int cdp_cpu_bn_simd = 1;

static int bn_use_simd(void)
{
    return cdp_cpu_bn_simd && cdp_cpu_avx512f();
}

/* Number of channel groups: group i is [i * BN_G, min(C, (i + 1) * BN_G)). */
static int bn_groups(int C) { return (C + BN_G - 1) / BN_G; }

#ifdef HAVE_AVX512
/* r[j] = 8 values of plane j on entry; r[k] lane j = value k of plane j on
 * exit (an 8x8 transpose) */
AVX NO_ASAN static inline __attribute__((always_inline)) void transpose8(__m256 r[8])
{
    __m256 t[8], u[8];
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 8; i += 4) {
        u[i] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
        u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
        u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
        u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
    }
    for (int i = 0; i < 4; i++) {
        r[i] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x20);
        r[i + 4] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x31);
    }
}

/* bn_sums for a whole group, one vector lane per channel */
AVX NO_ASAN static void bn_sums_avx(int B, int C, int HW, const float *x, int c0, const double *mean,
                            double *sum)
{
    __m512d acc = _mm512_setzero_pd(), mu = mean ? _mm512_loadu_pd(mean) : acc;
    const int HW8 = HW & ~7;
    for (int b = 0; b < B; b++) {
        const float *xp = PLANE(x, b, c0);
        for (int p = 0; p < HW8; p += 8) {
            __m256 r[8];
            for (int j = 0; j < 8; j++)
                r[j] = _mm256_loadu_ps(xp + (size_t)j * HW + p);
            transpose8(r);
            for (int k = 0; k < 8; k++) {
                __m512d v = _mm512_cvtps_pd(r[k]);
                if (mean) {
                    v = _mm512_sub_pd(v, mu);
                    v = _mm512_mul_pd(v, v);
                }
                acc = _mm512_add_pd(acc, v);
            }
        }
        if (HW8 < HW) {
            double a[BN_G];
            _mm512_storeu_pd(a, acc);
            for (int j = 0; j < BN_G; j++)
                for (int p = HW8; p < HW; p++) {
                    double v = (double)xp[(size_t)j * HW + p];
                    if (mean) {
                        v = v - mean[j];
                        v = v * v;
                    }
                    a[j] += v;
                }
            acc = _mm512_loadu_pd(a);
        }
    }
    _mm512_storeu_pd(sum, acc);
}

/* bn_bwd_sums for a whole group, one vector lane per channel */
AVX NO_ASAN static void bn_bwd_sums_avx(int B, int C, int HW, const float *x, const float *dy,
                                const float *mean, const float *is, int c0, double *sdy,
                                double *sdyx)
{
    __m512d a1 = _mm512_setzero_pd(), a2 = a1;
    const __m256 mu = _mm256_loadu_ps(mean), sc = _mm256_loadu_ps(is);
    const int HW8 = HW & ~7;
    for (int b = 0; b < B; b++) {
        const float *xp = PLANE(x, b, c0), *dp = PLANE(dy, b, c0);
        for (int p = 0; p < HW8; p += 8) {
            __m256 r[8], d[8];
            for (int j = 0; j < 8; j++) {
                r[j] = _mm256_loadu_ps(xp + (size_t)j * HW + p);
                d[j] = _mm256_loadu_ps(dp + (size_t)j * HW + p);
            }
            transpose8(r);
            transpose8(d);
            for (int k = 0; k < 8; k++) {
                __m256 xh = _mm256_mul_ps(_mm256_sub_ps(r[k], mu), sc);
                __m512d dd = _mm512_cvtps_pd(d[k]);
                a1 = _mm512_add_pd(a1, dd);
                a2 = _mm512_add_pd(a2, _mm512_mul_pd(dd, _mm512_cvtps_pd(xh)));
            }
        }
        if (HW8 < HW) {
            double s1[BN_G], s2[BN_G];
            _mm512_storeu_pd(s1, a1);
            _mm512_storeu_pd(s2, a2);
            for (int j = 0; j < BN_G; j++)
                for (int p = HW8; p < HW; p++) {
                    size_t k = (size_t)j * HW + p;
                    float xh = (xp[k] - mean[j]) * is[j];
                    s1[j] += (double)dp[k];
                    s2[j] += (double)dp[k] * (double)xh;
                }
            a1 = _mm512_loadu_pd(s1);
            a2 = _mm512_loadu_pd(s2);
        }
    }
    _mm512_storeu_pd(sdy, a1);
    _mm512_storeu_pd(sdyx, a2);
}
#endif

/* sum[j] (and, with mean != NULL, sum[j] of (x - mean[j])^2 instead) over
 * the values of channel c0 + j, j < g, each in order b, p, in double. */
CDP_CPU_CLONES static void bn_sums(int B, int C, int HW, const float *x, int c0, int g,
                                   const double *mean, double *sum)
{
#ifdef HAVE_AVX512
    if (g == BN_G && bn_use_simd()) {
        bn_sums_avx(B, C, HW, x, c0, mean, sum);
        return;
    }
#endif
    if (g == BN_G) {
        double s[BN_G] = {0}, mu[BN_G] = {0};
        if (mean)
            for (int j = 0; j < BN_G; j++)
                mu[j] = mean[j];
        for (int b = 0; b < B; b++) {
            const float *xp = PLANE(x, b, c0);
            if (mean)
                for (int p = 0; p < HW; p++)
                    for (int j = 0; j < BN_G; j++) {
                        double d = (double)xp[(size_t)j * HW + p] - mu[j];
                        s[j] += d * d;
                    }
            else
                for (int p = 0; p < HW; p++)
                    for (int j = 0; j < BN_G; j++)
                        s[j] += (double)xp[(size_t)j * HW + p];
        }
        for (int j = 0; j < BN_G; j++)
            sum[j] = s[j];
        return;
    }
    for (int j = 0; j < g; j++) {
        double s = 0.0;
        for (int b = 0; b < B; b++) {
            const float *xp = PLANE(x, b, c0 + j);
            if (mean)
                for (int p = 0; p < HW; p++) {
                    double d = (double)xp[p] - mean[j];
                    s += d * d;
                }
            else
                for (int p = 0; p < HW; p++)
                    s += (double)xp[p];
        }
        sum[j] = s;
    }
}

/* y = (x - mean) * invstd * gamma + beta over one plane, in float */
CDP_CPU_CLONES static void bn_fwd_plane(int HW, const float *x, float mean, float is, float ga,
                                        float be, float *y)
{
    for (int p = 0; p < HW; p++)
        y[p] = (x[p] - mean) * is * ga + be;
}

/* Per channel c, over the n = B*HW values in order, in double:
 *     mean = sum / n,  M2 = sum of (x - mean)^2
 *     invstd = (float)(1 / sqrt(M2 / n + eps))
 * then in float y = ((x - (float)mean) * invstd) * gamma + beta.
 * save = {(float)mean[C], invstd[C]}, stats = {mean[C], M2[C]}. */
/* One group of g channels: the layer's channels c0 + j, j < g (gamma, beta,
 * save and stats index C channels), whose planes are channels cx + j of x
 * and y, tensors of Cx channels (the layer's own, cx = c0; or a staged copy
 * of the group, Cx = g, cx = 0); y may be x. */
static void bn_train_group(int B, int Cx, int HW, const float *x, int cx, int C, int c0, int g,
                           const float *gamma, const float *beta, float eps, float *y,
                           float *save, double *stats)
{
    const double n = (double)B * (double)HW;
    double mean[BN_G], m2[BN_G];
    bn_sums(B, Cx, HW, x, cx, g, NULL, mean);
    for (int j = 0; j < g; j++)
        mean[j] = mean[j] / n;
    bn_sums(B, Cx, HW, x, cx, g, mean, m2);
    for (int j = 0; j < g; j++) {
        int c = c0 + j;
        float fm = (float)mean[j];
        float is = (float)(1.0 / sqrt(m2[j] / n + (double)eps));
        for (int b = 0; b < B; b++) {
            const size_t pl = ((size_t)b * (size_t)Cx + (size_t)(cx + j)) * (size_t)HW;
            bn_fwd_plane(HW, x + pl, fm, is, gamma[c], beta[c], y + pl);
        }
        save[c] = fm;
        save[C + c] = is;
        stats[c] = mean[j];
        stats[C + c] = m2[j];
    }
}

void cdp_cpu_bn_fwd_train(int B, int C, int HW, const float *x, const float *gamma,
                          const float *beta, float eps, float *y, float *save, double *stats)
{
    if (C <= 0)
        return;
    const int ng = bn_groups(C);
#pragma omp parallel for CDP_CPU_PAR((size_t)B * (size_t)C * (size_t)(HW > 0 ? HW : 0))
    for (int gi = 0; gi < ng; gi++) {
        int c0 = gi * BN_G, g = C - c0 < BN_G ? C - c0 : BN_G;
        bn_train_group(B, C, HW, x, c0, C, c0, g, gamma, beta, eps, y, save, stats);
    }
}

/* y = (x - rm) / sd * ga + be over one plane, in float; y may be x */
static void bn_eval_plane(int HW, const float *x, float rm, float sd, float ga, float be,
                          float *y)
{
    for (int p = 0; p < HW; p++)
        y[p] = (x[p] - rm) / sd * ga + be;
}

/* y = ((x - rmean) / sqrt(rvar + eps)) * gamma + beta, in float (the
 * square root once per channel: the same bits as per element) */
void cdp_cpu_bn_fwd_eval(int B, int C, int HW, const float *x, const float *gamma,
                         const float *beta, const float *rmean, const float *rvar, float eps,
                         float *y)
{
    if (C <= 0)
        return;
#pragma omp parallel for CDP_CPU_PAR((size_t)B * (size_t)C * (size_t)(HW > 0 ? HW : 0))
    for (int c = 0; c < C; c++) {
        float rm = rmean[c], sd = sqrtf(rvar[c] + eps), ga = gamma[c], be = beta[c];
        for (int b = 0; b < B; b++)
            bn_eval_plane(HW, PLANE(x, b, c), rm, sd, ga, be, PLANE(y, b, c));
    }
}

#ifdef HAVE_DNNL   /* the backend's bf16 kernels (cpu_internal.h) */
/* ---- --precision bf16: the forwards with y in bfloat16 storage and x in
 * bfloat16 storage (x16) or floats (xf).  A channel group's planes are
 * widened (or copied) into a per-thread buffer laid out as a tensor of g
 * channels, where the float32 code above runs unchanged (the same values in
 * the same order: the same bits), and each output plane is rounded into y
 * as bf16_pack does. */
/* the calling OpenMP thread's buffer of n floats */
static float *bn16_stage(size_t n)
{
    return cdp_cpu_thread_buf(CDP_CPU_TBUF_BN, n * sizeof(float), "BatchNorm's bf16 planes");
}

/* plane (b, c) of x into dst, widened or copied */
static void bn16_load(int C, int HW, const float *xf, const uint16_t *x16, int b, int c,
                      float *dst)
{
    const size_t off = ((size_t)b * (size_t)C + (size_t)c) * (size_t)HW;
    if (x16)
        cdp_cpu_bf16_widen_span((size_t)HW, x16 + off, dst);
    else
        memcpy(dst, xf + off, (size_t)HW * sizeof *dst);
}

void cdp_cpu_bf16_bn_fwd_train(int B, int C, int HW, const float *xf, const uint16_t *x16,
                               const float *gamma, const float *beta, float eps, uint16_t *y,
                               float *save, double *stats)
{
    if (C <= 0)
        return;
    const int ng = bn_groups(C);
#pragma omp parallel for CDP_CPU_PAR((size_t)B * (size_t)C * (size_t)(HW > 0 ? HW : 0))
    for (int gi = 0; gi < ng; gi++) {
        int c0 = gi * BN_G, g = C - c0 < BN_G ? C - c0 : BN_G;
        float *v = bn16_stage((size_t)B * (size_t)g * (size_t)(HW > 0 ? HW : 0));
        for (int b = 0; b < B; b++)
            for (int j = 0; j < g; j++)
                bn16_load(C, HW, xf, x16, b, c0 + j, v + ((size_t)b * g + j) * (size_t)HW);
        bn_train_group(B, g, HW, v, 0, C, c0, g, gamma, beta, eps, v, save, stats);
        for (int b = 0; b < B; b++)
            for (int j = 0; j < g; j++)
                cdp_cpu_bf16_pack_span((size_t)HW, v + ((size_t)b * g + j) * (size_t)HW,
                                       PLANE(y, b, c0 + j));
    }
}

void cdp_cpu_bf16_bn_fwd_eval(int B, int C, int HW, const float *xf, const uint16_t *x16,
                              const float *gamma, const float *beta, const float *rmean,
                              const float *rvar, float eps, uint16_t *y)
{
    if (C <= 0)
        return;
#pragma omp parallel for CDP_CPU_PAR((size_t)B * (size_t)C * (size_t)(HW > 0 ? HW : 0))
    for (int c = 0; c < C; c++) {
        float *v = bn16_stage((size_t)(HW > 0 ? HW : 0));
        float rm = rmean[c], sd = sqrtf(rvar[c] + eps), ga = gamma[c], be = beta[c];
        for (int b = 0; b < B; b++) {
            bn16_load(C, HW, xf, x16, b, c, v);
            bn_eval_plane(HW, v, rm, sd, ga, be, v);
            cdp_cpu_bf16_pack_span((size_t)HW, v, PLANE(y, b, c));
        }
    }
}
#endif

/* For channels c0 + j, j < g: sdy[j] = sum of dy and sdyx[j] = sum of
 * dy * xhat, xhat = (x - mean[j]) * is[j] in float, in double, each in
 * order b, p (BN_G channels at a time, as bn_sums). */
CDP_CPU_CLONES static void bn_bwd_sums(int B, int C, int HW, const float *x, const float *dy,
                        const float *mean, const float *is, int c0, int g, double *sdy,
                        double *sdyx)
{
#ifdef HAVE_AVX512
    if (g == BN_G && bn_use_simd()) {
        bn_bwd_sums_avx(B, C, HW, x, dy, mean, is, c0, sdy, sdyx);
        return;
    }
#endif
    if (g == BN_G) {
        double s1[BN_G] = {0}, s2[BN_G] = {0};
        float mu[BN_G], sc[BN_G];
        for (int j = 0; j < BN_G; j++) {
            mu[j] = mean[j];
            sc[j] = is[j];
        }
        for (int b = 0; b < B; b++) {
            const float *xp = PLANE(x, b, c0), *dp = PLANE(dy, b, c0);
            for (int p = 0; p < HW; p++)
                for (int j = 0; j < BN_G; j++) {
                    size_t k = (size_t)j * HW + p;
                    float xh = (xp[k] - mu[j]) * sc[j];
                    s1[j] += (double)dp[k];
                    s2[j] += (double)dp[k] * (double)xh;
                }
        }
        for (int j = 0; j < BN_G; j++) {
            sdy[j] = s1[j];
            sdyx[j] = s2[j];
        }
        return;
    }
    for (int j = 0; j < g; j++) {
        double s1 = 0.0, s2 = 0.0;
        for (int b = 0; b < B; b++) {
            const float *xp = PLANE(x, b, c0 + j), *dp = PLANE(dy, b, c0 + j);
            for (int p = 0; p < HW; p++) {
                float xh = (xp[p] - mean[j]) * is[j];
                s1 += (double)dp[p];
                s2 += (double)dp[p] * (double)xh;
            }
        }
        sdy[j] = s1;
        sdyx[j] = s2;
    }
}

/* dx = k * (n * dy - db - xhat * dg) over one plane, in float; dx may be dy */
CDP_CPU_CLONES static void bn_bwd_plane(int HW, const float *x, const float *dy, float mean,
                                        float is, float n, float k, float db, float dg,
                                        float *dx)
{
    for (int p = 0; p < HW; p++) {
        float xh = (x[p] - mean) * is;
        dx[p] = k * (n * dy[p] - db - xh * dg);
    }
}

/* Per channel, with mean = save[c], invstd = save[C + c] and, in float,
 * xhat = (x - mean) * invstd:
 *     dbeta  = sum of dy           (double, order b, p)
 *     dgamma = sum of dy * xhat    (double products and sum, order b, p)
 * rounded to float once (then added to dbeta, dgamma with accumulate), and
 * in float, with db = (float)dbeta, dg = (float)dgamma:
 *     dx = (gamma * invstd / n) * (((n * dy) - db) - xhat * dg).
 * dx may equal dy: each element is read before it is written. */
void cdp_cpu_bn_bwd(int B, int C, int HW, const float *x, const float *gamma,
                    const float *save, const float *dy, float *dx, float *dgamma,
                    float *dbeta, int accumulate)
{
    if (C <= 0)
        return;
    const float n = (float)((double)B * (double)HW);
    const int ng = bn_groups(C);
#pragma omp parallel for CDP_CPU_PAR((size_t)B * (size_t)C * (size_t)(HW > 0 ? HW : 0))
    for (int gi = 0; gi < ng; gi++) {
        int c0 = gi * BN_G, g = C - c0 < BN_G ? C - c0 : BN_G;
        double sdy[BN_G], sdyx[BN_G];
        bn_bwd_sums(B, C, HW, x, dy, save + c0, save + C + c0, c0, g, sdy, sdyx);
        for (int j = 0; j < g; j++) {
            int c = c0 + j;
            const float mean = save[c], is = save[C + c];
            float fdb = (float)sdy[j], fdg = (float)sdyx[j];
            float k = gamma[c] * is / n;
            for (int b = 0; b < B; b++)
                bn_bwd_plane(HW, PLANE(x, b, c), PLANE(dy, b, c), mean, is, n, k, fdb, fdg,
                             PLANE(dx, b, c));
            dbeta[c] = accumulate ? dbeta[c] + fdb : fdb;
            dgamma[c] = accumulate ? dgamma[c] + fdg : fdg;
        }
    }
}

/* Chan et al.'s pairwise combination, in double, in worker order: starting
 * from (na, mean, M2) = (n, mean_0, M2_0), for w = 1..N-1 with nb = n:
 *     delta = mean_w - mean;  nab = na + nb
 *     mean  = mean + delta * nb / nab
 *     M2    = M2 + M2_w + delta * delta * na * nb / nab;  na = nab
 * (each line left to right); then s_var = M2 / (N*n - 1) and, in float,
 *     rmean_out = (1 - m) * rmean_in + m * (float)mean
 *     rvar_out  = (1 - m) * rvar_in  + m * (float)s_var. */
void cdp_cpu_bn_running_update(int C, int N, double n, const double *stats, size_t stride,
                               const float *rmean_in, const float *rvar_in, float m,
                               float *rmean_out, float *rvar_out)
{
    if (C <= 0 || N <= 0)
        return;
    for (int c = 0; c < C; c++) {
        double na = n, mean = stats[c], m2 = stats[C + c];
        for (int w = 1; w < N; w++) {
            const double *st = stats + (size_t)w * stride;
            double nb = n, nab = na + nb;
            double delta = st[c] - mean;
            mean = mean + delta * nb / nab;
            m2 = m2 + st[C + c] + delta * delta * na * nb / nab;
            na = nab;
        }
        double var = m2 / ((double)N * n - 1.0);
        float om = 1.0f - m;
        rmean_out[c] = om * rmean_in[c] + m * (float)mean;
        rvar_out[c] = om * rvar_in[c] + m * (float)var;
    }
}
