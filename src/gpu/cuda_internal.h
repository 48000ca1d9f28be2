/* Internal to the CUDA backend (the .cu files in src/gpu): the shared
 * device state and the error-checking macros.  C++ (nvcc) only. */
#ifndef CDP_CUDA_INTERNAL_H
#define CDP_CUDA_INTERNAL_H

#include <cstddef>
#include <cstdint>
#include <cuda_runtime.h>
#include <cublas_v2.h>

extern "C" {
#include "cdp/backend.h"
}

/* One device per process, one compute stream, one cuBLAS handle. */
struct cdp_cuda_state {
    int initialized;
    int device;
    int ndevices;
    cudaStream_t stream;
    cublasHandle_t blas;
    cudaDeviceProp prop;
};
extern cdp_cuda_state cdp_cuda_g;

/* Launch shapes shared by the kernel files: CDP_THREADS threads a block,
 * grid_for(n) blocks for n independent elements (capped at 32 blocks per
 * SM; the kernels loop with GRID_STRIDE over the rest). */
#define CDP_THREADS 256

static inline unsigned grid_for(size_t n)
{
    size_t blocks = (n + CDP_THREADS - 1) / CDP_THREADS;
    size_t cap = (size_t)(cdp_cuda_g.prop.multiProcessorCount > 0
                              ? cdp_cuda_g.prop.multiProcessorCount : 80) * 32;
    if (blocks > cap)
        blocks = cap;
    return (unsigned)(blocks ? blocks : 1);
}

#define GRID_STRIDE(i, n)                                                      \
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n);    \
         i += (size_t)gridDim.x * blockDim.x)

/* n rounded up to a multiple of 64 (workspace carving: 256-byte aligned
 * float offsets) */
static inline size_t round64(size_t n)
{
    return (n + 63) / 64 * 64;
}

/* Index arithmetic in 32 bits where the extent allows.  The element-wise
 * kernels divide their flat index to find coordinates, and a 64-bit
 * division is a long software routine on the GPU where a 32-bit one is a
 * few instructions.  fits32(n): n plus one grid's stride (grid_for caps it
 * below 2^24) stays below 2^32.  A kernel templated on its index type I is
 * launched by LAUNCH_I: uint32_t when n fits, size_t otherwise. */
static inline bool fits32(size_t n)
{
    return n < ((size_t)1 << 32) - ((size_t)1 << 24);
}

#define GRID_STRIDE_I(I, i, n)                                                 \
    for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < (I)(n);          \
         i += (I)gridDim.x * blockDim.x)

#define LAUNCH_I(kernel, n, grid, block, ...)                                  \
    do {                                                                       \
        if (fits32(n))                                                         \
            kernel<uint32_t><<<(grid), (block), 0, cdp_cuda_g.stream>>>(__VA_ARGS__); \
        else                                                                   \
            kernel<size_t><<<(grid), (block), 0, cdp_cuda_g.stream>>>(__VA_ARGS__); \
        CDP_CUDA_LAUNCHED(#kernel);                                            \
    } while (0)

/* A device buffer that only grows (kernels.cu).  Work already queued on
 * the stream may still read the old one, so growing waits for the stream
 * first; the one stream orders every later use after earlier ones. */
struct cdp_cuda_scratch {
    void *p;
    size_t bytes;
};
void *cdp_cuda_scratch_get(cdp_cuda_scratch *s, size_t bytes, const char *what);

/* A GPU error in the middle of training cannot be recovered from: name the
 * call, print one line, abort(). */
[[noreturn]] void cdp_cuda_fail(const char *call, const char *what,
                                const char *file, int line);

#define CDP_CUDA_CHECK(call)                                                   \
    do {                                                                       \
        cudaError_t cdp_e_ = (call);                                           \
        if (cdp_e_ != cudaSuccess)                                             \
            cdp_cuda_fail(#call, cudaGetErrorString(cdp_e_), __FILE__, __LINE__); \
    } while (0)

#define CDP_CUBLAS_CHECK(call)                                                 \
    do {                                                                       \
        cublasStatus_t cdp_s_ = (call);                                        \
        if (cdp_s_ != CUBLAS_STATUS_SUCCESS)                                   \
            cdp_cuda_fail(#call, cublasGetStatusString(cdp_s_), __FILE__, __LINE__); \
    } while (0)

/* After a kernel launch: launch-configuration errors are reported at once;
 * errors raised while the kernel runs surface at the next checked call. */
#define CDP_CUDA_LAUNCHED(name)                                                \
    do {                                                                       \
        cudaError_t cdp_e_ = cudaGetLastError();                               \
        if (cdp_e_ != cudaSuccess)                                             \
            cdp_cuda_fail(name " <<<launch>>>", cudaGetErrorString(cdp_e_),     \
                          __FILE__, __LINE__);                                 \
    } while (0)

/* Host-to-device copy on the stream; waits when the source is page-locked
 * (so the caller may reuse its buffer on return, whatever memory it is). */
void cdp_cuda_h2d(void *dst, const void *host_src, size_t bytes);
/* Whether p is memory a kernel may dereference (device or managed). */
int cdp_cuda_is_device_ptr(const void *p);

/* Kernels (kernels.cu), installed into the backend struct by backend_cuda.cu. */
void cdp_cuda_linear_fwd(int B, int in, int out, const float *x, const float *W,
                         const float *b, float *y, int relu);
void cdp_cuda_relu_fwd(size_t n, float *y);
void cdp_cuda_relu_bwd(size_t n, const float *y, float *dy);
void cdp_cuda_linear_bwd(int B, int in, int out, const float *x, const float *W,
                         const float *dy, float *dx, float *dW, float *db, int relu_dx,
                         int accumulate);
void cdp_cuda_xent(int B, int C, float *logits, const int32_t *labels, double *stats);
void cdp_cuda_add(size_t n, float *acc, const float *x);
void cdp_cuda_scale(size_t n, float *x, float a);
void cdp_cuda_sgd(size_t n, const float *theta_in, float *theta_out, float *g, float gscale,
                  float *buf, float lr, float mu, float wd, int first, int zero_g);
void cdp_cuda_adamw(size_t n, const float *theta_in, float *theta_out, float *g, float gscale,
                    float *m, float *v, const cdp_adamw_coef *c, int first, int zero_g);
void cdp_cuda_pixels_to_input(int B, int C, int HW, const uint8_t *host_pixels,
                              const float *norm, float *x);

/* Image kernels (kernels_image.cu): convolution, batch normalisation,
 * pooling, the three-operand add and the double packing of the backend
 * contract (include/cdp/backend.h). */
void cdp_cuda_conv2d_fwd(const cdp_conv_shape *s, const float *x, const float *w,
                         const float *b, float *y, float *ws);
void cdp_cuda_conv2d_bwd(const cdp_conv_shape *s, const float *x, const float *w,
                         const float *dy, float *dx, float *dw, float *db, int accumulate,
                         float *ws);
size_t cdp_cuda_conv2d_ws_floats(const cdp_conv_shape *s);
void cdp_cuda_bn_fwd_train(int B, int C, int HW, const float *x, const float *gamma,
                           const float *beta, float eps, float *y, float *save, double *stats);
void cdp_cuda_bn_fwd_eval(int B, int C, int HW, const float *x, const float *gamma,
                          const float *beta, const float *rmean, const float *rvar, float eps,
                          float *y);
void cdp_cuda_bn_bwd(int B, int C, int HW, const float *x, const float *gamma,
                     const float *save, const float *dy, float *dx, float *dgamma,
                     float *dbeta, int accumulate);
void cdp_cuda_bn_running_update(int C, int N, double n, const double *stats, size_t stride,
                                const float *rmean_in, const float *rvar_in, float m,
                                float *rmean_out, float *rvar_out);
void cdp_cuda_f64_pack(size_t n, const double *src, float *dst);
void cdp_cuda_f64_unpack(size_t n, const float *src, double *dst);
void cdp_cuda_maxpool_fwd(int B, int C, int H, int W, int k, int stride, int pad, int OH,
                          int OW, const float *x, float *y, int32_t *idx);
void cdp_cuda_maxpool_bwd(int B, int C, int H, int W, int OH, int OW, const int32_t *idx,
                          const float *dy, float *dx);
void cdp_cuda_avgpool_fwd(int B, int C, int HW, const float *x, float *y);
void cdp_cuda_avgpool_bwd(int B, int C, int HW, const float *dy, float *dx);
void cdp_cuda_add3(size_t n, const float *a, const float *b, float *y);

/* cuDNN convolutions (conv_cudnn.cu), tried first by the conv2d entry
 * points: each returns 0 (ws_floats: 0) where cuDNN is off, not built or
 * does not take the shape, and the caller runs im2col. */
size_t cdp_cuda_cudnn_ws_floats(const cdp_conv_shape *s);
int cdp_cuda_cudnn_fwd(const cdp_conv_shape *s, const float *x, const float *w, int bias,
                       float *y, float *ws);
int cdp_cuda_cudnn_bwd(const cdp_conv_shape *s, const float *x, const float *w, const float *dy,
                       float *dx, float *dw, int accumulate, float *ws);
const char *cdp_cuda_cudnn_describe(void);

/* Transformer kernels (kernels_tokens.cu): batched GEMM, softmax, LayerNorm,
 * GELU, patch/class tokens and the row helpers of the backend contract. */
void cdp_cuda_gemm_batched(int tA, int tB, int M, int N, int K, float alpha, const float *A,
                           int lda, size_t sA, const float *Bm, int ldb, size_t sB, float beta,
                           float *C, int ldc, size_t sC, int batch);
void cdp_cuda_softmax_fwd(int R, int N, float *x);
void cdp_cuda_softmax_bwd(int R, int N, float scale, const float *P, float *dp);
void cdp_cuda_ln_fwd(int R, int D, const float *x, const float *gamma, const float *beta,
                     float eps, float *y, float *save);
void cdp_cuda_ln_bwd(int R, int D, const float *x, const float *gamma, const float *save,
                     const float *dy, float *dx, float *dgamma, float *dbeta, int accumulate);
void cdp_cuda_gelu_fwd(size_t n, const float *x, float *y);
void cdp_cuda_gelu_bwd(size_t n, const float *x, const float *dy, float *dx);
void cdp_cuda_tokens_fwd(int B, int D, int n, const float *x, const float *cls, float *y);
void cdp_cuda_tokens_bwd(int B, int D, int n, const float *dy, float *dx, float *dcls,
                         int accumulate);
void cdp_cuda_add_rows(int R, int N, const float *x, const float *p, float *y);
void cdp_cuda_sum_rows(int R, int N, const float *x, float *out, int accumulate);
void cdp_cuda_copy_rows(int R, int N, const float *src, size_t sld, float *dst, size_t dld);
/* out[c] = (or +=) the sum over the R rows (stride ld) of column c; also
 * Linear's bias gradient */
void cdp_cuda_colsum(int R, int N, size_t ld, const float *x, float *out, int accumulate);

#endif
