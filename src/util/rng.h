/* Counter-based random numbers: the same (seed, stream, index) gives the same
 * value on every rank and every run, whatever the order of the calls. */
#ifndef CDP_RNG_H
#define CDP_RNG_H

#include <stdint.h>

/* SplitMix64 finaliser of the 64-bit input. */
uint64_t cdp_mix64(uint64_t x);
/* A 64-bit value from (seed, stream, index). */
uint64_t cdp_rand_u64(uint64_t seed, uint64_t stream, uint64_t index);
/* Uniform float in [0, 1) with 24 random bits, from (seed, stream, index). */
float cdp_rand_unit(uint64_t seed, uint64_t stream, uint64_t index);

#endif
