/* The trainer's results: the final weights, the trace, the summary and
 * --layer-times, and --verify against the serial reference. */
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

/* dp with MPI_Allreduce sums the ranks' gradients in an order of the MPI
 * library's, a last-bit change of each sum: under SGD the weights stay
 * within a relative 1e-5 of the reference's in a few steps, but AdamW
 * (which divides by the gradient's size) and the running statistics of a
 * BatchNorm amplify it (tests/mpi/soak.sh: 1.4e-5 to 3.7e-4) */
static double dp_collective_tolerance(const trainer *r)
{
    int amplifies = r->o.optimizer == CDP_OPTIM_ADAMW;
    for (int j = 0; j < r->model.nlayers && !amplifies; j++)
        amplifies = cdp_layer_ops_of(r->model.layers[j].kind)->update_buffers != NULL;
    return amplifies ? 1e-3 : 1e-5;
}

/* --verify: the serial reference from the same start; 1 when it differs
 * more than the rule allows (err says how). */
static int verify(trainer *r)
{
    const cdp_options *o = &r->o;
    const cdp_model *m = &r->model;
    cdp_reference_config rc = { r->be, m, r->N, o->batch, o->rule, r->xc.optim, &r->data.train,
                                o->seed, o->shuffle, r->total };
    if (cdp_reference_run(&rc, r->init_params, r->err, sizeof r->err))
        return 1;
    size_t nd;
    double rel = cdp_max_rel_diff(r->final_params, r->init_params, m->nparams, &nd);
    printf("verify: serial reference after %lld steps: max relative difference %.3g, "
           "%zu of %zu values differ bitwise\n", (long long)r->total, rel, nd, m->nparams);
    for (int t = 0; nd && t < m->ntensors; t++) {   /* where, for the user */
        const cdp_tensor_info *ti = &m->tensors[t];
        size_t q = 0;
        while (q < ti->n && !memcmp(&r->final_params[ti->off + q], &r->init_params[ti->off + q],
                                    sizeof(float)))
            q++;
        if (q < ti->n) {
            printf("verify: first difference at %s[%zu]: %.9g vs %.9g\n", ti->name, q,
                   (double)r->final_params[ti->off + q], (double)r->init_params[ti->off + q]);
            break;
        }
    }
    const int exact = o->rule != CDP_RULE_DP || o->deterministic;
    const double tol = exact ? 0.0 : dp_collective_tolerance(r);
    if ((exact && nd) || rel > tol) {
        if (exact)
            snprintf(r->err, sizeof r->err, "--verify: the run differs from the serial "
                     "reference (bitwise equality expected)");
        else
            snprintf(r->err, sizeof r->err, "--verify: the run differs from the serial "
                     "reference (relative %g expected of dp with MPI_Allreduce; "
                     "--deterministic gives the reference's bits)", tol);
        return 1;
    }
    return 0;
}
/* --layer-times-out's start cost: the first segment's time less the median
 * of the later ones of as many steps (of the first 8 segments; the median:
 * one later segment that a busy machine slowed does not move it), at least
 * 0; *s 0 and 0 returned when there is no later segment of as many steps */
static int start_cost(const trainer *r, double *s)
{
    double later[8];
    int n = 0;
    for (int k = 1; k < r->nseg; k++)
        if (r->seg_K[k] == r->seg_K[0]) later[n++] = r->seg_s[k];
    *s = 0;
    if (n == 0) return 0;
    for (int i = 1; i < n; i++)   /* insertion sort: a few values */
        for (int j = i; j > 0 && later[j - 1] > later[j]; j--) {
            double x = later[j];
            later[j] = later[j - 1];
            later[j - 1] = x;
        }
    const double med = n % 2 ? later[n / 2] : (later[n / 2 - 1] + later[n / 2]) / 2;
    *s = fmax(0.0, r->seg_s[0] - med);
    return n;
}


/* The final weights, the trace, the summary, --verify. */
int train_results(trainer *r)
{
    const cdp_options *o = &r->o;
    int bad = 0;
    cdp_figures_finish(&r->fig, r->comm, r->x);
    cdp_exec_gather_params(r->x, r->total, r->final_params, 0);
    if (r->root && o->save_weights[0]) {
        char step[32];
        snprintf(step, sizeof step, "%lld", (long long)r->total);
        const char *meta[] = { "format", "pt", "producer", "cdp " PACKAGE_VERSION, "rule",
                               cdp_rule_name(o->rule), "step", step, NULL };
        bad = cdp_save_weights(o->save_weights, &r->model, r->final_params, r->total, meta,
                               r->err, sizeof r->err);
    }
    FAIL_IF(bad, r->err);
    if (o->trace[0]) {
        bad = cdp_trace_write(r->comm, r->x, o->trace, r->err, sizeof r->err);
        FAIL_IF(bad, r->err);
    }
    if (r->root) {
        cdp_report_summary(o->quiet ? NULL : stdout, r->metrics, &r->fig, cdp_rule_name(o->rule),
                           cdp_framework_name(o->framework), r->P, r->N, r->L, o->batch,
                           r->test_loss, r->test_acc, r->samples_s);
        train_metrics_written(r);
        char acc_text[32] = "none";   /* not evaluated */
        if (r->test_acc >= 0)
            snprintf(acc_text, sizeof acc_text, "%.4f", r->test_acc);
        if (o->quiet)
            printf("test_accuracy %s step_time_s %.6f\n", acc_text,
                   r->fig.steps ? r->fig.train_time_s / (double)r->fig.steps : 0.0);
    }
    if (o->layer_times) {
        cdp_report_layer_times(r->comm, &r->lt, &r->model, &r->fig, o->quiet ? NULL : stdout,
                               r->metrics);
        double start_s;
        const int later = start_cost(r, &start_s);
        int bad = o->layer_times_out[0] &&
                  cdp_report_machine_rows(r->comm, &r->lt, later ? &r->lt_first : NULL, start_s,
                                          &r->model, o->layer_times_out, o->batch, r->err,
                                          sizeof r->err);
        train_metrics_written(r);   /* rank 0's: the other ranks have none */
        r->model.times = NULL;   /* not the serial reference's layers */
        FAIL_IF(r->root && bad, r->err);
    }
    if (r->root && r->metrics) {   /* its last lines written, or the first failure */
        if (!train_metrics_written(r))
            cdp_output_stream_close(r->metrics, "--metrics", o->metrics, r->metrics_err,
                                    sizeof r->metrics_err);
        else
            fclose(r->metrics);
        r->metrics = NULL;
    }
    FAIL_IF(r->root && r->metrics_err[0], r->metrics_err);
    FAIL_IF(o->verify && r->root && verify(r), r->err);
    return 0;
}

