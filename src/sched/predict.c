/* --plan --machine's simulator (sched/predict.h).  Events are taken in
 * time order from a heap of ranks (each rank's clock is the time its next
 * instruction may start), so the links are reserved in the order the
 * transfers would really reach them.  A rank leaves the heap while it
 * waits (for a message not yet sent, a send not yet received, a collective
 * not yet complete) and is put back by whoever ends the wait. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "sched/predict.h"

/* Open MPI's defaults: btl_vader_eager_limit (shared memory) 4 KiB,
 * btl_tcp_eager_limit 64 KiB.  Above them a send waits for the receive. */
#define EAGER_INTRA 4096.0
#define EAGER_INTER 65536.0
/* instructions the simulation builds at most (28 bytes each, and the
 * builder's sort keys): about 2 GB */
#define MAX_INSTR 6e7

static int host_of(const cdp_network *n, int r) { return r / n->ranks_per_host; }

/* A message of n bytes on link l: its per-message cost and its bytes. */
static double occupancy(const cdp_link_cost *l, double n)
{
    return l->per_message_s + n / l->bandwidth_Bps;
}

/* One round of a binomial tree over S ranks: rank i < d sends n bytes to
 * i + d (where there is one); the slowest link decides, and a host's link
 * carries every flow of its ranks that leaves the host. */
static double tree_round(int S, int first, double n, const cdp_network *net, int d)
{
    int flows = 0, most = 0, host = -1, cross = 0, local = 0;
    for (int i = 0; i < d && i + d < S; i++) {
        int h = host_of(net, first + i);
        if (h != host) { host = h; flows = 0; }
        if (h != host_of(net, first + i + d)) {
            cross = 1;
            if (++flows > most) most = flows;
        } else {
            local = 1;
        }
    }
    double t = 0;
    if (cross) t = net->inter.latency_s + most * occupancy(&net->inter, n);
    if (local) t = fmax(t, net->intra.latency_s + occupancy(&net->intra, n));
    return t;
}

double cdp_tree_time(int S, int first, double n, const cdp_network *net)
{
    double t = 0;
    for (int d = 1; d < S; d *= 2) t += tree_round(S, first, n, net, d);
    return t;
}

/* One step of cdp's ring over S ranks from `first`, in contiguous blocks
 * of ranks_per_host: every rank sends n bytes to the next (the last to the
 * first) and takes n from the one before, both at once; the slowest link
 * decides.  Across hosts each host sends one flow out and takes one in on
 * its link, inside a host each rank does the same on shared memory: both
 * are exchanges, 1 + half_duplex times one way. */
static double ring_step(int S, int first, double n, const cdp_network *net)
{
    const int hosts = host_of(net, first + S - 1) - host_of(net, first) + 1;
    double t = 0;
    if (hosts > 1)
        t = net->inter.latency_s + (1 + net->inter.half_duplex) * occupancy(&net->inter, n);
    if (S > hosts)
        t = fmax(t, net->intra.latency_s + (1 + net->intra.half_duplex) * occupancy(&net->intra, n));
    return t;
}

double cdp_allreduce_time(int S, int first, double n, const cdp_network *net, const char **algo)
{
    if (algo) *algo = NULL;
    if (S <= 1) return 0;   /* no message on one rank */
    /* cdp's own ring (exec/comm.c): a reduce-scatter and an all-gather,
     * 2 (S - 1) steps of n / S bytes */
    if (algo) *algo = "ring (reduce-scatter + all-gather)";
    return 2 * (S - 1) * ring_step(S, first, n / S, net);
}

/* ---------------------------------------------------------- messages */

enum { M_GRAD = 1, M_FULL, M_ACT, M_DACT, M_PARAMS, M_ALLREDUCE, M_BCAST, M_REDUCE };

typedef struct mkey { int32_t kind, dst, stage, a, b; } mkey;

typedef struct msg {
    mkey key;
    int used;
    int src, due, waiter, send_waiter;
    double bytes, send_post, recv_post, arrival;   /* -1: not yet; collectives: time, volume */
    int arrived, parties, head;                     /* collectives: waiters through rank.next */
    double tmax;
} msg;

typedef struct rank_state {
    size_t pc;
    double t, compute, act, act_peak;
    int tick, next, done;
    int *pend;               /* sends not yet waited for (message indices) */
    size_t npend, cappend;
    double intra_free, intra_in_free, intra_busy;   /* its shared-memory link: sending, receiving */
    int bytes_tick;          /* this rank's own link: bytes in its current tick */
    double tick_bytes;
} rank_state;

typedef struct sim {
    const cdp_sched_config *c;
    const cdp_schedule *s;
    const cdp_stage_cost *st;
    const cdp_network *net;
    rank_state *R;
    msg *m;
    size_t cap;
    int *heap, nheap;
    double *egress_free, *ingress_free, *egress_busy;   /* [hosts] */
    float *host_bytes;       /* [hosts][ticks] when hosts hold several ranks */
    int H, T;
    double link_peak;
    double *tick0;           /* rank 0's clock at the start of each tick */
    int acts, lends;         /* activations sent (model-parallel), stages lent (zero) */
    int *forward;            /* [(r * K + step) * L + stage]: index of the SEND_FULL
                              * by which rank r passes on that full sum, -1: none */
    int oom;
} sim;

/* splitmix64's finalizer: the keys differ in a few low bits each, and a
 * weak hash clusters them in the open-addressing table */
static uint64_t mix(uint64_t h, uint64_t v)
{
    h = (h ^ v) + 0x9e3779b97f4a7c15ull;
    h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ull;
    h = (h ^ (h >> 27)) * 0x94d049bb133111ebull;
    return h ^ (h >> 31);
}

static msg *find(sim *S, mkey k, int create)
{
    uint64_t h = mix(mix(mix(mix(mix(0, (uint32_t)k.kind), (uint32_t)k.dst), (uint32_t)k.stage),
                         (uint32_t)k.a), (uint32_t)k.b);
    for (size_t i = (size_t)h & (S->cap - 1);; i = (i + 1) & (S->cap - 1)) {
        msg *m = &S->m[i];
        if (!m->used) {
            if (!create) return NULL;
            memset(m, 0, sizeof *m);
            m->used = 1;
            m->key = k;
            m->waiter = m->send_waiter = m->head = -1;
            m->send_post = m->recv_post = m->arrival = -1;
            return m;
        }
        if (!memcmp(&m->key, &k, sizeof k)) return m;
    }
}

/* ---------------------------------------------------------- the heap */

static int before(const sim *S, int a, int b)
{
    return S->R[a].t < S->R[b].t || (S->R[a].t == S->R[b].t && a < b);
}

static void push(sim *S, int r)
{
    int i = S->nheap++;
    S->heap[i] = r;
    while (i > 0 && before(S, S->heap[i], S->heap[(i - 1) / 2])) {
        int p = (i - 1) / 2, x = S->heap[p];
        S->heap[p] = S->heap[i];
        S->heap[i] = x;
        i = p;
    }
}

static int pop(sim *S)
{
    int top = S->heap[0];
    S->heap[0] = S->heap[--S->nheap];
    for (int i = 0;;) {
        int l = 2 * i + 1, r = l + 1, b = i;
        if (l < S->nheap && before(S, S->heap[l], S->heap[b])) b = l;
        if (r < S->nheap && before(S, S->heap[r], S->heap[b])) b = r;
        if (b == i) break;
        int x = S->heap[b];
        S->heap[b] = S->heap[i];
        S->heap[i] = x;
        i = b;
    }
    return top;
}

static void wake(sim *S, int r, double t)
{
    if (S->R[r].t < t) S->R[r].t = t;
    push(S, r);
}

/* ---------------------------------------------------------- links */

/* bytes counted on rank r's link (its host's when it leaves the host) in tick t */
static void count_bytes(sim *S, int r, int inter, int tick, double bytes)
{
    if (inter && S->host_bytes) {
        float *b = &S->host_bytes[(size_t)host_of(S->net, r) * S->T + tick];
        *b += (float)bytes;
        if (*b > S->link_peak) S->link_peak = *b;
        return;
    }
    rank_state *R = &S->R[r];   /* a rank's sends come in tick order */
    if (R->bytes_tick != tick) { R->bytes_tick = tick; R->tick_bytes = 0; }
    R->tick_bytes += bytes;
    if (R->tick_bytes > S->link_peak) S->link_peak = R->tick_bytes;
}

/* A transfer over [start, start + d) holds its own direction of the links
 * until its end, and the other direction (what the sender receives, what
 * the receiver sends) for the link's half_duplex share h of d: of two
 * messages sent both ways at once the second ends (1 + h) d after both
 * began, as cdp_netmeasure's exchanges measure it. */
static void hold_reverse(double *free_at, double start, double d, double h)
{
    if (h > 0) *free_at = fmax(*free_at, start + h * d);
}

static void forward_on_arrival(sim *S, const msg *m);

/* both sides are known (or the message is eager): it goes when its links
 * are free.  Between ranks of a host, the sender's and the receiver's
 * shared-memory links; between hosts, store and forward through the
 * sender's host link and the receiver's.  A full-duplex shared-memory link
 * takes a rank's receives from several senders at once (its receiving
 * side is not waited for); every other link carries one message a way. */
static void transfer(sim *S, msg *m, double now, int eager)
{
    const cdp_network *n = S->net;
    const int hs = host_of(n, m->src), hd = host_of(n, m->key.dst);
    rank_state *R = &S->R[m->src], *D = &S->R[m->key.dst];
    const int inter = hs != hd;
    const cdp_link_cost *l = inter ? &n->inter : &n->intra;
    double *out_src = inter ? &S->egress_free[hs] : &R->intra_free;
    double *in_dst = inter ? &S->ingress_free[hd] : &D->intra_in_free;
    double *in_src = inter ? &S->ingress_free[hs] : &R->intra_in_free;
    double *out_dst = inter ? &S->egress_free[hd] : &D->intra_free;
    double *busy_src = inter ? &S->egress_busy[hs] : &R->intra_busy;
    double *busy_dst = inter ? &S->egress_busy[hd] : &D->intra_busy;
    const double h = l->half_duplex;
    double start = fmax(now + (eager ? 0 : l->latency_s),
                        inter || h > 0 ? fmax(*out_src, *in_dst) : *out_src);
    double d = occupancy(l, m->bytes);
    *out_src = *in_dst = start + d;
    *busy_src += d;
    hold_reverse(in_src, start, d, h);
    hold_reverse(out_dst, start, d, h);
    *busy_dst += h * d;
    m->arrival = start + d + l->latency_s;
    if (m->waiter >= 0) wake(S, m->waiter, m->arrival);
    if (m->send_waiter >= 0) wake(S, m->send_waiter, m->arrival);
    m->waiter = m->send_waiter = -1;
    if (m->key.kind == M_FULL)
        forward_on_arrival(S, m);
}

static int is_eager(const sim *S, const msg *m)
{
    int inter = host_of(S->net, m->src) != host_of(S->net, m->key.dst);
    return m->bytes <= (inter ? EAGER_INTER : EAGER_INTRA);
}

static void pend_push(const sim *S, rank_state *R, int msgi);

/* A send of rank r posted at time t; its bytes counted now (count) or by
 * the instruction when the rank reaches it (a full sum passed on). */
static int post_send_at(sim *S, int r, mkey k, double bytes, const cdp_instr *in, double t, int count)
{
    msg *m = find(S, k, 1);
    rank_state *R = &S->R[r];
    m->src = r;
    m->bytes = bytes;
    m->due = in->due >= 0 ? in->due : in->tick;
    m->send_post = t;
    if (count)
        count_bytes(S, r, host_of(S->net, r) != host_of(S->net, k.dst), in->tick, bytes);
    if (R->npend == R->cappend) {
        R->cappend = R->cappend ? 2 * R->cappend : 16;
        int *p = realloc(R->pend, R->cappend * sizeof *p);
        if (!p) return -1;
        R->pend = p;
    }
    pend_push(S, R, (int)(m - S->m));
    if (m->recv_post >= 0 || is_eager(S, m)) transfer(S, m, t, is_eager(S, m));
    return 0;
}

static int post_send(sim *S, int r, mkey k, double bytes, const cdp_instr *in)
{
    return post_send_at(S, r, k, bytes, in, S->R[r].t, 1);
}

/* The executor passes a full sum on as soon as it has arrived (exec.c,
 * find_forwards), not when the rank reaches the SEND_FULL. */
static int forward_index(const sim *S, int r, int step, int l)
{
    return S->forward[((size_t)r * S->c->K + step) * S->c->L + l];
}

static void forward_on_arrival(sim *S, const msg *m)
{
    const int r = m->key.dst, l = m->key.stage, st = m->key.a;
    const int k = forward_index(S, r, st, l);
    if (k < 0) return;
    const cdp_instr *in = &S->s->prog[r].ins[k];
    if (post_send_at(S, r, (mkey){ M_FULL, in->peer, l, st, 0 }, S->st[l].param_bytes, in, m->arrival, 0))
        S->oom = 1;
}

static void post_recv(sim *S, int r, mkey k)
{
    msg *m = find(S, k, 1);
    m->recv_post = S->R[r].t;
    if (m->send_post >= 0 && m->arrival < 0) transfer(S, m, S->R[r].t, 0);
}

/* the buffer of the receive k is read now: 1 when rank r must wait */
static int wait_for(sim *S, int r, mkey k)
{
    msg *m = find(S, k, 0);
    if (!m || m->recv_post < 0) return 0;   /* no receive: the data is local */
    if (m->arrival < 0) {
        m->waiter = r;
        return 1;
    }
    if (m->arrival > S->R[r].t) S->R[r].t = m->arrival;
    return 0;
}

/* a rank's pending sends: a min-heap by due tick, so that a rank with
 * thousands of sends in flight finds the ones to wait for at once */
static int due_of(const sim *S, const rank_state *R, size_t k) { return S->m[R->pend[k]].due; }

static void pend_sift_down(const sim *S, rank_state *R)
{
    for (size_t i = 0;;) {
        size_t l = 2 * i + 1, r = l + 1, b = i;
        if (l < R->npend && due_of(S, R, l) < due_of(S, R, b)) b = l;
        if (r < R->npend && due_of(S, R, r) < due_of(S, R, b)) b = r;
        if (b == i) return;
        int x = R->pend[b];
        R->pend[b] = R->pend[i];
        R->pend[i] = x;
        i = b;
    }
}

static void pend_push(const sim *S, rank_state *R, int msgi)
{
    size_t i = R->npend++;
    R->pend[i] = msgi;
    while (i > 0 && due_of(S, R, i) < due_of(S, R, (i - 1) / 2)) {
        size_t p = (i - 1) / 2;
        int x = R->pend[p];
        R->pend[p] = R->pend[i];
        R->pend[i] = x;
        i = p;
    }
}

/* sends whose receive was posted in a tick at least `slack` before `tick`
 * (all of them: tick < 0) are waited for, as cdp_req_wait_due does */
static int wait_sends(sim *S, int r, int tick, int slack)
{
    rank_state *R = &S->R[r];
    while (R->npend > 0) {
        msg *m = &S->m[R->pend[0]];
        if (tick >= 0 && m->due + slack > tick) return 0;
        if (m->arrival < 0) {
            m->send_waiter = r;
            return 1;
        }
        if (m->arrival > R->t) R->t = m->arrival;
        R->pend[0] = R->pend[--R->npend];
        pend_sift_down(S, R);
    }
    return 0;
}

/* ---------------------------------------------------------- collectives */

static int holders(const cdp_schedule *s, int l, int *first)
{
    int n = 0;
    *first = -1;
    for (int q = 0; q < s->cfg.P; q++)
        if (cdp_schedule_holds(s, q, l)) {
            if (*first < 0) *first = q;
            n++;
        }
    return n;
}

static double total_param_bytes(const sim *S)
{
    double b = 0;
    for (int l = 0; l < S->c->L; l++) b += S->st[l].param_bytes;
    return b;
}

/* 1 when rank r waits for the others (it is woken at the collective's end) */
static int collective(sim *S, int r, const cdp_instr *in)
{
    const int P = S->c->P;
    int kind = in->op == CDP_OP_ALLREDUCE ? M_ALLREDUCE : in->op == CDP_OP_BCAST_PARAMS ? M_BCAST : M_REDUCE;
    msg *m = find(S, (mkey){ kind, -1, in->stage, in->step, in->tick }, 1);
    int first = 0, parties = P;
    double n = in->stage >= 0 ? S->st[in->stage].param_bytes : total_param_bytes(S);
    if (kind == M_ALLREDUCE && in->stage >= 0) parties = holders(S->s, in->stage, &first);
    const int spans = host_of(S->net, first) != host_of(S->net, first + parties - 1);
    if (!m->arrived) {
        m->parties = parties;
        m->tmax = 0;
        m->bytes = kind == M_ALLREDUCE ? cdp_allreduce_time(parties, first, n, S->net, NULL)
                                       : cdp_tree_time(parties, first, n, S->net);
        m->send_post = parties < 2 ? 0 : kind == M_ALLREDUCE ? cdp_sched_allreduce_bytes(parties, n)
                                                             : cdp_sched_bcast_bytes(parties, n);
    }
    /* each rank its own volume, on its own link (the host's link is busy
     * for the collective's time, counted by the host's first rank) */
    count_bytes(S, r, 0, in->tick, m->send_post);
    if (!spans) S->R[r].intra_busy += m->bytes;
    else if (r == first || r % S->net->ranks_per_host == 0) S->egress_busy[host_of(S->net, r)] += m->bytes;
    m->arrived++;
    if (S->R[r].t > m->tmax) m->tmax = S->R[r].t;
    if (m->arrived < m->parties) {
        S->R[r].next = m->head;
        m->head = r;
        return 1;
    }
    double end = m->tmax + m->bytes;
    for (int w = m->head; w >= 0;) {
        int nx = S->R[w].next;
        S->R[w].t = end;
        push(S, w);
        w = nx;
    }
    m->head = -1;
    S->R[r].t = end;
    return 0;
}

/* ---------------------------------------------------------- one instruction */

enum { GO = 0, BLOCKED = 1, FINISHED = 2, FAILED = 3 };

static int step(sim *S, int r)
{
    rank_state *R = &S->R[r];
    const cdp_program *p = &S->s->prog[r];
    const int slack = S->c->framework == CDP_FW_ZERO ? 1 : 2;
    if (R->pc == p->n) {
        if (wait_sends(S, r, -1, 0)) return BLOCKED;
        R->done = 1;
        return FINISHED;
    }
    const cdp_instr *in = &p->ins[R->pc];
    const cdp_stage_cost *c = in->stage >= 0 ? &S->st[in->stage] : NULL;
    if (in->tick != R->tick) {
        if (wait_sends(S, r, in->tick, slack)) return BLOCKED;
        R->tick = in->tick;
        if (r == 0 && in->tick < S->T && S->tick0[in->tick] < 0) S->tick0[in->tick] = R->t;
    }
    const int l = in->stage, i = in->worker;
    switch (in->op) {
    case CDP_OP_FWD:   /* (only the frameworks that send them are looked up) */
        if ((S->acts && wait_for(S, r, (mkey){ M_ACT, r, l, in->step, i })) ||
            (S->lends && wait_for(S, r, (mkey){ M_PARAMS, r, l, in->version, in->tick })))
            return BLOCKED;
        R->t += c->fwd_s;
        R->compute += c->fwd_s;
        R->act += c->act_bytes;
        if (R->act > R->act_peak) R->act_peak = R->act;
        break;
    case CDP_OP_BWD:
        if ((S->acts && wait_for(S, r, (mkey){ M_DACT, r, l, in->step, i })) ||
            (!(in->flags & CDP_F_FIRST) && wait_for(S, r, (mkey){ M_GRAD, r, l, in->step, i })) ||
            (S->lends && wait_for(S, r, (mkey){ M_PARAMS, r, l, in->version, in->tick })))
            return BLOCKED;
        R->t += c->bwd_s;
        R->compute += c->bwd_s;
        R->act -= c->act_bytes;
        break;
    case CDP_OP_APPLY:
        if (wait_for(S, r, (mkey){ M_FULL, r, l, in->version - 1, 0 })) return BLOCKED;
        R->t += c->update_s;
        R->compute += c->update_s;
        break;
    case CDP_OP_SEND_GRAD:
        if (post_send(S, r, (mkey){ M_GRAD, in->peer, l, in->step, i + 1 }, c->param_bytes, in)) return FAILED;
        break;
    case CDP_OP_SEND_FULL:
        if (forward_index(S, r, in->step, l) == (int)R->pc) {   /* posted on arrival */
            count_bytes(S, r, host_of(S->net, r) != host_of(S->net, in->peer), in->tick, c->param_bytes);
            break;
        }
        if (post_send(S, r, (mkey){ M_FULL, in->peer, l, in->step, 0 }, c->param_bytes, in)) return FAILED;
        break;
    case CDP_OP_SEND_ACT:
        if (post_send(S, r, (mkey){ M_ACT, in->peer, l + 1, in->step, i }, c->out_bytes, in)) return FAILED;
        break;
    case CDP_OP_SEND_DACT:
        if (post_send(S, r, (mkey){ M_DACT, in->peer, l - 1, in->step, i }, c->in_bytes, in)) return FAILED;
        break;
    case CDP_OP_SEND_PARAMS:
        if (post_send(S, r, (mkey){ M_PARAMS, in->peer, l, in->version, in->due }, c->param_bytes, in))
            return FAILED;
        break;
    case CDP_OP_RECV_GRAD: post_recv(S, r, (mkey){ M_GRAD, r, l, in->step, i }); break;
    case CDP_OP_RECV_FULL: post_recv(S, r, (mkey){ M_FULL, r, l, in->step, 0 }); break;
    case CDP_OP_RECV_ACT: post_recv(S, r, (mkey){ M_ACT, r, l, in->step, i }); break;
    case CDP_OP_RECV_DACT: post_recv(S, r, (mkey){ M_DACT, r, l, in->step, i }); break;
    case CDP_OP_RECV_PARAMS: post_recv(S, r, (mkey){ M_PARAMS, r, l, in->version, in->tick }); break;
    case CDP_OP_ALLREDUCE: case CDP_OP_BCAST_PARAMS: case CDP_OP_REDUCE_GRAD:
        R->pc++;
        return collective(S, r, in) ? BLOCKED : GO;
    default: break;   /* ACC (the backward accumulates in place), FINALIZE, DROP: no time */
    }
    R->pc++;
    return GO;
}

/* ---------------------------------------------------------- memory */

/* Model state per rank, the most one holds: per stage it keeps, the
 * parameters (two versions where one of its workers lags on it), the
 * optimizer state and the gradient buffers (the all-reduce's one block, else
 * a sum and a full gradient); under zero a rank that borrows stages also
 * holds the largest twice (two versions in flight) and one partial sum.  An
 * estimate: cdp_run --metrics' "scheduled" figure is exact. */
static int state_bytes(const sim *S, int opt_buffers, double *most)
{
    const cdp_sched_config *c = S->c;
    const int N = c->N, L = c->L, P = c->P;
    const int collective = c->rule == CDP_RULE_DP && !c->deterministic;
    unsigned char *lags = calloc((size_t)P * L, 1), *uses = calloc((size_t)P * L, 1);
    if (!lags || !uses) {
        free(lags);
        free(uses);
        return -1;
    }
    double largest = 0;
    for (int l = 0; l < L; l++) largest = fmax(largest, S->st[l].param_bytes);
    for (int i = 0; i < N; i++)
        for (int l = 0; l < L; l++) {
            size_t k = (size_t)S->s->slot_rank[(size_t)i * L + l] * L + l;
            uses[k] = 1;
            lags[k] |= (unsigned char)cdp_lag(N, L, c->rule, i, l);
        }
    *most = 0;
    for (int r = 0; r < P; r++) {
        double b = 0;
        int borrows = 0;
        for (int l = 0; l < L; l++) {
            const double pb = S->st[l].param_bytes;
            if (!cdp_schedule_holds(S->s, r, l)) {
                borrows |= uses[(size_t)r * L + l];
                continue;
            }
            b += pb * (1 + lags[(size_t)r * L + l] + opt_buffers + (collective ? 1 : 2));
        }
        if (borrows) b += 3 * largest;
        *most = fmax(*most, b);
    }
    free(lags);
    free(uses);
    return 0;
}

/* ---------------------------------------------------------- driver */

static void sim_free(sim *S, cdp_schedule *s)
{
    if (S->R)
        for (int r = 0; r < S->c->P; r++) free(S->R[r].pend);
    free(S->R);
    free(S->m);
    free(S->heap);
    free(S->egress_free);
    free(S->ingress_free);
    free(S->egress_busy);
    free(S->host_bytes);
    free(S->tick0);
    free(S->forward);
    cdp_schedule_free(s);
}

/* The SEND_FULLs that pass on a full sum (cdp_program_forwards), by rank,
 * step and stage. */
static int find_forwards(sim *S)
{
    const int K = S->c->K, L = S->c->L;
    for (size_t q = 0; q < (size_t)S->c->P * K * L; q++) S->forward[q] = -1;
    for (int r = 0; r < S->c->P; r++) {
        const cdp_program *p = &S->s->prog[r];
        size_t *recv_of = malloc(sizeof *recv_of * (p->n ? p->n : 1));
        if (!recv_of) return -1;
        cdp_program_forwards(p, L, recv_of);
        for (size_t k = 0; k < p->n; k++)
            if (recv_of[k] != SIZE_MAX)
                S->forward[((size_t)r * K + p->ins[k].step) * L + p->ins[k].stage] = (int)k;
        free(recv_of);
    }
    return 0;
}

int cdp_predict(const cdp_sched_config *c, const cdp_stage_cost *st, const cdp_network *net,
                int opt_buffers, double start_s, cdp_prediction *p, char *err, size_t errlen)
{
    memset(p, 0, sizeof *p);
    const double est = 6.0 * c->N * c->L * c->K + 4.0 * c->P * c->L * c->K;
    if (est > MAX_INSTR) {
        snprintf(err, errlen, "--machine: N=%d x L=%d x %d steps is too big to simulate here "
                 "(about %.3g instructions; at most %.3g): fewer --plan-steps, workers or stages",
                 c->N, c->L, c->K, est, MAX_INSTR);
        return -1;
    }
    cdp_schedule s;
    if (cdp_schedule_build(c, -1, &s, err, errlen)) return -1;
    sim S = { 0 };
    S.c = c;
    S.s = &s;
    S.st = st;
    S.net = net;
    S.T = s.nticks + 1;
    S.H = (c->P + net->ranks_per_host - 1) / net->ranks_per_host;
    size_t ncomm = 0;
    for (int r = 0; r < c->P; r++)
        for (size_t k = 0; k < s.prog[r].n; k++) {
            int op = s.prog[r].ins[k].op;
            ncomm += op != CDP_OP_FWD && op != CDP_OP_BWD && op != CDP_OP_ACC && op != CDP_OP_APPLY;
        }
    /* a send and its receive share an entry: at most half full */
    for (S.cap = 64; S.cap < ncomm + 64; S.cap *= 2) {}
    S.acts = c->framework == CDP_FW_MODEL_PARALLEL;
    S.lends = c->framework == CDP_FW_ZERO;
    S.R = calloc((size_t)c->P, sizeof *S.R);
    S.m = calloc(S.cap, sizeof *S.m);
    S.heap = malloc(sizeof(int) * (size_t)c->P);
    S.egress_free = calloc((size_t)S.H, sizeof(double));
    S.ingress_free = calloc((size_t)S.H, sizeof(double));
    S.egress_busy = calloc((size_t)S.H, sizeof(double));
    S.tick0 = malloc(sizeof(double) * (size_t)S.T);
    S.forward = malloc(sizeof(int) * (size_t)c->P * c->K * c->L);
    if (net->ranks_per_host > 1 && S.H > 1)
        S.host_bytes = calloc((size_t)S.H * S.T, sizeof(float));
    if (!S.R || !S.m || !S.heap || !S.egress_free || !S.ingress_free || !S.egress_busy || !S.tick0 ||
        !S.forward ||
        (net->ranks_per_host > 1 && S.H > 1 && !S.host_bytes)) {
        sim_free(&S, &s);
        snprintf(err, errlen, "--machine: out of memory for the simulation");
        return -1;
    }
    for (int t = 0; t < S.T; t++) S.tick0[t] = -1;
    if (find_forwards(&S)) {
        sim_free(&S, &s);
        snprintf(err, errlen, "--machine: out of memory for the simulation");
        return -1;
    }
    for (int r = 0; r < c->P; r++) {
        S.R[r].tick = S.R[r].bytes_tick = -1;
        push(&S, r);
    }
    int finished = 0, failed = 0;
    while (S.nheap > 0 && !failed) {
        int r = pop(&S), how;
        while ((how = step(&S, r)) == GO) {
            /* run on while this rank is still the earliest */
            if (S.nheap > 0 && before(&S, S.heap[0], r)) {
                push(&S, r);
                break;
            }
        }
        finished += how == FINISHED;
        failed = how == FAILED || S.oom;
    }
    if (failed || finished < c->P) {
        snprintf(err, errlen, failed ? "--machine: out of memory for the simulation"
                                     : "--machine: internal error: the simulated schedule stalls");
        sim_free(&S, &s);
        return -1;
    }
    p->ranks = c->P;
    for (int r = 0; r < c->P; r++) {
        const rank_state *R = &S.R[r];
        p->segment_s = fmax(p->segment_s, R->t);
        p->compute_s = fmax(p->compute_s, R->compute / c->K);
        p->link_busy_s = fmax(p->link_busy_s, R->intra_busy / c->K);
        p->act_peak_bytes = fmax(p->act_peak_bytes, R->act_peak);
    }
    if (state_bytes(&S, opt_buffers, &p->state_bytes)) failed = 1;
    if (failed) {
        snprintf(err, errlen, "--machine: out of memory for the simulation");
        sim_free(&S, &s);
        return -1;
    }
    for (int h = 0; h < S.H; h++) p->link_busy_s = fmax(p->link_busy_s, S.egress_busy[h] / c->K);
    p->link_peak_bytes = S.link_peak;
    p->segment_s += start_s;   /* paid once, by the job's first segment */
    p->step_s = p->segment_s / c->K;
    const int L2 = 2 * c->L;
    p->period_s = c->K >= 2 && S.tick0[L2 * (c->K - 1)] >= 0 && S.tick0[0] >= 0
                      ? (S.tick0[L2 * (c->K - 1)] - S.tick0[0]) / (c->K - 1) : p->step_s;
    if (c->rule == CDP_RULE_DP && !c->deterministic && c->P > 1) {
        double n = c->framework == CDP_FW_REPLICATED ? total_param_bytes(&S) : st[0].param_bytes;
        int first = 0, parties = c->P;
        if (c->framework == CDP_FW_MODEL_PARALLEL) parties = holders(&s, 0, &first);
        if (c->framework == CDP_FW_ZERO) p->collective = "binomial tree (MPI_Bcast, MPI_Reduce)";
        else cdp_allreduce_time(parties, first, n, net, &p->collective);
    }
    sim_free(&S, &s);
    return 0;
}
