/* Unit tests of the layer kinds torchvision's classic networks add to the
 * ResNets' and the ViT's: ReLU6, dropout, and grouped and depthwise
 * convolution (conv2d with groups).  Each layer runs through its ops
 * (cdp_layer_ops_of, as a stage runs it) or its kernels on the CPU
 * backend, and the test checks:
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
 *      the elementwise loops to split;
 *   4. grouped convolution over 9 shapes (depthwise 3x3 stride 1 and 2,
 *      groups of 2 to 8 channels, 1x1, 5x5, odd and non-square images,
 *      B = 1 and 4, with and without bias): y, dx, dw, db against a double
 *      reference with direct loops, whose own gradients agree with central
 *      differences; accumulate gives the bits of a separate result added
 *      with add(), dx NULL the same dw and db; 1, 2, 3 threads the same
 *      bits; the layer's weight is [out, in/groups, k, k] with PyTorch's
 *      fans, and groups that do not divide the channels are refused;
 *   5. adaptive average pooling (avgpool with an output size): y against a
 *      double reference of PyTorch's windows (overlapping ones, an output
 *      larger than the image, 1x1 to 7x7 as VGG on small images), dx
 *      against central differences of it, and 1, 2, 3 threads the same
 *      bits. */
#include <check.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "nn/nn.h"
#include "util/rng.h"
#include "../lib/check_util.h"
#include "../lib/check_run.h"
#include "../lib/conv_ref.h"
#include "../../src/cpu/cpu_internal.h"   /* CDP_CPU_OMP_MIN: when loops split */

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

/* ------------------------------------------------------------ grouped conv */

/* B Cin H W Cout k stride pad groups bias */
static const int gshapes[][10] = {
    {2, 8, 6, 6, 8, 3, 1, 1, 8, 0},      /* depthwise 3x3, MobileNet's */
    {3, 6, 7, 5, 6, 3, 2, 1, 6, 1},      /* depthwise stride 2, odd sizes, bias */
    {2, 8, 5, 5, 16, 3, 1, 1, 8, 0},     /* depthwise, two outputs per channel */
    {4, 8, 6, 6, 12, 1, 1, 0, 2, 1},     /* 1x1, 2 groups */
    {1, 12, 9, 7, 8, 3, 2, 0, 4, 0},     /* 4 groups of 3 -> 2, no padding */
    {2, 16, 8, 8, 16, 5, 1, 2, 4, 1},    /* 5x5 pad 2 */
    {2, 4, 1, 1, 4, 1, 1, 0, 2, 0},      /* 1x1 images */
    {1, 6, 4, 9, 9, 3, 3, 1, 3, 1},      /* stride 3 */
    {4, 32, 4, 4, 32, 3, 1, 1, 32, 0},   /* depthwise at B = 4 */
};
#define NGSHAPES ((int)(sizeof gshapes / sizeof *gshapes))

static cdp_conv_shape gshape(int i, int *bias)
{
    const int *v = gshapes[i];
    cdp_conv_shape s = {.B = v[0], .Cin = v[1], .H = v[2], .W = v[3], .Cout = v[4], .KH = v[5],
                        .KW = v[5], .stride = v[6], .pad = v[7], .groups = v[8]};
    s.OH = (s.H + 2 * s.pad - s.KH) / s.stride + 1;
    s.OW = (s.W + 2 * s.pad - s.KW) / s.stride + 1;
    if (bias)
        *bias = v[9];
    return s;
}

typedef struct gconv {
    cdp_conv_shape s;
    size_t nx, ny, nw;
    float *x, *w, *b, *dy;                /* inputs */
    float *y, *dx, *dw, *db, *ws;         /* cdp's */
} gconv;

static void gconv_make(gconv *c, const cdp_conv_shape *s, const cdp_backend *be, uint64_t seed)
{
    memset(c, 0, sizeof *c);
    c->s = *s;
    c->nx = (size_t)s->B * s->Cin * s->H * s->W;
    c->ny = (size_t)s->B * s->Cout * s->OH * s->OW;
    c->nw = cdp_conv_weight_count(s);
    c->x = fbuf(c->nx); c->w = fbuf(c->nw); c->b = fbuf((size_t)s->Cout); c->dy = fbuf(c->ny);
    c->y = fbuf(c->ny); c->dx = fbuf(c->nx); c->dw = fbuf(c->nw); c->db = fbuf((size_t)s->Cout);
    c->ws = fbuf(be->conv2d_ws_floats(s));
    for (size_t k = 0; k < c->nx; k++) c->x[k] = urand(seed, k, -1.0f, 1.0f);
    for (size_t k = 0; k < c->nw; k++) c->w[k] = urand(seed + 1, k, -0.5f, 0.5f);
    for (int k = 0; k < s->Cout; k++) c->b[k] = urand(seed + 2, (uint64_t)k, -0.5f, 0.5f);
    for (size_t k = 0; k < c->ny; k++) c->dy[k] = urand(seed + 3, k, -1.0f, 1.0f);
}

static void gconv_free(gconv *c)
{
    free(c->x); free(c->w); free(c->b); free(c->dy);
    free(c->y); free(c->dx); free(c->dw); free(c->db); free(c->ws);
}

static void gconv_run(gconv *c, const cdp_backend *be, int bias)
{
    be->conv2d_fwd(&c->s, c->x, c->w, bias ? c->b : NULL, c->y, c->ws);
    be->conv2d_bwd(&c->s, c->x, c->w, c->dy, c->dx, c->dw, bias ? c->db : NULL, 0, c->ws);
}

/* L = sum(y * r) in double; its gradient in p by central differences */
static double conv_loss_d(const cdp_conv_shape *s, const double *x, const double *w,
                        const double *b, const double *r, double *y)
{
    conv_ref_fwd(s, x, w, b, y);
    double l = 0.0;
    for (size_t k = 0, n = (size_t)s->B * s->Cout * s->OH * s->OW; k < n; k++)
        l += y[k] * r[k];
    return l;
}

static void conv_fd_d(const cdp_conv_shape *s, double *x, double *w, double *b, const double *r,
                    double *p, size_t n, double *g)
{
    double *y = dbuf((size_t)s->B * s->Cout * s->OH * s->OW);
    const double h = 1e-5;
    for (size_t k = 0; k < n; k++) {
        const double v = p[k];
        p[k] = v + h;
        const double lp = conv_loss_d(s, x, w, b, r, y);
        p[k] = v - h;
        const double lm = conv_loss_d(s, x, w, b, r, y);
        p[k] = v;
        g[k] = (lp - lm) / (2 * h);
    }
    free(y);
}

/* |a - f| <= 1e-7 * (1 + max|f|): the reference's gradient against the
 * differences (both double; the loss is linear in each input) */
static void check_fd_d(const char *what, int i, const double *a, const double *f, size_t n)
{
    double mx = 0.0;
    for (size_t k = 0; k < n; k++)
        mx = fmax(mx, fabs(f[k]));
    for (size_t k = 0; k < n; k++)
        ck_assert_msg(fabs(a[k] - f[k]) <= 1e-7 * (1 + mx),
                      "shape %d: reference %s[%zu] = %.12g, finite difference %.12g", i, what, k,
                      a[k], f[k]);
}

START_TEST(gconv_fd_reference)
{
    int bias;
    const cdp_conv_shape s = gshape(_i, &bias);
    const cdp_backend *be = cdp_backend_cpu(1);
    gconv c;
    gconv_make(&c, &s, be, 100 + 10 * (uint64_t)_i);
    gconv_run(&c, be, bias);
    double *x = to_d(c.x, c.nx), *w = to_d(c.w, c.nw), *b = to_d(c.b, (size_t)s.Cout);
    double *r = to_d(c.dy, c.ny), *y = dbuf(c.ny);
    double *dx = dbuf(c.nx), *dw = dbuf(c.nw), *db = dbuf((size_t)s.Cout);
    conv_ref_fwd(&s, x, w, bias ? b : NULL, y);
    conv_ref_bwd(&s, x, w, r, dx, dw, db);
    char what[64];
    snprintf(what, sizeof what, "shape %d y", _i);
    check_close(what, c.y, y, c.ny, 1e-6);
    snprintf(what, sizeof what, "shape %d dx", _i);
    check_close(what, c.dx, dx, c.nx, 1e-6);
    snprintf(what, sizeof what, "shape %d dw", _i);
    check_close(what, c.dw, dw, c.nw, 1e-6);
    if (bias) {
        snprintf(what, sizeof what, "shape %d db", _i);
        check_close(what, c.db, db, (size_t)s.Cout, 1e-6);
    }
    /* the reference's gradients against central differences */
    double *f = dbuf(c.nx > c.nw ? c.nx : c.nw);
    conv_fd_d(&s, x, w, bias ? b : NULL, r, x, c.nx, f);
    check_fd_d("dx", _i, dx, f, c.nx);
    conv_fd_d(&s, x, w, bias ? b : NULL, r, w, c.nw, f);
    check_fd_d("dw", _i, dw, f, c.nw);
    if (bias) {
        conv_fd_d(&s, x, w, b, r, b, (size_t)s.Cout, f);
        check_fd_d("db", _i, db, f, (size_t)s.Cout);
    }
    free(x); free(w); free(b); free(r); free(y); free(dx); free(dw); free(db); free(f);
    gconv_free(&c);
}
END_TEST

/* accumulate: the bits of the separate result added with add(); dx NULL:
 * the same dw and db */
START_TEST(gconv_accumulate_dx_null)
{
    int bias;
    const cdp_conv_shape s = gshape(_i, &bias);
    const cdp_backend *be = cdp_backend_cpu(2);
    gconv c;
    gconv_make(&c, &s, be, 200 + 10 * (uint64_t)_i);
    gconv_run(&c, be, 1);
    float *dw = fbuf(c.nw), *db = fbuf((size_t)s.Cout), *dx = fbuf(c.nx);
    for (size_t k = 0; k < c.nw; k++) dw[k] = urand(7, k, -1.0f, 1.0f);
    for (int k = 0; k < s.Cout; k++) db[k] = urand(8, (uint64_t)k, -1.0f, 1.0f);
    float *sw = fbuf(c.nw), *sb = fbuf((size_t)s.Cout);
    memcpy(sw, dw, c.nw * sizeof *sw);
    memcpy(sb, db, (size_t)s.Cout * sizeof *sb);
    be->add(c.nw, sw, c.dw);
    be->add((size_t)s.Cout, sb, c.db);
    be->conv2d_bwd(&s, c.x, c.w, c.dy, dx, dw, db, 1, c.ws);
    check_bits("accumulated dw", dw, sw, c.nw);
    check_bits("accumulated db", db, sb, (size_t)s.Cout);
    check_bits("dx with accumulate", dx, c.dx, c.nx);
    be->conv2d_bwd(&s, c.x, c.w, c.dy, NULL, dw, db, 0, c.ws);
    check_bits("dw with dx NULL", dw, c.dw, c.nw);
    check_bits("db with dx NULL", db, c.db, (size_t)s.Cout);
    free(dw); free(db); free(dx); free(sw); free(sb);
    gconv_free(&c);
}
END_TEST

/* 1, 2 and 3 threads: the same bits, on shapes with work enough to split */
START_TEST(gconv_threads)
{
    static const cdp_conv_shape big[] = {
        {.B = 8, .Cin = 32, .H = 16, .W = 16, .Cout = 32, .KH = 3, .KW = 3, .stride = 1,
         .pad = 1, .OH = 16, .OW = 16, .groups = 32},
        {.B = 6, .Cin = 24, .H = 15, .W = 15, .Cout = 48, .KH = 3, .KW = 3, .stride = 2,
         .pad = 1, .OH = 8, .OW = 8, .groups = 4},
    };
    static const int thr[] = {1, 2, 3};
    for (int i = 0; i < 2; i++) {
        gconv c[3];
        for (int r = 0; r < 3; r++) {
            const cdp_backend *be = cdp_backend_cpu(thr[r]);
            gconv_make(&c[r], &big[i], be, 300);
            gconv_run(&c[r], be, 1);
        }
        for (int r = 1; r < 3; r++) {
            check_bits("grouped y across threads", c[r].y, c[0].y, c[0].ny);
            check_bits("grouped dx across threads", c[r].dx, c[0].dx, c[0].nx);
            check_bits("grouped dw across threads", c[r].dw, c[0].dw, c[0].nw);
            check_bits("grouped db across threads", c[r].db, c[0].db, (size_t)big[i].Cout);
        }
        for (int r = 0; r < 3; r++)
            gconv_free(&c[r]);
    }
}
END_TEST

/* the layer: weight [out, in/groups, k, k], PyTorch's fans (kaiming
 * fan_out = out*k*k; a bias's fan_in = in/groups * k*k), FLOPs of the
 * groups, and groups that do not divide the channels refused */
START_TEST(gconv_layer)
{
    cdp_layer ly = {.kind = CDP_LAYER_CONV2D, .in2 = -1, .xs = {12, 8, 8}, .ys = {24, 0, 0},
                    .k = 3, .stride = 1, .pad = 1, .bias = 1, .groups = 4};
    snprintf(ly.name, sizeof ly.name, "features.1.conv");
    const cdp_layer_ops *ops = cdp_layer_ops_of(CDP_LAYER_CONV2D);
    char err[256] = "";
    ck_assert_msg(ops->shape(&ly, err, sizeof err) == 0, "%s", err);
    cdp_param_desc d[8];
    ck_assert_int_eq(ops->params(&ly, d), 2);
    ck_assert(d[0].ndim == 4 && d[0].shape[0] == 24 && d[0].shape[1] == 3 &&
              d[0].shape[2] == 3 && d[0].shape[3] == 3);
    ck_assert(fabsf(d[0].a - sqrtf(2.0f / (24 * 9))) < 1e-7f);
    ck_assert(fabsf(d[1].a - 1.0f / sqrtf(3 * 9)) < 1e-7f);
    cdp_layer plain = ly;
    plain.groups = 1;
    ck_assert(ops->shape(&plain, err, sizeof err) == 0);
    ck_assert(fabs(ops->flops(&plain, 2, 1) - 4 * ops->flops(&ly, 2, 1)) < 1e-6);
    static const int bad[][3] = {{5, 12, 24}, {4, 12, 10}, {-2, 12, 24}};
    for (int q = 0; q < 3; q++) {
        cdp_layer b = ly;
        b.groups = bad[q][0];
        b.xs.c = bad[q][1];
        b.ys.c = bad[q][2];
        ck_assert_int_eq(ops->shape(&b, err, sizeof err), -1);
        ck_assert_msg(strstr(err, "features.1.conv: ") == err && strstr(err, "groups do not divide"),
                      "%s", err);
    }
}
END_TEST

/* ------------------------------------------------------------ adaptive average pooling */

static cdp_layer apool_layer(cdp_shape xs, int o)
{
    cdp_layer ly = {.kind = CDP_LAYER_AVGPOOL, .in2 = -1, .xs = xs, .k = o};
    return ly;
}

/* sum over the planes of r * AdaptiveAvgPool2d(o)(x), in double, with the
 * windows written from PyTorch's start = floor(i*H/o), end = ceil((i+1)*H/o) */
static double apool_loss(const double *x, const float *r, int planes, int H, int W, int o,
                         const float *y_cmp, double *worst)
{
    double L = 0.0;
    for (int pl = 0; pl < planes; pl++)
        for (int i = 0; i < o; i++)
            for (int j = 0; j < o; j++) {
                const int r0 = (int)floor((double)i * H / o), r1 = (int)ceil((double)(i + 1) * H / o);
                const int c0 = (int)floor((double)j * W / o), c1 = (int)ceil((double)(j + 1) * W / o);
                double s = 0.0;
                for (int a = r0; a < r1; a++)
                    for (int b = c0; b < c1; b++)
                        s += x[(size_t)pl * H * W + (size_t)a * W + b];
                const double v = s / ((r1 - r0) * (c1 - c0));
                const size_t q = ((size_t)pl * o + i) * o + j;
                if (y_cmp && fabs(v - y_cmp[q]) > *worst)
                    *worst = fabs(v - y_cmp[q]);
                L += v * r[q];
            }
    return L;
}

START_TEST(apool_fd_reference)
{
    static const int shapes[][4] = {   /* C H W o */
        {3, 1, 1, 7}, {2, 5, 5, 3}, {2, 7, 9, 7}, {4, 8, 8, 2}, {1, 3, 5, 4},
    };
    const cdp_backend *be = cdp_backend_cpu(1);
    for (size_t q = 0; q < sizeof shapes / sizeof *shapes; q++) {
        const int C = shapes[q][0], H = shapes[q][1], W = shapes[q][2], o = shapes[q][3];
        enum { B = 2 };
        one_layer L;
        layer_make(&L, be, apool_layer((cdp_shape){C, H, W}, o), B);
        ck_assert(L.ly.ys.c == C && L.ly.ys.h == o && L.ly.ys.w == o);
        layer_fill(&L, 40 + q, -2.0f, 2.0f);
        layer_run(&L, be, NULL, 0);
        double *x = malloc(L.nx * sizeof *x);
        for (size_t k = 0; k < L.nx; k++)
            x[k] = L.x[k];
        double worst = 0.0;
        apool_loss(x, L.dy, B * C, H, W, o, L.y, &worst);
        ck_assert_msg(worst <= 1e-6, "shape %zu: y differs from the reference by %g", q, worst);
        const double h = 1e-3;
        for (size_t k = 0; k < L.nx; k++) {
            const double x0 = x[k];
            x[k] = x0 + h;
            const double up = apool_loss(x, L.dy, B * C, H, W, o, NULL, NULL);
            x[k] = x0 - h;
            const double down = apool_loss(x, L.dy, B * C, H, W, o, NULL, NULL);
            x[k] = x0;
            const double fd = (up - down) / (2 * h);
            ck_assert_msg(fabs((double)L.dx[k] - fd) <= 1e-5 * (1 + fabs(fd)),
                          "shape %zu: dx[%zu] = %.9g, finite difference %.9g", q, k,
                          (double)L.dx[k], fd);
        }
        free(x);
        layer_free(&L);
    }
}
END_TEST

START_TEST(apool_threads)
{
    free(check_threads("adaptive avgpool", apool_layer((cdp_shape){64, 9, 11}, 4), 40, 5,
                       -1.0f, 1.0f, NULL));
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
    tc = tcase_create("grouped_conv");
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, gconv_fd_reference, 0, NGSHAPES);
    tcase_add_loop_test(tc, gconv_accumulate_dx_null, 0, NGSHAPES);
    tcase_add_test(tc, gconv_threads);
    tcase_add_test(tc, gconv_layer);
    suite_add_tcase(s, tc);
    tc = tcase_create("adaptive_avgpool");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, apool_fd_reference);
    tcase_add_test(tc, apool_threads);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return check_run(nn_layers_suite()) ? EXIT_FAILURE : EXIT_SUCCESS;
}
