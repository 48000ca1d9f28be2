/* cdp_run: trains a network (an MLP, a ResNet) with dp, cdp-v1 or cdp-v2
 * over MPI.  Every rank parses the same options, loads the same data and
 * builds its own instruction list; any failure is agreed on by all ranks,
 * reported once (by the lowest failing rank) and ends every rank with exit
 * code 1 (3 when a loss is not finite: the run diverged).  main() runs the
 * phases below in order: options, model, plan, preparation (backend, data,
 * parameters, executor), training, results. */
#include <errno.h>
#include <math.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <mpi.h>
#include "config.h"
#include "cdp/backend.h"
#include "cdp/checkpoint.h"
#include "cdp/clock.h"
#include "cdp/ckpt.h"
#include "cdp/comm.h"
#include "cdp/data.h"
#include "cdp/exec.h"
#include "cdp/model.h"
#include "cdp/options.h"
#include "cdp/output.h"
#include "cdp/plan.h"
#include "cdp/preflight.h"
#include "cdp/reference.h"
#include "cdp/layer_times.h"
#include "cdp/report.h"
#include "cdp/schedule.h"
#include "cdp/trace.h"

static cdp_comm comm;
/* SIGTERM and SIGINT: the first one asks every rank to stop at the next
 * segment boundary (checkpoint written when --checkpoint is given) and to
 * exit with 128 + the signal; a second one ends the process at once, by
 * the signal's default action, after removing the temporary file of a
 * checkpoint or weights file being written (the previous file stays). */
static volatile sig_atomic_t got_signal;

static void on_signal(int sig)
{
    if (!got_signal) {
        got_signal = sig;
        return;
    }
    cdp_st_discard_pending();
    signal(sig, SIG_DFL);
    raise(sig);
}

static void catch_stop_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART;   /* reads and writes carry on */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
}

/* The signal any rank received (SIGTERM before SIGINT), 0 for none, and in
 * *bad the worst training loss any rank saw (0 finite, 1 infinite, 2 NaN):
 * collective, so that every rank stops at the same boundary. */
static int agreed_stop(double loss_sum, int *bad, int64_t k)
{
    int mine[2] = { got_signal, isnan(loss_sum) ? 2 : isinf(loss_sum) ? 1 : 0 }, any[2];
    cdp_comm_allreduce_watched(&comm, mine, any, 2, MPI_INT, MPI_MAX, "the end-of-segment check", k);
    *bad = any[1];
    return any[0];
}

/* Exit status of a run whose loss went non-finite. */
#define DIVERGED 3

/* 1 when any rank failed; the lowest failing rank prints its message,
 * naming its host when the job spans hosts and not every rank failed (the
 * host that lacks a file, say). */
static int any_failed(int failed, const char *msg)
{
    int in[2] = { failed ? comm.rank : comm.size, failed != 0 }, out[2];
    /* watched: during training (a checkpoint's write) a lost rank must not
     * hang the others here */
    cdp_comm_allreduce_watched(&comm, in, out, 2, MPI_INT, MPI_MIN, "the agreement on errors", -1);
    const int lowest = out[0], all = out[1];
    if (lowest == comm.size)
        return 0;
    if (comm.rank == lowest && comm.nhosts > 1 && !all)
        fprintf(stderr, "cdp_run: error: host %s (rank %d): %s\n", cdp_comm_host(&comm, lowest),
                lowest, msg);
    else if (comm.rank == lowest)
        fprintf(stderr, "cdp_run: error: %s\n", msg);
    return 1;
}

/* In a phase: agreed failure ends the phase, and the run, with status 1. */
#define FAIL_IF(cond, msg) do { if (any_failed((cond), (msg))) return 1; } while (0)
/* A phase's "the run is complete" (--help, --version, --plan): status 0. */
#define RUN_DONE (-1)

/* The image shape of a --data value, before it is loaded. */
static cdp_shape data_kind_shape(const char *spec)
{
    cdp_data_spec ds;
    char e[256];
    if (cdp_data_spec_parse(spec, &ds, e, sizeof e) == 0 && ds.channels > 0)
        return (cdp_shape){ ds.channels, ds.height, ds.width };
    if (!strncmp(spec, "cifar10", 7))
        return (cdp_shape){ 3, 32, 32 };
    return (cdp_shape){ 1, 28, 28 };
}

/* Threads per rank when --threads is not given, and why: the user's
 * OMP_NUM_THREADS (its first value) wins over cdp's own default, which is
 * the CPUs the launcher gave this rank, or the node's CPUs shared among the
 * node's ranks. */
static int default_threads(const char **why)
{
    const char *env = getenv("OMP_NUM_THREADS");
    if (env && *env) {
        char *end;
        long v = strtol(env, &end, 10);
        if (v >= 1 && v <= 1024 && (*end == '\0' || *end == ',')) {
            *why = "OMP_NUM_THREADS";
            return (int)v;
        }
    }
    cpu_set_t set;
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    int avail = (int)online;
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        avail = CPU_COUNT(&set);
    if (avail < online) {        /* bound by the launcher: use what we were given */
        *why = "the CPUs this rank is bound to";
        return avail > 0 ? avail : 1;
    }
    *why = "the node's CPUs / ranks on the node";
    int t = avail / (comm.local_size > 0 ? comm.local_size : 1);
    return t > 0 ? t : 1;
}

/* prefix + text, broken at ", " so that no line exceeds width columns */
static void print_wrapped(const char *prefix, const char *text, int width)
{
    int col = printf("%s", prefix);
    const int indent = (int)strlen(prefix) + 2;
    while (*text) {
        const char *cut = strstr(text, ", ");
        int len = cut ? (int)(cut - text) + 1 : (int)strlen(text);
        if (col > indent && col + 1 + len > width)
            col = printf("\n%*s", indent, "") - 1;
        else if (col > (int)strlen(prefix))
            col += printf(" ");
        col += printf("%.*s", len, text);
        text += len;
        while (*text == ' ')
            text++;
    }
    printf("\n");
}

/* Test-set loss and accuracy; -1 when the evaluation could not run.  The
 * chunk of samples evaluated at once is sized by the activations it holds
 * (about 256 MiB, at most 1000 samples), so big images fit too. */
static int evaluate(const cdp_backend *be, const cdp_model *m, const float *host_params,
                    const cdp_dataset *test, double *loss, double *acc)
{
    size_t per_sample = 0;
    for (int l = 0; l < m->nstages; l++)
        per_sample += cdp_stage_act_floats(m, l, 1) * sizeof(float);
    size_t chunk = ((size_t)256 << 20) / (per_sample ? per_sample : 1);
    if (chunk < 1) chunk = 1;
    if (chunk > 1000) chunk = 1000;
    float *p = be->alloc(m->nparams * sizeof(float));
    if (!p) return -1;
    be->to_device(p, host_params, m->nparams * sizeof(float));
    double ls = 0, corr = 0;
    cdp_model_evaluate(be, m, p, test->pixels, test->labels, test->n, test->channels, test->norm,
                       (int)chunk, &ls, &corr);
    be->free(p);
    *loss = ls / (double)test->n;
    *acc = corr / (double)test->n;
    return isnan(corr) ? -1 : 0;
}

/* Everything the phases hand on to each other. */
typedef struct run {
    cdp_options o;
    int root, P, N, L, threads;
    cdp_model_config mc;
    cdp_model model;
    int have_model;
    cdp_sched_config sc;
    cdp_schedule roles, sched;
    int have_roles, sched_K;
    const cdp_backend *be;
    cdp_data data;
    int64_t spe, total, k;
    int nepochs;
    float *params, *final_params, *init_params, *prev_params;
    float *optim_state;   /* cdp_optim_state_buffers() x nparams floats */
    cdp_exec_config xc;
    cdp_exec *x;
    FILE *metrics;
    char metrics_err[1024];   /* the first failed write to it ("" none), reported at the
                               * next agreed check (metrics_written) */
    cdp_figures fig;
    double test_loss, test_acc, samples_s;
    uint64_t numerics_hash;
    int64_t ckpt_step;   /* step of the last checkpoint written by this run, -1: none */
    /* --checkpoint: the last good state (check_state), what a diverged
     * run writes: P(good_step), P(good_step - 1), the optimizer state, of
     * this rank's stages (zero elsewhere); good_step -1: none */
    float *good[3];
    int64_t good_step;
    int64_t checked_step;         /* the last step check_state saw, -1: none */
    int state_bad;                /* the divergence is in the state, not the loss */
    size_t bad_index;             /* then the first parameter index whose state is not */
    char ckpt_path[4200];         /* its file */
    double last_progress;         /* wall time of the last progress line */
    int progress_shown;           /* a terminal line to clear */
    int collapse_warned;          /* warn_collapse said it once */
    double log_stats[3], log_time;  /* --log-every: the window since the last line */
    int64_t log_steps;
    cdp_layer_times lt;           /* --layer-times */
    cdp_preflight pf;             /* every rank's numerics identity (rank 0) */
    char err[1024];
} run;

/* Options, the same on every rank; --help and --version. */
static int phase_options(run *r, int argc, char **argv)
{
    cdp_options *o = &r->o;
    cdp_options_defaults(o);
    int bad = cdp_options_parse(o, argc, argv, r->err, sizeof r->err);
    FAIL_IF(bad, r->err);
    catch_stop_signals();   /* from now on SIGTERM/SIGINT mean: stop (and checkpoint) */
    if (o->help || o->version) {
        if (r->root) {
            if (o->help) cdp_options_help(stdout);
            else printf("cdp_run (%s) %s\n", PACKAGE_NAME, PACKAGE_VERSION);
        }
        return RUN_DONE;
    }
    bad = cdp_options_check_outputs(o, r->err, sizeof r->err);   /* before anything is written */
    FAIL_IF(bad, r->err);
    bad = r->root && !o->plan && cdp_options_check_output_dirs(o, r->err, sizeof r->err);
    FAIL_IF(bad, r->err);
    uint64_t h = cdp_options_hash(o), hmin, hmax;
    MPI_Allreduce(&h, &hmin, 1, MPI_UINT64_T, MPI_MIN, comm.comm);
    MPI_Allreduce(&h, &hmax, 1, MPI_UINT64_T, MPI_MAX, comm.comm);
    if (hmin != hmax)
        cdp_preflight_options(&comm, h, argc, argv, r->err, sizeof r->err);
    FAIL_IF(hmin != hmax, r->err);
    r->P = comm.size;
    r->N = o->workers ? o->workers : (r->P > 4 ? r->P : 4);
    return 0;
}

/* The model as the data set will shape it (for --plan and the schedule;
 * built again on the data's own shape once it is loaded), and --plan. */
static int phase_model_and_plan(run *r)
{
    const cdp_options *o = &r->o;
    int bad;
    r->mc = (cdp_model_config){ o->model, o->stages, { 0, 0, 0 }, 0, r->N, (cdp_balance)o->balance };
    if (strncmp(o->model, "mlp:", 4) != 0)   /* an mlp: names its own input */
        r->mc.input = data_kind_shape(o->data);
    if (o->plan && o->stages > 0) {
        /* a plan may reason about more stages than the model has blocks:
         * its figures are then in stage-activation units */
        cdp_model_config one = r->mc;
        one.stages = 0;
        bad = cdp_model_build(&one, &r->model, r->err, sizeof r->err);
        FAIL_IF(bad, r->err);
        int nblocks = r->model.nblocks;
        cdp_model_free(&r->model);
        if (o->stages > nblocks) {
            cdp_sched_config pc = { r->N, o->stages, r->P, o->rule, o->framework, o->deterministic,
                                    o->plan_steps };
            if (r->root)
                bad = cdp_plan_print(stdout, &pc, NULL, o->batch, r->err, sizeof r->err);
            MPI_Bcast(&bad, 1, MPI_INT, 0, comm.comm);
            FAIL_IF(bad && r->root, r->err);
            FAIL_IF(bad, "--plan failed");
            return RUN_DONE;
        }
    }
    bad = cdp_model_build(&r->mc, &r->model, r->err, sizeof r->err);
    FAIL_IF(bad, r->err);
    r->have_model = 1;
    r->L = r->model.nstages;
    r->sc = (cdp_sched_config){ r->N, r->L, r->P, o->rule, o->framework, o->deterministic, 1 };
    if (o->plan) {
        r->sc.K = o->plan_steps;
        if (r->root)
            bad = cdp_plan_print(stdout, &r->sc, &r->model, o->batch, r->err, sizeof r->err);
        MPI_Bcast(&bad, 1, MPI_INT, 0, comm.comm);
        FAIL_IF(bad && r->root, r->err);
        FAIL_IF(bad, "--plan failed");
        return RUN_DONE;
    }
    return 0;
}

/* MPI_Bcast from rank 0 of n floats, in pieces that fit an int count. */
static void bcast_floats(float *p, size_t n)
{
    const size_t piece = (size_t)1 << 30;
    for (size_t at = 0; at < n; at += piece)
        MPI_Bcast(p + at, (int)(n - at < piece ? n - at : piece), MPI_FLOAT, 0, comm.comm);
}

/* Rank 0: reads --resume's checkpoint into r->params, prev_params,
 * optim_state and r->k, its file in path.  --resume latest: the newest of
 * --checkpoint's files (cdp_checkpoint_list); a damaged one is passed over
 * with a warning for the one before it, a sound one of another run
 * (options, optimizer) is refused.  0, or -1 with r->err. */
static int read_checkpoint(run *r, char *path, size_t pathlen)
{
    const cdp_options *o = &r->o;
    const cdp_optim_kind kind = (cdp_optim_kind)o->optimizer;
    if (strcmp(o->resume, "latest")) {
        snprintf(path, pathlen, "%s", o->resume);
        return cdp_checkpoint_read(path, &r->model, r->numerics_hash, kind, &r->k, r->params,
                                   r->prev_params, r->optim_state, r->err, sizeof r->err)
                   ? -1 : 0;
    }
    cdp_checkpoint_file *f;
    size_t nf;
    if (cdp_checkpoint_list(o->checkpoint, &f, &nf, r->err, sizeof r->err))
        return -1;
    int rc = -1;
    for (size_t j = 0; j < nf && rc; j++) {
        snprintf(path, pathlen, "%s", f[j].path);
        rc = cdp_checkpoint_read(path, &r->model, r->numerics_hash, kind, &r->k, r->params,
                                 r->prev_params, r->optim_state, r->err, sizeof r->err);
        if (rc == CDP_CKPT_FOREIGN) {
            size_t len = strlen(r->err);
            snprintf(r->err + len, sizeof r->err - len, " (--resume latest: the newest "
                     "checkpoint of %.300s belongs to another run; nothing was overwritten)",
                     o->checkpoint);
            break;
        }
        if (rc)
            fprintf(stderr, "cdp_run: warning: --resume latest: passing over %s\n", r->err);
    }
    if (rc && nf == 0)
        snprintf(r->err, sizeof r->err, "--resume latest: no checkpoint %.400s or %.400s.step-* "
                 "to resume", o->checkpoint, o->checkpoint);
    else if (rc == -1)
        snprintf(r->err, sizeof r->err, "--resume latest: none of the %zu checkpoint files of "
                 "%.400s can be resumed (see the warnings above)", nf, o->checkpoint);
    free(f);
    return rc ? -1 : 0;
}

/* Schedule roles, backend, data, the model on the data, parameters (seed,
 * --init-weights, --resume), the executor, --metrics and the banner. */
/* CRC-32C of a data set's samples and labels, training then test set. */
static uint32_t data_crc32c(const cdp_data *d)
{
    const cdp_dataset *set[2] = { &d->train, &d->test };
    uint32_t crc = 0;
    for (int i = 0; i < 2; i++) {
        crc = cdp_crc32c(crc, set[i]->pixels, (size_t)set[i]->n * (size_t)set[i]->dim);
        crc = cdp_crc32c(crc, set[i]->labels, (size_t)set[i]->n * sizeof *set[i]->labels);
    }
    return crc;
}

/* Every rank computes with the same build, BLAS kernel and convolution
 * paths, or the job is refused naming what differs where (unless
 * --allow-mixed-numerics); and under mpirun across hosts, a warning when a
 * lost host would outlast --timeout.  0, or 1 after the error. */
static int check_numerics(run *r)
{
    char identity[CDP_IDENTITY_MAX], why[2048], warn[1024];
    cdp_preflight_identity(r->be->numerics(), identity, sizeof identity);
    int differ = cdp_preflight_numerics(&r->pf, &comm, identity, why, sizeof why);
    FAIL_IF(differ < 0, "out of memory for the ranks' numerics identities");
    if (differ && r->o.allow_mixed && r->root)
        fprintf(stderr, "cdp_run: warning: the ranks compute with different numerics (%s): the "
                "weights are those of no single run, and this run is not reproducible bit for "
                "bit (--allow-mixed-numerics)\n", why);
    if (differ && !r->o.allow_mixed) {
        char msg[sizeof why + 300];
        snprintf(msg, sizeof msg, "the ranks would compute with different numerics, and the "
                 "weights would be those of no single run: %s; give every host the same build and "
                 "the same kernels (e.g. OPENBLAS_CORETYPE or CDP_CONV_DNNL set alike on all of "
                 "them), or accept the mix with --allow-mixed-numerics", why);
        FAIL_IF(1, msg);
    }
    cdp_preflight_keepalive(&comm, r->o.timeout, warn, sizeof warn);
    if (warn[0] && !r->o.quiet)
        fputs(warn, stderr);
    return 0;
}

static int phase_prepare(run *r)
{
    const cdp_options *o = &r->o;
    int bad;
    /* the data first: a step that cannot fit it is refused before anything
     * scales with N (the schedule, the executor) */
    /* plain synthetic takes the model's input size when an mlp: names it */
    bad = cdp_data_open(o->data, o->data_dir, o->seed, (int64_t)r->N * o->batch,
                        strncmp(o->model, "mlp:", 4) ? 0 : cdp_model_in(&r->model), &r->data,
                        r->err, sizeof r->err) ||
          cdp_data_set_transforms(&r->data, &o->augment, o->norm_count, o->norm_mean, o->norm_std,
                                  r->err, sizeof r->err);
    FAIL_IF(bad, r->err);
    int64_t d[3] = { r->data.train.n, r->data.test.n, r->data.train.dim }, dmin[3], dmax[3];
    MPI_Allreduce(d, dmin, 3, MPI_INT64_T, MPI_MIN, comm.comm);
    MPI_Allreduce(d, dmax, 3, MPI_INT64_T, MPI_MAX, comm.comm);
    FAIL_IF(memcmp(dmin, dmax, sizeof d), "the ranks loaded data sets of different sizes");
    if (r->P > 1) {
        /* the same bytes, too: a node-local copy out of date would train
         * silently on other samples */
        uint32_t crc = data_crc32c(&r->data), crc0 = crc;
        MPI_Bcast(&crc0, 1, MPI_UINT32_T, 0, comm.comm);
        snprintf(r->err, sizeof r->err, "its %s data set%s%.600s differs from rank 0's%s%s "
                 "(CRC-32C %08x, rank 0's %08x): every rank must read the same files (a "
                 "node-local copy out of date?)", r->data.name, o->data_dir[0] ? " in " : "",
                 o->data_dir, comm.nhosts > 1 ? " on host " : "",
                 comm.nhosts > 1 ? cdp_comm_host(&comm, 0) : "", (unsigned)crc, (unsigned)crc0);
        FAIL_IF(crc != crc0, r->err);
    }
    r->spe = r->data.train.n / ((int64_t)r->N * o->batch);
    snprintf(r->err, sizeof r->err, "one step takes %d workers x %d samples = %lld, more than the "
             "%lld training samples", r->N, o->batch, (long long)r->N * o->batch,
             (long long)r->data.train.n);
    FAIL_IF(r->spe < 1, r->err);
    r->total = o->steps ? o->steps : (int64_t)o->epochs * r->spe;
    r->nepochs = (int)((r->total + r->spe - 1) / r->spe);

    /* configuration errors the schedule would find, before the executor; the
     * one-step schedule also tells the executor which stages this rank holds */
    r->sc.K = 1;
    bad = cdp_schedule_build(&r->sc, comm.rank, &r->roles, r->err, sizeof r->err);
    FAIL_IF(bad, r->err);
    r->have_roles = 1;

    const char *why = "--threads";
    r->threads = o->threads ? o->threads : default_threads(&why);
    if (!strcmp(o->backend, "cuda")) {
        r->be = cdp_backend_cuda(comm.local_rank, r->err, sizeof r->err);
    } else {
        /* the GEMM split of rank 0's host on every host: the bits then do
         * not depend on how many CPUs the other hosts have */
        int split = r->root ? cdp_cpu_gemm_split_default() : 0;
        MPI_Bcast(&split, 1, MPI_INT, 0, comm.comm);
        cdp_cpu_use_gemm_split(split);
        r->be = cdp_backend_cpu(r->threads);
    }
    FAIL_IF(!r->be, r->err);
    if (o->flush_denormals) {
        /* after cdp_backend_cpu, which sized the OpenMP pool the mode must
         * reach (options.c refuses it with another backend) */
        bad = cdp_cpu_flush_denormals(r->err, sizeof r->err);
        FAIL_IF(bad, r->err);
    }
    bad = check_numerics(r);
    if (bad)
        return bad;

    /* the model on the data's shape and classes */
    cdp_model_free(&r->model);
    r->have_model = 0;
    r->mc.input = (cdp_shape){ r->data.train.channels, r->data.train.height, r->data.train.width };
    r->mc.classes = r->data.train.classes;
    bad = cdp_model_build(&r->mc, &r->model, r->err, sizeof r->err);
    FAIL_IF(bad, r->err);
    r->have_model = 1;
    FAIL_IF(r->model.nstages != r->L, "internal error: the data changed the stage count");
    bad = cdp_model_check_backend(&r->model, r->be, r->err, sizeof r->err);
    FAIL_IF(bad, r->err);
    bad = cdp_model_check_batch(&r->model, r->N, o->batch, r->err, sizeof r->err);
    FAIL_IF(bad, r->err);

    /* zeroed: the floats between stages belong to none and stay +0 */
    const size_t n = r->model.nparams;
    r->params = calloc(n, sizeof(float));
    r->final_params = calloc(n, sizeof(float));
    r->init_params = calloc(n, sizeof(float));
    r->prev_params = calloc(n, sizeof(float));
    cdp_optim opt = cdp_optim_sgd(o->lr, o->momentum, o->weight_decay, o->lr_decay_epochs,
                                  o->lr_gamma, r->spe);
    opt.kind = (cdp_optim_kind)o->optimizer;
    opt.beta1 = o->betas[0];
    opt.beta2 = o->betas[1];
    opt.eps = o->eps;
    opt.schedule = (cdp_lr_schedule)o->lr_schedule;
    opt.warmup_steps = o->warmup_steps;
    opt.total_steps = r->total;
    const int nstate = cdp_optim_state_buffers(&opt);
    r->optim_state = calloc((size_t)nstate * n, sizeof(float));
    snprintf(r->err, sizeof r->err, "out of memory: %.3g GB for %d host copies of the model's %zu "
             "parameters (--model %.200s)", (4.0 + nstate) * (double)n * sizeof(float) / 1e9,
             4 + nstate, n, o->model);
    FAIL_IF(!r->params || !r->final_params || !r->init_params || !r->prev_params ||
            !r->optim_state, r->err);
    r->good_step = r->checked_step = -1;
    if (o->checkpoint[0]) {
        r->good[0] = malloc(n * sizeof(float));
        r->good[1] = malloc(n * sizeof(float));
        r->good[2] = malloc((size_t)nstate * n * sizeof(float));
        snprintf(r->err, sizeof r->err, "out of memory: %.3g GB for --checkpoint's copy of the "
                 "last good state (--model %.200s)",
                 (2.0 + nstate) * (double)n * sizeof(float) / 1e9, o->model);
        FAIL_IF(!r->good[0] || !r->good[1] || !r->good[2], r->err);
    }
    cdp_model_init(&r->model, o->seed, r->params);
    if (o->init_weights[0]) {
        bad = cdp_load_weights(o->init_weights, &r->model, r->params, r->err, sizeof r->err);
        FAIL_IF(bad, r->err);
    }
    memcpy(r->init_params, r->params, n * sizeof(float));

    if (o->layer_times) {
        FAIL_IF(cdp_layer_times_init(&r->lt, &r->model), "out of memory for --layer-times");
        r->model.times = &r->lt;
    }
    r->xc = (cdp_exec_config){
        .model = &r->model, .be = r->be, .comm = &comm, .N = r->N, .B = o->batch,
        .optim = opt,
        .train = &r->data.train, .seed = o->seed, .shuffle = o->shuffle,
        .trace = o->trace[0] != 0, .roles = &r->roles,
    };
    r->x = cdp_exec_create(&r->xc, r->params, r->err, sizeof r->err);
    FAIL_IF(!r->x, r->err);

    if (r->root && o->metrics[0]) {
        r->metrics = fopen(o->metrics, "w");
        if (!r->metrics)
            snprintf(r->err, sizeof r->err, "--metrics %.900s: %s", o->metrics, strerror(errno));
    }
    FAIL_IF(r->root && o->metrics[0] && !r->metrics, r->err);

    if (r->root && !o->quiet) {
        /* short lines: a terminal of 100 columns shows them whole */
        printf("cdp %s: %s, rule %s, framework %s\n", PACKAGE_VERSION, o->model,
               cdp_rule_name(o->rule), cdp_framework_name(o->framework));
        printf("  %d rank%s x %d thread%s (%s), N=%d workers x B=%d, L=%d stages\n", r->P,
               r->P > 1 ? "s" : "", r->threads, r->threads > 1 ? "s" : "", why, r->N, o->batch,
               r->L);
        printf("  data %s: %lld train, %lld test; %lld steps/epoch, %lld steps\n", r->data.name,
               (long long)r->data.train.n, (long long)r->data.test.n, (long long)r->spe,
               (long long)r->total);
        print_wrapped("  backend ", r->be->describe(), 100);
        cdp_preflight_print_hosts(stdout, &r->pf, &comm);
        if (o->flush_denormals)
            printf("  arithmetic: denormal floats flushed to zero (--flush-denormals)\n");
        /* SGD with step decay and no warm-up: the banner of before them */
        const cdp_optim *op = &r->xc.optim;
        if (op->kind != CDP_OPTIM_SGD || op->schedule != CDP_LR_STEP || op->warmup_steps) {
            if (op->kind == CDP_OPTIM_ADAMW)
                printf("  optimizer adamw: lr %g, betas %g,%g, eps %g, weight decay %g; ", op->lr,
                       op->beta1, op->beta2, op->eps, op->weight_decay);
            else
                printf("  optimizer sgd: lr %g, momentum %g, weight decay %g; ", op->lr,
                       op->momentum, op->weight_decay);
            printf("lr schedule %s, warm-up %lld steps\n", cdp_lr_schedule_name(op->schedule),
                   (long long)op->warmup_steps);
        }
        fflush(stdout);
    }

    cdp_options numerics = *o;
    numerics.workers = r->N;
    r->numerics_hash = cdp_options_numerics_hash(&numerics);
    if (o->resume[0]) {
        /* rank 0 reads the checkpoint, every rank takes its stages: the
         * state is per stage, so any framework on any number of ranks
         * resumes it */
        char path[4200];
        bad = r->root ? read_checkpoint(r, path, sizeof path) : 0;
        if (!bad && r->root && r->k > r->total)
            snprintf(r->err, sizeof r->err, "%.900s: checkpoint at step %lld is past the end of "
                     "this run (%lld steps)", path, (long long)r->k, (long long)r->total),
                bad = 1;
        FAIL_IF(bad, r->err);
        MPI_Bcast(&r->k, 1, MPI_INT64_T, 0, comm.comm);
        bcast_floats(r->params, n);
        bcast_floats(r->prev_params, n);
        bcast_floats(r->optim_state, (size_t)nstate * n);
        cdp_exec_set_state(r->x, r->k, r->params, r->k > 0 ? r->prev_params : NULL,
                           r->optim_state);
        if (r->root && !o->quiet)
            printf("resumed from %s at step %lld\n", path, (long long)r->k);
    }
    return 0;
}

/* Rank 0: the one line saying that the run diverged, what (the training
 * loss in steps k0+1..k1, or the test loss of the evaluation after step k1;
 * bad as from agreed_stop) and what to lower. */
static void report_divergence(const run *r, const char *what, int bad, int64_t k0, int64_t k1,
                              double first)
{
    const cdp_options *o = &r->o;
    char where[300] = "", ckpt[1300] = "", rule[200] = "";
    if (o->rule != CDP_RULE_DP && o->optimizer == CDP_OPTIM_ADAMW)
        snprintf(rule, sizeof rule, "%s less stable than dp at a given --lr, so lowering --lr "
                 "helps", cdp_rule_name(o->rule));
    else if (o->rule != CDP_RULE_DP)
        snprintf(rule, sizeof rule, "%s less stable than dp at a given --lr and --momentum, so "
                 "lowering --lr or --momentum helps", cdp_rule_name(o->rule));
    if (k0 >= 0 && isfinite(first))
        snprintf(where, sizeof where, "in steps %lld..%lld, first in step %lld, worker %d (the "
                 "loss of the last stage's forward)", (long long)k0 + 1, (long long)k1,
                 (long long)(first / r->N) + 1, (int)fmod(first, (double)r->N));
    else if (k0 >= 0)
        snprintf(where, sizeof where, "in steps %lld..%lld", (long long)k0 + 1, (long long)k1);
    else if (r->state_bad)   /* where: the first tensor, by offset, holding one */
        for (int t = 0; t < r->model.ntensors; t++) {
            const cdp_tensor_info *ti = &r->model.tensors[t];
            if (r->bad_index >= ti->off && r->bad_index < ti->off + ti->n)
                snprintf(where, sizeof where, "after step %lld, first in %.96s[%zu] (stage %d)",
                         (long long)k1, ti->name, r->bad_index - ti->off, ti->stage);
        }
    else
        snprintf(where, sizeof where, "after step %lld", (long long)k1);
    if (o->checkpoint[0] && k0 < 0 && !r->state_bad)   /* the evaluation: a finite state */
        snprintf(ckpt, sizeof ckpt, "; no checkpoint written of the state that evaluates so%s",
                 r->ckpt_step >= 0 ? " (the last one written is left as it was)" : "");
    else if (o->checkpoint[0] && r->good_step >= 0 && r->ckpt_step == r->good_step)
        snprintf(ckpt, sizeof ckpt, "; checkpoint %.1000s holds the last good state (step %lld)",
                 r->ckpt_path, (long long)r->ckpt_step);
    else if (o->checkpoint[0] && r->ckpt_step >= 0)
        snprintf(ckpt, sizeof ckpt, "; checkpoint %.1000s not overwritten (step %lld)",
                 r->ckpt_path, (long long)r->ckpt_step);
    else if (o->checkpoint[0])
        snprintf(ckpt, sizeof ckpt, "; checkpoint %.1000s not written: no state of this run was "
                 "finite", o->checkpoint);
    fprintf(stderr, "cdp_run: error: the %s is not finite (%s) %s: the run diverged; lower --lr "
            "(now %g)%s%s%s\n", what, bad == 2 ? "nan" : "inf", where, o->lr,
            o->rule == CDP_RULE_DP ? "" : "; the one-step gradient delay makes ", rule,
            ckpt);
}

/* Rank 0, from the second epoch on: a run whose training or test figures
 * are at chance level (a finite loss no better than guessing, accuracy no
 * better than 1.5 times chance) has collapsed.  Its numbers stay finite, so
 * nothing else would say so; under cdp-v1/cdp-v2 the one-step gradient
 * delay is the usual cause (the serial reference collapses alike).  Once
 * per run, a warning: the run goes on. */
static int at_chance(double loss, double acc, double C)
{
    return loss >= 0.9 * log(C) && acc >= 0 && acc <= 1.5 / C;
}

static void warn_collapse(run *r, const cdp_epoch_line *ln)
{
    const cdp_options *o = &r->o;
    const double C = r->model.classes, chance_loss = log(C);
    const int train = at_chance(ln->train_loss, ln->train_accuracy, C);
    /* the first epoch, the first 100 steps and the lr warm-up may be
     * anything (a slow start; a short epoch of small data; an lr near 0) */
    if (r->collapse_warned || ln->epoch < 2 || ln->step < 100 || ln->step <= o->warmup_steps ||
        !(train || at_chance(ln->test_loss, ln->test_accuracy, C)))
        return;
    r->collapse_warned = 1;
    const double loss = train ? ln->train_loss : ln->test_loss;
    const double acc = train ? ln->train_accuracy : ln->test_accuracy;
    char lower[160];
    if (o->optimizer == CDP_OPTIM_ADAMW || o->momentum == 0)
        snprintf(lower, sizeof lower, "lower --lr (now %g)", o->lr);
    else
        snprintf(lower, sizeof lower, "lower --lr (now %g) or --momentum (now %g)", o->lr,
                 o->momentum);
    fprintf(stderr, "cdp_run: warning: epoch %d: the %s is at chance level (loss %.4f, "
            "ln %g = %.4f; accuracy %.2f%%): the run has collapsed%s%s%s; %s\n", ln->epoch,
            train ? "training" : "test set", loss, C, chance_loss, 100.0 * acc,
            o->rule == CDP_RULE_DP ? "" : " (the one-step gradient delay makes ",
            o->rule == CDP_RULE_DP ? "" : cdp_rule_name(o->rule),
            o->rule == CDP_RULE_DP ? "" : " less stable than dp at the same settings)", lower);
}

/* Progress inside an epoch, on rank 0 (not with --quiet): on a terminal one
 * line rewritten after every segment; otherwise (and under mpirun) a plain
 * line at most every 30 s, so that logs of long runs show life and short
 * runs stay quiet. */
static void progress(run *r, int64_t k_end, const double ep_stats[3], double ep_time,
                     int64_t ep_steps)
{
    double sum[3];
    MPI_Reduce(ep_stats, sum, 3, MPI_DOUBLE, MPI_SUM, 0, comm.comm);
    if (!r->root || r->o.quiet || r->k >= k_end || ep_time <= 0)
        return;
    /* mpirun hands its ranks a pseudo-terminal whether or not its own output
     * is one (a log file, a pipe): under it, plain lines */
    const int tty = isatty(STDOUT_FILENO) && !getenv("OMPI_COMM_WORLD_SIZE");
    const double now = cdp_now_s();
    if (!tty && now - r->last_progress < 30.0)
        return;
    r->last_progress = now;
    const double sps = (double)ep_steps * r->N * r->o.batch / ep_time;
    const double eta = (double)(r->total - r->k) * r->N * r->o.batch / sps;
    printf("%s  step %lld/%lld  %.0f samples/s  train loss %.4f  ETA %.0f s%s", tty ? "\r" : "",
           (long long)r->k, (long long)r->total, sps, sum[2] > 0 ? sum[0] / sum[2] : 0.0, eta,
           tty ? "\033[K" : "\n");
    r->progress_shown = tty;
    fflush(stdout);
}

/* Rank 0, right after writing --metrics lines: the first write that failed
 * (a full disk), kept with its errno for the next agreed check.  0, or 1
 * once one has failed. */
static int metrics_written(run *r)
{
    if (r->metrics && !r->metrics_err[0] &&
        cdp_output_stream_check(r->metrics, "--metrics", r->o.metrics, r->metrics_err,
                                sizeof r->metrics_err))
        return 1;
    return r->metrics_err[0] != 0;
}

/* Collective, with --log-every K: after steps K, 2K, ... (segments end
 * there), rank 0 writes a --metrics line of the steps since the last one:
 * their mean training loss and accuracy over every worker, samples/s and
 * time; the window's sums are kept by every rank (st: the segment's loss
 * sum, correct count, samples). */
static void log_steps(run *r, const double st[3], double seg_time, int64_t seg_steps)
{
    const int64_t K = r->o.log_every;
    if (!K)
        return;
    for (int q = 0; q < 3; q++) r->log_stats[q] += st[q];
    r->log_time += seg_time;
    r->log_steps += seg_steps;
    if (r->k % K)
        return;
    double sum[3];
    MPI_Reduce(r->log_stats, sum, 3, MPI_DOUBLE, MPI_SUM, 0, comm.comm);
    if (r->root && r->metrics) {
        fprintf(r->metrics, "{\"log\": \"steps\", \"step\": %lld, \"steps\": %lld, "
                "\"epoch\": %lld, \"lr\": %.9g, \"train_loss\": %.9g, "
                "\"train_accuracy\": %.9g, \"samples_per_s\": %.6g, \"time_s\": %.6g}\n",
                (long long)r->k, (long long)r->log_steps, (long long)((r->k - 1) / r->spe + 1),
                cdp_optim_lr(&r->xc.optim, r->k - 1), sum[0] / sum[2], sum[1] / sum[2],
                (double)r->log_steps * r->N * r->o.batch / r->log_time, r->log_time);
        metrics_written(r);
    }
    memset(r->log_stats, 0, sizeof r->log_stats);
    r->log_time = 0;
    r->log_steps = 0;
}

/* Collective: the checkpoint of the drained state after step k (once per
 * step), gathered from the ranks holding each stage and written by rank 0,
 * then, with --keep-checkpoints M > 1, the older ones beyond M removed.
 * 0, or 1 when it could not be written (error reported). */
static int write_checkpoint(run *r, int64_t k)
{
    const cdp_options *o = &r->o;
    if (r->ckpt_step == k)
        return 0;
    cdp_exec_gather_state(r->x, k, r->params, r->prev_params, r->optim_state, 0);
    int bad = 0;
    char path[sizeof r->ckpt_path];
    cdp_checkpoint_name(o->checkpoint, o->keep_checkpoints, k, path, sizeof path);
    if (r->root) {
        bad = cdp_checkpoint_write(path, &r->model, k, r->numerics_hash, r->xc.optim.kind,
                                   r->params, r->prev_params, r->optim_state, r->err,
                                   sizeof r->err);
        if (!bad && !o->quiet)
            printf("checkpoint %s written at step %lld\n", path, (long long)k);
        char why[1024];
        if (!bad && cdp_checkpoint_prune(o->checkpoint, o->keep_checkpoints, k, why, sizeof why))
            fprintf(stderr, "cdp_run: warning: %s\n", why);
    }
    FAIL_IF(bad, r->err);
    r->ckpt_step = k;
    snprintf(r->ckpt_path, sizeof r->ckpt_path, "%s", path);
    return 0;
}

/* Whether --checkpoint-every-steps K asks for a checkpoint after step k. */
static int step_checkpoint_due(const run *r, int64_t k)
{
    const int64_t K = r->o.checkpoint_every_steps;
    return r->o.checkpoint[0] && K > 0 && k % K == 0;
}

/* 0 when every one of the n floats is finite, else 2 for a NaN, 1 for an
 * infinity (agreed_stop's codes), with *first lowered to the index of the
 * first one modulo m. */
static int not_finite(const float *a, size_t n, size_t m, size_t *first)
{
    int bad = 0;
    for (size_t i = 0; i < n; i++)
        if (!isfinite(a[i])) {
            if (i % m < *first) *first = i % m;
            bad = isnan(a[i]) ? 2 : bad ? bad : 1;
        }
    return bad;
}

/* Collective, at every segment boundary (and before the first): the
 * drained state after step r->k, this rank's stages copied to the host, is
 * checked, every value on every rank finite.  A NaN or an infinity that
 * reached the parameters or the optimizer state (a gradient's) without any
 * loss showing it (a unit no sample activates carries it) stops the run
 * here: the return value says nan (2) or inf (1).  With --checkpoint, a
 * finite state becomes the last good state (the scratch copies r->params,
 * prev_params and optim_state swap with r->good), what a divergence
 * writes: no checkpoint of a non-finite state is ever written. */
static int check_state(run *r)
{
    if (r->checked_step == r->k)
        return 0;
    const size_t n = r->model.nparams;
    const size_t ns = (size_t)cdp_optim_state_buffers(&r->xc.optim) * n;
    float *cand[3] = { r->params, r->prev_params, r->optim_state };
    memset(cand[0], 0, n * sizeof(float));   /* other ranks' stages: zero, finite */
    memset(cand[1], 0, n * sizeof(float));
    memset(cand[2], 0, ns * sizeof(float));
    cdp_exec_get_params(r->x, r->k, cand[0]);
    cdp_exec_get_params(r->x, r->k > 0 ? r->k - 1 : 0, cand[1]);
    cdp_exec_get_optim_state(r->x, cand[2]);
    size_t first = n;
    int code = 0;
    for (int j = 0; j < 3; j++) {
        int c = not_finite(cand[j], j < 2 ? n : ns, n, &first);
        if (c > code) code = c;
    }
    /* one reduction: the worst code and the lowest index over the ranks */
    double mine[2] = { code, -(double)first }, any[2];
    cdp_comm_allreduce_watched(&comm, mine, any, 2, MPI_DOUBLE, MPI_MAX, "the state check", r->k);
    r->checked_step = r->k;
    r->bad_index = (size_t)-any[1];
    if (any[0] || !r->o.checkpoint[0])
        return (int)any[0];
    r->params = r->good[0], r->prev_params = r->good[1], r->optim_state = r->good[2];
    r->good[0] = cand[0], r->good[1] = cand[1], r->good[2] = cand[2];
    r->good_step = r->k;
    return 0;
}

/* Collective, after a divergence with --checkpoint: the last good state
 * written as the checkpoint of its step, unless it is already the last
 * checkpoint written.  0, or 1 when it could not be written. */
static int write_last_good(run *r)
{
    if (!r->o.checkpoint[0] || r->good_step < 0 || r->good_step == r->ckpt_step)
        return 0;
    cdp_exec_set_state(r->x, r->good_step, r->good[0], r->good_step > 0 ? r->good[1] : NULL,
                       r->good[2]);
    return write_checkpoint(r, r->good_step);
}

/* Runs steps k..k_end-1 in segments; returns the signal that stopped them
 * (0: none), with the epoch's training statistics and time.  *bad: the
 * training loss of the segment ending at r->k, or the state after it
 * (r->state_bad), was not finite (then it stops, with *bad_k0 the
 * segment's first step).  Returns the agreed signal, 0, or -1 when a
 * checkpoint could not be written (the error is reported). */
static int train_epoch(run *r, int64_t k_end, int64_t chunk, double ep_stats[3], double *ep_time,
                       int64_t *ep_steps, int *bad, int64_t *bad_k0)
{
    const int64_t every = r->o.checkpoint[0] ? r->o.checkpoint_every_steps : 0;
    *bad = 0;
    *bad_k0 = r->k;
    if ((*bad = check_state(r))) {   /* the first: a resumed or loaded state */
        r->state_bad = 1;
        return 0;
    }
    while (r->k < k_end) {
        int64_t k1 = r->k + chunk < k_end ? r->k + chunk : k_end;
        /* --checkpoint-every-steps and --log-every: a segment also ends after
         * steps K, 2K, ... (the segmentation changes no number) */
        if (every && (r->k / every + 1) * every < k1)
            k1 = (r->k / every + 1) * every;
        if (r->o.log_every && (r->k / r->o.log_every + 1) * r->o.log_every < k1)
            k1 = (r->k / r->o.log_every + 1) * r->o.log_every;
        const int K = (int)(k1 - r->k);
        if (K != r->sched_K) {
            if (r->sched_K) cdp_schedule_free(&r->sched);
            r->sc.K = K;
            if (cdp_schedule_build(&r->sc, comm.rank, &r->sched, r->err, sizeof r->err)) {
                fprintf(stderr, "cdp_run: error: %s\n", r->err);
                MPI_Abort(comm.comm, 1);
            }
            r->sched_K = K;
        }
        double t0 = cdp_now_s();
        cdp_exec_run(r->x, &r->sched, r->k);
        double dt = cdp_now_s() - t0, dtmax;
        cdp_comm_allreduce_watched(&comm, &dt, &dtmax, 1, MPI_DOUBLE, MPI_MAX,
                                   "the end of the segment", k1 - 1);
        cdp_figures_add_segment(&r->fig, &comm, r->x, K, dtmax);
        *ep_time += dtmax;
        *ep_steps += K;
        *bad_k0 = r->k;
        r->k = k1;
        double st[3];
        int64_t ns;
        cdp_exec_take_train_stats(r->x, &st[0], &st[1], &ns);
        st[2] = (double)ns;
        for (int q = 0; q < 3; q++) ep_stats[q] += st[q];
        log_steps(r, st, dtmax, K);
        int stop = agreed_stop(st[0], bad, k1 - 1);
        if (*bad)
            return stop;
        if ((*bad = check_state(r))) {
            r->state_bad = 1;
            return stop;
        }
        if (stop)
            return stop;
        /* at the epoch's end phase_train writes it, after the evaluation */
        if (r->k < k_end && step_checkpoint_due(r, r->k) && write_checkpoint(r, r->k))
            return -1;
        progress(r, k_end, ep_stats, *ep_time, *ep_steps);
    }
    return 0;
}

/* The epochs: training, the epoch line, evaluation, checkpoints.  Returns
 * 128 + the signal when a signal stopped the run, DIVERGED when a loss was
 * not finite (no checkpoint written then). */
static int phase_train(run *r)
{
    r->last_progress = cdp_now_s();   /* plain progress lines: the first after 30 s */
    cdp_comm_set_timeout(&comm, r->o.timeout);   /* the watchdog, over the training segments */
    const cdp_options *o = &r->o;
    int eval_failed = 0, eval_bad = 0, diverged;
    int64_t bad_k0;
    /* segments of 64 steps at most, so that a signal or a diverging loss is
     * answered soon; the segmentation does not change the numbers */
    const int64_t chunk = 64;
    r->ckpt_step = -1;
    for (int e = (int)(r->k / r->spe); e < r->nepochs && r->k < r->total; e++) {
        int64_t k_end = (int64_t)(e + 1) * r->spe;
        if (k_end > r->total) k_end = r->total;
        double ep_time = 0, ep_stats[3] = { 0, 0, 0 };
        int64_t ep_steps = 0;
        const int stop = train_epoch(r, k_end, chunk, ep_stats, &ep_time, &ep_steps, &diverged,
                                     &bad_k0);
        if (stop < 0)
            return 1;
        const int64_t k = r->k;
        if (diverged) {
            if (write_last_good(r))
                return 1;
            if (r->state_bad) {
                if (r->root)
                    report_divergence(r, "model state (parameters, optimizer state)", diverged,
                                      -1, k, INFINITY);
                return DIVERGED;
            }
            /* collective: the first non-finite forward over the ranks */
            int64_t bs;
            int bw;
            double mine = cdp_exec_first_bad_loss(r->x, &bs, &bw) ? (double)bs * r->N + bw
                                                                  : INFINITY, first;
            MPI_Allreduce(&mine, &first, 1, MPI_DOUBLE, MPI_MIN, comm.comm);
            if (r->root) report_divergence(r, "training loss", diverged, bad_k0, k, first);
            return DIVERGED;
        }
        double sum[3];
        MPI_Reduce(ep_stats, sum, 3, MPI_DOUBLE, MPI_SUM, 0, comm.comm);
        int last = k == r->total || stop;
        /* --eval-every 0: never, not even at the end (a ResNet's test set costs
         * minutes); none on the way out after a signal: mpirun kills its ranks soon */
        int eval = !stop && o->eval_every && ((e + 1) % o->eval_every == 0 || last);
        if (eval)
            cdp_exec_gather_params(r->x, k, r->params, 0);
        if (r->root) {
            cdp_epoch_line line = { e + 1, k, cdp_optim_lr(&r->xc.optim, k - 1), sum[0] / sum[2],
                                    sum[1] / sum[2], -1, -1,
                                    (double)ep_steps * r->N * o->batch / ep_time, ep_time };
            r->samples_s = (double)r->fig.steps * r->N * o->batch / r->fig.train_time_s;
            if (eval) {
                if (evaluate(r->be, &r->model, r->params, &r->data.test, &line.test_loss,
                             &line.test_accuracy))
                    eval_failed = 1;
                if (!isfinite(line.test_loss))   /* not a failure of the evaluation */
                    eval_failed = 0, eval_bad = isnan(line.test_loss) ? 2 : 1;
                r->test_loss = line.test_loss;
                r->test_acc = line.test_accuracy;
            }
            if (r->progress_shown) {   /* the epoch line replaces the progress line */
                printf("\r\033[K");
                r->progress_shown = 0;
            }
            if (!o->quiet) cdp_report_epoch_text(stdout, &line, r->nepochs);
            warn_collapse(r, &line);
            if (r->metrics) cdp_report_epoch_json(r->metrics, &line);
            metrics_written(r);
        }
        FAIL_IF(eval_failed, "the test-set evaluation failed (see the message above)");
        MPI_Bcast(&eval_bad, 1, MPI_INT, 0, comm.comm);
        if (eval_bad) {
            if (r->root) report_divergence(r, "test loss at the evaluation", eval_bad, -1, k, INFINITY);
            return DIVERGED;
        }
        if (o->checkpoint[0] && (last || (o->checkpoint_every && (e + 1) % o->checkpoint_every == 0) ||
                                 step_checkpoint_due(r, k)) &&
            write_checkpoint(r, k))
            return 1;
        /* the epoch's lines (and --log-every's) reached the file: a full
         * disk stops the run here, after the checkpoint, not at its end */
        FAIL_IF(r->root && metrics_written(r), r->metrics_err);
        if (stop) {
            if (r->root) {
                const char *name = stop == SIGINT ? "SIGINT" : "SIGTERM";
                if (o->checkpoint[0])
                    fprintf(stderr, "cdp_run: %s: stopped at step %lld of %lld, checkpoint %s "
                            "written\n", name, (long long)k, (long long)r->total, r->ckpt_path);
                else
                    fprintf(stderr, "cdp_run: %s: stopped at step %lld of %lld, no checkpoint "
                            "written (no --checkpoint)\n", name, (long long)k,
                            (long long)r->total);
            }
            return 128 + stop;
        }
    }
    return 0;
}

/* --verify: the serial reference from the same start; 1 when it differs
 * more than the rule allows (err says how). */
static int verify(run *r)
{
    const cdp_options *o = &r->o;
    const cdp_model *m = &r->model;
    cdp_reference_config rc = { r->be, m, r->N, o->batch, o->rule, r->xc.optim, &r->data.train,
                                o->seed, o->shuffle, r->total };
    if (cdp_reference_run(&rc, r->init_params, r->err, sizeof r->err))
        return 1;
    size_t nd;
    double rel = cdp_max_rel_diff(r->final_params, r->init_params, m->nparams, &nd);
    printf("verify: serial reference after %lld steps: max relative difference %.3g, "
           "%zu of %zu values differ bitwise\n", (long long)r->total, rel, nd, m->nparams);
    for (int t = 0; nd && t < m->ntensors; t++) {   /* where, for the user */
        const cdp_tensor_info *ti = &m->tensors[t];
        size_t q = 0;
        while (q < ti->n && !memcmp(&r->final_params[ti->off + q], &r->init_params[ti->off + q],
                                    sizeof(float)))
            q++;
        if (q < ti->n) {
            printf("verify: first difference at %s[%zu]: %.9g vs %.9g\n", ti->name, q,
                   (double)r->final_params[ti->off + q], (double)r->init_params[ti->off + q]);
            break;
        }
    }
    int exact = o->rule != CDP_RULE_DP || o->deterministic;
    if ((exact && nd) || rel > 1e-5) {
        snprintf(r->err, sizeof r->err, "--verify: the run differs from the serial reference "
                 "(%s)", exact ? "bitwise equality expected" : "relative 1e-5 expected");
        return 1;
    }
    return 0;
}

/* The final weights, the trace, the summary, --verify. */
static int phase_results(run *r)
{
    const cdp_options *o = &r->o;
    int bad = 0;
    cdp_figures_finish(&r->fig, &comm, r->x);
    cdp_exec_gather_params(r->x, r->total, r->final_params, 0);
    if (r->root && o->save_weights[0]) {
        char step[32];
        snprintf(step, sizeof step, "%lld", (long long)r->total);
        const char *meta[] = { "format", "pt", "producer", "cdp " PACKAGE_VERSION, "rule",
                               cdp_rule_name(o->rule), "step", step, NULL };
        bad = cdp_save_weights(o->save_weights, &r->model, r->final_params, r->total, meta,
                               r->err, sizeof r->err);
    }
    FAIL_IF(bad, r->err);
    if (o->trace[0]) {
        bad = cdp_trace_write(&comm, r->x, o->trace, r->err, sizeof r->err);
        FAIL_IF(bad, r->err);
    }
    if (r->root) {
        cdp_report_summary(o->quiet ? NULL : stdout, r->metrics, &r->fig, cdp_rule_name(o->rule),
                           cdp_framework_name(o->framework), r->P, r->N, r->L, o->batch,
                           r->test_loss, r->test_acc, r->samples_s);
        metrics_written(r);
        char acc_text[32] = "none";   /* not evaluated */
        if (r->test_acc >= 0)
            snprintf(acc_text, sizeof acc_text, "%.4f", r->test_acc);
        if (o->quiet)
            printf("test_accuracy %s step_time_s %.6f\n", acc_text,
                   r->fig.steps ? r->fig.train_time_s / (double)r->fig.steps : 0.0);
    }
    if (o->layer_times) {
        cdp_report_layer_times(&comm, &r->lt, &r->model, &r->fig, o->quiet ? NULL : stdout,
                               r->metrics);
        metrics_written(r);   /* rank 0's: the other ranks have none */
        r->model.times = NULL;   /* not the serial reference's layers */
    }
    if (r->root && r->metrics) {   /* its last lines written, or the first failure */
        if (!metrics_written(r))
            cdp_output_stream_close(r->metrics, "--metrics", o->metrics, r->metrics_err,
                                    sizeof r->metrics_err);
        else
            fclose(r->metrics);
        r->metrics = NULL;
    }
    FAIL_IF(r->root && r->metrics_err[0], r->metrics_err);
    FAIL_IF(o->verify && r->root && verify(r), r->err);
    return 0;
}

static void release(run *r)
{
    if (r->metrics) fclose(r->metrics);
    if (r->sched_K) cdp_schedule_free(&r->sched);
    if (r->have_roles) cdp_schedule_free(&r->roles);
    if (r->x) cdp_exec_destroy(r->x);
    cdp_data_free(&r->data);
    cdp_preflight_free(&r->pf);
    free(r->params); free(r->final_params); free(r->init_params);
    free(r->prev_params); free(r->optim_state);
    free(r->good[0]); free(r->good[1]); free(r->good[2]);
    if (r->have_model) cdp_model_free(&r->model);
    cdp_layer_times_free(&r->lt);
}

int main(int argc, char **argv)
{
    cdp_backend_cpu_preinit(argc, argv);
    MPI_Init(&argc, &argv);
    cdp_comm_init(&comm, MPI_COMM_WORLD);
    static run r;   /* zeroed */
    r.root = comm.rank == 0;
    r.test_loss = r.test_acc = -1;
    int rc = phase_options(&r, argc, argv);
    if (!rc) rc = phase_model_and_plan(&r);
    if (!rc) rc = phase_prepare(&r);
    if (!rc) rc = phase_train(&r);
    if (!rc) rc = phase_results(&r);
    release(&r);
    cdp_comm_finalize(&comm);
    cdp_comm_free(&comm);
    MPI_Finalize();
    return rc == RUN_DONE ? 0 : rc;
}
