/* The numerics identities of a job whose rank R runs another build:
 *   mpirun -np P identity_probe R
 * every rank describes its build as cdp_run does (cdp_preflight_identity,
 * on a fixed backend line), rank R with the build line of another version;
 * rank 0 prints what cdp_preflight_numerics finds different ("differ: ..."
 * or "same").  Exit status 1 when the ranks disagree on the verdict or the
 * verdict is not the expected one (differ exactly when R is a rank), 2 on
 * bad input. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <mpi.h>
#include "exec/comm.h"
#include "run/preflight.h"

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    cdp_comm c;
    if (argc != 2 || cdp_comm_init(&c, MPI_COMM_WORLD) != 0) {
        fprintf(stderr, "usage: mpirun -np P identity_probe R\n");
        MPI_Finalize();
        return 2;
    }
    const int other = atoi(argv[1]);
    char id[CDP_IDENTITY_MAX], why[2048] = "";
    cdp_preflight_identity("backend: cpu\nBLAS: OpenBLAS kernel Haswell", id, sizeof id);
    char *build = strstr(id, "build: cdp ");
    if (c.rank == other && build) {   /* another cdp version, the same rest */
        char rest[CDP_IDENTITY_MAX];
        snprintf(rest, sizeof rest, "%s", strchr(build + 11, ','));
        snprintf(build, sizeof id - (size_t)(build - id), "build: cdp 0.0.0-other%s", rest);
    }
    cdp_preflight pf = { 0 };
    int differ = cdp_preflight_numerics(&pf, &c, id, why, sizeof why), lo, hi;
    MPI_Allreduce(&differ, &lo, 1, MPI_INT, MPI_MIN, c.comm);
    MPI_Allreduce(&differ, &hi, 1, MPI_INT, MPI_MAX, c.comm);
    if (c.rank == 0)
        printf(differ ? "differ: %s\n" : "same%s\n", why);
    /* assert: one verdict on every rank, and "differ" exactly when a rank
     * runs the other build */
    const int expected = other >= 0 && other < c.size;
    const int ok = lo == hi && differ == expected;
    if (!ok && c.rank == 0)
        fprintf(stderr, "identity_probe: verdict %d..%d, expected %d\n", lo, hi, expected);
    cdp_preflight_free(&pf);
    cdp_comm_free(&c);
    MPI_Finalize();
    return ok ? 0 : 1;
}
