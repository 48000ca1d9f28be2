/* cdp_run: trains an MLP with dp, cdp-v1 or cdp-v2 over MPI.
 * Every rank parses the same options, loads the same data and builds its
 * own instruction list; any failure is agreed on by all ranks, reported
 * once (by the lowest failing rank) and ends every rank with exit code 1. */
#include <errno.h>
#include <math.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <mpi.h>
#include "config.h"
#include "cdp/backend.h"
#include "cdp/checkpoint.h"
#include "cdp/ckpt.h"
#include "cdp/comm.h"
#include "cdp/data.h"
#include "cdp/exec.h"
#include "cdp/model.h"
#include "cdp/options.h"
#include "cdp/plan.h"
#include "cdp/reference.h"
#include "cdp/report.h"
#include "cdp/schedule.h"
#include "cdp/trace.h"

static cdp_comm comm;
/* SIGTERM and SIGINT: the first one asks every rank to stop at the next
 * segment boundary (checkpoint written when --checkpoint is given) and to
 * exit with 128 + the signal; the handler then resets itself, so a second
 * one ends the process at once. */
static volatile sig_atomic_t got_signal;

static void on_signal(int sig)
{
    if (!got_signal)
        got_signal = sig;
}

static void catch_stop_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESETHAND | SA_RESTART;   /* reads and writes carry on */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
}

/* The signal any rank received (SIGTERM before SIGINT), 0 for none:
 * collective, so that every rank stops at the same boundary. */
static int agreed_signal(void)
{
    int mine = got_signal, any;
    MPI_Allreduce(&mine, &any, 1, MPI_INT, MPI_MAX, comm.comm);
    return any;
}

/* 1 when any rank failed; the lowest failing rank prints its message. */
static int any_failed(int failed, const char *msg)
{
    int key = failed ? comm.rank : comm.size, lowest;
    MPI_Allreduce(&key, &lowest, 1, MPI_INT, MPI_MIN, comm.comm);
    if (lowest == comm.size)
        return 0;
    if (comm.rank == lowest)
        fprintf(stderr, "cdp_run: error: %s\n", msg);
    return 1;
}

#define FAIL_IF(cond, msg) do { if (any_failed((cond), (msg))) { MPI_Finalize(); return 1; } } while (0)

static double wall(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

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

static int default_threads(void)
{
    cpu_set_t set;
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    int avail = (int)online;
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        avail = CPU_COUNT(&set);
    if (avail < online)          /* bound by the launcher: use what we were given */
        return avail > 0 ? avail : 1;
    int t = avail / (comm.local_size > 0 ? comm.local_size : 1);
    return t > 0 ? t : 1;
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

int main(int argc, char **argv)
{
    cdp_backend_cpu_preinit(argc, argv);
    MPI_Init(&argc, &argv);
    cdp_comm_init(&comm, MPI_COMM_WORLD);
    const int root = comm.rank == 0;
    char err[1024] = "";

    cdp_options o;
    cdp_options_defaults(&o);
    int bad = cdp_options_parse(&o, argc, argv, err, sizeof err);
    FAIL_IF(bad, err);
    catch_stop_signals();   /* from now on SIGTERM/SIGINT mean: stop (and checkpoint) */
    if (o.help || o.version) {
        if (root) {
            if (o.help) cdp_options_help(stdout);
            else printf("cdp_run (%s) %s\n", PACKAGE_NAME, PACKAGE_VERSION);
        }
        MPI_Finalize();
        return 0;
    }
    bad = cdp_options_check_outputs(&o, err, sizeof err);   /* before anything is written */
    FAIL_IF(bad, err);
    /* the same options on every rank, or nothing */
    uint64_t h = cdp_options_hash(&o), hmin, hmax;
    MPI_Allreduce(&h, &hmin, 1, MPI_UINT64_T, MPI_MIN, comm.comm);
    MPI_Allreduce(&h, &hmax, 1, MPI_UINT64_T, MPI_MAX, comm.comm);
    FAIL_IF(hmin != hmax, "the ranks were started with different options");

    const int P = comm.size;
    const int N = o.workers ? o.workers : (P > 4 ? P : 4);
    /* the model as the data set will shape it (for --plan and the
     * schedule); built again below on the data's own shape */
    cdp_model model;
    cdp_model_config mc = { o.model, o.stages, { 0, 0, 0 }, 0, N, (cdp_balance)o.balance };
    if (strncmp(o.model, "mlp:", 4) != 0)   /* an mlp: names its own input */
        mc.input = data_kind_shape(o.data);
    if (o.plan && o.stages > 0) {
        /* a plan may reason about more stages than the model has blocks:
         * its figures are then in stage-activation units */
        cdp_model_config one = mc;
        one.stages = 0;
        bad = cdp_model_build(&one, &model, err, sizeof err);
        FAIL_IF(bad, err);
        if (o.stages > model.nblocks) {
            cdp_sched_config pc = { N, o.stages, P, o.rule, o.framework, o.deterministic, o.plan_steps };
            if (root)
                bad = cdp_plan_print(stdout, &pc, NULL, o.batch, err, sizeof err);
            MPI_Bcast(&bad, 1, MPI_INT, 0, comm.comm);
            FAIL_IF(bad && root, err);
            FAIL_IF(bad, "--plan failed");
            MPI_Finalize();
            return 0;
        }
        cdp_model_free(&model);
    }
    bad = cdp_model_build(&mc, &model, err, sizeof err);
    FAIL_IF(bad, err);
    const int L = model.nstages;
    cdp_sched_config sc = { N, L, P, o.rule, o.framework, o.deterministic, 1 };

    if (o.plan) {
        sc.K = o.plan_steps;
        if (root)
            bad = cdp_plan_print(stdout, &sc, &model, o.batch, err, sizeof err);
        MPI_Bcast(&bad, 1, MPI_INT, 0, comm.comm);
        FAIL_IF(bad && root, err);
        FAIL_IF(bad, "--plan failed");
        MPI_Finalize();
        return 0;
    }
    /* configuration errors the schedule would find, before loading data; the
     * one-step schedule also tells the executor which stages this rank holds */
    cdp_schedule roles;
    sc.K = 1;
    bad = cdp_schedule_build(&sc, comm.rank, &roles, err, sizeof err);
    FAIL_IF(bad, err);
    snprintf(err, sizeof err, "--checkpoint and --resume support --framework replicated only in this version");
    FAIL_IF((o.checkpoint[0] || o.resume[0]) && o.framework != CDP_FW_REPLICATED, err);

    const int threads = o.threads ? o.threads : default_threads();
    const cdp_backend *be = NULL;
    if (!strcmp(o.backend, "cuda"))
        be = cdp_backend_cuda(comm.local_rank, err, sizeof err);
    else
        be = cdp_backend_cpu(threads);
    FAIL_IF(!be, err);

    cdp_data data;
    memset(&data, 0, sizeof data);
    /* plain synthetic takes the model's input size when an mlp: names it */
    bad = cdp_data_open(o.data, o.data_dir, o.seed, (int64_t)N * o.batch,
                        strncmp(o.model, "mlp:", 4) ? 0 : cdp_model_in(&model), &data, err,
                        sizeof err) ||
          cdp_data_set_transforms(&data, &o.augment, o.norm_count, o.norm_mean, o.norm_std, err,
                                  sizeof err);
    FAIL_IF(bad, err);
    /* the model on the data's shape and classes */
    cdp_model_free(&model);
    mc.input = (cdp_shape){ data.train.channels, data.train.height, data.train.width };
    mc.classes = data.train.classes;
    bad = cdp_model_build(&mc, &model, err, sizeof err);
    FAIL_IF(bad, err);
    FAIL_IF(model.nstages != L, "internal error: the data changed the stage count");
    bad = cdp_model_check_backend(&model, be, err, sizeof err);
    FAIL_IF(bad, err);
    {
        int64_t d[3] = { data.train.n, data.test.n, data.train.dim }, dmin[3], dmax[3];
        MPI_Allreduce(d, dmin, 3, MPI_INT64_T, MPI_MIN, comm.comm);
        MPI_Allreduce(d, dmax, 3, MPI_INT64_T, MPI_MAX, comm.comm);
        FAIL_IF(memcmp(dmin, dmax, sizeof d), "the ranks loaded data sets of different sizes");
    }
    const int64_t spe = data.train.n / ((int64_t)N * o.batch);
    snprintf(err, sizeof err, "one step takes %d workers x %d samples = %lld, more than the "
             "%lld training samples", N, o.batch, (long long)N * o.batch, (long long)data.train.n);
    FAIL_IF(spe < 1, err);
    const int64_t total = o.steps ? o.steps : (int64_t)o.epochs * spe;
    const int nepochs = (int)((total + spe - 1) / spe);

    /* zeroed: the floats between stages belong to none and stay +0 */
    float *params = calloc(model.nparams, sizeof(float));
    float *final_params = calloc(model.nparams, sizeof(float));
    float *init_params = calloc(model.nparams, sizeof(float));
    if (!params || !final_params || !init_params) abort();
    cdp_model_init(&model, o.seed, params);
    if (o.init_weights[0]) {
        bad = cdp_load_weights(o.init_weights, &model, params, err, sizeof err);
        FAIL_IF(bad, err);
    }
    memcpy(init_params, params, model.nparams * sizeof(float));

    cdp_exec_config xc = {
        .model = &model, .be = be, .comm = &comm, .N = N, .B = o.batch,
        .sgd = { o.lr, o.momentum, o.weight_decay, o.lr_decay_epochs, o.lr_gamma, spe },
        .train = &data.train, .seed = o.seed, .shuffle = o.shuffle, .trace = o.trace[0] != 0,
        .roles = &roles,
    };
    cdp_exec *x = cdp_exec_create(&xc, params, err, sizeof err);
    FAIL_IF(!x, err);

    FILE *metrics = NULL;
    if (root && o.metrics[0]) {
        metrics = fopen(o.metrics, "w");
        if (!metrics) snprintf(err, sizeof err, "--metrics %.900s: %s", o.metrics, strerror(errno));
    }
    FAIL_IF(root && o.metrics[0] && !metrics, err);

    if (root && !o.quiet) {
        printf("cdp %s: rule %s, framework %s, %d rank%s x %d thread%s, N=%d workers x B=%d, "
               "L=%d stages, %s\n", PACKAGE_VERSION, cdp_rule_name(o.rule),
               cdp_framework_name(o.framework), P, P > 1 ? "s" : "", threads,
               threads > 1 ? "s" : "", N, o.batch, L, o.model);
        printf("data %s: %lld train, %lld test; %lld steps/epoch, %lld steps; backend %s\n",
               data.name, (long long)data.train.n, (long long)data.test.n, (long long)spe,
               (long long)total, be->describe());
        fflush(stdout);
    }

    cdp_figures fig;
    memset(&fig, 0, sizeof fig);
    cdp_schedule sched;
    memset(&sched, 0, sizeof sched);
    int sched_K = 0;
    double test_loss = -1, test_acc = -1, samples_s = 0;
    int64_t k = 0;
    int eval_failed = 0;

    cdp_options numerics = o;
    numerics.workers = N;
    const uint64_t numerics_hash = cdp_options_numerics_hash(&numerics);
    float *prev_params = calloc(model.nparams, sizeof(float));
    float *momentum = calloc(model.nparams, sizeof(float));
    if (!prev_params || !momentum) abort();
    if (o.resume[0]) {
        bad = cdp_checkpoint_read(o.resume, &model, numerics_hash, &k, params, prev_params,
                                  momentum, err, sizeof err);
        if (!bad && k > total)
            snprintf(err, sizeof err, "%.900s: checkpoint at step %lld is past the end of this run "
                     "(%lld steps)", o.resume, (long long)k, (long long)total), bad = 1;
        FAIL_IF(bad, err);
        cdp_exec_set_state(x, k, params, k > 0 ? prev_params : NULL, momentum);
        if (root && !o.quiet)
            printf("resumed from %s at step %lld\n", o.resume, (long long)k);
    }
    /* with checkpoints, segments are short so that SIGTERM is answered soon */
    const int64_t chunk = o.checkpoint[0] ? 64 : spe;

    for (int e = (int)(k / spe); e < nepochs && k < total; e++) {
        int64_t k_end = (int64_t)(e + 1) * spe;
        if (k_end > total) k_end = total;
        double ep_time = 0, ep_stats[3] = { 0, 0, 0 };
        int64_t ep_steps = 0;
        int stop = 0;
        while (k < k_end && !stop) {
            int64_t k1 = k + chunk < k_end ? k + chunk : k_end;
            const int K = (int)(k1 - k);
            if (K != sched_K) {
                if (sched_K) cdp_schedule_free(&sched);
                sc.K = K;
                if (cdp_schedule_build(&sc, comm.rank, &sched, err, sizeof err)) {
                    fprintf(stderr, "cdp_run: error: %s\n", err);
                    MPI_Abort(comm.comm, 1);
                }
                sched_K = K;
            }
            double t0 = wall();
            cdp_exec_run(x, &sched, k);
            double dt = wall() - t0, dtmax;
            MPI_Allreduce(&dt, &dtmax, 1, MPI_DOUBLE, MPI_MAX, comm.comm);
            cdp_figures_add_segment(&fig, &comm, x, K, dtmax);
            ep_time += dtmax;
            ep_steps += K;
            k = k1;
            double st[3];
            int64_t ns;
            cdp_exec_take_train_stats(x, &st[0], &st[1], &ns);
            st[2] = (double)ns;
            for (int q = 0; q < 3; q++) ep_stats[q] += st[q];
            stop = agreed_signal();
        }
        double sum[3];
        MPI_Reduce(ep_stats, sum, 3, MPI_DOUBLE, MPI_SUM, 0, comm.comm);
        int last = k == total || stop;
        /* --eval-every 0: never, not even at the end (a ResNet's test set costs
         * minutes); none on the way out after a signal: mpirun kills its ranks soon */
        int eval = !stop && o.eval_every && ((e + 1) % o.eval_every == 0 || last);
        if (eval)
            cdp_exec_gather_params(x, k, params, 0);
        if (root) {
            cdp_epoch_line line = { e + 1, k, cdp_sgd_lr(&xc.sgd, k - 1), sum[0] / sum[2],
                                    sum[1] / sum[2], -1, -1,
                                    (double)ep_steps * N * o.batch / ep_time, ep_time };
            samples_s = (double)fig.steps * N * o.batch / fig.train_time_s;
            if (eval) {
                if (evaluate(be, &model, params, &data.test, &line.test_loss, &line.test_accuracy))
                    eval_failed = 1;
                test_loss = line.test_loss;
                test_acc = line.test_accuracy;
            }
            if (!o.quiet) cdp_report_epoch_text(stdout, &line, nepochs);
            if (metrics) cdp_report_epoch_json(metrics, &line);
        }
        FAIL_IF(eval_failed, "the test-set evaluation failed (see the message above)");
        if (o.checkpoint[0] && (last || (o.checkpoint_every && (e + 1) % o.checkpoint_every == 0))) {
            bad = 0;
            if (root) {
                cdp_exec_get_params(x, k, params);
                cdp_exec_get_params(x, k > 0 ? k - 1 : 0, prev_params);
                cdp_exec_get_momentum(x, momentum);
                bad = cdp_checkpoint_write(o.checkpoint, &model, k, numerics_hash, params,
                                           prev_params, momentum, err, sizeof err);
                if (!bad && !o.quiet)
                    printf("checkpoint %s written at step %lld\n", o.checkpoint, (long long)k);
            }
            FAIL_IF(bad, err);
        }
        if (stop) {
            if (root) {
                if (o.checkpoint[0])
                    fprintf(stderr, "cdp_run: %s: stopped at step %lld of %lld, checkpoint %s "
                            "written\n", stop == SIGINT ? "SIGINT" : "SIGTERM", (long long)k,
                            (long long)total, o.checkpoint);
                else
                    fprintf(stderr, "cdp_run: %s: stopped at step %lld of %lld, no checkpoint "
                            "written (no --checkpoint)\n", stop == SIGINT ? "SIGINT" : "SIGTERM",
                            (long long)k, (long long)total);
            }
            if (metrics) fclose(metrics);
            cdp_exec_destroy(x);
            MPI_Finalize();
            return 128 + stop;
        }
    }
    cdp_figures_finish(&fig, &comm, x);
    cdp_exec_gather_params(x, total, final_params, 0);
    free(prev_params);
    free(momentum);

    bad = 0;
    if (root && o.save_weights[0]) {
        char step[32];
        snprintf(step, sizeof step, "%lld", (long long)total);
        const char *meta[] = { "format", "pt", "producer", "cdp " PACKAGE_VERSION, "rule",
                               cdp_rule_name(o.rule), "step", step, NULL };
        bad = cdp_save_weights(o.save_weights, &model, final_params, total, meta, err, sizeof err);
    }
    FAIL_IF(bad, err);
    if (o.trace[0]) {
        bad = cdp_trace_write(&comm, x, o.trace, err, sizeof err);
        FAIL_IF(bad, err);
    }
    if (root) {
        cdp_report_summary(o.quiet ? NULL : stdout, metrics, &fig, cdp_rule_name(o.rule),
                           cdp_framework_name(o.framework), P, N, L, o.batch, test_loss, test_acc,
                           samples_s);
        char acc_text[32] = "none";   /* not evaluated */
        if (test_acc >= 0)
            snprintf(acc_text, sizeof acc_text, "%.4f", test_acc);
        if (o.quiet)
            printf("test_accuracy %s step_time_s %.6f\n", acc_text,
                   fig.steps ? fig.train_time_s / (double)fig.steps : 0.0);
    }
    int verify_failed = 0;
    if (o.verify && root) {
        cdp_reference_config rc = { be, &model, N, o.batch, o.rule, xc.sgd, &data.train,
                                    o.seed, o.shuffle, total };
        if (cdp_reference_run(&rc, init_params, err, sizeof err)) {
            verify_failed = 1;
        } else {
            size_t nd;
            double rel = cdp_max_rel_diff(final_params, init_params, model.nparams, &nd);
            printf("verify: serial reference after %lld steps: max relative difference %.3g, "
                   "%zu of %zu values differ bitwise\n", (long long)total, rel, nd, model.nparams);
            for (int t = 0; nd && t < model.ntensors; t++) {   /* where, for the user */
                const cdp_tensor_info *ti = &model.tensors[t];
                size_t q = 0;
                while (q < ti->n && !memcmp(&final_params[ti->off + q], &init_params[ti->off + q],
                                            sizeof(float)))
                    q++;
                if (q < ti->n) {
                    printf("verify: first difference at %s[%zu]: %.9g vs %.9g\n", ti->name, q,
                           (double)final_params[ti->off + q], (double)init_params[ti->off + q]);
                    break;
                }
            }
            int exact = o.rule != CDP_RULE_DP || o.deterministic;
            if ((exact && nd) || rel > 1e-5) {
                snprintf(err, sizeof err, "--verify: the run differs from the serial reference "
                         "(%s)", exact ? "bitwise equality expected" : "relative 1e-5 expected");
                verify_failed = 1;
            }
        }
    }
    FAIL_IF(verify_failed, err);
    if (metrics) fclose(metrics);
    if (sched_K) cdp_schedule_free(&sched);
    cdp_schedule_free(&roles);
    cdp_exec_destroy(x);
    cdp_data_free(&data);
    free(params); free(final_params); free(init_params);
    cdp_model_free(&model);
    MPI_Finalize();
    return 0;
}
