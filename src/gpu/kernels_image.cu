/* The CUDA backend's image kernels (NCHW float32): convolution, batch
 * normalisation, pooling, the three-operand add of residual blocks and the
 * packing of doubles into floats.  They follow the formulas of the CPU
 * kernels (src/cpu/kernels_conv.c, kernels_norm.c, kernels_pool.c,
 * kernels_cpu.c) and the contract in src/backend/backend.h.
 *
 * Determinism, as in kernels.cu: one stream, no atomics, every reduction in
 * a fixed order by a fixed thread layout (which depends on the shape only),
 * cuBLAS with atomics off and plain FP32 math.  Element-wise arithmetic uses
 * the explicitly rounded intrinsics (__fadd_rn, __fmul_rn, ..., and the
 * __d*_rn ones in double) so that nvcc contracts nothing into an FMA: each
 * operation rounds as the CPU's does.
 *
 * What matches the CPU bit for bit, given the same inputs: pooling (values,
 * argmax offsets, gradients), add3, f64_pack/unpack, bn_fwd_eval, the
 * running-statistics update, and col2im's per-pixel sums.  The GEMMs and the
 * per-channel reductions (conv bias gradient, BatchNorm statistics and
 * gradients) sum in another order than the CPU: those agree to rounding.
 *
 * Convolution.  The micro-batch is cut into chunks of G whole samples, G
 * as large as keeps a chunk's im2col (and its gathered dy) under
 * CONV_CHUNK_FLOATS, so the GEMMs are wide; G depends on the shape only.
 *   - forward: col[g][K][P] (K = Cin*KH*KW rows like w, P = OH*OW) and one
 *     strided batched SGEMM y_b[Cout][P] = w[Cout][K] col_b, written in
 *     NCHW directly; a 1x1 stride-1 unpadded convolution reads x itself.
 *     Bias: y is preloaded with b and the GEMM adds onto it (beta = 1), as
 *     linear_fwd does.
 *   - backward: dy of the chunk gathered into [Cout][g*P] (g > 1), col in
 *     [K][g*P]; dw = sum over chunks of dy_c col_c^T (one SGEMM per chunk,
 *     beta = 1 after the first); dcol = w^T dy_c into col, then col2im as a
 *     gather: each dx element sums its contributions in the order (kh, kw)
 *     (the CPU's order for one pixel), from +0.  With accumulate, dw is
 *     computed into the workspace and added with the add kernel afterwards
 *     (the contract's bits of a separate add), db rounded to float then
 *     added.  db: per channel, in double, one block, fixed tree, rounded
 *     once.
 * Where cuDNN takes the shape (conv_cudnn.cu: built with it, CDP_CUDNN not
 * 0), the three passes run there instead; db stays here.  Grouped shapes
 * (groups > 1) that cuDNN does not run go to conv_grouped.cu, never to
 * im2col.
 * BatchNorm: each channel's n = B*HW values cut into S slices (S from n
 * alone), one block a (slice, channel): thread-strided partial sums in
 * double, a fixed tree within the block, then the S slice sums in a fixed
 * tree.
 *
 * Status: run on an NVIDIA H200 (2026-11-26) and H100 (2026-11-27):
 * tests/gpu/test_gpu, which compares every kernel here with the CPU backend,
 * passes, and the ResNets train within 1.8e-5 of the CPU after one step
 * (bench/RESULTS.md section 6).  Correct and deterministic; resnet50 trains
 * at 0.51-0.68x PyTorch's speed there.  The sliced BatchNorm (2026-11-27)
 * was written after those runs and has not run on a GPU yet. */
#include <cmath>
#include <cstdlib>

#include "cuda_internal.h"

/* floats of one chunk's im2col plus its gathered dy (128 MiB) */
#define CONV_CHUNK_FLOATS ((size_t)1 << 25)
#define RED_THREADS 256 /* threads of the per-channel reduction blocks */

/* ---------------------------------------------------------------- reductions */

/* The sum of v over the RED_THREADS threads of the block, in a fixed tree
 * (thread t adds t + h for h = 128, 64, ..., 1); every thread gets it. */
__device__ static double block_sum(double v, double *sh)
{
    const int t = threadIdx.x;
    sh[t] = v;
    __syncthreads();
    for (int h = RED_THREADS / 2; h > 0; h >>= 1) {
        if (t < h)
            sh[t] = __dadd_rn(sh[t], sh[t + h]);
        __syncthreads();
    }
    double r = sh[0];
    __syncthreads(); /* sh is free again for the next sum */
    return r;
}

/* ---------------------------------------------------------------- convolution */

struct conv_plan {
    int P, K;       /* output pixels per plane, rows of col */
    int G;          /* most samples in a chunk */
    int ident;      /* 1x1, stride 1, no padding: col of one sample is x_b */
    size_t col, tmp, dwt; /* floats of ws: im2col, gathered dy, dw for accumulate */
};

static conv_plan conv_plan_make(const cdp_conv_shape *s)
{
    conv_plan p = {};
    p.P = s->OH * s->OW;
    p.K = s->Cin * s->KH * s->KW;
    if (s->B <= 0 || p.P <= 0 || p.K <= 0 || s->Cout <= 0)
        return p;
    size_t per = (size_t)p.P * ((size_t)p.K + (size_t)s->Cout);   /* one sample */
    size_t G = per >= CONV_CHUNK_FLOATS ? 1 : CONV_CHUNK_FLOATS / per;
    p.G = G > (size_t)s->B ? s->B : (int)G;
    p.ident = s->KH == 1 && s->KW == 1 && s->stride == 1 && s->pad == 0;
    size_t cols = (size_t)p.G * (size_t)p.P;
    p.col = p.ident && p.G == 1 ? 0 : round64((size_t)p.K * cols);
    p.tmp = p.G > 1 ? round64((size_t)s->Cout * cols) : 0;
    p.dwt = round64((size_t)s->Cout * (size_t)p.K);
    return p;
}

size_t cdp_cuda_conv2d_ws_floats(const cdp_conv_shape *s)
{
    size_t c = cdp_cuda_cudnn_ws_floats(s);
    if (cdp_conv_groups(s) > 1 || (c && cdp_cuda_cudnn_passes() == CDP_CUDNN_ALL))
        return c;   /* conv_grouped.cu needs none */
    conv_plan p = conv_plan_make(s);
    const size_t i2c = p.col + p.tmp + p.dwt;   /* passes on im2col, one at a time */
    return c > i2c ? c : i2c;
}

/* y[b, co, q] = b[co] (or +0 without a bias), n = B*Cout*P */
template <typename I>
__global__ static void k_conv_bias(I n, int Cout, I P, const float *__restrict__ b,
                                   float *__restrict__ y)
{
    GRID_STRIDE_I(I, i, n)
        y[i] = b ? b[(i / P) % (I)Cout] : 0.0f;
}

/* The patches of samples b0..b0+g-1: element (gi, k, q) of the im2col, k =
 * (ci*KH + kh)*KW + kw, q = oh*OW + ow, goes to col[gi*sg + k*sk + q]
 * (sg = K*P, sk = P: [g][K][P]; sg = P, sk = g*P: [K][g*P]); +0 outside x. */
template <typename I>
__global__ static void k_im2col(cdp_conv_shape s, const float *__restrict__ x, int b0, int g,
                                size_t sg, size_t sk, float *__restrict__ col)
{
    const I P = (I)s.OH * (I)s.OW, K = (I)s.Cin * (I)s.KH * (I)s.KW;
    const I n = (I)g * K * P;
    GRID_STRIDE_I(I, i, n) {
        I q = i % P, t = i / P;
        I k = t % K, gi = t / K;
        int ow = (int)(q % (I)s.OW), oh = (int)(q / (I)s.OW);
        int kw = (int)(k % (I)s.KW);
        I t2 = k / (I)s.KW;
        int kh = (int)(t2 % (I)s.KH), ci = (int)(t2 / (I)s.KH);
        int ih = oh * s.stride - s.pad + kh, iw = ow * s.stride - s.pad + kw;
        float v = 0.0f;
        if (ih >= 0 && ih < s.H && iw >= 0 && iw < s.W)
            v = x[(((size_t)b0 + gi) * (size_t)s.Cin + (size_t)ci) * (size_t)s.H * (size_t)s.W
                  + (size_t)ih * (size_t)s.W + (size_t)iw];
        col[(size_t)gi * sg + (size_t)k * sk + q] = v;
    }
}

/* dx planes of samples b0..b0+g-1 from dcol[K][g*P]: each element sums
 * its contributions in the order (kh, kw), starting from +0 (as the CPU's
 * cleared plane gathering in the order kh, kw, oh, ow). */
template <typename I>
__global__ static void k_col2im(cdp_conv_shape s, const float *__restrict__ dcol, int b0, int g,
                                float *__restrict__ dx)
{
    const size_t P = (size_t)s.OH * (size_t)s.OW, HW = (size_t)s.H * (size_t)s.W;
    const size_t ld = (size_t)g * P;
    const I n = (I)g * (I)s.Cin * (I)HW;
    GRID_STRIDE_I(I, i, n) {
        I r = i % (I)HW, t = i / (I)HW;
        int iw = (int)(r % (I)s.W), ih = (int)(r / (I)s.W);
        int ci = (int)(t % (I)s.Cin);
        size_t gi = t / (I)s.Cin;
        float acc = 0.0f;
        for (int kh = 0; kh < s.KH; kh++) {
            int th = ih + s.pad - kh;
            if (th < 0 || th % s.stride)
                continue;
            int oh = th / s.stride;
            if (oh >= s.OH)
                continue;
            for (int kw = 0; kw < s.KW; kw++) {
                int tw = iw + s.pad - kw;
                if (tw < 0 || tw % s.stride)
                    continue;
                int ow = tw / s.stride;
                if (ow >= s.OW)
                    continue;
                size_t k = ((size_t)ci * s.KH + (size_t)kh) * s.KW + (size_t)kw;
                acc = __fadd_rn(acc, dcol[k * ld + gi * P + (size_t)oh * s.OW + (size_t)ow]);
            }
        }
        dx[((size_t)b0 * (size_t)s.Cin) * HW + i] = acc;
    }
}

/* tmp[co][gi*P + q] = dy[b0 + gi][co][q] for gi < g */
template <typename I>
__global__ static void k_gather_dy(int Cout, I P, const float *__restrict__ dy, int b0, int g,
                                   float *__restrict__ tmp)
{
    const I n = (I)g * (I)Cout * P;
    const size_t ld = (size_t)g * P;
    GRID_STRIDE_I(I, i, n) {
        I q = i % P, t = i / P;
        I co = t % (I)Cout, gi = t / (I)Cout;
        tmp[(size_t)co * ld + (size_t)gi * P + q] = dy[(size_t)b0 * (size_t)Cout * P + i];
    }
}

/* db[co] (= or +=) the sum of dy over the samples and pixels of channel co:
 * one block per channel, thread-strided partial sums in double over the
 * B*P values (index b*P + q), a fixed tree, rounded to float once. */
template <typename I>
__global__ static void k_conv_db(int B, int Cout, I P, const float *__restrict__ dy,
                                 float *__restrict__ db, int accumulate)
{
    __shared__ double sh[RED_THREADS];
    const int co = blockIdx.x;
    const I n = (I)B * P;
    double sum = 0.0;
    for (I i = threadIdx.x; i < n; i += RED_THREADS) {
        size_t b = i / P, q = i % P;
        sum = __dadd_rn(sum, (double)dy[(b * (size_t)Cout + (size_t)co) * P + q]);
    }
    sum = block_sum(sum, sh);
    if (threadIdx.x == 0) {
        float r = __double2float_rn(sum);
        db[co] = accumulate ? __fadd_rn(db[co], r) : r;
    }
}

static void im2col(const cdp_conv_shape *s, const float *x, int b0, int g, size_t sg,
                   size_t sk, float *col)
{
    size_t n = (size_t)g * (size_t)s->Cin * s->KH * s->KW * (size_t)s->OH * (size_t)s->OW;
    LAUNCH_I(k_im2col, n, grid_for(n), CDP_THREADS, *s, x, b0, g, sg, sk, col);
}

void cdp_cuda_conv2d_fwd(const cdp_conv_shape *s, const float *x, const float *w,
                         const float *b, float *y, float *ws)
{
    const conv_plan p = conv_plan_make(s);
    const int Cout = s->Cout;
    if (s->B <= 0 || Cout <= 0 || p.P <= 0)
        return;
    const size_t P = (size_t)p.P, n = (size_t)s->B * (size_t)Cout * P;
    if (b || p.K <= 0) {   /* preload the bias (or, with no input channel, +0) */
        LAUNCH_I(k_conv_bias, n, grid_for(n), CDP_THREADS, n, Cout, P, b, y);
    }
    if (p.K <= 0 || cdp_cuda_cudnn_fwd(s, x, w, b != nullptr, y, ws))
        return;
    if (cdp_conv_groups(s) > 1) {
        cdp_cuda_conv2d_grouped_fwd(s, x, w, b, y);
        return;
    }
    const float one = 1.0f, beta = b ? 1.0f : 0.0f;
    const long long sx = (long long)p.K * p.P, sy = (long long)Cout * p.P;
    for (int b0 = 0; b0 < s->B; b0 += p.G) {
        int g = s->B - b0 < p.G ? s->B - b0 : p.G;
        const float *cp = ws;
        if (p.ident)
            cp = x + (size_t)b0 * (size_t)s->Cin * P;
        else
            im2col(s, x, b0, g, (size_t)sx, P, ws);
        /* per sample, row-major y_b[Cout][P] = w[Cout][K] col_b[K][P] is,
         * column-major, y_b^T (P x Cout) = col_b^T (P x K, ld P) w^T (K x
         * Cout, ld K) */
        CDP_CUBLAS_CHECK(cublasSgemmStridedBatched(
            cdp_cuda_g.blas, CUBLAS_OP_N, CUBLAS_OP_N, p.P, Cout, p.K, &one, cp, p.P, sx, w,
            p.K, 0, &beta, y + (size_t)b0 * (size_t)Cout * P, p.P, sy, g));
    }
}

void cdp_cuda_conv2d_bwd(const cdp_conv_shape *s, const float *x, const float *w,
                         const float *dy, float *dx, float *dw, float *db, int accumulate,
                         float *ws)
{
    const conv_plan p = conv_plan_make(s);
    const int Cout = s->Cout;
    if (Cout <= 0)
        return;
    const size_t nw = cdp_conv_weight_count(s);
    if (s->B <= 0 || p.P <= 0 || p.K <= 0) {
        /* nothing flows: zero gradients (unchanged with accumulate) */
        if (!accumulate) {
            if (nw)
                CDP_CUDA_CHECK(cudaMemsetAsync(dw, 0, nw * sizeof(float), cdp_cuda_g.stream));
            if (db)
                CDP_CUDA_CHECK(cudaMemsetAsync(db, 0, (size_t)Cout * sizeof(float),
                                               cdp_cuda_g.stream));
        }
        if (dx && s->B > 0) {
            size_t nx = (size_t)s->B * (size_t)s->Cin * (size_t)s->H * (size_t)s->W;
            if (nx)
                CDP_CUDA_CHECK(cudaMemsetAsync(dx, 0, nx * sizeof(float), cdp_cuda_g.stream));
        }
        return;
    }
    const size_t P = (size_t)p.P;
    if (db) {
        LAUNCH_I(k_conv_db, (size_t)s->B * P, Cout, RED_THREADS, s->B, Cout, P, dy, db,
                 accumulate);
    }
    /* what cuDNN did not (CDP_CUDNN's passes), on im2col + cuBLAS */
    const int done = cdp_cuda_cudnn_bwd(s, x, w, dy, dx, dw, accumulate, ws);
    const int want_w = !(done & CDP_CUDNN_WGRAD);
    if ((done & CDP_CUDNN_DGRAD) && !want_w)
        return;
    if (done & CDP_CUDNN_DGRAD)
        dx = nullptr;
    if (!done && cdp_conv_groups(s) > 1) {
        cdp_cuda_conv2d_grouped_bwd(s, x, w, dy, dx, dw, accumulate);
        return;
    }
    float *col = ws, *tmp = ws + p.col, *dwt = tmp + p.tmp;
    float *dwd = accumulate ? dwt : dw;
    const float one = 1.0f, zero = 0.0f;
    int first = 1;
    for (int b0 = 0; b0 < s->B; b0 += p.G) {
        int g = s->B - b0 < p.G ? s->B - b0 : p.G;
        const int nc = g * p.P;   /* < 2^31: g*P*(K + Cout) <= CONV_CHUNK_FLOATS or g = 1 */
        const float *dyc = dy + (size_t)b0 * (size_t)Cout * P;
        if (g > 1) {
            size_t n = (size_t)g * (size_t)Cout * P;
            LAUNCH_I(k_gather_dy, n, grid_for(n), CDP_THREADS, Cout, P, dy, b0, g, tmp);
            dyc = tmp;
        }
        const int direct = p.ident && g == 1;
        const float *cp = col;
        if (direct)
            cp = x + (size_t)b0 * (size_t)s->Cin * P;
        else if (want_w)   /* dgrad alone needs no columns of x */
            im2col(s, x, b0, g, P, (size_t)nc, col);
        /* row-major dw[Cout][K] += dy_c[Cout][nc] col_c[K][nc]^T, column-major
         * dw^T (K x Cout, ld K) = op_T(col_c^T as nc x K, ld nc) dy_c^T (nc x
         * Cout, ld nc) */
        if (want_w)
            CDP_CUBLAS_CHECK(cublasSgemm(cdp_cuda_g.blas, CUBLAS_OP_T, CUBLAS_OP_N, p.K, Cout, nc,
                                         &one, cp, nc, dyc, nc, first ? &zero : &one, dwd, p.K));
        first = 0;
        if (!dx)
            continue;
        /* row-major dcol[K][nc] = w^T[K][Cout] dy_c[Cout][nc], column-major
         * dcol^T (nc x K, ld nc) = dy_c^T (nc x Cout, ld nc) op_T(w^T as K x
         * Cout, ld K) */
        float *dst = direct ? dx + (size_t)b0 * (size_t)s->Cin * P : col;
        CDP_CUBLAS_CHECK(cublasSgemm(cdp_cuda_g.blas, CUBLAS_OP_N, CUBLAS_OP_T, nc, p.K, Cout,
                                     &one, dyc, nc, w, p.K, &zero, dst, nc));
        if (!direct) {
            size_t n = (size_t)g * (size_t)s->Cin * (size_t)s->H * (size_t)s->W;
            LAUNCH_I(k_col2im, n, grid_for(n), CDP_THREADS, *s, col, b0, g, dx);
        }
    }
    if (accumulate && want_w)
        cdp_cuda_add(nw, dw, dwt);
}

/* --precision bf16's convolutions: the float32 ones on the rounded
 * operands (the CPU backend's bfloat16 products are its own) */
size_t cdp_cuda_conv2d_bf16_ws_floats(const cdp_conv_shape *s)
{
    return cdp_cuda_conv2d_ws_floats(s);
}

void cdp_cuda_conv2d_fwd_bf16(const cdp_conv_shape *s, const float *x, const float *w,
                              const float *b, float *y, float *ws)
{
    cdp_cuda_conv2d_fwd(s, x, w, b, y, ws);
}

void cdp_cuda_conv2d_bwd_bf16(const cdp_conv_shape *s, const float *x, const float *w,
                              const float *dy, float *dx, float *dw, float *db, int accumulate,
                              float *ws)
{
    cdp_cuda_conv2d_bwd(s, x, w, dy, dx, dw, db, accumulate, ws);
}

/* ---------------------------------------------------------------- BatchNorm */

#define BN_AT(b, c, p) (((size_t)(b) * (size_t)C + (size_t)(c)) * (size_t)HW + (size_t)(p))
/* element i of channel c's B*HW values: i / HW and i % HW in the index type I
 * of the kernel (cuda_internal.h: 32 bits where they fit) */
#define BN_I(i, c) BN_AT((i) / (I)HW, c, (i) % (I)HW)

/* The per-channel sums, cut into slices so that the whole GPU works on
 * them: channel c's n = B*HW values (index i = b*HW + p) are cut into S
 * slices of consecutive indices, one block a (slice, channel).  A block
 * sums its slice (thread-strided, fixed tree, double) into part[c*S + s];
 * a block that needs the channel's total adds the S partials in one fixed
 * tree (bn_total), so every block of the channel gets the same bits.  S
 * depends on n alone (bn_slices): the bits depend on the shape, never on
 * timing.  One block a channel, as before 2026-11-27, left 64 of an H100's
 * 132 multiprocessors idle on resnet50's stem and walked 802816 values a
 * channel with 256 threads. */
#define BN_CHUNK (RED_THREADS * 16) /* values a block sums, about */

/* CDP_BN_SLICES=S fixes S (1: one block a channel) to compare speeds */
static int bn_slices(size_t n)
{
    static long forced = -1;
    if (forced < 0) {
        const char *e = getenv("CDP_BN_SLICES");
        forced = e ? strtol(e, nullptr, 10) : 0;
        if (forced < 0)
            forced = 0;
    }
    size_t S = forced > 0 ? (size_t)forced : (n + BN_CHUNK - 1) / BN_CHUNK;
    if (S > RED_THREADS) /* bn_total loads the partials one a thread */
        S = RED_THREADS;
    return S < 1 ? 1 : (int)S;
}

/* this block's channel c and its slice's indices [lo, hi) of n */
template <typename I>
struct bn_block {
    int c;
    I lo, hi;
};

template <typename I>
__device__ static inline bn_block<I> bn_slice(I n, int S)
{
    bn_block<I> k;
    const int s = (int)(blockIdx.x % (unsigned)S);
    k.c = (int)(blockIdx.x / (unsigned)S);
    const I len = (n + (I)S - 1) / (I)S;
    k.lo = (I)s * len < n ? (I)s * len : n;
    k.hi = n - k.lo < len ? n : k.lo + len;
    return k;
}

/* the total of a channel's S partials (part points at them), fixed tree */
__device__ static inline double bn_total(const double *part, int S, double *sh)
{
    return block_sum((int)threadIdx.x < S ? part[threadIdx.x] : 0.0, sh);
}

/* channel c's mean from the slice sums (the first C*S doubles of part) */
__device__ static inline double bn_mean(const double *part, int c, int S, double dn, double *sh)
{
    return __ddiv_rn(bn_total(part + (size_t)c * S, S, sh), dn);
}

/* Training forward, three launches over the (slice, channel) blocks, each
 * reading x once: the slices' sums; with mean = sum / n, the slices' sums
 * of (x - mean)^2 (M2), in double; then with invstd = (float)(1 / sqrt(M2/n
 * + eps)), y = ((x - (float)mean) * invstd) * gamma + beta in float.
 * part holds 2*C*S doubles: the sums, then the M2 partials. */
template <typename I>
__global__ static void k_bn_sum_part(int B, int C, int HW, int S,
                                     const float *__restrict__ x, double *__restrict__ part)
{
    __shared__ double sh[RED_THREADS];
    const bn_block<I> blk = bn_slice<I>((I)B * (I)HW, S);
    const int c = blk.c;
    double sum = 0.0;
    for (I i = blk.lo + threadIdx.x; i < blk.hi; i += RED_THREADS)
        sum = __dadd_rn(sum, (double)x[BN_I(i, c)]);
    sum = block_sum(sum, sh);
    if (threadIdx.x == 0)
        part[blockIdx.x] = sum;
}

template <typename I>
__global__ static void k_bn_m2_part(int B, int C, int HW, int S, const float *__restrict__ x,
                                    double *__restrict__ part)
{
    __shared__ double sh[RED_THREADS];
    const bn_block<I> blk = bn_slice<I>((I)B * (I)HW, S);
    const int c = blk.c;
    const double dn = (double)B * (double)HW;
    const double mean = bn_mean(part, c, S, dn, sh);
    double m2 = 0.0;
    for (I i = blk.lo + threadIdx.x; i < blk.hi; i += RED_THREADS) {
        double d = __dsub_rn((double)x[BN_I(i, c)], mean);
        m2 = __dadd_rn(m2, __dmul_rn(d, d));
    }
    m2 = block_sum(m2, sh);
    if (threadIdx.x == 0)
        part[(size_t)C * S + blockIdx.x] = m2;
}

template <typename I>
__global__ static void k_bn_normalize(int B, int C, int HW, int S, const float *__restrict__ x,
                                      const float *__restrict__ gamma,
                                      const float *__restrict__ beta, float eps,
                                      const double *__restrict__ part, float *__restrict__ y,
                                      float *__restrict__ save, double *__restrict__ stats)
{
    __shared__ double sh[RED_THREADS];
    const bn_block<I> blk = bn_slice<I>((I)B * (I)HW, S);
    const int c = blk.c;
    const double dn = (double)B * (double)HW;
    const double mean = bn_mean(part, c, S, dn, sh);
    const double m2 = bn_total(part + (size_t)C * S + (size_t)c * S, S, sh);
    const float fm = __double2float_rn(mean);
    const float is = __double2float_rn(
        __ddiv_rn(1.0, __dsqrt_rn(__dadd_rn(__ddiv_rn(m2, dn), (double)eps))));
    const float ga = gamma[c], be = beta[c];
    for (I i = blk.lo + threadIdx.x; i < blk.hi; i += RED_THREADS) {
        size_t at = BN_I(i, c);
        y[at] = __fadd_rn(__fmul_rn(__fmul_rn(__fsub_rn(x[at], fm), is), ga), be);
    }
    if (threadIdx.x == 0 && blockIdx.x % (unsigned)S == 0) {
        save[c] = fm;
        save[C + c] = is;
        stats[c] = mean;
        stats[C + c] = m2;
    }
}

/* y = ((x - rmean) / sqrt(rvar + eps)) * gamma + beta, in float */
template <typename I>
__global__ static void k_bn_fwd_eval(I n, int C, int HW, const float *__restrict__ x,
                                     const float *__restrict__ gamma,
                                     const float *__restrict__ beta,
                                     const float *__restrict__ rmean,
                                     const float *__restrict__ rvar, float eps,
                                     float *__restrict__ y)
{
    GRID_STRIDE_I(I, i, n) {
        int c = (int)((i / (I)HW) % (I)C);
        float sd = __fsqrt_rn(__fadd_rn(rvar[c], eps));
        y[i] = __fadd_rn(__fmul_rn(__fdiv_rn(__fsub_rn(x[i], rmean[c]), sd), gamma[c]), beta[c]);
    }
}

/* Backward, two launches over the (slice, channel) blocks.  With mean =
 * save[c], invstd = save[C + c] and xhat = (x - mean) * invstd in float:
 * the slices' sums of dy and dy*xhat in double (products in double) into
 * part (2*C*S doubles); then dbeta = sum dy, dgamma = sum dy*xhat, each
 * rounded to float once, and dx = (gamma * invstd / n) * (((n * dy) -
 * dbeta) - xhat * dgamma) in float.  dx may equal dy: the first launch has
 * read all of dy before the second writes any dx (one stream), and there
 * each element is read before it is written, by the same thread. */
template <typename I>
__global__ static void k_bn_bwd_part(int B, int C, int HW, int S, const float *__restrict__ x,
                                     const float *__restrict__ save, const float *dy,
                                     double *__restrict__ part)
{
    __shared__ double sh[RED_THREADS];
    const bn_block<I> blk = bn_slice<I>((I)B * (I)HW, S);
    const int c = blk.c;
    const float mean = save[c], is = save[C + c];
    double sdy = 0.0, sdyx = 0.0;
    for (I i = blk.lo + threadIdx.x; i < blk.hi; i += RED_THREADS) {
        size_t at = BN_I(i, c);
        float xh = __fmul_rn(__fsub_rn(x[at], mean), is);
        double d = (double)dy[at];
        sdy = __dadd_rn(sdy, d);
        sdyx = __dadd_rn(sdyx, __dmul_rn(d, (double)xh));
    }
    sdy = block_sum(sdy, sh);
    sdyx = block_sum(sdyx, sh);
    if (threadIdx.x == 0) {
        part[blockIdx.x] = sdy;
        part[(size_t)C * S + blockIdx.x] = sdyx;
    }
}

template <typename I>
__global__ static void k_bn_bwd_dx(int B, int C, int HW, int S, float nf,
                                   const float *__restrict__ x, const float *__restrict__ gamma,
                                   const float *__restrict__ save,
                                   const double *__restrict__ part, const float *dy, float *dx,
                                   float *__restrict__ dgamma, float *__restrict__ dbeta,
                                   int accumulate)
{
    __shared__ double sh[RED_THREADS];
    const bn_block<I> blk = bn_slice<I>((I)B * (I)HW, S);
    const int c = blk.c;
    const float mean = save[c], is = save[C + c];
    const float fdb = __double2float_rn(bn_total(part + (size_t)c * S, S, sh));
    const float fdg = __double2float_rn(bn_total(part + (size_t)C * S + (size_t)c * S, S, sh));
    const float k = __fdiv_rn(__fmul_rn(gamma[c], is), nf);
    for (I i = blk.lo + threadIdx.x; i < blk.hi; i += RED_THREADS) {
        size_t at = BN_I(i, c);
        float xh = __fmul_rn(__fsub_rn(x[at], mean), is);
        float v = __fsub_rn(__fsub_rn(__fmul_rn(nf, dy[at]), fdb), __fmul_rn(xh, fdg));
        dx[at] = __fmul_rn(k, v);
    }
    if (threadIdx.x == 0 && blockIdx.x % (unsigned)S == 0) {
        dbeta[c] = accumulate ? __fadd_rn(dbeta[c], fdb) : fdb;
        dgamma[c] = accumulate ? __fadd_rn(dgamma[c], fdg) : fdg;
    }
}

/* One thread per channel: Chan et al.'s combination in worker order, in
 * double, each line left to right (see cdp_cpu_bn_running_update). */
__global__ static void k_bn_running(int C, int N, double n, const double *__restrict__ stats,
                                    size_t stride, const float *rmean_in, const float *rvar_in,
                                    float m, float *rmean_out, float *rvar_out)
{
    GRID_STRIDE(i, (size_t)C) {
        const int c = (int)i;
        double na = n, mean = stats[c], m2 = stats[C + c];
        for (int w = 1; w < N; w++) {
            const double *st = stats + (size_t)w * stride;
            double nb = n, nab = __dadd_rn(na, nb);
            double delta = __dsub_rn(st[c], mean);
            mean = __dadd_rn(mean, __ddiv_rn(__dmul_rn(delta, nb), nab));
            m2 = __dadd_rn(__dadd_rn(m2, st[C + c]),
                           __ddiv_rn(__dmul_rn(__dmul_rn(__dmul_rn(delta, delta), na), nb), nab));
            na = nab;
        }
        double var = __ddiv_rn(m2, __dsub_rn(__dmul_rn((double)N, n), 1.0));
        float om = __fsub_rn(1.0f, m);
        float rm = rmean_in[c], rv = rvar_in[c];
        rmean_out[c] = __fadd_rn(__fmul_rn(om, rm), __fmul_rn(m, __double2float_rn(mean)));
        rvar_out[c] = __fadd_rn(__fmul_rn(om, rv), __fmul_rn(m, __double2float_rn(var)));
    }
}

static cdp_cuda_scratch bn_part;

void cdp_cuda_bn_fwd_train(int B, int C, int HW, const float *x, const float *gamma,
                           const float *beta, float eps, float *y, float *save, double *stats)
{
    if (C <= 0)
        return;
    const int b = B < 0 ? 0 : B, hw = HW < 0 ? 0 : HW;
    const size_t n = (size_t)b * (size_t)hw;
    const int S = bn_slices(n);
    const unsigned grid = (unsigned)C * (unsigned)S;
    double *part = (double *)cdp_cuda_scratch_get(&bn_part, 2 * (size_t)grid * sizeof(double),
                                                  "cudaMalloc(BatchNorm partial sums)");
    LAUNCH_I(k_bn_sum_part, n, grid, RED_THREADS, b, C, hw, S, x, part);
    LAUNCH_I(k_bn_m2_part, n, grid, RED_THREADS, b, C, hw, S, x, part);
    LAUNCH_I(k_bn_normalize, n, grid, RED_THREADS, b, C, hw, S, x, gamma, beta, eps, part, y,
             save, stats);
}

void cdp_cuda_bn_fwd_eval(int B, int C, int HW, const float *x, const float *gamma,
                          const float *beta, const float *rmean, const float *rvar, float eps,
                          float *y)
{
    if (B <= 0 || C <= 0 || HW <= 0)
        return;
    size_t n = (size_t)B * (size_t)C * (size_t)HW;
    LAUNCH_I(k_bn_fwd_eval, n, grid_for(n), CDP_THREADS, n, C, HW, x, gamma, beta, rmean, rvar,
             eps, y);
}

void cdp_cuda_bn_bwd(int B, int C, int HW, const float *x, const float *gamma,
                     const float *save, const float *dy, float *dx, float *dgamma,
                     float *dbeta, int accumulate)
{
    if (C <= 0)
        return;
    const float nf = (float)((double)B * (double)HW);
    const int b = B < 0 ? 0 : B, hw = HW < 0 ? 0 : HW;
    const size_t n = (size_t)b * (size_t)hw;
    const int S = bn_slices(n);
    const unsigned grid = (unsigned)C * (unsigned)S;
    double *part = (double *)cdp_cuda_scratch_get(&bn_part, 2 * (size_t)grid * sizeof(double),
                                                  "cudaMalloc(BatchNorm partial sums)");
    LAUNCH_I(k_bn_bwd_part, n, grid, RED_THREADS, b, C, hw, S, x, save, dy, part);
    LAUNCH_I(k_bn_bwd_dx, n, grid, RED_THREADS, b, C, hw, S, nf, x, gamma, save, part, dy, dx,
             dgamma, dbeta, accumulate);
}

void cdp_cuda_bn_running_update(int C, int N, double n, const double *stats, size_t stride,
                                const float *rmean_in, const float *rvar_in, float m,
                                float *rmean_out, float *rvar_out)
{
    if (C <= 0 || N <= 0)
        return;
    k_bn_running<<<grid_for((size_t)C), CDP_THREADS, 0, cdp_cuda_g.stream>>>(
        C, N, n, stats, stride, rmean_in, rvar_in, m, rmean_out, rvar_out);
    CDP_CUDA_LAUNCHED("k_bn_running");
}

/* ---------------------------------------------------------------- doubles as floats */

/* 22, 22 and 20 bits of each double as integer-valued floats (exact: < 2^24) */
__global__ static void k_f64_pack(size_t n, const double *__restrict__ src,
                                  float *__restrict__ dst)
{
    GRID_STRIDE(i, n) {
        unsigned long long u = (unsigned long long)__double_as_longlong(src[i]);
        dst[3 * i] = __uint2float_rn((unsigned)(u & 0x3FFFFFull));
        dst[3 * i + 1] = __uint2float_rn((unsigned)((u >> 22) & 0x3FFFFFull));
        dst[3 * i + 2] = __uint2float_rn((unsigned)(u >> 44));
    }
}

/* and back: each float truncated to an unsigned integer, as the CPU's cast */
__global__ static void k_f64_unpack(size_t n, const float *__restrict__ src,
                                    double *__restrict__ dst)
{
    GRID_STRIDE(i, n) {
        unsigned long long u = (unsigned long long)__float2uint_rz(src[3 * i])
                               | (unsigned long long)__float2uint_rz(src[3 * i + 1]) << 22
                               | (unsigned long long)__float2uint_rz(src[3 * i + 2]) << 44;
        dst[i] = __longlong_as_double((long long)u);
    }
}

void cdp_cuda_f64_pack(size_t n, const double *src, float *dst)
{
    if (!n)
        return;
    k_f64_pack<<<grid_for(n), CDP_THREADS, 0, cdp_cuda_g.stream>>>(n, src, dst);
    CDP_CUDA_LAUNCHED("k_f64_pack");
}

void cdp_cuda_f64_unpack(size_t n, const float *src, double *dst)
{
    if (!n)
        return;
    k_f64_unpack<<<grid_for(n), CDP_THREADS, 0, cdp_cuda_g.stream>>>(n, src, dst);
    CDP_CUDA_LAUNCHED("k_f64_unpack");
}

/* ---------------------------------------------------------------- pooling */

/* One thread per output: the window read in order (row, then column), the
 * first maximum kept, a NaN winning at once; positions outside the plane
 * skipped; an empty window gives -inf and idx -1 (cdp_cpu_maxpool_fwd). */
__global__ static void k_maxpool_fwd(size_t n, int H, int W, int k, int stride, int pad, int OH,
                                     int OW, const float *__restrict__ x, float *__restrict__ y,
                                     int32_t *__restrict__ idx)
{
    const size_t HWo = (size_t)OH * (size_t)OW, HWi = (size_t)H * (size_t)W;
    GRID_STRIDE(i, n) {
        size_t pl = i / HWo, q = i % HWo;
        int oh = (int)(q / (size_t)OW), ow = (int)(q % (size_t)OW);
        const float *xp = x + pl * HWi;
        int h0 = oh * stride - pad, h1 = h0 + k;
        h0 = h0 < 0 ? 0 : h0;
        h1 = h1 > H ? H : h1;
        int w0 = ow * stride - pad, w1 = w0 + k;
        w0 = w0 < 0 ? 0 : w0;
        w1 = w1 > W ? W : w1;
        float best = -INFINITY;
        int32_t at = h0 < h1 && w0 < w1 ? (int32_t)(h0 * W + w0) : -1;
        bool stop = false;
        for (int ih = h0; ih < h1 && !stop; ih++)
            for (int iw = w0; iw < w1; iw++) {
                float v = xp[(size_t)ih * (size_t)W + (size_t)iw];
                if (v > best || isnan(v)) {
                    best = v;
                    at = (int32_t)(ih * W + iw);
                    if (isnan(v)) {
                        stop = true;
                        break;
                    }
                }
            }
        y[i] = best;
        idx[i] = at;
    }
}

/* One thread per plane (dx cleared before): dx[idx] += dy in output order,
 * serially, as the CPU (no atomics; the plane's sums in the CPU's order). */
__global__ static void k_maxpool_bwd(size_t planes, size_t HWi, size_t HWo,
                                     const int32_t *__restrict__ idx,
                                     const float *__restrict__ dy, float *__restrict__ dx)
{
    GRID_STRIDE(pl, planes) {
        float *dp = dx + pl * HWi;
        const float *gp = dy + pl * HWo;
        const int32_t *ip = idx + pl * HWo;
        for (size_t q = 0; q < HWo; q++) {
            int32_t a = ip[q];
            if (a >= 0)
                dp[a] = __fadd_rn(dp[a], gp[q]);
        }
    }
}

/* One thread per plane: the sum in float in order p = 0..HW-1, times inv */
__global__ static void k_avgpool_fwd(size_t planes, int HW, float inv,
                                     const float *__restrict__ x, float *__restrict__ y)
{
    GRID_STRIDE(pl, planes) {
        const float *xp = x + pl * (size_t)HW;
        float s = 0.0f;
        for (int p = 0; p < HW; p++)
            s = __fadd_rn(s, xp[p]);
        y[pl] = __fmul_rn(s, inv);
    }
}

__global__ static void k_avgpool_bwd(size_t n, int HW, float inv, const float *__restrict__ dy,
                                     float *__restrict__ dx)
{
    GRID_STRIDE(i, n)
        dx[i] = __fmul_rn(dy[i / (size_t)HW], inv);
}

/* adaptive pooling's window along one axis (the CPU kernel's) */
__device__ static void aa_window(int i, int o, int n, int *lo, int *hi)
{
    *lo = (int)(((long long)i * n) / o);
    *hi = (int)(((long long)(i + 1) * n + o - 1) / o);
}

/* One thread per output: its window summed in float in row-major order, as
 * the CPU kernel, so both give the same bits */
__global__ static void k_adaptive_avgpool_fwd(size_t n, int H, int W, int OH, int OW,
                                              const float *__restrict__ x, float *__restrict__ y)
{
    GRID_STRIDE(q, n) {
        const size_t pl = q / ((size_t)OH * (size_t)OW);
        const int i = (int)(q / (size_t)OW % (size_t)OH), j = (int)(q % (size_t)OW);
        int r0, r1, c0, c1;
        aa_window(i, OH, H, &r0, &r1);
        aa_window(j, OW, W, &c0, &c1);
        const float *xp = x + pl * (size_t)H * (size_t)W;
        float s = 0.0f;
        for (int r = r0; r < r1; r++)
            for (int c = c0; c < c1; c++)
                s = __fadd_rn(s, xp[(size_t)r * (size_t)W + (size_t)c]);
        y[q] = __fmul_rn(s, __fdiv_rn(1.0f, (float)((r1 - r0) * (c1 - c0))));
    }
}

/* One thread per input plane: dx = 0, then the outputs' shares added in
 * row-major output order (windows overlap), as the CPU kernel */
__global__ static void k_adaptive_avgpool_bwd(size_t planes, int H, int W, int OH, int OW,
                                              const float *__restrict__ dy, float *__restrict__ dx)
{
    GRID_STRIDE(pl, planes) {
        float *dp = dx + pl * (size_t)H * (size_t)W;
        const float *gp = dy + pl * (size_t)OH * (size_t)OW;
        for (size_t p = 0; p < (size_t)H * (size_t)W; p++)
            dp[p] = 0.0f;
        for (int i = 0; i < OH; i++) {
            int r0, r1;
            aa_window(i, OH, H, &r0, &r1);
            for (int j = 0; j < OW; j++) {
                int c0, c1;
                aa_window(j, OW, W, &c0, &c1);
                const float v = __fmul_rn(gp[(size_t)i * (size_t)OW + (size_t)j],
                                          __fdiv_rn(1.0f, (float)((r1 - r0) * (c1 - c0))));
                for (int r = r0; r < r1; r++)
                    for (int c = c0; c < c1; c++) {
                        float *d = dp + (size_t)r * (size_t)W + (size_t)c;
                        *d = __fadd_rn(*d, v);
                    }
            }
        }
    }
}

/* y = a + b; y may alias a or b (each element read, then written) */
__global__ static void k_add3(size_t n, const float *a, const float *b, float *y)
{
    GRID_STRIDE(i, n)
        y[i] = __fadd_rn(a[i], b[i]);
}

void cdp_cuda_maxpool_fwd(int B, int C, int H, int W, int k, int stride, int pad, int OH,
                          int OW, const float *x, float *y, int32_t *idx)
{
    if (B <= 0 || C <= 0 || OH <= 0 || OW <= 0)
        return;
    size_t n = (size_t)B * (size_t)C * (size_t)OH * (size_t)OW;
    k_maxpool_fwd<<<grid_for(n), CDP_THREADS, 0, cdp_cuda_g.stream>>>(n, H, W, k, stride, pad,
                                                                     OH, OW, x, y, idx);
    CDP_CUDA_LAUNCHED("k_maxpool_fwd");
}

void cdp_cuda_maxpool_bwd(int B, int C, int H, int W, int OH, int OW, const int32_t *idx,
                          const float *dy, float *dx)
{
    if (B <= 0 || C <= 0 || H <= 0 || W <= 0)
        return;
    const size_t planes = (size_t)B * (size_t)C, HWi = (size_t)H * (size_t)W;
    const size_t HWo = (size_t)(OH > 0 ? OH : 0) * (size_t)(OW > 0 ? OW : 0);
    CDP_CUDA_CHECK(cudaMemsetAsync(dx, 0, planes * HWi * sizeof(float), cdp_cuda_g.stream));
    if (!HWo)
        return;
    k_maxpool_bwd<<<grid_for(planes), CDP_THREADS, 0, cdp_cuda_g.stream>>>(planes, HWi, HWo, idx,
                                                                          dy, dx);
    CDP_CUDA_LAUNCHED("k_maxpool_bwd");
}

void cdp_cuda_avgpool_fwd(int B, int C, int HW, const float *x, float *y)
{
    if (B <= 0 || C <= 0)
        return;
    const size_t planes = (size_t)B * (size_t)C;
    const float inv = 1.0f / (float)HW;
    k_avgpool_fwd<<<grid_for(planes), CDP_THREADS, 0, cdp_cuda_g.stream>>>(
        planes, HW < 0 ? 0 : HW, inv, x, y);
    CDP_CUDA_LAUNCHED("k_avgpool_fwd");
}

void cdp_cuda_avgpool_bwd(int B, int C, int HW, const float *dy, float *dx)
{
    if (B <= 0 || C <= 0 || HW <= 0)
        return;
    const size_t n = (size_t)B * (size_t)C * (size_t)HW;
    const float inv = 1.0f / (float)HW;
    k_avgpool_bwd<<<grid_for(n), CDP_THREADS, 0, cdp_cuda_g.stream>>>(n, HW, inv, dy, dx);
    CDP_CUDA_LAUNCHED("k_avgpool_bwd");
}

void cdp_cuda_adaptive_avgpool_fwd(int B, int C, int H, int W, int OH, int OW, const float *x,
                                   float *y)
{
    if (B <= 0 || C <= 0 || OH <= 0 || OW <= 0)
        return;
    const size_t n = (size_t)B * (size_t)C * (size_t)OH * (size_t)OW;
    k_adaptive_avgpool_fwd<<<grid_for(n), CDP_THREADS, 0, cdp_cuda_g.stream>>>(n, H, W, OH, OW,
                                                                              x, y);
    CDP_CUDA_LAUNCHED("k_adaptive_avgpool_fwd");
}

void cdp_cuda_adaptive_avgpool_bwd(int B, int C, int H, int W, int OH, int OW, const float *dy,
                                   float *dx)
{
    if (B <= 0 || C <= 0 || H <= 0 || W <= 0)
        return;
    const size_t planes = (size_t)B * (size_t)C;
    k_adaptive_avgpool_bwd<<<grid_for(planes), CDP_THREADS, 0, cdp_cuda_g.stream>>>(
        planes, H, W, OH > 0 ? OH : 0, OW > 0 ? OW : 0, dy, dx);
    CDP_CUDA_LAUNCHED("k_adaptive_avgpool_bwd");
}

void cdp_cuda_add3(size_t n, const float *a, const float *b, float *y)
{
    if (!n)
        return;
    k_add3<<<grid_for(n), CDP_THREADS, 0, cdp_cuda_g.stream>>>(n, a, b, y);
    CDP_CUDA_LAUNCHED("k_add3");
}
