#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "util/clock.h"
#include "exec/comm.h"
#include "sched/schedule.h"

void cdp_comm_preinit(void)
{
    /* Open MPI 4.1's default is send,put,inplace,need-ack,need-csum,hetero-rdma */
    setenv("OMPI_MCA_btl_tcp_flags", "send,inplace,need-ack,need-csum", 0);   /* 0: the user's stays */
}

/* Every rank's host name and CPU count, to all ranks; hosts numbered by
 * their lowest rank.  0, or -1 out of memory (on any rank: then on all). */
static int gather_hosts(cdp_comm *c)
{
    struct { char name[CDP_HOST_MAX]; int cpus; } mine, *all;
    memset(&mine, 0, sizeof mine);
    if (gethostname(mine.name, sizeof mine.name - 1) != 0)
        snprintf(mine.name, sizeof mine.name, "?");
    mine.name[sizeof mine.name - 1] = '\0';
    mine.cpus = (int)sysconf(_SC_NPROCESSORS_ONLN);
    const size_t P = (size_t)c->size;
    all = malloc(P * sizeof *all);
    c->host_of = malloc(P * sizeof *c->host_of);
    c->host_name = malloc(P * sizeof *c->host_name);
    c->host_cpus = malloc(P * sizeof *c->host_cpus);
    int bad = !all || !c->host_of || !c->host_name || !c->host_cpus, any;
    MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, c->comm);
    if (any) {
        free(all);
        cdp_comm_free(c);
        return -1;
    }
    MPI_Allgather(&mine, (int)sizeof mine, MPI_BYTE, all, (int)sizeof mine, MPI_BYTE, c->comm);
    c->nhosts = 0;
    for (size_t r = 0; r < P; r++) {
        int h = 0;
        while (h < c->nhosts && strcmp(c->host_name[h], all[r].name) != 0)
            h++;
        if (h == c->nhosts) {
            memcpy(c->host_name[h], all[r].name, CDP_HOST_MAX);
            c->host_cpus[h] = all[r].cpus;
            c->nhosts++;
        }
        c->host_of[r] = h;
    }
    free(all);
    return 0;
}

int cdp_comm_init(cdp_comm *c, MPI_Comm comm)
{
    c->comm = comm;
    MPI_Comm_rank(comm, &c->rank);
    MPI_Comm_size(comm, &c->size);
    MPI_Comm node;
    MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, c->rank, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &c->local_rank);
    MPI_Comm_size(node, &c->local_size);
    MPI_Comm_free(&node);
    c->oversubscribed = c->local_size > sysconf(_SC_NPROCESSORS_ONLN);
    c->bytes_sent = 0;
    c->collectives = 0;
    c->tick_bytes = NULL;
    c->ntick_bytes = 0;
    c->cur_tick = 0;
    c->timeout = 0;
    c->what = (cdp_comm_what){ "?", -1, -1, -1, -1, -1 };
    c->wd = NULL;
    return gather_hosts(c);
}

void cdp_comm_free(cdp_comm *c)
{
    free(c->host_of);
    free(c->host_name);
    free(c->host_cpus);
    c->host_of = NULL;
    c->host_name = NULL;
    c->host_cpus = NULL;
    c->nhosts = 0;
}

const char *cdp_comm_host(const cdp_comm *c, int r)
{
    if (!c->host_of || r < 0 || r >= c->size)
        return "?";
    return c->host_name[c->host_of[r]];
}

/* ------------------------------------------------------------ watchdog
 *
 * On a communicator of its own: every rank keeps a receive posted for
 * questions (WD_ASK: "are you alive?", with the asker's question number)
 * and one for answers (WD_ANSWER: the number, and the rank the answering
 * rank waits on).  Questions are answered only from inside a wait, which is
 * where a live rank whose peer stalled spends its time. */

enum { WD_ASK = 1, WD_ANSWER = 2 };

struct cdp_watchdog {
    MPI_Comm comm;
    MPI_Request ask_req, answer_req;   /* the posted receives */
    int ask_in[2], answer_in[2];
    MPI_Request *out;                  /* [P]: the last message sent to each rank */
    int (*out_buf)[2];
    unsigned char *asked, *answered;   /* [P]: in the current question */
    int *their_peer;                   /* [P]: whom an answering rank waits on */
    int seq;                           /* the current question's number */
};

/* One small message to rank `to`; dropped when the previous one to `to` is
 * still in flight (a stalled receiver: it would not read it anyway). */
static void wd_send(struct cdp_watchdog *w, int to, int tag, int a, int b)
{
    int done = 1;
    if (w->out[to] != MPI_REQUEST_NULL)
        MPI_Test(&w->out[to], &done, MPI_STATUS_IGNORE);
    if (!done)
        return;
    w->out_buf[to][0] = a;
    w->out_buf[to][1] = b;
    MPI_Isend(w->out_buf[to], 2, MPI_INT, to, tag, w->comm, &w->out[to]);
}

/* Answers the questions that came in, and reads the answers to ours. */
static void wd_serve(cdp_comm *c)
{
    struct cdp_watchdog *w = c->wd;
    MPI_Status st;
    for (int done = 1; done;) {
        MPI_Test(&w->ask_req, &done, &st);
        if (!done) break;
        wd_send(w, st.MPI_SOURCE, WD_ANSWER, w->ask_in[0], c->what.peer);
        MPI_Irecv(w->ask_in, 2, MPI_INT, MPI_ANY_SOURCE, WD_ASK, w->comm, &w->ask_req);
    }
    for (int done = 1; done;) {
        MPI_Test(&w->answer_req, &done, &st);
        if (!done) break;
        if (w->answer_in[0] == w->seq) {
            w->answered[st.MPI_SOURCE] = 1;
            w->their_peer[st.MPI_SOURCE] = w->answer_in[1];
        }
        MPI_Irecv(w->answer_in, 2, MPI_INT, MPI_ANY_SOURCE, WD_ANSWER, w->comm, &w->answer_req);
    }
}

/* Asks the rank waited on (every other rank for a collective). */
static void wd_ask(cdp_comm *c)
{
    struct cdp_watchdog *w = c->wd;
    w->seq++;
    for (int q = 0; q < c->size; q++) {
        w->asked[q] = q != c->rank && (c->what.peer < 0 || q == c->what.peer);
        w->answered[q] = 0;
        if (w->asked[q])
            wd_send(w, q, WD_ASK, w->seq, 0);
    }
}

/* The first rank asked that has not answered, -1: all answered. */
static int wd_silent(const cdp_comm *c)
{
    for (int q = 0; q < c->size; q++)
        if (c->wd->asked[q] && !c->wd->answered[q])
            return q;
    return -1;
}

/* "RECV_GRAD of stage 1, step 58, tick 12" */
static void describe(const cdp_comm_what *w, char *buf, size_t len)
{
    int n = snprintf(buf, len, "%s", w->op ? w->op : "?");
    if (w->stage >= 0 && n < (int)len) n += snprintf(buf + n, len - n, " of stage %d", w->stage);
    if (w->worker >= 0 && n < (int)len) n += snprintf(buf + n, len - n, " worker %d", w->worker);
    if (w->step >= 0 && n < (int)len)
        n += snprintf(buf + n, len - n, ", step %lld", (long long)w->step + 1);
    if (w->tick >= 0 && n < (int)len) snprintf(buf + n, len - n, ", tick %d", w->tick);
}

/* " (host node2)" when the job spans hosts, else "" */
static const char *on_host(const cdp_comm *c, int r, char *buf, size_t len)
{
    buf[0] = '\0';
    if (c->nhosts > 1 && r >= 0)
        snprintf(buf, len, " (host %s)", cdp_comm_host(c, r));
    return buf;
}

/* After the line naming a silent rank on another host: the launcher's own
 * detection of the lost host gets CDP_WATCHDOG_HOST_WAIT_S to end the job
 * (this rank keeps answering the watchdog's questions meanwhile), then
 * MPI_Abort ends it anyway (a rank stopped on a reachable host). */
static void wait_for_launcher(cdp_comm *c)
{
    const double until = cdp_now_s() + CDP_WATCHDOG_HOST_WAIT_S;
    while (cdp_now_s() < until) {
        wd_serve(c);
        struct timespec ts = { 0, 50000000 };
        nanosleep(&ts, NULL);
    }
}

/* One line naming the rank that stalled (and its host), then MPI_Abort. */
static void wd_stop(cdp_comm *c, int silent, double waited)
{
    char what[160], on[CDP_HOST_MAX + 64], why[CDP_HOST_MAX + 200], h[CDP_HOST_MAX + 16];
    describe(&c->what, what, sizeof what);
    if (c->what.peer >= 0)
        snprintf(on, sizeof on, "waiting on rank %d%s", c->what.peer,
                 on_host(c, c->what.peer, h, sizeof h));
    else
        snprintf(on, sizeof on, "in a collective with every rank");
    if (silent >= 0) {
        snprintf(why, sizeof why, "rank %d%s does not answer (stopped, stalled or lost)", silent,
                 on_host(c, silent, h, sizeof h));
    } else {   /* all alive, and waiting: on whom */
        int q = c->what.peer >= 0 ? c->what.peer : (c->rank + 1) % c->size;
        if (c->wd->their_peer[q] >= 0)
            snprintf(why, sizeof why, "rank %d is alive and waits itself, on rank %d (a deadlock?)",
                     q, c->wd->their_peer[q]);
        else
            snprintf(why, sizeof why, "rank %d is alive and waits itself, in a collective "
                     "(a deadlock?)", q);
    }
    fprintf(stderr, "cdp_run: rank %d%s: no progress for %.0f s %s (%s); %s; stopping the job "
            "(--timeout %d)\n", c->rank, on_host(c, c->rank, h, sizeof h), waited, on, what, why,
            c->timeout);
    fflush(stderr);
    if (silent >= 0 && c->host_of && c->host_of[silent] != c->host_of[c->rank])
        wait_for_launcher(c);
    MPI_Abort(c->comm, CDP_EXIT_STALLED);
}

void cdp_comm_set_timeout(cdp_comm *c, int seconds)
{
    if (seconds <= 0 || c->wd)
        return;
    struct cdp_watchdog *w = calloc(1, sizeof *w);
    if (!w) abort();
    const size_t P = (size_t)c->size;
    w->out = malloc(P * sizeof *w->out);
    w->out_buf = malloc(P * sizeof *w->out_buf);
    w->asked = calloc(P, 1);
    w->answered = calloc(P, 1);
    w->their_peer = malloc(P * sizeof *w->their_peer);
    if (!w->out || !w->out_buf || !w->asked || !w->answered || !w->their_peer) abort();
    for (size_t q = 0; q < P; q++)
        w->out[q] = MPI_REQUEST_NULL;
    MPI_Comm_dup(c->comm, &w->comm);
    MPI_Irecv(w->ask_in, 2, MPI_INT, MPI_ANY_SOURCE, WD_ASK, w->comm, &w->ask_req);
    MPI_Irecv(w->answer_in, 2, MPI_INT, MPI_ANY_SOURCE, WD_ANSWER, w->comm, &w->answer_req);
    c->wd = w;
    c->timeout = seconds;
}

void cdp_comm_finalize(cdp_comm *c)
{
    struct cdp_watchdog *w = c->wd;
    if (!w)
        return;
    MPI_Barrier(w->comm);   /* no rank asks any more */
    MPI_Cancel(&w->ask_req);
    MPI_Wait(&w->ask_req, MPI_STATUS_IGNORE);
    MPI_Cancel(&w->answer_req);
    MPI_Wait(&w->answer_req, MPI_STATUS_IGNORE);
    for (int q = 0; q < c->size; q++)
        if (w->out[q] != MPI_REQUEST_NULL)
            MPI_Request_free(&w->out[q]);
    MPI_Comm_free(&w->comm);
    free(w->out); free(w->out_buf); free(w->asked); free(w->answered); free(w->their_peer);
    free(w);
    c->wd = NULL;
    c->timeout = 0;
}

/* The wait under the watchdog: no completion for `timeout` s, then ask;
 * silence for CDP_WATCHDOG_GRACE_S, or `timeout` s more with every rank
 * asked alive, then stop. */
static void wait_watched(cdp_comm *c, MPI_Request *r)
{
    const double t0 = cdp_now_s();
    double deadline = t0 + c->timeout;
    int asked = 0;
    for (int spins = 0;; spins++) {
        int done = 0;
        MPI_Test(r, &done, MPI_STATUS_IGNORE);
        if (done) return;
        wd_serve(c);
        if (c->oversubscribed && spins >= 64) {
            struct timespec ts = { 0, 20000 };
            nanosleep(&ts, NULL);
        }
        const double t = cdp_now_s();
        if (asked == 1 && wd_silent(c) < 0) {   /* alive: give it the time once more */
            asked = 2;
            deadline = t + c->timeout;
        }
        if (t < deadline)
            continue;
        if (!asked) {
            wd_ask(c);
            asked = 1;
            deadline = t + CDP_WATCHDOG_GRACE_S;
        } else {
            wd_stop(c, wd_silent(c), asked == 1 ? (double)c->timeout : t - t0);
        }
    }
}

void cdp_comm_wait(cdp_comm *c, MPI_Request *r)
{
    if (c->wd) {
        wait_watched(c, r);
        return;
    }
    if (!c->oversubscribed) {
        MPI_Wait(r, MPI_STATUS_IGNORE);
        return;
    }
    for (int spins = 0;; spins++) {
        int done = 0;
        MPI_Test(r, &done, MPI_STATUS_IGNORE);
        if (done) return;
        if (spins >= 64) {
            struct timespec ts = { 0, 20000 };
            nanosleep(&ts, NULL);
        }
    }
}

void cdp_comm_allreduce_watched(cdp_comm *c, const void *in, void *out, int n, MPI_Datatype type,
                                MPI_Op op, const char *phase, int64_t step)
{
    MPI_Request r;
    MPI_Iallreduce(in, out, n, type, op, c->comm, &r);
    c->what = (cdp_comm_what){ phase, -1, -1, -1, step, -1 };
    cdp_comm_wait(c, &r);
}

int cdp_comm_tag(int kind, int stage)
{
    return kind * 1024 + stage;
}

static void count(cdp_comm *c, int64_t bytes)
{
    c->bytes_sent += bytes;
    if (c->tick_bytes && c->cur_tick >= 0 && c->cur_tick < c->ntick_bytes)
        c->tick_bytes[c->cur_tick] += bytes;
}

static int as_count(size_t n)
{
    if (n > (size_t)INT_MAX) {
        fprintf(stderr, "cdp: message of %zu bytes is larger than MPI's int count\n", n);
        abort();
    }
    return (int)n;
}

void cdp_comm_isend(cdp_comm *c, const void *buf, size_t n, int peer, int tag, MPI_Request *req)
{
    MPI_Isend(buf, as_count(n), MPI_BYTE, peer, tag, c->comm, req);
    count(c, (int64_t)n);
}

void cdp_comm_irecv(cdp_comm *c, void *buf, size_t n, int peer, int tag, MPI_Request *req)
{
    MPI_Irecv(buf, as_count(n), MPI_BYTE, peer, tag, c->comm, req);
}

void cdp_comm_add_host(void *ctx, size_t n, float *acc, const float *x)
{
    (void)ctx;
    for (size_t i = 0; i < n; i++)
        acc[i] += x[i];
}

/* Chunk j of the ring's P: the first n % P chunks one float longer. */
static void ring_chunk(size_t n, int P, int j, size_t *off, size_t *len)
{
    const size_t base = n / (size_t)P, extra = n % (size_t)P, u = (size_t)j;
    *off = u * base + (u < extra ? u : extra);
    *len = base + (u < extra);
}

size_t cdp_comm_allreduce_tmp_floats(size_t n, int P)
{
    return P > 0 ? (n + (size_t)P - 1) / (size_t)P : n;
}

/* One step of the ring: chunk `send` of buf to the right, chunk `recv`
 * from the left into `into` (tmp or buf itself), both waited for. */
static void ring_step(cdp_comm *c, MPI_Comm sub, int right, int left, float *buf, size_t n, int P,
                      int send, int recv, float *into_tmp)
{
    size_t so, sl, ro, rl;
    ring_chunk(n, P, send, &so, &sl);
    ring_chunk(n, P, recv, &ro, &rl);
    MPI_Request rr, sr;
    MPI_Irecv(into_tmp ? into_tmp : buf + ro, as_count(rl), MPI_FLOAT, left, CDP_TAG_RING, sub, &rr);
    MPI_Isend(buf + so, as_count(sl), MPI_FLOAT, right, CDP_TAG_RING, sub, &sr);
    count(c, (int64_t)(sl * sizeof(float)));
    cdp_comm_wait(c, &rr);
    cdp_comm_wait(c, &sr);
}

void cdp_comm_allreduce_sum(cdp_comm *c, MPI_Comm sub, float *buf, size_t n, float *tmp,
                            cdp_comm_add_fn add, void *ctx)
{
    int P, r;
    MPI_Comm_size(sub, &P);
    MPI_Comm_rank(sub, &r);
    c->collectives++;
    if (P == 1)
        return;
    const int right = (r + 1) % P, left = (r + P - 1) % P;
    /* reduce-scatter: after step s rank r holds the sum of chunk r - s - 1
     * over ranks r - s - 1 .. r; after P - 1 steps its chunk r + 1 is whole.
     * Chunk j is summed in the order of the ranks from j on, whatever the
     * timing: the same bits every run on P ranks. */
    for (int s = 0; s < P - 1; s++) {
        const int send = (r - s + P) % P, recv = (r - s - 1 + 2 * P) % P;
        ring_step(c, sub, right, left, buf, n, P, send, recv, tmp);
        size_t ro, rl;
        ring_chunk(n, P, recv, &ro, &rl);
        add(ctx, rl, buf + ro, tmp);
    }
    /* all-gather: the whole chunks go round once more */
    for (int s = 0; s < P - 1; s++)
        ring_step(c, sub, right, left, buf, n, P, (r + 1 - s + P) % P, (r - s + P) % P, NULL);
}

void cdp_comm_bcast(cdp_comm *c, void *buf, size_t n, int root)
{
    MPI_Request r;
    MPI_Ibcast(buf, as_count(n), MPI_BYTE, root, c->comm, &r);
    cdp_comm_wait(c, &r);
    c->collectives++;
    count(c, (int64_t)cdp_sched_bcast_bytes(c->size, (double)n));
}

void cdp_comm_reduce_sum(cdp_comm *c, const float *send, float *recv, size_t n, int root)
{
    MPI_Request r;
    MPI_Ireduce(c->rank == root ? MPI_IN_PLACE : send, c->rank == root ? recv : NULL,
                as_count(n), MPI_FLOAT, MPI_SUM, root, c->comm, &r);
    cdp_comm_wait(c, &r);
    c->collectives++;
    count(c, (int64_t)cdp_sched_bcast_bytes(c->size, (double)n * sizeof(float)));
}

int cdp_comm_any(cdp_comm *c, int flag)
{
    int out = 0;
    MPI_Allreduce(&flag, &out, 1, MPI_INT, MPI_MAX, c->comm);
    return out;
}
