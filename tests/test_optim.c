/* SGD (torch.optim.SGD semantics) and the step-decay learning rate, against
 * values worked out by hand. */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "cdp/backend.h"
#include "cdp/optim.h"

START_TEST(lr_schedule_by_hand)
{
    cdp_sgd o = { 0.1, 0.9, 0, 2, 0.5, 10 };   /* halve every 2 epochs of 10 steps */
    ck_assert_float_eq(cdp_sgd_lr(&o, 0), 0.1f);
    ck_assert_float_eq(cdp_sgd_lr(&o, 19), 0.1f);
    ck_assert_float_eq(cdp_sgd_lr(&o, 20), 0.05f);
    ck_assert_float_eq(cdp_sgd_lr(&o, 39), 0.05f);
    ck_assert_float_eq(cdp_sgd_lr(&o, 40), 0.025f);
    o.decay_epochs = 0;
    ck_assert_float_eq(cdp_sgd_lr(&o, 1000), 0.1f);
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

int main(void)
{
    Suite *s = suite_create("optim");
    TCase *tc = tcase_create("sgd");
    tcase_add_test(tc, lr_schedule_by_hand);
    tcase_add_test(tc, sgd_three_updates_by_hand);
    tcase_add_test(tc, sgd_gradient_scale);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
