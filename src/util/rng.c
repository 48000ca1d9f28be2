#include "util/rng.h"

uint64_t cdp_mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

uint64_t cdp_rand_u64(uint64_t seed, uint64_t stream, uint64_t index)
{
    return cdp_mix64(cdp_mix64(cdp_mix64(seed) ^ stream) ^ index);
}

float cdp_rand_unit(uint64_t seed, uint64_t stream, uint64_t index)
{
    return (float)(cdp_rand_u64(seed, stream, index) >> 40) * (1.0f / 16777216.0f);
}
