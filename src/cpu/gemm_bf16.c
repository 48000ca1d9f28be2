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

#include "cpu_internal.h"

/* below this many multiply-adds in all, the blocks run on one thread */
#define GEMMB_MIN_PAR_MACS 2.0e6

/* the strides of op(X) [rows, cols] stored row-major with leading
 * dimension ld (transposed: element (r, c) at c * ld + r), entry stride s */
static void strides(int trans, int ld, size_t s, int64_t st[4])
{
    st[0] = (int64_t)s;
    st[1] = (int64_t)s;
    st[2] = trans ? 1 : ld;
    st[3] = trans ? ld : 1;
}

void cdp_cpu_bf16_gemm_batched(int tA, int tB, int M, int N, int K, float alpha,
                               const uint16_t *A, int lda, size_t sA, const uint16_t *Bm, int ldb,
                               size_t sB, float *C, int ldc, size_t sC, int batch)
{
    if (M <= 0 || N <= 0 || K <= 0 || batch <= 0)
        return;
    int64_t sa[4], sb[4], sc[4];
    strides(tA, lda, sA, sa);
    strides(tB, ldb, sB, sb);
    strides(0, ldc, sC, sc);
    const int nb = batch < cdp_cpu_gemm_split ? batch : cdp_cpu_gemm_split;
    const double macs = (double)batch * (double)M * (double)N * (double)K;
    const int nt = nb < cdp_cpu_omp_threads ? nb : cdp_cpu_omp_threads;
#pragma omp parallel for if (nt > 1 && macs >= GEMMB_MIN_PAR_MACS) num_threads(nt) schedule(static)
    for (int q = 0; q < nb; q++) {
        const int b0 = (int)((int64_t)batch * q / nb), b1 = (int)((int64_t)batch * (q + 1) / nb);
        cdp_cpu_bf16_matmul4(b1 - b0, 1, M, N, K, alpha, A + (size_t)b0 * sA, sa,
                             Bm + (size_t)b0 * sB, sb, C + (size_t)b0 * sC, sc);
    }
}

#endif
