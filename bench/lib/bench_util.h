/* What the C benches of bench/ share: a monotonic clock, and operand
 * buffers filled with a fixed pattern in [-0.5, 0.5) (no denormals, no
 * zeros: a GEMM's speed must not depend on its data). */
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
    float *p = aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64 + 64);
    if (!p) {
        fprintf(stderr, "bench: out of memory for %zu floats\n", n);
        exit(1);
    }
    for (size_t k = 0; k < n; k++)
        p[k] = (float)((k * 2654435761u) % 1000) / 1000.0f - 0.5f;
    return p;
}

#endif
