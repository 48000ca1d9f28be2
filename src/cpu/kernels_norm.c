/* CPU batch normalisation (NCHW, x[B][C][HW]): training forward, evaluation
 * forward, backward and the step's running statistics.
 *
 * Determinism.  Every loop runs in parallel over channels only; each
 * channel's reductions are made by one thread, in double, in the order
 * b = 0..B-1, p = 0..HW-1, so the bits never depend on the thread count.
 * Per-element arithmetic is in float, operation by operation as written
 * (no FP contraction: -std=c11, clang pragma below).  No allocation. */
#include <math.h>
#include <string.h>

#include "cdp/backend.h"
#include "cpu_internal.h"

#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

#define PLANE(x, b, c) ((x) + ((size_t)(b) * (size_t)C + (size_t)(c)) * (size_t)HW)

/* Per channel c, over the n = B*HW values in order, in double:
 *     mean = sum / n,  M2 = sum of (x - mean)^2
 *     invstd = (float)(1 / sqrt(M2 / n + eps))
 * then in float y = ((x - (float)mean) * invstd) * gamma + beta.
 * save = {(float)mean[C], invstd[C]}, stats = {mean[C], M2[C]}. */
void cdp_cpu_bn_fwd_train(int B, int C, int HW, const float *x, const float *gamma,
                          const float *beta, float eps, float *y, float *save, double *stats)
{
    if (C <= 0)
        return;
    const double n = (double)B * (double)HW;
#pragma omp parallel for CDP_CPU_PAR((size_t)B * (size_t)C * (size_t)(HW > 0 ? HW : 0))
    for (int c = 0; c < C; c++) {
        double sum = 0.0;
        for (int b = 0; b < B; b++) {
            const float *xp = PLANE(x, b, c);
            for (int p = 0; p < HW; p++)
                sum += (double)xp[p];
        }
        double mean = sum / n, m2 = 0.0;
        for (int b = 0; b < B; b++) {
            const float *xp = PLANE(x, b, c);
            for (int p = 0; p < HW; p++) {
                double d = (double)xp[p] - mean;
                m2 += d * d;
            }
        }
        float fm = (float)mean;
        float is = (float)(1.0 / sqrt(m2 / n + (double)eps));
        float ga = gamma[c], be = beta[c];
        for (int b = 0; b < B; b++) {
            const float *xp = PLANE(x, b, c);
            float *yp = PLANE(y, b, c);
            for (int p = 0; p < HW; p++)
                yp[p] = (xp[p] - fm) * is * ga + be;
        }
        save[c] = fm;
        save[C + c] = is;
        stats[c] = mean;
        stats[C + c] = m2;
    }
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
        for (int b = 0; b < B; b++) {
            const float *xp = PLANE(x, b, c);
            float *yp = PLANE(y, b, c);
            for (int p = 0; p < HW; p++)
                yp[p] = (xp[p] - rm) / sd * ga + be;
        }
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
#pragma omp parallel for CDP_CPU_PAR((size_t)B * (size_t)C * (size_t)(HW > 0 ? HW : 0))
    for (int c = 0; c < C; c++) {
        const float mean = save[c], is = save[C + c];
        double sdy = 0.0, sdyx = 0.0;
        for (int b = 0; b < B; b++) {
            const float *xp = PLANE(x, b, c), *dp = PLANE(dy, b, c);
            for (int p = 0; p < HW; p++) {
                float xh = (xp[p] - mean) * is;
                sdy += (double)dp[p];
                sdyx += (double)dp[p] * (double)xh;
            }
        }
        float fdb = (float)sdy, fdg = (float)sdyx;
        float k = gamma[c] * is / n;
        for (int b = 0; b < B; b++) {
            const float *xp = PLANE(x, b, c), *dp = PLANE(dy, b, c);
            float *op = PLANE(dx, b, c);
            for (int p = 0; p < HW; p++) {
                float xh = (xp[p] - mean) * is;
                op[p] = k * (n * dp[p] - fdb - xh * fdg);
            }
        }
        dbeta[c] = accumulate ? dbeta[c] + fdb : fdb;
        dgamma[c] = accumulate ? dgamma[c] + fdg : fdg;
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
