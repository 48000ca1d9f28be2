/* Checkpoints: the drained training state after `step` steps, enough to
 * resume bit for bit: P(step), P(step-1) (for lagging workers), the momentum
 * and the step.  A safetensors file (tensors params, params_prev, momentum,
 * step) whose metadata records the format version (cdp_checkpoint "2"), the
 * hash of the options that fix the numerics, so that a checkpoint never
 * resumes under other options, the step, and a CRC-32C of the whole data
 * section (data_crc32c), so that a damaged one never resumes either
 * (src/io/checkpoint.c has the layout). */
#ifndef CDP_CHECKPOINT_H
#define CDP_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>
#include "cdp/model.h"

int cdp_checkpoint_write(const char *path, const cdp_model *m, int64_t step, uint64_t numerics,
                         const float *cur, const float *prev, const float *momentum,
                         char *err, size_t errlen);
/* 0, or -1 with one line in err naming the file (unreadable, not a cdp
 * checkpoint, a format version other than 2, another model, other options,
 * a checksum that does not match the data, a step tensor that disagrees
 * with the step metadata). */
int cdp_checkpoint_read(const char *path, const cdp_model *m, uint64_t numerics, int64_t *step,
                        float *cur, float *prev, float *momentum, char *err, size_t errlen);

#endif
