/* sgemm_limit: the GEMM-only bound of an MLP training step on this machine.
 *
 * Times cblas_sgemm for the three GEMMs of every Linear layer of the MLP
 * (forward y = x W^T "NT", weight gradient dW = dy^T x "TN", input gradient
 * dx = dy W "NN"; no dx for the first layer) and prints GFLOP/s per shape,
 * the time-weighted total and the samples/s that GEMMs alone allow.
 *
 * Build (OpenMP is optional; it enables --split and --interleave):
 *     gcc -O2 -fopenmp bench/kernels/sgemm_limit.c -o sgemm_limit -lopenblas
 *     gcc -O2 bench/kernels/sgemm_limit.c -o sgemm_limit -lopenblas
 * Run:
 *     ./sgemm_limit [DIMS [BATCH [THREADS]]] [--split N] [--interleave]
 *     ./sgemm_limit 784-1024-1024-10 128 2
 *     OPENBLAS_CORETYPE=SkylakeX ./sgemm_limit 784-1024-1024-10 128 1
 *
 * THREADS: OpenBLAS threads (default 1).  --split N: time cdp's CPU backend
 * scheme instead (OpenBLAS single-threaded, each GEMM cut into N column
 * blocks shared by THREADS OpenMP threads; see src/cpu/kernels_cpu.c).
 * --interleave: the two thread pools of doc/reference.md section 9, an sgemm (BATCH x 1024 x 1024, NT)
 * followed by an OpenMP bias+ReLU loop over its output, with THREADS OpenMP
 * threads and THREADS OpenBLAS threads (with --split: cdp's scheme, one
 * pool); run it with and without OMP_WAIT_POLICY=PASSIVE.  Timings are the best of 7 rounds (these
 * machines are noisy); compare configurations within one run.  Result lines
 * (bench/README) last: GFLOP/s per shape, then the totals. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cblas.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "../lib/bench_util.h"

enum { NT, TN, NN };
static const char *const op_name[] = {"fwd  NT", "dW   TN", "dx   NN"};
static const char *const op_label[] = {"fwd_NT", "dW_TN", "dx_NN"};   /* in result lines */

static int split = 0;      /* 0: plain OpenBLAS; N: cdp's column blocks */
static int threads = 1;

/* C[M,N] (ldc N) for op: NT A[M,K] B[N,K]; TN A[K,M] B[K,N]; NN A[M,K] B[K,N];
 * only columns [c0, c1) */
static void gemm_cols(int op, int M, int N, int K, const float *A, const float *B, float *C,
                      int c0, int c1)
{
    int w = c1 - c0;
    if (op == NT)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, w, K, 1.0f, A, K,
                    B + (size_t)c0 * K, K, 0.0f, C + c0, N);
    else if (op == TN)
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, M, w, K, 1.0f, A, M,
                    B + c0, N, 0.0f, C + c0, N);
    else
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, w, K, 1.0f, A, K,
                    B + c0, N, 0.0f, C + c0, N);
}

static void gemm(int op, int M, int N, int K, const float *A, const float *B, float *C)
{
    if (!split) {
        gemm_cols(op, M, N, K, A, B, C, 0, N);
        return;
    }
    /* the rule of src/cpu/kernels_cpu.c: blocks of >= 128 columns and
     * >= 4e6 multiply-adds, column bounds multiples of 16 */
    int nb = split;
    if (nb > N / 128)
        nb = N / 128;
    double mnk = (double)M * N * K;
    if (nb > (int)(mnk / 4e6))
        nb = (int)(mnk / 4e6);
    if (nb < 1)
        nb = 1;
    int nt = nb < threads ? nb : threads;
    (void)nt;
#ifdef _OPENMP
#pragma omp parallel for if (nt > 1) num_threads(nt) schedule(static)
#endif
    for (int q = 0; q < nb; q++) {
        int c0 = (int)((long)N * q / nb) / 16 * 16;
        int c1 = q == nb - 1 ? N : (int)((long)N * (q + 1) / nb) / 16 * 16;
        gemm_cols(op, M, N, K, A, B, C, c0, c1);
    }
}

/* best time of 7 rounds of >= 30 ms each */
static double time_gemm(int op, int M, int N, int K, const float *A, const float *B, float *C)
{
    double best = 1e30;
    gemm(op, M, N, K, A, B, C);
    for (int r = 0; r < 7; r++) {
        int it = 0;
        double t0 = now(), t;
        do {
            gemm(op, M, N, K, A, B, C);
            it++;
        } while ((t = now() - t0) < 0.03);
        if (t / it < best)
            best = t / it;
    }
    return best;
}

static void interleave(int B)
{
#ifdef _OPENMP
    int n = 1024, k = 1024;
    float *x = buffer((size_t)B * k), *W = buffer((size_t)n * k);
    float *b = buffer((size_t)n), *y = buffer((size_t)B * n);
    double best = 1e30;
    for (int r = 0; r < 7; r++) {
        int it = 0;
        double t0 = now(), t;
        do {
            gemm(NT, B, n, k, x, W, y);
#pragma omp parallel for schedule(static)
            for (int i = 0; i < B; i++)
                for (int o = 0; o < n; o++) {
                    float v = y[(size_t)i * n + o] + b[o];
                    y[(size_t)i * n + o] = v > 0.0f ? v : 0.0f;
                }
            it++;
        } while ((t = now() - t0) < 0.1);
        if (t / it < best)
            best = t / it;
    }
    const char *wp = getenv("OMP_WAIT_POLICY");
    printf("interleave: sgemm %dx%dx%d NT%s + OpenMP bias+ReLU, OpenBLAS %d thread(s), "
           "OpenMP %d thread(s), OMP_WAIT_POLICY=%s: %.0f us per iteration\n",
           B, k, n, split ? " (cdp column blocks)" : "", openblas_get_num_threads(),
           omp_get_max_threads(), wp && *wp ? wp : "(unset)", best * 1e6);
    char cfg[160];
    snprintf(cfg, sizeof cfg, "interleave B=%d openblas_threads=%d omp_threads=%d%s "
             "OMP_WAIT_POLICY=%s", B, openblas_get_num_threads(), omp_get_max_threads(),
             split ? " split" : "", wp && *wp ? wp : "unset");
    bench_result("sgemm-limit", cfg, "iteration_time", best * 1e6, "us");
    free(x); free(W); free(b); free(y);
#else
    (void)B;
    fprintf(stderr, "sgemm_limit: --interleave needs a build with -fopenmp\n");
    exit(2);
#endif
}

int main(int argc, char **argv)
{
    const char *dims_s = "784-1024-1024-10";
    int B = 128, pos = 0, do_interleave = 0;
    for (int a = 1; a < argc; a++) {
        if (!strcmp(argv[a], "--split") && a + 1 < argc) {
            split = atoi(argv[++a]);
        } else if (!strcmp(argv[a], "--interleave")) {
            do_interleave = 1;
        } else if (argv[a][0] == '-' && argv[a][1] == '-') {
            fprintf(stderr, "usage: %s [DIMS [BATCH [THREADS]]] [--split N] [--interleave]\n",
                    argv[0]);
            return 2;
        } else if (pos == 0) {
            dims_s = argv[a], pos++;
        } else if (pos == 1) {
            B = atoi(argv[a]), pos++;
        } else {
            threads = atoi(argv[a]), pos++;
        }
    }
    if (!strncmp(dims_s, "mlp:", 4))
        dims_s += 4;
    int dims[66], nd = 0;
    for (const char *p = dims_s; *p && nd < 66;) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < 1 || v > 65536) {
            fprintf(stderr, "sgemm_limit: bad dims '%s' (expected e.g. 784-256-128-10)\n", dims_s);
            return 2;
        }
        dims[nd++] = (int)v;
        p = *end == '-' ? end + 1 : end;
        if (*end && *end != '-') {
            fprintf(stderr, "sgemm_limit: bad dims '%s'\n", dims_s);
            return 2;
        }
    }
    if (nd < 2 || B < 1 || threads < 1) {
        fprintf(stderr, "sgemm_limit: need at least 2 dims, BATCH >= 1, THREADS >= 1\n");
        return 2;
    }
#ifndef _OPENMP
    if (split) {
        fprintf(stderr, "sgemm_limit: --split needs a build with -fopenmp\n");
        return 2;
    }
#endif
    openblas_set_num_threads(split ? 1 : threads);
#ifdef _OPENMP
    omp_set_num_threads(threads);
#endif
    printf("%s; kernel %s; %s\n", openblas_get_config(), openblas_get_corename(),
           split ? "cdp column blocks over OpenMP" : "OpenBLAS threading");
    if (do_interleave) {
        interleave(B);
        bench_results_end();
        return 0;
    }
    printf("MLP %s, batch %d, %d thread(s)%s\n", dims_s, B, threads, split ? ", split" : "");
    if (split)
        printf("split %d\n", split);
    char cfg[200], shape_cfg[260];
    snprintf(cfg, sizeof cfg, "mlp:%s B=%d threads=%d split=%d", dims_s, B, threads, split);

    int wmax = 0;
    for (int j = 0; j < nd; j++)
        wmax = dims[j] > wmax ? dims[j] : wmax;
    float *X = buffer((size_t)B * wmax), *DY = buffer((size_t)B * wmax);
    float *DX = buffer((size_t)B * wmax);
    double tot_t = 0, tot_f = 0;
    for (int j = 0; j + 1 < nd; j++) {
        int in = dims[j], out = dims[j + 1];
        float *W = buffer((size_t)out * in), *C = buffer((size_t)out * in > (size_t)B * wmax
                                                         ? (size_t)out * in : (size_t)B * wmax);
        for (int op = NT; op <= NN; op++) {
            if (op == NN && j == 0)
                continue;   /* nobody needs dLoss/dinput */
            double t;
            if (op == NT)
                t = time_gemm(NT, B, out, in, X, W, C);
            else if (op == TN)
                t = time_gemm(TN, out, in, B, DY, X, C);
            else
                t = time_gemm(NN, B, in, out, DY, W, DX);
            double f = 2.0 * B * in * out;
            tot_t += t;
            tot_f += f;
            printf("  layer %d %5d -> %-5d %s %9.1f us %7.1f GFLOP/s\n", j, in, out,
                   op_name[op], t * 1e6, f / t / 1e9);
            snprintf(shape_cfg, sizeof shape_cfg, "%s layer%d %d->%d %s", cfg, j, in, out,
                     op_label[op]);
            bench_result("sgemm-limit", shape_cfg, "gflops", f / t / 1e9, "GFLOP/s");
        }
        free(W);
        free(C);
    }
    printf("total: %.3f ms per micro-batch, %.1f GFLOP/s, GEMM bound %.0f samples/s\n",
           tot_t * 1e3, tot_f / tot_t / 1e9, B / tot_t);
    bench_result_gemm_bound("sgemm-limit", cfg, tot_t, tot_f, B);
    free(X); free(DY); free(DX);
    bench_results_end();
    return 0;
}
