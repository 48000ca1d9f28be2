/* The one single-threaded SGEMM every Linear, attention product and batched
 * GEMM of the CPU backend calls: oneDNN's sgemm (dnnl_sgemm) or OpenBLAS's
 * cblas_sgemm, chosen once per process (cdp_cpu_gemm_dnnl).
 *
 * Why oneDNN by default.  oneDNN's sgemm JIT-compiles for the CPU it finds
 * (AVX-512 here), whatever OPENBLAS_CORETYPE says; OpenBLAS runs the kernel
 * the environment or its own detection picks.  Measured on an AMD EPYC
 * (Zen 4, AVX512_BF16) whose environment sets OPENBLAS_CORETYPE=Haswell, on
 * one thread, the vit-tiny Linear shapes (3200 rows; 192 -> 576, 192 -> 192,
 * 192 -> 768, 768 -> 192; forward, dW and dx): OpenBLAS Haswell 47-84
 * GFLOP/s, OpenBLAS SkylakeX 70-160, oneDNN 92-196 (bench/run linear-bound).
 * CDP_GEMM_DNNL=0 keeps OpenBLAS (A/B runs; a build without oneDNN always
 * does).
 *
 * Determinism.  The caller decomposes a GEMM into blocks that depend on the
 * shape only (kernels_cpu.c, "GEMM decomposition") and calls this from one
 * OpenMP thread per block; each call runs on one thread: OpenBLAS is kept
 * at one thread (blas_setup.c), and oneDNN, which sizes its own threading
 * from omp_get_max_threads() at each call, is given one thread around the
 * call (the calling thread's own OpenMP setting, restored after).  So the
 * bits of a block depend on its operands and the library only, and the
 * library (and oneDNN's ISA) is part of the numerics text of the banner. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cblas.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#ifdef HAVE_DNNL
#include <oneapi/dnnl/dnnl.h>
#endif

#include "cpu_internal.h"

#ifdef HAVE_DNNL
int cdp_cpu_gemm_dnnl = 1;
#else
int cdp_cpu_gemm_dnnl = 0;
#endif

const char *cdp_cpu_gemm_library(void)
{
    return cdp_cpu_gemm_dnnl ? "oneDNN sgemm" : "OpenBLAS sgemm";
}

void cdp_cpu_sgemm(int tA, int tB, int M, int N, int K, float alpha, const float *A, int lda,
                   const float *B, int ldb, float beta, float *C, int ldc)
{
#ifdef HAVE_DNNL
    if (cdp_cpu_gemm_dnnl) {
#ifdef _OPENMP
        const int nt = omp_get_max_threads();
        if (nt != 1)
            omp_set_num_threads(1);
#endif
        dnnl_status_t st = dnnl_sgemm(tA ? 'T' : 'N', tB ? 'T' : 'N', M, N, K, alpha, A, lda, B,
                                      ldb, beta, C, ldc);
#ifdef _OPENMP
        if (nt != 1)
            omp_set_num_threads(nt);
#endif
        if (st != dnnl_success) {
            /* only a bad argument or no memory for its packing buffers */
            fprintf(stderr, "cdp: oneDNN sgemm %dx%dx%d failed (status %d)\n", M, N, K, (int)st);
            abort();
        }
        return;
    }
#endif
    cblas_sgemm(CblasRowMajor, tA ? CblasTrans : CblasNoTrans, tB ? CblasTrans : CblasNoTrans,
                M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
