/* SGD (torch.optim.SGD semantics) and the step-decay learning rate, against
 * values worked out by hand. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
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
        be->sgd(1, &theta, &theta, &g, &buf, 0.1f, 0.9f, 0.01f, k == 0);
        ck_assert_msg(fabs(theta - want[k]) < 1e-6, "update %d: %.9g, want %.9g", k + 1, theta, want[k]);
    }
    /* the first update ignores whatever the buffer held */
    float t2 = 1.0f, b2 = 123.0f;
    be->sgd(1, &t2, &t2, &g, &b2, 0.1f, 0.9f, 0.01f, 1);
    ck_assert(fabs(t2 - 0.949) < 1e-6);
    /* out of place leaves the input alone */
    float in = 2.0f, out = 0.0f, b3 = 0.0f, g3 = 1.0f;
    be->sgd(1, &in, &out, &g3, &b3, 0.5f, 0.0f, 0.0f, 1);
    ck_assert_float_eq(in, 2.0f);
    ck_assert_float_eq(out, 1.5f);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("optim");
    TCase *tc = tcase_create("sgd");
    tcase_add_test(tc, lr_schedule_by_hand);
    tcase_add_test(tc, sgd_three_updates_by_hand);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
