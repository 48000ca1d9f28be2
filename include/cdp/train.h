/* cdp's public API: training.
 *
 * A training job is described by cdp_run's options (cdp_run --help,
 * doc/reference.md): the model (--model, a preset or a model of one's own,
 * cdp/builder.h), the data, the rule, the optimizer, the outputs
 * (--save-weights, --metrics, --checkpoint).  It prints what cdp_run
 * prints, and its messages start with "cdp_run:" as cdp_run's do. */
#ifndef CDP_PUBLIC_TRAIN_H
#define CDP_PUBLIC_TRAIN_H

#include <mpi.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Call first thing in main, before MPI_Init: makes sure the BLAS library
 * runs the kernel this CPU supports and that the OpenMP and BLAS thread
 * pools do not fight, by re-executing the program (argv) with the
 * environment they need when it lacks it.  May therefore not return.
 * Then blocks SIGTERM and SIGINT in the calling thread, so that every
 * thread started later (MPI's, OpenMP's) inherits the mask, and starts the
 * thread that takes them ("cdp-signals"): a handler must never run on a
 * thread inside oneDNN's JIT GEMM, which points its stack at the heap. */
void cdp_preinit(int argc, char **argv);

/* Runs the training job that cdp_run's arguments argv[1 .. argc) describe
 * (argv[0]: the program's name) on the ranks of comm; collective: every
 * rank of comm calls it with the same arguments.  MPI must be initialised
 * and stays so.  While it runs, SIGTERM and SIGINT stop the job at the
 * next segment boundary (with a checkpoint when --checkpoint is given);
 * the previous handlers are restored on return.  Returns cdp_run's exit
 * status (doc/reference.md, section 8): 0 done (also after --help,
 * --version, --list-models and --plan), 1 an error (one line on stderr,
 * "cdp_run: error: ...", printed once, by the lowest failing rank), 3 the
 * training diverged, 128 + the signal when stopped by one.  A stalled rank
 * (--timeout) ends the whole job with MPI_Abort, status 4.  Jobs run one
 * at a time (never from two threads at once); another may follow once it
 * has returned. */
int cdp_train_main(MPI_Comm comm, int argc, char **argv);

#ifdef __cplusplus
}
#endif

#endif
