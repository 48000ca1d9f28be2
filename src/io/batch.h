/* Which samples each worker takes (doc/reference.md section 3.7): each epoch is a
 * permutation seeded by (seed, epoch); step k takes the next N*B indices and
 * worker i takes [i*B, (i+1)*B) of them.  The remainder of an epoch that
 * does not fill a whole step is skipped.
 *
 * Augmentation (the data set's `augment`, set on the training set only):
 * when the batcher gathers sample `index` (its index in the data set) in
 * epoch e = k / steps_per_epoch, the image becomes, for every channel c,
 *     out[c][y][x] = in[c][y + dy - P][x' + dx - P]   (0 outside the image)
 *     x' = W-1-x when flip, else x
 * i.e. torchvision's RandomCrop((H, W), padding=P) (zero fill) followed by
 * RandomHorizontalFlip(p=0.5), with the draws (util/rng.h; es =
 * cdp_mix64((uint64_t)e)):
 *     dy   = cdp_rand_u64(seed, CDP_STREAM_AUG_CROP_Y ^ es, index) % (2P+1)
 *     dx   = cdp_rand_u64(seed, CDP_STREAM_AUG_CROP_X ^ es, index) % (2P+1)
 *     flip = cdp_rand_unit(seed, CDP_STREAM_AUG_FLIP ^ es, index) < 0.5f
 * (dy = dx = 0 when P = 0, flip = 0 when flip is off; each draw is the
 * same whether or not the other augmentation is on).  They depend only on
 * (seed, epoch, index), so every N, B, worker, rank count and framework
 * sees the same pixels for the same sample; evaluation reads the test set
 * directly and sees none of it. */
#ifndef CDP_BATCH_H
#define CDP_BATCH_H

#include <stdint.h>
#include "io/data.h"

/* Random streams of the augmentation draws (fixed forever). */
#define CDP_STREAM_AUG_CROP_Y 0x6364702d63726f79ULL /* "cdp-croy" */
#define CDP_STREAM_AUG_CROP_X 0x6364702d63726f78ULL /* "cdp-crox" */
#define CDP_STREAM_AUG_FLIP   0x6364702d666c6970ULL /* "cdp-flip" */

typedef struct cdp_batcher {
    const cdp_dataset *d;
    int N, B;
    uint64_t seed;
    int shuffle;
    int64_t steps_per_epoch;
    int64_t epoch;          /* epoch whose permutation is in perm, -1: none */
    int64_t *perm;
    struct cdp_prefetch *pf;    /* folder: the decoding pool, or NULL */
    double wait_s;              /* folder: seconds spent waiting for pixels */
} cdp_batcher;

/* The draws of one sample (see above). */
typedef struct cdp_augment_draw {
    int dy, dx;     /* crop offsets in [0, 2P] */
    int flip;       /* 0 or 1 */
} cdp_augment_draw;

/* 0, or -1 when the data set has fewer than N*B samples (or, for a folder,
 * its decoding threads cannot start). */
int cdp_batcher_init(cdp_batcher *b, const cdp_dataset *d, int N, int B, uint64_t seed, int shuffle);
void cdp_batcher_free(cdp_batcher *b);
/* The B sample indices of worker i in step k. */
const int64_t *cdp_batcher_indices(cdp_batcher *b, int64_t k, int i);
/* Copies the pixels (B*dim bytes, augmented when d->augment asks for it)
 * and labels (B) of worker i in step k. */
void cdp_batcher_gather(cdp_batcher *b, int64_t k, int i, uint8_t *pixels, int32_t *labels);

/* Whether a asks for any augmentation. */
int cdp_augment_active(const cdp_augment *a);
/* The draws of sample `index` of epoch `epoch`. */
cdp_augment_draw cdp_augment_draws(const cdp_augment *a, uint64_t seed, int64_t epoch,
                                   int64_t index);
/* Writes into out (d->dim bytes) sample `index` of d as the batcher gives it
 * in epoch `epoch`: augmented by d->augment (a plain copy without). */
void cdp_augment_sample(const cdp_dataset *d, uint64_t seed, int64_t epoch, int64_t index,
                        uint8_t *out);
/* The transform itself: out = crop (offsets dy, dx of the image padded by
 * pad zeros) then flip, of one C x H x W image in (out != in). */
void cdp_augment_apply(int C, int H, int W, int pad, cdp_augment_draw dr,
                       const uint8_t *in, uint8_t *out);

#endif
