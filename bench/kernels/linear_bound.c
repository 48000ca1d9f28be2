/* linear_bound: each Linear layer of a cdp model (attention projections
 * included), forward and backward as cdp's CPU backend runs them, against
 * the SGEMM bound of its shapes on the same threads, in one process.
 *
 * The layers come from libcdp (cdp_model_build), so the shapes are those
 * cdp_run trains: per token in a ViT (B*T rows).  A Linear's forward is one
 * GEMM (y = x W^T), its backward two (dW = dy^T x; dx = dy W unless the
 * layer reads the model's input).  The bound of a GEMM is the fastest of
 *   blas/own    OpenBLAS (the kernel OPENBLAS_CORETYPE or its detection
 *               picks) with its own threading over THREADS threads
 *   blas/rows   OpenBLAS single-threaded on THREADS row blocks (OpenMP)
 *   blas/cols   the same on column blocks
 *   dnnl/own, dnnl/rows, dnnl/cols   the same with oneDNN's sgemm
 * and the bound of a pass is the sum of its GEMMs' bounds.  cdp's figure is
 * the backend's linear_fwd (bias included) and linear_bwd (db's column sums
 * included) on THREADS threads: what the layer costs in a training step.
 * Each time is the fastest single call in R rounds (default 5) of >= MS
 * milliseconds (default 20) of back-to-back calls: the machines are shared.
 *
 * Run (bench/run compiles it against the build's libcdp):
 *     bench/run linear-bound MODEL CxHxW BATCH [THREADS] [--rounds R] [--min-ms MS]
 *     bench/run linear-bound vit-tiny 1x28x28 64 2
 * The OpenBLAS kernel is the process's: bench/kernels/linear_bound.sh runs
 * this once per kernel the CPU offers and takes the best bound.
 * Output: one line per distinct layer shape (pass, cdp ms, bound ms and
 * which configuration, fraction = bound / cdp), then result lines. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cblas.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#ifdef HAVE_DNNL
#include <oneapi/dnnl/dnnl.h>
#endif

#include "backend/backend.h"
#include "models/model.h"
#include "../lib/bench_util.h"
#include "../lib/bench_model.h"

typedef struct layer {
    char what[80];
    int rows, in, out, need_dx, count;
} layer;

static layer ls[256];
static int nls;
static int threads = 1, rounds = 5;
static double min_s = 0.02;

static void add_layer(const char *what, int rows, int in, int out, int need_dx)
{
    for (int i = 0; i < nls; i++)
        if (ls[i].rows == rows && ls[i].in == in && ls[i].out == out &&
            ls[i].need_dx == need_dx) {
            ls[i].count++;
            return;
        }
    if (nls == (int)(sizeof ls / sizeof *ls))
        return;
    layer *l = &ls[nls++];
    snprintf(l->what, sizeof l->what, "%s", what);
    l->rows = rows, l->in = in, l->out = out, l->need_dx = need_dx, l->count = 1;
}

/* C[M,N] = op(A) op(B), row-major, through one library call */
typedef struct gemm {
    int ta, tb, M, N, K;
    const float *A, *B;
    float *C;
} gemm;

enum { LIB_BLAS, LIB_DNNL };
enum { SPLIT_OWN, SPLIT_ROWS, SPLIT_COLS };

static void call(int lib, const gemm *g, int m0, int m1, int n0, int n1)
{
    const int lda = g->ta ? g->M : g->K, ldb = g->tb ? g->K : g->N;
    const float *a = g->A + (g->ta ? (size_t)m0 : (size_t)m0 * lda);
    const float *b = g->B + (g->tb ? (size_t)n0 * ldb : (size_t)n0);
    float *c = g->C + (size_t)m0 * g->N + n0;
#ifdef HAVE_DNNL
    if (lib == LIB_DNNL) {
        dnnl_sgemm(g->ta ? 'T' : 'N', g->tb ? 'T' : 'N', m1 - m0, n1 - n0, g->K, 1.0f, a, lda, b,
                   ldb, 0.0f, c, g->N);
        return;
    }
#endif
    (void)lib;
    cblas_sgemm(CblasRowMajor, g->ta ? CblasTrans : CblasNoTrans,
                g->tb ? CblasTrans : CblasNoTrans, m1 - m0, n1 - n0, g->K, 1.0f, a, lda, b, ldb,
                0.0f, c, g->N);
}

static void run_gemm(int lib, int how, const gemm *g)
{
    if (how == SPLIT_OWN) {
        openblas_set_num_threads(threads);
#ifdef _OPENMP
        omp_set_num_threads(threads);
#endif
        call(lib, g, 0, g->M, 0, g->N);
        return;
    }
    openblas_set_num_threads(1);
    const int E = how == SPLIT_ROWS ? g->M : g->N;
#ifdef _OPENMP
#pragma omp parallel for num_threads(threads) schedule(static)
#endif
    for (int q = 0; q < threads; q++) {
#ifdef _OPENMP
        omp_set_num_threads(1);
#endif
        int e0 = (int)((long)E * q / threads), e1 = (int)((long)E * (q + 1) / threads);
        if (e1 > e0) {
            if (how == SPLIT_ROWS)
                call(lib, g, e0, e1, 0, g->N);
            else
                call(lib, g, 0, g->M, e0, e1);
        }
    }
}

/* the fastest single call of fn(arg) */
static double best_time(void (*fn)(void *), void *arg)
{
    double best = 1e30;
    fn(arg);
    for (int r = 0; r < rounds; r++) {
        double t0 = now(), t = t0;
        do {
            fn(arg);
            double u = now();
            if (u - t < best)
                best = u - t;
            t = u;
        } while (t - t0 < min_s);
    }
    return best;
}

typedef struct gemm_job {
    int lib, how;
    const gemm *g;
} gemm_job;

static void gemm_fn(void *p)
{
    const gemm_job *j = p;
    run_gemm(j->lib, j->how, j->g);
}

static const char *const cfg_names[2][3] = {
    {"blas/own", "blas/rows", "blas/cols"}, {"dnnl/own", "dnnl/rows", "dnnl/cols"}};

/* the bound of one GEMM: its fastest configuration (name in *which) */
static double gemm_bound(int ta, int tb, int M, int N, int K, const char **which)
{
    float *A = buffer((size_t)M * K), *B = buffer((size_t)K * N), *C = buffer((size_t)M * N);
    gemm g = {ta, tb, M, N, K, A, B, C};
    double best = 1e30;
#ifdef HAVE_DNNL
    const int nlib = 2;
#else
    const int nlib = 1;
#endif
    for (int lib = 0; lib < nlib; lib++)
        for (int how = 0; how < 3; how++) {
            if (how != SPLIT_OWN && threads == 1)
                continue;
            gemm_job j = {lib, how, &g};
            double t = best_time(gemm_fn, &j);
            if (t < best) {
                best = t;
                *which = cfg_names[lib][how];
            }
        }
    free(A); free(B); free(C);
    return best;
}

typedef struct layer_job {
    const cdp_backend *be;
    const layer *l;
    const float *x, *W, *b, *dy;
    float *y, *dx, *dW, *db;
    int bwd;
} layer_job;

static void layer_fn(void *p)
{
    const layer_job *j = p;
    const layer *l = j->l;
    if (!j->bwd)
        j->be->linear_fwd(l->rows, l->in, l->out, j->x, j->W, j->b, j->y, 0);
    else
        j->be->linear_bwd(l->rows, l->in, l->out, j->x, j->W, j->dy, l->need_dx ? j->dx : NULL,
                          j->dW, j->db, 0, 0);
}

static int usage(const char *a0)
{
    fprintf(stderr, "usage: %s MODEL CxHxW BATCH [THREADS] [--rounds R] [--min-ms MS] "
            "[--classes C]\n", a0);
    return 2;
}

int main(int argc, char **argv)
{
    bench_model_args ma = bench_model_defaults();
    for (int a = 1; a < argc; a++)
        if (bench_model_arg(&ma, argc, argv, &a) <= 0)
            return usage(argv[0]);
    cdp_model m;
    if (bench_model_build(&ma, &m, "linear_bound"))
        return 2;
    const char *spec = ma.spec, *shape = ma.shape;
    const int B = ma.B;
    threads = ma.threads;
    rounds = ma.rounds;
    min_s = ma.min_ms * 1e-3;
    for (int i = 0; i < m.nlayers; i++) {
        const cdp_layer *ly = &m.layers[i];
        char w[80];
        int need_dx = ly->in != 0;   /* tensor 0 is the model's input */
        if (ly->kind == CDP_LAYER_LINEAR) {
            int rows = ly->tokens ? B * ly->xs.c * ly->xs.h : B;
            int in = ly->tokens ? ly->xs.w : (int)cdp_shape_n(ly->xs);
            int out = ly->tokens ? ly->ys.w : (int)cdp_shape_n(ly->ys);
            snprintf(w, sizeof w, "linear %d->%d", in, out);
            add_layer(w, rows, in, out, need_dx);
        } else if (ly->kind == CDP_LAYER_ATTENTION) {
            int T = ly->xs.c * ly->xs.h, D = ly->xs.w;
            snprintf(w, sizeof w, "attention in_proj %d->%d", D, 3 * D);
            add_layer(w, B * T, D, 3 * D, need_dx);
            snprintf(w, sizeof w, "attention out_proj %d->%d", D, D);
            add_layer(w, B * T, D, D, 1);
        }
    }
    const cdp_backend *be = cdp_backend_cpu(threads);
    printf("%s; kernel %s; %d thread(s); cdp: %s\n", openblas_get_config(),
           openblas_get_corename(), threads, be->describe());
    printf("model %s, input %s, batch %d: %d distinct Linear shapes\n", spec, shape, B, nls);
    printf("  %-28s %5s %5s %5s %3s %4s  %9s %9s %-10s %8s\n", "layer", "rows", "in", "out",
           "n", "pass", "cdp ms", "bound ms", "bound by", "fraction");
    char cfg[200], lcfg[400];
    snprintf(cfg, sizeof cfg, "%s input=%s B=%d threads=%d kernel=%s", spec, shape, B, threads,
             openblas_get_corename());
    double tot_cdp = 0, tot_bound = 0;
    for (int i = 0; i < nls; i++) {
        const layer *l = &ls[i];
        const size_t nx = (size_t)l->rows * l->in, ny = (size_t)l->rows * l->out,
                     nw = (size_t)l->out * l->in;
        float *x = buffer(nx), *W = buffer(nw), *b = buffer(l->out), *dy = buffer(ny);
        float *y = buffer(ny), *dx = buffer(nx), *dW = buffer(nw), *db = buffer(l->out);
        for (int pass = 0; pass < 2; pass++) {
            /* cdp's kernel first: the bound's runs leave OpenBLAS and
             * OpenMP at other thread counts, so set them again */
            be = cdp_backend_cpu(threads);
            layer_job j = {be, l, x, W, b, dy, y, dx, dW, db, pass};
            double tc = best_time(layer_fn, &j);
            const char *w1 = "", *w2 = "", *w3 = "";
            double tb;
            if (pass == 0) {
                tb = gemm_bound(0, 1, l->rows, l->out, l->in, &w1);
            } else {
                tb = gemm_bound(1, 0, l->out, l->in, l->rows, &w2);
                if (l->need_dx)
                    tb += gemm_bound(0, 0, l->rows, l->in, l->out, &w3);
            }
            char by[32];
            snprintf(by, sizeof by, "%s%s%s%s", w1, w2, *w3 ? "+" : "", w3);
            printf("  %-28s %5d %5d %5d %3d %4s  %9.3f %9.3f %-10s %8.2f\n", l->what, l->rows,
                   l->in, l->out, l->count, pass ? "bwd" : "fwd", tc * 1e3, tb * 1e3, by, tb / tc);
            fflush(stdout);
            tot_cdp += tc * l->count;
            tot_bound += tb * l->count;
            snprintf(lcfg, sizeof lcfg, "%.199s %.79s rows=%d in=%d out=%d %s", cfg, l->what, l->rows,
                     l->in, l->out, pass ? "bwd" : "fwd");
            bench_result("linear-bound", lcfg, "cdp_ms", tc * 1e3, "ms");
            bench_result("linear-bound", lcfg, "bound_ms", tb * 1e3, "ms");
            bench_result("linear-bound", lcfg, "fraction", tb / tc, "ratio");
        }
        free(x); free(W); free(b); free(dy); free(y); free(dx); free(dW); free(db);
    }
    printf("total over the model's Linear layers: cdp %.3f ms, bound %.3f ms, fraction %.2f\n",
           tot_cdp * 1e3, tot_bound * 1e3, tot_bound / tot_cdp);
    bench_result("linear-bound", cfg, "total_fraction", tot_bound / tot_cdp, "ratio");
    bench_results_end();
    cdp_model_free(&m);
    return 0;
}
