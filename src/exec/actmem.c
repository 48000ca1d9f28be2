#include <stdio.h>
#include <stdlib.h>
#include "exec/actmem.h"

void cdp_actmem_init(cdp_actmem *a, const cdp_backend *be)
{
    *a = (cdp_actmem){ .be = be };
}

void *cdp_actmem_alloc(cdp_actmem *a, size_t bytes)
{
    void *p = NULL;
    for (size_t i = a->ncache; i-- > 0;) {
        if (a->cache[i].bytes == bytes) {
            p = a->cache[i].p;
            a->cache[i] = a->cache[--a->ncache];
            break;
        }
    }
    if (!p) {
        p = a->be->alloc(bytes);
        if (!p) {
            /* one line and an exit status, not an abort's backtrace: no
             * other rank can be asked to agree at this point */
            fprintf(stderr, "cdp_run: error: out of %s memory: %zu more bytes wanted with %lld "
                    "in use (smaller --batch, --workers or model, or more ranks)\n",
                    a->be->name, bytes, (long long)a->live);
            exit(1);
        }
        a->reserved += (int64_t)bytes;
        if (a->reserved > a->reserved_peak) a->reserved_peak = a->reserved;
    }
    a->live += (int64_t)bytes;
    if (a->live > a->live_peak) a->live_peak = a->live;
    a->sched_live += (int64_t)bytes;
    if (a->sched_live > a->sched_peak) a->sched_peak = a->sched_live;
    if (a->live > a->window_peak) a->window_peak = a->live;
    return p;
}

void cdp_actmem_let_go(cdp_actmem *a, size_t bytes)
{
    a->sched_live -= (int64_t)bytes;
}

void cdp_actmem_free(cdp_actmem *a, void *p, size_t bytes)
{
    if (!p) return;
    cdp_actmem_let_go(a, bytes);
    cdp_actmem_free_sent(a, p, bytes);
}

void cdp_actmem_free_sent(cdp_actmem *a, void *p, size_t bytes)
{
    if (!p) return;
    if (a->ncache == a->capcache) {
        size_t cap = a->capcache ? 2 * a->capcache : 64;
        cdp_actmem_block *c = realloc(a->cache, cap * sizeof *c);
        if (!c) abort();
        a->cache = c;
        a->capcache = cap;
    }
    a->cache[a->ncache++] = (cdp_actmem_block){ bytes, p };
    a->live -= (int64_t)bytes;
}

int64_t cdp_actmem_window(cdp_actmem *a)
{
    int64_t w = a->window_peak;
    a->window_peak = a->live;
    return w;
}

void cdp_actmem_trim(cdp_actmem *a)
{
    for (size_t i = 0; i < a->ncache; i++) {
        a->be->free(a->cache[i].p);
        a->reserved -= (int64_t)a->cache[i].bytes;
    }
    a->ncache = 0;
}

void cdp_actmem_destroy(cdp_actmem *a)
{
    cdp_actmem_trim(a);
    free(a->cache);
    a->cache = NULL;
    a->capcache = 0;
}
