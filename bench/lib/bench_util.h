/* What the C benches of bench/ share: a monotonic clock, operand buffers
 * filled with a fixed pattern in [-0.5, 0.5) (no denormals, no zeros: a
 * GEMM's speed must not depend on its data), and the result line.  C11, and
 * C++ for the CUDA benches (nvcc). */
#ifndef CDP_BENCH_UTIL_H
#define CDP_BENCH_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static inline double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* n floats, 64-byte aligned, with 64 bytes of slack past the end (a
 * vectorised kernel may read up to a vector beyond a ragged last row);
 * exits when out of memory */
static inline float *buffer(size_t n)
{
    float *p = (float *)aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64 + 64);
    if (!p) {
        fprintf(stderr, "bench: out of memory for %zu floats\n", n);
        exit(1);
    }
    for (size_t k = 0; k < n; k++)
        p[k] = (float)((k * 2654435761u) % 1000) / 1000.0f - 0.5f;
    return p;
}

/* one figure as a result line, the format every benchmark prints beside
 * its own output (bench/README, "Result lines"; common.sh's bench_result
 * and bench_result.py print the same):
 *     result<TAB>BENCH<TAB>CONFIG<TAB>METRIC<TAB>VALUE<TAB>UNIT
 * kept until bench_results_end() prints them all, after the human output
 * (which stays as it was); the caller's fields hold no tab or newline */
static char *bench_results_buf;
static size_t bench_results_len;

static inline void bench_result(const char *bench, const char *config, const char *metric,
                                double value, const char *unit)
{
    const char *c = config && *config ? config : "-";
    int n = snprintf(NULL, 0, "result\t%s\t%s\t%s\t%.6g\t%s\n", bench, c, metric, value, unit);
    char *b = (char *)realloc(bench_results_buf, bench_results_len + (size_t)n + 1);
    if (n < 0 || !b) {
        fprintf(stderr, "bench: out of memory for a result line\n");
        exit(1);
    }
    snprintf(b + bench_results_len, (size_t)n + 1, "result\t%s\t%s\t%s\t%.6g\t%s\n", bench, c,
             metric, value, unit);
    bench_results_buf = b;
    bench_results_len += (size_t)n;
}

/* the totals of a GEMM bound (sgemm_limit, conv_gemm_bound, cublas_limit):
 * the GEMMs' time, their speed and the samples/s they alone allow */
static inline void bench_result_gemm_bound(const char *bench, const char *config, double seconds,
                                           double flops, double samples)
{
    bench_result(bench, config, "gemm_time", seconds * 1e3, "ms");
    bench_result(bench, config, "gflops", flops / seconds / 1e9, "GFLOP/s");
    bench_result(bench, config, "gemm_bound", samples / seconds, "samples/s");
}

static inline void bench_results_end(void)
{
    if (bench_results_buf)
        fputs(bench_results_buf, stdout);
    free(bench_results_buf);
    bench_results_buf = NULL;
    bench_results_len = 0;
    fflush(stdout);
}

#endif
