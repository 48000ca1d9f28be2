/* CPU direct convolution for 3x3 stride-1 layers (pad 0, 1 or 2): no im2col.
 *
 * Why.  im2col copies every input pixel 9 times into a matrix that, for the
 * small channel counts of resnet20 (16..64), costs as much as the GEMM that
 * reads it, and OpenBLAS then packs it once more.  Here the kernels read a
 * zero-padded copy of the input planes directly.
 *
 * Flat planes.  An input plane padded to Hp x Wp (Hp = H + 2 pad) is stored
 * row by row; output pixel (oh, ow) is given the flat index q = oh*Wp + ow, so
 * the input of tap (kh, kw) sits at q + kh*Wp + kw: every tap is one shifted
 * contiguous run, and a vector of 16 consecutive q is one unaligned load.
 * The q with ow >= OW (Wp - OW = 2 per row) and those past OH*Wp (rounded up
 * to whole vectors) are computed and thrown away; each plane has zero slack
 * after it so that no load leaves it.  Waste: 8% of the lanes on 28x28, 13%
 * on 14x14, 23% on 7x7, 50% on 4x4 (where the im2col path stays).
 *   - y (forward): the padded x planes convolved with w; tiles of 4 output
 *     channels x 64 flat pixels kept in 16 registers over all (ci, kh, kw).
 *   - dx: the same kernel on dy padded by 2 - pad with the flipped,
 *     transposed weights wt[ci][co][kh'][kw'] = w[co][ci][2-kh'][2-kw'].
 *   - dw: dy laid out with row stride Wp (zeros at ow >= OW), so that
 *     dw[co][ci][kh][kw] = sum over q of dy[co][q] * xpad[ci][q + kh*Wp + kw];
 *     3 output channels x 9 taps of one ci in 27 registers of 16 lanes.
 *
 * Summation order (the same bits on every machine and thread count).  Every
 * product-and-add is one fmaf(): the AVX-512 kernels (_mm512_fmadd_ps, one
 * correctly rounded fma per lane) and the portable ones (fmaf per element)
 * run the same chains, so the two give identical bits (tests check it).
 *   - y[b][co][oh][ow] = bias[co] (or +0), then fmaf over ci = 0..Cin-1,
 *     kh = 0..2, kw = 0..2 in that order: acc = fmaf(w, x, acc).
 *   - dx[b][ci][ih][iw] = +0, then fmaf over co = 0..Cout-1, kh' = 0..2,
 *     kw' = 0..2 (that is kh = 2..0, kw = 2..0 of w), padding terms being
 *     products with zero.
 *   - dw: the samples are cut into slots and chunks exactly as in
 *     kernels_conv.c ("Determinism"; chunks here aim at cdp_cpu_conv_direct_cols
 *     flat pixels).  In a chunk, lane j (0..15) of each (co, ci, kh, kw)
 *     starts at +0 and takes fmaf(dy, x, lane) over the chunk's samples in
 *     order, then over the flat q = 16 v + j, v = 0, 1, ... (thrown-away q
 *     add dy = 0 times x: a zero unless x holds an inf or NaN there).  The 16
 *     lanes are then summed as a tree, l[j] += l[j+8], l[j] += l[j+4],
 *     l[j] += l[j+2], l[0] + l[1]; the slot's partial is that chunk sum, and
 *     then partial + chunk sum for its later chunks in order.  The S slot
 *     partials are added in slot order, then (accumulate) added to dw.
 *   - db: unchanged, kernels_conv.c's cdp_cpu_conv_db.
 * All work assignment depends on the shape and cdp_cpu_gemm_split only; the
 * OpenMP threads share the slots out.  No FP contraction (-std=c11; clang
 * pragma below); no allocation: scratch comes from ws
 * (cdp_cpu_conv2d_ws_floats takes the larger of this plan and im2col's). */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "backend/backend.h"
#include "cpu_internal.h"

#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

#if defined(__x86_64__) && defined(__GNUC__) && !defined(CDP_NO_AVX512)
#include <immintrin.h>
#define HAVE_AVX512 1
#endif

#define VL 16                                 /* lanes of a vector */
int cdp_cpu_conv_direct = 1;
int cdp_cpu_conv_direct_simd = 1;
int cdp_cpu_conv_direct_cols = 4096;

typedef struct {
    int S, m, g;         /* slots, chunks per slot, most samples per chunk */
    int Hp, Wp;          /* x padded by pad */
    int pd, Hq, Wq;      /* dy padded by pd = 2 - pad: the input of the dx conv */
    int nvy, nvx;        /* vectors over the flat outputs of a y plane, a dx plane */
    size_t psx, psd;     /* plane strides of padded x, padded dy */
    size_t ldy, ldx;     /* nvy*VL, nvx*VL: a plane of dyw / of the out scratch */
    size_t xp, dp, dyw, out, part, slot, wt;   /* floats */
} dplan;

static size_t r16(size_t n)
{
    return (n + 15) / 16 * 16;
}

int cdp_cpu_conv_direct_supported(const cdp_conv_shape *s)
{
    return s->stride == 1 && s->KH == 3 && s->KW == 3 && s->pad >= 0 && s->pad <= 2
           && s->B >= 1 && s->Cin >= 1 && s->Cout >= 1 && s->OH >= 1 && s->OW >= 1
           && s->OH == s->H + 2 * s->pad - 2 && s->OW == s->W + 2 * s->pad - 2;
}

/* The shapes that take the direct path by default, for pass 0 (forward),
 * 1 (backward: dw and dx) or 2 (backward, dw only: dx NULL), from
 * bench/kernels/conv_kernels.c direct (1 thread, OpenBLAS Cooperlake;
 * bench/raw/2026-11-23/conv_direct.txt): direct wins 1.1-2.2x forward and
 * 1.1-2.1x backward from 7x7 up with 16..128 channels; it loses on 4x4
 * (half the lanes are padding: 0.57 / 0.58 at 512 channels), backward at
 * 256 channels on 7x7 (0.86: dw's lane sums and unaligned loads against a
 * GEMM at its best), and on the one-channel stems forward at 64 outputs
 * (0.87: 9 taps per tile, too little work per tile) and backward with dx
 * (0.8-0.95: a dx of one channel fills one row of a tile).  A stem's dw
 * alone (its dx is never needed in a network) is 1.1-1.25x faster direct. */
int cdp_cpu_conv_direct_use(const cdp_conv_shape *s, int pass)
{
    if (cdp_cpu_conv_direct <= 0 || !cdp_cpu_conv_direct_supported(s))
        return 0;
    if (cdp_cpu_conv_direct >= 2)
        return 1;
#ifdef HAVE_AVX512
    if (!__builtin_cpu_supports("avx512f"))
        return 0;   /* measured with the AVX-512 kernels only */
#else
    return 0;
#endif
    const int P = s->OH * s->OW;
    if (P < 49)
        return 0;
    if (s->Cin == 1)
        return pass == 0 ? s->Cout <= 32 : pass == 2;
    return pass == 0 || P >= 196 || s->Cin * s->Cout <= 128 * 128;
}

static dplan dplan_make(const cdp_conv_shape *s)
{
    dplan p;
    memset(&p, 0, sizeof p);
    p.S = cdp_cpu_conv_slots(s->B);
    p.Hp = s->H + 2 * s->pad;
    p.Wp = s->W + 2 * s->pad;
    p.pd = 2 - s->pad;
    p.Hq = s->OH + 2 * p.pd;
    p.Wq = s->OW + 2 * p.pd;
    p.nvy = (s->OH * p.Wp + VL - 1) / VL;
    p.nvx = (s->H * p.Wq + VL - 1) / VL;
    p.ldy = (size_t)p.nvy * VL;
    p.ldx = (size_t)p.nvx * VL;
    /* a tile reads up to (last vector) + 2 rows + 2 columns */
    p.psx = r16(p.ldy + 2 * (size_t)p.Wp + 2);
    p.psd = r16(p.ldx + 2 * (size_t)p.Wq + 2);
    int bs = (s->B + p.S - 1) / p.S;
    int T = cdp_cpu_conv_direct_cols > 0 ? cdp_cpu_conv_direct_cols : 1;
    int G = (int)((size_t)T / p.ldy);
    G = G < 1 ? 1 : G > bs ? bs : G;
    p.m = (bs + G - 1) / G;
    p.g = (bs + p.m - 1) / p.m;
    size_t g = (size_t)p.g, ci = (size_t)s->Cin, co = (size_t)s->Cout;
    p.xp = g * ci * p.psx;
    p.dp = g * co * p.psd;
    p.dyw = g * co * p.ldy;
    p.out = co * p.ldy > ci * p.ldx ? co * p.ldy : ci * p.ldx;
    p.part = r16(co * ci * 9);
    p.slot = p.xp + p.dp + p.dyw + p.out + p.part;
    p.wt = r16(co * ci * 9);
    return p;
}

size_t cdp_cpu_conv_direct_ws_floats(const cdp_conv_shape *s)
{
    if (!cdp_cpu_conv_direct_supported(s))
        return 0;
    dplan p = dplan_make(s);
    return p.wt + (size_t)p.S * p.slot;
}

static int direct_threads(const cdp_conv_shape *s, const dplan *p)
{
    return cdp_cpu_conv_threads((double)s->B * s->OH * s->OW * s->Cin * 9.0 * s->Cout, p->S);
}

static void chunk_of(const cdp_conv_shape *s, const dplan *p, int sl, int c, int *b0, int *b1)
{
    cdp_cpu_conv_chunk(s->B, p->S, p->m, sl, c, b0, b1);
}

static int use_simd(void)
{
    return cdp_cpu_conv_direct_simd && cdp_cpu_avx512f();
}

/* ---------------------------------------------------- conv of flat planes */

/* out[co][q] for q < nv*VL (co < Co, row stride nv*VL) = bias[co] (or +0)
 * then fmaf over ci < Ci, kh, kw of wk[co*ldw + ci*9 + kh*3 + kw] times
 * in[ci*ps + q + kh*Wi + kw]: the forward (and dx) convolution. */
CDP_CPU_CLONES static void conv_planes_c(const float *in, size_t ps, int Wi, int Ci, const float *wk,
                                 size_t ldw, int Co, const float *bias, float *out, int nv)
{
    const size_t n = (size_t)nv * VL;
    for (int co = 0; co < Co; co++) {
        float *o = out + (size_t)co * n;
        const float b0 = bias ? bias[co] : 0.0f;
        for (size_t q = 0; q < n; q++)
            o[q] = b0;
        for (int ci = 0; ci < Ci; ci++)
            for (int t = 0; t < 9; t++) {
                const float wv = wk[(size_t)co * ldw + (size_t)ci * 9 + (size_t)t];
                const float *ip = in + (size_t)ci * ps + (size_t)(t / 3) * (size_t)Wi + t % 3;
                for (size_t q = 0; q < n; q++)
                    o[q] = fmaf(wv, ip[q], o[q]);
            }
    }
}

#ifdef HAVE_AVX512
#define AVX __attribute__((target("avx512f")))
#define TILE_NC 4   /* output channels per tile */
#define TILE_NV 4   /* vectors of flat pixels per tile */

/* one tile: NC channels x NV vectors, all its accumulators in registers */
AVX static inline __attribute__((always_inline)) void
conv_tile(const int NC, const int NV, const float *in, size_t ps, int Wi, int Ci,
          const float *wk, size_t ldw, const float *bias, float *out, size_t ldo)
{
    __m512 acc[TILE_NC][TILE_NV];
#pragma GCC unroll 4
    for (int c = 0; c < NC; c++)
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++)
            acc[c][v] = bias ? _mm512_set1_ps(bias[c]) : _mm512_setzero_ps();
    for (int ci = 0; ci < Ci; ci++) {
        const float *ip = in + (size_t)ci * ps;
        const float *wp = wk + (size_t)ci * 9;
#pragma GCC unroll 9
        for (int t = 0; t < 9; t++) {
            const float *q = ip + (t / 3) * Wi + t % 3;
            __m512 xv[TILE_NV];
#pragma GCC unroll 4
            for (int v = 0; v < NV; v++)
                xv[v] = _mm512_loadu_ps(q + VL * v);
#pragma GCC unroll 4
            for (int c = 0; c < NC; c++) {
                const __m512 wv = _mm512_set1_ps(wp[(size_t)c * ldw + t]);
#pragma GCC unroll 4
                for (int v = 0; v < NV; v++)
                    acc[c][v] = _mm512_fmadd_ps(wv, xv[v], acc[c][v]);
            }
        }
    }
#pragma GCC unroll 4
    for (int c = 0; c < NC; c++)
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++)
            _mm512_storeu_ps(out + (size_t)c * ldo + VL * v, acc[c][v]);
}

#define TILE_CASE(NC, NV)                                                                   \
    case (NC) * 8 + (NV):                                                                   \
        conv_tile(NC, NV, ip, ps, Wi, Ci, wc, ldw, bc, oc, n);                              \
        break;

/* the same as conv_planes_c, tile by tile */
AVX static void conv_planes_avx(const float *in, size_t ps, int Wi, int Ci, const float *wk,
                                size_t ldw, int Co, const float *bias, float *out, int nv)
{
    const size_t n = (size_t)nv * VL;
    for (int v0 = 0; v0 < nv; v0 += TILE_NV) {
        const int nvt = nv - v0 < TILE_NV ? nv - v0 : TILE_NV;
        const float *ip = in + (size_t)v0 * VL;
        for (int c0 = 0; c0 < Co; c0 += TILE_NC) {
            const int nct = Co - c0 < TILE_NC ? Co - c0 : TILE_NC;
            const float *wc = wk + (size_t)c0 * ldw, *bc = bias ? bias + c0 : NULL;
            float *oc = out + (size_t)c0 * n + (size_t)v0 * VL;
            switch (nct * 8 + nvt) {
                TILE_CASE(4, 4) TILE_CASE(4, 3) TILE_CASE(4, 2) TILE_CASE(4, 1)
                TILE_CASE(3, 4) TILE_CASE(3, 3) TILE_CASE(3, 2) TILE_CASE(3, 1)
                TILE_CASE(2, 4) TILE_CASE(2, 3) TILE_CASE(2, 2) TILE_CASE(2, 1)
                TILE_CASE(1, 4) TILE_CASE(1, 3) TILE_CASE(1, 2) TILE_CASE(1, 1)
            }
        }
    }
}
#endif

static void conv_planes(int simd, const float *in, size_t ps, int Wi, int Ci, const float *wk,
                        size_t ldw, int Co, const float *bias, float *out, int nv)
{
#ifdef HAVE_AVX512
    if (simd) {
        conv_planes_avx(in, ps, Wi, Ci, wk, ldw, Co, bias, out, nv);
        return;
    }
#endif
    (void)simd;
    conv_planes_c(in, ps, Wi, Ci, wk, ldw, Co, bias, out, nv);
}

/* ------------------------------------------------------------------- dw */

/* the lane tree of the top comment */
static float lanes_sum(const float *l)
{
    float a[8], b[4];
    for (int j = 0; j < 8; j++)
        a[j] = l[j] + l[j + 8];
    for (int j = 0; j < 4; j++)
        b[j] = a[j] + a[j + 4];
    float c0 = b[0] + b[2], c1 = b[1] + b[3];
    return c0 + c1;
}

static void part_put(float *part, size_t i, float r, int first)
{
    part[i] = first ? r : part[i] + r;
}

/* part[co][ci][t] (=, or += unless first) the chunk's lane sums of
 * dy[co][q] * xpad[ci][q + off_t] over g samples: portable lanes */
CDP_CPU_CLONES static void dw_chunk_c(int g, int Ci, int Co, const float *xp, size_t psx, int Wp,
                              const float *dyw, size_t ldy, float *part, int first)
{
    const size_t nv = ldy / VL;
    for (int co = 0; co < Co; co++)
        for (int ci = 0; ci < Ci; ci++)
            for (int t = 0; t < 9; t++) {
                const size_t off = (size_t)(t / 3) * (size_t)Wp + (size_t)(t % 3);
                float l[VL];
                for (int j = 0; j < VL; j++)
                    l[j] = 0.0f;
                for (int gi = 0; gi < g; gi++) {
                    const float *xq = xp + ((size_t)gi * Ci + ci) * psx + off;
                    const float *d = dyw + ((size_t)gi * Co + co) * ldy;
                    for (size_t v = 0; v < nv; v++)
                        for (int j = 0; j < VL; j++)
                            l[j] = fmaf(d[v * VL + j], xq[v * VL + j], l[j]);
                }
                part_put(part, ((size_t)co * Ci + ci) * 9 + t, lanes_sum(l), first);
            }
}

#ifdef HAVE_AVX512
#define DW_NC 3   /* output channels per dw tile: 27 accumulators, 3 dy, 1 x */

AVX static inline __attribute__((always_inline)) void
dw_tile(const int NC, int g, int Ci, int Co, int co0, int ci, const float *xp, size_t psx,
        int Wp, const float *dyw, size_t ldy, float *part, int first)
{
    __m512 acc[DW_NC][9];
#pragma GCC unroll 3
    for (int c = 0; c < NC; c++)
#pragma GCC unroll 9
        for (int t = 0; t < 9; t++)
            acc[c][t] = _mm512_setzero_ps();
    const size_t nv = ldy / VL;
    for (int gi = 0; gi < g; gi++) {
        const float *xq = xp + ((size_t)gi * Ci + ci) * psx;
        const float *d = dyw + ((size_t)gi * Co + co0) * ldy;
        for (size_t v = 0; v < nv; v++) {
            __m512 dv[DW_NC];
#pragma GCC unroll 3
            for (int c = 0; c < NC; c++)
                dv[c] = _mm512_loadu_ps(d + (size_t)c * ldy + v * VL);
#pragma GCC unroll 9
            for (int t = 0; t < 9; t++) {
                __m512 xv = _mm512_loadu_ps(xq + v * VL + (size_t)(t / 3) * Wp + t % 3);
                /* one load per tap, shared by the NC channels (else gcc folds
                 * it into every fma: NC split loads instead of one) */
                __asm__("" : "+v"(xv));
#pragma GCC unroll 3
                for (int c = 0; c < NC; c++)
                    acc[c][t] = _mm512_fmadd_ps(dv[c], xv, acc[c][t]);
            }
        }
    }
    for (int c = 0; c < NC; c++)
        for (int t = 0; t < 9; t++) {
            float l[VL];
            _mm512_storeu_ps(l, acc[c][t]);
            part_put(part, ((size_t)(co0 + c) * Ci + ci) * 9 + t, lanes_sum(l), first);
        }
}

AVX static void dw_chunk_avx(int g, int Ci, int Co, const float *xp, size_t psx, int Wp,
                             const float *dyw, size_t ldy, float *part, int first)
{
    for (int co0 = 0; co0 < Co; co0 += DW_NC)
        for (int ci = 0; ci < Ci; ci++) {
            if (Co - co0 >= 3)
                dw_tile(3, g, Ci, Co, co0, ci, xp, psx, Wp, dyw, ldy, part, first);
            else if (Co - co0 == 2)
                dw_tile(2, g, Ci, Co, co0, ci, xp, psx, Wp, dyw, ldy, part, first);
            else
                dw_tile(1, g, Ci, Co, co0, ci, xp, psx, Wp, dyw, ldy, part, first);
        }
}
#endif

static void dw_chunk(int simd, int g, int Ci, int Co, const float *xp, size_t psx, int Wp,
                     const float *dyw, size_t ldy, float *part, int first)
{
#ifdef HAVE_AVX512
    if (simd) {
        dw_chunk_avx(g, Ci, Co, xp, psx, Wp, dyw, ldy, part, first);
        return;
    }
#endif
    (void)simd;
    dw_chunk_c(g, Ci, Co, xp, psx, Wp, dyw, ldy, part, first);
}

/* ------------------------------------------------------------- layouts */

/* x of samples b0..b0+g-1 into the padded planes (their zeros set before) */
static void pad_x(const cdp_conv_shape *s, const dplan *p, const float *x, int b0, int g,
                  float *xp)
{
    const size_t HW = (size_t)s->H * (size_t)s->W;
    for (int gi = 0; gi < g; gi++)
        for (int ci = 0; ci < s->Cin; ci++) {
            const float *src = x + ((size_t)(b0 + gi) * s->Cin + ci) * HW;
            float *dst = xp + ((size_t)gi * s->Cin + ci) * p->psx
                         + (size_t)s->pad * p->Wp + (size_t)s->pad;
            for (int h = 0; h < s->H; h++)
                memcpy(dst + (size_t)h * p->Wp, src + (size_t)h * s->W,
                       (size_t)s->W * sizeof *dst);
        }
}

/* dy planes of samples b0..b0+g-1 at row stride ld, offset off (zeros set
 * before), plane stride ps */
static void lay_dy(const cdp_conv_shape *s, const float *dy, int b0, int g, float *dst,
                   size_t ps, int ld, size_t off)
{
    const size_t P = (size_t)s->OH * (size_t)s->OW;
    for (int gi = 0; gi < g; gi++)
        for (int co = 0; co < s->Cout; co++) {
            const float *src = dy + ((size_t)(b0 + gi) * s->Cout + co) * P;
            float *d = dst + ((size_t)gi * s->Cout + co) * ps + off;
            for (int h = 0; h < s->OH; h++)
                memcpy(d + (size_t)h * ld, src + (size_t)h * s->OW, (size_t)s->OW * sizeof *d);
        }
}

/* the valid columns of a flat plane set (Co planes, stride ldo, row stride
 * Wi) into NCHW rows of width OWv */
static void unflat(const float *out, size_t ldo, int Wi, int Co, int OHv, int OWv, float *dst)
{
    for (int c = 0; c < Co; c++)
        for (int h = 0; h < OHv; h++)
            memcpy(dst + ((size_t)c * OHv + h) * (size_t)OWv,
                   out + (size_t)c * ldo + (size_t)h * Wi, (size_t)OWv * sizeof *dst);
}

/* ------------------------------------------------------------- entries */

void cdp_cpu_conv2d_direct_fwd(const cdp_conv_shape *s, const float *x, const float *w,
                               const float *b, float *y, float *ws)
{
    const dplan p = dplan_make(s);
    const int simd = use_simd(), nt = direct_threads(s, &p);
    const size_t K = (size_t)s->Cin * 9, Py = (size_t)s->OH * (size_t)s->OW;
#pragma omp parallel for if (nt > 1) num_threads(nt) schedule(static)
    for (int sl = 0; sl < p.S; sl++) {
        float *xp = ws + p.wt + (size_t)sl * p.slot;
        float *out = xp + p.xp + p.dp + p.dyw;
        memset(xp, 0, p.xp * sizeof *xp);
        for (int c = 0; c < p.m; c++) {
            int b0, b1;
            chunk_of(s, &p, sl, c, &b0, &b1);
            if (b1 <= b0)
                continue;
            pad_x(s, &p, x, b0, b1 - b0, xp);
            for (int bi = b0; bi < b1; bi++) {
                conv_planes(simd, xp + (size_t)(bi - b0) * s->Cin * p.psx, p.psx, p.Wp, s->Cin,
                            w, K, s->Cout, b, out, p.nvy);
                unflat(out, p.ldy, p.Wp, s->Cout, s->OH, s->OW,
                       y + (size_t)bi * s->Cout * Py);
            }
        }
    }
}

void cdp_cpu_conv2d_direct_bwd(const cdp_conv_shape *s, const float *x, const float *w,
                               const float *dy, float *dx, float *dw, int accumulate, float *ws)
{
    const dplan p = dplan_make(s);
    const int simd = use_simd(), nt = direct_threads(s, &p);
    const int Cin = s->Cin, Cout = s->Cout;
    const size_t HW = (size_t)s->H * (size_t)s->W;
    float *wt = ws;
    if (dx)   /* wt[ci][co][kh'][kw'] = w[co][ci][2-kh'][2-kw'] */
        for (int ci = 0; ci < Cin; ci++)
            for (int co = 0; co < Cout; co++)
                for (int t = 0; t < 9; t++)
                    wt[((size_t)ci * Cout + co) * 9 + (size_t)t] =
                        w[((size_t)co * Cin + ci) * 9 + (size_t)(8 - t)];
#pragma omp parallel for if (nt > 1) num_threads(nt) schedule(static)
    for (int sl = 0; sl < p.S; sl++) {
        float *xp = ws + p.wt + (size_t)sl * p.slot;
        float *dp = xp + p.xp, *dyw = dp + p.dp, *out = dyw + p.dyw, *part = out + p.out;
        memset(xp, 0, (p.xp + (dx ? p.dp : 0)) * sizeof *xp);
        memset(dyw, 0, p.dyw * sizeof *dyw);
        int first = 1;
        for (int c = 0; c < p.m; c++) {
            int b0, b1;
            chunk_of(s, &p, sl, c, &b0, &b1);
            int g = b1 - b0;
            if (g <= 0)
                continue;
            pad_x(s, &p, x, b0, g, xp);
            lay_dy(s, dy, b0, g, dyw, p.ldy, p.Wp, 0);
            dw_chunk(simd, g, Cin, Cout, xp, p.psx, p.Wp, dyw, p.ldy, part, first);
            first = 0;
            if (!dx)
                continue;
            lay_dy(s, dy, b0, g, dp, p.psd, p.Wq, (size_t)p.pd * p.Wq + (size_t)p.pd);
            for (int gi = 0; gi < g; gi++) {
                conv_planes(simd, dp + (size_t)gi * Cout * p.psd, p.psd, p.Wq, Cout, wt,
                            (size_t)Cout * 9, Cin, NULL, out, p.nvx);
                unflat(out, p.ldx, p.Wq, Cin, s->H, s->W, dx + (size_t)(b0 + gi) * Cin * HW);
            }
        }
    }
    /* dw = the slots' partials in slot order (then added to dw) */
    cdp_cpu_conv_dw_sum(cdp_conv_weight_count(s), p.S, ws + p.wt + p.xp + p.dp + p.dyw + p.out,
                        p.slot, dw, accumulate);
}
