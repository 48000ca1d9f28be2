/* Internal to src/train: the trainer's entry, the state its phases hand on
 * to each other (one struct, one run), and what the phases share. */
#ifndef CDP_TRAIN_TRAINER_H
#define CDP_TRAIN_TRAINER_H

#include <signal.h>
#include <stdio.h>
#include <mpi.h>
#include "io/checkpoint.h"
#include "exec/comm.h"
#include "io/data.h"
#include "exec/exec.h"
#include "models/layer_times.h"
#include "models/model.h"
#include "run/options.h"
#include "run/preflight.h"
#include "run/report.h"
#include "sched/schedule.h"

/* Runs the job of o (options parsed and the same on every rank: job.c's
 * cdp_train_main does that); collective.  stop: the stop signal caught so
 * far (0 none), read at segment boundaries: every rank stops at the same
 * one, with a checkpoint when --checkpoint is given.  Returns the exit
 * status: 0 done, 1 an error (said once, by the lowest failing rank), 3
 * diverged, 128 + the signal when stopped. */
int cdp_train(cdp_comm *comm, const cdp_options *o, const volatile sig_atomic_t *stop);

/* Collective: 1 when failed on any rank, whose message the lowest such
 * rank prints as "cdp_run: error: ..." (naming its host when the job spans
 * hosts and not every rank failed). */
int cdp_train_failed(cdp_comm *comm, int failed, const char *msg);
/* --model FILE.json: 1 when some rank reads other bytes under the path
 * than rank 0 (the options' hash covers the path only: another host may
 * hold another file there), with msg naming the first such rank; a rank
 * that cannot read the file is left to the model's build, which says so. */
int cdp_train_model_file_differs(cdp_comm *comm, const char *path, char *msg, size_t len);

/* Everything the phases hand on to each other. */
typedef struct trainer {
    cdp_comm *comm;
    const volatile sig_atomic_t *stop;   /* the first stop signal caught, 0: none */
    cdp_options o;
    int root, P, N, L, threads;
    cdp_model_config mc;
    cdp_model model;
    int have_model;
    cdp_sched_config sc;
    cdp_schedule roles, sched;
    int have_roles, sched_K;
    const cdp_backend *be;
    cdp_data data;
    int64_t spe, total, k;
    int nepochs;
    float *params, *final_params, *init_params, *prev_params;
    float *optim_state;   /* cdp_optim_state_buffers() x nparams floats */
    cdp_exec_config xc;
    cdp_exec *x;
    FILE *metrics;
    char metrics_err[1024];   /* the first failed write to it ("" none), reported at the
                               * next agreed check (metrics_written) */
    cdp_figures fig;
    double test_loss, test_acc, samples_s;
    uint64_t numerics_hash;
    char numerics_text[CDP_NUMERICS_TEXT_MAX];   /* the same options, named in checkpoints */
    int64_t ckpt_step;   /* step of the last checkpoint written by this run, -1: none */
    /* --checkpoint: the last good state (check_state), what a diverged
     * run writes: P(good_step), P(good_step - 1), the optimizer state, of
     * this rank's stages (zero elsewhere); good_step -1: none */
    float *good[3];
    int64_t good_step;
    int64_t checked_step;         /* the last step check_state saw, -1: none */
    int state_bad;                /* the divergence is in the state, not the loss */
    size_t bad_index;             /* then the first parameter index whose state is not */
    char ckpt_path[4200];         /* its file */
    double last_progress;         /* wall time of the last progress line */
    int progress_shown;           /* a terminal line to clear */
    int collapse_warned;          /* warn_collapse said it once */
    double log_stats[3], log_time;  /* --log-every: the window since the last line */
    int64_t log_steps;
    cdp_layer_times lt;           /* --layer-times */
    /* --layer-times-out: the rows after the first segment, and the first
     * segments' steps and times (the first one's extra is the start cost) */
    cdp_layer_times lt_first;
    int seg_K[8], nseg;
    double seg_s[8];
    cdp_preflight pf;             /* every rank's numerics identity (rank 0) */
    char err[1024];
} trainer;

/* Exit status of a run whose loss went non-finite. */
#define DIVERGED 3

/* In a phase: agreed failure ends the phase, and the run, with status 1. */
#define FAIL_IF(cond, msg) do { if (cdp_train_failed(r->comm, (cond), (msg))) return 1; } while (0)
/* A phase's "the run is complete" (--plan): status 0. */
#define RUN_DONE (-1)

/* The phases, in order (setup.c, loop.c, results.c): 0, 1 (an error, said),
 * RUN_DONE, or an exit status */
int train_model_and_plan(trainer *r);
int train_prepare(trainer *r);
int train_epochs(trainer *r);
int train_results(trainer *r);
/* Rank 0, right after writing --metrics lines (loop.c) */
int train_metrics_written(trainer *r);

#endif
