/* Thin MPI layer: point to point, the few collectives the dp baselines use,
 * and the counters behind every traffic figure cdp reports.
 *
 * How traffic is counted (bytes a rank puts on the wire):
 *  - a point-to-point send counts its payload once, at the tick it is posted;
 *  - the dp all-reduce of n bytes (cdp_comm_allreduce_sum, a ring:
 *    reduce-scatter then all-gather) counts what it sends, 2(P-1)/P * n
 *    per rank (exactly, with the chunks' rounding);
 *  - MPI_Bcast and MPI_Reduce of n bytes count (P-1)/P * n per rank
 *    (scatter + all-gather, reduce-scatter + gather).
 * Collective calls are counted per call on each rank. */
#ifndef CDP_COMM_H
#define CDP_COMM_H

#include <stddef.h>
#include <stdint.h>
#include <mpi.h>

enum { CDP_TAG_GRAD = 1, CDP_TAG_FULL, CDP_TAG_ACT, CDP_TAG_DACT, CDP_TAG_PARAMS, CDP_TAG_STATS,
       CDP_TAG_RING };

/* Exit status of a job the watchdog stopped (--timeout): MPI_Abort's code. */
#define CDP_EXIT_STALLED 4
/* Seconds a rank the watchdog asks gets to answer. */
#define CDP_WATCHDOG_GRACE_S 2
/* Seconds the watchdog leaves the launcher, after naming a silent rank on
 * another host, to notice that host's loss itself before MPI_Abort: an
 * mpirun told to abort while one of its daemons is cut off waits for that
 * daemon as long as TCP retransmits (about 15 minutes), whereas its own
 * keepalive ends the job as soon as it notices the lost daemon. */
#define CDP_WATCHDOG_HOST_WAIT_S 15
/* Longest host name kept (longer ones are cut). */
#define CDP_HOST_MAX 64

/* Before MPI_Init: Open MPI's defaults that cdp changes, each only where
 * the user has not set it (OMPI_MCA_* in the environment, as mpirun -x or
 * --mca pass it on).  btl_tcp_flags without "put": with Open MPI 4's
 * emulated put over TCP, two large messages sent both ways at once take
 * turns (an exchange takes twice one way); without it they go together,
 * as cdp's rings and the dp all-reduce send them. */
void cdp_comm_preinit(void);

/* What a rank is waiting for, in the schedule's terms, for the watchdog's
 * message: set by the waiter before cdp_comm_wait. */
typedef struct cdp_comm_what {
    const char *op;     /* the instruction (RECV_GRAD, SEND_ACT, ALLREDUCE, ...) or phase */
    int peer;           /* the rank waited on; -1: a collective (every rank) */
    int stage, worker;  /* -1: none */
    int64_t step;       /* 0-based; -1: none */
    int tick;           /* in the segment; -1: none */
} cdp_comm_what;

struct cdp_watchdog;

typedef struct cdp_comm {
    MPI_Comm comm;
    int rank, size;
    int local_rank, local_size;     /* among the ranks on this node */
    int oversubscribed;             /* more ranks on this node than cores */
    /* counters */
    int64_t bytes_sent;             /* all traffic, whole run */
    int64_t collectives;            /* collective calls made through cdp_comm_coll_* */
    int64_t *tick_bytes;            /* bytes posted per tick of the current segment (or NULL) */
    int ntick_bytes;
    int cur_tick;
    /* where the ranks run, gathered by cdp_comm_init: rank r is on host
     * host_of[r] of nhosts, numbered in the order of their lowest rank */
    int nhosts;
    int *host_of;                       /* [size] */
    char (*host_name)[CDP_HOST_MAX];    /* [nhosts] */
    int *host_cpus;                     /* [nhosts]: CPUs online there */
    /* the watchdog (--timeout): 0 seconds and wd NULL when off */
    int timeout;
    cdp_comm_what what;
    struct cdp_watchdog *wd;
} cdp_comm;

/* Collective: ranks, nodes and the host table.  cdp_comm_free releases
 * what it allocated. */
int cdp_comm_init(cdp_comm *c, MPI_Comm comm);
void cdp_comm_free(cdp_comm *c);
/* The name of rank r's host. */
const char *cdp_comm_host(const cdp_comm *c, int r);
int cdp_comm_tag(int kind, int stage);

/* Nonblocking point to point of n bytes; counted on send. */
void cdp_comm_isend(cdp_comm *c, const void *buf, size_t n, int peer, int tag, MPI_Request *req);
void cdp_comm_irecv(cdp_comm *c, void *buf, size_t n, int peer, int tag, MPI_Request *req);

/* Waits for a request.  With more ranks than cores on the node a rank that
 * spins in MPI_Wait steals the core of the rank it waits for, so then it
 * polls and sleeps instead.  The collectives below wait the same way.
 *
 * With the watchdog on (cdp_comm_set_timeout), it polls with a deadline: a
 * wait that sees no completion for `timeout` seconds asks the rank it waits
 * on (c->what.peer; every other rank for a collective) whether it is alive,
 * answering such questions itself meanwhile.  A rank that does not answer
 * within CDP_WATCHDOG_GRACE_S is named, on stderr, as the one that stalled,
 * and the job ends with MPI_Abort(CDP_EXIT_STALLED).  A rank that answers
 * waits itself: the wait gets `timeout` seconds more, after which the job
 * ends anyway (ranks that wait on each other: a deadlock). */
void cdp_comm_wait(cdp_comm *c, MPI_Request *r);

/* Turns the watchdog on (seconds > 0); collective over c->comm, and every
 * rank must pass the same value.  cdp_comm_finalize turns it off again
 * (collective too), before MPI_Finalize. */
void cdp_comm_set_timeout(cdp_comm *c, int seconds);
void cdp_comm_finalize(cdp_comm *c);

/* MPI_Allreduce of small control values (not counted), waited for under
 * the watchdog as `phase` of step `step` (0-based, -1: none). */
void cdp_comm_allreduce_watched(cdp_comm *c, const void *in, void *out, int n, MPI_Datatype type,
                                MPI_Op op, const char *phase, int64_t step);

/* acc[i] += x[i] for i < n where the all-reduce's buffers are (host or
 * device memory), done when it returns: MPI reads acc next. */
typedef void (*cdp_comm_add_fn)(void *ctx, size_t n, float *acc, const float *x);
/* The add on host memory. */
void cdp_comm_add_host(void *ctx, size_t n, float *acc, const float *x);
/* The dp baselines' all-reduce: buf[0..n) summed over the ranks of sub
 * (c->comm, or e.g. the ranks of one stage), in place, as a ring of
 * point-to-point messages: a reduce-scatter, then an all-gather, each
 * P - 1 steps of n/P floats to the right neighbour (2(P-1)/P * n floats a
 * rank, counted as sent).  Chunk j of the P is summed in the order of the
 * ranks from j on: the same bits every run on the same P.  tmp: room for
 * cdp_comm_allreduce_tmp_floats(n, P) floats where buf is; add sums there.
 * Each step waited for under the watchdog (c->what). */
void cdp_comm_allreduce_sum(cdp_comm *c, MPI_Comm sub, float *buf, size_t n, float *tmp,
                            cdp_comm_add_fn add, void *ctx);
size_t cdp_comm_allreduce_tmp_floats(size_t n, int P);
void cdp_comm_bcast(cdp_comm *c, void *buf, size_t n, int root);
void cdp_comm_reduce_sum(cdp_comm *c, const float *send, float *recv, size_t n, int root);

/* Any rank failed?  Every rank passes its own flag; all get the maximum.
 * For start-up checks outside the training loop (not counted). */
int cdp_comm_any(cdp_comm *c, int flag);

#endif
