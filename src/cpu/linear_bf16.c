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
 * Each product is cut by kernels_cpu.c's grid (cdp_cpu_gemm_grid: it
 * depends on the shape and the per-machine split only, never on the thread
 * count), every block is one single-threaded matmul, and the OpenMP
 * threads share the blocks out: so the bits are those of the blocks, the
 * same for every thread and rank count.  The forward adds the bias inside
 * the matmul (its f32 bias, after the sum) and, with relu, masks its block
 * as linear_fwd does; dx is masked likewise.  With accumulate, a dW block
 * is computed into the scratch and then added (dW = dW + block), the bits
 * of a separate product and add() that the backend interface promises.
 * db: the column sums of dy of linear_bwd (float, row order).
 *
 * Packing is a pass over the operands each call (the weights included: a
 * Linear's weights are 1/rows of its product's work, 1/3200 on vit-tiny).
 * The packed copies and the scratch live in buffers kept by this file,
 * grown by the executor's thread before a kernel's parallel region (the
 * kernels are called from one thread at a time) and freed at exit.
 *
 * Without oneDNN (or with CDP_GEMM_DNNL=0) these are linear_fwd and
 * linear_bwd themselves: the float32 kernels on the rounded values. */
#include "config.h"

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

/* rows of y a forward block fills at a time, as linear_fwd's chunks: the
 * block's part of y stays in the core's cache from the matmul to the ReLU */
#define FWD_CHUNK_ROWS 256

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

/* buffer i with at least bytes (its contents are not kept) */
static void *buf(int i, size_t bytes)
{
    static int registered;
    if (bytes <= buf_bytes[i])
        return bufs[i];
    if (!registered) {
        atexit(bufs_free);
        registered = 1;
    }
    free(bufs[i]);
    size_t n = (bytes + 63) / 64 * 64;
    bufs[i] = aligned_alloc(64, n);
    if (!bufs[i]) {
        fprintf(stderr, "cdp: out of memory for the bfloat16 Linear operands (%zu bytes)\n", n);
        abort();
    }
    buf_bytes[i] = n;
    return bufs[i];
}

static uint16_t *packed(int i, size_t n)
{
    return buf(i, n * sizeof(uint16_t));
}

/* ------------------------------------------------------------ kernels */

void cdp_cpu_linear_fwd_bf16(int B, int in, int out, const float *x, const float *W,
                             const float *b, float *y, int relu)
{
    if (!cdp_cpu_gemm_dnnl || B <= 0 || out <= 0 || in <= 0) {
        cdp_cpu_linear_fwd(B, in, out, x, W, b, y, relu);
        return;
    }
    uint16_t *xb = packed(BUF_X, (size_t)B * in), *wb = packed(BUF_W, (size_t)in * out);
    cdp_cpu_bf16_pack((size_t)B * in, x, xb);
    cdp_cpu_bf16_pack((size_t)out * in, W, wb);
    const cdp_cpu_grid g = cdp_cpu_gemm_grid(B, out, in);
    const int nb = g.rows * g.cols, nt = cdp_cpu_gemm_threads(nb);
#pragma omp parallel for if (nt > 1) num_threads(nt) schedule(static)
    for (int q = 0; q < nb; q++) {
        int i0, i1, o0, o1;
        cdp_cpu_grid_block(g, B, out, q, &i0, &i1, &o0, &o1);
        for (int c0 = i0; c0 < i1; c0 += FWD_CHUNK_ROWS) {
            const int c1 = i1 - c0 > FWD_CHUNK_ROWS ? c0 + FWD_CHUNK_ROWS : i1;
            cdp_cpu_bf16_matmul(0, 1, c1 - c0, o1 - o0, in, xb + (size_t)c0 * in, in,
                                wb + (size_t)o0 * in, in,
                                b + o0, y + (size_t)c0 * out + o0, out);
            if (relu)
                cdp_cpu_relu_mask_block(c0, c1, out, o0, o1, y, y);
        }
    }
}

/* dW[o0..o1, c0..c1) (row length in) = the block of dy^T x, added to dW
 * through the scratch with accumulate */
static void dw_block(int B, int in, int out, const uint16_t *dyb, const uint16_t *xb, int o0,
                     int o1, int c0, int c1, float *dW, float *scratch, int accumulate)
{
    float *c = (accumulate ? scratch : dW) + (size_t)o0 * in + c0;
    cdp_cpu_bf16_matmul(1, 0, o1 - o0, c1 - c0, B, dyb + o0, out, xb + c0, in, NULL, c, in);
    if (!accumulate)
        return;
    for (int o = o0; o < o1; o++) {
        float *d = dW + (size_t)o * in;
        const float *s = scratch + (size_t)o * in;
        for (int k = c0; k < c1; k++)
            d[k] = d[k] + s[k];
    }
}

void cdp_cpu_linear_bwd_bf16(int B, int in, int out, const float *x, const float *W,
                             const float *dy, float *dx, float *dW, float *db, int relu_dx,
                             int accumulate)
{
    if (!cdp_cpu_gemm_dnnl || B <= 0 || out <= 0 || in <= 0) {
        cdp_cpu_linear_bwd(B, in, out, x, W, dy, dx, dW, db, relu_dx, accumulate);
        return;
    }
    uint16_t *dyb = packed(BUF_DY, (size_t)B * out), *xb = packed(BUF_X, (size_t)B * in);
    uint16_t *wb = dx ? packed(BUF_W, (size_t)out * in) : NULL;
    float *scratch = accumulate ? buf(BUF_SCRATCH, (size_t)out * in * sizeof(float)) : NULL;
    cdp_cpu_bf16_pack((size_t)B * out, dy, dyb);
    cdp_cpu_bf16_pack((size_t)B * in, x, xb);
    if (dx)
        cdp_cpu_bf16_pack((size_t)out * in, W, wb);
    const cdp_cpu_grid gw = cdp_cpu_gemm_grid(out, in, B);
    const cdp_cpu_grid gx = dx ? cdp_cpu_gemm_grid(B, in, out) : (cdp_cpu_grid){ 0, 0 };
    const int nw = gw.rows * gw.cols, nx = gx.rows * gx.cols;
    const int nt = cdp_cpu_gemm_threads(nw > nx ? nw : nx);
    /* db: as linear_bwd's */
    int nd = out / 256 < nt ? out / 256 : nt;
    if (nd < 1)
        nd = 1;
#pragma omp parallel if (nt > 1) num_threads(nt)
    {
#pragma omp for schedule(static) nowait
        for (int q = 0; q < nw; q++) {
            int o0, o1, c0, c1;
            cdp_cpu_grid_block(gw, out, in, q, &o0, &o1, &c0, &c1);
            dw_block(B, in, out, dyb, xb, o0, o1, c0, c1, dW, scratch, accumulate);
        }
#pragma omp for schedule(static) nowait
        for (int q = 0; q < nx; q++) {
            int i0, i1, c0, c1;
            cdp_cpu_grid_block(gx, B, in, q, &i0, &i1, &c0, &c1);
            cdp_cpu_bf16_matmul(0, 0, i1 - i0, c1 - c0, out, dyb + (size_t)i0 * out, out, wb + c0, in,
                                NULL, dx + (size_t)i0 * in + c0, in);
            if (relu_dx)
                cdp_cpu_relu_mask_block(i0, i1, in, c0, c1, x, dx);
        }
#pragma omp for schedule(static) nowait
        for (int q = 0; q < nd; q++)
            cdp_cpu_colsum(B, out, cdp_cpu_block_col(out, nd, q),
                           cdp_cpu_block_col(out, nd, q + 1), dy, db, accumulate);
    }
}

#endif
