/* Schedule builders: (N, L, P, rule, framework, K) -> instruction lists.
 *
 * Every builder emits instructions with a sort key (tick, phase, sub, seq);
 * sorting each rank's list by that key gives the order the executor runs.
 * Phases inside one tick:
 *   0  APPLY            updates due before anything in this tick uses them
 *   1  backward chains  per worker: receive partial, BWD, ACC, send partial,
 *                       finalize and send the full sum
 *   2  forwards         per worker
 *   3  end of tick      posts of full-sum receives, collectives
 * Sends come as early in a tick as their data exists, and every receive is
 * matched by a send at the same or an earlier tick on a lower position of
 * the dependency chain, so no rank waits on something it would only do
 * later (tests/test_schedule.c checks this by simulation). */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include "cdp/schedule.h"

typedef struct keyed {
    int32_t tick;
    int16_t phase;
    int32_t sub;
    int32_t seq;
    cdp_instr in;
} keyed;

typedef struct keyed_list {
    keyed *v;
    size_t n, cap;
} keyed_list;

static const char *const op_names[CDP_OP_COUNT] = {
    "FWD", "BWD", "ACC", "SEND_GRAD", "RECV_GRAD", "FINALIZE", "SEND_FULL",
    "RECV_FULL", "ALLREDUCE", "APPLY", "SEND_ACT", "RECV_ACT", "SEND_DACT",
    "RECV_DACT", "SEND_PARAMS", "RECV_PARAMS", "BCAST_PARAMS", "REDUCE_GRAD",
    "DROP_PARAMS",
};

const char *cdp_opcode_name(int op)
{
    return (op >= 0 && op < CDP_OP_COUNT) ? op_names[op] : "?";
}

const char *cdp_rule_name(cdp_rule r)
{
    switch (r) {
    case CDP_RULE_DP: return "dp";
    case CDP_RULE_CDP_V1: return "cdp-v1";
    case CDP_RULE_CDP_V2: return "cdp-v2";
    }
    return "?";
}

const char *cdp_framework_name(cdp_framework f)
{
    switch (f) {
    case CDP_FW_REPLICATED: return "replicated";
    case CDP_FW_MODEL_PARALLEL: return "model-parallel";
    case CDP_FW_ZERO: return "zero";
    }
    return "?";
}

int cdp_rule_parse(const char *s, cdp_rule *r)
{
    if (!strcmp(s, "dp")) *r = CDP_RULE_DP;
    else if (!strcmp(s, "cdp-v1")) *r = CDP_RULE_CDP_V1;
    else if (!strcmp(s, "cdp-v2")) *r = CDP_RULE_CDP_V2;
    else return -1;
    return 0;
}

int cdp_framework_parse(const char *s, cdp_framework *f)
{
    if (!strcmp(s, "replicated")) *f = CDP_FW_REPLICATED;
    else if (!strcmp(s, "model-parallel")) *f = CDP_FW_MODEL_PARALLEL;
    else if (!strcmp(s, "zero")) *f = CDP_FW_ZERO;
    else return -1;
    return 0;
}

int cdp_offset(int N, int L, cdp_rule rule, int i)
{
    if (rule == CDP_RULE_DP)
        return 0;
    return (int)(((int64_t)i * 2 * L) / N);
}

int cdp_lag(int N, int L, cdp_rule rule, int i, int l)
{
    switch (rule) {
    case CDP_RULE_DP: return 0;
    case CDP_RULE_CDP_V1: return 1;
    case CDP_RULE_CDP_V2:
        return (cdp_offset(N, L, rule, N - 1) - cdp_offset(N, L, rule, i) <= 2 * l) ? 0 : 1;
    }
    return 0;
}

void cdp_program_push(cdp_program *p, cdp_instr in)
{
    if (p->n == p->cap) {
        size_t cap = p->cap ? 2 * p->cap : 256;
        cdp_instr *v = realloc(p->ins, cap * sizeof *v);
        if (!v) abort();
        p->ins = v;
        p->cap = cap;
    }
    p->ins[p->n++] = in;
}

static void kpush(keyed_list *l, int tick, int phase, int sub, int seq, cdp_instr in)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 256;
        keyed *v = realloc(l->v, cap * sizeof *v);
        if (!v) abort();
        l->v = v;
        l->cap = cap;
    }
    in.tick = tick;
    l->v[l->n++] = (keyed){ tick, (int16_t)phase, sub, seq, in };
}

static int keyed_cmp(const void *a, const void *b)
{
    const keyed *x = a, *y = b;
    if (x->tick != y->tick) return x->tick < y->tick ? -1 : 1;
    if (x->phase != y->phase) return x->phase < y->phase ? -1 : 1;
    if (x->sub != y->sub) return x->sub < y->sub ? -1 : 1;
    if (x->seq != y->seq) return x->seq < y->seq ? -1 : 1;
    return 0;
}

static cdp_instr mk(int op, int worker, int stage, int peer, int step, int version, int flags)
{
    cdp_instr in = { 0, (uint8_t)op, (uint8_t)flags, (int16_t)stage, worker, peer, step, version };
    return in;
}

/* Tick at which the full gradient of (stage l, step s) exists. */
static int grad_ready_tick(const cdp_sched_config *c, int use_allreduce, int s, int l)
{
    int L2 = 2 * c->L;
    if (use_allreduce)
        return L2 * s + L2 - 1;
    return L2 * s + cdp_offset(c->N, c->L, c->rule, c->N - 1) + L2 - 1 - l;
}

static int first_worker(const cdp_sched_config *c, int r)
{
    return (int)(((int64_t)r * c->N) / c->P);
}

/* Replicated framework: every rank holds the whole model and a contiguous
 * block of workers.  Stage gradients are summed in worker order along the
 * ring of ranks (partial sums), the rank of worker N-1 finalises and sends
 * the full sum to every other rank; or, for dp, one MPI_Allreduce per step. */
static void build_replicated(const cdp_sched_config *c, int only_rank, cdp_schedule *s,
                             keyed_list *lists)
{
    const int N = c->N, L = c->L, P = c->P, K = c->K, L2 = 2 * L;
    const int use_allreduce = (c->rule == CDP_RULE_DP && !c->deterministic);
    const int final_rank = s->worker_rank[N - 1];
    const int drain = s->nticks;

    for (int r = 0; r < P; r++) {
        if (only_rank >= 0 && r != only_rank)
            continue;
        keyed_list *kl = &lists[r];
        const int w0 = first_worker(c, r), w1 = first_worker(c, r + 1);
        for (int st = 0; st < K; st++) {
            for (int i = w0; i < w1; i++) {
                const int start = L2 * st + cdp_offset(N, L, c->rule, i);
                for (int l = 0; l < L; l++) {
                    const int v = st - cdp_lag(N, L, c->rule, i, l);
                    kpush(kl, start + l, 2, i, l, mk(CDP_OP_FWD, i, l, -1, st, v, 0));
                    const int tb = start + L2 - 1 - l;
                    if (!use_allreduce && i == w0 && r > 0)
                        kpush(kl, tb, 1, i, 0, mk(CDP_OP_RECV_GRAD, i, l, r - 1, st, 0, 0));
                    kpush(kl, tb, 1, i, 1, mk(CDP_OP_BWD, i, l, -1, st, v, 0));
                    int first = (i == w0) && (use_allreduce || r == 0);
                    kpush(kl, tb, 1, i, 2, mk(CDP_OP_ACC, i, l, -1, st, 0, first ? CDP_F_FIRST : 0));
                    if (use_allreduce)
                        continue;
                    if (i == w1 - 1 && r != final_rank)
                        kpush(kl, tb, 1, i, 3, mk(CDP_OP_SEND_GRAD, i, l, r + 1, st, 0, 0));
                    if (i == N - 1) {
                        kpush(kl, tb, 1, i, 4, mk(CDP_OP_FINALIZE, -1, l, -1, st, 0, 0));
                        for (int q = 0; q < P; q++)
                            if (q != r)
                                kpush(kl, tb, 1, i, 5 + q, mk(CDP_OP_SEND_FULL, -1, l, q, st, 0, 0));
                    }
                }
            }
            if (use_allreduce) {
                kpush(kl, grad_ready_tick(c, 1, st, 0), 3, 0, 0,
                      mk(CDP_OP_ALLREDUCE, -1, -1, -1, st, 0, 0));
            } else if (r != final_rank) {
                for (int l = 0; l < L; l++)
                    kpush(kl, grad_ready_tick(c, 0, st, l), 3, l, 0,
                          mk(CDP_OP_RECV_FULL, -1, l, final_rank, st, 0, 0));
            }
        }
        /* APPLY of version v = st+1 at the latest tick where it is still in
         * time: before this rank's first use of v, before the next full sum
         * of the stage lands in the same buffer, and at the latest at the
         * drain. */
        for (int l = 0; l < L; l++) {
            for (int st = 0; st < K; st++) {
                const int v = st + 1;
                int t = drain;
                for (int i = w0; i < w1; i++) {
                    int sp = v + cdp_lag(N, L, c->rule, i, l);
                    if (sp < K) {
                        int tf = L2 * sp + cdp_offset(N, L, c->rule, i) + l;
                        if (tf < t) t = tf;
                    }
                }
                if (st + 1 < K) {
                    int tn = grad_ready_tick(c, use_allreduce, st + 1, l);
                    if (tn < t) t = tn;
                }
                kpush(kl, t, 0, l, 0, mk(CDP_OP_APPLY, -1, l, -1, st, v, 0));
            }
        }
    }
}

int cdp_schedule_ranks_needed(const cdp_sched_config *c)
{
    return c->P;
}

int cdp_schedule_build(const cdp_sched_config *c, int only_rank, cdp_schedule *s,
                       char *err, size_t errlen)
{
    memset(s, 0, sizeof *s);
    s->cfg = *c;
    if (c->N < 1 || c->L < 1 || c->P < 1 || c->K < 1) {
        snprintf(err, errlen, "schedule: N, L, P and K must be at least 1 (got N=%d L=%d P=%d K=%d)",
                 c->N, c->L, c->P, c->K);
        return -1;
    }
    if ((int64_t)2 * c->L * (c->K + 1) > INT_MAX / 2) {
        snprintf(err, errlen, "schedule: %d steps of %d stages is too long for one segment", c->K, c->L);
        return -1;
    }
    if (c->framework != CDP_FW_REPLICATED) {
        snprintf(err, errlen, "--framework %s: not implemented in this version",
                 cdp_framework_name(c->framework));
        return -1;
    }
    if (c->N < c->P) {
        snprintf(err, errlen, "--workers %d is fewer than the %d ranks: each rank needs at least one worker",
                 c->N, c->P);
        return -1;
    }
    const int L2 = 2 * c->L;
    s->nticks = L2 * (c->K - 1) + cdp_offset(c->N, c->L, c->rule, c->N - 1) + L2;
    s->ranks_needed = c->P;
    s->worker_rank = malloc(sizeof(int) * c->N);
    s->prog = calloc((size_t)c->P, sizeof *s->prog);
    keyed_list *lists = calloc((size_t)c->P, sizeof *lists);
    if (!s->worker_rank || !s->prog || !lists) abort();
    for (int r = 0; r < c->P; r++)
        for (int i = first_worker(c, r); i < first_worker(c, r + 1); i++)
            s->worker_rank[i] = r;

    build_replicated(c, only_rank, s, lists);

    for (int r = 0; r < c->P; r++) {
        keyed_list *kl = &lists[r];
        qsort(kl->v, kl->n, sizeof *kl->v, keyed_cmp);
        cdp_program *p = &s->prog[r];
        p->ins = malloc((kl->n ? kl->n : 1) * sizeof *p->ins);
        if (!p->ins) abort();
        for (size_t k = 0; k < kl->n; k++)
            p->ins[k] = kl->v[k].in;
        p->n = p->cap = kl->n;
        free(kl->v);
    }
    free(lists);
    return 0;
}

void cdp_schedule_free(cdp_schedule *s)
{
    if (s->prog)
        for (int r = 0; r < s->cfg.P; r++)
            free(s->prog[r].ins);
    free(s->prog);
    free(s->worker_rank);
    free(s->stage_owner);
    free(s->slot_rank);
    memset(s, 0, sizeof *s);
}

void cdp_instr_format(const cdp_instr *in, char *buf, size_t len)
{
    int n = snprintf(buf, len, "t=%d %s", in->tick, cdp_opcode_name(in->op));
    if (in->worker >= 0 && n < (int)len) n += snprintf(buf + n, len - n, " w=%d", in->worker);
    if (in->stage >= 0 && n < (int)len) n += snprintf(buf + n, len - n, " l=%d", in->stage);
    if (n < (int)len) n += snprintf(buf + n, len - n, " s=%d", in->step);
    switch (in->op) {
    case CDP_OP_FWD: case CDP_OP_BWD: case CDP_OP_APPLY:
    case CDP_OP_SEND_PARAMS: case CDP_OP_RECV_PARAMS: case CDP_OP_BCAST_PARAMS:
    case CDP_OP_DROP_PARAMS:
        if (n < (int)len) n += snprintf(buf + n, len - n, " v=%d", in->version);
        break;
    default: break;
    }
    if (in->peer >= 0 && n < (int)len) n += snprintf(buf + n, len - n, " peer=%d", in->peer);
    if ((in->flags & CDP_F_FIRST) && n < (int)len) snprintf(buf + n, len - n, " first");
}

void cdp_schedule_dump(FILE *f, const cdp_schedule *s, int rank)
{
    char buf[160];
    const cdp_program *p = &s->prog[rank];
    for (size_t k = 0; k < p->n; k++) {
        cdp_instr_format(&p->ins[k], buf, sizeof buf);
        fprintf(f, "rank %d: %s\n", rank, buf);
    }
}
