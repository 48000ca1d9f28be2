/* The CUDA backend's transformer kernels (tokens [B, T, D] row-major):
 * batched GEMM, row softmax, LayerNorm, exact GELU, the patch/class tokens
 * and the row helpers.  They follow the contract in src/backend/backend.h
 * and the CPU kernels (src/cpu/kernels_tokens.c, whose head lists the
 * details the contract leaves open) operation by operation.
 *
 * Determinism, as in kernels.cu and kernels_image.cu: one stream, no
 * atomics, cuBLAS with atomics off and plain FP32 math.  Reductions run in
 * parallel in orders fixed by thread positions (reduce.cuh): a softmax or
 * LayerNorm row by one warp, a column sum (LayerNorm dgamma/dbeta, sum_rows,
 * the class token's gradient, Linear's bias gradient) by a block of 32
 * columns x 32 row lanes.  Arithmetic uses the explicitly rounded
 * intrinsics (__fadd_rn, __dmul_rn, ...) so that nvcc contracts nothing into
 * an FMA.
 *
 * So these agree with the CPU kernels to rounding: LayerNorm's sums are in
 * double as on the CPU, in another order, and nearly always round to the
 * CPU's float; softmax sums in float in another order (and expf differs
 * from glibc's by the last place); the column sums are carried in double
 * where the CPU adds floats in order.  Moves (the tokens, add_rows,
 * copy_rows) give the CPU's bits.  Until 2026-11-27 every reduction was
 * one thread's, in the CPU's order, for the CPU's bits: vit-b16 then
 * trained at 0.34-0.40x PyTorch's speed on an H200 (768 threads summing
 * 6304 rows each; softmax rows walked by one thread, uncoalesced).
 *
 * Status: the one-thread kernels ran on a GPU (NVIDIA H200) on 2026-11-26:
 * tests/gpu/test_gpu passed and vit-tiny trained within 1.2e-7 of the CPU
 * after 20 steps (bench/RESULTS.md section 6).  The parallel kernels here
 * are written and compiled without a GPU; tests/gpu/test_gpu checks them
 * against the CPU (to rounding) and against themselves (bit for bit) on
 * the next machine with one. */
#include <cmath>

#include "cuda_internal.h"
#include "reduce.cuh"

#define SQRT2 1.41421356237309504880168872420969808
#define INV_SQRT_2PI 0.398942280401432677939946059934

/* ---------------------------------------------------------------- batched GEMM */

/* K = 0: C_b = beta * C_b over the M x N region (+0 where beta is 0, C not
 * read); n = batch*M*N */
__global__ static void k_gemm_beta(size_t n, int M, int N, float beta, float *C, int ldc,
                                   size_t sC)
{
    GRID_STRIDE(i, n) {
        size_t j = i % (size_t)N, t = i / (size_t)N;
        size_t r = t % (size_t)M, b = t / (size_t)M;
        float *c = C + b * sC + r * (size_t)ldc + j;
        *c = beta == 0.0f ? 0.0f : __fmul_rn(beta, *c);
    }
}

void cdp_cuda_gemm_batched(int tA, int tB, int M, int N, int K, float alpha, const float *A,
                           int lda, size_t sA, const float *Bm, int ldb, size_t sB, float beta,
                           float *C, int ldc, size_t sC, int batch)
{
    if (M <= 0 || N <= 0 || batch <= 0)
        return;
    if (K <= 0) {
        if (beta == 1.0f)
            return;
        size_t n = (size_t)batch * (size_t)M * (size_t)N;
        k_gemm_beta<<<grid_for(n), CDP_THREADS, 0, cdp_cuda_g.stream>>>(n, M, N, beta, C, ldc,
                                                                         sC);
        CDP_CUDA_LAUNCHED("k_gemm_beta");
        return;
    }
    /* Row-major C_b (M x N) = op(A_b) op(B_b) is, read column-major,
     * C_b^T (N x M) = op(B_b)^T op(A_b)^T: a row-major B_b read column-major
     * is B_b^T, so op(B_b)^T is B_b as stored (OP_N) when tB = 0 and its
     * transpose (OP_T) when tB = 1; likewise A_b.  cuBLAS does not read C
     * when beta is 0. */
    CDP_CUBLAS_CHECK(cublasSgemmStridedBatched(
        cdp_cuda_g.blas, tB ? CUBLAS_OP_T : CUBLAS_OP_N, tA ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K,
        &alpha, Bm, ldb, (long long)sB, A, lda, (long long)sA, &beta, C, ldc, (long long)sC,
        batch));
}

/* ---------------------------------------------------------------- softmax */

/* one warp a row: mx = the row's max, e_j = expf(x_j - mx), s = the sum of
 * the e_j (lane partials in order, then the butterfly), x_j = e_j / s */
__global__ static void k_softmax_fwd(int R, int N, float *x)
{
    const int lane = threadIdx.x % WARP;
    WARP_ROWS(r, R) {
        float *xr = x + r * (size_t)N;
        float mx = -INFINITY;
        for (int j = lane; j < N; j += WARP)
            if (xr[j] > mx)
                mx = xr[j];
        mx = warp_max_f(mx);
        float s = 0.0f;
        for (int j = lane; j < N; j += WARP) {
            float e = expf(__fsub_rn(xr[j], mx));
            xr[j] = e;
            s = __fadd_rn(s, e);
        }
        s = warp_sum_f(s);
        for (int j = lane; j < N; j += WARP)
            xr[j] = __fdiv_rn(xr[j], s);
    }
}

/* one warp a row: dot = the sum of dp_j * P_j; dp_j = scale * (P_j * (dp_j
 * - dot)) */
__global__ static void k_softmax_bwd(int R, int N, float scale, const float *__restrict__ P,
                                     float *__restrict__ dp)
{
    const int lane = threadIdx.x % WARP;
    WARP_ROWS(r, R) {
        const float *p = P + r * (size_t)N;
        float *d = dp + r * (size_t)N;
        float dot = 0.0f;
        for (int j = lane; j < N; j += WARP)
            dot = __fadd_rn(dot, __fmul_rn(d[j], p[j]));
        dot = warp_sum_f(dot);
        for (int j = lane; j < N; j += WARP)
            d[j] = __fmul_rn(scale, __fmul_rn(p[j], __fsub_rn(d[j], dot)));
    }
}

void cdp_cuda_softmax_fwd(int R, int N, float *x)
{
    if (R <= 0 || N <= 0)
        return;
    k_softmax_fwd<<<grid_for_rows((size_t)R), CDP_THREADS, 0, cdp_cuda_g.stream>>>(R, N, x);
    CDP_CUDA_LAUNCHED("k_softmax_fwd");
}

void cdp_cuda_softmax_bwd(int R, int N, float scale, const float *P, float *dp)
{
    if (R <= 0 || N <= 0)
        return;
    k_softmax_bwd<<<grid_for_rows((size_t)R), CDP_THREADS, 0, cdp_cuda_g.stream>>>(R, N, scale, P,
                                                                             dp);
    CDP_CUDA_LAUNCHED("k_softmax_bwd");
}

/* ---------------------------------------------------------------- LayerNorm */

/* one warp a row, in double: mean = sum / D, var = (sum of (x - mean)^2) /
 * D, rstd = (float)(1 / sqrt(var + eps)); in float y = ((x - (float)mean) *
 * rstd) * gamma + beta */
__global__ static void k_ln_fwd(int R, int D, const float *__restrict__ x,
                                const float *__restrict__ gamma, const float *__restrict__ beta,
                                float eps, float *__restrict__ y, float *__restrict__ save)
{
    const double dd = (double)D;
    const int lane = threadIdx.x % WARP;
    WARP_ROWS(r, R) {
        const float *xr = x + r * (size_t)D;
        float *yr = y + r * (size_t)D;
        double sum = 0.0;
        for (int d = lane; d < D; d += WARP)
            sum = __dadd_rn(sum, (double)xr[d]);
        const double mean = __ddiv_rn(warp_sum_d(sum), dd);
        double m2 = 0.0;
        for (int d = lane; d < D; d += WARP) {
            double t = __dsub_rn((double)xr[d], mean);
            m2 = __dadd_rn(m2, __dmul_rn(t, t));
        }
        m2 = warp_sum_d(m2);
        const float fm = __double2float_rn(mean);
        const float rs = __double2float_rn(
            __ddiv_rn(1.0, __dsqrt_rn(__dadd_rn(__ddiv_rn(m2, dd), (double)eps))));
        for (int d = lane; d < D; d += WARP)
            yr[d] = __fadd_rn(__fmul_rn(__fmul_rn(__fsub_rn(xr[d], fm), rs), gamma[d]), beta[d]);
        if (lane == 0) {
            save[r] = fm;
            save[R + r] = rs;
        }
    }
}

/* a block of COL_W columns x COL_H row lanes (reduce.cuh): dgamma = sum of
 * dy * xhat, dbeta = sum of dy, in double, rounded once; written or added */
__global__ static void __launch_bounds__(COL_W * COL_H)
k_ln_param_grads(int R, int D, const float *__restrict__ x, const float *__restrict__ save,
                 const float *dy, float *__restrict__ dgamma, float *__restrict__ dbeta,
                 int accumulate)
{
    __shared__ double sh[COL_H][COL_W + 1];
    const int c = blockIdx.x * COL_W + threadIdx.x;
    double sg = 0.0, sb = 0.0;
    if (c < D)
        for (int r = threadIdx.y; r < R; r += COL_H) {
            size_t at = (size_t)r * (size_t)D + c;
            float xh = __fmul_rn(__fsub_rn(x[at], save[r]), save[R + r]);
            double g = (double)dy[at];
            sg = __dadd_rn(sg, __dmul_rn(g, (double)xh));
            sb = __dadd_rn(sb, g);
        }
    sg = col_tree(sg, sh);
    sb = col_tree(sb, sh);
    if (threadIdx.y == 0 && c < D) {
        const float fg = __double2float_rn(sg), fb = __double2float_rn(sb);
        dgamma[c] = accumulate ? __fadd_rn(dgamma[c], fg) : fg;
        dbeta[c] = accumulate ? __fadd_rn(dbeta[c], fb) : fb;
    }
}

/* one warp a row: g = (double)dy * gamma, a = sum g, b = sum g * xhat in
 * double; dx = (float)(rstd * ((g - a/D) - xhat * (b/D))).  dx may equal
 * dy: the row's sums are complete (the butterfly) before its first write */
__global__ static void k_ln_dx(int R, int D, const float *__restrict__ x,
                               const float *__restrict__ gamma, const float *__restrict__ save,
                               const float *dy, float *dx)
{
    const double dd = (double)D;
    const int lane = threadIdx.x % WARP;
    WARP_ROWS(r, R) {
        const float mean = save[r], rs = save[R + r];
        const float *xr = x + r * (size_t)D;
        const float *gr = dy + r * (size_t)D;
        float *o = dx + r * (size_t)D;
        double a = 0.0, b = 0.0;
        for (int d = lane; d < D; d += WARP) {
            float xh = __fmul_rn(__fsub_rn(xr[d], mean), rs);
            double g = __dmul_rn((double)gr[d], (double)gamma[d]);
            a = __dadd_rn(a, g);
            b = __dadd_rn(b, __dmul_rn(g, (double)xh));
        }
        a = warp_sum_d(a);
        b = warp_sum_d(b);
        const double ad = __ddiv_rn(a, dd), bd = __ddiv_rn(b, dd), rsd = (double)rs;
        for (int d = lane; d < D; d += WARP) {
            float xh = __fmul_rn(__fsub_rn(xr[d], mean), rs);
            double g = __dmul_rn((double)gr[d], (double)gamma[d]);
            o[d] = __double2float_rn(
                __dmul_rn(rsd, __dsub_rn(__dsub_rn(g, ad), __dmul_rn((double)xh, bd))));
        }
    }
}

void cdp_cuda_ln_fwd(int R, int D, const float *x, const float *gamma, const float *beta,
                     float eps, float *y, float *save)
{
    if (R <= 0 || D <= 0)
        return;
    k_ln_fwd<<<grid_for_rows((size_t)R), CDP_THREADS, 0, cdp_cuda_g.stream>>>(R, D, x, gamma, beta,
                                                                        eps, y, save);
    CDP_CUDA_LAUNCHED("k_ln_fwd");
}

void cdp_cuda_ln_bwd(int R, int D, const float *x, const float *gamma, const float *save,
                     const float *dy, float *dx, float *dgamma, float *dbeta, int accumulate)
{
    if (D <= 0)
        return;
    if (R <= 0) {
        if (!accumulate) {
            CDP_CUDA_CHECK(cudaMemsetAsync(dgamma, 0, (size_t)D * sizeof(float),
                                           cdp_cuda_g.stream));
            CDP_CUDA_CHECK(cudaMemsetAsync(dbeta, 0, (size_t)D * sizeof(float),
                                           cdp_cuda_g.stream));
        }
        return;
    }
    /* the column sums read dy before k_ln_dx (same stream) overwrites it */
    k_ln_param_grads<<<col_grid(D), col_block(), 0, cdp_cuda_g.stream>>>(
        R, D, x, save, dy, dgamma, dbeta, accumulate);
    CDP_CUDA_LAUNCHED("k_ln_param_grads");
    if (!dx)
        return;
    k_ln_dx<<<grid_for_rows((size_t)R), CDP_THREADS, 0, cdp_cuda_g.stream>>>(R, D, x, gamma, save,
                                                                       dy, dx);
    CDP_CUDA_LAUNCHED("k_ln_dx");
}

/* ---------------------------------------------------------------- GELU */

/* y = (float)((x * 0.5) * (1 + erf(x / sqrt 2))) in double; y may equal x */
__global__ static void k_gelu_fwd(size_t n, const float *x, float *y)
{
    GRID_STRIDE(i, n) {
        double v = (double)x[i];
        y[i] = __double2float_rn(
            __dmul_rn(__dmul_rn(v, 0.5), __dadd_rn(1.0, erf(__ddiv_rn(v, SQRT2)))));
    }
}

/* dx = (float)(dy * (Phi + x * phi)), Phi = 0.5 * (1 + erf(x / sqrt 2)),
 * phi = exp(-0.5 * x * x) / sqrt(2 pi), in double; dx may equal dy */
__global__ static void k_gelu_bwd(size_t n, const float *x, const float *dy, float *dx)
{
    GRID_STRIDE(i, n) {
        double v = (double)x[i];
        double Phi = __dmul_rn(0.5, __dadd_rn(1.0, erf(__ddiv_rn(v, SQRT2))));
        double phi = __dmul_rn(exp(__dmul_rn(__dmul_rn(-0.5, v), v)), INV_SQRT_2PI);
        dx[i] = __double2float_rn(__dmul_rn((double)dy[i], __dadd_rn(Phi, __dmul_rn(v, phi))));
    }
}

void cdp_cuda_gelu_fwd(size_t n, const float *x, float *y)
{
    if (!n)
        return;
    k_gelu_fwd<<<grid_for(n), CDP_THREADS, 0, cdp_cuda_g.stream>>>(n, x, y);
    CDP_CUDA_LAUNCHED("k_gelu_fwd");
}

void cdp_cuda_gelu_bwd(size_t n, const float *x, const float *dy, float *dx)
{
    if (!n)
        return;
    k_gelu_bwd<<<grid_for(n), CDP_THREADS, 0, cdp_cuda_g.stream>>>(n, x, dy, dx);
    CDP_CUDA_LAUNCHED("k_gelu_bwd");
}

/* ---------------------------------------------------------------- tokens, rows */

/* y[b, 0, :] = cls, y[b, 1 + i, d] = x[b, d, i]; one thread an output,
 * n = B*T*D, T = np + 1 */
template <typename I>
__global__ static void k_tokens_fwd(I n, int D, int np, const float *__restrict__ x,
                                    const float *__restrict__ cls, float *__restrict__ y)
{
    const I T = (I)np + 1;
    GRID_STRIDE_I(I, i, n) {
        I d = i % (I)D, bt = i / (I)D, t = bt % T, b = bt / T;
        y[i] = t == 0 ? cls[d] : x[((size_t)b * (size_t)D + d) * (size_t)np + (t - 1)];
    }
}

/* dx[b, d, k] = dy[b, 1 + k, d]; one thread an output, n = B*D*np */
template <typename I>
__global__ static void k_tokens_dx(I n, int D, int np, const float *__restrict__ dy,
                                   float *__restrict__ dx)
{
    const size_t T = (size_t)np + 1;
    GRID_STRIDE_I(I, i, n) {
        I k = i % (I)np, bd = i / (I)np, d = bd % (I)D, b = bd / (I)D;
        dx[i] = dy[((size_t)b * T + 1 + k) * (size_t)D + d];
    }
}

/* out[c] = (or +=) the sum of x[r * ld + c] over r = 0..R-1, in double,
 * rounded once; a block of COL_W columns x COL_H row lanes (reduce.cuh) */
__global__ static void __launch_bounds__(COL_W * COL_H)
k_colsum(int R, int N, size_t ld, const float *__restrict__ x, float *__restrict__ out,
         int accumulate)
{
    __shared__ double sh[COL_H][COL_W + 1];
    const int c = blockIdx.x * COL_W + threadIdx.x;
    double s = 0.0;
    if (c < N)
        for (int r = threadIdx.y; r < R; r += COL_H)
            s = __dadd_rn(s, (double)x[(size_t)r * ld + c]);
    s = col_tree(s, sh);
    if (threadIdx.y == 0 && c < N) {
        const float f = __double2float_rn(s);
        out[c] = accumulate ? __fadd_rn(out[c], f) : f;
    }
}

void cdp_cuda_colsum(int R, int N, size_t ld, const float *x, float *out, int accumulate)
{
    if (N <= 0)
        return;
    if (R <= 0) {
        if (!accumulate)
            CDP_CUDA_CHECK(cudaMemsetAsync(out, 0, (size_t)N * sizeof(float), cdp_cuda_g.stream));
        return;
    }
    k_colsum<<<col_grid(N), col_block(), 0, cdp_cuda_g.stream>>>(R, N, ld, x, out, accumulate);
    CDP_CUDA_LAUNCHED("k_colsum");
}

/* y[r, j] = x[r, j] + p[j], n = R*N; y may equal x */
template <typename I>
__global__ static void k_add_rows(I n, int N, const float *x, const float *__restrict__ p,
                                  float *y)
{
    GRID_STRIDE_I(I, i, n)
        y[i] = __fadd_rn(x[i], p[i % (I)N]);
}

void cdp_cuda_tokens_fwd(int B, int D, int n, const float *x, const float *cls, float *y)
{
    if (B <= 0 || D <= 0)
        return;
    const int np = n > 0 ? n : 0;
    const size_t ny = (size_t)B * ((size_t)np + 1) * (size_t)D;
    LAUNCH_I(k_tokens_fwd, ny, grid_for(ny), CDP_THREADS, ny, D, np, x, cls, y);
}

void cdp_cuda_tokens_bwd(int B, int D, int n, const float *dy, float *dx, float *dcls,
                         int accumulate)
{
    if (D <= 0)
        return;
    const int np = n > 0 ? n : 0;
    cdp_cuda_colsum(B, D, ((size_t)np + 1) * (size_t)D, dy, dcls, accumulate);
    if (!dx || B <= 0 || np == 0)
        return;
    const size_t nx = (size_t)B * (size_t)D * (size_t)np;
    LAUNCH_I(k_tokens_dx, nx, grid_for(nx), CDP_THREADS, nx, D, np, dy, dx);
}

void cdp_cuda_add_rows(int R, int N, const float *x, const float *p, float *y)
{
    if (R <= 0 || N <= 0)
        return;
    const size_t n = (size_t)R * (size_t)N;
    LAUNCH_I(k_add_rows, n, grid_for(n), CDP_THREADS, n, N, x, p, y);
}

void cdp_cuda_sum_rows(int R, int N, const float *x, float *out, int accumulate)
{
    cdp_cuda_colsum(R, N, (size_t)(N > 0 ? N : 0), x, out, accumulate);
}

void cdp_cuda_copy_rows(int R, int N, const float *src, size_t sld, float *dst, size_t dld)
{
    if (R <= 0 || N <= 0 || (src == dst && sld == dld))
        return;
    if (R == 1) {   /* any strides: cudaMemcpy2D wants pitches >= the width */
        CDP_CUDA_CHECK(cudaMemcpyAsync(dst, src, (size_t)N * sizeof(float),
                                       cudaMemcpyDeviceToDevice, cdp_cuda_g.stream));
        return;
    }
    CDP_CUDA_CHECK(cudaMemcpy2DAsync(dst, dld * sizeof(float), src, sld * sizeof(float),
                                     (size_t)N * sizeof(float), (size_t)R,
                                     cudaMemcpyDeviceToDevice, cdp_cuda_g.stream));
}
