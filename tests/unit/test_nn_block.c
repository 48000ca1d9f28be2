/* Finite-difference checks of whole residual blocks with BatchNorm, and of
 * a Vision Transformer's embedding, encoder block and head, through the
 * model's stage API (cdp_model_build, cdp_stage_fwd, cdp_stage_bwd,
 * cdp_stage_update) on the CPU backend.
 *
 * Each case builds a ResNet with one block per stage and takes one stage:
 * the stem (conv, bn, relu, and max pool for the ImageNet stem), a residual
 * block with an identity shortcut, one with a downsample shortcut (BasicBlock
 * and Bottleneck, stride 2 and stride 1), or the head (avgpool, flatten, fc
 * and the loss).  The test has its own forward of the stage in double,
 * written from the layer list with direct loops, and checks:
 *   1. cdp_stage_fwd's tensors against it (relative 1e-5 of the max);
 *   2. the parameter gradient and dx of cdp_stage_bwd against central
 *      finite differences of the double objective (f = sum(out * dout) for
 *      a block, the mean cross-entropy for the head): every element of
 *      small tensors, a random sample of large ones (at least 200 parameters
 *      per stage, spread over its tensors), each element within 1e-3 of
 *      max(|fd|, 1e-2 max|fd| over the tensor); and one random +-1
 *      direction per tensor over all of it (within 1e-4 of the L1 norm);
 *      the ReLU patterns and max pool choices are those of the unperturbed
 *      point (frozen), so a perturbation never crosses a kink, and the
 *      double forward keeps every pre-activation and max pool gap above
 *      1e-5, so that float and double take the same decisions;
 *   3. the BatchNorm statistics in the worker's slot of the gradient tail
 *      (f64_unpack) against the mean and M2, in double, of the float input
 *      the BatchNorm read (relative 1e-12), the rest of the tail zero;
 *   4. accumulate = 1 for a second worker: head summed (bitwise where the
 *      backend says its in-place sums are exact), its slot written, the
 *      first slot intact; the gradient the same bits with dx NULL;
 *   5. cdp_stage_update with N = 2 workers: SGD of the head and the running
 *      statistics from both micro-batches (0.9 old + 0.1 new, unbiased
 *      variance), computed here in double (relative 1e-6).
 * One build and one initialisation per model; about 8 s in all.
 * A stage whose input is a ReLU output of the previous stage gets dx masked
 * by that ReLU (x > 0), and a stage ending with a ReLU leaves its backward
 * to the next stage, so it gets dout already masked by its output: the test
 * passes dout * (out > 0) and differentiates sum(relu(z) * dout). */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "util/clock.h"
#include "models/model.h"
#include "util/rng.h"
#include "../lib/check_util.h"
#include "../lib/ref_norm.h"
#include "../lib/check_run.h"

/* ck_assert_msg without its bookkeeping on success (a write per passing
 * check, too slow in loops over every element) */
#define REQUIRE(cond, ...)                 \
    do {                                   \
        if (!(cond))                       \
            ck_abort_msg(__VA_ARGS__);     \
    } while (0)

#define FD_H 1e-6
#define BN_EPS 1e-5

/* ------------------------------------------------------------ helpers */

static double unit(uint64_t stream, uint64_t i)
{
    return (double)cdp_rand_unit(2024, stream, i);
}

/* k distinct indices of [0, n) (all of them when k >= n), sorted */
static size_t pick(size_t n, size_t k, uint64_t stream, size_t *out)
{
    if (k >= n) {
        for (size_t i = 0; i < n; i++)
            out[i] = i;
        return n;
    }
    size_t *all = malloc(n * sizeof *all);
    ck_assert_ptr_nonnull(all);
    for (size_t i = 0; i < n; i++)
        all[i] = i;
    for (size_t i = 0; i < k; i++) {   /* partial Fisher-Yates */
        size_t j = i + (size_t)(cdp_rand_u64(31, stream, i) % (uint64_t)(n - i));
        size_t t = all[i]; all[i] = all[j]; all[j] = t;
    }
    for (size_t i = 0; i < k; i++)     /* insertion sort, k is small */
        for (size_t j = i; j > 0 && all[j - 1] > all[j]; j--) {
            size_t t = all[j]; all[j] = all[j - 1]; all[j - 1] = t;
        }
    memcpy(out, all, k * sizeof *out);
    free(all);
    return k;
}

/* worst error ratios seen, reported at the end of each case */
static double worst_glob, worst_el;

/* Float gradient a against finite differences f on n checked elements:
 * |a - f| <= tol * max(|f_k|, floor_rel * max|f|, 1e-7). */
static void check_fd(const char *what, const float *a, const double *f, const size_t *idx,
                     size_t n, double tol, double floor_rel)
{
    double mx = 0.0;
    for (size_t i = 0; i < n; i++)
        mx = fmax(mx, fabs(f[i]));
    REQUIRE(mx > 0.0, "%s: every finite difference is 0", what);
    for (size_t i = 0; i < n; i++) {
        double av = (double)a[idx ? idx[i] : i];
        double d = fabs(av - f[i]);
        double s = fmax(fmax(fabs(f[i]), floor_rel * mx), 1e-7);
        worst_glob = fmax(worst_glob, d / mx);
        worst_el = fmax(worst_el, d / s / tol);
        if (!(d <= tol * s))
            ck_abort_msg("%s[%zu]: analytic %.9g vs finite difference %.9g (err %.3g, "
                         "%.3g of max %.3g)", what, idx ? idx[i] : i, av, f[i], d, d / mx, mx);
    }
}

/* ------------------------------------------------------------ the stage in double */

/* One trainable tensor of the stage, as this test counts it. */
typedef struct ptensor {
    char name[80];
    int layer;
    size_t off, n;   /* floats, stage-relative */
} ptensor;

typedef struct ref {
    const cdp_model *m;
    int l, B, first, end, last;
    int nn;                       /* nodes */
    double **base, **pert;        /* per node produced in the stage: B * size */
    double **cur;                 /* the values of the run going on */
    unsigned char **mask;         /* per ReLU layer: the frozen pattern */
    int32_t **arg;                /* per max pool layer: the frozen choices */
    double minpre, mingap;        /* recorded: closest pre-activation to 0, max pool gap */
    int nrelu, npool;
} ref;

static size_t nsize(const cdp_model *m, int t) { return cdp_shape_n(m->nodes[t].shape); }

static void ref_init(ref *r, const cdp_model *m, int l, int B)
{
    memset(r, 0, sizeof *r);
    r->m = m;
    r->l = l;
    r->B = B;
    r->first = m->plan[l].first_layer;
    r->end = m->plan[l].end_layer;
    r->last = l == m->nstages - 1;
    r->nn = m->nnodes;
    r->base = calloc((size_t)r->nn, sizeof *r->base);
    r->pert = calloc((size_t)r->nn, sizeof *r->pert);
    r->cur = calloc((size_t)r->nn, sizeof *r->cur);
    r->mask = calloc((size_t)m->nlayers, sizeof *r->mask);
    r->arg = calloc((size_t)m->nlayers, sizeof *r->arg);
    ck_assert(r->base && r->pert && r->cur && r->mask && r->arg);
    for (int j = r->first; j < r->end; j++) {
        const cdp_layer *ly = &m->layers[j];
        size_t n = (size_t)B * nsize(m, ly->out);
        r->base[ly->out] = dbuf(n);
        r->pert[ly->out] = dbuf(n);
        if (ly->kind == CDP_LAYER_RELU) {
            r->mask[j] = calloc(n, 1);
            ck_assert_ptr_nonnull(r->mask[j]);
        }
        if (ly->kind == CDP_LAYER_MAXPOOL2D) {
            r->arg[j] = calloc(n, sizeof(int32_t));
            ck_assert_ptr_nonnull(r->arg[j]);
        }
    }
}

static void ref_free(ref *r)
{
    for (int t = 0; t < r->nn; t++) {
        free(r->base[t]);
        free(r->pert[t]);
    }
    for (int j = 0; j < r->m->nlayers; j++) {
        free(r->mask[j]);
        free(r->arg[j]);
    }
    free(r->base); free(r->pert); free(r->cur); free(r->mask); free(r->arg);
}

/* y[B,O,OH,OW] = conv(x[B,C,H,W], W[O,C,k,k]) + bias, zero padding: per
 * sample the transposed patch matrix cols[OH*OW][C*k*k] (zeros where the
 * window leaves the image), then one dot product per output */
static void conv_d(int B, cdp_shape xs, cdp_shape ys, int k, int s, int pad, const double *x,
                   const double *Wt, const double *bias, double *y)
{
    const int C = xs.c, H = xs.h, W = xs.w, O = ys.c, OH = ys.h, OW = ys.w;
    const size_t K = (size_t)C * k * k, Q = (size_t)OH * OW;
    double *cols = malloc(sizeof(double) * K * Q);
    ck_assert_ptr_nonnull(cols);
    for (int b = 0; b < B; b++) {
        const double *xb = x + (size_t)b * C * H * W;
        for (int oh = 0; oh < OH; oh++)
            for (int ow = 0; ow < OW; ow++) {
                double *cq = cols + ((size_t)oh * OW + ow) * K;
                for (int c = 0; c < C; c++)
                    for (int kh = 0; kh < k; kh++)
                        for (int kw = 0; kw < k; kw++) {
                            int ih = oh * s + kh - pad, iw = ow * s + kw - pad;
                            *cq++ = ih < 0 || ih >= H || iw < 0 || iw >= W
                                        ? 0.0 : xb[((size_t)c * H + ih) * W + iw];
                        }
            }
        for (int o = 0; o < O; o++) {
            const double *wo = Wt + (size_t)o * K;
            double *yo = y + ((size_t)b * O + o) * Q;
            for (size_t q = 0; q < Q; q++) {
                const double *cq = cols + q * K;
                double a0 = 0.0, a1 = 0.0, a2 = 0.0, a3 = 0.0;
                size_t r = 0;
                for (; r + 4 <= K; r += 4) {
                    a0 += wo[r] * cq[r];
                    a1 += wo[r + 1] * cq[r + 1];
                    a2 += wo[r + 2] * cq[r + 2];
                    a3 += wo[r + 3] * cq[r + 3];
                }
                for (; r < K; r++)
                    a0 += wo[r] * cq[r];
                yo[q] = (bias ? bias[o] : 0.0) + ((a0 + a1) + (a2 + a3));
            }
        }
    }
    free(cols);
}

/* the values a layer reads: the stage input or the run's node */
static const double *rd(const ref *r, int t, const double *x)
{
    if (r->cur[t])
        return r->cur[t];
    REQUIRE(r->m->nodes[t].root == r->m->nodes[r->m->plan[r->l].in_tensor].root,
            "node %d read by stage %d is neither produced there nor its input", t, r->l);
    return x;
}

/* Forward of layers [from, end) of the stage at parameters P (stage
 * relative, double) and input x: record = 1 is the unperturbed run (all
 * into base, patterns recorded); else the layers from `from` on write into
 * pert and read the earlier ones from base, with the recorded patterns. */
static void ref_fwd(ref *r, const double *P, const double *x, int from, int record)
{
    const cdp_model *m = r->m;
    const int B = r->B;
    if (record) {
        from = r->first;
        r->minpre = INFINITY;
        r->mingap = INFINITY;
    }
    for (int j = r->first; j < r->end; j++) {
        int t = m->layers[j].out;
        r->cur[t] = record || j < from ? r->base[t] : r->pert[t];
    }
    for (int j = from; j < r->end; j++) {
        const cdp_layer *ly = &m->layers[j];
        const double *a = rd(r, ly->in, x);
        double *y = r->cur[ly->out];
        const cdp_shape xs = ly->xs, ys = ly->ys;
        const size_t nx = (size_t)B * cdp_shape_n(xs), ny = (size_t)B * cdp_shape_n(ys);
        switch (ly->kind) {
        case CDP_LAYER_CONV2D: {
            const double *Wt = P + ly->p_off;
            const double *bias =
                ly->bias ? Wt + (size_t)ys.c * xs.c * ly->k * ly->k : NULL;
            conv_d(B, xs, ys, ly->k, ly->stride, ly->pad, a, Wt, bias, y);
            break;
        }
        case CDP_LAYER_BATCHNORM2D: {
            const int C = xs.c, HW = xs.h * xs.w;
            const double *g = P + ly->p_off, *be = g + C;
            for (int c = 0; c < C; c++) {
                double mean, var;
                ref_bn_stats(B, C, HW, a, c, &mean, &var);
                double is = 1.0 / sqrt(var + BN_EPS);
                for (int b = 0; b < B; b++)
                    for (int p = 0; p < HW; p++) {
                        size_t q = ((size_t)b * C + c) * HW + p;
                        y[q] = (a[q] - mean) * is * g[c] + be[c];
                    }
            }
            break;
        }
        case CDP_LAYER_RELU:
            for (size_t q = 0; q < ny; q++) {
                if (record) {
                    r->mask[j][q] = a[q] > 0.0;
                    r->minpre = fmin(r->minpre, fabs(a[q]));
                }
                y[q] = r->mask[j][q] ? a[q] : 0.0;
            }
            break;
        case CDP_LAYER_MAXPOOL2D: {
            const int H = xs.h, W = xs.w, OH = ys.h, OW = ys.w, k = ly->k, s = ly->stride;
            for (int pl = 0; pl < B * xs.c; pl++) {
                const double *xp = a + (size_t)pl * H * W;
                for (int oh = 0; oh < OH; oh++)
                    for (int ow = 0; ow < OW; ow++) {
                        size_t q = (size_t)pl * OH * OW + (size_t)oh * OW + ow;
                        if (record) {
                            /* the first maximum over the window's inside */
                            double best = -INFINITY, second = -INFINITY;
                            int at = -1;
                            for (int ih = oh * s - ly->pad; ih < oh * s - ly->pad + k; ih++)
                                for (int iw = ow * s - ly->pad; iw < ow * s - ly->pad + k; iw++) {
                                    if (ih < 0 || ih >= H || iw < 0 || iw >= W)
                                        continue;
                                    double v = xp[ih * W + iw];
                                    if (v > best) {
                                        second = best;
                                        best = v;
                                        at = ih * W + iw;
                                    } else if (v > second) {
                                        second = v;
                                    }
                                }
                            REQUIRE(at >= 0, "empty max pool window");
                            r->arg[j][q] = at;
                            /* a tie of positive values would make the choice ambiguous */
                            if (best > 0.0 && second > -INFINITY)
                                r->mingap = fmin(r->mingap, best - second);
                        }
                        y[q] = xp[r->arg[j][q]];
                    }
            }
            break;
        }
        case CDP_LAYER_AVGPOOL: {
            const int HW = xs.h * xs.w;
            for (int pl = 0; pl < B * xs.c; pl++) {
                double sum = 0.0;
                for (int p = 0; p < HW; p++)
                    sum += a[(size_t)pl * HW + p];
                y[pl] = sum / HW;
            }
            break;
        }
        case CDP_LAYER_FLATTEN:
            memcpy(y, a, nx * sizeof(double));
            break;
        case CDP_LAYER_LINEAR: {
            /* tokens: one row per token */
            const int rows = ly->tokens ? B * xs.c * xs.h : B;
            const int in = ly->tokens ? xs.w : (int)cdp_shape_n(xs);
            const int out = ly->tokens ? ys.w : ys.c;
            const double *Wt = P + ly->p_off, *bias = Wt + (size_t)out * in;
            for (int b = 0; b < rows; b++)
                for (int o = 0; o < out; o++) {
                    double sum = bias[o];
                    for (int i = 0; i < in; i++)
                        sum += a[(size_t)b * in + i] * Wt[(size_t)o * in + i];
                    y[(size_t)b * out + o] = sum;
                }
            break;
        }
        case CDP_LAYER_ADD: {
            const double *a2 = rd(r, ly->in2, x);
            for (size_t q = 0; q < ny; q++)
                y[q] = a[q] + a2[q];
            break;
        }
        case CDP_LAYER_LAYERNORM: {
            const int D = xs.w;
            const size_t R = (size_t)B * xs.c * xs.h;
            const double *g = P + ly->p_off, *be = g + D;
            for (size_t q = 0; q < R; q++) {
                const double *xr = a + q * D;
                double mean, var;
                ref_ln_stats(D, xr, &mean, &var);
                double is = 1.0 / sqrt(var + (double)ly->eps);
                for (int d = 0; d < D; d++)
                    y[q * D + d] = (xr[d] - mean) * is * g[d] + be[d];
            }
            break;
        }
        case CDP_LAYER_GELU:
            for (size_t q = 0; q < ny; q++)
                y[q] = a[q] * 0.5 * (1.0 + erf(a[q] / sqrt(2.0)));
            break;
        case CDP_LAYER_ATTENTION: {
            const int T = xs.c * xs.h, D = xs.w, H = ly->heads, d = D / H;
            const double *Wi = P + ly->p_off, *bi = Wi + 3 * (size_t)D * D;
            const double *Wo = bi + 3 * D, *bo = Wo + (size_t)D * D;
            double *qkv = dbuf((size_t)T * 3 * D), *O = dbuf((size_t)T * D), *S = dbuf(T);
            for (int b = 0; b < B; b++) {
                const double *xb = a + (size_t)b * T * D;
                for (int t = 0; t < T; t++)
                    for (int o = 0; o < 3 * D; o++) {
                        double sum = bi[o];
                        for (int i = 0; i < D; i++)
                            sum += xb[(size_t)t * D + i] * Wi[(size_t)o * D + i];
                        qkv[(size_t)t * 3 * D + o] = sum;
                    }
                for (int h = 0; h < H; h++)
                    for (int t = 0; t < T; t++) {
                        double mx = -INFINITY, z = 0.0;
                        for (int u = 0; u < T; u++) {
                            double dot = 0.0;
                            for (int e = 0; e < d; e++)
                                dot += qkv[(size_t)t * 3 * D + h * d + e] *
                                       qkv[(size_t)u * 3 * D + D + h * d + e];
                            S[u] = dot / sqrt((double)d);
                            mx = fmax(mx, S[u]);
                        }
                        for (int u = 0; u < T; u++)
                            z += (S[u] = exp(S[u] - mx));
                        for (int e = 0; e < d; e++) {
                            double sum = 0.0;
                            for (int u = 0; u < T; u++)
                                sum += S[u] / z * qkv[(size_t)u * 3 * D + 2 * D + h * d + e];
                            O[(size_t)t * D + h * d + e] = sum;
                        }
                    }
                for (int t = 0; t < T; t++)
                    for (int o = 0; o < D; o++) {
                        double sum = bo[o];
                        for (int i = 0; i < D; i++)
                            sum += O[(size_t)t * D + i] * Wo[(size_t)o * D + i];
                        y[((size_t)b * T + t) * D + o] = sum;
                    }
            }
            free(qkv); free(O); free(S);
            break;
        }
        case CDP_LAYER_CLASS_TOKEN: {
            const int D = xs.c, n = xs.h * xs.w;
            const double *cls = P + ly->p_off;
            for (int b = 0; b < B; b++)
                for (int dd = 0; dd < D; dd++) {
                    y[(size_t)b * (n + 1) * D + dd] = cls[dd];
                    for (int i = 0; i < n; i++)
                        y[((size_t)b * (n + 1) + 1 + i) * D + dd] = a[((size_t)b * D + dd) * n + i];
                }
            break;
        }
        case CDP_LAYER_POS_EMBED: {
            const size_t n = cdp_shape_n(xs);
            const double *pos = P + ly->p_off;
            for (size_t q = 0; q < ny; q++)
                y[q] = a[q] + pos[q % n];
            break;
        }
        case CDP_LAYER_TOKEN_SELECT: {
            const size_t n = cdp_shape_n(xs);
            for (int b = 0; b < B; b++)
                for (int dd = 0; dd < xs.w; dd++)
                    y[(size_t)b * xs.w + dd] = a[(size_t)b * n + dd];
            break;
        }
        default:
            ck_abort_msg("layer kind %d not in this test", (int)ly->kind);
        }
    }
}

/* The objective of the run just made: sum(out * dout) or the mean
 * cross-entropy; dlogits (last stage, optional) = (softmax - onehot) / B. */
static double ref_obj(const ref *r, const double *x, const double *dout, const int32_t *lab,
                      double *dlogits)
{
    const cdp_model *m = r->m;
    const int t = m->plan[r->l].out_tensor;
    const double *o = rd(r, t, x);
    const size_t n = nsize(m, t);
    double f = 0.0;
    if (!r->last) {
        for (size_t q = 0; q < (size_t)r->B * n; q++)
            f += o[q] * dout[q];
        return f;
    }
    const int C = (int)n;
    for (int b = 0; b < r->B; b++) {
        const double *z = o + (size_t)b * C;
        double mx = z[0], s = 0.0;
        for (int c = 1; c < C; c++)
            mx = fmax(mx, z[c]);
        for (int c = 0; c < C; c++)
            s += exp(z[c] - mx);
        f += mx + log(s) - z[lab[b]];
        if (dlogits)
            for (int c = 0; c < C; c++)
                dlogits[(size_t)b * C + c] =
                    (exp(z[c] - mx) / s - (c == lab[b] ? 1.0 : 0.0)) / r->B;
    }
    return f / r->B;
}

static double ref_f(ref *r, const double *P, const double *x, int from, const double *dout,
                    const int32_t *lab)
{
    ref_fwd(r, P, x, from, 0);
    return ref_obj(r, x, dout, lab, NULL);
}

/* ------------------------------------------------------------ the cases */

enum role { STEM, IDENTITY, DOWNSAMPLE, HEAD, EMBED, ENCODER, VIT_HEAD };
static const char *role_name[] = { "stem", "identity block", "downsample block", "head",
                                   "embedding", "encoder block", "head" };

typedef struct block_case {
    const char *spec;
    cdp_shape in;
    int B;
    int stage;          /* -1: the last */
    enum role role;
    const char *first;  /* the name of the stage's first layer */
    int params;         /* parameters checked one by one, spread over the tensors */
    int inputs;         /* input elements checked one by one (all if fewer) */
} block_case;

static const block_case cases[] = {
    /* He et al.'s CIFAR ResNet on an odd, non-square 2x9x7 input */
    { "resnet20", { 2, 9, 7 }, 3, 0, STEM, "conv1", 1000, 1000 },
    { "resnet20", { 2, 9, 7 }, 3, 1, IDENTITY, "layer1.0.conv1", 400, 240 },
    { "resnet20", { 2, 9, 7 }, 3, 4, DOWNSAMPLE, "layer2.0.conv1", 400, 240 },
    { "resnet20", { 2, 9, 7 }, 3, -1, HEAD, "avgpool", 1000, 1000 },
    /* torchvision widths, small-image stem: stride-2 BasicBlock */
    { "resnet18-cifar", { 1, 8, 8 }, 2, 3, DOWNSAMPLE, "layer2.0.conv1", 210, 50 },
    /* Bottleneck: the stride-1 projection of layer1.0, the identity of
     * layer1.1, the stride on the 3x3 conv of layer2.0 */
    { "resnet50-cifar", { 1, 4, 4 }, 3, 1, DOWNSAMPLE, "layer1.0.conv1", 210, 60 },
    { "resnet50-cifar", { 1, 4, 4 }, 3, 2, IDENTITY, "layer1.1.conv1", 210, 60 },
    { "resnet50-cifar", { 1, 4, 4 }, 3, 4, DOWNSAMPLE, "layer2.0.conv1", 210, 50 },
    /* ImageNet stem: 7x7/2 conv, bn, relu, 3x3/2 max pool with padding */
    { "resnet18", { 3, 16, 16 }, 2, 0, STEM, "conv1", 300, 200 },
    { "resnet18", { 3, 16, 16 }, 2, 1, IDENTITY, "layer1.0.conv1", 210, 60 },
    { "resnet18", { 3, 16, 16 }, 2, -1, HEAD, "avgpool", 250, 1024 },
    /* a ViT on a non-square 2x6x4 image: 2x2 patches, 7 tokens of 8
     * features, 2 heads; every parameter moved off its initialisation
     * (init_params), the zero head and class token included */
    { "vit:patch=2,dim=8,depth=2,heads=2,mlp=12", { 2, 6, 4 }, 3, 0, EMBED, "conv_proj", 300, 200 },
    { "vit:patch=2,dim=8,depth=2,heads=2,mlp=12", { 2, 6, 4 }, 3, 1, ENCODER,
      "encoder.layers.encoder_layer_0.ln_1", 400, 168 },
    { "vit:patch=2,dim=8,depth=2,heads=2,mlp=12", { 2, 6, 4 }, 3, -1, VIT_HEAD, "encoder.ln",
      300, 168 },
};

static void build(const block_case *c, cdp_model *m)
{
    char err[256];
    cdp_model_config cfg = { c->spec, 0, c->in, 10, 2, CDP_BALANCE_FLOPS, CDP_PRECISION_FP32 };
    REQUIRE(cdp_model_build(&cfg, m, err, sizeof err) == 0, "%s", err);
    cfg.stages = m->nblocks;   /* every block a stage of its own */
    cdp_model_free(m);
    REQUIRE(cdp_model_build(&cfg, m, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(m->nstages, m->nblocks);
    for (int l = 0; l < m->nstages; l++)
        ck_assert_int_eq(m->stage_first[l], l);
}

/* the stage's role from its layers */
static void check_role(const block_case *c, const cdp_model *m, int l)
{
    const cdp_stage_plan *P = &m->plan[l];
    int adds = 0, convs = 0, pools = 0, fcs = 0, bns = 0, shortcut_in = 0, atts = 0, lns = 0;
    int tok = 0, sel = 0;
    for (int j = P->first_layer; j < P->end_layer; j++) {
        const cdp_layer *ly = &m->layers[j];
        adds += ly->kind == CDP_LAYER_ADD;
        convs += ly->kind == CDP_LAYER_CONV2D;
        bns += ly->kind == CDP_LAYER_BATCHNORM2D;
        pools += ly->kind == CDP_LAYER_MAXPOOL2D;
        fcs += ly->kind == CDP_LAYER_LINEAR;
        atts += ly->kind == CDP_LAYER_ATTENTION;
        lns += ly->kind == CDP_LAYER_LAYERNORM;
        tok += ly->kind == CDP_LAYER_CLASS_TOKEN || ly->kind == CDP_LAYER_POS_EMBED;
        sel += ly->kind == CDP_LAYER_TOKEN_SELECT;
        if (ly->kind == CDP_LAYER_ADD)
            shortcut_in |= ly->in2 == P->in_tensor;
    }
    REQUIRE(strcmp(m->layers[P->first_layer].name, c->first) == 0,
            "%s stage %d starts with %s, not %s", c->spec, l,
            m->layers[P->first_layer].name, c->first);
    switch (c->role) {
    case STEM:
        ck_assert(l == 0 && adds == 0 && convs == 1 && bns == 1 && fcs == 0);
        ck_assert_int_eq(pools, strcmp(c->spec, "resnet18") == 0);
        break;
    case IDENTITY:
        ck_assert(adds == 1 && shortcut_in && bns == convs);
        break;
    case DOWNSAMPLE:
        ck_assert(adds == 1 && !shortcut_in && bns == convs);
        REQUIRE(strstr(m->layers[P->end_layer - 3].name, ".downsample.1") != NULL,
                "%s stage %d: no downsample shortcut", c->spec, l);
        break;
    case HEAD:
        ck_assert(l == m->nstages - 1 && fcs == 1 && bns == 0 && !P->slot_doubles);
        break;
    case EMBED:
        ck_assert(l == 0 && convs == 1 && tok == 2 && atts == 0);
        break;
    case ENCODER:
        ck_assert(adds == 2 && atts == 1 && lns == 2 && fcs == 2 && shortcut_in);
        break;
    case VIT_HEAD:
        ck_assert(l == m->nstages - 1 && lns == 1 && sel == 1 && fcs == 1);
        break;
    }
}

/* the stage's trainable tensors in layout order */
static int stage_tensors(const cdp_model *m, int l, ptensor *t)
{
    int n = 0;
    for (int j = m->plan[l].first_layer; j < m->plan[l].end_layer; j++) {
        const cdp_layer *ly = &m->layers[j];
        const size_t in = cdp_shape_n(ly->xs);
        size_t w = 0, b = 0;
        const char *wn = "weight", *bn = "bias";
        switch (ly->kind) {
        case CDP_LAYER_CONV2D:
            w = (size_t)ly->ys.c * ly->xs.c * ly->k * ly->k;
            b = ly->bias ? (size_t)ly->ys.c : 0;
            break;
        case CDP_LAYER_BATCHNORM2D:
            w = b = (size_t)ly->xs.c;
            wn = "weight (gamma)";
            bn = "bias (beta)";
            break;
        case CDP_LAYER_LINEAR:
            if (ly->tokens) {
                w = (size_t)ly->xs.w * (size_t)ly->ys.w;
                b = (size_t)ly->ys.w;
            } else {
                w = in * (size_t)ly->ys.c;
                b = (size_t)ly->ys.c;
            }
            break;
        case CDP_LAYER_LAYERNORM:
            w = b = (size_t)ly->xs.w;
            break;
        case CDP_LAYER_CLASS_TOKEN:
        case CDP_LAYER_POS_EMBED:
            w = ly->kind == CDP_LAYER_CLASS_TOKEN ? (size_t)ly->xs.c : in;
            wn = ly->kind == CDP_LAYER_CLASS_TOKEN ? "class_token" : "pos_embedding";
            break;
        case CDP_LAYER_ATTENTION: {
            /* in_proj_weight, in_proj_bias, out_proj.weight, out_proj.bias */
            const size_t D = (size_t)ly->xs.w;
            const char *an[4] = { "in_proj_weight", "in_proj_bias", "out_proj.weight",
                                  "out_proj.bias" };
            const size_t al[4] = { 3 * D * D, 3 * D, D * D, D };
            size_t o = ly->p_off;
            for (int q = 0; q < 4; q++) {
                snprintf(t[n].name, sizeof t[n].name, "%s.%s", ly->name, an[q]);
                t[n].layer = j;
                t[n].off = o;
                t[n++].n = al[q];
                o += al[q];
            }
            continue;
        }
        default:
            continue;
        }
        snprintf(t[n].name, sizeof t[n].name, "%s.%s", ly->name, wn);
        t[n].layer = j;
        t[n].off = ly->p_off;
        t[n++].n = w;
        if (b) {
            snprintf(t[n].name, sizeof t[n].name, "%s.%s", ly->name, bn);
            t[n].layer = j;
            t[n].off = ly->p_off + w;
            t[n++].n = b;
        }
    }
    /* contiguous from 0, and the whole head */
    for (int k = 0; k < n; k++)
        ck_assert_uint_eq(t[k].off, k ? t[k - 1].off + t[k - 1].n : 0);
    ck_assert(n > 0);
    ck_assert_uint_le(t[n - 1].off + t[n - 1].n, m->plan[l].train_n);
    ck_assert_uint_ge(t[n - 1].off + t[n - 1].n + 1, m->plan[l].train_n);   /* even() padding */
    return n;
}

/* The float input of BatchNorm layer j after the forward, from act. */
static const float *bn_input(const cdp_model *m, int l, int B, const cdp_layer *ly,
                             const float *x, const float *act)
{
    int r = m->nodes[ly->in].root;
    if (r == m->nodes[m->plan[l].in_tensor].root)
        return x;
    return act + (size_t)m->node_off[r] * (size_t)B;
}

/* mean and M2 per channel of a BatchNorm input (two micro-batches when x2) */
static void bn_moments(int B, int C, int HW, const float *x1, const float *x2, double *mean,
                       double *m2)
{
    const double n = (double)B * HW * (x2 ? 2 : 1);
    for (int c = 0; c < C; c++) {
        double s = 0.0, q = 0.0;
        for (int h = 0; h < (x2 ? 2 : 1); h++) {
            const float *x = h ? x2 : x1;
            for (int b = 0; b < B; b++)
                for (int p = 0; p < HW; p++)
                    s += (double)x[((size_t)b * C + c) * HW + p];
        }
        double mu = s / n;
        for (int h = 0; h < (x2 ? 2 : 1); h++) {
            const float *x = h ? x2 : x1;
            for (int b = 0; b < B; b++)
                for (int p = 0; p < HW; p++) {
                    double d = (double)x[((size_t)b * C + c) * HW + p] - mu;
                    q += d * d;
                }
        }
        mean[c] = mu;
        m2[c] = q;
    }
}

/* the statistics in worker w's slot of a stage gradient, unpacked */
static double *slot_stats(const cdp_backend *be, const cdp_model *m, int l, const float *g, int w)
{
    const size_t sd = m->plan[l].slot_doubles;
    double *s = dbuf(sd);
    be->f64_unpack(sd, g + m->plan[l].train_n + 3 * (size_t)w * sd, s);
    return s;
}

/* worker w's slot of g holds the statistics of the forward's BatchNorm
 * inputs (bnin[j] for each BatchNorm layer j) */
static void check_slot(const block_case *c, const cdp_backend *be, const cdp_model *m, int l,
                       const float *g, int w, float **bnin)
{
    double *s = slot_stats(be, m, l, g, w);
    for (int j = m->plan[l].first_layer; j < m->plan[l].end_layer; j++) {
        const cdp_layer *ly = &m->layers[j];
        if (ly->kind != CDP_LAYER_BATCHNORM2D)
            continue;
        const int C = ly->xs.c, HW = ly->xs.h * ly->xs.w;
        double *mean = dbuf(C), *m2 = dbuf(C);
        bn_moments(c->B, C, HW, bnin[j], NULL, mean, m2);
        const double n = (double)c->B * HW;
        for (int ch = 0; ch < C; ch++) {
            double sm = s[ly->stat_off + ch], sq = s[ly->stat_off + C + ch];
            double sd = sqrt(m2[ch] / n);
            REQUIRE(fabs(sm - mean[ch]) <= 1e-12 * (fabs(mean[ch]) + sd) &&
                    fabs(sq - m2[ch]) <= 1e-12 * m2[ch] && m2[ch] > 0.0,
                    "%s %s worker %d: mean/M2 of channel %d %.17g/%.17g vs %.17g/%.17g",
                    c->spec, ly->name, w, ch, sm, sq, mean[ch], m2[ch]);
        }
        free(mean);
        free(m2);
    }
    free(s);
}

/* ------------------------------------------------------------ the test */

static void run_case(const block_case *c, const cdp_model *mp, float *Pall)
{
    const double t0 = cdp_now_s();
    const cdp_backend *be = cdp_backend_cpu(1);
    const cdp_model m = *mp;
    const int l = c->stage < 0 ? m.nstages - 1 : c->stage;
    check_role(c, &m, l);
    const cdp_stage_plan *SP = &m.plan[l];
    const int B = c->B, last = l == m.nstages - 1;
    const int din = cdp_stage_in(&m, l), dout_n = cdp_stage_out(&m, l);
    const size_t nx = (size_t)B * din, ny = (size_t)B * dout_n, sn = m.stage_n[l];
    const int in_masked = l > 0 && m.plan[l - 1].delegate_relu;   /* dx masked by x > 0 */
    const int out_masked = SP->delegate_relu;                      /* dout masked by out > 0 */
    ck_assert_int_eq(out_masked, !last && m.layers[SP->end_layer - 1].kind == CDP_LAYER_RELU);
    char what[160];

    /* larger weights than the initialisation (gradients of useful size) */
    for (size_t k = 0; k < SP->train_n; k++)
        Pall[m.stage_off[l] + k] *= 1.5f;
    const float *P = Pall + m.stage_off[l];

    /* two micro-batches: inputs (a ReLU's output when masked: >= 0, with
     * zeros), upstream gradients, labels */
    float *x[2], *doutr[2], *doutm[2];
    int32_t lab[2][64];
    ck_assert_int_le(B, 64);
    for (int h = 0; h < 2; h++) {
        x[h] = fbuf(nx);
        doutr[h] = fbuf(ny);
        doutm[h] = fbuf(ny);
        for (size_t k = 0; k < nx; k++) {
            double u = unit(10 + h, k), v = unit(20 + h, k);
            x[h][k] = in_masked ? (u < 0.3 ? 0.0f : (float)(0.05 + 1.5 * v)) : (float)(2 * u - 1);
        }
        for (size_t k = 0; k < ny; k++)
            doutr[h][k] = (float)(2 * unit(30 + h, k) - 1);
        for (int i = 0; i < B; i++)
            lab[h][i] = (int32_t)(cdp_rand_u64(5, 40 + h, (uint64_t)i) % (uint64_t)m.classes);
    }

    float *act = fbuf(cdp_stage_act_floats(&m, l, B));
    float *ws = fbuf(cdp_model_ws_floats(be, &m, B));
    float *G[2], *Gacc = fbuf(sn), *dx = fbuf(nx), *out = fbuf(ny);
    float **bnin[2];
    double lstats[2] = { 0, 0 };
    for (int h = 0; h < 2; h++) {
        G[h] = fbuf(sn);
        bnin[h] = calloc((size_t)m.nlayers, sizeof(float *));
        ck_assert_ptr_nonnull(bnin[h]);
    }

    /* ---- forward of micro-batch 0 against the double forward */
    ref r;
    ref_init(&r, &m, l, B);
    double *Pd = dbuf(SP->train_n), *xd = dbuf(nx), *dd = dbuf(ny);
    for (size_t k = 0; k < SP->train_n; k++)
        Pd[k] = P[k];
    for (size_t k = 0; k < nx; k++)
        xd[k] = x[0][k];
    for (size_t k = 0; k < ny; k++)
        dd[k] = doutr[0][k];
    ref_fwd(&r, Pd, xd, 0, 1);
    double *dlog = dbuf(ny);
    const double f0 = ref_obj(&r, xd, dd, lab[0], dlog);

    cdp_stage_fwd(be, &m, l, B, P, x[0], act, lab[0], lstats, ws, 1, NULL);
    /* every tensor's storage as the stage left it: the last node written
     * into each root (a ReLU's output over its input's) */
    for (int j = SP->first_layer; j < SP->end_layer; j++) {
        int t = m.layers[j].out, rt = m.nodes[t].root, later = 0;
        for (int j2 = j + 1; j2 < SP->end_layer; j2++)
            later |= m.nodes[m.layers[j2].out].root == rt;
        if (later || (last && t == SP->out_tensor) || rt == m.nodes[SP->in_tensor].root)
            continue;
        if (m.node_off[rt] < 0)   /* forward-only, in the workspace: seen through its readers */
            continue;
        snprintf(what, sizeof what, "%s stage %d forward, %s output (node %d)", c->spec, l,
                 m.layers[j].name[0] ? m.layers[j].name : "?", t);
        check_close(what, act + (size_t)m.node_off[rt] * B, r.base[t], (size_t)B * nsize(&m, t),
                    1e-5);
    }
    memcpy(out, cdp_stage_output(&m, l, B, act), ny * sizeof(float));
    if (last) {
        snprintf(what, sizeof what, "%s head dlogits", c->spec);
        check_close(what, out, dlog, ny, 1e-5);
        REQUIRE(fabs(lstats[0] - f0 * B) <= 1e-5 * f0 * B, "%s: loss %.9g vs %.9g",
                c->spec, lstats[0] / B, f0);
    } else {
        snprintf(what, sizeof what, "%s stage %d output", c->spec, l);
        check_close(what, out, r.base[SP->out_tensor], ny, 1e-5);
    }
    for (int j = SP->first_layer; j < SP->end_layer; j++)
        if (m.layers[j].kind == CDP_LAYER_BATCHNORM2D) {
            size_t n = (size_t)B * cdp_shape_n(m.layers[j].xs);
            bnin[0][j] = fbuf(n);
            memcpy(bnin[0][j], bn_input(&m, l, B, &m.layers[j], x[0], act), n * sizeof(float));
        }

    /* ---- backward of worker 0 */
    for (size_t k = 0; k < ny; k++)
        doutm[0][k] = out_masked && !(out[k] > 0.0f) ? 0.0f : doutr[0][k];
    for (size_t k = 0; k < sn; k++)
        G[0][k] = NAN;   /* everything must be written */
    for (size_t k = 0; k < nx; k++)
        dx[k] = NAN;
    cdp_stage_bwd(be, &m, l, B, 0, P, x[0], act, last ? NULL : doutm[0], dx, G[0], ws, 0, NULL);
    for (size_t k = 0; k < sn; k++)
        REQUIRE(isfinite(G[0][k]), "%s stage %d: gradient[%zu] not written", c->spec, l, k);
    for (size_t k = 0; k < nx; k++)
        REQUIRE(isfinite(dx[k]), "%s stage %d: dx[%zu] not written", c->spec, l, k);
    if (SP->slot_doubles) {
        check_slot(c, be, &m, l, G[0], 0, bnin[0]);
        for (size_t k = SP->train_n + 3 * SP->slot_doubles; k < sn; k++)
            REQUIRE(G[0][k] == 0.0f, "%s stage %d: tail[%zu] not zero", c->spec, l, k);
    } else {
        ck_assert_uint_eq(sn, SP->train_n);
    }

    /* ---- finite differences: parameters */
    /* the float forward must take the same ReLU and max pool decisions as
     * the double one (its errors are ~1e-6): patterns are frozen for the
     * finite differences, but cdp's backward uses its own */
    REQUIRE(r.minpre > 1e-5, "%s: a pre-activation at %.3g", c->spec, r.minpre);
    if (r.mingap < INFINITY)
        REQUIRE(r.mingap > 1e-5, "%s: a max pool tie (gap %.3g)", c->spec, r.mingap);
    worst_glob = worst_el = 0.0;
    ptensor T[64];
    const int nt = stage_tensors(&m, l, T);
    /* c->params spread evenly over the tensors, small ones taken whole:
     * tensors in increasing size, each its share of what is left */
    size_t share[64], left = (size_t)c->params;
    {
        int order[64];
        for (int q = 0; q < nt; q++)
            order[q] = q;
        for (int q = 1; q < nt; q++)
            for (int p = q; p > 0 && T[order[p - 1]].n > T[order[p]].n; p--) {
                int t = order[p]; order[p] = order[p - 1]; order[p - 1] = t;
            }
        for (int q = 0; q < nt; q++) {
            size_t s = (left + (size_t)(nt - q) - 1) / (size_t)(nt - q);
            share[order[q]] = s < T[order[q]].n ? s : T[order[q]].n;
            left -= share[order[q]] < left ? share[order[q]] : left;
        }
    }
    size_t checked = 0, *idx = malloc(sizeof(size_t) * (SP->train_n + nx + 1));
    double *f = dbuf(SP->train_n + nx), *v = dbuf(SP->train_n + nx);
    ck_assert_ptr_nonnull(idx);
    for (int q = 0; q < nt; q++) {
        size_t k = pick(T[q].n, share[q], 1000 + (uint64_t)q, idx);
        for (size_t i = 0; i < k; i++) {
            double *p = &Pd[T[q].off + idx[i]], s = *p;
            *p = s + FD_H;
            double fp = ref_f(&r, Pd, xd, T[q].layer, dd, lab[0]);
            *p = s - FD_H;
            double fm = ref_f(&r, Pd, xd, T[q].layer, dd, lab[0]);
            *p = s;
            f[i] = (fp - fm) / (2 * FD_H);
        }
        snprintf(what, sizeof what, "%.40s stage %d d/d %.80s", c->spec, l, T[q].name);
        check_fd(what, G[0] + T[q].off, f, idx, k, 1e-3, 1e-2);
        checked += k;
        /* one random direction over the whole tensor */
        double dot = 0.0, l1 = 0.0;
        for (size_t i = 0; i < T[q].n; i++) {
            v[i] = unit(2000 + (uint64_t)q, i) < 0.5 ? -1.0 : 1.0;
            dot += v[i] * G[0][T[q].off + i];
            l1 += fabs(G[0][T[q].off + i]);
        }
        double *pv = dbuf(SP->train_n);
        memcpy(pv, Pd, SP->train_n * sizeof(double));
        for (size_t i = 0; i < T[q].n; i++)
            pv[T[q].off + i] = Pd[T[q].off + i] + FD_H * v[i];
        double fp = ref_f(&r, pv, xd, T[q].layer, dd, lab[0]);
        for (size_t i = 0; i < T[q].n; i++)
            pv[T[q].off + i] = Pd[T[q].off + i] - FD_H * v[i];
        double fm = ref_f(&r, pv, xd, T[q].layer, dd, lab[0]);
        free(pv);
        double fd = (fp - fm) / (2 * FD_H);
        REQUIRE(fabs(fd - dot) <= 1e-4 * l1, "%s stage %d %s: directional derivative "
                "%.9g vs %.9g (L1 %.3g)", c->spec, l, T[q].name, dot, fd, l1);
    }
    REQUIRE(checked >= 200 || checked == SP->train_n, "%s: only %zu parameters checked",
            c->spec, checked);

    /* ---- finite differences: the input (dx is masked by x > 0 where the
     * previous stage's ReLU is left to this one) */
    {
        size_t k = pick(nx, (size_t)c->inputs, 3000, idx);
        for (size_t i = 0; i < k; i++) {
            double *p = &xd[idx[i]], s = *p;
            *p = s + FD_H;
            double fp = ref_f(&r, Pd, xd, SP->first_layer, dd, lab[0]);
            *p = s - FD_H;
            double fm = ref_f(&r, Pd, xd, SP->first_layer, dd, lab[0]);
            *p = s;
            f[i] = in_masked && !(s > 0.0) ? 0.0 : (fp - fm) / (2 * FD_H);
        }
        snprintf(what, sizeof what, "%s stage %d dx", c->spec, l);
        check_fd(what, dx, f, idx, k, 1e-3, 1e-2);
        size_t zeros = 0;
        for (size_t i = 0; i < nx; i++)
            if (in_masked && !(x[0][i] > 0.0f)) {
                REQUIRE(dx[i] == 0.0f, "%s stage %d: dx[%zu] = %g at a zero input",
                        c->spec, l, i, (double)dx[i]);
                zeros++;
            }
        ck_assert(!in_masked || zeros > nx / 10);
        double dot = 0.0, l1 = 0.0;
        double *xv = dbuf(nx);
        for (size_t i = 0; i < nx; i++) {
            v[i] = in_masked && !(xd[i] > 0.0) ? 0.0 : (unit(3001, i) < 0.5 ? -1.0 : 1.0);
            dot += v[i] * dx[i];
            l1 += fabs(dx[i]);
        }
        for (size_t i = 0; i < nx; i++)
            xv[i] = xd[i] + FD_H * v[i];
        double fp = ref_f(&r, Pd, xv, SP->first_layer, dd, lab[0]);
        for (size_t i = 0; i < nx; i++)
            xv[i] = xd[i] - FD_H * v[i];
        double fm = ref_f(&r, Pd, xv, SP->first_layer, dd, lab[0]);
        free(xv);
        double fd = (fp - fm) / (2 * FD_H);
        REQUIRE(fabs(fd - dot) <= 1e-4 * l1, "%s stage %d dx: directional derivative "
                "%.9g vs %.9g (L1 %.3g)", c->spec, l, dot, fd, l1);
    }
    const double t_fd = cdp_now_s();

    /* ---- worker 1: alone, then accumulated onto worker 0's gradient */
    cdp_stage_fwd(be, &m, l, B, P, x[1], act, lab[1], lstats, ws, 1, NULL);
    {
        const float *o1 = cdp_stage_output(&m, l, B, act);
        for (size_t k = 0; k < ny; k++)
            doutm[1][k] = out_masked && !(o1[k] > 0.0f) ? 0.0f : doutr[1][k];
    }
    for (int j = SP->first_layer; j < SP->end_layer; j++)
        if (m.layers[j].kind == CDP_LAYER_BATCHNORM2D) {
            size_t n = (size_t)B * cdp_shape_n(m.layers[j].xs);
            bnin[1][j] = fbuf(n);
            memcpy(bnin[1][j], bn_input(&m, l, B, &m.layers[j], x[1], act), n * sizeof(float));
        }
    cdp_stage_bwd(be, &m, l, B, 1, P, x[1], act, last ? NULL : doutm[1], NULL, G[1], ws, 0, NULL);
    if (SP->slot_doubles) {
        check_slot(c, be, &m, l, G[1], 1, bnin[1]);
        for (size_t k = SP->train_n; k < SP->train_n + 3 * SP->slot_doubles; k++)
            REQUIRE(G[1][k] == 0.0f, "%s: worker 1 left slot 0 non-zero", c->spec);
    }
    /* the same gradient, bit for bit, when dx is wanted */
    cdp_stage_fwd(be, &m, l, B, P, x[1], act, lab[1], lstats, ws, 1, NULL);
    cdp_stage_bwd(be, &m, l, B, 1, P, x[1], act, last ? NULL : doutm[1], dx, Gacc, ws, 0, NULL);
    REQUIRE(memcmp(Gacc, G[1], sn * sizeof(float)) == 0,
            "%s stage %d: the gradient changes when dx is NULL", c->spec, l);
    memcpy(Gacc, G[0], sn * sizeof(float));
    cdp_stage_fwd(be, &m, l, B, P, x[1], act, lab[1], lstats, ws, 1, NULL);
    cdp_stage_bwd(be, &m, l, B, 1, P, x[1], act, last ? NULL : doutm[1], NULL, Gacc, ws, 1, NULL);
    {
        int has_linear = 0;
        for (int j = SP->first_layer; j < SP->end_layer; j++)
            has_linear |= m.layers[j].kind == CDP_LAYER_LINEAR ||
                          m.layers[j].kind == CDP_LAYER_ATTENTION;
        const int exact = !has_linear || cdp_model_accumulate_exact(be, &m, B);
        for (size_t k = 0; k < SP->train_n; k++) {
            float e = G[0][k] + G[1][k];
            REQUIRE(exact ? memcmp(&e, &Gacc[k], sizeof e) == 0
                          : fabsf(e - Gacc[k]) <= 1e-5f * (fabsf(e) + 1e-3f),
                    "%s stage %d: accumulated gradient[%zu] %.9g vs %.9g + %.9g",
                    c->spec, l, k, (double)Gacc[k], (double)G[0][k], (double)G[1][k]);
        }
        const size_t s3 = 3 * SP->slot_doubles;
        if (s3) {
            REQUIRE(memcmp(Gacc + SP->train_n, G[0] + SP->train_n, s3 * sizeof(float)) == 0,
                    "%s stage %d: accumulate changed worker 0's slot", c->spec, l);
            REQUIRE(memcmp(Gacc + SP->train_n + s3, G[1] + SP->train_n + s3,
                           s3 * sizeof(float)) == 0,
                    "%s stage %d: worker 1's slot differs when accumulated", c->spec, l);
            for (size_t k = SP->train_n + 2 * s3; k < sn; k++)
                REQUIRE(Gacc[k] == 0.0f, "%s stage %d: tail[%zu] not zero", c->spec, l, k);
        }
    }

    /* ---- the update of N = 2 workers: SGD of the head, running statistics */
    {
        float *th = fbuf(sn), *mom = fbuf(SP->train_n);
        const float lr = 0.1f, gs = 0.5f;
        const cdp_optim_step st = { .kind = CDP_OPTIM_SGD, .first = 1, .lr = lr, .momentum = 0.9f };
        cdp_stage_update(be, &m, l, B, P, th, Gacc, gs, mom, &st, 0, ws);
        for (size_t k = 0; k < SP->train_n; k++) {
            double e = (double)P[k] - (double)lr * ((double)Gacc[k] * gs);
            double step = (double)lr * fabs((double)Gacc[k] * gs);
            REQUIRE(fabs(th[k] - e) <= 1e-6 * (fabs((double)P[k]) + step), "%s stage %d: SGD "
                    "[%zu] %.9g vs %.9g", c->spec, l, k, (double)th[k], e);
        }
        int nbn = 0;
        for (int j = SP->first_layer; j < SP->end_layer; j++) {
            const cdp_layer *ly = &m.layers[j];
            if (ly->kind != CDP_LAYER_BATCHNORM2D)
                continue;
            nbn++;
            const int C = ly->xs.c, HW = ly->xs.h * ly->xs.w;
            double *mean = dbuf(C), *m2 = dbuf(C);
            bn_moments(B, C, HW, bnin[0][j], bnin[1][j], mean, m2);
            for (int ch = 0; ch < C; ch++) {
                double var = m2[ch] / (2.0 * B * HW - 1.0);
                double em = 0.9 * P[ly->b_off + ch] + 0.1 * mean[ch];
                double ev = 0.9 * P[ly->b_off + C + ch] + 0.1 * var;
                double gm = th[ly->b_off + ch], gv = th[ly->b_off + C + ch];
                REQUIRE(fabs(gm - em) <= 1e-6 * (fabs(em) + 0.1) &&
                        fabs(gv - ev) <= 1e-6 * fabs(ev),
                        "%s %s channel %d: running mean/var %.9g/%.9g vs %.9g/%.9g",
                        c->spec, ly->name, ch, gm, gv, em, ev);
            }
            free(mean);
            free(m2);
        }
        ck_assert_int_eq(nbn > 0, SP->slot_doubles > 0);
        free(th);
        free(mom);
    }

    printf("%-.15s stage %2d %-16s (%s): %zu params, %zu checked, %d inputs checked of %zu; "
           "worst |err|/max %.2g, worst err/tol %.2g; min |pre-act| %.2g; %.2f s (FD %.2f s)\n",
           c->spec, l, role_name[c->role], m.layers[SP->first_layer].name, SP->train_n, checked,
           c->inputs < (int)nx ? c->inputs : (int)nx, nx, worst_glob, worst_el, r.minpre,
           cdp_now_s() - t0, t_fd - t0);
    fflush(stdout);

    for (int h = 0; h < 2; h++) {
        for (int j = 0; j < m.nlayers; j++)
            free(bnin[h][j]);
        free(bnin[h]);
        free(x[h]); free(doutr[h]); free(doutm[h]); free(G[h]);
    }
    ref_free(&r);
    free(act); free(ws); free(Gacc); free(dx); free(out);
    free(Pd); free(xd); free(dd); free(dlog); free(idx); free(f); free(v);
}

/* The model's initialisation, with every BatchNorm moved off gamma = 1,
 * beta = 0 and its running statistics off 0 / 1. */
static float *init_params(const cdp_model *mp)
{
    const cdp_model m = *mp;
    float *Pall = fbuf(m.nparams);
    cdp_model_init(&m, 7, Pall);
    /* a ViT starts with a zero head and class token and zero attention
     * biases: every trainable parameter gets a random offset, so that every
     * gradient is of useful size */
    if (strncmp(m.name, "vit", 3) == 0)
        for (int l = 0; l < m.nstages; l++)
            for (size_t k = 0; k < m.plan[l].train_n; k++)
                Pall[m.stage_off[l] + k] += (float)(0.3 * unit(500 + (uint64_t)l, k) - 0.15);
    for (int j = 0; j < m.nlayers; j++) {
        const cdp_layer *ly = &m.layers[j];
        if (ly->kind != CDP_LAYER_BATCHNORM2D)
            continue;
        int s = 0;
        while (s < m.nstages - 1 && m.plan[s].end_layer <= j)
            s++;
        float *p = Pall + m.stage_off[s];
        for (int ch = 0; ch < ly->xs.c; ch++) {
            p[ly->p_off + ch] = (float)(0.5 + unit(100 + j, ch));                   /* gamma */
            p[ly->p_off + ly->xs.c + ch] = (float)(unit(200 + j, ch) - 0.5);        /* beta */
            p[ly->b_off + ch] = (float)(0.4 * unit(300 + j, ch) - 0.2);              /* mean */
            p[ly->b_off + ly->xs.c + ch] = (float)(0.5 + 1.5 * unit(400 + j, ch));  /* var */
        }
    }
    return Pall;
}

static const char *models[] = { "resnet20", "resnet18-cifar", "resnet50-cifar", "resnet18",
                                 "vit:patch=2,dim=8,depth=2,heads=2,mlp=12" };

/* every case of one model, on one build and one initialisation */
START_TEST(block_fd)
{
    const block_case *c0 = NULL;
    cdp_model m;
    float *P = NULL;
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        if (strcmp(cases[k].spec, models[_i]) != 0)
            continue;
        if (!c0) {
            c0 = &cases[k];
            build(c0, &m);
            P = init_params(&m);
        }
        ck_assert(cases[k].in.c == c0->in.c && cases[k].in.h == c0->in.h &&
                  cases[k].in.w == c0->in.w);
        run_case(&cases[k], &m, P);
    }
    ck_assert_ptr_nonnull(c0);
    free(P);
    cdp_model_free(&m);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("nn_block");
    TCase *tc = tcase_create("block");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, block_fd, 0, (int)(sizeof models / sizeof *models));
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    int failed = check_run(suite());
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
