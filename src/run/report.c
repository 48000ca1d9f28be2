#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include "run/report.h"

static void reduce_i64(cdp_comm *c, int64_t *v, int n, MPI_Op op)
{
    if (c->rank == 0)
        MPI_Reduce(MPI_IN_PLACE, v, n, MPI_INT64_T, op, 0, c->comm);
    else
        MPI_Reduce(v, NULL, n, MPI_INT64_T, op, 0, c->comm);
}

void cdp_figures_add_segment(cdp_figures *f, cdp_comm *c, cdp_exec *x, int64_t steps,
                             double seconds)
{
    int n;
    const int64_t *ta = cdp_exec_tick_act(x, &n);
    const int64_t *tb = cdp_exec_tick_bytes(x, &n);
    int64_t *buf = malloc(sizeof(int64_t) * 2 * (size_t)n);
    if (!buf) abort();
    memcpy(buf, ta, sizeof(int64_t) * (size_t)n);
    memcpy(buf + n, tb, sizeof(int64_t) * (size_t)n);
    reduce_i64(c, buf, 2 * n, MPI_SUM);
    if (c->rank == 0) {
        for (int t = 0; t < n; t++) {
            if (buf[t] > f->peak_activation_bytes) f->peak_activation_bytes = buf[t];
            if (buf[n + t] > f->bytes_sent_peak_tick) f->bytes_sent_peak_tick = buf[n + t];
            f->bytes_sent_total += buf[n + t];
        }
        f->ticks += n;
        f->train_time_s += seconds;
        f->steps += steps;
    }
    free(buf);
}

void cdp_figures_finish(cdp_figures *f, cdp_comm *c, cdp_exec *x)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    int64_t mx[6] = { cdp_exec_act_peak(x), cdp_exec_act_reserved_peak(x),
                      cdp_exec_model_state_bytes(x), (int64_t)ru.ru_maxrss * 1024,
                      cdp_exec_workspace_bytes(x), cdp_exec_model_state_bytes_scheduled(x) };
    int64_t coll = c->collectives;
    double wait = cdp_exec_data_wait_s(x);
    if (c->rank == 0)
        MPI_Reduce(MPI_IN_PLACE, &wait, 1, MPI_DOUBLE, MPI_MAX, 0, c->comm);
    else
        MPI_Reduce(&wait, NULL, 1, MPI_DOUBLE, MPI_MAX, 0, c->comm);
    f->data_wait_s = wait;
    reduce_i64(c, mx, 6, MPI_MAX);
    reduce_i64(c, &coll, 1, MPI_SUM);
    if (c->rank == 0) {
        f->peak_activation_bytes_per_rank = mx[0];
        f->activation_reserved_per_rank = mx[1];
        f->model_state_bytes_per_rank = mx[2];
        f->peak_rss_bytes = mx[3];
        f->workspace_bytes_per_rank = mx[4];
        f->model_state_scheduled_per_rank = mx[5];
        f->collective_calls = coll;
    }
}

void cdp_report_epoch_text(FILE *f, const cdp_epoch_line *e, int epochs)
{
    /* under 100 columns: train and test as loss/accuracy pairs */
    if (e->epoch_steps > 0 && e->epoch_steps < e->steps_per_epoch)
        /* a part of the epoch: said so, in place of the step (which follows
         * from it) to stay under 100 columns */
        fprintf(f, "epoch %d/%d (%lld of %lld steps)", e->epoch, epochs,
                (long long)e->epoch_steps, (long long)e->steps_per_epoch);
    else
        fprintf(f, "epoch %3d/%d step %7lld", e->epoch, epochs, (long long)e->step);
    fprintf(f, " lr %.4g  train %.4f/%.2f%%", e->lr, e->train_loss, 100.0 * e->train_accuracy);
    if (e->test_accuracy >= 0)
        fprintf(f, "  test %.4f/%.2f%%", e->test_loss, 100.0 * e->test_accuracy);
    fprintf(f, "  %.0f samples/s %.1f s\n", e->samples_per_s, e->time_s);
    fflush(f);
}

void cdp_report_epoch_json(FILE *f, const cdp_epoch_line *e)
{
    fprintf(f, "{\"epoch\": %d, \"step\": %lld, \"lr\": %.9g, \"train_loss\": %.9g, "
            "\"train_accuracy\": %.9g", e->epoch, (long long)e->step, e->lr, e->train_loss,
            e->train_accuracy);
    if (e->test_accuracy >= 0)
        fprintf(f, ", \"test_loss\": %.9g, \"test_accuracy\": %.9g", e->test_loss, e->test_accuracy);
    else
        fprintf(f, ", \"test_loss\": null, \"test_accuracy\": null");
    fprintf(f, ", \"samples_per_s\": %.6g, \"time_s\": %.6g}\n", e->samples_per_s, e->time_s);
    fflush(f);
}

static void human(char *buf, size_t n, double bytes)
{
    const char *u[] = { "B", "KiB", "MiB", "GiB", "TiB" };
    int k = 0;
    while (bytes >= 1024 && k < 4) { bytes /= 1024; k++; }
    snprintf(buf, n, k ? "%.2f %s" : "%.0f %s", bytes, u[k]);
}

void cdp_report_summary(FILE *text, FILE *json, const cdp_figures *fig, const char *rule,
                        const char *framework, int ranks, int N, int L, int B,
                        double test_loss, double test_accuracy, double samples_per_s)
{
    double step_time = fig->steps ? fig->train_time_s / (double)fig->steps : 0;
    double mean_tick = fig->ticks ? (double)fig->bytes_sent_total / (double)fig->ticks : 0;
    double coll_per_step = fig->steps ? (double)fig->collective_calls / (double)fig->steps : 0;
    if (text) {
        char a[32], b[32], c[32], d[32], e[32], g[32], h[32], gs[32];
        human(a, sizeof a, (double)fig->peak_activation_bytes);
        human(b, sizeof b, (double)fig->peak_activation_bytes_per_rank);
        human(c, sizeof c, (double)fig->bytes_sent_total);
        human(d, sizeof d, (double)fig->bytes_sent_peak_tick);
        human(e, sizeof e, mean_tick);
        human(g, sizeof g, (double)fig->model_state_bytes_per_rank);
        human(gs, sizeof gs, (double)fig->model_state_scheduled_per_rank);
        human(h, sizeof h, (double)fig->peak_rss_bytes);
        fprintf(text,
                "summary: rule %s, framework %s, %d rank%s, N=%d workers, L=%d stages, B=%d\n"
                "  peak activation bytes (all ranks, one tick) %14lld  (%s)\n"
                "  peak activation bytes per rank              %14lld  (%s)\n"
                "  model state bytes per rank, scheduled       %14lld  (%s)\n"
                "  model state bytes per rank, measured        %14lld  (%s, varies by run)\n"
                "  workspace bytes per rank (not activations)  %14lld\n"
                "  bytes sent, total                           %14lld  (%s)\n"
                "  bytes sent, peak tick (all ranks)           %14lld  (%s)\n"
                "  bytes sent, mean tick                       %14.0f  (%s)\n"
                "  collective calls in the training loop       %14lld  (%.3g per step)\n"
                "  peak RSS per rank                           %14lld  (%s)\n"
                "  step time                                   %14.6f s over %lld steps\n"
                "  throughput                                  %14.0f samples/s\n",
                rule, framework, ranks, ranks == 1 ? "" : "s", N, L, B,
                (long long)fig->peak_activation_bytes, a,
                (long long)fig->peak_activation_bytes_per_rank, b,
                (long long)fig->model_state_scheduled_per_rank, gs,
                (long long)fig->model_state_bytes_per_rank, g,
                (long long)fig->workspace_bytes_per_rank,
                (long long)fig->bytes_sent_total, c, (long long)fig->bytes_sent_peak_tick, d,
                mean_tick, e, (long long)fig->collective_calls, coll_per_step,
                (long long)fig->peak_rss_bytes, h, step_time, (long long)fig->steps,
                samples_per_s);
        if (fig->data_wait_s >= 0)
            fprintf(text, "  waiting for decoded images (max rank)       %14.6f s (%.1f%% of the "
                    "training time)\n", fig->data_wait_s,
                    fig->train_time_s > 0 ? 100 * fig->data_wait_s / fig->train_time_s : 0.0);
        if (test_accuracy >= 0)
            fprintf(text, "  test accuracy %.2f%%, test loss %.4f\n", 100 * test_accuracy, test_loss);
        fflush(text);
    }
    if (json) {
        fprintf(json,
                "{\"summary\": true, \"rule\": \"%s\", \"framework\": \"%s\", \"ranks\": %d, "
                "\"workers\": %d, \"stages\": %d, \"batch\": %d, \"steps\": %lld, "
                "\"peak_activation_bytes\": %lld, \"peak_activation_bytes_per_rank\": %lld, "
                "\"activation_reserved_bytes_per_rank\": %lld, "
                "\"model_state_bytes_per_rank\": %lld, "
                "\"model_state_bytes_per_rank_scheduled\": %lld, \"workspace_bytes_per_rank\": %lld, "
                "\"bytes_sent_total\": %lld, "
                "\"bytes_sent_peak_tick\": %lld, \"bytes_sent_mean_tick\": %.6g, \"ticks\": %lld, "
                "\"collective_calls\": %lld, \"collective_calls_per_step\": %.6g, "
                "\"peak_rss_bytes\": %lld, \"step_time_s\": %.9g, \"samples_per_s\": %.6g, ",
                rule, framework, ranks, N, L, B, (long long)fig->steps,
                (long long)fig->peak_activation_bytes, (long long)fig->peak_activation_bytes_per_rank,
                (long long)fig->activation_reserved_per_rank,
                (long long)fig->model_state_bytes_per_rank,
                (long long)fig->model_state_scheduled_per_rank,
                (long long)fig->workspace_bytes_per_rank,
                (long long)fig->bytes_sent_total,
                (long long)fig->bytes_sent_peak_tick, mean_tick, (long long)fig->ticks,
                (long long)fig->collective_calls, coll_per_step, (long long)fig->peak_rss_bytes,
                step_time, samples_per_s);
        if (fig->data_wait_s >= 0)
            fprintf(json, "\"data_wait_s\": %.9g, ", fig->data_wait_s);
        if (test_accuracy >= 0)
            fprintf(json, "\"test_loss\": %.9g, \"test_accuracy\": %.9g}\n", test_loss, test_accuracy);
        else
            fprintf(json, "\"test_loss\": null, \"test_accuracy\": null}\n");
        fflush(json);
    }
}
