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
#include "cdp/model.h"
#include "cdp/optim.h"

/* state: cdp_optim_state_buffers() arrays of nparams floats, one after the
 * other (cdp_exec_get_optim_state). */
int cdp_checkpoint_write(const char *path, const cdp_model *m, int64_t step, uint64_t numerics,
                         cdp_optim_kind kind, const float *cur, const float *prev,
                         const float *state, char *err, size_t errlen);
/* 0, or -1 with one line in err naming the file (unreadable, not a cdp
 * checkpoint, a format version other than 2, another optimizer, another
 * model, other options,
 * a checksum that does not match the data, a step tensor that disagrees
 * with the step metadata). */
int cdp_checkpoint_read(const char *path, const cdp_model *m, uint64_t numerics,
                        cdp_optim_kind kind, int64_t *step, float *cur, float *prev,
                        float *state, char *err, size_t errlen);

#endif
