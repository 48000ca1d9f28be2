/* PMPI interposer, loaded with LD_PRELOAD: counts the collective calls a
 * process makes, independently of cdp's own counters, and writes them at
 * MPI_Finalize to $CDP_PMPI_OUT.<rank> as "collectives N p2p_sends M". */
#include <stdio.h>
#include <stdlib.h>
#include <mpi.h>

static long long n_coll, n_send;

#define COUNT_COLL(call) do { n_coll++; return call; } while (0)

int MPI_Allreduce(const void *s, void *r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c)
{ COUNT_COLL(PMPI_Allreduce(s, r, n, t, op, c)); }
int MPI_Reduce(const void *s, void *r, int n, MPI_Datatype t, MPI_Op op, int root, MPI_Comm c)
{ COUNT_COLL(PMPI_Reduce(s, r, n, t, op, root, c)); }
int MPI_Bcast(void *b, int n, MPI_Datatype t, int root, MPI_Comm c)
{ COUNT_COLL(PMPI_Bcast(b, n, t, root, c)); }
int MPI_Barrier(MPI_Comm c)
{ COUNT_COLL(PMPI_Barrier(c)); }
int MPI_Allgather(const void *s, int sn, MPI_Datatype st, void *r, int rn, MPI_Datatype rt, MPI_Comm c)
{ COUNT_COLL(PMPI_Allgather(s, sn, st, r, rn, rt, c)); }
int MPI_Gather(const void *s, int sn, MPI_Datatype st, void *r, int rn, MPI_Datatype rt, int root, MPI_Comm c)
{ COUNT_COLL(PMPI_Gather(s, sn, st, r, rn, rt, root, c)); }
int MPI_Scatter(const void *s, int sn, MPI_Datatype st, void *r, int rn, MPI_Datatype rt, int root, MPI_Comm c)
{ COUNT_COLL(PMPI_Scatter(s, sn, st, r, rn, rt, root, c)); }
int MPI_Reduce_scatter(const void *s, void *r, const int *rc, MPI_Datatype t, MPI_Op op, MPI_Comm c)
{ COUNT_COLL(PMPI_Reduce_scatter(s, r, rc, t, op, c)); }
int MPI_Alltoall(const void *s, int sn, MPI_Datatype st, void *r, int rn, MPI_Datatype rt, MPI_Comm c)
{ COUNT_COLL(PMPI_Alltoall(s, sn, st, r, rn, rt, c)); }
int MPI_Iallreduce(const void *s, void *r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c, MPI_Request *q)
{ COUNT_COLL(PMPI_Iallreduce(s, r, n, t, op, c, q)); }
int MPI_Ireduce(const void *s, void *r, int n, MPI_Datatype t, MPI_Op op, int root, MPI_Comm c, MPI_Request *q)
{ COUNT_COLL(PMPI_Ireduce(s, r, n, t, op, root, c, q)); }
int MPI_Ibcast(void *b, int n, MPI_Datatype t, int root, MPI_Comm c, MPI_Request *q)
{ COUNT_COLL(PMPI_Ibcast(b, n, t, root, c, q)); }

int MPI_Isend(const void *b, int n, MPI_Datatype t, int d, int tag, MPI_Comm c, MPI_Request *q)
{ n_send++; return PMPI_Isend(b, n, t, d, tag, c, q); }

int MPI_Finalize(void)
{
    const char *out = getenv("CDP_PMPI_OUT");
    if (out) {
        int rank = 0;
        PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
        char path[4096];
        snprintf(path, sizeof path, "%s.%d", out, rank);
        FILE *f = fopen(path, "w");
        if (f) {
            fprintf(f, "collectives %lld p2p_sends %lld\n", n_coll, n_send);
            fclose(f);
        }
    }
    return PMPI_Finalize();
}
