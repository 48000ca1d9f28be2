#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "io/batch.h"
#include "exec/reference.h"

static void *xalloc(const cdp_backend *be, size_t bytes)
{
    void *p = be->alloc(bytes ? bytes : 64);
    if (!p) abort();
    return p;
}

int cdp_reference_run(const cdp_reference_config *c, float *params, char *err, size_t errlen)
{
    const cdp_backend *be = c->be;
    const cdp_model *m = c->model;
    const int N = c->N, B = c->B, L = m->nstages;
    const size_t bytes = m->nparams * sizeof(float);
    cdp_batcher bat;
    if (cdp_batcher_init(&bat, c->train, N, B, c->seed, c->shuffle)) {
        snprintf(err, errlen, "reference: the training set is smaller than one step");
        return -1;
    }
    /* versions: cur = P(k), prev = P(k-1) (P(-1) = P(0)) */
    float *cur = xalloc(be, bytes), *prev = xalloc(be, bytes), *next = xalloc(be, bytes);
    float *g = xalloc(be, bytes), *gsum = xalloc(be, bytes);
    /* the optimizer state of each stage, as the executor keeps it */
    float *state[CDP_MAX_STAGES];
    for (int l = 0; l < L; l++) {
        const size_t sb = cdp_optim_state_floats(&c->optim, m->stage_n[l]) * sizeof(float);
        state[l] = xalloc(be, sb);
        be->zero(state[l], sb);
    }
    float *ws = xalloc(be, cdp_model_ws_floats(be, m, B) * sizeof(float));
    double *stats = xalloc(be, 2 * sizeof(double));
    float **act = calloc((size_t)L, sizeof *act);
    float **dout = calloc((size_t)L + 1, sizeof *dout);
    size_t in_n = (size_t)B * cdp_model_in(m);
    float *x = xalloc(be, in_n * sizeof(float));
    int32_t *lab = xalloc(be, (size_t)B * sizeof(int32_t));
    uint8_t *hp = malloc(in_n);
    int32_t *hl = malloc((size_t)B * sizeof(int32_t));
    if (!act || !dout || !hp || !hl) abort();
    for (int l = 0; l < L; l++) {
        act[l] = xalloc(be, cdp_stage_act_floats(m, l, B) * sizeof(float));
        dout[l] = xalloc(be, (size_t)B * cdp_stage_in(m, l) * sizeof(float));
    }
    be->to_device(cur, params, bytes);
    be->copy(prev, cur, bytes);
    be->copy(next, cur, bytes);   /* what no stage writes (padding) stays as given */
    be->zero(stats, 2 * sizeof(double));

    for (int64_t k = 0; k < c->steps; k++) {
        for (int i = 0; i < N; i++) {
            cdp_batcher_gather(&bat, k, i, hp, hl);
            be->pixels_to_input(B, c->train->channels, c->train->height * c->train->width, hp, c->train->norm, x);
            be->to_device(lab, hl, (size_t)B * sizeof(int32_t));
            const cdp_layer_ctx ctx = { c->seed, k, (int64_t)i * B, 0 };   /* weights rounded per call */
            const float *w[CDP_MAX_STAGES];
            for (int l = 0; l < L; l++) {
                int lag = cdp_lag(N, L, c->rule, i, l);
                const float *base = (lag && k > 0) ? prev : cur;
                w[l] = base + m->stage_off[l];
            }
            for (int l = 0; l < L; l++) {
                const float *in = l == 0 ? x : cdp_stage_output(m, l - 1, B, act[l - 1]);
                cdp_stage_fwd(be, m, l, B, w[l], in, act[l], l == L - 1 ? lab : NULL, stats, ws, 1,
                              &ctx);
            }
            for (int l = L - 1; l >= 0; l--) {
                const float *in = l == 0 ? x : cdp_stage_output(m, l - 1, B, act[l - 1]);
                float *dst = i == 0 ? gsum + m->stage_off[l] : g + m->stage_off[l];
                cdp_stage_bwd(be, m, l, B, i, w[l], in, act[l], l == L - 1 ? NULL : dout[l + 1],
                              l == 0 ? NULL : dout[l], dst, ws, 0, &ctx);
            }
            if (i > 0)
                be->add(m->nparams, gsum, g);
        }
        /* the 1/N of the mean inside the update: the same bits as scaling
         * first (backend.h sgd) */
        const cdp_optim_step st = cdp_optim_step_at(&c->optim, k);
        for (int l = 0; l < L; l++) {
            const size_t o = m->stage_off[l];
            cdp_stage_update(be, m, l, B, cur + o, next + o, gsum + o, 1.0f / (float)N, state[l],
                             &st, 0, ws);
        }
        float *t = prev;
        prev = cur;
        cur = next;
        next = t;
    }
    be->to_host(params, cur, bytes);

    for (int l = 0; l < L; l++) {
        be->free(act[l]);
        be->free(dout[l]);
        be->free(state[l]);
    }
    free(act); free(dout); free(hp); free(hl);
    be->free(cur); be->free(prev); be->free(next); be->free(g);
    be->free(gsum); be->free(ws); be->free(stats); be->free(x); be->free(lab);
    cdp_batcher_free(&bat);
    return 0;
}

double cdp_max_rel_diff(const float *a, const float *b, size_t n, size_t *nbitdiff)
{
    double dmax = 0, bmax = 0;
    size_t nd = 0;
    for (size_t i = 0; i < n; i++) {
        if (memcmp(&a[i], &b[i], sizeof(float)))
            nd++;
        double d = fabs((double)a[i] - (double)b[i]);
        if (isnan(d)) d = INFINITY;
        if (d > dmax) dmax = d;
        if (fabs((double)b[i]) > bmax) bmax = fabs((double)b[i]);
    }
    if (nbitdiff) *nbitdiff = nd;
    return bmax > 0 ? dmax / bmax : dmax;
}
