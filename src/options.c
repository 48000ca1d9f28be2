#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "cdp/options.h"
#include "cdp/rng.h"

void cdp_options_defaults(cdp_options *o)
{
    memset(o, 0, sizeof *o);
    snprintf(o->model, sizeof o->model, "mlp:784-256-128-10");
    o->batch = 32;
    o->rule = CDP_RULE_CDP_V2;
    o->framework = CDP_FW_REPLICATED;
    o->epochs = 10;
    /* 10 epochs of Fashion-MNIST to ~88.5% under every rule; a delayed
     * gradient (cdp-v1) tolerates this lr with momentum 0.9, not 0.05 */
    o->lr = 0.03;
    o->momentum = 0.9;
    o->weight_decay = 0.0;
    o->lr_decay_epochs = 3;
    o->lr_gamma = 0.5;
    o->seed = 1;
    snprintf(o->data, sizeof o->data, "fashion-mnist");
    snprintf(o->data_dir, sizeof o->data_dir, "/usr/share/datasets/fashion-mnist");
    o->shuffle = 1;
    snprintf(o->backend, sizeof o->backend, "cpu");
    o->plan_steps = 2;
    o->eval_every = 1;
}

void cdp_options_help(FILE *f)
{
    fputs(
"Usage: mpirun -np P cdp_run [options]     (or ./cdp_run for one rank)\n"
"Trains an MLP with Data Parallelism (dp) or Cyclic Data Parallelism (cdp-v1, cdp-v2).\n"
"\n"
"Model and schedule:\n"
"  --model SPEC           network, mlp:IN-H1-...-OUT            [mlp:784-256-128-10]\n"
"  --stages L             contiguous stages, balanced by FLOPs  [one per Linear layer]\n"
"  --workers N            micro-batches per step (N >= ranks)    [max(4, ranks)]\n"
"  --batch B              samples per micro-batch                [32]\n"
"  --rule R               dp | cdp-v1 | cdp-v2                   [cdp-v2]\n"
"  --framework F          replicated | model-parallel | zero     [replicated]\n"
"  --deterministic        dp: sum gradients in worker order around the ring\n"
"                         instead of MPI_Allreduce (bitwise reproducible)\n"
"Training:\n"
"  --epochs E             passes over the training set           [10]\n"
"  --steps K              stop after K steps (overrides --epochs)\n"
"  --lr X                 learning rate                           [0.03]\n"
"  --momentum X           SGD momentum                            [0.9]\n"
"  --weight-decay X       L2 weight decay                         [0]\n"
"  --lr-decay-epochs E    multiply the lr by --lr-gamma every E epochs (0: never) [3]\n"
"  --lr-gamma X           lr decay factor                         [0.5]\n"
"  --seed S               initialisation and shuffling seed       [1]\n"
"  --no-shuffle           take the samples in file order 0,1,2,...\n"
"Data:\n"
"  --data KIND            fashion-mnist | mnist | cifar10 | synthetic [fashion-mnist]\n"
"  --data-dir DIR         where the files are [/usr/share/datasets/fashion-mnist]\n"
"Files:\n"
"  --init-weights FILE    start from these weights (safetensors)\n"
"  --save-weights FILE    write the final weights (safetensors)\n"
"  --metrics FILE         JSON lines: one per epoch, then a summary\n"
"  --trace FILE           Chrome trace of what each rank did when (chrome://tracing)\n"
"  --checkpoint FILE      write a checkpoint at the end and on SIGTERM\n"
"  --checkpoint-every E   also every E epochs\n"
"  --resume FILE          continue bit for bit from a checkpoint\n"
"Execution:\n"
"  --backend B            cpu | cuda                               [cpu]\n"
"  --threads T            BLAS/OpenMP threads per rank  [CPUs of the rank / ranks per node]\n"
"  --plan                 print the timeline, memory and traffic figures; do not train\n"
"  --plan-steps K         steps the --plan timeline shows         [2]\n"
"  --verify               also run the serial reference and report the largest difference\n"
"  --eval-every E         test-set evaluation every E epochs     [1]\n"
"  --quiet                only errors and the final summary\n"
"  --help, --version\n", f);
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
    if (strlen(s) >= n || !*s) {
        snprintf(err, errlen, "%s: value is empty or too long", opt);
        return -1;
    }
    memcpy(dst, s, strlen(s) + 1);
    return 0;
}

enum {
    O_MODEL = 256, O_STAGES, O_WORKERS, O_BATCH, O_RULE, O_FRAMEWORK, O_DET, O_EPOCHS,
    O_STEPS, O_LR, O_MOM, O_WD, O_DECAY, O_GAMMA, O_SEED, O_NOSHUF, O_DATA, O_DATADIR,
    O_INIT, O_SAVE, O_METRICS, O_TRACE, O_CKPT, O_CKPT_EVERY, O_RESUME, O_BACKEND,
    O_THREADS, O_PLAN, O_PLAN_STEPS, O_VERIFY, O_EVAL_EVERY, O_QUIET, O_HELP, O_VERSION
};

int cdp_options_parse(cdp_options *o, int argc, char **argv, char *err, size_t errlen)
{
    static const struct option longopts[] = {
        { "model", required_argument, 0, O_MODEL },
        { "stages", required_argument, 0, O_STAGES },
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
        { "resume", required_argument, 0, O_RESUME },
        { "backend", required_argument, 0, O_BACKEND },
        { "threads", required_argument, 0, O_THREADS },
        { "plan", no_argument, 0, O_PLAN },
        { "plan-steps", required_argument, 0, O_PLAN_STEPS },
        { "verify", no_argument, 0, O_VERIFY },
        { "eval-every", required_argument, 0, O_EVAL_EVERY },
        { "quiet", no_argument, 0, O_QUIET },
        { "help", no_argument, 0, O_HELP },
        { "version", no_argument, 0, O_VERSION },
        { 0, 0, 0, 0 }
    };
    long long iv;
    opterr = 0;
    optind = 1;
    for (;;) {
        int idx = 0;
        int c = getopt_long(argc, argv, "h", longopts, &idx);
        if (c == -1) break;
        const char *name = (c >= O_MODEL && c <= O_VERSION) ? longopts[c - O_MODEL].name : "";
        char opt[64];
        snprintf(opt, sizeof opt, "--%s", name);
        switch (c) {
        case O_MODEL: if (copy_str(opt, optarg, o->model, sizeof o->model, err, errlen)) return -1; break;
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
        case O_LR: if (parse_real(opt, optarg, 0, 1e6, &o->lr, err, errlen)) return -1; break;
        case O_MOM: if (parse_real(opt, optarg, 0, 1, &o->momentum, err, errlen)) return -1; break;
        case O_WD: if (parse_real(opt, optarg, 0, 1e3, &o->weight_decay, err, errlen)) return -1; break;
        case O_DECAY: if (parse_int(opt, optarg, 0, 100000, &iv, err, errlen)) return -1; o->lr_decay_epochs = (int)iv; break;
        case O_GAMMA: if (parse_real(opt, optarg, 0, 1e3, &o->lr_gamma, err, errlen)) return -1; break;
        case O_SEED: if (parse_int(opt, optarg, 0, LLONG_MAX, &iv, err, errlen)) return -1; o->seed = (uint64_t)iv; break;
        case O_NOSHUF: o->shuffle = 0; break;
        case O_DATA:
            if (strcmp(optarg, "fashion-mnist") && strcmp(optarg, "mnist") &&
                strcmp(optarg, "cifar10") && strcmp(optarg, "synthetic")) {
                snprintf(err, errlen, "--data: expected fashion-mnist, mnist, cifar10 or synthetic, got '%s'", optarg);
                return -1;
            }
            snprintf(o->data, sizeof o->data, "%s", optarg);
            break;
        case O_DATADIR: if (copy_str(opt, optarg, o->data_dir, sizeof o->data_dir, err, errlen)) return -1; break;
        case O_INIT: if (copy_str(opt, optarg, o->init_weights, sizeof o->init_weights, err, errlen)) return -1; break;
        case O_SAVE: if (copy_str(opt, optarg, o->save_weights, sizeof o->save_weights, err, errlen)) return -1; break;
        case O_METRICS: if (copy_str(opt, optarg, o->metrics, sizeof o->metrics, err, errlen)) return -1; break;
        case O_TRACE: if (copy_str(opt, optarg, o->trace, sizeof o->trace, err, errlen)) return -1; break;
        case O_CKPT: if (copy_str(opt, optarg, o->checkpoint, sizeof o->checkpoint, err, errlen)) return -1; break;
        case O_CKPT_EVERY: if (parse_int(opt, optarg, 0, 100000, &iv, err, errlen)) return -1; o->checkpoint_every = (int)iv; break;
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
        case O_EVAL_EVERY: if (parse_int(opt, optarg, 0, 100000, &iv, err, errlen)) return -1; o->eval_every = (int)iv; break;
        case O_QUIET: o->quiet = 1; break;
        case 'h': case O_HELP: o->help = 1; break;
        case O_VERSION: o->version = 1; break;
        case ':':
            snprintf(err, errlen, "%s: missing value", argv[optind - 1]);
            return -1;
        default:
            if (optopt)
                snprintf(err, errlen, "unknown option '-%c' (see --help)", optopt);
            else
                snprintf(err, errlen, "unknown option '%s' (see --help)", argv[optind - 1]);
            return -1;
        }
    }
    if (optind < argc) {
        snprintf(err, errlen, "unexpected argument '%s' (see --help)", argv[optind]);
        return -1;
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
    h = hash_bytes(h, o->backend, strlen(o->backend));
    h = hash_bytes(h, &o->plan, sizeof o->plan);
    h = hash_bytes(h, &o->verify, sizeof o->verify);
    return h;
}
