/* CPU convolution through oneDNN (built with HAVE_DNNL: configure
 * --with-dnnl): forward, backward-data and backward-weights of the NCHW
 * float32 convolution, for the shapes cdp_cpu_conv_dnnl_use() picks.
 *
 * Why.  oneDNN's JIT convolutions on blocked layouts (nChw16c) beat im2col +
 * sgemm and the direct 3x3 kernels on the ResNets' wider layers, forward
 * and, more so, backward; PyTorch's CPU convolutions are these.
 *
 * Determinism.  oneDNN's own threading splits a convolution (backward
 * weights' reduction over the batch above all) by the thread count, so its
 * bits would change with it.  It never threads here: the micro-batch is cut
 * into the slots of kernels_conv.c (cdp_cpu_conv_slots: they depend on the
 * shape and cdp_cpu_gemm_split only), and each slot runs single-threaded
 * primitives over its own samples, in an OpenMP loop over the slots.  dw:
 * each slot writes its own partial (the backward-weights primitive over its
 * samples), and the partials are summed in slot order
 * (cdp_cpu_conv_dw_sum), then added to dw with accumulate, as on the other
 * paths.  So every primitive sees the same operands whatever the number of
 * threads or ranks.
 *
 * The threading trap.  A oneDNN primitive fixes its work split when it is
 * created, from omp_get_max_threads(); executed inside a parallel region
 * (where oneDNN runs as one thread) a primitive created for 2 threads does
 * only thread 0's share (half of dw) or waits for a partner that never
 * comes.  Every primitive and primitive descriptor is therefore created
 * with the OpenMP thread count forced to 1 (guard_enter/guard_leave), and
 * executed under the same guard inside the slot loop.  The one exception is
 * the weights' reorder into the copy the slots share: it runs before the
 * slot loop, alone, on all the threads (operand.reorder_mt; a reorder is
 * an exact copy, whatever its threads).
 *
 * Memory.  The primitives choose their layouts (format_any); plain NCHW /
 * OIHW user tensors are reordered in and out (exact copies) unless the
 * choice is plain already.  The reordered weights are shared by the slots;
 * each slot has its own stream, buffers and scratchpad (user scratchpad
 * mode), all carved from ws: no allocation per call.  The layout of ws:
 *   [shared: weights for forward | weights for backward-data]
 *   S x [slot: dw partial (plain OIHW) | the pass's buffers | scratchpad]
 * Primitives are cached by shape (the slot's sample count included: a
 * micro-batch not divisible by S has slots of two sizes) in a small table,
 * created the first time ws is sized or a shape runs, released at exit.
 * The kernels are called from one thread at a time (the executor's), which
 * is what the table and the streams rely on.
 *
 * Bias: added after the convolution by the loop of this file (oneDNN's
 * bias would be another summation order); db stays with kernels_conv.c.
 *
 * bfloat16 (--precision bf16, conv_bf16.c): the same primitives with the
 * operands of the products (src, weights, diff_dst) in bfloat16 and their
 * results (dst, diff_src, the dw partials) in float32; the user's tensors
 * stay plain float32 holding bfloat16 values, so the reorders in also
 * pack them (exactly), and everything above (slots, guard, sums) holds
 * unchanged.  The two kinds are cached side by side (entry.bf16). */
#include "config.h"

#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <oneapi/dnnl/dnnl.h>

#include "backend/backend.h"
#include "cpu_internal.h"

#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

int cdp_cpu_conv_dnnl = 1;

/* ------------------------------------------------------------ plumbing */

static void dnnl_ok(dnnl_status_t st, const char *what)
{
    if (st != dnnl_success) {
        fprintf(stderr, "cdp: oneDNN: %s failed (status %d)\n", what, (int)st);
        abort();
    }
}
#define OK(call) dnnl_ok((call), #call)

static int guard_enter(void)
{
    int n = omp_get_max_threads();
    omp_set_num_threads(1);
    return n;
}

static void guard_leave(int n)
{
    omp_set_num_threads(n);
}

static size_t r16(size_t n)
{
    return (n + 15) / 16 * 16;
}

static size_t md_floats(const dnnl_memory_desc_t *md)
{
    return r16((dnnl_memory_desc_get_size(md) + sizeof(float) - 1) / sizeof(float));
}

static dnnl_engine_t engine;
static dnnl_stream_t *streams;   /* one per slot */
static int nstreams;

/* ------------------------------------------------------- shape entries */

/* One tensor a primitive reads or writes: its layout there (md), and the
 * reorder from (inputs) or to (outputs) the user's plain layout, NULL when
 * the two are the same (the primitive then works on the user's buffer). */
typedef struct {
    dnnl_memory_desc_t md, user;
    dnnl_primitive_t reorder;
    /* the weights' reorder into the copy the slots share, made before the
     * slot loop: created for the process's threads (a reorder is a copy,
     * the same bits on any number); NULL for the other operands */
    dnnl_primitive_t reorder_mt;
    size_t floats;   /* the reordered copy in ws; 0 without reorder */
    int arg;         /* DNNL_ARG_* of the convolution */
} operand;

/* A convolution primitive with its three tensors: two in, one out. */
typedef struct {
    dnnl_primitive_t prim;
    operand in[2], out;
    dnnl_memory_desc_t scratch_md;
    size_t scratch;   /* floats */
} conv_prim;

enum { FWD, BWD_DATA, BWD_W, NPRIM };

typedef struct {
    cdp_conv_shape s;   /* B: the samples of one slot */
    int bf16;           /* the bfloat16 primitives (conv_bf16.c), else float32 */
    int valid;
    conv_prim p[NPRIM];
    size_t scratch;     /* the most any primitive or reorder needs */
} entry;

#define NENTRY CDP_CPU_CONV_DNNL_CACHE
static entry table[NENTRY];
static int next_victim;

static dnnl_memory_desc_t typed_md(int d0, int d1, int d2, int d3, dnnl_format_tag_t tag,
                                   dnnl_data_type_t dt)
{
    dnnl_memory_desc_t md;
    dnnl_dims_t dims = {d0, d1, d2, d3};
    OK(dnnl_memory_desc_init_by_tag(&md, 4, dims, dt, tag));
    return md;
}

static dnnl_memory_desc_t plain_md(int d0, int d1, int d2, int d3, dnnl_format_tag_t tag)
{
    return typed_md(d0, d1, d2, d3, tag, dnnl_f32);
}

static dnnl_primitive_attr_t user_scratchpad_attr(void)
{
    dnnl_primitive_attr_t attr;
    OK(dnnl_primitive_attr_create(&attr));
    OK(dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user));
    return attr;
}

static size_t pd_scratch(const_dnnl_primitive_desc_t pd)
{
    return md_floats(dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0));
}

/* op->md = what pd wants for query; a reorder where it differs from user */
static void operand_make(operand *op, const_dnnl_primitive_desc_t pd, dnnl_query_t query,
                         const dnnl_memory_desc_t *user, int arg, int is_input,
                         size_t *scratch)
{
    memset(op, 0, sizeof *op);
    op->md = *dnnl_primitive_desc_query_md(pd, query, 0);
    op->user = *user;
    op->arg = arg;
    if (dnnl_memory_desc_equal(&op->md, user))
        return;
    op->floats = md_floats(&op->md);
    const dnnl_memory_desc_t *from = is_input ? user : &op->md, *to = is_input ? &op->md : user;
    dnnl_primitive_attr_t attr = user_scratchpad_attr();
    dnnl_primitive_desc_t rpd;
    OK(dnnl_reorder_primitive_desc_create(&rpd, from, engine, to, engine, attr));
    size_t sc = pd_scratch(rpd);
    if (sc > *scratch)
        *scratch = sc;
    OK(dnnl_primitive_create(&op->reorder, rpd));
    OK(dnnl_primitive_desc_destroy(rpd));
    OK(dnnl_primitive_attr_destroy(attr));
}

static void prim_make(conv_prim *cp, const_dnnl_primitive_desc_t pd)
{
    cp->scratch_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    cp->scratch = md_floats(&cp->scratch_md);
    OK(dnnl_primitive_create(&cp->prim, pd));
}

/* the three primitives of shape s (s->B: one slot's samples); under the
 * thread guard.  bf16: the operands the products read (src, weights,
 * diff_dst) in bfloat16, what they write (dst, diff_src, diff_weights) in
 * float32; the user's tensors stay plain float32 either way, so the
 * reorders in convert too (exactly: the caller's values are bfloat16's) */
static void entry_build(entry *e, const cdp_conv_shape *s, int bf16)
{
    memset(e, 0, sizeof *e);
    e->s = *s;
    e->bf16 = bf16;
    const dnnl_data_type_t lo = bf16 ? dnnl_bf16 : dnnl_f32;
    const dnnl_format_tag_t any = dnnl_format_tag_any;
    const dnnl_memory_desc_t ux = plain_md(s->B, s->Cin, s->H, s->W, dnnl_nchw);
    const dnnl_memory_desc_t uy = plain_md(s->B, s->Cout, s->OH, s->OW, dnnl_nchw);
    const dnnl_memory_desc_t uw = plain_md(s->Cout, s->Cin, s->KH, s->KW, dnnl_oihw);
    /* read by the products (lo), written (f32) */
    const dnnl_memory_desc_t ax = typed_md(s->B, s->Cin, s->H, s->W, any, lo);
    const dnnl_memory_desc_t ay = typed_md(s->B, s->Cout, s->OH, s->OW, any, lo);
    const dnnl_memory_desc_t aw = typed_md(s->Cout, s->Cin, s->KH, s->KW, any, lo);
    const dnnl_memory_desc_t fx = plain_md(s->B, s->Cin, s->H, s->W, any);
    const dnnl_memory_desc_t fy = plain_md(s->B, s->Cout, s->OH, s->OW, any);
    const dnnl_memory_desc_t fw = plain_md(s->Cout, s->Cin, s->KH, s->KW, any);
    /* right padding: what makes oneDNN's output size the shape's (may be
     * negative for a stride that skips the last rows; oneDNN allows > -stride) */
    dnnl_dims_t strides = {s->stride, s->stride}, pl = {s->pad, s->pad};
    dnnl_dims_t pr = {(s->OH - 1) * s->stride + s->KH - s->H - s->pad,
                      (s->OW - 1) * s->stride + s->KW - s->W - s->pad};
    dnnl_primitive_attr_t attr = user_scratchpad_attr();
    dnnl_convolution_desc_t cd;
    dnnl_primitive_desc_t fpd, dpd, wpd;
    size_t *sc = &e->scratch;

    OK(dnnl_convolution_forward_desc_init(&cd, dnnl_forward_training, dnnl_convolution_direct,
                                          &ax, &aw, NULL, &fy, strides, pl, pr));
    OK(dnnl_primitive_desc_create(&fpd, &cd, attr, engine, NULL));
    conv_prim *f = &e->p[FWD];
    operand_make(&f->in[0], fpd, dnnl_query_src_md, &ux, DNNL_ARG_SRC, 1, sc);
    operand_make(&f->in[1], fpd, dnnl_query_weights_md, &uw, DNNL_ARG_WEIGHTS, 1, sc);
    operand_make(&f->out, fpd, dnnl_query_dst_md, &uy, DNNL_ARG_DST, 0, sc);
    prim_make(f, fpd);

    OK(dnnl_convolution_backward_data_desc_init(&cd, dnnl_convolution_direct, &fx, &aw, &ay,
                                                strides, pl, pr));
    OK(dnnl_primitive_desc_create(&dpd, &cd, attr, engine, fpd));
    conv_prim *d = &e->p[BWD_DATA];
    operand_make(&d->in[0], dpd, dnnl_query_diff_dst_md, &uy, DNNL_ARG_DIFF_DST, 1, sc);
    operand_make(&d->in[1], dpd, dnnl_query_weights_md, &uw, DNNL_ARG_WEIGHTS, 1, sc);
    operand_make(&d->out, dpd, dnnl_query_diff_src_md, &ux, DNNL_ARG_DIFF_SRC, 0, sc);
    prim_make(d, dpd);

    OK(dnnl_convolution_backward_weights_desc_init(&cd, dnnl_convolution_direct, &ax, &fw,
                                                   NULL, &ay, strides, pl, pr));
    OK(dnnl_primitive_desc_create(&wpd, &cd, attr, engine, fpd));
    conv_prim *w = &e->p[BWD_W];
    operand_make(&w->in[0], wpd, dnnl_query_src_md, &ux, DNNL_ARG_SRC, 1, sc);
    operand_make(&w->in[1], wpd, dnnl_query_diff_dst_md, &uy, DNNL_ARG_DIFF_DST, 1, sc);
    operand_make(&w->out, wpd, dnnl_query_diff_weights_md, &uw, DNNL_ARG_DIFF_WEIGHTS, 0, sc);
    prim_make(w, wpd);

    for (int k = 0; k < NPRIM; k++)
        if (e->p[k].scratch > *sc)
            *sc = e->p[k].scratch;
    OK(dnnl_primitive_desc_destroy(fpd));
    OK(dnnl_primitive_desc_destroy(dpd));
    OK(dnnl_primitive_desc_destroy(wpd));
    OK(dnnl_primitive_attr_destroy(attr));
    e->valid = 1;
}

static void operand_free(operand *op)
{
    if (op->reorder)
        dnnl_primitive_destroy(op->reorder);
    if (op->reorder_mt)
        dnnl_primitive_destroy(op->reorder_mt);
}

static void entry_free(entry *e)
{
    if (!e->valid)
        return;
    for (int k = 0; k < NPRIM; k++) {
        operand_free(&e->p[k].in[0]);
        operand_free(&e->p[k].in[1]);
        operand_free(&e->p[k].out);
        dnnl_primitive_destroy(e->p[k].prim);
    }
    e->valid = 0;
}

static void release_all(void)
{
    for (int i = 0; i < NENTRY; i++)
        entry_free(&table[i]);
    for (int i = 0; i < nstreams; i++)
        dnnl_stream_destroy(streams[i]);
    free(streams);
    streams = NULL;
    nstreams = 0;
    if (engine)
        dnnl_engine_destroy(engine);
    engine = NULL;
}

static void engine_init(void)
{
    if (engine)
        return;
    OK(dnnl_engine_create(&engine, dnnl_cpu, 0));
    atexit(release_all);
}

/* streams for slots 0..S-1 (created before the slot loop: not thread-safe) */
static void streams_ensure(int S)
{
    if (S <= nstreams)
        return;
    dnnl_stream_t *n = realloc(streams, (size_t)S * sizeof *n);
    if (!n) {
        fprintf(stderr, "cdp: oneDNN: out of memory for %d streams\n", S);
        abort();
    }
    streams = n;
    for (; nstreams < S; nstreams++)
        OK(dnnl_stream_create(&streams[nstreams], engine, dnnl_stream_default_flags));
}

/* op->reorder_mt, outside the thread guard (library scratchpad: it runs
 * alone, outside the slot loop) */
static void weights_reorder_mt(operand *op)
{
    if (!op->reorder)
        return;
    dnnl_primitive_desc_t rpd;
    OK(dnnl_reorder_primitive_desc_create(&rpd, &op->user, engine, &op->md, engine, NULL));
    OK(dnnl_primitive_create(&op->reorder_mt, rpd));
    OK(dnnl_primitive_desc_destroy(rpd));
}

static int shape_eq(const cdp_conv_shape *a, const cdp_conv_shape *b)
{
    return a->B == b->B && a->Cin == b->Cin && a->H == b->H && a->W == b->W
           && a->Cout == b->Cout && a->KH == b->KH && a->KW == b->KW
           && a->stride == b->stride && a->pad == b->pad && a->OH == b->OH && a->OW == b->OW;
}

/* the cached entry of s with nb samples, built on a miss by round-robin
 * eviction that spares keep (a call looks up two entries, for its two slot
 * sizes: the second lookup must not rebuild the first one's) */
static const entry *entry_get(const cdp_conv_shape *s, int nb, int bf16, const entry *keep)
{
    cdp_conv_shape k = *s;
    k.B = nb;
    for (int i = 0; i < NENTRY; i++)
        if (table[i].valid && table[i].bf16 == bf16 && shape_eq(&table[i].s, &k))
            return &table[i];
    engine_init();
    if (&table[next_victim] == keep)
        next_victim = (next_victim + 1) % NENTRY;
    entry *e = &table[next_victim];
    next_victim = (next_victim + 1) % NENTRY;
    entry_free(e);
    int nt = guard_enter();
    entry_build(e, &k, bf16);
    guard_leave(nt);
    weights_reorder_mt(&e->p[FWD].in[1]);
    weights_reorder_mt(&e->p[BWD_DATA].in[1]);
    return e;
}

/* --------------------------------------------------------------- plans */

/* Where everything lives in ws for shape s (s->B the whole micro-batch). */
typedef struct {
    int S;
    const entry *e[2];   /* slots of B/S samples, of B/S + 1 */
    size_t wf, wd;       /* shared: weights for forward, for backward-data */
    size_t part;         /* dw partial at the start of a slot */
    size_t slot;         /* floats per slot */
} plan;

static size_t fwd_floats(const entry *e)
{
    const conv_prim *f = &e->p[FWD];
    return f->in[0].floats + f->out.floats;
}

static size_t bwd_floats(const entry *e)
{
    const conv_prim *d = &e->p[BWD_DATA], *w = &e->p[BWD_W];
    return w->in[0].floats + w->in[1].floats + w->out.floats + d->in[0].floats + d->out.floats;
}

static plan plan_make(const cdp_conv_shape *s, int bf16)
{
    plan p;
    memset(&p, 0, sizeof p);
    p.S = cdp_cpu_conv_slots(s->B);
    int lo = s->B / p.S;
    p.e[0] = entry_get(s, lo, bf16, NULL);
    p.e[1] = s->B % p.S ? entry_get(s, lo + 1, bf16, p.e[0]) : p.e[0];
    /* the weights' layouts do not depend on the batch: entry 0's serve both */
    p.wf = p.e[0]->p[FWD].in[1].floats;
    p.wd = p.e[0]->p[BWD_DATA].in[1].floats;
    p.part = r16(cdp_conv_weight_count(s));
    for (int i = 0; i < 2; i++) {
        const entry *e = p.e[i];
        size_t f = fwd_floats(e), b = bwd_floats(e);
        size_t n = p.part + (f > b ? f : b) + e->scratch;
        if (n > p.slot)
            p.slot = n;
    }
    return p;
}

int cdp_cpu_conv_dnnl_supported(const cdp_conv_shape *s)
{
    return s->B >= 1 && s->Cin >= 1 && s->Cout >= 1 && s->KH >= 1 && s->KW >= 1
           && s->stride >= 1 && s->pad >= 0 && s->OH >= 1 && s->OW >= 1
           && s->OH == (s->H + 2 * s->pad - s->KH) / s->stride + 1
           && s->OW == (s->W + 2 * s->pad - s->KW) / s->stride + 1;
}

/* 3x3 with >= 16 channels each way: the ResNets' bulk, where oneDNN's
 * blocked kernels fill their 16-channel vectors (the one-channel stems and
 * the 1x1 shortcuts stay on the direct and im2col paths) */
int cdp_cpu_conv_dnnl_use(const cdp_conv_shape *s)
{
    if (cdp_cpu_conv_dnnl <= 0 || !cdp_cpu_conv_dnnl_supported(s))
        return 0;
    if (cdp_cpu_conv_dnnl >= 2)
        return 1;
    return s->KH == 3 && s->KW == 3 && s->Cin >= 16 && s->Cout >= 16;
}

static size_t ws_floats(const cdp_conv_shape *s, int bf16)
{
    if (!cdp_cpu_conv_dnnl_supported(s))
        return 0;
    plan p = plan_make(s, bf16);
    return p.wf + p.wd + (size_t)p.S * p.slot;
}

size_t cdp_cpu_conv_dnnl_ws_floats(const cdp_conv_shape *s)
{
    return ws_floats(s, 0);
}

size_t cdp_cpu_conv_dnnl_bf16_ws_floats(const cdp_conv_shape *s)
{
    return ws_floats(s, 1);
}

int cdp_cpu_dnnl_has_bf16(void)
{
    const dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
    return (isa & dnnl_cpu_isa_avx512_core_bf16) == dnnl_cpu_isa_avx512_core_bf16;
}

const char *cdp_cpu_dnnl_version(void)
{
    static char v[48];
    const dnnl_version_t *d = dnnl_version();
    snprintf(v, sizeof v, "oneDNN %d.%d.%d", d->major, d->minor, d->patch);
    return v;
}

const char *cdp_cpu_dnnl_isa(void)
{
    switch (dnnl_get_effective_cpu_isa()) {
    case dnnl_cpu_isa_sse41: return "sse41";
    case dnnl_cpu_isa_avx: return "avx";
    case dnnl_cpu_isa_avx2: return "avx2";
    case dnnl_cpu_isa_avx2_vnni: return "avx2_vnni";
    case dnnl_cpu_isa_avx512_mic: return "avx512_mic";
    case dnnl_cpu_isa_avx512_mic_4ops: return "avx512_mic_4ops";
    case dnnl_cpu_isa_avx512_core: return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni: return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16: return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx: return "avx512_core_amx";
    default: return "other";
    }
}

/* ------------------------------------------------------------ execution */

static dnnl_memory_t mem(const dnnl_memory_desc_t *md, const void *data)
{
    dnnl_memory_t m;
    OK(dnnl_memory_create(&m, md, engine, (void *)data));
    return m;
}

static void exec(dnnl_primitive_t prim, dnnl_stream_t st, int n, const dnnl_exec_arg_t *args)
{
    OK(dnnl_primitive_execute(prim, st, n, args));
    OK(dnnl_stream_wait(st));
}

/* reorder from -> to (one of them the user's buffer), scratchpad sc */
static void reorder(const operand *op, int is_input, const void *user, void *copy, float *sc,
                    dnnl_stream_t st)
{
    const dnnl_memory_desc_t *fmd = is_input ? &op->user : &op->md;
    const dnnl_memory_desc_t *tmd = is_input ? &op->md : &op->user;
    dnnl_memory_t from = mem(fmd, is_input ? user : copy);
    dnnl_memory_t to = mem(tmd, is_input ? copy : user);
    const_dnnl_primitive_desc_t rpd;   /* borrowed: the primitive owns it */
    OK(dnnl_primitive_get_primitive_desc(op->reorder, &rpd));
    dnnl_memory_t scm = mem(dnnl_primitive_desc_query_md(rpd, dnnl_query_scratchpad_md, 0), sc);
    dnnl_exec_arg_t args[3] = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to},
                               {DNNL_ARG_SCRATCHPAD, scm}};
    exec(op->reorder, st, 3, args);
    dnnl_memory_destroy(from);
    dnnl_memory_destroy(to);
    dnnl_memory_destroy(scm);
}

/* Where an operand's data lives for the primitive: the user's buffer, or
 * the copy at *cursor (advanced past it), reordered in first for inputs. */
static void *operand_data(const operand *op, int is_input, const void *user, float **cursor,
                          float *sc, dnnl_stream_t st)
{
    if (!op->reorder)
        return (void *)user;
    float *copy = *cursor;
    *cursor += op->floats;
    if (is_input)
        reorder(op, 1, user, copy, sc, st);
    return copy;
}

/* runs conv_prim cp: in0, in1 (user buffers, or copies already in the
 * primitive's layout: bit k of ready for in[k]), out to the user's buffer;
 * buf: the slot's scratch space for the copies */
static void run_prim(const conv_prim *cp, const void *in0, const void *in1, int ready,
                     void *out, float *buf, float *sc, dnnl_stream_t st)
{
    void *d0 = ready & 1 ? (void *)in0 : operand_data(&cp->in[0], 1, in0, &buf, sc, st);
    void *d1 = ready & 2 ? (void *)in1 : operand_data(&cp->in[1], 1, in1, &buf, sc, st);
    void *dout = operand_data(&cp->out, 0, out, &buf, sc, st);
    dnnl_memory_t m0 = mem(&cp->in[0].md, d0), m1 = mem(&cp->in[1].md, d1);
    dnnl_memory_t mo = mem(&cp->out.md, dout), ms = mem(&cp->scratch_md, sc);
    dnnl_exec_arg_t args[4] = {{cp->in[0].arg, m0}, {cp->in[1].arg, m1}, {cp->out.arg, mo},
                               {DNNL_ARG_SCRATCHPAD, ms}};
    exec(cp->prim, st, 4, args);
    dnnl_memory_destroy(m0);
    dnnl_memory_destroy(m1);
    dnnl_memory_destroy(mo);
    dnnl_memory_destroy(ms);
    if (cp->out.reorder)
        reorder(&cp->out, 0, out, dout, sc, st);
}

/* the weights in the layout of cp (into shared when it needs a reorder),
 * before the slot loop: every slot reads the same copy */
static const float *weights_for(const conv_prim *cp, const float *w, float *shared)
{
    const operand *op = &cp->in[1];
    if (!op->reorder)
        return w;
    dnnl_memory_t from = mem(&op->user, w), to = mem(&op->md, shared);
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}};
    exec(op->reorder_mt, streams[0], 2, args);
    dnnl_memory_destroy(from);
    dnnl_memory_destroy(to);
    return shared;
}

/* the entry of slot sl and its samples [*b0, *b1) */
static const entry *slot_entry(const cdp_conv_shape *s, const plan *p, int sl, int *b0, int *b1)
{
    cdp_cpu_conv_chunk(s->B, p->S, 1, sl, 0, b0, b1);
    return *b1 - *b0 == p->e[0]->s.B ? p->e[0] : p->e[1];
}

static int dnnl_threads(const cdp_conv_shape *s, const plan *p)
{
    return cdp_cpu_conv_threads((double)s->B * s->OH * s->OW * s->Cin * s->KH * s->KW
                                    * (double)s->Cout, p->S);
}

static void conv_fwd(const cdp_conv_shape *s, const float *x, const float *w, const float *b,
                     float *y, float *ws, int bf16)
{
    const plan p = plan_make(s, bf16);
    streams_ensure(p.S);
    float *slots = ws + p.wf + p.wd;
    const float *wf = weights_for(&p.e[0]->p[FWD], w, ws);
    const size_t xs = (size_t)s->Cin * s->H * s->W, P = (size_t)s->OH * s->OW;
    const int nt = dnnl_threads(s, &p);
#pragma omp parallel for if (nt > 1) num_threads(nt) schedule(static)
    for (int sl = 0; sl < p.S; sl++) {
        int b0, b1;
        const entry *e = slot_entry(s, &p, sl, &b0, &b1);
        float *buf = slots + (size_t)sl * p.slot, *sc = buf + p.slot - e->scratch;
        float *ys = y + (size_t)b0 * s->Cout * P;
        int g = guard_enter();
        run_prim(&e->p[FWD], x + (size_t)b0 * xs, wf, 2, ys, buf + p.part, sc, streams[sl]);
        guard_leave(g);
        if (b)
            for (int i = 0; i < (b1 - b0) * s->Cout; i++)
                for (size_t q = 0; q < P; q++)
                    ys[(size_t)i * P + q] = ys[(size_t)i * P + q] + b[i % s->Cout];
    }
}

static void conv_bwd(const cdp_conv_shape *s, const float *x, const float *w, const float *dy,
                     float *dx, float *dw, int accumulate, float *ws, int bf16)
{
    const plan p = plan_make(s, bf16);
    streams_ensure(p.S);
    float *slots = ws + p.wf + p.wd;
    const float *wd = dx ? weights_for(&p.e[0]->p[BWD_DATA], w, ws + p.wf) : NULL;
    const size_t xs = (size_t)s->Cin * s->H * s->W, ys = (size_t)s->Cout * s->OH * s->OW;
    const int nt = dnnl_threads(s, &p);
#pragma omp parallel for if (nt > 1) num_threads(nt) schedule(static)
    for (int sl = 0; sl < p.S; sl++) {
        int b0, b1;
        const entry *e = slot_entry(s, &p, sl, &b0, &b1);
        float *part = slots + (size_t)sl * p.slot, *sc = part + p.slot - e->scratch;
        const conv_prim *bw = &e->p[BWD_W];
        /* the partial is plain OIHW: the primitive's own layout when it
         * needs no reorder, else the reorder writes it */
        int g = guard_enter();
        run_prim(bw, x + (size_t)b0 * xs, dy + (size_t)b0 * ys, 0, part, part + p.part, sc,
                 streams[sl]);
        if (dx) {
            const conv_prim *bd = &e->p[BWD_DATA];
            float *buf = part + p.part + bw->in[0].floats + bw->in[1].floats + bw->out.floats;
            /* dy in the layout backward-weights reordered it to, when
             * backward-data wants the same: that copy, not a second one */
            const void *dys = dy + (size_t)b0 * ys;
            int ready = 2;
            if (bw->in[1].reorder && bd->in[0].reorder
                && dnnl_memory_desc_equal(&bw->in[1].md, &bd->in[0].md)) {
                dys = part + p.part + bw->in[0].floats;
                ready |= 1;
            }
            run_prim(bd, dys, wd, ready, dx + (size_t)b0 * xs, buf, sc, streams[sl]);
        }
        guard_leave(g);
    }
    cdp_cpu_conv_dw_sum(cdp_conv_weight_count(s), p.S, slots, p.slot, dw,
                        accumulate);
}

void cdp_cpu_conv2d_dnnl_fwd(const cdp_conv_shape *s, const float *x, const float *w,
                             const float *b, float *y, float *ws)
{
    conv_fwd(s, x, w, b, y, ws, 0);
}

void cdp_cpu_conv2d_dnnl_bwd(const cdp_conv_shape *s, const float *x, const float *w,
                             const float *dy, float *dx, float *dw, int accumulate, float *ws)
{
    conv_bwd(s, x, w, dy, dx, dw, accumulate, ws, 0);
}

void cdp_cpu_conv2d_dnnl_fwd_bf16(const cdp_conv_shape *s, const float *x, const float *w,
                                  const float *b, float *y, float *ws)
{
    conv_fwd(s, x, w, b, y, ws, 1);
}

void cdp_cpu_conv2d_dnnl_bwd_bf16(const cdp_conv_shape *s, const float *x, const float *w,
                                  const float *dy, float *dx, float *dw, int accumulate,
                                  float *ws)
{
    conv_bwd(s, x, w, dy, dx, dw, accumulate, ws, 1);
}
