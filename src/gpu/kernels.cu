/* The CUDA backend's kernels: cuBLAS SGEMM for the Linear layers, small
 * CUDA kernels for the rest.
 *
 * Determinism: everything runs on one stream; no kernel uses atomics or
 * timing-dependent reduction orders.  Reductions (bias gradient, softmax
 * sums, loss statistics) are done in a fixed order by a fixed thread layout,
 * so the same call on the same inputs gives the same bits every time.
 * cuBLAS SGEMM is bit-reproducible for a given toolkit, GPU architecture and
 * SM count on a single stream (atomics disabled, default FP32 math: no TF32).
 *
 * Element-wise arithmetic uses the explicitly rounded intrinsics (__fmul_rn,
 * __fadd_rn, __fdiv_rn) where the CPU backend's formula has several
 * operations, so that nvcc does not contract them into FMAs and the results
 * match the CPU (and PyTorch's SGD) formula operation for operation. */
#include <cfloat>
#include <climits>
#include <cmath>

#include "cuda_internal.h"
extern "C" {
#include "util/rng.h"
}

/* ---------------------------------------------------------------- Linear */

/* y[r, j] = b[j] for every row r (then SGEMM accumulates with beta = 1). */
template <typename I>
__global__ static void k_bias_rows(I n, int out, const float *__restrict__ b,
                                   float *__restrict__ y)
{
    GRID_STRIDE_I(I, i, n)
        y[i] = b[i % (I)out];
}

void cdp_cuda_relu_fwd(size_t n, float *y);
void cdp_cuda_relu_bwd(size_t n, const float *y, float *dy);

void cdp_cuda_linear_fwd(int B, int in, int out, const float *x, const float *W,
                         const float *b, float *y, int relu)
{
    if (B <= 0 || out <= 0)
        return;
    size_t n = (size_t)B * (size_t)out;
    float beta = 0.0f;
    if (b) {
        LAUNCH_I(k_bias_rows, n, grid_for(n), CDP_THREADS, n, out, b, y);
        beta = 1.0f;
    }
    if (in <= 0) {
        if (!b)
            CDP_CUDA_CHECK(cudaMemsetAsync(y, 0, n * sizeof(float), cdp_cuda_g.stream));
        else if (relu)
            cdp_cuda_relu_fwd(n, y);
        return;
    }
    /* Row-major y[B,out] = x[B,in] W[out,in]^T is, read column-major,
     * y^T[out,B] = W^T^T x^T: C(out x B) = op_T(W as in x out) * x^T(in x B). */
    const float one = 1.0f;
    CDP_CUBLAS_CHECK(cublasSgemm(cdp_cuda_g.blas, CUBLAS_OP_T, CUBLAS_OP_N,
                                 out, B, in, &one, W, in, x, in, &beta, y, out));
    if (relu)
        cdp_cuda_relu_fwd(n, y);
}

/* --precision bf16's Linear kernels: the float32 ones on the rounded
 * operands (the CPU backend's bfloat16 products are its own) */
void cdp_cuda_linear_fwd_bf16(int B, int in, int out, const float *x, const float *W,
                              const float *b, float *y, int relu)
{
    cdp_cuda_linear_fwd(B, in, out, x, W, b, y, relu);
}

/* cuBLAS with beta = 1 promises no particular bits against a separate
 * product and add (its kernel, split and fused multiply-adds are its own
 * choice), so no shape is declared exact: the executor keeps its scratch
 * path on this backend. */
int cdp_cuda_accumulate_exact(int B, int in, int out)
{
    (void)B;
    (void)in;
    (void)out;
    return 0;
}

/* With accumulate, dW += dy^T x (cuBLAS beta = 1, whose bits need not be
 * those of a separate product and add: cdp_cuda_accumulate_exact says so,
 * so the executor does not rely on it) and db += column sums
 * (cdp_cuda_colsum). */
void cdp_cuda_linear_bwd(int B, int in, int out, const float *x, const float *W,
                         const float *dy, float *dx, float *dW, float *db, int relu_dx,
                         int accumulate)
{
    if (out <= 0)
        return;
    const float one = 1.0f, zero = 0.0f;
    if (B <= 0) {
        if (accumulate)
            return;
        /* No rows: the gradients are zero (they are overwritten, not summed). */
        if (in > 0 && dW)
            CDP_CUDA_CHECK(cudaMemsetAsync(dW, 0, (size_t)out * in * sizeof(float),
                                           cdp_cuda_g.stream));
        if (db)
            CDP_CUDA_CHECK(cudaMemsetAsync(db, 0, (size_t)out * sizeof(float),
                                           cdp_cuda_g.stream));
        return;
    }
    if (in > 0 && dW) {
        /* Row-major dW[out,in] = dy^T x, column-major dW^T[in,out] = x^T dy:
         * C(in x out) = x^T(in x B, ld in) * op_T(dy^T as out x B, ld out). */
        CDP_CUBLAS_CHECK(cublasSgemm(cdp_cuda_g.blas, CUBLAS_OP_N, CUBLAS_OP_T,
                                     in, out, B, &one, x, in, dy, out, accumulate ? &one : &zero,
                                     dW, in));
    }
    if (db)
        cdp_cuda_colsum(B, out, (size_t)out, dy, db, accumulate);
    if (dx && in > 0) {
        /* Row-major dx[B,in] = dy[B,out] W[out,in], column-major
         * dx^T(in x B) = W^T(in x out, ld in) * dy^T(out x B, ld out). */
        CDP_CUBLAS_CHECK(cublasSgemm(cdp_cuda_g.blas, CUBLAS_OP_N, CUBLAS_OP_N,
                                     in, B, out, &one, W, in, dy, out, &zero, dx, in));
        if (relu_dx)
            cdp_cuda_relu_bwd((size_t)B * (size_t)in, x, dx);
    }
}

/* ---------------------------------------------------------------- element-wise */

__global__ static void k_relu_fwd(size_t n, float *y)
{
    GRID_STRIDE(i, n) {
        float v = y[i];
        y[i] = v > 0.0f ? v : 0.0f;
    }
}

__global__ static void k_relu_bwd(size_t n, const float *__restrict__ y,
                                  float *__restrict__ dy)
{
    GRID_STRIDE(i, n)
        if (!(y[i] > 0.0f))
            dy[i] = 0.0f;
}

__global__ static void k_relu6_fwd(size_t n, float *y)
{
    GRID_STRIDE(i, n) {
        float v = y[i];
        y[i] = v < 0.0f ? 0.0f : v > 6.0f ? 6.0f : v;
    }
}

__global__ static void k_relu6_bwd(size_t n, const float *__restrict__ y,
                                   float *__restrict__ dy)
{
    GRID_STRIDE(i, n)
        if (!(y[i] > 0.0f && y[i] < 6.0f))
            dy[i] = 0.0f;
}

/* cdp_mix64 (src/util/rng.c), on the device */
__device__ static uint64_t d_mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

__global__ static void k_dropout(size_t n, uint64_t key, uint64_t index0, uint32_t keep_from,
                                 float scale, const float *x, float *y)
{
    GRID_STRIDE(i, n) {
        uint32_t r = (uint32_t)(d_mix64(key ^ (index0 + i)) >> 40);
        y[i] = __fmul_rn(x[i], r >= keep_from ? scale : 0.0f);
    }
}

__global__ static void k_add(size_t n, float *__restrict__ acc, const float *__restrict__ x)
{
    GRID_STRIDE(i, n)
        acc[i] = __fadd_rn(acc[i], x[i]);
}

__global__ static void k_scale(size_t n, float *x, float a)
{
    GRID_STRIDE(i, n)
        x[i] = __fmul_rn(x[i], a);
}

/* util/bf16.h's rounding, on the bits */
__global__ static void k_round_bf16(size_t n, const float *x, float *y)
{
    GRID_STRIDE(i, n) {
        unsigned u = __float_as_uint(x[i]);
        if ((u & 0x7fffffffu) > 0x7f800000u)
            u = (u | 0x00400000u) & 0xffff0000u;
        else
            u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
        y[i] = __uint_as_float(u);
    }
}

/* torch.optim.SGD (no dampening, no Nesterov) on the gradient g * gscale:
 *   d = g*gscale + wd*theta; buf = first ? d : mu*buf + d; theta_out = theta_in - lr*buf
 * theta_out may alias theta_in or g (each element is read before it is written). */
__global__ static void k_sgd(size_t n, const float *theta_in, float *theta_out,
                             float *g, float gscale, float *__restrict__ buf,
                             float lr, float mu, float wd, int first, int zero_g)
{
    GRID_STRIDE(i, n) {
        float t = theta_in[i];
        float gs = __fmul_rn(g[i], gscale);
        if (zero_g)
            g[i] = 0.0f;
        float d = __fadd_rn(gs, __fmul_rn(wd, t));   /* also for wd = 0, as the CPU */
        float b;
        if (!buf)
            b = d;
        else {
            b = first ? d : __fadd_rn(__fmul_rn(mu, buf[i]), d);
            buf[i] = b;
        }
        theta_out[i] = __fsub_rn(t, __fmul_rn(lr, b));
    }
}

/* torch.optim.AdamW (no amsgrad) on g * gscale, each operation rounded as
 * the CPU's (backend.h adamw); theta_out may alias theta_in or g. */
__global__ static void k_adamw(size_t n, const float *theta_in, float *theta_out, float *g,
                               float gscale, float *__restrict__ m, float *__restrict__ v,
                               cdp_adamw_coef a, int first, int zero_g)
{
    GRID_STRIDE(i, n) {
        float th = __fmul_rn(theta_in[i], a.decay);
        float gs = __fmul_rn(g[i], gscale);
        if (zero_g)
            g[i] = 0.0f;
        float m0 = first ? 0.0f : m[i], v0 = first ? 0.0f : v[i];
        float mk = __fadd_rn(__fmul_rn(a.beta1, m0), __fmul_rn(a.one_minus_beta1, gs));
        float vk = __fadd_rn(__fmul_rn(a.beta2, v0), __fmul_rn(__fmul_rn(a.one_minus_beta2, gs), gs));
        m[i] = mk;
        v[i] = vk;
        float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(vk), a.bc2_sqrt), a.eps);
        theta_out[i] = __fsub_rn(th, __fmul_rn(a.step_size, __fdiv_rn(mk, denom)));
    }
}

__global__ static void k_pixels(size_t n, const uint8_t *__restrict__ p, float *__restrict__ x)
{
    GRID_STRIDE(i, n)
        x[i] = __fdiv_rn((float)p[i], 255.0f);
}

/* x = (p / 255 - mean_c) / std_c, c = (i / HW) % C, each step rounded as
 * the CPU's float arithmetic (no contraction, IEEE division). */
__global__ static void k_pixels_norm(size_t n, int C, int HW, const uint8_t *__restrict__ p,
                                     const float *__restrict__ norm, float *__restrict__ x)
{
    GRID_STRIDE(i, n) {
        int c = (int)((i / (size_t)HW) % (size_t)C);
        float v = __fdiv_rn((float)p[i], 255.0f);
        x[i] = __fdiv_rn(__fsub_rn(v, norm[c]), norm[C + c]);
    }
}

void cdp_cuda_relu_fwd(size_t n, float *y)
{
    if (!n)
        return;
    k_relu_fwd<<<grid_for(n), CDP_THREADS, 0, cdp_cuda_g.stream>>>(n, y);
    CDP_CUDA_LAUNCHED("k_relu_fwd");
}

void cdp_cuda_relu_bwd(size_t n, const float *y, float *dy)
{
    if (!n)
        return;
    k_relu_bwd<<<grid_for(n), CDP_THREADS, 0, cdp_cuda_g.stream>>>(n, y, dy);
    CDP_CUDA_LAUNCHED("k_relu_bwd");
}

void cdp_cuda_relu6_fwd(size_t n, float *y)
{
    if (!n)
        return;
    k_relu6_fwd<<<grid_for(n), CDP_THREADS, 0, cdp_cuda_g.stream>>>(n, y);
    CDP_CUDA_LAUNCHED("k_relu6_fwd");
}

void cdp_cuda_relu6_bwd(size_t n, const float *y, float *dy)
{
    if (!n)
        return;
    k_relu6_bwd<<<grid_for(n), CDP_THREADS, 0, cdp_cuda_g.stream>>>(n, y, dy);
    CDP_CUDA_LAUNCHED("k_relu6_bwd");
}

void cdp_cuda_dropout(size_t n, uint64_t seed, uint64_t stream, uint64_t index0,
                      uint32_t keep_from, float scale, const float *x, float *y)
{
    if (!n)
        return;
    /* cdp_rand_u64's first two rounds, once on the host */
    const uint64_t key = cdp_mix64(cdp_mix64(seed) ^ stream);
    k_dropout<<<grid_for(n), CDP_THREADS, 0, cdp_cuda_g.stream>>>(n, key, index0, keep_from,
                                                                  scale, x, y);
    CDP_CUDA_LAUNCHED("k_dropout");
}

void cdp_cuda_add(size_t n, float *acc, const float *x)
{
    if (!n)
        return;
    k_add<<<grid_for(n), CDP_THREADS, 0, cdp_cuda_g.stream>>>(n, acc, x);
    CDP_CUDA_LAUNCHED("k_add");
}

void cdp_cuda_scale(size_t n, float *x, float a)
{
    if (!n)
        return;
    k_scale<<<grid_for(n), CDP_THREADS, 0, cdp_cuda_g.stream>>>(n, x, a);
    CDP_CUDA_LAUNCHED("k_scale");
}

__global__ static void k_nonfinite_init(unsigned long long *out)
{
    out[0] = 0;
    out[1] = ~0ull;
}

/* out[0] the worst code, out[1] the lowest index mod m: atomicMax and
 * atomicMin, whose results do not depend on the order the threads run */
__global__ static void k_nonfinite(size_t n, const float *x, size_t m, unsigned long long *out)
{
    GRID_STRIDE(i, n) {
        const float v = x[i];
        if (!isfinite(v)) {
            atomicMax(&out[0], isnan(v) ? 2ull : 1ull);
            atomicMin(&out[1], (unsigned long long)(i % m));
        }
    }
}

void cdp_cuda_nonfinite(size_t n, const float *x, size_t m, uint64_t *out)
{
    unsigned long long *o = (unsigned long long *)out;
    k_nonfinite_init<<<1, 1, 0, cdp_cuda_g.stream>>>(o);
    CDP_CUDA_LAUNCHED("k_nonfinite_init");
    if (!n)
        return;
    k_nonfinite<<<grid_for(n), CDP_THREADS, 0, cdp_cuda_g.stream>>>(n, x, m, o);
    CDP_CUDA_LAUNCHED("k_nonfinite");
}

__global__ static void k_bf16_pack(size_t n, const float *x, uint16_t *y)
{
    GRID_STRIDE(i, n) {
        unsigned u = __float_as_uint(x[i]);
        if ((u & 0x7fffffffu) > 0x7f800000u)
            u = u | 0x00400000u;
        else
            u = u + 0x7fffu + ((u >> 16) & 1u);
        y[i] = (uint16_t)(u >> 16);
    }
}

__global__ static void k_bf16_unpack(size_t n, const uint16_t *x, float *y)
{
    GRID_STRIDE(i, n)
        y[i] = __uint_as_float((unsigned)x[i] << 16);
}

void cdp_cuda_bf16_pack(size_t n, const float *x, uint16_t *y)
{
    if (!n)
        return;
    k_bf16_pack<<<grid_for(n), CDP_THREADS, 0, cdp_cuda_g.stream>>>(n, x, y);
    CDP_CUDA_LAUNCHED("k_bf16_pack");
}

void cdp_cuda_bf16_unpack(size_t n, const uint16_t *x, float *y)
{
    if (!n)
        return;
    k_bf16_unpack<<<grid_for(n), CDP_THREADS, 0, cdp_cuda_g.stream>>>(n, x, y);
    CDP_CUDA_LAUNCHED("k_bf16_unpack");
}

void cdp_cuda_round_bf16(size_t n, const float *x, float *y)
{
    if (!n)
        return;
    k_round_bf16<<<grid_for(n), CDP_THREADS, 0, cdp_cuda_g.stream>>>(n, x, y);
    CDP_CUDA_LAUNCHED("k_round_bf16");
}

void cdp_cuda_sgd(size_t n, const float *theta_in, float *theta_out, float *g, float gscale,
                  float *buf, float lr, float mu, float wd, int first, int zero_g)
{
    if (!n)
        return;
    k_sgd<<<grid_for(n), CDP_THREADS, 0, cdp_cuda_g.stream>>>(n, theta_in, theta_out, g,
                                                             gscale, buf, lr, mu, wd, first, zero_g);
    CDP_CUDA_LAUNCHED("k_sgd");
}

void cdp_cuda_adamw(size_t n, const float *theta_in, float *theta_out, float *g, float gscale,
                    float *m, float *v, const cdp_adamw_coef *c, int first, int zero_g)
{
    if (!n)
        return;
    k_adamw<<<grid_for(n), CDP_THREADS, 0, cdp_cuda_g.stream>>>(n, theta_in, theta_out, g, gscale,
                                                               m, v, *c, first, zero_g);
    CDP_CUDA_LAUNCHED("k_adamw");
}

/* ---------------------------------------------------------------- scratch */

void *cdp_cuda_scratch_get(cdp_cuda_scratch *s, size_t bytes, const char *what)
{
    if (bytes <= s->bytes)
        return s->p;
    size_t want = s->bytes ? s->bytes : 4096;
    while (want < bytes)
        want *= 2;
    if (s->p) {
        CDP_CUDA_CHECK(cudaStreamSynchronize(cdp_cuda_g.stream));
        CDP_CUDA_CHECK(cudaFree(s->p));
        s->p = nullptr;
        s->bytes = 0;
    }
    cudaError_t e = cudaMalloc(&s->p, want);
    if (e != cudaSuccess)
        cdp_cuda_fail(what, cudaGetErrorString(e), __FILE__, __LINE__);
    s->bytes = want;
    return s->p;
}

static cdp_cuda_scratch pixel_stage, norm_stage, label_stage, xent_rows;

void cdp_cuda_pixels_to_input(int B, int C, int HW, const uint8_t *host_pixels,
                              const float *norm, float *x)
{
    const size_t n = (size_t)B * (size_t)C * (size_t)HW;
    if (!n)
        return;
    uint8_t *d = (uint8_t *)cdp_cuda_scratch_get(&pixel_stage, n, "cudaMalloc(pixel staging)");
    cdp_cuda_h2d(d, host_pixels, n);
    if (!norm) {
        k_pixels<<<grid_for(n), CDP_THREADS, 0, cdp_cuda_g.stream>>>(n, d, x);
        CDP_CUDA_LAUNCHED("k_pixels");
        return;
    }
    float *dn = (float *)cdp_cuda_scratch_get(&norm_stage, 2 * (size_t)C * sizeof(float),
                                     "cudaMalloc(normalisation staging)");
    cdp_cuda_h2d(dn, norm, 2 * (size_t)C * sizeof(float));
    k_pixels_norm<<<grid_for(n), CDP_THREADS, 0, cdp_cuda_g.stream>>>(n, C, HW, d, dn, x);
    CDP_CUDA_LAUNCHED("k_pixels_norm");
}

/* ---------------------------------------------------------------- cross-entropy */

#define XENT_WARPS 8 /* rows per block: one warp per row */

/* One warp per row.  loss_r = log(sum_j exp(x_j - m)) - (x_label - m) with
 * m = max_j x_j; dlogits = (softmax - onehot) * invB written over the row;
 * ok_r = 1 when the first index of the maximum equals the label. */
__global__ static void k_xent_rows(int B, int C, float invB, float *logits,
                                   const int32_t *__restrict__ labels,
                                   float *__restrict__ rowloss, int *__restrict__ rowok)
{
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    int r = blockIdx.x * XENT_WARPS + warp;
    if (r >= B)
        return; /* whole warps leave together: B rows map to whole warps */
    float *x = logits + (size_t)r * C;
    int label = labels[r];
    bool valid = label >= 0 && label < C;

    /* max and first argmax */
    float m = -INFINITY;
    int am = INT_MAX;
    for (int j = lane; j < C; j += 32) {
        float v = x[j];
        if (am == INT_MAX || v > m) { /* strict: keeps the first maximum */
            m = v;
            am = j;
        }
    }
    for (int off = 16; off > 0; off >>= 1) {
        float om = __shfl_xor_sync(0xffffffffu, m, off);
        int oa = __shfl_xor_sync(0xffffffffu, am, off);
        if (oa != INT_MAX && (am == INT_MAX || om > m || (om == m && oa < am))) {
            m = om;
            am = oa;
        }
    }
    float xl = valid ? x[label] : 0.0f;

    /* sum of exp(x - m): lane-strided partial sums in index order, then a
     * fixed butterfly (the same tree on every call) */
    float s = 0.0f;
    for (int j = lane; j < C; j += 32)
        s = __fadd_rn(s, expf(__fsub_rn(x[j], m)));
    for (int off = 16; off > 0; off >>= 1)
        s = __fadd_rn(s, __shfl_xor_sync(0xffffffffu, s, off));

    __syncwarp(); /* every lane has read the row before any lane rewrites it */
    for (int j = lane; j < C; j += 32) {
        float p = __fdiv_rn(expf(__fsub_rn(x[j], m)), s);
        if (j == label)
            p = __fsub_rn(p, 1.0f);
        x[j] = __fmul_rn(p, invB);
    }
    if (lane == 0) {
        rowloss[r] = valid ? __fsub_rn(logf(s), __fsub_rn(xl, m)) : NAN;
        rowok[r] = valid && am == label;
    }
}

#define XENT_SUM_THREADS 256

/* One block: stats[0] += sum of row losses, stats[1] += correct rows, in a
 * fixed order (thread-strided partial sums in double, then a fixed tree). */
__global__ static void k_xent_stats(int B, const float *__restrict__ rowloss,
                                    const int *__restrict__ rowok, double *stats)
{
    __shared__ double sl[XENT_SUM_THREADS];
    __shared__ long long sc[XENT_SUM_THREADS];
    double l = 0.0;
    long long c = 0;
    for (int r = threadIdx.x; r < B; r += XENT_SUM_THREADS) {
        l += (double)rowloss[r];
        c += rowok[r];
    }
    sl[threadIdx.x] = l;
    sc[threadIdx.x] = c;
    __syncthreads();
    for (int h = XENT_SUM_THREADS / 2; h > 0; h >>= 1) {
        if ((int)threadIdx.x < h) {
            sl[threadIdx.x] += sl[threadIdx.x + h];
            sc[threadIdx.x] += sc[threadIdx.x + h];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        stats[0] += sl[0];
        stats[1] += (double)sc[0];
    }
}

void cdp_cuda_xent(int B, int C, float *logits, const int32_t *labels, double *stats)
{
    if (B <= 0 || C <= 0)
        return;
    const int32_t *dlabels = labels;
    if (!cdp_cuda_is_device_ptr(labels)) {
        /* labels handed over from the host: stage them */
        int32_t *d = (int32_t *)cdp_cuda_scratch_get(&label_stage, (size_t)B * sizeof(int32_t),
                                            "cudaMalloc(label staging)");
        cdp_cuda_h2d(d, labels, (size_t)B * sizeof(int32_t));
        dlabels = d;
    }
    size_t rows_bytes = (size_t)B * (sizeof(float) + sizeof(int));
    float *rowloss = (float *)cdp_cuda_scratch_get(&xent_rows, rows_bytes, "cudaMalloc(xent rows)");
    int *rowok = (int *)(rowloss + B);
    unsigned g = (unsigned)((B + XENT_WARPS - 1) / XENT_WARPS);
    k_xent_rows<<<g, XENT_WARPS * 32, 0, cdp_cuda_g.stream>>>(B, C, 1.0f / (float)B, logits,
                                                             dlabels, rowloss, rowok);
    CDP_CUDA_LAUNCHED("k_xent_rows");
    if (stats) {
        k_xent_stats<<<1, XENT_SUM_THREADS, 0, cdp_cuda_g.stream>>>(B, rowloss, rowok, stats);
        CDP_CUDA_LAUNCHED("k_xent_stats");
    }
}

void cdp_cuda_linear_bwd_bf16(int B, int in, int out, const float *x, const float *W,
                              const float *dy, float *dx, float *dW, float *db, int relu_dx,
                              int accumulate)
{
    cdp_cuda_linear_bwd(B, in, out, x, W, dy, dx, dW, db, relu_dx, accumulate);
}
