/* Deterministic parallel reductions shared by the CUDA kernel files.
 *
 * Every order here is fixed by thread positions alone, never by timing:
 * the same inputs give the same bits on every run (no atomics).  The orders
 * are not the CPU's sequential ones, so a sum agrees with the CPU backend to
 * rounding (sums are carried in double where the contract says so, and then
 * nearly always round to the CPU's float).
 *
 * Rows: one warp a row, lane l takes elements l, l + 32, ... in order, and
 * the 32 lane results meet in a butterfly (__shfl_xor_sync: lane l adds lane
 * l ^ o for o = 16, 8, 4, 2, 1); addition being commutative, every lane
 * ends with the same bits.
 *
 * Columns: a block of COL_W columns x COL_H row lanes; row lane t of column
 * c sums rows t, t + COL_H, ... in order, and the COL_H partial sums meet in
 * a fixed tree in shared memory (lane t adds t + h for h = COL_H/2, ..., 1).
 * Loads stay coalesced: a warp reads 32 neighbouring columns of one row. */
#ifndef CDP_GPU_REDUCE_CUH
#define CDP_GPU_REDUCE_CUH

#include "cuda_internal.h"

#define WARP 32
#define FULL_MASK 0xffffffffu
/* rows a block of CDP_THREADS threads handles at once, one a warp */
#define WARP_ROWS_PER_BLOCK (CDP_THREADS / WARP)
#define COL_W 32
#define COL_H 32

__device__ static inline double warp_sum_d(double v)
{
    for (int o = WARP / 2; o > 0; o >>= 1)
        v = __dadd_rn(v, __shfl_xor_sync(FULL_MASK, v, o));
    return v;
}

__device__ static inline float warp_sum_f(float v)
{
    for (int o = WARP / 2; o > 0; o >>= 1)
        v = __fadd_rn(v, __shfl_xor_sync(FULL_MASK, v, o));
    return v;
}

/* the largest of the lanes' values (NaNs ignored, as by `if (x > m)`) */
__device__ static inline float warp_max_f(float v)
{
    for (int o = WARP / 2; o > 0; o >>= 1) {
        float t = __shfl_xor_sync(FULL_MASK, v, o);
        if (t > v)
            v = t;
    }
    return v;
}

/* Loop over rows, one warp a row: every lane of a warp sees the same r, so
 * the warp stays whole for the shuffles.  Launch with grid_for_rows(R)
 * blocks of CDP_THREADS threads. */
#define WARP_ROWS(r, R)                                                         \
    for (size_t r = (size_t)blockIdx.x * WARP_ROWS_PER_BLOCK + threadIdx.x / WARP; \
         r < (size_t)(R); r += (size_t)gridDim.x * WARP_ROWS_PER_BLOCK)

static inline unsigned grid_for_rows(size_t R)
{
    return grid_for(R * WARP);
}

/* The column total of v over the COL_H row lanes (threadIdx.y) of a
 * dim3(COL_W, COL_H) block; valid in row lane 0. */
__device__ static inline double col_tree(double v, double (*sh)[COL_W + 1])
{
    const int x = threadIdx.x, y = threadIdx.y;
    sh[y][x] = v;
    __syncthreads();
    for (int h = COL_H / 2; h > 0; h >>= 1) {
        if (y < h)
            sh[y][x] = __dadd_rn(sh[y][x], sh[y + h][x]);
        __syncthreads();
    }
    double r = sh[0][x];
    __syncthreads(); /* sh is free again for the next total */
    return r;
}

static inline dim3 col_block(void)
{
    return dim3(COL_W, COL_H);
}

static inline unsigned col_grid(int N)
{
    return (unsigned)((N + COL_W - 1) / COL_W);
}

#endif
