/* The CUDA backend against the CPU backend, kernel by kernel.
 *
 * Skipped (exit 77) when this build has no CUDA backend or the machine has no
 * usable GPU: it never reports a pass without having run on a GPU.
 *
 * With a GPU: every kernel on random inputs of several shapes agrees with the
 * CPU backend (relative to the largest reference value: 1e-4 for the SGEMM
 * based Linear layers, 1e-5 for softmax cross-entropy, exact or 1e-6 for the
 * element-wise kernels), the loss statistics agree, and every GPU kernel is
 * deterministic (the same call twice gives the same bits). */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cdp/backend.h"

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

static void expect_same_bits(const char *what, const void *a, const void *b, size_t bytes)
{
    ck_assert_msg(memcmp(a, b, bytes) == 0, "%s: two identical GPU calls gave different bits",
                  what);
}

/* ------------------------------------------------------------ memory */

START_TEST(test_memory)
{
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
    tcase_add_test(t, test_pixels);
    tcase_add_test(t, test_sgd);
    tcase_add_test(t, test_sgd_forms);
    tcase_add_loop_test(t, test_xent, 0, NXSHAPES);
    tcase_add_test(t, test_xent_ties);
    tcase_add_test(t, test_training_steps);
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
