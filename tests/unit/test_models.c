/* Unit tests of the model layer (src/models/): parsing of the free-form MLP
 * spec and its cut into stages, the refusals of bad specs, the table of layer
 * kinds (nn/layer_kinds.def), the table of models with the parameter counts
 * torchvision publishes, the initialisation's values, and the evaluation
 * against the stages run one after the other. */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "models/model.h"
#include "util/rng.h"
#include "../lib/mlp_view.h"
#include "../lib/check_util.h"
#include "../lib/check_run.h"

START_TEST(model_partition)
{
    cdp_model m;
    char err[256];
    ck_assert(cdp_model_parse("mlp:784-256-128-10", 3, &m, err, sizeof err) == 0);
    ck_assert_int_eq(MV(&m)->nlayers, 3);
    ck_assert_int_eq(m.nstages, 3);
    for (int l = 0; l <= 3; l++)
        ck_assert_int_eq(m.stage_first[l], l);
    ck_assert_uint_eq(m.nparams, 784u * 256 + 256 + 256 * 128 + 128 + 128 * 10 + 10);
    ck_assert_uint_eq(MV(&m)->w_off[0], 0);
    ck_assert_uint_eq(MV(&m)->b_off[0], 784u * 256);
    ck_assert_uint_eq(MV(&m)->w_off[1], 784u * 256 + 256);
    ck_assert_uint_eq(m.stage_off[1], MV(&m)->w_off[1]);
    ck_assert_uint_eq(m.stage_n[0], 784u * 256 + 256);
    ck_assert_uint_eq(m.stage_n[2], 128u * 10 + 10);
    ck_assert_int_eq(cdp_stage_in(&m, 1), 256);
    ck_assert_int_eq(cdp_stage_out(&m, 1), 128);
    ck_assert_uint_eq(cdp_stage_act_floats(&m, 2, 32), 320);

    ck_assert(cdp_model_parse("mlp:784-256-128-10", 0, &m, err, sizeof err) == 0);
    ck_assert_int_eq(m.nstages, 3);

    ck_assert(cdp_model_parse("mlp:784-256-128-10", 2, &m, err, sizeof err) == 0);
    ck_assert_int_eq(m.nstages, 2);
    ck_assert_int_eq(m.stage_first[0], 0);
    ck_assert_int_eq(m.stage_first[1], 1);
    ck_assert_int_eq(m.stage_first[2], 3);
    ck_assert_uint_eq(m.stage_off[1], 784u * 256 + 256);
    ck_assert_uint_eq(m.stage_n[1], 256u * 128 + 128 + 128 * 10 + 10);
    ck_assert_uint_eq(m.stage_off[1] + m.stage_n[1], m.nparams);
    ck_assert_uint_eq(cdp_stage_act_floats(&m, 1, 4), 4u * (128 + 10));
    float act[4 * 138];
    ck_assert_ptr_eq(cdp_stage_output(&m, 1, 4, act), act + 4 * 128);
    ck_assert_ptr_eq(cdp_stage_output(&m, 0, 4, act), act);
    /* stage 1 keeps the gradient of fc1's output (128 per sample) */
    ck_assert_uint_eq(cdp_model_ws_floats(cdp_backend_cpu(1), &m, 4), 4u * 128);
    /* flops: stage 0 = forward + dW of layer 0 (no dx) + bias terms */
    ck_assert(fabs(cdp_stage_flops(&m, 0, 2) - (2.0 * 2 * 784 * 256 * 2 + 2.0 * 2 * 256)) < 1e-6);

    /* 1 stage: everything */
    ck_assert(cdp_model_parse("mlp:784-256-128-10", 1, &m, err, sizeof err) == 0);
    ck_assert_int_eq(m.stage_first[1], 3);
    ck_assert_uint_eq(m.stage_n[0], m.nparams);

    /* equal layers are split evenly */
    ck_assert(cdp_model_parse("mlp:100-100-100-100-100-100-100", 3, &m, err, sizeof err) == 0);
    ck_assert_int_eq(m.stage_first[1] - m.stage_first[0], 2);
    ck_assert_int_eq(m.stage_first[2] - m.stage_first[1], 2);
    ck_assert_int_eq(m.stage_first[3], 6);

    /* 64 layers is the maximum */
    char spec[512] = "mlp:3";
    for (int j = 0; j < CDP_MAX_LAYERS; j++)
        strcat(spec, "-3");
    ck_assert_msg(cdp_model_parse(spec, 0, &m, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(MV(&m)->nlayers, CDP_MAX_LAYERS);
    strcat(spec, "-3");
    ck_assert(cdp_model_parse(spec, 0, &m, err, sizeof err) == -1);
    ck_assert(cdp_model_parse("mlp:2-65536", 0, &m, err, sizeof err) == 0);
}
END_TEST

START_TEST(model_bad_specs)
{
    static const char *bad[] = {
        "", "mlp", "mlp:", "mlp:784", "784-10", "cnn:784-10", "mlp:784-0-10",
        "mlp:784--10", "mlp:784-10-", "mlp:-784-10", "mlp:784-65537-10",
        "mlp:784-256-10x", "mlp:784 -10", "mlp:784-99999999999999999999-10", "MLP:784-10",
        "mlp:784-+10"};
    cdp_model m;
    char err[256];
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        err[0] = '\0';
        ck_assert_msg(cdp_model_parse(bad[k], 0, &m, err, sizeof err) == -1,
                      "'%s' accepted", bad[k]);
        ck_assert_msg(err[0] != '\0' && strchr(err, '\n') == NULL, "'%s': bad message '%s'",
                      bad[k], err);
        ck_assert_msg(strncmp(err, "--model: ", 9) == 0, "'%s': '%s'", bad[k], err);
    }
    ck_assert(cdp_model_parse("xyz", 0, &m, err, sizeof err) == -1);
    /* whole (not cut by the buffer), naming the free forms and where the presets are */
    ck_assert_msg(strncmp(err, "--model: unknown model 'xyz': expected a preset or "
                          "mlp:IN-H1-...-OUT or vit:", 75) == 0, "%s", err);
    ck_assert_msg(strstr(err, "(cdp_run --list-models lists them)") != NULL, "%s", err);
    ck_assert(cdp_model_parse("mlp:784-256-128-10", 4, &m, err, sizeof err) == -1);
    ck_assert(strncmp(err, "--stages: ", 10) == 0);
    ck_assert(cdp_model_parse(NULL, 0, &m, err, sizeof err) == -1);
}
END_TEST

/* Every kind of nn/layer_kinds.def has an ops table whose flags agree with
 * what models/ and the executor do with them. */
START_TEST(layer_table)
{
    for (int k = 0; k < CDP_LAYER_KINDS; k++) {
        const cdp_layer_ops *ops = cdp_layer_ops_of((cdp_layer_kind)k);
        ck_assert_msg(ops != NULL, "kind %d has no ops", k);
        ck_assert_msg(ops->name && ops->name[0] && ops->shape && ops->flops, "kind %d", k);
        for (int j = 0; j < k; j++)
            ck_assert_msg(strcmp(ops->name, cdp_layer_ops_of((cdp_layer_kind)j)->name) != 0,
                          "two kinds named %s", ops->name);
        if (ops->storage == CDP_STORAGE_VIEW)   /* no work: skipped both ways */
            ck_assert_msg(!ops->fwd && !ops->bwd && !ops->params, "%s", ops->name);
        else
            ck_assert_msg(ops->fwd && ops->bwd, "%s lacks fwd or bwd", ops->name);
        if (ops->relu)   /* the fusion rewrites its output in place */
            ck_assert_msg(ops->storage == CDP_STORAGE_IN_PLACE && !ops->params, "%s", ops->name);
        if (ops->update_buffers)   /* its statistics feed its buffers */
            ck_assert_msg(ops->stat_doubles && ops->params, "%s", ops->name);
    }
    ck_assert_ptr_null(cdp_layer_ops_of(CDP_LAYER_KINDS));
    ck_assert_ptr_null(cdp_layer_ops_of((cdp_layer_kind)-1));
    ck_assert_str_eq(cdp_layer_ops_of(CDP_LAYER_RELU)->name, "relu");
    ck_assert_int_eq(cdp_layer_ops_of(CDP_LAYER_RELU)->relu, 1);
    ck_assert_int_eq(cdp_layer_ops_of(CDP_LAYER_LINEAR)->fuses_relu, 1);
    ck_assert_int_eq(cdp_layer_ops_of(CDP_LAYER_FLATTEN)->storage, CDP_STORAGE_VIEW);
    ck_assert_ptr_nonnull(cdp_layer_ops_of(CDP_LAYER_BATCHNORM2D)->update_buffers);
}
END_TEST

/* The table of models: unique names, every preset builds for the images it
 * is made for, and torchvision's count their parameters as torchvision does
 * (sum of numel over model.parameters(): torchvision's published counts;
 * for resnet18-cifar, the common CIFAR ResNet18's 11,173,962; mobile-tiny's
 * counted on the same network written with torch.nn). */
START_TEST(model_registry)
{
    static const struct {
        const char *name;
        size_t params;
    } known[] = {
        { "resnet18", 11689512 }, { "resnet34", 21797672 }, { "resnet50", 25557032 },
        { "resnet18-cifar", 11173962 }, { "vit-b16", 86567656 }, { "vit-b32", 88224232 },
        { "vit-l16", 304326632 },
        { "mobile-tiny", 6858 },   /* its nn.Module, built in PyTorch */
    };
    cdp_model_entry e, f;
    int n = 0, presets = 0, checked = 0;
    char err[256];
    for (; cdp_model_entry_at(n, &e); n++) {
        ck_assert_msg(e.name && e.family && e.about[0], "entry %d incomplete", n);
        for (int k = 0; k < n; k++) {
            cdp_model_entry_at(k, &f);
            ck_assert_msg(strcmp(e.name, f.name) != 0, "%s listed twice", e.name);
        }
        ck_assert_msg(strstr(cdp_model_names(), e.name) != NULL, "%s", e.name);
        if (e.free_form) {
            ck_assert(e.input.c == 0);
            continue;
        }
        presets++;
        cdp_model m;
        cdp_model_config c = { e.name, 0, e.input, e.classes, 1, CDP_BALANCE_FLOPS, CDP_PRECISION_FP32 };
        ck_assert_msg(cdp_model_build(&c, &m, err, sizeof err) == 0, "%s: %s", e.name, err);
        size_t params = 0;   /* numel over state_dict's trained tensors */
        for (int k = 0; k < m.ntensors; k++)
            if (m.tensors[k].kind == CDP_TENSOR_PARAM) {
                size_t numel = 1;
                for (int d = 0; d < m.tensors[k].ndim; d++)
                    numel *= (size_t)m.tensors[k].shape[d];
                params += numel;
            }
        for (size_t k = 0; k < sizeof known / sizeof *known; k++)
            if (strcmp(known[k].name, e.name) == 0) {
                ck_assert_msg(params == known[k].params, "%s: %zu parameters, not %zu",
                              e.name, params, known[k].params);
                checked++;
            }
        cdp_model_free(&m);
    }
    ck_assert_int_ge(presets, 13);
    ck_assert_int_eq(checked, (int)(sizeof known / sizeof *known));
    ck_assert(cdp_model_entry_at(n, &e) == 0 && cdp_model_entry_at(-1, &e) == 0);
}
END_TEST

START_TEST(model_init_values)
{
    cdp_model m;
    char err[256];
    ck_assert(cdp_model_parse("mlp:100-50-10", 0, &m, err, sizeof err) == 0);
    float *a = fbuf(m.nparams), *b = fbuf(m.nparams), *c = fbuf(m.nparams);
    cdp_model_init(&m, 1, a);
    cdp_model_init(&m, 1, b);
    cdp_model_init(&m, 2, c);
    ck_assert(memcmp(a, b, m.nparams * sizeof(float)) == 0);
    ck_assert(memcmp(a, c, m.nparams * sizeof(float)) != 0);
    for (int j = 0; j < MV(&m)->nlayers; j++) {
        float bound = 1.0f / sqrtf((float)MV(&m)->dims[j]);
        size_t n = (size_t)MV(&m)->dims[j] * MV(&m)->dims[j + 1] + MV(&m)->dims[j + 1];
        double mean = 0, mx = 0;
        for (size_t k = 0; k < n; k++) {
            float v = a[MV(&m)->w_off[j] + k];
            ck_assert(v >= -bound && v <= bound);
            mean += v;
            mx = fmax(mx, fabs(v));
        }
        mean /= n;
        ck_assert(fabs(mean) < 0.1 * bound);
        ck_assert(mx > 0.9 * bound);
    }
    /* W and b of a layer use different streams */
    ck_assert(a[MV(&m)->b_off[0]] != a[MV(&m)->w_off[0]]);
    free(a); free(b); free(c);
}
END_TEST

START_TEST(model_evaluate)
{
    const cdp_backend *be = cdp_backend_cpu(2);
    cdp_model m;
    char err[256];
    ck_assert(cdp_model_parse("mlp:20-16-8-5", 2, &m, err, sizeof err) == 0);
    float *P = fbuf(m.nparams);
    cdp_model_init(&m, 3, P);
    int n = 23;
    uint8_t *px = malloc((size_t)n * 20);
    int32_t lab[23];
    for (int k = 0; k < n * 20; k++)
        px[k] = (uint8_t)cdp_rand_u64(8, 0, (uint64_t)k);
    for (int i = 0; i < n; i++)
        lab[i] = i % 5;
    /* reference: the stages on one batch */
    float *x = fbuf((size_t)n * 20);
    be->pixels_to_input(n, 1, 20, px, NULL, x);
    double st[2] = {0, 0};
    float *a0 = fbuf(cdp_stage_act_floats(&m, 0, n)), *a1 = fbuf(cdp_stage_act_floats(&m, 1, n));
    float *ws = fbuf(cdp_model_ws_floats(be, &m, n));
    cdp_stage_fwd(be, &m, 0, n, P + m.stage_off[0], x, a0, lab, st, ws, 0, NULL);
    cdp_stage_fwd(be, &m, 1, n, P + m.stage_off[1], cdp_stage_output(&m, 0, n, a0), a1, lab, st, ws, 0, NULL);
    double ls, cr;
    cdp_model_evaluate(be, &m, P, px, lab, n, 1, NULL, 7, &ls, &cr);
    ck_assert_msg(fabs(ls - st[0]) <= 1e-6 * st[0], "%.9g vs %.9g", ls, st[0]);
    ck_assert(cr == st[1]);
    cdp_model_evaluate(be, &m, P, px, lab, n, 1, NULL, 0, &ls, &cr);
    ck_assert(fabs(ls - st[0]) <= 1e-6 * st[0] && cr == st[1]);
    cdp_model_evaluate(be, &m, P, px, lab, 0, 1, NULL, 7, &ls, &cr);
    ck_assert(ls == 0 && cr == 0);
    free(P); free(px); free(x); free(a0); free(a1); free(ws);
}
END_TEST

static Suite *models_suite(void)
{
    Suite *s = suite_create("models");
    TCase *tc = tcase_create("model");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, model_partition);
    tcase_add_test(tc, model_bad_specs);
    tcase_add_test(tc, layer_table);
    tcase_add_test(tc, model_registry);
    tcase_add_test(tc, model_init_values);
    tcase_add_test(tc, model_evaluate);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    int failed = check_run(models_suite());
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
