/* A training job from cdp_run's arguments (cdp/train.h), what cdp_run's
 * main and a program of the library's users both call: the options
 * (parsed on every rank, and refused when ranks differ), --help and the
 * like, the stop signals; then the trainer (cdp_train). */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <mpi.h>
#include "config.h"
#include "cdp/train.h"
#include "backend/backend.h"
#include "exec/comm.h"
#include "models/model.h"
#include "models/model_file.h"
#include "run/options.h"
#include "run/preflight.h"
#include "stop_signals.h"
#include "trainer.h"

/* Agreed failure ends the job with status 1 (trainer.h's FAIL_IF, before
 * there is a trainer). */
#define FAIL_JOB_IF(cond, msg) \
    do { if (cdp_train_failed(comm, (cond), (msg))) return 1; } while (0)

/* Options, the same on every rank; --help, --version and --list-models
 * (then RUN_DONE: the job is complete, status 0). */
static int parse_options(cdp_comm *comm, cdp_options *o, int argc, char **argv,
                         const volatile sig_atomic_t **stop)
{
    static char err[1024];
    const int root = comm->rank == 0;
    cdp_options_defaults(o);
    int bad = cdp_options_parse(o, argc, argv, err, sizeof err);
    FAIL_JOB_IF(bad, err);
    *stop = cdp_stop_signals_catch();   /* from now on SIGTERM/SIGINT mean: stop (and checkpoint) */
    if (o->help || o->version || o->list_models) {
        if (root) {
            if (o->help) cdp_options_help(stdout);
            else if (o->list_models) cdp_model_list(stdout);
            else printf("cdp_run (%s) %s\n", PACKAGE_NAME, PACKAGE_VERSION);
        }
        return RUN_DONE;
    }
    bad = cdp_options_check_outputs(o, err, sizeof err);   /* before anything is written */
    FAIL_JOB_IF(bad, err);
    bad = root && !o->plan && cdp_options_check_output_dirs(o, err, sizeof err);
    FAIL_JOB_IF(bad, err);
    uint64_t h = cdp_options_hash(o), hmin, hmax;
    MPI_Allreduce(&h, &hmin, 1, MPI_UINT64_T, MPI_MIN, comm->comm);
    MPI_Allreduce(&h, &hmax, 1, MPI_UINT64_T, MPI_MAX, comm->comm);
    if (hmin != hmax)
        cdp_preflight_options(comm, h, argc, argv, err, sizeof err);
    FAIL_JOB_IF(hmin != hmax, err);
    bad = cdp_model_file_spec(o->model) &&
          cdp_train_model_file_differs(comm, o->model, err, sizeof err);
    FAIL_JOB_IF(bad, err);
    return 0;
}

void cdp_preinit(int argc, char **argv)
{
    cdp_backend_cpu_preinit(argc, argv);   /* may re-execute the program */
    cdp_stop_signals_shield();   /* before MPI and OpenMP start threads */
    cdp_comm_preinit();
}

int cdp_train_main(MPI_Comm mpi_comm, int argc, char **argv)
{
    static cdp_comm comm_;
    static cdp_options o;
    cdp_comm *comm = &comm_;
    cdp_comm_init(comm, mpi_comm);
    const volatile sig_atomic_t *stop = NULL;
    int rc = parse_options(comm, &o, argc, argv, &stop);
    if (!rc)
        rc = cdp_train(comm, &o, stop);
    cdp_comm_finalize(comm);
    cdp_comm_free(comm);
    cdp_stop_signals_restore();
    return rc == RUN_DONE ? 0 : rc;
}
