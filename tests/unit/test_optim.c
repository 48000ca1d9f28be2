/* SGD (torch.optim.SGD semantics), AdamW (torch.optim.AdamW) and the
 * learning-rate schedules (step decay, cosine, linear warm-up), against
 * values worked out by hand or in double here; tests/torch/torch_optim.sh
 * checks them against torch.optim itself. */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "backend/backend.h"
#include "optim/optim.h"
#include "run/options.h"
#include "../lib/check_run.h"

/* cdp_sgd_lr as it was before the optimizer description: the step schedule
 * must keep these bits */
static float old_sgd_lr(double base, int decay_epochs, double gamma, int64_t spe, int64_t c)
{
    if (decay_epochs <= 0 || spe <= 0)
        return (float)base;
    int64_t n = c / spe / decay_epochs;
    double lr = base;
    for (int64_t i = 0; i < n; i++)
        lr *= gamma;
    return (float)lr;
}

START_TEST(lr_schedule_by_hand)
{
    cdp_optim o = cdp_optim_sgd(0.1, 0.9, 0, 2, 0.5, 10);   /* halve every 2 epochs of 10 steps */
    ck_assert_float_eq(cdp_optim_lr(&o, 0), 0.1f);
    ck_assert_float_eq(cdp_optim_lr(&o, 19), 0.1f);
    ck_assert_float_eq(cdp_optim_lr(&o, 20), 0.05f);
    ck_assert_float_eq(cdp_optim_lr(&o, 39), 0.05f);
    ck_assert_float_eq(cdp_optim_lr(&o, 40), 0.025f);
    o.decay_epochs = 0;
    ck_assert_float_eq(cdp_optim_lr(&o, 1000), 0.1f);
}
END_TEST

START_TEST(step_schedule_keeps_its_bits)
{
    const double lrs[] = { 0.03, 0.1, 0.0123456789 }, gammas[] = { 0.5, 0.1, 0.7, 1.3 };
    const int decays[] = { 0, 1, 3 };
    for (int a = 0; a < 3; a++)
        for (int b = 0; b < 4; b++)
            for (int d = 0; d < 3; d++) {
                cdp_optim o = cdp_optim_sgd(lrs[a], 0.9, 5e-4, decays[d], gammas[b], 7);
                o.warmup_steps = 0;
                for (int64_t c = 0; c < 400; c++) {
                    float x = cdp_optim_lr(&o, c), y = old_sgd_lr(lrs[a], decays[d], gammas[b], 7, c);
                    ck_assert_msg(memcmp(&x, &y, sizeof x) == 0, "lr %g gamma %g decay %d c %lld: "
                                  "%.9g, was %.9g", lrs[a], gammas[b], decays[d], (long long)c,
                                  (double)x, (double)y);
                    /* and the SGD step carries the same scalars as before */
                    cdp_optim_step st = cdp_optim_step_at(&o, c);
                    ck_assert(st.kind == CDP_OPTIM_SGD && st.first == (c == 0));
                    ck_assert(memcmp(&st.lr, &y, sizeof y) == 0);
                    ck_assert(st.momentum == 0.9f && st.weight_decay == 5e-4f);
                }
            }
}
END_TEST

START_TEST(cosine_endpoints)
{
    cdp_optim o = cdp_optim_sgd(0.1, 0.9, 0, 3, 0.5, 10);
    o.schedule = CDP_LR_COSINE;
    o.total_steps = 11;   /* updates 0..10: cos(pi * c / 10) */
    ck_assert_float_eq(cdp_optim_lr(&o, 0), 0.1f);
    ck_assert_float_eq(cdp_optim_lr(&o, 5), 0.05f);
    ck_assert_float_eq(cdp_optim_lr(&o, 10), 0.0f);   /* the last update */
    ck_assert_float_eq(cdp_optim_lr(&o, 11), 0.0f);
    for (int64_t c = 0; c <= 10; c++) {
        double want = 0.1 * 0.5 * (1.0 + cos(M_PI * (double)c / 10.0));
        ck_assert_msg(fabs(cdp_optim_lr(&o, c) - want) <= 1e-7 * 0.1, "c %lld: %.9g, want %.9g",
                      (long long)c, (double)cdp_optim_lr(&o, c), want);
        if (c > 0)   /* decreasing, and symmetric about the middle */
            ck_assert(cdp_optim_lr(&o, c) < cdp_optim_lr(&o, c - 1));
    }
    ck_assert(fabs(cdp_optim_lr(&o, 2) + cdp_optim_lr(&o, 8) - 0.1) < 1e-8);
    /* the step schedule's options play no part */
    o.decay_epochs = 1;
    o.gamma = 0.01;
    ck_assert_float_eq(cdp_optim_lr(&o, 5), 0.05f);
    /* a run of one update keeps the lr */
    o.total_steps = 1;
    ck_assert_float_eq(cdp_optim_lr(&o, 0), 0.1f);
}
END_TEST

START_TEST(warmup_values)
{
    cdp_optim o = cdp_optim_sgd(0.1, 0.9, 0, 1, 0.5, 10);
    o.warmup_steps = 4;
    /* (c+1)/W of the step schedule for c < W, the schedule after */
    ck_assert_float_eq(cdp_optim_lr(&o, 0), (float)(0.1 * 0.25));
    ck_assert_float_eq(cdp_optim_lr(&o, 1), (float)(0.1 * 0.5));
    ck_assert_float_eq(cdp_optim_lr(&o, 2), (float)(0.1 * 0.75));
    ck_assert_float_eq(cdp_optim_lr(&o, 3), 0.1f);
    ck_assert_float_eq(cdp_optim_lr(&o, 4), 0.1f);
    ck_assert_float_eq(cdp_optim_lr(&o, 10), 0.05f);
    /* a warm-up longer than an epoch multiplies the decayed lr */
    o.warmup_steps = 20;
    ck_assert_float_eq(cdp_optim_lr(&o, 12), (float)(0.05 * 13.0 / 20.0));
    /* on cosine: lr * (1 + cos(pi c / (T-1))) / 2 * (c+1)/W, in double, rounded once */
    o.schedule = CDP_LR_COSINE;
    o.total_steps = 50;
    o.warmup_steps = 5;
    for (int64_t c = 0; c < 50; c++) {
        double want = 0.1 * (0.5 * (1.0 + cos(M_PI * (double)c / 49.0)));
        if (c < 5)
            want *= (double)(c + 1) / 5.0;
        ck_assert_msg(cdp_optim_lr(&o, c) == (float)want, "c %lld: %.9g, want %.9g",
                      (long long)c, (double)cdp_optim_lr(&o, c), want);
    }
    ck_assert_float_eq(cdp_optim_lr(&o, 49), 0.0f);
}
END_TEST

/* AdamW in double, as torch.optim.AdamW's formulas read */
static void adamw_double(double *th, double *m, double *v, double g, double lr, double b1,
                         double b2, double eps, double wd, int t)
{
    *th *= 1.0 - lr * wd;
    *m = b1 * *m + (1.0 - b1) * g;
    *v = b2 * *v + (1.0 - b2) * g * g;
    double bc1 = 1.0 - pow(b1, t), bc2 = 1.0 - pow(b2, t);
    *th -= lr / bc1 * (*m / (sqrt(*v) / sqrt(bc2) + eps));
}

START_TEST(adamw_by_hand)
{
    /* The first update of Adam moves each weight by lr * sign(g) (up to
     * eps): m/bc1 = g, sqrt(v/bc2) = |g|.  theta0 = (1, -2), g = (0.5, -0.25),
     * lr 0.1, wd 0.01: theta = 1*(1 - 0.001) - 0.1 = 0.899 and
     * -2*(0.999) + 0.1 = -1.898. */
    const cdp_backend *be = cdp_backend_cpu(1);
    cdp_optim o = cdp_optim_sgd(0.1, 0.9, 0.01, 0, 0.5, 10);
    o.kind = CDP_OPTIM_ADAMW;
    float th[2] = { 1.0f, -2.0f }, g[2] = { 0.5f, -0.25f }, m[2] = { 7, 7 }, v[2] = { 7, 7 };
    cdp_optim_step st = cdp_optim_step_at(&o, 0);
    ck_assert(st.first && st.kind == CDP_OPTIM_ADAMW);
    be->adamw(2, th, th, g, 1.0f, m, v, &st.adamw, st.first, 0);   /* m, v: ignored */
    ck_assert_msg(fabs(th[0] - 0.899) < 1e-6 && fabs(th[1] + 1.898) < 1e-6, "%.9g %.9g",
                  (double)th[0], (double)th[1]);
    ck_assert(fabs(m[0] - 0.05) < 1e-8 && fabs(v[1] - 0.001 * 0.0625) < 1e-10);
    /* five more updates with changing gradients, against the formulas in
     * double: the float kernel stays within a few ulps */
    double dth[2] = { 1.0, -2.0 }, dm[2] = { 0, 0 }, dv[2] = { 0, 0 };
    for (int i = 0; i < 2; i++)
        adamw_double(&dth[i], &dm[i], &dv[i], g[i], 0.1, 0.9, 0.999, 1e-8, 0.01, 1);
    for (int c = 1; c < 6; c++) {
        float gc[2] = { 0.5f - 0.2f * (float)c, -0.25f + 0.125f * (float)c };
        for (int i = 0; i < 2; i++)
            adamw_double(&dth[i], &dm[i], &dv[i], gc[i], 0.1, 0.9, 0.999, 1e-8, 0.01, c + 1);
        st = cdp_optim_step_at(&o, c);
        ck_assert(!st.first);
        be->adamw(2, th, th, gc, 1.0f, m, v, &st.adamw, st.first, 0);
        for (int i = 0; i < 2; i++)
            ck_assert_msg(fabs(th[i] - dth[i]) < 2e-6 * fabs(dth[i]), "update %d [%d]: %.9g, "
                          "want %.9g", c + 1, i, (double)th[i], dth[i]);
    }
    /* the coefficients, computed on the host in double and rounded once */
    st = cdp_optim_step_at(&o, 2);
    ck_assert(st.adamw.decay == (float)(1.0 - (double)0.1f * 0.01));
    ck_assert(st.adamw.one_minus_beta1 == (float)(1.0 - 0.9));
    ck_assert(st.adamw.one_minus_beta2 == (float)(1.0 - 0.999));
    ck_assert(st.adamw.bc2_sqrt == (float)sqrt(1.0 - pow(0.999, 3)));
    ck_assert(st.adamw.step_size == (float)((double)0.1f / (1.0 - pow(0.9, 3))));
    ck_assert(st.adamw.eps == 1e-8f);
    ck_assert_int_eq(cdp_optim_state_buffers(&o), 2);
    ck_assert_uint_eq(cdp_optim_state_floats(&o, 10), 20);
    o.kind = CDP_OPTIM_SGD;
    ck_assert_uint_eq(cdp_optim_state_floats(&o, 10), 10);
}
END_TEST

START_TEST(adamw_kernel_contract)
{
    /* gscale is the mean's 1/N (as sgd's: g*gscale is one rounding, so
     * scaling g in a pass of its own first gives the same bits); out of
     * place leaves theta_in alone; theta_out may be g; zero_g clears g;
     * 1 and 4 threads give the same bits */
    enum { n = (1 << 19) + 3 };   /* above the OpenMP threshold */
    cdp_optim o = cdp_optim_sgd(1e-3, 0, 0.05, 0, 0.5, 10);
    o.kind = CDP_OPTIM_ADAMW;
    float *t0 = malloc(n * sizeof(float)), *t1 = malloc(n * sizeof(float));
    float *keep = malloc(n * sizeof(float)), *g0 = malloc(n * sizeof(float));
    float *g1 = malloc(n * sizeof(float)), *g2 = malloc(n * sizeof(float));
    float *st0 = calloc(2 * n, sizeof(float)), *st1 = calloc(2 * n, sizeof(float));
    float *st2 = calloc(2 * n, sizeof(float));
    ck_assert(t0 && t1 && keep && g0 && g1 && g2 && st0 && st1 && st2);
    uint32_t r = 777u;
    for (int k = 0; k < n; k++) {
        r = r * 1664525u + 1013904223u;
        t0[k] = t1[k] = (float)(r >> 8) / 16777216.0f - 0.5f;
    }
    const float third = 1.0f / 3.0f;
    for (int c = 0; c < 4; c++) {
        for (int k = 0; k < n; k++) {
            r = r * 1664525u + 1013904223u;
            g0[k] = g1[k] = g2[k] = (float)(r >> 8) / 16777216.0f * 6.0f - 3.0f;
        }
        if (c == 1)   /* a zero gradient somewhere */
            g0[3] = g1[3] = g2[3] = 0.0f;
        const cdp_optim_step st = cdp_optim_step_at(&o, c);
        /* 4 threads, from t1 into the gradient buffer g2 */
        memcpy(keep, t1, n * sizeof(float));
        cdp_backend_cpu(4)->adamw(n, t1, g2, g2, third, st2, st2 + n, &st.adamw, st.first, 0);
        ck_assert(memcmp(keep, t1, n * sizeof(float)) == 0);
        /* 1 thread: in place with zero_g, and on a gradient scaled first */
        const cdp_backend *be = cdp_backend_cpu(1);
        be->adamw(n, t0, t0, g0, third, st0, st0 + n, &st.adamw, st.first, 1);
        be->scale(n, g1, third);
        be->adamw(n, t1, t1, g1, 1.0f, st1, st1 + n, &st.adamw, st.first, 0);
        ck_assert(memcmp(t0, t1, n * sizeof(float)) == 0);
        ck_assert(memcmp(st0, st1, 2 * n * sizeof(float)) == 0);
        ck_assert(memcmp(t1, g2, n * sizeof(float)) == 0);
        ck_assert(memcmp(st1, st2, 2 * n * sizeof(float)) == 0);
        for (int k = 0; k < n; k++)
            ck_assert(g0[k] == 0.0f && !signbit(g0[k]));
    }
    free(t0); free(t1); free(keep); free(g0); free(g1); free(g2);
    free(st0); free(st1); free(st2);
}
END_TEST

START_TEST(sgd_three_updates_by_hand)
{
    /* theta0 = 1, g = 0.5 each time, lr 0.1, mu 0.9, wd 0.01:
     * 1: d = 0.5 + 0.01*1 = 0.51;         buf = 0.51;                theta = 0.949
     * 2: d = 0.5 + 0.00949 = 0.50949;      buf = 0.459 + 0.50949 = 0.96849; theta = 0.852151
     * 3: d = 0.5 + 0.00852151 = 0.50852151; buf = 0.871641 + 0.50852151 = 1.38016251;
     *    theta = 0.852151 - 0.138016251 = 0.714134749 */
    const cdp_backend *be = cdp_backend_cpu(1);
    float theta = 1.0f, g = 0.5f, buf = 0.0f;
    const double want[3] = { 0.949, 0.852151, 0.714134749 };
    for (int k = 0; k < 3; k++) {
        be->sgd(1, &theta, &theta, &g, 1.0f, &buf, 0.1f, 0.9f, 0.01f, k == 0, 0);
        ck_assert_msg(fabs(theta - want[k]) < 1e-6, "update %d: %.9g, want %.9g", k + 1, theta, want[k]);
    }
    /* the first update ignores whatever the buffer held */
    float t2 = 1.0f, b2 = 123.0f;
    be->sgd(1, &t2, &t2, &g, 1.0f, &b2, 0.1f, 0.9f, 0.01f, 1, 0);
    ck_assert(fabs(t2 - 0.949) < 1e-6);
    /* out of place leaves the input alone */
    float in = 2.0f, out = 0.0f, b3 = 0.0f, g3 = 1.0f;
    be->sgd(1, &in, &out, &g3, 1.0f, &b3, 0.5f, 0.0f, 0.0f, 1, 0);
    ck_assert_float_eq(in, 2.0f);
    ck_assert_float_eq(out, 1.5f);
}
END_TEST

START_TEST(sgd_gradient_scale)
{
    /* g * gscale is the mean's 1/N: g = 2, gscale = 0.25 -> 0.5, then as the
     * first update above: theta = 0.949.  It must be bitwise what scaling
     * the gradient in a pass of its own and then calling sgd gives. */
    const cdp_backend *be = cdp_backend_cpu(1);
    float theta = 1.0f, g = 2.0f, buf = 0.0f;
    be->sgd(1, &theta, &theta, &g, 0.25f, &buf, 0.1f, 0.9f, 0.01f, 1, 0);
    ck_assert_msg(fabs(theta - 0.949) < 1e-6, "theta %.9g, want 0.949", theta);
    enum { n = 4099 };
    float *gs = malloc(n * sizeof *gs), *gf = malloc(n * sizeof *gf);
    float *t1 = malloc(n * sizeof *t1), *t2 = malloc(n * sizeof *t2);
    float *b1 = malloc(n * sizeof *b1), *b2 = malloc(n * sizeof *b2);
    ck_assert(gs && gf && t1 && t2 && b1 && b2);
    uint32_t r = 12345u;
    for (int k = 0; k < n; k++) {
        r = r * 1664525u + 1013904223u;
        gs[k] = gf[k] = (float)(r >> 8) / 16777216.0f * 7.0f - 3.5f;
        r = r * 1664525u + 1013904223u;
        t1[k] = t2[k] = (float)(r >> 8) / 16777216.0f - 0.5f;
        b1[k] = b2[k] = 0.0f;
    }
    const float third = 1.0f / 3.0f;
    for (int step = 0; step < 3; step++) {
        be->scale(n, gs, third);
        be->sgd(n, t1, t1, gs, 1.0f, b1, 0.03f, 0.9f, 5e-4f, step == 0, 0);
        be->sgd(n, t2, t2, gf, third, b2, 0.03f, 0.9f, 5e-4f, step == 0, 0);
        for (int k = 0; k < n; k++)
            gs[k] = gf[k];
    }
    ck_assert(memcmp(t1, t2, n * sizeof *t1) == 0);
    ck_assert(memcmp(b1, b2, n * sizeof *b1) == 0);
    /* the new version may be written over the gradient it is made from
     * (the executor's two-slot update): the same bits as out of place */
    float *b3 = malloc(n * sizeof *b3), *g3 = malloc(n * sizeof *g3);
    ck_assert(b3 && g3);
    memcpy(g3, gf, n * sizeof *g3);
    memcpy(b3, b2, n * sizeof *b3);
    memcpy(b1, b2, n * sizeof *b1);
    be->sgd(n, t2, t1, gf, third, b1, 0.03f, 0.9f, 5e-4f, 0, 0);
    be->sgd(n, t2, g3, g3, third, b3, 0.03f, 0.9f, 5e-4f, 0, 0);
    ck_assert(memcmp(t1, g3, n * sizeof *t1) == 0);
    ck_assert(memcmp(b1, b3, n * sizeof *b1) == 0);
    free(b3); free(g3);
    free(gs); free(gf); free(t1); free(t2); free(b1); free(b2);
}
END_TEST

static uint64_t hash_of(const char *const *args, int n)
{
    char *argv[16] = { "cdp_run" };
    for (int i = 0; i < n; i++)
        argv[i + 1] = (char *)args[i];
    cdp_options o;
    char err[256];
    cdp_options_defaults(&o);
    ck_assert_msg(cdp_options_parse(&o, n + 1, argv, err, sizeof err) == 0, "%s", err);
    return cdp_options_numerics_hash(&o);
}

START_TEST(sgd_runs_keep_their_hash)
{
    /* the values cdp gave before AdamW and the schedules: the checkpoints
     * of SGD runs stay resumable */
    ck_assert_uint_eq(hash_of(NULL, 0), 0x0d1688fc95b42484ull);
    const char *a[] = { "--lr", "0.1", "--weight-decay", "5e-4", "--workers", "4" };
    ck_assert_uint_eq(hash_of(a, 6), 0xbcb425cafaa18b35ull);
    const char *b[] = { "--optimizer", "sgd", "--lr-schedule", "step", "--warmup-steps", "0" };
    ck_assert_uint_eq(hash_of(b, 6), 0x0d1688fc95b42484ull);
    /* what changes the numerics changes the hash */
    const char *c[] = { "--optimizer", "adamw" }, *d[] = { "--warmup-steps", "5" };
    const char *e[] = { "--lr-schedule", "cosine" }, *f[] = { "--lr-schedule", "cosine", "--epochs", "3" };
    const char *g[] = { "--optimizer", "adamw", "--betas", "0.9,0.99" };
    const char *h[] = { "--optimizer", "adamw", "--eps", "1e-6" };
    const char *i[] = { "--optimizer", "adamw", "--weight-decay", "0.01" };
    const char *j[] = { "--lr-schedule", "cosine", "--steps", "5" }, *k[] = { "--lr-schedule", "cosine", "--steps", "6" };
    const char *l[] = { "--steps", "5" };
    const uint64_t base = hash_of(NULL, 0);
    ck_assert_uint_ne(hash_of(c, 2), base);
    ck_assert_uint_ne(hash_of(d, 2), base);
    ck_assert_uint_ne(hash_of(e, 2), base);
    ck_assert_uint_ne(hash_of(f, 4), hash_of(e, 2));   /* cosine depends on the run's length */
    ck_assert_uint_ne(hash_of(g, 4), hash_of(c, 2));
    ck_assert_uint_ne(hash_of(h, 4), hash_of(c, 2));
    ck_assert_uint_eq(hash_of(i, 4), hash_of(c, 2));   /* 0.01: AdamW's default */
    ck_assert_uint_ne(hash_of(j, 4), hash_of(k, 4));
    ck_assert_uint_eq(hash_of(l, 2), base);            /* step decay does not */
}
END_TEST

int main(void)
{
    Suite *s = suite_create("optim");
    TCase *tc = tcase_create("sgd");
    tcase_add_test(tc, lr_schedule_by_hand);
    tcase_add_test(tc, step_schedule_keeps_its_bits);
    tcase_add_test(tc, cosine_endpoints);
    tcase_add_test(tc, warmup_values);
    tcase_add_test(tc, adamw_by_hand);
    tcase_add_test(tc, adamw_kernel_contract);
    tcase_add_test(tc, sgd_runs_keep_their_hash);
    tcase_add_test(tc, sgd_three_updates_by_hand);
    tcase_add_test(tc, sgd_gradient_scale);
    suite_add_tcase(s, tc);
    int failed = check_run(s);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
