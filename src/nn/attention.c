/* Multi-head self-attention as nn.MultiheadAttention(D, H, batch_first)
 * called with (x, x, x): a fused QKV projection (in_proj_weight [3D, D],
 * in_proj_bias), per head h of d = D/H features
 *     P_h = softmax(Q_h K_h^T / sqrt(d)),  O_h = P_h V_h,
 * the heads side by side in O [T, D], and out_proj.  Kept for the backward:
 * QKV [T, 3D], P [H, T, T] and O [T, D] per sample, in float32, or under
 * --precision bf16 (ly->lowp) in bfloat16: computed in float32 in the
 * workspace, then packed into the saved area, and widened back there for
 * the backward. */
#include <math.h>
#include <stdio.h>
#include "layers.h"

typedef struct dims {
    int T, D, H, d;
} dims;

static dims dims_of(const cdp_layer *ly)
{
    dims z = { ly->xs.c * ly->xs.h, ly->xs.w, ly->heads, 0 };
    z.d = z.H > 0 ? z.D / z.H : 0;
    return z;
}

static int shape(cdp_layer *ly, char *err, size_t errlen)
{
    dims z = dims_of(ly);
    if (z.H < 1 || z.D % z.H) {
        snprintf(err, errlen, "%s: %d features do not split into %d heads", ly->name, z.D, z.H);
        return -1;
    }
    ly->ys = ly->xs;
    return 0;
}

/* in_proj: xavier_uniform_ (fan_in D, fan_out 3D), zero bias; out_proj:
 * nn.Linear's default weight, zero bias (MultiheadAttention's
 * _reset_parameters) */
static int params(const cdp_layer *ly, cdp_param_desc *d)
{
    const int D = ly->xs.w;
    d[0] = (cdp_param_desc){ "in_proj_weight", CDP_TENSOR_PARAM, 2, { 3 * D, D },
                             CDP_INIT_UNIFORM, sqrtf(6.0f / (float)(4 * D)) };
    d[1] = (cdp_param_desc){ "in_proj_bias", CDP_TENSOR_PARAM, 1, { 3 * D }, CDP_INIT_CONST, 0.0f };
    d[2] = (cdp_param_desc){ "out_proj.weight", CDP_TENSOR_PARAM, 2, { D, D }, CDP_INIT_UNIFORM,
                             1.0f / sqrtf((float)D) };
    d[3] = (cdp_param_desc){ "out_proj.bias", CDP_TENSOR_PARAM, 1, { D }, CDP_INIT_CONST, 0.0f };
    return 4;
}

/* QKV, P and O of one sample, in values */
static size_t kept_per_sample(const cdp_layer *ly)
{
    dims z = dims_of(ly);
    return 4 * (size_t)z.T * z.D + (size_t)z.H * z.T * z.T;
}

/* in floats: two bfloat16 values to a float under --precision bf16 */
static size_t save_per_sample(const cdp_layer *ly)
{
    size_t n = kept_per_sample(ly);
    return ly->lowp ? (n + 1) / 2 : n;
}

/* backward scratch: dO [B, T, D], dQKV [B, T, 3D], dP [B, H, T, T]; under
 * --precision bf16 then the float32 QKV, P and O (the forward's) */
static size_t ws_floats(const cdp_layer *ly, const cdp_backend *be, int B)
{
    size_t n = (size_t)B * kept_per_sample(ly) * (ly->lowp ? 2 : 1);
    if (ly->lowp && be->bf16) {   /* bwd16's: dO, dQKV, dP, P and three packed */
        dims z = dims_of(ly);
        const size_t rd = (size_t)B * z.T * z.D, ps = (size_t)B * z.H * z.T * z.T;
        const size_t n16 = rd + (rd + 1) / 2 + 3 * rd + (3 * rd + 1) / 2 + 2 * ps + (ps + 1) / 2;
        if (n16 > n)
            n = n16;
    }
    return n;
}

/* --precision bf16: the operands of the products inside, rounded in place
 * (Q, K, V when made, P after the softmax, O; dO, dS and dQKV in the
 * backward); the stage rounds x, the weights and dy */
static void lowp(const cdp_layer_io *io, float *t, size_t n)
{
    if (io->lowp)
        io->be->round_bf16(n, t, t);
}

typedef struct views {
    const float *w_in, *b_in, *w_out, *b_out;
    float *qkv, *P, *O;
} views;

/* the parameters, and QKV, P, O at kept (the saved area, or the float32
 * copy of a bfloat16 one) */
static views views_of(const cdp_layer *ly, const cdp_layer_io *io, float *kept)
{
    dims z = dims_of(ly);
    const size_t D = (size_t)z.D, B = (size_t)io->B;
    views v;
    v.w_in = io->p;
    v.b_in = v.w_in + 3 * D * D;
    v.w_out = v.b_in + 3 * D;
    v.b_out = v.w_out + D * D;
    v.qkv = kept;
    v.P = v.qkv + B * z.T * 3 * D;
    v.O = v.P + B * z.H * z.T * z.T;
    return v;
}

static void fwd16(const cdp_layer *ly, const cdp_layer_io *io);
static void bwd16(const cdp_layer *ly, const cdp_layer_io *io);

static void fwd(const cdp_layer *ly, const cdp_layer_io *io, int train)
{
    (void)train;
    if (io->p16) {
        fwd16(ly, io);
        return;
    }
    const cdp_backend *be = io->be;
    dims z = dims_of(ly);
    views v = views_of(ly, io, ly->lowp ? io->ws : io->save);
    const int R = io->B * z.T, D3 = 3 * z.D;
    const size_t TT = (size_t)z.T * z.T, qs = (size_t)z.T * D3;
    CDP_LINEAR_FWD(io)(R, z.D, D3, io->x, v.w_in, v.b_in, v.qkv, 0);
    lowp(io, v.qkv, (size_t)R * D3);
    /* one batched GEMM per head over the B samples (uniform strides) */
    const size_t Ps = (size_t)z.H * TT;
    for (int h = 0; h < z.H; h++) {
        const float *q = v.qkv + (size_t)h * z.d;
        be->gemm_batched(0, 1, z.T, z.T, z.d, 1.0f / sqrtf((float)z.d), q, D3, qs, q + z.D, D3,
                         qs, 0.0f, v.P + h * TT, z.T, Ps, io->B);
    }
    be->softmax_fwd(io->B * z.H * z.T, z.T, v.P);
    lowp(io, v.P, (size_t)io->B * Ps);
    for (int h = 0; h < z.H; h++) {
        const float *q = v.qkv + (size_t)h * z.d;
        be->gemm_batched(0, 0, z.T, z.d, z.T, 1.0f, v.P + h * TT, z.T, Ps, q + 2 * z.D, D3, qs,
                         0.0f, v.O + (size_t)h * z.d, z.D, (size_t)z.T * z.D, io->B);
    }
    lowp(io, v.O, (size_t)R * z.D);
    CDP_LINEAR_FWD(io)(R, z.D, z.D, v.O, v.w_out, v.b_out, io->y, 0);
    if (ly->lowp)
        be->bf16_pack((size_t)io->B * kept_per_sample(ly), v.qkv, (uint16_t *)io->save);
}

static void bwd(const cdp_layer *ly, const cdp_layer_io *io)
{
    if (io->p16) {
        bwd16(ly, io);
        return;
    }
    const cdp_backend *be = io->be;
    dims z = dims_of(ly);
    const size_t nkept = (size_t)io->B * kept_per_sample(ly);
    float *kept = io->save;
    if (ly->lowp) {
        kept = io->ws + nkept;
        be->bf16_unpack(nkept, (const uint16_t *)io->save, kept);
    }
    views v = views_of(ly, io, kept);
    const int R = io->B * z.T, D3 = 3 * z.D;
    const size_t TT = (size_t)z.T * z.T, qs = (size_t)z.T * D3, os = (size_t)z.T * z.D;
    const size_t D = (size_t)z.D;
    float *dO = io->ws, *dqkv = dO + (size_t)R * D, *dP = dqkv + (size_t)R * D3;
    float *g_win = io->g, *g_bin = g_win + 3 * D * D, *g_wout = g_bin + 3 * D,
          *g_bout = g_wout + D * D;

    CDP_LINEAR_BWD(io)(R, z.D, z.D, v.O, v.w_out, io->dy, dO, g_wout, g_bout, 0, io->accumulate);
    lowp(io, dO, (size_t)R * D);
    const size_t Ps = (size_t)z.H * TT;
    for (int h = 0; h < z.H; h++) {
        const size_t ho = (size_t)h * z.d;
        const float *q = v.qkv + ho, *P = v.P + h * TT, *dOh = dO + ho;
        float *dq = dqkv + ho, *dPh = dP + h * TT;
        /* dP = dO V^T, dV = P^T dO */
        be->gemm_batched(0, 1, z.T, z.T, z.d, 1.0f, dOh, z.D, os, q + 2 * z.D, D3, qs, 0.0f,
                         dPh, z.T, Ps, io->B);
        be->gemm_batched(1, 0, z.T, z.d, z.T, 1.0f, P, z.T, Ps, dOh, z.D, os, 0.0f,
                         dq + 2 * z.D, D3, qs, io->B);
    }
    /* dS = P * (dP - rowsum(dP * P)) / sqrt(d) */
    be->softmax_bwd(io->B * z.H * z.T, z.T, 1.0f / sqrtf((float)z.d), v.P, dP);
    lowp(io, dP, (size_t)io->B * Ps);
    for (int h = 0; h < z.H; h++) {
        const size_t ho = (size_t)h * z.d;
        const float *q = v.qkv + ho, *dPh = dP + h * TT;
        float *dq = dqkv + ho;
        /* dQ = dS K, dK = dS^T Q */
        be->gemm_batched(0, 0, z.T, z.d, z.T, 1.0f, dPh, z.T, Ps, q + z.D, D3, qs, 0.0f, dq, D3,
                         qs, io->B);
        be->gemm_batched(1, 0, z.T, z.d, z.T, 1.0f, dPh, z.T, Ps, q, D3, qs, 0.0f, dq + z.D, D3,
                         qs, io->B);
    }
    lowp(io, dqkv, (size_t)R * D3);
    CDP_LINEAR_BWD(io)(R, z.D, D3, io->x, v.w_in, dqkv, io->dx, g_win, g_bin, 0, io->accumulate);
}

/* ---- --precision bf16 on a backend with bfloat16 kernels (io->p16): QKV,
 * P and O are kept in bfloat16 storage and every product reads its
 * operands there (be->bf16), with no float32 copy of the saved area; the
 * same roundings as fwd and bwd above (doc/reference.md section 3.12). */

typedef struct views16 {
    const uint16_t *w_in, *w_out;
    uint16_t *qkv, *P, *O;
} views16;

static views16 views16_of(const cdp_layer *ly, const cdp_layer_io *io)
{
    dims z = dims_of(ly);
    const size_t D = (size_t)z.D, B = (size_t)io->B;
    views16 v;
    v.w_in = io->p16;
    v.w_out = io->p16 + 3 * D * D + 3 * D;
    v.qkv = (uint16_t *)io->save;
    v.P = v.qkv + B * z.T * 3 * D;
    v.O = v.P + B * z.H * z.T * z.T;
    return v;
}

static void fwd16(const cdp_layer *ly, const cdp_layer_io *io)
{
    const cdp_backend *be = io->be;
    const cdp_bf16_kernels *k = be->bf16;
    dims z = dims_of(ly);
    const views v = views_of(ly, io, io->ws);   /* float32: QKV, the scores, O */
    const views16 h16 = views16_of(ly, io);
    const int R = io->B * z.T, D3 = 3 * z.D;
    const size_t TT = (size_t)z.T * z.T, qs = (size_t)z.T * D3, Ps = (size_t)z.H * TT;
    k->linear_fwd(R, z.D, D3, io->x, io->x16, h16.w_in, v.b_in, v.qkv, 0);
    be->bf16_pack((size_t)R * D3, v.qkv, h16.qkv);
    for (int h = 0; h < z.H; h++) {
        const uint16_t *q = h16.qkv + (size_t)h * z.d;
        k->gemm_batched(0, 1, z.T, z.T, z.d, 1.0f / sqrtf((float)z.d), q, D3, qs, q + z.D, D3,
                        qs, v.P + h * TT, z.T, Ps, io->B);
    }
    be->softmax_fwd(io->B * z.H * z.T, z.T, v.P);
    be->bf16_pack((size_t)io->B * Ps, v.P, h16.P);
    for (int h = 0; h < z.H; h++) {
        const uint16_t *q = h16.qkv + (size_t)h * z.d;
        k->gemm_batched(0, 0, z.T, z.d, z.T, 1.0f, h16.P + h * TT, z.T, Ps, q + 2 * z.D, D3, qs,
                        v.O + (size_t)h * z.d, z.D, (size_t)z.T * z.D, io->B);
    }
    be->bf16_pack((size_t)R * z.D, v.O, h16.O);
    k->linear_fwd(R, z.D, z.D, NULL, h16.O, h16.w_out, v.b_out, io->y, 0);
}

static void bwd16(const cdp_layer *ly, const cdp_layer_io *io)
{
    const cdp_backend *be = io->be;
    const cdp_bf16_kernels *k = be->bf16;
    dims z = dims_of(ly);
    const views16 v = views16_of(ly, io);
    const int R = io->B * z.T, D3 = 3 * z.D;
    const size_t D = (size_t)z.D, rd = (size_t)R * D;
    const size_t TT = (size_t)z.T * z.T, qs = (size_t)z.T * D3, os = (size_t)z.T * z.D;
    const size_t Ps = (size_t)z.H * TT, ps = (size_t)io->B * Ps;
    float *dO = io->ws;
    uint16_t *dO16 = (uint16_t *)(dO + rd);
    float *dqkv = dO + rd + (rd + 1) / 2;
    uint16_t *dqkv16 = (uint16_t *)(dqkv + 3 * rd);
    float *dP = dqkv + 3 * rd + (3 * rd + 1) / 2, *P = dP + ps;
    uint16_t *dS16 = (uint16_t *)(P + ps);
    float *g_win = io->g, *g_bin = g_win + 3 * D * D, *g_wout = g_bin + 3 * D,
          *g_bout = g_wout + D * D;

    k->linear_bwd(R, z.D, z.D, NULL, v.O, v.w_out, io->dy16, dO, g_wout, g_bout, 0,
                  io->accumulate);
    be->bf16_pack(rd, dO, dO16);
    for (int h = 0; h < z.H; h++) {
        const size_t ho = (size_t)h * z.d;
        const uint16_t *q = v.qkv + ho, *dOh = dO16 + ho;
        /* dP = dO V^T, dV = P^T dO */
        k->gemm_batched(0, 1, z.T, z.T, z.d, 1.0f, dOh, z.D, os, q + 2 * z.D, D3, qs,
                        dP + h * TT, z.T, Ps, io->B);
        k->gemm_batched(1, 0, z.T, z.d, z.T, 1.0f, v.P + h * TT, z.T, Ps, dOh, z.D, os,
                        dqkv + ho + 2 * z.D, D3, qs, io->B);
    }
    be->bf16_unpack(ps, v.P, P);
    be->softmax_bwd(io->B * z.H * z.T, z.T, 1.0f / sqrtf((float)z.d), P, dP);
    be->bf16_pack(ps, dP, dS16);
    for (int h = 0; h < z.H; h++) {
        const size_t ho = (size_t)h * z.d;
        const uint16_t *q = v.qkv + ho, *dS = dS16 + h * TT;
        /* dQ = dS K, dK = dS^T Q */
        k->gemm_batched(0, 0, z.T, z.d, z.T, 1.0f, dS, z.T, Ps, q + z.D, D3, qs, dqkv + ho, D3,
                        qs, io->B);
        k->gemm_batched(1, 0, z.T, z.d, z.T, 1.0f, dS, z.T, Ps, q, D3, qs, dqkv + ho + z.D, D3,
                        qs, io->B);
    }
    be->bf16_pack(3 * rd, dqkv, dqkv16);
    k->linear_bwd(R, z.D, D3, io->x, io->x16, v.w_in, dqkv16, io->dx, g_win, g_bin, 0,
                  io->accumulate);
}

static double flops(const cdp_layer *ly, int B, int need_dx)
{
    dims z = dims_of(ly);
    const double r = (double)B * z.T, D = z.D, T = z.T;
    const double proj = 2.0 * r * D * 4.0 * D;        /* QKV and out projections */
    const double att = 2.0 * 2.0 * r * T * D;         /* Q K^T and P V over the heads */
    return proj * (need_dx ? 3.0 : 2.0) + att * 3.0 + 5.0 * B * z.H * T * T;
}

/* both projections accumulate through linear_bwd */
static int accumulate_exact(const cdp_layer *ly, const cdp_backend *be, int B)
{
    dims z = dims_of(ly);
    return be->accumulate_exact && be->accumulate_exact(B * z.T, z.D, 3 * z.D) &&
           be->accumulate_exact(B * z.T, z.D, z.D);
}

const cdp_layer_ops cdp_attention_ops = {
    .name = "attention", .shape = shape, .params = params, .save_per_sample = save_per_sample,
    .fwd = fwd, .bwd = bwd, .reads_input = 1, .lowp_operands = 1,
    .lowp_params = 1u << 0 | 1u << 2, .reads_bf16 = 1, .flops = flops,
    .ws_floats = ws_floats,
    .accumulate_exact = accumulate_exact,
};
