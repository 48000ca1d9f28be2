/* The model: an MLP of Linear layers with ReLU between them, grouped into
 * contiguous stages; forward and backward of one stage through the backend.
 *
 * Parameter layout (floats): W_0, b_0, W_1, b_1, ..., layer after layer.
 * Stages are contiguous runs of layers, so stage l is the contiguous range
 * [w_off[first_l], b_off[last_l] + out_last). */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cdp/model.h"
#include "cdp/rng.h"

#define MAX_WIDTH 65536

/* ------------------------------------------------------------ FLOPs */

/* FLOPs of forward + backward of layer j for B samples: forward sgemm and
 * bias, backward dW sgemm and bias column sums, and the dx sgemm except for
 * the model's first layer (nobody needs dLoss/dinput). */
static double layer_flops(const cdp_model *m, int j, int B)
{
    double in = m->dims[j], out = m->dims[j + 1], b = B;
    double mm = 2.0 * b * in * out;
    return mm * (j == 0 ? 2.0 : 3.0) + 2.0 * b * out;
}

double cdp_stage_flops(const cdp_model *m, int l, int B)
{
    double f = 0.0;
    for (int j = m->stage_first[l]; j < m->stage_first[l + 1]; j++)
        f += layer_flops(m, j, B);
    return f;
}

/* ------------------------------------------------------------ partition */

/* Splits the layers into L contiguous non-empty stages minimising the
 * largest stage cost; among those, the one with the smallest sum of squared
 * stage costs; among those, the first found (smallest split points).
 * Dynamic programme over (stages used, layers covered). */
static void partition(cdp_model *m, int L)
{
    int n = m->nlayers;
    double pre[CDP_MAX_LAYERS + 1];
    pre[0] = 0.0;
    for (int j = 0; j < n; j++)
        pre[j + 1] = pre[j] + layer_flops(m, j, 1);

    double bmax[CDP_MAX_LAYERS + 1][CDP_MAX_LAYERS + 1];
    double bsq[CDP_MAX_LAYERS + 1][CDP_MAX_LAYERS + 1];
    int from[CDP_MAX_LAYERS + 1][CDP_MAX_LAYERS + 1];
    for (int j = 1; j <= n; j++) {
        double c = pre[j];
        bmax[1][j] = c;
        bsq[1][j] = c * c;
        from[1][j] = 0;
    }
    for (int k = 2; k <= L; k++)
        for (int j = k; j <= n; j++) {
            int best = -1;
            double bm = 0.0, bs = 0.0;
            for (int i = k - 1; i <= j - 1; i++) {
                double c = pre[j] - pre[i];
                double mx = bmax[k - 1][i] > c ? bmax[k - 1][i] : c;
                double sq = bsq[k - 1][i] + c * c;
                if (best < 0 || mx < bm || (mx == bm && sq < bs)) {
                    best = i;
                    bm = mx;
                    bs = sq;
                }
            }
            bmax[k][j] = bm;
            bsq[k][j] = bs;
            from[k][j] = best;
        }
    m->stage_first[L] = n;
    for (int k = L, j = n; k >= 1; k--) {
        j = from[k][j];
        m->stage_first[k - 1] = j;
    }
}

/* ------------------------------------------------------------ parse */

int cdp_model_parse(const char *spec, int stages, cdp_model *m, char *err, size_t errlen)
{
    memset(m, 0, sizeof *m);
    if (!spec)
        spec = "";
    const char *p = spec;
    if (strncmp(p, "mlp:", 4) != 0) {
        snprintf(err, errlen, "--model: expected mlp:IN-H1-...-OUT, got '%.200s'", spec);
        return -1;
    }
    p += 4;
    int nd = 0;
    for (;;) {
        if (!isdigit((unsigned char)*p)) {
            snprintf(err, errlen, "--model: expected mlp:IN-H1-...-OUT, got '%.200s'", spec);
            return -1;
        }
        const char *tok = p;
        long v = 0;
        while (isdigit((unsigned char)*p)) {
            if (v <= MAX_WIDTH)
                v = v * 10 + (*p - '0');
            p++;
        }
        if (v < 1 || v > MAX_WIDTH) {
            int len = (int)(p - tok) < 24 ? (int)(p - tok) : 24;
            snprintf(err, errlen, "--model: width %.*s out of range 1..%d in '%.200s'",
                     len, tok, MAX_WIDTH, spec);
            return -1;
        }
        if (nd > CDP_MAX_LAYERS) {
            snprintf(err, errlen, "--model: too many layers in '%.200s' (at most %d)",
                     spec, CDP_MAX_LAYERS);
            return -1;
        }
        m->dims[nd++] = (int)v;
        if (*p == '\0')
            break;
        if (*p != '-') {
            snprintf(err, errlen, "--model: expected mlp:IN-H1-...-OUT, got '%.200s'", spec);
            return -1;
        }
        p++;
    }
    if (nd < 2) {
        snprintf(err, errlen, "--model: expected mlp:IN-H1-...-OUT with at least an input and "
                 "an output width, got '%.200s'", spec);
        return -1;
    }
    m->nlayers = nd - 1;

    size_t off = 0;
    for (int j = 0; j < m->nlayers; j++) {
        m->w_off[j] = off;
        off += (size_t)m->dims[j] * (size_t)m->dims[j + 1];
        m->b_off[j] = off;
        off += (size_t)m->dims[j + 1];
    }
    m->nparams = off;

    if (stages > m->nlayers) {
        snprintf(err, errlen, "--stages: %d stages for a model of %d layer%s "
                 "(at most one stage per layer)", stages, m->nlayers,
                 m->nlayers == 1 ? "" : "s");
        return -1;
    }
    if (stages <= 0) {
        m->nstages = m->nlayers;
        for (int j = 0; j <= m->nlayers; j++)
            m->stage_first[j] = j;
    } else {
        m->nstages = stages;
        partition(m, stages);
    }
    for (int l = 0; l < m->nstages; l++) {
        int a = m->stage_first[l], b = m->stage_first[l + 1] - 1;
        m->stage_off[l] = m->w_off[a];
        m->stage_n[l] = m->b_off[b] + (size_t)m->dims[b + 1] - m->w_off[a];
    }
    return 0;
}

/* ------------------------------------------------------------ init */

/* W_j[k] = (2u - 1) * bound, u = cdp_rand_unit(seed, 2j, k);
 * b_j[k] = (2u - 1) * bound, u = cdp_rand_unit(seed, 2j + 1, k);
 * bound = 1 / sqrtf(in_j); all in float. */
void cdp_model_init(const cdp_model *m, uint64_t seed, float *host_params)
{
    for (int j = 0; j < m->nlayers; j++) {
        float bound = 1.0f / sqrtf((float)m->dims[j]);
        size_t nw = (size_t)m->dims[j] * (size_t)m->dims[j + 1];
        float *W = host_params + m->w_off[j];
        float *b = host_params + m->b_off[j];
        for (size_t k = 0; k < nw; k++)
            W[k] = (2.0f * cdp_rand_unit(seed, 2u * (uint64_t)j, k) - 1.0f) * bound;
        for (size_t k = 0; k < (size_t)m->dims[j + 1]; k++)
            b[k] = (2.0f * cdp_rand_unit(seed, 2u * (uint64_t)j + 1u, k) - 1.0f) * bound;
    }
}

/* ------------------------------------------------------------ sizes */

size_t cdp_stage_act_floats(const cdp_model *m, int l, int B)
{
    size_t n = 0;
    for (int j = m->stage_first[l]; j < m->stage_first[l + 1]; j++)
        n += (size_t)B * (size_t)m->dims[j + 1];
    return n;
}

/* Two ping-pong buffers, each as large as the widest layer output. */
size_t cdp_model_ws_floats(const cdp_model *m, int B)
{
    int w = 0;
    for (int j = 1; j <= m->nlayers; j++)
        if (m->dims[j] > w)
            w = m->dims[j];
    return 2 * (size_t)B * (size_t)w;
}

int cdp_stage_in(const cdp_model *m, int l)
{
    return m->dims[m->stage_first[l]];
}

int cdp_stage_out(const cdp_model *m, int l)
{
    return m->dims[m->stage_first[l + 1]];
}

int cdp_stage_bwd_reads_act(const cdp_model *m, int l)
{
    return l == m->nstages - 1 || m->stage_first[l + 1] - m->stage_first[l] > 1;
}

float *cdp_stage_output(const cdp_model *m, int l, int B, float *act)
{
    size_t n = 0;
    for (int j = m->stage_first[l]; j < m->stage_first[l + 1] - 1; j++)
        n += (size_t)B * (size_t)m->dims[j + 1];
    return act + n;
}

int cdp_model_accumulate_exact(const cdp_backend *be, const cdp_model *m, int B)
{
    if (!be->accumulate_exact)
        return 0;
    for (int j = 0; j < m->nlayers; j++)
        if (!be->accumulate_exact(B, m->dims[j], m->dims[j + 1]))
            return 0;
    return 1;
}

/* ------------------------------------------------------------ stage */

void cdp_stage_fwd(const cdp_backend *be, const cdp_model *m, int l, int B,
                   const float *stage_params, const float *x, float *act,
                   const int32_t *labels, double *stats)
{
    size_t base = m->stage_off[l];
    const float *in = x;
    float *y = act;
    for (int j = m->stage_first[l]; j < m->stage_first[l + 1]; j++) {
        int din = m->dims[j], dout = m->dims[j + 1];
        be->linear_fwd(B, din, dout, in, stage_params + (m->w_off[j] - base),
                       stage_params + (m->b_off[j] - base), y, j < m->nlayers - 1);
        in = y;
        y += (size_t)B * (size_t)dout;
    }
    if (l == m->nstages - 1)
        be->xent(B, m->dims[m->nlayers], (float *)in, labels, stats);
}

/* Walks the stage's layers in reverse.  dy of the last layer: the dlogits
 * in act (last stage), or dout masked by the ReLU of the stage output (copied
 * into ws first, dout is read-only).  The dx of an inner layer goes to the
 * other ws buffer and, masked by the ReLU of the previous layer's output,
 * becomes that layer's dy; the dx of the stage's first layer goes to dx. */
void cdp_stage_bwd(const cdp_backend *be, const cdp_model *m, int l, int B,
                   const float *stage_params, const float *x, float *act,
                   const float *dout, float *dx, float *grad, float *ws, int accumulate)
{
    int first = m->stage_first[l], last = m->stage_first[l + 1] - 1;
    size_t base = m->stage_off[l];
    size_t half = cdp_model_ws_floats(m, B) / 2;
    float *buf[2] = {ws, ws + half};
    int cur = 0;

    /* act offsets of each layer's output */
    size_t aoff[CDP_MAX_LAYERS] = {0};
    size_t o = 0;
    for (int j = first; j <= last; j++) {
        aoff[j - first] = o;
        o += (size_t)B * (size_t)m->dims[j + 1];
    }

    /* dout arrives already masked by relu'(output): the next stage applied it
     * to its dx, as this stage does below, so no backward reads its own
     * stage output (cdp_stage_bwd_reads_act) */
    const float *dy = last == m->nlayers - 1 ? act + aoff[last - first] : dout;
    for (int j = last; j >= first; j--) {
        int din = m->dims[j], dd = m->dims[j + 1];
        const float *xin = j == first ? x : act + aoff[j - 1 - first];
        float *dxo = j == first ? dx : buf[cur ^ 1];
        /* xin is a ReLU output except for the network's input */
        be->linear_bwd(B, din, dd, xin, stage_params + (m->w_off[j] - base), dy, dxo,
                       grad + (m->w_off[j] - base), grad + (m->b_off[j] - base),
                       j > first || (dx && l > 0), accumulate);
        if (j > first) {
            cur ^= 1;
            dy = dxo;
        }
    }
}

/* ------------------------------------------------------------ evaluation */

void cdp_model_evaluate(const cdp_backend *be, const cdp_model *m, const float *params,
                        const uint8_t *pixels, const int32_t *labels, int64_t n,
                        int channels, const float *norm,
                        int chunk, double *loss_sum, double *correct)
{
    *loss_sum = 0.0;
    *correct = 0.0;
    if (n <= 0)
        return;
    if (chunk <= 0)
        chunk = 1024;
    if ((int64_t)chunk > n)
        chunk = (int)n;
    int w = 0;
    for (int j = 1; j <= m->nlayers; j++)
        if (m->dims[j] > w)
            w = m->dims[j];
    size_t din = (size_t)m->dims[0];
    float *x = be->alloc((size_t)chunk * din * sizeof(float));
    float *a0 = be->alloc((size_t)chunk * (size_t)w * sizeof(float));
    float *a1 = be->alloc((size_t)chunk * (size_t)w * sizeof(float));
    int32_t *lab = be->alloc((size_t)chunk * sizeof(int32_t));
    double *stats = be->alloc(2 * sizeof(double));
    if (!x || !a0 || !a1 || !lab || !stats) {
        fprintf(stderr, "cdp: evaluation: out of %s memory for chunks of %d samples\n",
                be->name, chunk);
        *loss_sum = NAN;
        *correct = NAN;
        goto out;
    }
    be->zero(stats, 2 * sizeof(double));
    for (int64_t s = 0; s < n; s += chunk) {
        int rows = n - s < chunk ? (int)(n - s) : chunk;
        be->pixels_to_input(rows, channels, (int)din / channels, pixels + (size_t)s * din, norm, x);
        be->to_device(lab, labels + s, (size_t)rows * sizeof(int32_t));
        const float *in = x;
        float *bufs[2] = {a0, a1};
        for (int j = 0; j < m->nlayers; j++) {
            float *y = bufs[j & 1];
            be->linear_fwd(rows, m->dims[j], m->dims[j + 1], in, params + m->w_off[j],
                           params + m->b_off[j], y, j < m->nlayers - 1);
            in = y;
        }
        be->xent(rows, m->dims[m->nlayers], (float *)in, lab, stats);
    }
    double h[2];
    be->sync();
    be->to_host(h, stats, sizeof h);
    *loss_sum = h[0];
    *correct = h[1];
out:
    if (x)
        be->free(x);
    if (a0)
        be->free(a0);
    if (a1)
        be->free(a1);
    if (lab)
        be->free(lab);
    if (stats)
        be->free(stats);
}
