/* Unit tests of the CPU backend's dense kernels (src/cpu/kernels_cpu.c:
 * Linear, ReLU, softmax cross-entropy, SGD, the elementwise and pixel
 * kernels) and of its kernel table: finite-difference gradient checks
 * (double precision, central differences) against the analytic backward,
 * alone and chained through MLP stages, hand-computed values, and
 * determinism (same call twice, 1 vs 2 threads).  The model layer's own
 * tests are in test_models.c. */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "models/model.h"
#include "../lib/mlp_view.h"
#include "util/rng.h"
#include "../lib/check_util.h"
#include "../lib/check_run.h"

/* ------------------------------------------------------------ helpers */

/* uniform in [lo, hi) from (seed, stream) */
static void fill(float *p, size_t n, uint64_t stream, float lo, float hi)
{
    for (size_t k = 0; k < n; k++)
        p[k] = lo + (hi - lo) * cdp_rand_unit(12345, stream, k);
}

/* values of magnitude in [0.1, 1) with random sign: away from ReLU kinks */
static void fill_away0(float *p, size_t n, uint64_t stream)
{
    for (size_t k = 0; k < n; k++) {
        float u = cdp_rand_unit(777, stream, k);
        float v = 0.1f + 0.9f * cdp_rand_unit(778, stream, k);
        p[k] = u < 0.5f ? -v : v;
    }
}

/* |a - f| <= tol * max(|f|, 1e-3 * max|f| over the tensor, 1e-6) */
static void check_grad(const char *what, const float *a, const double *f, size_t n, double tol)
{
    double mx = 0.0;
    for (size_t k = 0; k < n; k++)
        if (fabs(f[k]) > mx)
            mx = fabs(f[k]);
    double floor_ = fmax(1e-3 * mx, 1e-6);
    for (size_t k = 0; k < n; k++) {
        double d = fabs((double)a[k] - f[k]);
        double s = fmax(fabs(f[k]), floor_);
        if (d > tol * s)
            ck_abort_msg("%s[%zu]: analytic %.9g vs finite difference %.9g (rel %.3g)",
                         what, k, (double)a[k], f[k], d / s);
    }
}

/* y = x W^T + b in double */
static void lin_d(int B, int in, int out, const double *x, const double *W, const double *b,
                  double *y)
{
    for (int i = 0; i < B; i++)
        for (int o = 0; o < out; o++) {
            double s = b[o];
            for (int k = 0; k < in; k++)
                s += x[(size_t)i * in + k] * W[(size_t)o * in + k];
            y[(size_t)i * out + o] = s;
        }
}

/* mean softmax cross-entropy in double */
static double xent_d(int B, int C, const double *z, const int32_t *lab)
{
    double L = 0.0;
    for (int i = 0; i < B; i++) {
        const double *r = z + (size_t)i * C;
        double m = r[0];
        for (int j = 1; j < C; j++)
            m = fmax(m, r[j]);
        double s = 0.0;
        for (int j = 0; j < C; j++)
            s += exp(r[j] - m);
        L += log(s) + m - r[lab[i]];
    }
    return L / B;
}

/* ------------------------------------------------------------ hand values */

/* Every kernel of backend/backend_kernels.def is in the CPU table, and the
 * start-up check names the first one a backend lacks. */
START_TEST(table_complete)
{
    const cdp_backend *be = cdp_backend_cpu(1);
    const char *missing = cdp_backend_missing_kernel(be);
    ck_assert_msg(missing == NULL, "cpu backend lacks %s", missing ? missing : "");
    cdp_backend gap = *be;
    gap.accumulate_exact = NULL;
    ck_assert_str_eq(cdp_backend_missing_kernel(&gap), "accumulate_exact");
    gap = *be;
    gap.copy_rows = NULL;
    ck_assert_str_eq(cdp_backend_missing_kernel(&gap), "copy_rows");
}
END_TEST

START_TEST(linear_fwd_naive)
{
    /* 600 x 192 -> 192 and 640 x 768 -> 192: too few columns for the
     * split, so the rows are cut too */
    static const int shapes[][3] = {{5, 7, 3}, {1, 1, 1}, {64, 300, 50}, {33, 784, 129},
                                    {64, 300, 1000}, {128, 200, 777}, {600, 192, 192},
                                    {640, 768, 192}};
    static const char *splits[] = {NULL, "1", "3", "4"};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
      for (size_t sp = 0; sp < 8; sp++) {
        const cdp_backend *be = cpu_split_lib(2, splits[sp % 4], sp / 4 ? "0" : "1");
        int B = shapes[s][0], in = shapes[s][1], out = shapes[s][2];
        float *x = fbuf((size_t)B * in), *W = fbuf((size_t)out * in), *b = fbuf(out);
        float *y = fbuf((size_t)B * out);
        fill(x, (size_t)B * in, 1, -1, 1);
        fill(W, (size_t)out * in, 2, -1, 1);
        fill(b, out, 3, -1, 1);
        be->linear_fwd(B, in, out, x, W, b, y, 0);
        for (int i = 0; i < B; i++)
            for (int o = 0; o < out; o++) {
                double e = b[o], mag = fabs(b[o]);
                for (int k = 0; k < in; k++) {
                    e += (double)x[(size_t)i * in + k] * W[(size_t)o * in + k];
                    mag += fabs((double)x[(size_t)i * in + k] * W[(size_t)o * in + k]);
                }
                double d = fabs(y[(size_t)i * out + o] - e);
                ck_assert_msg(d <= 1e-6 * mag + 1e-7, "linear_fwd %dx%dx%d [%d,%d]: %.9g vs %.9g",
                              B, in, out, i, o, (double)y[(size_t)i * out + o], e);
            }
        free(x); free(W); free(b); free(y);
      }
    }
}
END_TEST

static void linear_bwd_check(const cdp_backend *be, int B, int in, int out)
{
    float *x = fbuf((size_t)B * in), *W = fbuf((size_t)out * in), *dy = fbuf((size_t)B * out);
    float *dx = fbuf((size_t)B * in), *dW = fbuf((size_t)out * in), *db = fbuf(out);
    fill(x, (size_t)B * in, 4, -1, 1);
    fill(W, (size_t)out * in, 5, -1, 1);
    fill(dy, (size_t)B * out, 6, -1, 1);
    for (size_t k = 0; k < (size_t)out * in; k++)
        dW[k] = NAN;                     /* overwritten, not accumulated */
    for (int o = 0; o < out; o++)
        db[o] = NAN;
    be->linear_bwd(B, in, out, x, W, dy, dx, dW, db, 0, 0);
    /* |got - exact| <= 1e-6 * sum of |terms| (float accumulation bound) */
    for (int o = 0; o < out; o++)
        for (int k = 0; k < in; k++) {
            double s = 0, mag = 0;
            for (int i = 0; i < B; i++) {
                s += (double)dy[i * out + o] * x[i * in + k];
                mag += fabs((double)dy[i * out + o] * x[i * in + k]);
            }
            ck_assert_msg(fabs(dW[o * in + k] - s) <= 1e-6 * mag, "dW[%d,%d] %.9g vs %.9g",
                          o, k, (double)dW[o * in + k], s);
        }
    for (int o = 0; o < out; o++) {
        /* db: float sum in row order, exactly */
        float s = dy[o];
        for (int i = 1; i < B; i++)
            s += dy[i * out + o];
        ck_assert_msg(memcmp(&s, &db[o], sizeof s) == 0, "db[%d] %.9g vs %.9g", o,
                      (double)db[o], (double)s);
    }
    for (int i = 0; i < B; i++)
        for (int k = 0; k < in; k++) {
            double s = 0, mag = 0;
            for (int o = 0; o < out; o++) {
                s += (double)dy[i * out + o] * W[o * in + k];
                mag += fabs((double)dy[i * out + o] * W[o * in + k]);
            }
            ck_assert_msg(fabs(dx[i * in + k] - s) <= 1e-6 * mag, "dx[%d,%d] %.9g vs %.9g",
                          i, k, (double)dx[i * in + k], s);
        }
    /* dx == NULL: skipped, dW and db unchanged */
    float *dW2 = fbuf((size_t)out * in), *db2 = fbuf(out);
    be->linear_bwd(B, in, out, x, W, dy, NULL, dW2, db2, 0, 0);
    ck_assert(memcmp(dW, dW2, sizeof(float) * (size_t)out * in) == 0);
    ck_assert(memcmp(db, db2, sizeof(float) * (size_t)out) == 0);
    free(x); free(W); free(dy); free(dx); free(dW); free(db); free(dW2); free(db2);
}

START_TEST(linear_bwd_naive)
{
    static const int shapes[][3] = {{9, 13, 6}, {1, 1, 1}, {40, 600, 300}, {33, 300, 513},
                                    {600, 192, 192}, {640, 192, 768}};
    static const char *splits[] = {NULL, "1", "3", "4"};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
        for (size_t sp = 0; sp < 8; sp++)
            linear_bwd_check(cpu_split_lib(2, splits[sp % 4], sp / 4 ? "0" : "1"), shapes[s][0],
                             shapes[s][1], shapes[s][2]);
}
END_TEST

START_TEST(xent_hand)
{
    const cdp_backend *be = cdp_backend_cpu(1);
    /* row 0: logits (0,0,0), label 1: p = 1/3 each, loss ln 3, argmax 0 (first max): wrong
     * row 1: logits (0, ln 2, ln 5), label 2: p = (1,2,5)/8, loss ln(8/5), argmax 2: right */
    float z[6] = {0.0f, 0.0f, 0.0f, 0.0f, logf(2.0f), logf(5.0f)};
    int32_t lab[2] = {1, 2};
    double stats[2] = {1.0, 2.0};   /* accumulated into */
    be->xent(2, 3, z, lab, stats);
    double e[6] = {1.0 / 3 / 2, (1.0 / 3 - 1) / 2, 1.0 / 3 / 2,
                   1.0 / 8 / 2, 2.0 / 8 / 2, (5.0 / 8 - 1) / 2};
    for (int k = 0; k < 6; k++)
        ck_assert_msg(fabs(z[k] - e[k]) <= 1e-6 * fabs(e[k]) + 1e-7,
                      "dlogits[%d] = %.9g, expected %.9g", k, (double)z[k], e[k]);
    double loss = log(3.0) + log(8.0 / 5.0);
    ck_assert_msg(fabs(stats[0] - 1.0 - loss) <= 1e-6 * loss, "loss sum %.9g, expected %.9g",
                  stats[0] - 1.0, loss);
    ck_assert_msg(stats[1] == 3.0, "correct %.1f, expected 1 (+2)", stats[1] - 2.0);
}
END_TEST

/* nonfinite by hand: the worst code (NaN over infinity) and the lowest
 * index modulo m, over enough values for the threads to split them */
START_TEST(nonfinite_hand)
{
    const cdp_backend *be = cdp_backend_cpu(2);
    const size_t m = 50000, n = 2 * m;
    float *x = calloc(n, sizeof *x);
    uint64_t out[2] = {7, 7};
    ck_assert_ptr_nonnull(x);
    be->nonfinite(n, x, m, out);
    ck_assert_msg(out[0] == 0 && out[1] == UINT64_MAX, "finite: %llu %llu",
                  (unsigned long long)out[0], (unsigned long long)out[1]);
    x[m + 40000] = INFINITY;   /* index 40000 of the second array */
    be->nonfinite(n, x, m, out);
    ck_assert_msg(out[0] == 1 && out[1] == 40000, "one infinity: %llu %llu",
                  (unsigned long long)out[0], (unsigned long long)out[1]);
    x[45000] = NAN;
    x[3] = -INFINITY;
    be->nonfinite(n, x, m, out);
    ck_assert_msg(out[0] == 2 && out[1] == 3, "a NaN and infinities: %llu %llu",
                  (unsigned long long)out[0], (unsigned long long)out[1]);
    be->nonfinite(3, x, m, out);   /* only x[3.. ] outside: x[0..2] finite */
    ck_assert_msg(out[0] == 0, "the first 3: %llu", (unsigned long long)out[0]);
    free(x);
}
END_TEST

/* torch.optim.SGD worked out in double, compared with the float kernel */
START_TEST(sgd_hand)
{
    const cdp_backend *be = cdp_backend_cpu(1);
    float th[3] = {1.0f, -2.0f, 0.5f}, buf[3];
    float g[3][3] = {{0.5f, -0.25f, 1.0f}, {0.125f, 0.75f, -0.5f}, {-1.0f, 0.0f, 0.25f}};
    const float lr = 0.1f, mu = 0.9f, wd = 0.01f;
    double dth[3] = {1.0, -2.0, 0.5}, dbuf[3];
    for (int step = 0; step < 3; step++) {
        be->sgd(3, th, th, g[step], 1.0f, buf, lr, mu, wd, step == 0, 0);
        for (int k = 0; k < 3; k++) {
            double d = (double)g[step][k] + (double)wd * dth[k];
            dbuf[k] = step == 0 ? d : (double)mu * dbuf[k] + d;
            dth[k] -= (double)lr * dbuf[k];
            ck_assert_msg(fabs(th[k] - dth[k]) <= 1e-6 * fabs(dth[k]),
                          "step %d theta[%d] = %.9g, expected %.9g", step, k, (double)th[k], dth[k]);
            ck_assert_msg(fabs(buf[k] - dbuf[k]) <= 1e-6 * fabs(dbuf[k]) + 1e-12,
                          "step %d buf[%d] = %.9g, expected %.9g", step, k, (double)buf[k], dbuf[k]);
        }
    }
    /* first step by hand, no momentum, no decay: theta - lr*g, out of place */
    float t0[2] = {1.0f, -1.0f}, t1[2], b2[2], g2[2] = {0.5f, 2.0f};
    be->sgd(2, t0, t1, g2, 1.0f, b2, 0.5f, 0.0f, 0.0f, 1, 0);
    ck_assert(t1[0] == 0.75f && t1[1] == -2.0f && t0[0] == 1.0f && b2[1] == 2.0f);
    /* the exact float order d = g + wd*th; buf = mu*buf + d; th -= lr*buf */
    float a[1] = {0.3f}, gb[1] = {0.7f}, bb[1] = {0.11f};
    float d = 0.7f + 0.01f * 0.3f, v = 0.9f * 0.11f + d, exp_th = 0.3f - 0.05f * v;
    be->sgd(1, a, a, gb, 1.0f, bb, 0.05f, 0.9f, 0.01f, 0, 0);
    ck_assert(memcmp(a, &exp_th, 4) == 0 && memcmp(bb, &v, 4) == 0);
    /* no buffer: plain SGD */
    float c[1] = {1.0f}, gc[1] = {2.0f};
    be->sgd(1, c, c, gc, 1.0f, NULL, 0.25f, 0.0f, 0.0f, 0, 0);
    ck_assert(c[0] == 0.5f);
}
END_TEST

START_TEST(elementwise)
{
    const cdp_backend *be = cdp_backend_cpu(2);
    size_t n = 600000;   /* above the OpenMP threshold */
    float *a = fbuf(n), *b = fbuf(n), *c = fbuf(n);
    fill(a, n, 10, -1, 1);
    fill(b, n, 11, -1, 1);
    memcpy(c, a, n * sizeof(float));
    be->add(n, c, b);
    for (size_t k = 0; k < n; k++)
        ck_assert(c[k] == a[k] + b[k]);
    memcpy(c, a, n * sizeof(float));
    be->scale(n, c, 0.3f);
    for (size_t k = 0; k < n; k++)
        ck_assert(c[k] == a[k] * 0.3f);
    memcpy(c, a, n * sizeof(float));
    be->relu_fwd(n, c);
    for (size_t k = 0; k < n; k++)
        ck_assert(c[k] == (a[k] > 0 ? a[k] : 0.0f));
    memcpy(b, a, n * sizeof(float));
    be->relu_bwd(n, c, b);
    for (size_t k = 0; k < n; k++)
        ck_assert(b[k] == (c[k] > 0 ? a[k] : 0.0f));
    uint8_t *px = malloc(n);
    for (size_t k = 0; k < n; k++)
        px[k] = (uint8_t)(k * 7);
    be->pixels_to_input(1, 1, (int)n, px, NULL, c);
    for (size_t k = 0; k < n; k++)
        ck_assert(c[k] == (float)px[k] / 255.0f);
    ck_assert(c[0] == 0.0f);
    uint8_t full = 255;
    be->pixels_to_input(1, 1, 1, &full, NULL, c);
    ck_assert(c[0] == 1.0f);
    /* memory */
    float *m = be->alloc(1000);
    ck_assert_ptr_nonnull(m);
    ck_assert((uintptr_t)m % 64 == 0);
    be->zero(m, 1000);
    be->to_device(m, a, 1000);
    be->to_host(c, m, 1000);
    be->sync();
    ck_assert(memcmp(c, a, 1000) == 0);
    be->free(m);
    ck_assert_str_eq(be->name, "cpu");
    ck_assert(be->host_memory == 1);
    ck_assert(strstr(be->describe(), "cpu:") != NULL);
    ck_assert(strstr(be->describe(), cdp_cpu_blas_kernel()) != NULL);
    free(a); free(b); free(c); free(px);
}
END_TEST

/* --precision bf16's rounding: hand values of IEEE round-to-nearest-even
 * on bfloat16's 8-bit significand (the bits written out by hand, not by
 * the helper the kernel uses), in place and out of place, over an array
 * long enough for OpenMP. */
static float from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static uint32_t bits_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

START_TEST(round_bf16_hand)
{
    const cdp_backend *be = cdp_backend_cpu(2);
    static const uint32_t cases[][2] = {
        { 0x3F800000u, 0x3F800000u },   /* 1: exact */
        { 0x3F808000u, 0x3F800000u },   /* 1 + 2^-8: a tie, to the even 1 */
        { 0x3F818000u, 0x3F820000u },   /* 1 + 3*2^-8: a tie, to the even 1 + 2^-6 */
        { 0x3F808001u, 0x3F810000u },   /* just above the tie: up */
        { 0x3F807FFFu, 0x3F800000u },   /* just below: down */
        { 0xBFC00000u, 0xBFC00000u },   /* -1.5: exact */
        { 0xBF818000u, 0xBF820000u },   /* negative tie to even, away from zero here */
        { 0x7F7FFFFFu, 0x7F800000u },   /* FLT_MAX: beyond bfloat16's largest, to inf */
        { 0x7F7F7FFFu, 0x7F7F0000u },   /* bfloat16's largest stays */
        { 0x7F800000u, 0x7F800000u },   /* inf */
        { 0xFF800000u, 0xFF800000u },   /* -inf */
        { 0x80000000u, 0x80000000u },   /* -0 keeps its sign */
        { 0x00008000u, 0x00000000u },   /* denormal tie to the even 0 */
        { 0x00018000u, 0x00020000u },   /* denormal tie to the even 2 */
        { 0x00000001u, 0x00000000u },   /* the smallest denormal: to 0 */
        { 0x7FC00001u, 0x7FC00000u },   /* a quiet NaN stays quiet */
        { 0xFF800001u, 0xFFC00000u },   /* a signalling NaN: quieted, sign kept, never inf */
    };
    const size_t nc = sizeof cases / sizeof cases[0], n = 400000;
    float *x = fbuf(n), *y = fbuf(n);
    for (size_t k = 0; k < n; k++)
        x[k] = from_bits(cases[k % nc][0]);
    be->round_bf16(n, x, y);
    for (size_t k = 0; k < n; k++)
        ck_assert_msg(bits_of(y[k]) == cases[k % nc][1], "0x%08X -> 0x%08X, expected 0x%08X",
                      cases[k % nc][0], bits_of(y[k]), cases[k % nc][1]);
    be->round_bf16(n, x, x);   /* in place */
    ck_assert(memcmp(x, y, n * sizeof(float)) == 0);
    /* rounding twice changes nothing; the error is at most half a unit of
     * bfloat16's last place (2^-9 relative) */
    fill(x, n, 12, -100, 100);
    be->round_bf16(n, x, y);
    for (size_t k = 0; k < n; k++) {
        ck_assert((bits_of(y[k]) & 0xFFFFu) == 0);
        ck_assert(fabsf(y[k] - x[k]) <= ldexpf(fabsf(x[k]), -8));
    }
    memcpy(x, y, n * sizeof(float));
    be->round_bf16(n, x, x);
    ck_assert(memcmp(x, y, n * sizeof(float)) == 0);
    /* bfloat16 storage: the packed halves are the rounded floats' upper
     * bits, and unpacking gives the rounded floats back exactly */
    uint16_t *h = malloc(n * sizeof *h);
    fill(x, n, 13, -100, 100);
    for (size_t k = 0; k < nc; k++)
        x[k] = from_bits(cases[k][0]);
    be->round_bf16(n, x, y);
    be->bf16_pack(n, x, h);
    for (size_t k = 0; k < n; k++)
        ck_assert_msg(h[k] == bits_of(y[k]) >> 16, "pack of 0x%08X: 0x%04X", bits_of(x[k]), h[k]);
    be->bf16_unpack(n, h, x);
    ck_assert(memcmp(x, y, n * sizeof(float)) == 0);
    free(h);
    free(x); free(y);
}
END_TEST

/* ------------------------------------------------------------ finite differences */

#define FD_H 1e-6

/* L = sum c*y + 0.5*sum y^2 with y = x W^T + b: dL/dy = c + y */
static double lin_loss_d(int B, int in, int out, const double *x, const double *W,
                         const double *b, const double *c)
{
    double *y = malloc(sizeof(double) * (size_t)B * out);
    lin_d(B, in, out, x, W, b, y);
    double L = 0;
    for (size_t k = 0; k < (size_t)B * out; k++)
        L += c[k] * y[k] + 0.5 * y[k] * y[k];
    free(y);
    return L;
}

/* ToTensor + Normalize: hand values (exact in float), then the formula
 * (v = p / 255.0f; (v - mean_c) / std_c, in float) over a batch large
 * enough for OpenMP, with 1 and 2 threads; NULL norm is plain / 255. */
START_TEST(pixels_normalize)
{
    const cdp_backend *be = cdp_backend_cpu(2);
    /* B = 2 images of C = 3 channels x HW = 2 pixels */
    const uint8_t hp[12] = {255, 0, 255, 0, 0, 255,   0, 255, 0, 255, 255, 0};
    const float norm[6] = {0.5f, 0.25f, 0.0f,   0.5f, 0.25f, 2.0f};
    const float want[12] = {1, -1, 3, -1, 0, 0.5f,   -1, 1, -1, 3, 0.5f, 0};
    float x[12];
    be->pixels_to_input(2, 3, 2, hp, norm, x);
    for (int k = 0; k < 12; k++)
        ck_assert_msg(x[k] == want[k], "x[%d] = %.9g, want %.9g", k, (double)x[k],
                      (double)want[k]);
    /* one value for the channel: mean 0, std 1 is the plain /255 */
    const float id[2] = {0.0f, 1.0f};
    be->pixels_to_input(2, 1, 6, hp, id, x);
    for (int k = 0; k < 12; k++)
        ck_assert(x[k] == (float)hp[k] / 255.0f);

    const int B = 100, C = 3, HW = 32 * 32;   /* 307200 values: above CDP_CPU_OMP_MIN */
    const size_t n = (size_t)B * C * HW;
    uint8_t *px = malloc(n);
    ck_assert_ptr_nonnull(px);
    for (size_t k = 0; k < n; k++)
        px[k] = (uint8_t)cdp_rand_u64(4, 4, k);
    const float cifar[6] = {0.4914f, 0.4822f, 0.4465f, 0.2470f, 0.2435f, 0.2616f};
    float *a = fbuf(n), *b = fbuf(n);
    for (int t = 1; t <= 2; t++) {
        const cdp_backend *bt = cdp_backend_cpu(t);
        bt->pixels_to_input(B, C, HW, px, cifar, t == 1 ? a : b);
    }
    for (size_t k = 0; k < n; k++) {
        int c = (int)((k / HW) % C);
        float v = (float)px[k] / 255.0f;
        float f = (v - cifar[c]) / cifar[C + c];
        ck_assert_msg(a[k] == f && b[k] == f, "at %zu (channel %d): %.9g / %.9g, want %.9g",
                      k, c, (double)a[k], (double)b[k], (double)f);
    }
    be->pixels_to_input(B, C, HW, px, NULL, a);
    for (size_t k = 0; k < n; k++)
        ck_assert(a[k] == (float)px[k] / 255.0f);
    free(px); free(a); free(b);
}
END_TEST

START_TEST(linear_fd)
{
    const cdp_backend *be = cdp_backend_cpu(1);
    int B = 4, in = 5, out = 3;
    size_t nx = (size_t)B * in, nw = (size_t)out * in, ny = (size_t)B * out;
    float *x = fbuf(nx), *W = fbuf(nw), *b = fbuf(out), *c = fbuf(ny), *y = fbuf(ny);
    float *dx = fbuf(nx), *dW = fbuf(nw), *db = fbuf(out);
    fill(x, nx, 20, -1, 1);
    fill(W, nw, 21, -1, 1);
    fill(b, out, 22, -1, 1);
    fill(c, ny, 23, -1, 1);
    be->linear_fwd(B, in, out, x, W, b, y, 0);
    for (size_t k = 0; k < ny; k++)
        y[k] = c[k] + y[k];
    be->linear_bwd(B, in, out, x, W, y, dx, dW, db, 0, 0);

    double *xd = to_d(x, nx), *Wd = to_d(W, nw), *bd = to_d(b, out), *cd = to_d(c, ny);
    double *f = malloc(sizeof(double) * nx);
    struct { double *p; size_t n; const float *a; const char *name; } t[3] = {
        {Wd, nw, dW, "dW"}, {bd, (size_t)out, db, "db"}, {xd, nx, dx, "dx"}};
    for (int q = 0; q < 3; q++) {
        for (size_t k = 0; k < t[q].n; k++) {
            double s = t[q].p[k];
            t[q].p[k] = s + FD_H;
            double lp = lin_loss_d(B, in, out, xd, Wd, bd, cd);
            t[q].p[k] = s - FD_H;
            double lm = lin_loss_d(B, in, out, xd, Wd, bd, cd);
            t[q].p[k] = s;
            f[k] = (lp - lm) / (2 * FD_H);
        }
        check_grad(t[q].name, t[q].a, f, t[q].n, 1e-3);
    }
    free(x); free(W); free(b); free(c); free(y); free(dx); free(dW); free(db);
    free(xd); free(Wd); free(bd); free(cd); free(f);
}
END_TEST

START_TEST(relu_fd)
{
    const cdp_backend *be = cdp_backend_cpu(1);
    size_t n = 50;
    float *z = fbuf(n), *y = fbuf(n), *dy = fbuf(n), *c = fbuf(n);
    fill_away0(z, n, 30);
    fill(c, n, 31, -1, 1);
    memcpy(y, z, n * sizeof(float));
    be->relu_fwd(n, y);
    memcpy(dy, c, n * sizeof(float));
    be->relu_bwd(n, y, dy);            /* dL/dz of L = sum c * relu(z) */
    double f[50];
    for (size_t k = 0; k < n; k++) {
        double zp = (double)z[k] + FD_H, zm = (double)z[k] - FD_H;
        f[k] = (c[k] * fmax(zp, 0.0) - c[k] * fmax(zm, 0.0)) / (2 * FD_H);
    }
    check_grad("relu dz", dy, f, n, 1e-3);
    free(z); free(y); free(dy); free(c);
}
END_TEST

START_TEST(xent_fd)
{
    const cdp_backend *be = cdp_backend_cpu(1);
    int B = 6, C = 5;
    size_t n = (size_t)B * C;
    float *z = fbuf(n);
    fill(z, n, 40, -3, 3);
    int32_t lab[6] = {0, 4, 2, 2, 1, 3};
    double *zd = to_d(z, n);
    double L = xent_d(B, C, zd, lab);
    double stats[2] = {0, 0};
    int right = 0;
    for (int i = 0; i < B; i++) {
        int am = 0;
        for (int j = 1; j < C; j++)
            if (z[i * C + j] > z[i * C + am])
                am = j;
        right += am == lab[i];
    }
    be->xent(B, C, z, lab, stats);
    double f[30];
    for (size_t k = 0; k < n; k++) {
        double s = zd[k];
        zd[k] = s + FD_H;
        double lp = xent_d(B, C, zd, lab);
        zd[k] = s - FD_H;
        double lm = xent_d(B, C, zd, lab);
        zd[k] = s;
        f[k] = (lp - lm) / (2 * FD_H);
    }
    check_grad("dlogits", z, f, n, 1e-3);
    ck_assert_msg(fabs(stats[0] - L * B) <= 1e-5 * L * B, "loss sum %.9g vs %.9g", stats[0], L * B);
    ck_assert(stats[1] == right);
    /* large logits: stable */
    float big[3] = {1000.0f, -1000.0f, 999.0f};
    int32_t l1[1] = {2};
    double st[2] = {0, 0};
    be->xent(1, 3, big, l1, st);
    ck_assert(isfinite(st[0]) && fabs(st[0] - (log(1 + exp(-1.0)) + 1.0)) < 1e-5);
    ck_assert(isfinite(big[0]) && isfinite(big[1]) && isfinite(big[2]));
    free(z); free(zd);
}
END_TEST

/* Independent double-precision forward of the whole MLP; also returns the
 * smallest |pre-activation| of the hidden layers (to stay away from kinks). */
static double mlp_loss_d(const cdp_model *m, int B, const double *P, const double *x,
                         const int32_t *lab, double *minpre)
{
    int w = 0;
    for (int j = 0; j <= MV(m)->nlayers; j++)
        w = MV(m)->dims[j] > w ? MV(m)->dims[j] : w;
    double *a = malloc(sizeof(double) * (size_t)B * w), *y = malloc(sizeof(double) * (size_t)B * w);
    memcpy(a, x, sizeof(double) * (size_t)B * MV(m)->dims[0]);
    double mp = INFINITY;
    for (int j = 0; j < MV(m)->nlayers; j++) {
        int in = MV(m)->dims[j], out = MV(m)->dims[j + 1];
        lin_d(B, in, out, a, P + MV(m)->w_off[j], P + MV(m)->b_off[j], y);
        if (j < MV(m)->nlayers - 1)
            for (size_t k = 0; k < (size_t)B * out; k++) {
                mp = fmin(mp, fabs(y[k]));
                y[k] = fmax(y[k], 0.0);
            }
        memcpy(a, y, sizeof(double) * (size_t)B * out);
    }
    double L = xent_d(B, MV(m)->dims[MV(m)->nlayers], a, lab);
    if (minpre)
        *minpre = mp;
    free(a);
    free(y);
    return L;
}

/* forward through all stages, backward through all stages chaining dx into
 * dout; gradient of every parameter and of the input against finite
 * differences of the double forward */
static void stage_chain_fd(const char *spec, int stages, int B)
{
    const cdp_backend *be = cdp_backend_cpu(1);
    cdp_model m;
    char err[256];
    ck_assert_msg(cdp_model_parse(spec, stages, &m, err, sizeof err) == 0, "%s", err);
    float *P = fbuf(m.nparams), *G = fbuf(m.nparams);
    cdp_model_init(&m, 99, P);
    /* larger weights than the default init: gradients of useful size */
    for (size_t k = 0; k < m.nparams; k++)
        P[k] *= 2.0f;
    size_t nx = (size_t)B * MV(&m)->dims[0];
    float *x = fbuf(nx), *dx0 = fbuf(nx);
    fill(x, nx, 50, -1, 1);
    int32_t lab[64];
    for (int i = 0; i < B; i++)
        lab[i] = (int32_t)(cdp_rand_u64(5, 6, (uint64_t)i) % (uint64_t)MV(&m)->dims[MV(&m)->nlayers]);

    float *act[CDP_MAX_LAYERS], *dxs[CDP_MAX_LAYERS];
    float *ws = fbuf(cdp_model_ws_floats(be, &m, B));
    double stats[2] = {0, 0};
    const float *in = x;
    for (int l = 0; l < m.nstages; l++) {
        act[l] = fbuf(cdp_stage_act_floats(&m, l, B));
        dxs[l] = fbuf((size_t)B * cdp_stage_in(&m, l));
        cdp_stage_fwd(be, &m, l, B, P + m.stage_off[l], in, act[l], lab, stats, ws, 1, NULL);
        in = cdp_stage_output(&m, l, B, act[l]);
    }
    for (int l = m.nstages - 1; l >= 0; l--) {
        const float *xin = l == 0 ? x : cdp_stage_output(&m, l - 1, B, act[l - 1]);
        const float *dout = l == m.nstages - 1 ? NULL : dxs[l + 1];
        cdp_stage_bwd(be, &m, l, B, 0, P + m.stage_off[l], xin, act[l], dout,
                      l == 0 ? dx0 : dxs[l], G + m.stage_off[l], ws, 0, NULL);
    }
    /* stage 0 again without dx: the same parameter gradient, bit for bit */
    {
        float *G2 = fbuf(m.stage_n[0]);
        double st2[2] = {0, 0};
        cdp_stage_fwd(be, &m, 0, B, P, x, act[0], lab, st2, ws, 1, NULL);
        cdp_stage_bwd(be, &m, 0, B, 0, P, x, act[0], m.nstages > 1 ? dxs[1] : NULL, NULL, G2, ws, 0, NULL);
        ck_assert_msg(memcmp(G2, G, m.stage_n[0] * sizeof(float)) == 0,
                      "%s: stage 0 gradient changes when dx is NULL", spec);
        free(G2);
    }
    double *Pd = to_d(P, m.nparams), *xd = to_d(x, nx);
    double minpre;
    double L = mlp_loss_d(&m, B, Pd, xd, lab, &minpre);
    ck_assert_msg(minpre > 1e-4, "%s: a pre-activation at %.3g: too close to the ReLU kink",
                  spec, minpre);
    ck_assert_msg(fabs(stats[0] - L * B) <= 1e-5 * L * B, "%s: loss %.9g vs %.9g", spec,
                  stats[0] / B, L);
    double *f = malloc(sizeof(double) * (m.nparams > nx ? m.nparams : nx));
    for (size_t k = 0; k < m.nparams; k++) {
        double s = Pd[k];
        Pd[k] = s + FD_H;
        double lp = mlp_loss_d(&m, B, Pd, xd, lab, NULL);
        Pd[k] = s - FD_H;
        double lm = mlp_loss_d(&m, B, Pd, xd, lab, NULL);
        Pd[k] = s;
        f[k] = (lp - lm) / (2 * FD_H);
    }
    char what[64];
    snprintf(what, sizeof what, "%s grad", spec);
    check_grad(what, G, f, m.nparams, 1e-3);
    for (size_t k = 0; k < nx; k++) {
        double s = xd[k];
        xd[k] = s + FD_H;
        double lp = mlp_loss_d(&m, B, Pd, xd, lab, NULL);
        xd[k] = s - FD_H;
        double lm = mlp_loss_d(&m, B, Pd, xd, lab, NULL);
        xd[k] = s;
        f[k] = (lp - lm) / (2 * FD_H);
    }
    snprintf(what, sizeof what, "%s dx", spec);
    check_grad(what, dx0, f, nx, 1e-3);
    for (int l = 0; l < m.nstages; l++) {
        free(act[l]);
        free(dxs[l]);
    }
    free(P); free(G); free(x); free(dx0); free(ws); free(Pd); free(xd); free(f);
}

START_TEST(stage_fd_one_stage)
{
    stage_chain_fd("mlp:6-7-5-4", 1, 5);     /* one 3-layer stage with the loss */
}
END_TEST

START_TEST(stage_fd_two_stages)
{
    stage_chain_fd("mlp:5-8-7-6-4", 2, 4);   /* multi-layer stages, dout path */
}
END_TEST

START_TEST(stage_fd_per_layer)
{
    stage_chain_fd("mlp:4-6-5-3", 0, 3);     /* one layer per stage */
}
END_TEST

START_TEST(stage_fd_single_layer)
{
    stage_chain_fd("mlp:7-4", 1, 6);         /* logistic regression */
}
END_TEST

/* ------------------------------------------------------------ fused ReLU */

/* linear_fwd(relu) is linear_fwd then relu_fwd, and linear_bwd(relu_dx) is
 * linear_bwd then relu_bwd(x, dx), bit for bit, for several column splits
 * and thread counts; x has negative entries so the mask matters. */
START_TEST(fused_relu_bitwise)
{
    static const int shapes[][3] = {{128, 1024, 1024}, {33, 300, 129}, {7, 5, 3}};
    static const char *splits[] = {NULL, "1", "4"};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        int B = shapes[s][0], in = shapes[s][1], out = shapes[s][2];
        size_t nx = (size_t)B * in, nw = (size_t)out * in, ny = (size_t)B * out;
        float *x = fbuf(nx), *W = fbuf(nw), *b = fbuf(out), *dy = fbuf(ny);
        float *y1 = fbuf(ny), *y2 = fbuf(ny), *dx1 = fbuf(nx), *dx2 = fbuf(nx);
        float *dW = fbuf(nw), *db = fbuf(out);
        fill(x, nx, 70, -1, 1);
        fill(W, nw, 71, -0.05f, 0.05f);
        fill(b, out, 72, -0.05f, 0.05f);
        fill(dy, ny, 73, -0.01f, 0.01f);
        for (int sp = 0; sp < 3; sp++)
            for (int t = 1; t <= 2; t++) {
                const cdp_backend *be = cpu_split(t, splits[sp]);
                be->linear_fwd(B, in, out, x, W, b, y1, 0);
                be->relu_fwd(ny, y1);
                be->linear_fwd(B, in, out, x, W, b, y2, 1);
                ck_assert_msg(memcmp(y1, y2, ny * sizeof(float)) == 0,
                              "fused forward ReLU differs (%dx%dx%d)", B, in, out);
                be->linear_bwd(B, in, out, x, W, dy, dx1, dW, db, 0, 0);
                be->relu_bwd(nx, x, dx1);
                be->linear_bwd(B, in, out, x, W, dy, dx2, dW, db, 1, 0);
                ck_assert_msg(memcmp(dx1, dx2, nx * sizeof(float)) == 0,
                              "fused backward ReLU mask differs (%dx%dx%d)", B, in, out);
                size_t zeros = 0;
                for (size_t k = 0; k < nx; k++)
                    zeros += dx2[k] == 0.0f;
                ck_assert_msg(zeros > nx / 4, "the mask zeroed only %zu of %zu", zeros, nx);
            }
        free(x); free(W); free(b); free(dy); free(y1); free(y2); free(dx1); free(dx2);
        free(dW); free(db);
    }
}
END_TEST

/* ------------------------------------------------------------ in-place sums */

/* linear_bwd(accumulate) adds to dW/db; accumulate_exact says whether that
 * is bitwise a backward into a scratch buffer plus add().  Checked here on
 * other data than the probe's, for micro-batches on both sides of
 * OpenBLAS's K block: the answer must match what really happens, and where
 * it is "exact" the bits must be equal. */
START_TEST(accumulate_in_place)
{
    static const int shapes[][3] = {{8, 784, 64}, {32, 784, 256}, {128, 1024, 1024},
                                    {448, 64, 10}, {512, 784, 16}, {2048, 300, 37}};
    int exact_seen = 0, inexact_seen = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
        for (int t = 1; t <= 2; t++) {
            const cdp_backend *be = cpu_split(t, NULL);
            int B = shapes[s][0], in = shapes[s][1], out = shapes[s][2];
            size_t nx = (size_t)B * in, ny = (size_t)B * out, ng = (size_t)out * in + out;
            float *x = fbuf(nx), *dy = fbuf(ny), *sep = fbuf(ng), *acc = fbuf(ng), *g = fbuf(ng);
            fill(x, nx, 80, -1, 1);
            fill(dy, ny, 81, -0.01f, 0.01f);
            fill(sep, ng, 82, -0.5f, 0.5f);
            memcpy(acc, sep, ng * sizeof(float));
            be->linear_bwd(B, in, out, x, NULL, dy, NULL, g, g + (size_t)out * in, 0, 0);
            be->add(ng, sep, g);
            be->linear_bwd(B, in, out, x, NULL, dy, NULL, acc, acc + (size_t)out * in, 0, 1);
            int equal = memcmp(sep, acc, ng * sizeof(float)) == 0;
            int said = be->accumulate_exact(B, in, out);
            ck_assert_msg(said == equal, "B=%d %dx%d, %d thread(s): the probe says %s, the sums are %s",
                          B, in, out, t, said ? "exact" : "inexact", equal ? "equal" : "different");
            if (!equal) {   /* but close: the same sum, rounded differently */
                for (size_t k = 0; k < ng; k++)
                    ck_assert(fabsf(sep[k] - acc[k]) <= 1e-5f * (1.0f + fabsf(sep[k])));
            }
            exact_seen += equal;
            inexact_seen += !equal;
            free(x); free(dy); free(sep); free(acc); free(g);
        }
    ck_assert_msg(exact_seen > 0, "the in-place sum is exact for no micro-batch size");
    (void)inexact_seen;
}
END_TEST

/* An update in place clears the gradient it read (zero_g) and the next first
 * backward adds onto it (beta = 1): theta and momentum must not change by a
 * bit, the gradient must come out +0, and a backward onto those zeros must
 * give the bits of a backward that writes (beta = 0), also where a column
 * of x is zero and its products are -0. */
START_TEST(sgd_clears_gradient)
{
    const cdp_backend *be = cdp_backend_cpu(2);
    const size_t n = 100003;
    float *th = fbuf(n), *g = fbuf(n), *g2 = fbuf(n), *o[2], *bf[2];
    fill(th, n, 90, -1, 1);
    for (int branch = 0; branch < 3; branch++) {   /* no momentum, first step, later step */
        for (int z = 0; z < 2; z++) {
            fill(g, n, 91, -1, 1);
            o[z] = fbuf(n);
            bf[z] = fbuf(n);
            fill(bf[z], n, 92, -1, 1);
            be->sgd(n, th, o[z], g, 0.25f, branch ? bf[z] : NULL, 0.1f, 0.9f, 1e-4f, branch == 1, z);
            if (z) {
                for (size_t k = 0; k < n; k++)
                    ck_assert_msg(g[k] == 0.0f && !signbit(g[k]), "g[%zu] = %g after zero_g", k, g[k]);
            } else {
                fill(g2, n, 91, -1, 1);
                ck_assert(memcmp(g, g2, n * sizeof(float)) == 0);   /* untouched */
            }
        }
        ck_assert(memcmp(o[0], o[1], n * sizeof(float)) == 0);
        ck_assert(memcmp(bf[0], bf[1], n * sizeof(float)) == 0);
        for (int z = 0; z < 2; z++) {
            free(o[z]); free(bf[z]);
        }
    }
    free(th); free(g); free(g2);

    static const int shapes[][3] = {{32, 784, 256}, {128, 1024, 1024}, {128, 784, 1024}, {64, 100, 10}};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
        for (int t = 1; t <= 2; t++) {
            const cdp_backend *b = cpu_split(t, NULL);
            int B = shapes[s][0], in = shapes[s][1], out = shapes[s][2];
            if (!b->accumulate_exact(B, in, out))
                continue;   /* the executor then does not add onto zeros */
            size_t nx = (size_t)B * in, ny = (size_t)B * out, ng = (size_t)out * in + out;
            float *x = fbuf(nx), *dy = fbuf(ny), *w = fbuf(ng), *a = fbuf(ng);
            fill(x, nx, 93, -1, 1);
            for (int i = 0; i < B; i++)
                x[(size_t)i * in + 3] = 0.0f;          /* -0 products in column 3 */
            fill(dy, ny, 94, -0.01f, 0.01f);
            fill(w, ng, 95, -1, 1);                  /* garbage that beta = 0 ignores */
            memset(a, 0, ng * sizeof(float));
            b->linear_bwd(B, in, out, x, NULL, dy, NULL, w, w + (size_t)out * in, 0, 0);
            b->linear_bwd(B, in, out, x, NULL, dy, NULL, a, a + (size_t)out * in, 0, 1);
            ck_assert_msg(memcmp(w, a, ng * sizeof(float)) == 0,
                          "B=%d %dx%d, %d thread(s): adding onto zeros differs from writing", B, in, out, t);
            free(x); free(dy); free(w); free(a);
        }
}
END_TEST

/* zero() clears exactly the bytes asked for, in one block per thread for
 * large buffers (whatever the size of the team OpenMP gives) */
START_TEST(zero_clears_exactly)
{
    const size_t sizes[] = {0, 1, 12, 4 * 262144 + 4, 4 * 1000003 + 12, 4 * 2097152};
    for (int t = 1; t <= 2; t++) {
        const cdp_backend *be = cdp_backend_cpu(t);
        for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
            const size_t n = sizes[s];
            unsigned char *b = malloc(n + 128);
            ck_assert_ptr_nonnull(b);
            memset(b, 0xA5, n + 128);
            be->zero(b + 64, n);
            /* the first wrong byte, then one assertion: Check's assertions
             * each send a message to the runner, too slow for 30M bytes */
            size_t k = 0;
            while (k < n + 128 && b[k] == (k >= 64 && k < 64 + n ? 0 : 0xA5))
                k++;
            ck_assert_msg(k == n + 128, "%d thread(s), %zu bytes: byte %zu is %d", t, n, k,
                          k < n + 128 ? b[k] : -1);
            free(b);
        }
    }
}
END_TEST

/* ------------------------------------------------------------ determinism */

static void run_linear(const cdp_backend *be, int B, int in, int out, const float *x,
                       const float *W, const float *b, const float *dy, float *y, float *dx,
                       float *dW, float *db)
{
    be->linear_fwd(B, in, out, x, W, b, y, 0);
    be->linear_bwd(B, in, out, x, W, dy, dx, dW, db, 0, 0);
}

START_TEST(determinism)
{
    static const int shapes[][3] = {
        {128, 1024, 1024}, {128, 784, 256}, {128, 256, 128}, {128, 128, 10},
        {100, 300, 37}, {512, 1024, 1024}, {1024, 784, 512}, {3200, 192, 192},
        {3200, 768, 192}};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        int B = shapes[s][0], in = shapes[s][1], out = shapes[s][2];
        size_t nx = (size_t)B * in, nw = (size_t)out * in, ny = (size_t)B * out;
        float *x = fbuf(nx), *W = fbuf(nw), *b = fbuf(out), *dy = fbuf(ny);
        float *r[4][4];
        fill(x, nx, 60, -1, 1);
        fill(W, nw, 61, -0.05f, 0.05f);
        fill(b, out, 62, -0.05f, 0.05f);
        fill(dy, ny, 63, -0.01f, 0.01f);
        static const char *splits[] = {NULL, "4"};
        /* sp 0, 1: oneDNN's sgemm (where built), 2, 3: OpenBLAS's */
        for (int sp = 0; sp < 4; sp++) {
            /* runs 0 and 1: two threads; run 2: one thread; run 3: three threads */
            static const int thr[4] = {2, 2, 1, 3};
            for (int t = 0; t < 4; t++) {
                r[t][0] = fbuf(ny); r[t][1] = fbuf(nx); r[t][2] = fbuf(nw); r[t][3] = fbuf(out);
                const cdp_backend *be = cpu_split_lib(thr[t], splits[sp % 2], sp / 2 ? "0" : "1");
                run_linear(be, B, in, out, x, W, b, dy, r[t][0], r[t][1], r[t][2], r[t][3]);
            }
            size_t sz[4] = {ny, nx, nw, (size_t)out};
            static const char *nm[4] = {"y", "dx", "dW", "db"};
            for (int q = 0; q < 4; q++) {
                ck_assert_msg(memcmp(r[0][q], r[1][q], sz[q] * sizeof(float)) == 0,
                              "%s of %dx%dx%d differs between two identical calls",
                              nm[q], B, in, out);
                for (int t = 2; t < 4; t++)
                    ck_assert_msg(memcmp(r[0][q], r[t][q], sz[q] * sizeof(float)) == 0,
                                  "%s of %dx%dx%d differs between 2 and %d threads (split %s, %s)",
                                  nm[q], B, in, out, thr[t], splits[sp % 2] ? splits[sp % 2] : "default",
                                  sp / 2 ? "OpenBLAS" : "oneDNN");
            }
            for (int t = 0; t < 4; t++)
                for (int q = 0; q < 4; q++)
                    free(r[t][q]);
        }
        free(x); free(W); free(b); free(dy);
    }

    /* elementwise and loss kernels above the OpenMP threshold */
    size_t n = 1 << 20;
    float *th = fbuf(n), *g = fbuf(n), *o[2], *bf[2];
    fill(th, n, 70, -1, 1);
    fill(g, n, 71, -1, 1);
    int B = 4096, C = 100;
    float *z = fbuf((size_t)B * C), *zz[2];
    int32_t *lab = malloc(sizeof(int32_t) * B);
    fill(z, (size_t)B * C, 72, -4, 4);
    for (int i = 0; i < B; i++)
        lab[i] = i % C;
    double st[2][2] = {{0, 0}, {0, 0}};
    for (int t = 0; t < 2; t++) {
        const cdp_backend *be = cdp_backend_cpu(t == 0 ? 1 : 2);
        o[t] = fbuf(n);
        bf[t] = fbuf(n);
        be->sgd(n, th, o[t], g, 1.0f, bf[t], 0.1f, 0.9f, 1e-4f, 1, 0);
        be->sgd(n, o[t], o[t], g, 1.0f, bf[t], 0.1f, 0.9f, 1e-4f, 0, 0);
        be->relu_fwd(n, o[t]);
        zz[t] = fbuf((size_t)B * C);
        memcpy(zz[t], z, sizeof(float) * (size_t)B * C);
        be->xent(B, C, zz[t], lab, st[t]);
    }
    ck_assert(memcmp(o[0], o[1], n * sizeof(float)) == 0);
    ck_assert(memcmp(bf[0], bf[1], n * sizeof(float)) == 0);
    ck_assert(memcmp(zz[0], zz[1], sizeof(float) * (size_t)B * C) == 0);
    ck_assert(memcmp(st[0], st[1], sizeof st[0]) == 0);
    {
        /* and right: the loss sum of the parallel row blocks vs double */
        double *zd = to_d(z, (size_t)B * C);
        double L = xent_d(B, C, zd, lab) * B;
        ck_assert_msg(fabs(st[0][0] - L) <= 1e-5 * L, "xent loss sum %.9g vs %.9g", st[0][0], L);
        free(zd);
    }
    for (int t = 0; t < 2; t++) {
        free(o[t]); free(bf[t]); free(zz[t]);
    }
    free(th); free(g); free(z); free(lab);
}
END_TEST

/* --precision bf16's Linear kernels (bfloat16 products through oneDNN's
 * matmul where built, float32 sums): on operands rounded to bfloat16,
 * against double within the float32 summation bound, (K + 2) * 2^-24 *
 * sum |terms| (K products and the bias; a bfloat16 output or a wrong
 * operand is off by far more); bitwise the same for 1, 2 and 3 threads;
 * accumulate gives the bits of a separate product and add(); the fused
 * ReLU masks. */
static void bf16_round_all(float *p, size_t n)
{
    cdp_backend_cpu(1)->round_bf16(n, p, p);
}

static void bf16_check(const char *what, int B, int K, const float *a, size_t as, size_t ak,
                       const float *w, size_t ws, size_t wk, const float *bias, const float *got,
                       int rows, int cols)
{
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++) {
            double e = bias ? bias[j] : 0.0, mag = bias ? fabs(bias[j]) : 0.0;
            for (int k = 0; k < K; k++) {
                double t = (double)a[i * as + k * ak] * w[j * ws + k * wk];
                e += t;
                mag += fabs(t);
            }
            double d = fabs(got[(size_t)i * cols + j] - e);
            ck_assert_msg(d <= (K + 2) * 0x1p-24 * mag, "bf16 %s %dx%d [%d,%d]: %.9g vs %.9g",
                          what, B, K, i, j, (double)got[(size_t)i * cols + j], e);
        }
}

START_TEST(linear_bf16)
{
    static const int shapes[][3] = {{9, 13, 6}, {64, 300, 50}, {600, 192, 192}, {640, 192, 768},
                                    {333, 768, 200}};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        const int B = shapes[s][0], in = shapes[s][1], out = shapes[s][2];
        const size_t nx = (size_t)B * in, nw = (size_t)out * in, ny = (size_t)B * out;
        float *x = fbuf(nx), *W = fbuf(nw), *b = fbuf(out), *dy = fbuf(ny);
        fill(x, nx, 80, -1, 1);
        fill(W, nw, 81, -1, 1);
        fill(b, out, 82, -1, 1);
        fill(dy, ny, 83, -1, 1);
        bf16_round_all(x, nx);
        bf16_round_all(W, nw);
        bf16_round_all(dy, ny);
        static const int thr[3] = {1, 2, 3};
        float *r[3][4];
        for (int t = 0; t < 3; t++) {
            const cdp_backend *be = cpu_split_lib(thr[t], NULL, "1");
            r[t][0] = fbuf(ny); r[t][1] = fbuf(nx); r[t][2] = fbuf(nw); r[t][3] = fbuf(out);
            be->linear_fwd_bf16(B, in, out, x, W, b, r[t][0], 0);
            be->linear_bwd_bf16(B, in, out, x, W, dy, r[t][1], r[t][2], r[t][3], 0, 0);
        }
        bf16_check("y", B, in, x, in, 1, W, in, 1, b, r[0][0], B, out);
        bf16_check("dx", B, out, dy, out, 1, W, 1, in, NULL, r[0][1], B, in);
        bf16_check("dW", B, B, dy, 1, out, x, 1, in, NULL, r[0][2], out, in);
        for (int o = 0; o < out; o++) {   /* db: linear_bwd's float sum, row order */
            float c = dy[o];
            for (int i = 1; i < B; i++)
                c += dy[(size_t)i * out + o];
            ck_assert_msg(memcmp(&c, &r[0][3][o], sizeof c) == 0, "bf16 db[%d]", o);
        }
        const size_t sz[4] = {ny, nx, nw, (size_t)out};
        for (int t = 1; t < 3; t++)
            for (int q = 0; q < 4; q++)
                ck_assert_msg(memcmp(r[0][q], r[t][q], sz[q] * sizeof(float)) == 0,
                              "bf16 Linear %dx%dx%d: output %d differs between 1 and %d threads",
                              B, in, out, q, thr[t]);
        /* accumulate: dW + (the product) and db + (the sums), one rounding each */
        const cdp_backend *be = cpu_split_lib(2, NULL, "1");
        float *acc = fbuf(nw + out), *want = fbuf(nw + out);
        fill(acc, nw + out, 84, -1, 1);
        memcpy(want, acc, (nw + out) * sizeof(float));
        for (size_t k = 0; k < nw; k++)
            want[k] = want[k] + r[0][2][k];
        for (int o = 0; o < out; o++)
            want[nw + o] = want[nw + o] + r[0][3][o];
        be->linear_bwd_bf16(B, in, out, x, W, dy, NULL, acc, acc + nw, 0, 1);
        ck_assert_msg(memcmp(acc, want, (nw + out) * sizeof(float)) == 0,
                      "bf16 Linear %dx%dx%d: accumulate is not product then add", B, in, out);
        /* the fused ReLUs: the forward's output, dx masked by x > 0 */
        be->linear_fwd_bf16(B, in, out, x, W, b, r[1][0], 1);
        be->linear_bwd_bf16(B, in, out, x, W, dy, r[1][1], acc, acc + nw, 1, 0);
        for (size_t k = 0; k < ny; k++)
            ck_assert(r[1][0][k] == (r[0][0][k] > 0.0f ? r[0][0][k] : 0.0f));
        for (size_t k = 0; k < nx; k++)
            ck_assert(r[1][1][k] == (x[k] > 0.0f ? r[0][1][k] : 0.0f));
        for (int t = 0; t < 3; t++)
            for (int q = 0; q < 4; q++)
                free(r[t][q]);
        free(x); free(W); free(b); free(dy); free(acc); free(want);
    }
}
END_TEST

static Suite *kernels_suite(void)
{
    Suite *s = suite_create("cpu_kernels");
    TCase *tc = tcase_create("hand");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, table_complete);
    tcase_add_test(tc, linear_fwd_naive);
    tcase_add_test(tc, linear_bwd_naive);
    tcase_add_test(tc, fused_relu_bitwise);
    tcase_add_test(tc, accumulate_in_place);
    tcase_add_test(tc, sgd_clears_gradient);
    tcase_add_test(tc, zero_clears_exactly);
    tcase_add_test(tc, xent_hand);
    tcase_add_test(tc, nonfinite_hand);
    tcase_add_test(tc, sgd_hand);
    tcase_add_test(tc, elementwise);
    tcase_add_test(tc, round_bf16_hand);
    tcase_add_test(tc, pixels_normalize);
    suite_add_tcase(s, tc);
    tc = tcase_create("finite-differences");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, linear_fd);
    tcase_add_test(tc, relu_fd);
    tcase_add_test(tc, xent_fd);
    tcase_add_test(tc, stage_fd_one_stage);
    tcase_add_test(tc, stage_fd_two_stages);
    tcase_add_test(tc, stage_fd_per_layer);
    tcase_add_test(tc, stage_fd_single_layer);
    suite_add_tcase(s, tc);
    tc = tcase_create("determinism");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, determinism);
    tcase_add_test(tc, linear_bf16);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    int failed = check_run(kernels_suite());
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
