/* What a laid-out model's buffers measure, read by the stage interpreter
 * (stage.c), the executor and the reports: model.c sets the layout, and
 * this file is the one place its sizes are derived from it. */
#include "stage_internal.h"

static size_t even(size_t n) { return (n + 1) & ~(size_t)1; }

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

/* floats per sample of tensor t as stored */
static size_t stored_ps(const cdp_model *m, int t)
{
    size_t n = cdp_shape_n(m->nodes[t].shape);
    return m->node_lowp && m->node_lowp[m->nodes[t].root] ? (n + 1) / 2 : n;
}

size_t cdp_stage_in_stored(const cdp_model *m, int l)
{
    return stored_ps(m, m->plan[l].in_tensor);
}

size_t cdp_stage_out_stored(const cdp_model *m, int l)
{
    return stored_ps(m, m->plan[l].out_tensor);
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

/* The workspace: the gradient buffers of a stage's backward (or the
 * tensors only its forward reads), then the layers' scratch; or, in the
 * update, the unpacked statistics of the micro-batches. */
size_t cdp_model_layer_ws_offset(const cdp_model *m, int B)
{
    size_t grad = 0;
    for (int l = 0; l < m->nstages; l++) {
        size_t g = (m->plan[l].ws_ps > m->plan[l].fwd_scratch_ps ? m->plan[l].ws_ps
                                                                 : m->plan[l].fwd_scratch_ps) *
                   (size_t)B;
        if (g > grad) grad = g;
    }
    return even(grad);
}

/* the largest scratch one layer asks for at B */
static size_t layers_ws_max(const cdp_backend *be, const cdp_model *m, int B)
{
    size_t conv = 0;
    for (int j = 0; j < m->nlayers; j++) {
        const cdp_layer_ops *ops = cdp_layer_ops_of(m->layers[j].kind);
        if (ops->ws_floats) {
            size_t w = ops->ws_floats(&m->layers[j], be, B);
            if (w > conv) conv = w;
        }
    }
    return conv;
}

size_t cdp_model_lowp_ws_offset(const cdp_backend *be, const cdp_model *m, int B)
{
    return even(cdp_model_layer_ws_offset(m, B) + layers_ws_max(be, m, B));
}

/* --precision bf16's scratch: the largest layer's trainable parameters
 * with its weights rounded, then four tensors of B samples (float32 copies
 * of a layer's inputs and output, its rounded output gradient), each even */
void cdp_model_lowp_sizes(const cdp_model *m, int B, size_t *params, size_t *tensor)
{
    *params = *tensor = 0;
    for (int j = 0; j < m->nlayers; j++) {
        const cdp_layer *ly = &m->layers[j];
        const cdp_layer_ops *ops = cdp_layer_ops_of(ly->kind);
        cdp_param_desc d[8];
        int nd = ops->params ? ops->params(ly, d) : 0;
        size_t p = 0;
        for (int k = 0; k < nd; k++)
            if (d[k].kind == CDP_TENSOR_PARAM)
                p += cdp_param_floats(&d[k]);
        if (p > *params) *params = p;
        size_t t = cdp_shape_n(ly->xs) > cdp_shape_n(ly->ys) ? cdp_shape_n(ly->xs)
                                                             : cdp_shape_n(ly->ys);
        if (t > *tensor) *tensor = t;
    }
    *params = even(*params);
    *tensor = even(*tensor * (size_t)B);
}

size_t cdp_model_lowp_ws_floats(const cdp_model *m, int B)
{
    if (m->precision != CDP_PRECISION_BF16)
        return 0;
    size_t params, tensor;
    cdp_model_lowp_sizes(m, B, &params, &tensor);
    return params + 4 * tensor;
}

size_t cdp_model_ws_floats(const cdp_backend *be, const cdp_model *m, int B)
{
    size_t tail = 0;
    for (int l = 0; l < m->nstages; l++) {
        size_t t = 2 * (size_t)m->workers * m->plan[l].slot_doubles;   /* unpacked */
        if (t > tail) tail = t;
    }
    size_t lowp = cdp_model_lowp_ws_floats(m, B);
    size_t a = lowp ? cdp_model_lowp_ws_offset(be, m, B) + lowp
                    : cdp_model_layer_ws_offset(m, B) + layers_ws_max(be, m, B);
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
