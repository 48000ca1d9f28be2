#include <stdlib.h>
#include <string.h>
#include "cdp/batch.h"

int cdp_batcher_init(cdp_batcher *b, const cdp_dataset *d, int N, int B, uint64_t seed, int shuffle)
{
    memset(b, 0, sizeof *b);
    b->d = d;
    b->N = N;
    b->B = B;
    b->seed = seed;
    b->shuffle = shuffle;
    b->steps_per_epoch = d->n / ((int64_t)N * B);
    b->epoch = -1;
    if (b->steps_per_epoch < 1)
        return -1;
    b->perm = malloc(sizeof(int64_t) * (size_t)d->n);
    if (!b->perm)
        return -1;
    return 0;
}

void cdp_batcher_free(cdp_batcher *b)
{
    free(b->perm);
    b->perm = NULL;
}

const int64_t *cdp_batcher_indices(cdp_batcher *b, int64_t k, int i)
{
    int64_t e = k / b->steps_per_epoch;
    if (e != b->epoch) {
        cdp_epoch_permutation(b->d->n, b->seed, e, b->shuffle, b->perm);
        b->epoch = e;
    }
    int64_t pos = (k % b->steps_per_epoch) * b->N * b->B + (int64_t)i * b->B;
    return b->perm + pos;
}

void cdp_batcher_gather(cdp_batcher *b, int64_t k, int i, uint8_t *pixels, int32_t *labels)
{
    const int64_t *idx = cdp_batcher_indices(b, k, i);
    const size_t dim = (size_t)b->d->dim;
    for (int j = 0; j < b->B; j++) {
        if (pixels)
            memcpy(pixels + (size_t)j * dim, b->d->pixels + (size_t)idx[j] * dim, dim);
        if (labels)
            labels[j] = b->d->labels[idx[j]];
    }
}
