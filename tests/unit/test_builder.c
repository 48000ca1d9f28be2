/* Tests of the public API's model definition and model (cdp/builder.h,
 * cdp/model.h, cdp/weights.h), through the installed headers alone: a
 * model defined by the program builds, lists its tensors, initialises and
 * round-trips a weight file; every rule a build function can break is
 * refused with one message naming it, never a model that cannot run. */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cdp/cdp.h>
#include "../lib/check_run.h"

/* A small residual CNN: stem, a residual block, head (3 blocks). */
static int small_cnn(cdp_builder *b, void *arg)
{
    (void)arg;
    cdp_builder_block(b);
    int x = cdp_builder_conv2d(b, "conv1", CDP_INPUT, 4, 3, 1, 1, 0);
    x = cdp_builder_relu(b, cdp_builder_batchnorm2d(b, "bn1", x));
    cdp_builder_block(b);
    int y = cdp_builder_relu(b, cdp_builder_conv2d(b, "res.conv", x, 4, 3, 1, 1, 1));
    x = cdp_builder_relu(b, cdp_builder_add(b, y, x));
    cdp_builder_block(b);
    x = cdp_builder_flatten(b, cdp_builder_avgpool(b, x));
    return cdp_builder_linear(b, "fc", x, cdp_builder_classes(b));
}

/* Builds model `name` on 2x8x8 images, 5 classes; 0 or -1 with err. */
static int create(const char *name, cdp_model **m, char *err, size_t errlen)
{
    return cdp_model_create(name, (cdp_shape){ 2, 8, 8 }, 5, 0, m, err, errlen);
}

static void define(const char *name, cdp_model_build_fn build, void *arg)
{
    char err[256];
    ck_assert_msg(cdp_model_define(name, "a test model", build, arg, 0, err, sizeof err) == 0,
                  "%s", err);
}

START_TEST(test_defined_model)
{
    char err[256];
    cdp_model *m;
    define("small-cnn", small_cnn, NULL);
    ck_assert_msg(create("small-cnn", &m, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(cdp_model_stage_count(m), 3);   /* one per block, at most 4 */
    /* conv1 4x2x3x3; bn1 weight, bias, running mean, var, counter;
     * res.conv 4x4x3x3 + 4; fc 5x4 + 5 */
    ck_assert_int_eq(cdp_model_tensor_count(m), 10);
    ck_assert_uint_eq(cdp_model_param_count(m), 72 + 16 + 148 + 25);
    ck_assert_uint_ge(cdp_model_param_floats(m), cdp_model_param_count(m));
    int ndim;
    int64_t shape[4];
    size_t off, n;
    ck_assert_str_eq(cdp_model_tensor(m, 0, &ndim, shape, &off, &n), "conv1.weight");
    ck_assert_int_eq(ndim, 4);
    ck_assert(shape[0] == 4 && shape[1] == 2 && shape[2] == 3 && shape[3] == 3);
    ck_assert_uint_eq(n, 72);
    ck_assert_str_eq(cdp_model_tensor(m, 5, &ndim, NULL, NULL, &n), "bn1.num_batches_tracked");
    ck_assert_int_eq(ndim, 0);
    ck_assert_uint_eq(n, 0);
    ck_assert_str_eq(cdp_model_tensor(m, 9, NULL, NULL, NULL, NULL), "fc.bias");
    ck_assert_ptr_null(cdp_model_tensor(m, 10, NULL, NULL, NULL, NULL));
    ck_assert_ptr_null(cdp_model_tensor(m, -1, NULL, NULL, NULL, NULL));

    /* initialised, saved and read back bit for bit */
    size_t nf = cdp_model_param_floats(m);
    float *a = calloc(nf, sizeof *a), *c = calloc(nf, sizeof *c);
    ck_assert(a && c);
    cdp_model_init(m, 7, a);
    char path[] = "/tmp/test_builder_XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    ck_assert_msg(cdp_save_weights(path, m, a, 3, NULL, err, sizeof err) == 0, "%s", err);
    ck_assert_msg(cdp_load_weights(path, m, c, err, sizeof err) == 0, "%s", err);
    ck_assert(memcmp(a, c, nf * sizeof *a) == 0);
    /* the file does not fit another model: refused, c untouched */
    cdp_model *other;
    ck_assert_msg(cdp_model_create("mlp:128-5", (cdp_shape){ 0, 0, 0 }, 0, 0, &other, err,
                                   sizeof err) == 0, "%s", err);
    ck_assert_int_eq(cdp_load_weights(path, other, c, err, sizeof err), -1);
    ck_assert(memcmp(a, c, nf * sizeof *a) == 0);
    cdp_model_destroy(other);
    unlink(path);
    free(a);
    free(c);

    /* stages: as asked, never more than blocks */
    cdp_model_destroy(m);
    ck_assert(cdp_model_create("small-cnn", (cdp_shape){ 2, 8, 8 }, 5, 2, &m, err,
                               sizeof err) == 0);
    ck_assert_int_eq(cdp_model_stage_count(m), 2);
    cdp_model_destroy(m);
    ck_assert_int_eq(cdp_model_create("small-cnn", (cdp_shape){ 2, 8, 8 }, 5, 4, &m, err,
                                      sizeof err), -1);
    ck_assert_ptr_null(m);
    ck_assert_msg(strstr(err, "4 stages for a model of 3 blocks") != NULL, "%s", err);
    cdp_model_destroy(NULL);
}
END_TEST

START_TEST(test_define_refusals)
{
    char err[256];
    define("taken", small_cnn, NULL);
    const char *bad[] = { "", "resnet20", "vit-tiny", "taken", "mlp:4-2", "with space",
                          "0123456789012345678901234567890123456789012345678901234567890123" };
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        ck_assert_msg(cdp_model_define(bad[k], NULL, small_cnn, NULL, 0, err, sizeof err) == -1,
                      "'%s' accepted", bad[k]);
        ck_assert_msg(strncmp(err, "cdp_model_define: ", 18) == 0, "%s", err);
    }
    ck_assert_int_eq(cdp_model_define(NULL, NULL, small_cnn, NULL, 0, err, sizeof err), -1);
    ck_assert_int_eq(cdp_model_define("nobuild", NULL, NULL, NULL, 0, err, sizeof err), -1);
    char name[16];
    int k = 0;
    for (;; k++) {
        snprintf(name, sizeof name, "m%d", k);
        if (cdp_model_define(name, NULL, small_cnn, NULL, 0, err, sizeof err))
            break;
    }
    ck_assert_int_ge(k, 1);   /* 32 in all, with "taken" and the other tests' */
    ck_assert_msg(strstr(err, "already 32 models defined") != NULL, "%s", err);
    /* the names defined are models as any other; the refused one is none */
    cdp_model *m;
    snprintf(name, sizeof name, "m%d", k - 1);
    ck_assert_msg(create(name, &m, err, sizeof err) == 0, "%s", err);
    cdp_model_destroy(m);
    snprintf(name, sizeof name, "m%d", k);
    ck_assert_int_eq(create(name, &m, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "unknown model 'm") != NULL, "%s", err);
}
END_TEST

/* Each rule a build function can break, and the message that names it. */
typedef struct bad_build {
    const char *what;
    const char *message;   /* a part of the error */
} bad_build;

/* arg: the case to build, changed between builds of one definition */
static int build_bad(cdp_builder *b, void *arg)
{
    const bad_build *c = *(const bad_build **)arg;
    const char *w = c->what;
    if (!strcmp(w, "no layer"))
        return CDP_INPUT;
    int x = cdp_builder_conv2d(b, "conv", CDP_INPUT, 4, 3, 1, 1, 0);
    if (!strcmp(w, "no tensor"))
        return cdp_builder_relu(b, 17);
    if (!strcmp(w, "negative tensor"))
        return cdp_builder_linear(b, "fc", -1, 5);
    if (!strcmp(w, "stride 0"))
        return cdp_builder_conv2d(b, "c2", x, 4, 3, 0, 1, 0);
    if (!strcmp(w, "padding"))
        return cdp_builder_conv2d(b, "c2", x, 4, 3, 1, 3, 0);
    if (!strcmp(w, "pool padding"))
        return cdp_builder_maxpool2d(b, x, 3, 1, 2);
    if (!strcmp(w, "no features"))
        return cdp_builder_linear(b, "fc", x, 0);
    if (!strcmp(w, "groups"))
        return cdp_builder_grouped_conv2d(b, "g", x, 6, 3, 1, 1, 3, 0);
    if (!strcmp(w, "groups 0"))
        return cdp_builder_grouped_conv2d(b, "g", x, 4, 3, 1, 1, 0, 0);
    if (!strcmp(w, "dropout p"))
        return cdp_builder_linear(b, "fc", cdp_builder_dropout(b, "drop", x, 1.5f), 5);
    if (!strcmp(w, "kernel too large"))
        return cdp_builder_conv2d(b, "c2", x, 4, 11, 1, 1, 0);
    if (!strcmp(w, "tokens"))
        return cdp_builder_layernorm(b, "ln", x, 1e-6f);
    if (!strcmp(w, "eps"))
        return cdp_builder_layernorm(b, "ln", cdp_builder_class_token(b, x), 0.0f);
    if (!strcmp(w, "heads"))
        return cdp_builder_attention(b, "att", cdp_builder_class_token(b, x), 3);
    if (!strcmp(w, "add shapes"))
        return cdp_builder_add(b, x, CDP_INPUT);
    if (!strcmp(w, "long name"))
        return cdp_builder_linear(b, "a-name-longer-than-sixty-three-characters-is-more-than-"
                                     "a-layer-holds", x, 5);
    if (!strcmp(w, "same name"))
        return cdp_builder_linear(b, "conv", cdp_builder_relu(b, x), 5);
    if (!strcmp(w, "earlier block")) {
        cdp_builder_block(b);
        int y = cdp_builder_batchnorm2d(b, "bn", x);
        cdp_builder_block(b);
        return cdp_builder_linear(b, "fc", cdp_builder_add(b, y, x), 5);
    }
    if (!strcmp(w, "in place shared"))
        return cdp_builder_linear(b, "fc", cdp_builder_add(b, cdp_builder_relu(b, x), x), 5);
    if (!strcmp(w, "in place block input")) {
        cdp_builder_block(b);
        return cdp_builder_linear(b, "fc", cdp_builder_relu(b, x), 5);
    }
    if (!strcmp(w, "in place input"))
        return cdp_builder_linear(b, "fc", cdp_builder_relu(b, CDP_INPUT), 5);
    if (!strcmp(w, "unread"))
        return cdp_builder_linear(b, "fc", (cdp_builder_relu(b, x), CDP_INPUT), 5);
    if (!strcmp(w, "not the last")) {
        int out = cdp_builder_linear(b, "fc", x, 5);
        cdp_builder_linear(b, "fc2", out, 5);
        return out;
    }
    if (!strcmp(w, "few logits"))
        return cdp_builder_linear(b, "fc", x, 4);
    if (!strcmp(w, "silent"))
        return -1;
    if (!strcmp(w, "refused"))
        return cdp_builder_fail(b, "images of %d channels refused", cdp_builder_input_shape(b).c);
    return -1;
}

START_TEST(test_build_refusals)
{
    static const bad_build cases[] = {
        { "no tensor", "reads tensor 17, which does not exist" },
        { "negative tensor", "reads tensor -1, which does not exist" },
        { "stride 0", "c2: stride 0, at least 1" },
        { "padding", "c2: padding 3 with a 3x3 window, expected 0 to 2" },
        { "pool padding", "maxpool: padding 2 with a 3x3 window, expected 0 to 1" },
        { "no features", "fc: out_features 0, at least 1" },
        { "groups", "g: 3 groups do not divide its 4 input and 6 output channels" },
        { "groups 0", "g: groups 0, at least 1" },
        { "dropout p", "drop: the dropout probability 1.5 is not in [0, 1]" },
        { "kernel too large", "smaller than its 11x11 kernel" },
        { "tokens", "ln reads a 4x8x8 tensor: it takes tokens T x 1 x D" },
        { "eps", "ln: eps 0, must be positive" },
        { "heads", "4 features do not split into 3 heads" },
        { "add shapes", "their shapes 4x8x8 and 2x8x8 differ" },
        { "long name", "is longer than 63 characters" },
        { "same name", "linear conv has the name of an earlier layer with parameters" },
        { "earlier block", "add (block 2) reads tensor 1 of an earlier block" },
        { "in place shared", "relu overwrites tensor 1, which another layer reads too" },
        { "in place input", "relu overwrites tensor 0, which is the input" },
        { "in place block input", "relu (block 1) overwrites the block's input, tensor 1 (4x8x8)" },
        { "unread", "the output of relu (tensor 2) is read by no layer" },
        { "not the last", "returned tensor 2: the logits must be the last layer's output" },
        { "few logits", "4 logits for 5 classes" },
        { "silent", "its build function failed without saying why" },
        { "no layer", "its build function added no layer" },
        { "refused", "--model bad: images of 2 channels refused" },
    };
    static const bad_build *current;
    define("bad", build_bad, &current);
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        char err[512];
        current = &cases[k];
        cdp_model *m = (cdp_model *)&err;   /* must come back NULL */
        ck_assert_msg(create("bad", &m, err, sizeof err) == -1, "%s: accepted", cases[k].what);
        ck_assert_ptr_null(m);
        ck_assert_msg(strstr(err, cases[k].message) != NULL, "%s: '%s' lacks '%s'",
                      cases[k].what, err, cases[k].message);
        ck_assert_msg(strchr(err, '\n') == NULL, "%s: more than one line: %s", cases[k].what,
                      err);
    }
}
END_TEST

/* Blocks: a block may be started before any layer or after the last, or
 * twice in a row, without empty blocks. */
static int blocks(cdp_builder *b, void *arg)
{
    (void)arg;
    cdp_builder_block(b);
    cdp_builder_block(b);
    int x = cdp_builder_linear(b, "fc0", CDP_INPUT, 6);
    x = cdp_builder_relu(b, x);
    cdp_builder_block(b);
    cdp_builder_block(b);
    x = cdp_builder_linear(b, "fc1", x, cdp_builder_classes(b));
    cdp_builder_block(b);
    return x;
}

static int one_block(cdp_builder *b, void *arg)
{
    (void)arg;
    return cdp_builder_linear(b, "fc", cdp_builder_flatten(b, CDP_INPUT), 5);
}

START_TEST(test_blocks)
{
    char err[256];
    cdp_model *m;
    define("blocks", blocks, NULL);
    ck_assert_msg(create("blocks", &m, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(cdp_model_stage_count(m), 2);
    cdp_model_destroy(m);
    define("one-block", one_block, NULL);
    ck_assert_msg(create("one-block", &m, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(cdp_model_stage_count(m), 1);
    cdp_model_destroy(m);
    /* the shapes a build function sees */
    ck_assert_int_eq(cdp_model_create("one-block", (cdp_shape){ -1, 2, 2 }, 5, 0, &m, err,
                                      sizeof err), -1);
    ck_assert_msg(strstr(err, "expected positive sizes") != NULL, "%s", err);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("builder");
    TCase *tc = tcase_create("builder");
    tcase_add_test(tc, test_defined_model);
    tcase_add_test(tc, test_build_refusals);
    tcase_add_test(tc, test_blocks);
    tcase_add_test(tc, test_define_refusals);   /* fills the table: last */
    suite_add_tcase(s, tc);
    return check_run(s) ? EXIT_FAILURE : EXIT_SUCCESS;
}
