/* Internal interface of the CPU backend (src/cpu only).
 *
 * kernels_cpu.c   the kernels (Linear GEMMs + OpenMP elementwise loops)
 * sgemm.c         the single-threaded SGEMM they call (oneDNN or OpenBLAS)
 * linear_bf16.c   the Linear kernels of --precision bf16 (bfloat16 operands)
 * matmul_bf16.c   their single-threaded bfloat16 product (oneDNN matmul)
 * gemm_bf16.c     attention's batched products under --precision bf16
 * kernels_conv.c  convolution (im2col / col2im + sgemm)
 * kernels_conv_direct.c  3x3 stride-1 convolution without im2col
 * kernels_conv_dnnl.c  convolution through oneDNN (optional, HAVE_DNNL)
 * conv_bf16.c     the convolutions of --precision bf16 (oneDNN bf16)
 * kernels_norm.c  batchnorm (train, eval, backward, running statistics)
 * kernels_pool.c  max and global average pooling, add3
 * kernels_tokens.c transformer kernels (batched GEMM, softmax, LayerNorm,
 *                 GELU, patch/class tokens, row helpers)
 * backend_cpu.c   the cdp_backend struct, memory, thread set-up, describe()
 * blas_setup.c    process set-up before MPI_Init (BLAS kernel, OpenMP wait
 *                 policy) and the BLAS identification for the banner
 *
 * Nothing outside src/cpu includes this file or calls OpenBLAS. */
#ifndef CDP_CPU_INTERNAL_H
#define CDP_CPU_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "backend/backend.h"

/* Elementwise loops shorter than this (1 MiB of floats) run serially: a
 * serial pass over it takes ~50 us, the wake-up of a passive OpenMP pool
 * ~10-50 us, so shorter loops gain nothing from a second thread (the ReLU of
 * a 128 x 1024 activation stays serial; SGD over a whole stage runs in
 * parallel). */
#define CDP_CPU_OMP_MIN 262144

/* ---- the backend's kernels: cdp_cpu_NAME for every entry of
 * backend/backend_kernels.def (kernels_cpu.c, kernels_conv.c, kernels_norm.c,
 * kernels_pool.c, kernels_tokens.c, kernels_gelu.c); backend_cpu.c's table
 * is expanded from the same list. ---- */
#define CDP_KERNEL(ret, name, params) ret cdp_cpu_##name params;
#include "backend/backend_kernels.def"
#undef CDP_KERNEL

/* ---- the single-threaded SGEMM of the Linear and attention GEMMs
 * (sgemm.c): oneDNN's (cdp_cpu_gemm_dnnl = 1, the default with oneDNN) or
 * OpenBLAS's; row-major, op(A) [M,K], op(B) [K,N]. ---- */
extern int cdp_cpu_gemm_dnnl;
const char *cdp_cpu_gemm_library(void);
void cdp_cpu_sgemm(int tA, int tB, int M, int N, int K, float alpha, const float *A, int lda,
                   const float *B, int ldb, float beta, float *C, int ldc);

/* ---- a Linear layer's products cut into kernels_cpu.c's grid ("GEMM
 * decomposition": blocks that depend on the shape and the split only),
 * each block computed by one thread; the float32 kernels (sgemm.c) and the
 * bfloat16 ones (linear_bf16.c) supply the blocks, the grid, the fused
 * ReLUs and db's column sums are the same code for both.  A block is rows
 * [r0, r1), columns [c0, c1) of its result:
 *   fwd_block  y  = x W^T + b            (y [B,out])
 *   dw_block   dW = dy^T x, or dW += it with accumulate   (dW [out,in])
 *   dx_block   dx = dy W                  (dx [B,in]; none when dx is NULL)
 * db: column sums of dy in float, row order, or db += them. */
typedef struct cdp_cpu_linear_op cdp_cpu_linear_op;
struct cdp_cpu_linear_op {
    int B, in, out, accumulate;
    const float *x, *W, *b, *dy;
    float *y, *dx, *dW;
    void (*fwd_block)(const cdp_cpu_linear_op *op, int r0, int r1, int c0, int c1);
    void (*dw_block)(const cdp_cpu_linear_op *op, int r0, int r1, int c0, int c1);
    void (*dx_block)(const cdp_cpu_linear_op *op, int r0, int r1, int c0, int c1);
    const void *ctx;   /* the supplier's own (linear_bf16.c: the packed operands) */
    /* bfloat16 storage of x and dy (linear_bf16.c), else NULL: then db's
     * column sums and relu_dx's mask read these, with the same bits */
    const uint16_t *x16, *dy16;
};
/* B, out > 0 (fwd); B, in, out > 0 (bwd) */
void cdp_cpu_linear_fwd_grid(const cdp_cpu_linear_op *op, int relu);
void cdp_cpu_linear_bwd_grid(const cdp_cpu_linear_op *op, float *db, int relu_dx);

/* ---- --precision bf16's products (matmul_bf16.c, HAVE_DNNL only):
 * C[M,N] = op(A)[M,K] op(B)[K,N] (+ bias[N] when not NULL), A and B
 * bfloat16 storage, row-major (leading dimensions lda, ldb), op(X) = X^T
 * when tX (as cblas_sgemm's), C float32 row-major; one thread,
 * oneDNN's matmul primitive, cached by shape. */
void cdp_cpu_bf16_matmul(int tA, int tB, int M, int N, int K, const uint16_t *A, int lda,
                         const uint16_t *B, int ldb, const float *bias, float *C, int ldc);
/* C[i][j] = alpha op(A)[i][j] op(B)[i][j] over 4-D operands [n0, n1, rows,
 * cols] given by their strides in elements (sa: A [n0, n1, M, K], sb: B
 * [n0, n1, K, N], sc: C [n0, n1, M, N]); one thread, as above */
void cdp_cpu_bf16_matmul4(int n0, int n1, int M, int N, int K, float alpha, const uint16_t *A,
                          const int64_t sa[4], const uint16_t *B, const int64_t sb[4], float *C,
                          const int64_t sc[4]);
/* the CPU's cdp_bf16_kernels (linear_bf16.c, gemm_bf16.c; HAVE_DNNL only) */
void cdp_cpu_bf16_linear_fwd(int B, int in, int out, const float *xf, const uint16_t *x,
                             const uint16_t *W, const float *b, float *y, int relu);
void cdp_cpu_bf16_linear_bwd(int B, int in, int out, const float *xf, const uint16_t *x,
                             const uint16_t *W, const uint16_t *dy, float *dx, float *dW,
                             float *db, int relu_dx, int accumulate);
void cdp_cpu_bf16_gemm_batched(int tA, int tB, int M, int N, int K, float alpha,
                               const uint16_t *A, int lda, size_t sA, const uint16_t *Bm, int ldb,
                               size_t sB, float *C, int ldc, size_t sC, int batch);
/* bf16_pack and bf16_unpack of a span, on the calling thread (kernels_cpu.c) */
void cdp_cpu_bf16_pack_span(size_t n, const float *x, uint16_t *y);
void cdp_cpu_bf16_widen_span(size_t n, const uint16_t *x, float *y);
/* the element-wise layers on bfloat16 storage (the cdp_bf16_kernels of
 * backend.h): kernels_cpu.c, kernels_gelu.c, kernels_tokens.c, kernels_norm.c */
void cdp_cpu_bf16_add3(size_t n, const float *af, const uint16_t *a16, const float *bf,
                       const uint16_t *b16, uint16_t *y);
void cdp_cpu_bf16_relu_fwd(size_t n, uint16_t *y);
void cdp_cpu_bf16_relu_bwd(size_t n, const uint16_t *y, float *dy);
void cdp_cpu_bf16_bn_fwd_train(int B, int C, int HW, const float *xf, const uint16_t *x16,
                               const float *gamma, const float *beta, float eps, uint16_t *y,
                               float *save, double *stats);   /* kernels_norm.c, HAVE_DNNL */
void cdp_cpu_bf16_bn_fwd_eval(int B, int C, int HW, const float *xf, const uint16_t *x16,
                              const float *gamma, const float *beta, const float *rmean,
                              const float *rvar, float eps, uint16_t *y);
void cdp_cpu_bf16_gelu_fwd(size_t n, const float *xf, const uint16_t *x16, uint16_t *y);
void cdp_cpu_bf16_gelu_bwd(size_t n, const uint16_t *x, const float *dy, float *dx);
void cdp_cpu_bf16_ln_fwd(int R, int D, const float *xf, const uint16_t *x16, const float *gamma,
                         const float *beta, float eps, uint16_t *y, float *save);
void cdp_cpu_bf16_ln_bwd(int R, int D, const uint16_t *x, const float *gamma, const float *save,
                         const float *dy, float *dx, float *dgamma, float *dbeta, int accumulate);
/* *p with at least bytes (64-byte aligned; reallocated when *have is less,
 * contents not kept), or a message naming what and abort (linear_bf16.c) */
void *cdp_cpu_grow(void **p, size_t *have, size_t bytes, const char *what);
/* the calling OpenMP thread's buffer `which` with at least bytes, grown as
 * cdp_cpu_grow grows (contents not kept), freed at exit (linear_bf16.c,
 * HAVE_DNNL only): attention's dense operands (gemm_bf16.c) and
 * BatchNorm's staged planes (kernels_norm.c) */
enum { CDP_CPU_TBUF_GEMM_A, CDP_CPU_TBUF_GEMM_B, CDP_CPU_TBUF_GEMM_C, CDP_CPU_TBUF_BN,
       CDP_CPU_TBUFS };
void *cdp_cpu_thread_buf(int which, size_t bytes, const char *what);
/* what computes linear_fwd_bf16 / linear_bwd_bf16 (linear_bf16.c): "oneDNN
 * bf16 matmul", or the float32 kernels' library without oneDNN */
const char *cdp_cpu_bf16_library(void);

/* the backend's zero() (kernels_cpu.c) */
void cdp_cpu_zero(void *dst, size_t bytes);

/* ---- convolution paths (kernels_conv*.c) ---- */
/* Columns (output pixels) a convolution's GEMM aims at per chunk of whole
 * samples (kernels_conv.c, "Layout"); a constant, here so that
 * bench/kernels/conv_kernels.c can compare layouts.  Changing it changes bits and
 * the workspace size. */
extern int cdp_cpu_conv_cols;
/* Direct (im2col-free) 3x3 stride-1 convolution (kernels_conv_direct.c),
 * called from cdp_cpu_conv2d_fwd/bwd for the shapes where
 * cdp_cpu_conv_direct_use() says so.  cdp_cpu_conv_direct: 0 never, 1 the
 * measured shapes (default), 2 every supported shape (tests, benchmarks).
 * cdp_cpu_conv_direct_simd = 0 forces the portable kernels (same bits as
 * the AVX-512 ones; tests compare them).  cdp_cpu_conv_direct_cols: flat
 * pixels a dw chunk of whole samples aims at (changes dw's bits). */
extern int cdp_cpu_conv_direct, cdp_cpu_conv_direct_simd, cdp_cpu_conv_direct_cols;
/* Grouped and depthwise convolution (groups > 1, kernels_conv_grouped.c):
 * every grouped shape, no workspace; db stays with kernels_conv.c. */
void cdp_cpu_conv2d_grouped_fwd(const struct cdp_conv_shape *s, const float *x, const float *w,
                                const float *b, float *y);
void cdp_cpu_conv2d_grouped_bwd(const struct cdp_conv_shape *s, const float *x, const float *w,
                                const float *dy, float *dx, float *dw, int accumulate);
int cdp_cpu_conv_direct_supported(const struct cdp_conv_shape *s);
/* pass: 0 forward, 1 backward with dx, 2 backward without dx */
int cdp_cpu_conv_direct_use(const struct cdp_conv_shape *s, int pass);
size_t cdp_cpu_conv_direct_ws_floats(const struct cdp_conv_shape *s);
void cdp_cpu_conv2d_direct_fwd(const struct cdp_conv_shape *s, const float *x, const float *w,
                               const float *b, float *y, float *ws);
/* dw (= or += with accumulate) and dx (when not NULL); not db */
void cdp_cpu_conv2d_direct_bwd(const struct cdp_conv_shape *s, const float *x, const float *w,
                               const float *dy, float *dx, float *dw, int accumulate,
                               float *ws);

/* The slots every convolution path shares (conv_slots.c; kernels_conv.c,
 * "Determinism"):
 * S = min(cdp_cpu_gemm_split, B) slots; slot sl owns samples
 * [B*sl/S, B*(sl+1)/S), cut into m chunks of near-equal sizes
 * (cdp_cpu_conv_chunk: chunk c's samples [*b0, *b1), possibly empty); the
 * OpenMP threads (cdp_cpu_conv_threads: none below 4e6 multiply-adds) share
 * the slots out.  cdp_cpu_conv_dw_sum: dw (= or += with accumulate) the S
 * partials part0 + sl*stride, summed per element in slot order. */
int cdp_cpu_conv_slots(int B);
void cdp_cpu_conv_chunk(int B, int S, int m, int sl, int c, int *b0, int *b1);
int cdp_cpu_conv_threads(double macs, int S);
void cdp_cpu_conv_dw_sum(size_t nw, int S, const float *part0, size_t stride, float *dw,
                         int accumulate);

/* Convolution through oneDNN (kernels_conv_dnnl.c, built with HAVE_DNNL):
 * each slot runs single-threaded oneDNN primitives on its own samples.
 * cdp_cpu_conv_dnnl: 0 never, 1 3x3 with >= 16 input and output channels
 * (the default when built with oneDNN), 2 every shape it supports.  Without
 * HAVE_DNNL cdp_cpu_conv_dnnl_use() is always 0 and the rest is absent.
 * Same contracts as cdp_cpu_conv2d_direct_fwd/bwd (bias added by the
 * caller's own loop here; db stays with kernels_conv.c). */
extern int cdp_cpu_conv_dnnl;
/* primitive sets (one per shape and slot size) kept at once */
#define CDP_CPU_CONV_DNNL_CACHE 64
int cdp_cpu_conv_dnnl_use(const struct cdp_conv_shape *s);
int cdp_cpu_conv_dnnl_supported(const struct cdp_conv_shape *s);
/* "oneDNN 2.6.3", or NULL without HAVE_DNNL */
const char *cdp_cpu_dnnl_version(void);
/* The instruction set oneDNN's kernels use here ("avx512_core", ...). */
const char *cdp_cpu_dnnl_isa(void);
size_t cdp_cpu_conv_dnnl_ws_floats(const struct cdp_conv_shape *s);
void cdp_cpu_conv2d_dnnl_fwd(const struct cdp_conv_shape *s, const float *x, const float *w,
                             const float *b, float *y, float *ws);
void cdp_cpu_conv2d_dnnl_bwd(const struct cdp_conv_shape *s, const float *x, const float *w,
                             const float *dy, float *dx, float *dw, int accumulate, float *ws);
/* The same under --precision bf16 (conv_bf16.c): the products' operands
 * x, w, dy (bfloat16 values in floats) packed to bfloat16 for oneDNN's
 * bf16 primitives, float32 results.  cdp_cpu_dnnl_has_bf16: 1 when
 * oneDNN's ISA here has the AVX512_BF16 instructions. */
int cdp_cpu_dnnl_has_bf16(void);
size_t cdp_cpu_conv_dnnl_bf16_ws_floats(const struct cdp_conv_shape *s);
void cdp_cpu_conv2d_dnnl_fwd_bf16(const struct cdp_conv_shape *s, const float *x,
                                  const float *w, const float *b, float *y, float *ws);
void cdp_cpu_conv2d_dnnl_bwd_bf16(const struct cdp_conv_shape *s, const float *x,
                                  const float *w, const float *dy, float *dx, float *dw,
                                  int accumulate, float *ws);
/* db (= or += with accumulate) of a convolution (kernels_conv.c): per
 * channel the sum of dy in double, b = 0..B-1 then p = 0..P-1 */
void cdp_cpu_conv_db(const struct cdp_conv_shape *s, size_t P, const float *dy, float *db,
                     int accumulate);
/* what runs the convolutions of --precision bf16 (conv_bf16.c), for the
 * banner: "oneDNN bf16 avx512_core_bf16", or "the float32 kernels" */
const char *cdp_cpu_conv_bf16_library(void);

/* 0: BatchNorm's sums without the AVX-512 path (kernels_norm.c) */
extern int cdp_cpu_bn_simd;

/* Whether the AVX-512 kernels (kernels_norm.c, kernels_conv_direct.c) may
 * run: built for x86-64 with GCC or clang, and the CPU has AVX-512F. */
static inline int cdp_cpu_avx512f(void)
{
#if defined(__x86_64__) && defined(__GNUC__) && !defined(CDP_NO_AVX512)
    return __builtin_cpu_supports("avx512f");
#else
    return 0;
#endif
}

/* A hot loop compiled three times, for AVX-512, AVX2+FMA and baseline
 * x86-64, the one for this CPU picked at load time.  Only the vector width
 * changes: no FP contraction (-std=c11) and no reassociation, so every clone
 * computes the same bits. */
#if defined(__x86_64__) && defined(__GNUC__)
#define CDP_CPU_CLONES __attribute__((target_clones("avx512f", "fma", "default")))
#else
#define CDP_CPU_CLONES
#endif

/* --precision bf16's storage (util/bf16.h): the bfloat16 value of a float,
 * rounded to nearest even, as its 16 bits (cdp_bf16_round_bits(u) >> 16
 * without the branch, so that loops vectorise), and a stored value widened
 * back to a float (exact) */
static inline uint16_t cdp_cpu_bf16_bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    const uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    const uint32_t nan = (u >> 16) | 0x0040u;
    return (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? nan : r);
}

static inline float cdp_cpu_bf16_widen(uint16_t h)
{
    const uint32_t u = (uint32_t)h << 16;
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* OpenMP clause of a loop over n independent elements or planes (n counts
 * the floats touched): parallel from CDP_CPU_OMP_MIN on, else serial. */
#define CDP_CPU_PAR(n) if ((size_t)(n) >= (size_t)CDP_CPU_OMP_MIN && cdp_cpu_omp_threads > 1) \
    num_threads(cdp_cpu_omp_threads) schedule(static)

/* Number of OpenMP threads the kernels may use (set by cdp_backend_cpu). */
extern int cdp_cpu_omp_threads;
/* Most column blocks a GEMM is cut into (kernels_cpu.c, "GEMM
 * decomposition"); a per-machine constant, never derived from the thread
 * count, so that results do not depend on it. */
extern int cdp_cpu_gemm_split;

/* ---- BLAS / process set-up (blas_setup.c) ---- */
/* CPUs in this process's affinity mask (>= 1). */
int cdp_cpu_affinity_count(void);
/* Sets the OpenMP thread count of the kernels; OpenBLAS stays at 1. */
void cdp_cpu_set_threads(int threads);
/* "OpenBLAS 0.3.21" (version words of openblas_get_config()). */
const char *cdp_cpu_blas_version(void);
/* What cdp_backend_cpu_preinit changed in the environment, e.g.
 * "OPENBLAS_CORETYPE=SkylakeX GOMP_SPINCOUNT=50000", or "" */
const char *cdp_cpu_preinit_note(void);
/* " (why ...)" after the kernel's name when the CPU supports a faster one */
const char *cdp_cpu_blas_hint(void);

#endif
