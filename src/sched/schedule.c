/* Schedule builders: (N, L, P, rule, framework, K) -> instruction lists.
 *
 * Every builder emits instructions with a sort key (tick, phase, sub, seq);
 * sorting each rank's list by that key gives the order the executor runs.
 * Phases inside one tick:
 *   0  parameters       zero: the owner serves and borrowers post for the
 *                       uses of this tick
 *   1  backward chains  per worker, lowest stage first, then worker order:
 *                       receive partial, BWD, ACC, send partial, finalize
 *                       and send the full sum
 *   2  APPLY            (replicated, model-parallel) updates due before a
 *                       forward of this tick uses them; after the backward
 *                       chains, which never need the new version, so that
 *                       their partial sums leave before this rank waits for
 *                       a full sum; then the receive of the next full sum
 *                       into the buffer the APPLY has just read (zero
 *                       posts it in phase 4 of the tick the sum is ready:
 *                       its owner holds the buffer only until the APPLY).  An APPLY
 *                       due before the next full sum is finalized in this
 *                       tick's chains runs in phase 0 instead (apply_tick)
 *   3  forwards         per worker
 *   4  end of tick      posts of full-sum receives, collectives; zero: the
 *                       owner's APPLY of the sum that arrived in this tick,
 *                       then the receives of the partial sums of the next
 * Sends come as early in a tick as their data exists, and every receive is
 * matched by a send at the same or an earlier tick on a lower position of
 * the dependency chain, so no rank waits on something it would only do
 * later (tests/test_schedule.c checks this by simulation). */
#include <limits.h>
#include <stdlib.h>
#include "cdp/grow.h"
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
    CDP_GROW(p->ins, p->n, p->cap, 256);
    p->ins[p->n++] = in;
}

enum { PH_PARAMS = 0, PH_BWD = 1, PH_APPLY = 2, PH_FWD = 3, PH_END = 4 };
/* zero: a borrowed stage goes back first thing at the end of its tick,
 * before the receives and updates of that phase allocate */
enum { DROP_SUB = -1000 };

static void kpush(keyed_list *l, int tick, int phase, int sub, int seq, cdp_instr in)
{
    CDP_GROW(l->v, l->n, l->cap, 256);
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
    cdp_instr in = { 0, (uint8_t)op, (uint8_t)flags, (int16_t)stage, worker, peer, step, version, -1 };
    return in;
}

static cdp_instr due(cdp_instr in, int tick)
{
    in.due = tick;
    return in;
}

/* Tick at which the full gradient of (stage l, step s) exists: the last
 * worker's backward of l (or the end of the step under an all-reduce). */
static int grad_ready_tick(const cdp_sched_config *c, int use_collective, int s, int l)
{
    int L2 = 2 * c->L;
    if (use_collective)
        return L2 * s + L2 - 1;
    return L2 * s + cdp_offset(c->N, c->L, c->rule, c->N - 1) + L2 - 1 - l;
}

static int first_worker(int N, int P, int r)
{
    return (int)(((int64_t)r * N) / P);
}

static int fwd_tick(const cdp_sched_config *c, int s, int i, int l)
{
    return 2 * c->L * s + cdp_offset(c->N, c->L, c->rule, i) + l;
}

static int bwd_tick(const cdp_sched_config *c, int s, int i, int l)
{
    return 2 * c->L * s + cdp_offset(c->N, c->L, c->rule, i) + 2 * c->L - 1 - l;
}

/* Where APPLY(version st + 1) of stage l goes on holder r.
 * zero: as soon as the full sum of step st is on the owner (end of that
 * tick), so that the owner holds it only briefly.  Every use of the
 * version it overwrites is over by then (a lagging worker finishes its
 * backward of step st before worker N-1 does), and the first use of the
 * new version comes in a later tick (the cdp-v2 lag rule).
 * Otherwise: the latest tick still in time, that is before the first
 * forward that uses the version, before the next full sum of the stage
 * lands in the same buffer, and at the latest at the drain; in that tick
 * after the backward chains (PH_APPLY), unless the next full sum is
 * finalized in those chains (PH_PARAMS). */
static int sum_is_local(const int *slot, int N, int L, int r, int l)
{
    return slot[0 * L + l] == r && slot[(N - 1) * L + l] == r;
}

static int apply_tick(const cdp_sched_config *c, int collective, const int *slot, int r, int l,
                      int st, int drain, int *phase)
{
    const int N = c->N, L = c->L, K = c->K, v = st + 1;
    if (c->framework == CDP_FW_ZERO) {
        *phase = PH_END;
        return collective ? bwd_tick(c, st, 0, l) : grad_ready_tick(c, 0, st, l);
    }
    int t = drain;
    for (int i = 0; i < N; i++) {
        if (c->framework != CDP_FW_ZERO && slot[i * L + l] != r) continue;
        int sp = v + cdp_lag(N, L, c->rule, i, l);
        if (sp < K && fwd_tick(c, sp, i, l) < t) t = fwd_tick(c, sp, i, l);
    }
    int early = 0;
    if (st + 1 < K) {
        int tn = grad_ready_tick(c, collective, st + 1, l);
        if (tn <= t) {
            t = tn;
            early = 1;
        }
        /* a sum finalized on this rank, whose next first contribution is
         * also made here: the update comes before that backward, which can
         * then add onto the gradient buffer the update has just cleared
         * (exec.c, zeroed[l]); nothing is waited for */
        if (!collective && sum_is_local(slot, N, L, r, l) && bwd_tick(c, st + 1, 0, l) <= t) {
            t = bwd_tick(c, st + 1, 0, l);
            early = 1;
        }
    }
    *phase = early ? PH_PARAMS : PH_APPLY;
    return t;
}

/* Model-parallel: the ranks of stage l are shared by the workers whose
 * forward and backward ticks (mod 2L, the period of the timeline) do not
 * collide; workers are placed greedily in worker order.  Ranks are numbered
 * stage by stage.  Returns the number of ranks; slot may be NULL. */
static int place_model_parallel(const cdp_sched_config *c, int *slot)
{
    const int N = c->N, L = c->L, L2 = 2 * L;
    if (c->rule == CDP_RULE_DP) {   /* lockstep: every worker its own rank per stage */
        if (slot)
            for (int i = 0; i < N; i++)
                for (int l = 0; l < L; l++)
                    slot[i * L + l] = l * N + i;
        return N * L;
    }
    unsigned char *busy = calloc((size_t)N * L2, 1);   /* [rank of the stage][tick mod 2L] */
    int *rank_of = malloc(sizeof(int) * (size_t)N);
    if (!busy || !rank_of) abort();
    int base = 0;
    for (int l = 0; l < L; l++) {
        int nr = 0;
        for (int i = 0; i < N; i++) {
            int a = (cdp_offset(N, L, c->rule, i) + l) % L2;
            int b = (cdp_offset(N, L, c->rule, i) + L2 - 1 - l) % L2;
            int r = 0;
            while (r < nr && (busy[(size_t)r * L2 + a] || busy[(size_t)r * L2 + b]))
                r++;
            if (r == nr) nr++;
            busy[(size_t)r * L2 + a] = busy[(size_t)r * L2 + b] = 1;
            rank_of[i] = r;
        }
        memset(busy, 0, (size_t)nr * L2);
        if (slot)
            for (int i = 0; i < N; i++)
                slot[i * L + l] = base + rank_of[i];
        base += nr;
    }
    free(busy);
    free(rank_of);
    return base;
}

int cdp_schedule_ranks_needed(const cdp_sched_config *c)
{
    if (c->framework == CDP_FW_MODEL_PARALLEL)
        return place_model_parallel(c, NULL);
    return c->P;
}

/* One builder for every framework.  Each (worker, stage) has a rank
 * (slot_rank); stage l's parameters persist on its holders (every rank
 * under replicated, the ranks of the stage under model-parallel, the owner
 * under zero).  Activations and their gradients travel between the ranks of
 * consecutive stages of a worker; stage gradients are summed in worker
 * order, hopping between ranks where consecutive workers live on different
 * ranks, and the rank of worker N-1 sends the mean to the holders; or, for
 * dp without --deterministic, each rank sums its own workers and a
 * collective finishes the job.  Under zero, a rank that computes with a
 * stage it does not own gets it from the owner for that tick only. */
static void build(const cdp_sched_config *c, int only_rank, cdp_schedule *s, keyed_list *lists)
{
    const int N = c->N, L = c->L, P = c->P, K = c->K;
    const int fw = c->framework;
    const int collective = (c->rule == CDP_RULE_DP && !c->deterministic);
    const int drain = s->nticks;
    const int *slot = s->slot_rank;
#define SLOT(i, l) slot[(i) * L + (l)]
    unsigned char *holder = calloc((size_t)P * L, 1);
    if (!holder) abort();
    for (int l = 0; l < L; l++)
        for (int r = 0; r < P; r++)
            holder[r * L + l] = fw == CDP_FW_REPLICATED ? 1 : fw == CDP_FW_ZERO ? s->stage_owner[l] == r : 0;
    if (fw == CDP_FW_MODEL_PARALLEL)
        for (int i = 0; i < N; i++)
            for (int l = 0; l < L; l++)
                holder[SLOT(i, l) * L + l] = 1;
#define WANT(r) (only_rank < 0 || only_rank == (r))

    for (int st = 0; st < K; st++) {
        for (int i = 0; i < N; i++) {
            for (int l = 0; l < L; l++) {
                const int r = SLOT(i, l);
                const int v = st - cdp_lag(N, L, c->rule, i, l);
                const int tf = fwd_tick(c, st, i, l), tb = bwd_tick(c, st, i, l);
                const int prev_r = l > 0 ? SLOT(i, l - 1) : r, next_r = l < L - 1 ? SLOT(i, l + 1) : r;
                /* ---- forward */
                if (WANT(r)) {
                    if (prev_r != r)
                        kpush(&lists[r], tf, PH_FWD, i, 0, mk(CDP_OP_RECV_ACT, i, l, prev_r, st, v, 0));
                    kpush(&lists[r], tf, PH_FWD, i, 1, mk(CDP_OP_FWD, i, l, -1, st, v, 0));
                    if (next_r != r)
                        kpush(&lists[r], tf, PH_FWD, i, 2, due(mk(CDP_OP_SEND_ACT, i, l, next_r, st, v, 0), tf + 1));
                }
                /* ---- backward chain */
                if (WANT(r)) {
                    keyed_list *kl = &lists[r];
                    /* lowest stage first: those chains free more activation
                     * memory than they allocate (stage 0 allocates none), so the
                     * peak inside a tick stays at its boundary level */
                    const int bsub = l * N + i;
                    if (next_r != r)
                        kpush(kl, tb, PH_BWD, bsub, 0, mk(CDP_OP_RECV_DACT, i, l, next_r, st, v, 0));
                    /* zero: the receive of a partial sum is posted at the very
                     * end of the tick before its use, after that tick has freed
                     * what it could: the sender's copy can go before either
                     * rank allocates for the next tick */
                    int from = i > 0 ? SLOT(i - 1, l) : r;
                    if (!collective && i > 0 && from != r) {
                        if (fw == CDP_FW_ZERO)
                            kpush(kl, tb - 1, PH_END, 3000 + bsub, 1, mk(CDP_OP_RECV_GRAD, i, l, from, st, 0, 0));
                        else
                            kpush(kl, tb, PH_BWD, bsub, 1, mk(CDP_OP_RECV_GRAD, i, l, from, st, 0, 0));
                    }
                    int first;
                    if (collective) {   /* first of this rank's workers on stage l */
                        first = 1;
                        for (int j = 0; j < i; j++)
                            if (SLOT(j, l) == r) first = 0;
                    } else {
                        first = i == 0;
                    }
                    /* a first contribution is written straight into the accumulator */
                    kpush(kl, tb, PH_BWD, bsub, 2, mk(CDP_OP_BWD, i, l, -1, st, v, first ? CDP_F_FIRST : 0));
                    kpush(kl, tb, PH_BWD, bsub, 3, mk(CDP_OP_ACC, i, l, -1, st, 0, first ? CDP_F_FIRST : 0));
                    if (prev_r != r)
                        kpush(kl, tb, PH_BWD, bsub, 4, due(mk(CDP_OP_SEND_DACT, i, l, prev_r, st, v, 0), tb + 1));
                    if (!collective && i < N - 1 && SLOT(i + 1, l) != r)
                        kpush(kl, tb, PH_BWD, bsub, 5, due(mk(CDP_OP_SEND_GRAD, i, l, SLOT(i + 1, l), st, 0, 0),
                                                   bwd_tick(c, st, i + 1, l) - (fw == CDP_FW_ZERO)));
                    if (!collective && i == N - 1) {
                        kpush(kl, tb, PH_BWD, bsub, 6, mk(CDP_OP_FINALIZE, -1, l, -1, st, 0, 0));
                        int lastq = -1;
                        for (int q = 0; q < P; q++)
                            if (q != r && holder[q * L + l]) lastq = q;
                        for (int q = 0; q < P; q++)
                            if (q != r && holder[q * L + l])
                                kpush(kl, tb, PH_BWD, bsub, 7 + q, due(mk(CDP_OP_SEND_FULL, -1, l, q, st, 0,
                                                                  q == lastq ? CDP_F_LAST : 0), tb));
                    }
                }
            }
        }
        /* ---- full gradients reach the holders */
        for (int l = 0; l < L; l++) {
            const int tg = grad_ready_tick(c, collective, st, l);
            const int fin = SLOT(N - 1, l);
            for (int r = 0; r < P; r++) {
                if (!WANT(r)) continue;
                if (collective) {
                    if (fw == CDP_FW_REPLICATED) {
                        if (l == 0)
                            kpush(&lists[r], tg, PH_END, 0, 0, mk(CDP_OP_ALLREDUCE, -1, -1, -1, st, 0, 0));
                    } else if (fw == CDP_FW_MODEL_PARALLEL) {
                        if (holder[r * L + l])
                            kpush(&lists[r], tg, PH_END, l, 0, mk(CDP_OP_ALLREDUCE, -1, l, -1, st, 0, 0));
                    } else {    /* zero: reduce to the owner at the stage's backward tick */
                        int t = bwd_tick(c, st, 0, l);
                        kpush(&lists[r], t, PH_END, l, 0, mk(CDP_OP_REDUCE_GRAD, -1, l, s->stage_owner[l], st, 0, 0));
                    }
                } else if (holder[r * L + l] && r != fin) {
                    /* posted as soon as the buffer is free, i.e. right after
                     * the APPLY that reads the previous full sum: the sender
                     * then finds the receive posted and does not wait for
                     * this rank to reach tick tg */
                    int ph = PH_END;
                    int tp = tg;
                    if (st > 0 && fw != CDP_FW_ZERO)
                        tp = apply_tick(c, collective, slot, r, l, st - 1, drain, &ph);
                    if (tp < tg)
                        kpush(&lists[r], tp, ph, l, 2, mk(CDP_OP_RECV_FULL, -1, l, fin, st, 0, 0));
                    else
                        kpush(&lists[r], tg, PH_END, l, 0, mk(CDP_OP_RECV_FULL, -1, l, fin, st, 0, 0));
                }
            }
        }
    }

    /* ---- parameters a zero rank borrows: per (rank, stage, version, tick) */
    typedef struct use { int tick, rank, stage, version; } use;
    use *uses = NULL;
    size_t nuse = 0, capuse = 0;
    if (fw == CDP_FW_ZERO && !collective) {
        for (int st = 0; st < K; st++)
            for (int i = 0; i < N; i++)
                for (int l = 0; l < L; l++) {
                    int r = SLOT(i, l);
                    if (holder[r * L + l]) continue;
                    int v = st - cdp_lag(N, L, c->rule, i, l);
                    for (int b = 0; b < 2; b++) {
                        int t = b ? bwd_tick(c, st, i, l) : fwd_tick(c, st, i, l);
                        int dup = 0;
                        for (size_t u = nuse; u-- > 0 && nuse - u <= (size_t)4 * N * L;)
                            if (uses[u].tick == t && uses[u].rank == r && uses[u].stage == l && uses[u].version == v)
                                dup = 1;
                        if (dup) continue;
                        if (nuse == capuse) {
                            capuse = capuse ? 2 * capuse : 1024;
                            uses = realloc(uses, capuse * sizeof *uses);
                            if (!uses) abort();
                        }
                        uses[nuse++] = (use){ t, r, l, v };
                    }
                }
    }
    if (fw == CDP_FW_ZERO) {
        if (collective) {
            /* ZeRO-3 baseline: before each use the owner broadcasts the stage
             * (dp: every worker uses stage l at the same two ticks) */
            for (int st = 0; st < K; st++)
                for (int l = 0; l < L; l++)
                    for (int b = 0; b < 2; b++) {
                        int t = b ? bwd_tick(c, st, 0, l) : fwd_tick(c, st, 0, l);
                        int owner = s->stage_owner[l];
                        for (int q = 0; q < P; q++) {
                            if (!WANT(q)) continue;
                            kpush(&lists[q], t, PH_PARAMS, 1000 + l, 0, mk(CDP_OP_BCAST_PARAMS, -1, l, owner, st, st, 0));
                            if (q != owner)
                                kpush(&lists[q], t, PH_END, DROP_SUB + l, 0, mk(CDP_OP_DROP_PARAMS, -1, l, -1, st, st, 0));
                        }
                    }
        } else {
            for (size_t u = 0; u < nuse; u++) {
                const use *x = &uses[u];
                if (!WANT(x->rank)) continue;
                const int owner = s->stage_owner[x->stage];
                kpush(&lists[x->rank], x->tick, PH_PARAMS, 1000 + x->stage, x->version & 1,
                      mk(CDP_OP_RECV_PARAMS, -1, x->stage, owner, 0, x->version, 0));
                kpush(&lists[x->rank], x->tick, PH_END, DROP_SUB + x->stage, x->version & 1,
                      mk(CDP_OP_DROP_PARAMS, -1, x->stage, -1, 0, x->version, 0));
            }
        }
    }

    /* ---- APPLY of version v = st+1 on each holder, at the latest tick where
     * it is still in time: before its first use (any rank's under zero, since
     * the owner serves them), before the next full sum of the stage lands in
     * the same buffer, and at the latest at the drain.  Under zero the owner
     * then sends v to every rank that borrows it. */
    for (int r = 0; r < P; r++) {
        if (!WANT(r) && fw != CDP_FW_ZERO) continue;
        for (int l = 0; l < L; l++) {
            if (!holder[r * L + l]) continue;
            int served_from = 0;   /* zero: sends for versions that exist before the segment */
            for (int st = -1; st < K; st++) {
                const int v = st + 1;
                int t = drain;
                if (st >= 0) {
                    int ph;
                    t = apply_tick(c, collective, slot, r, l, st, drain, &ph);
                    if (WANT(r))
                        kpush(&lists[r], t, ph, l, 1, mk(CDP_OP_APPLY, -1, l, -1, st, v, 0));
                } else {
                    t = 0;
                }
                if (fw != CDP_FW_ZERO || collective || !WANT(r)) continue;
                /* serve the borrowed uses of version v (and of v-1 = -1 at the
                 * start) in the tick of the use: the owner applied v already */
                for (size_t u = 0; u < nuse; u++) {
                    const use *x = &uses[u];
                    if (x->stage != l) continue;
                    int match = x->version == v || (st < 0 && x->version < 0);
                    if (!match) continue;
                    kpush(&lists[r], x->tick, PH_PARAMS, 1000 + l, 2 + served_from++,
                          due(mk(CDP_OP_SEND_PARAMS, -1, l, x->rank, 0, x->version, 0), x->tick));
                }
            }
        }
    }
    free(uses);
    free(holder);
#undef SLOT
#undef WANT
}

/* CDP_F_LAST_USE on the last FWD or BWD of each (stage, version) in a
 * rank's sorted list, where the segment applies version + 2 (so nothing
 * after the segment reads it either). */
static void mark_last_uses(const cdp_sched_config *c, keyed_list *kl)
{
    const int L = c->L, K = c->K;
    unsigned char *seen = calloc((size_t)L * (size_t)(K + 1), 1);
    if (!seen) abort();
    for (size_t k = kl->n; k-- > 0;) {
        cdp_instr *in = &kl->v[k].in;
        if (in->op != CDP_OP_FWD && in->op != CDP_OP_BWD) continue;
        const int u = in->version;     /* -1 .. K-1 */
        unsigned char *f = &seen[(size_t)in->stage * (size_t)(K + 1) + (size_t)(u + 1)];
        if (!*f && u + 2 <= K)
            in->flags |= CDP_F_LAST_USE;
        *f = 1;
    }
    free(seen);
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
    if ((int64_t)2 * c->L * (c->K + 1) > INT_MAX / 2 || c->L > 512) {
        snprintf(err, errlen, "schedule: %d steps of %d stages is too long for one segment", c->K, c->L);
        return -1;
    }
    const int need = cdp_schedule_ranks_needed(c);
    if (c->framework == CDP_FW_MODEL_PARALLEL) {
        if (c->P < need) {
            snprintf(err, errlen, "--framework model-parallel with rule %s, N=%d workers and L=%d stages "
                     "needs %d ranks, got %d (cdp_run --plan explains the count)",
                     cdp_rule_name(c->rule), c->N, c->L, need, c->P);
            return -1;
        }
    } else if (c->N < c->P) {
        snprintf(err, errlen, "--workers %d is fewer than the %d ranks: each rank needs at least one worker",
                 c->N, c->P);
        return -1;
    }
    const int L2 = 2 * c->L;
    s->nticks = L2 * (c->K - 1) + cdp_offset(c->N, c->L, c->rule, c->N - 1) + L2;
    s->ranks_needed = need;
    s->worker_rank = malloc(sizeof(int) * c->N);
    s->slot_rank = malloc(sizeof(int) * (size_t)c->N * c->L);
    s->stage_owner = malloc(sizeof(int) * c->L);
    s->prog = calloc((size_t)c->P, sizeof *s->prog);
    keyed_list *lists = calloc((size_t)c->P, sizeof *lists);
    if (!s->worker_rank || !s->slot_rank || !s->stage_owner || !s->prog || !lists) abort();
    for (int r = 0; r < c->P; r++)
        for (int i = first_worker(c->N, c->P, r); i < first_worker(c->N, c->P, r + 1); i++)
            s->worker_rank[i] = r;
    for (int l = 0; l < c->L; l++)
        s->stage_owner[l] = (int)(((int64_t)l * c->P) / c->L);
    if (c->framework == CDP_FW_MODEL_PARALLEL) {
        place_model_parallel(c, s->slot_rank);
        for (int i = 0; i < c->N; i++) s->worker_rank[i] = -1;
    } else {
        for (int i = 0; i < c->N; i++)
            for (int l = 0; l < c->L; l++)
                s->slot_rank[i * c->L + l] = s->worker_rank[i];
    }

    build(c, only_rank, s, lists);

    for (int r = 0; r < c->P; r++) {
        keyed_list *kl = &lists[r];
        /* the ranks this build skips have empty lists (v == NULL), and
         * qsort's base must not be null even for 0 elements */
        if (kl->n)
            qsort(kl->v, kl->n, sizeof *kl->v, keyed_cmp);
        mark_last_uses(c, kl);
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

int cdp_schedule_sum_is_local(const cdp_schedule *s, int r, int l)
{
    return sum_is_local(s->slot_rank, s->cfg.N, s->cfg.L, r, l);
}

int cdp_schedule_holds(const cdp_schedule *s, int r, int l)
{
    switch (s->cfg.framework) {
    case CDP_FW_REPLICATED: return 1;
    case CDP_FW_ZERO: return s->stage_owner[l] == r;
    case CDP_FW_MODEL_PARALLEL:
        for (int i = 0; i < s->cfg.N; i++)
            if (s->slot_rank[i * s->cfg.L + l] == r) return 1;
        return 0;
    }
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
