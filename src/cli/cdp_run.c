/* cdp_run: trains a network (an MLP, a ResNet, a Vision Transformer) with
 * dp, cdp-v1 or cdp-v2 over MPI.  Here: MPI, the options (parsed on every
 * rank, and refused when ranks differ), --help and the like, and the stop
 * signals; the training itself is the trainer's (src/train/, cdp_train).
 * Exit status: 0 done, 1 an error (one line names it), 3 diverged, 128 +
 * the signal when stopped by SIGTERM or SIGINT. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <mpi.h>
#include "config.h"
#include "backend/backend.h"
#include "io/safetensors.h"
#include "exec/comm.h"
#include "models/model.h"
#include "run/options.h"
#include "run/preflight.h"
#include "cdp/train.h"

static cdp_comm comm;
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

static void catch_stop_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART;   /* reads and writes carry on */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
}


/* Agreed failure ends the phase, and the run, with status 1. */
#define FAIL_IF(cond, msg) do { if (cdp_train_failed(&comm, (cond), (msg))) return 1; } while (0)
/* --help, --version, --list-models: the run is complete, status 0. */
#define RUN_DONE (-1)

/* Options, the same on every rank; --help, --version and --list-models. */
static int parse_options(cdp_options *o, int argc, char **argv)
{
    static char err[1024];
    const int root = comm.rank == 0;
    cdp_options_defaults(o);
    int bad = cdp_options_parse(o, argc, argv, err, sizeof err);
    FAIL_IF(bad, err);
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
    FAIL_IF(bad, err);
    bad = root && !o->plan && cdp_options_check_output_dirs(o, err, sizeof err);
    FAIL_IF(bad, err);
    uint64_t h = cdp_options_hash(o), hmin, hmax;
    MPI_Allreduce(&h, &hmin, 1, MPI_UINT64_T, MPI_MIN, comm.comm);
    MPI_Allreduce(&h, &hmax, 1, MPI_UINT64_T, MPI_MAX, comm.comm);
    if (hmin != hmax)
        cdp_preflight_options(&comm, h, argc, argv, err, sizeof err);
    FAIL_IF(hmin != hmax, err);
    return 0;
}

int main(int argc, char **argv)
{
    cdp_backend_cpu_preinit(argc, argv);
    MPI_Init(&argc, &argv);
    cdp_comm_init(&comm, MPI_COMM_WORLD);
    static cdp_options o;
    int rc = parse_options(&o, argc, argv);
    if (!rc)
        rc = cdp_train(&comm, &o, &got_signal);
    cdp_comm_finalize(&comm);
    cdp_comm_free(&comm);
    MPI_Finalize();
    return rc == RUN_DONE ? 0 : rc;
}
