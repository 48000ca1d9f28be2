/* Dropout's mask and scale (backend_kernels.def): the one kernel that draws
 * random numbers.  Each element's draw is a function of its index alone
 * (util/rng.h), so the bits do not depend on the threads. */
#include "util/rng.h"
#include "cpu_internal.h"

void cdp_cpu_dropout(size_t n, uint64_t seed, uint64_t stream, uint64_t index0,
                     uint32_t keep_from, float scale, const float *x, float *y)
{
    /* cdp_rand_u64(seed, stream, i) with its first two rounds done once */
    const uint64_t key = cdp_mix64(cdp_mix64(seed) ^ stream);
#pragma omp parallel for CDP_CPU_PAR(n)
    for (size_t k = 0; k < n; k++) {
        const uint32_t r = (uint32_t)(cdp_mix64(key ^ (index0 + k)) >> 40);
        y[k] = x[k] * (r >= keep_from ? scale : 0.0f);
    }
}
