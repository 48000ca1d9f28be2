/* The statistics of the double-precision normalisation references that
 * test_cpu_image_token_kernels (per kernel) and test_nn_block (per model)
 * compare cdp's float kernels against: mean and biased variance by two
 * passes, written once so that both tests check against the same textbook
 * formula. */
#ifndef CDP_TESTS_REF_NORM_H
#define CDP_TESTS_REF_NORM_H

#include <stddef.h>

/* channel c of x[B, C, HW] (BatchNorm) */
static inline void ref_bn_stats(int B, int C, int HW, const double *x, int c, double *mean,
                                double *var)
{
    const double n = (double)B * HW;
    double s = 0.0, v = 0.0;
    for (int b = 0; b < B; b++)
        for (int p = 0; p < HW; p++)
            s += x[((size_t)b * C + c) * HW + p];
    const double m = s / n;
    for (int b = 0; b < B; b++)
        for (int p = 0; p < HW; p++) {
            double d = x[((size_t)b * C + c) * HW + p] - m;
            v += d * d;
        }
    *mean = m;
    *var = v / n;
}

/* one row x[D] (LayerNorm) */
static inline void ref_ln_stats(int D, const double *x, double *mean, double *var)
{
    double s = 0.0, v = 0.0;
    for (int d = 0; d < D; d++)
        s += x[d];
    const double m = s / D;
    for (int d = 0; d < D; d++)
        v += (x[d] - m) * (x[d] - m);
    *mean = m;
    *var = v / D;
}

#endif
