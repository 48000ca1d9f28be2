/* The model: an MLP of Linear layers (ReLU between them, none after the
 * last) grouped into L contiguous stages, and the forward/backward of one
 * stage for one micro-batch.
 *
 * Parameters of all stages live in one contiguous buffer; stage l occupies
 * [stage_off[l], stage_off[l] + stage_n[l]) and, inside it, each layer j has
 * its weight W_j [out_j, in_j] followed by its bias b_j [out_j]. */
#ifndef CDP_MODEL_H
#define CDP_MODEL_H

#include <stddef.h>
#include <stdint.h>
#include "cdp/backend.h"

#define CDP_MAX_LAYERS 64

typedef struct cdp_model {
    int nlayers;                      /* Linear layers */
    int dims[CDP_MAX_LAYERS + 1];     /* dims[0] = input, dims[nlayers] = classes */
    size_t w_off[CDP_MAX_LAYERS];     /* offset of W_j in the parameter buffer (floats) */
    size_t b_off[CDP_MAX_LAYERS];     /* offset of b_j */
    size_t nparams;
    int nstages;
    int stage_first[CDP_MAX_LAYERS + 1]; /* stage l = layers [stage_first[l], stage_first[l+1]) */
    size_t stage_off[CDP_MAX_LAYERS];
    size_t stage_n[CDP_MAX_LAYERS];
} cdp_model;

/* Parses "mlp:784-256-128-10" and partitions the layers into `stages`
 * contiguous stages balanced by FLOPs (stages <= 0: one layer per stage).
 * Returns 0, or -1 with one line in err. */
int cdp_model_parse(const char *spec, int stages, cdp_model *m, char *err, size_t errlen);

/* nn.Linear's default initialisation: W and b uniform in
 * [-1/sqrt(in), 1/sqrt(in)], from seed (counter-based: identical on every rank). */
void cdp_model_init(const cdp_model *m, uint64_t seed, float *host_params);

/* Floats of activations that stage l keeps for one micro-batch of B samples
 * between its forward and its backward (the outputs of its layers). */
size_t cdp_stage_act_floats(const cdp_model *m, int l, int B);
/* Floats of the workspace one stage backward needs (shared, not per worker). */
size_t cdp_model_ws_floats(const cdp_model *m, int B);
/* Input width and output width of stage l. */
int cdp_stage_in(const cdp_model *m, int l);
int cdp_stage_out(const cdp_model *m, int l);
/* FLOPs of forward + backward of stage l for B samples. */
double cdp_stage_flops(const cdp_model *m, int l, int B);

/* Forward of stage l for one micro-batch: x [B, in] -> act (the stage's
 * activations; its output is the last B*out floats).  On the last stage the
 * loss is computed too: the output is replaced by dLoss/dlogits and stats
 * (backend memory, 2 doubles) accumulate loss sum and correct count. */
void cdp_stage_fwd(const cdp_backend *be, const cdp_model *m, int l, int B,
                   const float *stage_params, const float *x, float *act,
                   const int32_t *labels, double *stats);
/* Whether stage l's backward reads act at all (internal layer outputs, or
 * the loss gradient of the last stage).  When it does not, the stage's
 * output is needed only as the next stage's input, and can go as soon as
 * the next stage's backward is done. */
int cdp_stage_bwd_reads_act(const cdp_model *m, int l);
/* The stage's output inside act. */
float *cdp_stage_output(const cdp_model *m, int l, int B, float *act);
/* 1 if the backend's accumulating backward is exact (backend.h) on every
 * layer of the model at micro-batch B. */
int cdp_model_accumulate_exact(const cdp_backend *be, const cdp_model *m, int B);

/* Backward of stage l: given x (its input), act (from its forward) and dout
 * (dLoss/d of its last layer's pre-activation, [B, out]: the next stage's
 * dx; ignored on the last stage, whose act already holds it), writes the
 * stage's parameter gradient into grad (stage_n[l] floats) and into dx
 * (skipped when NULL) dLoss/dx multiplied by relu'(x), the gradient the
 * previous stage's last layer needs.  So no backward reads its own stage
 * output; act may be clobbered; ws holds cdp_model_ws_floats floats.
 * With accumulate, the gradient is added to grad instead (linear_bwd's
 * accumulate). */
void cdp_stage_bwd(const cdp_backend *be, const cdp_model *m, int l, int B,
                   const float *stage_params, const float *x, float *act,
                   const float *dout, float *dx, float *grad, float *ws, int accumulate);

/* Test-set evaluation on the host-side params (backend memory): loss sum and
 * correct count over n samples, in chunks of `chunk` rows.  Each image has
 * `channels` planes; norm: NULL or 2*channels floats, the data set's
 * normalisation (cdp_dataset.norm), as the backend's pixels_to_input. */
void cdp_model_evaluate(const cdp_backend *be, const cdp_model *m, const float *params,
                        const uint8_t *pixels, const int32_t *labels, int64_t n,
                        int channels, const float *norm,
                        int chunk, double *loss_sum, double *correct);

#endif
