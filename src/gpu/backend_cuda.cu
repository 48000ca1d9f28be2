/* The CUDA backend: device selection, memory, and the backend struct.
 *
 * One device per MPI rank (local_rank % device count), one non-default
 * compute stream, one cuBLAS handle bound to it.  Every kernel and copy is
 * queued on that stream, in program order, so the results do not depend on
 * timing; sync() waits for the stream (the executor calls it before MPI
 * touches a buffer).  Memory is plain cudaMalloc (never managed memory).
 *
 * Errors at initialisation return NULL with a message; any CUDA or cuBLAS
 * error after that prints one line naming the call and aborts. */
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "cuda_internal.h"
#include "cuda_staging.h"

cdp_cuda_state cdp_cuda_g;

void cdp_cuda_fail(const char *call, const char *what, const char *file, int line)
{
    std::fprintf(stderr, "cdp: fatal CUDA error: %s failed: %s (%s:%d)\n",
                 call, what ? what : "unknown error", file, line);
    std::fflush(stderr);
    std::abort();
}

/* ---------------------------------------------------------------- memory */

static void *cu_alloc(size_t bytes)
{
    void *p = nullptr;
    /* cudaMalloc returns 256-byte aligned memory (>= the 64 bytes promised). */
    cudaError_t e = cudaMalloc(&p, bytes ? bytes : 1);
    if (e != cudaSuccess) {
        (void)cudaGetLastError(); /* out of memory is not sticky: clear it */
        return nullptr;
    }
    return p;
}

static void cu_free(void *p)
{
    if (p)
        CDP_CUDA_CHECK(cudaFree(p));
}

void cdp_cuda_h2d(void *dst, const void *host_src, size_t bytes)
{
    if (!bytes)
        return;
    CDP_CUDA_CHECK(cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice,
                                   cdp_cuda_g.stream));
    /* From pageable memory the call returns once the source has been read
     * (the driver stages it).  From page-locked memory the copy is truly
     * asynchronous: wait, so that the caller may reuse its buffer at once,
     * as with every other backend. */
    cudaPointerAttributes a;
    if (cudaPointerGetAttributes(&a, host_src) != cudaSuccess) {
        (void)cudaGetLastError();
        CDP_CUDA_CHECK(cudaStreamSynchronize(cdp_cuda_g.stream));
    } else if (a.type != cudaMemoryTypeUnregistered) {
        CDP_CUDA_CHECK(cudaStreamSynchronize(cdp_cuda_g.stream));
    }
}

int cdp_cuda_is_device_ptr(const void *p)
{
    cudaPointerAttributes a;
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
}

static void cu_to_device(void *dst, const void *host_src, size_t bytes)
{
    cdp_cuda_h2d(dst, host_src, bytes);
}

static void cu_to_host(void *host_dst, const void *src, size_t bytes)
{
    if (!bytes)
        return;
    CDP_CUDA_CHECK(cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost,
                                   cdp_cuda_g.stream));
    CDP_CUDA_CHECK(cudaStreamSynchronize(cdp_cuda_g.stream));
}

static void cu_copy(void *dst, const void *src, size_t bytes)
{
    if (!bytes || dst == src)
        return;
    CDP_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice,
                                   cdp_cuda_g.stream));
}

static void cu_zero(void *dst, size_t bytes)
{
    if (!bytes)
        return;
    CDP_CUDA_CHECK(cudaMemsetAsync(dst, 0, bytes, cdp_cuda_g.stream));
}

static void cu_sync(void)
{
    CDP_CUDA_CHECK(cudaStreamSynchronize(cdp_cuda_g.stream));
}

/* ---------------------------------------------------------------- banner */

static char cu_desc[512];

static char cu_numerics_text[384];

static const char *cu_numerics(void)
{
    return cu_numerics_text;
}

static const char *cu_describe(void)
{
    return cu_desc;
}

static cdp_backend cu_backend;

/* Whether this build carries a kernel image (or PTX) the device can run. */
__global__ static void cu_probe_kernel(int *p)
{
    if (p)
        *p = 1;
}

static void set_err(char *err, size_t errlen, const char *fmt, const char *a,
                    const char *b)
{
    if (err && errlen)
        std::snprintf(err, errlen, fmt, a, b);
}

static void release_partial(void)
{
    if (cdp_cuda_g.blas) {
        cublasDestroy(cdp_cuda_g.blas);
        cdp_cuda_g.blas = nullptr;
    }
    if (cdp_cuda_g.stream) {
        cudaStreamDestroy(cdp_cuda_g.stream);
        cdp_cuda_g.stream = nullptr;
    }
    (void)cudaGetLastError();
}

extern "C" const cdp_backend *cdp_cuda_module_open(int local_rank, char *err, size_t errlen)
{
    if (cdp_cuda_g.initialized)
        return &cu_backend;

    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count <= 0) {
        const char *why = e != cudaSuccess ? cudaGetErrorString(e)
                                           : "the CUDA runtime reports 0 devices";
        (void)cudaGetLastError();
        set_err(err, errlen, "no CUDA device found: %s%s", why,
                e == cudaErrorInsufficientDriver || e == cudaErrorNoDevice
                    ? " (is the NVIDIA driver loaded and a GPU visible to this process? "
                      "check nvidia-smi and CUDA_VISIBLE_DEVICES)"
                    : "");
        return nullptr;
    }
    int dev = (local_rank < 0 ? 0 : local_rank) % count;

    e = cudaSetDevice(dev);
    if (e == cudaSuccess)
        e = cudaGetDeviceProperties(&cdp_cuda_g.prop, dev);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        set_err(err, errlen, "cannot use CUDA device: cudaSetDevice: %s%s",
                cudaGetErrorString(e), "");
        return nullptr;
    }

    char ccbuf[32];
    std::snprintf(ccbuf, sizeof ccbuf, "sm_%d%d", cdp_cuda_g.prop.major,
                  cdp_cuda_g.prop.minor);
    cudaFuncAttributes fa;
    e = cudaFuncGetAttributes(&fa, cu_probe_kernel);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        set_err(err, errlen,
                "this build of cdp has no CUDA kernels for the device (%s): %s; "
                "reconfigure with --with-cuda-arch=<compute capability>",
                ccbuf, cudaGetErrorString(e));
        return nullptr;
    }

    e = cudaStreamCreateWithFlags(&cdp_cuda_g.stream, cudaStreamNonBlocking);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        cdp_cuda_g.stream = nullptr;
        set_err(err, errlen, "cannot use CUDA device: cudaStreamCreate: %s%s",
                cudaGetErrorString(e), "");
        return nullptr;
    }
    cublasStatus_t s = cublasCreate(&cdp_cuda_g.blas);
    if (s != CUBLAS_STATUS_SUCCESS) {
        cdp_cuda_g.blas = nullptr;
        release_partial();
        set_err(err, errlen, "cannot use CUDA device: cublasCreate: %s%s",
                cublasGetStatusString(s), "");
        return nullptr;
    }
    /* Plain FP32 (no TF32 tensor-op rounding), deterministic reductions,
     * scalars from the host, everything on our stream. */
    const char *call = "cublasSetStream";
    s = cublasSetStream(cdp_cuda_g.blas, cdp_cuda_g.stream);
    if (s == CUBLAS_STATUS_SUCCESS) {
        call = "cublasSetMathMode";
        s = cublasSetMathMode(cdp_cuda_g.blas, CUBLAS_DEFAULT_MATH);
    }
    if (s == CUBLAS_STATUS_SUCCESS) {
        call = "cublasSetAtomicsMode";
        s = cublasSetAtomicsMode(cdp_cuda_g.blas, CUBLAS_ATOMICS_NOT_ALLOWED);
    }
    if (s == CUBLAS_STATUS_SUCCESS) {
        call = "cublasSetPointerMode";
        s = cublasSetPointerMode(cdp_cuda_g.blas, CUBLAS_POINTER_MODE_HOST);
    }
    if (s != CUBLAS_STATUS_SUCCESS) {
        release_partial();
        set_err(err, errlen, "cannot use CUDA device: %s: %s", call,
                cublasGetStatusString(s));
        return nullptr;
    }

    int maj = 0, min = 0, pat = 0, rt = 0;
    cublasGetProperty(MAJOR_VERSION, &maj);
    cublasGetProperty(MINOR_VERSION, &min);
    cublasGetProperty(PATCH_LEVEL, &pat);
    cudaRuntimeGetVersion(&rt);
    std::snprintf(cu_desc, sizeof cu_desc,
                  "cuda: %s (%s, device %d of %d, %.1f GiB), cuBLAS %d.%d.%d, "
                  "CUDA runtime %d.%d, FP32 (no TF32), %s",
                  cdp_cuda_g.prop.name, ccbuf, dev, count,
                  (double)cdp_cuda_g.prop.totalGlobalMem / (1024.0 * 1024.0 * 1024.0),
                  maj, min, pat, rt / 1000, (rt % 1000) / 10, cdp_cuda_cudnn_describe());

    std::snprintf(cu_numerics_text, sizeof cu_numerics_text,
                  "backend: cuda\ndevice: %s (%s)\nlibraries: cuBLAS %d.%d.%d, CUDA runtime "
                  "%d.%d, %s", cdp_cuda_g.prop.name, ccbuf, maj, min, pat, rt / 1000,
                  (rt % 1000) / 10, cdp_cuda_cudnn_describe());

    cdp_cuda_g.device = dev;
    cdp_cuda_g.ndevices = count;
    cdp_cuda_g.initialized = 1;

    cu_backend.name = "cuda";
    cu_backend.host_memory = 0;
    cu_backend.alloc = cu_alloc;
    cu_backend.free = cu_free;
    cu_backend.to_device = cu_to_device;
    cu_backend.to_host = cu_to_host;
    cu_backend.copy = cu_copy;
    cu_backend.zero = cu_zero;
    cu_backend.sync = cu_sync;
#define CDP_KERNEL(ret, name, params) cu_backend.name = cdp_cuda_##name;
#include "backend/backend_kernels.def"
#undef CDP_KERNEL
    cu_backend.describe = cu_describe;
    cu_backend.numerics = cu_numerics;
    cu_backend.alloc_host = cdp_cuda_alloc_pinned;
    cu_backend.free_host = cdp_cuda_free_pinned;
    return &cu_backend;
}

/* ---------------------------------------------------------------- staging */

extern "C" void *cdp_cuda_alloc_pinned(size_t bytes)
{
    void *p = nullptr;
    if (cdp_cuda_g.initialized)
        CDP_CUDA_CHECK(cudaSetDevice(cdp_cuda_g.device));
    if (cudaMallocHost(&p, bytes ? bytes : 1) != cudaSuccess) {
        (void)cudaGetLastError();
        return nullptr;
    }
    return p;
}

extern "C" void cdp_cuda_free_pinned(void *p)
{
    if (p)
        CDP_CUDA_CHECK(cudaFreeHost(p));
}
