/* The executor's MPI requests: posting sends and receives (staged through
 * host memory when MPI cannot read the backend's), progressing them between
 * kernels, waiting for the ones a buffer or a tick depends on, releasing
 * buffers once their sends are done, and the collectives of the dp
 * baselines.  See exec.c for how the instructions use them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "util/grow.h"
#include "exec_internal.h"

/* ------------------------------------------------------------ requests */

/* Host staging buffers (pinned where the backend offers it), cached by
 * size so that the training loop does not allocate. */
static void *staging_get(cdp_exec *x, size_t bytes)
{
    for (size_t k = 0; k < x->nstaging; k++)
        if (x->staging[k].bytes == bytes) {
            void *p = x->staging[k].p;
            x->staging[k] = x->staging[--x->nstaging];
            return p;
        }
    void *p = x->be->alloc_host ? x->be->alloc_host(bytes) : malloc(bytes);
    if (!p) abort();
    return p;
}

static void staging_put(cdp_exec *x, void *p, size_t bytes)
{
    CDP_GROW(x->staging, x->nstaging, x->capstaging, 16);
    x->staging[x->nstaging++] = (cdp_actmem_block){ bytes, p };
}

static void wait_req(cdp_exec *x, pending *p)
{
    x->comm->what = p->what;
    cdp_comm_wait(x->comm, &p->req);
}

static void finish(cdp_exec *x, size_t k)
{
    pending *p = &x->pend[k];
    if (p->staging) {
        if (p->is_recv)
            x->be->to_device(p->buf, p->staging, p->bytes);
        staging_put(x, p->staging, p->bytes);
    }
    if (p->forward) {   /* posted by the caller's flush: pend may grow */
        CDP_GROW(x->fwdq, x->nfwdq, x->capfwdq, 8);
        x->fwdq[x->nfwdq++] = (forward_job){ p->buf, p->bytes, p->forward };
    }
    x->pend[k] = x->pend[--x->npend];
}

int cdp_req_busy(const cdp_exec *x, const void *buf, size_t bytes)
{
    const char *b = buf;
    for (size_t k = 0; k < x->npend; k++)
        if (x->pend[k].buf < b + bytes && b < x->pend[k].buf + x->pend[k].bytes)
            return 1;
    return 0;
}

void cdp_req_progress(cdp_exec *x)
{
    for (size_t k = 0; k < x->npend;) {
        int done = 0;
        MPI_Test(&x->pend[k].req, &done, MPI_STATUS_IGNORE);
        if (done) finish(x, k);
        else k++;
    }
    for (size_t k = 0; k < x->ndefer;) {
        deferred *d = &x->defer[k];
        if (!cdp_req_busy(x, d->p, d->bytes)) {
            cdp_actmem_free_sent(d->mem, d->p, d->bytes);
            x->defer[k] = x->defer[--x->ndefer];
        } else {
            k++;
        }
    }
    cdp_req_flush_forwards(x);
}

/* Waits for the requests (receives only: recv_only) that touch
 * [buf, buf + bytes). */
static void wait_overlapping(cdp_exec *x, const void *buf, size_t bytes, int recv_only)
{
    const char *b = buf;
    for (size_t k = 0; k < x->npend;) {
        pending *p = &x->pend[k];
        if ((p->is_recv || !recv_only) && p->buf < b + bytes && b < p->buf + p->bytes) {
            wait_req(x, p);
            finish(x, k);
        } else {
            k++;
        }
    }
    cdp_req_flush_forwards(x);
}

void cdp_req_wait_range(cdp_exec *x, const void *buf, size_t bytes)
{
    wait_overlapping(x, buf, bytes, 0);
}

/* A send whose receiver posts at tick `due` must be done by the start of
 * tick due + 1 + send_slack: the memory sends hold then follows the
 * timeline, not how far this rank runs ahead.  A rendezvous transfer
 * completes only when the receiver calls into MPI, so with no slack every
 * send ties the sender to the receiver's tick: on 2 ranks (N = 4, the
 * default model) that lock-step cost 12-15% per step under cdp-v1/cdp-v2,
 * and one tick of slack removes it (bench/RESULTS.md).  Under zero, whose
 * point is the smallest resident state, the slack let partial sums pile up
 * one stage buffer higher (bench/throughput/table1.sh: 13.0 against 12.0 MiB per rank)
 * for no measurable gain in step time, so zero keeps none.  Zero also posts
 * a partial sum's receive at the very end of the tick before its use
 * (schedule.c), so the sender lets go of the sum before either rank
 * allocates for that tick, whichever of them runs ahead (when the receive
 * came with the use, a rank that ran behind its receiver held one stage
 * buffer more: 12.0 against 11.0 MiB per rank in bench/throughput/table1.sh). */
void cdp_req_wait_due(cdp_exec *x, int tick)
{
    tick -= x->send_slack;
    for (size_t k = 0; k < x->npend;) {
        pending *p = &x->pend[k];
        if (!p->is_recv && p->due >= 0 && p->due < tick) {
            wait_req(x, p);
            finish(x, k);
        } else {
            k++;
        }
    }
    cdp_req_flush_forwards(x);
}

void cdp_req_wait_all(cdp_exec *x)
{
    while (x->npend) {
        wait_req(x, &x->pend[x->npend - 1]);
        finish(x, x->npend - 1);
        cdp_req_flush_forwards(x);
    }
    cdp_req_progress(x);
}

/* Gives the buffer back to its allocator once no request uses it. */
void cdp_req_release_later(cdp_exec *x, cdp_actmem *mem, void *p, size_t bytes)
{
    if (!p) return;
    cdp_actmem_let_go(mem, bytes);
    CDP_GROW(x->defer, x->ndefer, x->capdefer, 16);
    x->defer[x->ndefer++] = (deferred){ mem, p, bytes };
}

void cdp_req_release_now(cdp_exec *x, cdp_actmem *mem, void *p, size_t bytes)
{
    if (!p) return;
    cdp_req_wait_range(x, p, bytes);
    cdp_actmem_free(mem, p, bytes);
}

static pending *new_pending(cdp_exec *x, void *buf, size_t bytes, int is_recv)
{
    CDP_GROW(x->pend, x->npend, x->cappend, 16);
    pending *p = &x->pend[x->npend++];
    *p = (pending){ MPI_REQUEST_NULL, buf, bytes, NULL, is_recv, -1, x->cur, NULL };
    if (!x->mpi_direct)
        p->staging = staging_get(x, bytes);
    return p;
}

void cdp_req_post_send(cdp_exec *x, const void *buf, size_t bytes, int peer, int tag, int due)
{
    /* a buffer with a receive still pending into it is sent once that has
     * arrived.  The schedules never do this (a full sum is passed on by
     * cdp_req_flush_forwards, after its receive completed), so this finds
     * nothing; it stays so that a schedule that did would send the bytes
     * received, not stale ones (one scan of the pending list a send) */
    wait_overlapping(x, buf, bytes, 1);
    pending *p = new_pending(x, (void *)buf, bytes, 0);
    p->due = due;
    if (p->staging)
        x->be->to_host(p->staging, buf, bytes);
    else
        x->be->sync();
    cdp_comm_isend(x->comm, p->staging ? p->staging : buf, bytes, peer, tag, &p->req);
}

void cdp_req_post_recv_forward(cdp_exec *x, void *buf, size_t bytes, int peer, int tag,
                               const cdp_instr *forward)
{
    cdp_req_wait_range(x, buf, bytes);  /* earlier sends from this buffer must be done */
    pending *p = new_pending(x, buf, bytes, 1);
    p->forward = forward;
    if (!p->staging)
        x->be->sync();
    cdp_comm_irecv(x->comm, p->staging ? p->staging : buf, bytes, peer, tag, &p->req);
}

void cdp_req_post_recv(cdp_exec *x, void *buf, size_t bytes, int peer, int tag)
{
    cdp_req_post_recv_forward(x, buf, bytes, peer, tag, NULL);
}

/* Posts the sends of the full sums that have arrived and go on: counted in
 * the tick of their SEND_FULL, as the schedule has them (a send posted from
 * inside another post's wait waits for the loop here). */
void cdp_req_flush_forwards(cdp_exec *x)
{
    if (x->flushing) return;
    x->flushing = 1;
    while (x->nfwdq) {
        const forward_job j = x->fwdq[--x->nfwdq];
        const cdp_comm_what cur = x->cur;
        const int tick = x->comm->cur_tick;
        x->cur = (cdp_comm_what){ cdp_opcode_name(j.in->op), j.in->peer, j.in->stage, -1,
                                  x->k0 + j.in->step, j.in->tick };
        x->comm->cur_tick = j.in->tick;
        cdp_req_post_send(x, j.buf, j.bytes, j.in->peer, cdp_comm_tag(CDP_TAG_FULL, j.in->stage), j.in->due);
        x->comm->cur_tick = tick;
        x->cur = cur;
    }
    x->flushing = 0;
}


/* the ring's add where MPI reads the backend's buffers directly */
static void add_on_backend(void *ctx, size_t n, float *acc, const float *v)
{
    const cdp_backend *be = ctx;
    be->add(n, acc, v);
    be->sync();
}

/* The dp all-reduce of h (host staging, or the backend's buffer where MPI
 * reads it), with the ring's scratch where h lives. */
static void allreduce(cdp_exec *x, coll_kind kind, float *h, size_t n)
{
    MPI_Comm sub = kind == COLL_ALLREDUCE_STAGE ? x->stage_comm : x->comm->comm;
    const int P = kind == COLL_ALLREDUCE_STAGE ? x->stage_comm_size : x->comm->size;
    const size_t tb = cdp_comm_allreduce_tmp_floats(n, P) * sizeof(float);
    if (x->mpi_direct) {
        if (x->ring_tmp_bytes < tb) {
            x->be->free(x->ring_tmp);
            x->ring_tmp = x->be->alloc(tb);
            if (!x->ring_tmp) abort();
            x->ring_tmp_bytes = tb;
        }
        cdp_comm_allreduce_sum(x->comm, sub, h, n, x->ring_tmp, add_on_backend, (void *)x->be);
        return;
    }
    float *tmp = staging_get(x, tb);
    cdp_comm_allreduce_sum(x->comm, sub, h, n, tmp, cdp_comm_add_host, NULL);
    staging_put(x, tmp, tb);
}

void cdp_req_collective(cdp_exec *x, coll_kind kind, float *buf, size_t n, int root)
{
    /* One rank in the communicator: the sum is the buffer itself and the
     * broadcast a no-op, so neither MPI nor the host staging runs (on a
     * GPU without CUDA-aware MPI the staging copied the whole gradient to
     * the host and back every step of a 1-rank dp run). */
    if ((kind == COLL_ALLREDUCE_STAGE ? x->stage_comm_size : x->comm->size) == 1)
        return;
    float *h = buf;
    const size_t bytes = n * sizeof(float);
    x->comm->what = x->cur;
    x->comm->what.peer = -1;   /* every rank (a REDUCE's or BCAST's peer is its root) */
    if (!x->mpi_direct) {
        h = staging_get(x, bytes);
        if (kind != COLL_BCAST || x->comm->rank == root)
            x->be->to_host(h, buf, bytes);
    } else {
        x->be->sync();
    }
    switch (kind) {
    case COLL_ALLREDUCE: case COLL_ALLREDUCE_STAGE: allreduce(x, kind, h, n); break;
    case COLL_BCAST: cdp_comm_bcast(x->comm, h, bytes, root); break;
    case COLL_REDUCE: cdp_comm_reduce_sum(x->comm, h, h, n, root); break;
    }
    if (!x->mpi_direct) {
        if (kind != COLL_REDUCE || x->comm->rank == root)
            x->be->to_device(buf, h, bytes);
        staging_put(x, h, bytes);
    }
}
