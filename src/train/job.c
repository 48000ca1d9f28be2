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
#include "io/safetensors.h"
#include "models/model.h"
#include "models/model_file.h"
#include "run/options.h"
#include "run/preflight.h"
#include "trainer.h"

/* SIGTERM and SIGINT: the first one asks every rank to stop at the next
 * segment boundary (checkpoint written when --checkpoint is given) and to
 * exit with 128 + the signal; a second one ends the process at once, by
 * the signal's default action, after removing the temporary file of a
 * checkpoint or weights file being written (the previous file stays). */
static volatile sig_atomic_t got_signal;

static void on_signal(int sig)
{
    if (!got_signal) {
        got_signal = sig;
        return;
    }
    cdp_st_discard_pending();
    signal(sig, SIG_DFL);
    raise(sig);
}

static struct sigaction before[2];   /* the handlers to restore */
static int caught;

static void catch_stop_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART;   /* reads and writes carry on */
    sigemptyset(&sa.sa_mask);
    got_signal = 0;
    sigaction(SIGTERM, &sa, &before[0]);
    sigaction(SIGINT, &sa, &before[1]);
    caught = 1;
}

static void restore_signals(void)
{
    if (!caught)
        return;
    sigaction(SIGTERM, &before[0], NULL);
    sigaction(SIGINT, &before[1], NULL);
    caught = 0;
}

/* Agreed failure ends the job with status 1 (trainer.h's FAIL_IF, before
 * there is a trainer). */
#define FAIL_JOB_IF(cond, msg) \
    do { if (cdp_train_failed(comm, (cond), (msg))) return 1; } while (0)

/* Options, the same on every rank; --help, --version and --list-models
 * (then RUN_DONE: the job is complete, status 0). */
static int parse_options(cdp_comm *comm, cdp_options *o, int argc, char **argv)
{
    static char err[1024];
    const int root = comm->rank == 0;
    cdp_options_defaults(o);
    int bad = cdp_options_parse(o, argc, argv, err, sizeof err);
    FAIL_JOB_IF(bad, err);
    catch_stop_signals();   /* from now on SIGTERM/SIGINT mean: stop (and checkpoint) */
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
    cdp_backend_cpu_preinit(argc, argv);
}

int cdp_train_main(MPI_Comm mpi_comm, int argc, char **argv)
{
    static cdp_comm comm_;
    static cdp_options o;
    cdp_comm *comm = &comm_;
    cdp_comm_init(comm, mpi_comm);
    int rc = parse_options(comm, &o, argc, argv);
    if (!rc)
        rc = cdp_train(comm, &o, &got_signal);
    cdp_comm_finalize(comm);
    cdp_comm_free(comm);
    restore_signals();
    return rc == RUN_DONE ? 0 : rc;
}
