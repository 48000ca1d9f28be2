/* One stage's forward, backward and update, for any model:
 * the layers of the stage are interpreted in order (forward) and in reverse
 * (backward) with the offsets model.c laid out.
 *
 * Backward.  Gradients of the stage's tensors live in the workspace, each
 * from the backward of its last reader (the first to run) to that of its
 * producer; a first-fit assignment in floats per sample, the same in the dry
 * run model.c makes to size the workspace and in every real run.  A tensor
 * read by two layers (a residual block's input) receives the second
 * contribution through a temporary and an add, always in the same order.
 * The gradient of the stage's output is dout (read only) or, on the last
 * stage, the dlogits the forward left in act; the gradient of its input is
 * dx.  A ReLU whose only reader is a Linear is applied by that Linear's
 * backward to its dx (the same bits as relu_bwd after it); a ReLU that ends
 * a stage is applied by the next stage to its dx, so that no stage's
 * backward reads its own output. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/layer_times.h"
#include "stage_internal.h"

/* ------------------------------------------------------------ helpers */

static int root(const cdp_model *m, int t) { return m->nodes[t].root; }

static const cdp_layer_ops *ops_of(const cdp_layer *ly) { return cdp_layer_ops_of(ly->kind); }

/* whether layer j is a ReLU whose only reader applies its mask (fuses_relu) */
static int relu_fused_into_reader(const cdp_model *m, int j)
{
    const cdp_layer *ly = &m->layers[j];
    if (!ops_of(ly)->relu || m->nodes[ly->out].consumers != 1)
        return 0;
    for (int k = j + 1; k < m->nlayers; k++) {
        const cdp_layer *c = &m->layers[k];
        if (c->in == ly->out || c->in2 == ly->out)
            return ops_of(c)->fuses_relu && c->in2 < 0;
    }
    return 0;
}

/* whether the stage input is a ReLU output the previous stage left to this
 * one, and whether this stage's only reader of it applies it itself */
static int input_relu_pending(const cdp_model *m, int l)
{
    return l > 0 && m->plan[l - 1].delegate_relu;
}

static int input_relu_fused(const cdp_model *m, int l)
{
    if (!input_relu_pending(m, l) || m->nodes[m->plan[l].in_tensor].consumers != 1)
        return 0;
    const cdp_layer *first = &m->layers[m->plan[l].first_layer];
    return ops_of(first)->fuses_relu && first->in == m->plan[l].in_tensor;
}

int cdp_stage_skips_bwd(const cdp_model *m, int l, int j)
{
    const cdp_layer_ops *ops = ops_of(&m->layers[j]);
    if (ops->storage == CDP_STORAGE_VIEW)
        return 1;
    if (!ops->relu)
        return 0;
    if (j == m->plan[l].end_layer - 1 && m->plan[l].delegate_relu)
        return 1;
    return relu_fused_into_reader(m, j);
}

static float *param_ptr(const float *p, size_t off) { return (float *)p + off; }

/* the context of a caller that gives none */
static const cdp_layer_ctx no_ctx;

static const cdp_layer_ctx *ctx_or_none(const cdp_layer_ctx *ctx) { return ctx ? ctx : &no_ctx; }

/* the saved area and statistics of layer ly inside act */
static float *save_ptr(const cdp_model *m, int l, const cdp_layer *ly, float *act, int B)
{
    const cdp_layer_ops *ops = cdp_layer_ops_of(ly->kind);
    const cdp_stage_plan *P = &m->plan[l];
    if (ops->save_per_sample)
        return act + (P->save_ps_base + ly->save_off) * (size_t)B;
    if (ops->save_fixed)
        return act + P->act_ps * (size_t)B + ly->save_off;
    return NULL;
}

static double *stats_base(const cdp_model *m, int l, float *act, int B)
{
    const cdp_stage_plan *P = &m->plan[l];
    return (double *)(act + P->act_ps * (size_t)B + P->act_fixed - 2 * P->slot_doubles);
}

/* storage of tensor t during stage l's forward (ws: NULL in the backward,
 * which reads no forward-only tensor) */
static float *fwd_ptr(const cdp_model *m, int l, int t, const float *x, float *act, float *ws,
                      int B)
{
    int r = root(m, t);
    if (r == root(m, m->plan[l].in_tensor))
        return (float *)x;
    if (m->node_off[r] < 0)
        return ws ? ws + (size_t)(-1 - m->node_off[r]) * (size_t)B : NULL;
    return act + (size_t)m->node_off[r] * (size_t)B;
}

float *cdp_stage_output(const cdp_model *m, int l, int B, float *act)
{
    return act + (size_t)m->node_off[root(m, m->plan[l].out_tensor)] * (size_t)B;
}

/* the layers' scratch, after the gradient buffers (model.c lays it out) */
static float *conv_ws(const cdp_model *m, float *ws, int B)
{
    return ws + cdp_model_layer_ws_offset(m, B);
}

/* ------------------------------------------------- --precision bf16 */

/* Under --precision bf16 (doc/reference.md section 3.12) the stage does the
 * rounding and the bfloat16 storage around each layer call, so that no
 * layer kind but attention (products and a saved area inside) knows of
 * them.  A tensor the stage keeps (node_lowp: all but the logits) is stored
 * as bfloat16; a layer reads it widened into a float32 copy in the scratch
 * after the layers', and writes its output into such a copy, packed
 * (rounded) into the storage after the call; a tensor in float32 storage
 * (forward-only, the logits) is rounded in place.  A GEMM or convolution
 * layer (lowp_operands) gets its weights rounded (a copy of its
 * parameters), the network's input rounded, and in the backward its
 * output's gradient rounded.  A layer that reads_bf16, on a backend with
 * bfloat16 kernels, instead reads its kept input as stored (x16), its
 * weights from the stage's bfloat16 copy of the parameter version
 * (lowp_cache.c, made once per version) and its output's gradient packed
 * (dy16): no float32 copies of them.  An element-wise layer that bf16_io
 * (LayerNorm, GELU, ReLU, the add, BatchNorm's forward) reads its kept
 * inputs and writes its kept output in that storage itself (x16, x2_16,
 * y16), rounding as the packing would.  So every tensor between layers is
 * a bfloat16 value wherever it is stored, and no rounding depends on the
 * cut into stages, the rank or the thread. */
typedef struct lowp_ws {
    float *params, *x, *x2, *y, *dy;
} lowp_ws;

/* the scratch's parts (sizes.c); all NULL in float32 */
static lowp_ws lowp_ws_of(const cdp_backend *be, const cdp_model *m, float *ws, int B)
{
    lowp_ws w = { NULL, NULL, NULL, NULL, NULL };
    if (m->precision != CDP_PRECISION_BF16 || !ws)
        return w;
    size_t params, tensor;
    cdp_model_lowp_sizes(m, B, &params, &tensor);
    w.params = ws + cdp_model_lowp_ws_offset(be, m, B);
    w.x = w.params + params;
    w.x2 = w.x + tensor;
    w.y = w.x2 + tensor;
    w.dy = w.y + tensor;
    return w;
}

static int stored_lowp(const cdp_model *m, int t)
{
    return m->node_lowp && m->node_lowp[root(m, t)];
}

/* tensor t for a layer call in float32: its storage, or its bfloat16
 * storage widened into tmp */
static float *widen(const cdp_backend *be, const cdp_model *m, int t, const float *stored,
                    float *tmp, int B)
{
    if (!stored_lowp(m, t) || !stored)
        return (float *)stored;
    be->bf16_unpack((size_t)B * cdp_shape_n(m->nodes[t].shape), (const uint16_t *)stored, tmp);
    return tmp;
}

static const float *lowp_params(const cdp_backend *be, const cdp_layer *ly, const float *p,
                                float *dst)
{
    cdp_param_desc d[8];
    int nd = ops_of(ly)->params ? ops_of(ly)->params(ly, d) : 0;
    size_t off = 0;
    for (int k = 0; k < nd; k++) {
        if (d[k].kind != CDP_TENSOR_PARAM)
            continue;
        size_t n = cdp_param_floats(&d[k]);
        if (ops_of(ly)->lowp_params >> k & 1u)
            be->round_bf16(n, p + off, dst + off);
        else
            be->copy(dst + off, p + off, n * sizeof(float));
        off += n;
    }
    return dst;
}

/* a layer that reads the bfloat16 storage itself (x16, p16, dy16) */
static int reads_bf16(const cdp_backend *be, const cdp_layer *ly)
{
    return be->bf16 && ops_of(ly)->reads_bf16;
}

/* an element-wise layer that works on the bfloat16 storage itself, in its
 * forward (CDP_BF16_IO_FWD) or backward (CDP_BF16_IO_BWD) */
static int bf16_io(const cdp_backend *be, const cdp_layer *ly, unsigned pass)
{
    return be->bf16 && (ops_of(ly)->bf16_io & pass);
}

/* layer ly's input for a call: its bfloat16 storage as x16 when the layer
 * reads that (direct), else widened */
static void lowp_input(const cdp_backend *be, const cdp_model *m, const cdp_layer *ly,
                       const lowp_ws *w, cdp_layer_io *io, int direct)
{
    if (direct && stored_lowp(m, ly->in) && io->x) {
        io->x16 = (const uint16_t *)io->x;
        io->x = NULL;
    } else {
        io->x = widen(be, m, ly->in, io->x, w->x, io->B);
    }
}

/* the operands of layer j's products that the stage rounds: its weights
 * (once per parameter version for a layer that reads_bf16), and its input
 * when it is the network's (every other tensor is a layer's rounded
 * output) */
static void lowp_operands(const cdp_backend *be, const cdp_model *m, int l, const cdp_layer *ly,
                          const lowp_ws *w, cdp_layer_io *io)
{
    io->lowp = 1;
    if (!ops_of(ly)->lowp_operands)
        return;
    if (reads_bf16(be, ly))
        io->p16 = cdp_lowp_weights(be, m, l, io->layer_index, io->p - ly->p_off,
                                   io->ctx->params_tag) + ly->p_off;
    else
        io->p = lowp_params(be, ly, io->p, w->params);
    if (root(m, ly->in) == 0) {
        be->round_bf16((size_t)io->B * cdp_shape_n(ly->xs), io->x, w->x);
        io->x = w->x;
    }
}

/* a forward call's inputs in float32 and its output's float32 copy; returns
 * the output's storage, where lowp_store puts the result, or NULL when the
 * layer reads and writes the bfloat16 storage itself (bf16_io, its output
 * kept in bfloat16) */
static float *lowp_forward_io(const cdp_backend *be, const cdp_model *m, int l,
                              const cdp_layer *ly, const lowp_ws *w, cdp_layer_io *io)
{
    float *store = io->y;
    if (bf16_io(be, ly, CDP_BF16_IO_FWD) && stored_lowp(m, ly->out) && io->x &&
        root(m, ly->in) != 0 && (ly->in2 < 0 || (io->x2 && root(m, ly->in2) != 0))) {
        /* every input but the network's holds bfloat16 values: kept so, or
         * in floats (the forward-only tensors) */
        io->lowp = 1;
        if (ops_of(ly)->storage == CDP_STORAGE_IN_PLACE) {
            io->x = NULL;   /* its input is y16 */
        } else if (stored_lowp(m, ly->in)) {
            io->x16 = (const uint16_t *)io->x;
            io->x = NULL;
        }
        if (ly->in2 >= 0 && stored_lowp(m, ly->in2)) {
            io->x2_16 = (const uint16_t *)io->x2;
            io->x2 = NULL;
        }
        io->y16 = (uint16_t *)store;
        io->y = NULL;
        return NULL;
    }
    lowp_input(be, m, ly, w, io, reads_bf16(be, ly));
    if (ly->in2 >= 0)
        io->x2 = widen(be, m, ly->in2, io->x2, w->x2, io->B);
    if (stored_lowp(m, ly->out))   /* in place: on the widened input */
        io->y = ops_of(ly)->storage == CDP_STORAGE_IN_PLACE ? (float *)io->x : w->y;
    lowp_operands(be, m, l, ly, w, io);
    return store;
}

static void lowp_store(const cdp_backend *be, const cdp_model *m, const cdp_layer *ly,
                       const cdp_layer_io *io, float *store)
{
    size_t n = (size_t)io->B * cdp_shape_n(ly->ys);
    if (stored_lowp(m, ly->out))
        be->bf16_pack(n, io->y, (uint16_t *)store);
    else
        be->round_bf16(n, io->y, io->y);
}

/* ------------------------------------------------------------ forward */

void cdp_stage_fwd(const cdp_backend *be, const cdp_model *m, int l, int B,
                   const float *stage_params, const float *x, float *act,
                   const int32_t *labels, double *stats, float *ws, int train,
                   const cdp_layer_ctx *ctx)
{
    const cdp_stage_plan *P = &m->plan[l];
    double *st = stats_base(m, l, act, B);
    cdp_layer_times *lt = train ? m->times : NULL;   /* evaluation is not timed */
    const lowp_ws lw = lowp_ws_of(be, m, ws, B);
    for (int j = P->first_layer; j < P->end_layer; j++) {
        const cdp_layer *ly = &m->layers[j];
        if (ops_of(ly)->storage == CDP_STORAGE_VIEW)
            continue;
        if (ops_of(ly)->relu && j > 0 && m->layers[j - 1].fuse_relu &&
            m->layers[j - 1].out == ly->in)
            continue;   /* done by the layer before */
        cdp_layer_io io;
        memset(&io, 0, sizeof io);
        io.be = be;
        io.B = B;
        io.p = param_ptr(stage_params, ly->p_off);
        io.bufs = param_ptr(stage_params, ly->b_off);
        io.save = save_ptr(m, l, ly, act, B);
        io.stats = st + ly->stat_off;
        io.x = fwd_ptr(m, l, ly->in, x, act, ws, B);
        io.x2 = ly->in2 >= 0 ? fwd_ptr(m, l, ly->in2, x, act, ws, B) : NULL;
        io.y = fwd_ptr(m, l, ly->out, x, act, ws, B);
        io.ws = conv_ws(m, ws, B);
        io.ctx = ctx_or_none(ctx);
        io.layer_index = j;
        double t0 = cdp_layer_times_begin(lt, be);
        float *store = lw.params ? lowp_forward_io(be, m, l, ly, &lw, &io) : NULL;
        cdp_layer_ops_of(ly->kind)->fwd(ly, &io, train);
        if (store)
            lowp_store(be, m, ly, &io, store);
        cdp_layer_times_end(lt, be, j, 0, t0);
    }
    if (l == m->nstages - 1) {
        double t0 = cdp_layer_times_begin(lt, be);
        be->xent(B, m->classes, fwd_ptr(m, l, P->out_tensor, x, act, ws, B), labels, stats);
        cdp_layer_times_end(lt, be, CDP_LT_LOSS(m), 0, t0);
    }
}

/* ------------------------------------------------------------ backward */

/* First-fit assignment of gradient buffers, in floats per sample. */
typedef struct galloc {
    size_t off[64], len[64];
    int n;
    size_t high;
} galloc;

static size_t ga_get(galloc *a, size_t len)
{
    size_t at = 0;
    int k = 0;
    for (; k < a->n; k++) {     /* sorted by offset */
        if (a->off[k] >= at + len)
            break;
        at = a->off[k] + a->len[k];
    }
    if (a->n == 64) abort();
    memmove(&a->off[k + 1], &a->off[k], sizeof(size_t) * (size_t)(a->n - k));
    memmove(&a->len[k + 1], &a->len[k], sizeof(size_t) * (size_t)(a->n - k));
    a->off[k] = at;
    a->len[k] = len;
    a->n++;
    if (at + len > a->high)
        a->high = at + len;
    return at;
}

static void ga_put(galloc *a, size_t off)
{
    for (int k = 0; k < a->n; k++)
        if (a->off[k] == off) {
            memmove(&a->off[k], &a->off[k + 1], sizeof(size_t) * (size_t)(a->n - k - 1));
            memmove(&a->len[k], &a->len[k + 1], sizeof(size_t) * (size_t)(a->n - k - 1));
            a->n--;
            return;
        }
    abort();
}

enum { G_NONE, G_WS, G_EXT };

typedef struct bwd_run {
    const cdp_backend *be;
    int B, worker, accumulate;
    const float *params, *x;
    float *act, *grad, *ws;
    const float *dout;
    float *dx;
    const cdp_layer_ctx *ctx;
} bwd_run;

/* The backward of stage l; r == NULL: a dry run that only assigns buffers.
 * Returns the floats per sample of gradient buffers it used. */
static size_t bwd_walk(const cdp_model *m, int l, const bwd_run *r)
{
    const cdp_stage_plan *P = &m->plan[l];
    const int B = r ? r->B : 1;
    galloc ga = { .n = 0, .high = 0 };
    int *where = calloc((size_t)m->nnodes, sizeof *where);
    size_t *goff = calloc((size_t)m->nnodes, sizeof *goff);
    float **gext = calloc((size_t)m->nnodes, sizeof *gext);
    if (!where || !goff || !gext) abort();
    const int in_root = root(m, P->in_tensor), out_root = root(m, P->out_tensor);
    const int last = l == m->nstages - 1;

    /* the gradient of the output: dlogits in act, or dout */
    where[out_root] = G_EXT;
    if (r)
        gext[out_root] = last ? cdp_stage_output(m, l, B, r->act) : (float *)r->dout;
    /* where[in_root] stays G_NONE: the first contribution writes dx */
    float *ws_grad = r ? r->ws : NULL;
#define GP(t) (where[t] == G_EXT ? gext[t] : ws_grad + goff[t] * (size_t)B)

    for (int j = P->end_layer - 1; j >= P->first_layer; j--) {
        const cdp_layer *ly = &m->layers[j];
        if (cdp_stage_skips_bwd(m, l, j))
            continue;
        const cdp_layer_ops *ops = cdp_layer_ops_of(ly->kind);
        const int ro = root(m, ly->out);
        if (ops->storage == CDP_STORAGE_IN_PLACE) {   /* in place on its gradient */
            if (r) {
                cdp_layer_io io = { .be = r->be, .B = B, .ctx = r->ctx, .layer_index = j };
                const lowp_ws lw = lowp_ws_of(r->be, m, r->ws, B);
                io.y = fwd_ptr(m, l, ly->out, r->x, r->act, NULL, B);
                if (lw.params) {
                    io.lowp = 1;
                    if (bf16_io(r->be, ly, CDP_BF16_IO_BWD) && stored_lowp(m, ly->out) &&
                        io.y) {
                        io.y16 = (uint16_t *)io.y;   /* read only */
                        io.y = NULL;
                    } else {
                        io.y = widen(r->be, m, ly->out, io.y, lw.y, B);
                    }
                }
                io.dx = GP(ro);
                double t0 = cdp_layer_times_begin(m->times, r->be);
                ops->bwd(ly, &io);
                cdp_layer_times_end(m->times, r->be, j, 1, t0);
            }
            continue;
        }
        const int ins[2] = { ly->in, ly->in2 };
        float *dxs[2] = { NULL, NULL };
        size_t tmp[2];
        int use_tmp[2] = { 0, 0 };
        for (int q = 0; q < 2; q++) {
            int a = ins[q];
            if (a < 0 || (a == 0 && !(r && r->dx)))
                continue;   /* no input, or the network's input (wanted by tests only) */
            int ra = root(m, a);
            if (where[ra] == G_NONE) {
                if (ra == in_root) {
                    where[ra] = G_EXT;
                    if (r) gext[ra] = r->dx;
                } else {
                    where[ra] = G_WS;
                    goff[ra] = ga_get(&ga, cdp_shape_n(m->nodes[ra].shape));
                }
                if (r) dxs[q] = GP(ra);
            } else {
                tmp[q] = ga_get(&ga, cdp_shape_n(m->nodes[ra].shape));
                use_tmp[q] = 1;
                if (r) dxs[q] = ws_grad + tmp[q] * (size_t)B;
            }
        }
        if (r) {
            cdp_layer_io io;
            memset(&io, 0, sizeof io);
            io.be = r->be;
            io.B = B;
            io.p = param_ptr(r->params, ly->p_off);
            io.bufs = param_ptr(r->params, ly->b_off);
            io.g = r->grad + ly->p_off;
            io.save = save_ptr(m, l, ly, r->act, B);
            io.x = fwd_ptr(m, l, ly->in, r->x, r->act, NULL, B);
            io.x2 = ly->in2 >= 0 ? fwd_ptr(m, l, ly->in2, r->x, r->act, NULL, B) : NULL;
            io.y = fwd_ptr(m, l, ly->out, r->x, r->act, NULL, B);
            io.dy = GP(ro);
            io.dx = dxs[0];
            io.dx2 = dxs[1];
            io.accumulate = r->accumulate;
            io.ws = conv_ws(m, r->ws, B);
            io.ctx = r->ctx;
            io.layer_index = j;
            const lowp_ws lw = lowp_ws_of(r->be, m, r->ws, B);
            if (lw.params) {
                if (ops->reads_input || ops->fuses_relu) {
                    lowp_input(r->be, m, ly, &lw, &io,
                               reads_bf16(r->be, ly) || bf16_io(r->be, ly, CDP_BF16_IO_BWD));
                    if (ly->in2 >= 0)
                        io.x2 = widen(r->be, m, ly->in2, io.x2, lw.x2, B);
                }
                if (ops->reads_output)
                    io.y = widen(r->be, m, ly->out, io.y, lw.y, B);
                lowp_operands(r->be, m, l, ly, &lw, &io);
                if (ops->lowp_operands && reads_bf16(r->be, ly)) {
                    uint16_t *dy16 = (uint16_t *)lw.dy;
                    r->be->bf16_pack((size_t)B * cdp_shape_n(ly->ys), io.dy, dy16);
                    io.dy16 = dy16;
                } else if (ops->lowp_operands) {
                    r->be->round_bf16((size_t)B * cdp_shape_n(ly->ys), io.dy, lw.dy);
                    io.dy = lw.dy;
                }
            }
            if (ops->fuses_relu && io.dx) {
                /* the ReLU whose output this layer reads, fused into its dx */
                int p = m->nodes[ly->in].producer;
                if (root(m, ly->in) == in_root)
                    io.relu_dx = input_relu_fused(m, l);
                else
                    io.relu_dx = p >= 0 && relu_fused_into_reader(m, p);
            }
            /* a layer without parameters whose input gradient nobody wants
             * (the stage's input with dx NULL) has nothing to do: its
             * kernels (avgpool, maxpool) take no NULL dx */
            if (dxs[0] || dxs[1] || ops->params) {
                double t0 = cdp_layer_times_begin(m->times, r->be);
                ops->bwd(ly, &io);
                cdp_layer_times_end(m->times, r->be, j, 1, t0);
            }
            for (int q = 0; q < 2; q++)
                if (use_tmp[q]) {
                    int ra = root(m, ins[q]);
                    float *dst = GP(ra);
                    if (dst)
                        r->be->add((size_t)B * cdp_shape_n(m->nodes[ra].shape), dst, dxs[q]);
                }
        }
        for (int q = 0; q < 2; q++)
            if (use_tmp[q])
                ga_put(&ga, tmp[q]);
        /* the output's gradient is dead once its producer has run */
        if (where[ro] == G_WS && ly->out == ro)
            ga_put(&ga, goff[ro]);
    }
    /* the previous stage's final ReLU, left to this stage */
    if (r && r->dx && input_relu_pending(m, l) && !input_relu_fused(m, l)) {
        const lowp_ws lw = lowp_ws_of(r->be, m, r->ws, B);
        const float *y = lw.params ? widen(r->be, m, P->in_tensor, r->x, lw.x, B) : r->x;
        r->be->relu_bwd((size_t)B * cdp_shape_n(m->nodes[P->in_tensor].shape), y, r->dx);
    }
#undef GP
    free(where);
    free(goff);
    free(gext);
    return ga.high;
}

size_t cdp_stage_bwd_plan(const cdp_model *m, int l)
{
    return bwd_walk(m, l, NULL);
}

size_t cdp_stage_layout_tensors(cdp_model *m, int l)
{
    const cdp_stage_plan *P = &m->plan[l];
    unsigned char *kept = calloc((size_t)m->nnodes, 1);
    int *last_read = malloc(sizeof(int) * (size_t)m->nnodes);
    if (!kept || !last_read) abort();
    kept[root(m, P->out_tensor)] = 1;   /* sent on, or the logits */
    for (int j = P->first_layer; j < P->end_layer; j++) {
        const cdp_layer *ly = &m->layers[j];
        const cdp_layer_ops *ops = cdp_layer_ops_of(ly->kind);
        last_read[root(m, ly->in)] = j;
        if (ly->in2 >= 0)
            last_read[root(m, ly->in2)] = j;
        if (cdp_stage_skips_bwd(m, l, j))
            continue;
        if (ops->reads_input) {
            kept[root(m, ly->in)] = 1;
            if (ly->in2 >= 0)
                kept[root(m, ly->in2)] = 1;
        }
        if (ops->reads_output)
            kept[root(m, ly->out)] = 1;
    }
    size_t t = 0;
    galloc ga = { .n = 0, .high = 0 };
    /* --precision bf16: every kept tensor in bfloat16, but the logits, which
     * the loss overwrites with their float32 gradient */
    const int logits = root(m, m->layers[m->nlayers - 1].out);
    for (int j = P->first_layer; j < P->end_layer; j++) {
        const cdp_layer *ly = &m->layers[j];
        if (root(m, ly->out) == ly->out) {
            if (kept[ly->out]) {
                m->node_off[ly->out] = (int)t;
                size_t n = cdp_shape_n(ly->ys);
                if (m->node_lowp && ly->out != logits) {
                    m->node_lowp[ly->out] = 1;
                    n = (n + 1) / 2;
                }
                t += n;
            } else {
                m->node_off[ly->out] = -1 - (int)ga_get(&ga, cdp_shape_n(ly->ys));
                if (m->node_lowp)   /* a forward-only tensor: float32 in the workspace */
                    m->node_lowp[ly->out] = 0;
            }
        }
        /* a forward-only tensor's storage is free once its last reader ran */
        const int ins[2] = { ly->in, ly->in2 };
        for (int q = 0; q < 2; q++) {
            if (ins[q] < 0)
                continue;
            int r = root(m, ins[q]);
            if (r != root(m, P->in_tensor) && m->node_off[r] < 0 && last_read[r] == j &&
                (q == 0 || root(m, ins[0]) != r))
                ga_put(&ga, (size_t)(-1 - m->node_off[r]));
        }
    }
    m->plan[l].fwd_scratch_ps = ga.high;
    free(kept);
    free(last_read);
    return t;
}

void cdp_stage_bwd(const cdp_backend *be, const cdp_model *m, int l, int B, int worker,
                   const float *stage_params, const float *x, float *act,
                   const float *dout, float *dx, float *grad, float *ws, int accumulate,
                   const cdp_layer_ctx *ctx)
{
    const cdp_stage_plan *P = &m->plan[l];
    bwd_run r = { be, B, worker, accumulate, stage_params, x, act, grad, ws, dout, dx,
                  ctx_or_none(ctx) };
    bwd_walk(m, l, &r);
    if (!P->slot_doubles)
        return;
    /* the worker's statistics into its slot of the tail; a first
     * contribution also clears the other slots */
    const size_t slot = P->slot_doubles;
    if (!accumulate)
        be->zero(grad + P->train_n, (m->stage_n[l] - P->train_n) * sizeof(float));
    be->f64_pack(slot, stats_base(m, l, act, B), grad + P->train_n + 3 * (size_t)worker * slot);
}

/* ------------------------------------------------------------ update */

static void update(const cdp_backend *be, const cdp_model *m, int l, int B,
                   const float *theta_in, float *theta_out, float *g, float gscale,
                   float *state, const cdp_optim_step *st, int zero_g, float *ws,
                   const cdp_stage_plan *P);

void cdp_stage_update(const cdp_backend *be, const cdp_model *m, int l, int B,
                      const float *theta_in, float *theta_out, float *g, float gscale,
                      float *state, const cdp_optim_step *st, int zero_g, float *ws)
{
    const cdp_stage_plan *P = &m->plan[l];
    double t0 = cdp_layer_times_begin(m->times, be);
    update(be, m, l, B, theta_in, theta_out, g, gscale, state, st, zero_g, ws, P);
    cdp_layer_times_end(m->times, be, CDP_LT_OPTIMIZER(m), 0, t0);
}

static void update(const cdp_backend *be, const cdp_model *m, int l, int B,
                   const float *theta_in, float *theta_out, float *g, float gscale,
                   float *state, const cdp_optim_step *st, int zero_g, float *ws,
                   const cdp_stage_plan *P)
{
    /* the workers' statistics, unpacked (out of g, which theta_out may be) */
    const double *stats = (const double *)ws;
    if (P->slot_doubles)
        be->f64_unpack((size_t)m->workers * P->slot_doubles, g + P->train_n, (double *)ws);
    if (st->kind == CDP_OPTIM_ADAMW)
        be->adamw(P->train_n, theta_in, theta_out, g, gscale, state, state + m->stage_n[l],
                  &st->adamw, st->first, zero_g);
    else
        be->sgd(P->train_n, theta_in, theta_out, g, gscale, state, st->lr, st->momentum,
                st->weight_decay, st->first, zero_g);
    if (!P->slot_doubles)
        return;
    for (int j = P->first_layer; j < P->end_layer; j++) {
        const cdp_layer *ly = &m->layers[j];
        if (ops_of(ly)->update_buffers)
            ops_of(ly)->update_buffers(ly, be, m->workers, B, stats + ly->stat_off,
                                       P->slot_doubles, theta_in + ly->b_off,
                                       theta_out + ly->b_off);
    }
    if (zero_g && theta_out != g)
        be->zero(g + P->train_n, (m->stage_n[l] - P->train_n) * sizeof(float));
    if (theta_out == g)   /* the rest of the tail is no parameter: keep it +0 */
        be->zero(g + P->train_n + P->buffer_n,
                 (m->stage_n[l] - P->train_n - P->buffer_n) * sizeof(float));
}
