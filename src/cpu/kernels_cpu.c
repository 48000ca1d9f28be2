/* CPU kernels: the Linear layers' GEMMs (sgemm.c's single-threaded SGEMM in
 * blocks), OpenMP loops for the elementwise work.
 *
 * Determinism.  Every kernel gives the same bits on every call and for every
 * thread count:
 *   - sgemm: every call runs single-threaded; a GEMM is cut into blocks
 *     that depend on the shape only (see "GEMM decomposition" below) and the
 *     OpenMP threads share the blocks out.  Checked by
 *     tests/unit/test_cpu_kernels.c (1 vs 2 threads).
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
 * Thread pools.  Only libgomp's pool runs work (OpenBLAS is kept at one
 * thread), so the two thread pools of doc/reference.md section 9 never compete.
 * Elementwise loops run in parallel only from CDP_CPU_OMP_MIN elements on
 * (the if() clauses): they are memory-bound and an OpenMP fork costs ~10-30
 * us when the pool sleeps (its threads spin ~1 ms before they do, see
 * GOMP_SPINCOUNT in blas_setup.c).
 *
 * No kernel allocates memory (cdp_cpu_accumulate_exact, a probe run once at
 * start-up, does). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "cpu_internal.h"
#include "util/bf16.h"

#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

int cdp_cpu_omp_threads = 1;

#define PAR(n) if ((size_t)(n) >= (size_t)CDP_CPU_OMP_MIN && cdp_cpu_omp_threads > 1) \
    num_threads(cdp_cpu_omp_threads) schedule(static)

/* ------------------------------------------------------------ Linear */

/* GEMM decomposition.  OpenBLAS's own threading is not thread-count
 * invariant: its threaded driver splits K differently from the serial one
 * (level3_thread.c: (K+1)/2, level3.c: K/2 rounded up to GEMM_UNROLL_M), and
 * some kernels ("Haswell", used on AVX2 Intel and AMD Zen) give bits that
 * depend on where a column falls in the N partition.  Measured with OpenBLAS
 * 0.3.21: y = x W^T for 128x784x256 differs in 26,216 of 32,768 elements
 * between 1 and 2 OpenBLAS threads (SkylakeX kernel); with the Haswell kernel
 * ~15% of the elements differ for every K.  oneDNN's sgemm, too, splits
 * its work by the thread count it finds.
 *
 * So every GEMM call runs single-threaded (sgemm.c), and a GEMM is cut into
 * a grid of blocks whose number and bounds depend only on the shape and on
 * cdp_cpu_gemm_split (a per-machine constant, see backend_cpu.c), never on
 * the thread count: the same single-threaded calls are made whatever the
 * number of threads, and OpenMP threads merely share them out.  The longer
 * side is cut first (columns on a tie), into blocks of at least
 * GEMM_MIN_COLS columns or GEMM_MIN_ROWS rows; when that gives fewer blocks
 * than the split (192 columns of a ViT's 3200 token rows: one), the other
 * side is cut too.  Cutting the rows of a tall GEMM lets each thread pack
 * its own rows and the whole weight once (vit-tiny's 3200 x 192 -> 576
 * forward: 0.86 of the best library's time, against 0.72 cut by columns,
 * bench/run linear-bound).  Blocks are
 * at least GEMM_MIN_MNK multiply-adds (well above OpenBLAS's small-matrix
 * kernel threshold, 100^3, whose use would otherwise depend on the block
 * size). */
#define GEMM_MIN_COLS 128
#define GEMM_MIN_ROWS 64
#define GEMM_MIN_MNK 4.0e6
/* rows of y a forward block fills at a time: 256 rows of up to 384
 * columns (a block of vit-tiny's MLP) stay in a 1 MiB L2 from the bias copy
 * through the GEMM's read of them and the ReLU */
#define FWD_CHUNK_ROWS 256

int cdp_cpu_gemm_split = 1;

typedef struct grid {
    int rows, cols; /* blocks along M and along N */
} grid;

static int clamp_blocks(int nb, int len, int min_len, double mnk)
{
    if (nb > len / min_len)
        nb = len / min_len;
    if (nb > (int)(mnk / GEMM_MIN_MNK))
        nb = (int)(mnk / GEMM_MIN_MNK);
    return nb < 1 ? 1 : nb;
}

static grid gemm_grid(int M, int N, int K)
{
    const double mnk = (double)M * (double)N * (double)K;
    grid g;
    if (M > N) {
        g.rows = clamp_blocks(cdp_cpu_gemm_split, M, GEMM_MIN_ROWS, mnk);
        g.cols = clamp_blocks(cdp_cpu_gemm_split / g.rows, N, GEMM_MIN_COLS, mnk / g.rows);
        return g;
    }
    g.cols = clamp_blocks(cdp_cpu_gemm_split, N, GEMM_MIN_COLS, mnk);
    g.rows = clamp_blocks(cdp_cpu_gemm_split / g.cols, M, GEMM_MIN_ROWS, mnk / g.cols);
    return g;
}

/* first column (or row) of block q of nb over N (multiples of 16) */
static int block_col(int N, int nb, int q)
{
    if (q >= nb)
        return N;
    return (int)((int64_t)N * q / nb) / 16 * 16;
}

/* block q of grid g over [M, N]: rows [*r0, *r1), columns [*c0, *c1) */
static void grid_block(grid g, int M, int N, int q, int *r0, int *r1, int *c0, int *c1)
{
    const int r = q / g.cols, c = q % g.cols;
    *r0 = block_col(M, g.rows, r);
    *r1 = block_col(M, g.rows, r + 1);
    *c0 = block_col(N, g.cols, c);
    *c1 = block_col(N, g.cols, c + 1);
}

static int gemm_threads(int nb)
{
    return nb < cdp_cpu_omp_threads ? nb : cdp_cpu_omp_threads;
}

/* dst[i][c0..c1) = src[i][c0..c1) > 0 ? dst : 0 for rows [r0, r1) (ld w):
 * the ReLU of a block, applied by the thread that just wrote it. */
static void relu_mask_block(int r0, int r1, int w, int c0, int c1, const float *src, float *dst)
{
    for (int i = r0; i < r1; i++) {
        const float *s = src + (size_t)i * (size_t)w;
        float *d = dst + (size_t)i * (size_t)w;
        for (int c = c0; c < c1; c++)
            d[c] = s[c] > 0.0f ? d[c] : 0.0f;
    }
}

/* relu_mask_block on a bfloat16 src: its value > 0 when its bits are in
 * [1, 0x7f80] (sign clear, not zero, not a NaN) */
static void relu_mask_block16(int r0, int r1, int w, int c0, int c1, const uint16_t *src,
                              float *dst)
{
    for (int i = r0; i < r1; i++) {
        const uint16_t *s = src + (size_t)i * (size_t)w;
        float *d = dst + (size_t)i * (size_t)w;
        for (int c = c0; c < c1; c++)
            d[c] = s[c] - 1u < 0x7f80u ? d[c] : 0.0f;
    }
}

/* The Linear layers' grids (cpu_internal.h, cdp_cpu_linear_op): the
 * blocks of the forward, in chunks of rows whose part of y stays in the
 * core's cache from the product to the end of the ReLU, which the thread
 * applies to its block while it is still there. */
void cdp_cpu_linear_fwd_grid(const cdp_cpu_linear_op *op, int relu)
{
    const int B = op->B, out = op->out;
    const grid g = gemm_grid(B, out, op->in);
    const int nb = g.rows * g.cols, nt = gemm_threads(nb);
#pragma omp parallel for if (nt > 1) num_threads(nt) schedule(static)
    for (int q = 0; q < nb; q++) {
        int i0, i1, o0, o1;
        grid_block(g, B, out, q, &i0, &i1, &o0, &o1);
        for (int c0 = i0; c0 < i1; c0 += FWD_CHUNK_ROWS) {
            const int c1 = i1 - c0 > FWD_CHUNK_ROWS ? c0 + FWD_CHUNK_ROWS : i1;
            op->fwd_block(op, c0, c1, o0, o1);
            if (relu)
                relu_mask_block(c0, c1, out, o0, o1, op->y, op->y);
        }
    }
}

/* The rows of y are preloaded with b and sgemm accumulates onto them (beta
 * = 1), which saves the library's separate beta pass over C.  Each y[i][o]
 * is b[o] plus the sgemm partial sums added in the kernel's fixed K order. */
static void fwd_block_f32(const cdp_cpu_linear_op *op, int c0, int c1, int o0, int o1)
{
    const int in = op->in, out = op->out;
    const size_t w = (size_t)(o1 - o0) * sizeof(float);
    for (int i = c0; i < c1; i++)
        memcpy(op->y + (size_t)i * (size_t)out + o0, op->b + o0, w);
    if (in > 0)
        cdp_cpu_sgemm(0, 1, c1 - c0, o1 - o0, in, 1.0f, op->x + (size_t)c0 * (size_t)in, in,
                      op->W + (size_t)o0 * (size_t)in, in, 1.0f,
                      op->y + (size_t)c0 * (size_t)out + o0, out);
}

/* y[B,out] = x[B,in] W[out,in]^T + b, by blocks of fwd_block_f32 */
void cdp_cpu_linear_fwd(int B, int in, int out, const float *x, const float *W,
                        const float *b, float *y, int relu)
{
    if (B <= 0 || out <= 0)
        return;
    const cdp_cpu_linear_op op = {.B = B, .in = in, .out = out, .x = x, .W = W, .b = b, .y = y,
                                  .fwd_block = fwd_block_f32};
    cdp_cpu_linear_fwd_grid(&op, relu);
}

/* s[0..w) = sum over i = 0..B-1 (in this order, in float) of dy[i][c0 + .];
 * the inner loop runs across columns so that it vectorises. */
static void colsum_into(int B, int out, int c0, int w, const float *dy, float *s)
{
    const float *r = dy + c0;
    for (int o = 0; o < w; o++)
        s[o] = r[o];
    for (int i = 1; i < B; i++) {
        r = dy + (size_t)i * (size_t)out + c0;
        for (int o = 0; o < w; o++)
            s[o] = s[o] + r[o];
    }
}

/* colsum_into of dy in bfloat16 storage: the same sums of the same values */

static void colsum_into16(int B, int out, int c0, int w, const uint16_t *dy, float *s)
{
    const uint16_t *r = dy + c0;
    for (int o = 0; o < w; o++)
        s[o] = cdp_cpu_bf16_widen(r[o]);
    for (int i = 1; i < B; i++) {
        r = dy + (size_t)i * (size_t)out + c0;
        for (int o = 0; o < w; o++)
            s[o] = s[o] + cdp_cpu_bf16_widen(r[o]);
    }
}

/* db[o0..o1) = column sums of dy, or db += them (the whole sum first, then
 * one addition per column: the bits of colsum-then-add()). */
#define COLSUM_CHUNK 256
static void colsum(int B, int out, int o0, int o1, const float *dy, const uint16_t *dy16,
                   float *db, int accumulate)
{
    if (!accumulate) {
        if (dy16)
            colsum_into16(B, out, o0, o1 - o0, dy16, db + o0);
        else
            colsum_into(B, out, o0, o1 - o0, dy, db + o0);
        return;
    }
    float s[COLSUM_CHUNK];
    for (int c0 = o0; c0 < o1; c0 += COLSUM_CHUNK) {
        int w = o1 - c0 < COLSUM_CHUNK ? o1 - c0 : COLSUM_CHUNK;
        if (dy16)
            colsum_into16(B, out, c0, w, dy16, s);
        else
            colsum_into(B, out, c0, w, dy, s);
        for (int o = 0; o < w; o++)
            db[c0 + o] = db[c0 + o] + s[o];
    }
}

/* dW[out,in] = dy^T x (a grid over out x in), db = column sums of dy
 * (column blocks over out), dx[B,in] = dy W (a grid over B x in, masked by
 * x > 0 when relu_dx), all in one parallel region. */
void cdp_cpu_linear_bwd_grid(const cdp_cpu_linear_op *op, float *db, int relu_dx)
{
    const int B = op->B, in = op->in, out = op->out;
    const grid gw = gemm_grid(out, in, B);
    const grid gx = op->dx ? gemm_grid(B, in, out) : (grid){ 0, 0 };
    const int nw = gw.rows * gw.cols, nx = gx.rows * gx.cols;
    const int nt = gemm_threads(nw > nx ? nw : nx);
    /* db: blocks of at least 256 columns, one per thread at most */
    int nd = out / 256 < nt ? out / 256 : nt;
    if (nd < 1)
        nd = 1;
#pragma omp parallel if (nt > 1) num_threads(nt)
    {
#pragma omp for schedule(static) nowait
        for (int q = 0; q < nw; q++) {
            int o0, o1, c0, c1;
            grid_block(gw, out, in, q, &o0, &o1, &c0, &c1);
            op->dw_block(op, o0, o1, c0, c1);
        }
#pragma omp for schedule(static) nowait
        for (int q = 0; q < nx; q++) {
            int i0, i1, c0, c1;
            grid_block(gx, B, in, q, &i0, &i1, &c0, &c1);
            op->dx_block(op, i0, i1, c0, c1);
            if (relu_dx && op->x16)
                relu_mask_block16(i0, i1, in, c0, c1, op->x16, op->dx);
            else if (relu_dx)
                relu_mask_block(i0, i1, in, c0, c1, op->x, op->dx);
        }
#pragma omp for schedule(static) nowait
        for (int q = 0; q < nd; q++)
            colsum(B, out, block_col(out, nd, q), block_col(out, nd, q + 1), op->dy, op->dy16,
                   db, op->accumulate);
    }
}

/* With accumulate, sgemm adds its product to dW (beta = 1): whether that
 * gives the bits of a separate sum depends on how the library blocks K
 * (cdp_cpu_accumulate_exact). */
static void dw_block_f32(const cdp_cpu_linear_op *op, int o0, int o1, int c0, int c1)
{
    const int in = op->in, out = op->out;
    cdp_cpu_sgemm(1, 0, o1 - o0, c1 - c0, op->B, 1.0f, op->dy + o0, out, op->x + c0, in,
                  op->accumulate ? 1.0f : 0.0f, op->dW + (size_t)o0 * (size_t)in + c0, in);
}

static void dx_block_f32(const cdp_cpu_linear_op *op, int i0, int i1, int c0, int c1)
{
    const int in = op->in, out = op->out;
    cdp_cpu_sgemm(0, 0, i1 - i0, c1 - c0, out, 1.0f, op->dy + (size_t)i0 * (size_t)out, out,
                  op->W + c0, in, 0.0f, op->dx + (size_t)i0 * (size_t)in + c0, in);
}

/* the backward by blocks of dw_block_f32 and dx_block_f32; with
 * accumulate, the column sums are added to db */
void cdp_cpu_linear_bwd(int B, int in, int out, const float *x, const float *W,
                        const float *dy, float *dx, float *dW, float *db, int relu_dx,
                        int accumulate)
{
    if (out <= 0 || in <= 0)
        return;
    if (B <= 0 && accumulate)
        return;
    if (B <= 0) {
        memset(dW, 0, (size_t)out * (size_t)in * sizeof(float));
        memset(db, 0, (size_t)out * sizeof(float));
        return;
    }
    const cdp_cpu_linear_op op = {.B = B, .in = in, .out = out, .accumulate = accumulate,
                                  .x = x, .W = W, .dy = dy, .dx = dx, .dW = dW,
                                  .dw_block = dw_block_f32, .dx_block = dx_block_f32};
    cdp_cpu_linear_bwd_grid(&op, db, relu_dx);
}

/* A library may add a product to C once per block of K (OpenBLAS: GEMM_Q,
 * 448 for SkylakeX sgemm in 0.3.21): with K = B in one block, sgemm(beta = 1) gives
 * C + (the product), the same single rounding as a product in a scratch
 * buffer followed by add(); with several blocks it does not.  Rather than
 * rely on the constant, this runs both ways on the shape itself, on data
 * from a fixed generator, and compares the bits. */
int cdp_cpu_accumulate_exact(int B, int in, int out)
{
    if (B <= 0 || in <= 0 || out <= 0)
        return 1;
    size_t nx = (size_t)B * in, ny = (size_t)B * out, nw = (size_t)out * in;
    float *x = malloc(nx * sizeof *x), *dy = malloc(ny * sizeof *dy);
    float *a = malloc((nw + out) * sizeof *a), *b = malloc((nw + out) * sizeof *b);
    float *g = malloc((nw + out) * sizeof *g);
    int same = 0;
    if (x && dy && a && b && g) {
        uint32_t r = 2463534242u;
        float *bufs[3] = {x, dy, a};
        size_t ns[3] = {nx, ny, nw + out};
        for (int k = 0; k < 3; k++)
            for (size_t j = 0; j < ns[k]; j++) {
                r ^= r << 13; r ^= r >> 17; r ^= r << 5;
                bufs[k][j] = (float)(r >> 8) * (2.0f / 16777216.0f) - 1.0f;
            }
        memcpy(b, a, (nw + out) * sizeof *a);
        cdp_cpu_linear_bwd(B, in, out, x, NULL, dy, NULL, g, g + nw, 0, 0);
        cdp_cpu_add(nw + out, a, g);
        cdp_cpu_linear_bwd(B, in, out, x, NULL, dy, NULL, b, b + nw, 0, 1);
        same = memcmp(a, b, (nw + out) * sizeof *a) == 0;
    }
    free(x); free(dy); free(a); free(b); free(g);
    return same;
}

/* ------------------------------------------------------------ elementwise */

/* memset in one block per thread: a stage's parameters are megabytes, and
 * the executor clears them between two parallel kernels */
void cdp_cpu_zero(void *dst, size_t bytes)
{
#ifdef _OPENMP
    const int nt = cdp_cpu_omp_threads;
    if (bytes / sizeof(float) >= (size_t)CDP_CPU_OMP_MIN && nt > 1) {
#pragma omp parallel num_threads(nt)
        {
            /* the team may be smaller than asked for (OMP_DYNAMIC, limits) */
            const int t = omp_get_thread_num(), m = omp_get_num_threads();
            size_t b0 = bytes / (size_t)m * (size_t)t / 64 * 64;
            size_t b1 = t == m - 1 ? bytes : bytes / (size_t)m * (size_t)(t + 1) / 64 * 64;
            memset((char *)dst + b0, 0, b1 - b0);
        }
        return;
    }
#endif
    if (bytes)
        memset(dst, 0, bytes);
}

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

void cdp_cpu_relu6_fwd(size_t n, float *y)
{
#pragma omp parallel for PAR(n)
    for (size_t k = 0; k < n; k++)
        y[k] = y[k] < 0.0f ? 0.0f : y[k] > 6.0f ? 6.0f : y[k];
}

void cdp_cpu_relu6_bwd(size_t n, const float *y, float *dy)
{
#pragma omp parallel for PAR(n)
    for (size_t k = 0; k < n; k++)
        dy[k] = y[k] > 0.0f && y[k] < 6.0f ? dy[k] : 0.0f;
}

void cdp_cpu_add(size_t n, float *acc, const float *x)
{
#pragma omp parallel for PAR(n)
    for (size_t k = 0; k < n; k++)
        acc[k] = acc[k] + x[k];
}

void cdp_cpu_f64_pack(size_t n, const double *src, float *dst)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t u;
        memcpy(&u, &src[i], sizeof u);
        dst[3 * i] = (float)(uint32_t)(u & 0x3FFFFFu);
        dst[3 * i + 1] = (float)(uint32_t)((u >> 22) & 0x3FFFFFu);
        dst[3 * i + 2] = (float)(uint32_t)(u >> 44);
    }
}

void cdp_cpu_f64_unpack(size_t n, const float *src, double *dst)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t u = (uint64_t)(uint32_t)src[3 * i] | (uint64_t)(uint32_t)src[3 * i + 1] << 22 |
                     (uint64_t)(uint32_t)src[3 * i + 2] << 44;
        memcpy(&dst[i], &u, sizeof u);
    }
}

void cdp_cpu_scale(size_t n, float *x, float a)
{
#pragma omp parallel for PAR(n)
    for (size_t k = 0; k < n; k++)
        x[k] = x[k] * a;
}

void cdp_cpu_nonfinite(size_t n, const float *x, size_t m, uint64_t *out)
{
    uint64_t code = 0, first = UINT64_MAX;
#pragma omp parallel for PAR(n) reduction(max : code) reduction(min : first)
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i])) {
            const uint64_t c = isnan(x[i]) ? 2 : 1;
            if (c > code) code = c;
            if (i % m < first) first = i % m;
        }
    out[0] = code;
    out[1] = first;
}

void cdp_cpu_round_bf16(size_t n, const float *x, float *y)
{
#pragma omp parallel for PAR(n)
    for (size_t k = 0; k < n; k++)
        y[k] = cdp_bf16_round(x[k]);
}

/* bf16_pack and bf16_unpack of a span, on the calling thread */
CDP_CPU_CLONES void cdp_cpu_bf16_pack_span(size_t n, const float *x, uint16_t *y)
{
    for (size_t k = 0; k < n; k++)
        y[k] = cdp_cpu_bf16_bits(x[k]);
}

CDP_CPU_CLONES void cdp_cpu_bf16_widen_span(size_t n, const uint16_t *x, float *y)
{
    for (size_t k = 0; k < n; k++)
        y[k] = cdp_cpu_bf16_widen(x[k]);
}

/* the whole arrays: spans of this many values shared out to the threads
 * (each value on its own: the bits do not depend on the split) */
#define PACK_SPAN 16384

void cdp_cpu_bf16_pack(size_t n, const float *x, uint16_t *y)
{
    const size_t spans = (n + PACK_SPAN - 1) / PACK_SPAN;
#pragma omp parallel for PAR(n)
    for (size_t s = 0; s < spans; s++) {
        const size_t k = s * PACK_SPAN;
        cdp_cpu_bf16_pack_span(n - k < PACK_SPAN ? n - k : PACK_SPAN, x + k, y + k);
    }
}

void cdp_cpu_bf16_unpack(size_t n, const uint16_t *x, float *y)
{
    const size_t spans = (n + PACK_SPAN - 1) / PACK_SPAN;
#pragma omp parallel for PAR(n)
    for (size_t s = 0; s < spans; s++) {
        const size_t k = s * PACK_SPAN;
        cdp_cpu_bf16_widen_span(n - k < PACK_SPAN ? n - k : PACK_SPAN, x + k, y + k);
    }
}

/* add3 with its output in bfloat16 storage: the float sum of the two
 * inputs' values (each widened from its storage, or read from floats),
 * rounded.  An input in floats is taken as a (a + b is b + a, bit for bit) */
CDP_CPU_CLONES static void add3_16(size_t n, const uint16_t *a, const uint16_t *b, uint16_t *y)
{
#pragma omp parallel for PAR(n)
    for (size_t k = 0; k < n; k++)
        y[k] = cdp_cpu_bf16_bits(cdp_cpu_bf16_widen(a[k]) + cdp_cpu_bf16_widen(b[k]));
}

CDP_CPU_CLONES static void add3_f16(size_t n, const float *a, const uint16_t *b, uint16_t *y)
{
#pragma omp parallel for PAR(n)
    for (size_t k = 0; k < n; k++)
        y[k] = cdp_cpu_bf16_bits(a[k] + cdp_cpu_bf16_widen(b[k]));
}

CDP_CPU_CLONES static void add3_ff(size_t n, const float *a, const float *b, uint16_t *y)
{
#pragma omp parallel for PAR(n)
    for (size_t k = 0; k < n; k++)
        y[k] = cdp_cpu_bf16_bits(a[k] + b[k]);
}

void cdp_cpu_bf16_add3(size_t n, const float *af, const uint16_t *a16, const float *bf,
                       const uint16_t *b16, uint16_t *y)
{
    if (a16 && b16)
        add3_16(n, a16, b16, y);
    else if (b16)
        add3_f16(n, af, b16, y);
    else if (a16)
        add3_f16(n, bf, a16, y);
    else
        add3_ff(n, af, bf, y);
}

/* relu_fwd in place on bfloat16 storage: max(x, 0) of a bfloat16 value is
 * the value or +0 (a NaN gives +0, as relu_fwd's x > 0 test does) */
CDP_CPU_CLONES void cdp_cpu_bf16_relu_fwd(size_t n, uint16_t *y)
{
#pragma omp parallel for PAR(n)
    for (size_t k = 0; k < n; k++)
        y[k] = cdp_cpu_bf16_widen(y[k]) > 0.0f ? y[k] : 0;
}

/* relu_bwd reading its output in bfloat16 storage */
CDP_CPU_CLONES void cdp_cpu_bf16_relu_bwd(size_t n, const uint16_t *y, float *dy)
{
#pragma omp parallel for PAR(n)
    for (size_t k = 0; k < n; k++)
        dy[k] = cdp_cpu_bf16_widen(y[k]) > 0.0f ? dy[k] : 0.0f;
}

/* torch.optim.SGD (dampening 0, no Nesterov) on the gradient g * gscale, in
 * float, in this order:
 *     d     = g * gscale + wd * theta
 *     buf   = first ? d : mu * buf + d
 *     theta = theta - lr * buf
 * g * gscale is the one rounding that scaling g in a pass of its own would
 * make (and g * 1.0f is g), so folding the 1/N of the mean in here saves a
 * pass over the gradient and changes no bit.  buf may be NULL (no momentum
 * buffer): then theta = theta - lr * d, which is what torch does for
 * momentum 0. */
void cdp_cpu_sgd(size_t n, const float *theta_in, float *theta_out, float *g, float gscale,
                 float *buf, float lr, float mu, float wd, int first, int zero_g)
{
    /* zero_g stores +0 over each gradient element once it is read: the
     * cache line is in hand already, where clearing it in the next
     * backward's GEMM (beta = 0) is a pass of its own over memory */
    if (!buf) {
#pragma omp parallel for PAR(n)
        for (size_t k = 0; k < n; k++) {
            float th = theta_in[k];
            float d = g[k] * gscale + wd * th;
            if (zero_g) g[k] = 0.0f;
            theta_out[k] = th - lr * d;
        }
    } else if (first) {
#pragma omp parallel for PAR(n)
        for (size_t k = 0; k < n; k++) {
            float th = theta_in[k];
            float d = g[k] * gscale + wd * th;
            if (zero_g) g[k] = 0.0f;
            buf[k] = d;
            theta_out[k] = th - lr * d;
        }
    } else {
#pragma omp parallel for PAR(n)
        for (size_t k = 0; k < n; k++) {
            float th = theta_in[k];
            float d = g[k] * gscale + wd * th;
            if (zero_g) g[k] = 0.0f;
            float v = mu * buf[k] + d;
            buf[k] = v;
            theta_out[k] = th - lr * v;
        }
    }
}

/* torch.optim.AdamW (no amsgrad) on the gradient g * gscale, in float, each
 * operation rounded (backend.h adamw):
 *     theta = theta_in * decay
 *     m     = beta1 * m + (1 - beta1) * gs            (m = 0 before the first)
 *     v     = beta2 * v + ((1 - beta2) * gs) * gs     (v = 0 before the first)
 *     theta = theta - step_size * (m / (sqrt(v) / bc2_sqrt + eps))
 * Elementwise, so the same bits for every thread count. */
void cdp_cpu_adamw(size_t n, const float *theta_in, float *theta_out, float *g, float gscale,
                   float *m, float *v, const cdp_adamw_coef *c, int first, int zero_g)
{
    const cdp_adamw_coef a = *c;
#pragma omp parallel for PAR(n)
    for (size_t k = 0; k < n; k++) {
        float th = theta_in[k] * a.decay;
        float gs = g[k] * gscale;
        if (zero_g) g[k] = 0.0f;
        float m0 = first ? 0.0f : m[k], v0 = first ? 0.0f : v[k];
        float mk = a.beta1 * m0 + a.one_minus_beta1 * gs;
        float vk = a.beta2 * v0 + (a.one_minus_beta2 * gs) * gs;
        m[k] = mk;
        v[k] = vk;
        float denom = sqrtf(vk) / a.bc2_sqrt + a.eps;
        theta_out[k] = th - a.step_size * (mk / denom);
    }
}

void cdp_cpu_pixels_to_input(int B, int C, int HW, const uint8_t *host_pixels,
                             const float *norm, float *x)
{
    const size_t n = (size_t)B * (size_t)C * (size_t)HW;
    if (!norm) {
#pragma omp parallel for PAR(n)
        for (size_t k = 0; k < n; k++)
            x[k] = (float)host_pixels[k] / 255.0f;
        return;
    }
    /* one plane (b, c) after the other: plane r has channel r % C */
    const long planes = (long)B * C;
#pragma omp parallel for PAR(n)
    for (long r = 0; r < planes; r++) {
        const float mean = norm[r % C], std = norm[C + r % C];
        const uint8_t *p = host_pixels + (size_t)r * HW;
        float *y = x + (size_t)r * HW;
        for (int k = 0; k < HW; k++) {
            float v = (float)p[k] / 255.0f;
            y[k] = (v - mean) / std;
        }
    }
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
