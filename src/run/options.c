#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "models/model.h"
#include "optim/optim.h"
#include "run/options.h"
#include "io/output.h"
#include "util/rng.h"

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

/* --model's names from the table of models, wrapped under the option */
static void print_model_names(FILE *f)
{
    const int indent = 25, width = 88;
    cdp_model_entry e;
    int n = 0;
    while (cdp_model_entry_at(n, &e))
        n++;
    int col = fprintf(f, "%*s", indent, "");
    for (int k = 0; k < n; k++) {
        cdp_model_entry_at(k, &e);
        int len = (int)strlen(e.name) + (k + 1 < n);
        if (col > indent && col + 1 + len > width)
            col = fprintf(f, "\n%*s", indent, "") - 1;
        else if (col > indent)
            col += fprintf(f, " ");
        col += fprintf(f, "%s%s", e.name, k + 1 < n ? "," : "");
    }
    fprintf(f, "\n");
}

void cdp_options_help(FILE *f)
{
    fputs(
"Usage: mpirun -np P cdp_run [options]     (or ./cdp_run for one rank)\n"
"Trains a network (MLP, ResNet or Vision Transformer) with Data Parallelism (dp) or\n"
"Cyclic Data Parallelism (cdp-v1, cdp-v2).\n"
"\n"
"Model and schedule:\n"
"  --model SPEC           network; --list-models says what each is [mlp:784-256-128-10]\n", f);
    print_model_names(f);
    fputs(
"  --stages L             contiguous runs of blocks, balanced by --balance\n"
"                         [mlp: one per Linear layer; ResNets and ViTs: 4]\n"
"  --balance B            what the stages balance: flops | activations (kept bytes)\n"
"                         [flops]\n"
"  --workers N            micro-batches per step (N >= ranks)    [max(4, ranks)]\n"
"  --batch B              samples per micro-batch                [32]\n"
"  --rule R               dp | cdp-v1 | cdp-v2                   [cdp-v2]\n"
"  --framework F          replicated | model-parallel | zero     [replicated]\n"
"  --deterministic        dp: sum gradients in worker order around the ring\n"
"                         instead of MPI_Allreduce (bitwise reproducible)\n"
"Training:\n"
"  --epochs E             passes over the training set           [10]\n"
"  --steps K              stop after K steps (overrides --epochs)\n"
"  --optimizer O          sgd (as torch.optim.SGD) | adamw (as torch.optim.AdamW) [sgd]\n"
"  --lr X                 learning rate             [sgd: 0.03; adamw: 0.001]\n"
"  --momentum X           SGD momentum (sgd only)                 [0.9]\n"
"  --betas B1,B2          AdamW's moment decays, each in [0, 1) (adamw only)\n"
"                                                                 [0.9,0.999]\n"
"  --eps X                AdamW's epsilon (adamw only)            [1e-8]\n"
"  --weight-decay X       sgd: L2 decay added to the gradient     [0]\n"
"                         adamw: decoupled, theta *= 1 - lr*X     [0.01]\n"
"  --lr-schedule S        step: multiply the lr by --lr-gamma every --lr-decay-epochs\n"
"                         epochs; cosine: lr*(1+cos(pi*c/(T-1)))/2 for update c of\n"
"                         the run's T steps, 0 at the last one    [step]\n"
"  --lr-decay-epochs E    step: multiply the lr by --lr-gamma every E epochs\n"
"                         (0: never)                              [3]\n"
"  --lr-gamma X           step: lr decay factor                   [0.5]\n"
"  --warmup-steps W       linear warm-up on either schedule: update c < W takes\n"
"                         the schedule's lr times (c+1)/W         [0]\n"
"  --seed S               initialisation and shuffling seed       [1]\n"
"  --no-shuffle           take the samples in file order 0,1,2,...\n"
"Data:\n"
"  --data KIND            fashion-mnist | mnist | cifar10 | synthetic   [fashion-mnist]\n"
"                         images 1x28x28 (Fashion-MNIST, MNIST), 3x32x32 (CIFAR-10)\n"
"  --data synthetic[:CxHxW][:n=TRAIN][:test=TEST]\n"
"                         synthetic images of any shape, e.g. synthetic:3x224x224\n"
"                         [the model's input; 784 = 1x28x28], TRAIN samples\n"
"                         [max(8192, capped to 256 MiB; workers x batch)], TEST [TRAIN/4]\n"
"  --data-dir DIR         where the files are [per data set: /usr/share/datasets/KIND,\n"
"                         or $CDP_DATA_DIR/KIND when CDP_DATA_DIR is set; fashion-mnist\n"
"                         comes with the Debian package dataset-fashion-mnist]\n"
"  --augment LIST         training images only, as torchvision: crop=P (RandomCrop with\n"
"                         P zeros of padding), flip (RandomHorizontalFlip), or both:\n"
"                         crop=4,flip; drawn per (seed, epoch, sample)       [none]\n"
"  --normalize MEAN/STD   per channel after /255, as torchvision's Normalize, e.g.\n"
"                         0.4914,0.4822,0.4465/0.2470,0.2435,0.2616, or one value for\n"
"                         every channel: 0.5/0.5                               [none]\n"
"Files:\n"
"  --init-weights FILE    start from these weights (safetensors)\n"
"  --save-weights FILE    write the final weights (safetensors)\n"
"  --metrics FILE         JSON lines: one per epoch, then a summary\n"
"  --log-every K          also a --metrics line every K steps (\"log\": \"steps\")\n"
"  --trace FILE           Chrome trace of what each rank did when (chrome://tracing)\n"
"  --checkpoint FILE      write a checkpoint at the end and when SIGTERM or SIGINT\n"
"                         stops the run (see Exit status)\n"
"  --checkpoint-every E   also every E epochs\n"
"  --checkpoint-every-steps K\n"
"                         also after every K steps (after steps K, 2K, ...)\n"
"  --keep-checkpoints M   keep the last M checkpoints, named FILE.step-00000128 etc.;\n"
"                         1: one file, FILE, rewritten each time          [1]\n"
"  --resume FILE|latest   continue bit for bit from a checkpoint (any framework and\n"
"                         number of ranks); latest: the newest valid checkpoint of\n"
"                         --checkpoint FILE (FILE or FILE.step-*)\n"
"Execution:\n"
"  --backend B            cpu | cuda                               [cpu]\n"
"  --flush-denormals      CPU: denormal floats read and written as zero (as\n"
"                         torch.set_flush_denormal(True)): avoids the slow path some\n"
"                         CPUs take on them; other bits, deterministic all the same\n"
"  --allow-mixed-numerics run even when the ranks' builds or BLAS kernels differ\n"
"                         (hosts of two CPU generations): refused otherwise, as the\n"
"                         weights would be those of no single run; then a warning\n"
"                         says the run is not reproducible bit for bit\n"
"  --threads T            BLAS/OpenMP threads per rank\n"
"                         [$OMP_NUM_THREADS, else CPUs of the rank / ranks per node]\n"
"  --plan                 print the timeline, memory and traffic figures; do not train\n"
"  --plan-steps K         steps the --plan timeline shows         [2]\n"
"  --verify               also run the serial reference and report the largest difference\n"
"  --layer-times          time each layer's forward and backward, the loss and the\n"
"                         optimizer between backend syncs: a table at the end and\n"
"                         \"layer_times\" lines in --metrics; the same bits, a slower step\n"
"  --eval-every E         test-set evaluation every E epochs and at the end;\n"
"                         0: never                               [1]\n"
"  --quiet                only errors and, at the end, one line \"test_accuracy A\n"
"                         step_time_s T\" (A: none without an evaluation)\n"
"  --timeout S            watchdog, per wait: a rank whose wait in training for one\n"
"                         message or collective lasts S seconds asks the rank(s) it\n"
"                         waits on if they are alive; no answer within 2 s stops\n"
"                         the job with a line naming the rank and the instruction\n"
"                         waited on (see Exit status); 0: off      [600]\n"
"  --list-models          the models --model takes, with what each is, and exit\n"
"  --help, --version\n"
"Exit status:\n"
"  0 done; 1 an error (one line \"cdp_run: error: ...\" names it); 3 the run\n"
"  diverged: a training loss, the parameters or the optimizer state (checked every\n"
"  64 steps at most) or a test loss not finite; one error line says what to\n"
"  lower, and with --checkpoint the last good state (the last finite one checked)\n"
"  is the checkpoint written, never a non-finite state;\n"
"  4 the watchdog stopped the job (--timeout): a rank waited S seconds on a rank\n"
"  that did not answer; one line \"cdp_run: rank R: no progress for S s waiting on\n"
"  rank Q (INSTRUCTION of stage l, step k, tick t); rank Q does not answer ...\"\n"
"  names both, and mpirun ends every rank (a rank killed by a signal is seen by\n"
"  mpirun itself: it names the rank and exits 128 + the signal, 137 for SIGKILL);\n"
"  143 stopped by SIGTERM, 130 by SIGINT: every rank stops at the next segment\n"
"  boundary (every 64 steps at most), writes the checkpoint when\n"
"  --checkpoint is given, and rank 0 prints one line \"cdp_run: SIGTERM: stopped at\n"
"  step K of T, ...\"; a second signal ends the process at once.  Under mpirun, a\n"
"  signal sent to the ranks (any one of them) makes mpirun exit with that status\n"
"  too; a signal sent to mpirun itself (Ctrl-C) reaches the ranks as SIGTERM, and\n"
"  Open MPI 4.1's mpirun exits 1 and kills ranks still running after about a\n"
"  second (--mca odls_base_sigkill_timeout).\n", f);
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

/* --augment none | crop=P[,flip] | flip[,crop=P] */
static int parse_augment(const char *s, cdp_augment *a, char *err, size_t errlen)
{
    memset(a, 0, sizeof *a);
    if (strcmp(s, "none") == 0)
        return 0;
    int have_crop = 0;
    const char *p = s;
    for (;;) {
        size_t len = strcspn(p, ",");
        if (len == 4 && strncmp(p, "flip", 4) == 0) {
            if (a->flip) {
                snprintf(err, errlen, "--augment: flip is given twice in '%s'", s);
                return -1;
            }
            a->flip = 1;
        } else if (len > 5 && strncmp(p, "crop=", 5) == 0) {
            char num[32];
            char *end;
            if (have_crop) {
                snprintf(err, errlen, "--augment: crop is given twice in '%s'", s);
                return -1;
            }
            if (len - 5 >= sizeof num) {
                snprintf(err, errlen, "--augment: crop=%.20s...: expected the padding P, an "
                         "integer in [1, 4096]", p + 5);
                return -1;
            }
            memcpy(num, p + 5, len - 5);
            num[len - 5] = '\0';
            errno = 0;
            long v = strtol(num, &end, 10);
            if (errno || end == num || *end || num[0] == '-' || num[0] == '+' || v < 1 || v > 4096) {
                snprintf(err, errlen, "--augment: crop=%s: expected the padding P, an integer "
                         "in [1, 4096]", num);
                return -1;
            }
            a->crop_pad = (int)v;
            have_crop = 1;
        } else {
            snprintf(err, errlen, "--augment: unknown augmentation '%.*s' in '%s' (expected "
                     "crop=P, flip, both as crop=P,flip, or none)", (int)len, p, s);
            return -1;
        }
        if (!p[len])
            break;
        p += len + 1;
    }
    return 0;
}

/* Comma-separated finite numbers; returns how many, or -1. */
static int parse_list(const char *s, size_t len, float *out, int max)
{
    int n = 0;
    const char *p = s, *end_all = s + len;
    while (p <= end_all) {
        const char *c = memchr(p, ',', (size_t)(end_all - p));
        const char *e = c ? c : end_all;
        char num[64];
        if (e == p || (size_t)(e - p) >= sizeof num || n == max)
            return -1;
        memcpy(num, p, (size_t)(e - p));
        num[e - p] = '\0';
        char *end;
        errno = 0;
        double v = strtod(num, &end);
        if (errno || end == num || *end || !isfinite(v) || fabs(v) > 1e30)
            return -1;
        out[n++] = (float)v;
        if (!c)
            break;
        p = c + 1;
    }
    return n;
}

/* --normalize none | MEAN[,MEAN...]/STD[,STD...] */
static int parse_normalize(const char *s, cdp_options *o, char *err, size_t errlen)
{
    o->norm_count = 0;
    if (strcmp(s, "none") == 0)
        return 0;
    const char *slash = strchr(s, '/');
    if (!slash || strchr(slash + 1, '/')) {
        snprintf(err, errlen, "--normalize: expected MEAN/STD with one value per channel, "
                 "e.g. 0.4914,0.4822,0.4465/0.2470,0.2435,0.2616 or 0.5/0.5, got '%s'", s);
        return -1;
    }
    int nm = parse_list(s, (size_t)(slash - s), o->norm_mean, CDP_NORM_MAX_CHANNELS);
    int ns = parse_list(slash + 1, strlen(slash + 1), o->norm_std, CDP_NORM_MAX_CHANNELS);
    if (nm < 0 || ns < 0) {
        snprintf(err, errlen, "--normalize: '%s': expected comma-separated numbers (at most "
                 "%d) on each side of '/'", s, CDP_NORM_MAX_CHANNELS);
        return -1;
    }
    if (nm != ns) {
        snprintf(err, errlen, "--normalize: '%s': %d mean%s but %d std%s (give as many of each)",
                 s, nm, nm == 1 ? "" : "s", ns, ns == 1 ? "" : "s");
        return -1;
    }
    for (int c = 0; c < ns; c++)
        if (!(o->norm_std[c] > 0.0f)) {
            snprintf(err, errlen, "--normalize: '%s': std %d is %g; every std must be > 0",
                     s, c, (double)o->norm_std[c]);
            return -1;
        }
    o->norm_count = nm;
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

/* --betas B1,B2: two numbers in [0, 1), as torch.optim.AdamW accepts */
static int parse_betas(const char *s, double betas[2], char *err, size_t errlen)
{
    const char *comma = strchr(s, ',');
    char num[2][64];
    if (!comma || strchr(comma + 1, ',') || comma == s || !comma[1] ||
        (size_t)(comma - s) >= sizeof num[0] || strlen(comma + 1) >= sizeof num[1]) {
        snprintf(err, errlen, "--betas: expected two numbers B1,B2 in [0, 1), e.g. 0.9,0.999, "
                 "got '%.100s'", s);
        return -1;
    }
    snprintf(num[0], sizeof num[0], "%.*s", (int)(comma - s), s);
    snprintf(num[1], sizeof num[1], "%s", comma + 1);
    for (int i = 0; i < 2; i++) {
        char *end;
        errno = 0;
        double v = strtod(num[i], &end);
        if (errno || end == num[i] || *end || !(v >= 0.0 && v < 1.0)) {
            snprintf(err, errlen, "--betas: expected two numbers B1,B2 in [0, 1), e.g. "
                     "0.9,0.999, got '%.100s'", s);
            return -1;
        }
        betas[i] = v;
    }
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

enum {
    O_MODEL = 256, O_STAGES, O_WORKERS, O_BATCH, O_RULE, O_FRAMEWORK, O_DET, O_EPOCHS,
    O_STEPS, O_LR, O_MOM, O_WD, O_DECAY, O_GAMMA, O_SEED, O_NOSHUF, O_DATA, O_DATADIR,
    O_INIT, O_SAVE, O_METRICS, O_TRACE, O_CKPT, O_CKPT_EVERY, O_CKPT_EVERY_STEPS, O_KEEP_CKPT,
    O_RESUME, O_BACKEND, O_FLUSH_DENORMALS, O_ALLOW_MIXED, O_THREADS, O_PLAN, O_PLAN_STEPS, O_VERIFY, O_LAYER_TIMES,
    O_EVAL_EVERY, O_QUIET, O_TIMEOUT, O_AUGMENT, O_NORMALIZE, O_LOG_EVERY,
    O_BALANCE, O_OPTIMIZER, O_BETAS, O_EPS, O_LR_SCHEDULE, O_WARMUP, O_HELP, O_VERSION, O_LIST_MODELS
};

/* The entry of the long option whose value is c (NULL: none). */
static const struct option *option_of(const struct option *lo, int c)
{
    for (; lo->name; lo++)
        if (lo->val == c)
            return lo;
    return NULL;
}

int cdp_options_parse(cdp_options *o, int argc, char **argv, char *err, size_t errlen)
{
    static const struct option longopts[] = {
        { "model", required_argument, 0, O_MODEL },
        { "stages", required_argument, 0, O_STAGES },
        { "balance", required_argument, 0, O_BALANCE },
        { "workers", required_argument, 0, O_WORKERS },
        { "batch", required_argument, 0, O_BATCH },
        { "rule", required_argument, 0, O_RULE },
        { "framework", required_argument, 0, O_FRAMEWORK },
        { "deterministic", no_argument, 0, O_DET },
        { "epochs", required_argument, 0, O_EPOCHS },
        { "steps", required_argument, 0, O_STEPS },
        { "lr", required_argument, 0, O_LR },
        { "momentum", required_argument, 0, O_MOM },
        { "weight-decay", required_argument, 0, O_WD },
        { "lr-decay-epochs", required_argument, 0, O_DECAY },
        { "lr-gamma", required_argument, 0, O_GAMMA },
        { "optimizer", required_argument, 0, O_OPTIMIZER },
        { "betas", required_argument, 0, O_BETAS },
        { "eps", required_argument, 0, O_EPS },
        { "lr-schedule", required_argument, 0, O_LR_SCHEDULE },
        { "warmup-steps", required_argument, 0, O_WARMUP },
        { "seed", required_argument, 0, O_SEED },
        { "no-shuffle", no_argument, 0, O_NOSHUF },
        { "data", required_argument, 0, O_DATA },
        { "data-dir", required_argument, 0, O_DATADIR },
        { "init-weights", required_argument, 0, O_INIT },
        { "save-weights", required_argument, 0, O_SAVE },
        { "metrics", required_argument, 0, O_METRICS },
        { "trace", required_argument, 0, O_TRACE },
        { "checkpoint", required_argument, 0, O_CKPT },
        { "checkpoint-every", required_argument, 0, O_CKPT_EVERY },
        { "checkpoint-every-steps", required_argument, 0, O_CKPT_EVERY_STEPS },
        { "log-every", required_argument, 0, O_LOG_EVERY },
        { "keep-checkpoints", required_argument, 0, O_KEEP_CKPT },
        { "resume", required_argument, 0, O_RESUME },
        { "backend", required_argument, 0, O_BACKEND },
        { "flush-denormals", no_argument, 0, O_FLUSH_DENORMALS },
        { "allow-mixed-numerics", no_argument, 0, O_ALLOW_MIXED },
        { "threads", required_argument, 0, O_THREADS },
        { "plan", no_argument, 0, O_PLAN },
        { "plan-steps", required_argument, 0, O_PLAN_STEPS },
        { "verify", no_argument, 0, O_VERIFY },
        { "layer-times", no_argument, 0, O_LAYER_TIMES },
        { "eval-every", required_argument, 0, O_EVAL_EVERY },
        { "quiet", no_argument, 0, O_QUIET },
        { "timeout", required_argument, 0, O_TIMEOUT },
        { "augment", required_argument, 0, O_AUGMENT },
        { "normalize", required_argument, 0, O_NORMALIZE },
        { "help", no_argument, 0, O_HELP },
        { "version", no_argument, 0, O_VERSION },
        { "list-models", no_argument, 0, O_LIST_MODELS },
        { 0, 0, 0, 0 }
    };
    long long iv;
    int dir_given = 0;
    cdp_data_spec spec;
    opterr = 0;
    optind = 1;
    for (;;) {
        int idx = 0;
        /* the leading ':' makes a missing value ':' (not '?') */
        int c = getopt_long(argc, argv, ":h", longopts, &idx);
        if (c == -1) break;
        const struct option *lo = option_of(longopts, c);
        const char *name = lo ? lo->name : "";
        char opt[64];
        snprintf(opt, sizeof opt, "--%s", name);
        /* "--epochs --lr 0.1": the value of --epochs would be "--lr" */
        if (lo && lo->has_arg == required_argument &&
            optarg && strncmp(optarg, "--", 2) == 0) {
            size_t nl = strcspn(optarg + 2, "=");
            for (int q = 0; longopts[q].name; q++)
                if (strlen(longopts[q].name) == nl && !strncmp(optarg + 2, longopts[q].name, nl)) {
                    snprintf(err, errlen, "%s: the value is missing (found the option --%s "
                             "after it)", opt, longopts[q].name);
                    return -1;
                }
        }
        switch (c) {
        case O_MODEL: if (copy_str(opt, optarg, o->model, sizeof o->model, err, errlen)) return -1; break;
        case O_BALANCE:
            if (!strcmp(optarg, "flops")) o->balance = 0;
            else if (!strcmp(optarg, "activations")) o->balance = 1;
            else {
                snprintf(err, errlen, "--balance: expected flops or activations, got '%.100s'", optarg);
                return -1;
            }
            break;
        case O_STAGES: if (parse_int(opt, optarg, 1, 4096, &iv, err, errlen)) return -1; o->stages = (int)iv; break;
        case O_WORKERS: if (parse_int(opt, optarg, 1, 1 << 20, &iv, err, errlen)) return -1; o->workers = (int)iv; break;
        case O_BATCH: if (parse_int(opt, optarg, 1, 1 << 20, &iv, err, errlen)) return -1; o->batch = (int)iv; break;
        case O_RULE:
            if (cdp_rule_parse(optarg, &o->rule)) {
                snprintf(err, errlen, "--rule: expected dp, cdp-v1 or cdp-v2, got '%s'", optarg);
                return -1;
            }
            break;
        case O_FRAMEWORK:
            if (cdp_framework_parse(optarg, &o->framework)) {
                snprintf(err, errlen, "--framework: expected replicated, model-parallel or zero, got '%s'", optarg);
                return -1;
            }
            break;
        case O_DET: o->deterministic = 1; break;
        case O_EPOCHS: if (parse_int(opt, optarg, 1, 100000, &iv, err, errlen)) return -1; o->epochs = (int)iv; break;
        case O_STEPS: if (parse_int(opt, optarg, 1, (long long)1 << 40, &iv, err, errlen)) return -1; o->steps = iv; break;
        case O_LR: if (parse_real(opt, optarg, 0, 1e6, &o->lr, err, errlen)) return -1; o->given_lr = 1; break;
        case O_MOM: if (parse_real(opt, optarg, 0, 1, &o->momentum, err, errlen)) return -1; o->given_momentum = 1; break;
        case O_WD: if (parse_real(opt, optarg, 0, 1e3, &o->weight_decay, err, errlen)) return -1; o->given_weight_decay = 1; break;
        case O_DECAY: if (parse_int(opt, optarg, 0, 100000, &iv, err, errlen)) return -1; o->lr_decay_epochs = (int)iv; o->given_lr_decay |= 1; break;
        case O_GAMMA: if (parse_real(opt, optarg, 0, 1e3, &o->lr_gamma, err, errlen)) return -1; o->given_lr_decay |= 2; break;
        case O_OPTIMIZER: if (parse_pair(opt, optarg, "sgd", "adamw", &o->optimizer, err, errlen)) return -1; break;
        case O_BETAS: if (parse_betas(optarg, o->betas, err, errlen)) return -1; o->given_betas = 1; break;
        case O_EPS: if (parse_real(opt, optarg, 0, 1, &o->eps, err, errlen)) return -1; o->given_eps = 1; break;
        case O_LR_SCHEDULE: if (parse_pair(opt, optarg, "step", "cosine", &o->lr_schedule, err, errlen)) return -1; break;
        case O_WARMUP: if (parse_int(opt, optarg, 0, (long long)1 << 40, &iv, err, errlen)) return -1; o->warmup_steps = iv; break;
        case O_SEED: if (parse_int(opt, optarg, 0, LLONG_MAX, &iv, err, errlen)) return -1; o->seed = (uint64_t)iv; break;
        case O_NOSHUF: o->shuffle = 0; break;
        case O_DATA: {
            char why[512];
            if (cdp_data_spec_parse(optarg, &spec, why, sizeof why) != 0) {
                snprintf(err, errlen, "--data: %s", why);
                return -1;
            }
            if (copy_str(opt, optarg, o->data, sizeof o->data, err, errlen)) return -1;
            break;
        }
        case O_DATADIR:
            if (copy_str(opt, optarg, o->data_dir, sizeof o->data_dir, err, errlen)) return -1;
            dir_given = 1;
            break;
        case O_AUGMENT: if (parse_augment(optarg, &o->augment, err, errlen)) return -1; break;
        case O_NORMALIZE: if (parse_normalize(optarg, o, err, errlen)) return -1; break;
        case O_INIT: if (copy_str(opt, optarg, o->init_weights, sizeof o->init_weights, err, errlen)) return -1; break;
        case O_SAVE: if (copy_str(opt, optarg, o->save_weights, sizeof o->save_weights, err, errlen)) return -1; break;
        case O_METRICS: if (copy_str(opt, optarg, o->metrics, sizeof o->metrics, err, errlen)) return -1; break;
        case O_TRACE: if (copy_str(opt, optarg, o->trace, sizeof o->trace, err, errlen)) return -1; break;
        case O_CKPT: if (copy_str(opt, optarg, o->checkpoint, sizeof o->checkpoint, err, errlen)) return -1; break;
        case O_CKPT_EVERY: if (parse_int(opt, optarg, 0, 100000, &iv, err, errlen)) return -1; o->checkpoint_every = (int)iv; break;
        case O_CKPT_EVERY_STEPS: if (parse_int(opt, optarg, 0, LLONG_MAX, &iv, err, errlen)) return -1; o->checkpoint_every_steps = (int64_t)iv; break;
        case O_LOG_EVERY: if (parse_int(opt, optarg, 0, LLONG_MAX, &iv, err, errlen)) return -1; o->log_every = (int64_t)iv; break;
        case O_KEEP_CKPT: if (parse_int(opt, optarg, 1, 100000, &iv, err, errlen)) return -1; o->keep_checkpoints = (int)iv; break;
        case O_RESUME: if (copy_str(opt, optarg, o->resume, sizeof o->resume, err, errlen)) return -1; break;
        case O_BACKEND:
            if (strcmp(optarg, "cpu") && strcmp(optarg, "cuda")) {
                snprintf(err, errlen, "--backend: expected cpu or cuda, got '%s'", optarg);
                return -1;
            }
            snprintf(o->backend, sizeof o->backend, "%s", optarg);
            break;
        case O_THREADS: if (parse_int(opt, optarg, 1, 1024, &iv, err, errlen)) return -1; o->threads = (int)iv; break;
        case O_PLAN: o->plan = 1; break;
        case O_PLAN_STEPS: if (parse_int(opt, optarg, 1, 64, &iv, err, errlen)) return -1; o->plan_steps = (int)iv; break;
        case O_VERIFY: o->verify = 1; break;
        case O_LAYER_TIMES: o->layer_times = 1; break;
        case O_FLUSH_DENORMALS: o->flush_denormals = 1; break;
        case O_ALLOW_MIXED: o->allow_mixed = 1; break;
        case O_EVAL_EVERY: if (parse_int(opt, optarg, 0, 100000, &iv, err, errlen)) return -1; o->eval_every = (int)iv; break;
        case O_QUIET: o->quiet = 1; break;
        case O_TIMEOUT: if (parse_int(opt, optarg, 0, 1000000, &iv, err, errlen)) return -1; o->timeout = (int)iv; break;
        case 'h': case O_HELP: o->help = 1; break;
        case O_VERSION: o->version = 1; break;
        case O_LIST_MODELS: o->list_models = 1; break;
        case ':':   /* a required value is missing (the option ended the line) */
            if (option_of(longopts, optopt))
                snprintf(err, errlen, "--%s: the value is missing (see --help)",
                         option_of(longopts, optopt)->name);
            else
                snprintf(err, errlen, "%s: the value is missing (see --help)",
                         optind - 1 < argc ? argv[optind - 1] : "?");
            return -1;
        default:
            if (option_of(longopts, optopt))   /* --quiet=1 */
                snprintf(err, errlen, "--%s takes no value (see --help)",
                         option_of(longopts, optopt)->name);
            else if (optopt > 32 && optopt < 127)
                snprintf(err, errlen, "unknown option '-%c' (see --help)", optopt);
            else
                snprintf(err, errlen, "unknown option '%s' (see --help)",
                         optind - 1 < argc ? argv[optind - 1] : "?");
            return -1;
        }
    }
    if (optind < argc) {
        snprintf(err, errlen, "unexpected argument '%s' (see --help)", argv[optind]);
        return -1;
    }
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
    if (o->log_every && !o->metrics[0]) {
        snprintf(err, errlen, "--log-every needs --metrics FILE (the JSON lines it writes to)");
        return -1;
    }
    if (!dir_given) {
        /* the kind's own directory: --data mnist never reads Fashion-MNIST */
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

/* ------------------------------------------------------------- outputs */

/* The file an output path names: its inode when it exists; else the real
 * path of its directory and its last component, after following dangling
 * symbolic links (key). */
typedef struct out_file {
    int exists, chr;
    dev_t dev;
    ino_t ino;
    char key[2 * PATH_MAX + 2];
} out_file;

static void out_file_of(const char *path, out_file *f)
{
    char cur[PATH_MAX], next[PATH_MAX];
    memset(f, 0, sizeof *f);
    snprintf(cur, sizeof cur, "%s", path);
    for (int hop = 0; hop < 40; hop++) {   /* 40: the kernel's own limit */
        struct stat st;
        if (stat(cur, &st) == 0) {
            f->exists = 1;
            f->chr = S_ISCHR(st.st_mode);
            f->dev = st.st_dev;
            f->ino = st.st_ino;
            return;
        }
        char target[PATH_MAX];
        ssize_t n;
        if (lstat(cur, &st) != 0 || !S_ISLNK(st.st_mode) ||
            (n = readlink(cur, target, sizeof target - 1)) <= 0)
            break;
        target[n] = '\0';
        const char *slash = strrchr(cur, '/');
        int k = target[0] == '/' || !slash
                    ? snprintf(next, sizeof next, "%s", target)
                    : snprintf(next, sizeof next, "%.*s/%s", (int)(slash - cur), cur, target);
        if (k < 0 || (size_t)k >= sizeof next)
            break;
        memcpy(cur, next, (size_t)k + 1);
    }
    char dir[PATH_MAX], real[PATH_MAX];
    const char *slash = strrchr(cur, '/'), *base = slash ? slash + 1 : cur;
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else
        snprintf(dir, sizeof dir, "%.*s", slash == cur ? 1 : (int)(slash - cur), cur);
    if (realpath(dir, real))
        snprintf(f->key, sizeof f->key, "%s/%s", strcmp(real, "/") ? real : "", base);
    else   /* a directory that is not there: the write will say so */
        snprintf(f->key, sizeof f->key, "%s", cur);
}

int cdp_options_check_outputs(const cdp_options *o, char *err, size_t errlen)
{
    const struct { const char *opt, *path; } out[] = {
        { "--checkpoint", o->checkpoint }, { "--save-weights", o->save_weights },
        { "--metrics", o->metrics }, { "--trace", o->trace },
    };
    enum { NOUT = sizeof out / sizeof out[0] };
    out_file *f = calloc(NOUT, sizeof *f);
    if (!f) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (int i = 0; i < NOUT; i++)
        if (out[i].path[0])
            out_file_of(out[i].path, &f[i]);
    int rc = 0;
    for (int i = 0; i < NOUT && !rc; i++)
        for (int j = i + 1; j < NOUT && !rc; j++) {
            if (!out[i].path[0] || !out[j].path[0] || f[i].exists != f[j].exists)
                continue;
            int same = f[i].exists ? f[i].dev == f[j].dev && f[i].ino == f[j].ino && !f[i].chr
                                   : strcmp(f[i].key, f[j].key) == 0;
            if (same) {
                snprintf(err, errlen, "%s %.400s and %s %.400s name the same file: each output "
                         "needs a file of its own", out[i].opt, out[i].path, out[j].opt,
                         out[j].path);
                rc = -1;
            }
        }
    free(f);
    return rc;
}

int cdp_options_check_output_dirs(const cdp_options *o, char *err, size_t errlen)
{
    const struct { const char *opt, *path; int dir; } out[] = {
        { "--checkpoint", o->checkpoint, 1 }, { "--save-weights", o->save_weights, 1 },
        { "--metrics", o->metrics, 0 }, { "--trace", o->trace, 0 },
    };
    for (size_t i = 0; i < sizeof out / sizeof out[0]; i++) {
        if (!out[i].path[0])
            continue;
        /* what the path names decides how it is written (io/output.h) */
        const char *what;
        const cdp_output_kind kind = cdp_output_kind_of(out[i].path, &what);
        if (kind == CDP_OUTPUT_REFUSED) {
            snprintf(err, errlen, "%s %.900s: it is %s: an output must be a regular file "
                     "(replaced), a character device or a FIFO (written in place)", out[i].opt,
                     out[i].path, what);
            return -1;
        }
        /* the files replaced through a temporary file in their directory;
         * the streams and the devices written in place need none */
        if (!out[i].dir || kind == CDP_OUTPUT_IN_PLACE)
            continue;
        char dir[PATH_MAX];
        const char *slash = strrchr(out[i].path, '/');
        if (!slash)
            snprintf(dir, sizeof dir, ".");
        else if (slash == out[i].path)
            snprintf(dir, sizeof dir, "/");
        else
            snprintf(dir, sizeof dir, "%.*s", (int)(slash - out[i].path), out[i].path);
        struct stat st;
        const char *why = stat(dir, &st) != 0      ? strerror(errno)
                          : !S_ISDIR(st.st_mode)    ? "not a directory"
                          : access(dir, W_OK | X_OK) ? strerror(errno)
                                                     : NULL;
        if (why) {
            snprintf(err, errlen, "%s %.900s: the directory %.900s cannot take it (%s); it is "
                     "written by rank 0, on rank 0's host", out[i].opt, out[i].path, dir, why);
            return -1;
        }
    }
    return 0;
}

static uint64_t hash_bytes(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = cdp_mix64(h ^ b[i]);
    return h;
}

uint64_t cdp_options_numerics_hash(const cdp_options *o)
{
    /* what fixes the trajectory P(0), P(1), ...: a checkpoint resumes only
     * under the same values */
    uint64_t h = 0x6e756d;
    h = hash_bytes(h, o->model, strlen(o->model));
    h = hash_bytes(h, &o->stages, sizeof o->stages);
    if (o->balance)   /* the cut moves the lags: part of the numerics (absent: as before) */
        h = hash_bytes(h, &o->balance, sizeof o->balance);
    h = hash_bytes(h, &o->workers, sizeof o->workers);
    h = hash_bytes(h, &o->batch, sizeof o->batch);
    h = hash_bytes(h, &o->rule, sizeof o->rule);
    h = hash_bytes(h, &o->lr, sizeof o->lr);
    h = hash_bytes(h, &o->momentum, sizeof o->momentum);
    h = hash_bytes(h, &o->weight_decay, sizeof o->weight_decay);
    h = hash_bytes(h, &o->lr_gamma, sizeof o->lr_gamma);
    h = hash_bytes(h, &o->lr_decay_epochs, sizeof o->lr_decay_epochs);
    h = hash_bytes(h, &o->seed, sizeof o->seed);
    h = hash_bytes(h, o->data, strlen(o->data));
    h = hash_bytes(h, &o->shuffle, sizeof o->shuffle);
    /* the transforms only when set: the hash of a run without them (and
     * the checkpoints it wrote) is the one of the versions before them */
    if (o->augment.crop_pad || o->augment.flip) {
        h = hash_bytes(h, "augment", 7);
        h = hash_bytes(h, &o->augment, sizeof o->augment);
    }
    /* the optimizer and schedule likewise only when not SGD with step
     * decay and no warm-up (the runs and checkpoints of before them) */
    if (o->optimizer != CDP_OPTIM_SGD) {
        h = hash_bytes(h, "optimizer", 9);
        h = hash_bytes(h, &o->optimizer, sizeof o->optimizer);
        h = hash_bytes(h, o->betas, sizeof o->betas);
        h = hash_bytes(h, &o->eps, sizeof o->eps);
    }
    if (o->lr_schedule != CDP_LR_STEP) {
        /* cosine depends on the run's length */
        h = hash_bytes(h, "lr_schedule", 11);
        h = hash_bytes(h, &o->lr_schedule, sizeof o->lr_schedule);
        h = hash_bytes(h, &o->steps, sizeof o->steps);
        if (!o->steps)
            h = hash_bytes(h, &o->epochs, sizeof o->epochs);
    }
    if (o->warmup_steps) {
        h = hash_bytes(h, "warmup", 6);
        h = hash_bytes(h, &o->warmup_steps, sizeof o->warmup_steps);
    }
    if (o->flush_denormals) {   /* another arithmetic: other bits */
        h = hash_bytes(h, "flush_denormals", 15);
        h = hash_bytes(h, &o->flush_denormals, sizeof o->flush_denormals);
    }
    if (o->norm_count) {
        h = hash_bytes(h, "normalize", 9);
        h = hash_bytes(h, &o->norm_count, sizeof o->norm_count);
        h = hash_bytes(h, o->norm_mean, (size_t)o->norm_count * sizeof(float));
        h = hash_bytes(h, o->norm_std, (size_t)o->norm_count * sizeof(float));
    }
    return h;
}

uint64_t cdp_options_hash(const cdp_options *o)
{
    /* the numerics, plus what else every rank must agree on */
    uint64_t h = cdp_options_numerics_hash(o);
    h = hash_bytes(h, &o->framework, sizeof o->framework);
    h = hash_bytes(h, &o->deterministic, sizeof o->deterministic);
    h = hash_bytes(h, &o->epochs, sizeof o->epochs);
    h = hash_bytes(h, &o->steps, sizeof o->steps);
    h = hash_bytes(h, o->data_dir, strlen(o->data_dir));
    h = hash_bytes(h, o->init_weights, strlen(o->init_weights));
    h = hash_bytes(h, o->resume, strlen(o->resume));
    h = hash_bytes(h, o->checkpoint, strlen(o->checkpoint));
    h = hash_bytes(h, &o->checkpoint_every, sizeof o->checkpoint_every);
    h = hash_bytes(h, &o->checkpoint_every_steps, sizeof o->checkpoint_every_steps);
    h = hash_bytes(h, &o->log_every, sizeof o->log_every);   /* its reductions are collective */
    h = hash_bytes(h, &o->keep_checkpoints, sizeof o->keep_checkpoints);
    h = hash_bytes(h, o->backend, strlen(o->backend));
    h = hash_bytes(h, &o->timeout, sizeof o->timeout);   /* turning it on is collective */
    h = hash_bytes(h, &o->allow_mixed, sizeof o->allow_mixed);
    h = hash_bytes(h, &o->plan, sizeof o->plan);
    h = hash_bytes(h, &o->verify, sizeof o->verify);
    h = hash_bytes(h, &o->layer_times, sizeof o->layer_times);   /* its reduction is collective */
    return h;
}
