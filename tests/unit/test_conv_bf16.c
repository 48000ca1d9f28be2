/* --precision bf16's convolution kernels on the CPU (conv2d_fwd_bf16,
 * conv2d_bwd_bf16; src/cpu/conv_bf16.c, oneDNN's bf16 primitives through
 * kernels_conv_dnnl.c), on operands rounded to bfloat16:
 *   1. y, dx and dw against the direct convolution in double
 *      (tests/lib/conv_ref.h) within the float32 summation bound,
 *      (n + 2) * 2^-24 * (the same sums over |terms|), n the most terms
 *      a sum of the three has: a bfloat16 output, a product of unrounded
 *      operands or a lost slot is off by far more;
 *   2. db bit for bit the float32 kernel's (the same sum in double);
 *   3. the same bits with 1, 2 and 3 threads, gemm splits 2 and 4 (the
 *      slots, never the threads, cut the work);
 *   4. accumulate: the bits of the result computed alone, then add();
 *      dx NULL leaves dw as it is with dx;
 *   5. where oneDNN's ISA has AVX512_BF16, the bits differ from the
 *      float32 kernels' on the rounded operands (another summation order:
 *      proof that the bf16 path ran), and with CDP_CONV_DNNL=0 they are
 *      those kernels' bits.
 * Shapes: resnet18-cifar's (the 3-channel stem, 3x3 at 64 channels, the
 * 1x1 stride-2 shortcut, 512 channels on 4x4) at small B, slots of unequal
 * sizes, odd images, a bias, padding 0 and 2, stride 3. */
#include "config.h"   /* HAVE_DNNL */

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "util/rng.h"
#include "../lib/check_util.h"
#include "../lib/conv_ref.h"
#include "../lib/check_run.h"
#include "../../src/cpu/cpu_internal.h"

/* B, Cin, H, W, Cout, K, stride, pad, bias */
static const int shapes[][9] = {
    {3, 3, 8, 8, 64, 3, 1, 1, 0},      /* resnet18-cifar's stem */
    {5, 64, 6, 6, 64, 3, 1, 1, 0},     /* 3x3, slots of 2 and 3 samples */
    {4, 64, 8, 8, 128, 1, 2, 0, 0},    /* 1x1 stride-2 shortcut */
    {2, 64, 9, 7, 128, 3, 2, 1, 1},    /* stride 2, odd image, bias */
    {3, 512, 4, 4, 512, 3, 1, 1, 0},   /* layer4: 4x4, 512 channels */
    {2, 20, 6, 5, 17, 3, 1, 2, 1},     /* pad 2, odd channels */
    {2, 16, 5, 7, 16, 3, 3, 0, 1},     /* stride 3, pad 0 */
};
#define NSHAPES (sizeof shapes / sizeof *shapes)

static cdp_conv_shape shape_of(int i)
{
    const int *v = shapes[i];
    cdp_conv_shape s = {v[0], v[1], v[2], v[3], v[4], v[5], v[5], v[6], v[7], 0, 0, 1};
    s.OH = (s.H + 2 * s.pad - s.KH) / s.stride + 1;
    s.OW = (s.W + 2 * s.pad - s.KW) / s.stride + 1;
    return s;
}

static size_t nx_of(const cdp_conv_shape *s) { return (size_t)s->B * s->Cin * s->H * s->W; }
static size_t ny_of(const cdp_conv_shape *s) { return (size_t)s->B * s->Cout * s->OH * s->OW; }

/* the operands, x, w and dy rounded to bfloat16 (b stays float32) */
typedef struct { float *x, *w, *b, *dy; } operands;
/* one run's results */
typedef struct { float *y, *dx, *dw, *db; } results;

static void fill_bf16(float *p, size_t n, uint64_t stream)
{
    for (size_t k = 0; k < n; k++)
        p[k] = 2.0f * cdp_rand_unit(777, stream, k) - 1.0f;
    cdp_backend_cpu(1)->round_bf16(n, p, p);
}

static operands operands_make(const cdp_conv_shape *s, int i)
{
    operands o = {fbuf(nx_of(s)), fbuf(cdp_conv_weight_count(s)), fbuf((size_t)s->Cout),
                  fbuf(ny_of(s))};
    fill_bf16(o.x, nx_of(s), 10 * i + 1);
    fill_bf16(o.w, cdp_conv_weight_count(s), 10 * i + 2);
    for (int c = 0; c < s->Cout; c++)
        o.b[c] = 0.25f * cdp_rand_unit(777, 10 * i + 3, c) - 0.125f;
    fill_bf16(o.dy, ny_of(s), 10 * i + 4);
    return o;
}

static void operands_free(operands *o)
{
    free(o->x); free(o->w); free(o->b); free(o->dy);
}

static results results_make(const cdp_conv_shape *s)
{
    return (results){fbuf(ny_of(s)), fbuf(nx_of(s)), fbuf(cdp_conv_weight_count(s)),
                     fbuf((size_t)s->Cout)};
}

static void results_free(results *r)
{
    free(r->y); free(r->dx); free(r->dw); free(r->db);
}

/* forward and backward through be's bf16 kernels (bf16 = 0: the float32 ones) */
static void run(const cdp_backend *be, const cdp_conv_shape *s, const operands *o, int bias,
                int bf16, results *r)
{
    size_t nws = (bf16 ? be->conv2d_bf16_ws_floats : be->conv2d_ws_floats)(s);
    float *ws = fbuf(nws + 1);
    const float *b = bias ? o->b : NULL;
    float *db = bias ? r->db : NULL;
    if (bf16) {
        be->conv2d_fwd_bf16(s, o->x, o->w, b, r->y, ws);
        be->conv2d_bwd_bf16(s, o->x, o->w, o->dy, r->dx, r->dw, db, 0, ws);
    } else {
        be->conv2d_fwd(s, o->x, o->w, b, r->y, ws);
        be->conv2d_bwd(s, o->x, o->w, o->dy, r->dx, r->dw, db, 0, ws);
    }
    free(ws);
}

static double *abs_d(const float *p, size_t n)
{
    double *d = to_d(p, n);
    for (size_t k = 0; k < n; k++)
        d[k] = fabs(d[k]);
    return d;
}

/* |got - ref| <= (n + 2) 2^-24 mag, element by element */
static void check_bound(const char *what, int shape, const float *got, const double *ref,
                        const double *mag, size_t count, double n)
{
    for (size_t k = 0; k < count; k++) {
        double d = fabs((double)got[k] - ref[k]);
        if (!(d <= (n + 2) * 0x1p-24 * mag[k]))
            ck_abort_msg("bf16 conv shape %d %s[%zu]: %.9g vs %.9g (bound %.3g)", shape, what,
                         k, (double)got[k], ref[k], (n + 2) * 0x1p-24 * mag[k]);
    }
}

static void check_reference(const cdp_conv_shape *s, int i, const operands *o, int bias,
                            const results *r)
{
    const size_t nx = nx_of(s), ny = ny_of(s), nw = cdp_conv_weight_count(s);
    double *x = to_d(o->x, nx), *w = to_d(o->w, nw), *dy = to_d(o->dy, ny);
    double *b = to_d(o->b, (size_t)s->Cout);
    double *ax = abs_d(o->x, nx), *aw = abs_d(o->w, nw), *ady = abs_d(o->dy, ny);
    double *ab = abs_d(o->b, (size_t)s->Cout);
    double *y = dbuf(ny), *my = dbuf(ny), *dx = dbuf(nx), *mdx = dbuf(nx), *dw = dbuf(nw);
    double *mdw = dbuf(nw), *db = dbuf((size_t)s->Cout);
    conv_ref_fwd(s, x, w, bias ? b : NULL, y);
    conv_ref_fwd(s, ax, aw, bias ? ab : NULL, my);
    conv_ref_bwd(s, x, w, dy, dx, dw, db);
    conv_ref_bwd(s, ax, aw, ady, mdx, mdw, db);
    const double nf = (double)s->Cin * s->KH * s->KW, nd = (double)s->Cout * s->KH * s->KW;
    const double nwt = (double)s->B * s->OH * s->OW;
    check_bound("y", i, r->y, y, my, ny, nf);
    check_bound("dx", i, r->dx, dx, mdx, nx, nd);
    check_bound("dw", i, r->dw, dw, mdw, nw, nwt);
    free(x); free(w); free(dy); free(b); free(ax); free(aw); free(ady); free(ab);
    free(y); free(my); free(dx); free(mdx); free(dw); free(mdw); free(db);
}

static int same(const float *a, const float *b, size_t n)
{
    return memcmp(a, b, n * sizeof(float)) == 0;
}

START_TEST(conv_bf16_vs_reference)
{
    unsetenv("CDP_CONV_DNNL");
    const cdp_backend *be = cpu_split(2, NULL);
    int differs = 0;
    for (int i = 0; i < (int)NSHAPES; i++) {
        cdp_conv_shape s = shape_of(i);
        const int bias = shapes[i][8];
        operands o = operands_make(&s, i);
        results r = results_make(&s), f = results_make(&s);
        run(be, &s, &o, bias, 1, &r);
        check_reference(&s, i, &o, bias, &r);
        run(be, &s, &o, bias, 0, &f);
        if (bias)
            ck_assert_msg(same(r.db, f.db, (size_t)s.Cout), "bf16 conv shape %d: db", i);
        if (!same(r.y, f.y, ny_of(&s)) || !same(r.dw, f.dw, cdp_conv_weight_count(&s)))
            differs++;
        results_free(&r);
        results_free(&f);
        operands_free(&o);
    }
#ifdef HAVE_DNNL
    if (cdp_cpu_dnnl_has_bf16())
        ck_assert_msg(differs == (int)NSHAPES, "bf16 conv: the float32 kernels' bits on %d of "
                      "%d shapes (the bf16 path did not run)", (int)NSHAPES - differs,
                      (int)NSHAPES);
    else
        printf("SKIP: oneDNN's ISA here has no AVX512_BF16: the float32 kernels ran\n");
#else
    (void)differs;
    printf("SKIP: built without oneDNN: the float32 kernels ran\n");
#endif
}
END_TEST

START_TEST(conv_bf16_threads)
{
    unsetenv("CDP_CONV_DNNL");
    static const char *splits[] = {"2", "4"};
    for (int sp = 0; sp < 2; sp++)
        for (int i = 0; i < (int)NSHAPES; i++) {
            cdp_conv_shape s = shape_of(i);
            operands o = operands_make(&s, i);
            results r[3];
            for (int t = 0; t < 3; t++) {
                r[t] = results_make(&s);
                run(cpu_split(t + 1, splits[sp]), &s, &o, 1, 1, &r[t]);
            }
            for (int t = 1; t < 3; t++)
                ck_assert_msg(same(r[0].y, r[t].y, ny_of(&s)) &&
                              same(r[0].dx, r[t].dx, nx_of(&s)) &&
                              same(r[0].dw, r[t].dw, cdp_conv_weight_count(&s)) &&
                              same(r[0].db, r[t].db, (size_t)s.Cout),
                              "bf16 conv shape %d split %s: %d threads differ from 1", i,
                              splits[sp], t + 1);
            for (int t = 0; t < 3; t++)
                results_free(&r[t]);
            operands_free(&o);
        }
}
END_TEST

START_TEST(conv_bf16_accumulate_dx_null)
{
    unsetenv("CDP_CONV_DNNL");
    const cdp_backend *be = cpu_split(2, NULL);
    for (int i = 0; i < (int)NSHAPES; i++) {
        cdp_conv_shape s = shape_of(i);
        const size_t nw = cdp_conv_weight_count(&s), C = (size_t)s.Cout;
        operands o = operands_make(&s, i);
        results r = results_make(&s);
        run(be, &s, &o, 1, 1, &r);
        float *ws = fbuf(be->conv2d_bf16_ws_floats(&s) + 1);
        float *dw = fbuf(nw), *db = fbuf(C), *want = fbuf(nw), *wantb = fbuf(C);
        for (size_t k = 0; k < nw; k++)
            dw[k] = want[k] = 0.5f - cdp_rand_unit(778, i, k);
        for (size_t k = 0; k < C; k++)
            db[k] = wantb[k] = 0.5f - cdp_rand_unit(779, i, k);
        be->add(nw, want, r.dw);
        be->add(C, wantb, r.db);
        be->conv2d_bwd_bf16(&s, o.x, o.w, o.dy, NULL, dw, db, 1, ws);
        ck_assert_msg(same(dw, want, nw) && same(db, wantb, C),
                      "bf16 conv shape %d: accumulate (dx NULL) is not the result then add()", i);
        be->conv2d_bwd_bf16(&s, o.x, o.w, o.dy, NULL, dw, NULL, 0, ws);
        ck_assert_msg(same(dw, r.dw, nw), "bf16 conv shape %d: dx NULL changes dw", i);
        free(ws); free(dw); free(db); free(want); free(wantb);
        results_free(&r);
        operands_free(&o);
    }
}
END_TEST

/* CDP_CONV_DNNL=0: the float32 kernels' bits, and the banner says so */
START_TEST(conv_bf16_switch_off)
{
    setenv("CDP_CONV_DNNL", "0", 1);
    const cdp_backend *be = cpu_split(2, NULL);
    ck_assert_ptr_nonnull(strstr(be->describe(), "bf16: the float32 kernels"));
    for (int i = 0; i < (int)NSHAPES; i++) {
        cdp_conv_shape s = shape_of(i);
        operands o = operands_make(&s, i);
        results r = results_make(&s), f = results_make(&s);
        run(be, &s, &o, 1, 1, &r);
        run(be, &s, &o, 1, 0, &f);
        ck_assert_msg(same(r.y, f.y, ny_of(&s)) && same(r.dx, f.dx, nx_of(&s)) &&
                      same(r.dw, f.dw, cdp_conv_weight_count(&s)),
                      "bf16 conv shape %d with CDP_CONV_DNNL=0: not the float32 kernels", i);
        results_free(&r);
        results_free(&f);
        operands_free(&o);
    }
    unsetenv("CDP_CONV_DNNL");
}
END_TEST

static Suite *conv_bf16_suite(void)
{
    Suite *s = suite_create("conv_bf16");
    TCase *tc = tcase_create("conv_bf16");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, conv_bf16_vs_reference);
    tcase_add_test(tc, conv_bf16_threads);
    tcase_add_test(tc, conv_bf16_accumulate_dx_null);
    tcase_add_test(tc, conv_bf16_switch_off);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return check_run(conv_bf16_suite()) ? EXIT_FAILURE : EXIT_SUCCESS;
}
