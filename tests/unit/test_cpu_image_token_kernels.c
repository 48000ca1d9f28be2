/* Unit tests of the CPU backend's image kernels (conv2d, batchnorm, pooling,
 * add3; src/cpu/kernels_conv*.c, kernels_norm.c, kernels_pool.c) and of its
 * transformer token kernels (kernels_tokens.c, kernels_gelu.c: the "tokens"
 * TCase, last below).  For each kernel the test has an independent
 * reference in double precision written with direct loops (no im2col), and
 * checks:
 *   1. the float kernel against the reference on random inputs, over many
 *      shapes (stride 2, padding 0/1/3, 7x7 and 1x1 kernels, non-square and
 *      odd sizes, B = 1 and B > 1, with and without bias);
 *   2. the reference's backward against central finite differences in
 *      double (the finite-difference check of each layer's backward), then
 *      the float backward against the reference backward;
 *   3. accumulate mode bitwise equal to a separate result added with add();
 *   4. the same bits with 1, 2 and 3 threads;
 *   5. batchnorm's running statistics against a two-pass computation over
 *      the concatenated data, a hand example, and the eval formula;
 *   6. max pooling's first-maximum tie-breaking and padding, average
 *      pooling's summation order.
 * The direct 3x3 stride-1 convolution (kernels_conv_direct.c) is forced on
 * (cdp_cpu_conv_direct = 2) over its own shapes (channels 1..64, images 28,
 * 14, 8, 7, 5x9, 3x3, B = 1, 3, 32, pad 0, 1, 2) for 1 and 3: against the
 * reference, dx NULL, accumulate, threads; its AVX-512 and portable kernels
 * must give the same bits, and its bits must differ from im2col's somewhere
 * (proof that the switch reached it).
 * The oneDNN convolution (kernels_conv_dnnl.c, TCase "dnnl") is forced on
 * (cdp_cpu_conv_dnnl = 2) over 14 shapes (3x3, 1x1, 7x7, 5x3; strides 1, 2,
 * 3; padding 0..3; odd and tiny images; B = 1 and B above the slots, slots
 * of unequal sizes): against the reference, dx NULL, accumulate, 1, 2 and
 * 3 threads, bits that differ from im2col's (so the switch reached it), and
 * the default policy; a build without oneDNN prints them as SKIP.
 * The transformer kernels (TCase "tokens": batched GEMM, softmax, LayerNorm,
 * GELU, patch/class tokens, add_rows, sum_rows, copy_rows) likewise: double
 * references with direct loops (the GEMM for all four transpose cases, with
 * padded row strides and batch strides, beta 0 over NaN and beta 1), the
 * references' backward against central differences (softmax, LayerNorm,
 * GELU), hand values, the contract's float formulas bit for bit where it
 * fixes them, accumulate mode, in-place use, and 1, 2, 3 threads. */
#include "config.h"   /* HAVE_DNNL */

#include <check.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "util/rng.h"
#include "../lib/check_util.h"
#include "../../src/cpu/cpu_internal.h"   /* cdp_cpu_conv_direct*: the path switches */
#include "../lib/ref_norm.h"
#include "../lib/conv_ref.h"
#include "../lib/check_run.h"

/* ------------------------------------------------------------ helpers */

static void fill(float *p, size_t n, uint64_t stream, float lo, float hi)
{
    for (size_t k = 0; k < n; k++)
        p[k] = lo + (hi - lo) * cdp_rand_unit(4242, stream, k);
}

static void fill_d(double *p, size_t n, uint64_t stream, double lo, double hi)
{
    for (size_t k = 0; k < n; k++)
        p[k] = lo + (hi - lo) * (double)cdp_rand_unit(4343, stream, k);
}

/* analytic (double) vs finite difference: |a - f| <= tol * max(|f|, max|f|) */
static void check_fd(const char *what, const double *a, const double *f, size_t n, double tol)
{
    double mx = 0.0;
    for (size_t k = 0; k < n; k++)
        mx = fmax(mx, fabs(f[k]));
    for (size_t k = 0; k < n; k++)
        if (!(fabs(a[k] - f[k]) <= tol * (mx > 0 ? mx : 1.0)))
            ck_abort_msg("%s[%zu]: analytic %.12g vs finite difference %.12g", what, k, a[k], f[k]);
}

static void check_same(const char *what, const void *a, const void *b, size_t bytes)
{
    if (memcmp(a, b, bytes) != 0) {
        const unsigned char *x = a, *y = b;
        size_t k = 0;
        while (x[k] == y[k])
            k++;
        ck_abort_msg("%s: bits differ (first at byte %zu of %zu)", what, k, bytes);
    }
}

static double dot(const double *a, const double *b, size_t n)
{
    double s = 0.0;
    for (size_t k = 0; k < n; k++)
        s += a[k] * b[k];
    return s;
}

/* ------------------------------------------------------------ conv reference */

/* B, Cin, H, W, Cout, KH, KW, stride, pad, bias */
static const int conv_shapes[][10] = {
    {1, 1, 5, 5, 1, 3, 3, 1, 1, 1},
    {2, 3, 7, 9, 4, 3, 3, 2, 1, 0},     /* stride 2, non-square, odd */
    {3, 2, 11, 10, 5, 7, 7, 2, 3, 1},   /* 7x7, pad 3, stride 2 */
    {4, 6, 8, 8, 7, 1, 1, 2, 0, 0},     /* 1x1 stride 2 shortcut */
    {2, 5, 6, 7, 3, 1, 1, 1, 0, 1},     /* 1x1 stride 1: no im2col */
    {5, 4, 9, 9, 6, 3, 3, 1, 0, 1},     /* pad 0 */
    {1, 3, 13, 6, 8, 5, 3, 3, 2, 1},    /* non-square kernel, stride 3 */
    {32, 16, 7, 7, 32, 3, 3, 1, 1, 0},  /* several samples per chunk, parallel */
    {4, 8, 32, 32, 16, 3, 3, 1, 1, 1},  /* one sample per chunk, parallel */
    {24, 8, 9, 9, 40, 1, 1, 1, 0, 1},   /* 1x1 stride 1 over chunks */
    {6, 3, 2, 3, 2, 3, 3, 1, 1, 1},     /* image smaller than the kernel */
};
#define NCONV (sizeof conv_shapes / sizeof *conv_shapes)

/* a row {B, Cin, H, W, Cout, KH, KW, stride, pad, ...} with its output size */
static cdp_conv_shape shape_of_row(const int *v)
{
    cdp_conv_shape s = {v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], 0, 0, 1};
    s.OH = (s.H + 2 * s.pad - s.KH) / s.stride + 1;
    s.OW = (s.W + 2 * s.pad - s.KW) / s.stride + 1;
    return s;
}

static cdp_conv_shape conv_shape(int i)
{
    return shape_of_row(conv_shapes[i]);
}

static size_t nx_of(const cdp_conv_shape *s) { return (size_t)s->B * s->Cin * s->H * s->W; }
static size_t ny_of(const cdp_conv_shape *s) { return (size_t)s->B * s->Cout * s->OH * s->OW; }
static size_t nw_of(const cdp_conv_shape *s) { return (size_t)s->Cout * s->Cin * s->KH * s->KW; }

/* L = sum(conv(x, w, b) * r) */
static double conv_loss(const cdp_conv_shape *s, const double *x, const double *w,
                        const double *b, const double *r, double *y)
{
    conv_ref_fwd(s, x, w, b, y);
    return dot(y, r, ny_of(s));
}

/* central differences of L over every element of p (n of them) */
static void fd_grad(double *p, size_t n, double h, double *g,
                    double (*loss)(void *), void *ctx)
{
    for (size_t k = 0; k < n; k++) {
        double v = p[k];
        p[k] = v + h;
        double lp = loss(ctx);
        p[k] = v - h;
        double lm = loss(ctx);
        p[k] = v;
        g[k] = (lp - lm) / (2.0 * h);
    }
}

struct conv_ctx {
    const cdp_conv_shape *s;
    double *x, *w, *b, *r, *y;
};

static double conv_ctx_loss(void *c)
{
    struct conv_ctx *q = c;
    return conv_loss(q->s, q->x, q->w, q->b, q->r, q->y);
}

/* the float kernels' outputs for one shape */
struct conv_out {
    float *y, *dx, *dw, *db;
};

static void conv_run(const cdp_backend *be, const cdp_conv_shape *s, const float *x,
                     const float *w, const float *b, const float *dy, struct conv_out *o)
{
    size_t nws = be->conv2d_ws_floats(s);
    float *ws = fbuf(nws + 1);
    fill(ws, nws, 99, -1e30f, 1e30f);   /* garbage: nothing may read it unwritten */
    o->y = fbuf(ny_of(s));
    o->dx = fbuf(nx_of(s));
    o->dw = fbuf(nw_of(s));
    o->db = fbuf((size_t)s->Cout);
    be->conv2d_fwd(s, x, w, b, o->y, ws);
    fill(ws, nws, 98, -1e30f, 1e30f);
    be->conv2d_bwd(s, x, w, dy, o->dx, o->dw, b ? o->db : NULL, 0, ws);
    free(ws);
}

static void conv_out_free(struct conv_out *o)
{
    free(o->y); free(o->dx); free(o->dw); free(o->db);
}

/* random inputs of one shape, each from its own stream after seed */
struct conv_in {
    float *x, *w, *b, *dy;
};

static struct conv_in conv_in_make(const cdp_conv_shape *s, uint64_t seed)
{
    struct conv_in in = {fbuf(nx_of(s)), fbuf(nw_of(s)), fbuf((size_t)s->Cout), fbuf(ny_of(s))};
    fill(in.x, nx_of(s), seed, -1, 1);
    fill(in.w, nw_of(s), seed + 1, -0.5f, 0.5f);
    fill(in.b, (size_t)s->Cout, seed + 2, -1, 1);
    fill(in.dy, ny_of(s), seed + 3, -1, 1);
    return in;
}

static void conv_in_free(struct conv_in *in)
{
    free(in->x); free(in->w); free(in->b); free(in->dy);
}

/* o (the float kernels on in) against the double reference, to 1e-5 */
static void check_conv_reference(const char *what, const cdp_conv_shape *s,
                                 const struct conv_in *in, int bias, const struct conv_out *o)
{
    size_t nx = nx_of(s), ny = ny_of(s), nw = nw_of(s);
    double *xd = to_d(in->x, nx), *wd = to_d(in->w, nw), *bd = to_d(in->b, s->Cout);
    double *dyd = to_d(in->dy, ny), *y = dbuf(ny), *dx = dbuf(nx), *dw = dbuf(nw);
    double *db = dbuf(s->Cout);
    conv_ref_fwd(s, xd, wd, bias ? bd : NULL, y);
    conv_ref_bwd(s, xd, wd, dyd, dx, dw, db);
    char m[128];
    snprintf(m, sizeof m, "%s y", what);
    check_close(m, o->y, y, ny, 1e-5);
    snprintf(m, sizeof m, "%s dx", what);
    check_close(m, o->dx, dx, nx, 1e-5);
    snprintf(m, sizeof m, "%s dw", what);
    check_close(m, o->dw, dw, nw, 1e-5);
    if (bias) {
        snprintf(m, sizeof m, "%s db", what);
        check_close(m, o->db, db, s->Cout, 1e-5);
    }
    free(xd); free(wd); free(bd); free(dyd); free(y); free(dx); free(dw); free(db);
}

static void check_same_out(const char *what, const cdp_conv_shape *s, const struct conv_out *a,
                           const struct conv_out *b, int bias)
{
    char m[96];
    snprintf(m, sizeof m, "%s y", what);
    check_same(m, a->y, b->y, ny_of(s) * sizeof(float));
    snprintf(m, sizeof m, "%s dx", what);
    check_same(m, a->dx, b->dx, nx_of(s) * sizeof(float));
    snprintf(m, sizeof m, "%s dw", what);
    check_same(m, a->dw, b->dw, nw_of(s) * sizeof(float));
    if (bias) {
        snprintf(m, sizeof m, "%s db", what);
        check_same(m, a->db, b->db, s->Cout * sizeof(float));
    }
}

/* the same bits with 1, 2 (twice) and 3 threads at one split; *path = on (after the
 * backend is made, which reads the environment) picks the kernels, path NULL
 * keeps the default policy */
static void check_threads_bitwise(const cdp_conv_shape *s, int bias, uint64_t seed,
                                  const char *split, int *path, int on, const char *what)
{
    struct conv_in in = conv_in_make(s, seed);
    static const int thr[] = {1, 2, 2, 3};   /* 2 twice: the same bits run to run */
    enum { R = sizeof thr / sizeof *thr };
    struct conv_out o[R];
    for (int r = 0; r < R; r++) {
        const cdp_backend *be = cpu_split(thr[r], split);
        if (path)
            *path = on;
        conv_run(be, s, in.x, in.w, bias ? in.b : NULL, in.dy, &o[r]);
    }
    for (int r = 1; r < R; r++)
        check_same_out(what, s, &o[0], &o[r], bias);
    for (int r = 0; r < R; r++)
        conv_out_free(&o[r]);
    conv_in_free(&in);
}

/* dx NULL leaves dw and db as they are with dx; accumulate adds exactly the
 * result computed alone (then add()); path names the kernels in messages */
static void check_accumulate_dx_null(const cdp_backend *be, const cdp_conv_shape *sp,
                                     uint64_t seed, int acc_with_dx, const char *path)
{
    const cdp_conv_shape s = *sp;
    size_t nx = nx_of(&s), nw = nw_of(&s);
    struct conv_in in = conv_in_make(&s, seed);
    float *dx = fbuf(nx), *gw = fbuf(nw), *gb = fbuf(s.Cout);
    float *nw_ = fbuf(nw), *nb = fbuf(s.Cout);
    float *sw = fbuf(nw), *sb = fbuf(s.Cout), *aw = fbuf(nw), *ab = fbuf(s.Cout);
    size_t nws = be->conv2d_ws_floats(&s);
    float *ws = fbuf(nws + 1);
    char what[64];
    fill(ws, nws, 97, -1e30f, 1e30f);
    be->conv2d_bwd(&s, in.x, in.w, in.dy, dx, gw, gb, 0, ws);
    fill(ws, nws, 96, -1e30f, 1e30f);
    be->conv2d_bwd(&s, in.x, in.w, in.dy, NULL, nw_, nb, 0, ws);
    snprintf(what, sizeof what, "%s dx NULL dw", path);
    check_same(what, gw, nw_, nw * sizeof *gw);
    snprintf(what, sizeof what, "%s dx NULL db", path);
    check_same(what, gb, nb, s.Cout * sizeof *gb);
    fill(sw, nw, 53, -3, 3);
    fill(sb, s.Cout, 54, -3, 3);
    memcpy(aw, sw, nw * sizeof *aw);
    memcpy(ab, sb, s.Cout * sizeof *ab);
    be->add(nw, sw, gw);
    be->add(s.Cout, sb, gb);
    be->conv2d_bwd(&s, in.x, in.w, in.dy, acc_with_dx ? dx : NULL, aw, ab, 1, ws);
    snprintf(what, sizeof what, "%s accumulate dw", path);
    check_same(what, sw, aw, nw * sizeof *sw);
    snprintf(what, sizeof what, "%s accumulate db", path);
    check_same(what, sb, ab, s.Cout * sizeof *sb);
    conv_in_free(&in);
    free(dx); free(gw); free(gb); free(nw_); free(nb); free(sw); free(sb);
    free(aw); free(ab); free(ws);
}

/* ------------------------------------------------------------ conv tests */

START_TEST(conv_fd_reference)
{
    /* small shapes: the loss is linear in each parameter, so central
     * differences are exact up to rounding */
    static const int fd_shapes[][10] = {
        {2, 2, 5, 4, 3, 3, 3, 2, 1, 1}, {1, 2, 4, 5, 2, 1, 1, 2, 0, 1},
        {2, 1, 6, 6, 2, 7, 7, 1, 3, 1}, {1, 3, 5, 5, 2, 3, 2, 1, 0, 1}};
    for (size_t i = 0; i < sizeof fd_shapes / sizeof *fd_shapes; i++) {
        cdp_conv_shape s = shape_of_row(fd_shapes[i]);
        size_t nx = nx_of(&s), ny = ny_of(&s), nw = nw_of(&s);
        double *x = dbuf(nx), *w = dbuf(nw), *b = dbuf(s.Cout), *r = dbuf(ny), *y = dbuf(ny);
        double *dx = dbuf(nx), *dw = dbuf(nw), *db = dbuf(s.Cout);
        double *fx = dbuf(nx), *fw = dbuf(nw), *fb = dbuf(s.Cout);
        fill_d(x, nx, 1, -1, 1);
        fill_d(w, nw, 2, -1, 1);
        fill_d(b, s.Cout, 3, -1, 1);
        fill_d(r, ny, 4, -1, 1);
        conv_ref_bwd(&s, x, w, r, dx, dw, db);
        struct conv_ctx c = {&s, x, w, b, r, y};
        fd_grad(x, nx, 1e-3, fx, conv_ctx_loss, &c);
        fd_grad(w, nw, 1e-3, fw, conv_ctx_loss, &c);
        fd_grad(b, s.Cout, 1e-3, fb, conv_ctx_loss, &c);
        check_fd("conv dx", dx, fx, nx, 1e-9);
        check_fd("conv dw", dw, fw, nw, 1e-9);
        check_fd("conv db", db, fb, s.Cout, 1e-9);
        free(x); free(w); free(b); free(r); free(y);
        free(dx); free(dw); free(db); free(fx); free(fw); free(fb);
    }
}
END_TEST

START_TEST(conv_vs_reference)
{
    static const char *splits[] = {NULL, "1", "4"};
    for (size_t sp = 0; sp < 3; sp++)
        for (size_t i = 0; i < NCONV; i++) {
            const cdp_backend *be = cpu_split(2, splits[sp]);
            cdp_conv_shape s = conv_shape((int)i);
            int bias = conv_shapes[i][9];
            struct conv_in in = conv_in_make(&s, 10 + 10 * i);
            struct conv_out o;
            conv_run(be, &s, in.x, in.w, bias ? in.b : NULL, in.dy, &o);
            char what[96];
            snprintf(what, sizeof what, "conv shape %zu split %s", i, splits[sp] ? splits[sp] : "-");
            check_conv_reference(what, &s, &in, bias, &o);
            conv_out_free(&o);
            conv_in_free(&in);
        }
}
END_TEST

START_TEST(conv_accumulate)
{
    for (int t = 1; t <= 2; t++)
        for (size_t i = 0; i < NCONV; i++) {
            cdp_conv_shape s = conv_shape((int)i);
            check_accumulate_dx_null(cpu_split(t, NULL), &s, 50 + 10 * i, i % 2 == 0, "conv");
        }
}
END_TEST

START_TEST(conv_threads)
{
    static const char *splits[] = {NULL, "4"};
    for (size_t sp = 0; sp < 2; sp++)
        for (size_t i = 0; i < NCONV; i++) {
            cdp_conv_shape s = conv_shape((int)i);
            check_threads_bitwise(&s, conv_shapes[i][9], 60 + 10 * i, splits[sp], NULL, 0,
                                  "conv threads");
        }
}
END_TEST

/* ------------------------------------------------------------ direct conv */

/* B, Cin, H, W, Cout, pad, bias: 3x3 stride 1, all taken by the direct path
 * when forced (tails of 1..3 channels and of 1..3 vectors included) */
static const int direct_shapes[][7] = {
    {3, 16, 28, 28, 16, 1, 1},   /* resnet20 stage 1 */
    {1, 32, 14, 14, 32, 1, 0},   /* stage 2, one sample */
    {32, 16, 7, 7, 32, 1, 1},    /* many samples per dw chunk */
    {3, 64, 7, 7, 64, 1, 0},     /* stage 3 */
    {32, 1, 28, 28, 16, 1, 1},   /* stem */
    {3, 8, 8, 8, 5, 1, 1},       /* odd Cout: tiles of 3 and 2 channels */
    {3, 3, 5, 9, 7, 1, 1},       /* odd, non-square */
    {2, 4, 5, 9, 3, 0, 0},       /* pad 0 */
    {2, 16, 28, 28, 32, 0, 1},   /* pad 0 at 28 */
    {1, 5, 9, 6, 4, 2, 1},       /* pad 2 */
    {3, 2, 3, 3, 2, 0, 1},       /* one output pixel */
};
#define NDIRECT (sizeof direct_shapes / sizeof *direct_shapes)

static cdp_conv_shape direct_shape(int i)
{
    const int *v = direct_shapes[i];
    cdp_conv_shape s = {v[0], v[1], v[2], v[3], v[4], 3, 3, 1, v[5], 0, 0, 1};
    s.OH = s.H + 2 * s.pad - 2;
    s.OW = s.W + 2 * s.pad - 2;
    ck_assert_msg(cdp_cpu_conv_direct_supported(&s), "direct shape %d not supported", i);
    return s;
}

START_TEST(conv_direct_vs_reference)
{
    static const char *splits[] = {NULL, "1", "4"};
    cdp_cpu_conv_direct = 2;
    for (size_t sp = 0; sp < 3; sp++)
        for (size_t i = 0; i < NDIRECT; i++) {
            const cdp_backend *be = cpu_split(2, splits[sp]);
            cdp_conv_shape s = direct_shape((int)i);
            int bias = direct_shapes[i][6];
            struct conv_in in = conv_in_make(&s, 100 + 10 * i);
            struct conv_out o;
            conv_run(be, &s, in.x, in.w, bias ? in.b : NULL, in.dy, &o);
            char what[96];
            snprintf(what, sizeof what, "direct shape %zu split %s", i, splits[sp] ? splits[sp] : "-");
            check_conv_reference(what, &s, &in, bias, &o);
            conv_out_free(&o);
            conv_in_free(&in);
        }
}
END_TEST

START_TEST(conv_direct_accumulate_dx_null)
{
    cdp_cpu_conv_direct = 2;
    for (int t = 1; t <= 2; t++)
        for (size_t i = 0; i < NDIRECT; i++) {
            const cdp_backend *be = cpu_split(t, NULL);
            cdp_conv_shape s = direct_shape((int)i);
            check_accumulate_dx_null(be, &s, 300 + 10 * i, i % 2 == 0, "direct");
        }
}
END_TEST

/* the same bits with 1, 2, 3 threads (split 2 by default here, and 4) */
START_TEST(conv_direct_threads)
{
    static const char *splits[] = {"2", "4"};
    for (size_t sp = 0; sp < 2; sp++)
        for (size_t i = 0; i < NDIRECT; i++) {
            cdp_conv_shape s = direct_shape((int)i);
            check_threads_bitwise(&s, direct_shapes[i][6], 500 + 10 * i, splits[sp],
                                  &cdp_cpu_conv_direct, 2, "direct threads");
        }
    cdp_cpu_conv_direct = 1;
}
END_TEST

/* the AVX-512 kernels and the portable fmaf ones: the same chains, the same
 * bits (on a machine without AVX-512 both runs take the portable ones); and
 * the direct path's bits differ from im2col's (another summation order), so
 * the tests above did run it */
START_TEST(conv_direct_simd_portable)
{
    int differs = 0;
    for (size_t i = 0; i < NDIRECT; i++) {
        const cdp_backend *be = cpu_split(2, NULL);
        cdp_conv_shape s = direct_shape((int)i);
        int bias = direct_shapes[i][6];
        struct conv_in in = conv_in_make(&s, 700 + 10 * i);
        struct conv_out simd, port, gemm;
        cdp_cpu_conv_direct = 2;
        cdp_cpu_conv_direct_simd = 1;
        conv_run(be, &s, in.x, in.w, bias ? in.b : NULL, in.dy, &simd);
        cdp_cpu_conv_direct_simd = 0;
        conv_run(be, &s, in.x, in.w, bias ? in.b : NULL, in.dy, &port);
        cdp_cpu_conv_direct_simd = 1;
        check_same_out("direct simd vs portable", &s, &simd, &port, bias);
        cdp_cpu_conv_direct = 0;
        conv_run(be, &s, in.x, in.w, bias ? in.b : NULL, in.dy, &gemm);
        cdp_cpu_conv_direct = 1;
        if (memcmp(simd.y, gemm.y, ny_of(&s) * sizeof(float)) != 0
            && memcmp(simd.dw, gemm.dw, nw_of(&s) * sizeof(float)) != 0)
            differs++;
        conv_out_free(&simd);
        conv_out_free(&port);
        conv_out_free(&gemm);
        conv_in_free(&in);
    }
    ck_assert_msg(differs >= 3, "direct and im2col bits differ on only %d shapes", differs);
}
END_TEST

/* the default policy takes the direct path on resnet20's 3x3 layers (the
 * stem's backward when dx is not needed) and im2col where it measured
 * slower (4x4) or cannot (stride 2); on a CPU without AVX-512, where it was
 * not measured, never (CDP_CONV_DIRECT=2 still forces it) */
START_TEST(conv_direct_policy)
{
    cdp_conv_shape r20 = {128, 16, 28, 28, 16, 3, 3, 1, 1, 28, 28, 1};
    cdp_conv_shape r18l4 = {64, 512, 4, 4, 512, 3, 3, 1, 1, 4, 4, 1};
    cdp_conv_shape s2 = {8, 16, 28, 28, 32, 3, 3, 2, 1, 14, 14, 1};
    int avx512 = 0;
#if defined(__x86_64__) && defined(__GNUC__) && !defined(CDP_NO_AVX512)   /* as the kernels */
    avx512 = __builtin_cpu_supports("avx512f");
#endif
    cdp_cpu_conv_direct = 2;
    ck_assert(cdp_cpu_conv_direct_use(&r20, 0) && cdp_cpu_conv_direct_use(&r20, 1));
    cdp_cpu_conv_direct = 1;
    if (!avx512) {
        ck_assert(!cdp_cpu_conv_direct_use(&r20, 0) && !cdp_cpu_conv_direct_use(&r20, 1));
        cdp_cpu_conv_direct = 0;
        return;
    }
    ck_assert(cdp_cpu_conv_direct_use(&r20, 0) && cdp_cpu_conv_direct_use(&r20, 1));
    ck_assert(!cdp_cpu_conv_direct_use(&r18l4, 0) && !cdp_cpu_conv_direct_use(&r18l4, 1));
    cdp_conv_shape stem = {128, 1, 28, 28, 16, 3, 3, 1, 1, 28, 28, 1};
    ck_assert(cdp_cpu_conv_direct_use(&stem, 0) && !cdp_cpu_conv_direct_use(&stem, 1)
              && cdp_cpu_conv_direct_use(&stem, 2));
    ck_assert(!cdp_cpu_conv_direct_supported(&s2) && !cdp_cpu_conv_direct_use(&s2, 0));
    cdp_cpu_conv_direct = 0;
    ck_assert(!cdp_cpu_conv_direct_use(&r20, 0));
    cdp_cpu_conv_direct = 2;
    ck_assert(cdp_cpu_conv_direct_use(&r18l4, 1));
    cdp_cpu_conv_direct = 1;
}
END_TEST

/* ------------------------------------------------------------ oneDNN conv */

#ifdef HAVE_DNNL
/* B, Cin, H, W, Cout, KH, KW, stride, pad, bias: every one taken by the
 * oneDNN path when forced (cdp_cpu_conv_dnnl = 2) */
static const int dnnl_shapes[][10] = {
    {3, 16, 28, 28, 16, 3, 3, 1, 1, 1},   /* resnet20 stage 1 */
    {5, 32, 14, 14, 32, 3, 3, 1, 1, 0},   /* slots of 2 and 3 samples */
    {1, 16, 8, 8, 32, 3, 3, 2, 1, 1},     /* stride 2, one sample */
    {4, 16, 9, 9, 24, 3, 3, 2, 1, 0},     /* stride 2 on an odd image */
    {2, 16, 7, 7, 16, 3, 3, 1, 0, 1},     /* pad 0 */
    {3, 20, 6, 5, 17, 3, 3, 1, 2, 1},     /* pad 2, odd channels, non-square */
    {4, 16, 8, 8, 32, 1, 1, 2, 0, 0},     /* 1x1 stride 2: negative right padding */
    {3, 8, 10, 10, 12, 1, 1, 1, 0, 1},    /* 1x1 stride 1 */
    {2, 3, 16, 16, 16, 7, 7, 2, 3, 1},    /* 7x7 stem */
    {2, 1, 28, 28, 16, 3, 3, 1, 1, 1},    /* one input channel */
    {9, 64, 4, 4, 64, 3, 3, 1, 1, 0},     /* 4x4, more samples than slots */
    {1, 5, 3, 4, 3, 3, 3, 1, 1, 1},       /* tiny */
    {6, 3, 2, 3, 2, 3, 3, 1, 1, 1},       /* image smaller than the kernel */
    {2, 16, 5, 7, 16, 5, 3, 3, 2, 1},     /* non-square kernel, stride 3 */
};
#define NDNNL (sizeof dnnl_shapes / sizeof *dnnl_shapes)

static cdp_conv_shape dnnl_shape(int i)
{
    cdp_conv_shape s = shape_of_row(dnnl_shapes[i]);
    ck_assert_msg(cdp_cpu_conv_dnnl_supported(&s), "oneDNN shape %d not supported", i);
    return s;
}

/* against the double reference with 2 threads and splits 2, 1, 4; and bits
 * that differ from im2col's on most shapes (another summation order), so
 * the switch did reach oneDNN */
START_TEST(conv_dnnl_vs_reference)
{
    static const char *splits[] = {NULL, "1", "4"};
    int differs = 0;
    for (size_t sp = 0; sp < 3; sp++)
        for (size_t i = 0; i < NDNNL; i++) {
            const cdp_backend *be = cpu_split(2, splits[sp]);
            cdp_cpu_conv_dnnl = 2;
            cdp_conv_shape s = dnnl_shape((int)i);
            int bias = dnnl_shapes[i][9];
            struct conv_in in = conv_in_make(&s, 900 + 10 * i);
            struct conv_out o, gemm;
            conv_run(be, &s, in.x, in.w, bias ? in.b : NULL, in.dy, &o);
            char what[96];
            snprintf(what, sizeof what, "oneDNN shape %zu split %s", i, splits[sp] ? splits[sp] : "-");
            check_conv_reference(what, &s, &in, bias, &o);
            cdp_cpu_conv_dnnl = 0;
            conv_run(be, &s, in.x, in.w, bias ? in.b : NULL, in.dy, &gemm);
            if (memcmp(o.dw, gemm.dw, nw_of(&s) * sizeof(float)) != 0)
                differs++;
            conv_out_free(&o);
            conv_out_free(&gemm);
            conv_in_free(&in);
        }
    ck_assert_msg(differs >= (int)NDNNL, "oneDNN and im2col dw bits differ on only %d of %d runs",
                  differs, (int)(3 * NDNNL));
}
END_TEST

/* dx NULL leaves dw and db as they are with dx; accumulate adds exactly the
 * result computed alone (then add()) */
START_TEST(conv_dnnl_accumulate_dx_null)
{
    for (int t = 1; t <= 2; t++)
        for (size_t i = 0; i < NDNNL; i++) {
            const cdp_backend *be = cpu_split(t, NULL);
            cdp_cpu_conv_dnnl = 2;
            cdp_conv_shape s = dnnl_shape((int)i);
            check_accumulate_dx_null(be, &s, 1100 + 10 * i, i % 2 == 0, "oneDNN");
        }
}
END_TEST

/* the same bits with 1, 2, 3 threads (splits 2 and 4): oneDNN threads
 * nothing itself; the slots are the only parallelism */
START_TEST(conv_dnnl_threads)
{
    static const char *splits[] = {"2", "4"};
    for (size_t sp = 0; sp < 2; sp++)
        for (size_t i = 0; i < NDNNL; i++) {
            cdp_conv_shape s = dnnl_shape((int)i);
            check_threads_bitwise(&s, dnnl_shapes[i][9], 1300 + 10 * i, splits[sp],
                                  &cdp_cpu_conv_dnnl, 2, "oneDNN threads");
        }
}
END_TEST

/* n new shapes (one primitive set each, from first on): they evict the n
 * oldest sets of the round-robin cache */
static void dnnl_fill_cache(const cdp_backend *be, int first, int n)
{
    static float x[4 * 200], w[9], y[4 * 200];
    for (int i = first; i < first + n; i++) {
        cdp_conv_shape f = {1, 1, 4, 4 + i, 1, 3, 3, 1, 1, 4, 4 + i, 1};
        ck_assert(4 * f.W <= 4 * 200);
        size_t nws = be->conv2d_ws_floats(&f);
        float *ws = fbuf(nws + 1);
        be->conv2d_fwd(&f, x, w, NULL, y, ws);
        free(ws);
    }
}

/* A micro-batch that splits into slots of two sizes needs two cached
 * primitive sets at once: looking up the second must not evict the first.
 * After a full round of new shapes, U4 (slots 2+2) caches the 2-sample set
 * alone, CDP_CPU_CONV_DNNL_CACHE - 1 new shapes evict every other set, so
 * the round-robin victim is that set when U5 (slots 2+3) misses its
 * 3-sample set; were it evicted, both slots would run 3 samples and sample
 * 2 would count twice in dw. */
START_TEST(conv_dnnl_cache_keeps_both_slot_sizes)
{
    const cdp_backend *be = cpu_split(1, "2");
    cdp_cpu_conv_dnnl = 2;
    cdp_conv_shape u5 = {5, 16, 6, 6, 16, 3, 3, 1, 1, 6, 6, 1}, u4 = u5;
    u4.B = 4;
    ck_assert_int_eq(cdp_cpu_conv_slots(5), 2);
    struct conv_in in = conv_in_make(&u5, 1500), in4 = conv_in_make(&u4, 1501);
    struct conv_out ref, o4;
    conv_run(be, &u5, in.x, in.w, in.b, in.dy, &ref);
    /* sized now: the backward below must be the call that looks both up */
    size_t nws = be->conv2d_ws_floats(&u5), nx = nx_of(&u5), nw = nw_of(&u5);
    float *ws = fbuf(nws + 1), *dx = fbuf(nx), *dw = fbuf(nw), *db = fbuf((size_t)u5.Cout);
    dnnl_fill_cache(be, 0, CDP_CPU_CONV_DNNL_CACHE);
    conv_run(be, &u4, in4.x, in4.w, in4.b, in4.dy, &o4);
    dnnl_fill_cache(be, CDP_CPU_CONV_DNNL_CACHE, CDP_CPU_CONV_DNNL_CACHE - 1);
    be->conv2d_bwd(&u5, in.x, in.w, in.dy, dx, dw, db, 0, ws);
    check_same("oneDNN cache, slots of 2 and 3: dw", ref.dw, dw, nw * sizeof *dw);
    check_same("oneDNN cache, slots of 2 and 3: dx", ref.dx, dx, nx * sizeof *dx);
    conv_out_free(&ref);
    conv_out_free(&o4);
    conv_in_free(&in);
    conv_in_free(&in4);
    free(ws); free(dx); free(dw); free(db);
    cdp_cpu_conv_dnnl = 1;
}
END_TEST

/* the default: resnet's 3x3 layers with >= 16 channels, not the stems nor
 * the 1x1 shortcuts; CDP_CONV_DNNL from the environment */
START_TEST(conv_dnnl_policy)
{
    cdp_conv_shape r20 = {128, 16, 28, 28, 16, 3, 3, 1, 1, 28, 28, 1};
    cdp_conv_shape r18s2 = {64, 64, 32, 32, 128, 3, 3, 2, 1, 16, 16, 1};
    cdp_conv_shape stem = {128, 1, 28, 28, 16, 3, 3, 1, 1, 28, 28, 1};
    cdp_conv_shape sc = {64, 64, 32, 32, 128, 1, 1, 2, 0, 16, 16, 1};
    unsetenv("CDP_CONV_DNNL");
    cdp_backend_cpu(1);
    ck_assert_int_eq(cdp_cpu_conv_dnnl, 1);
    ck_assert(cdp_cpu_conv_dnnl_use(&r20) && cdp_cpu_conv_dnnl_use(&r18s2));
    ck_assert(!cdp_cpu_conv_dnnl_use(&stem) && !cdp_cpu_conv_dnnl_use(&sc));
    ck_assert_ptr_nonnull(strstr(cdp_backend_cpu(1)->describe(), "oneDNN"));
    setenv("CDP_CONV_DNNL", "0", 1);
    cdp_backend_cpu(1);
    ck_assert(!cdp_cpu_conv_dnnl_use(&r20));
    ck_assert_ptr_null(strstr(cdp_backend_cpu(1)->describe(), "conv oneDNN"));
    setenv("CDP_CONV_DNNL", "2", 1);
    cdp_backend_cpu(1);
    ck_assert(cdp_cpu_conv_dnnl_use(&stem) && cdp_cpu_conv_dnnl_use(&sc));
    unsetenv("CDP_CONV_DNNL");
}
END_TEST
#endif

/* ------------------------------------------------------------ batchnorm */

/* y = (x - mean) / sqrt(var + eps) * gamma + beta over x[B,C,HW], biased
 * variance by two passes, in double; mean/var out when not NULL */
static void bn_ref_fwd(int B, int C, int HW, const double *x, const double *g,
                       const double *be, double eps, double *y, double *mean, double *var)
{
    for (int c = 0; c < C; c++) {
        double m, v;
        ref_bn_stats(B, C, HW, x, c, &m, &v);
        for (int b = 0; b < B; b++)
            for (int p = 0; p < HW; p++) {
                size_t k = ((size_t)b * C + c) * HW + p;
                y[k] = (x[k] - m) / sqrt(v + eps) * g[c] + be[c];
            }
        if (mean)
            mean[c] = m;
        if (var)
            var[c] = v;
    }
}

/* the textbook backward, in double */
static void bn_ref_bwd(int B, int C, int HW, const double *x, const double *g, double eps,
                       const double *dy, double *dx, double *dg, double *db)
{
    double n = (double)B * HW;
    for (int c = 0; c < C; c++) {
        double m, v;
        ref_bn_stats(B, C, HW, x, c, &m, &v);
        double is = 1.0 / sqrt(v + eps), sdy = 0.0, sdyx = 0.0;
        for (int b = 0; b < B; b++)
            for (int p = 0; p < HW; p++) {
                size_t k = ((size_t)b * C + c) * HW + p;
                sdy += dy[k];
                sdyx += dy[k] * (x[k] - m) * is;
            }
        for (int b = 0; b < B; b++)
            for (int p = 0; p < HW; p++) {
                size_t k = ((size_t)b * C + c) * HW + p;
                double xh = (x[k] - m) * is;
                dx[k] = g[c] * is / n * (n * dy[k] - sdy - xh * sdyx);
            }
        db[c] = sdy;
        dg[c] = sdyx;
    }
}

/* A normalisation layer's FD check: its double forward and backward as
 * callbacks over dims (BatchNorm: B, C, HW; LayerNorm: R, D, unused), n
 * values normalised with np parameters per channel or feature. */
struct norm_ctx {
    int d[3];
    size_t n;
    double *x, *g, *be, *r, *y;
    void (*fwd)(const struct norm_ctx *q);
    void (*bwd)(const struct norm_ctx *q, double *dx, double *dg, double *db);
};

static double norm_ctx_loss(void *c)
{
    struct norm_ctx *q = c;
    q->fwd(q);
    return dot(q->y, q->r, q->n);
}

/* L = sum(norm(x) * r): the analytic dx, dgamma, dbeta against central
 * differences, inputs drawn from seeds seed .. seed+3 */
static void norm_fd_check(const char *name, struct norm_ctx q, size_t n, size_t np,
                          unsigned seed)
{
    double *dx = dbuf(n), *dg = dbuf(np), *db = dbuf(np), *fx = dbuf(n), *fg = dbuf(np),
           *fb = dbuf(np);
    q.n = n;
    q.x = dbuf(n), q.g = dbuf(np), q.be = dbuf(np), q.r = dbuf(n), q.y = dbuf(n);
    fill_d(q.x, n, seed, -2, 2);
    fill_d(q.g, np, seed + 1, 0.5, 1.5);
    fill_d(q.be, np, seed + 2, -1, 1);
    fill_d(q.r, n, seed + 3, -1, 1);
    q.bwd(&q, dx, dg, db);
    fd_grad(q.x, n, 1e-5, fx, norm_ctx_loss, &q);
    fd_grad(q.g, np, 1e-5, fg, norm_ctx_loss, &q);
    fd_grad(q.be, np, 1e-5, fb, norm_ctx_loss, &q);
    char what[32];
    snprintf(what, sizeof what, "%s dx", name);
    check_fd(what, dx, fx, n, 1e-7);
    snprintf(what, sizeof what, "%s dgamma", name);
    check_fd(what, dg, fg, np, 1e-7);
    snprintf(what, sizeof what, "%s dbeta", name);
    check_fd(what, db, fb, np, 1e-7);
    free(q.x); free(q.g); free(q.be); free(q.r); free(q.y);
    free(dx); free(dg); free(db); free(fx); free(fg); free(fb);
}

static void bn_fd_fwd(const struct norm_ctx *q)
{
    bn_ref_fwd(q->d[0], q->d[1], q->d[2], q->x, q->g, q->be, 1e-5, q->y, NULL, NULL);
}

static void bn_fd_bwd(const struct norm_ctx *q, double *dx, double *dg, double *db)
{
    bn_ref_bwd(q->d[0], q->d[1], q->d[2], q->x, q->g, 1e-5, q->r, dx, dg, db);
}

static const int bn_shapes[][3] = {{2, 3, 5}, {1, 4, 9}, {4, 2, 1}, {16, 8, 49}, {3, 5, 784},
                                   {64, 16, 1}};
#define NBN (sizeof bn_shapes / sizeof *bn_shapes)

START_TEST(bn_fd_reference)
{
    for (size_t i = 0; i < 3; i++) {
        int B = bn_shapes[i][0], C = bn_shapes[i][1], HW = bn_shapes[i][2];
        struct norm_ctx q = {.d = {B, C, HW}, .fwd = bn_fd_fwd, .bwd = bn_fd_bwd};
        norm_fd_check("bn", q, (size_t)B * C * HW, (size_t)C, 5);
    }
}
END_TEST

START_TEST(bn_vs_reference)
{
    const cdp_backend *be = cpu_split(2, NULL);
    for (size_t i = 0; i < NBN; i++) {
        int B = bn_shapes[i][0], C = bn_shapes[i][1], HW = bn_shapes[i][2];
        size_t n = (size_t)B * C * HW;
        float *x = fbuf(n), *g = fbuf(C), *bt = fbuf(C), *y = fbuf(n), *save = fbuf(2 * C);
        float *dy = fbuf(n), *dx = fbuf(n), *dg = fbuf(C), *db = fbuf(C);
        double *st = dbuf(2 * C);
        fill(x, n, 70 + i, -1, 3);   /* mean away from 0 */
        fill(g, C, 71 + i, 0.5f, 1.5f);
        fill(bt, C, 72 + i, -1, 1);
        fill(dy, n, 73 + i, -1, 1);
        be->bn_fwd_train(B, C, HW, x, g, bt, 1e-5f, y, save, st);
        be->bn_bwd(B, C, HW, x, g, save, dy, dx, dg, db, 0);
        double *xd = to_d(x, n), *gd = to_d(g, C), *bd = to_d(bt, C), *dyd = to_d(dy, n);
        double *yr = dbuf(n), *mr = dbuf(C), *vr = dbuf(C), *dxr = dbuf(n), *dgr = dbuf(C),
               *dbr = dbuf(C);
        bn_ref_fwd(B, C, HW, xd, gd, bd, 1e-5, yr, mr, vr);
        bn_ref_bwd(B, C, HW, xd, gd, 1e-5, dyd, dxr, dgr, dbr);
        check_close("bn y", y, yr, n, 1e-5);
        check_close("bn dx", dx, dxr, n, 1e-5);
        check_close("bn dgamma", dg, dgr, C, 1e-5);
        check_close("bn dbeta", db, dbr, C, 1e-5);
        for (int c = 0; c < C; c++) {
            double nn = (double)B * HW;
            ck_assert_msg(fabs(st[c] - mr[c]) <= 1e-12 * (1 + fabs(mr[c])), "bn stats mean");
            ck_assert_msg(fabs(st[C + c] - vr[c] * nn) <= 1e-10 * (1 + vr[c] * nn), "bn stats M2");
            ck_assert(save[c] == (float)st[c]);
            ck_assert(save[C + c] == (float)(1.0 / sqrt(st[C + c] / nn + (double)1e-5f)));
        }
        /* dx may equal dy */
        be->bn_bwd(B, C, HW, x, g, save, dy, dy, dg, db, 0);
        check_same("bn dx in place", dx, dy, n * sizeof *dx);
        free(x); free(g); free(bt); free(y); free(save); free(dy); free(dx); free(dg); free(db);
        free(st); free(xd); free(gd); free(bd); free(dyd); free(yr); free(mr); free(vr);
        free(dxr); free(dgr); free(dbr);
    }
}
END_TEST

START_TEST(bn_eval_formula)
{
    const cdp_backend *be = cpu_split(2, NULL);
    int B = 3, C = 5, HW = 7;
    size_t n = (size_t)B * C * HW;
    float *x = fbuf(n), *g = fbuf(C), *bt = fbuf(C), *rm = fbuf(C), *rv = fbuf(C), *y = fbuf(n);
    fill(x, n, 80, -2, 2);
    fill(g, C, 81, 0.5f, 1.5f);
    fill(bt, C, 82, -1, 1);
    fill(rm, C, 83, -1, 1);
    fill(rv, C, 84, 0.2f, 2);
    be->bn_fwd_eval(B, C, HW, x, g, bt, rm, rv, 1e-5f, y);
    double *yr = dbuf(n);
    for (int b = 0; b < B; b++)
        for (int c = 0; c < C; c++)
            for (int p = 0; p < HW; p++) {
                size_t k = ((size_t)b * C + c) * HW + p;
                float e = (x[k] - rm[c]) / sqrtf(rv[c] + 1e-5f) * g[c] + bt[c];
                ck_assert_msg(y[k] == e, "bn eval [%zu]: %.9g vs formula %.9g", k, y[k], e);
                yr[k] = ((double)x[k] - rm[c]) / sqrt((double)rv[c] + 1e-5) * g[c] + bt[c];
            }
    check_close("bn eval", y, yr, n, 1e-6);
    free(x); free(g); free(bt); free(rm); free(rv); free(y); free(yr);
}
END_TEST

START_TEST(bn_accumulate)
{
    const cdp_backend *be = cpu_split(2, NULL);
    int B = 8, C = 6, HW = 25;
    size_t n = (size_t)B * C * HW;
    float *x = fbuf(n), *g = fbuf(C), *bt = fbuf(C), *y = fbuf(n), *save = fbuf(2 * C);
    float *dy = fbuf(n), *dx = fbuf(n), *sg = fbuf(C), *sb = fbuf(C), *ag = fbuf(C),
          *ab = fbuf(C), *gg = fbuf(C), *gb = fbuf(C);
    double *st = dbuf(2 * C);
    fill(x, n, 90, -1, 1);
    fill(g, C, 91, 0.5f, 1.5f);
    fill(bt, C, 92, -1, 1);
    fill(dy, n, 93, -1, 1);
    fill(sg, C, 94, -3, 3);
    fill(sb, C, 95, -3, 3);
    memcpy(ag, sg, C * sizeof *ag);
    memcpy(ab, sb, C * sizeof *ab);
    be->bn_fwd_train(B, C, HW, x, g, bt, 1e-5f, y, save, st);
    be->bn_bwd(B, C, HW, x, g, save, dy, dx, gg, gb, 0);
    be->add(C, sg, gg);
    be->add(C, sb, gb);
    be->bn_bwd(B, C, HW, x, g, save, dy, dx, ag, ab, 1);
    check_same("bn accumulate dgamma", sg, ag, C * sizeof *sg);
    check_same("bn accumulate dbeta", sb, ab, C * sizeof *sb);
    free(x); free(g); free(bt); free(y); free(save); free(dy); free(dx); free(sg); free(sb);
    free(ag); free(ab); free(gg); free(gb); free(st);
}
END_TEST

START_TEST(bn_running_hand)
{
    const cdp_backend *be = cpu_split(1, NULL);
    /* worker 0: {1, 3} (mean 2, M2 2); worker 1: {5, 7} (mean 6, M2 2);
     * together {1, 3, 5, 7}: mean 4, M2 20, unbiased variance 20/3 */
    float x0[2] = {1, 3}, x1[2] = {5, 7}, g = 1, bt = 0, y[2], save[2];
    double st[2 * 3];   /* stride 3: pairs need not be packed */
    be->bn_fwd_train(1, 1, 2, x0, &g, &bt, 1e-5f, y, save, st);
    be->bn_fwd_train(2, 1, 1, x1, &g, &bt, 1e-5f, y, save, st + 3);
    ck_assert(st[0] == 2.0 && st[1] == 2.0 && st[3] == 6.0 && st[4] == 2.0);
    float rm = 0.5f, rv = 1.0f;
    be->bn_running_update(1, 2, 2.0, st, 3, &rm, &rv, 0.1f, &rm, &rv);   /* in place */
    float em = (1.0f - 0.1f) * 0.5f + 0.1f * 4.0f;
    float ev = (1.0f - 0.1f) * 1.0f + 0.1f * (float)(20.0 / 3.0);
    ck_assert_msg(rm == em, "running mean %.9g, expected %.9g", rm, em);
    ck_assert_msg(rv == ev, "running var %.9g, expected %.9g", rv, ev);
}
END_TEST

START_TEST(bn_running_two_pass)
{
    const cdp_backend *be = cpu_split(2, NULL);
    static const int cases[][4] = {{1, 4, 3, 9}, {3, 4, 3, 9}, {4, 2, 5, 49}, {7, 5, 2, 1}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        int N = cases[i][0], B = cases[i][1], C = cases[i][2], HW = cases[i][3];
        size_t per = (size_t)B * C * HW, stride = 2 * (size_t)C + 3;
        float *x = fbuf(per * N), *y = fbuf(per), *save = fbuf(2 * C), *g = fbuf(C),
              *bt = fbuf(C), *rm = fbuf(C), *rv = fbuf(C), *om = fbuf(C), *ov = fbuf(C);
        double *st = dbuf(stride * N);
        for (int w = 0; w < N; w++)   /* every worker its own offset and scale */
            fill(x + per * w, per, 100 + w, -1.0f + (float)w, 1.0f + 2.0f * (float)w);
        fill(g, C, 110, 0.5f, 1.5f);
        fill(bt, C, 111, -1, 1);
        fill(rm, C, 112, -1, 1);
        fill(rv, C, 113, 0.5f, 2);
        for (int w = 0; w < N; w++)
            be->bn_fwd_train(B, C, HW, x + per * w, g, bt, 1e-5f, y, save, st + stride * w);
        be->bn_running_update(C, N, (double)B * HW, st, stride, rm, rv, 0.1f, om, ov);
        for (int c = 0; c < C; c++) {
            double s = 0.0, v = 0.0, n = (double)N * B * HW;
            for (int w = 0; w < N; w++)
                for (int b = 0; b < B; b++)
                    for (int p = 0; p < HW; p++)
                        s += x[per * w + ((size_t)b * C + c) * HW + p];
            double m = s / n;
            for (int w = 0; w < N; w++)
                for (int b = 0; b < B; b++)
                    for (int p = 0; p < HW; p++) {
                        double d = x[per * w + ((size_t)b * C + c) * HW + p] - m;
                        v += d * d;
                    }
            v /= n - 1.0;
            double em = 0.9 * rm[c] + 0.1 * m, ev = 0.9 * rv[c] + 0.1 * v;
            ck_assert_msg(fabs(om[c] - em) <= 1e-6 * (1 + fabs(em)),
                          "case %zu running mean[%d] %.9g vs %.9g", i, c, om[c], em);
            ck_assert_msg(fabs(ov[c] - ev) <= 1e-6 * (1 + fabs(ev)),
                          "case %zu running var[%d] %.9g vs %.9g", i, c, ov[c], ev);
        }
        free(x); free(y); free(save); free(g); free(bt); free(rm); free(rv); free(om);
        free(ov); free(st);
    }
}
END_TEST

START_TEST(bn_threads)
{
    int B = 8, C = 64, HW = 784;   /* above the parallel threshold */
    size_t n = (size_t)B * C * HW;
    float *x = fbuf(n), *g = fbuf(C), *bt = fbuf(C), *dy = fbuf(n);
    fill(x, n, 120, -1, 2);
    fill(g, C, 121, 0.5f, 1.5f);
    fill(bt, C, 122, -1, 1);
    fill(dy, n, 123, -1, 1);
    float *y[2], *dx[2], *sv[2], *dg[2], *db[2];
    double *st[2];
    for (int r = 0; r < 2; r++) {
        const cdp_backend *be = cpu_split(r + 1, NULL);
        y[r] = fbuf(n); dx[r] = fbuf(n); sv[r] = fbuf(2 * C); dg[r] = fbuf(C); db[r] = fbuf(C);
        st[r] = dbuf(2 * C);
        be->bn_fwd_train(B, C, HW, x, g, bt, 1e-5f, y[r], sv[r], st[r]);
        be->bn_bwd(B, C, HW, x, g, sv[r], dy, dx[r], dg[r], db[r], 0);
    }
    check_same("bn y threads", y[0], y[1], n * sizeof(float));
    check_same("bn dx threads", dx[0], dx[1], n * sizeof(float));
    check_same("bn stats threads", st[0], st[1], 2 * C * sizeof(double));
    check_same("bn dgamma threads", dg[0], dg[1], C * sizeof(float));
    check_same("bn dbeta threads", db[0], db[1], C * sizeof(float));
    for (int r = 0; r < 2; r++) {
        free(y[r]); free(dx[r]); free(sv[r]); free(dg[r]); free(db[r]); free(st[r]);
    }
    free(x); free(g); free(bt); free(dy);
}
END_TEST

/* A kernel must leave no ASan poison on the stack it used: the AVX-512 sums
 * (left out of ASan, kernels_norm.c) once inlined an instrumented helper
 * whose arrays stayed poisoned after the kernel returned, and the next frame
 * there (Open MPI's send of a message header, an OpenMP region's argument
 * block) was reported as stack-use-after-scope.  The probe is a frame over
 * the stack those kernels used: larger than ASan's largest fake-stack frame
 * (64 KiB), so it is on the real stack as theirs are.  Only an ASan build
 * can see poison (.ci/sanitize); elsewhere the check is empty. */
#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/asan_interface.h>
static __attribute__((noinline)) ptrdiff_t stack_poison_at(void)
{
    volatile char probe[256 << 10];
    char *bad = __asan_region_is_poisoned((void *)probe, sizeof probe);
    probe[0] = 0;
    return bad ? bad - (char *)probe : -1;
}
#define CHECK_STACK_CLEAN(what, simd)                                                     \
    do {                                                                                  \
        ptrdiff_t at_ = stack_poison_at();                                                \
        ck_assert_msg(at_ < 0, "simd %d: %s left ASan poison %td bytes into the probe", \
                      (simd), (what), at_);                                               \
    } while (0)
#else
#define CHECK_STACK_CLEAN(what, simd) ((void)0)
#endif

/* The CPU kernels' documented formulas (kernels_norm.c), one channel at a
 * time, written plainly: the kernels take channels in groups and vectors,
 * and must still give exactly these bits, for any C, thread count and
 * vector path.  (The sums of floats in double are nearly always exact, so
 * order shows in M2 and the backward's sums.) */
START_TEST(bn_formula_bits)
{
    static const int shapes[][3] = {{3, 1, 7}, {2, 3, 5}, {2, 4, 9}, {3, 5, 13}, {2, 9, 30},
                                    {8, 16, 784}, {4, 7, 196}};
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
        int B = shapes[i][0], C = shapes[i][1], HW = shapes[i][2];
        size_t n = (size_t)B * C * HW;
        float *x = fbuf(n), *g = fbuf(C), *bt = fbuf(C), *dy = fbuf(n), *y = fbuf(n),
              *sv = fbuf(2 * C), *dx = fbuf(n), *dg = fbuf(C), *db = fbuf(C);
        float *ey = fbuf(n), *esv = fbuf(2 * C), *edx = fbuf(n), *edg = fbuf(C), *edb = fbuf(C);
        double *st = dbuf(2 * C), *est = dbuf(2 * C);
        fill(x, n, 130 + i, -1, 3);
        fill(g, C, 131 + i, 0.5f, 1.5f);
        fill(bt, C, 132 + i, -1, 1);
        fill(dy, n, 133 + i, -1, 1);
        const double nd = (double)B * HW;
        const float nf = (float)nd;
        for (int c = 0; c < C; c++) {
            double sum = 0, m2 = 0, sdy = 0, sdyx = 0;
            for (int b = 0; b < B; b++)
                for (int p = 0; p < HW; p++)
                    sum += (double)x[((size_t)b * C + c) * HW + p];
            double mean = sum / nd;
            for (int b = 0; b < B; b++)
                for (int p = 0; p < HW; p++) {
                    double d = (double)x[((size_t)b * C + c) * HW + p] - mean;
                    m2 += d * d;
                }
            float fm = (float)mean, is = (float)(1.0 / sqrt(m2 / nd + (double)1e-5f));
            for (int b = 0; b < B; b++)
                for (int p = 0; p < HW; p++) {
                    size_t k = ((size_t)b * C + c) * HW + p;
                    ey[k] = (x[k] - fm) * is * g[c] + bt[c];
                    float xh = (x[k] - fm) * is;
                    sdy += (double)dy[k];
                    sdyx += (double)dy[k] * (double)xh;
                }
            float fdb = (float)sdy, fdg = (float)sdyx, kk = g[c] * is / nf;
            for (int b = 0; b < B; b++)
                for (int p = 0; p < HW; p++) {
                    size_t k = ((size_t)b * C + c) * HW + p;
                    float xh = (x[k] - fm) * is;
                    edx[k] = kk * (nf * dy[k] - fdb - xh * fdg);
                }
            esv[c] = fm;
            esv[C + c] = is;
            est[c] = mean;
            est[C + c] = m2;
            edb[c] = fdb;
            edg[c] = fdg;
        }
        for (int t = 1; t <= 4; t++) {
            const cdp_backend *be = cpu_split(1 + (t & 1), NULL);
            cdp_cpu_bn_simd = t <= 2;   /* the AVX-512 path where the CPU has it, then none */
            be->bn_fwd_train(B, C, HW, x, g, bt, 1e-5f, y, sv, st);
            CHECK_STACK_CLEAN("bn_fwd_train", cdp_cpu_bn_simd);
            be->bn_bwd(B, C, HW, x, g, sv, dy, dx, dg, db, 0);
            CHECK_STACK_CLEAN("bn_bwd", cdp_cpu_bn_simd);
            check_same("bn formula y", y, ey, n * sizeof *y);
            check_same("bn formula save", sv, esv, 2 * C * sizeof *sv);
            check_same("bn formula stats", st, est, 2 * C * sizeof *st);
            check_same("bn formula dx", dx, edx, n * sizeof *dx);
            check_same("bn formula dgamma", dg, edg, C * sizeof *dg);
            check_same("bn formula dbeta", db, edb, C * sizeof *db);
        }
        free(x); free(g); free(bt); free(dy); free(y); free(sv); free(dx); free(dg); free(db);
        free(ey); free(esv); free(edx); free(edg); free(edb); free(st); free(est);
    }
}
END_TEST

/* ------------------------------------------------------------ pooling */

/* max pooling in double with explicit -inf padding: the first maximum in
 * window order wins */
static void maxpool_ref(int B, int C, int H, int W, int k, int st, int pad, int OH, int OW,
                        const double *x, double *y, int32_t *idx)
{
    for (int pl = 0; pl < B * C; pl++)
        for (int oh = 0; oh < OH; oh++)
            for (int ow = 0; ow < OW; ow++) {
                double best = -INFINITY;
                int32_t at = -1;
                for (int kh = 0; kh < k; kh++)
                    for (int kw = 0; kw < k; kw++) {
                        int ih = oh * st - pad + kh, iw = ow * st - pad + kw;
                        double v = ih < 0 || ih >= H || iw < 0 || iw >= W
                                       ? -INFINITY : x[(size_t)pl * H * W + (size_t)ih * W + iw];
                        if (at < 0 && v != -INFINITY) {
                            best = v;
                            at = ih * W + iw;
                        } else if (v > best) {
                            best = v;
                            at = ih * W + iw;
                        }
                    }
                y[(size_t)pl * OH * OW + (size_t)oh * OW + ow] = best;
                idx[(size_t)pl * OH * OW + (size_t)oh * OW + ow] = at;
            }
}

struct mp_ctx {
    int B, C, H, W, k, st, pad, OH, OW;
    double *x, *r, *y;
    int32_t *idx;
};

static double mp_ctx_loss(void *c)
{
    struct mp_ctx *q = c;
    maxpool_ref(q->B, q->C, q->H, q->W, q->k, q->st, q->pad, q->OH, q->OW, q->x, q->y, q->idx);
    return dot(q->y, q->r, (size_t)q->B * q->C * q->OH * q->OW);
}

/* B, C, H, W, k, stride, pad */
static const int mp_shapes[][7] = {{2, 3, 7, 9, 3, 2, 1}, {1, 2, 8, 8, 2, 2, 0},
                                   {3, 2, 5, 6, 3, 1, 1}, {2, 2, 9, 7, 5, 2, 2},
                                   {8, 64, 28, 28, 3, 2, 1}};

START_TEST(maxpool_vs_reference)
{
    for (size_t i = 0; i < sizeof mp_shapes / sizeof *mp_shapes; i++) {
        const int *v = mp_shapes[i];
        int B = v[0], C = v[1], H = v[2], W = v[3], k = v[4], st = v[5], pad = v[6];
        int OH = (H + 2 * pad - k) / st + 1, OW = (W + 2 * pad - k) / st + 1;
        size_t nx = (size_t)B * C * H * W, ny = (size_t)B * C * OH * OW;
        float *x = fbuf(nx), *y = fbuf(ny), *dy = fbuf(ny), *dx = fbuf(nx);
        int32_t *idx = malloc(ny * sizeof *idx), *ir = malloc(ny * sizeof *ir);
        fill(x, nx, 130 + i, -1, 1);   /* distinct values: no ties */
        fill(dy, ny, 140 + i, -1, 1);
        double *xd = to_d(x, nx), *yr = dbuf(ny), *r = to_d(dy, ny);
        const cdp_backend *be = cpu_split(2, NULL);
        be->maxpool_fwd(B, C, H, W, k, st, pad, OH, OW, x, y, idx);
        maxpool_ref(B, C, H, W, k, st, pad, OH, OW, xd, yr, ir);
        for (size_t q = 0; q < ny; q++) {
            ck_assert_msg((double)y[q] == yr[q], "maxpool y[%zu] %g vs %g", q, y[q], yr[q]);
            ck_assert_msg(idx[q] == ir[q], "maxpool idx[%zu] %d vs %d", q, idx[q], ir[q]);
        }
        /* backward: finite differences of the reference (exact away from
         * ties: the loss is piecewise linear), then the kernel against the
         * analytic scatter */
        be->maxpool_bwd(B, C, H, W, OH, OW, idx, dy, dx);
        double *dxr = dbuf(nx);
        for (size_t q = 0; q < ny; q++)
            dxr[(q / ((size_t)OH * OW)) * H * W + (size_t)ir[q]] += r[q];
        if (nx < 2000) {
            double *fx = dbuf(nx);
            struct mp_ctx c = {B, C, H, W, k, st, pad, OH, OW, xd, r, yr, ir};
            fd_grad(xd, nx, 1e-9, fx, mp_ctx_loss, &c);
            check_fd("maxpool dx", dxr, fx, nx, 1e-6);
            free(fx);
        }
        check_close("maxpool dx", dx, dxr, nx, 1e-6);
        free(x); free(y); free(dy); free(dx); free(idx); free(ir); free(xd); free(yr); free(r);
        free(dxr);
    }
}
END_TEST

START_TEST(maxpool_ties_and_padding)
{
    const cdp_backend *be = cpu_split(1, NULL);
    /* 4x4 plane, all -5: padding (k 3, stride 2, pad 1) must not win (a
     * zero pad would give 0), and the first valid position is the argmax */
    float x[16], y[4], dx[16], dy[4] = {1, 2, 3, 4};
    int32_t idx[4];
    for (int k = 0; k < 16; k++)
        x[k] = -5.0f;
    be->maxpool_fwd(1, 1, 4, 4, 3, 2, 1, 2, 2, x, y, idx);
    static const int32_t first[4] = {0, 1, 4, 5};   /* window starts (0,0) (0,1) (1,0) (1,1) */
    for (int q = 0; q < 4; q++) {
        ck_assert_msg(y[q] == -5.0f, "maxpool padding won: y[%d] = %g", q, y[q]);
        ck_assert_msg(idx[q] == first[q], "maxpool tie: idx[%d] = %d, expected %d", q, idx[q],
                      first[q]);
    }
    /* ties among real values: 2 at (1,1), (1,2), (2,1); the window of
     * output (0,0) covers rows/cols -1..1 and sees (1,1) first; output
     * (0,1) covers cols 1..3 and sees (1,1) before (1,2) */
    for (int k = 0; k < 16; k++)
        x[k] = 0.0f;
    x[5] = x[6] = x[9] = 2.0f;
    be->maxpool_fwd(1, 1, 4, 4, 3, 2, 1, 2, 2, x, y, idx);
    ck_assert(idx[0] == 5 && idx[1] == 5 && idx[2] == 5 && idx[3] == 5);
    /* backward: the shared argmax gathers every output's gradient, in order */
    be->maxpool_bwd(1, 1, 4, 4, 2, 2, idx, dy, dx);
    for (int k = 0; k < 16; k++)
        ck_assert(dx[k] == (k == 5 ? ((1.0f + 2.0f) + 3.0f) + 4.0f : 0.0f));
    /* a negative window next to zero padding: -1 wins over the pad */
    float x2[4] = {-1, -2, -3, -4}, y2[1];
    int32_t i2[1];
    be->maxpool_fwd(1, 1, 2, 2, 2, 2, 1, 1, 1, x2, y2, i2);
    ck_assert(y2[0] == -1.0f && i2[0] == 0);
}
END_TEST

START_TEST(avgpool_order)
{
    const cdp_backend *be = cpu_split(1, NULL);
    /* in order p = 0..3 in float: ((1e8 + 1) - 1e8) + 1 = 1, times 1/4;
     * any other order (or a double sum) gives a different answer */
    float x[4] = {1e8f, 1.0f, -1e8f, 1.0f}, y;
    be->avgpool_fwd(1, 1, 4, x, &y);
    ck_assert_msg(y == 0.25f, "avgpool order: %.9g", y);
    /* random: bitwise the in-order float sum times 1/HW, near the double mean */
    int B = 3, C = 4, HW = 49;
    size_t n = (size_t)B * C * HW;
    float *xs = fbuf(n), *ys = fbuf(B * C), *dy = fbuf(B * C), *dx = fbuf(n);
    fill(xs, n, 150, -1, 1);
    fill(dy, B * C, 151, -1, 1);
    be->avgpool_fwd(B, C, HW, xs, ys);
    be->avgpool_bwd(B, C, HW, dy, dx);
    for (int pl = 0; pl < B * C; pl++) {
        float s = 0.0f;
        double d = 0.0;
        for (int p = 0; p < HW; p++) {
            s = s + xs[(size_t)pl * HW + p];
            d += xs[(size_t)pl * HW + p];
        }
        ck_assert(ys[pl] == s * (1.0f / (float)HW));
        ck_assert(fabs(ys[pl] - d / HW) <= 1e-6);
        for (int p = 0; p < HW; p++)
            ck_assert(dx[(size_t)pl * HW + p] == dy[pl] * (1.0f / (float)HW));
    }
    /* finite differences of the double mean: d mean / dx = 1/HW */
    double xd[5] = {0.3, -0.2, 0.7, 0.1, -0.9}, h = 1e-6;
    for (int p = 0; p < 5; p++) {
        double v = xd[p], sp = 0.0, sm = 0.0;
        xd[p] = v + h;
        for (int q = 0; q < 5; q++) sp += xd[q];
        xd[p] = v - h;
        for (int q = 0; q < 5; q++) sm += xd[q];
        xd[p] = v;
        float g = 1.0f, dx5[5];
        be->avgpool_bwd(1, 1, 5, &g, dx5);
        ck_assert(fabs((sp / 5 - sm / 5) / (2 * h) - dx5[p]) <= 1e-7);
    }
    free(xs); free(ys); free(dy); free(dx);
}
END_TEST

START_TEST(add3_alias)
{
    const cdp_backend *be = cpu_split(2, NULL);
    size_t n = 300000;
    float *a = fbuf(n), *b = fbuf(n), *y = fbuf(n), *a2 = fbuf(n);
    fill(a, n, 160, -1, 1);
    fill(b, n, 161, -1, 1);
    be->add3(n, a, b, y);
    for (size_t k = 0; k < n; k++)
        ck_assert(y[k] == a[k] + b[k]);
    memcpy(a2, a, n * sizeof *a);
    be->add3(n, a2, b, a2);   /* y aliases a */
    check_same("add3 aliasing a", a2, y, n * sizeof *y);
    memcpy(a2, b, n * sizeof *a);
    be->add3(n, a, a2, a2);   /* y aliases b */
    check_same("add3 aliasing b", a2, y, n * sizeof *y);
    free(a); free(b); free(y); free(a2);
}
END_TEST

START_TEST(pool_threads)
{
    int B = 8, C = 64, H = 28, W = 28, OH = 14, OW = 14;
    size_t nx = (size_t)B * C * H * W, ny = (size_t)B * C * OH * OW;
    float *x = fbuf(nx), *dy = fbuf(ny), *g = fbuf(B * C);
    fill(x, nx, 170, -1, 1);
    for (size_t k = 0; k < nx; k += 7)
        x[k] = 0.5f;   /* some ties */
    fill(dy, ny, 171, -1, 1);
    fill(g, B * C, 172, -1, 1);
    float *y[2], *dx[2], *ay[2], *adx[2];
    int32_t *idx[2];
    for (int r = 0; r < 2; r++) {
        const cdp_backend *be = cpu_split(r + 1, NULL);
        y[r] = fbuf(ny); dx[r] = fbuf(nx); ay[r] = fbuf(B * C); adx[r] = fbuf(nx);
        idx[r] = malloc(ny * sizeof(int32_t));
        be->maxpool_fwd(B, C, H, W, 3, 2, 1, OH, OW, x, y[r], idx[r]);
        be->maxpool_bwd(B, C, H, W, OH, OW, idx[r], dy, dx[r]);
        be->avgpool_fwd(B, C, H * W, x, ay[r]);
        be->avgpool_bwd(B, C, H * W, g, adx[r]);
    }
    check_same("maxpool y threads", y[0], y[1], ny * sizeof(float));
    check_same("maxpool idx threads", idx[0], idx[1], ny * sizeof(int32_t));
    check_same("maxpool dx threads", dx[0], dx[1], nx * sizeof(float));
    check_same("avgpool y threads", ay[0], ay[1], B * C * sizeof(float));
    check_same("avgpool dx threads", adx[0], adx[1], nx * sizeof(float));
    for (int r = 0; r < 2; r++) {
        free(y[r]); free(dx[r]); free(ay[r]); free(adx[r]); free(idx[r]);
    }
    free(x); free(dy); free(g);
}
END_TEST

/* ------------------------------------------------------------ transformer kernels */

/* C_b = alpha op(A_b) op(B_b) + beta C_b over the M x N region, in double
 * (beta 0: C not read) */
static void gemm_ref(int tA, int tB, int M, int N, int K, double alpha, const float *A, int lda,
                     size_t sA, const float *Bm, int ldb, size_t sB, double beta, const float *C0,
                     int ldc, size_t sC, int batch, double *out)
{
    for (int b = 0; b < batch; b++)
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) {
                double s = 0.0;
                for (int k = 0; k < K; k++) {
                    double a = tA ? A[b * sA + (size_t)k * lda + i] : A[b * sA + (size_t)i * lda + k];
                    double v = tB ? Bm[b * sB + (size_t)j * ldb + k] : Bm[b * sB + (size_t)k * ldb + j];
                    s += a * v;
                }
                size_t at = b * sC + (size_t)i * ldc + j;
                out[((size_t)b * M + i) * N + j] = alpha * s + (beta != 0.0 ? beta * C0[at] : 0.0);
            }
}

START_TEST(gemm_batched_vs_loops)
{
    const cdp_backend *be = cpu_split(2, NULL);
    /* M, N, K, batch: tiny, attention-like, and one above OpenBLAS's small
     * matrix path */
    static const int shapes[][4] = {{3, 5, 4, 3}, {7, 1, 9, 2}, {50, 50, 64, 6}, {17, 130, 33, 4},
                                    {1, 1, 1, 1}, {120, 110, 100, 2}};
    for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++)
        for (int tA = 0; tA < 2; tA++)
            for (int tB = 0; tB < 2; tB++)
                for (int bz = 0; bz < 2; bz++) {
                    int M = shapes[si][0], N = shapes[si][1], K = shapes[si][2];
                    int batch = shapes[si][3];
                    /* row strides above the minimum, batch strides with gaps */
                    int lda = (tA ? M : K) + 3, ldb = (tB ? K : N) + 5, ldc = N + 2;
                    size_t sA = (size_t)(tA ? K : M) * lda + 7, sB = (size_t)(tB ? N : K) * ldb + 1;
                    size_t sC = (size_t)M * ldc + 11;
                    size_t nA = sA * batch, nB = sB * batch, nC = sC * batch;
                    float *A = fbuf(nA), *Bm = fbuf(nB), *C = fbuf(nC), *C0 = fbuf(nC);
                    fill(A, nA, 200 + si, -1, 1);
                    fill(Bm, nB, 210 + si, -1, 1);
                    if (bz)
                        for (size_t k = 0; k < nC; k++)
                            C0[k] = NAN;
                    else
                        fill(C0, nC, 220 + si, -1, 1);
                    memcpy(C, C0, nC * sizeof *C);
                    float alpha = 0.125f, beta = bz ? 0.0f : 1.0f;
                    be->gemm_batched(tA, tB, M, N, K, alpha, A, lda, sA, Bm, ldb, sB, beta, C, ldc,
                                     sC, batch);
                    size_t nr = (size_t)batch * M * N;
                    double *r = dbuf(nr);
                    gemm_ref(tA, tB, M, N, K, alpha, A, lda, sA, Bm, ldb, sB, beta, C0, ldc, sC,
                             batch, r);
                    float *got = fbuf(nr);
                    for (int b = 0; b < batch; b++)
                        for (int i = 0; i < M; i++)
                            for (int j = 0; j < N; j++)
                                got[((size_t)b * M + i) * N + j] = C[b * sC + (size_t)i * ldc + j];
                    char what[96];
                    snprintf(what, sizeof what, "gemm_batched shape %zu tA %d tB %d beta %d", si,
                             tA, tB, !bz);
                    check_close(what, got, r, nr, 1e-5);
                    /* the padding of C (between rows and entries) is untouched */
                    for (size_t k = 0; k < nC; k++) {
                        size_t b = k / sC, o = k % sC, i = o / ldc, j = o % ldc;
                        if (b < (size_t)batch && i < (size_t)M && j < (size_t)N)
                            continue;
                        ck_assert_msg(memcmp(&C[k], &C0[k], sizeof *C) == 0,
                                      "%s: C[%zu] outside the matrices changed", what, k);
                    }
                    free(A); free(Bm); free(C); free(C0); free(r); free(got);
                }
}
END_TEST

START_TEST(gemm_batched_edges)
{
    const cdp_backend *be = cpu_split(2, NULL);
    /* K = 0: C = beta * C, and beta 0 writes +0 over NaN */
    float C[6] = {1, 2, NAN, 4, 5, 6}, A[1] = {0}, Bm[1] = {0};
    be->gemm_batched(0, 0, 2, 3, 0, 1.0f, A, 1, 0, Bm, 3, 0, 0.5f, C, 3, 0, 1);
    ck_assert(C[0] == 0.5f && C[1] == 1.0f && isnan(C[2]) && C[5] == 3.0f);
    be->gemm_batched(0, 0, 2, 3, 0, 1.0f, A, 1, 0, Bm, 3, 0, 0.0f, C, 3, 0, 1);
    for (int k = 0; k < 6; k++)
        ck_assert(C[k] == 0.0f && !signbit(C[k]));
    /* a hand product: [1 2; 3 4] [5 6; 7 8] = [19 22; 43 50], plus 2 * C */
    float a[4] = {1, 2, 3, 4}, b[4] = {5, 6, 7, 8}, c[4] = {1, 1, 1, 1};
    be->gemm_batched(0, 0, 2, 2, 2, 1.0f, a, 2, 4, b, 2, 4, 2.0f, c, 2, 4, 1);
    ck_assert(c[0] == 21 && c[1] == 24 && c[2] == 45 && c[3] == 52);
    /* A^T B^T = (B A)^T: [1 3; 2 4] [5 7; 6 8] = [23 31; 34 46] */
    be->gemm_batched(1, 1, 2, 2, 2, 1.0f, a, 2, 4, b, 2, 4, 0.0f, c, 2, 4, 1);
    ck_assert(c[0] == 23 && c[1] == 31 && c[2] == 34 && c[3] == 46);
    /* one B for every entry (stride 0) */
    float a2[8] = {1, 0, 0, 1, 2, 0, 0, 2}, c2[8];
    be->gemm_batched(0, 0, 2, 2, 2, 1.0f, a2, 2, 4, b, 2, 0, 0.0f, c2, 2, 4, 2);
    for (int k = 0; k < 4; k++)
        ck_assert(c2[k] == b[k] && c2[4 + k] == 2 * b[k]);
}
END_TEST

/* softmax of each row of x[R, N], in double */
static void softmax_ref(int R, int N, const double *x, double *p)
{
    for (int r = 0; r < R; r++) {
        const double *xr = x + (size_t)r * N;
        double mx = xr[0], s = 0.0;
        for (int j = 1; j < N; j++)
            mx = fmax(mx, xr[j]);
        for (int j = 0; j < N; j++)
            s += exp(xr[j] - mx);
        for (int j = 0; j < N; j++)
            p[(size_t)r * N + j] = exp(xr[j] - mx) / s;
    }
}

/* dx = scale * P (dp - <dp, P>) per row, in double */
static void softmax_ref_bwd(int R, int N, double scale, const double *P, const double *dp,
                            double *dx)
{
    for (int r = 0; r < R; r++) {
        const double *pr = P + (size_t)r * N, *gr = dp + (size_t)r * N;
        double dt = dot(pr, gr, (size_t)N);
        for (int j = 0; j < N; j++)
            dx[(size_t)r * N + j] = scale * pr[j] * (gr[j] - dt);
    }
}

struct sm_ctx {
    int R, N;
    double scale, *x, *xs, *p, *r;
};

/* L = sum(softmax(scale * x) * r): dL/dx = softmax_bwd(scale, P, r) */
static double sm_ctx_loss(void *c)
{
    struct sm_ctx *q = c;
    size_t n = (size_t)q->R * q->N;
    for (size_t k = 0; k < n; k++)
        q->xs[k] = q->scale * q->x[k];
    softmax_ref(q->R, q->N, q->xs, q->p);
    return dot(q->p, q->r, n);
}

START_TEST(softmax_fd_reference)
{
    int R = 3, N = 7;
    size_t n = (size_t)R * N;
    double *x = dbuf(n), *xs = dbuf(n), *p = dbuf(n), *r = dbuf(n), *dx = dbuf(n), *fx = dbuf(n);
    fill_d(x, n, 230, -3, 3);
    fill_d(r, n, 231, -1, 1);
    struct sm_ctx c = {R, N, 0.35, x, xs, p, r};
    sm_ctx_loss(&c);
    softmax_ref_bwd(R, N, c.scale, p, r, dx);
    fd_grad(x, n, 1e-5, fx, sm_ctx_loss, &c);
    check_fd("softmax dx", dx, fx, n, 1e-8);
    free(x); free(xs); free(p); free(r); free(dx); free(fx);
}
END_TEST

START_TEST(softmax_vs_reference)
{
    const cdp_backend *be = cpu_split(2, NULL);
    /* hand: softmax(1, 2, 3), and the same row shifted by 1000 (stable) */
    float h[6] = {1, 2, 3, 1001, 1002, 1003};
    const double e[3] = {0.09003057317038046, 0.24472847105479764, 0.6652409557748219};
    be->softmax_fwd(2, 3, h);
    for (int j = 0; j < 6; j++)
        ck_assert_msg(fabs(h[j] - e[j % 3]) <= 1e-7, "softmax hand [%d] %.9g", j, h[j]);
    static const int shapes[][2] = {{1, 1}, {5, 3}, {64, 50}, {7, 1000}, {300, 17}};
    for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
        int R = shapes[si][0], N = shapes[si][1];
        size_t n = (size_t)R * N;
        float *x = fbuf(n), *p = fbuf(n), *dp = fbuf(n), *g = fbuf(n);
        fill(x, n, 240 + si, -8, 8);
        if (n > 4)
            x[3] = -INFINITY;   /* a masked score */
        fill(dp, n, 250 + si, -1, 1);
        memcpy(p, x, n * sizeof *p);
        be->softmax_fwd(R, N, p);
        memcpy(g, dp, n * sizeof *g);
        be->softmax_bwd(R, N, 0.125f, p, g);
        double *xd = to_d(x, n), *pr = dbuf(n), *pd = to_d(p, n), *dpd = to_d(dp, n),
               *gr = dbuf(n);
        softmax_ref(R, N, xd, pr);
        softmax_ref_bwd(R, N, 0.125, pd, dpd, gr);
        check_close("softmax fwd", p, pr, n, 1e-6);
        check_close("softmax bwd", g, gr, n, 1e-5);
        /* the contract's formula, operation by operation */
        for (int r = 0; r < R; r++) {
            const float *xr = x + (size_t)r * N;
            float mx = xr[0], s = 0.0f, dt = 0.0f;
            for (int j = 1; j < N; j++)
                if (xr[j] > mx)
                    mx = xr[j];
            for (int j = 0; j < N; j++)
                s = s + expf(xr[j] - mx);
            for (int j = 0; j < N; j++) {
                float v = expf(xr[j] - mx) / s;
                ck_assert_msg(memcmp(&v, &p[(size_t)r * N + j], sizeof v) == 0,
                              "softmax fwd [%d,%d]: %.9g vs formula %.9g", r, j,
                              p[(size_t)r * N + j], v);
            }
            for (int j = 0; j < N; j++)
                dt = dt + dp[(size_t)r * N + j] * p[(size_t)r * N + j];
            for (int j = 0; j < N; j++) {
                size_t k = (size_t)r * N + j;
                float v = 0.125f * (p[k] * (dp[k] - dt));
                ck_assert_msg(memcmp(&v, &g[k], sizeof v) == 0, "softmax bwd [%zu]", k);
            }
        }
        free(x); free(p); free(dp); free(g); free(xd); free(pr); free(pd); free(dpd); free(gr);
    }
}
END_TEST

/* LayerNorm over the rows of x[R, D], in double (two passes) */
static void ln_ref_fwd(int R, int D, const double *x, const double *g, const double *be,
                       double eps, double *y)
{
    for (int r = 0; r < R; r++) {
        const double *xr = x + (size_t)r * D;
        double m, v;
        ref_ln_stats(D, xr, &m, &v);
        double is = 1.0 / sqrt(v + eps);
        for (int d = 0; d < D; d++)
            y[(size_t)r * D + d] = (xr[d] - m) * is * g[d] + be[d];
    }
}

/* the textbook backward, in double */
static void ln_ref_bwd(int R, int D, const double *x, const double *g, double eps,
                       const double *dy, double *dx, double *dg, double *db)
{
    for (int d = 0; d < D; d++)
        dg[d] = db[d] = 0.0;
    for (int r = 0; r < R; r++) {
        const double *xr = x + (size_t)r * D, *gr = dy + (size_t)r * D;
        double m, v;
        ref_ln_stats(D, xr, &m, &v);
        double is = 1.0 / sqrt(v + eps), a = 0.0, b = 0.0;
        for (int d = 0; d < D; d++) {
            double xh = (xr[d] - m) * is;
            a += gr[d] * g[d];
            b += gr[d] * g[d] * xh;
            dg[d] += gr[d] * xh;
            db[d] += gr[d];
        }
        for (int d = 0; d < D; d++) {
            double xh = (xr[d] - m) * is;
            dx[(size_t)r * D + d] = is * (gr[d] * g[d] - a / D - xh * b / D);
        }
    }
}

static void ln_fd_fwd(const struct norm_ctx *q)
{
    ln_ref_fwd(q->d[0], q->d[1], q->x, q->g, q->be, 1e-6, q->y);
}

static void ln_fd_bwd(const struct norm_ctx *q, double *dx, double *dg, double *db)
{
    ln_ref_bwd(q->d[0], q->d[1], q->x, q->g, 1e-6, q->r, dx, dg, db);
}

START_TEST(ln_fd_reference)
{
    /* (D = 2 is degenerate: xhat = +-1 whatever x, the gradient ~eps) */
    static const int shapes[][2] = {{3, 5}, {1, 8}, {4, 3}};
    for (size_t i = 0; i < 3; i++) {
        int R = shapes[i][0], D = shapes[i][1];
        struct norm_ctx q = {.d = {R, D, 0}, .fwd = ln_fd_fwd, .bwd = ln_fd_bwd};
        norm_fd_check("ln", q, (size_t)R * D, (size_t)D, 260 + (unsigned)i);
    }
}
END_TEST

START_TEST(ln_vs_reference)
{
    const cdp_backend *be = cpu_split(2, NULL);
    static const int shapes[][2] = {{1, 1}, {3, 5}, {50, 192}, {7, 300}, {200, 64}, {2, 1000}};
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
        int R = shapes[i][0], D = shapes[i][1];
        size_t n = (size_t)R * D;
        float *x = fbuf(n), *g = fbuf(D), *bt = fbuf(D), *y = fbuf(n), *save = fbuf(2 * R);
        float *dy = fbuf(n), *dx = fbuf(n), *dg = fbuf(D), *db = fbuf(D);
        fill(x, n, 270 + i, -1, 3);   /* means away from 0 */
        fill(g, D, 271 + i, 0.5f, 1.5f);
        fill(bt, D, 272 + i, -1, 1);
        fill(dy, n, 273 + i, -1, 1);
        be->ln_fwd(R, D, x, g, bt, 1e-6f, y, save);
        be->ln_bwd(R, D, x, g, save, dy, dx, dg, db, 0);
        double *xd = to_d(x, n), *gd = to_d(g, D), *bd = to_d(bt, D), *dyd = to_d(dy, n);
        double *yr = dbuf(n), *dxr = dbuf(n), *dgr = dbuf(D), *dbr = dbuf(D);
        ln_ref_fwd(R, D, xd, gd, bd, (double)1e-6f, yr);
        ln_ref_bwd(R, D, xd, gd, (double)1e-6f, dyd, dxr, dgr, dbr);
        char what[64];
        snprintf(what, sizeof what, "ln %dx%d y", R, D);
        check_close(what, y, yr, n, 1e-5);
        if (D > 1) {   /* D = 1: y = beta, dx = 0 exactly; the reference's dx is rounding */
            snprintf(what, sizeof what, "ln %dx%d dx", R, D);
            check_close(what, dx, dxr, n, 1e-5);
            snprintf(what, sizeof what, "ln %dx%d dgamma", R, D);
            check_close(what, dg, dgr, D, 1e-5);
        }
        snprintf(what, sizeof what, "ln %dx%d dbeta", R, D);
        check_close(what, db, dbr, D, 1e-5);
        /* save: the contract's mean and rstd */
        for (int r = 0; r < R; r++) {
            double s = 0.0, v = 0.0;
            for (int d = 0; d < D; d++)
                s += (double)x[(size_t)r * D + d];
            double m = s / D;
            for (int d = 0; d < D; d++) {
                double t = (double)x[(size_t)r * D + d] - m;
                v += t * t;
            }
            float rs = (float)(1.0 / sqrt(v / D + (double)1e-6f));
            ck_assert_msg(save[r] == (float)m && save[R + r] == rs, "ln save row %d", r);
            for (int d = 0; d < D; d++) {
                size_t k = (size_t)r * D + d;
                float e = (x[k] - (float)m) * rs * g[d] + bt[d];
                ck_assert_msg(memcmp(&e, &y[k], sizeof e) == 0, "ln y[%zu] %.9g vs formula %.9g",
                              k, y[k], e);
            }
        }
        /* dx may equal dy */
        be->ln_bwd(R, D, x, g, save, dy, dy, dg, db, 0);
        check_same("ln dx in place", dx, dy, n * sizeof *dx);
        free(x); free(g); free(bt); free(y); free(save); free(dy); free(dx); free(dg); free(db);
        free(xd); free(gd); free(bd); free(dyd); free(yr); free(dxr); free(dgr); free(dbr);
    }
}
END_TEST

/* in erfc form: 1 + erf(x / sqrt 2) cancels to 0 in double below x = -8 */
static double gelu_ref(double x)
{
    return 0.5 * x * erfc(-x / sqrt(2.0));
}

static double gelu_ref_grad(double x)
{
    return 0.5 * erfc(-x / sqrt(2.0)) + x * exp(-x * x / 2.0) / sqrt(2.0 * M_PI);
}

START_TEST(gelu_hand_fd_reference)
{
    const cdp_backend *be = cpu_split(2, NULL);
    /* hand values: gelu(1) = Phi(1), gelu(-1) = -Phi(-1), gelu'(1) = Phi(1) + phi(1) */
    float x[4] = {1.0f, -1.0f, 0.0f, 2.0f}, y[4], one[4] = {1, 1, 1, 1}, d[4];
    be->gelu_fwd(4, x, y);
    be->gelu_bwd(4, x, one, d);
    const double hand[6] = { 0.8413447460685429, -0.15865525393145707, 0.0, 1.9544997361036416,
                             1.0833154705876864, -0.08331547058768639 };
    const float got[6] = { y[0], y[1], y[2], y[3], d[0], d[1] };
    for (int k = 0; k < 6; k++)
        ck_assert_msg(fabs(got[k] - hand[k]) <= 4e-7 * fabs(hand[k]), "gelu hand value %d: "
                      "%.9g vs %.17g", k, (double)got[k], hand[k]);
    ck_assert(d[2] == 0.5f);
    /* the reference's derivative against central differences */
    for (int k = 0; k <= 120; k++) {
        double v = -6.0 + 0.1 * k, h = 1e-5;
        double f = (gelu_ref(v + h) - gelu_ref(v - h)) / (2 * h);
        ck_assert_msg(fabs(f - gelu_ref_grad(v)) <= 1e-9, "gelu fd at %g: %.12g vs %.12g", v, f,
                      gelu_ref_grad(v));
    }
    /* the kernels against the reference, element by element: float
     * accuracy, relative to the result for the forward and to the size of
     * the two terms Phi and x phi (which cancel near x = -0.75) for the
     * backward; in the tails, where the result is below 1e-3, the rounding
     * of the exponent -x^2/2 to float adds ~1e-7 x^2 */
    size_t n = 100003;
    float *xs = fbuf(n), *ys = fbuf(n), *dy = fbuf(n), *dx = fbuf(n), *t = fbuf(n);
    fill(xs, n, 280, -9, 7);
    fill(dy, n, 281, -1, 1);
    be->gelu_fwd(n, xs, ys);
    be->gelu_bwd(n, xs, dy, dx);
    double wf = 0.0, wb = 0.0;
    for (size_t k = 0; k < n; k++) {
        double v = xs[k], r = gelu_ref(v), g = dy[k] * gelu_ref_grad(v);
        double Phi = 0.5 * erfc(-v / sqrt(2.0)), xphi = fabs(v) * exp(-v * v / 2) / sqrt(2 * M_PI);
        double ef = fabs(ys[k] - r) / fabs(r), eb = fabs(dx[k] - g) / (fabs(dy[k]) * (Phi + xphi));
        wf = fmax(wf, ef);
        wb = fmax(wb, eb);
        /* the float exponent -x^2/2 carries a rounding error ~x^2/2 ulp */
        const double tol = 1e-6 + 1e-7 * v * v;
        ck_assert_msg(ef <= tol, "gelu_fwd(%.9g) = %.9g, reference %.17g", v, ys[k], r);
        ck_assert_msg(eb <= tol, "gelu_bwd(%.9g) = %.9g, reference %.17g", v, dx[k], g);
    }
    printf("gelu: worst relative error forward %.3g, backward %.3g\n", wf, wb);
    /* in place */
    memcpy(t, xs, n * sizeof *t);
    be->gelu_fwd(n, t, t);
    check_same("gelu_fwd in place", t, ys, n * sizeof *t);
    memcpy(t, dy, n * sizeof *t);
    be->gelu_bwd(n, xs, t, t);
    check_same("gelu_bwd in place", t, dx, n * sizeof *t);
    free(xs); free(ys); free(dy); free(dx); free(t);
}
END_TEST

START_TEST(tokens_and_rows)
{
    const cdp_backend *be = cpu_split(2, NULL);
    static const int shapes[][3] = {{1, 1, 1}, {2, 3, 4}, {5, 192, 49}, {3, 7, 0}};
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
        int B = shapes[i][0], D = shapes[i][1], n = shapes[i][2], T = n + 1;
        size_t nx = (size_t)B * D * n, ny = (size_t)B * T * D;
        float *x = fbuf(nx + 1), *cls = fbuf(D), *y = fbuf(ny), *dy = fbuf(ny), *dx = fbuf(nx + 1);
        float *dc = fbuf(D), *acc = fbuf(D), *acc2 = fbuf(D);
        fill(x, nx, 290 + i, -1, 1);
        fill(cls, D, 291 + i, -1, 1);
        fill(dy, ny, 292 + i, -1, 1);
        fill(acc, D, 293 + i, -1, 1);
        be->tokens_fwd(B, D, n, x, cls, y);
        for (int b = 0; b < B; b++)
            for (int t = 0; t < T; t++)
                for (int d = 0; d < D; d++) {
                    float e = t == 0 ? cls[d] : x[((size_t)b * D + d) * n + (t - 1)];
                    ck_assert_msg(y[((size_t)b * T + t) * D + d] == e, "tokens_fwd [%d,%d,%d]", b,
                                  t, d);
                }
        be->tokens_bwd(B, D, n, dy, dx, dc, 0);
        for (int b = 0; b < B; b++)
            for (int d = 0; d < D; d++)
                for (int k = 0; k < n; k++)
                    ck_assert(dx[((size_t)b * D + d) * n + k] == dy[((size_t)b * T + 1 + k) * D + d]);
        for (int d = 0; d < D; d++) {
            float s = dy[d];
            double sd = dy[d];
            for (int b = 1; b < B; b++) {
                s = s + dy[(size_t)b * T * D + d];
                sd += dy[(size_t)b * T * D + d];
            }
            ck_assert_msg(memcmp(&s, &dc[d], sizeof s) == 0, "tokens_bwd dcls[%d]", d);
            ck_assert(fabs(dc[d] - sd) <= 1e-6 * B);
        }
        /* accumulate: the bits of the sum added afterwards; dx may be NULL */
        memcpy(acc2, acc, D * sizeof *acc);
        be->add(D, acc2, dc);
        be->tokens_bwd(B, D, n, dy, NULL, acc, 1);
        check_same("tokens_bwd accumulate", acc, acc2, D * sizeof *acc);
        free(x); free(cls); free(y); free(dy); free(dx); free(dc); free(acc); free(acc2);
    }
    /* add_rows, sum_rows, copy_rows */
    int R = 37, N = 300;
    size_t n = (size_t)R * N;
    float *x = fbuf(n), *p = fbuf(N), *y = fbuf(n), *s = fbuf(N), *a = fbuf(N), *a2 = fbuf(N);
    fill(x, n, 300, -1, 1);
    fill(p, N, 301, -1, 1);
    fill(a, N, 302, -1, 1);
    be->add_rows(R, N, x, p, y);
    for (size_t k = 0; k < n; k++)
        ck_assert(y[k] == x[k] + p[k % N]);
    be->add_rows(R, N, x, p, x);   /* in place */
    check_same("add_rows in place", x, y, n * sizeof *x);
    be->sum_rows(R, N, y, s, 0);
    for (int j = 0; j < N; j++) {
        float e = y[j];
        double ed = y[j];
        for (int r = 1; r < R; r++) {
            e = e + y[(size_t)r * N + j];
            ed += y[(size_t)r * N + j];
        }
        ck_assert_msg(memcmp(&e, &s[j], sizeof e) == 0, "sum_rows [%d] %.9g vs %.9g", j, s[j], e);
        ck_assert(fabs(s[j] - ed) <= 1e-5 * R);
    }
    memcpy(a2, a, N * sizeof *a);
    be->add(N, a2, s);
    be->sum_rows(R, N, y, a, 1);
    check_same("sum_rows accumulate", a, a2, N * sizeof *a);
    /* copy_rows: 5 rows of 7 from stride 11 to stride 9; the rest untouched */
    float src[5 * 11], dst[5 * 9], d0[5 * 9];
    for (int k = 0; k < 5 * 11; k++)
        src[k] = (float)k;
    for (int k = 0; k < 5 * 9; k++)
        dst[k] = d0[k] = -1.0f - (float)k;
    be->copy_rows(5, 7, src + 2, 11, dst + 1, 9);
    for (int r = 0; r < 5; r++)
        for (int j = 0; j < 9; j++) {
            float e = j >= 1 && j < 8 ? src[r * 11 + 2 + (j - 1)] : d0[r * 9 + j];
            ck_assert_msg(dst[r * 9 + j] == e, "copy_rows [%d,%d]", r, j);
        }
    free(x); free(p); free(y); free(s); free(a); free(a2);
}
END_TEST

START_TEST(ln_accumulate)
{
    const cdp_backend *be = cpu_split(2, NULL);
    int R = 40, D = 300;
    size_t n = (size_t)R * D;
    float *x = fbuf(n), *g = fbuf(D), *bt = fbuf(D), *y = fbuf(n), *save = fbuf(2 * R);
    float *dy = fbuf(n), *dx = fbuf(n), *sg = fbuf(D), *sb = fbuf(D), *ag = fbuf(D),
          *ab = fbuf(D), *gg = fbuf(D), *gb = fbuf(D);
    fill(x, n, 310, -1, 1);
    fill(g, D, 311, 0.5f, 1.5f);
    fill(bt, D, 312, -1, 1);
    fill(dy, n, 313, -1, 1);
    fill(sg, D, 314, -3, 3);
    fill(sb, D, 315, -3, 3);
    memcpy(ag, sg, D * sizeof *ag);
    memcpy(ab, sb, D * sizeof *ab);
    be->ln_fwd(R, D, x, g, bt, 1e-6f, y, save);
    be->ln_bwd(R, D, x, g, save, dy, dx, gg, gb, 0);
    be->add(D, sg, gg);
    be->add(D, sb, gb);
    be->ln_bwd(R, D, x, g, save, dy, dx, ag, ab, 1);
    check_same("ln accumulate dgamma", sg, ag, D * sizeof *sg);
    check_same("ln accumulate dbeta", sb, ab, D * sizeof *sb);
    free(x); free(g); free(bt); free(y); free(save); free(dy); free(dx); free(sg); free(sb);
    free(ag); free(ab); free(gg); free(gb);
}
END_TEST

/* every transformer kernel with 1, 2 and 3 threads, on sizes above the
 * parallel thresholds: the same bits */
#define NTOK_OUT 14
START_TEST(tokens_threads)
{
    const int M = 50, N = 50, K = 64, batch = 24;               /* gemm */
    const int SR = 6000, SN = 50;                               /* softmax */
    const int LR = 1000, LD = 300;                              /* layernorm */
    const size_t GN = 300000;                                   /* gelu */
    const int TB = 40, TD = 192, Tn = 49;                       /* tokens */
    const int RR = 500, RN = 600;                               /* rows */
    size_t nA = (size_t)batch * M * K, nB = (size_t)batch * K * N, nC = (size_t)batch * M * N;
    size_t nS = (size_t)SR * SN, nL = (size_t)LR * LD, nTx = (size_t)TB * TD * Tn;
    size_t nTy = (size_t)TB * (Tn + 1) * TD, nR = (size_t)RR * RN;
    float *A = fbuf(nA), *Bm = fbuf(nB), *sx = fbuf(nS), *sg = fbuf(nS), *lx = fbuf(nL);
    float *lg = fbuf(LD), *lb = fbuf(LD), *ldy = fbuf(nL), *gx = fbuf(GN), *gdy = fbuf(GN);
    float *tx = fbuf(nTx), *tc = fbuf(TD), *tdy = fbuf(nTy), *rx = fbuf(nR), *rp = fbuf(RN);
    fill(A, nA, 320, -1, 1); fill(Bm, nB, 321, -1, 1); fill(sx, nS, 322, -5, 5);
    fill(sg, nS, 323, -1, 1); fill(lx, nL, 324, -1, 2); fill(lg, LD, 325, 0.5f, 1.5f);
    fill(lb, LD, 326, -1, 1); fill(ldy, nL, 327, -1, 1); fill(gx, GN, 328, -5, 5);
    fill(gdy, GN, 329, -1, 1); fill(tx, nTx, 330, -1, 1); fill(tc, TD, 331, -1, 1);
    fill(tdy, nTy, 332, -1, 1); fill(rx, nR, 333, -1, 1); fill(rp, RN, 334, -1, 1);
    const size_t sizes[NTOK_OUT] = {nC, nC, nS, nS, nL, 2 * (size_t)LR, nL, LD, LD, GN, GN,
                                    nTy, nTx, TD};
    float *o[3][NTOK_OUT + 3];
    for (int t = 0; t < 3; t++) {
        const cdp_backend *be = cpu_split(t + 1, NULL);
        for (int k = 0; k < NTOK_OUT; k++)
            o[t][k] = fbuf(sizes[k]);
        o[t][NTOK_OUT] = fbuf(nR);
        o[t][NTOK_OUT + 1] = fbuf(RN);
        o[t][NTOK_OUT + 2] = fbuf(nR);
        be->gemm_batched(0, 1, M, N, K, 0.125f, A, K, (size_t)M * K, Bm, K, (size_t)N * K, 0.0f,
                         o[t][0], N, (size_t)M * N, batch);
        be->gemm_batched(1, 0, M, N, K, 1.0f, A, M, (size_t)M * K, Bm, N, (size_t)N * K, 0.0f,
                         o[t][1], N, (size_t)M * N, batch);
        memcpy(o[t][2], sx, nS * sizeof(float));
        be->softmax_fwd(SR, SN, o[t][2]);
        memcpy(o[t][3], sg, nS * sizeof(float));
        be->softmax_bwd(SR, SN, 0.125f, o[t][2], o[t][3]);
        be->ln_fwd(LR, LD, lx, lg, lb, 1e-6f, o[t][4], o[t][5]);
        be->ln_bwd(LR, LD, lx, lg, o[t][5], ldy, o[t][6], o[t][7], o[t][8], 0);
        be->gelu_fwd(GN, gx, o[t][9]);
        be->gelu_bwd(GN, gx, gdy, o[t][10]);
        be->tokens_fwd(TB, TD, Tn, tx, tc, o[t][11]);
        be->tokens_bwd(TB, TD, Tn, tdy, o[t][12], o[t][13], 0);
        be->add_rows(RR, RN, rx, rp, o[t][NTOK_OUT]);
        be->sum_rows(RR, RN, rx, o[t][NTOK_OUT + 1], 0);
        be->copy_rows(RR, RN, rx, RN, o[t][NTOK_OUT + 2], RN);
    }
    static const char *names[NTOK_OUT + 3] = {
        "gemm NT", "gemm TN", "softmax_fwd", "softmax_bwd", "ln y", "ln save", "ln dx",
        "ln dgamma", "ln dbeta", "gelu_fwd", "gelu_bwd", "tokens_fwd", "tokens_bwd dx",
        "tokens_bwd dcls", "add_rows", "sum_rows", "copy_rows"};
    for (int t = 1; t < 3; t++)
        for (int k = 0; k < NTOK_OUT + 3; k++) {
            size_t sz = k < NTOK_OUT ? sizes[k] : k == NTOK_OUT + 1 ? (size_t)RN : nR;
            char what[64];
            snprintf(what, sizeof what, "%s, 1 vs %d threads", names[k], t + 1);
            check_same(what, o[0][k], o[t][k], sz * sizeof(float));
        }
    for (int t = 0; t < 3; t++)
        for (int k = 0; k < NTOK_OUT + 3; k++)
            free(o[t][k]);
    free(A); free(Bm); free(sx); free(sg); free(lx); free(lg); free(lb); free(ldy); free(gx);
    free(gdy); free(tx); free(tc); free(tdy); free(rx); free(rp);
}
END_TEST

/* --precision bf16's element-wise kernels on bfloat16 storage (be->bf16:
 * add3, ReLU, GELU, LayerNorm, BatchNorm's forwards) against the float32 kernels on the widened
 * values, their outputs packed by bf16_pack: the same bits, with 1, 2 and
 * 3 threads, on inputs that hold ties, denormals, infinities and NaNs */
START_TEST(bf16_storage_vs_widened)
{
    const size_t GN = 300000;            /* above the parallel thresholds */
    const int LR = 1000, LD = 300;
    const size_t nL = (size_t)LR * LD;
    float *a = fbuf(GN), *b = fbuf(GN), *dy = fbuf(GN), *lg = fbuf(LD), *lb = fbuf(LD);
    float *ldy = fbuf(nL);
    fill(a, GN, 340, -6, 6); fill(b, GN, 341, -6, 6); fill(dy, GN, 342, -1, 1);
    fill(lg, LD, 343, 0.5f, 1.5f); fill(lb, LD, 344, -1, 1); fill(ldy, nL, 345, -1, 1);
    static const uint32_t special[] = {
        0x3F808000u, 0x3F818000u, 0x00018000u, 0x80000001u, 0x7F800000u, 0xFF800000u,
        0x7FC00001u, 0xFF800001u, 0x7F7FFFFFu, 0x00000000u, 0x80000000u, 0x41200000u };
    for (size_t k = 0; k < sizeof special / sizeof special[0]; k++) {
        memcpy(&a[k * 997], &special[k], sizeof(float));
        memcpy(&b[k * 991 + 5], &special[k], sizeof(float));
    }
    for (int t = 1; t <= 3; t++) {
        const cdp_backend *be = cpu_split(t, NULL);
#ifdef HAVE_DNNL
        ck_assert_ptr_nonnull(be->bf16);
#endif
        if (!be->bf16)
            return;   /* no bfloat16 kernels in this build (checked above when it has them) */
        uint16_t *a16 = malloc(GN * 2), *b16 = malloc(GN * 2), *y16 = malloc(GN * 2);
        uint16_t *w16 = malloc(GN * 2);
        float *aw = fbuf(GN), *bw = fbuf(GN), *y = fbuf(GN), *d1 = fbuf(GN), *d2 = fbuf(GN);
        ck_assert(a16 && b16 && y16 && w16);
        be->bf16_pack(GN, a, a16);
        be->bf16_pack(GN, b, b16);
        be->bf16_unpack(GN, a16, aw);
        be->bf16_unpack(GN, b16, bw);
        char what[64];
        /* add3, each input from its storage or from floats */
        be->add3(GN, aw, bw, y);
        be->bf16_pack(GN, y, w16);
        for (int form = 0; form < 4; form++) {
            be->bf16->add3(GN, form & 1 ? aw : NULL, form & 1 ? NULL : a16,
                           form & 2 ? bw : NULL, form & 2 ? NULL : b16, y16);
            snprintf(what, sizeof what, "bf16 add3 (form %d), %d threads", form, t);
            check_same(what, w16, y16, GN * 2);
        }
        /* relu in place, and its backward */
        be->relu_fwd(GN, aw);
        be->bf16_pack(GN, aw, w16);
        memcpy(y16, a16, GN * 2);
        be->bf16->relu_fwd(GN, y16);
        snprintf(what, sizeof what, "bf16 relu_fwd, %d threads", t);
        check_same(what, w16, y16, GN * 2);
        memcpy(d1, dy, GN * sizeof(float));
        memcpy(d2, dy, GN * sizeof(float));
        be->relu_bwd(GN, aw, d1);
        be->bf16->relu_bwd(GN, y16, d2);
        snprintf(what, sizeof what, "bf16 relu_bwd, %d threads", t);
        check_same(what, d1, d2, GN * sizeof(float));
        be->bf16_unpack(GN, a16, aw);
        /* gelu: forward (n not a multiple of the span) from storage and
         * from floats, and backward */
        const size_t gn = GN - 123;
        be->gelu_fwd(gn, aw, y);
        be->bf16_pack(gn, y, w16);
        be->bf16->gelu_fwd(gn, NULL, a16, y16);
        snprintf(what, sizeof what, "bf16 gelu_fwd, %d threads", t);
        check_same(what, w16, y16, gn * 2);
        be->bf16->gelu_fwd(gn, aw, NULL, y16);
        snprintf(what, sizeof what, "bf16 gelu_fwd from floats, %d threads", t);
        check_same(what, w16, y16, gn * 2);
        be->gelu_bwd(gn, aw, dy, d1);
        be->bf16->gelu_bwd(gn, a16, dy, d2);
        snprintf(what, sizeof what, "bf16 gelu_bwd, %d threads", t);
        check_same(what, d1, d2, gn * sizeof(float));
        /* LayerNorm, forward
         * with its saved mean and rstd, backward with accumulate 0 and 1 */
        float *save1 = fbuf(2 * (size_t)LR), *save2 = fbuf(2 * (size_t)LR);
        float *g1 = fbuf(2 * (size_t)LD), *g2 = fbuf(2 * (size_t)LD);
        uint16_t *lx16 = malloc(nL * 2);
        float *lx = fbuf(nL), *lxw = fbuf(nL);
        ck_assert_ptr_nonnull(lx16);
        fill(lx, nL, 346, -1, 2);
        be->bf16_pack(nL, lx, lx16);
        be->bf16_unpack(nL, lx16, lxw);
        be->ln_fwd(LR, LD, lxw, lg, lb, 1e-5f, y, save1);
        be->bf16_pack(nL, y, w16);
        for (int form = 0; form < 2; form++) {
            be->bf16->ln_fwd(LR, LD, form ? lxw : NULL, form ? NULL : lx16, lg, lb, 1e-5f, y16,
                             save2);
            snprintf(what, sizeof what, "bf16 ln_fwd y (form %d), %d threads", form, t);
            check_same(what, w16, y16, nL * 2);
            snprintf(what, sizeof what, "bf16 ln_fwd save (form %d), %d threads", form, t);
            check_same(what, save1, save2, 2 * (size_t)LR * sizeof(float));
        }
        for (int acc = 0; acc < 2; acc++) {
            for (int j = 0; j < 2 * LD; j++)
                g1[j] = g2[j] = 0.25f * (float)j;
            be->ln_bwd(LR, LD, lxw, lg, save1, ldy, d1, g1, g1 + LD, acc);
            be->bf16->ln_bwd(LR, LD, lx16, lg, save1, ldy, d2, g2, g2 + LD, acc);
            snprintf(what, sizeof what, "bf16 ln_bwd dx, %d threads, accumulate %d", t, acc);
            check_same(what, d1, d2, nL * sizeof(float));
            snprintf(what, sizeof what, "bf16 ln_bwd dgamma, dbeta, %d threads, accumulate %d",
                     t, acc);
            check_same(what, g1, g2, 2 * (size_t)LD * sizeof(float));
        }
        /* BatchNorm's forwards: channel groups of 8 and a partial one,
         * planes not a multiple of 8, the input from storage or floats */
        const int BB = 6, BC = 20, BHW = 49;
        const size_t nb = (size_t)BB * BC * BHW;
        float *bst1 = fbuf(4 * (size_t)BC), *bsv2 = fbuf(2 * (size_t)BC);
        double st1[2 * 20], st2[2 * 20];
        be->bn_fwd_train(BB, BC, BHW, lxw, lg, lb, 1e-5f, y, bst1, st1);
        be->bf16_pack(nb, y, w16);
        for (int form = 0; form < 2; form++) {
            be->bf16->bn_fwd_train(BB, BC, BHW, form ? lxw : NULL, form ? NULL : lx16, lg, lb,
                                   1e-5f, y16, bsv2, st2);
            snprintf(what, sizeof what, "bf16 bn_fwd_train (form %d), %d threads", form, t);
            check_same(what, w16, y16, nb * 2);
            check_same(what, bst1, bsv2, 2 * (size_t)BC * sizeof(float));
            check_same(what, st1, st2, sizeof st1);
        }
        for (int c = 0; c < BC; c++)
            bst1[2 * BC + c] = 0.5f + 0.01f * (float)c;   /* running variance */
        be->bn_fwd_eval(BB, BC, BHW, lxw, lg, lb, lb, bst1 + 2 * BC, 1e-5f, y);
        be->bf16_pack(nb, y, w16);
        for (int form = 0; form < 2; form++) {
            be->bf16->bn_fwd_eval(BB, BC, BHW, form ? lxw : NULL, form ? NULL : lx16, lg, lb,
                                  lb, bst1 + 2 * BC, 1e-5f, y16);
            snprintf(what, sizeof what, "bf16 bn_fwd_eval (form %d), %d threads", form, t);
            check_same(what, w16, y16, nb * 2);
        }
        free(bst1); free(bsv2);
        free(save1); free(save2); free(g1); free(g2); free(lx16); free(lx); free(lxw);
        free(a16); free(b16); free(y16); free(w16);
        free(aw); free(bw); free(y); free(d1); free(d2);
    }
    free(a); free(b); free(dy); free(lg); free(lb); free(ldy);
}
END_TEST

/* ------------------------------------------------------------ suite */

static Suite *image_token_kernels_suite(void)
{
    Suite *s = suite_create("cpu_image_token_kernels");
    TCase *tc = tcase_create("conv2d");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, conv_fd_reference);
    tcase_add_test(tc, conv_vs_reference);
    tcase_add_test(tc, conv_accumulate);
    tcase_add_test(tc, conv_threads);
    tcase_add_test(tc, conv_direct_vs_reference);
    tcase_add_test(tc, conv_direct_accumulate_dx_null);
    tcase_add_test(tc, conv_direct_threads);
    tcase_add_test(tc, conv_direct_simd_portable);
    tcase_add_test(tc, conv_direct_policy);
    suite_add_tcase(s, tc);
#ifdef HAVE_DNNL
    tc = tcase_create("dnnl");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, conv_dnnl_vs_reference);
    tcase_add_test(tc, conv_dnnl_accumulate_dx_null);
    tcase_add_test(tc, conv_dnnl_threads);
    tcase_add_test(tc, conv_dnnl_policy);
    tcase_add_test(tc, conv_dnnl_cache_keeps_both_slot_sizes);
    suite_add_tcase(s, tc);
#endif
    tc = tcase_create("batchnorm");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, bn_fd_reference);
    tcase_add_test(tc, bn_vs_reference);
    tcase_add_test(tc, bn_eval_formula);
    tcase_add_test(tc, bn_accumulate);
    tcase_add_test(tc, bn_running_hand);
    tcase_add_test(tc, bn_running_two_pass);
    tcase_add_test(tc, bn_threads);
    tcase_add_test(tc, bn_formula_bits);
    suite_add_tcase(s, tc);
    tc = tcase_create("pooling");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, maxpool_vs_reference);
    tcase_add_test(tc, maxpool_ties_and_padding);
    tcase_add_test(tc, avgpool_order);
    tcase_add_test(tc, add3_alias);
    tcase_add_test(tc, pool_threads);
    suite_add_tcase(s, tc);
    tc = tcase_create("tokens");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, gemm_batched_vs_loops);
    tcase_add_test(tc, gemm_batched_edges);
    tcase_add_test(tc, softmax_fd_reference);
    tcase_add_test(tc, softmax_vs_reference);
    tcase_add_test(tc, ln_fd_reference);
    tcase_add_test(tc, ln_vs_reference);
    tcase_add_test(tc, ln_accumulate);
    tcase_add_test(tc, gelu_hand_fd_reference);
    tcase_add_test(tc, tokens_and_rows);
    tcase_add_test(tc, tokens_threads);
    tcase_add_test(tc, bf16_storage_vs_widened);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
#ifndef HAVE_DNNL
    /* Check has no skip status: say so, rather than let them pass unseen */
    printf("SKIP: cpu_image_token_kernels dnnl: conv_dnnl_vs_reference, conv_dnnl_accumulate_dx_null, "
           "conv_dnnl_threads, conv_dnnl_policy, conv_dnnl_cache_keeps_both_slot_sizes (built without oneDNN: configure "
           "--with-dnnl)\n");
#endif
    int failed = check_run(image_token_kernels_suite());
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
