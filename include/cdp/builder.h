/* cdp's public API: defining a model of one's own.
 *
 * A model is defined by a function that adds layers, one after another, to
 * a builder.  Each layer reads one tensor (add reads two) and makes one;
 * tensors are numbered from CDP_INPUT, the model's input, and every
 * function below returns the number of the tensor its layer makes.  After
 * an error a function returns -1, and so does every later one, so that a
 * build function may chain calls and look at its result once.  The builder
 * is the one cdp's own ResNets, ViTs and MLPs are built with.
 *
 * Layers are grouped into blocks (cdp_builder_block); training cuts the
 * blocks into stages (--stages), so a block must be a unit a stage boundary
 * may fall around: its layers read only tensors of the block itself and
 * the block's input, the tensor the previous block made last (a residual
 * block reads its input twice: on its main path and on its shortcut).  The
 * last layer makes the logits: at least as many values as the data has
 * classes (the loss is the cross-entropy over all of them).
 *
 * Names are PyTorch module paths ("layer1.0.conv1"): a layer's tensors in
 * the weight file are NAME.weight, NAME.bias, and so on, and no two layers
 * with parameters may share a name.  ReLU and ReLU6 are in place: their
 * input must be read by no other layer, and must not be their block's
 * input (the previous stage's output, which its backward may read).  Tensors are float32; a sample is NCHW as in
 * PyTorch (cdp/shape.h).
 *
 * Errors: see cdp/model.h. */
#ifndef CDP_PUBLIC_BUILDER_H
#define CDP_PUBLIC_BUILDER_H

#include <stddef.h>
#include "cdp/model.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A model being built; owned by cdp, handed to a build function. */
typedef struct cdp_builder cdp_builder;

/* The tensor of the model's input. */
#define CDP_INPUT 0

/* Builds a model into b: arg is the pointer given to cdp_model_define.
 * Returns the logits tensor (the last layer's), or -1 after an error (one
 * of the builder's, or cdp_builder_fail). */
typedef int (*cdp_model_build_fn)(cdp_builder *b, void *arg);

/* Makes `name` a model that --model (cdp/train.h) and cdp_model_create
 * accept: build is called whenever the model is built, once per shape of
 * the data.  stages: the stages when --stages is not given (<= 0: one per
 * block, at most 4).  about: one line for cdp_run --list-models (NULL:
 * none).  name and about are copied; arg is not, and must stay valid while
 * the model may be built.  Every rank of a job must define the same models,
 * before it builds any (not thread-safe).
 * Errors: a name that is empty, longer than 63 characters, made of other
 * characters than letters, digits and "-_.+", or already taken (a preset,
 * a form such as "mlp:...", an earlier definition); more than 32
 * definitions. */
int cdp_model_define(const char *name, const char *about, cdp_model_build_fn build,
                     void *arg, int stages, char *err, size_t errlen);

/* The shape of one input sample (the data's) and the data's classes. */
cdp_shape cdp_builder_input_shape(const cdp_builder *b);
int cdp_builder_classes(const cdp_builder *b);
/* The shape of tensor t of one sample; {0, 0, 0} when t does not exist. */
cdp_shape cdp_builder_shape(const cdp_builder *b, int t);

/* Starts a block: the layers added until the next call form it.  Layers
 * added before the first call form the first block. */
void cdp_builder_block(cdp_builder *b);

/* torch.nn.Linear(in_features, out_features) on the flattened sample: the
 * output is out_features x 1 x 1.  Tensors NAME.weight [out, in], NAME.bias. */
int cdp_builder_linear(cdp_builder *b, const char *name, int in, int out_features);
/* torch.nn.Conv2d(C, out_channels, k, stride, pad, bias=bias != 0): square
 * kernel, zero padding. */
int cdp_builder_conv2d(cdp_builder *b, const char *name, int in, int out_channels, int k,
                       int stride, int pad, int bias);
/* torch.nn.Conv2d(C, out_channels, k, stride, pad, groups=groups,
 * bias=bias != 0): C and out_channels divisible by groups; groups = C =
 * out_channels is a depthwise convolution.  Weight [out, C/groups, k, k]. */
int cdp_builder_grouped_conv2d(cdp_builder *b, const char *name, int in, int out_channels, int k,
                               int stride, int pad, int groups, int bias);
/* torch.nn.BatchNorm2d(C) (eps 1e-5, momentum 0.1): each micro-batch is
 * normalised with its own statistics; the running statistics (used in
 * evaluation) come from the whole step's batch. */
int cdp_builder_batchnorm2d(cdp_builder *b, const char *name, int in);
/* torch.nn.ReLU(inplace=True). */
int cdp_builder_relu(cdp_builder *b, int in);
/* torch.nn.ReLU6(inplace=True): min(max(x, 0), 6). */
int cdp_builder_relu6(cdp_builder *b, int in);
/* torch.nn.Dropout(p) in training (kept values scaled by 1/(1-p)), the
 * identity in evaluation; its mask a function of the seed, the step, the
 * sample, the layer and the element, so the same on any number of ranks.
 * p in [0, 1]. */
int cdp_builder_dropout(cdp_builder *b, const char *name, int in, float p);
/* torch.nn.MaxPool2d(k, stride, pad). */
int cdp_builder_maxpool2d(cdp_builder *b, int in, int k, int stride, int pad);
/* Global average pooling, torch.nn.AdaptiveAvgPool2d(1): C x H x W -> C x 1 x 1. */
int cdp_builder_avgpool(cdp_builder *b, int in);
/* torch.nn.AdaptiveAvgPool2d(out): C x H x W -> C x out x out, output (i, j)
 * the mean of rows floor(i*H/out) .. ceil((i+1)*H/out)-1 and the columns
 * alike; out in [1, 65536] (1: cdp_builder_avgpool), larger than H or W
 * too. */
int cdp_builder_adaptive_avgpool(cdp_builder *b, int in, int out);
/* torch.flatten(x, 1): C x H x W -> CHW x 1 x 1, a view (no copy). */
int cdp_builder_flatten(cdp_builder *b, int in);
/* x + y, of the same shape (a residual connection). */
int cdp_builder_add(cdp_builder *b, int x, int y);

/* Tokens T x 1 x D (Vision Transformer layers). */
/* torch.nn.Linear on each token: T x 1 x D -> T x 1 x out_features. */
int cdp_builder_linear_tokens(cdp_builder *b, const char *name, int in, int out_features);
/* torch.nn.LayerNorm(D, eps) over each token's features. */
int cdp_builder_layernorm(cdp_builder *b, const char *name, int in, float eps);
/* torch.nn.GELU() (exact, with erf). */
int cdp_builder_gelu(cdp_builder *b, int in);
/* torch.nn.MultiheadAttention(D, heads, batch_first=True) on x, x, x:
 * NAME.in_proj_weight, NAME.in_proj_bias, NAME.out_proj.weight, .bias. */
int cdp_builder_attention(cdp_builder *b, const char *name, int in, int heads);
/* A convolution's output D x h x w -> tokens (1 + h*w) x 1 x D, a learned
 * class token first (tensor "class_token"), as torchvision's ViT. */
int cdp_builder_class_token(cdp_builder *b, int in);
/* Adds a learned position embedding, NAME.pos_embedding [1, T, D]. */
int cdp_builder_pos_embed(cdp_builder *b, const char *name, int in);
/* The first token: T x 1 x D -> D x 1 x 1. */
int cdp_builder_token_select(cdp_builder *b, int in);

/* For a build function that refuses what it is given (the input shape,
 * say): the message, printf-style, becomes the error of the build, and the
 * build fails.  Returns -1. */
int cdp_builder_fail(cdp_builder *b, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

#ifdef __cplusplus
}
#endif

#endif
