/* Internal to src/models: what model.c needs of stage.c while it lays a
 * model out (the dry runs of the interpreter), and the layout facts
 * sizes.c derives for stage.c. */
#ifndef CDP_MODELS_STAGE_INTERNAL_H
#define CDP_MODELS_STAGE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include "models/model.h"

/* Where the layers' scratch starts in the workspace, in floats: after the
 * largest stage's gradient buffers (or forward-only tensors), even. */
size_t cdp_model_layer_ws_offset(const cdp_model *m, int B);
/* Where --precision bf16's scratch starts, after the layers' scratch, and
 * its floats (0 in float32) */
size_t cdp_model_lowp_ws_offset(const cdp_backend *be, const cdp_model *m, int B);
size_t cdp_model_lowp_ws_floats(const cdp_model *m, int B);
/* its parts: the parameter copy's floats, and each tensor's */
void cdp_model_lowp_sizes(const cdp_model *m, int B, size_t *params, size_t *tensor);
/* 1 if stage l's backward skips layer j (a ReLU fused into its consumer's
 * backward, or left to the next stage; a view) */
int cdp_stage_skips_bwd(const cdp_model *m, int l, int j);
/* Places the tensors stage l produces: in its activations those a backward
 * reads (and the stage's output), in the workspace those only the forward
 * reads.  Returns the activation floats per sample; sets the plan's
 * fwd_scratch_ps. */
size_t cdp_stage_layout_tensors(cdp_model *m, int l);
/* Floats per sample of gradient buffers stage l's backward needs (a dry
 * run of its backward's buffer assignment). */
size_t cdp_stage_bwd_plan(const cdp_model *m, int l);

/* --precision bf16 (lowp_cache.c): the weights of stage l's products (the
 * lowp_params of its layers) in bfloat16 storage, at their offsets in the
 * stage's parameters p, for the parameters whose contents tag names
 * (cdp_layer_ctx.params_tag): packed once per tag, kept for the last two
 * tags of the stage (cdp-v2's workers use two versions at once); tag 0:
 * layer j's alone, packed again at every call.  The backend's memory;
 * freed with the model. */
const uint16_t *cdp_lowp_weights(const cdp_backend *be, const cdp_model *m, int l, int j,
                                 const float *p, uint64_t tag);
void cdp_lowp_cache_free(cdp_model *m);

#endif
