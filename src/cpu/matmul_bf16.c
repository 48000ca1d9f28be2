/* The single-threaded bfloat16 product of --precision bf16's Linear layers
 * (linear_bf16.c): C[M,N] = A[M,K] B[K,N] (+ bias[N]), A and B in bfloat16
 * storage (the upper 16 bits of a float), C float32, through oneDNN's
 * matmul primitive (bf16 source and weights, f32 destination: the products
 * are exact in float32 and oneDNN sums them in float32, in the order of its
 * kernel, brgemm with AVX512_BF16 where the CPU has it).
 *
 * Why the matmul primitive: oneDNN 2.6 has no public bf16 GEMM function
 * (dnnl_sgemm is float32 only, dnnl_gemm_bf16bf16f32 arrived in 3.x), and
 * the primitive reaches the same kernels.
 *
 * Determinism.  As sgemm.c's calls: the caller cuts a product into blocks
 * that depend on the shape only and runs each block here on one thread.  A
 * primitive fixes its work split when it is created, from
 * omp_get_max_threads() (kernels_conv_dnnl.c, "The threading trap"), so
 * every primitive is created, and executed, with the calling thread's
 * OpenMP thread count forced to 1; its bits then depend on its operands,
 * its shape and oneDNN's ISA only.
 *
 * The primitive cache.  Creating a primitive (descriptor, JIT code) takes
 * far longer than a block, so primitives are kept by shape (the dimensions,
 * the strides of the three operands, bias or not, alpha) for the life of the process, in a
 * list that only grows (a run has a handful of shapes): an entry, once
 * made, never moves nor goes, so the OpenMP threads that run the blocks of
 * one call can look up and create entries concurrently, under one critical
 * section, and execute them outside it.
 *
 * Scratchpad.  A primitive in oneDNN's default (library) scratchpad mode
 * gets its scratchpad when it is created, in the creating thread's storage:
 * two threads executing it at once would share it (and did: dW's blocks
 * differed between 1 and 2 threads).  So the scratchpad is the caller's
 * (user mode): one buffer per OpenMP thread number, grown by its own
 * thread, freed at exit. */
#include "config.h"

#ifdef HAVE_DNNL

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <oneapi/dnnl/dnnl.h>

#include "cpu_internal.h"

static void dnnl_ok(dnnl_status_t st, const char *what)
{
    if (st != dnnl_success) {
        fprintf(stderr, "cdp: oneDNN bf16 matmul: %s failed (status %d)\n", what, (int)st);
        abort();
    }
}
#define OK(call) dnnl_ok((call), #call)

/* a product of 4-D operands [n0, n1, rows, cols] given by their strides
 * (the 2-D products: n0 = n1 = 1); alpha: the float's bits, 1.0f none */
typedef struct mm_key {
    int n0, n1, M, N, K, bias;
    int64_t sa[4], sb[4], sc[4];
    uint32_t alpha;
} mm_key;

typedef struct mm_entry {
    mm_key k;
    dnnl_primitive_t prim;
    dnnl_memory_desc_t a, b, bias, c, scratch;
    size_t scratch_bytes;
    struct mm_entry *next;
} mm_entry;

static dnnl_engine_t engine;
static mm_entry *entries;

/* the scratchpads, by OpenMP thread number (the kernels run from one
 * thread at a time, so a team's numbers name distinct threads) */
#define MAX_SCRATCH_THREADS 256
static void *scratch[MAX_SCRATCH_THREADS];
static size_t scratch_bytes[MAX_SCRATCH_THREADS];
/* and the streams, by thread too: made once, not at every product (as the
 * oneDNN convolutions keep one per slot) */
static dnnl_stream_t streams[MAX_SCRATCH_THREADS];

static int thread_slot(void)
{
    const int t = omp_get_thread_num();
    if (t < 0 || t >= MAX_SCRATCH_THREADS) {
        fprintf(stderr, "cdp: oneDNN bf16 matmul: thread %d beyond %d\n", t,
                MAX_SCRATCH_THREADS);
        abort();
    }
    return t;
}

static void *scratch_get(size_t bytes)
{
    const int t = thread_slot();
    return cdp_cpu_grow(&scratch[t], &scratch_bytes[t], bytes, "oneDNN's bf16 matmul");
}

/* after entry_get (the engine exists) */
static dnnl_stream_t stream_get(void)
{
    const int t = thread_slot();
    if (!streams[t])
        OK(dnnl_stream_create(&streams[t], engine, dnnl_stream_default_flags));
    return streams[t];
}

static void release_all(void)
{
    while (entries) {
        mm_entry *e = entries;
        entries = e->next;
        dnnl_primitive_destroy(e->prim);
        free(e);
    }
    for (int t = 0; t < MAX_SCRATCH_THREADS; t++)
        if (streams[t]) {
            dnnl_stream_destroy(streams[t]);
            streams[t] = NULL;
        }
    if (engine)
        dnnl_engine_destroy(engine);
    engine = NULL;
    for (int t = 0; t < MAX_SCRATCH_THREADS; t++) {
        free(scratch[t]);
        scratch[t] = NULL;
        scratch_bytes[t] = 0;
    }
}

/* [n0, n1, rows, cols] with strides st; a 2-D one when n0 = n1 = 1 (the
 * Linear products: the primitive they always had) */
static dnnl_memory_desc_t md4(int n0, int n1, int rows, int cols, const int64_t st[4],
                              dnnl_data_type_t dt)
{
    dnnl_memory_desc_t md;
    if (n0 == 1 && n1 == 1) {
        dnnl_dims_t dims = {rows, cols}, strides = {st[2], st[3]};
        OK(dnnl_memory_desc_init_by_strides(&md, 2, dims, dt, strides));
    } else {
        dnnl_dims_t dims = {n0, n1, rows, cols}, strides = {st[0], st[1], st[2], st[3]};
        OK(dnnl_memory_desc_init_by_strides(&md, 4, dims, dt, strides));
    }
    return md;
}

/* a new entry for k; the caller holds the critical section and the
 * one-thread guard */
static mm_entry *entry_make(const mm_key *k)
{
    if (!engine) {
        OK(dnnl_engine_create(&engine, dnnl_cpu, 0));
        atexit(release_all);
    }
    mm_entry *e = calloc(1, sizeof *e);
    if (!e) {
        fprintf(stderr, "cdp: oneDNN bf16 matmul: out of memory\n");
        abort();
    }
    e->k = *k;
    const int64_t sbias[4] = {k->N, k->N, k->N, 1};
    e->a = md4(k->n0, k->n1, k->M, k->K, k->sa, dnnl_bf16);
    e->b = md4(k->n0, k->n1, k->K, k->N, k->sb, dnnl_bf16);
    e->c = md4(k->n0, k->n1, k->M, k->N, k->sc, dnnl_f32);
    e->bias = md4(1, 1, 1, k->N, sbias, dnnl_f32);   /* 2-D products only */
    dnnl_matmul_desc_t d;
    OK(dnnl_matmul_desc_init(&d, &e->a, &e->b, k->bias ? &e->bias : NULL, &e->c));
    dnnl_primitive_attr_t attr;
    OK(dnnl_primitive_attr_create(&attr));
    OK(dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user));
    if (k->alpha != 0x3f800000u) {   /* C = alpha (the float32 sum), one product */
        float alpha;
        memcpy(&alpha, &k->alpha, sizeof alpha);
        OK(dnnl_primitive_attr_set_output_scales(attr, 1, 0, &alpha));
    }
    dnnl_primitive_desc_t pd;
    OK(dnnl_primitive_desc_create(&pd, &d, attr, engine, NULL));
    e->scratch = *dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    e->scratch_bytes = dnnl_memory_desc_get_size(&e->scratch);
    OK(dnnl_primitive_create(&e->prim, pd));
    OK(dnnl_primitive_desc_destroy(pd));
    OK(dnnl_primitive_attr_destroy(attr));
    e->next = entries;
    entries = e;
    return e;
}

static const mm_entry *entry_get(const mm_key *k)
{
    const mm_entry *found = NULL;
#pragma omp critical(cdp_cpu_bf16_matmul)
    {
        for (mm_entry *e = entries; e && !found; e = e->next)
            if (memcmp(&e->k, k, sizeof *k) == 0)
                found = e;
        if (!found)
            found = entry_make(k);
    }
    return found;
}

static dnnl_memory_t mem(const dnnl_memory_desc_t *md, const void *data)
{
    dnnl_memory_t m;
    OK(dnnl_memory_create(&m, md, engine, (void *)data));
    return m;
}

static void run(const mm_key *k, const uint16_t *A, const uint16_t *B, const float *bias,
                float *C)
{
    const int nt = omp_get_max_threads();
    omp_set_num_threads(1);
    const mm_entry *e = entry_get(k);
    dnnl_stream_t st = stream_get();
    dnnl_memory_t ma = mem(&e->a, A), mb = mem(&e->b, B), mc = mem(&e->c, C);
    dnnl_memory_t ms = mem(&e->scratch, e->scratch_bytes ? scratch_get(e->scratch_bytes) : NULL);
    dnnl_memory_t mbias = bias ? mem(&e->bias, bias) : NULL;
    dnnl_exec_arg_t args[5] = {{DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mb}, {DNNL_ARG_DST, mc},
                               {DNNL_ARG_SCRATCHPAD, ms}, {DNNL_ARG_BIAS, mbias}};
    OK(dnnl_primitive_execute(e->prim, st, bias ? 5 : 4, args));
    OK(dnnl_stream_wait(st));
    dnnl_memory_destroy(ma);
    dnnl_memory_destroy(mb);
    dnnl_memory_destroy(mc);
    dnnl_memory_destroy(ms);
    if (mbias)
        dnnl_memory_destroy(mbias);
    omp_set_num_threads(nt);
}

/* the strides of a rows x cols matrix, row-major with leading dimension
 * ld, or stored transposed (element (r, c) at c * ld + r), in a batch of
 * one */
static void strides2(int rows, int cols, int ld, int trans, int64_t st[4])
{
    st[2] = trans ? 1 : ld;
    st[3] = trans ? ld : 1;
    st[0] = st[1] = (int64_t)rows * cols;
}

void cdp_cpu_bf16_matmul(int tA, int tB, int M, int N, int K, const uint16_t *A, int lda,
                         const uint16_t *B, int ldb, const float *bias, float *C, int ldc)
{
    if (M <= 0 || N <= 0 || K <= 0)
        return;
    mm_key k;
    memset(&k, 0, sizeof k);   /* the key is compared bytewise */
    k.n0 = k.n1 = 1;
    k.M = M, k.N = N, k.K = K, k.bias = bias != NULL, k.alpha = 0x3f800000u;
    strides2(M, K, lda, tA, k.sa);
    strides2(K, N, ldb, tB, k.sb);
    strides2(M, N, ldc, 0, k.sc);
    run(&k, A, B, bias, C);
}

void cdp_cpu_bf16_matmul4(int n0, int n1, int M, int N, int K, float alpha, const uint16_t *A,
                          const int64_t sa[4], const uint16_t *B, const int64_t sb[4], float *C,
                          const int64_t sc[4])
{
    if (n0 <= 0 || n1 <= 0 || M <= 0 || N <= 0 || K <= 0)
        return;
    mm_key k;
    memset(&k, 0, sizeof k);
    k.n0 = n0, k.n1 = n1, k.M = M, k.N = N, k.K = K;
    memcpy(&k.alpha, &alpha, sizeof alpha);
    memcpy(k.sa, sa, sizeof k.sa);
    memcpy(k.sb, sb, sizeof k.sb);
    memcpy(k.sc, sc, sizeof k.sc);
    run(&k, A, B, NULL, C);
}

#endif
