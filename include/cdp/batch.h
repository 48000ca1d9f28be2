/* Which samples each worker takes (DESIGN.md section 4): each epoch is a
 * permutation seeded by (seed, epoch); step k takes the next N*B indices and
 * worker i takes [i*B, (i+1)*B) of them.  The remainder of an epoch that
 * does not fill a whole step is skipped. */
#ifndef CDP_BATCH_H
#define CDP_BATCH_H

#include <stdint.h>
#include "cdp/data.h"

typedef struct cdp_batcher {
    const cdp_dataset *d;
    int N, B;
    uint64_t seed;
    int shuffle;
    int64_t steps_per_epoch;
    int64_t epoch;          /* epoch whose permutation is in perm, -1: none */
    int64_t *perm;
} cdp_batcher;

/* 0, or -1 when the data set has fewer than N*B samples. */
int cdp_batcher_init(cdp_batcher *b, const cdp_dataset *d, int N, int B, uint64_t seed, int shuffle);
void cdp_batcher_free(cdp_batcher *b);
/* The B sample indices of worker i in step k. */
const int64_t *cdp_batcher_indices(cdp_batcher *b, int64_t k, int i);
/* Copies the pixels (B*dim bytes) and labels (B) of worker i in step k. */
void cdp_batcher_gather(cdp_batcher *b, int64_t k, int i, uint8_t *pixels, int32_t *labels);

#endif
