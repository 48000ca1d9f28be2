/* Unit tests of the layer kinds torchvision's classic networks add to the
 * ResNets' and the ViT's: ReLU6 and dropout.  Each layer runs through its
 * ops (cdp_layer_ops_of, as a stage runs it) on the CPU backend, and the
 * test checks:
 *   1. hand values: the ends of ReLU6 (its gradient is 0 at x = 0 and
 *      x = 6, as PyTorch's), -0 and the infinities; dropout with p = 0
 *      (the identity), p = 1 (x * 0) and in evaluation (the identity);
 *   2. the forward against a reference in double written with direct loops,
 *      and the backward against central finite differences of that
 *      reference (away from ReLU6's kinks, which no perturbation crosses;
 *      dropout's mask fixed by the call's context); dropout's draws against
 *      its formula (doc/reference.md section 3.11) computed here with
 *      cdp_rand_unit, the share of dropped elements, and draws that change
 *      with the seed, the step and the layer index but not with the way
 *      the step's samples are cut into calls (ranks, workers);
 *   3. the same bits with 1, 2 and 3 threads, on tensors long enough for
 *      the elementwise loops to split. */
#include <check.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cdp/backend.h"
#include "cdp/nn.h"
#include "cdp/rng.h"
#include "check_util.h"
#include "check_run.h"
#include "../src/cpu/cpu_internal.h"   /* CDP_CPU_OMP_MIN: when loops split */

/* ------------------------------------------------------------ helpers */

static float urand(uint64_t stream, uint64_t k, float lo, float hi)
{
    return lo + (hi - lo) * cdp_rand_unit(5151, stream, k);
}

/* One layer of kind on samples of shape xs, with its buffers. */
typedef struct one_layer {
    cdp_layer ly;
    const cdp_layer_ops *ops;
    int B;
    size_t nx, ny, np;
    float *p, *g, *x, *y, *dy, *dx, *save, *ws;
} one_layer;

static void layer_make(one_layer *L, const cdp_backend *be, cdp_layer ly, int B)
{
    memset(L, 0, sizeof *L);
    L->ly = ly;
    L->ops = cdp_layer_ops_of(ly.kind);
    L->B = B;
    char err[256];
    ck_assert_msg(L->ops->shape(&L->ly, err, sizeof err) == 0, "%s", err);
    cdp_param_desc d[8];
    int nd = L->ops->params ? L->ops->params(&L->ly, d) : 0;
    for (int k = 0; k < nd; k++) {
        size_t n = 1;
        for (int q = 0; q < d[k].ndim; q++)
            n *= (size_t)d[k].shape[q];
        L->np += n;
    }
    L->nx = (size_t)B * cdp_shape_n(L->ly.xs);
    L->ny = (size_t)B * cdp_shape_n(L->ly.ys);
    L->p = fbuf(L->np);
    L->g = fbuf(L->np);
    L->x = fbuf(L->nx);
    L->y = fbuf(L->ny);
    L->dy = fbuf(L->ny);
    L->dx = fbuf(L->nx);
    size_t save = (L->ops->save_per_sample ? L->ops->save_per_sample(&L->ly) * (size_t)B : 0) +
                  (L->ops->save_fixed ? L->ops->save_fixed(&L->ly) : 0);
    L->save = fbuf(save);
    L->ws = fbuf(L->ops->ws_floats ? L->ops->ws_floats(&L->ly, be, B) : 0);
}

static void layer_free(one_layer *L)
{
    free(L->p); free(L->g); free(L->x); free(L->y); free(L->dy); free(L->dx);
    free(L->save); free(L->ws);
}

/* forward (training) then backward, as a stage runs them, in context c at
 * layer index j: an in-place layer works on y (a copy of x) and on dx (a
 * copy of dy) */
static void layer_run(one_layer *L, const cdp_backend *be, const cdp_layer_ctx *c, int j)
{
    const int in_place = L->ops->storage == CDP_STORAGE_IN_PLACE;
    cdp_layer_io io = {.be = be, .B = L->B, .p = L->p, .g = L->g, .save = L->save,
                       .x = L->x, .y = L->y, .dy = L->dy, .dx = L->dx, .ws = L->ws,
                       .ctx = c, .layer_index = j};
    if (in_place)
        memcpy(L->y, L->x, L->nx * sizeof(float));
    L->ops->fwd(&L->ly, &io, 1);
    if (in_place)
        memcpy(L->dx, L->dy, L->nx * sizeof(float));
    L->ops->bwd(&L->ly, &io);
}

static void check_bits(const char *what, const float *a, const float *b, size_t n)
{
    for (size_t k = 0; k < n; k++)
        if (memcmp(&a[k], &b[k], sizeof(float)))
            ck_abort_msg("%s[%zu]: %.9g vs %.9g (bits differ)", what, k, (double)a[k],
                         (double)b[k]);
}

/* x uniform in [lo, hi), dy in [-1, 1), from stream */
static void layer_fill(one_layer *L, uint64_t stream, float lo, float hi)
{
    for (size_t k = 0; k < L->nx; k++)
        L->x[k] = urand(stream, k, lo, hi);
    for (size_t k = 0; k < L->ny; k++)
        L->dy[k] = urand(stream + 1, k, -1.0f, 1.0f);
}

/* The layer ly on B samples (x from layer_fill(stream, lo, hi)) gives the
 * same y and dx with 1, 2 and 3 threads.  Returns y with 1 thread (free it). */
static float *check_threads(const char *what, cdp_layer ly, int B, uint64_t stream, float lo,
                            float hi, const cdp_layer_ctx *c)
{
    static const int thr[] = {1, 2, 3};
    float *y0 = NULL, *dx0 = NULL;
    for (int r = 0; r < 3; r++) {
        const cdp_backend *be = cdp_backend_cpu(thr[r]);
        one_layer L;
        layer_make(&L, be, ly, B);
        layer_fill(&L, stream, lo, hi);
        layer_run(&L, be, c, 1);
        if (r == 0) {
            y0 = L.y;
            dx0 = L.dx;
            L.y = L.dx = NULL;
        } else {
            char m[96];
            snprintf(m, sizeof m, "%s y, %d threads", what, thr[r]);
            check_bits(m, L.y, y0, L.ny);
            snprintf(m, sizeof m, "%s dx, %d threads", what, thr[r]);
            check_bits(m, L.dx, dx0, L.nx);
        }
        layer_free(&L);
    }
    free(dx0);
    return y0;
}

/* ------------------------------------------------------------ ReLU6 */

static double relu6_ref(double x)
{
    return x < 0 ? 0 : x > 6 ? 6 : x;
}

static cdp_layer relu6_layer(int n)
{
    cdp_layer ly = {.kind = CDP_LAYER_RELU6, .in2 = -1, .xs = {n, 1, 1}};
    return ly;
}

START_TEST(relu6_hand)
{
    const cdp_backend *be = cdp_backend_cpu(1);
    static const float x[] = {-1.0f, -0.0f, 0.0f, 1e-30f, 3.0f, 5.9999995f, 6.0f, 6.0000005f,
                              7.0f, INFINITY, -INFINITY, -1e-30f};
    static const float y[] = {0.0f, -0.0f, 0.0f, 1e-30f, 3.0f, 5.9999995f, 6.0f, 6.0f,
                              6.0f, 6.0f, 0.0f, 0.0f};
    /* the gradient passes strictly inside (0, 6): 0 at both ends */
    static const float mask[] = {0, 0, 0, 1, 1, 1, 0, 0, 0, 0, 0, 0};
    enum { N = sizeof x / sizeof *x };
    one_layer L;
    layer_make(&L, be, relu6_layer(N), 1);
    for (int k = 0; k < N; k++) {
        L.x[k] = x[k];
        L.dy[k] = 2.5f + (float)k;
    }
    layer_run(&L, be, NULL, 0);
    check_bits("relu6 y", L.y, y, N);
    for (int k = 0; k < N; k++)
        ck_assert_msg(L.dx[k] == (mask[k] ? L.dy[k] : 0.0f), "relu6 dx[%d] = %g at x = %g", k,
                      (double)L.dx[k], (double)x[k]);
    layer_free(&L);
}
END_TEST

/* L = sum(relu6(x) * r): dL/dx by central differences in double */
START_TEST(relu6_fd_reference)
{
    const cdp_backend *be = cdp_backend_cpu(1);
    enum { B = 3, C = 4, H = 5, W = 7 };
    cdp_layer ly = {.kind = CDP_LAYER_RELU6, .in2 = -1, .xs = {C, H, W}};
    one_layer L;
    layer_make(&L, be, ly, B);
    for (size_t k = 0; k < L.nx; k++) {
        float v = urand(1, k, -3.0f, 9.0f);
        /* keep away from the kinks, where a difference would straddle one */
        if (fabsf(v) < 1e-2f || fabsf(v - 6.0f) < 1e-2f)
            v += 0.05f;
        L.x[k] = v;
        L.dy[k] = urand(2, k, -1.0f, 1.0f);
    }
    layer_run(&L, be, NULL, 0);
    const double h = 1e-4;
    for (size_t k = 0; k < L.nx; k++) {
        const double x = L.x[k], r = L.dy[k];
        ck_assert_msg((double)L.y[k] == relu6_ref(x), "relu6 y[%zu] = %.9g, reference %.9g", k,
                      (double)L.y[k], relu6_ref(x));
        const double fd = (relu6_ref(x + h) * r - relu6_ref(x - h) * r) / (2 * h);
        ck_assert_msg(fabs((double)L.dx[k] - fd) <= 1e-9 * (1 + fabs(fd)),
                      "relu6 dx[%zu] = %.9g, finite difference %.9g at x = %.9g", k,
                      (double)L.dx[k], fd, x);
    }
    layer_free(&L);
}
END_TEST

START_TEST(relu6_threads)
{
    /* long enough for the loops to split */
    free(check_threads("relu6", relu6_layer(3 * CDP_CPU_OMP_MIN + 5), 1, 3, -2.0f, 8.0f, NULL));
}
END_TEST

/* ------------------------------------------------------------ dropout */

#define STREAM_DROPOUT 0x6364702d64726f70ULL   /* doc/reference.md section 3.11 */

static cdp_layer dropout_layer(cdp_shape xs, double p)
{
    cdp_layer ly = {.kind = CDP_LAYER_DROPOUT, .in2 = -1, .xs = xs, .drop_p = p};
    return ly;
}

/* the formula of doc/reference.md, written from cdp_rand_unit: is element
 * e of the step's sample s kept? */
static int kept(const cdp_layer_ctx *c, int j, size_t n, int64_t s, size_t e, double p)
{
    uint64_t stream = cdp_rand_u64(STREAM_DROPOUT, (uint64_t)c->step, (uint64_t)j);
    return (double)cdp_rand_unit(c->seed, stream, (uint64_t)s * n + e) >= p;
}

START_TEST(dropout_formula)
{
    const cdp_backend *be = cdp_backend_cpu(1);
    static const double ps[] = {0.5, 0.2, 0.29623987940996116, 0.9};
    const cdp_shape xs = {3, 5, 7};
    enum { B = 4 };
    for (size_t q = 0; q < sizeof ps / sizeof *ps; q++) {
        const double p = ps[q];
        /* PyTorch's scale: 1 divided by (1 - p) rounded to float (0.2962...
         * is a p where this differs from 1/(1 - p) rounded once) */
        const float scale = 1.0f / (float)(1.0 - p);
        one_layer L;
        layer_make(&L, be, dropout_layer(xs, p), B);
        layer_fill(&L, 10 + q, -2.0f, 2.0f);
        const cdp_layer_ctx c = {.seed = 77 + q, .step = 3, .sample0 = 8};
        layer_run(&L, be, &c, 5);
        const size_t n = cdp_shape_n(xs);
        for (int b = 0; b < B; b++)
            for (size_t e = 0; e < n; e++) {
                const size_t k = (size_t)b * n + e;
                const float noise = kept(&c, 5, n, c.sample0 + b, e, p) ? scale : 0.0f;
                const float y = L.x[k] * noise, dx = L.dy[k] * noise;
                ck_assert_msg(!memcmp(&L.y[k], &y, 4) && !memcmp(&L.dx[k], &dx, 4),
                              "p %g: y[%zu] = %.9g dx = %.9g, formula %.9g %.9g", p, k,
                              (double)L.y[k], (double)L.dx[k], (double)y, (double)dx);
            }
        layer_free(&L);
    }
}
END_TEST

/* L = sum(y * r): dL/dx by central differences of the reference in double,
 * whose mask is the layer's (the context fixes it) */
START_TEST(dropout_fd_reference)
{
    const cdp_backend *be = cdp_backend_cpu(1);
    const double p = 0.3;
    one_layer L;
    layer_make(&L, be, dropout_layer((cdp_shape){4, 3, 3}, p), 5);
    layer_fill(&L, 20, -2.0f, 2.0f);
    const cdp_layer_ctx c = {.seed = 9, .step = 11, .sample0 = 15};
    layer_run(&L, be, &c, 2);
    const size_t n = L.nx / 5;
    const double h = 1e-3, scale = 1.0 / (1.0 - p);
    int dropped = 0;
    for (size_t k = 0; k < L.nx; k++) {
        const double m = kept(&c, 2, n, c.sample0 + (int64_t)(k / n), k % n, p) ? scale : 0.0;
        const double x = L.x[k], r = L.dy[k];
        ck_assert_msg(fabs((double)L.y[k] - x * m) <= 1e-6 * fabs(x * m),
                      "dropout y[%zu] = %.9g, reference %.9g", k, (double)L.y[k], x * m);
        const double fd = ((x + h) * m * r - (x - h) * m * r) / (2 * h);
        ck_assert_msg(fabs((double)L.dx[k] - fd) <= 1e-6 * (1 + fabs(fd)),
                      "dropout dx[%zu] = %.9g, finite difference %.9g", k, (double)L.dx[k], fd);
        dropped += m == 0.0;
    }
    ck_assert_msg(dropped > 0 && dropped < (int)L.nx, "%d of %zu dropped", dropped, L.nx);
    layer_free(&L);
}
END_TEST

/* p = 0: the identity; p = 1: x * 0 (the signs of x kept, as PyTorch);
 * evaluation: the identity whatever p */
START_TEST(dropout_ends_and_eval)
{
    const cdp_backend *be = cdp_backend_cpu(1);
    const cdp_layer_ctx c = {.seed = 1, .step = 0, .sample0 = 0};
    for (int q = 0; q < 3; q++) {
        const double p = q == 0 ? 0.0 : q == 1 ? 1.0 : 0.7;
        one_layer L;
        layer_make(&L, be, dropout_layer((cdp_shape){50, 1, 1}, p), 3);
        layer_fill(&L, 30, -2.0f, 2.0f);
        if (q < 2) {
            layer_run(&L, be, &c, 0);
            for (size_t k = 0; k < L.nx; k++) {
                const float y = q == 0 ? L.x[k] : L.x[k] * 0.0f;
                const float dx = q == 0 ? L.dy[k] : L.dy[k] * 0.0f;
                ck_assert_msg(!memcmp(&L.y[k], &y, 4) && !memcmp(&L.dx[k], &dx, 4),
                              "p %g: y[%zu] = %g, dx = %g", p, k, (double)L.y[k],
                              (double)L.dx[k]);
            }
        } else {
            cdp_layer_io io = {.be = be, .B = L.B, .x = L.x, .y = L.y, .ctx = &c};
            L.ops->fwd(&L.ly, &io, 0);
            check_bits("dropout in evaluation", L.y, L.x, L.nx);
        }
        layer_free(&L);
    }
}
END_TEST

/* one call over the step's 12 samples, and the same samples cut into calls
 * of 5, 4 and 3 (other workers, other ranks): the same bits; another seed,
 * step or layer index: another mask, dropping about p of the elements */
START_TEST(dropout_draws)
{
    const cdp_backend *be = cdp_backend_cpu(1);
    const double p = 0.25;
    const cdp_shape xs = {16, 4, 4};
    one_layer whole;
    layer_make(&whole, be, dropout_layer(xs, p), 12);
    layer_fill(&whole, 40, -2.0f, 2.0f);
    const cdp_layer_ctx c = {.seed = 5, .step = 7, .sample0 = 0};
    layer_run(&whole, be, &c, 3);
    const size_t n = cdp_shape_n(xs);
    static const int cut[] = {5, 4, 3};
    for (int part = 0, s0 = 0; part < 3; s0 += cut[part], part++) {
        one_layer L;
        layer_make(&L, be, dropout_layer(xs, p), cut[part]);
        memcpy(L.x, whole.x + (size_t)s0 * n, L.nx * sizeof(float));
        memcpy(L.dy, whole.dy + (size_t)s0 * n, L.nx * sizeof(float));
        const cdp_layer_ctx cp = {.seed = 5, .step = 7, .sample0 = s0};
        layer_run(&L, be, &cp, 3);
        check_bits("dropout y, samples in parts", L.y, whole.y + (size_t)s0 * n, L.nx);
        check_bits("dropout dx, samples in parts", L.dx, whole.dx + (size_t)s0 * n, L.nx);
        layer_free(&L);
    }
    size_t zeros = 0;
    for (size_t k = 0; k < whole.nx; k++)
        zeros += whole.y[k] == 0.0f;
    /* 3072 draws: the share within 5 standard deviations (0.039) of p */
    const double share = (double)zeros / (double)whole.nx;
    ck_assert_msg(fabs(share - p) < 0.04, "dropped %.4f of the elements, p = %g", share, p);
    const cdp_layer_ctx other[3] = {{6, 7, 0}, {5, 8, 0}, {5, 7, 0}};
    for (int v = 0; v < 3; v++) {
        one_layer L;
        layer_make(&L, be, dropout_layer(xs, p), 12);
        memcpy(L.x, whole.x, L.nx * sizeof(float));
        layer_run(&L, be, &other[v], v == 2 ? 4 : 3);
        size_t differ = 0;
        for (size_t k = 0; k < L.nx; k++)
            differ += (L.y[k] == 0.0f) != (whole.y[k] == 0.0f);
        /* two independent masks disagree on 2 p (1 - p) = 37.5% of elements */
        ck_assert_msg(differ > L.nx / 4, "%s: only %zu of %zu mask elements differ",
                      v == 0 ? "another seed" : v == 1 ? "another step" : "another layer",
                      differ, L.nx);
        layer_free(&L);
    }
    layer_free(&whole);
}
END_TEST

START_TEST(dropout_threads_in_place)
{
    const cdp_shape xs = {3 * CDP_CPU_OMP_MIN + 5, 1, 1};   /* long enough to split */
    const cdp_layer_ctx c = {.seed = 3, .step = 1, .sample0 = 2};
    float *y0 = check_threads("dropout", dropout_layer(xs, 0.4), 1, 50, -2.0f, 2.0f, &c);
    /* the kernel in place (y = x), as backend_kernels.def allows */
    one_layer L;
    const cdp_backend *be = cdp_backend_cpu(2);
    layer_make(&L, be, dropout_layer(xs, 0.4), 1);
    layer_fill(&L, 50, -2.0f, 2.0f);
    cdp_layer_io io = {.be = be, .B = 1, .x = L.x, .y = L.x, .ctx = &c, .layer_index = 1};
    L.ops->fwd(&L.ly, &io, 1);
    check_bits("dropout in place", L.x, y0, L.nx);
    layer_free(&L);
    free(y0);
}
END_TEST

START_TEST(dropout_bad_p)
{
    static const double bad[] = {-0.1, 1.5, NAN};
    for (int q = 0; q < 3; q++) {
        cdp_layer ly = dropout_layer((cdp_shape){4, 1, 1}, bad[q]);
        snprintf(ly.name, sizeof ly.name, "classifier.0");
        char err[256] = "";
        ck_assert_int_eq(cdp_layer_ops_of(CDP_LAYER_DROPOUT)->shape(&ly, err, sizeof err), -1);
        ck_assert_msg(strstr(err, "classifier.0: the dropout probability") == err &&
                      strstr(err, "is not in [0, 1]"), "%s", err);
    }
}
END_TEST

/* ------------------------------------------------------------ suite */

static Suite *nn_layers_suite(void)
{
    Suite *s = suite_create("nn_layers");
    TCase *tc = tcase_create("relu6");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, relu6_hand);
    tcase_add_test(tc, relu6_fd_reference);
    tcase_add_test(tc, relu6_threads);
    suite_add_tcase(s, tc);
    tc = tcase_create("dropout");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, dropout_formula);
    tcase_add_test(tc, dropout_fd_reference);
    tcase_add_test(tc, dropout_ends_and_eval);
    tcase_add_test(tc, dropout_draws);
    tcase_add_test(tc, dropout_threads_in_place);
    tcase_add_test(tc, dropout_bad_p);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return check_run(nn_layers_suite()) ? EXIT_FAILURE : EXIT_SUCCESS;
}
