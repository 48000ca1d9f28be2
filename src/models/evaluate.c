/* Evaluation: the model's forward in evaluation mode (BatchNorm's running
 * statistics) over a data set, in chunks, on the backend; the loss and the
 * correct predictions summed on the device. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "stage_internal.h"

void cdp_model_evaluate(const cdp_backend *be, const cdp_model *m, const float *params,
                        const uint8_t *pixels, const int32_t *labels, int64_t n,
                        int channels, const float *norm, int chunk, double *loss_sum,
                        double *correct)
{
    *loss_sum = 0.0;
    *correct = 0.0;
    if (n <= 0)
        return;
    if (chunk <= 0)
        chunk = 1024;
    if ((int64_t)chunk > n)
        chunk = (int)n;
    const int L = m->nstages;
    const size_t din = (size_t)cdp_model_in(m);
    float *x = be->alloc((size_t)chunk * din * sizeof(float));
    float *ws = be->alloc(cdp_model_ws_floats(be, m, chunk) * sizeof(float) + 64);
    int32_t *lab = be->alloc((size_t)chunk * sizeof(int32_t));
    double *stats = be->alloc(2 * sizeof(double));
    float **act = calloc((size_t)L, sizeof *act);
    int ok = x && ws && lab && stats && act;
    for (int l = 0; ok && l < L; l++)
        ok = (act[l] = be->alloc(cdp_stage_act_floats(m, l, chunk) * sizeof(float))) != NULL;
    if (!ok) {
        fprintf(stderr, "cdp: evaluation: out of %s memory for chunks of %d samples\n",
                be->name, chunk);
        *loss_sum = NAN;
        *correct = NAN;
        goto out;
    }
    be->zero(stats, 2 * sizeof(double));
    for (int64_t s = 0; s < n; s += chunk) {
        int rows = n - s < chunk ? (int)(n - s) : chunk;
        be->pixels_to_input(rows, channels, (int)(din / (size_t)channels), pixels + (size_t)s * din,
                            norm, x);
        be->to_device(lab, labels + s, (size_t)rows * sizeof(int32_t));
        const float *in = x;
        for (int l = 0; l < L; l++) {
            cdp_stage_fwd(be, m, l, rows, params + m->stage_off[l], in, act[l],
                          l == L - 1 ? lab : NULL, stats, ws, 0, NULL);
            in = cdp_stage_output(m, l, rows, act[l]);
        }
    }
    double h[2];
    be->sync();
    be->to_host(h, stats, sizeof h);
    *loss_sum = h[0];
    *correct = h[1];
out:
    for (int l = 0; act && l < L; l++)
        if (act[l])
            be->free(act[l]);
    free(act);
    if (x) be->free(x);
    if (ws) be->free(ws);
    if (lab) be->free(lab);
    if (stats) be->free(stats);
}
