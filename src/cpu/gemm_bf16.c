/* The batched products of attention under --precision bf16 (Q K^T, P V
 * and their gradients) with their operands in bfloat16 storage:
 * C_b = alpha op(A_b) op(B_b), float32 C, through oneDNN's bf16 matmul
 * (matmul_bf16.c) with the entries as its batch dimension.
 *
 * Determinism.  The batch is cut into blocks of consecutive entries whose
 * number depends on the batch and cdp_cpu_gemm_split only (never on the
 * thread count); each block is one single-threaded matmul, and the OpenMP
 * threads share the blocks out.  Within a block every entry is a product of
 * its own (oneDNN never sums across the batch dimension), so an entry's
 * bits are those of its operands, the shape and alpha.
 *
 * Why blocks of entries and not one matmul per entry: an entry of
 * vit-tiny's attention is 50 x 50 x 64, a few microseconds of work, about
 * what executing a primitive costs. */
#include "config.h"

#ifdef HAVE_DNNL

#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_internal.h"

/* below this many multiply-adds in all, the blocks run on one thread */
#define GEMMB_MIN_PAR_MACS 2.0e6

/* per-thread dense copies of a block's op(A), op(B) and C: oneDNN 2.6 runs
 * its fast kernel (brgemm) on dense operands only, and strided ones (a
 * head's columns of QKV, the heads side by side in O) took its slow gemm
 * path, 7-12x the time on vit-tiny's 50 x 50 x 64 entries (the copies cost
 * a small part of the product): cdp_cpu_thread_buf's GEMM_A, GEMM_B, GEMM_C */
/* op(X_e) [rows, cols] of n entries (stride s, leading dimension ld),
 * copied densely into the buffer *buf */
static uint16_t *dense(int trans, int rows, int cols, const uint16_t *x, int ld, size_t s, int n,
                       int which)
{
    uint16_t *d = cdp_cpu_thread_buf(which, (size_t)n * rows * cols * sizeof(uint16_t),
                                     "the batched bfloat16 products");
    for (int e = 0; e < n; e++) {
        const uint16_t *xe = x + (size_t)e * s;
        uint16_t *de = d + (size_t)e * rows * cols;
        for (int r = 0; r < rows; r++)
            for (int c = 0; c < cols; c++)
                de[(size_t)r * cols + c] = trans ? xe[(size_t)c * ld + r] : xe[(size_t)r * ld + c];
    }
    return d;
}

void cdp_cpu_bf16_gemm_batched(int tA, int tB, int M, int N, int K, float alpha,
                               const uint16_t *A, int lda, size_t sA, const uint16_t *Bm, int ldb,
                               size_t sB, float *C, int ldc, size_t sC, int batch)
{
    if (M <= 0 || N <= 0 || K <= 0 || batch <= 0)
        return;
    const int nb = batch < cdp_cpu_gemm_split ? batch : cdp_cpu_gemm_split;
    const double macs = (double)batch * (double)M * (double)N * (double)K;
    const int nt = nb < cdp_cpu_omp_threads ? nb : cdp_cpu_omp_threads;
#pragma omp parallel for if (nt > 1 && macs >= GEMMB_MIN_PAR_MACS) num_threads(nt) schedule(static)
    for (int q = 0; q < nb; q++) {
        const int b0 = (int)((int64_t)batch * q / nb), b1 = (int)((int64_t)batch * (q + 1) / nb);
        const int n = b1 - b0;
        uint16_t *a = dense(tA, M, K, A + (size_t)b0 * sA, lda, sA, n, CDP_CPU_TBUF_GEMM_A);
        uint16_t *bd = dense(tB, K, N, Bm + (size_t)b0 * sB, ldb, sB, n, CDP_CPU_TBUF_GEMM_B);
        float *c = cdp_cpu_thread_buf(CDP_CPU_TBUF_GEMM_C, (size_t)n * M * N * sizeof(float),
                                      "the batched bfloat16 products");
        const int64_t sa[4] = {(int64_t)M * K, (int64_t)M * K, K, 1};
        const int64_t sc[4] = {(int64_t)M * N, (int64_t)M * N, N, 1};
        const int64_t sbd[4] = {(int64_t)K * N, (int64_t)K * N, N, 1};
        cdp_cpu_bf16_matmul4(n, 1, M, N, K, alpha, a, sa, bd, sbd, c, sc);
        for (int e = 0; e < n; e++)
            for (int i = 0; i < M; i++)
                memcpy(C + (size_t)(b0 + e) * sC + (size_t)i * ldc, c + ((size_t)e * M + i) * N,
                       (size_t)N * sizeof(float));
    }
}

#endif
