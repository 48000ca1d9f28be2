/* The CUDA backend against the CPU backend, kernel by kernel.
 *
 * Skipped (exit 77) when this build has no CUDA backend or the machine has no
 * usable GPU: it never reports a pass without having run on a GPU.
 *
 * With a GPU: every kernel on random inputs of several shapes agrees with the
 * CPU backend (relative to the largest reference value: 1e-4 for the SGEMM
 * based Linear layers, 1e-5 for softmax cross-entropy, exact or 1e-6 for the
 * element-wise kernels), the loss statistics agree, and every GPU kernel is
 * deterministic (the same call twice gives the same bits).  The image
 * kernels likewise: conv2d (on the im2col path, and on the cuDNN path where
 * the build has it), BatchNorm (training, evaluation, backward,
 * running statistics) within 1e-5 of the largest CPU value, conv2d's and
 * bn_bwd's accumulate mode the bits of a separate result added with add();
 * pooling (values, argmax offsets, gradients), add3 and f64_pack/unpack
 * bit for bit.  The transformer kernels: gemm_batched in the four transpose
 * cases with padded strides (1e-4; beta 0 over NaN, the padding untouched),
 * softmax (1e-6 forward, 1e-5 backward) and GELU (1e-6) to rounding;
 * LayerNorm (forward, backward, dx over dy, accumulate) to 1e-6 (double sums
 * in another order than the CPU's), the column sums (sum_rows, the class
 * token's gradient) to 1e-5 (double where the CPU adds floats in order);
 * the tokens, add_rows and copy_rows bit for bit.  The kernels ran on an
 * H200 on 2026-11-26; the parallel softmax, LayerNorm and column sums
 * (reduce.cuh) were written after that, without a GPU, and so were the
 * checks of ReLU6 and dropout (bit for bit) and of grouped convolution
 * (the direct path bit for bit, cuDNN's to rounding). */
#include <check.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "optim/optim.h"

#define SKIP_CODE 77

static const cdp_backend *gpu;
static const cdp_backend *cpu;

/* ------------------------------------------------------------ helpers */

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;

static uint64_t next_u64(void)
{
    /* splitmix64 */
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* uniform in [lo, hi) */
static float *rand_floats(size_t n, float lo, float hi)
{
    float *v = malloc((n ? n : 1) * sizeof *v);
    ck_assert_ptr_nonnull(v);
    for (size_t i = 0; i < n; i++)
        v[i] = lo + (hi - lo) * (float)((double)(next_u64() >> 40) / (double)(1ULL << 24));
    return v;
}

/* A buffer on a backend, initialised from host data (or zeroed). */
static void *put(const cdp_backend *be, const void *host, size_t bytes)
{
    void *d = be->alloc(bytes);
    ck_assert_msg(d != NULL, "%s: alloc(%zu) failed", be->name, bytes);
    if (host)
        be->to_device(d, host, bytes);
    else
        be->zero(d, bytes);
    return d;
}

static void *get(const cdp_backend *be, const void *d, size_t bytes)
{
    void *h = malloc(bytes ? bytes : 1);
    ck_assert_ptr_nonnull(h);
    be->sync();
    be->to_host(h, d, bytes);
    return h;
}

/* max |a - b| <= rtol * max(max |b|, floor) */
static void expect_close(const char *what, const float *a, const float *b, size_t n,
                         double rtol)
{
    double scale = 0.0, worst = 0.0;
    size_t at = 0;
    for (size_t i = 0; i < n; i++)
        if (fabs((double)b[i]) > scale)
            scale = fabs((double)b[i]);
    if (scale < 1e-30)
        scale = 1e-30;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (isnan(d)) { /* a NaN on either side is the worst difference */
            worst = d;
            at = i;
            break;
        }
        if (d > worst) {
            worst = d;
            at = i;
        }
    }
    ck_assert_msg(worst <= rtol * scale,
                  "%s: gpu and cpu differ by %.3g at [%zu] (gpu %.9g, cpu %.9g), "
                  "scale %.3g, allowed relative %.1g",
                  what, worst, at, (double)a[at], (double)b[at], scale, rtol);
}

/* A float sum of K terms, in an order other than the CPU's, is off by about
 * sqrt(K) units of float rounding (randomly signed roundings); cuDNN's weight
 * gradient sums B*H*W products and softmax sums a row of N, so their
 * tolerance grows with K instead of being one fixed figure. */
static double float_sum_rtol(double base, double K)
{
    return fmax(base, 2.0 * sqrt(K) * FLT_EPSILON);
}

static void expect_same_bits(const char *what, const void *a, const void *b, size_t bytes)
{
    ck_assert_msg(memcmp(a, b, bytes) == 0, "%s: two identical GPU calls gave different bits",
                  what);
}

/* ------------------------------------------------------------ memory */

START_TEST(test_memory)
{
    const char *missing = cdp_backend_missing_kernel(gpu);
    ck_assert_msg(missing == NULL, "cuda backend lacks %s", missing ? missing : "");
    ck_assert_int_eq(gpu->accumulate_exact(32, 64, 16), 0);
    const size_t n = 100003;
    float *h = rand_floats(n, -1.0f, 1.0f);
    float *d1 = put(gpu, h, n * sizeof(float));
    ck_assert_msg(((uintptr_t)d1 % 64) == 0, "alloc not 64-byte aligned");
    float *d2 = put(gpu, NULL, n * sizeof(float));
    gpu->copy(d2, d1, n * sizeof(float));
    float *back = get(gpu, d2, n * sizeof(float));
    ck_assert_msg(memcmp(back, h, n * sizeof(float)) == 0, "to_device/copy/to_host roundtrip");
    gpu->zero(d2, 17 * sizeof(float));
    free(back);
    back = get(gpu, d2, n * sizeof(float));
    for (size_t i = 0; i < 17; i++)
        ck_assert(back[i] == 0.0f);
    ck_assert(back[17] == h[17]);
    gpu->free(d1);
    gpu->free(d2);
    gpu->free(NULL);
    free(back);
    free(h);

    ck_assert_int_eq(gpu->host_memory, 0);
    ck_assert_str_eq(gpu->name, "cuda");
    ck_assert_msg(strncmp(gpu->describe(), "cuda: ", 6) == 0, "describe: %s", gpu->describe());
    ck_assert_int_eq(cdp_backend_mpi_device_ok(cpu), 1);
}
END_TEST

/* ------------------------------------------------------------ Linear */

static const int shapes[][3] = { /* B, in, out */
    {1, 1, 1}, {7, 13, 5}, {33, 100, 10}, {64, 784, 256}, {128, 257, 129}, {256, 256, 128},
};
#define NSHAPES ((int)(sizeof shapes / sizeof shapes[0]))

START_TEST(test_linear_fwd)
{
    int B = shapes[_i][0], in = shapes[_i][1], out = shapes[_i][2];
    size_t nx = (size_t)B * in, nw = (size_t)out * in, ny = (size_t)B * out;
    float *x = rand_floats(nx, -1.0f, 1.0f), *W = rand_floats(nw, -0.5f, 0.5f);
    float *b = rand_floats((size_t)out, -0.5f, 0.5f);
    char what[96];
    snprintf(what, sizeof what, "linear_fwd B=%d in=%d out=%d", B, in, out);

    float *gx = put(gpu, x, nx * 4), *gW = put(gpu, W, nw * 4), *gb = put(gpu, b, out * 4);
    float *gy = put(gpu, NULL, ny * 4), *gy2 = put(gpu, NULL, ny * 4);
    float *cx = put(cpu, x, nx * 4), *cW = put(cpu, W, nw * 4), *cb = put(cpu, b, out * 4);
    float *cy = put(cpu, NULL, ny * 4);

    gpu->linear_fwd(B, in, out, gx, gW, gb, gy, 0);
    gpu->linear_fwd(B, in, out, gx, gW, gb, gy2, 0);
    cpu->linear_fwd(B, in, out, cx, cW, cb, cy, 0);
    float *hy = get(gpu, gy, ny * 4), *hy2 = get(gpu, gy2, ny * 4), *ry = get(cpu, cy, ny * 4);
    expect_close(what, hy, ry, ny, 1e-4);
    expect_same_bits(what, hy, hy2, ny * 4);

    /* ReLU on the same output: exact */
    gpu->relu_fwd(ny, gy);
    cpu->relu_fwd(ny, cy);
    float *hr = get(gpu, gy, ny * 4);
    for (size_t i = 0; i < ny; i++)
        ck_assert_msg(hr[i] == (hy[i] > 0.0f ? hy[i] : 0.0f), "relu_fwd at %zu", i);

    free(hr); free(hy); free(hy2); free(ry);
    gpu->free(gx); gpu->free(gW); gpu->free(gb); gpu->free(gy); gpu->free(gy2);
    cpu->free(cx); cpu->free(cW); cpu->free(cb); cpu->free(cy);
    free(x); free(W); free(b);
}
END_TEST

START_TEST(test_linear_bwd)
{
    int B = shapes[_i][0], in = shapes[_i][1], out = shapes[_i][2];
    size_t nx = (size_t)B * in, nw = (size_t)out * in, ny = (size_t)B * out;
    float *x = rand_floats(nx, -1.0f, 1.0f), *W = rand_floats(nw, -0.5f, 0.5f);
    float *dy = rand_floats(ny, -1.0f, 1.0f);
    char what[96];

    float *gx = put(gpu, x, nx * 4), *gW = put(gpu, W, nw * 4), *gdy = put(gpu, dy, ny * 4);
    float *gdx = put(gpu, NULL, nx * 4), *gdW = put(gpu, NULL, nw * 4), *gdb = put(gpu, NULL, out * 4);
    float *gdx2 = put(gpu, NULL, nx * 4), *gdW2 = put(gpu, NULL, nw * 4), *gdb2 = put(gpu, NULL, out * 4);
    float *cx = put(cpu, x, nx * 4), *cW = put(cpu, W, nw * 4), *cdy = put(cpu, dy, ny * 4);
    float *cdx = put(cpu, NULL, nx * 4), *cdW = put(cpu, NULL, nw * 4), *cdb = put(cpu, NULL, out * 4);

    gpu->linear_bwd(B, in, out, gx, gW, gdy, gdx, gdW, gdb, 0, 0);
    gpu->linear_bwd(B, in, out, gx, gW, gdy, gdx2, gdW2, gdb2, 0, 0);
    cpu->linear_bwd(B, in, out, cx, cW, cdy, cdx, cdW, cdb, 0, 0);

    float *hdx = get(gpu, gdx, nx * 4), *hdW = get(gpu, gdW, nw * 4), *hdb = get(gpu, gdb, out * 4);
    float *hdx2 = get(gpu, gdx2, nx * 4), *hdW2 = get(gpu, gdW2, nw * 4), *hdb2 = get(gpu, gdb2, out * 4);
    float *rdx = get(cpu, cdx, nx * 4), *rdW = get(cpu, cdW, nw * 4), *rdb = get(cpu, cdb, out * 4);

    snprintf(what, sizeof what, "linear_bwd dx B=%d in=%d out=%d", B, in, out);
    expect_close(what, hdx, rdx, nx, 1e-4);
    expect_same_bits(what, hdx, hdx2, nx * 4);
    snprintf(what, sizeof what, "linear_bwd dW B=%d in=%d out=%d", B, in, out);
    expect_close(what, hdW, rdW, nw, 1e-4);
    expect_same_bits(what, hdW, hdW2, nw * 4);
    snprintf(what, sizeof what, "linear_bwd db B=%d in=%d out=%d", B, in, out);
    expect_close(what, hdb, rdb, (size_t)out, 1e-5);
    expect_same_bits(what, hdb, hdb2, out * 4);

    /* dx == NULL skips dx and still overwrites dW, db (not accumulates) */
    gpu->linear_bwd(B, in, out, gx, gW, gdy, NULL, gdW2, gdb2, 0, 0);
    free(hdW2); free(hdb2);
    hdW2 = get(gpu, gdW2, nw * 4);
    hdb2 = get(gpu, gdb2, out * 4);
    snprintf(what, sizeof what, "linear_bwd (dx NULL) B=%d in=%d out=%d", B, in, out);
    expect_same_bits(what, hdW, hdW2, nw * 4);
    expect_same_bits(what, hdb, hdb2, out * 4);

    free(hdx); free(hdW); free(hdb); free(hdx2); free(hdW2); free(hdb2);
    free(rdx); free(rdW); free(rdb);
    gpu->free(gx); gpu->free(gW); gpu->free(gdy); gpu->free(gdx); gpu->free(gdW); gpu->free(gdb);
    gpu->free(gdx2); gpu->free(gdW2); gpu->free(gdb2);
    cpu->free(cx); cpu->free(cW); cpu->free(cdy); cpu->free(cdx); cpu->free(cdW); cpu->free(cdb);
    free(x); free(W); free(dy);
}
END_TEST

/* The fused forms training uses: ReLU inside linear_fwd, the ReLU mask on
 * dx (relu_dx) and accumulation onto dW and db (accumulate), each against
 * the CPU backend doing the same. */
START_TEST(test_linear_fused)
{
    int B = shapes[_i][0], in = shapes[_i][1], out = shapes[_i][2];
    size_t nx = (size_t)B * in, nw = (size_t)out * in, ny = (size_t)B * out;
    float *x = rand_floats(nx, -1.0f, 1.0f), *W = rand_floats(nw, -0.5f, 0.5f);
    float *b = rand_floats((size_t)out, -0.5f, 0.5f), *dy = rand_floats(ny, -1.0f, 1.0f);
    float *acc = rand_floats(nw + out, -0.5f, 0.5f);
    char what[96];

    float *gx = put(gpu, x, nx * 4), *gW = put(gpu, W, nw * 4), *gb = put(gpu, b, out * 4);
    float *gy = put(gpu, NULL, ny * 4), *gy2 = put(gpu, NULL, ny * 4), *gdy = put(gpu, dy, ny * 4);
    float *gdx = put(gpu, NULL, nx * 4), *gacc = put(gpu, acc, (nw + out) * 4);
    float *cx = put(cpu, x, nx * 4), *cW = put(cpu, W, nw * 4), *cb = put(cpu, b, out * 4);
    float *cy = put(cpu, NULL, ny * 4), *cdy = put(cpu, dy, ny * 4);
    float *cdx = put(cpu, NULL, nx * 4), *cacc = put(cpu, acc, (nw + out) * 4);

    gpu->linear_fwd(B, in, out, gx, gW, gb, gy, 1);
    gpu->linear_fwd(B, in, out, gx, gW, gb, gy2, 0);
    gpu->relu_fwd(ny, gy2);
    cpu->linear_fwd(B, in, out, cx, cW, cb, cy, 1);
    float *hy = get(gpu, gy, ny * 4), *hy2 = get(gpu, gy2, ny * 4), *ry = get(cpu, cy, ny * 4);
    snprintf(what, sizeof what, "linear_fwd relu B=%d in=%d out=%d", B, in, out);
    expect_close(what, hy, ry, ny, 1e-4);
    ck_assert_msg(memcmp(hy, hy2, ny * 4) == 0, "%s: fused ReLU differs from relu_fwd after it", what);

    /* x as the previous layer's ReLU output: relu_dx masks dx where x <= 0 */
    gpu->linear_bwd(B, in, out, gx, gW, gdy, gdx, gacc, gacc + nw, 1, 1);
    cpu->linear_bwd(B, in, out, cx, cW, cdy, cdx, cacc, cacc + nw, 1, 1);
    float *hdx = get(gpu, gdx, nx * 4), *rdx = get(cpu, cdx, nx * 4);
    float *hacc = get(gpu, gacc, (nw + out) * 4), *racc = get(cpu, cacc, (nw + out) * 4);
    snprintf(what, sizeof what, "linear_bwd relu_dx B=%d in=%d out=%d", B, in, out);
    expect_close(what, hdx, rdx, nx, 1e-4);
    for (size_t k = 0; k < nx; k++)
        ck_assert_msg(x[k] > 0.0f || hdx[k] == 0.0f, "%s: dx[%zu] = %g where x <= 0", what, k, hdx[k]);
    snprintf(what, sizeof what, "linear_bwd accumulate dW+db B=%d in=%d out=%d", B, in, out);
    expect_close(what, hacc, racc, nw + out, 1e-4);

    free(hy); free(hy2); free(ry); free(hdx); free(rdx); free(hacc); free(racc);
    gpu->free(gx); gpu->free(gW); gpu->free(gb); gpu->free(gy); gpu->free(gy2); gpu->free(gdy);
    gpu->free(gdx); gpu->free(gacc);
    cpu->free(cx); cpu->free(cW); cpu->free(cb); cpu->free(cy); cpu->free(cdy); cpu->free(cdx);
    cpu->free(cacc);
    free(x); free(W); free(b); free(dy); free(acc);
}
END_TEST

/* ------------------------------------------------------------ element-wise */

START_TEST(test_elementwise)
{
    const size_t sizes[] = {1, 31, 1000, 1000003};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        size_t n = sizes[s];
        float *y = rand_floats(n, -1.0f, 1.0f), *dy = rand_floats(n, -1.0f, 1.0f);
        float *gy = put(gpu, y, n * 4), *gdy = put(gpu, dy, n * 4);
        float *cy = put(cpu, y, n * 4), *cdy = put(cpu, dy, n * 4);

        gpu->relu_fwd(n, gy);
        cpu->relu_fwd(n, cy);
        gpu->relu_bwd(n, gy, gdy);
        cpu->relu_bwd(n, cy, cdy);
        float *a = get(gpu, gdy, n * 4), *b = get(cpu, cdy, n * 4);
        ck_assert_msg(memcmp(a, b, n * 4) == 0, "relu_bwd n=%zu differs from cpu", n);
        free(a); free(b);

        gpu->add(n, gy, gdy);
        cpu->add(n, cy, cdy);
        gpu->scale(n, gy, 0.37f);
        cpu->scale(n, cy, 0.37f);
        a = get(gpu, gy, n * 4);
        b = get(cpu, cy, n * 4);
        ck_assert_msg(memcmp(a, b, n * 4) == 0, "add/scale n=%zu differ from cpu", n);
        free(a); free(b);

        gpu->free(gy); gpu->free(gdy); cpu->free(cy); cpu->free(cdy);
        free(y); free(dy);
    }
}
END_TEST

/* n floats of gpu memory g and of cpu memory c hold the same bits */
static void expect_cpu_bits(const char *what, size_t n, const float *g, const float *c)
{
    float *a = get(gpu, g, n * 4), *b = get(cpu, c, n * 4);
    ck_assert_msg(memcmp(a, b, n * 4) == 0, "%s n=%zu differs from cpu", what, n);
    free(a);
    free(b);
}

/* ReLU6 bit for bit, over values that reach both ends (0 and 6 exactly) */
START_TEST(test_relu6)
{
    const size_t sizes[] = {1, 31, 1000003};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        size_t n = sizes[s];
        float *y = rand_floats(n, -3.0f, 9.0f), *dy = rand_floats(n, -1.0f, 1.0f);
        for (size_t i = 0; i < n; i += 7)
            y[i] = (i / 7) % 2 ? 6.0f : 0.0f;
        float *gy = put(gpu, y, n * 4), *gdy = put(gpu, dy, n * 4);
        float *cy = put(cpu, y, n * 4), *cdy = put(cpu, dy, n * 4);
        gpu->relu6_fwd(n, gy);
        cpu->relu6_fwd(n, cy);
        gpu->relu6_bwd(n, gy, gdy);
        cpu->relu6_bwd(n, cy, cdy);
        expect_cpu_bits("relu6_fwd", n, gy, cy);
        expect_cpu_bits("relu6_bwd", n, gdy, cdy);
        gpu->free(gy); gpu->free(gdy); cpu->free(cy); cpu->free(cdy);
        free(y); free(dy);
    }
}
END_TEST

/* dropout's draws bit for bit (its index0 past 2^32, and in place) */
START_TEST(test_dropout)
{
    const size_t sizes[] = {1, 31, 1000003};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        size_t n = sizes[s];
        float *x = rand_floats(n, -1.0f, 1.0f);
        float *gx = put(gpu, x, n * 4), *gy = put(gpu, NULL, n * 4);
        float *cx = put(cpu, x, n * 4), *cy = put(cpu, NULL, n * 4);
        const uint64_t index0 = ((uint64_t)5 << 32) + 17 * s;
        gpu->dropout(n, 42, 0x1234567890abcdefULL, index0, 5033165, 1.4285715f, gx, gy);
        cpu->dropout(n, 42, 0x1234567890abcdefULL, index0, 5033165, 1.4285715f, cx, cy);
        gpu->dropout(n, 43, 99, 0, 8388608, 2.0f, gx, gx);
        cpu->dropout(n, 43, 99, 0, 8388608, 2.0f, cx, cx);
        expect_cpu_bits("dropout", n, gy, cy);
        expect_cpu_bits("dropout in place", n, gx, cx);
        gpu->free(gx); gpu->free(gy); cpu->free(cx); cpu->free(cy);
        free(x);
    }
}
END_TEST

START_TEST(test_pixels)
{
    const size_t n = 3 * 784 + 5;
    uint8_t *px = malloc(n);
    ck_assert_ptr_nonnull(px);
    for (size_t i = 0; i < n; i++)
        px[i] = (uint8_t)(i < 256 ? i : next_u64());
    float *gx = put(gpu, NULL, n * 4), *cx = put(cpu, NULL, n * 4);
    gpu->pixels_to_input(1, 1, (int)n, px, NULL, gx);
    cpu->pixels_to_input(1, 1, (int)n, px, NULL, cx);
    /* a larger batch afterwards grows the staging buffer */
    size_t n2 = 64 * 3072;
    uint8_t *px2 = malloc(n2);
    ck_assert_ptr_nonnull(px2);
    for (size_t i = 0; i < n2; i++)
        px2[i] = (uint8_t)next_u64();
    float *gx2 = put(gpu, NULL, n2 * 4);
    gpu->pixels_to_input(64, 3, 1024, px2, NULL, gx2);
    float *a = get(gpu, gx, n * 4), *b = get(cpu, cx, n * 4), *a2 = get(gpu, gx2, n2 * 4);
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(a[i] == (float)px[i] / 255.0f && a[i] == b[i],
                      "pixels_to_input at %zu: gpu %.9g cpu %.9g", i, (double)a[i], (double)b[i]);
    for (size_t i = 0; i < n2; i++)
        ck_assert_msg(a2[i] == (float)px2[i] / 255.0f, "pixels_to_input (grown) at %zu", i);
    /* normalised (CIFAR-10 statistics), 64 images of 3x32x32: the same
     * bits as the CPU and as the formula */
    const float norm[6] = {0.4914f, 0.4822f, 0.4465f, 0.2470f, 0.2435f, 0.2616f};
    float *cx2 = put(cpu, NULL, n2 * 4);
    gpu->pixels_to_input(64, 3, 1024, px2, norm, gx2);
    cpu->pixels_to_input(64, 3, 1024, px2, norm, cx2);
    float *g3 = get(gpu, gx2, n2 * 4), *c3 = get(cpu, cx2, n2 * 4);
    for (size_t i = 0; i < n2; i++) {
        int c = (int)((i / 1024) % 3);
        float f = ((float)px2[i] / 255.0f - norm[c]) / norm[3 + c];
        ck_assert_msg(g3[i] == f && c3[i] == f, "normalised pixels_to_input at %zu: gpu %.9g "
                      "cpu %.9g formula %.9g", i, (double)g3[i], (double)c3[i], (double)f);
    }
    free(g3); free(c3); cpu->free(cx2);
    free(a); free(b); free(a2); free(px); free(px2);
    gpu->free(gx); gpu->free(gx2); cpu->free(cx);
}
END_TEST

/* ------------------------------------------------------------ SGD */

START_TEST(test_sgd)
{
    const size_t n = 100000;
    const float lr = 0.05f, mu = 0.9f, wd = 5e-4f;
    float *th = rand_floats(n, -1.0f, 1.0f);
    float *gth = put(gpu, th, n * 4), *gout = put(gpu, NULL, n * 4), *gbuf = put(gpu, NULL, n * 4);
    float *cth = put(cpu, th, n * 4), *cout = put(cpu, NULL, n * 4), *cbuf = put(cpu, NULL, n * 4);
    for (int step = 0; step < 5; step++) {
        float *g = rand_floats(n, -1.0f, 1.0f);
        float *gg = put(gpu, g, n * 4), *cg = put(cpu, g, n * 4);
        if (step % 2 == 0) { /* out of place, then copy back */
            gpu->sgd(n, gth, gout, gg, 1.0f, gbuf, lr, mu, wd, step == 0, 0);
            cpu->sgd(n, cth, cout, cg, 1.0f, cbuf, lr, mu, wd, step == 0, 0);
            gpu->copy(gth, gout, n * 4);
            cpu->copy(cth, cout, n * 4);
        } else { /* in place */
            gpu->sgd(n, gth, gth, gg, 1.0f, gbuf, lr, mu, wd, 0, 0);
            cpu->sgd(n, cth, cth, cg, 1.0f, cbuf, lr, mu, wd, 0, 0);
        }
        gpu->free(gg); cpu->free(cg); free(g);
    }
    float *a = get(gpu, gth, n * 4), *b = get(cpu, cth, n * 4);
    float *ab = get(gpu, gbuf, n * 4), *bb = get(cpu, cbuf, n * 4);
    expect_close("sgd theta after 5 steps", a, b, n, 1e-6);
    expect_close("sgd momentum buffer after 5 steps", ab, bb, n, 1e-6);
    free(a); free(b); free(ab); free(bb); free(th);
    gpu->free(gth); gpu->free(gout); gpu->free(gbuf);
    cpu->free(cth); cpu->free(cout); cpu->free(cbuf);
}
END_TEST

/* AdamW (backend.h adamw): 5 updates with cdp_optim_step_at's scalars, in
 * place, out of place and over the gradient, with the gradient scale and
 * zero_g; theta and both moments as the CPU's. */
START_TEST(test_adamw)
{
    const size_t n = 100003;
    cdp_optim o = cdp_optim_sgd(1e-3, 0, 0.01, 0, 0.5, 10);
    o.kind = CDP_OPTIM_ADAMW;
    float *th = rand_floats(n, -1.0f, 1.0f);
    float *gth = put(gpu, th, n * 4), *gout = put(gpu, NULL, n * 4), *gst = put(gpu, NULL, 2 * n * 4);
    float *cth = put(cpu, th, n * 4), *cout = put(cpu, NULL, n * 4), *cst = put(cpu, NULL, 2 * n * 4);
    for (int c = 0; c < 5; c++) {
        const cdp_optim_step st = cdp_optim_step_at(&o, c);
        float *g = rand_floats(n, -1.0f, 1.0f);
        float *gg = put(gpu, g, n * 4), *cg = put(cpu, g, n * 4);
        if (c % 3 == 0) {        /* out of place, zero_g, then copy back */
            gpu->adamw(n, gth, gout, gg, 0.25f, gst, gst + n, &st.adamw, st.first, 1);
            cpu->adamw(n, cth, cout, cg, 0.25f, cst, cst + n, &st.adamw, st.first, 1);
            gpu->copy(gth, gout, n * 4);
            cpu->copy(cth, cout, n * 4);
            float *z = get(gpu, gg, n * 4);
            for (size_t k = 0; k < n; k++)
                ck_assert_msg(z[k] == 0.0f && !signbit(z[k]), "adamw zero_g: g[%zu] = %g", k, z[k]);
            free(z);
        } else if (c % 3 == 1) { /* in place */
            gpu->adamw(n, gth, gth, gg, 0.25f, gst, gst + n, &st.adamw, st.first, 0);
            cpu->adamw(n, cth, cth, cg, 0.25f, cst, cst + n, &st.adamw, st.first, 0);
        } else {                 /* over the gradient */
            gpu->adamw(n, gth, gg, gg, 0.25f, gst, gst + n, &st.adamw, st.first, 0);
            cpu->adamw(n, cth, cg, cg, 0.25f, cst, cst + n, &st.adamw, st.first, 0);
            gpu->copy(gth, gg, n * 4);
            cpu->copy(cth, cg, n * 4);
        }
        gpu->free(gg); cpu->free(cg); free(g);
    }
    float *a = get(gpu, gth, n * 4), *b = get(cpu, cth, n * 4);
    float *as = get(gpu, gst, 2 * n * 4), *bs = get(cpu, cst, 2 * n * 4);
    expect_close("adamw theta after 5 updates", a, b, n, 1e-6);
    expect_close("adamw exp_avg after 5 updates", as, bs, n, 1e-6);
    expect_close("adamw exp_avg_sq after 5 updates", as + n, bs + n, n, 1e-6);
    free(a); free(b); free(as); free(bs); free(th);
    gpu->free(gth); gpu->free(gout); gpu->free(gst);
    cpu->free(cth); cpu->free(cout); cpu->free(cst);
}
END_TEST

/* The other forms the executor uses: a gradient scale (1/N), no weight
 * decay (cdp_run's default), no momentum buffer, the new version written
 * over the gradient, and zero_g (the gradient comes back as +0). */
START_TEST(test_sgd_forms)
{
    const size_t n = 70001;
    float *th = rand_floats(n, -1.0f, 1.0f), *g = rand_floats(n, -1.0f, 1.0f);
    float *m = rand_floats(n, -0.1f, 0.1f);
    for (int form = 0; form < 4; form++) {
        const float wd = form == 1 ? 0.0f : 5e-4f;
        const int nobuf = form == 2, over_g = form == 3, zero_g = form == 0;
        float *gth = put(gpu, th, n * 4), *gg = put(gpu, g, n * 4), *gm = put(gpu, m, n * 4);
        float *gout = over_g ? gg : put(gpu, NULL, n * 4);
        float *cth = put(cpu, th, n * 4), *cg = put(cpu, g, n * 4), *cm = put(cpu, m, n * 4);
        float *cout = over_g ? cg : put(cpu, NULL, n * 4);
        gpu->sgd(n, gth, gout, gg, 0.25f, nobuf ? NULL : gm, 0.05f, 0.9f, wd, 0, zero_g);
        cpu->sgd(n, cth, cout, cg, 0.25f, nobuf ? NULL : cm, 0.05f, 0.9f, wd, 0, zero_g);
        float *a = get(gpu, gout, n * 4), *b = get(cpu, cout, n * 4);
        char what[64];
        snprintf(what, sizeof what, "sgd form %d: theta", form);
        expect_close(what, a, b, n, 1e-6);
        free(a); free(b);
        if (!nobuf) {
            a = get(gpu, gm, n * 4);
            b = get(cpu, cm, n * 4);
            snprintf(what, sizeof what, "sgd form %d: momentum", form);
            expect_close(what, a, b, n, 1e-6);
            free(a); free(b);
        }
        if (zero_g) {
            a = get(gpu, gg, n * 4);
            for (size_t k = 0; k < n; k++)
                ck_assert_msg(a[k] == 0.0f && !signbit(a[k]), "sgd zero_g: g[%zu] = %g", k, a[k]);
            free(a);
        }
        gpu->free(gth); gpu->free(gg); gpu->free(gm);
        cpu->free(cth); cpu->free(cg); cpu->free(cm);
        if (!over_g) {
            gpu->free(gout);
            cpu->free(cout);
        }
    }
    free(th); free(g); free(m);
}
END_TEST

/* ------------------------------------------------------------ cross-entropy */

static const int xshapes[][2] = { /* B, C */
    {1, 2}, {5, 10}, {64, 10}, {100, 37}, {512, 10}, {33, 1000},
};
#define NXSHAPES ((int)(sizeof xshapes / sizeof xshapes[0]))

START_TEST(test_xent)
{
    int B = xshapes[_i][0], C = xshapes[_i][1];
    size_t n = (size_t)B * C;
    float *lg = rand_floats(n, -8.0f, 8.0f);
    int32_t *lab = malloc((size_t)B * sizeof *lab);
    ck_assert_ptr_nonnull(lab);
    for (int r = 0; r < B; r++)
        lab[r] = (int32_t)(next_u64() % (uint64_t)C);
    /* make some rows correct so that the count is not trivially 0 */
    for (int r = 0; r < B; r += 3)
        lg[(size_t)r * C + lab[r]] = 20.0f;
    double zero2[2] = {0.0, 0.0};
    char what[96];

    float *gl = put(gpu, lg, n * 4), *gl2 = put(gpu, lg, n * 4);
    int32_t *glab = put(gpu, lab, (size_t)B * 4);
    double *gst = put(gpu, zero2, sizeof zero2), *gst2 = put(gpu, zero2, sizeof zero2);
    float *cl = put(cpu, lg, n * 4);
    int32_t *clab = put(cpu, lab, (size_t)B * 4);
    double *cst = put(cpu, zero2, sizeof zero2);

    gpu->xent(B, C, gl, glab, gst);
    gpu->xent(B, C, gl2, glab, gst2);
    cpu->xent(B, C, cl, clab, cst);
    float *a = get(gpu, gl, n * 4), *a2 = get(gpu, gl2, n * 4), *b = get(cpu, cl, n * 4);
    double *sa = get(gpu, gst, sizeof zero2), *sa2 = get(gpu, gst2, sizeof zero2);
    double *sb = get(cpu, cst, sizeof zero2);

    snprintf(what, sizeof what, "xent dlogits B=%d C=%d", B, C);
    expect_close(what, a, b, n, 1e-5);
    expect_same_bits(what, a, a2, n * 4);
    snprintf(what, sizeof what, "xent stats B=%d C=%d", B, C);
    expect_same_bits(what, sa, sa2, sizeof zero2);
    ck_assert_msg(fabs(sa[0] - sb[0]) <= 1e-5 * fabs(sb[0]) + 1e-6,
                  "%s: loss sum gpu %.12g cpu %.12g", what, sa[0], sb[0]);
    ck_assert_msg(sa[1] == sb[1], "%s: correct count gpu %g cpu %g", what, sa[1], sb[1]);
    ck_assert(sa[1] >= (double)((B + 2) / 3));

    /* stats accumulate */
    gpu->to_device(gl, lg, n * 4);
    gpu->xent(B, C, gl, glab, gst);
    free(sa);
    sa = get(gpu, gst, sizeof zero2);
    ck_assert_msg(sa[0] == 2.0 * sa2[0] && sa[1] == 2.0 * sa2[1],
                  "%s: stats do not accumulate", what);

    free(a); free(a2); free(b); free(sa); free(sa2); free(sb);
    gpu->free(gl); gpu->free(gl2); gpu->free(glab); gpu->free(gst); gpu->free(gst2);
    cpu->free(cl); cpu->free(clab); cpu->free(cst);
    free(lg); free(lab);
}
END_TEST

/* Ties: the first index of the maximum is the prediction. */
START_TEST(test_xent_ties)
{
    enum { B = 4, C = 40 };
    float lg[B * C];
    int32_t lab[B] = {0, 1, 39, 33};
    for (int i = 0; i < B * C; i++)
        lg[i] = 1.0f;
    lg[3 * C + 2] = 5.0f; /* row 3: maxima at 2 and 33, label 33 -> wrong */
    lg[3 * C + 33] = 5.0f;
    /* row 0: all equal, label 0 -> correct; row 1: label 1 -> wrong;
     * row 2: label 39 -> wrong */
    double zero2[2] = {0.0, 0.0};
    float *gl = put(gpu, lg, sizeof lg);
    int32_t *glab = put(gpu, lab, sizeof lab);
    double *gst = put(gpu, zero2, sizeof zero2);
    float *cl = put(cpu, lg, sizeof lg);
    int32_t *clab = put(cpu, lab, sizeof lab);
    double *cst = put(cpu, zero2, sizeof zero2);
    gpu->xent(B, C, gl, glab, gst);
    cpu->xent(B, C, cl, clab, cst);
    double *sa = get(gpu, gst, sizeof zero2), *sb = get(cpu, cst, sizeof zero2);
    ck_assert_msg(sa[1] == 1.0, "gpu correct count with ties: %g (expected 1)", sa[1]);
    ck_assert_msg(sb[1] == 1.0, "cpu correct count with ties: %g (expected 1)", sb[1]);
    double l0 = log((double)C); /* uniform rows */
    ck_assert_msg(fabs(sa[0] - sb[0]) <= 1e-5 * fabs(sb[0]), "loss gpu %.12g cpu %.12g",
                  sa[0], sb[0]);
    ck_assert(sa[0] > 3.0 * l0 * 0.999);
    free(sa); free(sb);
    gpu->free(gl); gpu->free(glab); gpu->free(gst);
    cpu->free(cl); cpu->free(clab); cpu->free(cst);
}
END_TEST

/* ------------------------------------------------------------ a small MLP step */

/* Forward, loss, backward and SGD of a 2-layer MLP for 20 steps on both
 * backends: parameters stay within relative 1e-4. */
START_TEST(test_training_steps)
{
    enum { B = 32, D = 64, H = 48, K = 10, STEPS = 20 };
    const cdp_backend *be[2] = {gpu, cpu};
    float *W1 = rand_floats(H * D, -0.125f, 0.125f), *b1 = rand_floats(H, -0.125f, 0.125f);
    float *W2 = rand_floats(K * H, -0.14f, 0.14f), *b2 = rand_floats(K, -0.14f, 0.14f);
    uint8_t *px = malloc((size_t)STEPS * B * D);
    int32_t *lab = malloc((size_t)STEPS * B * sizeof *lab);
    ck_assert(px && lab);
    for (size_t i = 0; i < (size_t)STEPS * B * D; i++)
        px[i] = (uint8_t)next_u64();
    for (int i = 0; i < STEPS * B; i++)
        lab[i] = (int32_t)(next_u64() % K);
    float *res[2][4];
    double st[2][2];
    for (int k = 0; k < 2; k++) {
        const cdp_backend *e = be[k];
        float *w1 = put(e, W1, H * D * 4), *c1 = put(e, b1, H * 4);
        float *w2 = put(e, W2, K * H * 4), *c2 = put(e, b2, K * 4);
        float *m1 = put(e, NULL, H * D * 4), *n1 = put(e, NULL, H * 4);
        float *m2 = put(e, NULL, K * H * 4), *n2 = put(e, NULL, K * 4);
        float *g1 = put(e, NULL, H * D * 4), *h1 = put(e, NULL, H * 4);
        float *g2 = put(e, NULL, K * H * 4), *h2 = put(e, NULL, K * 4);
        float *x = put(e, NULL, B * D * 4), *a1 = put(e, NULL, B * H * 4);
        float *a2 = put(e, NULL, B * K * 4), *da1 = put(e, NULL, B * H * 4);
        int32_t *y = put(e, NULL, B * 4);
        double z[2] = {0, 0};
        double *stats = put(e, z, sizeof z);
        for (int s = 0; s < STEPS; s++) {
            e->pixels_to_input(B, 1, D, px + (size_t)s * B * D, NULL, x);
            e->to_device(y, lab + (size_t)s * B, B * 4);
            e->linear_fwd(B, D, H, x, w1, c1, a1, 0);
            e->relu_fwd((size_t)B * H, a1);
            e->linear_fwd(B, H, K, a1, w2, c2, a2, 0);
            e->xent(B, K, a2, y, stats);
            e->linear_bwd(B, H, K, a1, w2, a2, da1, g2, h2, 0, 0);
            e->relu_bwd((size_t)B * H, a1, da1);
            e->linear_bwd(B, D, H, x, w1, da1, NULL, g1, h1, 0, 0);
            e->sgd(H * D, w1, w1, g1, 1.0f, m1, 0.1f, 0.9f, 1e-4f, s == 0, 0);
            e->sgd(H, c1, c1, h1, 1.0f, n1, 0.1f, 0.9f, 1e-4f, s == 0, 0);
            e->sgd(K * H, w2, w2, g2, 1.0f, m2, 0.1f, 0.9f, 1e-4f, s == 0, 0);
            e->sgd(K, c2, c2, h2, 1.0f, n2, 0.1f, 0.9f, 1e-4f, s == 0, 0);
        }
        res[k][0] = get(e, w1, H * D * 4);
        res[k][1] = get(e, c1, H * 4);
        res[k][2] = get(e, w2, K * H * 4);
        res[k][3] = get(e, c2, K * 4);
        double *hs = get(e, stats, sizeof z);
        st[k][0] = hs[0];
        st[k][1] = hs[1];
        free(hs);
        void *all[] = {w1, c1, w2, c2, m1, n1, m2, n2, g1, h1, g2, h2, x, a1, a2, da1, y, stats};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
            e->free(all[i]);
    }
    expect_close("20 steps: W1", res[0][0], res[1][0], H * D, 1e-4);
    expect_close("20 steps: b1", res[0][1], res[1][1], H, 1e-4);
    expect_close("20 steps: W2", res[0][2], res[1][2], K * H, 1e-4);
    expect_close("20 steps: b2", res[0][3], res[1][3], K, 1e-4);
    ck_assert_msg(fabs(st[0][0] - st[1][0]) <= 1e-4 * fabs(st[1][0]),
                  "20 steps: loss sum gpu %.10g cpu %.10g", st[0][0], st[1][0]);
    for (int k = 0; k < 2; k++)
        for (int j = 0; j < 4; j++)
            free(res[k][j]);
    free(W1); free(b1); free(W2); free(b2); free(px); free(lab);
}
END_TEST

/* ------------------------------------------------------------ image kernels */

/* A host array on a backend: put() of a copy, handed back by fetch(). */
static float *fetch(const cdp_backend *be, const void *d, size_t n)
{
    return get(be, d, n * sizeof(float));
}

/* Inputs quantised to multiples of 1/4 in [-2, 2): pooling windows with ties */
static float *rand_ties(size_t n)
{
    float *v = rand_floats(n, -2.0f, 2.0f);
    for (size_t i = 0; i < n; i++)
        v[i] = floorf(v[i] * 4.0f) / 4.0f;
    return v;
}

static const int cshapes[][8] = { /* B, Cin, H, W, Cout, k, stride, pad */
    {1, 1, 1, 1, 1, 1, 1, 0},    {2, 3, 8, 8, 4, 3, 1, 1},     {3, 5, 9, 7, 6, 3, 2, 1},
    {4, 16, 8, 8, 8, 1, 1, 0},   {2, 8, 7, 7, 4, 1, 2, 0},     {5, 3, 32, 32, 16, 7, 2, 3},
    {1, 2, 5, 5, 3, 5, 1, 2},    {2, 4, 6, 10, 5, 3, 3, 0},
    /* several chunks of samples (the workspace cap): 3x3 and 1x1 */
    {20, 64, 64, 64, 64, 3, 1, 1}, {40, 128, 64, 64, 128, 1, 1, 0},
};
#define NCSHAPES ((int)(sizeof cshapes / sizeof cshapes[0]))

static cdp_conv_shape conv_shape_of(int i)
{
    const int *c = cshapes[i];
    cdp_conv_shape s = {c[0], c[1], c[2], c[3], c[4], c[5], c[5], c[6], c[7], 0, 0, 1};
    s.OH = (s.H + 2 * s.pad - s.KH) / s.stride + 1;
    s.OW = (s.W + 2 * s.pad - s.KW) / s.stride + 1;
    return s;
}

/* A workspace of ws_floats(s) floats filled with garbage (not zeros: a
 * kernel must not depend on what it finds there). */
static float *conv_ws(const cdp_backend *be, const cdp_conv_shape *s)
{
    size_t n = be->conv2d_ws_floats(s);
    float *h = rand_floats(n + 16, -1e3f, 1e3f);
    float *d = put(be, h, (n + 16) * sizeof(float));
    free(h);
    return d;
}

/* The convolution path switch of the CUDA backend module (src/gpu/
 * conv_cudnn.cu).  A CUDA build links the module (Makefile.am) and refers to
 * the switch strongly: with weak references only, a linker that drops the
 * libraries a program does not need (--as-needed, Ubuntu's default) left
 * the module out and the switch read as missing (H200, 2026-11-29).  A build
 * without CUDA has neither symbol: weak there, and test_gpu skips. */
#ifdef CDP_TEST_LINKS_CUDA_MODULE
extern int cdp_cuda_conv_cudnn;
extern const int cdp_cuda_have_cudnn;
#else
extern int cdp_cuda_conv_cudnn __attribute__((weak));
extern const int cdp_cuda_have_cudnn __attribute__((weak));
#endif

/* conv2d on the GPU path set (path: its name in the messages) against the
 * CPU: forward, backward, dx NULL, accumulate */
static void check_conv2d(const cdp_conv_shape s, const char *path)
{
    const size_t nx = (size_t)s.B * s.Cin * s.H * s.W, ny = (size_t)s.B * s.Cout * s.OH * s.OW;
    const size_t nw = cdp_conv_weight_count(&s), nb = (size_t)s.Cout;
    float *x = rand_floats(nx, -1.0f, 1.0f), *w = rand_floats(nw, -0.5f, 0.5f);
    float *b = rand_floats(nb, -0.5f, 0.5f), *dy = rand_floats(ny, -1.0f, 1.0f);
    float *acc = rand_floats(nw + nb, -0.5f, 0.5f);
    char what[128];
    ck_assert(gpu->conv2d_fwd && gpu->conv2d_bwd && gpu->conv2d_ws_floats);

    float *gx = put(gpu, x, nx * 4), *gw = put(gpu, w, nw * 4), *gb = put(gpu, b, nb * 4);
    float *gdy = put(gpu, dy, ny * 4), *gy = put(gpu, NULL, ny * 4), *gy2 = put(gpu, NULL, ny * 4);
    float *gdx = put(gpu, NULL, nx * 4), *gdx2 = put(gpu, NULL, nx * 4);
    float *gg = put(gpu, NULL, (nw + nb) * 4), *gg2 = put(gpu, NULL, (nw + nb) * 4);
    float *gacc = put(gpu, acc, (nw + nb) * 4), *gws = conv_ws(gpu, &s);
    float *cx = put(cpu, x, nx * 4), *cw = put(cpu, w, nw * 4), *cb = put(cpu, b, nb * 4);
    float *cdy = put(cpu, dy, ny * 4), *cy = put(cpu, NULL, ny * 4), *cdx = put(cpu, NULL, nx * 4);
    float *cg = put(cpu, NULL, (nw + nb) * 4), *cacc = put(cpu, acc, (nw + nb) * 4);
    float *cws = conv_ws(cpu, &s);

    for (int bias = 0; bias < 2; bias++) {
        snprintf(what, sizeof what, "%s conv2d_fwd%s B=%d Cin=%d %dx%d Cout=%d k=%d s=%d p=%d",
                 path, bias ? " (bias)" : "", s.B, s.Cin, s.H, s.W, s.Cout, s.KH, s.stride,
                 s.pad);
        gpu->conv2d_fwd(&s, gx, gw, bias ? gb : NULL, gy, gws);
        gpu->conv2d_fwd(&s, gx, gw, bias ? gb : NULL, gy2, gws);
        cpu->conv2d_fwd(&s, cx, cw, bias ? cb : NULL, cy, cws);
        float *hy = fetch(gpu, gy, ny), *hy2 = fetch(gpu, gy2, ny), *ry = fetch(cpu, cy, ny);
        expect_close(what, hy, ry, ny, 1e-5);
        expect_same_bits(what, hy, hy2, ny * 4);
        free(hy); free(hy2); free(ry);
    }

    /* backward, overwriting: dw then db in one buffer, as the layer has them */
    const double rtol_w = float_sum_rtol(1e-5, (double)s.B * s.OH * s.OW);  /* dw, db */
    gpu->conv2d_bwd(&s, gx, gw, gdy, gdx, gg, gg + nw, 0, gws);
    gpu->conv2d_bwd(&s, gx, gw, gdy, gdx2, gg2, gg2 + nw, 0, gws);
    cpu->conv2d_bwd(&s, cx, cw, cdy, cdx, cg, cg + nw, 0, cws);
    float *hdx = fetch(gpu, gdx, nx), *hdx2 = fetch(gpu, gdx2, nx), *rdx = fetch(cpu, cdx, nx);
    float *hg = fetch(gpu, gg, nw + nb), *hg2 = fetch(gpu, gg2, nw + nb);
    float *rg = fetch(cpu, cg, nw + nb);
    snprintf(what, sizeof what, "%s conv2d_bwd dx B=%d Cin=%d %dx%d Cout=%d k=%d s=%d p=%d",
             path, s.B, s.Cin, s.H, s.W, s.Cout, s.KH, s.stride, s.pad);
    expect_close(what, hdx, rdx, nx, 1e-5);
    expect_same_bits(what, hdx, hdx2, nx * 4);
    snprintf(what, sizeof what, "%s conv2d_bwd dw B=%d Cin=%d %dx%d Cout=%d k=%d s=%d p=%d",
             path, s.B, s.Cin, s.H, s.W, s.Cout, s.KH, s.stride, s.pad);
    expect_close(what, hg, rg, nw, rtol_w);
    expect_same_bits(what, hg, hg2, nw * 4);
    snprintf(what, sizeof what, "%s conv2d_bwd db B=%d Cin=%d %dx%d Cout=%d k=%d s=%d p=%d",
             path, s.B, s.Cin, s.H, s.W, s.Cout, s.KH, s.stride, s.pad);
    expect_close(what, hg + nw, rg + nw, nb, rtol_w);
    expect_same_bits(what, hg + nw, hg2 + nw, nb * 4);

    /* dx NULL: the same dw, db */
    gpu->conv2d_bwd(&s, gx, gw, gdy, NULL, gg2, gg2 + nw, 0, gws);
    free(hg2);
    hg2 = fetch(gpu, gg2, nw + nb);
    snprintf(what, sizeof what, "%s conv2d_bwd (dx NULL) B=%d Cin=%d Cout=%d k=%d", path, s.B,
             s.Cin, s.Cout, s.KH);
    expect_same_bits(what, hg, hg2, (nw + nb) * 4);

    /* accumulate: close to the CPU's, and the bits of the separate result
     * added with add() (the contract) */
    gpu->conv2d_bwd(&s, gx, gw, gdy, gdx2, gacc, gacc + nw, 1, gws);
    cpu->conv2d_bwd(&s, cx, cw, cdy, cdx, cacc, cacc + nw, 1, cws);
    float *hacc = fetch(gpu, gacc, nw + nb), *racc = fetch(cpu, cacc, nw + nb);
    snprintf(what, sizeof what, "%s conv2d_bwd accumulate B=%d Cin=%d Cout=%d k=%d", path,
             s.B, s.Cin, s.Cout, s.KH);
    expect_close(what, hacc, racc, nw + nb, rtol_w);
    float *gsep = put(gpu, acc, (nw + nb) * 4);
    gpu->add(nw + nb, gsep, gg);
    float *hsep = fetch(gpu, gsep, nw + nb);
    ck_assert_msg(memcmp(hacc, hsep, (nw + nb) * 4) == 0,
                  "%s: not the bits of the separate gradient added with add()", what);

    free(hdx); free(hdx2); free(rdx); free(hg); free(hg2); free(rg); free(hacc); free(racc);
    free(hsep);
    void *gall[] = {gx, gw, gb, gdy, gy, gy2, gdx, gdx2, gg, gg2, gacc, gws, gsep};
    for (size_t i = 0; i < sizeof gall / sizeof gall[0]; i++)
        gpu->free(gall[i]);
    void *call[] = {cx, cw, cb, cdy, cy, cdx, cg, cacc, cws};
    for (size_t i = 0; i < sizeof call / sizeof call[0]; i++)
        cpu->free(call[i]);
    free(x); free(w); free(b); free(dy); free(acc);
}

START_TEST(test_conv2d)
{
    const cdp_conv_shape s = conv_shape_of(_i);
    ck_assert_msg(&cdp_cuda_conv_cudnn != NULL && &cdp_cuda_have_cudnn != NULL,
                  "the CUDA backend's conv path switch is missing");
    cdp_cuda_conv_cudnn = 0;
    check_conv2d(s, "im2col");
    if (cdp_cuda_have_cudnn) {
        cdp_cuda_conv_cudnn = 1;
        check_conv2d(s, "cuDNN");
    }
    cdp_cuda_conv_cudnn = -1;   /* back to CDP_CUDNN's choice */
}
END_TEST

/* grouped and depthwise: B, Cin, H, W, Cout, k, stride, pad, groups */
static const int gshapes[][9] = {
    {2, 16, 8, 8, 16, 3, 1, 1, 16}, {3, 6, 9, 7, 6, 3, 2, 1, 6}, {2, 8, 6, 6, 16, 3, 1, 1, 8},
    {2, 12, 7, 7, 24, 3, 1, 1, 4},  {4, 32, 4, 4, 64, 1, 1, 0, 2}, {1, 9, 11, 5, 6, 5, 2, 2, 3},
    {16, 96, 28, 28, 96, 3, 1, 1, 96},   /* MobileNetV2's depthwise size */
};
#define NGSHAPES ((int)(sizeof gshapes / sizeof gshapes[0]))

/* conv2d with groups: on the direct path (conv_grouped.cu) the CPU's bits
 * for y, dx and dw, and on both paths check_conv2d's comparisons */
START_TEST(test_conv2d_grouped)
{
    const int *c = gshapes[_i];
    cdp_conv_shape s = {c[0], c[1], c[2], c[3], c[4], c[5], c[5], c[6], c[7], 0, 0, c[8]};
    s.OH = (s.H + 2 * s.pad - s.KH) / s.stride + 1;
    s.OW = (s.W + 2 * s.pad - s.KW) / s.stride + 1;
    ck_assert_msg(&cdp_cuda_conv_cudnn != NULL && &cdp_cuda_have_cudnn != NULL,
                  "the CUDA backend's conv path switch is missing");
    cdp_cuda_conv_cudnn = 0;
    check_conv2d(s, "grouped direct");
    const size_t nx = (size_t)s.B * s.Cin * s.H * s.W, ny = (size_t)s.B * s.Cout * s.OH * s.OW;
    const size_t nw = cdp_conv_weight_count(&s);
    float *x = rand_floats(nx, -1.0f, 1.0f), *w = rand_floats(nw, -0.5f, 0.5f);
    float *b = rand_floats((size_t)s.Cout, -0.5f, 0.5f), *dy = rand_floats(ny, -1.0f, 1.0f);
    const cdp_backend *be[2] = {gpu, cpu};
    float *out[2][3];
    for (int k = 0; k < 2; k++) {
        /* on backend k: the inputs, then y and the gradients */
        float *xk = put(be[k], x, nx * 4), *wk = put(be[k], w, nw * 4);
        float *bk = put(be[k], b, (size_t)s.Cout * 4), *dyk = put(be[k], dy, ny * 4);
        float *yk = put(be[k], NULL, ny * 4), *dxk = put(be[k], NULL, nx * 4);
        float *dwk = put(be[k], NULL, nw * 4), *dbk = put(be[k], NULL, (size_t)s.Cout * 4);
        float *ws = conv_ws(be[k], &s);
        be[k]->conv2d_fwd(&s, xk, wk, bk, yk, ws);
        be[k]->conv2d_bwd(&s, xk, wk, dyk, dxk, dwk, dbk, 0, ws);
        out[k][0] = fetch(be[k], yk, ny);
        out[k][1] = fetch(be[k], dxk, nx);
        out[k][2] = fetch(be[k], dwk, nw);
        void *all[] = {xk, wk, bk, dyk, yk, dxk, dwk, dbk, ws};
        for (size_t q = 0; q < sizeof all / sizeof *all; q++)
            be[k]->free(all[q]);
    }
    ck_assert_msg(memcmp(out[0][0], out[1][0], ny * 4) == 0, "grouped direct y: not the CPU's bits");
    ck_assert_msg(memcmp(out[0][1], out[1][1], nx * 4) == 0, "grouped direct dx: not the CPU's bits");
    ck_assert_msg(memcmp(out[0][2], out[1][2], nw * 4) == 0, "grouped direct dw: not the CPU's bits");
    for (int k = 0; k < 2; k++)
        for (int q = 0; q < 3; q++)
            free(out[k][q]);
    free(x); free(w); free(b); free(dy);
    if (cdp_cuda_have_cudnn) {
        cdp_cuda_conv_cudnn = 1;
        check_conv2d(s, "cuDNN grouped");
    }
    cdp_cuda_conv_cudnn = -1;   /* back to CDP_CUDNN's choice */
}
END_TEST

/* max |a - b| <= rtol * max |b| over doubles */
static void expect_close_d(const char *what, const double *a, const double *b, size_t n,
                           double rtol)
{
    double scale = 1e-300, worst = 0.0;
    size_t at = 0;
    for (size_t i = 0; i < n; i++)
        scale = fmax(scale, fabs(b[i]));
    for (size_t i = 0; i < n; i++) {
        double d = fabs(a[i] - b[i]);
        if (!(d <= worst)) {
            worst = d;
            at = i;
        }
    }
    ck_assert_msg(worst <= rtol * scale, "%s: gpu and cpu differ by %.3g at [%zu] (gpu %.17g, "
                  "cpu %.17g), scale %.3g", what, worst, at, a[at], b[at], scale);
}

/* The GPU cuts a channel's B*HW values into slices of about 4096
 * (kernels_image.cu, bn_slices): the last three shapes give 4 uneven
 * slices, 49 even ones (resnet50's layer1 at B=64) and the cap of 256. */
static const int bshapes[][3] = { /* B, C, HW */
    {1, 1, 1}, {2, 3, 5}, {8, 16, 49}, {32, 64, 64}, {4, 7, 1000}, {16, 256, 16}, {3, 2, 4099},
    {64, 8, 3136}, {2, 2, 600001},
};
#define NBSHAPES ((int)(sizeof bshapes / sizeof bshapes[0]))

START_TEST(test_batchnorm)
{
    const int B = bshapes[_i][0], C = bshapes[_i][1], HW = bshapes[_i][2];
    const size_t n = (size_t)B * C * HW;
    const float eps = 1e-5f;
    float *x = rand_floats(n, -1.5f, 2.5f), *dy = rand_floats(n, -1.0f, 1.0f);
    float *ga = rand_floats((size_t)C, 0.5f, 1.5f), *be = rand_floats((size_t)C, -0.5f, 0.5f);
    float *rm = rand_floats((size_t)C, -0.5f, 0.5f), *rv = rand_floats((size_t)C, 0.2f, 2.0f);
    float *acc = rand_floats(2 * (size_t)C, -0.5f, 0.5f);
    char what[96];
    ck_assert(gpu->bn_fwd_train && gpu->bn_fwd_eval && gpu->bn_bwd);

    float *gx = put(gpu, x, n * 4), *gdy = put(gpu, dy, n * 4), *gga = put(gpu, ga, C * 4);
    float *gbe = put(gpu, be, C * 4), *grm = put(gpu, rm, C * 4), *grv = put(gpu, rv, C * 4);
    float *gy = put(gpu, NULL, n * 4), *gy2 = put(gpu, NULL, n * 4);
    float *gsave = put(gpu, NULL, 2 * C * 4), *gsave2 = put(gpu, NULL, 2 * C * 4);
    double *gst = put(gpu, NULL, 2 * C * 8), *gst2 = put(gpu, NULL, 2 * C * 8);
    float *gdx = put(gpu, NULL, n * 4), *gdx2 = put(gpu, NULL, n * 4);
    float *gdg = put(gpu, NULL, 2 * C * 4), *gdg2 = put(gpu, NULL, 2 * C * 4);
    float *gacc = put(gpu, acc, 2 * C * 4);
    float *cx = put(cpu, x, n * 4), *cdy = put(cpu, dy, n * 4), *cga = put(cpu, ga, C * 4);
    float *cbe = put(cpu, be, C * 4), *crm = put(cpu, rm, C * 4), *crv = put(cpu, rv, C * 4);
    float *cy = put(cpu, NULL, n * 4), *csave = put(cpu, NULL, 2 * C * 4);
    double *cst = put(cpu, NULL, 2 * C * 8);
    float *cdx = put(cpu, NULL, n * 4), *cdg = put(cpu, NULL, 2 * C * 4);
    float *cacc = put(cpu, acc, 2 * C * 4);

    gpu->bn_fwd_train(B, C, HW, gx, gga, gbe, eps, gy, gsave, gst);
    gpu->bn_fwd_train(B, C, HW, gx, gga, gbe, eps, gy2, gsave2, gst2);
    cpu->bn_fwd_train(B, C, HW, cx, cga, cbe, eps, cy, csave, cst);
    float *hy = fetch(gpu, gy, n), *hy2 = fetch(gpu, gy2, n), *ry = fetch(cpu, cy, n);
    float *hs = fetch(gpu, gsave, 2 * C), *hs2 = fetch(gpu, gsave2, 2 * C);
    float *rs = fetch(cpu, csave, 2 * C);
    double *hst = get(gpu, gst, 2 * C * 8), *hst2 = get(gpu, gst2, 2 * C * 8);
    double *rst = get(cpu, cst, 2 * C * 8);
    snprintf(what, sizeof what, "bn_fwd_train y B=%d C=%d HW=%d", B, C, HW);
    expect_close(what, hy, ry, n, 1e-5);
    expect_same_bits(what, hy, hy2, n * 4);
    snprintf(what, sizeof what, "bn_fwd_train save B=%d C=%d HW=%d", B, C, HW);
    expect_close(what, hs, rs, C, 1e-5);             /* the means */
    expect_close(what, hs + C, rs + C, C, 1e-5);     /* the invstds */
    expect_same_bits(what, hs, hs2, 2 * C * 4);
    snprintf(what, sizeof what, "bn_fwd_train stats B=%d C=%d HW=%d", B, C, HW);
    expect_close_d(what, hst, rst, C, 1e-12);        /* double sums in another order */
    expect_close_d(what, hst + C, rst + C, C, 1e-12);
    expect_same_bits(what, hst, hst2, 2 * C * 8);

    gpu->bn_fwd_eval(B, C, HW, gx, gga, gbe, grm, grv, eps, gy);
    cpu->bn_fwd_eval(B, C, HW, cx, cga, cbe, crm, crv, eps, cy);
    free(hy); free(ry);
    hy = fetch(gpu, gy, n);
    ry = fetch(cpu, cy, n);
    snprintf(what, sizeof what, "bn_fwd_eval B=%d C=%d HW=%d", B, C, HW);
    expect_close(what, hy, ry, n, 1e-5);

    /* backward on the CPU's saved statistics, on both (the same input) */
    gpu->to_device(gsave, rs, 2 * C * 4);
    gpu->bn_bwd(B, C, HW, gx, gga, gsave, gdy, gdx, gdg, gdg + C, 0);
    gpu->bn_bwd(B, C, HW, gx, gga, gsave, gdy, gdx2, gdg2, gdg2 + C, 0);
    cpu->bn_bwd(B, C, HW, cx, cga, csave, cdy, cdx, cdg, cdg + C, 0);
    float *hdx = fetch(gpu, gdx, n), *hdx2 = fetch(gpu, gdx2, n), *rdx = fetch(cpu, cdx, n);
    float *hdg = fetch(gpu, gdg, 2 * C), *hdg2 = fetch(gpu, gdg2, 2 * C);
    float *rdg = fetch(cpu, cdg, 2 * C);
    snprintf(what, sizeof what, "bn_bwd dx B=%d C=%d HW=%d", B, C, HW);
    expect_close(what, hdx, rdx, n, 1e-5);
    expect_same_bits(what, hdx, hdx2, n * 4);
    snprintf(what, sizeof what, "bn_bwd dgamma B=%d C=%d HW=%d", B, C, HW);
    expect_close(what, hdg, rdg, C, 1e-5);
    expect_same_bits(what, hdg, hdg2, 2 * C * 4);
    snprintf(what, sizeof what, "bn_bwd dbeta B=%d C=%d HW=%d", B, C, HW);
    expect_close(what, hdg + C, rdg + C, C, 1e-5);

    /* dx over dy, and accumulate onto dgamma, dbeta */
    gpu->bn_bwd(B, C, HW, gx, gga, gsave, gdy, gdy, gacc, gacc + C, 1);
    cpu->bn_bwd(B, C, HW, cx, cga, csave, cdy, cdy, cacc, cacc + C, 1);
    float *hin = fetch(gpu, gdy, n), *hacc = fetch(gpu, gacc, 2 * C);
    float *racc = fetch(cpu, cacc, 2 * C);
    snprintf(what, sizeof what, "bn_bwd dx over dy B=%d C=%d HW=%d", B, C, HW);
    ck_assert_msg(memcmp(hin, hdx, n * 4) == 0, "%s: differs from dx in its own buffer", what);
    snprintf(what, sizeof what, "bn_bwd accumulate B=%d C=%d HW=%d", B, C, HW);
    expect_close(what, hacc, racc, 2 * C, 1e-5);
    for (int c = 0; c < 2 * C; c++)
        ck_assert_msg(hacc[c] == acc[c] + hdg[c], "%s: [%d] is not acc + the gradient", what, c);

    free(hy); free(hy2); free(ry); free(hs); free(hs2); free(rs); free(hst); free(hst2);
    free(rst); free(hdx); free(hdx2); free(rdx); free(hdg); free(hdg2); free(rdg); free(hin);
    free(hacc); free(racc);
    void *gall[] = {gx, gdy, gga, gbe, grm, grv, gy, gy2, gsave, gsave2, gst, gst2, gdx, gdx2,
                    gdg, gdg2, gacc};
    for (size_t i = 0; i < sizeof gall / sizeof gall[0]; i++)
        gpu->free(gall[i]);
    void *call[] = {cx, cdy, cga, cbe, crm, crv, cy, csave, cst, cdx, cdg, cacc};
    for (size_t i = 0; i < sizeof call / sizeof call[0]; i++)
        cpu->free(call[i]);
    free(x); free(dy); free(ga); free(be); free(rm); free(rv); free(acc);
}
END_TEST

/* The step's running statistics from N workers' (mean, M2) slots */
START_TEST(test_bn_running)
{
    enum { C = 37, N = 3 };
    const size_t stride = 2 * C + 5;
    const double n = 98.0;
    double *st = malloc(N * stride * sizeof *st);
    ck_assert_ptr_nonnull(st);
    for (size_t i = 0; i < N * stride; i++) {
        double u = (double)(next_u64() >> 11) / 9007199254740992.0;
        st[i] = (i % stride) < C ? u * 4.0 - 2.0 : u * 300.0;
    }
    float *rm = rand_floats(C, -0.5f, 0.5f), *rv = rand_floats(C, 0.2f, 2.0f);
    const float m = 0.1f;
    double *gst = put(gpu, st, N * stride * 8), *cst = put(cpu, st, N * stride * 8);
    float *grm = put(gpu, rm, C * 4), *grv = put(gpu, rv, C * 4);
    float *gom = put(gpu, NULL, C * 4), *gov = put(gpu, NULL, C * 4);
    float *crm = put(cpu, rm, C * 4), *crv = put(cpu, rv, C * 4);
    float *com = put(cpu, NULL, C * 4), *cov = put(cpu, NULL, C * 4);
    ck_assert_ptr_nonnull(gpu->bn_running_update);
    gpu->bn_running_update(C, N, n, gst, stride, grm, grv, m, gom, gov);
    cpu->bn_running_update(C, N, n, cst, stride, crm, crv, m, com, cov);
    float *hm = fetch(gpu, gom, C), *hv = fetch(gpu, gov, C);
    float *rmo = fetch(cpu, com, C), *rvo = fetch(cpu, cov, C);
    expect_close("bn_running_update mean", hm, rmo, C, 1e-5);
    expect_close("bn_running_update var", hv, rvo, C, 1e-5);
    /* in place (outputs over the inputs): the same bits */
    gpu->bn_running_update(C, N, n, gst, stride, grm, grv, m, grm, grv);
    float *hm2 = fetch(gpu, grm, C), *hv2 = fetch(gpu, grv, C);
    ck_assert_msg(memcmp(hm, hm2, C * 4) == 0 && memcmp(hv, hv2, C * 4) == 0,
                  "bn_running_update in place differs");
    /* one worker: its own statistics */
    gpu->bn_running_update(C, 1, n, gst, stride, gom, gov, m, gom, gov);
    cpu->bn_running_update(C, 1, n, cst, stride, com, cov, m, com, cov);
    free(hm); free(hv); free(rmo); free(rvo);
    hm = fetch(gpu, gom, C);
    hv = fetch(gpu, gov, C);
    rmo = fetch(cpu, com, C);
    rvo = fetch(cpu, cov, C);
    expect_close("bn_running_update N=1 mean", hm, rmo, C, 1e-5);
    expect_close("bn_running_update N=1 var", hv, rvo, C, 1e-5);
    free(hm); free(hv); free(rmo); free(rvo); free(hm2); free(hv2);
    gpu->free(gst); gpu->free(grm); gpu->free(grv); gpu->free(gom); gpu->free(gov);
    cpu->free(cst); cpu->free(crm); cpu->free(crv); cpu->free(com); cpu->free(cov);
    free(st); free(rm); free(rv);
}
END_TEST

START_TEST(test_f64_pack)
{
    const size_t n = 10007;
    double *v = malloc(n * sizeof *v);
    ck_assert_ptr_nonnull(v);
    const double special[] = {0.0, -0.0, 1.0, -1.0, INFINITY, -INFINITY, NAN, 4.9e-324,
                              -2.2250738585072014e-308, 1.7976931348623157e308};
    const size_t ns = sizeof special / sizeof special[0];
    for (size_t i = 0; i < n; i++) {
        uint64_t u = next_u64();   /* any bit pattern, NaN payloads included */
        if (i < ns)
            v[i] = special[i];
        else if (i % 2)
            memcpy(&v[i], &u, sizeof u);
        else
            v[i] = (double)(int64_t)u / 3.0e7;
    }
    ck_assert(gpu->f64_pack && gpu->f64_unpack);
    double *gv = put(gpu, v, n * 8), *gback = put(gpu, NULL, n * 8);
    float *gp = put(gpu, NULL, 3 * n * 4), *cp = put(cpu, NULL, 3 * n * 4);
    double *cv = put(cpu, v, n * 8);
    gpu->f64_pack(n, gv, gp);
    cpu->f64_pack(n, cv, cp);
    float *hp = fetch(gpu, gp, 3 * n), *rp = fetch(cpu, cp, 3 * n);
    ck_assert_msg(memcmp(hp, rp, 3 * n * 4) == 0, "f64_pack: gpu and cpu bits differ");
    gpu->f64_unpack(n, gp, gback);
    double *hb = get(gpu, gback, n * 8);
    ck_assert_msg(memcmp(hb, v, n * 8) == 0, "f64_unpack(f64_pack(v)) is not v bit for bit");
    /* unpack of a sum with +0 (what the gradient reductions do): intact */
    float *gz = put(gpu, NULL, 3 * n * 4);
    gpu->add(3 * n, gp, gz);
    gpu->f64_unpack(n, gp, gback);
    free(hb);
    hb = get(gpu, gback, n * 8);
    ck_assert_msg(memcmp(hb, v, n * 8) == 0, "f64_unpack after adding +0: bits changed");
    free(hp); free(rp); free(hb);
    gpu->free(gv); gpu->free(gback); gpu->free(gp); gpu->free(gz);
    cpu->free(cp); cpu->free(cv);
    free(v);
}
END_TEST

/* nonfinite: the CPU's answer, on arrays with none, one and many values
 * that are not finite, over several blocks of threads */
START_TEST(test_nonfinite)
{
    const size_t m = 70001, n = 3 * m;
    float *v = malloc(n * sizeof *v);
    ck_assert_ptr_nonnull(v);
    for (size_t i = 0; i < n; i++)
        v[i] = (float)((double)(next_u64() >> 40) / (double)(1ULL << 24)) - 0.5f;
    float *gv = put(gpu, NULL, n * 4);
    uint64_t *gout = put(gpu, NULL, 16), hout[2], rout[2];
    const size_t at[][2] = {{0, 0}, {2 * m + 5, 1}, {m + 60000, 1}, {123, 2}, {2 * m + 7, 2}};
    for (size_t c = 0; c < sizeof at / sizeof at[0]; c++) {
        if (c) v[at[c][0]] = at[c][1] == 2 ? NAN : -INFINITY;
        gpu->to_device(gv, v, n * 4);
        gpu->nonfinite(n, gv, m, gout);
        gpu->to_host(hout, gout, sizeof hout);
        cpu->nonfinite(n, v, m, rout);
        ck_assert_msg(hout[0] == rout[0] && hout[1] == rout[1],
                      "nonfinite after %zu changes: gpu %llu %llu, cpu %llu %llu", c,
                      (unsigned long long)hout[0], (unsigned long long)hout[1],
                      (unsigned long long)rout[0], (unsigned long long)rout[1]);
    }
    ck_assert_msg(rout[0] == 2 && rout[1] == 5, "cpu: %llu %llu, expected 2 5",
                  (unsigned long long)rout[0], (unsigned long long)rout[1]);
    gpu->free(gv); gpu->free(gout);
    free(v);
}
END_TEST

static const int pshapes[][7] = { /* B, C, H, W, k, stride, pad */
    {2, 3, 8, 8, 2, 2, 0},   {2, 4, 7, 9, 3, 2, 1},   {3, 5, 112, 112, 3, 2, 1},
    {1, 1, 5, 5, 3, 1, 1},   {2, 2, 6, 6, 3, 3, 0},   {4, 64, 32, 32, 3, 2, 1},
};
#define NPSHAPES ((int)(sizeof pshapes / sizeof pshapes[0]))

START_TEST(test_maxpool)
{
    const int *p = pshapes[_i];
    const int B = p[0], C = p[1], H = p[2], W = p[3], k = p[4], st = p[5], pad = p[6];
    const int OH = (H + 2 * pad - k) / st + 1, OW = (W + 2 * pad - k) / st + 1;
    const size_t nx = (size_t)B * C * H * W, ny = (size_t)B * C * OH * OW;
    float *x = rand_ties(nx), *dy = rand_floats(ny, -1.0f, 1.0f);
    if (_i == 0) /* NaN wins at once */
        x[9] = x[40] = NAN;
    char what[96];
    snprintf(what, sizeof what, "maxpool B=%d C=%d %dx%d k=%d s=%d p=%d", B, C, H, W, k, st, pad);
    ck_assert(gpu->maxpool_fwd && gpu->maxpool_bwd);

    float *gx = put(gpu, x, nx * 4), *gy = put(gpu, NULL, ny * 4), *gdy = put(gpu, dy, ny * 4);
    int32_t *gi = put(gpu, NULL, ny * 4), *gi2 = put(gpu, NULL, ny * 4);
    float *gy2 = put(gpu, NULL, ny * 4), *gdx = put(gpu, x, nx * 4), *gdx2 = put(gpu, NULL, nx * 4);
    float *cx = put(cpu, x, nx * 4), *cy = put(cpu, NULL, ny * 4), *cdy = put(cpu, dy, ny * 4);
    int32_t *ci = put(cpu, NULL, ny * 4);
    float *cdx = put(cpu, NULL, nx * 4);

    gpu->maxpool_fwd(B, C, H, W, k, st, pad, OH, OW, gx, gy, gi);
    gpu->maxpool_fwd(B, C, H, W, k, st, pad, OH, OW, gx, gy2, gi2);
    cpu->maxpool_fwd(B, C, H, W, k, st, pad, OH, OW, cx, cy, ci);
    float *hy = fetch(gpu, gy, ny), *hy2 = fetch(gpu, gy2, ny), *ry = fetch(cpu, cy, ny);
    int32_t *hi = get(gpu, gi, ny * 4), *hi2 = get(gpu, gi2, ny * 4), *ri = get(cpu, ci, ny * 4);
    ck_assert_msg(memcmp(hy, ry, ny * 4) == 0, "%s: y differs from the cpu", what);
    ck_assert_msg(memcmp(hi, ri, ny * 4) == 0, "%s: idx differs from the cpu", what);
    expect_same_bits(what, hy, hy2, ny * 4);
    expect_same_bits(what, hi, hi2, ny * 4);

    /* backward from the CPU's idx on both; dx starts as garbage (x) */
    gpu->to_device(gi, ri, ny * 4);
    gpu->maxpool_bwd(B, C, H, W, OH, OW, gi, gdy, gdx);
    gpu->maxpool_bwd(B, C, H, W, OH, OW, gi, gdy, gdx2);
    cpu->maxpool_bwd(B, C, H, W, OH, OW, ci, cdy, cdx);
    float *hdx = fetch(gpu, gdx, nx), *hdx2 = fetch(gpu, gdx2, nx), *rdx = fetch(cpu, cdx, nx);
    ck_assert_msg(memcmp(hdx, rdx, nx * 4) == 0, "%s: dx differs from the cpu", what);
    expect_same_bits(what, hdx, hdx2, nx * 4);

    free(hy); free(hy2); free(ry); free(hi); free(hi2); free(ri); free(hdx); free(hdx2);
    free(rdx);
    gpu->free(gx); gpu->free(gy); gpu->free(gdy); gpu->free(gi); gpu->free(gi2); gpu->free(gy2);
    gpu->free(gdx); gpu->free(gdx2);
    cpu->free(cx); cpu->free(cy); cpu->free(cdy); cpu->free(ci); cpu->free(cdx);
    free(x); free(dy);
}
END_TEST

START_TEST(test_avgpool)
{
    const int shp[][3] = {{2, 3, 1}, {4, 16, 49}, {8, 64, 64}, {3, 5, 1000}, {128, 512, 16}};
    for (size_t t = 0; t < sizeof shp / sizeof shp[0]; t++) {
        const int B = shp[t][0], C = shp[t][1], HW = shp[t][2];
        const size_t nx = (size_t)B * C * HW, ny = (size_t)B * C;
        float *x = rand_floats(nx, -1.0f, 1.0f), *dy = rand_floats(ny, -1.0f, 1.0f);
        float *gx = put(gpu, x, nx * 4), *gy = put(gpu, NULL, ny * 4), *gdy = put(gpu, dy, ny * 4);
        float *gdx = put(gpu, NULL, nx * 4);
        float *cx = put(cpu, x, nx * 4), *cy = put(cpu, NULL, ny * 4), *cdy = put(cpu, dy, ny * 4);
        float *cdx = put(cpu, NULL, nx * 4);
        ck_assert(gpu->avgpool_fwd && gpu->avgpool_bwd);
        gpu->avgpool_fwd(B, C, HW, gx, gy);
        cpu->avgpool_fwd(B, C, HW, cx, cy);
        gpu->avgpool_bwd(B, C, HW, gdy, gdx);
        cpu->avgpool_bwd(B, C, HW, cdy, cdx);
        float *hy = fetch(gpu, gy, ny), *ry = fetch(cpu, cy, ny);
        float *hdx = fetch(gpu, gdx, nx), *rdx = fetch(cpu, cdx, nx);
        ck_assert_msg(memcmp(hy, ry, ny * 4) == 0, "avgpool_fwd B=%d C=%d HW=%d differs", B, C, HW);
        ck_assert_msg(memcmp(hdx, rdx, nx * 4) == 0, "avgpool_bwd B=%d C=%d HW=%d differs", B, C,
                      HW);
        free(hy); free(ry); free(hdx); free(rdx);
        gpu->free(gx); gpu->free(gy); gpu->free(gdy); gpu->free(gdx);
        cpu->free(cx); cpu->free(cy); cpu->free(cdy); cpu->free(cdx);
        free(x); free(dy);
    }
}
END_TEST

/* adaptive average pooling: the CPU kernel's bits, overlapping windows and
 * an output larger than the image (1x1 to 7x7) */
START_TEST(test_adaptive_avgpool)
{
    const int shp[][5] = {{2, 3, 1, 1, 7}, {4, 16, 5, 5, 3}, {2, 8, 7, 9, 7}, {3, 64, 8, 8, 2}};
    for (size_t t = 0; t < sizeof shp / sizeof shp[0]; t++) {
        const int B = shp[t][0], C = shp[t][1], H = shp[t][2], W = shp[t][3], o = shp[t][4];
        const size_t nx = (size_t)B * C * H * W, ny = (size_t)B * C * o * o;
        float *x = rand_floats(nx, -1.0f, 1.0f), *dy = rand_floats(ny, -1.0f, 1.0f);
        float *gx = put(gpu, x, nx * 4), *gy = put(gpu, NULL, ny * 4), *gdy = put(gpu, dy, ny * 4);
        float *gdx = put(gpu, NULL, nx * 4);
        float *cx = put(cpu, x, nx * 4), *cy = put(cpu, NULL, ny * 4), *cdy = put(cpu, dy, ny * 4);
        float *cdx = put(cpu, NULL, nx * 4);
        gpu->adaptive_avgpool_fwd(B, C, H, W, o, o, gx, gy);
        cpu->adaptive_avgpool_fwd(B, C, H, W, o, o, cx, cy);
        gpu->adaptive_avgpool_bwd(B, C, H, W, o, o, gdy, gdx);
        cpu->adaptive_avgpool_bwd(B, C, H, W, o, o, cdy, cdx);
        float *hy = fetch(gpu, gy, ny), *ry = fetch(cpu, cy, ny);
        float *hdx = fetch(gpu, gdx, nx), *rdx = fetch(cpu, cdx, nx);
        ck_assert_msg(memcmp(hy, ry, ny * 4) == 0, "adaptive_avgpool_fwd shape %zu differs", t);
        ck_assert_msg(memcmp(hdx, rdx, nx * 4) == 0, "adaptive_avgpool_bwd shape %zu differs", t);
        free(hy); free(ry); free(hdx); free(rdx);
        gpu->free(gx); gpu->free(gy); gpu->free(gdy); gpu->free(gdx);
        cpu->free(cx); cpu->free(cy); cpu->free(cdy); cpu->free(cdx);
        free(x); free(dy);
    }
}
END_TEST

START_TEST(test_add3)
{
    const size_t sizes[] = {1, 31, 1000, 1000003};
    ck_assert_ptr_nonnull(gpu->add3);
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        size_t n = sizes[s];
        float *a = rand_floats(n, -1.0f, 1.0f), *b = rand_floats(n, -1.0f, 1.0f);
        float *ga = put(gpu, a, n * 4), *gb = put(gpu, b, n * 4), *gy = put(gpu, NULL, n * 4);
        float *ca = put(cpu, a, n * 4), *cb = put(cpu, b, n * 4), *cy = put(cpu, NULL, n * 4);
        gpu->add3(n, ga, gb, gy);
        cpu->add3(n, ca, cb, cy);
        float *hy = fetch(gpu, gy, n), *ry = fetch(cpu, cy, n);
        ck_assert_msg(memcmp(hy, ry, n * 4) == 0, "add3 n=%zu differs from the cpu", n);
        gpu->add3(n, ga, gb, ga);   /* y over a */
        gpu->add3(n, gy, gb, gb);   /* y over b: (a + b) + b */
        cpu->add3(n, cy, cb, cb);
        float *ha = fetch(gpu, ga, n), *hb = fetch(gpu, gb, n), *rb = fetch(cpu, cb, n);
        ck_assert_msg(memcmp(ha, ry, n * 4) == 0, "add3 n=%zu over a differs", n);
        ck_assert_msg(memcmp(hb, rb, n * 4) == 0, "add3 n=%zu over b differs", n);
        free(hy); free(ry); free(ha); free(hb); free(rb);
        gpu->free(ga); gpu->free(gb); gpu->free(gy);
        cpu->free(ca); cpu->free(cb); cpu->free(cy);
        free(a); free(b);
    }
}
END_TEST

/* ------------------------------------------------------------ transformer kernels */

/* A GPU and a CPU copy of the same host data */
struct pair {
    float *g, *c;
};

static struct pair put2(const float *host, size_t n)
{
    struct pair p = {put(gpu, host, n * 4), put(cpu, host, n * 4)};
    return p;
}

static void free2(struct pair p)
{
    gpu->free(p.g);
    cpu->free(p.c);
}

static void expect_bits(const char *what, const float *a, const float *b, size_t n)
{
    size_t k = 0;
    while (k < n && memcmp(&a[k], &b[k], 4) == 0)
        k++;
    ck_assert_msg(k == n, "%s: gpu and cpu bits differ at [%zu] (gpu %.9g, cpu %.9g)", what, k,
                  k < n ? (double)a[k] : 0.0, k < n ? (double)b[k] : 0.0);
}

static const int gbshapes[][4] = { /* M, N, K, batch */
    {1, 1, 1, 1}, {3, 5, 4, 3}, {50, 50, 64, 12}, {17, 130, 33, 4}, {197, 197, 64, 6},
    {64, 197, 197, 3}};
#define NGBSHAPES ((int)(sizeof gbshapes / sizeof gbshapes[0]))

START_TEST(test_gemm_batched)
{
    const int M = gbshapes[_i][0], N = gbshapes[_i][1], K = gbshapes[_i][2];
    const int batch = gbshapes[_i][3];
    ck_assert_ptr_nonnull(gpu->gemm_batched);
    for (int tA = 0; tA < 2; tA++)
        for (int tB = 0; tB < 2; tB++)
            for (int bz = 0; bz < 2; bz++) {
                const int lda = (tA ? M : K) + 3, ldb = (tB ? K : N) + 5, ldc = N + 2;
                const size_t sA = (size_t)(tA ? K : M) * lda + 7;
                const size_t sB = (size_t)(tB ? N : K) * ldb + 1, sC = (size_t)M * ldc + 11;
                const size_t nA = sA * batch, nB = sB * batch, nC = sC * batch;
                float *A = rand_floats(nA, -1.0f, 1.0f), *Bm = rand_floats(nB, -1.0f, 1.0f);
                float *C = rand_floats(nC, -1.0f, 1.0f);
                if (bz)
                    for (size_t k = 0; k < nC; k++)
                        C[k] = NAN;
                const float beta = bz ? 0.0f : 1.0f;
                struct pair a = put2(A, nA), b = put2(Bm, nB), c = put2(C, nC), c2 = put2(C, nC);
                gpu->gemm_batched(tA, tB, M, N, K, 0.125f, a.g, lda, sA, b.g, ldb, sB, beta, c.g,
                                  ldc, sC, batch);
                gpu->gemm_batched(tA, tB, M, N, K, 0.125f, a.g, lda, sA, b.g, ldb, sB, beta,
                                  c2.g, ldc, sC, batch);
                cpu->gemm_batched(tA, tB, M, N, K, 0.125f, a.c, lda, sA, b.c, ldb, sB, beta, c.c,
                                  ldc, sC, batch);
                float *hc = fetch(gpu, c.g, nC), *hc2 = fetch(gpu, c2.g, nC);
                float *rc = fetch(cpu, c.c, nC);
                char what[128];
                snprintf(what, sizeof what, "gemm_batched M=%d N=%d K=%d batch=%d tA=%d tB=%d "
                         "beta=%g", M, N, K, batch, tA, tB, (double)beta);
                /* the padding stays as it was (NaN where beta is 0): compare
                 * the matrices, then the rest bit for bit */
                float *gm = malloc((size_t)batch * M * N * 4), *cm = malloc((size_t)batch * M * N * 4);
                ck_assert(gm && cm);
                for (size_t k = 0; k < nC; k++) {
                    size_t bb = k / sC, o = k % sC, i = o / ldc, j = o % ldc;
                    if (bb < (size_t)batch && i < (size_t)M && j < (size_t)N) {
                        gm[(bb * M + i) * N + j] = hc[k];
                        cm[(bb * M + i) * N + j] = rc[k];
                    } else {
                        ck_assert_msg(memcmp(&hc[k], &C[k], 4) == 0, "%s: padding [%zu] changed",
                                      what, k);
                    }
                }
                expect_close(what, gm, cm, (size_t)batch * M * N, 1e-4);
                expect_same_bits(what, hc, hc2, nC * 4);
                free(gm); free(cm); free(hc); free(hc2); free(rc);
                free2(a); free2(b); free2(c); free2(c2);
                free(A); free(Bm); free(C);
            }
    /* K = 0: C = beta * C, +0 over NaN with beta 0 */
    float h[6] = {1, 2, NAN, 4, 5, 6};
    float *g = put(gpu, h, sizeof h);
    gpu->gemm_batched(0, 0, 2, 3, 0, 1.0f, g, 1, 0, g, 3, 0, 0.5f, g, 3, 0, 1);
    float *r = fetch(gpu, g, 6);
    ck_assert(r[0] == 0.5f && r[1] == 1.0f && isnan(r[2]) && r[5] == 3.0f);
    free(r);
    gpu->gemm_batched(0, 0, 2, 3, 0, 1.0f, g, 1, 0, g, 3, 0, 0.0f, g, 3, 0, 1);
    r = fetch(gpu, g, 6);
    for (int k = 0; k < 6; k++)
        ck_assert(r[k] == 0.0f && !signbit(r[k]));
    free(r);
    gpu->free(g);
}
END_TEST

static const int rshapes[][2] = { /* rows, columns */
    {1, 1}, {5, 3}, {64, 50}, {7, 1000}, {3200, 192}, {9600, 50}};
#define NRSHAPES ((int)(sizeof rshapes / sizeof rshapes[0]))

START_TEST(test_softmax)
{
    const int R = rshapes[_i][0], N = rshapes[_i][1];
    const size_t n = (size_t)R * N;
    float *x = rand_floats(n, -8.0f, 8.0f), *dp = rand_floats(n, -1.0f, 1.0f);
    if (n > 4)
        x[3] = -INFINITY;   /* a masked score */
    char what[96];
    ck_assert(gpu->softmax_fwd && gpu->softmax_bwd);
    struct pair p = put2(x, n), p2 = put2(x, n), d = put2(dp, n), d2 = put2(dp, n);
    gpu->softmax_fwd(R, N, p.g);
    gpu->softmax_fwd(R, N, p2.g);
    cpu->softmax_fwd(R, N, p.c);
    float *hp = fetch(gpu, p.g, n), *hp2 = fetch(gpu, p2.g, n), *rp = fetch(cpu, p.c, n);
    snprintf(what, sizeof what, "softmax_fwd R=%d N=%d", R, N);
    expect_close(what, hp, rp, n, float_sum_rtol(1e-6, N));
    expect_same_bits(what, hp, hp2, n * 4);
    /* backward on the CPU's P on both */
    gpu->to_device(p.g, rp, n * 4);
    gpu->softmax_bwd(R, N, 0.125f, p.g, d.g);
    gpu->softmax_bwd(R, N, 0.125f, p.g, d2.g);
    cpu->softmax_bwd(R, N, 0.125f, p.c, d.c);
    float *hd = fetch(gpu, d.g, n), *hd2 = fetch(gpu, d2.g, n), *rd = fetch(cpu, d.c, n);
    snprintf(what, sizeof what, "softmax_bwd R=%d N=%d", R, N);
    expect_close(what, hd, rd, n, 1e-5);
    expect_same_bits(what, hd, hd2, n * 4);
    free(hp); free(hp2); free(rp); free(hd); free(hd2); free(rd);
    free2(p); free2(p2); free2(d); free2(d2);
    free(x); free(dp);
}
END_TEST

/* LayerNorm: the CPU's operations with the sums in double in another
 * order (one warp a row, 32 row lanes a column): within 1e-6, and the same
 * bits on a second call */
START_TEST(test_layernorm)
{
    const int R = rshapes[_i][0], D = rshapes[_i][1];
    const size_t n = (size_t)R * D;
    float *x = rand_floats(n, -1.0f, 3.0f), *dy = rand_floats(n, -1.0f, 1.0f);
    float *ga = rand_floats((size_t)D, 0.5f, 1.5f), *be = rand_floats((size_t)D, -0.5f, 0.5f);
    float *acc = rand_floats(2 * (size_t)D, -0.5f, 0.5f);
    char what[96];
    ck_assert(gpu->ln_fwd && gpu->ln_bwd);
    struct pair px = put2(x, n), pdy = put2(dy, n), pga = put2(ga, D), pbe = put2(be, D);
    struct pair py = put2(NULL, n), ps = put2(NULL, 2 * (size_t)R), pdx = put2(NULL, n);
    struct pair pg = put2(NULL, 2 * (size_t)D), pacc = put2(acc, 2 * (size_t)D);
    struct pair py2 = put2(NULL, n), ps2 = put2(NULL, 2 * (size_t)R), pdx2 = put2(NULL, n);
    struct pair pg2 = put2(NULL, 2 * (size_t)D);
    gpu->ln_fwd(R, D, px.g, pga.g, pbe.g, 1e-6f, py.g, ps.g);
    gpu->ln_fwd(R, D, px.g, pga.g, pbe.g, 1e-6f, py2.g, ps2.g);
    cpu->ln_fwd(R, D, px.c, pga.c, pbe.c, 1e-6f, py.c, ps.c);
    float *hy = fetch(gpu, py.g, n), *ry = fetch(cpu, py.c, n), *hy2 = fetch(gpu, py2.g, n);
    float *hs = fetch(gpu, ps.g, 2 * (size_t)R), *rs = fetch(cpu, ps.c, 2 * (size_t)R);
    float *hs2 = fetch(gpu, ps2.g, 2 * (size_t)R);
    snprintf(what, sizeof what, "ln_fwd y R=%d D=%d", R, D);
    expect_close(what, hy, ry, n, 1e-6);
    expect_same_bits(what, hy, hy2, n * 4);
    snprintf(what, sizeof what, "ln_fwd save R=%d D=%d", R, D);
    expect_close(what, hs, rs, (size_t)R, 1e-6);              /* the means */
    expect_close(what, hs + R, rs + R, (size_t)R, 1e-6);      /* the 1/std */
    expect_same_bits(what, hs, hs2, 2 * (size_t)R * 4);
    /* backward on the CPU's saved statistics on both */
    gpu->to_device(ps.g, rs, 2 * (size_t)R * 4);
    gpu->ln_bwd(R, D, px.g, pga.g, ps.g, pdy.g, pdx.g, pg.g, pg.g + D, 0);
    gpu->ln_bwd(R, D, px.g, pga.g, ps.g, pdy.g, pdx2.g, pg2.g, pg2.g + D, 0);
    cpu->ln_bwd(R, D, px.c, pga.c, ps.c, pdy.c, pdx.c, pg.c, pg.c + D, 0);
    float *hdx = fetch(gpu, pdx.g, n), *rdx = fetch(cpu, pdx.c, n), *hdx2 = fetch(gpu, pdx2.g, n);
    float *hg = fetch(gpu, pg.g, 2 * (size_t)D), *rg = fetch(cpu, pg.c, 2 * (size_t)D);
    float *hg2 = fetch(gpu, pg2.g, 2 * (size_t)D);
    snprintf(what, sizeof what, "ln_bwd dx R=%d D=%d", R, D);
    expect_close(what, hdx, rdx, n, 1e-6);
    expect_same_bits(what, hdx, hdx2, n * 4);
    snprintf(what, sizeof what, "ln_bwd dgamma R=%d D=%d", R, D);
    expect_close(what, hg, rg, (size_t)D, 1e-6);
    snprintf(what, sizeof what, "ln_bwd dbeta R=%d D=%d", R, D);
    expect_close(what, hg + D, rg + D, (size_t)D, 1e-6);
    expect_same_bits(what, hg, hg2, 2 * (size_t)D * 4);
    /* dx over dy, accumulate onto dgamma, dbeta */
    gpu->ln_bwd(R, D, px.g, pga.g, ps.g, pdy.g, pdy.g, pacc.g, pacc.g + D, 1);
    float *hin = fetch(gpu, pdy.g, n), *hacc = fetch(gpu, pacc.g, 2 * (size_t)D);
    snprintf(what, sizeof what, "ln_bwd dx over dy R=%d D=%d", R, D);
    expect_same_bits(what, hin, hdx, n * 4);
    for (int c = 0; c < 2 * D; c++)
        ck_assert_msg(hacc[c] == acc[c] + hg[c], "ln_bwd accumulate [%d] is not acc + the "
                      "gradient", c);
    free(hy); free(ry); free(hs); free(rs); free(hdx); free(rdx); free(hg); free(rg); free(hin);
    free(hacc); free(hy2); free(hs2); free(hdx2); free(hg2);
    free2(px); free2(pdy); free2(pga); free2(pbe); free2(py); free2(ps); free2(pdx); free2(pg);
    free2(pacc); free2(py2); free2(ps2); free2(pdx2); free2(pg2);
    free(x); free(dy); free(ga); free(be); free(acc);
}
END_TEST

START_TEST(test_gelu)
{
    const size_t sizes[] = {1, 1000, 1000003};
    ck_assert(gpu->gelu_fwd && gpu->gelu_bwd);
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        size_t n = sizes[s];
        float *x = rand_floats(n, -7.0f, 7.0f), *dy = rand_floats(n, -1.0f, 1.0f);
        x[0] = 1.0f;
        struct pair px = put2(x, n), pdy = put2(dy, n), py = put2(NULL, n), pdx = put2(NULL, n);
        gpu->gelu_fwd(n, px.g, py.g);
        cpu->gelu_fwd(n, px.c, py.c);
        gpu->gelu_bwd(n, px.g, pdy.g, pdx.g);
        cpu->gelu_bwd(n, px.c, pdy.c, pdx.c);
        float *hy = fetch(gpu, py.g, n), *ry = fetch(cpu, py.c, n);
        float *hdx = fetch(gpu, pdx.g, n), *rdx = fetch(cpu, pdx.c, n);
        ck_assert_msg(hy[0] == (float)0.8413447460685429, "gpu gelu(1) = %.9g", (double)hy[0]);
        expect_close("gelu_fwd", hy, ry, n, 1e-6);
        expect_close("gelu_bwd", hdx, rdx, n, 1e-6);
        /* in place: the same bits as into a buffer of their own */
        gpu->gelu_bwd(n, px.g, pdy.g, pdy.g);
        gpu->gelu_fwd(n, px.g, px.g);
        float *hy2 = fetch(gpu, px.g, n), *hdx2 = fetch(gpu, pdy.g, n);
        expect_same_bits("gelu_fwd in place", hy2, hy, n * 4);
        expect_same_bits("gelu_bwd in place", hdx2, hdx, n * 4);
        free(hy); free(ry); free(hdx); free(rdx); free(hy2); free(hdx2);
        free2(px); free2(pdy); free2(py); free2(pdx);
        free(x); free(dy);
    }
}
END_TEST

/* the tokens and the row helpers move or add floats in the CPU's order:
 * the same bits; the column sums (the class token's gradient, sum_rows) run
 * in double in another order: within 1e-5, and the same bits twice */
START_TEST(test_tokens_rows)
{
    const int tshapes[][3] = {{1, 1, 1}, {2, 3, 4}, {64, 192, 49}, {3, 7, 0}};
    ck_assert(gpu->tokens_fwd && gpu->tokens_bwd && gpu->add_rows && gpu->sum_rows &&
              gpu->copy_rows);
    for (size_t t = 0; t < sizeof tshapes / sizeof tshapes[0]; t++) {
        const int B = tshapes[t][0], D = tshapes[t][1], np = tshapes[t][2], T = np + 1;
        const size_t nx = (size_t)B * D * np, ny = (size_t)B * T * D;
        float *x = rand_floats(nx + 1, -1.0f, 1.0f), *cls = rand_floats(D, -1.0f, 1.0f);
        float *dy = rand_floats(ny, -1.0f, 1.0f), *acc = rand_floats(D, -1.0f, 1.0f);
        struct pair px = put2(x, nx + 1), pc = put2(cls, D), py = put2(NULL, ny);
        struct pair pdy = put2(dy, ny), pdx = put2(NULL, nx + 1), pdc = put2(NULL, D);
        struct pair pacc = put2(acc, D);
        char what[96];
        gpu->tokens_fwd(B, D, np, px.g, pc.g, py.g);
        cpu->tokens_fwd(B, D, np, px.c, pc.c, py.c);
        float *hy = fetch(gpu, py.g, ny), *ry = fetch(cpu, py.c, ny);
        snprintf(what, sizeof what, "tokens_fwd B=%d D=%d n=%d", B, D, np);
        expect_bits(what, hy, ry, ny);
        gpu->tokens_bwd(B, D, np, pdy.g, pdx.g, pdc.g, 0);
        cpu->tokens_bwd(B, D, np, pdy.c, pdx.c, pdc.c, 0);
        gpu->tokens_bwd(B, D, np, pdy.g, NULL, pacc.g, 1);
        cpu->tokens_bwd(B, D, np, pdy.c, NULL, pacc.c, 1);
        float *hdx = fetch(gpu, pdx.g, nx), *rdx = fetch(cpu, pdx.c, nx);
        float *hdc = fetch(gpu, pdc.g, D), *rdc = fetch(cpu, pdc.c, D);
        float *hacc = fetch(gpu, pacc.g, D), *racc = fetch(cpu, pacc.c, D);
        snprintf(what, sizeof what, "tokens_bwd dx B=%d D=%d n=%d", B, D, np);
        expect_bits(what, hdx, rdx, nx);
        snprintf(what, sizeof what, "tokens_bwd dcls B=%d D=%d n=%d", B, D, np);
        expect_close(what, hdc, rdc, D, 1e-5);
        snprintf(what, sizeof what, "tokens_bwd accumulate B=%d D=%d n=%d", B, D, np);
        expect_close(what, hacc, racc, D, 1e-5);
        free(hy); free(ry); free(hdx); free(rdx); free(hdc); free(rdc); free(hacc); free(racc);
        free2(px); free2(pc); free2(py); free2(pdy); free2(pdx); free2(pdc); free2(pacc);
        free(x); free(cls); free(dy); free(acc);
    }
    const int R = 3200, N = 192;
    const size_t n = (size_t)R * N;
    float *x = rand_floats(n, -1.0f, 1.0f), *p = rand_floats(N, -1.0f, 1.0f);
    float *acc = rand_floats(N, -1.0f, 1.0f);
    struct pair px = put2(x, n), pp = put2(p, N), py = put2(NULL, n), ps = put2(NULL, N);
    struct pair pacc = put2(acc, N), pd = put2(x, n);
    gpu->add_rows(R, N, px.g, pp.g, py.g);
    cpu->add_rows(R, N, px.c, pp.c, py.c);
    gpu->sum_rows(R, N, py.g, ps.g, 0);
    cpu->sum_rows(R, N, py.c, ps.c, 0);
    gpu->sum_rows(R, N, py.g, pacc.g, 1);
    cpu->sum_rows(R, N, py.c, pacc.c, 1);
    float *hs2 = fetch(gpu, ps.g, N);
    gpu->sum_rows(R, N, py.g, ps.g, 0);
    /* copy_rows: every other row's first 100 columns into rows of 100 */
    gpu->copy_rows(R / 2, 100, py.g, 2 * (size_t)N, pd.g, 100);
    cpu->copy_rows(R / 2, 100, py.c, 2 * (size_t)N, pd.c, 100);
    gpu->add_rows(R, N, px.g, pp.g, px.g);   /* in place */
    float *hy = fetch(gpu, py.g, n), *ry = fetch(cpu, py.c, n), *hx = fetch(gpu, px.g, n);
    float *hs = fetch(gpu, ps.g, N), *rs = fetch(cpu, ps.c, N);
    float *ha = fetch(gpu, pacc.g, N), *ra = fetch(cpu, pacc.c, N);
    float *hd = fetch(gpu, pd.g, n), *rd = fetch(cpu, pd.c, n);
    expect_bits("add_rows", hy, ry, n);
    expect_bits("add_rows in place", hx, ry, n);
    expect_close("sum_rows", hs, rs, N, 1e-5);
    expect_same_bits("sum_rows", hs, hs2, N * 4);
    expect_close("sum_rows accumulate", ha, ra, N, 1e-5);
    expect_bits("copy_rows", hd, rd, n);
    free(hy); free(ry); free(hx); free(hs); free(rs); free(ha); free(ra); free(hd); free(rd);
    free(hs2);
    free2(px); free2(pp); free2(py); free2(ps); free2(pacc); free2(pd);
    free(x); free(p); free(acc);
}
END_TEST

static Suite *gpu_suite(void)
{
    Suite *s = suite_create("gpu");
    TCase *t = tcase_create("kernels");
    tcase_set_timeout(t, 600);
    tcase_add_test(t, test_memory);
    tcase_add_loop_test(t, test_linear_fwd, 0, NSHAPES);
    tcase_add_loop_test(t, test_linear_bwd, 0, NSHAPES);
    tcase_add_loop_test(t, test_linear_fused, 0, NSHAPES);
    tcase_add_test(t, test_elementwise);
    tcase_add_test(t, test_relu6);
    tcase_add_test(t, test_dropout);
    tcase_add_test(t, test_pixels);
    tcase_add_test(t, test_sgd);
    tcase_add_test(t, test_sgd_forms);
    tcase_add_test(t, test_adamw);
    tcase_add_loop_test(t, test_xent, 0, NXSHAPES);
    tcase_add_test(t, test_xent_ties);
    tcase_add_test(t, test_training_steps);
    tcase_add_loop_test(t, test_conv2d, 0, NCSHAPES);
    tcase_add_loop_test(t, test_conv2d_grouped, 0, NGSHAPES);
    tcase_add_loop_test(t, test_batchnorm, 0, NBSHAPES);
    tcase_add_test(t, test_bn_running);
    tcase_add_test(t, test_f64_pack);
    tcase_add_test(t, test_nonfinite);
    tcase_add_loop_test(t, test_maxpool, 0, NPSHAPES);
    tcase_add_test(t, test_avgpool);
    tcase_add_test(t, test_adaptive_avgpool);
    tcase_add_test(t, test_add3);
    tcase_add_loop_test(t, test_gemm_batched, 0, NGBSHAPES);
    tcase_add_loop_test(t, test_softmax, 0, NRSHAPES);
    tcase_add_loop_test(t, test_layernorm, 0, NRSHAPES);
    tcase_add_test(t, test_gelu);
    tcase_add_test(t, test_tokens_rows);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    char err[512] = "";
    gpu = cdp_backend_cuda(0, err, sizeof err);
    if (!gpu) {
        /* skipped only where there is no CUDA to test: a device this build
         * cannot use (no kernels for it, no stream, no cuBLAS) fails */
        int none = strstr(err, "has no CUDA backend") || strstr(err, "no CUDA device found");
        printf("%s: test_gpu: %s\n", none ? "SKIP" : "FAIL", err[0] ? err : "no CUDA backend");
        fflush(stdout);
        return none ? SKIP_CODE : 1;
    }
    cpu = cdp_backend_cpu(1);
    if (!cpu) {
        fprintf(stderr, "test_gpu: the CPU backend did not initialise\n");
        return 1;
    }
    printf("test_gpu: %s\ntest_gpu: reference %s\n", gpu->describe(),
           cpu->describe ? cpu->describe() : cpu->name);

    SRunner *sr = srunner_create(gpu_suite());
    /* CUDA cannot be used in a child forked after the parent initialised it,
     * so the tests run in this process. */
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
