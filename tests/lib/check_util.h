/* The helpers the Check suites of the kernels, the models and the blocks
 * share (test_cpu_kernels, test_models, test_cpu_image_token_kernels,
 * test_nn_block): zeroed buffers with slack, float-to-double copies, the
 * tolerance check against a double reference, and the CPU backend with a
 * chosen GEMM split. */
#ifndef CDP_TESTS_CHECK_UTIL_H
#define CDP_TESTS_CHECK_UTIL_H

#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"

/* n floats, 64-byte aligned and zeroed, with 64 bytes of slack past the
 * end (a vectorised kernel may read a vector beyond a ragged last row) */
static inline float *fbuf(size_t n)
{
    size_t bytes = ((n * sizeof(float) + 63) / 64) * 64 + 64;
    float *p = aligned_alloc(64, bytes);
    ck_assert_ptr_nonnull(p);
    memset(p, 0, bytes);
    return p;
}

/* n zeroed doubles (n = 0 allowed) */
static inline double *dbuf(size_t n)
{
    double *p = calloc(n + 1, sizeof(double));
    ck_assert_ptr_nonnull(p);
    return p;
}

static inline double *to_d(const float *p, size_t n)
{
    double *d = dbuf(n);
    for (size_t k = 0; k < n; k++)
        d[k] = p[k];
    return d;
}

/* |a - r| <= tol * max|r| everywhere: cdp's float result a against the
 * double reference r */
static inline void check_close(const char *what, const float *a, const double *r, size_t n,
                               double tol)
{
    double mx = 0.0;
    for (size_t k = 0; k < n; k++)
        mx = fmax(mx, fabs(r[k]));
    for (size_t k = 0; k < n; k++) {
        double d = fabs((double)a[k] - r[k]);
        if (!(d <= tol * mx + 1e-30))
            ck_abort_msg("%s[%zu]: cdp %.9g vs reference %.9g (err %.3g of max %.3g)", what, k,
                         (double)a[k], r[k], d / (mx > 0 ? mx : 1), mx);
    }
}

/* CDP_GEMM_SPLIT is read by cdp_backend_cpu(); each test runs in its own
 * process (Check forks), so setting it stays local to the test */
static inline const cdp_backend *cpu_split(int threads, const char *split)
{
    if (split)
        setenv("CDP_GEMM_SPLIT", split, 1);
    else
        unsetenv("CDP_GEMM_SPLIT");
    return cdp_backend_cpu(threads);
}

/* the same, with CDP_GEMM_DNNL = dnnl ("1": oneDNN's sgemm where the build
 * has it, "0": OpenBLAS's) */
static inline const cdp_backend *cpu_split_lib(int threads, const char *split, const char *dnnl)
{
    setenv("CDP_GEMM_DNNL", dnnl, 1);
    return cpu_split(threads, split);
}

#endif
