/* The Linear kernels of --precision bf16 (linear_fwd_bf16, linear_bwd_bf16)
 * on the CPU: the products of kernels_cpu.c's linear_fwd / linear_bwd taken
 * in bfloat16 by oneDNN's matmul (matmul_bf16.c), float32 sums.
 *
 * What runs (doc/reference.md section 3.12).  The operands are packed to
 * bfloat16 storage first (two bytes a value: half the memory traffic of the
 * floats, and what the AVX512_BF16 kernels read); the transposes are
 * oneDNN's (its matmul reads a transposed operand through strides, at the
 * speed of a plain one here):
 *   forward   y  = x W^T + b     A = x [B,in],    B = W^T [in,out], bias b
 *   dx        dx = dy W          A = dy [B,out],  B = W [out,in]
 *   dW        dW = dy^T x        A = dy^T [out,B], B = x [B,in]
 * Each product is cut by kernels_cpu.c's grid (cdp_cpu_linear_fwd_grid,
 * cdp_cpu_linear_bwd_grid: it depends on the shape and the per-machine
 * split only, never on the thread count), every block is one
 * single-threaded matmul, and the OpenMP threads share the blocks out: so
 * the bits are those of the blocks, the same for every thread and rank
 * count.  The forward adds the bias inside
 * the matmul (its f32 bias, after the sum) and, with relu, masks its block
 * as linear_fwd does; dx is masked likewise.  With accumulate, a dW block
 * is computed into the scratch and then added (dW = dW + block), the bits
 * of a separate product and add() that the backend interface promises.
 * db: the column sums of dy of linear_bwd (float, row order).
 *
 * cdp_cpu_bf16_linear_fwd / _bwd (the backend's cdp_bf16_kernels) take x,
 * W and dy in bfloat16 storage as the stage keeps them (x may come as
 * floats, packed here); linear_fwd_bf16 / linear_bwd_bf16 pack their float
 * operands and call them.
 * The packed copies and the scratch live in buffers kept by this file,
 * grown by the executor's thread before a kernel's parallel region (the
 * kernels are called from one thread at a time) and freed at exit.
 *
 * Without oneDNN (or with CDP_GEMM_DNNL=0) these are linear_fwd and
 * linear_bwd themselves: the float32 kernels on the rounded values. */
#include "config.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_internal.h"

#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

const char *cdp_cpu_bf16_library(void)
{
#ifdef HAVE_DNNL
    if (cdp_cpu_gemm_dnnl)
        return "oneDNN bf16 matmul";
#endif
    return cdp_cpu_gemm_library();
}

#ifndef HAVE_DNNL

void cdp_cpu_linear_fwd_bf16(int B, int in, int out, const float *x, const float *W,
                             const float *b, float *y, int relu)
{
    cdp_cpu_linear_fwd(B, in, out, x, W, b, y, relu);
}

void cdp_cpu_linear_bwd_bf16(int B, int in, int out, const float *x, const float *W,
                             const float *dy, float *dx, float *dW, float *db, int relu_dx,
                             int accumulate)
{
    cdp_cpu_linear_bwd(B, in, out, x, W, dy, dx, dW, db, relu_dx, accumulate);
}

#else

/* ------------------------------------------------------------ buffers */

enum { BUF_X, BUF_W, BUF_DY, BUF_SCRATCH, NBUF };
static void *bufs[NBUF];
static size_t buf_bytes[NBUF];

static void bufs_free(void)
{
    for (int i = 0; i < NBUF; i++) {
        free(bufs[i]);
        bufs[i] = NULL;
        buf_bytes[i] = 0;
    }
}

void *cdp_cpu_grow(void **p, size_t *have, size_t bytes, const char *what)
{
    if (bytes <= *have)
        return *p;
    free(*p);
    const size_t n = (bytes + 63) / 64 * 64;
    *p = aligned_alloc(64, n);
    if (!*p) {
        fprintf(stderr, "cdp: out of memory for %s (%zu bytes)\n", what, n);
        abort();
    }
    *have = n;
    return *p;
}

/* the per-OpenMP-thread buffers of cpu_internal.h's cdp_cpu_thread_buf */
#define TBUF_THREADS 256
static void *tbufs[CDP_CPU_TBUFS][TBUF_THREADS];
static size_t tbuf_bytes[CDP_CPU_TBUFS][TBUF_THREADS];

static void tbufs_free(void)
{
    for (int i = 0; i < CDP_CPU_TBUFS; i++)
        for (int t = 0; t < TBUF_THREADS; t++) {
            free(tbufs[i][t]);
            tbufs[i][t] = NULL;
            tbuf_bytes[i][t] = 0;
        }
}

void *cdp_cpu_thread_buf(int which, size_t bytes, const char *what)
{
    static int registered;
#pragma omp critical(cdp_cpu_thread_buf)
    if (!registered) {
        atexit(tbufs_free);
        registered = 1;
    }
    const int t = omp_get_thread_num();
    if (which < 0 || which >= CDP_CPU_TBUFS || t < 0 || t >= TBUF_THREADS) {
        fprintf(stderr, "cdp: per-thread buffer %d of thread %d: beyond %d threads\n", which, t,
                TBUF_THREADS);
        abort();
    }
    return cdp_cpu_grow(&tbufs[which][t], &tbuf_bytes[which][t], bytes, what);
}

/* buffer i with at least bytes (its contents are not kept) */
static void *buf(int i, size_t bytes)
{
    static int registered;
    if (!registered) {
        atexit(bufs_free);
        registered = 1;
    }
    return cdp_cpu_grow(&bufs[i], &buf_bytes[i], bytes, "the bfloat16 Linear operands");
}

static uint16_t *packed(int i, size_t n)
{
    return buf(i, n * sizeof(uint16_t));
}

/* ------------------------------------------------------------ kernels */

/* the packed operands: x, W and dy in bfloat16 storage, and the scratch a
 * dW block is computed into before it is added with accumulate */
typedef struct packs {
    const uint16_t *x, *W, *dy;
    float *scratch;
} packs;


static const packs *packs_of(const cdp_cpu_linear_op *op)
{
    return op->ctx;
}

/* y = x W^T + b: the bias is the matmul's, added once after the sum */
static void fwd_block(const cdp_cpu_linear_op *op, int c0, int c1, int o0, int o1)
{
    const packs *p = packs_of(op);
    const int in = op->in, out = op->out;
    cdp_cpu_bf16_matmul(0, 1, c1 - c0, o1 - o0, in, p->x + (size_t)c0 * in, in,
                        p->W + (size_t)o0 * in, in, op->b + o0, op->y + (size_t)c0 * out + o0,
                        out);
}

/* dW = dy^T x; with accumulate into the scratch, then dW = dW + it */
static void dw_block(const cdp_cpu_linear_op *op, int o0, int o1, int c0, int c1)
{
    const packs *p = packs_of(op);
    const int in = op->in;
    float *c = (op->accumulate ? p->scratch : op->dW) + (size_t)o0 * in + c0;
    cdp_cpu_bf16_matmul(1, 0, o1 - o0, c1 - c0, op->B, p->dy + o0, op->out, p->x + c0, in, NULL,
                        c, in);
    if (!op->accumulate)
        return;
    for (int o = o0; o < o1; o++) {
        float *d = op->dW + (size_t)o * in;
        const float *s = p->scratch + (size_t)o * in;
        for (int k = c0; k < c1; k++)
            d[k] = d[k] + s[k];
    }
}

static void dx_block(const cdp_cpu_linear_op *op, int i0, int i1, int c0, int c1)
{
    const packs *p = packs_of(op);
    const int in = op->in, out = op->out;
    cdp_cpu_bf16_matmul(0, 0, i1 - i0, c1 - c0, out, p->dy + (size_t)i0 * out, out, p->W + c0,
                        in, NULL, op->dx + (size_t)i0 * in + c0, in);
}

/* x in bfloat16 storage: x itself, or xf packed into the buffer */
static const uint16_t *x_packed(size_t n, const float *xf, const uint16_t *x)
{
    if (x)
        return x;
    uint16_t *xb = packed(BUF_X, n);
    cdp_cpu_bf16_pack(n, xf, xb);
    return xb;
}

void cdp_cpu_bf16_linear_fwd(int B, int in, int out, const float *xf, const uint16_t *x,
                             const uint16_t *W, const float *b, float *y, int relu)
{
    if (B <= 0 || out <= 0)
        return;
    const packs p = {x_packed((size_t)B * in, xf, x), W, NULL, NULL};
    const cdp_cpu_linear_op op = {.B = B, .in = in, .out = out, .b = b, .y = y,
                                  .fwd_block = fwd_block, .ctx = &p};
    cdp_cpu_linear_fwd_grid(&op, relu);
}

void cdp_cpu_bf16_linear_bwd(int B, int in, int out, const float *xf, const uint16_t *x,
                             const uint16_t *W, const uint16_t *dy, float *dx, float *dW,
                             float *db, int relu_dx, int accumulate)
{
    if (out <= 0 || in <= 0 || (B <= 0 && accumulate))
        return;
    if (B <= 0) {
        memset(dW, 0, (size_t)out * (size_t)in * sizeof(float));
        memset(db, 0, (size_t)out * sizeof(float));
        return;
    }
    float *scratch = accumulate ? buf(BUF_SCRATCH, (size_t)out * in * sizeof(float)) : NULL;
    const packs p = {x_packed((size_t)B * in, xf, x), W, dy, scratch};
    const cdp_cpu_linear_op op = {.B = B, .in = in, .out = out, .accumulate = accumulate,
                                  .dx = dx, .dW = dW, .x16 = p.x, .dy16 = dy,
                                  .dw_block = dw_block, .dx_block = dx_block, .ctx = &p};
    cdp_cpu_linear_bwd_grid(&op, db, relu_dx);
}

void cdp_cpu_linear_fwd_bf16(int B, int in, int out, const float *x, const float *W,
                             const float *b, float *y, int relu)
{
    if (!cdp_cpu_gemm_dnnl || B <= 0 || out <= 0 || in <= 0) {
        cdp_cpu_linear_fwd(B, in, out, x, W, b, y, relu);
        return;
    }
    uint16_t *wb = packed(BUF_W, (size_t)in * out);
    cdp_cpu_bf16_pack((size_t)out * in, W, wb);
    cdp_cpu_bf16_linear_fwd(B, in, out, x, NULL, wb, b, y, relu);
}

void cdp_cpu_linear_bwd_bf16(int B, int in, int out, const float *x, const float *W,
                             const float *dy, float *dx, float *dW, float *db, int relu_dx,
                             int accumulate)
{
    if (!cdp_cpu_gemm_dnnl || B <= 0 || out <= 0 || in <= 0) {
        cdp_cpu_linear_bwd(B, in, out, x, W, dy, dx, dW, db, relu_dx, accumulate);
        return;
    }
    uint16_t *dyb = packed(BUF_DY, (size_t)B * out);
    uint16_t *wb = dx ? packed(BUF_W, (size_t)out * in) : NULL;
    cdp_cpu_bf16_pack((size_t)B * out, dy, dyb);
    if (dx)
        cdp_cpu_bf16_pack((size_t)out * in, W, wb);
    cdp_cpu_bf16_linear_bwd(B, in, out, x, NULL, wb, dyb, dx, dW, db, relu_dx, accumulate);
}

#endif
