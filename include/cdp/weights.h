/* cdp's public API: weight files.
 *
 * A weight file is safetensors: the model's tensors (cdp_model_tensor) by
 * their PyTorch state_dict names, float32 (int64 for a BatchNorm's
 * num_batches_tracked), what cdp_run --save-weights writes and
 * --init-weights reads, and what PyTorch's load_state_dict(strict=True)
 * takes for the equivalent module (doc/reference.md, section 6.1).
 *
 * Errors: see cdp/model.h; err names the file. */
#ifndef CDP_PUBLIC_WEIGHTS_H
#define CDP_PUBLIC_WEIGHTS_H

#include <stddef.h>
#include <stdint.h>
#include "cdp/model.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Writes the tensors of m from params (a parameter buffer of m,
 * cdp_model_param_floats floats) to path, atomically: a temporary file
 * beside it, synced and renamed onto path, so a reader never sees half a
 * file (a character device or a FIFO is written in place).  updates: the
 * value of every num_batches_tracked (the steps trained).  metadata: NULL,
 * or a NULL-terminated list of key, value strings for the header's
 * "__metadata__".  Errors: the file cannot be written (the temporary file
 * is removed, path stays as it was). */
int cdp_save_weights(const char *path, const cdp_model *m, const float *params,
                     int64_t updates, const char *const *metadata, char *err, size_t errlen);

/* Reads the tensors of m from path into params (cdp_model_param_floats
 * floats; floats no tensor covers are left alone).  The file must hold
 * exactly m's tensors with their shapes.  Errors: an unreadable or
 * truncated file, a bad header, a dtype other than F32 (I64 for
 * num_batches_tracked), a missing or extra tensor, a shape that does not
 * fit m, offsets that overlap or leave the file, data no tensor indexes, a
 * value that is not finite; params is then left as it was. */
int cdp_load_weights(const char *path, const cdp_model *m, float *params,
                     char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif
