/* cdp's public API: a built model.
 *
 * A model is a graph of named layers grouped into blocks (cdp/builder.h
 * defines one); training cuts its blocks into stages.  Its parameters live
 * in one buffer of floats whose layout is the model's own: reach a tensor
 * through cdp_model_tensor, never by assuming an order.  Tensor names are
 * PyTorch's state_dict names, so a weight file (cdp/weights.h) loads into
 * the equivalent torch.nn.Module.
 *
 * Errors: a function that can fail returns 0 on success, or -1 with one
 * line of text in err (errlen bytes, always NUL-terminated) saying what is
 * wrong; nothing is allocated then.  Out of memory aborts the process. */
#ifndef CDP_PUBLIC_MODEL_H
#define CDP_PUBLIC_MODEL_H

#include <stddef.h>
#include <stdint.h>
#include "cdp/shape.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A model, built by cdp_model_create and owned by its caller. */
typedef struct cdp_model cdp_model;

/* Builds the model that cdp_run's --model NAME names (a preset such as
 * "resnet20", a free form such as "mlp:784-256-10", or a model defined with
 * cdp_model_define) for samples of shape input and `classes` classes, cut
 * into `stages` stages (<= 0: the model's default).  input.c == 0 and
 * classes == 0 take the model's own defaults (an mlp's widths; 1x28x28
 * images and 10 classes otherwise).  Into *m; free it with
 * cdp_model_destroy.  Errors: an unknown name, a network that does not fit
 * the input (an image too small for its kernels), more stages than blocks. */
int cdp_model_create(const char *name, cdp_shape input, int classes, int stages,
                     cdp_model **m, char *err, size_t errlen);
/* Frees m and everything it holds; NULL is ignored. */
void cdp_model_destroy(cdp_model *m);

/* The stages the blocks are cut into. */
int cdp_model_stage_count(const cdp_model *m);
/* The floats of all the model's tensors: trainable parameters and buffers
 * (BatchNorm's running statistics). */
size_t cdp_model_param_count(const cdp_model *m);
/* Floats of a parameter buffer of m (at least cdp_model_param_count: it
 * holds room the training needs between stages as well). */
size_t cdp_model_param_floats(const cdp_model *m);

/* The tensors of the model's weight file, in file order. */
int cdp_model_tensor_count(const cdp_model *m);
/* Tensor j (0 <= j < cdp_model_tensor_count): returns its name (owned by
 * m, valid until cdp_model_destroy), and where not NULL sets *ndim (0 to
 * 4; 0: a scalar), shape[0 .. *ndim) (PyTorch's order), and the place of
 * its floats in a parameter buffer: *offset and *count.  An integer
 * counter (a BatchNorm's num_batches_tracked, a scalar) has *count 0: it
 * holds no floats.  NULL when j is out of range. */
const char *cdp_model_tensor(const cdp_model *m, int j, int *ndim, int64_t shape[4],
                             size_t *offset, size_t *count);

/* Fills params (cdp_model_param_floats(m) floats) with the initialisation
 * PyTorch gives the equivalent modules, drawn from seed: the same values
 * for a given seed on every machine and number of ranks (what cdp_run
 * --seed does).  Floats no tensor covers are set to 0. */
void cdp_model_init(const cdp_model *m, uint64_t seed, float *params);

#ifdef __cplusplus
}
#endif

#endif
