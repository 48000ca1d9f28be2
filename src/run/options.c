/* cdp_run's options: the defaults, the table that says each option's name,
 * field and range, and the parse that reads argv through it and then checks
 * the options that depend on each other.  The help text is
 * options_help.c's; the grammars of compound values option_values.c's. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "optim/optim.h"
#include "run/options.h"
#include "option_values.h"

void cdp_options_defaults(cdp_options *o)
{
    memset(o, 0, sizeof *o);
    snprintf(o->model, sizeof o->model, "mlp:784-256-128-10");
    o->batch = 32;
    o->rule = CDP_RULE_CDP_V2;
    o->framework = CDP_FW_REPLICATED;
    o->epochs = 10;
    /* 10 epochs of Fashion-MNIST to 87.7-88.7% under every rule; a delayed
     * gradient (cdp-v1) tolerates this lr with momentum 0.9, not 0.05 */
    o->lr = 0.03;
    o->momentum = 0.9;
    o->weight_decay = 0.0;
    o->lr_decay_epochs = 3;
    o->lr_gamma = 0.5;
    o->optimizer = CDP_OPTIM_SGD;
    o->betas[0] = 0.9;     /* torch.optim.AdamW's defaults */
    o->betas[1] = 0.999;
    o->eps = 1e-8;
    o->lr_schedule = CDP_LR_STEP;
    o->warmup_steps = 0;
    o->seed = 1;
    snprintf(o->data, sizeof o->data, "fashion-mnist");
    o->data_dir[0] = '\0';   /* the kind's default, filled in by cdp_options_parse */
    o->shuffle = 1;
    snprintf(o->backend, sizeof o->backend, "cpu");
    o->plan_steps = 2;
    o->eval_every = 1;
    o->timeout = 600;
    o->keep_checkpoints = 1;
}

static int parse_int(const char *opt, const char *s, long long lo, long long hi, long long *out,
                     char *err, size_t errlen)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end) {
        snprintf(err, errlen, "%s: expected an integer, got '%s'", opt, s);
        return -1;
    }
    if (v < lo || v > hi) {
        snprintf(err, errlen, "%s: %lld is out of range [%lld, %lld]", opt, v, lo, hi);
        return -1;
    }
    *out = v;
    return 0;
}

static int parse_real(const char *opt, const char *s, double lo, double hi, double *out,
                      char *err, size_t errlen)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v)) {
        snprintf(err, errlen, "%s: expected a number, got '%s'", opt, s);
        return -1;
    }
    if (v < lo || v > hi) {
        snprintf(err, errlen, "%s: %g is out of range [%g, %g]", opt, v, lo, hi);
        return -1;
    }
    *out = v;
    return 0;
}

static int copy_str(const char *opt, const char *s, char *dst, size_t n, char *err, size_t errlen)
{
    if (!*s) {
        snprintf(err, errlen, "%s: value is empty", opt);
        return -1;
    }
    if (strlen(s) >= n) {
        snprintf(err, errlen, "%s: value of %zu characters, at most %zu", opt, strlen(s), n - 1);
        return -1;
    }
    memcpy(dst, s, strlen(s) + 1);
    return 0;
}

/* one of two names: 0 for the first (CDP_OPTIM_SGD, CDP_LR_STEP), 1 for the second */
static int parse_pair(const char *opt, const char *s, const char *n0, const char *n1, int *out,
                      char *err, size_t errlen)
{
    if (strcmp(s, n0) && strcmp(s, n1)) {
        snprintf(err, errlen, "%s: expected %s or %s, got '%.100s'", opt, n0, n1, s);
        return -1;
    }
    *out = strcmp(s, n0) != 0;
    return 0;
}

/* Options that mean nothing under the chosen optimizer or schedule are
 * refused; AdamW's learning rate and weight decay default to
 * torch.optim.AdamW's 0.001 and 0.01. */
static int check_optimizer(cdp_options *o, char *err, size_t errlen)
{
    const char *wrong = NULL, *needs = NULL, *hint = "";
    if (o->optimizer == CDP_OPTIM_SGD && (o->given_betas || o->given_eps))
        wrong = o->given_betas ? "--betas" : "--eps", needs = "--optimizer adamw";
    else if (o->optimizer == CDP_OPTIM_ADAMW && o->given_momentum)
        wrong = "--momentum", needs = "--optimizer sgd", hint = " (AdamW's are --betas)";
    else if (o->lr_schedule == CDP_LR_COSINE && o->given_lr_decay)
        wrong = o->given_lr_decay == 1 ? "--lr-decay-epochs" : "--lr-gamma",
        needs = "--lr-schedule step";
    if (wrong) {
        snprintf(err, errlen, "%s applies to %s only%s", wrong, needs, hint);
        return -1;
    }
    if (o->optimizer == CDP_OPTIM_ADAMW && !o->given_weight_decay)
        o->weight_decay = 0.01;
    if (o->optimizer == CDP_OPTIM_ADAMW && !o->given_lr)
        o->lr = 0.001;
    return 0;
}

/* ------------------------------------------------------- the table */

/* How an option's value is read and where it goes. */
typedef enum {
    V_FLAG,   /* no value: the field (int) takes lo */
    V_INT,    /* an integer in [lo, hi] into an int field */
    V_I64,    /* the same into an int64_t field */
    V_U64,    /* the same into a uint64_t field */
    V_REAL,   /* a finite number in [rlo, rhi] into a double field */
    V_STR,    /* a non-empty string into a char array of size `size` */
    V_PAIR,   /* one of the two words of `words` ("a|b"): 0 or 1 into an int field */
    V_FN      /* its own grammar: fn */
} value_kind;

typedef int (*value_fn)(cdp_options *o, const char *s, char *err, size_t errlen);

typedef struct option_spec {
    const char *name;
    value_kind kind;
    size_t field, size;        /* offsetof and sizeof the field of cdp_options */
    long long lo, hi;
    double rlo, rhi;
    const char *words;
    value_fn fn;
    size_t given;              /* offsetof a given_ field to OR given_bit into; 0: none */
    int given_bit;
} option_spec;

/* The field's offset, refused at compile time when the field has another
 * type than the kind reads into. */
#define AT(f, T) _Generic(((cdp_options *)0)->f, T: offsetof(cdp_options, f)), \
                 sizeof(((cdp_options *)0)->f)
#define FLAG(n, f, v)          { n, V_FLAG, AT(f, int), v, v, 0, 0, NULL, NULL, 0, 0 }
#define INT(n, f, lo, hi)      { n, V_INT, AT(f, int), lo, hi, 0, 0, NULL, NULL, 0, 0 }
#define I64(n, f, lo, hi)      { n, V_I64, AT(f, int64_t), lo, hi, 0, 0, NULL, NULL, 0, 0 }
#define U64(n, f, lo, hi)      { n, V_U64, AT(f, uint64_t), lo, hi, 0, 0, NULL, NULL, 0, 0 }
#define REAL(n, f, lo, hi)     { n, V_REAL, AT(f, double), 0, 0, lo, hi, NULL, NULL, 0, 0 }
#define STR(n, f)              { n, V_STR, AT(f, char *), 0, 0, 0, 0, NULL, NULL, 0, 0 }
#define PAIR(n, f, w)          { n, V_PAIR, AT(f, int), 0, 0, 0, 0, w, NULL, 0, 0 }
#define FN(n, fn)              { n, V_FN, 0, 0, 0, 0, 0, 0, NULL, fn, 0, 0 }
#define GIVEN(g, bit)          offsetof(cdp_options, g), bit
#define INT_GIVEN(n, f, lo, hi, g, bit)  { n, V_INT, AT(f, int), lo, hi, 0, 0, NULL, NULL, GIVEN(g, bit) }
#define REAL_GIVEN(n, f, lo, hi, g, bit) { n, V_REAL, AT(f, double), 0, 0, lo, hi, NULL, NULL, GIVEN(g, bit) }
#define FN_GIVEN(n, fn, g, bit)          { n, V_FN, 0, 0, 0, 0, 0, 0, NULL, fn, GIVEN(g, bit) }

static int set_rule(cdp_options *o, const char *s, char *err, size_t errlen)
{
    if (cdp_rule_parse(s, &o->rule) == 0)
        return 0;
    snprintf(err, errlen, "--rule: expected dp, cdp-v1 or cdp-v2, got '%s'", s);
    return -1;
}

static int set_framework(cdp_options *o, const char *s, char *err, size_t errlen)
{
    if (cdp_framework_parse(s, &o->framework) == 0)
        return 0;
    snprintf(err, errlen, "--framework: expected replicated, model-parallel or zero, got '%s'", s);
    return -1;
}

static int set_data(cdp_options *o, const char *s, char *err, size_t errlen)
{
    char why[512];
    cdp_data_spec spec;
    if (cdp_data_spec_parse(s, &spec, why, sizeof why) != 0) {
        snprintf(err, errlen, "--data: %s", why);
        return -1;
    }
    return copy_str("--data", s, o->data, sizeof o->data, err, errlen);
}

static int set_backend(cdp_options *o, const char *s, char *err, size_t errlen)
{
    if (strcmp(s, "cpu") && strcmp(s, "cuda")) {
        snprintf(err, errlen, "--backend: expected cpu or cuda, got '%s'", s);
        return -1;
    }
    snprintf(o->backend, sizeof o->backend, "%s", s);
    return 0;
}

/* Every option of cdp_run; the order is --help's. */
static const option_spec options[] = {
    STR("model", model),
    INT("stages", stages, 1, 4096),
    PAIR("balance", balance, "flops|activations"),
    INT("workers", workers, 1, 1 << 20),
    INT("batch", batch, 1, 1 << 20),
    FN("rule", set_rule),
    FN("framework", set_framework),
    FLAG("deterministic", deterministic, 1),
    INT("epochs", epochs, 1, 100000),
    I64("steps", steps, 1, (long long)1 << 40),
    REAL_GIVEN("lr", lr, 0, 1e6, given_lr, 1),
    REAL_GIVEN("momentum", momentum, 0, 1, given_momentum, 1),
    REAL_GIVEN("weight-decay", weight_decay, 0, 1e3, given_weight_decay, 1),
    INT_GIVEN("lr-decay-epochs", lr_decay_epochs, 0, 100000, given_lr_decay, 1),
    REAL_GIVEN("lr-gamma", lr_gamma, 0, 1e3, given_lr_decay, 2),
    PAIR("optimizer", optimizer, "sgd|adamw"),
    FN_GIVEN("betas", cdp_parse_betas, given_betas, 1),
    REAL_GIVEN("eps", eps, 0, 1, given_eps, 1),
    PAIR("lr-schedule", lr_schedule, "step|cosine"),
    I64("warmup-steps", warmup_steps, 0, (long long)1 << 40),
    U64("seed", seed, 0, LLONG_MAX),
    FLAG("no-shuffle", shuffle, 0),
    FN("data", set_data),
    STR("data-dir", data_dir),
    FN("augment", cdp_parse_augment),
    FN("normalize", cdp_parse_normalize),
    STR("init-weights", init_weights),
    STR("save-weights", save_weights),
    STR("metrics", metrics),
    STR("trace", trace),
    STR("checkpoint", checkpoint),
    INT("checkpoint-every", checkpoint_every, 0, 100000),
    I64("checkpoint-every-steps", checkpoint_every_steps, 0, LLONG_MAX),
    I64("log-every", log_every, 0, LLONG_MAX),
    INT("keep-checkpoints", keep_checkpoints, 1, 100000),
    STR("resume", resume),
    FN("backend", set_backend),
    FLAG("flush-denormals", flush_denormals, 1),
    PAIR("precision", precision, "fp32|bf16"),
    FLAG("allow-mixed-numerics", allow_mixed, 1),
    INT("threads", threads, 1, 1024),
    FLAG("plan", plan, 1),
    INT("plan-steps", plan_steps, 1, 64),
    INT("plan-ranks", plan_ranks, 1, 1 << 20),
    STR("machine", machine),
    FN("device-memory", cdp_parse_size),
    FLAG("verify", verify, 1),
    FLAG("layer-times", layer_times, 1),
    STR("layer-times-out", layer_times_out),
    INT("eval-every", eval_every, 0, 100000),
    FLAG("quiet", quiet, 1),
    INT("timeout", timeout, 0, 1000000),
    FLAG("help", help, 1),
    FLAG("version", version, 1),
    FLAG("list-models", list_models, 1),
    FLAG("print-model", print_model, 1),
};
enum { NOPTIONS = sizeof options / sizeof options[0] };

/* Reads one option's value into o; 0, or -1 with one line in err. */
static int take_value(cdp_options *o, const option_spec *s, const char *arg, char *err,
                      size_t errlen)
{
    char opt[64];
    snprintf(opt, sizeof opt, "--%s", s->name);
    char *field = (char *)o + s->field;
    long long iv;
    double rv;
    int pick;
    switch (s->kind) {
    case V_FLAG: *(int *)field = (int)s->lo; break;
    case V_INT:
    case V_I64:
    case V_U64:
        if (parse_int(opt, arg, s->lo, s->hi, &iv, err, errlen)) return -1;
        if (s->kind == V_INT) *(int *)field = (int)iv;
        else if (s->kind == V_I64) *(int64_t *)field = (int64_t)iv;
        else *(uint64_t *)field = (uint64_t)iv;
        break;
    case V_REAL:
        if (parse_real(opt, arg, s->rlo, s->rhi, &rv, err, errlen)) return -1;
        *(double *)field = rv;
        break;
    case V_STR:
        if (copy_str(opt, arg, field, s->size, err, errlen)) return -1;
        break;
    case V_PAIR: {
        const char *bar = strchr(s->words, '|');
        char first[32];
        snprintf(first, sizeof first, "%.*s", (int)(bar - s->words), s->words);
        if (parse_pair(opt, arg, first, bar + 1, &pick, err, errlen)) return -1;
        *(int *)field = pick;
        break;
    }
    case V_FN:
        if (s->fn(o, arg, err, errlen)) return -1;
        break;
    }
    if (s->given)
        *(int *)((char *)o + s->given) |= s->given_bit;
    return 0;
}

/* getopt_long's table from ours: each option's val is its index + 256. */
static void long_options(struct option *lo)
{
    for (int i = 0; i < NOPTIONS; i++)
        lo[i] = (struct option){ options[i].name,
                                 options[i].kind == V_FLAG ? no_argument : required_argument,
                                 0, 256 + i };
    lo[NOPTIONS] = (struct option){ 0, 0, 0, 0 };
}

/* The entry of the option whose val is c (NULL: none). */
static const option_spec *spec_of(int c)
{
    return c >= 256 && c < 256 + NOPTIONS ? &options[c - 256] : NULL;
}

static const option_spec *spec_named(const char *name)
{
    for (int i = 0; i < NOPTIONS; i++)
        if (!strcmp(options[i].name, name))
            return &options[i];
    return NULL;
}

/* "--epochs --lr 0.1": the value of --epochs would be "--lr" */
static int value_is_an_option(const option_spec *s, const char *arg, char *err, size_t errlen)
{
    if (s->kind == V_FLAG || !arg || strncmp(arg, "--", 2) != 0)
        return 0;
    size_t nl = strcspn(arg + 2, "=");
    for (int q = 0; q < NOPTIONS; q++)
        if (strlen(options[q].name) == nl && !strncmp(arg + 2, options[q].name, nl)) {
            snprintf(err, errlen, "--%s: the value is missing (found the option --%s "
                     "after it)", s->name, options[q].name);
            return 1;
        }
    return 0;
}

/* getopt_long's refusal as one line: a missing value, a value given to a
 * flag, an unknown option. */
static void refusal(int c, int argc, char **argv, char *err, size_t errlen)
{
    const option_spec *s = spec_of(optopt);
    const char *word = optind - 1 < argc ? argv[optind - 1] : "?";
    if (c == ':')   /* a required value is missing (the option ended the line) */
        snprintf(err, errlen, "%s%s: the value is missing (see --help)", s ? "--" : "",
                 s ? s->name : word);
    else if (s)     /* --quiet=1 */
        snprintf(err, errlen, "--%s takes no value (see --help)", s->name);
    else if (optopt > 32 && optopt < 127)
        snprintf(err, errlen, "unknown option '-%c' (see --help)", optopt);
    else
        snprintf(err, errlen, "unknown option '%s' (see --help)", word);
}

/* The options that depend on each other, once all are read. */
static int check_together(cdp_options *o, char *err, size_t errlen)
{
    if (check_optimizer(o, err, errlen))
        return -1;
    /* what names or times checkpoints needs the checkpoint's name */
    const char *needs_ckpt = o->checkpoint_every_steps ? "--checkpoint-every-steps"
                             : o->keep_checkpoints > 1 ? "--keep-checkpoints"
                             : !strcmp(o->resume, "latest") ? "--resume latest" : NULL;
    if (needs_ckpt && !o->checkpoint[0]) {
        snprintf(err, errlen, "%s needs --checkpoint FILE (%s)", needs_ckpt,
                 !strcmp(o->resume, "latest") && !o->checkpoint_every_steps &&
                 o->keep_checkpoints == 1 ? "the name whose checkpoints it looks for"
                                          : "the name of the checkpoints");
        return -1;
    }
    if (o->flush_denormals && strcmp(o->backend, "cpu")) {
        snprintf(err, errlen, "--flush-denormals sets the CPU's arithmetic; the CUDA kernels keep "
                 "IEEE denormals: drop it or use --backend cpu");
        return -1;
    }
    if ((o->machine[0] || o->plan_ranks || o->device_memory > 0) && !o->plan) {
        snprintf(err, errlen, "%s needs --plan (it describes what --plan predicts)",
                 o->machine[0] ? "--machine" : o->plan_ranks ? "--plan-ranks" : "--device-memory");
        return -1;
    }
    if (o->device_memory > 0 && !o->machine[0]) {
        snprintf(err, errlen, "--device-memory needs --machine FILE (the prediction it is checked against)");
        return -1;
    }
    if (o->layer_times_out[0])
        o->layer_times = 1;   /* the machine file is written from them */
    if (o->log_every && !o->metrics[0]) {
        snprintf(err, errlen, "--log-every needs --metrics FILE (the JSON lines it writes to)");
        return -1;
    }
    if (o->data_dir[0] && !strncmp(o->data, "folder:", 7)) {
        snprintf(err, errlen, "--data-dir: --data folder:DIR names its own folder (drop "
                 "--data-dir)");
        return -1;
    }
    if (!o->data_dir[0]) {
        /* the kind's own directory: --data mnist never reads Fashion-MNIST */
        cdp_data_spec spec;
        if (cdp_data_spec_parse(o->data, &spec, err, errlen) != 0)
            return -1;
        if (cdp_data_default_dir(spec.kind, o->data_dir, sizeof o->data_dir) != 0) {
            snprintf(err, errlen, "--data-dir: the default directory of %s is too long "
                     "(is $CDP_DATA_DIR right?)", spec.kind);
            return -1;
        }
    }
    return 0;
}


int cdp_options_parse(cdp_options *o, int argc, char **argv, char *err, size_t errlen)
{
    struct option lo[NOPTIONS + 1];
    long_options(lo);
    opterr = 0;
    optind = 1;
    for (;;) {
        int idx = 0;
        /* the leading ':' makes a missing value ':' (not '?') */
        int c = getopt_long(argc, argv, ":h", lo, &idx);
        if (c == -1)
            break;
        const option_spec *s = c == 'h' ? spec_named("help") : spec_of(c);
        if (!s) {
            refusal(c, argc, argv, err, errlen);
            return -1;
        }
        if (value_is_an_option(s, optarg, err, errlen) || take_value(o, s, optarg, err, errlen))
            return -1;
    }
    if (optind < argc) {
        snprintf(err, errlen, "unexpected argument '%s' (see --help)", argv[optind]);
        return -1;
    }
    return check_together(o, err, errlen);
}
