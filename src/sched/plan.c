/* cdp_run --plan.  The figures come straight from the timeline (offset and
 * lag, the same functions the schedule builders use), in O(N*L*K), so that
 * N = L = 1024 takes well under a second; tests/unit/test_schedule.c checks
 * them against the instruction lists for small configurations. */
#include <stdlib.h>
#include <string.h>
#include "sched/plan.h"

typedef struct plan_fig {
    int T;                 /* ticks: the segment's and its drain (the last) */
    int64_t *units;        /* stage-activations live per tick (all ranks) */
    double *act_bytes;     /* activation bytes live per tick (all ranks) */
    double *sent;          /* bytes sent per tick (all ranks) */
} plan_fig;

static double stage_param_bytes(const cdp_model *m, int l)
{
    return m ? (double)m->stage_n[l] * 4.0 : 1.0;
}

static int figures(const cdp_sched_config *c, const cdp_model *m, int B, plan_fig *f)
{
    const int N = c->N, L = c->L, K = c->K, L2 = 2 * L;
    /* the drain, tick T, holds no activation but may send: the updates
     * of the last step pass full sums on (schedule.c) */
    const int T = L2 * (K - 1) + cdp_offset(N, L, c->rule, N - 1) + L2;
    f->T = T + 1;
    int64_t *du = calloc((size_t)T + 1, sizeof *du);
    double *db = calloc((size_t)T + 1, sizeof *db);
    f->units = calloc((size_t)T + 1, sizeof *f->units);
    f->act_bytes = calloc((size_t)T + 1, sizeof *f->act_bytes);
    f->sent = calloc((size_t)T + 1, sizeof *f->sent);
    if (!du || !db || !f->units || !f->act_bytes || !f->sent) return -1;
    for (int s = 0; s < K; s++)
        for (int i = 0; i < N; i++) {
            int start = L2 * s + cdp_offset(N, L, c->rule, i);
            for (int l = 0; l < L; l++) {
                int tf = start + l, tb = start + L2 - 1 - l;
                double ab = m ? (double)cdp_stage_act_floats(m, l, B) * 4.0 : 0;
                du[tf] += 1; du[tb + 1] -= 1;
                db[tf] += ab; db[tb + 1] -= ab;
            }
        }
    int64_t u = 0;
    double b = 0;
    for (int t = 0; t <= T; t++) {
        u += du[t];
        b += db[t];
        f->units[t] = u;
        f->act_bytes[t] = b;
    }
    free(du);
    free(db);
    return 0;
}

/* Traffic per tick read off the instruction lists of every rank (the
 * frameworks other than replicated), with the counting rules of exec/comm.h.
 * Returns the collective calls per step, or -1 when the schedule is too big
 * to build here. */
static double schedule_traffic(const cdp_sched_config *c, const cdp_model *m, int B, plan_fig *f)
{
    if ((double)c->N * c->L * c->K * 6 > 2e7) return -1;
    cdp_schedule s;
    char err[256];
    if (cdp_schedule_build(c, -1, &s, err, sizeof err)) return -1;
    memset(f->sent, 0, sizeof(double) * (size_t)f->T);
    double coll = 0, total = 0;
    for (int l = 0; l < c->L; l++) total += stage_param_bytes(m, l);
    for (int r = 0; r < c->P; r++)
        for (size_t k = 0; k < s.prog[r].n; k++) {
            const cdp_instr *in = &s.prog[r].ins[k];
            const int l = in->stage;
            double b = 0;
            switch (in->op) {
            case CDP_OP_SEND_GRAD: case CDP_OP_SEND_FULL: case CDP_OP_SEND_PARAMS:
                b = stage_param_bytes(m, l); break;
            case CDP_OP_SEND_ACT:
                b = m ? (double)B * cdp_stage_out_stored(m, l) * 4.0 : 1.0; break;
            case CDP_OP_SEND_DACT:
                b = m ? (double)B * cdp_stage_in(m, l) * 4.0 : 1.0; break;
            case CDP_OP_ALLREDUCE:
                coll++;
                if (l < 0) {
                    b = cdp_sched_allreduce_bytes(c->P, total);
                } else {
                    int S = 0;
                    for (int q = 0; q < c->P; q++) S += cdp_schedule_holds(&s, q, l);
                    b = cdp_sched_allreduce_bytes(S, stage_param_bytes(m, l));
                }
                break;
            case CDP_OP_BCAST_PARAMS: case CDP_OP_REDUCE_GRAD:
                coll++;
                b = cdp_sched_bcast_bytes(c->P, stage_param_bytes(m, l));
                break;
            default: break;
            }
            if (in->tick < f->T) f->sent[in->tick] += b;
        }
    cdp_schedule_free(&s);
    return coll / c->K;
}

static void explain_ranks(FILE *out, const cdp_sched_config *c)
{
    if (c->framework == CDP_FW_REPLICATED) {
        fprintf(out, "ranks used: %d (workers in contiguous blocks; each rank holds the whole model)\n", c->P);
        return;
    }
    if (c->framework == CDP_FW_ZERO) {
        fprintf(out, "ranks used: %d (workers in contiguous blocks; rank floor(l*P/L) owns stage l's "
                "parameters, gradient and optimizer state; others hold a stage only in the ticks "
                "they compute with it)\n", c->P);
        return;
    }
    cdp_sched_config one = *c;
    one.P = cdp_schedule_ranks_needed(c);
    one.K = 1;
    cdp_schedule s;
    char err[256];
    fprintf(out, "ranks used: %d (model-parallel: ranks hold stages; the workers of a stage share a "
            "rank when their forward and backward ticks, modulo the %d-tick cycle, never collide)\n",
            one.P, 2 * c->L);
    if (c->L > 32 || c->N > 64 || cdp_schedule_build(&one, 0, &s, err, sizeof err)) return;
    for (int l = 0; l < c->L; l++) {
        int lo = one.P, hi = -1;
        for (int i = 0; i < c->N; i++) {
            int r = s.slot_rank[i * c->L + l];
            if (r < lo) lo = r;
            if (r > hi) hi = r;
        }
        fprintf(out, "  stage %d: %d rank%s:", l, hi - lo + 1, hi > lo ? "s" : "");
        for (int r = lo; r <= hi; r++) {
            fprintf(out, " rank %d {", r);
            int first = 1;
            for (int i = 0; i < c->N; i++)
                if (s.slot_rank[i * c->L + l] == r) {
                    fprintf(out, "%sw%d@%d,%d", first ? "" : " ", i,
                            (cdp_offset(c->N, c->L, c->rule, i) + l) % (2 * c->L),
                            (cdp_offset(c->N, c->L, c->rule, i) + 2 * c->L - 1 - l) % (2 * c->L));
                    first = 0;
                }
            fprintf(out, "}");
        }
        fputc('\n', out);
    }
    fprintf(out, "  (w<i>@<f>,<b>: worker i runs its forward and backward of the stage at ticks f and b of the cycle)\n");
    cdp_schedule_free(&s);
}

static void fig_free(plan_fig *f)
{
    free(f->units);
    free(f->act_bytes);
    free(f->sent);
}

static void peaks(const plan_fig *f, int64_t *u, double *b, double *s, double *mean_s)
{
    *u = 0; *b = 0; *s = 0; *mean_s = 0;
    for (int t = 0; t < f->T; t++) {
        if (f->units[t] > *u) *u = f->units[t];
        if (f->act_bytes[t] > *b) *b = f->act_bytes[t];
        if (f->sent[t] > *s) *s = f->sent[t];
        *mean_s += f->sent[t];
    }
    *mean_s /= f->T;
}

static void picture(FILE *out, const cdp_sched_config *c)
{
    const int N = c->N, L = c->L, K = c->K, L2 = 2 * L;
    const int T = L2 * (K - 1) + cdp_offset(N, L, c->rule, N - 1) + L2;
    int width = 1;
    /* cell width: most workers in one (stage, tick) */
    int *cnt = calloc((size_t)T * L, sizeof *cnt);
    if (!cnt) return;
    for (int s = 0; s < K; s++)
        for (int i = 0; i < N; i++)
            for (int l = 0; l < L; l++) {
                int start = L2 * s + cdp_offset(N, L, c->rule, i);
                if (++cnt[(start + l) * L + l] > width) width = cnt[(start + l) * L + l];
                if (++cnt[(start + L2 - 1 - l) * L + l] > width) width = cnt[(start + L2 - 1 - l) * L + l];
            }
    free(cnt);
    if (N > 26 || (long)T * (width + 1) > 400) {
        fprintf(out, "(timeline picture omitted: %d ticks x %d workers is too wide; the figures below are complete)\n\n",
                T, N);
        return;
    }
    fprintf(out, "timeline: ticks across, stages down; worker A..%c, upper case = forward, lower case = backward\n",
            'A' + N - 1);
    fprintf(out, "%-9s", "tick");
    for (int t = 0; t < T; t++) fprintf(out, "%-*d", width + 1, t % 100);
    fputc('\n', out);
    char *cell = malloc((size_t)width + 1);
    for (int l = 0; l < L; l++) {
        fprintf(out, "stage %-3d", l);
        for (int t = 0; t < T; t++) {
            int n = 0;
            for (int s = 0; s < K; s++)
                for (int i = 0; i < N; i++) {
                    int start = L2 * s + cdp_offset(N, L, c->rule, i);
                    if (start + l == t) cell[n++] = (char)('A' + i);
                    else if (start + L2 - 1 - l == t) cell[n++] = (char)('a' + i);
                }
            if (!n) cell[n++] = '.';
            cell[n] = 0;
            fprintf(out, "%-*s", width + 1, cell);
        }
        fputc('\n', out);
    }
    free(cell);
    fputc('\n', out);
}

int cdp_plan_print(FILE *out, const cdp_sched_config *c, const cdp_model *m, int B,
                   char *err, size_t errlen)
{
    cdp_sched_config cc = *c;
    if (c->framework == CDP_FW_MODEL_PARALLEL)
        cc.P = cdp_schedule_ranks_needed(c);   /* the plan shows what it needs */
    c = &cc;
    if (c->N < 1 || c->L < 1 || c->P < 1 || c->K < 1 ||
        (c->framework != CDP_FW_MODEL_PARALLEL && c->N < c->P)) {
        snprintf(err, errlen, "--plan: need N >= P >= 1, L >= 1 (got N=%d L=%d P=%d)", c->N, c->L, c->P);
        return -1;
    }
    fprintf(out, "plan: rule %s, framework %s, N=%d workers, L=%d stages, P=%d ranks, %d steps shown\n",
            cdp_rule_name(c->rule), cdp_framework_name(c->framework), c->N, c->L, c->P, c->K);
    if (!m)
        fprintf(out, "(the model has fewer blocks than %d stages: the timeline alone, figures in "
                "stage units, traffic in stage-gradient units)\n", c->L);
    if (m) {
        fprintf(out, "model %s: %zu parameters and buffers in %d blocks, input %dx%dx%d\n",
                m->name, cdp_model_param_count(m), m->nblocks, m->input.c, m->input.h, m->input.w);
        fprintf(out, "stages: ");   /* blocks per stage, balanced by FLOPs */
        for (int l = 0; l < m->nstages; l++)
            fprintf(out, "%s%d", l ? "," : "", m->stage_first[l + 1] - m->stage_first[l]);
        fprintf(out, " blocks\n");
        fprintf(out, "stage GFLOP (forward + backward, B=%d):", B);
        for (int l = 0; l < m->nstages && l < 32; l++)
            fprintf(out, " %.3g", cdp_stage_flops(m, l, B) / 1e9);
        fputc('\n', out);
    }
    explain_ranks(out, c);
    if (c->framework == CDP_FW_MODEL_PARALLEL) {
        cdp_sched_config dp = *c;
        dp.rule = CDP_RULE_DP;
        fprintf(out, "  (its dp baseline, every worker in lockstep, needs %d ranks: N x L)\n",
                cdp_schedule_ranks_needed(&dp));
    }
    fprintf(out, "offsets (ticks):");
    for (int i = 0; i < c->N && i < 32; i++) fprintf(out, " %d", cdp_offset(c->N, c->L, c->rule, i));
    fprintf(out, c->N > 32 ? " ...\n" : "\n");
    if (c->L <= 16 && c->N <= 32) {
        fprintf(out, "lag(worker, stage): parameter version used = step - lag\n");
        for (int i = 0; i < c->N; i++) {
            fprintf(out, "  worker %2d:", i);
            for (int l = 0; l < c->L; l++) fprintf(out, " %d", cdp_lag(c->N, c->L, c->rule, i, l));
            fputc('\n', out);
        }
    }
    fputc('\n', out);
    picture(out, c);

    plan_fig f, fd;
    cdp_sched_config dp = *c;
    dp.rule = CDP_RULE_DP;
    dp.deterministic = 0;
    if (figures(c, m, B, &f) || figures(&dp, m, B, &fd)) {
        snprintf(err, errlen, "--plan: out of memory");
        return -1;
    }
    if (c->framework == CDP_FW_MODEL_PARALLEL)
        dp.P = cdp_schedule_ranks_needed(&dp);
    double coll = schedule_traffic(c, m, B, &f);
    if (coll < 0 || schedule_traffic(&dp, m, B, &fd) < 0) {
        fprintf(out, "(traffic figures need the instruction lists; this size is too big to build them here)\n");
        memset(f.sent, 0, sizeof(double) * (size_t)f.T);
        memset(fd.sent, 0, sizeof(double) * (size_t)fd.T);
        coll = -1;
    }
    int list = f.T <= 64;
    if (list) {
        fprintf(out, "%-6s %12s %16s %16s\n", "tick", "act (stages)", "act bytes", "bytes sent");
        for (int t = 0; t < f.T; t++) {
            if (m)
                fprintf(out, "%-6d %12lld %16.0f %16.0f\n", t, (long long)f.units[t],
                        f.act_bytes[t], f.sent[t]);
            else   /* no model at this many stages: no activation bytes (not zeros);
                    * traffic in stage-gradient units */
                fprintf(out, "%-6d %12lld %16s %16.0f\n", t, (long long)f.units[t], "-",
                        f.sent[t]);
        }
        fputc('\n', out);
    }
    int64_t pu, pud;
    double pb, pbd, ps, psd, ms, msd;
    peaks(&f, &pu, &pb, &ps, &ms);
    peaks(&fd, &pud, &pbd, &psd, &msd);
    if (m)
        fprintf(out, "peak activations: %lld stage-activations (%.0f bytes at B=%d); dp: %lld (%.0f bytes)\n",
                (long long)pu, pb, B, (long long)pud, pbd);
    else
        fprintf(out, "peak activations: %lld stage-activations; dp: %lld (more stages than the model has "
                "layers: figures in stage units, traffic in stage-gradient units)\n", (long long)pu, (long long)pud);
    fprintf(out, "peak ratio %s/dp: activations %.3f", cdp_rule_name(c->rule), (double)pu / (double)pud);
    if (psd > 0)
        fprintf(out, ", bytes sent in the busiest tick %.3f", ps / psd);
    fputc('\n', out);
    /* the timeline's count is an upper bound of what the executor holds:
     * say so, or users compare it with --metrics and distrust one of them */
    fprintf(out, "  (activations as the timeline counts them: a stage's, from its forward to its\n"
            "  backward; a run measures what it holds, cdp_run --metrics: lower where the executor\n"
            "  frees a stage's output once the next stage's backward has read it, a little higher\n"
            "  for the gradients in flight between stages)\n");
    if (psd > 0)
        fprintf(out, "bytes sent: peak tick %.0f, mean per tick %.0f (dp with its all-reduce: peak %.0f, mean %.0f;\n"
                "  an all-reduce counts 2(P-1)/P x its bytes per rank, the ring algorithm's traffic)\n",
                ps, ms, psd, msd);
    if (coll >= 0)
        fprintf(out, "collective calls per step (all ranks): %g\n", coll);
    fig_free(&f);
    fig_free(&fd);
    return 0;
}
