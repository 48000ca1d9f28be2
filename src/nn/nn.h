/* Layers: the operations a network is made of, each written once above the
 * backend (src/nn/, one file per kind).
 *
 * A layer reads one tensor (two for add) and writes one; tensors are float32,
 * NCHW per micro-batch, shapes given per sample (cdp_shape).  A layer kind
 * supplies, through cdp_layer_ops: its parameter tensors (PyTorch names,
 * shapes, initialisation), forward in training and in evaluation mode,
 * backward, FLOPs, and the bytes it keeps from forward to backward beyond
 * its output (its "saved" area).  The model (src/models/) strings layers into
 * blocks and stages and owns every offset; a layer sees only pointers. */
#ifndef CDP_NN_NN_H
#define CDP_NN_NN_H

#include <stddef.h>
#include <stdint.h>
#include "cdp/shape.h"
#include "backend/backend.h"

/* cdp_shape (cdp/shape.h): one sample, channels x height x width
 * (features: c x 1 x 1; tokens [T, D]: T x 1 x D, so that memory is
 * PyTorch's [B, T, D]). */
static inline size_t cdp_shape_n(cdp_shape s)
{
    return (size_t)s.c * (size_t)s.h * (size_t)s.w;
}

typedef enum cdp_layer_kind {
#define CDP_LAYER_KIND(KIND, ops) CDP_LAYER_##KIND,
#include "nn/layer_kinds.def"
#undef CDP_LAYER_KIND
    CDP_LAYER_KINDS
} cdp_layer_kind;

/* What a parameter tensor is, for the tensor list and the update. */
typedef enum cdp_tensor_kind {
    CDP_TENSOR_PARAM,      /* trained by the optimizer */
    CDP_TENSOR_BUFFER,     /* float state outside the optimizer (running statistics) */
    CDP_TENSOR_COUNTER     /* int64 scalar (num_batches_tracked): the update count */
} cdp_tensor_kind;

/* How a layer's parameter tensor is initialised (from the model's seed). */
typedef enum cdp_init_kind {
    CDP_INIT_UNIFORM,      /* uniform in [-a, a] */
    CDP_INIT_NORMAL,       /* normal, mean 0, standard deviation a */
    CDP_INIT_CONST,        /* every element a */
    CDP_INIT_TRUNC_NORMAL  /* normal, mean 0, standard deviation a, redrawn outside [-2, 2]
                            * (nn.init.trunc_normal_'s default bounds) */
} cdp_init_kind;

/* Whose initialisation a linear or conv2d layer follows (the same layer
 * kind is initialised differently by torchvision's ResNets and ViT). */
typedef enum cdp_init_style {
    CDP_INIT_STYLE_TORCH,      /* the module's own reset_parameters (ResNets: kaiming
                                * normal fan_out for conv weights) */
    CDP_INIT_STYLE_XAVIER,     /* ViT's MLP: xavier_uniform_ weight, normal(1e-6) bias */
    CDP_INIT_STYLE_PATCH,      /* ViT's conv_proj: trunc_normal_(std sqrt(1/fan_in)), zero bias */
    CDP_INIT_STYLE_ZERO        /* ViT's head: zeros */
} cdp_init_style;

typedef struct cdp_layer {
    cdp_layer_kind kind;
    char name[64];        /* PyTorch module path ("layer1.0.conv1"); "" for stateless */
    int in, in2;          /* tensor indices read (in2: add only, else -1) */
    int out;              /* tensor index written */
    cdp_shape xs, ys;     /* input and output shape of one sample */
    int k, stride, pad;   /* conv2d, maxpool2d: square kernel */
    int bias;             /* conv2d: has a bias */
    int groups;           /* conv2d: nn.Conv2d's groups (0 or 1: none; the channels
                           * of the input: depthwise) */
    float eps, momentum;  /* batchnorm2d; eps: layernorm */
    int tokens;           /* linear: applied to each token, the last dim of [T, 1, D]
                           * (else to the flattened sample) */
    int heads;            /* attention */
    cdp_init_style init;  /* linear, conv2d: whose initialisation */
    int fuse_relu;        /* linear followed by an in-place relu: one kernel */
    double drop_p;        /* dropout: the probability of zeroing an element, in [0, 1] */
    int lowp;             /* --precision bf16: the model keeps the layer's tensors and
                           * saved area in bfloat16 (set by the model) */
    /* set by the model: offsets in floats inside the stage's parameter
     * region (weight first, then bias; gamma then beta), of the buffers
     * (running mean, running var), of the saved area inside the stage's
     * activations, and of the layer's statistics in a worker's slot (in
     * doubles, batchnorm) */
    size_t p_off, b_off, save_off, stat_off;
} cdp_layer;

/* One parameter tensor of a layer, as the layer kind describes it. */
typedef struct cdp_param_desc {
    const char *suffix;   /* "weight", "bias", "running_mean", ... */
    cdp_tensor_kind kind;
    int ndim;
    int64_t shape[4];
    cdp_init_kind init;
    float a;
} cdp_param_desc;

/* the floats of a parameter tensor */
static inline size_t cdp_param_floats(const cdp_param_desc *d)
{
    size_t n = 1;
    for (int k = 0; k < d->ndim; k++)
        n *= (size_t)d->shape[k];
    return n;
}

/* Where a training forward or backward call stands, for the layers that
 * draw random numbers (dropout).  A layer's draws are a function of these,
 * of its index in the model (cdp_layer_io.layer_index) and of the element
 * alone: never of the rank, the worker's place in the schedule, the cut
 * into stages or the threads, so every rank count and the serial reference
 * draw the same numbers. */
typedef struct cdp_layer_ctx {
    uint64_t seed;        /* the run's seed (--seed) */
    int64_t step;         /* the optimizer step, from 0 */
    int64_t sample0;      /* the micro-batch's first sample within the step (worker i: i * B) */
    uint64_t params_tag;  /* nonzero: names the parameters' contents (the same tag, the
                           * same values: the executor's run and version), so that
                           * --precision bf16 rounds each version's weights once; 0:
                           * unknown, rounded at every call */
} cdp_layer_ctx;

/* Everything a forward or backward call gets.  p: the layer's trainable
 * parameters (weight, then bias), bufs: its buffers, g: the gradient of p
 * (same layout), save: its saved area, stats: its slot of statistics. */
typedef struct cdp_layer_io {
    const cdp_backend *be;
    int B;
    const float *p, *bufs;
    float *g;
    float *save;
    double *stats;
    const float *x, *x2;  /* inputs */
    float *y;             /* output */
    const float *dy;      /* backward: gradient of the output */
    float *dx, *dx2;      /* backward: gradient of the inputs (NULL: not needed) */
    int relu_dx;          /* backward: mask dx by x > 0 (x is a ReLU's output) */
    int accumulate;       /* backward: add the parameter gradient into g */
    float *ws;            /* scratch: the layer's ws_floats */
    const cdp_layer_ctx *ctx;  /* where the call stands (only a layer that draws reads it) */
    int layer_index;      /* the layer's index in the model's layer list */
    int lowp;             /* 1 under --precision bf16: the stage has rounded x, the lowp
                           * weights and dy already; a layer with products inside
                           * (attention) rounds their other operands itself */
    /* --precision bf16 on a backend with bfloat16 kernels (be->bf16), for a
     * layer that reads_bf16: its input's bfloat16 storage (NULL: x, rounded
     * floats), its lowp_params weights in bfloat16 storage at the offsets
     * they have in p (p holds the float32 parameters), and in the backward
     * its output's gradient rounded, in bfloat16 storage (dy is then not
     * rounded) */
    const uint16_t *x16, *p16, *dy16;
    /* --precision bf16 on a backend with bfloat16 kernels, for a layer that
     * bf16_io: in the forward, when its output is kept in bfloat16 (and no
     * input is the network's), y16 (y NULL) and each input kept so as x16,
     * x2_16 (x, x2 NULL), the others in x, x2 as floats holding bfloat16
     * values (an in-place layer: y16 only); else none of them.  In the
     * backward x16 when it reads its input kept so, y16 (read only) when it
     * reads its output kept so */
    const uint16_t *x2_16;
    uint16_t *y16;
} cdp_layer_io;

/* Where a layer's output lives. */
typedef enum cdp_layer_storage {
    CDP_STORAGE_NEW,        /* a tensor of its own */
    CDP_STORAGE_IN_PLACE,   /* over its input (the model aliases the two, so no
                             * other layer may read the input); its backward
                             * works in place on the output's gradient */
    CDP_STORAGE_VIEW        /* its input's storage in another shape: no work
                             * forward or backward */
} cdp_layer_storage;

enum { CDP_BF16_IO_FWD = 1, CDP_BF16_IO_BWD = 2, CDP_BF16_IO = 3 };

typedef struct cdp_layer_ops {
    const char *name;
    cdp_layer_storage storage;
    /* 1: an in-place max(x, 0), whose backward masks the gradient by the
     * output's sign.  The layer before it, when it fuses_relu, runs it in
     * its forward; its only reader, when it fuses_relu, applies the mask
     * to its dx (relu_dx); a stage that ends with it leaves the mask to
     * the next stage, so that no backward reads its own stage's output. */
    int relu;
    /* 1: the forward can apply a following ReLU and the backward the mask
     * of the ReLU that produced its input (cdp_layer.fuse_relu, relu_dx) */
    int fuses_relu;
    /* 0, or -1 with a message when a step of N micro-batches of B samples
     * is too small for the layer to train on; NULL: any step */
    int (*check_step)(const cdp_layer *ly, int N, int B, char *err, size_t errlen);
    /* after the optimizer step: the buffers (running statistics) from the
     * statistics of the step's N micro-batches of B samples (stats: the
     * layer's first, stride doubles between micro-batches); NULL: none */
    void (*update_buffers)(const cdp_layer *ly, const cdp_backend *be, int N, int B,
                           const double *stats, size_t stride, const float *buf_in,
                           float *buf_out);
    /* output shape from the input shape; -1 with a message when invalid */
    int (*shape)(cdp_layer *ly, char *err, size_t errlen);
    /* the layer's parameter tensors (up to 8), in file order */
    int (*params)(const cdp_layer *ly, cdp_param_desc *d);
    /* floats kept from forward to backward, beyond the output: per sample
     * (times B) and fixed */
    size_t (*save_per_sample)(const cdp_layer *ly);
    size_t (*save_fixed)(const cdp_layer *ly);
    /* doubles of running statistics per micro-batch (batchnorm: 2C) */
    size_t (*stat_doubles)(const cdp_layer *ly);
    /* forward in training (train = 1) or evaluation mode */
    void (*fwd)(const cdp_layer *ly, const cdp_layer_io *io, int train);
    /* backward; also reads the output when reads_output says so */
    void (*bwd)(const cdp_layer *ly, const cdp_layer_io *io);
    /* 1 if the backward reads the layer's input, its output */
    int reads_input, reads_output;
    /* 1: a GEMM or convolution layer, whose products take bfloat16 operands
     * under --precision bf16 (its input, the weights lowp_params names,
     * and in the backward the output's gradient, each rounded by the
     * stage) */
    int lowp_operands;
    /* bit k set: parameter k (ops->params' order) is a weight of the
     * products, rounded to bfloat16 under --precision bf16 */
    unsigned lowp_params;
    /* 1: under --precision bf16 on a backend with bfloat16 kernels, reads
     * x16, p16 and dy16 (cdp_layer_io) in place of x, its rounded weights
     * and dy, so that the stage neither widens nor rounds them */
    int reads_bf16;
    /* under --precision bf16 on a backend with bfloat16 kernels, an
     * element-wise layer that reads and writes the bfloat16 storage of the
     * tensors kept so (x16, x2_16, y16 of cdp_layer_io) with the backend's
     * bf16 kernels, the same bits as on widened copies: in its forward
     * (CDP_BF16_IO_FWD), its backward (CDP_BF16_IO_BWD), or both */
    unsigned bf16_io;
    /* forward + backward FLOPs for B samples, with or without dx */
    double (*flops)(const cdp_layer *ly, int B, int need_dx);
    /* scratch in floats for B samples (NULL: none) */
    size_t (*ws_floats)(const cdp_layer *ly, const cdp_backend *be, int B);
    /* 1 if its accumulating backward is exact on this backend at B (the
     * bits of a separate result added after); NULL: exact by contract */
    int (*accumulate_exact)(const cdp_layer *ly, const cdp_backend *be, int B);
} cdp_layer_ops;

const cdp_layer_ops *cdp_layer_ops_of(cdp_layer_kind kind);

#endif
