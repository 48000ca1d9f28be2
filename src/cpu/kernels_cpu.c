/* CPU kernels: OpenBLAS sgemm for the Linear layers, OpenMP loops for the
 * elementwise work.
 *
 * Determinism.  Every kernel gives the same bits on every call and for every
 * thread count:
 *   - sgemm: OpenBLAS splits a GEMM among threads along M and N only, never
 *     along K, so every element of C is accumulated by one thread in a fixed
 *     order that depends on the shape and the BLAS kernel (core type), not on
 *     the thread count (checked by tests/test_kernels.c: 1 vs 2 threads).
 *   - elementwise loops: one result per element, no cross-element arithmetic.
 *   - column sums (db) run in parallel over columns; each column is summed in
 *     float in row order i = 0, 1, ..., B-1.
 *   - xent: each row is computed by one thread; the per-row losses are summed
 *     in double in row order by one thread.
 *
 * Floating-point contraction.  Every expression below is written as the
 * formula it implements, operation by operation.  The build uses -std=c11,
 * under which gcc defaults to -ffp-contract=off (no a*b+c fused into an FMA),
 * so the results are the IEEE float results of the written order; clang is
 * told the same with the STDC pragma.
 *
 * OpenMP.  Loops run in parallel only from CDP_CPU_OMP_MIN elements on (the
 * if() clauses): these loops are memory-bound and an OpenMP fork costs
 * ~10-30 us when the pool sleeps (OMP_WAIT_POLICY=PASSIVE, set by
 * cdp_backend_cpu_preinit, see blas_setup.c), so small loops stay serial and
 * never wake the OpenMP pool between two sgemm calls.  Measured with
 * bench/sgemm_limit.c --elementwise on the 2-core machines: a 262144-float
 * relu / add is ~40-70 us serial, below that the fork does not pay.
 *
 * No kernel allocates memory. */
#include <math.h>
#include <string.h>
#include <cblas.h>

#include "cpu_internal.h"

#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

int cdp_cpu_omp_threads = 1;

#define PAR(n) if ((size_t)(n) >= (size_t)CDP_CPU_OMP_MIN && cdp_cpu_omp_threads > 1) \
    num_threads(cdp_cpu_omp_threads) schedule(static)

/* ------------------------------------------------------------ Linear */

/* y[B,out] = x[B,in] W[out,in]^T + b: the rows of y are preloaded with b and
 * sgemm accumulates onto them (beta = 1), which saves OpenBLAS's separate
 * beta pass over C.  Each y[i][o] is b[o] plus the sgemm partial sums added
 * in the kernel's fixed K order. */
void cdp_cpu_linear_fwd(int B, int in, int out, const float *x, const float *W,
                        const float *b, float *y)
{
    if (B <= 0 || out <= 0)
        return;
    size_t row = (size_t)out * sizeof(float);
    for (int i = 0; i < B; i++)
        memcpy(y + (size_t)i * (size_t)out, b, row);
    if (in <= 0)
        return;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, B, out, in,
                1.0f, x, in, W, in, 1.0f, y, out);
}

/* db[o] = sum over i = 0..B-1 (in this order, in float) of dy[i][o].  Columns
 * are cut into blocks of 256 so that the inner loop vectorises across
 * columns; blocks are shared among threads, never rows. */
#define COLBLOCK 256
static void colsum(int B, int out, const float *dy, float *db)
{
    int nblk = (out + COLBLOCK - 1) / COLBLOCK;
#pragma omp parallel for PAR((size_t)B * (size_t)out)
    for (int blk = 0; blk < nblk; blk++) {
        int o0 = blk * COLBLOCK;
        int o1 = o0 + COLBLOCK < out ? o0 + COLBLOCK : out;
        float *d = db + o0;
        int w = o1 - o0;
        const float *r = dy + o0;
        for (int o = 0; o < w; o++)
            d[o] = r[o];
        for (int i = 1; i < B; i++) {
            r = dy + (size_t)i * (size_t)out + o0;
            for (int o = 0; o < w; o++)
                d[o] = d[o] + r[o];
        }
    }
}

void cdp_cpu_linear_bwd(int B, int in, int out, const float *x, const float *W,
                        const float *dy, float *dx, float *dW, float *db)
{
    if (out <= 0 || in <= 0)
        return;
    if (B <= 0) {
        memset(dW, 0, (size_t)out * (size_t)in * sizeof(float));
        memset(db, 0, (size_t)out * sizeof(float));
        return;
    }
    /* dW[out,in] = dy[B,out]^T x[B,in] */
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out, in, B,
                1.0f, dy, out, x, in, 0.0f, dW, in);
    colsum(B, out, dy, db);
    /* dx[B,in] = dy[B,out] W[out,in] */
    if (dx)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, B, in, out,
                    1.0f, dy, out, W, in, 0.0f, dx, in);
}

/* ------------------------------------------------------------ elementwise */

void cdp_cpu_relu_fwd(size_t n, float *y)
{
#pragma omp parallel for PAR(n)
    for (size_t k = 0; k < n; k++)
        y[k] = y[k] > 0.0f ? y[k] : 0.0f;
}

void cdp_cpu_relu_bwd(size_t n, const float *y, float *dy)
{
#pragma omp parallel for PAR(n)
    for (size_t k = 0; k < n; k++)
        dy[k] = y[k] > 0.0f ? dy[k] : 0.0f;
}

void cdp_cpu_add(size_t n, float *acc, const float *x)
{
#pragma omp parallel for PAR(n)
    for (size_t k = 0; k < n; k++)
        acc[k] = acc[k] + x[k];
}

void cdp_cpu_scale(size_t n, float *x, float a)
{
#pragma omp parallel for PAR(n)
    for (size_t k = 0; k < n; k++)
        x[k] = x[k] * a;
}

/* torch.optim.SGD (dampening 0, no Nesterov), in float, in this order:
 *     d     = g + wd * theta
 *     buf   = first ? d : mu * buf + d
 *     theta = theta - lr * buf
 * buf may be NULL (no momentum buffer): then theta = theta - lr * d, which is
 * what torch does for momentum 0. */
void cdp_cpu_sgd(size_t n, const float *theta_in, float *theta_out, const float *g,
                 float *buf, float lr, float mu, float wd, int first)
{
    if (!buf) {
#pragma omp parallel for PAR(n)
        for (size_t k = 0; k < n; k++) {
            float th = theta_in[k];
            float d = g[k] + wd * th;
            theta_out[k] = th - lr * d;
        }
    } else if (first) {
#pragma omp parallel for PAR(n)
        for (size_t k = 0; k < n; k++) {
            float th = theta_in[k];
            float d = g[k] + wd * th;
            buf[k] = d;
            theta_out[k] = th - lr * d;
        }
    } else {
#pragma omp parallel for PAR(n)
        for (size_t k = 0; k < n; k++) {
            float th = theta_in[k];
            float d = g[k] + wd * th;
            float v = mu * buf[k] + d;
            buf[k] = v;
            theta_out[k] = th - lr * v;
        }
    }
}

void cdp_cpu_pixels_to_input(size_t n, const uint8_t *host_pixels, float *x)
{
#pragma omp parallel for PAR(n)
    for (size_t k = 0; k < n; k++)
        x[k] = (float)host_pixels[k] / 255.0f;
}

/* ------------------------------------------------------------ loss */

/* One row of the softmax cross-entropy, all in float:
 *     m      = max_j z_j            (argmax = first index reaching it)
 *     e_j    = expf(z_j - m),  s = sum_j e_j  (j ascending)
 *     loss   = logf(s) - (z_label - m)
 *     z_j   <- (e_j / s - [j == label]) * (1.0f / B)
 * A label outside [0, C) gives a NaN loss (and no one-hot term). */
static float xent_row(int C, float *z, int32_t label, float invB, int *hit)
{
    float m = z[0];
    int am = 0;
    for (int j = 1; j < C; j++)
        if (z[j] > m) {
            m = z[j];
            am = j;
        }
    int ok = label >= 0 && label < C;
    float zl = ok ? z[label] : 0.0f;
    float s = 0.0f;
    for (int j = 0; j < C; j++) {
        float e = expf(z[j] - m);
        z[j] = e;
        s = s + e;
    }
    for (int j = 0; j < C; j++) {
        float p = z[j] / s;
        z[j] = (j == label ? p - 1.0f : p) * invB;
    }
    *hit = ok && am == label;
    return ok ? logf(s) - (zl - m) : NAN;
}

/* Rows are processed in blocks so that the per-row losses can be kept on the
 * stack and summed in row order after the (possibly parallel) block. */
#define XBLOCK 512
void cdp_cpu_xent(int B, int C, float *logits, const int32_t *labels, double *stats)
{
    if (B <= 0 || C <= 0)
        return;
    float invB = 1.0f / (float)B;
    double loss_sum = 0.0, correct = 0.0;
    float lossb[XBLOCK];
    int hitb[XBLOCK];
    for (int i0 = 0; i0 < B; i0 += XBLOCK) {
        int nb = B - i0 < XBLOCK ? B - i0 : XBLOCK;
#pragma omp parallel for PAR((size_t)nb * (size_t)C)
        for (int r = 0; r < nb; r++) {
            int i = i0 + r;
            lossb[r] = xent_row(C, logits + (size_t)i * (size_t)C, labels[i], invB, &hitb[r]);
        }
        for (int r = 0; r < nb; r++) {
            loss_sum += (double)lossb[r];
            correct += hitb[r];
        }
    }
    stats[0] += loss_sum;
    stats[1] += correct;
}
