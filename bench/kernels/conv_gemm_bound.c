/* conv_gemm_bound: the SGEMM-only bound of a training step of one of
 * cdp's models (ResNets, MLPs, ViTs) on this machine.
 *
 * The model comes from libcdp itself (cdp_model_build), so the shapes are
 * exactly those cdp_run trains.  Every Conv2d becomes its im2col GEMMs over
 * the whole micro-batch of B samples (P = OH*OW, K = Cin*k*k):
 *   fwd   y[Cout, B*P]  = W[Cout, K] col[K, B*P]             (NN)
 *   dW    dW[Cout, K]   = dy[Cout, B*P] col[K, B*P]^T        (NT)
 *   dcol  dcol[K, B*P]  = W^T[K, Cout] dy[Cout, B*P]         (TN)
 * and every Linear its three GEMMs (fwd x W^T, dW = dy^T x, dx = dy W; per
 * token in a ViT: B*T rows); multi-head attention its two projections and,
 * per sample and head, its six T x T x d products (S = Q K^T, O = P V,
 * dP, dV, dQ, dK), each timed alone.
 * No input gradient for a layer that reads the model's input.  Identical
 * shapes are timed once and counted as often as they occur.  Nothing else
 * of the step is counted (im2col/col2im, BatchNorm, ReLU, adds, pooling,
 * LayerNorm, GELU, softmax, the optimizer), so the sum is a lower bound on the step time of any
 * im2col implementation on these cores, and B / sum an upper bound on
 * samples/s.
 *
 * Threading:
 *   THREADS 1           plain cblas_sgemm, OpenBLAS single-threaded
 *   THREADS T           OpenBLAS's own threading (openblas_set_num_threads)
 *   THREADS T --split S cdp's scheme: OpenBLAS single-threaded, the sample
 *                       dimension cut into S slots run by T OpenMP threads
 *                       (columns for fwd/dcol, rows for a Linear's fwd/dx;
 *                       for dW, the reduction: one partial per slot, then
 *                       summed, the sum timed too)
 *
 * Build (after ./bootstrap; links the in-tree libcdp):
 *     gcc -O2 -std=c11 -D_GNU_SOURCE -fopenmp -Iinclude -Isrc bench/kernels/conv_gemm_bound.c \
 *         -o conv_gemm_bound -L.libs -lcdp -Wl,-rpath,$PWD/.libs -lopenblas -lm
 * Run:
 *     OPENBLAS_CORETYPE=SkylakeX ./conv_gemm_bound MODEL CxHxW B [THREADS] \
 *         [--split S] [--rounds R] [--min-ms MS] [--list]
 *     ./conv_gemm_bound resnet20 1x28x28 128 2 --split 2
 * --list prints the GEMM shapes and exits (no timing).  Each shape: the
 * fastest single call in R rounds (default 5) of >= MS milliseconds
 * (default 20) of back-to-back calls: the machines are shared, and a call
 * whose thread another job preempted (a spinning OpenMP barrier waits out
 * a whole time slice) says nothing about the cores.  Last human line:
 *     total: T ms per micro-batch of B, G GFLOP/s, GEMM bound X samples/s
 * then the result lines (bench/README): GFLOP/s per shape, the totals. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cblas.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "models/model.h"
#include "../lib/bench_util.h"
#include "../lib/bench_model.h"

/* which dimension carries the samples (what --split cuts) */
enum { DIM_M, DIM_N, DIM_K };

/* C[M,N] = op(A) op(B), row-major: A is [M,K] (ta 0) or [K,M] (ta 1), B is
 * [K,N] (tb 0) or [N,K] (tb 1). */
typedef struct gemm {
    char what[80];
    int ta, tb, M, N, K, dim;
    int count;
} gemm;

static gemm *gs;
static int ngs, cap;

static void add(const char *what, int ta, int tb, int M, int N, int K, int dim)
{
    for (int i = 0; i < ngs; i++)
        if (gs[i].ta == ta && gs[i].tb == tb && gs[i].M == M && gs[i].N == N && gs[i].K == K &&
            gs[i].dim == dim) {
            gs[i].count++;
            return;
        }
    if (ngs == cap) {
        cap = cap ? 2 * cap : 64;
        gs = realloc(gs, (size_t)cap * sizeof *gs);
        if (!gs) {
            perror("conv_gemm_bound: realloc");
            exit(1);
        }
    }
    gemm *g = &gs[ngs++];
    snprintf(g->what, sizeof g->what, "%s", what);
    g->ta = ta, g->tb = tb, g->M = M, g->N = N, g->K = K, g->dim = dim, g->count = 1;
}

/* a Linear over `rows` rows: forward, dW, and dx when needed */
static void linear_gemms(const char *w, int rows, int in, int out, int need_dx, double *flops)
{
    add(w, 0, 1, rows, out, in, DIM_M);    /* fwd y = x W^T */
    add(w, 1, 0, out, in, rows, DIM_K);    /* dW = dy^T x */
    *flops += 4.0 * rows * in * out;
    if (need_dx) {
        add(w, 0, 0, rows, in, out, DIM_M);    /* dx = dy W */
        *flops += 2.0 * rows * in * out;
    }
}

static int split = 0, threads = 1;

/* the part [s0, s1) of the sample dimension; dW parts go to C (beta 0) */
static void gemm_part(const gemm *g, const float *A, const float *B, float *C, int s0, int s1)
{
    int M = g->M, N = g->N, K = g->K, w = s1 - s0;
    int lda = g->ta ? M : K, ldb = g->tb ? K : N;
    CBLAS_TRANSPOSE ta = g->ta ? CblasTrans : CblasNoTrans, tb = g->tb ? CblasTrans : CblasNoTrans;
    if (w <= 0)
        return;
    if (g->dim == DIM_N)
        cblas_sgemm(CblasRowMajor, ta, tb, M, w, K, 1.0f, A, lda,
                    B + (g->tb ? (size_t)s0 * K : (size_t)s0), ldb, 0.0f, C + s0, N);
    else if (g->dim == DIM_M)
        cblas_sgemm(CblasRowMajor, ta, tb, w, N, K, 1.0f,
                    A + (g->ta ? (size_t)s0 : (size_t)s0 * K), lda, B, ldb, 0.0f,
                    C + (size_t)s0 * N, N);
    else
        cblas_sgemm(CblasRowMajor, ta, tb, M, N, w, 1.0f,
                    A + (g->ta ? (size_t)s0 * M : (size_t)s0), lda,
                    B + (g->tb ? (size_t)s0 : (size_t)s0 * N), ldb, 0.0f, C, N);
}

static int extent(const gemm *g)
{
    return g->dim == DIM_M ? g->M : g->dim == DIM_N ? g->N : g->K;
}

/* parts: S slots, part scratch P (S * M * N floats for dW) */
static void run(const gemm *g, const float *A, const float *B, float *C, float *part)
{
    if (!split) {
        gemm_part(g, A, B, C, 0, extent(g));
        return;
    }
    int S = split, E = extent(g);
    if (S > E)
        S = E;
    int nt = S < threads ? S : threads;
    (void)nt;
    size_t MN = (size_t)g->M * (size_t)g->N;
#ifdef _OPENMP
#pragma omp parallel for if (nt > 1) num_threads(nt) schedule(static)
#endif
    for (int s = 0; s < S; s++) {
        int s0 = (int)((long)E * s / S), s1 = (int)((long)E * (s + 1) / S);
        gemm_part(g, A, B, g->dim == DIM_K ? part + (size_t)s * MN : C, s0, s1);
    }
    if (g->dim == DIM_K) {
#ifdef _OPENMP
#pragma omp parallel for if (nt > 1) num_threads(nt) schedule(static)
#endif
        for (size_t i = 0; i < MN; i++) {
            float v = part[i];
            for (int s = 1; s < S; s++)
                v += part[(size_t)s * MN + i];
            C[i] = v;
        }
    }
}

static double time_gemm(const gemm *g, int rounds, double min_s)
{
    size_t na = (size_t)g->M * g->K, nb = (size_t)g->K * g->N, nc = (size_t)g->M * g->N;
    float *A = buffer(na), *B = buffer(nb), *C = buffer(nc);
    float *part = split && g->dim == DIM_K ? buffer(nc * (size_t)split) : NULL;
    double best = 1e30;
    run(g, A, B, C, part);
    for (int r = 0; r < rounds; r++) {
        double t0 = now(), t = t0;
        do {
            run(g, A, B, C, part);
            double u = now();
            if (u - t < best)
                best = u - t;
            t = u;
        } while (t - t0 < min_s);
    }
    free(A); free(B); free(C); free(part);
    return best;
}

static int usage(const char *a0)
{
    fprintf(stderr, "usage: %s MODEL CxHxW BATCH [THREADS] [--split S] [--rounds R] "
            "[--min-ms MS] [--classes C] [--list]\n", a0);
    return 2;
}

int main(int argc, char **argv)
{
    bench_model_args ma = bench_model_defaults();
    int list = 0;
    for (int a = 1; a < argc; a++) {
        int r = bench_model_arg(&ma, argc, argv, &a);
        if (r > 0)
            continue;
        if (r == 0 && !strcmp(argv[a], "--split") && a + 1 < argc)
            split = atoi(argv[++a]);
        else if (r == 0 && !strcmp(argv[a], "--list"))
            list = 1;
        else
            return usage(argv[0]);
    }
    if (split < 0)
        return usage(argv[0]);
#ifndef _OPENMP
    if (split) {
        fprintf(stderr, "conv_gemm_bound: --split needs a build with -fopenmp\n");
        return 2;
    }
#endif
    cdp_model m;
    if (bench_model_build(&ma, &m, "conv_gemm_bound"))
        return 2;
    const char *spec = ma.spec, *shape = ma.shape;
    const int B = ma.B, rounds = ma.rounds;
    const double min_ms = ma.min_ms;
    threads = ma.threads;
    double gemm_flops = 0;
    for (int i = 0; i < m.nlayers; i++) {
        const cdp_layer *ly = &m.layers[i];
        char w[80];
        int need_dx = ly->in != 0;   /* tensor 0 is the model's input */
        if (ly->kind == CDP_LAYER_CONV2D) {
            int Cout = ly->ys.c, Pn = B * ly->ys.h * ly->ys.w, K = ly->xs.c * ly->k * ly->k;
            snprintf(w, sizeof w, "conv %dx%dx%d k%d/%d", ly->xs.c, ly->xs.h, ly->xs.w, ly->k,
                     ly->stride);
            add(w, 0, 0, Cout, Pn, K, DIM_N);   /* fwd */
            add(w, 0, 1, Cout, K, Pn, DIM_K);   /* dW */
            gemm_flops += 4.0 * Cout * Pn * K;
            if (need_dx) {
                add(w, 1, 0, K, Pn, Cout, DIM_N);   /* dcol */
                gemm_flops += 2.0 * Cout * Pn * K;
            }
        } else if (ly->kind == CDP_LAYER_LINEAR) {
            /* per token (ViT): rows B*T, features the last dim */
            int rows = ly->tokens ? B * ly->xs.c * ly->xs.h : B;
            int in = ly->tokens ? ly->xs.w : (int)cdp_shape_n(ly->xs);
            int out = ly->tokens ? ly->ys.w : (int)cdp_shape_n(ly->ys);
            snprintf(w, sizeof w, "linear %d->%d", in, out);
            linear_gemms(w, rows, in, out, need_dx, &gemm_flops);
        } else if (ly->kind == CDP_LAYER_ATTENTION) {
            /* the QKV and out projections, then per sample and head
             * S = Q K^T, O = P V (forward), dP = dO V^T, dV = P^T dO,
             * dQ = dS K, dK = dS^T Q (backward) */
            int T = ly->xs.c * ly->xs.h, D = ly->xs.w, d = D / ly->heads;
            snprintf(w, sizeof w, "attention in_proj %d->%d", D, 3 * D);
            linear_gemms(w, B * T, D, 3 * D, need_dx, &gemm_flops);
            snprintf(w, sizeof w, "attention out_proj %d->%d", D, D);
            linear_gemms(w, B * T, D, D, 1, &gemm_flops);
            snprintf(w, sizeof w, "attention T %d, d %d", T, d);
            for (int e = 0; e < B * ly->heads; e++) {
                add(w, 0, 1, T, T, d, DIM_M);
                add(w, 0, 0, T, d, T, DIM_M);
                add(w, 0, 1, T, T, d, DIM_M);
                add(w, 1, 0, T, d, T, DIM_M);
                add(w, 0, 0, T, d, T, DIM_M);
                add(w, 1, 0, T, d, T, DIM_M);
            }
            gemm_flops += 12.0 * B * ly->heads * (double)T * T * d;
        }
    }
    double model_flops = 0;
    for (int l = 0; l < m.nstages; l++)
        model_flops += cdp_stage_flops(&m, l, B);

    openblas_set_num_threads(split ? 1 : threads);
#ifdef _OPENMP
    omp_set_num_threads(threads);
#endif
    printf("%s; kernel %s; %s, %d thread(s)", openblas_get_config(), openblas_get_corename(),
           split ? "cdp-style slots over OpenMP" : "OpenBLAS threading", threads);
    if (split)
        printf(", split %d", split);
    printf("\nmodel %s, input %s, batch %d: %d distinct GEMM shapes, %.2f GFLOP in GEMMs "
           "(model: %.2f GFLOP forward + backward)\n", spec, shape, B, ngs, gemm_flops / 1e9,
           model_flops / 1e9);
    static const char *const opn[2][2] = {{"NN", "NT"}, {"TN", "TT"}};
    static const char *const dimn[3] = {"M", "N", "K"};
    double tot_t = 0, tot_f = 0;
    char cfg[200], shape_cfg[320];
    snprintf(cfg, sizeof cfg, "%s input=%s B=%d threads=%d split=%d", spec, shape, B, threads,
             split);
    for (int i = 0; i < ngs; i++) {
        gemm *g = &gs[i];
        double f = 2.0 * g->M * g->N * g->K;
        if (list) {
            printf("  %-26s %s M %6d N %7d K %6d  samples in %s  x%d\n", g->what,
                   opn[g->ta][g->tb], g->M, g->N, g->K, dimn[g->dim], g->count);
            continue;
        }
        double t = time_gemm(g, rounds, min_ms * 1e-3);
        tot_t += t * g->count;
        tot_f += f * g->count;
        printf("  %-26s %s M %6d N %7d K %6d  x%-2d %9.1f us %7.1f GFLOP/s\n", g->what,
               opn[g->ta][g->tb], g->M, g->N, g->K, g->count, t * 1e6, f / t / 1e9);
        fflush(stdout);
        snprintf(shape_cfg, sizeof shape_cfg, "%s %s %s M=%d N=%d K=%d x%d", cfg, g->what,
                 opn[g->ta][g->tb], g->M, g->N, g->K, g->count);
        bench_result("conv-gemm-bound", shape_cfg, "gflops", f / t / 1e9, "GFLOP/s");
    }
    if (!list) {
        printf("total: %.3f ms per micro-batch of %d, %.1f GFLOP/s, GEMM bound %.1f samples/s\n",
               tot_t * 1e3, B, tot_f / tot_t / 1e9, B / tot_t);
        bench_result_gemm_bound("conv-gemm-bound", cfg, tot_t, tot_f, B);
        bench_results_end();
    }
    cdp_model_free(&m);
    free(gs);
    return 0;
}
