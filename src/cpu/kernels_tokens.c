/* CPU transformer kernels (tokens [B, T, D] row-major): batched GEMM,
 * row softmax, LayerNorm, the patch/class tokens, and the row
 * helpers (broadcast add, column sums, strided copy).  The formulas are the
 * contract of src/backend/backend.h, operation by operation.
 *
 * Determinism.  Every loop runs in parallel over independent outputs only:
 *   - gemm_batched: one single-threaded sgemm per batch entry (sgemm.c,
 *     kernels_cpu.c "GEMM decomposition"); the OpenMP
 *     threads share the entries out, so each C_b comes from the same sgemm
 *     call whatever the number of threads.  Entries are never split.
 *   - softmax, LayerNorm forward, LayerNorm dx, tokens, add_rows,
 *     copy_rows: one row (or element) per iteration; each row's reductions
 *     are made by one thread in index order.
 *   - column reductions (LayerNorm dgamma/dbeta, sum_rows, the class token's
 *     gradient): parallel over blocks of columns; each column is summed by
 *     one thread over the rows in order r = 0..R-1.
 * So the bits never depend on the thread count
 * (tests/unit/test_cpu_image_token_kernels.c, TCase "tokens", runs 1, 2 and 3
 * threads).  No FP contraction (-std=c11; clang pragma below), no allocation.
 *
 * Where the contract leaves a detail open, these kernels (and the CUDA ones,
 * src/gpu/kernels_tokens.cu) do:
 *   - ln_bwd: xhat = (x - mean) * rstd in float (the forward's bits), with
 *     mean, rstd from save; g = (double)dy * (double)gamma (exact); a/D and
 *     b/D once per row in double; dx = (float)(rstd * ((g - a/D) - xhat *
 *     (b/D))) in double.  dgamma, dbeta: double sums over the rows in order,
 *     rounded to float once (then added, with accumulate).
 *   - softmax max: the first element, replaced by any later one that is
 *     greater (as xent_row in kernels_cpu.c).
 *   - tokens_bwd skips dx when it is NULL. */
#include <math.h>
#include <string.h>

#include "backend/backend.h"
#include "cpu_internal.h"

#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

/* Loops that call expf/erf per element pay for a fork sooner than the
 * memory-bound ones of CDP_CPU_OMP_MIN: erf in double is ~10-20 ns, so
 * 16k elements take ~200 us on one thread. */
#define TOK_MATH_MIN 16384
#define PAR_MATH(n) if ((size_t)(n) >= (size_t)TOK_MATH_MIN && cdp_cpu_omp_threads > 1) \
    num_threads(cdp_cpu_omp_threads) schedule(static)

/* below this many multiply-adds in all, the batched GEMM runs on one thread */
#define GEMMB_MIN_PAR_MACS 2.0e6

/* columns per block of the column reductions (stack buffers) */
#define COLS 256

/* sqrt(2) and 1 / sqrt(2 pi), rounded to double (M_SQRT2 is not C11) */
#define SQRT2 1.41421356237309504880168872420969808
#define INV_SQRT_2PI 0.398942280401432677939946059934

/* ------------------------------------------------------------ batched GEMM */

/* C_b = alpha op(A_b) op(B_b) + beta C_b for b < batch (row-major).  K = 0:
 * C_b = beta * C_b, and +0 where beta is 0 (C not read). */
void cdp_cpu_gemm_batched(int tA, int tB, int M, int N, int K, float alpha, const float *A,
                          int lda, size_t sA, const float *Bm, int ldb, size_t sB, float beta,
                          float *C, int ldc, size_t sC, int batch)
{
    if (M <= 0 || N <= 0 || batch <= 0)
        return;
    const double macs = (double)batch * (double)M * (double)N * (double)(K > 0 ? K : 1);
    const int nt = batch < cdp_cpu_omp_threads ? batch : cdp_cpu_omp_threads;
    const int par = nt > 1 && macs >= GEMMB_MIN_PAR_MACS;
#pragma omp parallel for if (par) num_threads(nt) schedule(static)
    for (int b = 0; b < batch; b++) {
        float *c = C + (size_t)b * sC;
        if (K <= 0) {
            if (beta == 1.0f)
                continue;
            for (int i = 0; i < M; i++) {
                float *ci = c + (size_t)i * (size_t)ldc;
                for (int j = 0; j < N; j++)
                    ci[j] = beta == 0.0f ? 0.0f : beta * ci[j];
            }
            continue;
        }
        cdp_cpu_sgemm(tA, tB, M, N, K, alpha, A + (size_t)b * sA, lda, Bm + (size_t)b * sB, ldb,
                      beta, c, ldc);
    }
}

/* ------------------------------------------------------------ softmax */

/* one row, in place: mx = max, e_j = expf(x_j - mx), s = sum of e_j in
 * float in order, x_j = e_j / s */
static void softmax_row(int N, float *x)
{
    float mx = x[0];
    for (int j = 1; j < N; j++)
        if (x[j] > mx)
            mx = x[j];
    float s = 0.0f;
    for (int j = 0; j < N; j++) {
        float e = expf(x[j] - mx);
        x[j] = e;
        s = s + e;
    }
    for (int j = 0; j < N; j++)
        x[j] = x[j] / s;
}

void cdp_cpu_softmax_fwd(int R, int N, float *x)
{
    if (R <= 0 || N <= 0)
        return;
#pragma omp parallel for PAR_MATH((size_t)R * (size_t)N)
    for (int r = 0; r < R; r++)
        softmax_row(N, x + (size_t)r * (size_t)N);
}

/* per row: dot = sum of dp_j * P_j (float, in order);
 * dp_j = scale * (P_j * (dp_j - dot)) */
void cdp_cpu_softmax_bwd(int R, int N, float scale, const float *P, float *dp)
{
    if (R <= 0 || N <= 0)
        return;
#pragma omp parallel for CDP_CPU_PAR((size_t)R * (size_t)N)
    for (int r = 0; r < R; r++) {
        const float *p = P + (size_t)r * (size_t)N;
        float *d = dp + (size_t)r * (size_t)N;
        float dot = 0.0f;
        for (int j = 0; j < N; j++)
            dot = dot + d[j] * p[j];
        for (int j = 0; j < N; j++)
            d[j] = scale * (p[j] * (d[j] - dot));
    }
}

/* ------------------------------------------------------------ LayerNorm */

/* LayerNorm's input x in floats (xf) or bfloat16 storage (x16) and its
 * output y likewise: the bodies below take both, one of each pair NULL;
 * the test is the same for every element, and the compiler unswitches the
 * loops on it (gcc -O3: -fopt-info-loop shows it), so each form runs loops
 * of its own */
static inline float ld16(const float *xf, const uint16_t *x16, size_t i)
{
    return x16 ? cdp_cpu_bf16_widen(x16[i]) : xf[i];
}

/* per row, in double over d = 0..D-1: mean = sum / D, var = (sum of
 * (x - mean)^2) / D, rstd = (float)(1 / sqrt(var + eps)); then in float
 * y = ((x - (float)mean) * rstd) * gamma + beta. */
static inline void ln_fwd_body(int R, int D, const float *xf, const uint16_t *x16,
                               const float *gamma, const float *beta, float eps, float *yf,
                               uint16_t *y16, float *save)
{
    if (R <= 0 || D <= 0)
        return;
    const double dd = (double)D;
#pragma omp parallel for CDP_CPU_PAR((size_t)R * (size_t)D)
    for (int r = 0; r < R; r++) {
        const size_t o = (size_t)r * (size_t)D;
        double sum = 0.0;
        for (int d = 0; d < D; d++)
            sum += (double)ld16(xf, x16, o + d);
        double mean = sum / dd, m2 = 0.0;
        for (int d = 0; d < D; d++) {
            double t = (double)ld16(xf, x16, o + d) - mean;
            m2 += t * t;
        }
        float fm = (float)mean;
        float rs = (float)(1.0 / sqrt(m2 / dd + (double)eps));
        for (int d = 0; d < D; d++) {
            const float y = (ld16(xf, x16, o + d) - fm) * rs * gamma[d] + beta[d];
            if (y16)
                y16[o + d] = cdp_cpu_bf16_bits(y);
            else
                yf[o + d] = y;
        }
        save[r] = fm;
        save[R + r] = rs;
    }
}

void cdp_cpu_ln_fwd(int R, int D, const float *x, const float *gamma, const float *beta,
                    float eps, float *y, float *save)
{
    ln_fwd_body(R, D, x, NULL, gamma, beta, eps, y, NULL, save);
}

/* --precision bf16, y in bfloat16 storage: ln_fwd on x (widened from its
 * storage, or floats), y rounded as bf16_pack does */
void cdp_cpu_bf16_ln_fwd(int R, int D, const float *xf, const uint16_t *x16, const float *gamma,
                         const float *beta, float eps, uint16_t *y, float *save)
{
    if (x16)
        ln_fwd_body(R, D, NULL, x16, gamma, beta, eps, NULL, y, save);
    else
        ln_fwd_body(R, D, xf, NULL, gamma, beta, eps, NULL, y, save);
}

/* dgamma[c0..c1), dbeta[c0..c1): over the rows in order, in double, of
 * dy * xhat and dy; rounded once; written or added */
static inline void ln_param_grads(int R, int D, int c0, int c1, const float *xf,
                                  const uint16_t *x16, const float *save, const float *dy,
                                  float *dgamma, float *dbeta, int accumulate)
{
    double sg[COLS], sb[COLS];
    const int w = c1 - c0;
    for (int j = 0; j < w; j++)
        sg[j] = sb[j] = 0.0;
    for (int r = 0; r < R; r++) {
        const float mean = save[r], rs = save[R + r];
        const size_t o = (size_t)r * (size_t)D + c0;
        const float *gr = dy + o;
        for (int j = 0; j < w; j++) {
            float xh = (ld16(xf, x16, o + j) - mean) * rs;
            sg[j] += (double)gr[j] * (double)xh;
            sb[j] += (double)gr[j];
        }
    }
    for (int j = 0; j < w; j++) {
        float fg = (float)sg[j], fb = (float)sb[j];
        dgamma[c0 + j] = accumulate ? dgamma[c0 + j] + fg : fg;
        dbeta[c0 + j] = accumulate ? dbeta[c0 + j] + fb : fb;
    }
}

/* see the file's head for the exact operations; dx may equal dy: the
 * parameter gradients read dy before any dx is written (two loops), and a
 * row's sums are complete before its dx is written */
static inline void ln_bwd_body(int R, int D, const float *xf, const uint16_t *x16,
                               const float *gamma, const float *save, const float *dy,
                               float *dx, float *dgamma, float *dbeta, int accumulate)
{
    if (D <= 0)
        return;
    if (R <= 0) {
        if (!accumulate) {
            memset(dgamma, 0, (size_t)D * sizeof *dgamma);
            memset(dbeta, 0, (size_t)D * sizeof *dbeta);
        }
        return;
    }
    const size_t n = (size_t)R * (size_t)D;
    const int nc = (D + COLS - 1) / COLS;
#pragma omp parallel for CDP_CPU_PAR(n)
    for (int q = 0; q < nc; q++) {
        int c0 = q * COLS, c1 = c0 + COLS < D ? c0 + COLS : D;
        ln_param_grads(R, D, c0, c1, xf, x16, save, dy, dgamma, dbeta, accumulate);
    }
    if (!dx)
        return;
    const double dd = (double)D;
#pragma omp parallel for CDP_CPU_PAR(n)
    for (int r = 0; r < R; r++) {
        const float mean = save[r], rs = save[R + r];
        const size_t o = (size_t)r * (size_t)D;
        const float *gr = dy + o;
        float *out = dx + o;
        double a = 0.0, b = 0.0;
        for (int d = 0; d < D; d++) {
            float xh = (ld16(xf, x16, o + d) - mean) * rs;
            double g = (double)gr[d] * (double)gamma[d];
            a += g;
            b += g * (double)xh;
        }
        const double ad = a / dd, bd = b / dd, rsd = (double)rs;
        for (int d = 0; d < D; d++) {
            float xh = (ld16(xf, x16, o + d) - mean) * rs;
            double g = (double)gr[d] * (double)gamma[d];
            out[d] = (float)(rsd * (g - ad - (double)xh * bd));
        }
    }
}

void cdp_cpu_ln_bwd(int R, int D, const float *x, const float *gamma, const float *save,
                    const float *dy, float *dx, float *dgamma, float *dbeta, int accumulate)
{
    ln_bwd_body(R, D, x, NULL, gamma, save, dy, dx, dgamma, dbeta, accumulate);
}

/* --precision bf16: ln_bwd reading x in bfloat16 storage (widened) */
void cdp_cpu_bf16_ln_bwd(int R, int D, const uint16_t *x, const float *gamma, const float *save,
                         const float *dy, float *dx, float *dgamma, float *dbeta, int accumulate)
{
    ln_bwd_body(R, D, NULL, x, gamma, save, dy, dx, dgamma, dbeta, accumulate);
}

/* ------------------------------------------------------------ tokens */

/* y[b, 0, :] = cls, y[b, 1 + i, d] = x[b, d, i] */
void cdp_cpu_tokens_fwd(int B, int D, int n, const float *x, const float *cls, float *y)
{
    if (B <= 0 || D <= 0)
        return;
    const size_t T = (size_t)(n > 0 ? n : 0) + 1, nd = (size_t)D;
#pragma omp parallel for CDP_CPU_PAR((size_t)B * T * nd)
    for (int b = 0; b < B; b++) {
        const float *xb = x + (size_t)b * nd * (T - 1);
        float *yb = y + (size_t)b * T * nd;
        memcpy(yb, cls, nd * sizeof *yb);
        for (size_t i = 0; i + 1 < T; i++) {
            float *yr = yb + (i + 1) * nd;
            for (size_t d = 0; d < nd; d++)
                yr[d] = xb[d * (T - 1) + i];
        }
    }
}

/* s[0..w) = sum over r = 0..R-1 (float, in order) of x[r * ld + c0 + .] */
static void colsum_f(int R, size_t ld, int c0, int w, const float *x, float *s)
{
    for (int j = 0; j < w; j++)
        s[j] = x[c0 + j];
    for (int r = 1; r < R; r++) {
        const float *xr = x + (size_t)r * ld + c0;
        for (int j = 0; j < w; j++)
            s[j] = s[j] + xr[j];
    }
}

/* out[c] = (or +=) sum over the R rows of x (row stride ld), parallel over
 * blocks of columns */
static void colsum_rows(int R, int N, size_t ld, const float *x, float *out, int accumulate)
{
    if (N <= 0)
        return;
    if (R <= 0) {
        if (!accumulate)
            memset(out, 0, (size_t)N * sizeof *out);
        return;
    }
    const int nc = (N + COLS - 1) / COLS;
#pragma omp parallel for CDP_CPU_PAR((size_t)R * (size_t)N)
    for (int q = 0; q < nc; q++) {
        float s[COLS];
        int c0 = q * COLS, w = N - c0 < COLS ? N - c0 : COLS;
        colsum_f(R, ld, c0, w, x, s);
        for (int j = 0; j < w; j++)
            out[c0 + j] = accumulate ? out[c0 + j] + s[j] : s[j];
    }
}

/* dx[b, d, i] = dy[b, 1 + i, d]; dcls = (or +=) sum over b of dy[b, 0, :] */
void cdp_cpu_tokens_bwd(int B, int D, int n, const float *dy, float *dx, float *dcls,
                        int accumulate)
{
    if (D <= 0)
        return;
    const size_t T = (size_t)(n > 0 ? n : 0) + 1, nd = (size_t)D;
    colsum_rows(B, D, T * nd, dy, dcls, accumulate);
    if (!dx || B <= 0 || T == 1)
        return;
#pragma omp parallel for CDP_CPU_PAR((size_t)B * T * nd)
    for (int b = 0; b < B; b++) {
        const float *gb = dy + (size_t)b * T * nd;
        float *xb = dx + (size_t)b * nd * (T - 1);
        for (size_t d = 0; d < nd; d++) {
            float *xr = xb + d * (T - 1);
            for (size_t i = 0; i + 1 < T; i++)
                xr[i] = gb[(i + 1) * nd + d];
        }
    }
}

/* ------------------------------------------------------------ rows */

void cdp_cpu_add_rows(int R, int N, const float *x, const float *p, float *y)
{
    if (R <= 0 || N <= 0)
        return;
#pragma omp parallel for CDP_CPU_PAR((size_t)R * (size_t)N)
    for (int r = 0; r < R; r++) {
        const float *xr = x + (size_t)r * (size_t)N;
        float *yr = y + (size_t)r * (size_t)N;
        for (int j = 0; j < N; j++)
            yr[j] = xr[j] + p[j];
    }
}

void cdp_cpu_sum_rows(int R, int N, const float *x, float *out, int accumulate)
{
    colsum_rows(R, N, (size_t)(N > 0 ? N : 0), x, out, accumulate);
}

void cdp_cpu_copy_rows(int R, int N, const float *src, size_t sld, float *dst, size_t dld)
{
    if (R <= 0 || N <= 0 || (src == dst && sld == dld))
        return;
#pragma omp parallel for CDP_CPU_PAR((size_t)R * (size_t)N)
    for (int r = 0; r < R; r++)
        memmove(dst + (size_t)r * dld, src + (size_t)r * sld, (size_t)N * sizeof *dst);
}
