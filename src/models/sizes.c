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

size_t cdp_model_ws_floats(const cdp_backend *be, const cdp_model *m, int B)
{
    size_t conv = 0, tail = 0;
    for (int l = 0; l < m->nstages; l++) {
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
    size_t a = cdp_model_layer_ws_offset(m, B) + conv;
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
