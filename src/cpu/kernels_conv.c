/* CPU convolution: im2col + OpenBLAS sgemm forward, GEMMs + col2im backward.
 *
 * Layout.  The micro-batch is cut into chunks of G whole samples; a chunk's
 * im2col is a matrix col[K = Cin*KH*KW][G*OH*OW] (rows ordered like the
 * weights w[Cout][Cin][KH][KW], columns sample by sample, pixel by pixel),
 * and its forward is one GEMM y_c[Cout][G*P] = w[Cout][K] col, P = OH*OW.
 * G is the number of samples that gives about cdp_cpu_conv_cols columns
 * (G = 1 from P >= cdp_cpu_conv_cols on), so that small late-stage images
 * (7x7, 4x4) still make GEMMs wide enough for the sgemm kernel, while big
 * early ones work sample by sample in cache-sized pieces.  With G = 1 the
 * GEMM writes the NCHW output directly (y_b is [Cout][P]); with G > 1 it
 * writes a [Cout][G*P] scratch that is copied plane by plane into NCHW.
 * The backward mirrors it: dy_c gathered into [Cout][G*P], dw_c = dy_c
 * col^T, dcol = w^T dy_c, col2im.
 * bench/kernels/conv_kernels.c measured the choice (1 thread, GFLOP/s fwd / bwd,
 * resnet18 CIFAR stem at B = 64 and resnet20 at B = 128 on 1x28x28, the
 * machine partly loaded; bench/raw/2026-11-23): over all 18 layer shapes,
 * one sample per GEMM 57 / 51, ~1024 columns 77 / 66, ~4096 columns
 * 73 / 67, the whole micro-batch in one im2col and GEMM 64 / 61, plain
 * sgemm of the same M, N, K on ready operands 80 / 86.  Per-sample GEMMs
 * collapse on the small late images (512 channels on 4x4: 33 against 83),
 * the whole batch on the big early ones (64 channels on 28x28: 61 against
 * 88; its im2col, 115 MB there, no longer fits any cache).  A 1x1 stride-1
 * unpadded convolution of one sample needs no im2col (col is x_b itself).
 * 3x3 stride-1 layers mostly skip all this: cdp_cpu_conv2d_fwd/bwd hand
 * the shapes cdp_cpu_conv_direct_use() picks (measured) to the direct
 * convolution of kernels_conv_direct.c (db stays here, cdp_cpu_conv_db), and, in a
 * build with oneDNN, first the shapes cdp_cpu_conv_dnnl_use() picks to
 * kernels_conv_dnnl.c (3x3 with >= 16 channels by default).  Grouped and
 * depthwise convolutions (groups > 1) all go to kernels_conv_grouped.c.
 *
 * Determinism.  The chunks and their assignment to S "slots" depend only on
 * the shape and on cdp_cpu_gemm_split (the per-machine constant of
 * kernels_cpu.c), never on the thread count: S = min(split, B), slot s owns
 * the samples [B*s/S, B*(s+1)/S) and cuts them into m chunks of near-equal
 * sizes, which it handles in increasing order with its own part of the
 * workspace; the OpenMP threads (at most S) share the slots out.  OpenBLAS runs
 * single-threaded.  So every GEMM call, with its operands and its order of
 * accumulation, is the same whatever the number of threads.
 *   - dw: slot s accumulates the GEMMs dy_c col_c^T of its chunks in its own
 *     partial dw (sgemm beta = 1 after the first chunk, in chunk order); the
 *     S partials are then summed per element in slot order s = 0..S-1, in
 *     float, by one parallel loop over elements.  accumulate adds that sum
 *     to dw afterwards: the bits of computing dw on its own and add().
 *   - db: per channel, in double, over b = 0..B-1 then p = 0..P-1, rounded
 *     to float once (then added to db with accumulate); parallel over
 *     channels.
 *   - dx: dcol = w^T dy_c (one GEMM per chunk), then col2im: each (sample,
 *     channel) plane of dx is cleared and gathers its contributions in the
 *     fixed loop order (kh, kw, oh, ow), serially, by the slot that owns the
 *     chunk (chunks hold whole samples, so no two slots touch a plane).
 *   - bias: the output rows are preloaded with b and sgemm adds onto them
 *     (beta = 1), as linear_fwd does.
 * Like kernels_cpu.c, the build has no FP contraction (-std=c11; clang
 * pragma below) and no kernel allocates: everything goes to ws, sized by
 * cdp_cpu_conv2d_ws_floats. */
#include "config.h"

#include <string.h>
#include <cblas.h>

#include "backend/backend.h"
#include "cpu_internal.h"

#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

/* see "Layout" above and bench/kernels/conv_kernels.c */
int cdp_cpu_conv_cols = 1024;

#ifndef HAVE_DNNL
/* built without oneDNN: its path never runs (kernels_conv_dnnl.c) */
int cdp_cpu_conv_dnnl = 0;

int cdp_cpu_conv_dnnl_use(const cdp_conv_shape *s)
{
    (void)s;
    return 0;
}

const char *cdp_cpu_dnnl_version(void)
{
    return NULL;
}

const char *cdp_cpu_dnnl_isa(void)
{
    return "none";
}
#endif


typedef struct {
    int P, K;       /* output pixels per plane, rows of col */
    int S;          /* slots: slot s owns samples [B*s/S, B*(s+1)/S) */
    int m;          /* chunks per slot, of near-equal sizes */
    int G;          /* most samples in a chunk */
    int ident;      /* 1x1, stride 1, no padding: col of one sample is x_b */
    size_t col, tmp, part, slot;   /* floats per slot: col, [Cout][G*P], dw part */
} conv_plan;

static size_t round16(size_t n)
{
    return (n + 15) / 16 * 16;
}

static conv_plan conv_plan_make(const cdp_conv_shape *s)
{
    conv_plan p;
    memset(&p, 0, sizeof p);
    p.P = s->OH * s->OW;
    p.K = s->Cin * s->KH * s->KW;
    if (s->B <= 0 || p.P <= 0)
        return p;
    p.S = cdp_cpu_conv_slots(s->B);
    int bs = (s->B + p.S - 1) / p.S;   /* most samples in a slot */
    int T = cdp_cpu_conv_cols > 0 ? cdp_cpu_conv_cols : 1;
    int G = p.P >= T ? 1 : T / p.P;
    if (G > bs)
        G = bs;
    p.m = (bs + G - 1) / G;
    p.G = (bs + p.m - 1) / p.m;
    p.ident = s->KH == 1 && s->KW == 1 && s->stride == 1 && s->pad == 0;
    size_t cols = (size_t)p.G * (size_t)p.P;
    p.col = p.ident && p.G == 1 ? 0 : round16((size_t)p.K * cols);
    p.tmp = p.G > 1 ? round16((size_t)s->Cout * cols) : 0;
    p.part = round16((size_t)s->Cout * (size_t)p.K);
    p.slot = p.col + p.tmp + p.part;
    return p;
}

/* samples [*b0, *b1) of chunk c of slot sl (possibly empty) */
static void conv_chunk(const cdp_conv_shape *s, const conv_plan *p, int sl, int c, int *b0,
                       int *b1)
{
    cdp_cpu_conv_chunk(s->B, p->S, p->m, sl, c, b0, b1);
}

size_t cdp_cpu_conv2d_ws_floats(const cdp_conv_shape *s)
{
    if (cdp_conv_groups(s) > 1)   /* kernels_conv_grouped.c: none */
        return 0;
    conv_plan p = conv_plan_make(s);
    size_t n = (size_t)p.S * p.slot, d = cdp_cpu_conv_direct_ws_floats(s);
    n = n > d ? n : d;   /* either path may run (cdp_cpu_conv_direct) */
#ifdef HAVE_DNNL
    /* only where selected: sizing builds (and caches) the primitives */
    if (cdp_cpu_conv_dnnl_use(s)) {
        size_t e = cdp_cpu_conv_dnnl_ws_floats(s);
        n = n > e ? n : e;
    }
#endif
    return n;
}

static int conv_threads(const cdp_conv_shape *s, const conv_plan *p)
{
    return cdp_cpu_conv_threads((double)s->B * (double)p->P * (double)p->K * (double)s->Cout,
                                p->S);
}

/* col[K][g*P] = the patches of samples b0..b0+g-1 (zero outside x) */
static void im2col(const cdp_conv_shape *s, const float *x, int b0, int g, float *col)
{
    const int H = s->H, W = s->W, OH = s->OH, OW = s->OW, st = s->stride, pad = s->pad;
    const size_t P = (size_t)OH * (size_t)OW, ld = (size_t)g * P;
    for (int ci = 0; ci < s->Cin; ci++)
        for (int kh = 0; kh < s->KH; kh++)
            for (int kw = 0; kw < s->KW; kw++) {
                float *r = col + (size_t)((ci * s->KH + kh) * s->KW + kw) * ld;
                /* stride 1: ow in [lo, hi) reads x, the rest is padding */
                int lo = pad - kw, hi = W + pad - kw;
                lo = lo < 0 ? 0 : lo > OW ? OW : lo;
                hi = hi > OW ? OW : hi < lo ? lo : hi;
                for (int gi = 0; gi < g; gi++) {
                    const float *xp = x + ((size_t)(b0 + gi) * (size_t)s->Cin + (size_t)ci)
                                          * (size_t)H * (size_t)W;
                    float *rg = r + (size_t)gi * P;
                    for (int oh = 0; oh < OH; oh++) {
                        float *o = rg + (size_t)oh * (size_t)OW;
                        int ih = oh * st - pad + kh;
                        if (ih < 0 || ih >= H) {
                            memset(o, 0, (size_t)OW * sizeof *o);
                            continue;
                        }
                        const float *xr = xp + (size_t)ih * (size_t)W;
                        if (st == 1) {
                            for (int ow = 0; ow < lo; ow++)
                                o[ow] = 0.0f;
                            if (hi > lo)
                                memcpy(o + lo, xr + lo - pad + kw, (size_t)(hi - lo) * sizeof *o);
                            for (int ow = hi; ow < OW; ow++)
                                o[ow] = 0.0f;
                        } else {
                            for (int ow = 0; ow < OW; ow++) {
                                int iw = ow * st - pad + kw;
                                o[ow] = iw >= 0 && iw < W ? xr[iw] : 0.0f;
                            }
                        }
                    }
                }
            }
}

/* dx planes of samples b0..b0+g-1 = the sum of the patch gradients
 * dcol[K][g*P] that fall on them, each plane cleared first and then
 * gathering in the order (kh, kw, oh, ow) */
static void col2im(const cdp_conv_shape *s, const float *dcol, int b0, int g, float *dx)
{
    const int H = s->H, W = s->W, OH = s->OH, OW = s->OW, st = s->stride, pad = s->pad;
    const size_t P = (size_t)OH * (size_t)OW, ld = (size_t)g * P;
    for (int gi = 0; gi < g; gi++)
        for (int ci = 0; ci < s->Cin; ci++) {
            float *dp = dx + ((size_t)(b0 + gi) * (size_t)s->Cin + (size_t)ci)
                             * (size_t)H * (size_t)W;
            memset(dp, 0, (size_t)H * (size_t)W * sizeof *dp);
            for (int kh = 0; kh < s->KH; kh++)
                for (int kw = 0; kw < s->KW; kw++) {
                    const float *r = dcol + (size_t)((ci * s->KH + kh) * s->KW + kw) * ld
                                     + (size_t)gi * P;
                    /* the ow whose iw = ow*st - pad + kw falls inside [0, W): a
                     * range, so the inner loop has no test and vectorizes */
                    int lo = 0, hi = OW;
                    while (lo < OW && lo * st - pad + kw < 0)
                        lo++;
                    while (hi > lo && (hi - 1) * st - pad + kw >= W)
                        hi--;
                    for (int oh = 0; oh < OH; oh++) {
                        int ih = oh * st - pad + kh;
                        if (ih < 0 || ih >= H)
                            continue;
                        const float *rr = r + (size_t)oh * (size_t)OW;
                        if (hi <= lo)
                            continue;
                        float *d = dp + (size_t)ih * (size_t)W + (size_t)(lo * st - pad + kw);
                        if (st == 1) {
                            for (int q = 0; q < hi - lo; q++)
                                d[q] = d[q] + rr[lo + q];
                        } else {
                            for (int q = 0; q < hi - lo; q++)
                                d[(size_t)q * st] = d[(size_t)q * st] + rr[lo + q];
                        }
                    }
                }
        }
}

void cdp_cpu_conv2d_fwd(const cdp_conv_shape *s, const float *x, const float *w,
                        const float *b, float *y, float *ws)
{
    const conv_plan p = conv_plan_make(s);
    const int Cout = s->Cout;
    if (s->B <= 0 || Cout <= 0 || p.P <= 0)
        return;
    const size_t P = (size_t)p.P;
    if (p.K <= 0) {   /* no input channels: the bias alone */
        for (size_t i = 0; i < (size_t)s->B * (size_t)Cout; i++)
            for (size_t q = 0; q < P; q++)
                y[i * P + q] = b ? b[i % (size_t)Cout] : 0.0f;
        return;
    }
    if (cdp_conv_groups(s) > 1) {   /* kernels_conv_grouped.c */
        cdp_cpu_conv2d_grouped_fwd(s, x, w, b, y);
        return;
    }
#ifdef HAVE_DNNL
    if (cdp_cpu_conv_dnnl_use(s)) {   /* kernels_conv_dnnl.c */
        cdp_cpu_conv2d_dnnl_fwd(s, x, w, b, y, ws);
        return;
    }
#endif
    if (cdp_cpu_conv_direct_use(s, 0)) {   /* kernels_conv_direct.c */
        cdp_cpu_conv2d_direct_fwd(s, x, w, b, y, ws);
        return;
    }
    const int nt = conv_threads(s, &p);
#pragma omp parallel for if (nt > 1) num_threads(nt) schedule(static)
    for (int sl = 0; sl < p.S; sl++) {
        float *col = ws + (size_t)sl * p.slot, *tmp = col + p.col;
        for (int c = 0; c < p.m; c++) {
            int b0, b1;
            conv_chunk(s, &p, sl, c, &b0, &b1);
            int g = b1 - b0;
            if (g <= 0)
                continue;
            size_t nc = (size_t)g * P;
            const float *cp = col;
            if (p.ident && g == 1)
                cp = x + (size_t)b0 * (size_t)s->Cin * P;
            else
                im2col(s, x, b0, g, col);
            float *op = g == 1 ? y + (size_t)b0 * (size_t)Cout * P : tmp;
            if (b)
                for (int co = 0; co < Cout; co++)
                    for (size_t q = 0; q < nc; q++)
                        op[(size_t)co * nc + q] = b[co];
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, Cout, (int)nc, p.K,
                        1.0f, w, p.K, cp, (int)nc, b ? 1.0f : 0.0f, op, (int)nc);
            if (g > 1)
                for (int gi = 0; gi < g; gi++)
                    for (int co = 0; co < Cout; co++)
                        memcpy(y + ((size_t)(b0 + gi) * (size_t)Cout + (size_t)co) * P,
                               tmp + (size_t)co * nc + (size_t)gi * P, P * sizeof *y);
        }
    }
}

/* db[co] (= or +=) the sum of dy over the samples and pixels of channel co,
 * in double, b = 0..B-1 then p = 0..P-1 */
void cdp_cpu_conv_db(const cdp_conv_shape *s, size_t P, const float *dy, float *db,
                     int accumulate)
{
    const int Cout = s->Cout;
#pragma omp parallel for CDP_CPU_PAR((size_t)s->B * (size_t)Cout * P)
    for (int co = 0; co < Cout; co++) {
        double sum = 0.0;
        for (int b = 0; b < s->B; b++) {
            const float *d = dy + ((size_t)b * (size_t)Cout + (size_t)co) * P;
            for (size_t q = 0; q < P; q++)
                sum += (double)d[q];
        }
        float r = (float)sum;
        db[co] = accumulate ? db[co] + r : r;
    }
}

void cdp_cpu_conv2d_bwd(const cdp_conv_shape *s, const float *x, const float *w,
                        const float *dy, float *dx, float *dw, float *db, int accumulate,
                        float *ws)
{
    const conv_plan p = conv_plan_make(s);
    const int Cout = s->Cout;
    const size_t nw = cdp_conv_weight_count(s);
    if (Cout <= 0)
        return;
    if (s->B <= 0 || p.P <= 0 || p.K <= 0) {
        /* nothing flows: zero gradients (unchanged with accumulate) */
        if (!accumulate) {
            if (nw)
                memset(dw, 0, nw * sizeof *dw);
            if (db)
                memset(db, 0, (size_t)Cout * sizeof *db);
        }
        if (dx && s->B > 0)
            memset(dx, 0, (size_t)s->B * (size_t)s->Cin * (size_t)s->H * (size_t)s->W
                          * sizeof *dx);
        return;
    }
    const size_t P = (size_t)p.P;
    if (db)
        cdp_cpu_conv_db(s, P, dy, db, accumulate);
    if (cdp_conv_groups(s) > 1) {   /* dw, dx: kernels_conv_grouped.c */
        cdp_cpu_conv2d_grouped_bwd(s, x, w, dy, dx, dw, accumulate);
        return;
    }
#ifdef HAVE_DNNL
    if (cdp_cpu_conv_dnnl_use(s)) {   /* dw, dx: kernels_conv_dnnl.c */
        cdp_cpu_conv2d_dnnl_bwd(s, x, w, dy, dx, dw, accumulate, ws);
        return;
    }
#endif
    if (cdp_cpu_conv_direct_use(s, dx ? 1 : 2)) {   /* dw, dx: kernels_conv_direct.c */
        cdp_cpu_conv2d_direct_bwd(s, x, w, dy, dx, dw, accumulate, ws);
        return;
    }
    const int nt = conv_threads(s, &p);
#pragma omp parallel for if (nt > 1) num_threads(nt) schedule(static)
    for (int sl = 0; sl < p.S; sl++) {
        float *col = ws + (size_t)sl * p.slot, *tmp = col + p.col, *part = tmp + p.tmp;
        int first = 1;
        for (int c = 0; c < p.m; c++) {
            int b0, b1;
            conv_chunk(s, &p, sl, c, &b0, &b1);
            int g = b1 - b0;
            if (g <= 0)
                continue;
            size_t nc = (size_t)g * P;
            const float *dyp = tmp;
            if (g == 1)
                dyp = dy + (size_t)b0 * (size_t)Cout * P;
            else
                for (int gi = 0; gi < g; gi++)
                    for (int co = 0; co < Cout; co++)
                        memcpy(tmp + (size_t)co * nc + (size_t)gi * P,
                               dy + ((size_t)(b0 + gi) * (size_t)Cout + (size_t)co) * P,
                               P * sizeof *tmp);
            int direct = p.ident && g == 1;
            const float *cp = col;
            if (direct)
                cp = x + (size_t)b0 * (size_t)s->Cin * P;
            else
                im2col(s, x, b0, g, col);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, Cout, p.K, (int)nc,
                        1.0f, dyp, (int)nc, cp, (int)nc, first ? 0.0f : 1.0f, part, p.K);
            first = 0;
            if (!dx)
                continue;
            if (direct) {
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, p.K, (int)nc, Cout,
                            1.0f, w, p.K, dyp, (int)nc, 0.0f,
                            dx + (size_t)b0 * (size_t)s->Cin * P, (int)nc);
            } else {
                /* col is free again: it takes the patch gradients */
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, p.K, (int)nc, Cout,
                            1.0f, w, p.K, dyp, (int)nc, 0.0f, col, (int)nc);
                col2im(s, col, b0, g, dx);
            }
        }
    }
    /* dw = the slots' partial sums in slot order (then added to dw) */
    cdp_cpu_conv_dw_sum(nw, p.S, ws + p.col + p.tmp, p.slot, dw, accumulate);
}
