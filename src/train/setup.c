/* The trainer's preparation: the model as the data will shape it and
 * --plan, then the schedule's roles, the backend, the data, the model on
 * the data, the parameters (seed, --init-weights, --resume), the executor,
 * --metrics and the banner. */
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
#include "io/image_folder.h"
#include "backend/backend.h"
#include "io/checkpoint.h"
#include "util/clock.h"
#include "io/safetensors.h"
#include "exec/comm.h"
#include "io/data.h"
#include "io/image_folder.h"
#include "run/diverge_hint.h"
#include "exec/exec.h"
#include "models/model.h"
#include "models/model_file.h"
#include "run/options.h"
#include "io/output.h"
#include "sched/plan.h"
#include "run/preflight.h"
#include "exec/reference.h"
#include "models/layer_times.h"
#include "io/machine_file.h"
#include "sched/plan_machine.h"
#include "run/report.h"
#include "sched/schedule.h"
#include "exec/trace.h"
#include "trainer.h"

/* The image shape of a --data value, before it is loaded. */
static cdp_shape data_kind_shape(const char *spec)
{
    cdp_data_spec ds;
    char e[256];
    if (cdp_data_spec_parse(spec, &ds, e, sizeof e) == 0 && ds.channels > 0)
        return (cdp_shape){ ds.channels, ds.height, ds.width };
    if (cdp_data_spec_parse(spec, &ds, e, sizeof e) == 0 && !strcmp(ds.kind, "folder"))
        return (cdp_shape){ 3, ds.size, ds.size };
    if (!strncmp(spec, "cifar10", 7))
        return (cdp_shape){ 3, 32, 32 };
    return (cdp_shape){ 1, 28, 28 };
}

/* Threads per rank when --threads is not given, and why: the user's
 * OMP_NUM_THREADS (its first value) wins over cdp's own default, which is
 * the CPUs the launcher gave this rank, or the node's CPUs shared among the
 * node's ranks. */
static int default_threads(const cdp_comm *comm, const char **why)
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
    int t = avail / (comm->local_size > 0 ? comm->local_size : 1);
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

/* --plan's figures, and with --machine its prediction, on rank 0: m has
 * the plan's stages, or (uniform) it is the whole model and the plan has
 * more stages than it has blocks.  0, or -1 with r->err. */
static int print_plan(trainer *r, const cdp_sched_config *pc, const cdp_model *m, int uniform)
{
    const cdp_options *o = &r->o;
    if (cdp_plan_print(stdout, pc, uniform ? NULL : m, o->batch, r->err, sizeof r->err))
        return -1;
    if (!o->machine[0])
        return 0;
    cdp_machine mach;
    if (cdp_machine_read(o->machine, &mach, r->err, sizeof r->err))
        return -1;
    const int opt_buffers = o->optimizer == CDP_OPTIM_ADAMW ? 2 : 1;
    int bad = cdp_plan_predict_print(stdout, pc, m, uniform, o->batch, &mach, o->machine,
                                     opt_buffers, o->device_memory, r->err, sizeof r->err);
    cdp_machine_free(&mach);
    return bad;
}

/* The model as the data set will shape it (for --plan and the schedule;
 * built again on the data's own shape once it is loaded), and --plan. */
int train_model_and_plan(trainer *r)
{
    const cdp_options *o = &r->o;
    int bad;
    r->mc = (cdp_model_config){ o->model, o->stages, { 0, 0, 0 }, 0, r->N, (cdp_balance)o->balance,
                                (cdp_precision)o->precision };
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
        if (o->stages > nblocks) {
            cdp_sched_config pc = { r->N, o->stages, r->P, o->rule, o->framework, o->deterministic,
                                    o->plan_steps };
            if (r->root)
                bad = print_plan(r, &pc, &r->model, 1);
            cdp_model_free(&r->model);
            MPI_Bcast(&bad, 1, MPI_INT, 0, r->comm->comm);
            FAIL_IF(bad && r->root, r->err);
            FAIL_IF(bad, "--plan failed");
            return RUN_DONE;
        }
        cdp_model_free(&r->model);
    }
    bad = cdp_model_build(&r->mc, &r->model, r->err, sizeof r->err);
    FAIL_IF(bad, r->err);
    r->have_model = 1;
    if (o->print_model) {
        bad = r->root && cdp_model_print(stdout, &r->model);
        MPI_Bcast(&bad, 1, MPI_INT, 0, r->comm->comm);
        FAIL_IF(bad, "--print-model: cannot write to stdout");
        return RUN_DONE;
    }
    r->L = r->model.nstages;
    r->sc = (cdp_sched_config){ r->N, r->L, r->P, o->rule, o->framework, o->deterministic, 1 };
    if (o->plan) {
        r->sc.K = o->plan_steps;
        if (r->root)
            bad = print_plan(r, &r->sc, &r->model, 0);
        MPI_Bcast(&bad, 1, MPI_INT, 0, r->comm->comm);
        FAIL_IF(bad && r->root, r->err);
        FAIL_IF(bad, "--plan failed");
        return RUN_DONE;
    }
    return 0;
}

/* MPI_Bcast from rank 0 of n floats, in pieces that fit an int count. */
static void bcast_floats(MPI_Comm c, float *p, size_t n)
{
    const size_t piece = (size_t)1 << 30;
    for (size_t at = 0; at < n; at += piece)
        MPI_Bcast(p + at, (int)(n - at < piece ? n - at : piece), MPI_FLOAT, 0, c);
}

/* Rank 0: reads --resume's checkpoint into r->params, prev_params,
 * optim_state and r->k, its file in path.  --resume latest: the newest of
 * --checkpoint's files (cdp_checkpoint_list), after the temporary files of
 * dead writers are removed; a damaged one is passed over
 * with a warning for the one before it, a sound one of another run
 * (options, optimizer) is refused.  0, or -1 with r->err. */
static int read_checkpoint(trainer *r, char *path, size_t pathlen)
{
    const cdp_options *o = &r->o;
    const cdp_optim_kind kind = (cdp_optim_kind)o->optimizer;
    if (strcmp(o->resume, "latest")) {
        snprintf(path, pathlen, "%s", o->resume);
        return cdp_checkpoint_read(path, &r->model, r->numerics_hash, r->numerics_text, kind,
                                   &r->k, r->params, r->prev_params, r->optim_state, r->err,
                                   sizeof r->err) ? -1 : 0;
    }
    /* a writer killed outright (SIGKILL, a lost host) left its temporary
     * file, as large as a checkpoint: the run that takes over removes it
     * (a directory it cannot list, cdp_checkpoint_list reports) */
    char stale[4096];
    if (cdp_checkpoint_clean_stale(o->checkpoint, stale, sizeof stale, r->err,
                                   sizeof r->err) >= 0 && stale[0])
        fprintf(stderr, "cdp_run: --resume latest: %s\n", stale);
    cdp_checkpoint_file *f;
    size_t nf;
    if (cdp_checkpoint_list(o->checkpoint, &f, &nf, r->err, sizeof r->err))
        return -1;
    int rc = -1;
    for (size_t j = 0; j < nf && rc; j++) {
        snprintf(path, pathlen, "%s", f[j].path);
        rc = cdp_checkpoint_read(path, &r->model, r->numerics_hash, r->numerics_text, kind,
                                 &r->k, r->params, r->prev_params, r->optim_state, r->err,
                                 sizeof r->err);
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

/* CRC-32C of a data set's samples and labels, training then test set. */
static uint32_t data_crc32c(const cdp_data *d)
{
    const cdp_dataset *set[2] = { &d->train, &d->test };
    uint32_t crc = 0;
    for (int i = 0; i < 2; i++) {
        if (set[i]->pixels)
            crc = cdp_crc32c(crc, set[i]->pixels, (size_t)set[i]->n * (size_t)set[i]->dim);
        else    /* decoded when used: the files' names and sizes */
            crc = cdp_crc32c(crc, &set[i]->files_crc, sizeof set[i]->files_crc);
        crc = cdp_crc32c(crc, set[i]->labels, (size_t)set[i]->n * sizeof *set[i]->labels);
    }
    return crc;
}

/* Every rank computes with the same build, BLAS kernel and convolution
 * paths, or the job is refused naming what differs where (unless
 * --allow-mixed-numerics); and under mpirun across hosts, a warning when a
 * lost host would outlast --timeout.  0, or 1 after the error. */
static int check_numerics(trainer *r)
{
    char identity[CDP_IDENTITY_MAX], why[2048], warn[1024];
    cdp_preflight_identity(r->be->numerics(), identity, sizeof identity);
    int differ = cdp_preflight_numerics(&r->pf, r->comm, identity, why, sizeof why);
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
    cdp_preflight_keepalive(r->comm, r->o.timeout, warn, sizeof warn);
    if (warn[0] && !r->o.quiet)
        fputs(warn, stderr);
    return 0;
}

/* The data first: a step that cannot fit it is refused before anything
 * scales with N (the schedule, the executor).  Every rank must hold the
 * same sizes and, across ranks, the same bytes. */
static int prepare_data(trainer *r)
{
    const cdp_options *o = &r->o;
    /* plain synthetic takes the model's input size when an mlp: names it */
    int bad = cdp_data_open(o->data, o->data_dir, o->seed, (int64_t)r->N * o->batch,
                            strncmp(o->model, "mlp:", 4) ? 0 : cdp_model_in(&r->model), &r->data,
                            r->err, sizeof r->err) ||
              cdp_data_set_transforms(&r->data, &o->augment, o->norm_count, o->norm_mean,
                                      o->norm_std, r->err, sizeof r->err);
    FAIL_IF(bad, r->err);
    int64_t d[3] = { r->data.train.n, r->data.test.n, r->data.train.dim }, dmin[3], dmax[3];
    MPI_Allreduce(d, dmin, 3, MPI_INT64_T, MPI_MIN, r->comm->comm);
    MPI_Allreduce(d, dmax, 3, MPI_INT64_T, MPI_MAX, r->comm->comm);
    FAIL_IF(memcmp(dmin, dmax, sizeof d), "the ranks loaded data sets of different sizes");
    if (r->P > 1) {
        /* the same bytes, too: a node-local copy out of date would train
         * silently on other samples */
        uint32_t crc = data_crc32c(&r->data), crc0 = crc;
        MPI_Bcast(&crc0, 1, MPI_UINT32_T, 0, r->comm->comm);
        snprintf(r->err, sizeof r->err, "its %s data set%s%.600s differs from rank 0's%s%s "
                 "(CRC-32C %08x, rank 0's %08x): every rank must read the same files (a "
                 "node-local copy out of date?)", r->data.name, o->data_dir[0] ? " in " : "",
                 o->data_dir, r->comm->nhosts > 1 ? " on host " : "",
                 r->comm->nhosts > 1 ? cdp_comm_host(r->comm, 0) : "", (unsigned)crc, (unsigned)crc0);
        FAIL_IF(crc != crc0, r->err);
    }
    r->spe = r->data.train.n / ((int64_t)r->N * o->batch);
    snprintf(r->err, sizeof r->err, "one step takes %d workers x %d samples = %lld, more than the "
             "%lld training samples", r->N, o->batch, (long long)r->N * o->batch,
             (long long)r->data.train.n);
    FAIL_IF(r->spe < 1, r->err);
    r->total = o->steps ? o->steps : (int64_t)o->epochs * r->spe;
    r->nepochs = (int)((r->total + r->spe - 1) / r->spe);
    return 0;
}

/* The threads, the backend and its arithmetic, and the agreement of every
 * rank on the numerics; *why says where the thread count came from. */
static int prepare_backend(trainer *r, const char **why)
{
    const cdp_options *o = &r->o;
    *why = "--threads";
    r->threads = o->threads ? o->threads : default_threads(r->comm, why);
    const char *omp = cdp_cpu_rejected_omp_threads();
    if (omp && r->root)   /* after libgomp's own terse warning, what it means here */
        fprintf(stderr, "cdp_run: warning: OMP_NUM_THREADS=%.40s is not a thread count (a "
                "positive integer): ignored, %d thread%s per rank (%s)\n", omp, r->threads,
                r->threads == 1 ? "" : "s", *why);
    if (!strcmp(o->backend, "cuda")) {
        r->be = cdp_backend_cuda(r->comm->local_rank, r->err, sizeof r->err);
    } else {
        /* the GEMM split of rank 0's host on every host: the bits then do
         * not depend on how many CPUs the other hosts have */
        int split = r->root ? cdp_cpu_gemm_split_default() : 0;
        MPI_Bcast(&split, 1, MPI_INT, 0, r->comm->comm);
        cdp_cpu_use_gemm_split(split);
        r->be = cdp_backend_cpu(r->threads);
    }
    FAIL_IF(!r->be, r->err);
    const char *missing = cdp_backend_missing_kernel(r->be);
    if (missing)
        snprintf(r->err, sizeof r->err, "internal error: the %s backend has no %s kernel",
                 r->be->name, missing);
    FAIL_IF(missing != NULL, r->err);
    if (o->flush_denormals) {
        /* after cdp_backend_cpu, which sized the OpenMP pool the mode must
         * reach (options.c refuses it with another backend) */
        FAIL_IF(cdp_cpu_flush_denormals(r->err, sizeof r->err), r->err);
    }
    return check_numerics(r);
}

/* The model on the data's shape and classes, its host copies and initial
 * parameters (seed, then --init-weights); *opt the optimizer of the run. */
static int prepare_model(trainer *r, cdp_optim *optp)
{
    const cdp_options *o = &r->o;
    int bad;
    /* the model on the data's shape and classes */
    cdp_model_free(&r->model);
    r->have_model = 0;
    r->mc.input = (cdp_shape){ r->data.train.channels, r->data.train.height, r->data.train.width };
    r->mc.classes = r->data.train.classes;
    bad = cdp_model_build(&r->mc, &r->model, r->err, sizeof r->err);
    FAIL_IF(bad, r->err);
    r->have_model = 1;
    FAIL_IF(r->model.nstages != r->L, "internal error: the data changed the stage count");
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
    *optp = opt;
    return 0;
}

/* The executor, the --metrics file, and --layer-times' table. */
static int prepare_exec(trainer *r, const cdp_optim *opt)
{
    const cdp_options *o = &r->o;
    if (o->layer_times) {
        FAIL_IF(cdp_layer_times_init(&r->lt, &r->model), "out of memory for --layer-times");
        r->model.times = &r->lt;
    }
    r->xc = (cdp_exec_config){
        .model = &r->model, .be = r->be, .comm = r->comm, .N = r->N, .B = o->batch,
        .optim = *opt,
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
    return 0;
}

/* Rank 0's opening lines: what runs, where, on what. */
static void print_banner(const trainer *r, const char *why)
{
    const cdp_options *o = &r->o;
    /* short lines: a terminal of 100 columns shows them whole */
    printf("cdp %s: %s, rule %s, framework %s\n", PACKAGE_VERSION, o->model,
           cdp_rule_name(o->rule), cdp_framework_name(o->framework));
    printf("  %d rank%s x %d thread%s (%s), N=%d workers x B=%d, L=%d stages\n", r->P,
           r->P > 1 ? "s" : "", r->threads, r->threads > 1 ? "s" : "", why, r->N, o->batch,
           r->L);
    printf("  data %s: %lld train, %lld test; %lld steps/epoch, %lld steps\n", r->data.name,
           (long long)r->data.train.n, (long long)r->data.test.n, (long long)r->spe,
           (long long)r->total);
    const cdp_image_folder *f = r->data.train.folder;
    if (f) {
        printf("  folder: %d classes; train RandomResizedCrop(%d) + flip, val Resize(%d) + "
               "CenterCrop(%d)\n", f->classes, f->size, f->resize, f->size);
        const int dt = f->decoders ? f->decoders : r->threads;
        if (f->prefetch)
            printf("  folder: decoding on %d thread%s, %d step%s ahead\n", dt, dt > 1 ? "s" : "",
                   f->prefetch, f->prefetch > 1 ? "s" : "");
        else
            printf("  folder: decoding when taken, on the %d OpenMP thread%s (prefetch=0)\n",
                   r->threads, r->threads > 1 ? "s" : "");
        if (f->skipped)
            printf("  folder: %lld damaged file%s left out (bad=skip)\n", (long long)f->skipped,
                   f->skipped > 1 ? "s" : "");
    }
    print_wrapped("  backend ", r->be->describe(), 100);
    cdp_preflight_print_hosts(stdout, &r->pf, r->comm);
    if (o->flush_denormals)
        printf("  arithmetic: denormal floats flushed to zero (--flush-denormals)\n");
    if (o->precision == CDP_PRECISION_BF16)
        printf("  precision bf16: GEMM and convolution operands and every layer's output\n"
               "    rounded to bfloat16, activations kept in bfloat16 (float32 weights,\n"
               "    gradients, optimizer); Linear and convolution products by the\n"
               "    backend's bf16 paths (\"bf16:\" on its line), the rest by the float32\n"
               "    kernels\n");
    if (o->deterministic)   /* what it changes, so that nobody reads more into it */
        printf("  --deterministic: %s\n", o->rule == CDP_RULE_DP
                   ? "gradients summed in worker order around the ring (no MPI_Allreduce)"
                   : "nothing to change: cdp-v1 and cdp-v2 always sum in worker order");
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

/* --resume: rank 0 reads the checkpoint, every rank takes its stages: the
 * state is per stage, so any framework on any number of ranks resumes it. */
static int resume(trainer *r)
{
    const cdp_options *o = &r->o;
    const size_t n = r->model.nparams;
    const int nstate = cdp_optim_state_buffers(&r->xc.optim);
    char path[4200];
    int bad = r->root ? read_checkpoint(r, path, sizeof path) : 0;
    if (!bad && r->root && r->k > r->total)
        snprintf(r->err, sizeof r->err, "%.900s: checkpoint at step %lld is past the end of "
                 "this run (%lld steps)", path, (long long)r->k, (long long)r->total),
            bad = 1;
    FAIL_IF(bad, r->err);
    MPI_Bcast(&r->k, 1, MPI_INT64_T, 0, r->comm->comm);
    bcast_floats(r->comm->comm, r->params, n);
    bcast_floats(r->comm->comm, r->prev_params, n);
    bcast_floats(r->comm->comm, r->optim_state, (size_t)nstate * n);
    cdp_exec_set_state(r->x, r->k, r->params, r->k > 0 ? r->prev_params : NULL,
                       r->optim_state);
    if (r->root && !o->quiet)
        printf("resumed from %s at step %lld\n", path, (long long)r->k);
    return 0;
}

/* Schedule roles, backend, data, the model on the data, parameters (seed,
 * --init-weights, --resume), the executor, --metrics and the banner. */
int train_prepare(trainer *r)
{
    const cdp_options *o = &r->o;
    const char *why;
    cdp_optim opt;
    int bad = prepare_data(r);
    if (bad)
        return bad;
    /* configuration errors the schedule would find, before the executor; the
     * one-step schedule also tells the executor which stages this rank holds */
    r->sc.K = 1;
    bad = cdp_schedule_build(&r->sc, r->comm->rank, &r->roles, r->err, sizeof r->err);
    FAIL_IF(bad, r->err);
    r->have_roles = 1;
    if ((bad = prepare_backend(r, &why)) || (bad = prepare_model(r, &opt)) ||
        (bad = prepare_exec(r, &opt)))
        return bad;
    if (r->root && !o->quiet)
        print_banner(r, why);
    cdp_options numerics = *o;
    numerics.workers = r->N;
    r->numerics_hash = cdp_options_numerics_hash(&numerics);
    cdp_options_numerics_text(&numerics, r->numerics_text, sizeof r->numerics_text);
    return o->resume[0] ? resume(r) : 0;
}
