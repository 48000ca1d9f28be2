/* The sample slots every CPU convolution path shares (im2col in
 * kernels_conv.c, direct, oneDNN): which samples each slot computes, how
 * many threads share the slots, and the sum of the slots' weight gradients
 * in slot order, so that every path gives bits independent of threads
 * (cpu_internal.h says how). */
#include "config.h"

#include <stdint.h>
#include <stddef.h>

#include "cpu_internal.h"

/* below this many multiply-adds a convolution runs on one thread */
#define CONV_MIN_PAR_MACS 4.0e6

int cdp_cpu_conv_slots(int B)
{
    int split = cdp_cpu_gemm_split < 1 ? 1 : cdp_cpu_gemm_split;
    return split < B ? split : B;
}

void cdp_cpu_conv_chunk(int B, int S, int m, int sl, int c, int *b0, int *b1)
{
    int64_t lo = (int64_t)B * sl / S, hi = (int64_t)B * (sl + 1) / S;
    *b0 = (int)(lo + (hi - lo) * c / m);
    *b1 = (int)(lo + (hi - lo) * (c + 1) / m);
}

int cdp_cpu_conv_threads(double macs, int S)
{
    int nt = cdp_cpu_omp_threads < S ? cdp_cpu_omp_threads : S;
    return macs < CONV_MIN_PAR_MACS || nt < 1 ? 1 : nt;
}

void cdp_cpu_conv_dw_sum(size_t nw, int S, const float *part0, size_t stride, float *dw,
                         int accumulate)
{
#pragma omp parallel for CDP_CPU_PAR(nw * (size_t)S)
    for (size_t i = 0; i < nw; i++) {
        float r = part0[i];
        for (int sl = 1; sl < S; sl++)
            r = r + part0[(size_t)sl * stride + i];
        dw[i] = accumulate ? dw[i] + r : r;
    }
}
