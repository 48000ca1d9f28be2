/* The model: building the layer graph (the mb_* calls of the builders),
 * cutting its blocks into stages balanced by FLOPs, and laying out every
 * stage's parameters, activations and workspace (cdp/model.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "builder.h"
#include "stage_internal.h"

/* ------------------------------------------------------------ building */

static void *grow(void *p, int *cap, int need, size_t elem)
{
    if (need <= *cap)
        return p;
    int c = *cap ? *cap : 16;
    while (c < need)
        c *= 2;
    void *q = realloc(p, (size_t)c * elem);
    if (!q) abort();
    *cap = c;
    return q;
}

static int add_node(mb *b, cdp_shape s, int producer, int root)
{
    cdp_model *m = b->m;
    m->nodes = grow(m->nodes, &b->cap_nodes, m->nnodes + 1, sizeof *m->nodes);
    int t = m->nnodes++;
    m->nodes[t] = (cdp_node){ s, producer, root < 0 ? t : root, 0 };
    return t;
}

void mb_default_io(mb *b, cdp_shape input, int classes)
{
    if (b->m->input.c == 0)
        b->m->input = input;
    if (b->m->classes == 0)
        b->m->classes = classes;
}

void mb_block(mb *b)
{
    cdp_model *m = b->m;
    m->block_first = grow(m->block_first, &b->cap_blocks, m->nblocks + 2, sizeof *m->block_first);
    m->block_first[m->nblocks++] = m->nlayers;
}

/* Adds ly reading tensor in (and in2); computes its output shape. */
static int add_layer(mb *b, cdp_layer ly, int in, int in2)
{
    cdp_model *m = b->m;
    if (b->failed || in < 0 || (in2 < -1))
        return -1;
    if (m->nnodes == 0)   /* node 0: the network's input, shaped by now */
        add_node(b, m->input, -1, -1);
    ly.in = in;
    ly.in2 = in2;
    ly.xs = m->nodes[in].shape;
    if (in2 >= 0) {
        cdp_shape s2 = m->nodes[in2].shape;
        if (s2.c != ly.xs.c || s2.h != ly.xs.h || s2.w != ly.xs.w) {
            snprintf(b->err, b->errlen, "--model: internal error: add of %dx%dx%d and %dx%dx%d",
                     ly.xs.c, ly.xs.h, ly.xs.w, s2.c, s2.h, s2.w);
            b->failed = 1;
            return -1;
        }
    }
    const cdp_layer_ops *ops = cdp_layer_ops_of(ly.kind);
    if (ops->shape(&ly, b->err, b->errlen)) {
        b->failed = 1;
        return -1;
    }
    m->layers = grow(m->layers, &b->cap_layers, m->nlayers + 1, sizeof *m->layers);
    const int j = m->nlayers++;
    const int view = ly.kind == CDP_LAYER_RELU || ly.kind == CDP_LAYER_FLATTEN;
    ly.out = add_node(b, ly.ys, j, view ? m->nodes[in].root : -1);
    m->layers[j] = ly;
    m->nodes[in].consumers++;
    if (in2 >= 0)
        m->nodes[in2].consumers++;
    return ly.out;
}

static cdp_layer named(cdp_layer_kind kind, const char *name)
{
    cdp_layer ly;
    memset(&ly, 0, sizeof ly);
    ly.kind = kind;
    ly.in2 = -1;
    if (name)
        snprintf(ly.name, sizeof ly.name, "%s", name);
    return ly;
}

int mb_linear(mb *b, const char *name, int in, int out_features)
{
    cdp_layer ly = named(CDP_LAYER_LINEAR, name);
    ly.ys.c = out_features;
    return add_layer(b, ly, in, -1);
}

int mb_conv(mb *b, const char *name, int in, int out_channels, int k, int stride, int pad,
            int bias)
{
    cdp_layer ly = named(CDP_LAYER_CONV2D, name);
    ly.ys.c = out_channels;
    ly.k = k;
    ly.stride = stride;
    ly.pad = pad;
    ly.bias = bias;
    return add_layer(b, ly, in, -1);
}

int mb_bn(mb *b, const char *name, int in)
{
    cdp_layer ly = named(CDP_LAYER_BATCHNORM2D, name);
    ly.eps = 1e-5f;
    ly.momentum = 0.1f;
    return add_layer(b, ly, in, -1);
}

int mb_relu(mb *b, int in)
{
    return add_layer(b, named(CDP_LAYER_RELU, "relu"), in, -1);
}

int mb_maxpool(mb *b, int in, int k, int stride, int pad)
{
    cdp_layer ly = named(CDP_LAYER_MAXPOOL2D, "maxpool");
    ly.k = k;
    ly.stride = stride;
    ly.pad = pad;
    return add_layer(b, ly, in, -1);
}

int mb_avgpool(mb *b, int in)
{
    return add_layer(b, named(CDP_LAYER_AVGPOOL, "avgpool"), in, -1);
}

int mb_flatten(mb *b, int in)
{
    return add_layer(b, named(CDP_LAYER_FLATTEN, "flatten"), in, -1);
}

int mb_add(mb *b, int x, int y)
{
    return add_layer(b, named(CDP_LAYER_ADD, "add"), x, y);
}

int mb_init_style(mb *b, int t, cdp_init_style style)
{
    if (t < 0 || b->failed)
        return -1;
    b->m->layers[b->m->nodes[t].producer].init = style;
    return t;
}

int mb_linear_tokens(mb *b, const char *name, int in, int out_features)
{
    cdp_layer ly = named(CDP_LAYER_LINEAR, name);
    ly.tokens = 1;
    ly.ys.w = out_features;
    return add_layer(b, ly, in, -1);
}

int mb_layernorm(mb *b, const char *name, int in, float eps)
{
    cdp_layer ly = named(CDP_LAYER_LAYERNORM, name);
    ly.eps = eps;
    return add_layer(b, ly, in, -1);
}

int mb_gelu(mb *b, int in)
{
    return add_layer(b, named(CDP_LAYER_GELU, "gelu"), in, -1);
}

int mb_attention(mb *b, const char *name, int in, int heads)
{
    cdp_layer ly = named(CDP_LAYER_ATTENTION, name);
    ly.heads = heads;
    return add_layer(b, ly, in, -1);
}

int mb_class_token(mb *b, int in)
{
    return add_layer(b, named(CDP_LAYER_CLASS_TOKEN, ""), in, -1);
}

int mb_pos_embed(mb *b, const char *name, int in)
{
    return add_layer(b, named(CDP_LAYER_POS_EMBED, name), in, -1);
}

int mb_token_select(mb *b, int in)
{
    return add_layer(b, named(CDP_LAYER_TOKEN_SELECT, "select"), in, -1);
}

/* ------------------------------------------------------------ FLOPs */

static double layer_flops(const cdp_model *m, int j, int B)
{
    const cdp_layer *ly = &m->layers[j];
    /* nobody needs dLoss/dinput of the network */
    return cdp_layer_ops_of(ly->kind)->flops(ly, B, ly->in != 0);
}

double cdp_stage_flops(const cdp_model *m, int l, int B)
{
    double f = 0.0;
    for (int j = m->plan[l].first_layer; j < m->plan[l].end_layer; j++)
        f += layer_flops(m, j, B);
    return f;
}

/* ------------------------------------------------------------ partition */

/* Splits the blocks into L contiguous non-empty stages minimising the
 * largest stage cost; among those, the one with the smallest sum of squared
 * stage costs; among those, the first found (smallest split points).
 * Dynamic programme over (stages used, blocks covered). */
static void partition(cdp_model *m, int L, const double *cost)
{
    const int n = m->nblocks;
    double *pre = malloc(sizeof(double) * (size_t)(n + 1));
    double *bmax = malloc(sizeof(double) * (size_t)(L + 1) * (size_t)(n + 1));
    double *bsq = malloc(sizeof(double) * (size_t)(L + 1) * (size_t)(n + 1));
    int *from = malloc(sizeof(int) * (size_t)(L + 1) * (size_t)(n + 1));
    if (!pre || !bmax || !bsq || !from) abort();
#define AT(a, k, j) a[(size_t)(k) * (size_t)(n + 1) + (size_t)(j)]
    pre[0] = 0.0;
    for (int j = 0; j < n; j++)
        pre[j + 1] = pre[j] + cost[j];
    for (int j = 1; j <= n; j++) {
        double c = pre[j];
        AT(bmax, 1, j) = c;
        AT(bsq, 1, j) = c * c;
        AT(from, 1, j) = 0;
    }
    for (int k = 2; k <= L; k++)
        for (int j = k; j <= n; j++) {
            int best = -1;
            double bm = 0.0, bs = 0.0;
            for (int i = k - 1; i <= j - 1; i++) {
                double c = pre[j] - pre[i];
                double mx = AT(bmax, k - 1, i) > c ? AT(bmax, k - 1, i) : c;
                double sq = AT(bsq, k - 1, i) + c * c;
                if (best < 0 || mx < bm || (mx == bm && sq < bs)) {
                    best = i;
                    bm = mx;
                    bs = sq;
                }
            }
            AT(bmax, k, j) = bm;
            AT(bsq, k, j) = bs;
            AT(from, k, j) = best;
        }
    m->stage_first[L] = n;
    for (int k = L, j = n; k >= 1; k--) {
        j = AT(from, k, j);
        m->stage_first[k - 1] = j;
    }
#undef AT
    free(pre); free(bmax); free(bsq); free(from);
}

/* ------------------------------------------------------------ layout */

static size_t even(size_t n) { return (n + 1) & ~(size_t)1; }

static int stage_has_bn(const cdp_model *m, int l)
{
    for (int j = m->plan[l].first_layer; j < m->plan[l].end_layer; j++)
        if (m->layers[j].kind == CDP_LAYER_BATCHNORM2D)
            return 1;
    return 0;
}

static size_t param_floats(const cdp_param_desc *d)
{
    size_t n = 1;
    for (int k = 0; k < d->ndim; k++)
        n *= (size_t)d->shape[k];
    return n;
}

/* Parameters, buffers and the statistics tail of every stage; the tensor
 * list. */
static void layout_params(cdp_model *m)
{
    size_t off = 0;
    int nt = 0, cap = 0;
    for (int l = 0; l < m->nstages; l++) {
        cdp_stage_plan *P = &m->plan[l];
        const int bn = stage_has_bn(m, l);
        size_t tn = 0, bufn = 0, slot = 0;
        for (int j = P->first_layer; j < P->end_layer; j++) {
            cdp_layer *ly = &m->layers[j];
            cdp_param_desc d[8];
            const cdp_layer_ops *ops = cdp_layer_ops_of(ly->kind);
            int nd = ops->params ? ops->params(ly, d) : 0;
            ly->p_off = tn;
            for (int k = 0; k < nd; k++)
                if (d[k].kind == CDP_TENSOR_PARAM)
                    tn += param_floats(&d[k]);
        }
        if (bn)
            tn = even(tn);
        for (int j = P->first_layer; j < P->end_layer; j++) {
            cdp_layer *ly = &m->layers[j];
            cdp_param_desc d[8];
            const cdp_layer_ops *ops = cdp_layer_ops_of(ly->kind);
            int nd = ops->params ? ops->params(ly, d) : 0;
            ly->b_off = tn + bufn;
            for (int k = 0; k < nd; k++)
                if (d[k].kind == CDP_TENSOR_BUFFER)
                    bufn += param_floats(&d[k]);
            ly->stat_off = slot;
            slot += ops->stat_doubles ? ops->stat_doubles(ly) : 0;
        }
        P->train_n = tn;
        P->buffer_n = bufn;
        P->slot_doubles = slot;
        size_t tail = 3 * (size_t)m->workers * slot;   /* packed doubles */
        if (bn)
            off = even(off);
        m->stage_off[l] = off;
        m->stage_n[l] = tn + (tail > bufn ? tail : bufn);
        if (bn)
            m->stage_n[l] = even(m->stage_n[l]);
        off += m->stage_n[l];

        /* the file's tensors of this stage, in layer order */
        for (int j = P->first_layer; j < P->end_layer; j++) {
            const cdp_layer *ly = &m->layers[j];
            cdp_param_desc d[8];
            const cdp_layer_ops *ops = cdp_layer_ops_of(ly->kind);
            int nd = ops->params ? ops->params(ly, d) : 0;
            size_t po = m->stage_off[l] + ly->p_off, bo = m->stage_off[l] + ly->b_off;
            for (int k = 0; k < nd; k++) {
                m->tensors = grow(m->tensors, &cap, nt + 1, sizeof *m->tensors);
                cdp_tensor_info *t = &m->tensors[nt++];
                memset(t, 0, sizeof *t);
                snprintf(t->name, sizeof t->name, "%s%s%s", ly->name, ly->name[0] ? "." : "",
                         d[k].suffix);
                t->layer = j;
                t->param = k;
                t->kind = d[k].kind;
                t->ndim = d[k].ndim;
                memcpy(t->shape, d[k].shape, sizeof t->shape);
                t->stage = l;
                if (d[k].kind == CDP_TENSOR_PARAM) {
                    t->off = po;
                    t->n = param_floats(&d[k]);
                    po += t->n;
                } else if (d[k].kind == CDP_TENSOR_BUFFER) {
                    t->off = bo;
                    t->n = param_floats(&d[k]);
                    bo += t->n;
                }
            }
        }
    }
    m->nparams = off;
    m->ntensors = nt;
}

/* Activations of each stage: the storage of every tensor it produces (per
 * sample), then the layers' saved areas, then its statistics. */
static void layout_acts(cdp_model *m)
{
    for (int l = 0; l < m->nstages; l++) {
        cdp_stage_plan *P = &m->plan[l];
        size_t t = cdp_stage_layout_tensors(m, l), sps = 0, sfx = 0;
        for (int j = P->first_layer; j < P->end_layer; j++) {
            cdp_layer *ly = &m->layers[j];
            const cdp_layer_ops *ops = cdp_layer_ops_of(ly->kind);
            if (ops->save_per_sample) {
                ly->save_off = sps;
                sps += ops->save_per_sample(ly);
            } else if (ops->save_fixed) {
                ly->save_off = sfx;
                sfx += ops->save_fixed(ly);
            }
        }
        P->save_ps_base = t;
        P->act_ps = even(t + sps);
        P->act_fixed = even(sfx) + 2 * P->slot_doubles;
    }
}

/* Which ReLUs run fused into their neighbours, and which stages leave the
 * backward of their last ReLU to the next stage. */
static int plan_fusion(cdp_model *m, char *err, size_t errlen)
{
    for (int j = 0; j < m->nlayers; j++) {
        cdp_layer *ly = &m->layers[j];
        if (ly->kind != CDP_LAYER_RELU)
            continue;
        /* in place: nobody else may read the tensor it overwrites */
        if (m->nodes[ly->in].consumers != 1 || m->nodes[ly->in].producer < 0) {
            snprintf(err, errlen, "--model: internal error: in-place ReLU on a shared tensor");
            return -1;
        }
        cdp_layer *prev = &m->layers[m->nodes[ly->in].producer];
        if (prev->kind == CDP_LAYER_LINEAR && prev == ly - 1)
            prev->fuse_relu = 1;
    }
    for (int l = 0; l < m->nstages; l++) {
        cdp_stage_plan *P = &m->plan[l];
        P->delegate_relu = l < m->nstages - 1 &&
                           m->layers[P->end_layer - 1].kind == CDP_LAYER_RELU;
    }
    return 0;
}

/* Does stage l's backward read its activations? */
static int reads_act(const cdp_model *m, int l)
{
    const cdp_stage_plan *P = &m->plan[l];
    if (l == m->nstages - 1 || P->slot_doubles)
        return 1;
    const int in_root = m->nodes[P->in_tensor].root;
    for (int j = P->first_layer; j < P->end_layer; j++) {
        const cdp_layer *ly = &m->layers[j];
        const cdp_layer_ops *ops = cdp_layer_ops_of(ly->kind);
        if (cdp_stage_skips_bwd(m, l, j))
            continue;
        if (ops->save_per_sample || ops->save_fixed || ops->reads_output)
            return 1;
        if (ops->reads_input && m->nodes[ly->in].root != in_root)
            return 1;
    }
    return 0;
}

/* Cuts the blocks into L stages (cost NULL: one block per stage; else
 * balanced by cost) and lays every stage out. */
static int cut(cdp_model *m, int L, const double *cost, char *err, size_t errlen)
{
    memset(m->plan, 0, sizeof m->plan);
    for (int j = 0; j < m->nlayers; j++)
        m->layers[j].fuse_relu = 0;
    free(m->tensors);
    m->tensors = NULL;
    m->ntensors = 0;
    m->nstages = L;
    if (!cost) {
        for (int k = 0; k <= L; k++)
            m->stage_first[k] = k;
    } else {
        partition(m, L, cost);
    }
    for (int l = 0; l < L; l++) {
        cdp_stage_plan *P = &m->plan[l];
        P->first_layer = m->block_first[m->stage_first[l]];
        P->end_layer = m->block_first[m->stage_first[l + 1]];
        P->in_tensor = m->layers[P->first_layer].in;
        P->out_tensor = m->layers[P->end_layer - 1].out;
    }
    if (plan_fusion(m, err, errlen))
        return -1;
    layout_params(m);
    layout_acts(m);
    for (int l = 0; l < L; l++) {
        m->plan[l].reads_act = reads_act(m, l);
        m->plan[l].ws_ps = cdp_stage_bwd_plan(m, l);
    }
    return 0;
}

/* ------------------------------------------------------------ build */

static const struct {
    const char *prefix;
    int (*build)(mb *, const char *, int *);
} builders[] = {
    { "mlp:", cdp_build_mlp },
    { "resnet", cdp_build_resnet },
    { "vit", cdp_build_vit },
};

const char *cdp_model_names(void)
{
    return "mlp:IN-H1-...-OUT, resnet20, resnet32, resnet56, resnet18, resnet34, resnet50, "
           "resnet18-cifar, resnet34-cifar, resnet50-cifar, vit:patch=P,dim=D,depth=K,heads=H,"
           "mlp=M, vit-tiny, vit-b16";
}

int cdp_model_build(const cdp_model_config *c, cdp_model *m, char *err, size_t errlen)
{
    memset(m, 0, sizeof *m);
    const char *spec = c->spec ? c->spec : "";
    m->input = c->input;
    m->classes = c->classes;
    m->workers = c->workers > 0 ? c->workers : 1;
    snprintf(m->name, sizeof m->name, "%s", spec);
    mb b = { m, 0, 0, 0, err, errlen, 0 };
    int default_stages = 1, rc = -1, matched = 0;
    err[0] = '\0';
    for (size_t k = 0; k < sizeof builders / sizeof *builders && !matched; k++)
        if (strncmp(spec, builders[k].prefix, strlen(builders[k].prefix)) == 0) {
            matched = 1;
            rc = builders[k].build(&b, spec, &default_stages);
        }
    if (!matched || (rc && !err[0]))
        snprintf(err, errlen, "--model: expected one of %s, got '%.200s'", cdp_model_names(), spec);
    if (rc || b.failed || m->nblocks < 1) {
        cdp_model_free(m);
        return -1;
    }
    m->block_first[m->nblocks] = m->nlayers;

    m->block_flops = calloc((size_t)m->nblocks, sizeof *m->block_flops);
    m->node_off = calloc((size_t)m->nnodes, sizeof *m->node_off);
    if (!m->block_flops || !m->node_off) abort();
    for (int k = 0; k < m->nblocks; k++)
        for (int j = m->block_first[k]; j < m->block_first[k + 1]; j++)
            m->block_flops[k] += layer_flops(m, j, 1);

    int L = c->stages > 0 ? c->stages : default_stages;
    if (L > m->nblocks || L > CDP_MAX_STAGES) {
        /* the limit that binds: the blocks, or the stages a model holds */
        const int mlp = strncmp(spec, "mlp:", 4) == 0;
        const char *unit = mlp ? "layer" : "block";
        if (m->nblocks <= CDP_MAX_STAGES)
            snprintf(err, errlen, "--stages: %d stages for a model of %d %s%s (at most one "
                     "stage per %s)", L, m->nblocks, unit, m->nblocks == 1 ? "" : "s", unit);
        else
            snprintf(err, errlen, "--stages: %d stages, at most %d (the most a model is cut "
                     "into; this one has %d %ss)", L, CDP_MAX_STAGES, m->nblocks, unit);
        cdp_model_free(m);
        return -1;
    }
    if (c->balance == CDP_BALANCE_ACTIVATIONS && L < m->nblocks) {
        /* each block's kept activations, from a layout of one block per
         * stage; then the cut that balances them */
        double *act = malloc(sizeof(double) * (size_t)m->nblocks);
        if (!act) abort();
        if (cut(m, m->nblocks, NULL, err, errlen)) {
            free(act);
            cdp_model_free(m);
            return -1;
        }
        for (int k = 0; k < m->nblocks; k++)
            act[k] = (double)m->plan[k].act_ps;
        int rc2 = cut(m, L, act, err, errlen);
        free(act);
        if (rc2) {
            cdp_model_free(m);
            return -1;
        }
        return 0;
    }
    if (cut(m, L, c->stages <= 0 && L == m->nblocks ? NULL : m->block_flops, err, errlen)) {
        cdp_model_free(m);
        return -1;
    }
    return 0;
}

int cdp_model_parse(const char *spec, int stages, cdp_model *m, char *err, size_t errlen)
{
    cdp_model_config c = { spec, stages, { 0, 0, 0 }, 0, 1, CDP_BALANCE_FLOPS };
    return cdp_model_build(&c, m, err, errlen);
}

void cdp_model_free(cdp_model *m)
{
    free(m->layers);
    free(m->nodes);
    free(m->node_off);
    free(m->block_first);
    free(m->block_flops);
    free(m->tensors);
    m->layers = NULL;
    m->nodes = NULL;
    m->node_off = NULL;
    m->block_first = NULL;
    m->block_flops = NULL;
    m->tensors = NULL;
}

int cdp_model_check_backend(const cdp_model *m, const cdp_backend *be, char *err, size_t errlen)
{
    for (int j = 0; j < m->nlayers; j++) {
        const cdp_layer_ops *ops = cdp_layer_ops_of(m->layers[j].kind);
        if (ops->supported && !ops->supported(be)) {
            snprintf(err, errlen, "--model %s: the %s backend has no %s kernels yet",
                     m->name, be->name, ops->name);
            return -1;
        }
    }
    return 0;
}

/* ------------------------------------------------------------ sizes */

size_t cdp_stage_act_floats(const cdp_model *m, int l, int B)
{
    return m->plan[l].act_ps * (size_t)B + m->plan[l].act_fixed;
}

int cdp_stage_in(const cdp_model *m, int l)
{
    return (int)cdp_shape_n(m->nodes[m->plan[l].in_tensor].shape);
}

int cdp_stage_out(const cdp_model *m, int l)
{
    return (int)cdp_shape_n(m->nodes[m->plan[l].out_tensor].shape);
}

int cdp_model_in(const cdp_model *m)
{
    return (int)cdp_shape_n(m->input);
}

int cdp_stage_bwd_reads_act(const cdp_model *m, int l)
{
    return m->plan[l].reads_act;
}

size_t cdp_model_param_count(const cdp_model *m)
{
    size_t n = 0;
    for (int k = 0; k < m->ntensors; k++)
        n += m->tensors[k].n;
    return n;
}

size_t cdp_model_ws_floats(const cdp_backend *be, const cdp_model *m, int B)
{
    size_t grad = 0, conv = 0, tail = 0;
    for (int l = 0; l < m->nstages; l++) {
        size_t g = (m->plan[l].ws_ps > m->plan[l].fwd_scratch_ps ? m->plan[l].ws_ps
                                                                 : m->plan[l].fwd_scratch_ps) *
                   (size_t)B;
        if (g > grad) grad = g;
        size_t t = 2 * (size_t)m->workers * m->plan[l].slot_doubles;   /* unpacked */
        if (t > tail) tail = t;
    }
    for (int j = 0; j < m->nlayers; j++) {
        const cdp_layer_ops *ops = cdp_layer_ops_of(m->layers[j].kind);
        if (ops->ws_floats) {
            size_t w = ops->ws_floats(&m->layers[j], be, B);
            if (w > conv) conv = w;
        }
    }
    size_t a = even(grad) + conv;
    return a > tail ? a : tail;
}

int cdp_model_accumulate_exact(const cdp_backend *be, const cdp_model *m, int B)
{
    for (int j = 0; j < m->nlayers; j++) {
        const cdp_layer_ops *ops = cdp_layer_ops_of(m->layers[j].kind);
        /* the other kernels accumulate exactly by contract */
        if (ops->accumulate_exact && !ops->accumulate_exact(&m->layers[j], be, B))
            return 0;
    }
    return 1;
}

int cdp_model_check_batch(const cdp_model *m, int N, int B, char *err, size_t errlen)
{
    for (int j = 0; j < m->nlayers; j++) {
        const cdp_layer *ly = &m->layers[j];
        if (ly->kind != CDP_LAYER_BATCHNORM2D ||
            (long long)N * B * ly->xs.h * ly->xs.w >= 2)
            continue;
        snprintf(err, errlen, "--model %s: %s normalises 1 value per channel in a step "
                 "(N=%d x B=%d samples of %dx%d pixels), whose running variance (over n - 1) "
                 "is undefined: give larger images, --batch or --workers",
                 m->name, ly->name, N, B, ly->xs.h, ly->xs.w);
        return -1;
    }
    return 0;
}
