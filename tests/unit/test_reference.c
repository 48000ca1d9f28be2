/* The serial reference (src/exec/reference.c) against an independent
 * double-precision implementation of doc/reference.md section 3 written here with
 * plain loops: MLP forward/backward, lags, worker-order sums, SGD. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "backend/backend.h"
#include "io/batch.h"
#include "io/data.h"
#include "models/model.h"
#include "../lib/mlp_view.h"
#include "exec/reference.h"
#include "../lib/check_run.h"

/* one micro-batch: loss gradient of the whole MLP into g (layout of cdp_model),
 * with stage l's parameters taken from w[l] (a full parameter vector) */
static void grad_double(const cdp_model *m, double *const *w, const double *x, const int32_t *y,
                        int B, double *g)
{
    const int J = MV(m)->nlayers;
    double *a[CDP_MAX_LAYERS + 1], *d[CDP_MAX_LAYERS + 1];
    a[0] = (double *)x;
    for (int j = 0; j < J; j++) {
        int in = MV(m)->dims[j], out = MV(m)->dims[j + 1], st = 0;
        while (m->stage_first[st + 1] <= j) st++;
        const double *W = w[st] + MV(m)->w_off[j], *b = w[st] + MV(m)->b_off[j];
        a[j + 1] = calloc((size_t)B * out, sizeof(double));
        for (int r = 0; r < B; r++)
            for (int o = 0; o < out; o++) {
                double s = b[o];
                for (int k = 0; k < in; k++) s += a[j][r * in + k] * W[o * in + k];
                a[j + 1][r * out + o] = (j < J - 1 && s < 0) ? 0 : s;
            }
    }
    int C = MV(m)->dims[J];
    d[J] = calloc((size_t)B * C, sizeof(double));
    for (int r = 0; r < B; r++) {
        double mx = -INFINITY, se = 0;
        for (int c = 0; c < C; c++) mx = fmax(mx, a[J][r * C + c]);
        for (int c = 0; c < C; c++) se += exp(a[J][r * C + c] - mx);
        for (int c = 0; c < C; c++)
            d[J][r * C + c] = (exp(a[J][r * C + c] - mx) / se - (c == y[r])) / B;
    }
    for (int j = J - 1; j >= 0; j--) {
        int in = MV(m)->dims[j], out = MV(m)->dims[j + 1], st = 0;
        while (m->stage_first[st + 1] <= j) st++;
        const double *W = w[st] + MV(m)->w_off[j];
        for (int o = 0; o < out; o++) {
            double sb = 0;
            for (int r = 0; r < B; r++) sb += d[j + 1][r * out + o];
            g[MV(m)->b_off[j] + o] = sb;
            for (int k = 0; k < in; k++) {
                double s = 0;
                for (int r = 0; r < B; r++) s += d[j + 1][r * out + o] * a[j][r * in + k];
                g[MV(m)->w_off[j] + o * in + k] = s;
            }
        }
        d[j] = calloc((size_t)B * in, sizeof(double));
        for (int r = 0; r < B; r++)
            for (int k = 0; k < in; k++) {
                double s = 0;
                for (int o = 0; o < out; o++) s += d[j + 1][r * out + o] * W[o * in + k];
                d[j][r * in + k] = (j > 0 && a[j][r * in + k] <= 0) ? 0 : s;
            }
        free(d[j + 1]);
        free(a[j + 1]);
    }
    free(d[0]);
}

static void run_rule(cdp_rule rule, int N)
{
    const int B = 4, K = 6;
    const double lr = 0.05, mu = 0.9, wd = 1e-3;
    cdp_model m;
    char err[256];
    ck_assert_int_eq(cdp_model_parse("mlp:784-12-8-10", 3, &m, err, sizeof err), 0);
    cdp_dataset d;
    ck_assert_int_eq(cdp_make_synthetic(512, 784, 7, &d), 0);
    const size_t n = m.nparams;
    float *p = malloc(n * sizeof(float));
    cdp_model_init(&m, 3, p);
    double *cur = malloc(n * sizeof(double)), *prev = malloc(n * sizeof(double));
    double *buf = calloc(n, sizeof(double)), *g = malloc(n * sizeof(double)), *G = malloc(n * sizeof(double));
    for (size_t q = 0; q < n; q++) cur[q] = prev[q] = p[q];
    cdp_batcher bat;
    ck_assert_int_eq(cdp_batcher_init(&bat, &d, N, B, 5, 1), 0);
    double *x = malloc(sizeof(double) * B * 784);
    uint8_t *px = malloc((size_t)B * 784);
    int32_t y[4];
    const int L = m.nstages;
    for (int k = 0; k < K; k++) {
        memset(G, 0, n * sizeof(double));
        for (int i = 0; i < N; i++) {
            double *w[CDP_MAX_LAYERS];
            for (int l = 0; l < L; l++) {
                /* doc/reference.md section 3, written out again */
                int off_i = rule == CDP_RULE_DP ? 0 : i * 2 * L / N;
                int off_last = rule == CDP_RULE_DP ? 0 : (N - 1) * 2 * L / N;
                int lag = rule == CDP_RULE_DP ? 0 : rule == CDP_RULE_CDP_V1 ? 1 : (off_last - off_i <= 2 * l ? 0 : 1);
                w[l] = (lag && k > 0) ? prev : cur;
            }
            cdp_batcher_gather(&bat, k, i, px, y);
            for (int q = 0; q < B * 784; q++) x[q] = px[q] / 255.0;
            grad_double(&m, w, x, y, B, g);
            for (size_t q = 0; q < n; q++) G[q] += g[q];
        }
        for (size_t q = 0; q < n; q++) {
            double dq = G[q] / N + wd * cur[q];
            buf[q] = k == 0 ? dq : mu * buf[q] + dq;
            prev[q] = cur[q];
        }
        for (size_t q = 0; q < n; q++) cur[q] = prev[q] - lr * buf[q];
    }
    cdp_reference_config rc = { cdp_backend_cpu(1), &m, N, B, rule,
                                cdp_optim_sgd(lr, mu, wd, 0, 0.1, 512 / (N * B)), &d, 5, 1, K };
    ck_assert_int_eq(cdp_reference_run(&rc, p, err, sizeof err), 0);
    double dmax = 0, bmax = 0;
    for (size_t q = 0; q < n; q++) {
        dmax = fmax(dmax, fabs(p[q] - cur[q]));
        bmax = fmax(bmax, fabs(cur[q]));
    }
    ck_assert_msg(dmax / bmax < 1e-4, "%s N=%d: relative difference %g", cdp_rule_name(rule), N, dmax / bmax);
    cdp_batcher_free(&bat);
    cdp_dataset_free(&d);
    free(p); free(cur); free(prev); free(buf); free(g); free(G); free(x); free(px);
}

START_TEST(reference_dp) { run_rule(CDP_RULE_DP, 3); }
END_TEST
START_TEST(reference_cdp_v1) { run_rule(CDP_RULE_CDP_V1, 3); }
END_TEST
START_TEST(reference_cdp_v2) { run_rule(CDP_RULE_CDP_V2, 4); }
END_TEST

int main(void)
{
    Suite *s = suite_create("reference");
    TCase *tc = tcase_create("reference");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, reference_dp);
    tcase_add_test(tc, reference_cdp_v1);
    tcase_add_test(tc, reference_cdp_v2);
    suite_add_tcase(s, tc);
    int failed = check_run(s);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
