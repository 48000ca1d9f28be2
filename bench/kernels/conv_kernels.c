/* conv_kernels: GFLOP/s of the CPU backend's convolution (im2col + sgemm,
 * src/cpu/kernels_conv.c) per layer shape and per layout, against plain
 * cblas_sgemm of the same M, N, K.
 *
 * Shapes: resnet18 with the CIFAR stem on 1x28x28 at B = 64 (3x3 convs on
 * 28x28/64, 14x14/128, 7x7/256, 4x4/512, the stride-2 3x3 convs and 1x1
 * shortcuts between them) and resnet20 at B = 128 (16/32/64 channels on
 * 28/14/7).  Layouts (cdp_cpu_conv_cols, the columns a chunk of whole
 * samples aims at): 1 = one sample per GEMM, 1024 and 4096, and "batch" =
 * the whole micro-batch in one im2col and one GEMM.  The layout comparison
 * runs on 1 thread with CDP_GEMM_SPLIT=1 (so "batch" is one chunk); the
 * default layout is then also timed with 2 threads (split 2).
 *
 * fwd GFLOP/s = 2*Cout*K*B*P / time (K = Cin*KH*KW, P = OH*OW);
 * bwd counts dw and dx: 4*Cout*K*B*P / time.  "sgemm" times
 * y[Cout, B*P] = w[Cout, K] col[K, B*P] (fwd) and dw = dy col^T plus
 * dcol = w^T dy (bwd) as single-threaded sgemm calls on ready operands:
 * the bound without im2col, col2im and layout copies.  Best of REPS runs;
 * the machines are noisy, compare within one run.
 *
 * Build (after ./bootstrap; links the in-tree libcdp):
 *     gcc -O2 -std=c11 -D_GNU_SOURCE -fopenmp -Iinclude -Isrc/cpu bench/kernels/conv_kernels.c \
 *         -o conv_kernels -L.libs -lcdp -Wl,-rpath,$PWD/.libs -lopenblas -lm
 * Run:
 *     ./conv_kernels [REPS]          (default 3)
 *     ./conv_kernels direct [REPS]   im2col against the direct path
 *     ./conv_kernels dnnl [REPS]     cdp's own paths against oneDNN
 * Each cell is "fwd / bwd" GFLOP/s; "all" is total flops over total time.
 *
 * "direct" (kernels_conv_direct.c) times, for every 3x3 stride-1 shape of
 * the lists above plus resnet20 at B = 32, the im2col path
 * (cdp_cpu_conv_direct = 0, cols 1024) and the direct path
 * (cdp_cpu_conv_direct = 2) alternately, rep by rep, in one process on 1
 * thread (split 1), and prints both with the ratio direct / im2col and the
 * path the default policy (cdp_cpu_conv_direct_use) takes.
 *
 * "dnnl" (kernels_conv_dnnl.c, a build with oneDNN) times, for every shape
 * of the first list plus resnet20 at B = 32, cdp's own paths as a build
 * without oneDNN takes them (im2col or direct by cdp_cpu_conv_direct_use)
 * against oneDNN (cdp_cpu_conv_dnnl = 2) the same way, on 1 thread (split
 * 1), with the path the default policy (cdp_cpu_conv_dnnl_use) takes.  The
 * other modes time cdp's own paths only (oneDNN off).
 *
 * Result lines (bench/README) last: every cell's GFLOP/s, fwd and bwd, and
 * in direct and dnnl the ratios; config: the mode, the shape (or "all"). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cblas.h>

#include "backend/backend.h"
#include "cpu_internal.h"
#include "../lib/bench_util.h"

struct shp {
    const char *net;
    int B, Cin, H, Cout, k, stride, pad;
};

static const struct shp shapes[] = {
    {"r18 stem", 64, 1, 28, 64, 3, 1, 1},
    {"r18 l1", 64, 64, 28, 64, 3, 1, 1},
    {"r18 l2 s2", 64, 64, 28, 128, 3, 2, 1},
    {"r18 l2 sc", 64, 64, 28, 128, 1, 2, 0},
    {"r18 l2", 64, 128, 14, 128, 3, 1, 1},
    {"r18 l3 s2", 64, 128, 14, 256, 3, 2, 1},
    {"r18 l3 sc", 64, 128, 14, 256, 1, 2, 0},
    {"r18 l3", 64, 256, 7, 256, 3, 1, 1},
    {"r18 l4 s2", 64, 256, 7, 512, 3, 2, 1},
    {"r18 l4 sc", 64, 256, 7, 512, 1, 2, 0},
    {"r18 l4", 64, 512, 4, 512, 3, 1, 1},
    {"r20 l1", 128, 16, 28, 16, 3, 1, 1},
    {"r20 l2 s2", 128, 16, 28, 32, 3, 2, 1},
    {"r20 l2 sc", 128, 16, 28, 32, 1, 2, 0},
    {"r20 l2", 128, 32, 14, 32, 3, 1, 1},
    {"r20 l3 s2", 128, 32, 14, 64, 3, 2, 1},
    {"r20 l3 sc", 128, 32, 14, 64, 1, 2, 0},
    {"r20 l3", 128, 64, 7, 64, 3, 1, 1},
};

static int reps = 3;

/* best fwd and bwd seconds of the backend's kernels for the current layout */
static void time_conv(const cdp_backend *be, const cdp_conv_shape *s, const float *x,
                      const float *w, const float *b, const float *dy, float *y, float *dx,
                      float *dw, float *db, double *tf, double *tb)
{
    float *ws = buffer(be->conv2d_ws_floats(s) + 1);
    *tf = *tb = 1e30;
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        be->conv2d_fwd(s, x, w, b, y, ws);
        double t1 = now();
        be->conv2d_bwd(s, x, w, dy, dx, dw, db, 0, ws);
        double t2 = now();
        if (t1 - t0 < *tf) *tf = t1 - t0;
        if (t2 - t1 < *tb) *tb = t2 - t1;
    }
    free(ws);
}

static const struct shp direct_shapes[] = {
    {"r18 stem", 64, 1, 28, 64, 3, 1, 1},
    {"r18 l1", 64, 64, 28, 64, 3, 1, 1},
    {"r18 l2", 64, 128, 14, 128, 3, 1, 1},
    {"r18 l3", 64, 256, 7, 256, 3, 1, 1},
    {"r18 l4", 64, 512, 4, 512, 3, 1, 1},
    {"r20 stem", 128, 1, 28, 16, 3, 1, 1},
    {"r20 l1", 128, 16, 28, 16, 3, 1, 1},
    {"r20 l2", 128, 32, 14, 32, 3, 1, 1},
    {"r20 l3", 128, 64, 7, 64, 3, 1, 1},
    {"r20 stem", 32, 1, 28, 16, 3, 1, 1},
    {"r20 l1", 32, 16, 28, 16, 3, 1, 1},
    {"r20 l2", 32, 32, 14, 32, 3, 1, 1},
    {"r20 l3", 32, 64, 7, 64, 3, 1, 1},
};

static const struct shp dnnl_extra[] = {
    {"r20 l1", 32, 16, 28, 16, 3, 1, 1},
    {"r20 l2", 32, 32, 14, 32, 3, 1, 1},
    {"r20 l3", 32, 64, 7, 64, 3, 1, 1},
};

/* the two paths compared by bench_pair: m = 0, 1 */
static void set_direct(int m)
{
    cdp_cpu_conv_direct = m ? 2 : 0;
}

static void set_dnnl(int m)
{
    cdp_cpu_conv_direct = 1;
    cdp_cpu_conv_dnnl = m ? 2 : 0;
}

/* the default policy's path for the last column */
static const char *policy_direct(const cdp_conv_shape *s, int pass)
{
    cdp_cpu_conv_direct = 1;
    return cdp_cpu_conv_direct_use(s, pass) ? "direct" : "im2col";
}

static const char *policy_dnnl(const cdp_conv_shape *s, int pass)
{
    cdp_cpu_conv_dnnl = 1;
    const char *r = cdp_cpu_conv_dnnl_use(s) ? "oneDNN" : "cdp";
    cdp_cpu_conv_dnnl = 0;
    (void)pass;
    return r;
}

/* the result lines of one row of bench_pair: GFLOP/s of both paths, fwd
 * and bwd, and the ratios (times t[path][fwd, bwd], fl forward flops) */
static void pair_results(const char *cfg, const char *name0, const char *name1, double fl,
                         double t[2][2])
{
    const char *names[2] = {name0, name1};
    char metric[64];
    for (int m = 0; m < 2; m++) {
        snprintf(metric, sizeof metric, "%s_fwd", names[m]);
        bench_result("conv-kernels", cfg, metric, fl / t[m][0] * 1e-9, "GFLOP/s");
        snprintf(metric, sizeof metric, "%s_bwd", names[m]);
        bench_result("conv-kernels", cfg, metric, 2 * fl / t[m][1] * 1e-9, "GFLOP/s");
    }
    snprintf(metric, sizeof metric, "%s/%s_fwd", name1, name0);
    bench_result("conv-kernels", cfg, metric, t[0][0] / t[1][0], "ratio");
    snprintf(metric, sizeof metric, "%s/%s_bwd", name1, name0);
    bench_result("conv-kernels", cfg, metric, t[0][1] / t[1][1], "ratio");
}

/* path 0 against path 1 (set(m)), alternating rep by rep over the shapes of
 * lists a and b (see the top comment) */
static int bench_pair(const struct shp *a, size_t na, const struct shp *bl, size_t nb,
                      const char *name0, const char *name1, void (*set)(int),
                      const char *(*policy)(const cdp_conv_shape *, int))
{
    setenv("CDP_GEMM_SPLIT", "1", 1);
    const cdp_backend *be = cdp_backend_cpu(1);
    printf("# %s\n", be->describe());
    printf("# GFLOP/s fwd / bwd (dw + dx), 1 thread, best of %d alternated reps; "
           "ratio = %s / %s; def = the default policy's path fwd / bwd\n", reps, name1, name0);
    printf("%-9s %4s %4s %4s %4s  %-11s  %-11s  %-11s %s\n", "shape", "Cin", "Cout", "P",
           "B", name0, name1, "ratio", "def");
    double tot[2][2] = {{0}}, tot_f = 0;
    for (size_t i = 0; i < na + nb; i++) {
        const struct shp *h = i < na ? &a[i] : &bl[i - na];
        cdp_conv_shape s = {h->B, h->Cin, h->H, h->H, h->Cout, h->k, h->k, h->stride, h->pad,
                            0, 0, 1};
        s.OH = (s.H + 2 * s.pad - s.KH) / s.stride + 1;
        s.OW = s.OH;
        int K = s.Cin * s.KH * s.KW, P = s.OH * s.OW;
        double fl = 2.0 * s.Cout * (double)K * s.B * P;
        float *x = buffer((size_t)s.B * s.Cin * s.H * s.W), *w = buffer((size_t)s.Cout * K);
        float *b = buffer(s.Cout), *dy = buffer((size_t)s.B * s.Cout * P);
        float *y = buffer((size_t)s.B * s.Cout * P), *dx = buffer((size_t)s.B * s.Cin * s.H * s.W);
        float *dw = buffer((size_t)s.Cout * K), *db = buffer(s.Cout);
        set(0);
        size_t n0 = be->conv2d_ws_floats(&s);
        set(1);
        size_t n1 = be->conv2d_ws_floats(&s);
        float *ws = buffer((n0 > n1 ? n0 : n1) + 1);   /* the size depends on the path */
        double t[2][2] = {{1e30, 1e30}, {1e30, 1e30}};
        for (int r = 0; r < reps; r++)
            for (int m = 0; m < 2; m++) {
                set(m);
                double t0 = now();
                be->conv2d_fwd(&s, x, w, b, y, ws);
                double t1 = now();
                be->conv2d_bwd(&s, x, w, dy, dx, dw, db, 0, ws);
                double t2 = now();
                if (t1 - t0 < t[m][0]) t[m][0] = t1 - t0;
                if (t2 - t1 < t[m][1]) t[m][1] = t2 - t1;
            }
        const char *deff = policy(&s, 0), *defb = policy(&s, 1);   /* bwd with dx */
        printf("%-9s %4d %4d %4d %4d ", h->net, s.Cin, s.Cout, P, s.B);
        for (int m = 0; m < 2; m++)
            printf("  %4.0f / %4.0f", fl / t[m][0] * 1e-9, 2 * fl / t[m][1] * 1e-9);
        printf("  %4.2f / %4.2f  %s / %s\n", t[0][0] / t[1][0], t[0][1] / t[1][1], deff, defb);
        char cfg[128];
        snprintf(cfg, sizeof cfg, "%s: %s Cin=%d Cout=%d P=%d B=%d", name1, h->net, s.Cin, s.Cout,
                 P, s.B);
        pair_results(cfg, name0, name1, fl, t);
        fflush(stdout);
        for (int m = 0; m < 2; m++) {
            tot[m][0] += t[m][0];
            tot[m][1] += t[m][1];
        }
        tot_f += fl;
        free(x); free(w); free(b); free(dy); free(y); free(dx); free(dw); free(db); free(ws);
    }
    printf("%-9s %4s %4s %4s %4s ", "all", "", "", "", "");
    for (int m = 0; m < 2; m++)
        printf("  %4.0f / %4.0f", tot_f / tot[m][0] * 1e-9, 2 * tot_f / tot[m][1] * 1e-9);
    printf("  %4.2f / %4.2f\n", tot[0][0] / tot[1][0], tot[0][1] / tot[1][1]);
    char cfg[64];
    snprintf(cfg, sizeof cfg, "%s: all", name1);
    pair_results(cfg, name0, name1, tot_f, tot);
    bench_results_end();
    return 0;
}

/* the result lines of one cell of the layout table: column l's GFLOP/s */
static void layout_results(const char *cfg, int l, double fwd, double bwd)
{
    static const char *const col[6] = {"sgemm", "per-sample", "cols1024", "cols4096", "batch",
                                       "def/2t"};
    char metric[32];
    snprintf(metric, sizeof metric, "%s_fwd", col[l]);
    bench_result("conv-kernels", cfg, metric, fwd, "GFLOP/s");
    snprintf(metric, sizeof metric, "%s_bwd", col[l]);
    bench_result("conv-kernels", cfg, metric, bwd, "GFLOP/s");
}

int main(int argc, char **argv)
{
    cdp_backend_cpu_preinit(argc, argv);
    unsetenv("CDP_CONV_DNNL");   /* each mode sets cdp_cpu_conv_dnnl itself */
    if (argc > 1 && (strcmp(argv[1], "direct") == 0 || strcmp(argv[1], "dnnl") == 0)) {
        if (argc > 2)
            reps = atoi(argv[2]) > 0 ? atoi(argv[2]) : 3;
        if (argv[1][1] == 'i') {
            cdp_cpu_conv_dnnl = 0;
            return bench_pair(direct_shapes, sizeof direct_shapes / sizeof *direct_shapes,
                              NULL, 0, "im2col", "direct", set_direct, policy_direct);
        }
        if (!cdp_cpu_dnnl_version()) {
            fprintf(stderr, "conv_kernels dnnl: this libcdp is built without oneDNN\n");
            return 2;
        }
        return bench_pair(shapes, sizeof shapes / sizeof *shapes, dnnl_extra,
                          sizeof dnnl_extra / sizeof *dnnl_extra, "cdp", "oneDNN", set_dnnl,
                          policy_dnnl);
    }
    cdp_cpu_conv_dnnl = 0;
    if (argc > 1)
        reps = atoi(argv[1]) > 0 ? atoi(argv[1]) : 3;
    cdp_cpu_conv_direct = 0;   /* the im2col layouts only */
    setenv("CDP_GEMM_SPLIT", "1", 1);
    const cdp_backend *be = cdp_backend_cpu(1);
    printf("# %s\n", be->describe());
    printf("# GFLOP/s; fwd | bwd (dw + dx).  layouts on 1 thread (split 1); "
           "def/2t = cols %d on 2 threads (split 2)\n", cdp_cpu_conv_cols);
    printf("%-10s %4s %4s %4s %5s  %-11s %-11s %-11s %-11s %-11s %-11s\n", "shape",
           "Cout", "P", "B", "K", "sgemm", "per-sample", "cols 1024", "cols 4096",
           "batch", "def/2t");
    static const int layouts[4] = {1, 1024, 4096, 1 << 30};
    double tot_t[6][2] = {{0}}, tot_f = 0;
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
        const struct shp *h = &shapes[i];
        cdp_conv_shape s = {h->B, h->Cin, h->H, h->H, h->Cout, h->k, h->k, h->stride, h->pad,
                            0, 0, 1};
        s.OH = (s.H + 2 * s.pad - s.KH) / s.stride + 1;
        s.OW = s.OH;
        int K = s.Cin * s.KH * s.KW, P = s.OH * s.OW, N = s.B * P;
        double fl = 2.0 * s.Cout * (double)K * N;
        float *x = buffer((size_t)s.B * s.Cin * s.H * s.W), *w = buffer((size_t)s.Cout * K);
        float *b = buffer(s.Cout), *dy = buffer((size_t)s.B * s.Cout * P);
        float *y = buffer((size_t)s.B * s.Cout * P), *dx = buffer((size_t)s.B * s.Cin * s.H * s.W);
        float *dw = buffer((size_t)s.Cout * K), *db = buffer(s.Cout);
        /* plain sgemm on ready operands, one thread */
        float *col = buffer((size_t)K * N), *ym = buffer((size_t)s.Cout * N);
        double gf = 1e30, gb = 1e30;
        for (int r = 0; r < reps; r++) {
            double t0 = now();
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s.Cout, N, K, 1.0f, w, K,
                        col, N, 0.0f, ym, N);
            double t1 = now();
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, s.Cout, K, N, 1.0f, ym, N,
                        col, N, 0.0f, dw, K);
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, K, N, s.Cout, 1.0f, w, K,
                        ym, N, 0.0f, col, N);
            double t2 = now();
            if (t1 - t0 < gf) gf = t1 - t0;
            if (t2 - t1 < gb) gb = t2 - t1;
        }
        free(col);
        free(ym);
        double tf[6], tb[6];
        tf[0] = gf;
        tb[0] = gb;
        int saved = cdp_cpu_conv_cols;
        setenv("CDP_GEMM_SPLIT", "1", 1);
        be = cdp_backend_cpu(1);
        for (int l = 0; l < 4; l++) {
            cdp_cpu_conv_cols = layouts[l];
            time_conv(be, &s, x, w, b, dy, y, dx, dw, db, &tf[l + 1], &tb[l + 1]);
        }
        cdp_cpu_conv_cols = saved;
        setenv("CDP_GEMM_SPLIT", "2", 1);
        be = cdp_backend_cpu(2);
        time_conv(be, &s, x, w, b, dy, y, dx, dw, db, &tf[5], &tb[5]);
        printf("%-10s %4d %4d %4d %5d ", h->net, s.Cout, P, s.B, K);
        char cfg[128];
        snprintf(cfg, sizeof cfg, "layouts: %s Cin=%d Cout=%d P=%d B=%d K=%d", h->net, s.Cin,
                 s.Cout, P, s.B, K);
        for (int l = 0; l < 6; l++) {
            printf(" %4.0f / %4.0f", fl / tf[l] * 1e-9, 2 * fl / tb[l] * 1e-9);
            layout_results(cfg, l, fl / tf[l] * 1e-9, 2 * fl / tb[l] * 1e-9);
            tot_t[l][0] += tf[l];
            tot_t[l][1] += tb[l];
        }
        printf("\n");
        fflush(stdout);
        tot_f += fl;
        free(x); free(w); free(b); free(dy); free(y); free(dx); free(dw); free(db);
    }
    printf("%-10s %4s %4s %4s %5s ", "all", "", "", "", "");
    for (int l = 0; l < 6; l++) {
        printf(" %4.0f / %4.0f", tot_f / tot_t[l][0] * 1e-9, 2 * tot_f / tot_t[l][1] * 1e-9);
        layout_results("layouts: all", l, tot_f / tot_t[l][0] * 1e-9,
                       2 * tot_f / tot_t[l][1] * 1e-9);
    }
    printf("\n");
    bench_results_end();
    return 0;
}
