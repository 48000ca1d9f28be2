/* The accounting allocator for activations: every activation buffer the
 * executor holds comes from here, so the bytes it reports are bytes that
 * were really allocated.  Freed blocks are cached by size and reused (no
 * allocation in the steady state of training); `live` counts blocks in use,
 * `reserved` what is held from the backend. */
#ifndef CDP_ACTMEM_H
#define CDP_ACTMEM_H

#include <stddef.h>
#include <stdint.h>
#include "backend/backend.h"

typedef struct cdp_actmem_block { size_t bytes; void *p; } cdp_actmem_block;

typedef struct cdp_actmem {
    const cdp_backend *be;
    int64_t live, live_peak, window_peak;   /* window_peak: since cdp_actmem_window() */
    /* live as the schedule has it: a block counts as gone at the
     * instruction that lets it go (cdp_actmem_let_go), not when its last
     * send completes, which depends on how far the peer lags: the same
     * every run */
    int64_t sched_live, sched_peak;
    int64_t reserved, reserved_peak;
    cdp_actmem_block *cache;
    size_t ncache, capcache;
} cdp_actmem;

void cdp_actmem_init(cdp_actmem *a, const cdp_backend *be);
void *cdp_actmem_alloc(cdp_actmem *a, size_t bytes);   /* aborts when out of memory */
void cdp_actmem_free(cdp_actmem *a, void *p, size_t bytes);
/* The schedule lets a block go now (its sends may still read it): it
 * leaves sched_live; cdp_actmem_free_sent then frees it. */
void cdp_actmem_let_go(cdp_actmem *a, size_t bytes);
void cdp_actmem_free_sent(cdp_actmem *a, void *p, size_t bytes);
/* Starts a new measurement window; returns the peak of the previous one. */
int64_t cdp_actmem_window(cdp_actmem *a);
/* Gives cached blocks back to the backend. */
void cdp_actmem_trim(cdp_actmem *a);
void cdp_actmem_destroy(cdp_actmem *a);

#endif
