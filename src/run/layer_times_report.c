/* --layer-times: the rows of every rank added up on rank 0 and printed, a
 * table on the terminal and "layer_times" JSON lines for --metrics. */
#include <stdlib.h>
#include <string.h>
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
