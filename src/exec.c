/* The executor.  See include/cdp/exec.h.
 *
 * Buffers per stage l (slices of contiguous nparams-sized arrays, so that a
 * dp all-reduce is one call):
 *   param[v & 1]  parameters at version v (two slots: current and previous)
 *   mom           momentum
 *   acc           gradient accumulator of the step in progress
 *   full          full (mean) gradient waiting to be applied
 *   scratch       one worker's gradient, from BWD until its ACC
 * A buffer that MPI is reading or writing is waited for before the executor
 * touches it (wait_range), so the order of the instruction list is all the
 * synchronisation there is. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "cdp/actmem.h"
#include "cdp/batch.h"
#include "cdp/exec.h"

typedef struct pending {
    MPI_Request req;
    char *buf;          /* backend memory the request reads or writes */
    size_t bytes;
    void *staging;      /* host copy when the backend's memory is not MPI-addressable */
    int is_recv;
} pending;

struct cdp_exec {
    cdp_exec_config cfg;
    const cdp_model *m;
    const cdp_backend *be;
    cdp_comm *comm;
    int N, B, L;
    int mpi_direct;             /* MPI may read/write backend memory directly */

    float *param[2], *mom, *acc, *full, *scratch, *ws;
    int64_t *slot_version;      /* [2*L]: version held by slot s of stage l */
    int64_t *updates;           /* [L]: updates applied so far (momentum "first" flag) */

    /* activations of (worker, stage), index i*L + l */
    float **act, **dact, **x;
    int32_t **labels;
    size_t *act_bytes;          /* per stage */
    cdp_actmem mem;

    uint8_t *host_pixels;
    int32_t *host_labels;
    double *stats;              /* backend memory: loss sum, correct */
    int64_t samples;
    cdp_batcher batch;

    pending *pend;
    size_t npend, cappend;

    int64_t *tick_act, *tick_bytes;
    int ntick;

    cdp_trace_event *ev;
    size_t nev, capev;
    struct timespec t_origin;
};

static double now_s(const cdp_exec *x)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - x->t_origin.tv_sec) + 1e-9 * (double)(t.tv_nsec - x->t_origin.tv_nsec);
}

static void *be_alloc(const cdp_backend *be, size_t bytes)
{
    void *p = be->alloc(bytes ? bytes : 64);
    if (!p) {
        fprintf(stderr, "cdp: out of %s memory allocating %zu bytes\n", be->name, bytes);
        abort();
    }
    return p;
}

cdp_exec *cdp_exec_create(const cdp_exec_config *cfg, const float *init, char *err, size_t errlen)
{
    cdp_exec *x = calloc(1, sizeof *x);
    if (!x) abort();
    x->cfg = *cfg;
    x->m = cfg->model;
    x->be = cfg->be;
    x->comm = cfg->comm;
    x->N = cfg->N;
    x->B = cfg->B;
    x->L = x->m->nstages;
    x->mpi_direct = cdp_backend_mpi_device_ok(x->be);
    clock_gettime(CLOCK_MONOTONIC, &x->t_origin);
    if (cdp_batcher_init(&x->batch, cfg->train, x->N, x->B, cfg->seed, cfg->shuffle)) {
        snprintf(err, errlen, "the training set has %lld samples, fewer than one step of "
                 "%d workers x %d samples", (long long)cfg->train->n, x->N, x->B);
        free(x);
        return NULL;
    }
    const cdp_backend *be = x->be;
    const size_t P = x->m->nparams * sizeof(float);
    size_t maxstage = 0;
    for (int l = 0; l < x->L; l++)
        if (x->m->stage_n[l] > maxstage) maxstage = x->m->stage_n[l];
    for (int s = 0; s < 2; s++)
        x->param[s] = be_alloc(be, P);
    x->mom = be_alloc(be, P);
    x->acc = be_alloc(be, P);
    x->full = be_alloc(be, P);
    x->scratch = be_alloc(be, maxstage * sizeof(float));
    x->ws = be_alloc(be, cdp_model_ws_floats(x->m, x->B) * sizeof(float));
    x->stats = be_alloc(be, 2 * sizeof(double));
    be->zero(x->stats, 2 * sizeof(double));
    be->zero(x->mom, P);
    be->zero(x->acc, P);
    be->zero(x->full, P);
    be->to_device(x->param[0], init, P);
    be->copy(x->param[1], x->param[0], P);
    x->slot_version = calloc((size_t)2 * x->L, sizeof(int64_t));
    x->updates = calloc((size_t)x->L, sizeof(int64_t));
    for (int l = 0; l < x->L; l++) {
        x->slot_version[0 * x->L + l] = 0;
        x->slot_version[1 * x->L + l] = -1;
    }
    const size_t NL = (size_t)x->N * x->L;
    x->act = calloc(NL, sizeof *x->act);
    x->dact = calloc(NL, sizeof *x->dact);
    x->x = calloc((size_t)x->N, sizeof *x->x);
    x->labels = calloc((size_t)x->N, sizeof *x->labels);
    x->act_bytes = calloc((size_t)x->L, sizeof *x->act_bytes);
    for (int l = 0; l < x->L; l++)
        x->act_bytes[l] = cdp_stage_act_floats(x->m, l, x->B) * sizeof(float);
    cdp_actmem_init(&x->mem, be);
    x->host_pixels = malloc((size_t)x->B * cfg->train->dim);
    x->host_labels = malloc((size_t)x->B * sizeof(int32_t));
    if (!x->slot_version || !x->updates || !x->act || !x->dact || !x->x || !x->labels ||
        !x->act_bytes || !x->host_pixels || !x->host_labels)
        abort();
    return x;
}

void cdp_exec_destroy(cdp_exec *x)
{
    if (!x) return;
    const cdp_backend *be = x->be;
    for (size_t i = 0; i < (size_t)x->N * x->L; i++) {
        cdp_actmem_free(&x->mem, x->act[i], 0);
        cdp_actmem_free(&x->mem, x->dact[i], 0);
    }
    for (int i = 0; i < x->N; i++) {
        cdp_actmem_free(&x->mem, x->x[i], 0);
        cdp_actmem_free(&x->mem, x->labels[i], 0);
    }
    cdp_actmem_destroy(&x->mem);
    be->free(x->param[0]); be->free(x->param[1]);
    be->free(x->mom); be->free(x->acc); be->free(x->full);
    be->free(x->scratch); be->free(x->ws); be->free(x->stats);
    free(x->slot_version); free(x->updates);
    free(x->act); free(x->dact); free(x->x); free(x->labels); free(x->act_bytes);
    free(x->host_pixels); free(x->host_labels);
    free(x->pend); free(x->tick_act); free(x->tick_bytes); free(x->ev);
    cdp_batcher_free(&x->batch);
    free(x);
}

/* ------------------------------------------------------------ requests */

static void finish(cdp_exec *x, size_t k)
{
    pending *p = &x->pend[k];
    if (p->staging) {
        if (p->is_recv)
            x->be->to_device(p->buf, p->staging, p->bytes);
        free(p->staging);
    }
    x->pend[k] = x->pend[--x->npend];
}

static void progress(cdp_exec *x)
{
    for (size_t k = 0; k < x->npend;) {
        int done = 0;
        MPI_Test(&x->pend[k].req, &done, MPI_STATUS_IGNORE);
        if (done) finish(x, k);
        else k++;
    }
}

/* Waits for every request that touches [buf, buf + bytes). */
static void wait_range(cdp_exec *x, const void *buf, size_t bytes)
{
    const char *b = buf;
    for (size_t k = 0; k < x->npend;) {
        pending *p = &x->pend[k];
        if (p->buf < b + bytes && b < p->buf + p->bytes) {
            MPI_Wait(&p->req, MPI_STATUS_IGNORE);
            finish(x, k);
        } else {
            k++;
        }
    }
}

static void wait_all(cdp_exec *x)
{
    while (x->npend) {
        MPI_Wait(&x->pend[x->npend - 1].req, MPI_STATUS_IGNORE);
        finish(x, x->npend - 1);
    }
}

static pending *new_pending(cdp_exec *x, void *buf, size_t bytes, int is_recv)
{
    if (x->npend == x->cappend) {
        size_t cap = x->cappend ? 2 * x->cappend : 16;
        pending *v = realloc(x->pend, cap * sizeof *v);
        if (!v) abort();
        x->pend = v;
        x->cappend = cap;
    }
    pending *p = &x->pend[x->npend++];
    *p = (pending){ MPI_REQUEST_NULL, buf, bytes, NULL, is_recv };
    if (!x->mpi_direct) {
        p->staging = malloc(bytes);
        if (!p->staging) abort();
    }
    return p;
}

static void post_send(cdp_exec *x, const void *buf, size_t bytes, int peer, int tag)
{
    pending *p = new_pending(x, (void *)buf, bytes, 0);
    if (p->staging)
        x->be->to_host(p->staging, buf, bytes);
    else
        x->be->sync();
    cdp_comm_isend(x->comm, p->staging ? p->staging : buf, bytes, peer, tag, &p->req);
}

static void post_recv(cdp_exec *x, void *buf, size_t bytes, int peer, int tag)
{
    wait_range(x, buf, bytes);  /* earlier sends from this buffer must be done */
    pending *p = new_pending(x, buf, bytes, 1);
    if (!p->staging)
        x->be->sync();
    cdp_comm_irecv(x->comm, p->staging ? p->staging : buf, bytes, peer, tag, &p->req);
}

/* ------------------------------------------------------------ helpers */

static float *stage_params(cdp_exec *x, int l, int64_t v)
{
    int s = (int)(v & 1);
    if (x->slot_version[s * x->L + l] != v) {
        fprintf(stderr, "cdp: internal error: stage %d needs version %lld, slot holds %lld\n",
                l, (long long)v, (long long)x->slot_version[s * x->L + l]);
        abort();
    }
    return x->param[s] + x->m->stage_off[l];
}

static size_t stage_bytes(const cdp_exec *x, int l)
{
    return x->m->stage_n[l] * sizeof(float);
}

static int64_t abs_version(int64_t k0, int32_t rel)
{
    int64_t v = k0 + rel;
    return v < 0 ? 0 : v;
}

static void do_fwd(cdp_exec *x, const cdp_instr *in, int64_t k0)
{
    const int i = in->worker, l = in->stage, L = x->L, B = x->B;
    const int64_t k = k0 + in->step;
    const float *w = stage_params(x, l, abs_version(k0, in->version));
    if (l == 0) {
        size_t n = (size_t)B * x->m->dims[0];
        x->x[i] = cdp_actmem_alloc(&x->mem, n * sizeof(float));
        cdp_batcher_gather(&x->batch, k, i, x->host_pixels, NULL);
        x->be->pixels_to_input(n, x->host_pixels, x->x[i]);
    }
    int32_t *labels = NULL;
    if (l == L - 1) {
        x->labels[i] = cdp_actmem_alloc(&x->mem, (size_t)B * sizeof(int32_t));
        cdp_batcher_gather(&x->batch, k, i, NULL, x->host_labels);
        x->be->to_device(x->labels[i], x->host_labels, (size_t)B * sizeof(int32_t));
        labels = x->labels[i];
        x->samples += B;
    }
    const float *input = l == 0 ? x->x[i] : cdp_stage_output(x->m, l - 1, B, x->act[i * L + l - 1]);
    x->act[i * L + l] = cdp_actmem_alloc(&x->mem, x->act_bytes[l]);
    cdp_stage_fwd(x->be, x->m, l, B, w, input, x->act[i * L + l], labels, x->stats);
}

static void do_bwd(cdp_exec *x, const cdp_instr *in, int64_t k0)
{
    const int i = in->worker, l = in->stage, L = x->L, B = x->B;
    const float *w = stage_params(x, l, abs_version(k0, in->version));
    const float *input = l == 0 ? x->x[i] : cdp_stage_output(x->m, l - 1, B, x->act[i * L + l - 1]);
    float *dx = NULL;
    if (l > 0) {
        size_t n = (size_t)B * cdp_stage_in(x->m, l);
        dx = x->dact[i * L + l - 1] = cdp_actmem_alloc(&x->mem, n * sizeof(float));
    }
    wait_range(x, x->scratch, stage_bytes(x, l));
    cdp_stage_bwd(x->be, x->m, l, B, w, input, x->act[i * L + l],
                  l == L - 1 ? NULL : x->dact[i * L + l], dx, x->scratch, x->ws);
    cdp_actmem_free(&x->mem, x->act[i * L + l], x->act_bytes[l]);
    x->act[i * L + l] = NULL;
    if (l < L - 1) {
        cdp_actmem_free(&x->mem, x->dact[i * L + l], (size_t)B * cdp_stage_out(x->m, l) * sizeof(float));
        x->dact[i * L + l] = NULL;
    }
    if (l == 0) {
        cdp_actmem_free(&x->mem, x->x[i], (size_t)B * x->m->dims[0] * sizeof(float));
        x->x[i] = NULL;
    }
    if (l == L - 1) {
        cdp_actmem_free(&x->mem, x->labels[i], (size_t)B * sizeof(int32_t));
        x->labels[i] = NULL;
    }
}

static void do_apply(cdp_exec *x, const cdp_instr *in, int64_t k0)
{
    const int l = in->stage;
    const int64_t v = k0 + in->version;       /* version produced */
    const size_t off = x->m->stage_off[l], n = x->m->stage_n[l];
    wait_range(x, x->full + off, n * sizeof(float));
    const float *src = stage_params(x, l, v - 1);
    float *dst = x->param[v & 1] + off;
    wait_range(x, dst, n * sizeof(float));
    const cdp_sgd *o = &x->cfg.sgd;
    x->be->sgd(n, src, dst, x->full + off, x->mom + off, cdp_sgd_lr(o, v - 1),
               (float)o->momentum, (float)o->weight_decay, x->updates[l] == 0);
    x->updates[l]++;
    x->slot_version[(v & 1) * x->L + l] = v;
}

static void finalize(cdp_exec *x, size_t off, size_t n)
{
    wait_range(x, x->full + off, n * sizeof(float));
    x->be->copy(x->full + off, x->acc + off, n * sizeof(float));
    x->be->scale(n, x->full + off, 1.0f / (float)x->N);
}

static void record(cdp_exec *x, const cdp_instr *in, int64_t k0, double t0)
{
    if (x->nev == x->capev) {
        size_t cap = x->capev ? 2 * x->capev : 4096;
        cdp_trace_event *v = realloc(x->ev, cap * sizeof *v);
        if (!v) abort();
        x->ev = v;
        x->capev = cap;
    }
    x->ev[x->nev++] = (cdp_trace_event){ in->tick, in->op, in->stage, in->worker,
                                         (int32_t)(k0 + in->step), t0, now_s(x) };
}

static void execute(cdp_exec *x, const cdp_instr *in, int64_t k0)
{
    const int l = in->stage;
    const size_t off = l >= 0 ? x->m->stage_off[l] : 0;
    const size_t nb = l >= 0 ? stage_bytes(x, l) : 0;
    switch (in->op) {
    case CDP_OP_FWD: do_fwd(x, in, k0); break;
    case CDP_OP_BWD: do_bwd(x, in, k0); break;
    case CDP_OP_ACC:
        wait_range(x, x->acc + off, nb);
        if (in->flags & CDP_F_FIRST)
            x->be->copy(x->acc + off, x->scratch, nb);
        else
            x->be->add(x->m->stage_n[l], x->acc + off, x->scratch);
        break;
    case CDP_OP_SEND_GRAD:
        post_send(x, x->acc + off, nb, in->peer, cdp_comm_tag(CDP_TAG_GRAD, l));
        break;
    case CDP_OP_RECV_GRAD:
        post_recv(x, x->acc + off, nb, in->peer, cdp_comm_tag(CDP_TAG_GRAD, l));
        break;
    case CDP_OP_FINALIZE:
        finalize(x, off, x->m->stage_n[l]);
        break;
    case CDP_OP_SEND_FULL:
        post_send(x, x->full + off, nb, in->peer, cdp_comm_tag(CDP_TAG_FULL, l));
        break;
    case CDP_OP_RECV_FULL:
        post_recv(x, x->full + off, nb, in->peer, cdp_comm_tag(CDP_TAG_FULL, l));
        break;
    case CDP_OP_ALLREDUCE:
        wait_range(x, x->acc, x->m->nparams * sizeof(float));
        if (!x->mpi_direct) {
            /* stage through the host: the baseline stays comparable on GPUs
             * without CUDA-aware MPI */
            float *h = malloc(x->m->nparams * sizeof(float));
            if (!h) abort();
            x->be->to_host(h, x->acc, x->m->nparams * sizeof(float));
            cdp_comm_allreduce_sum(x->comm, h, x->m->nparams);
            x->be->to_device(x->acc, h, x->m->nparams * sizeof(float));
            free(h);
        } else {
            x->be->sync();
            cdp_comm_allreduce_sum(x->comm, x->acc, x->m->nparams);
        }
        finalize(x, 0, x->m->nparams);
        break;
    case CDP_OP_APPLY: do_apply(x, in, k0); break;
    default:
        fprintf(stderr, "cdp: instruction %s is not supported by this executor\n",
                cdp_opcode_name(in->op));
        abort();
    }
}

static void ensure_ticks(cdp_exec *x, int n)
{
    if (n > x->ntick) {
        free(x->tick_act);
        free(x->tick_bytes);
        x->tick_act = malloc(sizeof(int64_t) * (size_t)n);
        x->tick_bytes = malloc(sizeof(int64_t) * (size_t)n);
        if (!x->tick_act || !x->tick_bytes) abort();
    }
    x->ntick = n;
    memset(x->tick_act, 0, sizeof(int64_t) * (size_t)n);
    memset(x->tick_bytes, 0, sizeof(int64_t) * (size_t)n);
}

void cdp_exec_run(cdp_exec *x, const cdp_schedule *s, int64_t k0)
{
    const cdp_program *p = &s->prog[x->comm->rank];
    ensure_ticks(x, s->nticks + 1);
    x->comm->tick_bytes = x->tick_bytes;
    x->comm->ntick_bytes = x->ntick;
    int cur = 0;
    x->comm->cur_tick = 0;
    cdp_actmem_window(&x->mem);
    for (size_t k = 0; k < p->n; k++) {
        const cdp_instr *in = &p->ins[k];
        if (in->tick != cur) {
            x->tick_act[cur] = cdp_actmem_window(&x->mem);
            for (int t = cur + 1; t < in->tick; t++)
                x->tick_act[t] = x->mem.live;   /* idle ticks hold what is live */
            cur = in->tick;
            x->comm->cur_tick = cur;
        }
        double t0 = x->cfg.trace ? now_s(x) : 0.0;
        execute(x, in, k0);
        if (x->cfg.trace)
            record(x, in, k0, t0);
        progress(x);
    }
    wait_all(x);
    x->tick_act[cur] = cdp_actmem_window(&x->mem);
    for (int t = cur + 1; t < x->ntick; t++)
        x->tick_act[t] = x->mem.live;
    x->comm->tick_bytes = NULL;
    x->be->sync();
}

void cdp_exec_get_params(cdp_exec *x, int64_t v, float *host)
{
    for (int l = 0; l < x->L; l++)
        x->be->to_host(host + x->m->stage_off[l], stage_params(x, l, v), stage_bytes(x, l));
}

void cdp_exec_get_momentum(cdp_exec *x, float *host)
{
    x->be->to_host(host, x->mom, x->m->nparams * sizeof(float));
}

void cdp_exec_set_state(cdp_exec *x, int64_t v, const float *cur, const float *prev,
                        const float *momentum)
{
    const size_t P = x->m->nparams * sizeof(float);
    x->be->to_device(x->param[v & 1], cur, P);
    if (prev)
        x->be->to_device(x->param[(v + 1) & 1], prev, P);
    else
        x->be->copy(x->param[(v + 1) & 1], x->param[v & 1], P);
    x->be->to_device(x->mom, momentum, P);
    for (int l = 0; l < x->L; l++) {
        x->slot_version[(v & 1) * x->L + l] = v;
        x->slot_version[((v + 1) & 1) * x->L + l] = prev ? v - 1 : -1;
        x->updates[l] = v;
    }
}

void cdp_exec_take_train_stats(cdp_exec *x, double *loss_sum, double *correct, int64_t *samples)
{
    double h[2];
    x->be->to_host(h, x->stats, sizeof h);
    x->be->zero(x->stats, sizeof h);
    *loss_sum = h[0];
    *correct = h[1];
    *samples = x->samples;
    x->samples = 0;
}

const int64_t *cdp_exec_tick_act(const cdp_exec *x, int *n) { *n = x->ntick; return x->tick_act; }
const int64_t *cdp_exec_tick_bytes(const cdp_exec *x, int *n) { *n = x->ntick; return x->tick_bytes; }
int64_t cdp_exec_act_peak(const cdp_exec *x) { return x->mem.live_peak; }
int64_t cdp_exec_act_reserved_peak(const cdp_exec *x) { return x->mem.reserved_peak; }

int64_t cdp_exec_model_state_bytes(const cdp_exec *x)
{
    size_t maxstage = 0;
    for (int l = 0; l < x->L; l++)
        if (x->m->stage_n[l] > maxstage) maxstage = x->m->stage_n[l];
    /* two parameter versions, momentum, accumulator, full gradient, scratch */
    return (int64_t)((5 * x->m->nparams + maxstage) * sizeof(float));
}

const cdp_trace_event *cdp_exec_trace(const cdp_exec *x, size_t *n)
{
    *n = x->nev;
    return x->ev;
}
