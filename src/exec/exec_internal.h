/* The executor's internals, shared by exec.c (the instructions) and
 * exec_requests.c (MPI requests, staging and collectives).  Not installed. */
#ifndef CDP_EXEC_INTERNAL_H
#define CDP_EXEC_INTERNAL_H

#include "exec/actmem.h"
#include "io/batch.h"
#include "exec/exec.h"

typedef struct pending {
    MPI_Request req;
    char *buf;          /* backend memory the request reads or writes */
    size_t bytes;
    void *staging;      /* host copy when the backend's memory is not MPI-addressable */
    int is_recv;
    int due;            /* sends: tick at which the receiver has posted (-1: none) */
    cdp_comm_what what; /* the instruction that posted it (the watchdog's message) */
    const cdp_instr *forward;   /* receives: the SEND_FULL that passes it on, posted
                                 * as soon as it has arrived (NULL: none) */
} pending;

/* a received full sum to pass on (forward), queued by the request that
 * received it and posted by cdp_req_flush_forwards */
typedef struct forward_job {
    char *buf;
    size_t bytes;
    const cdp_instr *in;
} forward_job;

typedef struct deferred {
    cdp_actmem *mem;
    void *p;
    size_t bytes;
} deferred;

struct cdp_exec {
    cdp_exec_config cfg;
    const cdp_model *m;
    const cdp_backend *be;
    cdp_comm *comm;
    int N, B, L;
    int mpi_direct;             /* MPI may read/write backend memory directly */
    unsigned char *holds;       /* [L] */
    int holds_all;              /* every rank holds every stage */
    MPI_Comm stage_comm;        /* model-parallel dp: the ranks of this rank's stage */
    int stage_comm_size;        /* its ranks (0: none) */

    cdp_actmem state, mem;
    /* the per-stage arrays below have L entries each (stage_arrays_alloc):
     * sized by the model, whatever number of stages it was cut into */
    float **param[2], **mom, **full;
    float **acc, *(*borrowed)[2];
    int64_t (*borrowed_version)[2];
    float *acc_block;           /* replicated dp: one block, one all-reduce */
    float *scratch, *ws, *input_ws;
    size_t scratch_bytes;       /* the largest stage's gradient */
    int acc_in_place;           /* BWD adds to acc (cdp_model_accumulate_exact) */
    unsigned char *reuse_grad;  /* l's full sum is finalized here and its
                                 * next first contribution made here: APPLY clears it */
    float **zeroed;             /* full[l] after an APPLY that cleared it: the next
                                 * first backward of l adds to it (NULL: none) */
    float **dead_zeroed;        /* a parameter slot cleared after its version's
                                 * last read, for the APPLY that overwrites it */
    int full_transient;         /* zero: full[l] lives from arrival to APPLY */
    int send_slack;             /* ticks a send may outlive its due tick (wait_due) */
    int64_t input_step;         /* the micro-batch input_ws holds: step and worker */
    int input_worker;
    int64_t *slot_version[2];
    int *nslots;
    int64_t *updates;

    /* activations of (worker, stage), index i*L + l */
    float **act, **dact, **in_act, **x;
    int32_t **labels;
    size_t *act_bytes;

    uint8_t *host_pixels;
    int32_t *host_labels;
    double *stats;              /* backend memory: loss sum, correct */
    float *ring_tmp;            /* the all-reduce's scratch, backend memory (mpi_direct) */
    size_t ring_tmp_bytes;
    uint64_t *check;            /* [2], backend memory: the state check's answer */
    int64_t samples;
    uint64_t serial;              /* this executor among the process's (parameter tags) */
    int64_t bad_step;           /* first forward whose loss was not finite, -1: none */
    int bad_worker;             /* (host-memory backends only: a check per forward) */
    cdp_batcher batch;

    pending *pend;
    size_t npend, cappend;
    cdp_actmem_block *staging;  /* free host staging buffers, reused by size */
    size_t nstaging, capstaging;
    deferred *defer;
    size_t ndefer, capdefer;
    forward_job *fwdq;
    size_t nfwdq, capfwdq;
    int flushing;               /* cdp_req_flush_forwards is posting */
    const cdp_instr **forward_of;   /* [program length]: a RECV_FULL's forward, or NULL */
    size_t *recv_of;            /* [program length]: cdp_program_forwards' answer */
    size_t cap_forward;
    const cdp_instr *prog;      /* the segment's program (its first instruction) */
    int64_t k0;                 /* the segment's first step */

    int64_t *tick_act, *tick_bytes;
    int ntick;
    int seg_ticks;   /* the last segment's ticks, as the schedule counts them;
                      * tick_act and tick_bytes hold one more, its drain, where
                      * the last updates pass full sums on */

    cdp_comm_what cur;          /* the instruction being executed */

    cdp_trace_event *ev;
    size_t nev, capev;
    double t_origin;   /* cdp_now_s() at init: the trace's zero */
};

/* ---- exec_requests.c: every MPI request the executor posts is tracked, so
 * that a buffer is touched only once no request uses it (wait_range, busy)
 * and freed only once its sends are done (release_later) */

/* a collective on backend memory, staged through the host when needed */
typedef enum { COLL_ALLREDUCE, COLL_ALLREDUCE_STAGE, COLL_BCAST, COLL_REDUCE } coll_kind;

int cdp_req_busy(const cdp_exec *x, const void *buf, size_t bytes);
void cdp_req_progress(cdp_exec *x);
void cdp_req_wait_range(cdp_exec *x, const void *buf, size_t bytes);
void cdp_req_wait_due(cdp_exec *x, int tick);
void cdp_req_wait_all(cdp_exec *x);
void cdp_req_release_later(cdp_exec *x, cdp_actmem *mem, void *p, size_t bytes);
void cdp_req_release_now(cdp_exec *x, cdp_actmem *mem, void *p, size_t bytes);
void cdp_req_post_send(cdp_exec *x, const void *buf, size_t bytes, int peer, int tag, int due);
void cdp_req_post_recv(cdp_exec *x, void *buf, size_t bytes, int peer, int tag);
/* a receive whose buffer is passed on by `forward` (a SEND_FULL) once it
 * has arrived, at the first progress or wait after that */
void cdp_req_post_recv_forward(cdp_exec *x, void *buf, size_t bytes, int peer, int tag,
                               const cdp_instr *forward);
void cdp_req_flush_forwards(cdp_exec *x);
void cdp_req_collective(cdp_exec *x, coll_kind kind, float *buf, size_t n, int root);

#endif
