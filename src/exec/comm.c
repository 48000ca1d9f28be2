#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include "cdp/comm.h"

int cdp_comm_init(cdp_comm *c, MPI_Comm comm)
{
    c->comm = comm;
    MPI_Comm_rank(comm, &c->rank);
    MPI_Comm_size(comm, &c->size);
    MPI_Comm node;
    MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, c->rank, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &c->local_rank);
    MPI_Comm_size(node, &c->local_size);
    MPI_Comm_free(&node);
    c->oversubscribed = c->local_size > sysconf(_SC_NPROCESSORS_ONLN);
    c->bytes_sent = 0;
    c->collectives = 0;
    c->tick_bytes = NULL;
    c->ntick_bytes = 0;
    c->cur_tick = 0;
    return 0;
}

double cdp_comm_allreduce_bytes(int P, double n)
{
    return 2.0 * (P - 1) / P * n;
}

double cdp_comm_bcast_bytes(int P, double n)
{
    return (double)(P - 1) / P * n;
}

void cdp_comm_wait(cdp_comm *c, MPI_Request *r)
{
    if (!c->oversubscribed) {
        MPI_Wait(r, MPI_STATUS_IGNORE);
        return;
    }
    for (int spins = 0;; spins++) {
        int done = 0;
        MPI_Test(r, &done, MPI_STATUS_IGNORE);
        if (done) return;
        if (spins >= 64) {
            struct timespec ts = { 0, 20000 };
            nanosleep(&ts, NULL);
        }
    }
}

int cdp_comm_tag(int kind, int stage)
{
    return kind * 1024 + stage;
}

static void count(cdp_comm *c, int64_t bytes)
{
    c->bytes_sent += bytes;
    if (c->tick_bytes && c->cur_tick >= 0 && c->cur_tick < c->ntick_bytes)
        c->tick_bytes[c->cur_tick] += bytes;
}

static int as_count(size_t n)
{
    if (n > (size_t)INT_MAX) {
        fprintf(stderr, "cdp: message of %zu bytes is larger than MPI's int count\n", n);
        abort();
    }
    return (int)n;
}

void cdp_comm_isend(cdp_comm *c, const void *buf, size_t n, int peer, int tag, MPI_Request *req)
{
    MPI_Isend(buf, as_count(n), MPI_BYTE, peer, tag, c->comm, req);
    count(c, (int64_t)n);
}

void cdp_comm_irecv(cdp_comm *c, void *buf, size_t n, int peer, int tag, MPI_Request *req)
{
    MPI_Irecv(buf, as_count(n), MPI_BYTE, peer, tag, c->comm, req);
}

void cdp_comm_allreduce_sum(cdp_comm *c, float *buf, size_t n)
{
    cdp_comm_allreduce_sum_on(c, c->comm, buf, n);
}

void cdp_comm_allreduce_sum_on(cdp_comm *c, MPI_Comm sub, float *buf, size_t n)
{
    int size;
    MPI_Comm_size(sub, &size);
    MPI_Request r;
    MPI_Iallreduce(MPI_IN_PLACE, buf, as_count(n), MPI_FLOAT, MPI_SUM, sub, &r);
    cdp_comm_wait(c, &r);
    c->collectives++;
    count(c, (int64_t)cdp_comm_allreduce_bytes(size, (double)n * sizeof(float)));
}

void cdp_comm_bcast(cdp_comm *c, void *buf, size_t n, int root)
{
    MPI_Request r;
    MPI_Ibcast(buf, as_count(n), MPI_BYTE, root, c->comm, &r);
    cdp_comm_wait(c, &r);
    c->collectives++;
    count(c, (int64_t)cdp_comm_bcast_bytes(c->size, (double)n));
}

void cdp_comm_reduce_sum(cdp_comm *c, const float *send, float *recv, size_t n, int root)
{
    MPI_Request r;
    MPI_Ireduce(c->rank == root ? MPI_IN_PLACE : send, c->rank == root ? recv : NULL,
                as_count(n), MPI_FLOAT, MPI_SUM, root, c->comm, &r);
    cdp_comm_wait(c, &r);
    c->collectives++;
    count(c, (int64_t)cdp_comm_bcast_bytes(c->size, (double)n * sizeof(float)));
}

int cdp_comm_any(cdp_comm *c, int flag)
{
    int out = 0;
    MPI_Allreduce(&flag, &out, 1, MPI_INT, MPI_MAX, c->comm);
    return out;
}
