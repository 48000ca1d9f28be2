/* What every rank of the trainer agrees on: whether any of them failed,
 * and which message the job prints for it. */
#include <stdio.h>
#include <mpi.h>
#include "exec/comm.h"
#include "trainer.h"

/* 1 when any rank failed; the lowest failing rank prints its message,
 * naming its host when the job spans hosts and not every rank failed (the
 * host that lacks a file, say). */
int cdp_train_failed(cdp_comm *comm, int failed, const char *msg)
{
    int in[2] = { failed ? comm->rank : comm->size, failed != 0 }, out[2];
    /* watched: during training (a checkpoint's write) a lost rank must not
     * hang the others here */
    cdp_comm_allreduce_watched(comm, in, out, 2, MPI_INT, MPI_MIN, "the agreement on errors", -1);
    const int lowest = out[0], all = out[1];
    if (lowest == comm->size)
        return 0;
    if (comm->rank == lowest && comm->nhosts > 1 && !all)
        fprintf(stderr, "cdp_run: error: host %s (rank %d): %s\n", cdp_comm_host(comm, lowest),
                lowest, msg);
    else if (comm->rank == lowest)
        fprintf(stderr, "cdp_run: error: %s\n", msg);
    return 1;
}
