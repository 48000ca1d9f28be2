#include <stdlib.h>
#include <string.h>
#include "io/batch.h"
#include "io/image_folder.h"
#include "io/prefetch.h"
#include "util/clock.h"
#include <omp.h>
#include "util/rng.h"

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
    const cdp_image_folder *f = d->folder;
    if (f && f->prefetch > 0) {
        b->pf = cdp_prefetch_new(f, d->n, N, B, b->steps_per_epoch, seed, shuffle,
                                 f->decoders ? f->decoders : omp_get_max_threads(), f->prefetch);
        if (!b->pf) {
            cdp_batcher_free(b);
            return -1;
        }
    }
    return 0;
}

void cdp_batcher_free(cdp_batcher *b)
{
    free(b->perm);
    b->perm = NULL;
    cdp_prefetch_free(b->pf);
    b->pf = NULL;
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
    const int aug = pixels && cdp_augment_active(&b->d->augment);
    if (pixels && b->d->folder) {
        /* decoded (ahead, or now), RandomResizedCrop and flip included */
        const double t0 = cdp_now_s();
        if (b->pf)
            cdp_prefetch_get(b->pf, k, i, pixels);
        else
            cdp_image_folder_gather(b->d->folder, b->seed, b->epoch, idx, b->B, pixels);
        b->wait_s += cdp_now_s() - t0;
        pixels = NULL;
    }
    for (int j = 0; j < b->B; j++) {
        if (aug)
            cdp_augment_sample(b->d, b->seed, b->epoch, idx[j], pixels + (size_t)j * dim);
        else if (pixels)
            memcpy(pixels + (size_t)j * dim, b->d->pixels + (size_t)idx[j] * dim, dim);
        if (labels)
            labels[j] = b->d->labels[idx[j]];
    }
}

/* ---------------------------------------------------------- augmentation */

int cdp_augment_active(const cdp_augment *a)
{
    return a && (a->crop_pad > 0 || a->flip);
}

cdp_augment_draw cdp_augment_draws(const cdp_augment *a, uint64_t seed, int64_t epoch,
                                   int64_t index)
{
    cdp_augment_draw dr = {0, 0, 0};
    const uint64_t es = cdp_mix64((uint64_t)epoch);
    if (a->crop_pad > 0) {
        const uint64_t span = 2 * (uint64_t)a->crop_pad + 1;
        dr.dy = (int)(cdp_rand_u64(seed, CDP_STREAM_AUG_CROP_Y ^ es, (uint64_t)index) % span);
        dr.dx = (int)(cdp_rand_u64(seed, CDP_STREAM_AUG_CROP_X ^ es, (uint64_t)index) % span);
    }
    if (a->flip)
        dr.flip = cdp_rand_unit(seed, CDP_STREAM_AUG_FLIP ^ es, (uint64_t)index) < 0.5f;
    return dr;
}

void cdp_augment_apply(int C, int H, int W, int pad, cdp_augment_draw dr,
                       const uint8_t *in, uint8_t *out)
{
    const int oy = dr.dy - pad, ox = dr.dx - pad;   /* source = output + offset */
    for (int c = 0; c < C; c++) {
        const uint8_t *src = in + (size_t)c * H * W;
        uint8_t *dst = out + (size_t)c * H * W;
        for (int y = 0; y < H; y++) {
            const int sy = y + oy;
            uint8_t *row = dst + (size_t)y * W;
            if (sy < 0 || sy >= H) {
                memset(row, 0, (size_t)W);
                continue;
            }
            const uint8_t *srow = src + (size_t)sy * W;
            for (int x = 0; x < W; x++) {
                const int sx = (dr.flip ? W - 1 - x : x) + ox;
                row[x] = sx >= 0 && sx < W ? srow[sx] : 0;
            }
        }
    }
}

void cdp_augment_sample(const cdp_dataset *d, uint64_t seed, int64_t epoch, int64_t index,
                        uint8_t *out)
{
    const uint8_t *in = d->pixels + (size_t)index * (size_t)d->dim;
    if (!cdp_augment_active(&d->augment)) {
        memcpy(out, in, (size_t)d->dim);
        return;
    }
    cdp_augment_draw dr = cdp_augment_draws(&d->augment, seed, epoch, index);
    cdp_augment_apply(d->channels, d->height, d->width, d->augment.crop_pad, dr, in, out);
}
