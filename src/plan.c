/* cdp_run --plan.  The figures come straight from the timeline (offset and
 * lag, the same functions the schedule builders use), in O(N*L*K), so that
 * N = L = 1024 takes well under a second; tests/test_schedule.c checks them
 * against the instruction lists for small configurations. */
#include <stdlib.h>
#include <string.h>
#include "cdp/plan.h"

typedef struct plan_fig {
    int T;                 /* ticks */
    int64_t *units;        /* stage-activations live per tick (all ranks) */
    double *act_bytes;     /* activation bytes live per tick (all ranks) */
    double *sent;          /* bytes sent per tick (all ranks) */
} plan_fig;

static int first_worker(int N, int P, int r) { return (int)(((int64_t)r * N) / P); }

static double stage_param_bytes(const cdp_model *m, int l)
{
    return m ? (double)m->stage_n[l] * 4.0 : 1.0;
}

static int figures(const cdp_sched_config *c, const cdp_model *m, int B, plan_fig *f)
{
    const int N = c->N, L = c->L, P = c->P, K = c->K, L2 = 2 * L;
    const int T = L2 * (K - 1) + cdp_offset(N, L, c->rule, N - 1) + L2;
    f->T = T;
    int64_t *du = calloc((size_t)T + 1, sizeof *du);
    double *db = calloc((size_t)T + 1, sizeof *db);
    f->units = calloc((size_t)T, sizeof *f->units);
    f->act_bytes = calloc((size_t)T, sizeof *f->act_bytes);
    f->sent = calloc((size_t)T, sizeof *f->sent);
    if (!du || !db || !f->units || !f->act_bytes || !f->sent) return -1;
    double total_param_bytes = 0;
    for (int l = 0; l < L; l++) total_param_bytes += stage_param_bytes(m, l);
    const int use_allreduce = c->rule == CDP_RULE_DP && !c->deterministic;
    for (int s = 0; s < K; s++) {
        for (int i = 0; i < N; i++) {
            int start = L2 * s + cdp_offset(N, L, c->rule, i);
            for (int l = 0; l < L; l++) {
                int tf = start + l, tb = start + L2 - 1 - l;
                double ab = m ? (double)cdp_stage_act_floats(m, l, B) * 4.0 : 0;
                du[tf] += 1; du[tb + 1] -= 1;
                db[tf] += ab; db[tb + 1] -= ab;
            }
        }
        if (P == 1) continue;
        if (use_allreduce) {
            f->sent[L2 * s + L2 - 1] += 2.0 * (P - 1) * total_param_bytes;
            continue;
        }
        for (int l = 0; l < L; l++) {
            for (int r = 0; r < P - 1; r++) {
                int last = first_worker(N, P, r + 1) - 1;
                int tb = L2 * s + cdp_offset(N, L, c->rule, last) + L2 - 1 - l;
                f->sent[tb] += stage_param_bytes(m, l);
            }
            int tb = L2 * s + cdp_offset(N, L, c->rule, N - 1) + L2 - 1 - l;
            f->sent[tb] += (double)(P - 1) * stage_param_bytes(m, l);
        }
    }
    int64_t u = 0;
    double b = 0;
    for (int t = 0; t < T; t++) {
        u += du[t];
        b += db[t];
        f->units[t] = u;
        f->act_bytes[t] = b;
    }
    free(du);
    free(db);
    return 0;
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
    if (c->N < 1 || c->L < 1 || c->P < 1 || c->K < 1 || c->N < c->P) {
        snprintf(err, errlen, "--plan: need N >= P >= 1, L >= 1 (got N=%d L=%d P=%d)", c->N, c->L, c->P);
        return -1;
    }
    fprintf(out, "plan: rule %s, framework %s, N=%d workers, L=%d stages, P=%d ranks, %d steps shown\n",
            cdp_rule_name(c->rule), cdp_framework_name(c->framework), c->N, c->L, c->P, c->K);
    fprintf(out, "ranks used: %d (workers in contiguous blocks; each rank holds a full replica)\n",
            cdp_schedule_ranks_needed(c));
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
    int list = f.T <= 64;
    if (list) {
        fprintf(out, "%-6s %12s %16s %16s\n", "tick", "act (stages)", "act bytes", "bytes sent");
        for (int t = 0; t < f.T; t++)
            fprintf(out, "%-6d %12lld %16.0f %16.0f\n", t, (long long)f.units[t], f.act_bytes[t], f.sent[t]);
        fputc('\n', out);
    }
    int64_t pu, pud;
    double pb, pbd, ps, psd, ms, msd;
    peaks(&f, &pu, &pb, &ps, &ms);
    peaks(&fd, &pud, &pbd, &psd, &msd);
    fprintf(out, "peak activations: %lld stage-activations (%.0f bytes at B=%d); dp: %lld (%.0f bytes)\n",
            (long long)pu, pb, B, (long long)pud, pbd);
    fprintf(out, "peak ratio %s/dp: activations %.3f", cdp_rule_name(c->rule), (double)pu / (double)pud);
    if (c->P > 1 && psd > 0)
        fprintf(out, ", bytes sent in the busiest tick %.3f", ps / psd);
    fputc('\n', out);
    if (c->P > 1)
        fprintf(out, "bytes sent: peak tick %.0f, mean per tick %.0f (dp with MPI_Allreduce: peak %.0f, mean %.0f;\n"
                "  an all-reduce counts 2(P-1)/P x its bytes per rank, the ring algorithm's traffic)\n",
                ps, ms, psd, msd);
    fprintf(out, "collective calls per step: %d\n",
            (c->rule == CDP_RULE_DP && !c->deterministic) ? 1 : 0);
    fig_free(&f);
    fig_free(&fd);
    return 0;
}
