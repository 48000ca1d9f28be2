/* Schedules checked as data, without a model or MPI: every send has its
 * receive, a simulation of the executor's blocking rules finishes (no rank
 * waits on something that comes later in its own list or in a cycle), each
 * worker runs each forward and backward exactly once per step, the versions
 * follow the lag table of doc/reference.md section 3.1, and every update is applied
 * once, in order, before it is used. */
#include <check.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "sched/schedule.h"
#include "../lib/check_run.h"

/* qsort as libcdp sees it: the C library's, counting the calls with a null
 * base.  glibc declares qsort's base nonnull, so qsort(NULL, 0, ...) is
 * undefined behaviour (UBSan: "null pointer passed as argument 1") even
 * though nothing is sorted; the schedule must not make such a call for the
 * empty lists of the ranks it does not build. */
static int qsort_null_calls;

void qsort(void *base, size_t n, size_t size, int (*cmp)(const void *, const void *))
{
    static void (*real)(void *, size_t, size_t, int (*)(const void *, const void *));
    void *volatile seen = base;   /* the declaration says nonnull: look anyway */
    if (!seen)
        qsort_null_calls++;
    if (!real)
        *(void **)&real = dlsym(RTLD_NEXT, "qsort");
    if (!real)
        abort();
    real(base, n, size, cmp);
}

static const cdp_rule rules[] = { CDP_RULE_DP, CDP_RULE_CDP_V1, CDP_RULE_CDP_V2 };

static cdp_schedule build(int N, int L, int P, cdp_rule rule, int det, int K)
{
    cdp_sched_config c = { N, L, P, rule, CDP_FW_REPLICATED, det, K };
    cdp_schedule s;
    char err[256];
    ck_assert_msg(cdp_schedule_build(&c, -1, &s, err, sizeof err) == 0, "%s", err);
    return s;
}

/* ---- hand values of the timeline */
/* ticks of (worker i, stage l, step st), doc/reference.md section 2: the worker
 * starts at 2L*st + offset(i), runs forward l at start + l and backward l
 * at start + 2L-1-l */
static int start_tick_of(const cdp_schedule *s, int st, int i)
{
    return 2 * s->cfg.L * st + cdp_offset(s->cfg.N, s->cfg.L, s->cfg.rule, i);
}

static int bwd_tick_of(const cdp_schedule *s, int st, int i, int l)
{
    return start_tick_of(s, st, i) + 2 * s->cfg.L - 1 - l;
}

START_TEST(offsets_and_lags_by_hand)
{
    /* the paper's figure: N = L = 3, a delay of 2 ticks per worker */
    ck_assert_int_eq(cdp_offset(3, 3, CDP_RULE_CDP_V2, 0), 0);
    ck_assert_int_eq(cdp_offset(3, 3, CDP_RULE_CDP_V2, 1), 2);
    ck_assert_int_eq(cdp_offset(3, 3, CDP_RULE_CDP_V2, 2), 4);
    ck_assert_int_eq(cdp_offset(3, 3, CDP_RULE_DP, 2), 0);
    ck_assert_int_eq(cdp_offset(4, 3, CDP_RULE_CDP_V1, 3), 4);   /* floor(3*6/4) */
    /* N = L: lag(i, l) = 0 iff l >= L-1-i */
    for (int L = 1; L <= 8; L++)
        for (int i = 0; i < L; i++)
            for (int l = 0; l < L; l++)
                ck_assert_int_eq(cdp_lag(L, L, CDP_RULE_CDP_V2, i, l), l >= L - 1 - i ? 0 : 1);
    /* N = 1 is dp; cdp-v1 lags everywhere */
    for (int l = 0; l < 5; l++) {
        ck_assert_int_eq(cdp_lag(1, 5, CDP_RULE_CDP_V2, 0, l), 0);
        ck_assert_int_eq(cdp_lag(7, 5, CDP_RULE_CDP_V1, 3, l), 1);
        ck_assert_int_eq(cdp_lag(7, 5, CDP_RULE_DP, 3, l), 0);
    }
}
END_TEST

/* ---- structure: each (worker, stage, step) forward and backward once, on
 * the worker's rank, at the timeline's ticks, with the lag table's version */
static void check_structure(const cdp_schedule *s)
{
    const cdp_sched_config *c = &s->cfg;
    const int N = c->N, L = c->L, K = c->K;
    int *seen = calloc((size_t)N * L * K * 2, sizeof *seen);
    int *applied = calloc((size_t)c->P * L, sizeof *applied);
    /* the full-sum buffer of a stage: written by FINALIZE or a RECV_FULL
     * post of step st, read by APPLY(st + 1); a write of step st may only
     * come once APPLY(st) has read step st - 1 (written: last step written) */
    int *written = malloc(sizeof(int) * (size_t)c->P * L);
    for (int q = 0; q < c->P * L; q++)
        written[q] = -1;
    for (int r = 0; r < c->P; r++) {
        const cdp_program *p = &s->prog[r];
        int last_tick = -1;
        for (size_t k = 0; k < p->n; k++) {
            const cdp_instr *in = &p->ins[k];
            ck_assert_msg(in->tick >= last_tick, "rank %d: ticks out of order", r);
            last_tick = in->tick;
            ck_assert_int_le(in->tick, s->nticks);
            if (in->op == CDP_OP_FWD || in->op == CDP_OP_BWD) {
                const int i = in->worker, l = in->stage, st = in->step;
                const int b = in->op == CDP_OP_BWD;
                ck_assert_int_eq(s->worker_rank[i], r);
                seen[((i * L + l) * K + st) * 2 + b]++;
                ck_assert_int_eq(in->tick, b ? bwd_tick_of(s, st, i, l) : start_tick_of(s, st, i) + l);
                ck_assert_int_eq(in->version, st - cdp_lag(N, L, c->rule, i, l));
                /* the version it uses is applied on this rank already */
                int v = in->version < 0 ? 0 : in->version;
                ck_assert_msg(applied[r * L + l] == v || applied[r * L + l] == v + 1,
                              "rank %d stage %d: %s of step %d needs version %d, rank has %d",
                              r, l, b ? "BWD" : "FWD", st, v, applied[r * L + l]);
                if (b)  /* the slot of v may not have been overwritten by v+2 */
                    ck_assert_int_le(applied[r * L + l], v + 1);
            }
            if (in->op == CDP_OP_APPLY) {
                ck_assert_int_eq(in->version, applied[r * L + in->stage] + 1);
                applied[r * L + in->stage] = in->version;
                if (c->rule != CDP_RULE_DP || c->deterministic)
                    ck_assert_msg(written[r * L + in->stage] == in->version - 1,
                                  "rank %d stage %d: APPLY(%d) finds the full sum of step %d",
                                  r, in->stage, in->version, written[r * L + in->stage]);
            }
            if (in->op == CDP_OP_FINALIZE || in->op == CDP_OP_RECV_FULL) {
                ck_assert_msg(applied[r * L + in->stage] == in->step,
                              "rank %d stage %d: the full sum of step %d overwrites the one "
                              "APPLY(%d) has not read yet", r, in->stage, in->step, in->step);
                written[r * L + in->stage] = in->step;
            }
            ck_assert_msg(in->op != CDP_OP_ALLREDUCE || (c->rule == CDP_RULE_DP && !c->deterministic),
                          "a collective in a %s schedule", cdp_rule_name(c->rule));
        }
        for (int l = 0; l < L; l++)
            ck_assert_int_eq(applied[r * L + l], K);   /* drained: P(K) everywhere */
    }
    for (size_t q = 0; q < (size_t)N * L * K * 2; q++)
        ck_assert_int_eq(seen[q], 1);
    free(seen);
    free(applied);
    free(written);
}

/* ---- simulation of the executor's blocking rules.
 * A message is (kind, stage, step, src, dst).  Sends never block.  A receive
 * post waits until the previous sends from the same buffer were received
 * (their receive posted); ACC of a received partial sum and APPLY of a
 * received full sum wait until the matching send exists; FINALIZE waits
 * until the previous full-sum sends from its buffer were received; an
 * ALLREDUCE waits until every rank reached the same one. */
typedef struct msg { int kind, stage, step, src, dst, sent, received; } msg;

typedef struct sim {
    msg *m;
    int n, cap;
} sim;

static msg *find(sim *s, int kind, int stage, int step, int src, int dst, int create)
{
    for (int k = 0; k < s->n; k++) {
        msg *m = &s->m[k];
        if (m->kind == kind && m->stage == stage && m->step == step && m->src == src && m->dst == dst)
            return m;
    }
    if (!create) return NULL;
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 256;
        s->m = realloc(s->m, sizeof *s->m * (size_t)s->cap);
    }
    s->m[s->n] = (msg){ kind, stage, step, src, dst, 0, 0 };
    return &s->m[s->n++];
}

/* the message of kind/stage/step into rank dst, from whichever rank */
static msg *find_into(sim *s, int kind, int stage, int step, int dst)
{
    for (int k = 0; k < s->n; k++) {
        msg *m = &s->m[k];
        if (m->kind == kind && m->stage == stage && m->step == step && m->dst == dst)
            return m;
    }
    return NULL;
}

/* all messages of kind/stage sent by rank src before step `step` were received */
static int sends_done(sim *s, int kind, int stage, int src, int before_step)
{
    for (int k = 0; k < s->n; k++) {
        msg *m = &s->m[k];
        if (m->kind == kind && m->stage == stage && m->src == src && m->step < before_step &&
            m->sent && !m->received)
            return 0;
    }
    return 1;
}

static void simulate(const cdp_schedule *sch)
{
    const int P = sch->cfg.P;
    size_t *pc = calloc((size_t)P, sizeof *pc);
    int *last_recv_grad = calloc((size_t)P * sch->cfg.L, sizeof(int));  /* step of pending partial */
    sim s = { 0 };
    int done = 0;
    while (!done) {
        int progressed = 0;
        done = 1;
        for (int r = 0; r < P; r++) {
            const cdp_program *p = &sch->prog[r];
            while (pc[r] < p->n) {
                const cdp_instr *in = &p->ins[pc[r]];
                int ok = 1;
                msg *m;
                switch (in->op) {
                case CDP_OP_SEND_GRAD:
                    m = find(&s, 0, in->stage, in->step, r, in->peer, 1);
                    ck_assert_int_eq(m->sent, 0);
                    m->sent = 1;
                    break;
                case CDP_OP_SEND_FULL:
                    /* a holder passes on the full sum it has received */
                    if (r != sch->slot_rank[(sch->cfg.N - 1) * sch->cfg.L + in->stage]) {
                        m = find_into(&s, 1, in->stage, in->step, r);
                        if (!(m && m->sent && m->received)) {
                            ok = 0;
                            break;
                        }
                    }
                    m = find(&s, 1, in->stage, in->step, r, in->peer, 1);
                    ck_assert_int_eq(m->sent, 0);
                    m->sent = 1;
                    break;
                case CDP_OP_RECV_GRAD:
                    ok = sends_done(&s, 0, in->stage, r, in->step);
                    if (ok) {
                        find(&s, 0, in->stage, in->step, in->peer, r, 1)->received = 1;
                        last_recv_grad[r * sch->cfg.L + in->stage] = in->step + 1;
                    }
                    break;
                case CDP_OP_RECV_FULL:
                    ok = sends_done(&s, 1, in->stage, r, in->step + 1);
                    if (ok) find(&s, 1, in->stage, in->step, in->peer, r, 1)->received = 1;
                    break;
                case CDP_OP_ACC:
                    if (!(in->flags & CDP_F_FIRST) && r > 0 &&
                        last_recv_grad[r * sch->cfg.L + in->stage] == in->step + 1) {
                        m = find(&s, 0, in->stage, in->step, r - 1, r, 0);
                        ok = m && m->sent;
                    }
                    break;
                case CDP_OP_FINALIZE:
                    ok = sends_done(&s, 1, in->stage, r, in->step);
                    break;
                case CDP_OP_APPLY: {
                    int gstep = in->version - 1;
                    int fin = sch->slot_rank[(sch->cfg.N - 1) * sch->cfg.L + in->stage];
                    if (r != fin && !(sch->cfg.rule == CDP_RULE_DP && !sch->cfg.deterministic)) {
                        m = find_into(&s, 1, in->stage, gstep, r);
                        ok = m && m->sent && m->received;
                    }
                    break;
                }
                case CDP_OP_ALLREDUCE:
                    /* everyone must be at an ALLREDUCE of this step */
                    for (int q = 0; q < P && ok; q++) {
                        const cdp_program *pq = &sch->prog[q];
                        int there = 0;
                        for (size_t k = pc[q]; k < pq->n && !there; k++)
                            if (pq->ins[k].op == CDP_OP_ALLREDUCE) {
                                there = pq->ins[k].step == in->step && k == pc[q];
                                break;
                            }
                        /* a rank already past it counts as arrived */
                        if (!there) {
                            int past = 0;
                            for (size_t k = 0; k < pc[q]; k++)
                                if (pq->ins[k].op == CDP_OP_ALLREDUCE && pq->ins[k].step == in->step)
                                    past = 1;
                            there = past;
                        }
                        ok = there;
                    }
                    break;
                default:
                    break;
                }
                if (!ok) break;
                pc[r]++;
                progressed = 1;
            }
            if (pc[r] < p->n) done = 0;
        }
        if (!done && !progressed) {
            char buf[128];
            for (int r = 0; r < P; r++)
                if (pc[r] < sch->prog[r].n) {
                    cdp_instr_format(&sch->prog[r].ins[pc[r]], buf, sizeof buf);
                    fprintf(stderr, "rank %d blocked at %s\n", r, buf);
                }
            ck_abort_msg("deadlock: N=%d L=%d P=%d rule %s", sch->cfg.N, sch->cfg.L, P,
                         cdp_rule_name(sch->cfg.rule));
        }
    }
    for (int k = 0; k < s.n; k++)
        ck_assert_msg(s.m[k].sent && s.m[k].received, "message kind %d stage %d step %d %d->%d: "
                      "sent %d received %d", s.m[k].kind, s.m[k].stage, s.m[k].step, s.m[k].src,
                      s.m[k].dst, s.m[k].sent, s.m[k].received);
    free(s.m);
    free(pc);
    free(last_recv_grad);
}

/* CDP_F_LAST_USE marks the last FWD/BWD of each (stage, version) on a rank,
 * and only where the APPLY of version + 2 comes after it on that rank: the
 * executor clears that slot at once (exec.c, retire). */
static void check_last_uses(const cdp_schedule *s)
{
    const int K = s->cfg.K;
    for (int r = 0; r < s->cfg.P; r++) {
        const cdp_program *p = &s->prog[r];
        for (size_t k = 0; k < p->n; k++) {
            const cdp_instr *in = &p->ins[k];
            if (in->op != CDP_OP_FWD && in->op != CDP_OP_BWD) {
                ck_assert(!(in->flags & CDP_F_LAST_USE));
                continue;
            }
            int later = 0, applied_after = 0;
            for (size_t j = k + 1; j < p->n; j++) {
                const cdp_instr *o = &p->ins[j];
                if ((o->op == CDP_OP_FWD || o->op == CDP_OP_BWD) && o->stage == in->stage &&
                    o->version == in->version)
                    later = 1;
                if (o->op == CDP_OP_APPLY && o->stage == in->stage && o->version == in->version + 2)
                    applied_after = 1;
            }
            if (in->flags & CDP_F_LAST_USE) {
                ck_assert_msg(!later, "rank %d: a LAST_USE of stage %d version %d is read again",
                              r, in->stage, in->version);
                ck_assert_int_le(in->version + 2, K);
                ck_assert_msg(applied_after, "rank %d: no APPLY(%d) of stage %d after its LAST_USE",
                              r, in->version + 2, in->stage);
            } else {
                ck_assert_msg(later || in->version + 2 > K, "rank %d: the last read of stage %d "
                              "version %d is not marked", r, in->stage, in->version);
            }
        }
    }
}

START_TEST(many_configurations)
{
    for (int N = 1; N <= 9; N++)
        for (int L = 1; L <= 5; L++)
            for (int P = 1; P <= N && P <= 4; P++)
                for (int ri = 0; ri < 3; ri++)
                    for (int det = 0; det < 2; det++) {
                        cdp_schedule s = build(N, L, P, rules[ri], det, 4);
                        check_structure(&s);
                        check_last_uses(&s);
                        simulate(&s);
                        cdp_schedule_free(&s);
                    }
}
END_TEST

/* zero posts the receive of a partial sum at the end of the tick before the
 * backward that adds to it, after everything of that tick that computes or
 * frees (only other receives follow it), and the sender's `due` says so:
 * the sender completes the send at the start of the backward's tick, before
 * it or the receiver allocates anything there. */
START_TEST(zero_partial_sums_arrive_between_ticks)
{
    int nchecked = 0;
    for (int N = 1; N <= 9; N++)
        for (int L = 1; L <= 5; L++)
            for (int P = 2; P <= N && P <= 4; P++)
                for (int ri = 1; ri < 3; ri++) {
                    cdp_sched_config c = { N, L, P, rules[ri], CDP_FW_ZERO, 0, 3 };
                    cdp_schedule s;
                    char err[256];
                    if (cdp_schedule_build(&c, -1, &s, err, sizeof err) != 0)
                        continue;   /* zero needs a stage per rank */
                    for (int r = 0; r < P; r++) {
                        const cdp_program *p = &s.prog[r];
                        for (size_t k = 0; k < p->n; k++) {
                            const cdp_instr *in = &p->ins[k];
                            if (in->op == CDP_OP_SEND_GRAD)
                                ck_assert_int_eq(in->due, bwd_tick_of(&s, in->step, in->worker + 1, in->stage) - 1);
                            if (in->op != CDP_OP_RECV_GRAD) continue;
                            nchecked++;
                            ck_assert_int_eq(in->tick, bwd_tick_of(&s, in->step, in->worker, in->stage) - 1);
                            for (size_t j = k + 1; j < p->n && p->ins[j].tick == in->tick; j++)
                                ck_assert_msg(p->ins[j].op == CDP_OP_RECV_GRAD, "N=%d L=%d P=%d rank %d: "
                                              "%s after a partial sum's receive in tick %d", N, L, P, r,
                                              cdp_opcode_name(p->ins[j].op), in->tick);
                        }
                    }
                    cdp_schedule_free(&s);
                }
    ck_assert_int_gt(nchecked, 0);
}
END_TEST

START_TEST(collectives_only_under_dp)
{
    for (int ri = 0; ri < 3; ri++) {
        cdp_schedule s = build(4, 3, 2, rules[ri], 0, 5);
        int nall = 0, np2p = 0;
        for (int r = 0; r < 2; r++)
            for (size_t k = 0; k < s.prog[r].n; k++) {
                nall += s.prog[r].ins[k].op == CDP_OP_ALLREDUCE;
                np2p += s.prog[r].ins[k].op == CDP_OP_SEND_GRAD || s.prog[r].ins[k].op == CDP_OP_SEND_FULL;
            }
        if (rules[ri] == CDP_RULE_DP) {
            ck_assert_int_eq(nall, 2 * 5);   /* one per step and rank */
            ck_assert_int_eq(np2p, 0);
        } else {
            ck_assert_int_eq(nall, 0);
            /* per step and stage: one partial (rank 0 -> 1) and one full (1 -> 0) */
            ck_assert_int_eq(np2p, 5 * 3 * 2);
        }
        cdp_schedule_free(&s);
    }
}
END_TEST

/* The full sum of a stage travels along the holders in the order they
 * apply it, so that no rank sends more than one copy of it.  cdp-v1 on 4
 * ranks of 2 workers, by hand: every worker lags by one step, so the ranks
 * need it in worker order: rank 3 finalizes, then 0, 1, 2.  cdp-v2: the
 * order depends on the stage's lags; one copy in and at most one out per
 * rank, the finalizer's out. */
START_TEST(full_sum_travels_along_the_ring)
{
    for (int ri = 1; ri < 3; ri++) {
        const int K = 3, L = 3;
        cdp_schedule s = build(8, L, 4, rules[ri], 0, K);
        static const int from[4] = { 3, 0, 1, -1 }, to[4] = { 1, 2, -1, 0 };
        for (int r = 0; r < 4; r++) {
            int nsend = 0, nrecv = 0;
            for (size_t k = 0; k < s.prog[r].n; k++) {
                const cdp_instr *in = &s.prog[r].ins[k];
                if (in->op == CDP_OP_SEND_FULL) {
                    ck_assert_int_ne(in->peer, 3);
                    if (ri == 1) ck_assert_int_eq(in->peer, to[r]);
                    nsend++;
                }
                if (in->op == CDP_OP_RECV_FULL) {
                    if (ri == 1) ck_assert_int_eq(in->peer, from[r]);
                    nrecv++;
                }
            }
            /* the sends that pass a received sum on, as the executor finds
             * them: every send of a rank that receives (not the finaliser's) */
            size_t *recv_of = malloc(sizeof *recv_of * s.prog[r].n);
            cdp_program_forwards(&s.prog[r], L, recv_of);
            for (size_t k = 0; k < s.prog[r].n; k++) {
                const cdp_instr *in = &s.prog[r].ins[k];
                if (in->op != CDP_OP_SEND_FULL) {
                    ck_assert(recv_of[k] == SIZE_MAX);
                } else if (r == 3) {
                    ck_assert(recv_of[k] == SIZE_MAX);
                } else {
                    ck_assert(recv_of[k] < k);
                    const cdp_instr *rv = &s.prog[r].ins[recv_of[k]];
                    ck_assert_int_eq(rv->op, CDP_OP_RECV_FULL);
                    ck_assert_int_eq(rv->stage, in->stage);
                    ck_assert_int_eq(rv->step, in->step);
                }
            }
            free(recv_of);
            if (ri == 1) ck_assert_int_eq(nsend, to[r] < 0 ? 0 : K * L);
            ck_assert_int_le(nsend, K * L);          /* at most one copy per (step, stage) */
            ck_assert_int_eq(nrecv, r == 3 ? 0 : K * L);
            if (r == 3) ck_assert_int_eq(nsend, K * L);
        }
        cdp_schedule_free(&s);
    }
}
END_TEST

/* activation peak measured on the instruction lists: FWD holds a
 * stage-activation until the BWD of the same (worker, stage) */
static int peak_units(const cdp_schedule *s)
{
    int *d = calloc((size_t)s->nticks + 2, sizeof *d), peak = 0, cur = 0;
    for (int r = 0; r < s->cfg.P; r++)
        for (size_t k = 0; k < s->prog[r].n; k++) {
            const cdp_instr *in = &s->prog[r].ins[k];
            if (in->op == CDP_OP_FWD) d[in->tick]++;
            if (in->op == CDP_OP_BWD) d[in->tick + 1]--;
        }
    for (int t = 0; t <= s->nticks; t++) {
        cur += d[t];
        if (cur > peak) peak = cur;
    }
    free(d);
    return peak;
}

START_TEST(activation_peaks)
{
    /* dp holds N*L stage-activations at tick L-1 */
    cdp_schedule s = build(4, 3, 1, CDP_RULE_DP, 0, 3);
    ck_assert_int_eq(peak_units(&s), 12);
    cdp_schedule_free(&s);
    /* the paper's N = L = 3 figure: 6 of dp's 9 */
    s = build(3, 3, 1, CDP_RULE_CDP_V2, 0, 3);
    ck_assert_int_eq(peak_units(&s), 6);
    cdp_schedule_free(&s);
    /* CDP stays near N*(L+1)/2: N = L = 8 -> 36 of dp's 64 */
    s = build(8, 8, 1, CDP_RULE_CDP_V1, 0, 3);
    ck_assert_int_le(peak_units(&s), 8 * 9 / 2 + 1);
    cdp_schedule_free(&s);
}
END_TEST

START_TEST(bad_configurations)
{
    cdp_sched_config c = { 2, 3, 4, CDP_RULE_CDP_V2, CDP_FW_REPLICATED, 0, 1 };
    cdp_schedule s;
    char err[256];
    ck_assert_int_eq(cdp_schedule_build(&c, -1, &s, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "fewer than"));
    c.N = 0;
    ck_assert_int_eq(cdp_schedule_build(&c, -1, &s, err, sizeof err), -1);
}
END_TEST

/* Ranks without instructions: the programs of the ranks a build skips
 * (every multi-rank cdp_run builds only its own), and model-parallel's
 * plans.  Their lists are empty, and are never handed to qsort as NULL. */
START_TEST(empty_programs)
{
    char err[256];
    cdp_schedule s;
    for (int ri = 0; ri < 3; ri++)
        for (int only = 0; only < 3; only++) {
            cdp_sched_config c = { 4, 3, 3, rules[ri], CDP_FW_REPLICATED, 0, 2 };
            qsort_null_calls = 0;
            ck_assert_msg(cdp_schedule_build(&c, only, &s, err, sizeof err) == 0, "%s", err);
            for (int r = 0; r < 3; r++) {
                ck_assert_uint_eq(s.prog[r].n > 0, r == only);
                ck_assert_ptr_nonnull(s.prog[r].ins);
            }
            ck_assert_msg(qsort_null_calls == 0, "rule %s, rank %d of 3: qsort called %d times "
                          "with a null base", cdp_rule_name(rules[ri]), only, qsort_null_calls);
            cdp_schedule_free(&s);
        }
    /* --plan --framework model-parallel: every rank's program, some empty */
    for (int ri = 0; ri < 3; ri++) {
        cdp_sched_config c = { 4, 3, 1, rules[ri], CDP_FW_MODEL_PARALLEL, 0, 2 };
        c.P = cdp_schedule_ranks_needed(&c) + 1;   /* one rank more than it uses */
        qsort_null_calls = 0;
        ck_assert_msg(cdp_schedule_build(&c, -1, &s, err, sizeof err) == 0, "%s", err);
        ck_assert_uint_eq(s.prog[c.P - 1].n, 0);
        ck_assert_msg(qsort_null_calls == 0, "model-parallel, rule %s, P=%d: qsort called %d "
                      "times with a null base", cdp_rule_name(rules[ri]), c.P, qsort_null_calls);
        cdp_schedule_free(&s);
    }
}
END_TEST

START_TEST(large_plan_is_cheap)
{
    /* N = L = 256, one rank's program, 2 steps: built in well under a second */
    cdp_sched_config c = { 256, 256, 4, CDP_RULE_CDP_V2, CDP_FW_REPLICATED, 0, 2 };
    cdp_schedule s;
    char err[256];
    ck_assert_int_eq(cdp_schedule_build(&c, 1, &s, err, sizeof err), 0);
    ck_assert_uint_eq(s.prog[1].n > 0, 1);
    cdp_schedule_free(&s);
}
END_TEST

int main(void)
{
    Suite *su = suite_create("schedule");
    TCase *tc = tcase_create("schedule");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, offsets_and_lags_by_hand);
    tcase_add_test(tc, many_configurations);
    tcase_add_test(tc, collectives_only_under_dp);
    tcase_add_test(tc, full_sum_travels_along_the_ring);
    tcase_add_test(tc, zero_partial_sums_arrive_between_ticks);
    tcase_add_test(tc, activation_peaks);
    tcase_add_test(tc, bad_configurations);
    tcase_add_test(tc, large_plan_is_cheap);
    tcase_add_test(tc, empty_programs);
    suite_add_tcase(su, tc);
    int failed = check_run(su);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
