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
 * later (tests/unit/test_schedule.c checks this by simulation). */
#include <limits.h>
#include <stdlib.h>
#include "util/grow.h"
#include <string.h>
#include "sched/schedule.h"

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
/* Order keys inside a phase, beyond every stage index (L <= 4096): in
 * PH_PARAMS the parameters' sends and receives come after the updates
 * (sub l); in PH_END a borrowed stage goes back first thing, before the
 * receives and updates of that phase allocate, and the early receives of
 * partial sums come last. */
enum { PARAMS_SUB = 1 << 16, DROP_SUB = -(1 << 16), EARLY_GRAD_SUB = 1 << 17 };

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
    /* replicated: rank r's workers are one block (a shortcut that makes
     * --plan --machine's thousands of ranks affordable) */
    const int replicated = c->framework == CDP_FW_REPLICATED;
    const int i0 = replicated ? first_worker(N, c->P, r) : 0;
    const int i1 = replicated ? first_worker(N, c->P, r + 1) : N;
    for (int i = i0; i < i1; i++) {
        if (slot[i * L + l] != r) continue;
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

/* What every framework's builder shares: the configuration, the
 * schedule being built (its placement: slot_rank, stage_owner), the
 * per-rank lists, which ranks hold which stage, and zero's borrowed uses. */
typedef struct use { int tick, rank, stage, version; } use;

typedef struct sched_ctx {
    const cdp_sched_config *c;
    const cdp_schedule *s;
    keyed_list *lists;
    int only_rank;            /* -1: every rank */
    int collective;           /* dp without --deterministic: a collective sums */
    int drain;                /* the tick after the segment */
    unsigned char *holder;    /* [r * L + l]: rank r keeps stage l between steps */
    use *uses;                /* zero: (tick, rank, stage, version) a rank borrows */
    size_t nuse;
    struct link_key *chain;   /* [P]: deliver_full_sum's scratch */
} sched_ctx;

#define SLOT(b, i, l) ((b)->s->slot_rank[(i) * (b)->c->L + (l)])
#define WANT(b, r) ((b)->only_rank < 0 || (b)->only_rank == (r))
#define HOLDS(b, r, l) ((b)->holder[(r) * (b)->c->L + (l)])

/* A framework: where the parameters live (cdp_schedule_holds), how a
 * stage's full gradient reaches them, and (zero) how the ranks that do not
 * hold a stage borrow it for the ticks that use it. */
typedef struct framework_builder {
    /* partial sums: the receive posted at the end of the tick before the
     * backward that uses it (instead of in that backward's chain) */
    int early_partial_recv;
    /* the full gradient of (step st, stage l) reaches the holders, at tick tg */
    void (*deliver)(const sched_ctx *b, int st, int l, int tg);
    /* the borrowers' receives and drops, or the collective broadcasts; NULL: none */
    void (*lend)(sched_ctx *b);
    /* after the holder r of stage l applies version st + 1: what it serves; NULL: none */
    void (*serve)(const sched_ctx *b, int r, int l, int st, int *served);
} framework_builder;

/* Forward of (step st, worker i, stage l), and its backward chain: receive
 * the output's gradient and the partial sum, BWD and ACC, send the input's
 * gradient and the partial sum on, and on the last worker finalize the
 * full sum (deliver_full_sum sends it on). */
static void emit_slot(const sched_ctx *b, const framework_builder *fb, int st, int i, int l)
{
    const cdp_sched_config *c = b->c;
    const int N = c->N, L = c->L, collective = b->collective;
    const int r = SLOT(b, i, l);
    if (!WANT(b, r))
        return;
    const int v = st - cdp_lag(N, L, c->rule, i, l);
    const int tf = fwd_tick(c, st, i, l), tb = bwd_tick(c, st, i, l);
    const int prev_r = l > 0 ? SLOT(b, i, l - 1) : r, next_r = l < L - 1 ? SLOT(b, i, l + 1) : r;
    keyed_list *kl = &b->lists[r];
    /* ---- forward */
    if (prev_r != r)
        kpush(kl, tf, PH_FWD, i, 0, mk(CDP_OP_RECV_ACT, i, l, prev_r, st, v, 0));
    kpush(kl, tf, PH_FWD, i, 1, mk(CDP_OP_FWD, i, l, -1, st, v, 0));
    if (next_r != r)
        kpush(kl, tf, PH_FWD, i, 2, due(mk(CDP_OP_SEND_ACT, i, l, next_r, st, v, 0), tf + 1));
    /* ---- backward chain: lowest stage first, as those chains free more
     * activation memory than they allocate (stage 0 allocates none), so the
     * peak inside a tick stays at its boundary level */
    const int bsub = l * N + i;
    if (next_r != r)
        kpush(kl, tb, PH_BWD, bsub, 0, mk(CDP_OP_RECV_DACT, i, l, next_r, st, v, 0));
    int from = i > 0 ? SLOT(b, i - 1, l) : r;
    if (!collective && i > 0 && from != r) {
        if (fb->early_partial_recv)
            kpush(kl, tb - 1, PH_END, EARLY_GRAD_SUB + bsub, 1, mk(CDP_OP_RECV_GRAD, i, l, from, st, 0, 0));
        else
            kpush(kl, tb, PH_BWD, bsub, 1, mk(CDP_OP_RECV_GRAD, i, l, from, st, 0, 0));
    }
    int first;
    if (collective) {   /* first of this rank's workers on stage l */
        first = 1;
        for (int j = 0; j < i; j++)
            if (SLOT(b, j, l) == r) first = 0;
    } else {
        first = i == 0;
    }
    /* a first contribution is written straight into the accumulator */
    kpush(kl, tb, PH_BWD, bsub, 2, mk(CDP_OP_BWD, i, l, -1, st, v, first ? CDP_F_FIRST : 0));
    kpush(kl, tb, PH_BWD, bsub, 3, mk(CDP_OP_ACC, i, l, -1, st, 0, first ? CDP_F_FIRST : 0));
    if (prev_r != r)
        kpush(kl, tb, PH_BWD, bsub, 4, due(mk(CDP_OP_SEND_DACT, i, l, prev_r, st, v, 0), tb + 1));
    if (!collective && i < N - 1 && SLOT(b, i + 1, l) != r)
        kpush(kl, tb, PH_BWD, bsub, 5, due(mk(CDP_OP_SEND_GRAD, i, l, SLOT(b, i + 1, l), st, 0, 0),
                                           bwd_tick(c, st, i + 1, l) - fb->early_partial_recv));
    if (!collective && i == N - 1)
        kpush(kl, tb, PH_BWD, bsub, 6, mk(CDP_OP_FINALIZE, -1, l, -1, st, 0, 0));
}

/* The holders of stage l other than the finalizer, in the order they
 * apply version st + 1: the order the full sum of step st travels in. */
typedef struct link_key { int tick, phase, dist, rank; } link_key;

static int link_key_cmp(const void *a, const void *b)
{
    const link_key *x = a, *y = b;
    if (x->tick != y->tick) return x->tick < y->tick ? -1 : 1;
    if (x->phase != y->phase) return x->phase < y->phase ? -1 : 1;
    return (x->dist > y->dist) - (x->dist < y->dist);
}

static int full_sum_chain(const sched_ctx *b, int st, int l, link_key *chain)
{
    const cdp_sched_config *c = b->c;
    const int P = c->P, fin = SLOT(b, c->N - 1, l);
    int n = 0;
    for (int q = 0; q < P; q++) {
        if (q == fin || !HOLDS(b, q, l)) continue;
        link_key *k = &chain[n++];
        k->rank = q;
        k->dist = (q - fin + P) % P;
        k->tick = apply_tick(c, 0, b->s->slot_rank, q, l, st, b->drain, &k->phase);
    }
    qsort(chain, (size_t)n, sizeof *chain, link_key_cmp);
    return n;
}

/* Without a collective the full sum of (step st, stage l) travels along
 * its holders in the order they apply it (full_sum_chain): the finalizer
 * sends it to the first as soon as it is summed, and each holder passes it
 * on to the next just before its own APPLY reads it.  A holder's link
 * carries the sum once each way, where sending it from the finalizer to
 * every holder put all their copies on the finalizer's link.
 * Each holder posts its receive as soon as its buffer is free, right after
 * the APPLY that read the previous sum (the sender then finds the receive
 * posted and does not wait for this rank to reach tick tg; a buffer still
 * being passed on is left to its send and the receive takes another); zero's
 * owner at tick tg. */
static void deliver_full_sum(const sched_ctx *b, int st, int l, int tg)
{
    const cdp_sched_config *c = b->c;
    const int fin = SLOT(b, c->N - 1, l);
    const int n = full_sum_chain(b, st, l, b->chain);
    if (n > 0 && WANT(b, fin)) {
        const int tb = bwd_tick(c, st, c->N - 1, l);
        kpush(&b->lists[fin], tb, PH_BWD, l * c->N + c->N - 1, 7,
              due(mk(CDP_OP_SEND_FULL, -1, l, b->chain[0].rank, st, 0, CDP_F_LAST), tb));
    }
    for (int k = 0; k < n; k++) {
        const int r = b->chain[k].rank, from = k ? b->chain[k - 1].rank : fin;
        if (!WANT(b, r)) continue;
        if (k + 1 < n)
            kpush(&b->lists[r], b->chain[k].tick, b->chain[k].phase, l, 0,
                  due(mk(CDP_OP_SEND_FULL, -1, l, b->chain[k + 1].rank, st, 0, CDP_F_LAST),
                      b->chain[k + 1].tick));
        int ph = PH_END, tp = tg;
        if (st > 0 && c->framework != CDP_FW_ZERO)
            tp = apply_tick(c, 0, b->s->slot_rank, r, l, st - 1, b->drain, &ph);
        if (tp < tg)
            kpush(&b->lists[r], tp, ph, l, 2, mk(CDP_OP_RECV_FULL, -1, l, from, st, 0, 0));
        else
            kpush(&b->lists[r], tg, PH_END, l, 0, mk(CDP_OP_RECV_FULL, -1, l, from, st, 0, 0));
    }
}

/* replicated: one all-reduce of the whole gradient per step, or the sums */
static void deliver_replicated(const sched_ctx *b, int st, int l, int tg)
{
    if (!b->collective) {
        deliver_full_sum(b, st, l, tg);
        return;
    }
    for (int r = 0; r < b->c->P; r++)
        if (WANT(b, r) && l == 0)
            kpush(&b->lists[r], tg, PH_END, 0, 0, mk(CDP_OP_ALLREDUCE, -1, -1, -1, st, 0, 0));
}

/* model-parallel: an all-reduce among the ranks of each stage, or the sums */
static void deliver_model_parallel(const sched_ctx *b, int st, int l, int tg)
{
    if (!b->collective) {
        deliver_full_sum(b, st, l, tg);
        return;
    }
    for (int r = 0; r < b->c->P; r++)
        if (WANT(b, r) && HOLDS(b, r, l))
            kpush(&b->lists[r], tg, PH_END, l, 0, mk(CDP_OP_ALLREDUCE, -1, l, -1, st, 0, 0));
}

/* zero: a reduce to the owner at the stage's backward tick, or the sums */
static void deliver_zero(const sched_ctx *b, int st, int l, int tg)
{
    if (!b->collective) {
        deliver_full_sum(b, st, l, tg);
        return;
    }
    for (int r = 0; r < b->c->P; r++)
        if (WANT(b, r))
            kpush(&b->lists[r], bwd_tick(b->c, st, 0, l), PH_END, l, 0,
                  mk(CDP_OP_REDUCE_GRAD, -1, l, b->s->stage_owner[l], st, 0, 0));
}

/* zero: the uses of a stage's parameters on a rank that does not own them,
 * one per (tick, rank, stage, version); with a collective (the ZeRO-3
 * baseline) the owner broadcasts the stage before each use instead (dp:
 * every worker uses stage l at the same two ticks) */
static void lend_zero(sched_ctx *b)
{
    const cdp_sched_config *c = b->c;
    const int N = c->N, L = c->L, P = c->P, K = c->K;
    if (b->collective) {
        for (int st = 0; st < K; st++)
            for (int l = 0; l < L; l++)
                for (int bw = 0; bw < 2; bw++) {
                    int t = bw ? bwd_tick(c, st, 0, l) : fwd_tick(c, st, 0, l);
                    int owner = b->s->stage_owner[l];
                    for (int q = 0; q < P; q++) {
                        if (!WANT(b, q)) continue;
                        kpush(&b->lists[q], t, PH_PARAMS, PARAMS_SUB + l, 0, mk(CDP_OP_BCAST_PARAMS, -1, l, owner, st, st, 0));
                        if (q != owner)
                            kpush(&b->lists[q], t, PH_END, DROP_SUB + l, 0, mk(CDP_OP_DROP_PARAMS, -1, l, -1, st, st, 0));
                    }
                }
        return;
    }
    size_t capuse = 0;
    for (int st = 0; st < K; st++)
        for (int i = 0; i < N; i++)
            for (int l = 0; l < L; l++) {
                int r = SLOT(b, i, l);
                if (HOLDS(b, r, l)) continue;
                int v = st - cdp_lag(N, L, c->rule, i, l);
                for (int bw = 0; bw < 2; bw++) {
                    int t = bw ? bwd_tick(c, st, i, l) : fwd_tick(c, st, i, l);
                    int dup = 0;
                    for (size_t u = b->nuse; u-- > 0 && b->nuse - u <= (size_t)4 * N * L;)
                        if (b->uses[u].tick == t && b->uses[u].rank == r && b->uses[u].stage == l &&
                            b->uses[u].version == v)
                            dup = 1;
                    if (dup) continue;
                    if (b->nuse == capuse) {
                        capuse = capuse ? 2 * capuse : 1024;
                        b->uses = realloc(b->uses, capuse * sizeof *b->uses);
                        if (!b->uses) abort();
                    }
                    b->uses[b->nuse++] = (use){ t, r, l, v };
                }
            }
    for (size_t u = 0; u < b->nuse; u++) {
        const use *x = &b->uses[u];
        if (!WANT(b, x->rank)) continue;
        const int owner = b->s->stage_owner[x->stage];
        kpush(&b->lists[x->rank], x->tick, PH_PARAMS, PARAMS_SUB + x->stage, x->version & 1,
              mk(CDP_OP_RECV_PARAMS, -1, x->stage, owner, 0, x->version, 0));
        kpush(&b->lists[x->rank], x->tick, PH_END, DROP_SUB + x->stage, x->version & 1,
              mk(CDP_OP_DROP_PARAMS, -1, x->stage, -1, 0, x->version, 0));
    }
}

/* zero: the owner r, having applied version v = st + 1 of stage l (or
 * holding the first version, st = -1), sends it to each borrowed use of v
 * (and of v - 1 = -1 at the start) in the tick of the use */
static void serve_zero(const sched_ctx *b, int r, int l, int st, int *served)
{
    if (b->collective || !WANT(b, r))
        return;
    const int v = st + 1;
    for (size_t u = 0; u < b->nuse; u++) {
        const use *x = &b->uses[u];
        if (x->stage != l) continue;
        if (x->version != v && !(st < 0 && x->version < 0)) continue;
        kpush(&b->lists[r], x->tick, PH_PARAMS, PARAMS_SUB + l, 2 + (*served)++,
              due(mk(CDP_OP_SEND_PARAMS, -1, l, x->rank, 0, x->version, 0), x->tick));
    }
}

static const framework_builder framework_builders[] = {
    [CDP_FW_REPLICATED] = { 0, deliver_replicated, NULL, NULL },
    [CDP_FW_MODEL_PARALLEL] = { 0, deliver_model_parallel, NULL, NULL },
    [CDP_FW_ZERO] = { 1, deliver_zero, lend_zero, serve_zero },
};

/* APPLY of version v = st+1 on each holder, at the latest tick where it is
 * still in time: before its first use (any rank's under zero, since the
 * owner serves them), before the next full sum of the stage lands in the
 * same buffer, and at the latest at the drain. */
static void emit_applies(const sched_ctx *b, const framework_builder *fb)
{
    const cdp_sched_config *c = b->c;
    for (int r = 0; r < c->P; r++) {
        if (!WANT(b, r) && !fb->serve) continue;
        for (int l = 0; l < c->L; l++) {
            if (!HOLDS(b, r, l)) continue;
            int served = 0;   /* sends for versions that exist before the segment first */
            for (int st = -1; st < c->K; st++) {
                if (st >= 0 && WANT(b, r)) {
                    int ph;
                    int t = apply_tick(c, b->collective, b->s->slot_rank, r, l, st, b->drain, &ph);
                    kpush(&b->lists[r], t, ph, l, 1, mk(CDP_OP_APPLY, -1, l, -1, st, st + 1, 0));
                }
                if (fb->serve)
                    fb->serve(b, r, l, st, &served);
            }
        }
    }
}

/* The builder of every framework.  Each (worker, stage) has a rank
 * (slot_rank); stage l's parameters persist on its holders (every rank
 * under replicated, the ranks of the stage under model-parallel, the owner
 * under zero).  Activations and their gradients travel between the ranks of
 * consecutive stages of a worker; stage gradients are summed in worker
 * order, hopping between ranks where consecutive workers live on different
 * ranks, and the full sum travels from the rank of worker N-1 along the
 * holders in the order they apply it; or, for
 * dp without --deterministic, each rank sums its own workers and a
 * collective finishes the job (framework_builder.deliver).  Under zero, a
 * rank that computes with a stage it does not own gets it from the owner
 * for that tick only (lend, serve). */
static void build(const cdp_sched_config *c, int only_rank, cdp_schedule *s, keyed_list *lists)
{
    const framework_builder *fb = &framework_builders[c->framework];
    sched_ctx b = { c, s, lists, only_rank, c->rule == CDP_RULE_DP && !c->deterministic,
                    s->nticks, calloc((size_t)c->P * c->L, 1), NULL, 0,
                    malloc(sizeof(struct link_key) * (size_t)c->P) };
    if (!b.holder || !b.chain) abort();
    for (int r = 0; r < c->P; r++)
        for (int l = 0; l < c->L; l++)
            b.holder[r * c->L + l] = (unsigned char)cdp_schedule_holds(s, r, l);

    for (int st = 0; st < c->K; st++) {
        for (int i = 0; i < c->N; i++)
            for (int l = 0; l < c->L; l++)
                emit_slot(&b, fb, st, i, l);
        for (int l = 0; l < c->L; l++)
            fb->deliver(&b, st, l, grad_ready_tick(c, b.collective, st, l));
    }
    if (fb->lend)
        fb->lend(&b);
    emit_applies(&b, fb);
    free(b.uses);
    free(b.holder);
    free(b.chain);
}
#undef SLOT
#undef WANT
#undef HOLDS

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
    if ((int64_t)2 * c->L * (c->K + 1) > INT_MAX / 2 || c->L > 4096) {
        snprintf(err, errlen, "schedule: %d steps of %d stages is too long for one segment", c->K, c->L);
        return -1;
    }
    if ((int64_t)c->N * c->L >= EARLY_GRAD_SUB * (int64_t)8192) {   /* the order keys stay ints */
        snprintf(err, errlen, "schedule: %d workers x %d stages is too many", c->N, c->L);
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

void cdp_program_forwards(const cdp_program *p, int L, size_t *recv_of)
{
    size_t *last = malloc(sizeof *last * (size_t)L);   /* each stage's latest RECV_FULL */
    if (!last) abort();
    for (int l = 0; l < L; l++) last[l] = SIZE_MAX;
    for (size_t k = 0; k < p->n; k++) {
        const cdp_instr *in = &p->ins[k];
        const size_t j = last[in->stage >= 0 ? in->stage : 0];
        recv_of[k] = SIZE_MAX;
        if (in->op == CDP_OP_RECV_FULL)
            last[in->stage] = k;
        else if (in->op == CDP_OP_SEND_FULL && j != SIZE_MAX && p->ins[j].step == in->step)
            recv_of[k] = j;
    }
    free(last);
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
