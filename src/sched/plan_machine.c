/* --plan --machine (sched/plan_machine.h). */
#include <stdlib.h>
#include <string.h>
#include "sched/plan_machine.h"

/* the file's rows are this model's at this batch */
static int rows_match(const cdp_model *m, int B, const cdp_machine *mach)
{
    return mach->nlayers > 0 && mach->nlayers <= m->nlayers && !strcmp(mach->model, m->name) &&
           mach->batch == B &&   /* an mlp's input is 784x1x1 to --plan, 1x28x28 once trained */
           (long)mach->input[0] * mach->input[1] * mach->input[2] ==
               (long)m->input.c * m->input.h * m->input.w;
}

int cdp_plan_stage_costs(const cdp_model *m, int L, int uniform, int B, const cdp_machine *mach,
                         const char *path, cdp_stage_cost *st, const char **how,
                         char *err, size_t errlen)
{
    const int rows = rows_match(m, B, mach);
    if (!rows && mach->flops_per_s <= 0) {
        snprintf(err, errlen, "machine file %s: its layer times are for %s, input %dx%dx%d, batch %d; "
                 "the plan is for %s, input %dx%dx%d, batch %d (measure it with --layer-times-out, "
                 "or give \"flops_per_s\")", path, mach->model, mach->input[0], mach->input[1],
                 mach->input[2], mach->batch, m->name, m->input.c, m->input.h, m->input.w, B);
        return -1;
    }
    *how = rows ? "the measured layer times" : "flops_per_s (2/3 of a stage's FLOPs in its backward)";
    const int ms = m->nstages;
    cdp_stage_cost *own = calloc((size_t)ms, sizeof *own);
    if (!own) {
        snprintf(err, errlen, "--machine: out of memory");
        return -1;
    }
    for (int l = 0; l < ms; l++) {
        cdp_stage_cost *c = &own[l];
        if (rows) {
            const int j0 = m->block_first[m->stage_first[l]], j1 = m->block_first[m->stage_first[l + 1]];
            for (int j = j0; j < j1 && j < mach->nlayers; j++) {
                c->fwd_s += mach->fwd_s[j];
                c->bwd_s += mach->bwd_s[j];
            }
            if (l == ms - 1) c->fwd_s += mach->loss_s;
        } else {   /* a backward is two matrix products for the forward's one */
            const double f = cdp_stage_flops(m, l, B) / mach->flops_per_s;
            c->fwd_s = f / 3;
            c->bwd_s = 2 * f / 3;
        }
        c->param_bytes = 4.0 * (double)m->stage_n[l];
        c->update_s = (double)m->stage_n[l] * mach->update_s_per_param;
        c->act_bytes = 4.0 * (double)cdp_stage_act_floats(m, l, B);
        c->out_bytes = 4.0 * B * cdp_stage_out(m, l);
        c->in_bytes = 4.0 * B * cdp_stage_in(m, l);
    }
    if (!uniform) {
        memcpy(st, own, sizeof *st * (size_t)L);
    } else {   /* the whole model in L equal parts */
        cdp_stage_cost sum = { 0 };
        for (int l = 0; l < ms; l++) {
            sum.fwd_s += own[l].fwd_s;
            sum.bwd_s += own[l].bwd_s;
            sum.update_s += own[l].update_s;
            sum.param_bytes += own[l].param_bytes;
            sum.act_bytes += own[l].act_bytes;
            sum.out_bytes += own[l].out_bytes;
            sum.in_bytes += own[l].in_bytes;
        }
        for (int l = 0; l < L; l++)
            st[l] = (cdp_stage_cost){ sum.fwd_s / L, sum.bwd_s / L, sum.update_s / L,
                                      sum.param_bytes / L, sum.act_bytes / L, sum.out_bytes / ms,
                                      sum.in_bytes / ms };
    }
    free(own);
    return 0;
}

static void line(FILE *out, const cdp_sched_config *c, int B, const cdp_prediction *p,
                 double device_bytes)
{
    const double need = p->act_peak_bytes + p->state_bytes;
    fprintf(out, "predict: rule=%s framework=%s ranks=%d step_s=%.6g period_s=%.6g "
            "samples_per_s=%.6g compute_s=%.6g link_s=%.6g exposed_comm_s=%.6g "
            "link_peak_bytes_tick=%.0f act_bytes_per_rank=%.0f state_bytes_per_rank=%.0f fits=%s\n",
            cdp_rule_name(c->rule), cdp_framework_name(c->framework), p->ranks, p->step_s,
            p->period_s, (double)c->N * B / p->step_s, p->compute_s, p->link_busy_s,
            p->step_s > p->compute_s ? p->step_s - p->compute_s : 0.0, p->link_peak_bytes,
            p->act_peak_bytes, p->state_bytes,
            device_bytes <= 0 ? "-" : need <= device_bytes ? "yes" : "no");
}

int cdp_plan_predict_print(FILE *out, const cdp_sched_config *c, const cdp_model *m, int uniform,
                           int B, const cdp_machine *mach, const char *path, int opt_buffers,
                           double device_bytes, char *err, size_t errlen)
{
    cdp_stage_cost *st = calloc((size_t)c->L, sizeof *st);
    const char *how;
    if (!st) {
        snprintf(err, errlen, "--machine: out of memory");
        return -1;
    }
    if (cdp_plan_stage_costs(m, c->L, uniform, B, mach, path, st, &how, err, errlen)) {
        free(st);
        return -1;
    }
    const cdp_network *n = &mach->net;
    fprintf(out, "\nprediction on the machine of %s: compute from %s%s; %d rank%s per host; "
            "links inside a host %.3g s + bytes / %.4g B/s, between hosts %.3g s + bytes / %.4g B/s; "
            "%d step%s simulated (--plan-steps) and the start cost %.3g s\n", path, how,
            uniform ? " (the whole model spread evenly over the stages)" : "", n->ranks_per_host,
            n->ranks_per_host == 1 ? "" : "s", n->intra.latency_s, n->intra.bandwidth_Bps,
            n->inter.latency_s, n->inter.bandwidth_Bps, c->K, c->K == 1 ? "" : "s", mach->start_s);
    cdp_prediction pr[2];
    cdp_sched_config cc[2] = { *c, *c };
    cc[1].rule = CDP_RULE_DP;
    const int runs = c->rule == CDP_RULE_DP ? 1 : 2;
    int bad = 0;
    for (int k = 0; k < runs && !bad; k++) {
        if (c->framework == CDP_FW_MODEL_PARALLEL)
            cc[k].P = cdp_schedule_ranks_needed(&cc[k]);
        bad = cdp_predict(&cc[k], st, n, opt_buffers, mach->start_s, &pr[k], err, errlen);
        if (!bad) line(out, &cc[k], B, &pr[k], device_bytes);
    }
    free(st);
    if (bad) return -1;
    for (int k = 0; k < runs; k++)
        if (pr[k].collective)
            fprintf(out, "  (%s with %s: its all-reduce modelled as %s, alpha-beta)\n",
                    cdp_rule_name(cc[k].rule), cdp_framework_name(cc[k].framework), pr[k].collective);
    if (runs == 2)
        fprintf(out, "predicted %s/dp: step time %.3f (%s is %s)\n", cdp_rule_name(c->rule),
                pr[0].step_s / pr[1].step_s, cdp_rule_name(c->rule),
                pr[0].step_s < pr[1].step_s ? "faster" : pr[0].step_s > pr[1].step_s ? "slower" : "as fast");
    fprintf(out, "  (step_s: the simulated segment of K steps, fill and drain, / K, as cdp_run's step "
            "time; period_s: rank 0's step period; link_s: the busiest link's transfer time per "
            "step; exposed_comm_s: step_s - compute_s; memory per rank: the timeline's activations "
            "and an estimate of the model state; fits: both within --device-memory)\n");
    return 0;
}
