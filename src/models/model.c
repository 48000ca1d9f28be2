/* The model: building it from its spec (the family's builder makes the
 * layer graph, graph.c), cutting its blocks into stages balanced by FLOPs,
 * and laying out every stage's parameters, activations and workspace
 * (models/model.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "builder.h"
#include "stage_internal.h"

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

/* whether stage l keeps per-micro-batch statistics (doubles: the regions
 * are then laid out at even floats) */
static int stage_has_stats(const cdp_model *m, int l)
{
    for (int j = m->plan[l].first_layer; j < m->plan[l].end_layer; j++)
        if (cdp_layer_ops_of(m->layers[j].kind)->stat_doubles)
            return 1;
    return 0;
}


/* Parameters, buffers and the statistics tail of every stage; the tensor
 * list. */
static void layout_params(cdp_model *m)
{
    size_t off = 0;
    int nt = 0, cap = 0;
    for (int l = 0; l < m->nstages; l++) {
        cdp_stage_plan *P = &m->plan[l];
        const int bn = stage_has_stats(m, l);
        size_t tn = 0, bufn = 0, slot = 0;
        for (int j = P->first_layer; j < P->end_layer; j++) {
            cdp_layer *ly = &m->layers[j];
            cdp_param_desc d[8];
            const cdp_layer_ops *ops = cdp_layer_ops_of(ly->kind);
            int nd = ops->params ? ops->params(ly, d) : 0;
            ly->p_off = tn;
            for (int k = 0; k < nd; k++)
                if (d[k].kind == CDP_TENSOR_PARAM)
                    tn += cdp_param_floats(&d[k]);
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
                    bufn += cdp_param_floats(&d[k]);
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
                m->tensors = cdp_model_grow(m->tensors, &cap, nt + 1, sizeof *m->tensors);
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
                    t->n = cdp_param_floats(&d[k]);
                    po += t->n;
                } else if (d[k].kind == CDP_TENSOR_BUFFER) {
                    t->off = bo;
                    t->n = cdp_param_floats(&d[k]);
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
        const cdp_layer_ops *ops = cdp_layer_ops_of(ly->kind);
        if (ops->storage != CDP_STORAGE_IN_PLACE)
            continue;
        /* in place: nobody else may read the tensor it overwrites */
        if (m->nodes[ly->in].consumers != 1 || m->nodes[ly->in].producer < 0) {
            snprintf(err, errlen, "--model: internal error: in-place %s on a shared tensor "
                     "(cdp_builder_check lets none through)", ops->name);
            return -1;
        }
        cdp_layer *prev = &m->layers[m->nodes[ly->in].producer];
        if (ops->relu && cdp_layer_ops_of(prev->kind)->fuses_relu && prev == ly - 1)
            prev->fuse_relu = 1;
    }
    for (int l = 0; l < m->nstages; l++) {
        cdp_stage_plan *P = &m->plan[l];
        P->delegate_relu = l < m->nstages - 1 &&
                           cdp_layer_ops_of(m->layers[P->end_layer - 1].kind)->relu;
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

int cdp_model_build(const cdp_model_config *c, cdp_model *m, char *err, size_t errlen)
{
    memset(m, 0, sizeof *m);
    const char *spec = c->spec ? c->spec : "";
    m->input = c->input;
    m->classes = c->classes;
    m->workers = c->workers > 0 ? c->workers : 1;
    m->precision = (int)c->precision;
    snprintf(m->name, sizeof m->name, "%s", spec);
    cdp_builder b = { m, 0, 0, 0, err, errlen, 0 };
    int default_stages = 1, rc = -1, matched = 0;
    err[0] = '\0';
    const cdp_model_family *fam = cdp_model_family_of(spec);
    if (fam) {
        matched = 1;
        rc = fam->build(&b, spec, &default_stages);
    }
    if (!matched || (rc && !err[0]))
        snprintf(err, errlen, "--model: unknown model '%.100s': expected a preset or %s "
                 "(cdp_run --list-models lists them)", spec, cdp_model_forms());
    if (rc || cdp_builder_check(&b)) {
        cdp_model_free(m);
        return -1;
    }
    m->block_first[m->nblocks] = m->nlayers;

    m->block_flops = calloc((size_t)m->nblocks, sizeof *m->block_flops);
    m->node_off = calloc((size_t)m->nnodes, sizeof *m->node_off);
    if (!m->block_flops || !m->node_off) abort();
    if (m->precision == CDP_PRECISION_BF16) {
        m->node_lowp = calloc((size_t)m->nnodes, 1);
        if (!m->node_lowp) abort();
        for (int j = 0; j < m->nlayers; j++)
            m->layers[j].lowp = 1;
    }
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
    cdp_model_config c = { spec, stages, { 0, 0, 0 }, 0, 1, CDP_BALANCE_FLOPS, CDP_PRECISION_FP32 };
    return cdp_model_build(&c, m, err, errlen);
}

void cdp_model_free(cdp_model *m)
{
    free(m->layers);
    free(m->nodes);
    free(m->node_off);
    free(m->node_lowp);
    cdp_lowp_cache_free(m);
    free(m->block_first);
    free(m->block_flops);
    free(m->tensors);
    m->layers = NULL;
    m->nodes = NULL;
    m->node_off = NULL;
    m->node_lowp = NULL;
    m->block_first = NULL;
    m->block_flops = NULL;
    m->tensors = NULL;
}

int cdp_model_check_batch(const cdp_model *m, int N, int B, char *err, size_t errlen)
{
    for (int j = 0; j < m->nlayers; j++) {
        const cdp_layer *ly = &m->layers[j];
        const cdp_layer_ops *ops = cdp_layer_ops_of(ly->kind);
        char why[400];
        if (ops->check_step && ops->check_step(ly, N, B, why, sizeof why)) {
            snprintf(err, errlen, "--model %s: %s", m->name, why);
            return -1;
        }
    }
    return 0;
}
