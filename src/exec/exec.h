/* The executor: interprets one rank's instruction list (sched/schedule.h)
 * with the backend's kernels and nonblocking MPI, progressing outstanding
 * requests between kernels.  It keeps per stage two parameter versions
 * (the current one and the one before, for lagging workers), the optimizer
 * state (momentum, or AdamW's two moments),
 * a gradient accumulator and the last full gradient: nothing else. */
#ifndef CDP_EXEC_H
#define CDP_EXEC_H

#include <stdint.h>
#include "backend/backend.h"
#include "exec/comm.h"
#include "io/data.h"
#include "models/model.h"
#include "optim/optim.h"
#include "sched/schedule.h"

typedef struct cdp_exec_config {
    const cdp_model *model;
    const cdp_backend *be;
    cdp_comm *comm;
    int N, B;
    cdp_optim optim;
    const cdp_dataset *train;
    uint64_t seed;
    int shuffle;
    int trace;               /* record one event per instruction */
    const cdp_schedule *roles;   /* any schedule of the run: which stages this rank holds */
} cdp_exec_config;

typedef struct cdp_trace_event {
    int32_t tick;
    uint8_t op;
    int16_t stage;
    int32_t worker;
    int32_t step;            /* absolute */
    double t0, t1;           /* seconds since cdp_exec_create */
} cdp_trace_event;

typedef struct cdp_exec cdp_exec;

/* init: host parameters P(0) (or the current version when resuming). */
cdp_exec *cdp_exec_create(const cdp_exec_config *cfg, const float *init_params,
                          char *err, size_t errlen);
void cdp_exec_destroy(cdp_exec *x);

/* Runs this rank's program of schedule s, whose relative step 0 is the
 * absolute step k0.  Ends drained: every stage holds P(k0 + K). */
void cdp_exec_run(cdp_exec *x, const cdp_schedule *s, int64_t k0);

/* Host copy of the parameters at absolute version v (the latest or the one
 * before it), of the stages this rank holds (others are left alone). */
void cdp_exec_get_params(cdp_exec *x, int64_t v, float *host);
/* Collective: every stage's parameters at version v on rank root (each
 * stage sent point to point by the lowest rank holding it). */
void cdp_exec_gather_params(cdp_exec *x, int64_t v, float *host, int root);
/* Host copy of the optimizer state of the stages this rank holds:
 * cdp_optim_state_buffers() arrays of nparams floats one after the other
 * (sgd: the momentum; adamw: exp_avg, exp_avg_sq), each laid out as the
 * parameters (stage_off). */
void cdp_exec_get_optim_state(cdp_exec *x, float *host);
/* Whether this rank's part of the drained state after step v (P(v), P(v-1)
 * as cdp_exec_gather_state reads them, the optimizer state) is finite,
 * checked on the backend, nothing copied but the answer: 0 finite, 1 an
 * infinity, 2 a NaN; *first = the lowest parameter index (stage_off
 * counted) holding a value that is not, nparams if none. */
int cdp_exec_check_state(cdp_exec *x, int64_t v, size_t *first);
/* Collective: the drained state of every stage on rank root, each stage
 * from the lowest rank holding it: P(v) in cur, P(v-1) in prev (P(0) when
 * v == 0; P(v) for a stage no worker lags on, which keeps one version) and
 * the optimizer state (as cdp_exec_get_optim_state's), whatever the
 * framework and the number of ranks: what a checkpoint holds. */
void cdp_exec_gather_state(cdp_exec *x, int64_t v, float *cur, float *prev, float *state,
                           int root);
/* Whether every rank of the job holds every stage (replicated). */
int cdp_exec_holds_all(const cdp_exec *x);
/* Restores a drained state: P(v) and P(v-1) (prev may be NULL when v == 0)
 * and the optimizer state (laid out as cdp_exec_get_optim_state's), given
 * whole (every stage) on every rank: each rank takes the stages it holds. */
void cdp_exec_set_state(cdp_exec *x, int64_t v, const float *cur, const float *prev,
                        const float *state);

/* Training loss sum, correct predictions and samples of this rank since the
 * last call (then reset). */
void cdp_exec_take_train_stats(cdp_exec *x, double *loss_sum, double *correct, int64_t *samples);
/* The first training forward on this rank whose loss was not finite: 1 with
 * its step and worker, or 0 (none, or a backend whose memory the host cannot
 * read, where only the segment is known). */
int cdp_exec_first_bad_loss(const cdp_exec *x, int64_t *step, int *worker);

/* Per-tick figures of the last segment, this rank: peak live activation
 * bytes during each tick and bytes sent in each tick (nticks + 1 entries,
 * the last being the drain). */
const int64_t *cdp_exec_tick_act(const cdp_exec *x, int *n);
const int64_t *cdp_exec_tick_bytes(const cdp_exec *x, int *n);
/* Whole-run figures of this rank. */
int64_t cdp_exec_act_peak(const cdp_exec *x);
int64_t cdp_exec_act_reserved_peak(const cdp_exec *x);
int64_t cdp_exec_model_state_bytes(const cdp_exec *x);
/* The same peak with each buffer that leaves the rank counted as gone at
 * the instruction that sends it, as the schedule has it: the same every
 * run.  The measured figure above holds such a buffer until its send
 * completes, which depends on when the peer receives, so it varies with
 * timing, between this figure and the peak of the schedule's buffers
 * plus those still being sent. */
int64_t cdp_exec_model_state_bytes_scheduled(const cdp_exec *x);
/* Fixed scratch inside one instruction (the backward's workspace and the
 * input micro-batch as floats): not activations, reported apart. */
int64_t cdp_exec_workspace_bytes(const cdp_exec *x);
/* Seconds this rank's steps waited for decoded micro-batches (--data
 * folder), -1 for a data set held in memory. */
double cdp_exec_data_wait_s(const cdp_exec *x);

/* Recorded trace events (when cfg.trace). */
const cdp_trace_event *cdp_exec_trace(const cdp_exec *x, size_t *n);

#endif
