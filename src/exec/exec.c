/* The executor.  See src/exec/exec.h.
 *
 * Model state of stage l on this rank (all from the `state` allocator, so
 * its peak is measured, not estimated):
 *   param[slot][l]   parameters at version v in slot v & 1 (holders: two
 *                    slots, current and previous, where a worker lags on the
 *                    stage; one slot, updated in place, where none does)
 *   mom[l], full[l]  the optimizer state (momentum; AdamW: exp_avg then
 *                    exp_avg_sq, state_bytes) and the full (summed) gradient (holders; the
 *                    all-reduced block itself under replicated dp; under
 *                    zero, full only from its arrival to the APPLY that
 *                    reads it: ZeRO keeps the resident state minimal)
 *   acc[l]           the running sum of the step in progress, from the first
 *                    contribution on this rank until it leaves the rank
 *   borrowed[l][p]   zero: a stage this rank does not own, for one tick
 *   zeroed[l]        full[l] once its APPLY has cleared it: where this rank
 *                    both finalizes the sum and makes the stage's next first
 *                    contribution (reuse_grad), that first BWD adds to this
 *                    buffer instead of allocating one and having the GEMM
 *                    clear it (beta = 0 is a pass over memory)
 *   scratch          one worker's gradient, from BWD until its ACC; not
 *                    needed (not allocated) where the backend's
 *                    accumulating backward is exact: BWD then adds the
 *                    gradient to acc itself and ACC has nothing left to do
 * Activations (the `act` allocator): the outputs of each (worker, stage),
 * received stage inputs, and gradients travelling between stages.
 *
 * A buffer MPI is reading or writing is waited for before the executor
 * touches it (cdp_req_wait_range), and a buffer that leaves the rank is
 * released only once its sends are done (cdp_req_release_later; both in
 * exec_requests.c), so the order of the instruction list is all the
 * synchronisation there is. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "util/clock.h"
#include "util/grow.h"
#include "exec_internal.h"


static double now_s(const cdp_exec *x)
{
    return cdp_now_s() - x->t_origin;
}

static size_t stage_bytes(const cdp_exec *x, int l)
{
    return x->m->stage_n[l] * sizeof(float);
}

/* the optimizer state of stage l: one buffer of stage_n floats per kind */
static size_t state_bytes(const cdp_exec *x, int l)
{
    return cdp_optim_state_floats(&x->cfg.optim, x->m->stage_n[l]) * sizeof(float);
}

/* One zeroed per-stage array of L entries of size bytes each. */
static void *stage_array(const cdp_exec *x, size_t size)
{
    void *p = calloc((size_t)x->L, size);
    if (!p) abort();
    return p;
}

/* The per-stage arrays, one entry per stage of the model: no fixed
 * maximum here, so every stage count a model can be cut into runs. */
static void stage_arrays_alloc(cdp_exec *x)
{
    x->param[0] = stage_array(x, sizeof *x->param[0]);
    x->param[1] = stage_array(x, sizeof *x->param[1]);
    x->mom = stage_array(x, sizeof *x->mom);
    x->full = stage_array(x, sizeof *x->full);
    x->acc = stage_array(x, sizeof *x->acc);
    x->borrowed = stage_array(x, sizeof *x->borrowed);
    x->borrowed_version = stage_array(x, sizeof *x->borrowed_version);
    x->reuse_grad = stage_array(x, sizeof *x->reuse_grad);
    x->zeroed = stage_array(x, sizeof *x->zeroed);
    x->dead_zeroed = stage_array(x, sizeof *x->dead_zeroed);
    x->slot_version[0] = stage_array(x, sizeof *x->slot_version[0]);
    x->slot_version[1] = stage_array(x, sizeof *x->slot_version[1]);
    x->nslots = stage_array(x, sizeof *x->nslots);
    x->updates = stage_array(x, sizeof *x->updates);
}

static void stage_arrays_free(cdp_exec *x)
{
    free(x->param[0]); free(x->param[1]); free(x->mom); free(x->full); free(x->acc);
    free(x->borrowed); free(x->borrowed_version); free(x->reuse_grad); free(x->zeroed);
    free(x->dead_zeroed); free(x->slot_version[0]); free(x->slot_version[1]); free(x->nslots);
    free(x->updates);
}

cdp_exec *cdp_exec_create(const cdp_exec_config *cfg, const float *init, char *err, size_t errlen)
{
    cdp_exec *x = calloc(1, sizeof *x);
    if (!x) abort();
    static uint64_t executors;   /* each executor's tags of its own (layer_ctx) */
    x->serial = ++executors & 0xffffff;
    x->cfg = *cfg;
    x->m = cfg->model;
    x->be = cfg->be;
    x->comm = cfg->comm;
    x->N = cfg->N;
    x->B = cfg->B;
    x->L = x->m->nstages;
    x->mpi_direct = cdp_backend_mpi_device_ok(x->be);
    x->stage_comm = MPI_COMM_NULL;
    x->t_origin = cdp_now_s();
    if (cdp_batcher_init(&x->batch, cfg->train, x->N, x->B, cfg->seed, cfg->shuffle)) {
        if (cfg->train->n >= (int64_t)x->N * x->B)
            snprintf(err, errlen, "out of memory for the batcher or its decoding threads "
                     "(smaller prefetch= or decoders= of --data folder)");
        else
            snprintf(err, errlen, "the training set has %lld samples, fewer than one step of "
                     "%d workers x %d samples", (long long)cfg->train->n, x->N, x->B);
        free(x);
        return NULL;
    }
    for (int l = 0; l < x->L; l++)
        if (x->m->plan[l].slot_doubles && x->m->workers < x->N) {
            snprintf(err, errlen, "internal error: the model was built for %d workers, not %d",
                     x->m->workers, x->N);
            cdp_batcher_free(&x->batch);
            free(x);
            return NULL;
        }
    stage_arrays_alloc(x);
    const cdp_backend *be = x->be;
    cdp_actmem_init(&x->state, be);
    cdp_actmem_init(&x->mem, be);
    x->holds = calloc((size_t)x->L, 1);
    if (!x->holds) abort();
    x->holds_all = 1;
    int my_stage = -1;
    x->full_transient = cfg->roles->cfg.framework == CDP_FW_ZERO;
    x->send_slack = cfg->roles->cfg.framework == CDP_FW_ZERO ? 0 : 1;
    const cdp_sched_config *rc = &cfg->roles->cfg;
    /* replicated dp with MPI_Allreduce: the reduced block is the full
     * gradient; each stage's APPLY comes before the next step's first
     * backward writes the block again (lag 0), so no copy is needed */
    const int full_in_block = rc->rule == CDP_RULE_DP && !rc->deterministic &&
                              rc->framework == CDP_FW_REPLICATED;
    for (int l = 0; l < x->L; l++) {
        x->holds[l] = (unsigned char)cdp_schedule_holds(cfg->roles, x->comm->rank, l);
        if (x->holds[l] && my_stage < 0) my_stage = l;
    }
    /* every rank's, not this rank's: gather_stages skips its collectives on
     * it, so all ranks must decide alike (a zero owner of the only stage, or
     * a model-parallel rank of a one-stage model, holds everything while
     * the other ranks hold nothing) */
    for (int r = 0; r < x->comm->size; r++)
        for (int l = 0; l < x->L; l++)
            x->holds_all &= cdp_schedule_holds(cfg->roles, r, l) != 0;
    size_t maxstage = 0;
    for (int l = 0; l < x->L; l++) {
        if (x->m->stage_n[l] > maxstage) maxstage = x->m->stage_n[l];
        x->slot_version[0][l] = 0;
        x->slot_version[1][l] = -1;
        x->borrowed_version[l][0] = x->borrowed_version[l][1] = -2;
        if (!x->holds[l]) continue;
        const size_t nb = stage_bytes(x, l);
        x->nslots[l] = 1;
        for (int i = 0; i < x->N; i++)
            if (cdp_lag(x->N, x->L, cfg->roles->cfg.rule, i, l))
                x->nslots[l] = 2;
        x->param[0][l] = cdp_actmem_alloc(&x->state, nb);
        x->param[1][l] = x->nslots[l] == 2 ? cdp_actmem_alloc(&x->state, nb) : x->param[0][l];
        x->mom[l] = cdp_actmem_alloc(&x->state, state_bytes(x, l));
        if (!x->full_transient && !full_in_block)
            x->full[l] = cdp_actmem_alloc(&x->state, nb);
        be->to_device(x->param[0][l], init + x->m->stage_off[l], nb);
        if (x->nslots[l] == 2)
            be->copy(x->param[1][l], x->param[0][l], nb);
        be->zero(x->mom[l], state_bytes(x, l));
    }
    if (rc->rule == CDP_RULE_DP && !rc->deterministic) {
        if (full_in_block) {
            x->acc_block = cdp_actmem_alloc(&x->state, x->m->nparams * sizeof(float));
            for (int l = 0; l < x->L; l++)
                x->full[l] = x->acc[l] = x->acc_block + x->m->stage_off[l];
        } else if (rc->framework == CDP_FW_MODEL_PARALLEL) {
            /* outside the training loop: the ranks of each stage */
            MPI_Comm_split(x->comm->comm, my_stage < 0 ? MPI_UNDEFINED : my_stage,
                           x->comm->rank, &x->stage_comm);
            if (x->stage_comm != MPI_COMM_NULL)
                MPI_Comm_size(x->stage_comm, &x->stage_comm_size);
        }
    }
    x->acc_in_place = cdp_model_accumulate_exact(be, x->m, x->B);
    for (int l = 0; l < x->L; l++)
        x->reuse_grad[l] = x->acc_in_place && x->holds[l] && !x->full_transient &&
                           (x->acc_block || cdp_schedule_sum_is_local(cfg->roles, x->comm->rank, l));
    x->scratch_bytes = maxstage * sizeof(float);
    if (!x->acc_in_place)
        x->scratch = cdp_actmem_alloc(&x->state, x->scratch_bytes);
    /* the backward's workspace is scratch like a BLAS workspace: not counted */
    x->ws = be->alloc(cdp_model_ws_floats(be, x->m, x->B) * sizeof(float) + 64);
    x->input_ws = be->alloc((size_t)x->B * cdp_model_in(x->m) * sizeof(float) + 64);
    x->input_step = -1;
    x->bad_step = -1;
    x->stats = be->alloc(2 * sizeof(double));
    x->check = be->alloc(2 * sizeof(uint64_t));
    if (!x->stats || !x->check || !x->ws || !x->input_ws) abort();
    be->zero(x->stats, 2 * sizeof(double));
    const size_t NL = (size_t)x->N * x->L;
    x->act = calloc(NL, sizeof *x->act);
    x->dact = calloc(NL, sizeof *x->dact);
    x->in_act = calloc(NL, sizeof *x->in_act);
    x->x = calloc((size_t)x->N, sizeof *x->x);
    x->labels = calloc((size_t)x->N, sizeof *x->labels);
    x->act_bytes = calloc((size_t)x->L, sizeof *x->act_bytes);
    x->host_pixels = malloc((size_t)x->B * cfg->train->dim);
    x->host_labels = malloc((size_t)x->B * sizeof(int32_t));
    if (!x->act || !x->dact || !x->in_act || !x->x || !x->labels || !x->act_bytes ||
        !x->host_pixels || !x->host_labels)
        abort();
    for (int l = 0; l < x->L; l++)
        x->act_bytes[l] = cdp_stage_act_floats(x->m, l, x->B) * sizeof(float);
    return x;
}

void cdp_exec_destroy(cdp_exec *x)
{
    if (!x) return;
    cdp_req_wait_all(x);
    for (int l = 0; l < x->L; l++) {
        if (x->holds[l]) {
            const size_t nb = stage_bytes(x, l);
            cdp_actmem_free(&x->state, x->param[0][l], nb);
            if (x->nslots[l] == 2)
                cdp_actmem_free(&x->state, x->param[1][l], nb);
            cdp_actmem_free(&x->state, x->mom[l], state_bytes(x, l));
            if (!x->acc_block)
                cdp_actmem_free(&x->state, x->full[l], nb);
        }
    }
    if (x->acc_block) cdp_actmem_free(&x->state, x->acc_block, x->m->nparams * sizeof(float));
    cdp_actmem_free(&x->state, x->scratch, x->scratch_bytes);   /* NULL: nothing */
    for (size_t k = 0; k < x->nstaging; k++) {
        if (x->be->free_host) x->be->free_host(x->staging[k].p);
        else free(x->staging[k].p);
    }
    free(x->staging);
    cdp_actmem_destroy(&x->mem);   /* after a drained run nothing else is live */
    cdp_actmem_destroy(&x->state);
    x->be->free(x->stats);
    x->be->free(x->check);
    if (x->ring_tmp) x->be->free(x->ring_tmp);
    x->be->free(x->ws);
    x->be->free(x->input_ws);
    if (x->stage_comm != MPI_COMM_NULL) MPI_Comm_free(&x->stage_comm);
    free(x->holds);
    stage_arrays_free(x);
    free(x->act); free(x->dact); free(x->in_act); free(x->x); free(x->labels); free(x->act_bytes);
    free(x->host_pixels); free(x->host_labels);
    free(x->pend); free(x->defer); free(x->tick_act); free(x->tick_bytes); free(x->ev);
    free(x->fwdq); free(x->forward_of); free(x->recv_of);
    cdp_batcher_free(&x->batch);
    free(x);
}

/* ------------------------------------------------------------ helpers */

static int64_t abs_version(int64_t k0, int32_t rel)
{
    int64_t v = k0 + rel;
    return v < 0 ? 0 : v;
}

/* Parameters of stage l at version v: held, or borrowed for this tick. */
static const float *stage_params(cdp_exec *x, int l, int64_t v)
{
    if (x->holds[l]) {
        int s = x->nslots[l] == 2 ? (int)(v & 1) : 0;
        if (x->slot_version[s][l] != v) {
            fprintf(stderr, "cdp: internal error: stage %d needs version %lld, slot holds %lld\n",
                    l, (long long)v, (long long)x->slot_version[s][l]);
            abort();
        }
        return x->param[s][l];
    }
    float *b = x->borrowed[l][v & 1];
    if (!b || x->borrowed_version[l][v & 1] != v) {
        fprintf(stderr, "cdp: internal error: stage %d version %lld was not received\n",
                l, (long long)v);
        abort();
    }
    cdp_req_wait_range(x, b, stage_bytes(x, l));
    return b;
}

/* The input micro-batch is data, not an activation: it is converted from
 * the (4x smaller) bytes of the data set into the input workspace when
 * stage 0 needs it, in its forward and again in its backward, instead of
 * being held in between.  Like the backward's workspace it lives only
 * inside one instruction, so one buffer serves every worker.  When no other
 * worker's forward came in between (N = 1, or the last worker under dp), the
 * backward finds its input still there. */
static void load_input(cdp_exec *x, int64_t k, int i)
{
    const cdp_dataset *d = x->batch.d;
    x->x[i] = x->input_ws;
    if (x->input_step == k && x->input_worker == i)
        return;
    x->input_step = k;
    x->input_worker = i;
    cdp_batcher_gather(&x->batch, k, i, x->host_pixels, NULL);
    x->be->pixels_to_input(x->B, d->channels, d->height * d->width, x->host_pixels, d->norm, x->x[i]);
}

static void drop_input(cdp_exec *x, int i)
{
    x->x[i] = NULL;
}

static size_t in_bytes(const cdp_exec *x, int l) { return (size_t)x->B * cdp_stage_in(x->m, l) * sizeof(float); }
static size_t out_bytes(const cdp_exec *x, int l) { return (size_t)x->B * cdp_stage_out(x->m, l) * sizeof(float); }
/* the stage's input and output activations as stored (bfloat16 under
 * --precision bf16): what travels between ranks; the gradients above stay
 * float32 */
static size_t act_in_bytes(const cdp_exec *x, int l)
{
    return (size_t)x->B * cdp_stage_in_stored(x->m, l) * sizeof(float);
}
static size_t act_out_bytes(const cdp_exec *x, int l)
{
    return (size_t)x->B * cdp_stage_out_stored(x->m, l) * sizeof(float);
}

/* Input of stage l for worker i: received, or the previous stage's output. */
static const float *stage_input(cdp_exec *x, int i, int l)
{
    const int L = x->L;
    if (l == 0)
        return x->x[i];
    if (x->in_act[i * L + l]) {
        cdp_req_wait_range(x, x->in_act[i * L + l], act_in_bytes(x, l));
        return x->in_act[i * L + l];
    }
    return cdp_stage_output(x->m, l - 1, x->B, x->act[i * L + l - 1]);
}

/* where worker i's forward and backward of step k stand (nn.h); the
 * batcher holds the run's seed */
static cdp_layer_ctx layer_ctx(const cdp_exec *x, int64_t k, int i, int64_t version)
{
    /* the parameters' tag: this executor and the version (v + 1 < 2^40) */
    const uint64_t tag = x->serial << 40 | ((uint64_t)(version + 1) & ((1ull << 40) - 1));
    return (cdp_layer_ctx){ x->batch.seed, k, (int64_t)i * x->B, tag };
}

static void do_fwd(cdp_exec *x, const cdp_instr *in, int64_t k0)
{
    const int i = in->worker, l = in->stage, L = x->L, B = x->B;
    const int64_t k = k0 + in->step;
    const int64_t v = abs_version(k0, in->version);
    const float *w = stage_params(x, l, v);
    if (l == 0)
        load_input(x, k, i);
    int32_t *labels = NULL;
    if (l == L - 1) {
        x->labels[i] = cdp_actmem_alloc(&x->mem, (size_t)B * sizeof(int32_t));
        cdp_batcher_gather(&x->batch, k, i, NULL, x->host_labels);
        x->be->to_device(x->labels[i], x->host_labels, (size_t)B * sizeof(int32_t));
        labels = x->labels[i];
        x->samples += B;
    }
    const float *input = stage_input(x, i, l);
    x->act[i * L + l] = cdp_actmem_alloc(&x->mem, x->act_bytes[l]);
    const cdp_layer_ctx ctx = layer_ctx(x, k, i, v);
    cdp_stage_fwd(x->be, x->m, l, B, w, input, x->act[i * L + l], labels, x->stats, x->ws, 1,
                  &ctx);
    /* the loss sum stays non-finite once it is: the first forward that
     * made it so names where a run diverged (a read of host memory; on a
     * GPU it would cost a synchronisation per forward, so only the segment
     * is known there) */
    if (l == L - 1 && x->bad_step < 0 && x->be->host_memory && !isfinite(x->stats[0])) {
        x->bad_step = k;
        x->bad_worker = i;
    }
    if (l == 0)
        drop_input(x, i);
}

static float *acquire_acc(cdp_exec *x, int l)
{
    if (!x->acc[l])
        x->acc[l] = cdp_actmem_alloc(&x->state, stage_bytes(x, l));
    return x->acc[l];
}

static void do_bwd(cdp_exec *x, const cdp_instr *in, int64_t k0)
{
    const int i = in->worker, l = in->stage, L = x->L, B = x->B;
    const int64_t v = abs_version(k0, in->version);
    const float *w = stage_params(x, l, v);
    if (l == 0)
        load_input(x, k0 + in->step, i);
    const float *input = stage_input(x, i, l);
    float *dx = NULL;
    if (l > 0)
        dx = x->dact[i * L + l - 1] = cdp_actmem_alloc(&x->mem, in_bytes(x, l));
    const float *dout = NULL;
    if (l < L - 1) {
        dout = x->dact[i * L + l];
        cdp_req_wait_range(x, dout, out_bytes(x, l));
    }
    /* a first contribution starts the sum in acc; later ones are added to
     * it in place when that is exact, else go through scratch and ACC */
    const int first = (in->flags & CDP_F_FIRST) != 0;
    int onto_zero = 0;
    if (first && x->zeroed[l]) {
        if (x->acc[l] == x->zeroed[l]) {            /* the all-reduce block's slice */
            onto_zero = 1;
        } else if (!x->acc[l] && x->full[l] == x->zeroed[l] &&
                   !cdp_req_busy(x, x->full[l], stage_bytes(x, l))) {
            x->acc[l] = x->full[l];
            x->full[l] = NULL;
            onto_zero = 1;
        }
    }
    if (first)
        x->zeroed[l] = NULL;
    float *grad = first || x->acc_in_place ? acquire_acc(x, l) : x->scratch;
    cdp_req_wait_range(x, grad, stage_bytes(x, l));
    const cdp_layer_ctx ctx = layer_ctx(x, k0 + in->step, i, v);
    cdp_stage_bwd(x->be, x->m, l, B, i, w, input, x->act[i * L + l], dout, dx, grad, x->ws,
                  (!first && x->acc_in_place) || onto_zero, &ctx);
    /* the previous stage's output was this stage's input: if its own
     * backward does not read it, nothing does any more */
    if (l > 0 && !x->in_act[i * L + l] && !cdp_stage_bwd_reads_act(x->m, l - 1)) {
        cdp_req_release_now(x, &x->mem, x->act[i * L + l - 1], x->act_bytes[l - 1]);
        x->act[i * L + l - 1] = NULL;
    }
    if (x->act[i * L + l]) {
        cdp_req_release_now(x, &x->mem, x->act[i * L + l], x->act_bytes[l]);
        x->act[i * L + l] = NULL;
    }
    if (l < L - 1) {
        cdp_actmem_free(&x->mem, x->dact[i * L + l], out_bytes(x, l));
        x->dact[i * L + l] = NULL;
    }
    if (x->in_act[i * L + l]) {
        cdp_actmem_free(&x->mem, x->in_act[i * L + l], act_in_bytes(x, l));
        x->in_act[i * L + l] = NULL;
    }
    if (l == 0)
        drop_input(x, i);
    if (l == L - 1) {
        cdp_actmem_free(&x->mem, x->labels[i], (size_t)B * sizeof(int32_t));
        x->labels[i] = NULL;
    }
}


static void drop_acc(cdp_exec *x, int l)
{
    if (x->acc_block) return;      /* the all-reduce block stays */
    cdp_req_release_now(x, &x->state, x->acc[l], stage_bytes(x, l));
    x->acc[l] = NULL;
}

/* full[l] = acc[l], the sum in worker order.  The "then multiply by 1/N" of
 * doc/reference.md section 3.2 happens in the SGD kernel (gscale, same bits), which
 * saves a pass over the gradient. */
static void finalize(cdp_exec *x, int l)
{
    const size_t nb = stage_bytes(x, l);
    if (x->full[l])
        cdp_req_wait_range(x, x->full[l], nb);
    if (x->acc_block)     /* full[l] is the block's slice already */
        return;
    /* the sum's buffer becomes the full gradient; the old full-gradient
     * buffer goes back to the allocator */
    float *old = x->full[l];
    x->full[l] = x->acc[l];
    x->acc[l] = NULL;
    if (old)
        cdp_actmem_free(&x->state, old, nb);
}

static void do_apply(cdp_exec *x, const cdp_instr *in, int64_t k0)
{
    const int l = in->stage;
    const int64_t v = k0 + in->version;       /* version produced */
    const size_t n = x->m->stage_n[l];
    cdp_req_wait_range(x, x->full[l], n * sizeof(float));
    const float *src = stage_params(x, l, v - 1);
    const int slot = x->nslots[l] == 2 ? (int)(v & 1) : 0;   /* one slot: in place */
    float *dst = x->param[slot][l];
    float *g = x->full[l];
    /* Two slots: the new version is written over the gradient it is made
     * from (each element is read before it is written), and the buffer of
     * the dead version v-2 becomes the next full-gradient buffer.  Writing
     * into the dead version instead would first read it from memory for
     * nothing (write-allocate): one more stream of the update's traffic.
     * Not while MPI still reads the gradient, nor with the all-reduce block,
     * nor where the gradient is cleared for the next first backward
     * (reuse_grad): clearing it in the cache lines the update reads anyway
     * saves more than the write-allocate costs (bench/RESULTS.md). */
    const int dead_clear = x->dead_zeroed[l] == dst;
    x->dead_zeroed[l] = NULL;
    const int g_busy = cdp_req_busy(x, g, n * sizeof(float));
    const int swap = x->nslots[l] == 2 && !x->acc_block && (!x->reuse_grad[l] || dead_clear) && !g_busy;
    if (!swap)
        cdp_req_wait_range(x, dst, n * sizeof(float));    /* sends of the version it overwrites */
    /* g is dead once read: clear it on the way for the stage's next first
     * backward (the same bits as beta = 0 where sgemm adds exactly, which
     * acc_in_place has probed) */
    const int zero_g = x->reuse_grad[l] && !swap && dst != g && !g_busy;
    /* update c = v - 1: the lr, and AdamW's bias corrections, of that index */
    const cdp_optim_step st = cdp_optim_step_at(&x->cfg.optim, v - 1);
    cdp_stage_update(x->be, x->m, l, x->B, src, swap ? g : dst, g, 1.0f / (float)x->N, x->mom[l],
                     &st, zero_g, x->ws);
    x->zeroed[l] = zero_g ? g : NULL;
    if (swap) {
        x->param[slot][l] = g;
        x->full[l] = dst;   /* MPI may still read v-2 from it (zero): every reuse waits */
        if (dead_clear)
            x->zeroed[l] = dst;
    }
    x->updates[l]++;
    x->slot_version[slot][l] = v;
    if (x->full_transient) {
        cdp_req_release_now(x, &x->state, x->full[l], n * sizeof(float));
        x->full[l] = NULL;
    }
}

/* After the last read of a version kept in two slots (CDP_F_LAST_USE), its
 * slot is dead until the APPLY of version + 2 writes it: where that APPLY's
 * gradient is to be cleared for the next first backward (reuse_grad), clear
 * the dead slot now, while the read has left it in the cache, and let the
 * APPLY write the new version over the gradient and hand the cleared slot to
 * the backward: no write-allocate read of the slot and no clearing pass. */
static void retire(cdp_exec *x, const cdp_instr *in, int64_t k0)
{
    const int l = in->stage;
    const int64_t u = k0 + in->version;
    if (!(in->flags & CDP_F_LAST_USE) || !x->reuse_grad[l] || x->nslots[l] != 2 || u < 0)
        return;   /* (the all-reduce block is dp's: one slot) */
    const int slot = (int)(u & 1);
    float *p = x->param[slot][l];
    if (x->slot_version[slot][l] != u || cdp_req_busy(x, p, stage_bytes(x, l)))
        return;
    x->be->zero(p, stage_bytes(x, l));
    x->dead_zeroed[l] = p;
}

static float *borrow(cdp_exec *x, int l, int64_t v)
{
    float **b = &x->borrowed[l][v & 1];
    if (!*b)
        *b = cdp_actmem_alloc(&x->state, stage_bytes(x, l));
    x->borrowed_version[l][v & 1] = v;
    return *b;
}

static void record(cdp_exec *x, const cdp_instr *in, int64_t k0, double t0)
{
    CDP_GROW(x->ev, x->nev, x->capev, 4096);
    x->ev[x->nev++] = (cdp_trace_event){ in->tick, in->op, in->stage, in->worker,
                                         (int32_t)(k0 + in->step), t0, now_s(x) };
}

/* ------------------------------------------------------------ instructions
 * One handler per opcode (sched/schedule.h says what each does). */

typedef void (*op_handler)(cdp_exec *x, const cdp_instr *in, int64_t k0);

static size_t nbytes(const cdp_exec *x, const cdp_instr *in)
{
    return in->stage >= 0 ? stage_bytes(x, in->stage) : 0;
}

static void op_fwd(cdp_exec *x, const cdp_instr *in, int64_t k0)
{
    do_fwd(x, in, k0);
    retire(x, in, k0);
}

static void op_bwd(cdp_exec *x, const cdp_instr *in, int64_t k0)
{
    do_bwd(x, in, k0);
    retire(x, in, k0);
}

static void op_acc(cdp_exec *x, const cdp_instr *in, int64_t k0)
{
    (void)k0;
    const int l = in->stage;
    if (!(in->flags & CDP_F_FIRST) && !x->acc_in_place) {   /* else BWD wrote acc */
        cdp_req_wait_range(x, x->acc[l], nbytes(x, in));
        x->be->add(x->m->stage_n[l], x->acc[l], x->scratch);
    }
}

static void op_send_grad(cdp_exec *x, const cdp_instr *in, int64_t k0)
{
    (void)k0;
    const int l = in->stage;
    cdp_req_post_send(x, x->acc[l], nbytes(x, in), in->peer, cdp_comm_tag(CDP_TAG_GRAD, l), in->due);
    cdp_req_release_later(x, &x->state, x->acc[l], nbytes(x, in));
    x->acc[l] = NULL;
}

static void op_recv_grad(cdp_exec *x, const cdp_instr *in, int64_t k0)
{
    (void)k0;
    const int l = in->stage;
    cdp_req_post_recv(x, acquire_acc(x, l), nbytes(x, in), in->peer, cdp_comm_tag(CDP_TAG_GRAD, l));
}

static void op_finalize(cdp_exec *x, const cdp_instr *in, int64_t k0)
{
    (void)k0;
    finalize(x, in->stage);
}

static void op_send_full(cdp_exec *x, const cdp_instr *in, int64_t k0)
{
    (void)k0;
    if (x->recv_of[in - x->prog] != SIZE_MAX)   /* posted by its receive (find_forwards) */
        return;
    const int l = in->stage;
    cdp_req_post_send(x, x->full[l], nbytes(x, in), in->peer, cdp_comm_tag(CDP_TAG_FULL, l), in->due);
    if ((in->flags & CDP_F_LAST) && !x->holds[l]) {
        cdp_req_release_later(x, &x->state, x->full[l], nbytes(x, in));
        x->full[l] = NULL;
    }
}

static void op_recv_full(cdp_exec *x, const cdp_instr *in, int64_t k0)
{
    (void)k0;
    const int l = in->stage;
    /* a full sum still being passed on keeps its buffer until sent */
    if (x->full[l] && cdp_req_busy(x, x->full[l], nbytes(x, in))) {
        cdp_req_release_later(x, &x->state, x->full[l], nbytes(x, in));
        x->full[l] = NULL;
    }
    if (!x->full[l])
        x->full[l] = cdp_actmem_alloc(&x->state, nbytes(x, in));
    cdp_req_post_recv_forward(x, x->full[l], nbytes(x, in), in->peer, cdp_comm_tag(CDP_TAG_FULL, l),
                              x->forward_of[in - x->prog]);
}

static void op_allreduce(cdp_exec *x, const cdp_instr *in, int64_t k0)
{
    (void)k0;
    const int l = in->stage;
    if (l < 0) {   /* replicated: the whole gradient in one call */
        cdp_req_wait_range(x, x->acc_block, x->m->nparams * sizeof(float));
        cdp_req_collective(x, COLL_ALLREDUCE, x->acc_block, x->m->nparams, 0);
        for (int s = 0; s < x->L; s++)
            finalize(x, s);
    } else {       /* model-parallel: the copies of stage l */
        cdp_req_collective(x, COLL_ALLREDUCE_STAGE, x->acc[l], x->m->stage_n[l], 0);
        finalize(x, l);
    }
}

static void op_reduce_grad(cdp_exec *x, const cdp_instr *in, int64_t k0)
{
    (void)k0;
    const int l = in->stage;
    cdp_req_collective(x, COLL_REDUCE, x->acc[l], x->m->stage_n[l], in->peer);
    if (x->comm->rank == in->peer)
        finalize(x, l);
    else
        drop_acc(x, l);
}

static void op_send_act(cdp_exec *x, const cdp_instr *in, int64_t k0)
{
    (void)k0;
    const int l = in->stage, i = in->worker;
    cdp_req_post_send(x, cdp_stage_output(x->m, l, x->B, x->act[i * x->L + l]), act_out_bytes(x, l),
                      in->peer, cdp_comm_tag(CDP_TAG_ACT, l), in->due);
}

static void op_recv_act(cdp_exec *x, const cdp_instr *in, int64_t k0)
{
    (void)k0;
    const int l = in->stage, i = in->worker;
    float **a = &x->in_act[i * x->L + l];
    *a = cdp_actmem_alloc(&x->mem, act_in_bytes(x, l));
    cdp_req_post_recv(x, *a, act_in_bytes(x, l), in->peer, cdp_comm_tag(CDP_TAG_ACT, l - 1));
}

static void op_send_dact(cdp_exec *x, const cdp_instr *in, int64_t k0)
{
    (void)k0;
    const int l = in->stage, i = in->worker;
    float **d = &x->dact[i * x->L + l - 1];
    cdp_req_post_send(x, *d, in_bytes(x, l), in->peer, cdp_comm_tag(CDP_TAG_DACT, l - 1), in->due);
    cdp_req_release_later(x, &x->mem, *d, in_bytes(x, l));
    *d = NULL;
}

static void op_recv_dact(cdp_exec *x, const cdp_instr *in, int64_t k0)
{
    (void)k0;
    const int l = in->stage, i = in->worker;
    float **d = &x->dact[i * x->L + l];
    *d = cdp_actmem_alloc(&x->mem, out_bytes(x, l));
    cdp_req_post_recv(x, *d, out_bytes(x, l), in->peer, cdp_comm_tag(CDP_TAG_DACT, l));
}

static int params_tag(int l, int64_t v)
{
    return cdp_comm_tag(CDP_TAG_PARAMS, 2 * l + (int)(v & 1));
}

static void op_send_params(cdp_exec *x, const cdp_instr *in, int64_t k0)
{
    const int l = in->stage;
    const int64_t v = abs_version(k0, in->version);
    cdp_req_post_send(x, stage_params(x, l, v), nbytes(x, in), in->peer, params_tag(l, v), in->due);
}

static void op_recv_params(cdp_exec *x, const cdp_instr *in, int64_t k0)
{
    const int l = in->stage;
    const int64_t v = abs_version(k0, in->version);
    cdp_req_post_recv(x, borrow(x, l, v), nbytes(x, in), in->peer, params_tag(l, v));
}

static void op_bcast_params(cdp_exec *x, const cdp_instr *in, int64_t k0)
{
    const int l = in->stage;
    const int64_t v = abs_version(k0, in->version);
    float *p = x->holds[l] ? (float *)stage_params(x, l, v) : borrow(x, l, v);
    cdp_req_collective(x, COLL_BCAST, p, x->m->stage_n[l], in->peer);
}

static void op_drop_params(cdp_exec *x, const cdp_instr *in, int64_t k0)
{
    const int l = in->stage;
    const int64_t v = abs_version(k0, in->version);
    float **b = &x->borrowed[l][v & 1];
    cdp_req_release_now(x, &x->state, *b, nbytes(x, in));
    *b = NULL;
    x->borrowed_version[l][v & 1] = -2;
}

/* moves_full: writes or moves a full gradient, so the stage's gradient
 * buffer (all stages' for a stage of -1) forgets that it was clear */
static const struct {
    op_handler run;
    int moves_full;
} handlers[CDP_OP_COUNT] = {
    [CDP_OP_FWD] = { op_fwd, 0 },
    [CDP_OP_BWD] = { op_bwd, 0 },
    [CDP_OP_ACC] = { op_acc, 0 },
    [CDP_OP_SEND_GRAD] = { op_send_grad, 0 },
    [CDP_OP_RECV_GRAD] = { op_recv_grad, 0 },
    [CDP_OP_FINALIZE] = { op_finalize, 1 },
    [CDP_OP_SEND_FULL] = { op_send_full, 1 },
    [CDP_OP_RECV_FULL] = { op_recv_full, 1 },
    [CDP_OP_ALLREDUCE] = { op_allreduce, 1 },
    [CDP_OP_APPLY] = { do_apply, 0 },
    [CDP_OP_SEND_ACT] = { op_send_act, 0 },
    [CDP_OP_RECV_ACT] = { op_recv_act, 0 },
    [CDP_OP_SEND_DACT] = { op_send_dact, 0 },
    [CDP_OP_RECV_DACT] = { op_recv_dact, 0 },
    [CDP_OP_SEND_PARAMS] = { op_send_params, 0 },
    [CDP_OP_RECV_PARAMS] = { op_recv_params, 0 },
    [CDP_OP_BCAST_PARAMS] = { op_bcast_params, 0 },
    [CDP_OP_REDUCE_GRAD] = { op_reduce_grad, 1 },
    [CDP_OP_DROP_PARAMS] = { op_drop_params, 0 },
};

static void execute(cdp_exec *x, const cdp_instr *in, int64_t k0)
{
    if (in->op >= CDP_OP_COUNT || !handlers[in->op].run) {
        fprintf(stderr, "cdp: instruction %s is not supported by this executor\n",
                cdp_opcode_name(in->op));
        abort();
    }
    if (handlers[in->op].moves_full) {
        const int l = in->stage;
        for (int s = l < 0 ? 0 : l; s < (l < 0 ? x->L : l + 1); s++)
            x->zeroed[s] = NULL;
    }
    handlers[in->op].run(x, in, k0);
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

/* The SEND_FULLs that pass on a full sum this rank received (a RECV_FULL
 * of the same stage and step before them): the receive posts them as soon
 * as the sum has arrived, so that the next holder does not wait for this
 * rank to reach its own update's tick; the instruction itself is then
 * only its place in the schedule. */
static void find_forwards(cdp_exec *x, const cdp_program *p)
{
    if (x->cap_forward < p->n) {
        free(x->forward_of);
        free(x->recv_of);
        x->forward_of = malloc(sizeof *x->forward_of * p->n);
        x->recv_of = malloc(sizeof *x->recv_of * p->n);
        if (!x->forward_of || !x->recv_of) abort();
        x->cap_forward = p->n;
    }
    cdp_program_forwards(p, x->L, x->recv_of);
    for (size_t k = 0; k < p->n; k++) x->forward_of[k] = NULL;
    for (size_t k = 0; k < p->n; k++)
        if (x->recv_of[k] != SIZE_MAX)
            x->forward_of[x->recv_of[k]] = &p->ins[k];
}

void cdp_exec_run(cdp_exec *x, const cdp_schedule *s, int64_t k0)
{
    const cdp_program *p = &s->prog[x->comm->rank];
    find_forwards(x, p);
    x->prog = p->ins;
    x->k0 = k0;
    ensure_ticks(x, s->nticks + 1);
    x->seg_ticks = s->nticks;
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
            cdp_req_wait_due(x, cur);
            cdp_req_progress(x);
        }
        double t0 = x->cfg.trace ? now_s(x) : 0.0;
        x->cur = (cdp_comm_what){ cdp_opcode_name(in->op), in->peer, in->stage, in->worker,
                                  k0 + in->step, in->tick };
        execute(x, in, k0);
        if (x->cfg.trace)
            record(x, in, k0, t0);
        cdp_req_progress(x);
    }
    cdp_req_wait_all(x);
    x->tick_act[cur] = cdp_actmem_window(&x->mem);
    for (int t = cur + 1; t < x->ntick; t++)
        x->tick_act[t] = x->mem.live;
    x->comm->tick_bytes = NULL;
    x->be->sync();
}

/* Stage l's parameters of version v as the drained state reads them: a
 * stage no worker lags on keeps only its latest version, which then also
 * stands for the previous one (nobody reads it). */
static const float *drained_params(cdp_exec *x, int l, int64_t v)
{
    int64_t w = x->nslots[l] == 1 && v == x->slot_version[0][l] - 1 ? v + 1 : v;
    return stage_params(x, l, w);
}

void cdp_exec_get_params(cdp_exec *x, int64_t v, float *host)
{
    for (int l = 0; l < x->L; l++)
        if (x->holds[l])
            x->be->to_host(host + x->m->stage_off[l], drained_params(x, l, v), stage_bytes(x, l));
}

int cdp_exec_check_state(cdp_exec *x, int64_t v, size_t *first)
{
    const int nbuf = cdp_optim_state_buffers(&x->cfg.optim);
    int code = 0;
    *first = x->m->nparams;
    for (int l = 0; l < x->L; l++) {
        if (!x->holds[l]) continue;
        const size_t n = x->m->stage_n[l];
        const float *arr[3] = { drained_params(x, l, v), drained_params(x, l, v > 0 ? v - 1 : 0),
                                x->mom[l] };
        for (int j = 0; j < 3; j++) {
            uint64_t out[2];
            x->be->nonfinite(j < 2 ? n : (size_t)nbuf * n, arr[j], n ? n : 1, x->check);
            x->be->to_host(out, x->check, sizeof out);
            if ((int)out[0] > code) code = (int)out[0];
            if (out[0] && x->m->stage_off[l] + out[1] < *first)
                *first = x->m->stage_off[l] + out[1];
        }
    }
    return code;
}

/* Each stage's slice of the nh arrays host[j] (laid out as the parameters,
 * filled where this rank holds the stage) onto root, from the lowest rank
 * holding the stage: every holder of a stage has the same bits. */
static void gather_stages(cdp_exec *x, float *const *host, int nh, int root)
{
    if (x->holds_all)
        return;   /* every rank has everything (the same on every rank) */
    /* waited for under the watchdog: a checkpoint is gathered mid-run,
     * where a lost rank must be named, not waited for */
    cdp_comm *c = x->comm;
    for (int l = 0; l < x->L; l++) {
        int h = x->holds[l] ? c->rank : c->size, lowest;
        cdp_comm_allreduce_watched(c, &h, &lowest, 1, MPI_INT, MPI_MIN, "GATHER_STATE", -1);
        if (lowest == root) continue;
        int n = (int)x->m->stage_n[l];
        for (int j = 0; j < nh; j++) {
            float *dst = host[j] + x->m->stage_off[l];
            MPI_Request r = MPI_REQUEST_NULL;
            if (c->rank == lowest)
                MPI_Isend(dst, n, MPI_FLOAT, root, CDP_TAG_STATS, c->comm, &r);
            else if (c->rank == root)
                MPI_Irecv(dst, n, MPI_FLOAT, lowest, CDP_TAG_STATS, c->comm, &r);
            c->what = (cdp_comm_what){ "GATHER_STATE", c->rank == root ? lowest : root, l, -1,
                                       -1, -1 };
            if (r != MPI_REQUEST_NULL)
                cdp_comm_wait(c, &r);
        }
    }
}

void cdp_exec_gather_params(cdp_exec *x, int64_t v, float *host, int root)
{
    cdp_exec_get_params(x, v, host);
    gather_stages(x, &host, 1, root);
}

void cdp_exec_gather_state(cdp_exec *x, int64_t v, float *cur, float *prev, float *state,
                           int root)
{
    cdp_exec_get_params(x, v, cur);
    cdp_exec_get_params(x, v > 0 ? v - 1 : 0, prev);
    cdp_exec_get_optim_state(x, state);
    const int nbuf = cdp_optim_state_buffers(&x->cfg.optim);
    float *host[4] = { cur, prev };   /* nbuf: 1 or 2 */
    int nh = 2;
    for (int j = 0; j < nbuf && nh < 4; j++)
        host[nh++] = state + (size_t)j * x->m->nparams;
    gather_stages(x, host, nh, root);
}

void cdp_exec_get_optim_state(cdp_exec *x, float *host)
{
    const int nbuf = cdp_optim_state_buffers(&x->cfg.optim);
    for (int l = 0; l < x->L; l++)
        for (int j = 0; x->holds[l] && j < nbuf; j++)
            x->be->to_host(host + (size_t)j * x->m->nparams + x->m->stage_off[l],
                           x->mom[l] + (size_t)j * x->m->stage_n[l], stage_bytes(x, l));
}

int cdp_exec_holds_all(const cdp_exec *x)
{
    return x->holds_all;
}

void cdp_exec_set_state(cdp_exec *x, int64_t v, const float *cur, const float *prev,
                        const float *state)
{
    const int nbuf = cdp_optim_state_buffers(&x->cfg.optim);
    for (int l = 0; l < x->L; l++) {
        x->zeroed[l] = x->dead_zeroed[l] = NULL;   /* the slots are written below */
        if (!x->holds[l]) continue;
        const size_t off = x->m->stage_off[l], nb = stage_bytes(x, l);
        if (x->nslots[l] == 2) {
            x->be->to_device(x->param[v & 1][l], cur + off, nb);
            x->be->to_device(x->param[(v + 1) & 1][l], (prev ? prev : cur) + off, nb);
            x->slot_version[v & 1][l] = v;
            x->slot_version[(v + 1) & 1][l] = prev ? v - 1 : -1;
        } else {
            x->be->to_device(x->param[0][l], cur + off, nb);
            x->slot_version[0][l] = v;
        }
        for (int j = 0; j < nbuf; j++)
            x->be->to_device(x->mom[l] + (size_t)j * x->m->stage_n[l],
                             state + (size_t)j * x->m->nparams + off, nb);
        x->updates[l] = v;
    }
}

int cdp_exec_first_bad_loss(const cdp_exec *x, int64_t *step, int *worker)
{
    if (x->bad_step < 0)
        return 0;
    *step = x->bad_step;
    *worker = x->bad_worker;
    return 1;
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

/* the segment's ticks and its drain, where the last updates pass full
 * sums on (--plan counts the same ticks) */
const int64_t *cdp_exec_tick_act(const cdp_exec *x, int *n) { *n = x->seg_ticks + 1; return x->tick_act; }
const int64_t *cdp_exec_tick_bytes(const cdp_exec *x, int *n) { *n = x->seg_ticks + 1; return x->tick_bytes; }
int64_t cdp_exec_act_peak(const cdp_exec *x) { return x->mem.live_peak; }
int64_t cdp_exec_act_reserved_peak(const cdp_exec *x) { return x->mem.reserved_peak; }
int64_t cdp_exec_model_state_bytes(const cdp_exec *x) { return x->state.live_peak; }
int64_t cdp_exec_model_state_bytes_scheduled(const cdp_exec *x) { return x->state.sched_peak; }

double cdp_exec_data_wait_s(const cdp_exec *x)
{
    return x->batch.d->folder ? x->batch.wait_s : -1.0;
}

int64_t cdp_exec_workspace_bytes(const cdp_exec *x)
{
    return (int64_t)((cdp_model_ws_floats(x->be, x->m, x->B) + (size_t)x->B * cdp_model_in(x->m)) *
                     sizeof(float));
}

const cdp_trace_event *cdp_exec_trace(const cdp_exec *x, size_t *n)
{
    *n = x->nev;
    return x->ev;
}
