/* --precision bf16's weight copies (doc/reference.md section 3.12): the
 * weights of each stage's layers that read bfloat16 storage (Linear,
 * attention) rounded and packed once per parameter version, not at every
 * micro-batch's forward and backward.
 *
 * A copy is named by the tag of the parameters it was made from
 * (cdp_layer_ctx.params_tag: the executor's run and the version) and their
 * address; equal tags mean equal contents, so a hit returns the very bits a
 * fresh packing would.  Two copies per stage: a cdp-v2 worker's forward and
 * backward of one tick may use two versions; a third version evicts the one
 * used least recently.  Tag 0 (a caller that names no version: evaluation,
 * --verify's serial reference, tests) packs the calling layer's weights
 * alone, into a copy of their own, at every call. */
#include <stdio.h>
#include <stdlib.h>

#include "stage_internal.h"

#define SLOTS 3   /* two tagged copies, then the untagged one */

typedef struct lowp_copy {
    const float *p;
    uint64_t tag, used;
    uint16_t *w;
} lowp_copy;

struct cdp_lowp_cache {
    const cdp_backend *be;
    uint64_t clock;
    lowp_copy copy[CDP_MAX_STAGES][SLOTS];
};

/* the weights of layers [j0, j1) that read them in bfloat16 storage
 * (reads_bf16: a convolution rounds its own, and a ResNet stage's would be
 * packed for nothing) */
static void pack(const cdp_backend *be, const cdp_model *m, int j0, int j1, const float *p,
                 uint16_t *w)
{
    for (int j = j0; j < j1; j++) {
        const cdp_layer *ly = &m->layers[j];
        const cdp_layer_ops *ops = cdp_layer_ops_of(ly->kind);
        if (!ops->params || !ops->lowp_params || !ops->reads_bf16)
            continue;
        cdp_param_desc d[8];
        const int nd = ops->params(ly, d);
        size_t off = ly->p_off;
        for (int k = 0; k < nd; k++) {
            if (d[k].kind != CDP_TENSOR_PARAM)
                continue;
            const size_t n = cdp_param_floats(&d[k]);
            if (ops->lowp_params >> k & 1u)
                be->bf16_pack(n, p + off, w + off);
            off += n;
        }
    }
}

const uint16_t *cdp_lowp_weights(const cdp_backend *be, const cdp_model *m, int l, int j,
                                 const float *p, uint64_t tag)
{
    struct cdp_lowp_cache *c = m->lowp_cache;
    if (!c) {
        c = calloc(1, sizeof *c);
        if (!c) {
            fprintf(stderr, "cdp: out of memory for the bfloat16 weights\n");
            abort();
        }
        c->be = be;
        ((cdp_model *)m)->lowp_cache = c;   /* the model's own cache, made on first use */
    }
    lowp_copy *s = NULL;
    if (tag) {
        for (int k = 0; k < SLOTS - 1; k++)
            if (c->copy[l][k].w && c->copy[l][k].tag == tag && c->copy[l][k].p == p) {
                c->copy[l][k].used = ++c->clock;
                return c->copy[l][k].w;
            }
        s = &c->copy[l][c->copy[l][0].used <= c->copy[l][1].used ? 0 : 1];
    } else {
        s = &c->copy[l][SLOTS - 1];
    }
    if (!s->w) {
        s->w = be->alloc(((size_t)m->stage_n[l] + 1) / 2 * 2 * sizeof(uint16_t));
        if (!s->w) {
            fprintf(stderr, "cdp: out of memory for the bfloat16 weights of stage %d\n", l);
            abort();
        }
    }
    if (tag)
        pack(be, m, m->plan[l].first_layer, m->plan[l].end_layer, p, s->w);
    else
        pack(be, m, j, j + 1, p, s->w);
    s->p = p;
    s->tag = tag;
    s->used = ++c->clock;
    return s->w;
}

void cdp_lowp_cache_free(cdp_model *m)
{
    struct cdp_lowp_cache *c = m->lowp_cache;
    if (!c)
        return;
    for (int l = 0; l < CDP_MAX_STAGES; l++)
        for (int k = 0; k < SLOTS; k++)
            if (c->copy[l][k].w)
                c->be->free(c->copy[l][k].w);
    free(c);
    m->lowp_cache = NULL;
}
