/* Measured figures of a run, gathered on rank 0 after each segment (outside
 * the training loop), and how they are printed: a table on the terminal and
 * JSON lines for --metrics. */
#ifndef CDP_REPORT_H
#define CDP_REPORT_H

#include <stdint.h>
#include <stdio.h>
#include "exec/comm.h"
#include "exec/exec.h"

typedef struct cdp_figures {
    int64_t peak_activation_bytes;          /* max over ticks of the sum over ranks */
    int64_t peak_activation_bytes_per_rank; /* max over ranks and ticks */
    int64_t activation_reserved_per_rank;   /* max over ranks: bytes held by the allocator */
    int64_t bytes_sent_total;
    int64_t bytes_sent_peak_tick;           /* max over ticks of the sum over ranks */
    int64_t ticks;
    int64_t collective_calls;               /* in the training loop, summed over ranks */
    int64_t model_state_bytes_per_rank;     /* measured: varies with timing */
    int64_t model_state_scheduled_per_rank; /* the schedule's: the same every run */
    int64_t workspace_bytes_per_rank;       /* fixed scratch: backward workspace, input batch */
    int64_t peak_rss_bytes;                 /* max over ranks (getrusage) */
    double train_time_s;                    /* wall time inside segments (rank 0) */
    double data_wait_s;                     /* --data folder: max over ranks of the
                                             * seconds waited for decoded images; < 0: none */
    int64_t steps;
} cdp_figures;

/* Collective (outside the loop): folds the last segment's per-tick figures
 * of every rank into f on rank 0. */
void cdp_figures_add_segment(cdp_figures *f, cdp_comm *c, cdp_exec *x, int64_t steps,
                             double seconds);
/* Collective: final per-rank maxima (RSS, model state, collectives). */
void cdp_figures_finish(cdp_figures *f, cdp_comm *c, cdp_exec *x);

typedef struct cdp_epoch_line {
    int epoch;
    int64_t step;
    double lr;
    double train_loss, train_accuracy;
    double test_loss, test_accuracy;   /* < 0 when not evaluated */
    double samples_per_s;
    double time_s;
    /* the text line only: the epoch's steps trained by its end, of the
     * steps an epoch has (fewer: a run that stops inside the epoch) */
    int64_t epoch_steps, steps_per_epoch;
} cdp_epoch_line;

void cdp_report_epoch_text(FILE *f, const cdp_epoch_line *e, int epochs);
void cdp_report_epoch_json(FILE *f, const cdp_epoch_line *e);
/* The summary: a table on f (text) and/or one JSON object line on j. */
void cdp_report_summary(FILE *text, FILE *json, const cdp_figures *fig, const char *rule,
                        const char *framework, int ranks, int N, int L, int B,
                        double test_loss, double test_accuracy, double samples_per_s);

struct cdp_layer_times;
struct cdp_model;
/* --layer-times, collective: every rank's rows added up on rank 0, which
 * prints a table on text and "layer_times" lines on json (either NULL). */
void cdp_report_layer_times(cdp_comm *c, const struct cdp_layer_times *t,
                            const struct cdp_model *m, const cdp_figures *fig, FILE *text,
                            FILE *json);
/* --layer-times-out FILE, collective: rank 0 writes the rows as a machine
 * file for --plan --machine (io/machine_file.h), for micro-batch B.  With
 * `first` (the rows as they stood after the job's first segment; NULL: no
 * second segment of as many steps) its rows are those of the later
 * segments only, and start_s (the first segment's time beyond the second's)
 * goes in as compute.start_s (0 without `first`).  Returns 0, or on rank 0
 * -1 with err when the file cannot be written. */
int cdp_report_machine_rows(cdp_comm *c, const struct cdp_layer_times *t,
                            const struct cdp_layer_times *first, double start_s,
                            const struct cdp_model *m, const char *machine_out, int B,
                            char *err, size_t errlen);

#endif
