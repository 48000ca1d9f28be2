/* --layer-times: the rows of every rank added up on rank 0 and printed, a
 * table on the terminal and "layer_times" JSON lines for --metrics. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "io/machine_file.h"
#include "models/layer_times.h"
#include "models/model.h"
#include "nn/nn.h"
#include "run/report.h"

/* ms per call, or 0 without calls */
static double per_call_ms(double s, double n)
{
    return n > 0 ? 1e3 * s / n : 0.0;
}

#define NAME_W 46   /* "encoder.layers.encoder_layer_11.self_attention" */

static void row_text(FILE *f, const char *index, const char *name, const char *kind,
                     const char *out, const double *s, const double *n, double total)
{
    char shown[NAME_W + 1];
    size_t len = strlen(name);
    if (len > NAME_W)   /* the end of a path tells layers apart */
        snprintf(shown, sizeof shown, "...%s", name + len - (NAME_W - 3));
    else
        snprintf(shown, sizeof shown, "%s", name);
    fprintf(f, "  %5s  %-46s %-13s %-13s %9.3f %9.3f %6.1f%%\n", index, shown, kind, out,
            per_call_ms(s[0], n[0]), per_call_ms(s[1], n[1]),
            total > 0 ? 100 * (s[0] + s[1]) / total : 0.0);
}

static void row_json(FILE *f, int index, const char *name, const char *kind, const cdp_shape *out,
                     const double *s, const double *n)
{
    if (index < 0) {   /* the loss, the optimizer: one direction */
        fprintf(f, "{\"log\": \"layer_times\", \"kind\": \"%s\", \"s\": %.9g, "
                "\"calls\": %.0f}\n", kind, s[0], n[0]);
        return;
    }
    fprintf(f, "{\"log\": \"layer_times\", \"index\": %d, \"name\": \"%s\", "
            "\"kind\": \"%s\", \"out\": [%d, %d, %d], \"fwd_s\": %.9g, \"fwd_calls\": %.0f, "
            "\"bwd_s\": %.9g, \"bwd_calls\": %.0f}\n", index, name, kind, out->c, out->h, out->w,
            s[0], n[0], s[1], n[1]);
}

typedef struct kind_total {
    const char *kind;
    double s;
} kind_total;

static int by_time_desc(const void *a, const void *b)
{
    double x = ((const kind_total *)a)->s, y = ((const kind_total *)b)->s;
    return (x < y) - (x > y);
}

/* --layer-times-out: the rows per call as a machine file.  The network
 * part holds the job's ranks per host and placeholder links (1 us and
 * 5 GB/s inside a host, 50 us and 1 Gbit/s between hosts) to be edited:
 * a training run does not measure its network. */
static int write_machine(const char *path, const double *s, const double *n, const cdp_model *m,
                         int B, double start_s, const cdp_comm *c, char *err, size_t errlen)
{
    cdp_machine mach;
    memset(&mach, 0, sizeof mach);
    snprintf(mach.model, sizeof mach.model, "%s", m->name);
    mach.input[0] = m->input.c;
    mach.input[1] = m->input.h;
    mach.input[2] = m->input.w;
    mach.batch = B;
    mach.start_s = start_s;
    mach.nlayers = m->nlayers;
    mach.fwd_s = calloc((size_t)m->nlayers + 1, sizeof(double));
    mach.bwd_s = calloc((size_t)m->nlayers + 1, sizeof(double));
    if (!mach.fwd_s || !mach.bwd_s) abort();
    double busy = 0;   /* one micro-batch's compute, all layers */
    for (int j = 0; j < m->nlayers; j++) {
        mach.fwd_s[j] = n[2 * j] > 0 ? s[2 * j] / n[2 * j] : 0.0;
        mach.bwd_s[j] = n[2 * j + 1] > 0 ? s[2 * j + 1] / n[2 * j + 1] : 0.0;
        busy += mach.fwd_s[j] + mach.bwd_s[j];
    }
    const int lo = 2 * CDP_LT_LOSS(m), op = 2 * CDP_LT_OPTIMIZER(m);
    mach.loss_s = n[lo] > 0 ? s[lo] / n[lo] : 0.0;
    busy += mach.loss_s;
    double flops = 0;
    for (int l = 0; l < m->nstages; l++) flops += cdp_stage_flops(m, l, B);
    if (busy > 0) mach.flops_per_s = flops / busy;   /* for other models and batches */
    /* each call updates one stage: calls / L updates of every parameter */
    if (n[op] > 0 && m->nparams > 0)
        mach.update_s_per_param = s[op] / (n[op] / m->nstages * (double)m->nparams);
    mach.net.ranks_per_host = (c->size + c->nhosts - 1) / (c->nhosts > 0 ? c->nhosts : 1);
    mach.net.intra = (cdp_link_cost){ 1e-6, 5e9, 0, 0 };
    mach.net.inter = (cdp_link_cost){ 5e-5, 1.25e8, 0, 0 };
    FILE *f = fopen(path, "w");
    int bad = !f;
    if (f) {
        cdp_machine_write(f, &mach);
        bad = ferror(f) != 0;
        bad |= fclose(f) != 0;
    }
    if (bad)
        snprintf(err, errlen, "--layer-times-out %s: cannot write: %s", path, strerror(errno));
    cdp_machine_free(&mach);
    return bad ? -1 : 0;
}

int cdp_report_machine_rows(cdp_comm *c, const cdp_layer_times *t, const cdp_layer_times *first,
                            double start_s, const cdp_model *m, const char *machine_out, int B,
                            char *err, size_t errlen)
{
    const int two = 2 * t->rows;
    double *sum = malloc(sizeof(double) * 2 * (size_t)two);
    if (!sum) abort();
    for (int i = 0; i < two; i++) {   /* the later segments' rows: the first one's warm-up left out */
        sum[i] = t->s[i] - (first ? first->s[i] : 0.0);
        sum[two + i] = t->n[i] - (first ? first->n[i] : 0.0);
    }
    if (c->rank == 0)
        MPI_Reduce(MPI_IN_PLACE, sum, 2 * two, MPI_DOUBLE, MPI_SUM, 0, c->comm);
    else
        MPI_Reduce(sum, NULL, 2 * two, MPI_DOUBLE, MPI_SUM, 0, c->comm);
    int bad = c->rank == 0 && write_machine(machine_out, sum, sum + two, m, B, first ? start_s : 0.0,
                                            c, err, errlen);
    free(sum);
    return bad ? -1 : 0;
}

void cdp_report_layer_times(cdp_comm *c, const cdp_layer_times *t, const cdp_model *m,
                            const cdp_figures *fig, FILE *text, FILE *json)
{
    const int rows = t->rows, two = 2 * rows;
    double *sum = malloc(sizeof(double) * 2 * (size_t)two);
    if (!sum) abort();
    memcpy(sum, t->s, sizeof(double) * (size_t)two);
    memcpy(sum + two, t->n, sizeof(double) * (size_t)two);
    if (c->rank == 0)
        MPI_Reduce(MPI_IN_PLACE, sum, 2 * two, MPI_DOUBLE, MPI_SUM, 0, c->comm);
    else
        MPI_Reduce(sum, NULL, 2 * two, MPI_DOUBLE, MPI_SUM, 0, c->comm);
    if (c->rank != 0) {
        free(sum);
        return;
    }
    const double *s = sum, *n = sum + two;
    double total = 0;
    for (int i = 0; i < two; i++)
        total += s[i];
    const char *extra_kind[2] = { "loss", "optimizer" };
    if (text) {
        const double per_step = fig->steps > 0 ? fig->train_time_s / (double)fig->steps : 0.0;
        fprintf(text, "layer times (--layer-times): ms per call (one micro-batch; the loss and"
                " the optimizer, one stage's update, under forward); share of the time of all"
                " rows, added over the %d rank%s\n"
                "  %5s  %-46s %-13s %-13s %9s %9s %7s\n", c->size, c->size == 1 ? "" : "s",
                "layer", "name", "kind", "output", "forward", "backward", "share");
        char idx[16], out[48];
        for (int j = 0; j < m->nlayers; j++) {
            const cdp_layer *ly = &m->layers[j];
            if (n[2 * j] == 0 && n[2 * j + 1] == 0)
                continue;   /* no work (flatten, a ReLU fused into its Linear) */
            snprintf(idx, sizeof idx, "%d", j);
            snprintf(out, sizeof out, "%dx%dx%d", ly->ys.c, ly->ys.h, ly->ys.w);
            row_text(text, idx, ly->name[0] ? ly->name : "-", cdp_layer_ops_of(ly->kind)->name,
                     out, s + 2 * j, n + 2 * j, total);
        }
        for (int e = 0; e < 2; e++)
            row_text(text, "", "-", extra_kind[e], "", s + 2 * (m->nlayers + e),
                     n + 2 * (m->nlayers + e), total);
        /* the kinds, largest first */
        kind_total kt[CDP_LAYER_KINDS + 2];
        int nk = 0;
        for (int k = 0; k < CDP_LAYER_KINDS + 2; k++) {
            double ks = 0;
            if (k < CDP_LAYER_KINDS) {
                for (int j = 0; j < m->nlayers; j++)
                    if ((int)m->layers[j].kind == k)
                        ks += s[2 * j] + s[2 * j + 1];
            } else {
                int r = m->nlayers + (k - CDP_LAYER_KINDS);
                ks = s[2 * r] + s[2 * r + 1];
            }
            if (ks > 0)
                kt[nk++] = (kind_total){ k < CDP_LAYER_KINDS
                                             ? cdp_layer_ops_of((cdp_layer_kind)k)->name
                                             : extra_kind[k - CDP_LAYER_KINDS], ks };
        }
        qsort(kt, (size_t)nk, sizeof kt[0], by_time_desc);
        fprintf(text, "  by kind:");
        for (int k = 0; k < nk; k++)
            fprintf(text, "%s %s %.1f%%", k ? "," : "", kt[k].kind, 100 * kt[k].s / total);
        fprintf(text, "\n  timed: %.6f s a step, of the %d rank%s %.6f s (%d x the step's "
                "wall time): %.1f%%; the rest is communication, waiting and host work\n",
                fig->steps > 0 ? total / (double)fig->steps : 0.0, c->size,
                c->size == 1 ? "'s" : "s'", c->size * per_step, c->size,
                per_step > 0 ? 100 * total / (double)fig->steps / (c->size * per_step) : 0.0);
        fflush(text);
    }
    if (json) {
        for (int j = 0; j < m->nlayers; j++) {
            const cdp_layer *ly = &m->layers[j];
            if (n[2 * j] == 0 && n[2 * j + 1] == 0)
                continue;
            row_json(json, j, ly->name, cdp_layer_ops_of(ly->kind)->name, &ly->ys, s + 2 * j,
                     n + 2 * j);
        }
        for (int e = 0; e < 2; e++)
            row_json(json, -1, NULL, extra_kind[e], NULL, s + 2 * (m->nlayers + e),
                     n + 2 * (m->nlayers + e));
        fflush(json);
    }
    free(sum);
}
