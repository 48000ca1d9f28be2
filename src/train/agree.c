/* What every rank of the trainer agrees on: whether any of them failed,
 * and which message the job prints for it. */
#include <stdint.h>
#include <stdio.h>
#include <mpi.h>
#include "exec/comm.h"
#include "util/rng.h"
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

/* the file's bytes hashed; 0 when it cannot be read */
static int hash_file(const char *path, uint64_t *h)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0;
    unsigned char buf[1 << 16];
    size_t n;
    *h = 0x6d6f64656c66696cULL;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0)
        for (size_t i = 0; i < n; i++)
            *h = cdp_mix64(*h ^ buf[i]);
    const int ok = !ferror(f);
    fclose(f);
    return ok;
}

int cdp_train_model_file_differs(cdp_comm *comm, const char *path, char *msg, size_t len)
{
    uint64_t h = 0, h0;
    int mine[1] = { hash_file(path, &h) }, read0;
    h0 = h;
    read0 = mine[0];
    MPI_Bcast(&h0, 1, MPI_UINT64_T, 0, comm->comm);
    MPI_Bcast(&read0, 1, MPI_INT, 0, comm->comm);
    int key = read0 && mine[0] && h != h0 ? comm->rank : comm->size, d;
    MPI_Allreduce(&key, &d, 1, MPI_INT, MPI_MIN, comm->comm);
    if (d == comm->size)
        return 0;
    char hd[300] = "", h0s[300] = "";
    if (comm->nhosts > 1) {
        snprintf(hd, sizeof hd, " (host %s)", cdp_comm_host(comm, d));
        snprintf(h0s, sizeof h0s, " (host %s)", cdp_comm_host(comm, 0));
    }
    snprintf(msg, len, "--model %s: rank %d%s reads another file under this path than rank "
             "0%s (their contents differ); every rank needs the same model file", path, d, hd, h0s);
    return 1;
}
