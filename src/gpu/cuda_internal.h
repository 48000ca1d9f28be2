/* Internal to the CUDA backend (the .cu files in src/gpu): the shared
 * device state and the error-checking macros.  C++ (nvcc) only. */
#ifndef CDP_CUDA_INTERNAL_H
#define CDP_CUDA_INTERNAL_H

#include <cstddef>
#include <cstdint>
#include <cuda_runtime.h>
#include <cublas_v2.h>

extern "C" {
#include "backend/backend.h"
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

/* The backend's kernels: cdp_cuda_NAME for every entry of
 * backend/backend_kernels.def (kernels.cu, kernels_image.cu, kernels_tokens.cu),
 * C++ linkage like the rest of src/gpu (only backend_cuda.cu's table takes
 * their addresses); the table is expanded from the same list. */
#define CDP_KERNEL(ret, name, params) ret cdp_cuda_##name params;
#include "backend/backend_kernels.def"
#undef CDP_KERNEL

/* cuDNN convolutions (conv_cudnn.cu), tried first by the conv2d entry
 * points: each returns 0 (ws_floats: 0) where cuDNN is off, not built or
 * does not take the shape, and the caller runs im2col.  The passes cuDNN
 * runs (CDP_CUDNN: all, or a list of fwd, dgrad, wgrad; the others on
 * im2col): cdp_cuda_cudnn_passes' mask, and cdp_cuda_cudnn_bwd returns
 * what it did of the backward (CDP_CUDNN_WGRAD | CDP_CUDNN_DGRAD; DGRAD
 * also where dx is NULL). */
enum { CDP_CUDNN_FWD = 1, CDP_CUDNN_DGRAD = 2, CDP_CUDNN_WGRAD = 4, CDP_CUDNN_ALL = 7 };
int cdp_cuda_cudnn_passes(void);
size_t cdp_cuda_cudnn_ws_floats(const cdp_conv_shape *s);
int cdp_cuda_cudnn_fwd(const cdp_conv_shape *s, const float *x, const float *w, int bias,
                       float *y, float *ws);
int cdp_cuda_cudnn_bwd(const cdp_conv_shape *s, const float *x, const float *w, const float *dy,
                       float *dx, float *dw, int accumulate, float *ws);
const char *cdp_cuda_cudnn_describe(void);

/* Grouped and depthwise convolutions (groups > 1) where cuDNN declined
 * (conv_grouped.cu): the CPU's loops and bits, no workspace; dx may be
 * NULL; db stays with the caller. */
void cdp_cuda_conv2d_grouped_fwd(const cdp_conv_shape *s, const float *x, const float *w,
                                 const float *b, float *y);
void cdp_cuda_conv2d_grouped_bwd(const cdp_conv_shape *s, const float *x, const float *w,
                                 const float *dy, float *dx, float *dw, int accumulate);

/* out[c] = (or +=) the sum over the R rows (stride ld) of column c
 * (kernels_tokens.cu); also Linear's bias gradient */
void cdp_cuda_colsum(int R, int N, size_t ld, const float *x, float *out, int accumulate);

#endif
