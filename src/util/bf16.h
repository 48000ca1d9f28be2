/* bfloat16 rounding of a float: the float's upper 16 bits after rounding
 * to nearest, ties to even, on the 16 bits dropped (IEEE-754's default
 * rounding applied to bfloat16's 8-bit significand).  A NaN stays a NaN
 * (quieted, its sign and top payload bits kept); a finite value above
 * bfloat16's largest rounds to infinity, as the rule says.  The backends'
 * round_bf16 kernels compute exactly this, element by element. */
#ifndef CDP_UTIL_BF16_H
#define CDP_UTIL_BF16_H

#include <stdint.h>
#include <string.h>

static inline uint32_t cdp_bf16_round_bits(uint32_t u)
{
    if ((u & 0x7fffffffu) > 0x7f800000u)          /* NaN */
        return (u | 0x00400000u) & 0xffff0000u;
    u += 0x7fffu + ((u >> 16) & 1u);
    return u & 0xffff0000u;
}

/* the float holding x rounded to bfloat16 (its low 16 bits zero) */
static inline float cdp_bf16_round(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    u = cdp_bf16_round_bits(u);
    memcpy(&x, &u, sizeof x);
    return x;
}

#endif
