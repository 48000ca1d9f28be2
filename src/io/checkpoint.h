/* Checkpoints: the drained training state after `step` steps, enough to
 * resume bit for bit: P(step), P(step-1) (for lagging workers), the
 * optimizer state and the step.  A safetensors file (tensors params,
 * params_prev, momentum (SGD) or exp_avg and exp_avg_sq (AdamW, with the
 * metadata optimizer "adamw"), step) whose metadata records the format
 * version (cdp_checkpoint "2"), the
 * hash of the options that fix the numerics, so that a checkpoint never
 * resumes under other options, the step, and a CRC-32C of the whole data
 * section (data_crc32c), so that a damaged one never resumes either
 * (src/io/checkpoint.c has the layout). */
#ifndef CDP_CHECKPOINT_H
#define CDP_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>
#include "models/model.h"
#include "optim/optim.h"

/* options: cdp_options_numerics_text of the run (NULL: none kept, none
 * compared), so that a checkpoint of other options names the ones that
 * differ.  state: cdp_optim_state_buffers() arrays of nparams floats, one after the
 * other (cdp_exec_get_optim_state). */
int cdp_checkpoint_write(const char *path, const cdp_model *m, int64_t step, uint64_t numerics,
                         const char *options, cdp_optim_kind kind, const float *cur, const float *prev,
                         const float *state, char *err, size_t errlen);
/* 0, or with one line in err naming the file: CDP_CKPT_FOREIGN (-2) for a
 * sound checkpoint of another run (another optimizer, other options: the
 * numerics hash), -1 for anything else (unreadable, not a cdp checkpoint, a
 * format version other than 2, another model, a checksum that does not
 * match the data, a step tensor that disagrees with the step metadata). */
#define CDP_CKPT_FOREIGN (-2)
int cdp_checkpoint_read(const char *path, const cdp_model *m, uint64_t numerics,
                        const char *options, cdp_optim_kind kind, int64_t *step, float *cur, float *prev,
                        float *state, char *err, size_t errlen);

/* Checkpoint files.  With --keep-checkpoints M = 1 (keep <= 1) the
 * checkpoint is one file, stem itself; with M > 1 the one after step k is
 * stem.step-NNNNNNNN (k in decimal, at least 8 digits, zero-padded). */
void cdp_checkpoint_name(const char *stem, int keep, int64_t step, char *out, size_t n);

typedef struct cdp_checkpoint_file {
    char path[4200];
    int64_t step;      /* from the name; for stem itself from its metadata (-1: unreadable) */
    int numbered;      /* stem.step-N (1) or stem (0) */
} cdp_checkpoint_file;

/* The checkpoints of stem on disk: stem itself and every stem.step-N, newest
 * (highest step) first, a numbered file before stem at the same step.
 * *files is malloc'ed (NULL when none).  0, or -1 with err. */
int cdp_checkpoint_list(const char *stem, cdp_checkpoint_file **files, size_t *count,
                        char *err, size_t errlen);
/* After the checkpoint of step `step` is written (keep > 1): removes the
 * numbered ones of steps <= step except the `keep` newest; stem itself and
 * numbered files of later steps (another run's) are left alone. */
int cdp_checkpoint_prune(const char *stem, int keep, int64_t step, char *err, size_t errlen);
/* --resume latest: the temporary files of stem's checkpoints
 * (cdp_output_tmp_name of stem or of a stem.step-N, nothing else) whose
 * writer is gone: those of this host whose PID is not alive (kill(PID, 0)
 * fails with ESRCH) are removed; those of other hosts and of live
 * processes are left alone.  msg: one line saying what was removed and
 * what was left alone ("" when nothing matched).  The count removed, or -1
 * with err when the directory cannot be listed. */
int cdp_checkpoint_clean_stale(const char *stem, char *msg, size_t msglen, char *err,
                               size_t errlen);

#endif
