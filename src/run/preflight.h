/* Before the first step: where the job landed, and whether its ranks can
 * compute as one.  Ranks on different hosts may run different builds, BLAS
 * kernels or options; each such difference gives weights that no single
 * run gives, so they are found and named here, not after training.  Every
 * function is collective over c->comm. */
#ifndef CDP_PREFLIGHT_H
#define CDP_PREFLIGHT_H

#include <stdint.h>
#include <stdio.h>
#include "exec/comm.h"

/* Longest numerics identity of one rank ("field: value" lines). */
#define CDP_IDENTITY_MAX 1024

typedef struct cdp_preflight {
    char (*identity)[CDP_IDENTITY_MAX];   /* [size], on rank 0 only */
} cdp_preflight;

/* This build and its backend's numerics (backend->numerics()) as
 * "field: value" lines, into buf: what must be the same on every rank. */
void cdp_preflight_identity(const char *backend_numerics, char *buf, size_t len);

/* Gathers every rank's identity to rank 0 and compares them field by
 * field.  Returns 1 on every rank when they differ (rank 0: what differs,
 * naming the values, ranks and hosts, in `why`), 0 when they agree, -1 out
 * of memory (on every rank).  The identities stay in pf for
 * cdp_preflight_print_hosts. */
int cdp_preflight_numerics(cdp_preflight *pf, const cdp_comm *c, const char *identity,
                           char *why, size_t whylen);

/* Rank 0: one line per host, "  host NAME: ranks 0-1 (2), 8 cpus, backend
 * cpu, OpenBLAS 0.3.21 kernel Zen" (the backend of its lowest rank). */
void cdp_preflight_print_hosts(FILE *out, const cdp_preflight *pf, const cdp_comm *c);

void cdp_preflight_free(cdp_preflight *pf);

/* After option hashes differ: rank 0 describes, in `why`, how the first rank
 * whose options differ from rank 0's was started differently (the options
 * one has and the other has not). */
void cdp_preflight_options(const cdp_comm *c, uint64_t hash, int argc, char **argv, char *why,
                           size_t whylen);

/* Rank 0, in a job across hosts with a watchdog of `timeout` s under Open
 * MPI's mpirun: a warning (into buf, else "") when mpirun, as configured by
 * this environment, would notice a host cut from the network only after the
 * watchdog has given up waiting for it, with the settings that make it
 * notice in time. */
void cdp_preflight_keepalive(const cdp_comm *c, int timeout, char *buf, size_t len);

/* "0-3,6,8-9": the ranks r < n with in[r] set (into buf). */
void cdp_rank_list(const unsigned char *in, int n, char *buf, size_t len);

#endif
