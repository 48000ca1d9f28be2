/* cdp_run: trains a network (an MLP, a ResNet, a Vision Transformer) with
 * dp, cdp-v1 or cdp-v2 over MPI.  Here: MPI around one training job of the
 * library's (cdp/train.h: the options, --help and the like, the stop
 * signals, the trainer of src/train/), which every program of the
 * library's users runs the same way.  Exit status: 0 done, 1 an error (one
 * line names it), 3 diverged, 128 + the signal when stopped by SIGTERM or
 * SIGINT. */
#include <mpi.h>
#include "cdp/train.h"

int main(int argc, char **argv)
{
    cdp_preinit(argc, argv);
    MPI_Init(&argc, &argv);
    int rc = cdp_train_main(MPI_COMM_WORLD, argc, argv);
    MPI_Finalize();
    return rc;
}
