/* The trainer's epochs: segments of steps on the executor, the state
 * checks and divergence reports, progress and --log-every lines, the
 * epoch lines and --metrics, evaluations and checkpoints. */
#include <errno.h>
#include <math.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <mpi.h>
#include "config.h"
#include "backend/backend.h"
#include "io/checkpoint.h"
#include "util/clock.h"
#include "io/safetensors.h"
#include "exec/comm.h"
#include "io/data.h"
#include "run/diverge_hint.h"
#include "exec/exec.h"
#include "models/model.h"
#include "run/options.h"
#include "io/output.h"
#include "sched/plan.h"
#include "run/preflight.h"
#include "exec/reference.h"
#include "models/layer_times.h"
#include "run/report.h"
#include "sched/schedule.h"
#include "exec/trace.h"
#include "trainer.h"

/* The signal any rank received (SIGTERM before SIGINT), 0 for none, and in
 * *bad the worst training loss any rank saw (0 finite, 1 infinite, 2 NaN):
 * collective, so that every rank stops at the same boundary. */
static int agreed_stop(trainer *r, double loss_sum, int *bad, int64_t k)
{
    int mine[2] = { (int)*r->stop, isnan(loss_sum) ? 2 : isinf(loss_sum) ? 1 : 0 }, any[2];
    cdp_comm_allreduce_watched(r->comm, mine, any, 2, MPI_INT, MPI_MAX, "the end-of-segment check", k);
    *bad = any[1];
    return any[0];
}

/* Test-set loss and accuracy; -1 when the evaluation could not run.  The
 * chunk of samples evaluated at once is sized by the activations it holds
 * (about 256 MiB, at most 1000 samples), so big images fit too. */
static int evaluate(const cdp_backend *be, const cdp_model *m, const float *host_params,
                    const cdp_dataset *test, double *loss, double *acc)
{
    size_t per_sample = 0;
    for (int l = 0; l < m->nstages; l++)
        per_sample += cdp_stage_act_floats(m, l, 1) * sizeof(float);
    size_t chunk = ((size_t)256 << 20) / (per_sample ? per_sample : 1);
    if (chunk < 1) chunk = 1;
    if (chunk > 1000) chunk = 1000;
    float *p = be->alloc(m->nparams * sizeof(float));
    if (!p) return -1;
    be->to_device(p, host_params, m->nparams * sizeof(float));
    double ls = 0, corr = 0;
    cdp_model_evaluate(be, m, p, test->pixels, test->labels, test->n, test->channels, test->norm,
                       (int)chunk, &ls, &corr);
    be->free(p);
    *loss = ls / (double)test->n;
    *acc = corr / (double)test->n;
    return isnan(corr) ? -1 : 0;
}

/* Rank 0: the one line saying that the run diverged, what (the training
 * loss in steps k0+1..k1, or the test loss of the evaluation after step k1;
 * bad as from agreed_stop) and what to lower. */
static void report_divergence(const trainer *r, const char *what, int bad, int64_t k0, int64_t k1,
                              double first)
{
    const cdp_options *o = &r->o;
    char where[300] = "", ckpt[1300] = "", rule[200] = "";
    if (o->rule != CDP_RULE_DP && o->optimizer == CDP_OPTIM_ADAMW)
        snprintf(rule, sizeof rule, "%s less stable than dp at a given --lr, so lowering --lr "
                 "helps", cdp_rule_name(o->rule));
    else if (o->rule != CDP_RULE_DP)
        snprintf(rule, sizeof rule, "%s less stable than dp at a given --lr and --momentum, so "
                 "lowering --lr or --momentum helps", cdp_rule_name(o->rule));
    if (k0 >= 0 && isfinite(first))
        snprintf(where, sizeof where, "in steps %lld..%lld, first in step %lld, worker %d (the "
                 "loss of the last stage's forward)", (long long)k0 + 1, (long long)k1,
                 (long long)(first / r->N) + 1, (int)fmod(first, (double)r->N));
    else if (k0 >= 0)
        snprintf(where, sizeof where, "in steps %lld..%lld", (long long)k0 + 1, (long long)k1);
    else if (r->state_bad)   /* where: the first tensor, by offset, holding one */
        for (int t = 0; t < r->model.ntensors; t++) {
            const cdp_tensor_info *ti = &r->model.tensors[t];
            if (r->bad_index >= ti->off && r->bad_index < ti->off + ti->n)
                snprintf(where, sizeof where, "after step %lld, first in %.96s[%zu] (stage %d)",
                         (long long)k1, ti->name, r->bad_index - ti->off, ti->stage);
        }
    else
        snprintf(where, sizeof where, "after step %lld", (long long)k1);
    if (o->checkpoint[0] && k0 < 0 && !r->state_bad)   /* the evaluation: a finite state */
        snprintf(ckpt, sizeof ckpt, "; no checkpoint written of the state that evaluates so%s",
                 r->ckpt_step >= 0 ? " (the last one written is left as it was)" : "");
    else if (o->checkpoint[0] && r->good_step >= 0 && r->ckpt_step == r->good_step)
        snprintf(ckpt, sizeof ckpt, "; checkpoint %.1000s holds the last good state (step %lld)",
                 r->ckpt_path, (long long)r->ckpt_step);
    else if (o->checkpoint[0] && r->ckpt_step >= 0)
        snprintf(ckpt, sizeof ckpt, "; checkpoint %.1000s not overwritten (step %lld)",
                 r->ckpt_path, (long long)r->ckpt_step);
    else if (o->checkpoint[0])
        snprintf(ckpt, sizeof ckpt, "; checkpoint %.1000s not written: no state of this run was "
                 "finite", o->checkpoint);
    /* a cause the options or the model name outright beats the general
     * advice: lowering --lr would only delay that divergence */
    char hint[400];
    if (cdp_diverge_hint(o, &r->model, hint, sizeof hint))
        fprintf(stderr, "cdp_run: error: the %s is not finite (%s) %s: the run diverged; %s%s\n",
                what, bad == 2 ? "nan" : "inf", where, hint, ckpt);
    else
        fprintf(stderr, "cdp_run: error: the %s is not finite (%s) %s: the run diverged; lower "
                "--lr (now %g)%s%s%s\n", what, bad == 2 ? "nan" : "inf", where, o->lr,
                o->rule == CDP_RULE_DP ? "" : "; the one-step gradient delay makes ", rule,
                ckpt);
}

/* Rank 0, from the second epoch on: a run whose training or test figures
 * are at chance level (a finite loss no better than guessing, accuracy no
 * better than 1.5 times chance) has collapsed.  Its numbers stay finite, so
 * nothing else would say so; under cdp-v1/cdp-v2 the one-step gradient
 * delay is the usual cause (the serial reference collapses alike).  Once
 * per run, a warning: the run goes on. */
static int at_chance(double loss, double acc, double C)
{
    return loss >= 0.9 * log(C) && acc >= 0 && acc <= 1.5 / C;
}

static void warn_collapse(trainer *r, const cdp_epoch_line *ln)
{
    const cdp_options *o = &r->o;
    const double C = r->model.classes, chance_loss = log(C);
    const int train = at_chance(ln->train_loss, ln->train_accuracy, C);
    /* the first epoch, the first 100 steps and the lr warm-up may be
     * anything (a slow start; a short epoch of small data; an lr near 0) */
    if (r->collapse_warned || ln->epoch < 2 || ln->step < 100 || ln->step <= o->warmup_steps ||
        !(train || at_chance(ln->test_loss, ln->test_accuracy, C)))
        return;
    r->collapse_warned = 1;
    const double loss = train ? ln->train_loss : ln->test_loss;
    const double acc = train ? ln->train_accuracy : ln->test_accuracy;
    char lower[160];
    if (o->optimizer == CDP_OPTIM_ADAMW || o->momentum == 0)
        snprintf(lower, sizeof lower, "lower --lr (now %g)", o->lr);
    else
        snprintf(lower, sizeof lower, "lower --lr (now %g) or --momentum (now %g)", o->lr,
                 o->momentum);
    fprintf(stderr, "cdp_run: warning: epoch %d: the %s is at chance level (loss %.4f, "
            "ln %g = %.4f; accuracy %.2f%%): the run has collapsed%s%s%s; %s\n", ln->epoch,
            train ? "training" : "test set", loss, C, chance_loss, 100.0 * acc,
            o->rule == CDP_RULE_DP ? "" : " (the one-step gradient delay makes ",
            o->rule == CDP_RULE_DP ? "" : cdp_rule_name(o->rule),
            o->rule == CDP_RULE_DP ? "" : " less stable than dp at the same settings)", lower);
}

/* Progress inside an epoch, on rank 0 (not with --quiet): on a terminal one
 * line rewritten after every segment; otherwise (and under mpirun) a plain
 * line at most every 30 s, so that logs of long runs show life and short
 * runs stay quiet. */
static void progress(trainer *r, int64_t k_end, const double ep_stats[3], double ep_time,
                     int64_t ep_steps)
{
    double sum[3];
    MPI_Reduce(ep_stats, sum, 3, MPI_DOUBLE, MPI_SUM, 0, r->comm->comm);
    if (!r->root || r->o.quiet || r->k >= k_end || ep_time <= 0)
        return;
    /* mpirun hands its ranks a pseudo-terminal whether or not its own output
     * is one (a log file, a pipe): under it, plain lines */
    const int tty = isatty(STDOUT_FILENO) && !getenv("OMPI_COMM_WORLD_SIZE");
    const double now = cdp_now_s();
    if (!tty && now - r->last_progress < 30.0)
        return;
    r->last_progress = now;
    const double sps = (double)ep_steps * r->N * r->o.batch / ep_time;
    const double eta = (double)(r->total - r->k) * r->N * r->o.batch / sps;
    printf("%s  step %lld/%lld  %.0f samples/s  train loss %.4f  ETA %.0f s%s", tty ? "\r" : "",
           (long long)r->k, (long long)r->total, sps, sum[2] > 0 ? sum[0] / sum[2] : 0.0, eta,
           tty ? "\033[K" : "\n");
    r->progress_shown = tty;
    fflush(stdout);
}

/* Rank 0, right after writing --metrics lines: the first write that failed
 * (a full disk), kept with its errno for the next agreed check.  0, or 1
 * once one has failed. */
int train_metrics_written(trainer *r)
{
    if (r->metrics && !r->metrics_err[0] &&
        cdp_output_stream_check(r->metrics, "--metrics", r->o.metrics, r->metrics_err,
                                sizeof r->metrics_err))
        return 1;
    return r->metrics_err[0] != 0;
}

/* Collective, with --log-every K: after steps K, 2K, ... (segments end
 * there), rank 0 writes a --metrics line of the steps since the last one:
 * their mean training loss and accuracy over every worker, samples/s and
 * time; the window's sums are kept by every rank (st: the segment's loss
 * sum, correct count, samples). */
static void log_steps(trainer *r, const double st[3], double seg_time, int64_t seg_steps)
{
    const int64_t K = r->o.log_every;
    if (!K)
        return;
    for (int q = 0; q < 3; q++) r->log_stats[q] += st[q];
    r->log_time += seg_time;
    r->log_steps += seg_steps;
    if (r->k % K)
        return;
    double sum[3];
    MPI_Reduce(r->log_stats, sum, 3, MPI_DOUBLE, MPI_SUM, 0, r->comm->comm);
    if (r->root && r->metrics) {
        fprintf(r->metrics, "{\"log\": \"steps\", \"step\": %lld, \"steps\": %lld, "
                "\"epoch\": %lld, \"lr\": %.9g, \"train_loss\": %.9g, "
                "\"train_accuracy\": %.9g, \"samples_per_s\": %.6g, \"time_s\": %.6g}\n",
                (long long)r->k, (long long)r->log_steps, (long long)((r->k - 1) / r->spe + 1),
                cdp_optim_lr(&r->xc.optim, r->k - 1), sum[0] / sum[2], sum[1] / sum[2],
                (double)r->log_steps * r->N * r->o.batch / r->log_time, r->log_time);
        train_metrics_written(r);
    }
    memset(r->log_stats, 0, sizeof r->log_stats);
    r->log_time = 0;
    r->log_steps = 0;
}

/* Collective: the checkpoint of the drained state after step k (once per
 * step), gathered from the ranks holding each stage and written by rank 0,
 * then, with --keep-checkpoints M > 1, the older ones beyond M removed.
 * 0, or 1 when it could not be written (error reported). */
static int write_checkpoint(trainer *r, int64_t k)
{
    const cdp_options *o = &r->o;
    if (r->ckpt_step == k)
        return 0;
    cdp_exec_gather_state(r->x, k, r->params, r->prev_params, r->optim_state, 0);
    int bad = 0;
    char path[sizeof r->ckpt_path];
    cdp_checkpoint_name(o->checkpoint, o->keep_checkpoints, k, path, sizeof path);
    if (r->root) {
        bad = cdp_checkpoint_write(path, &r->model, k, r->numerics_hash, r->numerics_text,
                                   r->xc.optim.kind, r->params, r->prev_params, r->optim_state, r->err,
                                   sizeof r->err);
        if (!bad && !o->quiet)
            printf("checkpoint %s written at step %lld\n", path, (long long)k);
        char why[1024];
        if (!bad && cdp_checkpoint_prune(o->checkpoint, o->keep_checkpoints, k, why, sizeof why))
            fprintf(stderr, "cdp_run: warning: %s\n", why);
    }
    FAIL_IF(bad, r->err);
    r->ckpt_step = k;
    snprintf(r->ckpt_path, sizeof r->ckpt_path, "%s", path);
    return 0;
}

/* Whether --checkpoint-every-steps K asks for a checkpoint after step k. */
static int step_checkpoint_due(const trainer *r, int64_t k)
{
    const int64_t K = r->o.checkpoint_every_steps;
    return r->o.checkpoint[0] && K > 0 && k % K == 0;
}

/* Collective, at every segment boundary (and before the first): the
 * drained state after step r->k is checked where it lives
 * (cdp_exec_check_state: on the GPU for --backend cuda, only the answer
 * copied), every value on every rank finite.  A NaN
 * or an infinity that reached the parameters or the optimizer state (a
 * gradient's) without any loss showing it (a unit no sample activates
 * carries it) stops the run here: the return value says nan (2) or inf
 * (1).  With --checkpoint, a finite state is copied to the host and
 * becomes the last good state (the scratch copies r->params, prev_params
 * and optim_state swap with r->good), what a divergence writes: no
 * checkpoint of a non-finite state is ever written. */
static int check_state(trainer *r)
{
    if (r->checked_step == r->k)
        return 0;
    size_t first;
    const int code = cdp_exec_check_state(r->x, r->k, &first);
    /* one reduction: the worst code and the lowest index over the ranks */
    double mine[2] = { code, -(double)first }, any[2];
    cdp_comm_allreduce_watched(r->comm, mine, any, 2, MPI_DOUBLE, MPI_MAX, "the state check", r->k);
    r->checked_step = r->k;
    r->bad_index = (size_t)-any[1];
    if (any[0] || !r->o.checkpoint[0])
        return (int)any[0];
    const size_t n = r->model.nparams;
    const size_t ns = (size_t)cdp_optim_state_buffers(&r->xc.optim) * n;
    float *cand[3] = { r->params, r->prev_params, r->optim_state };
    memset(cand[0], 0, n * sizeof(float));   /* other ranks' stages: zero, finite */
    memset(cand[1], 0, n * sizeof(float));
    memset(cand[2], 0, ns * sizeof(float));
    cdp_exec_get_params(r->x, r->k, cand[0]);
    cdp_exec_get_params(r->x, r->k > 0 ? r->k - 1 : 0, cand[1]);
    cdp_exec_get_optim_state(r->x, cand[2]);
    r->params = r->good[0], r->prev_params = r->good[1], r->optim_state = r->good[2];
    r->good[0] = cand[0], r->good[1] = cand[1], r->good[2] = cand[2];
    r->good_step = r->k;
    return 0;
}

/* Collective, after a divergence with --checkpoint: the last good state
 * written as the checkpoint of its step, unless it is already the last
 * checkpoint written.  0, or 1 when it could not be written. */
static int write_last_good(trainer *r)
{
    if (!r->o.checkpoint[0] || r->good_step < 0 || r->good_step == r->ckpt_step)
        return 0;
    cdp_exec_set_state(r->x, r->good_step, r->good[0], r->good_step > 0 ? r->good[1] : NULL,
                       r->good[2]);
    return write_checkpoint(r, r->good_step);
}

/* Runs steps k..k_end-1 in segments; returns the signal that stopped them
 * (0: none), with the epoch's training statistics and time.  *bad: the
 * training loss of the segment ending at r->k, or the state after it
 * (r->state_bad), was not finite (then it stops, with *bad_k0 the
 * segment's first step).  Returns the agreed signal, 0, or -1 when a
 * checkpoint could not be written (the error is reported). */
/* --layer-times-out: the first segments' steps and times, and the rows as
 * they stood after the first, so that the machine file can give the start
 * cost (the first segment's time beyond the later ones') and rows without
 * it (results.c) */
static void note_segment(trainer *r, int K, double s)
{
    if (r->nseg >= (int)(sizeof r->seg_K / sizeof r->seg_K[0])) return;
    r->seg_K[r->nseg] = K;
    r->seg_s[r->nseg] = s;
    if (r->nseg++ == 0) {
        if (cdp_layer_times_init(&r->lt_first, &r->model)) abort();
        memcpy(r->lt_first.s, r->lt.s, sizeof(double) * 2 * (size_t)r->lt.rows);
        memcpy(r->lt_first.n, r->lt.n, sizeof(double) * 2 * (size_t)r->lt.rows);
    }
}

static int train_epoch(trainer *r, int64_t k_end, int64_t chunk, double ep_stats[3], double *ep_time,
                       int64_t *ep_steps, int *bad, int64_t *bad_k0)
{
    const int64_t every = r->o.checkpoint[0] ? r->o.checkpoint_every_steps : 0;
    *bad = 0;
    *bad_k0 = r->k;
    if ((*bad = check_state(r))) {   /* the first: a resumed or loaded state */
        r->state_bad = 1;
        return 0;
    }
    while (r->k < k_end) {
        int64_t k1 = r->k + chunk < k_end ? r->k + chunk : k_end;
        /* --checkpoint-every-steps and --log-every: a segment also ends after
         * steps K, 2K, ... (the segmentation changes no number) */
        if (every && (r->k / every + 1) * every < k1)
            k1 = (r->k / every + 1) * every;
        if (r->o.log_every && (r->k / r->o.log_every + 1) * r->o.log_every < k1)
            k1 = (r->k / r->o.log_every + 1) * r->o.log_every;
        const int K = (int)(k1 - r->k);
        if (K != r->sched_K) {
            if (r->sched_K) cdp_schedule_free(&r->sched);
            r->sc.K = K;
            if (cdp_schedule_build(&r->sc, r->comm->rank, &r->sched, r->err, sizeof r->err)) {
                fprintf(stderr, "cdp_run: error: %s\n", r->err);
                MPI_Abort(r->comm->comm, 1);
            }
            r->sched_K = K;
        }
        double t0 = cdp_now_s();
        cdp_exec_run(r->x, &r->sched, r->k);
        double dt = cdp_now_s() - t0, dtmax;
        cdp_comm_allreduce_watched(r->comm, &dt, &dtmax, 1, MPI_DOUBLE, MPI_MAX,
                                   "the end of the segment", k1 - 1);
        cdp_figures_add_segment(&r->fig, r->comm, r->x, K, dtmax);
        if (r->o.layer_times_out[0]) note_segment(r, K, dtmax);
        *ep_time += dtmax;
        *ep_steps += K;
        *bad_k0 = r->k;
        r->k = k1;
        double st[3];
        int64_t ns;
        cdp_exec_take_train_stats(r->x, &st[0], &st[1], &ns);
        st[2] = (double)ns;
        for (int q = 0; q < 3; q++) ep_stats[q] += st[q];
        log_steps(r, st, dtmax, K);
        int stop = agreed_stop(r, st[0], bad, k1 - 1);
        if (*bad)
            return stop;
        if ((*bad = check_state(r))) {
            r->state_bad = 1;
            return stop;
        }
        if (stop)
            return stop;
        /* at the epoch's end train_epochs writes it, after the evaluation */
        if (r->k < k_end && step_checkpoint_due(r, r->k) && write_checkpoint(r, r->k))
            return -1;
        progress(r, k_end, ep_stats, *ep_time, *ep_steps);
    }
    return 0;
}

/* The epochs: training, the epoch line, evaluation, checkpoints.  Returns
 * 128 + the signal when a signal stopped the run, DIVERGED when a loss was
 * not finite (no checkpoint written then). */
int train_epochs(trainer *r)
{
    r->last_progress = cdp_now_s();   /* plain progress lines: the first after 30 s */
    cdp_comm_set_timeout(r->comm, r->o.timeout);   /* the watchdog, over the training segments */
    const cdp_options *o = &r->o;
    int eval_failed = 0, eval_bad = 0, diverged;
    int64_t bad_k0;
    /* segments of 64 steps at most, so that a signal or a diverging loss is
     * answered soon; the segmentation does not change the numbers */
    const int64_t chunk = 64;
    r->ckpt_step = -1;
    for (int e = (int)(r->k / r->spe); e < r->nepochs && r->k < r->total; e++) {
        int64_t k_end = (int64_t)(e + 1) * r->spe;
        if (k_end > r->total) k_end = r->total;
        double ep_time = 0, ep_stats[3] = { 0, 0, 0 };
        int64_t ep_steps = 0;
        const int stop = train_epoch(r, k_end, chunk, ep_stats, &ep_time, &ep_steps, &diverged,
                                     &bad_k0);
        if (stop < 0)
            return 1;
        const int64_t k = r->k;
        if (diverged) {
            if (write_last_good(r))
                return 1;
            if (r->state_bad) {
                if (r->root)
                    report_divergence(r, "model state (parameters, optimizer state)", diverged,
                                      -1, k, INFINITY);
                return DIVERGED;
            }
            /* collective: the first non-finite forward over the ranks */
            int64_t bs;
            int bw;
            double mine = cdp_exec_first_bad_loss(r->x, &bs, &bw) ? (double)bs * r->N + bw
                                                                  : INFINITY, first;
            MPI_Allreduce(&mine, &first, 1, MPI_DOUBLE, MPI_MIN, r->comm->comm);
            if (r->root) report_divergence(r, "training loss", diverged, bad_k0, k, first);
            return DIVERGED;
        }
        double sum[3];
        MPI_Reduce(ep_stats, sum, 3, MPI_DOUBLE, MPI_SUM, 0, r->comm->comm);
        int last = k == r->total || stop;
        /* --eval-every 0: never, not even at the end (a ResNet's test set costs
         * minutes); none on the way out after a signal: mpirun kills its ranks soon */
        int eval = !stop && o->eval_every && ((e + 1) % o->eval_every == 0 || last);
        if (eval)
            cdp_exec_gather_params(r->x, k, r->params, 0);
        if (r->root) {
            cdp_epoch_line line = { e + 1, k, cdp_optim_lr(&r->xc.optim, k - 1), sum[0] / sum[2],
                                    sum[1] / sum[2], -1, -1,
                                    (double)ep_steps * r->N * o->batch / ep_time, ep_time,
                                    k - (int64_t)e * r->spe, r->spe };
            r->samples_s = (double)r->fig.steps * r->N * o->batch / r->fig.train_time_s;
            if (eval && !o->quiet) {
                /* a large test set takes a while (as long as a short run's
                 * training): said before, not a silent wait */
                if (r->progress_shown) {
                    printf("\r\033[K");
                    r->progress_shown = 0;
                }
                printf("evaluating on %lld test samples\n", (long long)r->data.test.n);
                fflush(stdout);
            }
            if (eval) {
                if (evaluate(r->be, &r->model, r->params, &r->data.test, &line.test_loss,
                             &line.test_accuracy))
                    eval_failed = 1;
                if (!isfinite(line.test_loss))   /* not a failure of the evaluation */
                    eval_failed = 0, eval_bad = isnan(line.test_loss) ? 2 : 1;
                r->test_loss = line.test_loss;
                r->test_acc = line.test_accuracy;
            }
            if (r->progress_shown) {   /* the epoch line replaces the progress line */
                printf("\r\033[K");
                r->progress_shown = 0;
            }
            if (!o->quiet) cdp_report_epoch_text(stdout, &line, r->nepochs);
            warn_collapse(r, &line);
            if (r->metrics) cdp_report_epoch_json(r->metrics, &line);
            train_metrics_written(r);
        }
        FAIL_IF(eval_failed, "the test-set evaluation failed (see the message above)");
        MPI_Bcast(&eval_bad, 1, MPI_INT, 0, r->comm->comm);
        if (eval_bad) {
            if (r->root) report_divergence(r, "test loss at the evaluation", eval_bad, -1, k, INFINITY);
            return DIVERGED;
        }
        if (o->checkpoint[0] && (last || (o->checkpoint_every && (e + 1) % o->checkpoint_every == 0) ||
                                 step_checkpoint_due(r, k)) &&
            write_checkpoint(r, k))
            return 1;
        /* the epoch's lines (and --log-every's) reached the file: a full
         * disk stops the run here, after the checkpoint, not at its end */
        FAIL_IF(r->root && train_metrics_written(r), r->metrics_err);
        if (stop) {
            if (r->root) {
                const char *name = stop == SIGINT ? "SIGINT" : "SIGTERM";
                if (o->checkpoint[0])
                    fprintf(stderr, "cdp_run: %s: stopped at step %lld of %lld, checkpoint %s "
                            "written\n", name, (long long)k, (long long)r->total, r->ckpt_path);
                else
                    fprintf(stderr, "cdp_run: %s: stopped at step %lld of %lld, no checkpoint "
                            "written (no --checkpoint)\n", name, (long long)k,
                            (long long)r->total);
            }
            return 128 + stop;
        }
    }
    return 0;
}

