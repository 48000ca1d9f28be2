/* --flush-denormals: the CPU's flush-to-zero modes, for every thread that
 * computes.
 *
 * Why.  IEEE arithmetic (cdp's default, as PyTorch's) keeps denormal floats
 * (|x| < 2^-126), and on many CPUs an operation on one takes a slow path:
 * on an Intel Xeon, the default MLP on --data synthetic ran 2.4x slower
 * per step after step ~800, once its gradients had shrunk into that range
 * (bench/kernels/denormal.sh; an AMD EPYC showed no slowdown).  This is PyTorch's
 * torch.set_flush_denormal(True): denormal inputs read as zero and
 * denormal results are written as zero.  The bits change (wherever a
 * denormal occurs), so it is an option, part of a checkpoint's numerics;
 * they stay deterministic and independent of ranks and threads, since
 * every thread that computes runs in the same mode.
 *
 * Which threads.  The mode is a per-thread register (x86-64: MXCSR's FTZ
 * and DAZ bits; AArch64: FPCR.FZ).  A new thread starts with its creator's
 * mode, and in cdp every computing thread is the main thread or one of
 * libgomp's (OpenBLAS runs single-threaded: blas_setup.c), so setting the
 * main thread's mode, then every thread of the pool that may exist
 * already, covers them all. */
#include <stdio.h>

#include "backend/backend.h"

/* x86-64 only: i386's float math may run on the x87, which MXCSR does not govern */
#if defined(__x86_64__)
#include <xmmintrin.h>
#define MXCSR_FTZ 0x8000u /* results that would be denormal are zero */
#define MXCSR_DAZ 0x0040u /* denormal inputs read as zero */
static int set_mode(void)
{
    _mm_setcsr(_mm_getcsr() | MXCSR_FTZ | MXCSR_DAZ);
    return 0;
}
#elif defined(__aarch64__)
#define FPCR_FZ (1ull << 24) /* flush denormal inputs and results to zero */
static int set_mode(void)
{
    unsigned long long r;
    __asm__ volatile("mrs %0, fpcr" : "=r"(r));
    __asm__ volatile("msr fpcr, %0" : : "r"(r | FPCR_FZ));
    return 0;
}
#else
static int set_mode(void)
{
    return -1;
}
#endif

int cdp_cpu_flush_denormals(char *err, size_t errlen)
{
    if (set_mode()) {
        snprintf(err, errlen, "--flush-denormals: this build knows no flush-to-zero mode for "
                 "this CPU (x86-64 and AArch64 only)");
        return -1;
    }
    /* the pool's threads (omp_get_max_threads(): cdp_backend_cpu set it) */
#pragma omp parallel
    (void)set_mode();
    return 0;
}
