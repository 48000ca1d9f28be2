/* Unit tests of the layer kinds torchvision's classic networks add to the
 * ResNets' and the ViT's: ReLU6.  Each layer runs through its ops
 * (cdp_layer_ops_of, as a stage runs it) on the CPU backend, and the test
 * checks:
 *   1. hand values: the ends of ReLU6 (its gradient is 0 at x = 0 and
 *      x = 6, as PyTorch's), -0 and the infinities;
 *   2. the forward against a reference in double written with direct loops,
 *      and the backward against central finite differences of that
 *      reference (away from the kinks, which no perturbation crosses);
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

/* forward (training) then backward, as a stage runs them: an in-place
 * layer works on y (a copy of x) and on dx (a copy of dy) */
static void layer_run(one_layer *L, const cdp_backend *be, int accumulate)
{
    const int in_place = L->ops->storage == CDP_STORAGE_IN_PLACE;
    cdp_layer_io io = {.be = be, .B = L->B, .p = L->p, .g = L->g, .save = L->save,
                       .x = L->x, .y = L->y, .dy = L->dy, .dx = L->dx,
                       .accumulate = accumulate, .ws = L->ws};
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
    layer_run(&L, be, 0);
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
    layer_run(&L, be, 0);
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
    const int n = 3 * CDP_CPU_OMP_MIN + 5;   /* long enough to split */
    static const int thr[] = {1, 2, 3};
    float *y0 = NULL, *dx0 = NULL;
    for (int r = 0; r < 3; r++) {
        const cdp_backend *be = cdp_backend_cpu(thr[r]);
        one_layer L;
        layer_make(&L, be, relu6_layer(n), 1);
        for (size_t k = 0; k < L.nx; k++) {
            L.x[k] = urand(3, k, -2.0f, 8.0f);
            L.dy[k] = urand(4, k, -1.0f, 1.0f);
        }
        layer_run(&L, be, 0);
        if (r == 0) {
            y0 = L.y;
            dx0 = L.dx;
            L.y = L.dx = NULL;
        } else {
            check_bits("relu6 y across threads", L.y, y0, L.nx);
            check_bits("relu6 dx across threads", L.dx, dx0, L.nx);
        }
        layer_free(&L);
    }
    free(y0);
    free(dx0);
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
    return s;
}

int main(void)
{
    return check_run(nn_layers_suite()) ? EXIT_FAILURE : EXIT_SUCCESS;
}
