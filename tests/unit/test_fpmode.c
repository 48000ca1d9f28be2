/* --flush-denormals (src/cpu/fpmode.c): by default the CPU backend keeps
 * IEEE denormals; after cdp_cpu_flush_denormals every thread that computes
 * (the caller, the OpenMP pool, threads a larger team adds later) reads a
 * denormal input as zero and writes a denormal result as zero, and so do
 * the backend's kernels (BLAS included).  Each test runs in its own process
 * (Check's fork mode), and the default-mode test comes first for a run
 * without fork (CK_FORK=no). */
#include <check.h>
#include <float.h>
#include <omp.h>
#include <stdlib.h>
#include "backend/backend.h"
#include "../lib/check_run.h"

#define TEAM_MAX 64
#define SCALE 1048576.0f /* 2^20: a denormal times this is a normal float */

/* what one thread computes: [0] a denormal input times 2^20 (0 when
 * denormals-are-zero), [1] a product whose exact value is denormal (0 when
 * flush-to-zero), [2] an ordinary product (never 0) */
static void probe(float r[3])
{
    volatile float d = 1e-40f, a = 1e-30f, b = 1e-10f, c = 1.5f, s = SCALE;
    r[0] = d * s;
    r[1] = a * b;
    r[2] = c * s;
}

/* each thread of a team of `threads` runs probe(); 1 if all saw `flushed` */
static int team_sees(int threads, int flushed)
{
    float r[TEAM_MAX][3];
    int seen = 0;
#pragma omp parallel num_threads(threads)
    {
        int t = omp_get_thread_num();
        probe(r[t]);
#pragma omp atomic
        seen++;
    }
    ck_assert_int_eq(seen, threads);
    for (int t = 0; t < threads; t++) {
        ck_assert_float_eq(r[t][2], 1.5f * SCALE);
        if (flushed ? (r[t][0] != 0.0f || r[t][1] != 0.0f)
                    : (r[t][0] == 0.0f || r[t][1] == 0.0f))
            return 0;
    }
    return 1;
}

/* y = x W^T through the backend's linear_fwd (a GEMM split over the
 * threads) with every x a denormal and W = 2^20: 1 if every y is zero,
 * 0 if every y is the IEEE product, -1 otherwise */
static int linear_flushes(const cdp_backend *be)
{
    enum { B = 64, IN = 48, OUT = 40 };
    float *x = malloc(sizeof(float) * B * IN), *w = malloc(sizeof(float) * OUT * IN),
          *y = malloc(sizeof(float) * B * OUT), *b = calloc(OUT, sizeof(float));
    ck_assert_ptr_nonnull(b);
    ck_assert_ptr_nonnull(x);
    ck_assert_ptr_nonnull(w);
    ck_assert_ptr_nonnull(y);
    for (int i = 0; i < B * IN; i++)
        x[i] = 1e-40f;
    for (int i = 0; i < OUT * IN; i++)
        w[i] = SCALE;
    be->linear_fwd(B, IN, OUT, x, w, b, y, 0);
    /* IEEE: IN products of about 1.05e-34 each, summed */
    int zeros = 0, ieee = 0;
    for (int i = 0; i < B * OUT; i++) {
        zeros += y[i] == 0.0f;
        ieee += y[i] > 0.9e-40f * SCALE * IN && y[i] < 1.1e-40f * SCALE * IN;
    }
    free(x);
    free(w);
    free(y);
    free(b);
    return zeros == B * OUT ? 1 : ieee == B * OUT ? 0 : -1;
}

START_TEST(ieee_by_default)
{
    const cdp_backend *be = cdp_backend_cpu(2);
    ck_assert_ptr_nonnull(be);
    float r[3];
    probe(r);
    ck_assert_float_gt(r[0], 0.0f);
    ck_assert_float_gt(r[1], 0.0f);
    ck_assert_float_lt(r[1], FLT_MIN); /* the probe's product is a denormal indeed */
    ck_assert_int_eq(team_sees(omp_get_max_threads(), 0), 1);
    ck_assert_int_eq(linear_flushes(be), 0);
}
END_TEST

START_TEST(flush_reaches_every_thread)
{
    const cdp_backend *be = cdp_backend_cpu(2);
    ck_assert_ptr_nonnull(be);
    const int pool = omp_get_max_threads();
    /* the pool exists before the call: its threads must be switched too */
    ck_assert_int_eq(team_sees(pool, 0), 1);
    char err[256] = "";
    ck_assert_int_eq(cdp_cpu_flush_denormals(err, sizeof err), 0);
    float r[3];
    probe(r);
    ck_assert_float_eq(r[0], 0.0f);
    ck_assert_float_eq(r[1], 0.0f);
    ck_assert_int_eq(team_sees(pool, 1), 1);
    /* a larger team creates threads after the call: they inherit the mode */
    ck_assert_int_le(pool + 3, TEAM_MAX);
    ck_assert_int_eq(team_sees(pool + 3, 1), 1);
    ck_assert_int_eq(linear_flushes(be), 1);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("fpmode");
    TCase *tc = tcase_create("fpmode");
    tcase_add_test(tc, ieee_by_default);
    tcase_add_test(tc, flush_reaches_every_thread);
    suite_add_tcase(s, tc);
    int failed = check_run(s);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
