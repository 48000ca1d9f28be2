/* Decoding a folder's training micro-batches ahead of training, on a pool
 * of threads of its own.
 *
 * When the executor asks for worker i's micro-batch of step k, the pool
 * queues, besides it, the micro-batches of steps k+1 .. k+ahead of every
 * worker this rank has asked for so far (so a rank decodes only the samples
 * of its own workers' inputs), and the threads decode them sample by sample,
 * earliest step first.  The caller decodes too while it waits.  A sample's
 * bytes depend only on (seed, epoch, index) (io/image_folder.h), so neither
 * the thread count nor the order changes a bit.  A file that fails to
 * decode is reported when its micro-batch is taken, never before (a
 * prefetched step past the end of the run is not an error). */
#ifndef CDP_PREFETCH_H
#define CDP_PREFETCH_H

#include <stdint.h>
#include "io/image_folder.h"

typedef struct cdp_prefetch cdp_prefetch;

/* A pool of `threads` decoding threads (0: the caller alone decodes) for the
 * folder f of n samples, taken as cdp_batcher takes them (N workers x B
 * samples per step, steps_per_epoch, the permutation of (seed, epoch,
 * shuffle)), `ahead` steps ahead.  NULL when out of memory or when a thread
 * cannot be started. */
cdp_prefetch *cdp_prefetch_new(const cdp_image_folder *f, int64_t n, int N, int B,
                               int64_t steps_per_epoch, uint64_t seed, int shuffle,
                               int threads, int ahead);

/* Worker i's micro-batch of step k into pixels (B * 3*S*S bytes).  A file
 * that fails ends the process with one line naming it, as
 * cdp_image_folder_gather. */
void cdp_prefetch_get(cdp_prefetch *p, int64_t k, int i, uint8_t *pixels);

void cdp_prefetch_free(cdp_prefetch *p);

#endif
