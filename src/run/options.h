/* Command-line options of cdp_run: parsing, validation, help text. */
#ifndef CDP_OPTIONS_H
#define CDP_OPTIONS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "io/data.h"
#include "sched/schedule.h"

typedef struct cdp_options {
    char model[256];
    int stages;              /* 0: the model's default */
    int balance;             /* cdp_balance: what the stages balance */
    int workers;             /* N; 0: max(4, P) */
    int batch;               /* B, per worker */
    cdp_rule rule;
    cdp_framework framework;
    int deterministic;
    int flush_denormals;     /* --flush-denormals: CPU flush-to-zero (src/cpu/fpmode.c) */
    int precision;           /* cdp_precision (--precision fp32|bf16) */
    int allow_mixed;         /* --allow-mixed-numerics: ranks of different numerics may run */
    int epochs;
    int64_t steps;           /* 0: epochs * steps_per_epoch */
    double lr, momentum, weight_decay, lr_gamma;
    int lr_decay_epochs;
    int optimizer;           /* cdp_optim_kind: sgd, adamw */
    double betas[2], eps;    /* adamw */
    int lr_schedule;         /* cdp_lr_schedule: step, cosine */
    int64_t warmup_steps;    /* linear warm-up over the first W updates; 0: none */
    /* which of the options whose meaning depends on --optimizer or
     * --lr-schedule were given (--weight-decay's default depends on the
     * optimizer; the others are refused where they mean nothing) */
    int given_lr, given_weight_decay, given_momentum, given_betas, given_eps;
    int given_lr_decay;      /* 1: --lr-decay-epochs, 2: --lr-gamma (or both) */
    uint64_t seed;
    char data[1200];         /* a --data value (cdp_data_spec_parse), e.g. synthetic:3x32x32 */
    char data_dir[1024];     /* after parsing: the given one, else the kind's default
                              * (cdp_data_default_dir; "" for synthetic) */
    cdp_augment augment;     /* --augment crop=P,flip (training set only) */
    int norm_count;          /* --normalize: 0 (none), 1 (every channel) or one per channel */
    float norm_mean[CDP_NORM_MAX_CHANNELS], norm_std[CDP_NORM_MAX_CHANNELS];
    int shuffle;
    char init_weights[1024];
    char save_weights[1024];
    char metrics[1024];
    char trace[1024];
    char checkpoint[1024];   /* written at the end, on SIGTERM/SIGINT, every checkpoint_every
                              * epochs and every checkpoint_every_steps steps */
    int checkpoint_every;
    int64_t checkpoint_every_steps;
    int64_t log_every;            /* --log-every K: a --metrics line every K steps; 0: none */
    int keep_checkpoints;    /* 1: one file, checkpoint; M > 1: checkpoint.step-NNNNNNNN, the last M */
    char resume[1024];       /* a file, or "latest": the newest of checkpoint's */
    int threads;             /* per rank; 0: CPUs available / ranks on the node */
    char backend[16];
    int plan;                /* print the schedule and figures, do not train */
    int print_model;         /* print the model as a description file, do not train */
    int plan_steps;
    int plan_ranks;          /* --plan-ranks P: the ranks --plan assumes (0: the job's) */
    char machine[1024];      /* --machine FILE: --plan also predicts the step time there */
    double device_memory;    /* --device-memory SIZE: bytes; 0: not given */
    int verify;              /* also run the serial reference and compare */
    int layer_times;         /* --layer-times: time every layer (src/models/layer_times.h) */
    char layer_times_out[1024]; /* --layer-times-out FILE: and write them as a machine file */
    int eval_every;          /* evaluate the test set every this many epochs (0: only at the end) */
    int quiet;
    int timeout;             /* watchdog: seconds a wait on another rank may see no progress (0: off) */
    int help, version, list_models;
} cdp_options;

void cdp_options_defaults(cdp_options *o);
/* 0 ok; -1 with one line in err naming the option (a missing value, a bad
 * value, an unknown option). */
int cdp_options_parse(cdp_options *o, int argc, char **argv, char *err, size_t errlen);
void cdp_options_help(FILE *f);
/* 0, or -1 with one line in err when two outputs (--checkpoint,
 * --save-weights, --metrics, --trace) name the same file, however spelt:
 * the same inode when the file exists (character devices such as /dev/null
 * excepted), else the same real directory and name, symbolic links
 * followed.  Inputs may equal outputs (--checkpoint F --resume F). */
int cdp_options_check_outputs(const cdp_options *o, char *err, size_t errlen);
/* Rank 0, before training: 0, or -1 with one line in err when an output
 * names what cannot be written (a directory, a block device: io/output.h)
 * or when the directory of --checkpoint or --save-weights, unless written
 * in place, does not exist or cannot be written (rank 0 writes them, at the
 * end: found now, not after the run). */
int cdp_options_check_output_dirs(const cdp_options *o, char *err, size_t errlen);
/* A hash of every option that must agree across ranks. */
uint64_t cdp_options_hash(const cdp_options *o);
/* A hash of the options that fix the numerics (checkpoints must match). */
uint64_t cdp_options_numerics_hash(const cdp_options *o);
#define CDP_NUMERICS_TEXT_MAX 2048
/* The options cdp_options_numerics_hash covers, as text (" --NAME=VALUE"
 * entries), for a checkpoint's metadata. */
void cdp_options_numerics_text(const cdp_options *o, char *buf, size_t len);

#endif
