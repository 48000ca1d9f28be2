/* The CUDA backend's convolutions through cuDNN (built with CDP_HAVE_CUDNN:
 * configure --with-cudnn, m4/cdp_cudnn.m4), called by kernels_image.cu's
 * conv2d entry points for every shape cuDNN takes; the others stay on
 * im2col + cuBLAS.
 *
 * Why.  im2col materialises K = Cin*KH*KW rows per output pixel (9x the
 * input for a 3x3) and col2im gathers them back; cuDNN's implicit-GEMM and
 * FFT/Winograd kernels do not, and they are what PyTorch runs.
 *
 * Numerics and determinism.  Plain FP32: the convolution descriptor's math
 * type is CUDNN_FMA_MATH (no TF32 tensor ops), and only algorithms cuDNN
 * reports as CUDNN_DETERMINISTIC with that math type are taken.  The
 * algorithm of each pass is cuDNN's heuristic choice
 * (cudnnGet*Algorithm_v7: no timing, so the same shape on the same device
 * and library always gets the same algorithm), the first in its ranking
 * that is deterministic, FMA-only and needs at most CDP_CUDNN_WS_MB
 * (default 256) MiB of workspace.  So a run's bits depend on the shape, the
 * GPU and the cuDNN version, never on timing, ranks or threads.  The sums
 * are cuDNN's order, not the CPU's: they agree to rounding (tests/gpu/test_gpu
 * checks both paths).
 *
 * Grouped and depthwise shapes (groups > 1) run here as one grouped
 * convolution (cudnnSetConvolutionGroupCount), the filter [Cout, Cin/G,
 * KH, KW]; where cuDNN declines one, conv_grouped.cu runs it.
 *
 * The contract (src/backend/backend.h): y = conv + bias (y preloaded with
 * the bias, cuDNN adds onto it with beta = 1, as the im2col path's GEMM
 * does); dw into ws and then add() with accumulate (the bits of a separate
 * result added); db stays with kernels_image.cu (k_conv_db); dx is
 * overwritten (beta = 0) and may be NULL.
 *
 * ws: [cuDNN workspace of the shape's three algorithms, their largest |
 * dw for accumulate].  Descriptors and algorithms are cached per shape in a
 * small table (recreated identically after an eviction) and live as long
 * as the process.  Set CDP_CUDNN=0 to run every convolution on the im2col
 * path, or CDP_CUDNN=fwd,dgrad (any of fwd, dgrad, wgrad) to run only those
 * passes here and the others on im2col + cuBLAS (also deterministic): an
 * A/B of each pass's path (a grouped shape cuDNN takes keeps all three). */
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "cuda_internal.h"

/* 1: convolutions through cuDNN where it takes the shape; 0: im2col.
 * Set from CDP_CUDNN at the first convolution; tests/gpu/test_gpu flips it. */
extern "C" {
int cdp_cuda_conv_cudnn = -1;
}
/* whether this build has the cuDNN path at all (extern: a const's linkage
 * is internal otherwise, and tests/gpu/test_gpu reads it) */
#ifdef CDP_HAVE_CUDNN
extern "C" const int cdp_cuda_have_cudnn = 1;
#else
extern "C" const int cdp_cuda_have_cudnn = 0;
#endif

#ifdef CDP_HAVE_CUDNN
#include <cudnn.h>

#define CDP_CUDNN_CHECK(call)                                                  \
    do {                                                                       \
        cudnnStatus_t cdp_n_ = (call);                                         \
        if (cdp_n_ != CUDNN_STATUS_SUCCESS)                                    \
            cdp_cuda_fail(#call, cudnnGetErrorString(cdp_n_), __FILE__, __LINE__); \
    } while (0)

enum { CACHE = 64 };

struct cudnn_conv {
    cdp_conv_shape s;
    int used;      /* slot holds s */
    int ok;        /* cuDNN takes s: descriptors and algorithms below */
    cudnnTensorDescriptor_t x, y;
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t conv;
    cudnnConvolutionFwdAlgo_t fwd;
    cudnnConvolutionBwdDataAlgo_t bwd_data;
    cudnnConvolutionBwdFilterAlgo_t bwd_filter;
    size_t ws_bytes;   /* the largest of the three algorithms' */
};

static cudnnHandle_t handle;
static cudnn_conv cache[CACHE];
static int next_slot;
static size_t ws_cap;

/* CDP_CUDNN's passes: 0 none, unset, 1 or all every one, else a list */
static int passes_of(const char *e)
{
    if (e && !strcmp(e, "0"))
        return 0;
    if (!e || !strcmp(e, "1") || !strcmp(e, "all"))
        return CDP_CUDNN_ALL;
    int m = 0;
    char buf[64];
    std::snprintf(buf, sizeof buf, "%s", e);
    for (char *save = nullptr, *t = strtok_r(buf, ",", &save); t; t = strtok_r(nullptr, ",", &save)) {
        if (!strcmp(t, "fwd")) m |= CDP_CUDNN_FWD;
        else if (!strcmp(t, "dgrad")) m |= CDP_CUDNN_DGRAD;
        else if (!strcmp(t, "wgrad")) m |= CDP_CUDNN_WGRAD;
        else {
            std::fprintf(stderr, "cdp: CDP_CUDNN=%s: '%s' is not 0, 1, all or a list of fwd, "
                         "dgrad, wgrad; every pass through cuDNN\n", e, t);
            return CDP_CUDNN_ALL;
        }
    }
    return m;
}

static int pass_mask = -1;

/* cdp_cuda_conv_cudnn (set by tests/gpu/test_gpu) switches cuDNN as a
 * whole; the passes come from CDP_CUDNN once */
static int enabled(void)
{
    if (pass_mask < 0)
        pass_mask = passes_of(getenv("CDP_CUDNN"));
    if (cdp_cuda_conv_cudnn < 0)
        cdp_cuda_conv_cudnn = pass_mask != 0;
    return cdp_cuda_conv_cudnn;
}

int cdp_cuda_cudnn_passes(void)
{
    if (!enabled())
        return 0;
    return pass_mask ? pass_mask : CDP_CUDNN_ALL;   /* switched on over CDP_CUDNN=0 */
}

static void ensure_handle(void)
{
    if (handle)
        return;
    CDP_CUDNN_CHECK(cudnnCreate(&handle));
    CDP_CUDNN_CHECK(cudnnSetStream(handle, cdp_cuda_g.stream));
    const char *mb = getenv("CDP_CUDNN_WS_MB");
    long v = mb ? strtol(mb, nullptr, 10) : 0;
    ws_cap = (size_t)(v > 0 ? v : 256) << 20;
}

static void release(cudnn_conv *c)
{
    if (c->used) {
        cudnnDestroyTensorDescriptor(c->x);
        cudnnDestroyTensorDescriptor(c->y);
        cudnnDestroyFilterDescriptor(c->w);
        cudnnDestroyConvolutionDescriptor(c->conv);
    }
    memset(c, 0, sizeof *c);
}

/* The first perf entry (cuDNN's ranking) that ran, is deterministic, is no
 * tensor-op (TF32) kernel and fits the workspace cap; -1 if none.  The
 * descriptor's CUDNN_FMA_MATH already rules tensor ops out; the test is a
 * second lock (tests/gpu/test_gpu's 1e-5 would catch TF32's ~1e-3 too). */
template <typename Perf>
static int pick(const Perf *perf, int n)
{
    for (int i = 0; i < n; i++)
        if (perf[i].status == CUDNN_STATUS_SUCCESS &&
            perf[i].determinism == CUDNN_DETERMINISTIC &&
            perf[i].mathType != CUDNN_TENSOR_OP_MATH &&
            perf[i].mathType != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION && perf[i].memory <= ws_cap)
            return i;
    return -1;
}

/* Describes s to cuDNN and picks the three algorithms; c->ok stays 0 (the
 * im2col path) where cuDNN refuses the shape or has no algorithm for it. */
#define TRY(call)                                                              \
    do {                                                                       \
        if ((call) != CUDNN_STATUS_SUCCESS)                                    \
            return;                                                            \
    } while (0)

static void plan(cudnn_conv *c, const cdp_conv_shape *s)
{
    c->s = *s;
    c->used = 1;
    CDP_CUDNN_CHECK(cudnnCreateTensorDescriptor(&c->x));
    CDP_CUDNN_CHECK(cudnnCreateTensorDescriptor(&c->y));
    CDP_CUDNN_CHECK(cudnnCreateFilterDescriptor(&c->w));
    CDP_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&c->conv));
    TRY(cudnnSetTensor4dDescriptor(c->x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, s->B, s->Cin, s->H,
                                   s->W));
    TRY(cudnnSetTensor4dDescriptor(c->y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, s->B, s->Cout,
                                   s->OH, s->OW));
    const int G = cdp_conv_groups(s);   /* the filter holds Cin/G channels per output */
    TRY(cudnnSetFilter4dDescriptor(c->w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, s->Cout,
                                   s->Cin / G, s->KH, s->KW));
    TRY(cudnnSetConvolution2dDescriptor(c->conv, s->pad, s->pad, s->stride, s->stride, 1, 1,
                                        CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    TRY(cudnnSetConvolutionGroupCount(c->conv, G));
    TRY(cudnnSetConvolutionMathType(c->conv, CUDNN_FMA_MATH));
    int n = 0, cc = 0, h = 0, w = 0;
    TRY(cudnnGetConvolution2dForwardOutputDim(c->conv, c->x, c->w, &n, &cc, &h, &w));
    if (n != s->B || cc != s->Cout || h != s->OH || w != s->OW)
        return;   /* a shape cdp and cuDNN size differently */

    cudnnConvolutionFwdAlgoPerf_t fp[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    cudnnConvolutionBwdDataAlgoPerf_t dp[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    cudnnConvolutionBwdFilterAlgoPerf_t wp[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    int nf = 0, nd = 0, nw = 0;
    TRY(cudnnGetConvolutionForwardAlgorithm_v7(handle, c->x, c->w, c->conv, c->y,
                                               CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &nf, fp));
    TRY(cudnnGetConvolutionBackwardDataAlgorithm_v7(handle, c->w, c->y, c->conv, c->x,
                                                    CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &nd,
                                                    dp));
    TRY(cudnnGetConvolutionBackwardFilterAlgorithm_v7(handle, c->x, c->y, c->conv, c->w,
                                                      CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT,
                                                      &nw, wp));
    int i = pick(fp, nf), j = pick(dp, nd), k = pick(wp, nw);
    if (i < 0 || j < 0 || k < 0)
        return;
    c->fwd = fp[i].algo;
    c->bwd_data = dp[j].algo;
    c->bwd_filter = wp[k].algo;
    /* the sizes the calls will ask for (the perf figures are estimates) */
    size_t a = 0, b = 0, d = 0;
    TRY(cudnnGetConvolutionForwardWorkspaceSize(handle, c->x, c->w, c->conv, c->y, c->fwd, &a));
    TRY(cudnnGetConvolutionBackwardDataWorkspaceSize(handle, c->w, c->y, c->conv, c->x,
                                                     c->bwd_data, &b));
    TRY(cudnnGetConvolutionBackwardFilterWorkspaceSize(handle, c->x, c->y, c->conv, c->w,
                                                       c->bwd_filter, &d));
    c->ws_bytes = a > b ? a : b;
    c->ws_bytes = c->ws_bytes > d ? c->ws_bytes : d;
    c->ok = 1;
}
#undef TRY

/* The cached plan of s, made on first sight; NULL where cuDNN is off or
 * does not take s. */
static const cudnn_conv *lookup(const cdp_conv_shape *s)
{
    if (!enabled() || s->B <= 0 || s->Cin <= 0 || s->Cout <= 0 || s->KH <= 0 || s->KW <= 0 ||
        s->OH <= 0 || s->OW <= 0)
        return nullptr;
    for (int i = 0; i < CACHE; i++)
        if (cache[i].used && memcmp(&cache[i].s, s, sizeof *s) == 0)
            return cache[i].ok ? &cache[i] : nullptr;
    ensure_handle();
    cudnn_conv *c = &cache[next_slot];
    next_slot = (next_slot + 1) % CACHE;
    release(c);
    plan(c, s);
    return c->ok ? c : nullptr;
}

static size_t ws_floats_of(const cudnn_conv *c)
{
    return round64((c->ws_bytes + sizeof(float) - 1) / sizeof(float));
}

size_t cdp_cuda_cudnn_ws_floats(const cdp_conv_shape *s)
{
    const cudnn_conv *c = lookup(s);
    if (!c)
        return 0;
    return ws_floats_of(c) + round64(cdp_conv_weight_count(s));
}

int cdp_cuda_cudnn_fwd(const cdp_conv_shape *s, const float *x, const float *w, int bias,
                       float *y, float *ws)
{
    if (!(cdp_cuda_cudnn_passes() & CDP_CUDNN_FWD))
        return 0;
    const cudnn_conv *c = lookup(s);
    if (!c)
        return 0;
    const float one = 1.0f, beta = bias ? 1.0f : 0.0f;
    CDP_CUDNN_CHECK(cudnnConvolutionForward(handle, &one, c->x, x, c->w, w, c->conv, c->fwd, ws,
                                            c->ws_bytes, &beta, c->y, y));
    return 1;
}

int cdp_cuda_cudnn_bwd(const cdp_conv_shape *s, const float *x, const float *w, const float *dy,
                       float *dx, float *dw, int accumulate, float *ws)
{
    int m = cdp_cuda_cudnn_passes() & (CDP_CUDNN_DGRAD | CDP_CUDNN_WGRAD);
    if (!m)
        return 0;
    const cudnn_conv *c = lookup(s);
    if (!c)
        return 0;
    if (cdp_conv_groups(s) > 1)
        m = CDP_CUDNN_DGRAD | CDP_CUDNN_WGRAD;   /* im2col takes no groups */
    const float one = 1.0f, zero = 0.0f;
    float *dwt = ws + ws_floats_of(c);
    if (m & CDP_CUDNN_WGRAD) {
        CDP_CUDNN_CHECK(cudnnConvolutionBackwardFilter(handle, &one, c->x, x, c->y, dy, c->conv,
                                                       c->bwd_filter, ws, c->ws_bytes, &zero,
                                                       c->w, accumulate ? dwt : dw));
        if (accumulate)
            cdp_cuda_add(cdp_conv_weight_count(s), dw, dwt);
    }
    if (dx && (m & CDP_CUDNN_DGRAD))
        CDP_CUDNN_CHECK(cudnnConvolutionBackwardData(handle, &one, c->w, w, c->y, dy, c->conv,
                                                     c->bwd_data, ws, c->ws_bytes, &zero, c->x,
                                                     dx));
    return dx ? m : m | CDP_CUDNN_DGRAD;
}

const char *cdp_cuda_cudnn_describe(void)
{
    static char d[64];
    static char d2[128];
    if (!enabled())
        return "conv im2col (CDP_CUDNN=0)";
    size_t v = cudnnGetVersion();
    std::snprintf(d, sizeof d, "conv cuDNN %zu.%zu.%zu (FMA, deterministic)", v / 10000,
                  (v / 100) % 100, v % 100);
    const int m = cdp_cuda_cudnn_passes();
    if (m == CDP_CUDNN_ALL)
        return d;
    std::snprintf(d2, sizeof d2, "%s for%s%s%s, im2col for the rest", d,
                  m & CDP_CUDNN_FWD ? " fwd" : "", m & CDP_CUDNN_DGRAD ? " dgrad" : "",
                  m & CDP_CUDNN_WGRAD ? " wgrad" : "");
    return d2;
}

#else /* no cuDNN in this build: every convolution on im2col */

int cdp_cuda_cudnn_passes(void)
{
    return 0;
}

size_t cdp_cuda_cudnn_ws_floats(const cdp_conv_shape *)
{
    return 0;
}

int cdp_cuda_cudnn_fwd(const cdp_conv_shape *, const float *, const float *, int, float *,
                       float *)
{
    return 0;
}

int cdp_cuda_cudnn_bwd(const cdp_conv_shape *, const float *, const float *, const float *,
                       float *, float *, int, float *)
{
    return 0;
}

const char *cdp_cuda_cudnn_describe(void)
{
    return "conv im2col (built without cuDNN)";
}

#endif
