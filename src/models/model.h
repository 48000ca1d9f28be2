/* The model: layers (nn/nn.h) strung into blocks, blocks cut into L
 * contiguous stages, and the stage API the executor and the reference use.
 *
 * A block is a small graph of layers with one input and one output tensor
 * (a residual block: its main path, its shortcut, the add, the ReLU); a
 * stage is a contiguous run of blocks, balanced by FLOPs, so exactly one
 * tensor crosses a stage boundary and nothing above this interface needs to
 * know what a layer is.
 *
 * Parameters of all stages live in one buffer of nparams floats; stage l
 * occupies the region [stage_off[l], stage_off[l] + stage_n[l]):
 *   [0, train_n)             trainable parameters, layer after layer
 *                            (weight then bias), what the optimizer updates
 *   [train_n, + buffer_n)    buffers: BatchNorm running mean and variance
 *   [.., stage_n)            padding up to the statistics tail, below
 * A gradient of the stage has the same size: its head is the gradient of the
 * trainable parameters and its tail holds, for each of the N workers of the
 * step, the worker's BatchNorm statistics (mean, M2 per channel, double,
 * packed as three integer-valued floats each: backend f64_pack) in a slot
 * of its own.  Summing gradients elementwise (locally, around the ring, or
 * in MPI_Allreduce) then carries every worker's statistics exactly (one
 * non-zero term per element), and the update combines them in worker
 * order (doc/reference.md section 3.5) into the new running statistics.  Stages without
 * BatchNorm have no buffers and no tail. */
#ifndef CDP_MODELS_MODEL_H
#define CDP_MODELS_MODEL_H

#include <stdio.h>
#include <stddef.h>
#include <stdint.h>
#include "cdp/model.h"
#include "backend/backend.h"
#include "nn/nn.h"
#include "optim/optim.h"

#define CDP_MAX_LAYERS 64      /* Linear layers of an mlp: spec */
#define CDP_MAX_STAGES 256

/* One tensor of the model's file (weights, checkpoints): PyTorch's
 * state_dict name and shape, and where it lives in the parameter buffer. */
typedef struct cdp_tensor_info {
    char name[96];
    cdp_tensor_kind kind;
    int ndim;
    int64_t shape[4];
    size_t off, n;        /* floats in the parameter buffer (counter: none) */
    int stage;
    int layer, param;     /* the layer and its parameter description (cdp_layer_ops.params) */
} cdp_tensor_info;

/* A tensor of the layer graph (activations, not parameters). */
typedef struct cdp_node {
    cdp_shape shape;
    int producer;         /* layer index, -1 for the model's input */
    int root;             /* the tensor whose storage it is (itself, or for
                           * an in-place relu / flatten its input's root) */
    int consumers;        /* layers reading it */
} cdp_node;

/* Per-stage layout, computed once (sizes per sample scale with B). */
typedef struct cdp_stage_plan {
    int first_layer, end_layer;   /* layers [first_layer, end_layer) */
    int in_tensor, out_tensor;
    size_t train_n, buffer_n;     /* floats */
    size_t slot_doubles;          /* statistics of one worker (0: no BatchNorm) */
    size_t act_ps;                /* activations per sample: tensors, then saved areas */
    size_t act_fixed;             /* fixed saved floats (BatchNorm mean/invstd + statistics) */
    size_t save_ps_base;          /* start of per-sample saved areas, per sample */
    size_t ws_ps;                 /* backward gradient buffers per sample */
    size_t fwd_scratch_ps;        /* forward-only tensors per sample (in the workspace) */
    int delegate_relu;            /* the stage ends with a ReLU whose backward the next stage applies */
    int reads_act;                /* cdp_stage_bwd_reads_act */
} cdp_stage_plan;

/* The model the public API hands out as an opaque cdp_model. */
struct cdp_model {
    char name[64];                /* "mlp:784-256-128-10", "resnet20", ... */
    cdp_shape input;
    int classes;
    int workers;                  /* N: slots of the statistics tail */
    int nlayers;
    cdp_layer *layers;
    int nnodes;
    cdp_node *nodes;              /* node 0 is the model input */
    unsigned char *node_lowp;     /* per tensor root: 1 if stored as bfloat16 (--precision
                                   * bf16: every kept tensor but the logits) */
    struct cdp_lowp_cache *lowp_cache; /* --precision bf16: the stages' weights in bfloat16,
                                   * per parameter version (lowp_cache.c) */
    int *node_off;                /* storage per sample: >= 0 inside its stage's activations;
                                   * -1 - o: at o in the workspace, a tensor only the forward
                                   * reads (no backward needs it kept) */
    int nblocks;
    int *block_first;             /* block b = layers [block_first[b], block_first[b+1]) */
    double *block_flops;          /* forward + backward, one sample */
    int nstages;
    int stage_first[CDP_MAX_STAGES + 1];  /* stage l = blocks [stage_first[l], stage_first[l+1]) */
    size_t stage_off[CDP_MAX_STAGES];
    size_t stage_n[CDP_MAX_STAGES];
    cdp_stage_plan plan[CDP_MAX_STAGES];
    size_t nparams;               /* floats of the whole parameter buffer */
    int ntensors;
    cdp_tensor_info *tensors;     /* the file's tensors, in file order */
    size_t conv_ws_max_ps;        /* (informational) */
    struct cdp_layer_times *times; /* --layer-times: filled by the stage functions; NULL: off */
    int precision;                /* cdp_precision: the arithmetic of the layers */
};

/* The arithmetic of the layers (--precision, doc/reference.md section 3.12).
 * Parameters, gradients and optimizer state are float32 in both. */
typedef enum cdp_precision {
    CDP_PRECISION_FP32,   /* float32 throughout */
    CDP_PRECISION_BF16    /* bfloat16 operands of GEMMs and convolutions, every
                           * layer's output rounded to bfloat16 */
} cdp_precision;

/* What the cut of blocks into stages balances. */
typedef enum cdp_balance {
    CDP_BALANCE_FLOPS,         /* compute per stage (the paper's split) */
    CDP_BALANCE_ACTIVATIONS    /* kept activation bytes per stage */
} cdp_balance;

typedef struct cdp_model_config {
    const char *spec;             /* --model */
    int stages;                   /* <= 0: the model's default */
    cdp_shape input;              /* from the data (c = 0: the spec's, or 1x28x28) */
    int classes;                  /* from the data (0: the spec's, or 10) */
    int workers;                  /* N (>= 1) */
    cdp_balance balance;          /* what --stages balances */
    cdp_precision precision;      /* the layers' arithmetic (0: float32) */
} cdp_model_config;

/* Builds the model named by c->spec (one of cdp_model_entry_at's).
 * Returns 0, or -1 with one line in err.  Free with cdp_model_free. */
int cdp_model_build(const cdp_model_config *c, cdp_model *m, char *err, size_t errlen);
/* cdp_model_build with the spec's own input and classes (an mlp:) or
 * 1x28x28 and 10 classes, one worker. */
int cdp_model_parse(const char *spec, int stages, cdp_model *m, char *err, size_t errlen);
void cdp_model_free(cdp_model *m);
/* One model --model accepts: a preset ("resnet20", "vit-tiny") or a
 * family's free form ("mlp:IN-H1-...-OUT"), from the one table of models
 * (src/models/registry.c) that --help, --list-models and the error for an
 * unknown name all read. */
typedef struct cdp_model_entry {
    const char *name;       /* as --model takes it (a free form names its fields) */
    const char *family;     /* "mlp", "resnet", "vit" */
    int free_form;          /* 1: name is a pattern, not a preset */
    char about[200];        /* what it builds, and the PyTorch model it matches */
    cdp_shape input;        /* the images it is made for (c = 0: any, from the data) */
    int classes;            /* the classes it is made for (0: from the data) */
} cdp_model_entry;

/* The k-th model (k = 0, 1, ...) into *e: 1, or 0 past the last. */
int cdp_model_entry_at(int k, cdp_model_entry *e);
/* Every name, ", "-separated. */
const char *cdp_model_names(void);
/* The free forms ("mlp:IN-H1-...-OUT or vit:..."), for messages. */
const char *cdp_model_forms(void);
/* The table of models, one per line: name, family, input, what it is. */
void cdp_model_list(FILE *f);

/* cdp_model_init (cdp/model.h): the j-th tensor of the file draws from
 * stream j of the counter-based generator. */

/* 0 when every layer can train on a step of N micro-batches of B samples
 * (a BatchNorm needs two values per channel: with one, its running
 * variance, unbiased over the step's values, is 0/0).  Else -1 and err,
 * naming the first layer that cannot. */
int cdp_model_check_batch(const cdp_model *m, int N, int B, char *err, size_t errlen);

/* Floats of activations that stage l keeps for one micro-batch of B samples
 * between its forward and its backward. */
size_t cdp_stage_act_floats(const cdp_model *m, int l, int B);
/* Floats of the workspace one stage forward or backward needs (shared by
 * all stages and workers, not kept between instructions). */
size_t cdp_model_ws_floats(const cdp_backend *be, const cdp_model *m, int B);
/* Floats per sample of the input of stage l and of its output. */
int cdp_stage_in(const cdp_model *m, int l);
int cdp_stage_out(const cdp_model *m, int l);
/* Floats per sample that the input and output of stage l take as stored:
 * cdp_stage_in/out, or half of them rounded up when the tensor is kept in
 * bfloat16 (--precision bf16; the network's input never is) */
size_t cdp_stage_in_stored(const cdp_model *m, int l);
size_t cdp_stage_out_stored(const cdp_model *m, int l);
/* Floats per sample of the model's input. */
int cdp_model_in(const cdp_model *m);
/* FLOPs of forward + backward of stage l for B samples. */
double cdp_stage_flops(const cdp_model *m, int l, int B);

/* Forward of stage l for one micro-batch: x [B, in] -> act.  On the last
 * stage the loss is computed too: the logits are replaced by dLoss/dlogits
 * and stats (backend memory, 2 doubles) accumulate loss sum and correct
 * count.  train = 0: evaluation (BatchNorm uses its running statistics).
 * ws: cdp_model_ws_floats floats.  ctx: where a training call stands (the
 * step and the micro-batch, for the layers that draw random numbers);
 * NULL: seed 0, step 0, first sample 0 (evaluation draws nothing). */
void cdp_stage_fwd(const cdp_backend *be, const cdp_model *m, int l, int B,
                   const float *stage_params, const float *x, float *act,
                   const int32_t *labels, double *stats, float *ws, int train,
                   const cdp_layer_ctx *ctx);
/* Whether stage l's backward reads act at all.  When it does not, the
 * stage's output is needed only as the next stage's input, and can go as
 * soon as the next stage's backward is done. */
int cdp_stage_bwd_reads_act(const cdp_model *m, int l);
/* The stage's output inside act. */
float *cdp_stage_output(const cdp_model *m, int l, int B, float *act);
/* 1 if the backend's accumulating backward is exact (backend.h) on every
 * layer of the model at micro-batch B. */
int cdp_model_accumulate_exact(const cdp_backend *be, const cdp_model *m, int B);

/* Backward of stage l for worker `worker`: given x (its input), act (from
 * its forward) and dout (the gradient of its output, [B, out]; ignored on
 * the last stage, whose act holds dlogits), writes the stage's gradient into
 * grad (stage_n[l] floats: the head, and the worker's statistics slot of the
 * tail) and into dx (skipped when NULL) dLoss/dx.  When the previous stage
 * ends with a ReLU, dx is already masked by it (that stage's backward then
 * starts from dout as it is: cdp_stage_bwd_reads_act).  act may be
 * clobbered.  accumulate: the head is added to grad and the worker's slot
 * written (the rest of the tail left alone); else the whole of grad is
 * written (other slots zero).  ctx: the forward's (cdp_stage_fwd). */
void cdp_stage_bwd(const cdp_backend *be, const cdp_model *m, int l, int B, int worker,
                   const float *stage_params, const float *x, float *act,
                   const float *dout, float *dx, float *grad, float *ws, int accumulate,
                   const cdp_layer_ctx *ctx);

/* The update of stage l (doc/reference.md sections 3.3, 3.5): the optimizer
 * step st (SGD or AdamW, cdp_optim_step_at) of the trainable head of
 * theta_in with the summed gradient g times gscale into theta_out, and the
 * running statistics of the buffers from g's tail (N workers of B samples).
 * state: the stage's optimizer state, cdp_optim_state_floats(stage_n[l])
 * floats (sgd: the momentum; adamw: exp_avg, then exp_avg_sq at
 * stage_n[l]).  theta_out may equal theta_in or g.  zero_g: g is cleared
 * (+0) once read, as backend sgd's zero_g (theta_out != g).  ws:
 * cdp_model_ws_floats. */
void cdp_stage_update(const cdp_backend *be, const cdp_model *m, int l, int B,
                      const float *theta_in, float *theta_out, float *g, float gscale,
                      float *state, const cdp_optim_step *st, int zero_g, float *ws);

/* Test-set evaluation on the parameters (backend memory): loss sum and
 * correct count over n samples, in chunks of `chunk` rows, through the
 * stages' forward in evaluation mode.  Each image has `channels` planes;
 * norm: NULL or 2*channels floats, the data set's normalisation
 * (cdp_dataset.norm), as the backend's pixels_to_input. */
void cdp_model_evaluate(const cdp_backend *be, const cdp_model *m, const float *params,
                        const uint8_t *pixels, const int32_t *labels, int64_t n,
                        int channels, const float *norm,
                        int chunk, double *loss_sum, double *correct);

#endif
