/* The backend interface: memory and kernels, nothing else.
 *
 * Everything above this interface (model, executor, reference) works on
 * opaque "device" pointers and never touches their contents directly, so the
 * same scheduler and executor drive the CPU backend (src/cpu, OpenBLAS +
 * OpenMP) and the GPU backend (src/gpu, cuBLAS + CUDA kernels).
 *
 * The kernels, their shapes and their bit-level contracts are listed once,
 * in backend/backend_kernels.def; this struct, both backends' prototypes and
 * both backends' tables are expanded from that list.
 */
#ifndef CDP_BACKEND_H
#define CDP_BACKEND_H

#include <stddef.h>
#include <stdint.h>

/* Shape of one convolution over a micro-batch (see conv2d_fwd).  groups
 * (nn.Conv2d's): 0 or 1, a plain convolution; G > 1 (dividing Cin and
 * Cout), G independent convolutions of Cin/G channels into Cout/G. */
typedef struct cdp_conv_shape {
    int B, Cin, H, W, Cout, KH, KW, stride, pad, OH, OW, groups;
} cdp_conv_shape;

/* the number of groups, at least 1 */
static inline int cdp_conv_groups(const cdp_conv_shape *s)
{
    return s->groups > 1 ? s->groups : 1;
}

/* the number of weights, Cout*(Cin/groups)*KH*KW (what dw holds) */
static inline size_t cdp_conv_weight_count(const cdp_conv_shape *s)
{
    return (size_t)s->Cout * (size_t)(s->Cin / cdp_conv_groups(s)) * (size_t)s->KH *
           (size_t)s->KW;
}

/* The scalars of one AdamW update (backend adamw), each computed on the
 * host in double from the float lr and rounded to float once:
 * decay = 1 - lr*wd, beta1, 1 - beta1, beta2, 1 - beta2,
 * bc2_sqrt = sqrt(1 - beta2^(c+1)), step_size = lr / (1 - beta1^(c+1)), eps. */
typedef struct cdp_adamw_coef {
    float decay, beta1, one_minus_beta1, beta2, one_minus_beta2, bc2_sqrt, step_size, eps;
} cdp_adamw_coef;

typedef struct cdp_backend {
    const char *name;   /* "cpu", "cuda" */
    int host_memory;    /* 1 if pointers from alloc() are host-addressable */

    /* ---- memory (device memory on a GPU; never managed memory) ---- */
    void *(*alloc)(size_t bytes);                 /* NULL on failure; 64-byte aligned */
    void (*free)(void *p);
    void (*to_device)(void *dst, const void *host_src, size_t bytes);
    void (*to_host)(void *host_dst, const void *src, size_t bytes);
    void (*copy)(void *dst, const void *src, size_t bytes);
    void (*zero)(void *dst, size_t bytes);
    void (*sync)(void);   /* wait until all queued work is done (before MPI reads a buffer) */

    /* ---- kernels: one member per entry of backend/backend_kernels.def, where
     * each is specified.  Every backend provides every one (none is NULL). */
#define CDP_KERNEL(ret, name, params) ret (*name) params;
#include "backend/backend_kernels.def"
#undef CDP_KERNEL

    /* Human-readable description for the banner (BLAS kernel, threads, device). */
    const char *(*describe)(void);
    /* What decides this backend's bits, as "field: value" lines, the first
     * "backend: NAME": the BLAS kernel, the GEMM split and the convolution
     * paths; the device and its libraries.  Ranks whose lines differ would
     * not compute the weights of any single run (threads are not in it:
     * the bits do not depend on them). */
    const char *(*numerics)(void);

    /* Optional: host memory for staging MPI messages when MPI cannot read
     * the backend's memory (pinned memory on GPUs).  NULL: malloc/free. */
    void *(*alloc_host)(size_t bytes);
    void (*free_host)(void *p);

    /* Optional: --precision bf16's products on operands in bfloat16
     * storage (below); NULL: the layers widen them and call
     * linear_fwd_bf16 / linear_bwd_bf16 and gemm_batched. */
    const struct cdp_bf16_kernels *bf16;
} cdp_backend;

/* --precision bf16's products with their operands in bfloat16 storage (the
 * upper 16 bits of the floats, util/bf16.h), so that a tensor kept in
 * bfloat16 is read as it is kept, with no float32 copy.  The same numbers
 * and bits as linear_fwd_bf16 / linear_bwd_bf16 on the widened values.
 *   linear_fwd  y = x W^T + b (x [B,in], W [out,in]); x NULL: xf, floats
 *               holding bfloat16 values, is packed first
 *   linear_bwd  dW, db, dx from x (or xf), W and dy [B,out]; db = the
 *               column sums of dy's values; relu_dx masks dx by x > 0
 *   gemm_batched  C_b = alpha op(A_b) op(B_b) for b < batch (beta 0),
 *               float32 C; the bits of an entry depend on its operands,
 *               the shape and alpha only (doc/reference.md section 3.12) */
typedef struct cdp_bf16_kernels {
    void (*linear_fwd)(int B, int in, int out, const float *xf, const uint16_t *x,
                       const uint16_t *W, const float *b, float *y, int relu);
    void (*linear_bwd)(int B, int in, int out, const float *xf, const uint16_t *x,
                       const uint16_t *W, const uint16_t *dy, float *dx, float *dW, float *db,
                       int relu_dx, int accumulate);
    void (*gemm_batched)(int tA, int tB, int M, int N, int K, float alpha, const uint16_t *A,
                         int lda, size_t sA, const uint16_t *Bm, int ldb, size_t sB, float *C,
                         int ldc, size_t sC, int batch);
    /* the element-wise layers whose output is kept in bfloat16: each input
     * is given either in floats holding bfloat16 values (xf, af, bf) or in
     * bfloat16 storage (x16, a16, b16; the other NULL), the output y is
     * rounded and stored as bf16_pack stores it: the bits of add3,
     * gelu_fwd, ln_fwd and relu_fwd (in place) on the widened values, with
     * no float32 copy of a tensor; the backwards read x (or relu's y) in
     * bfloat16 storage: the bits of gelu_bwd, ln_bwd and relu_bwd */
    void (*add3)(size_t n, const float *af, const uint16_t *a16, const float *bf,
                 const uint16_t *b16, uint16_t *y);
    void (*gelu_fwd)(size_t n, const float *xf, const uint16_t *x16, uint16_t *y);
    void (*gelu_bwd)(size_t n, const uint16_t *x, const float *dy, float *dx);
    void (*ln_fwd)(int R, int D, const float *xf, const uint16_t *x16, const float *gamma,
                   const float *beta, float eps, uint16_t *y, float *save);
    void (*ln_bwd)(int R, int D, const uint16_t *x, const float *gamma, const float *save,
                   const float *dy, float *dx, float *dgamma, float *dbeta, int accumulate);
    void (*relu_fwd)(size_t n, uint16_t *y);
    void (*relu_bwd)(size_t n, const uint16_t *y, float *dy);
    /* BatchNorm's forwards: the bits of bn_fwd_train and bn_fwd_eval */
    void (*bn_fwd_train)(int B, int C, int HW, const float *xf, const uint16_t *x16,
                         const float *gamma, const float *beta, float eps, uint16_t *y,
                         float *save, double *stats);
    void (*bn_fwd_eval)(int B, int C, int HW, const float *xf, const uint16_t *x16,
                        const float *gamma, const float *beta, const float *rmean,
                        const float *rvar, float eps, uint16_t *y);
} cdp_bf16_kernels;

/* The name of the first kernel be lacks (a NULL member), or NULL when it has
 * every kernel of backend/backend_kernels.def.  The tables are expanded from
 * that list, so this holds by construction; cdp_run checks it once at
 * start-up all the same, as a backend assembled by hand could break it. */
static inline const char *cdp_backend_missing_kernel(const cdp_backend *be)
{
#define CDP_KERNEL(ret, name, params) if (!be->name) return #name;
#include "backend/backend_kernels.def"
#undef CDP_KERNEL
    return NULL;
}

/* CPU backend (always built).  threads <= 0 picks a default. */
const cdp_backend *cdp_backend_cpu(int threads);

/* --flush-denormals: denormal floats are read and written as zero by the
 * calling thread and every thread of the OpenMP pool (and so by every thread
 * that computes in the CPU backend), as torch.set_flush_denormal(True).
 * 0, or -1 with a message in err on a CPU this build has no mode for. */
int cdp_cpu_flush_denormals(char *err, size_t errlen);

/* Called first thing in main(), before MPI_Init: makes sure the BLAS library
 * runs the kernel this CPU supports (re-executing the program with
 * OPENBLAS_CORETYPE set when the library misdetected it) and that the
 * OpenMP and BLAS thread pools do not fight.  May not return (execv). */
void cdp_backend_cpu_preinit(int argc, char **argv);
/* The user's OMP_NUM_THREADS when OpenMP rejects it (0, a word: libgomp
 * then warns and ignores it), else NULL.  cdp_backend_cpu_preinit takes it
 * out of the environment it re-executes with, so that libgomp warns once. */
const char *cdp_cpu_rejected_omp_threads(void);

/* Name of the kernel the BLAS library runs (openblas_get_corename(), e.g.
 * "SkylakeX", "Haswell", "Prescott"), for the banner. */
const char *cdp_cpu_blas_kernel(void);

/* The GEMM split (kernels_cpu.c) this machine would pick: CDP_GEMM_SPLIT,
 * else its CPUs online rounded down to a power of two, at most 8; and the
 * one the next cdp_backend_cpu uses instead (0: its own), so that ranks on
 * hosts of different CPU counts can use rank 0's and agree bit for bit. */
int cdp_cpu_gemm_split_default(void);
void cdp_cpu_use_gemm_split(int split);

/* GPU backend; NULL with a message in err when this build has no CUDA or no
 * usable device. */
const cdp_backend *cdp_backend_cuda(int local_rank, char *err, size_t errlen);

/* Whether MPI may be given device pointers from this backend directly. */
int cdp_backend_mpi_device_ok(const cdp_backend *be);

#endif
