#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
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
    MPI_Allreduce(MPI_IN_PLACE, buf, as_count(n), MPI_FLOAT, MPI_SUM, sub);
    c->collectives++;
    count(c, (int64_t)cdp_comm_allreduce_bytes(size, (double)n * sizeof(float)));
}

void cdp_comm_bcast(cdp_comm *c, void *buf, size_t n, int root)
{
    MPI_Bcast(buf, as_count(n), MPI_BYTE, root, c->comm);
    c->collectives++;
    count(c, (int64_t)cdp_comm_bcast_bytes(c->size, (double)n));
}

void cdp_comm_reduce_sum(cdp_comm *c, const float *send, float *recv, size_t n, int root)
{
    MPI_Reduce(c->rank == root ? MPI_IN_PLACE : send, c->rank == root ? recv : NULL,
               as_count(n), MPI_FLOAT, MPI_SUM, root, c->comm);
    c->collectives++;
    count(c, (int64_t)cdp_comm_bcast_bytes(c->size, (double)n * sizeof(float)));
}

int cdp_comm_any(cdp_comm *c, int flag)
{
    int out = 0;
    MPI_Allreduce(&flag, &out, 1, MPI_INT, MPI_MAX, c->comm);
    return out;
}
