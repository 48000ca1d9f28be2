/* Internal: what a model builder (mlp.c, resnet.c) calls to add blocks and
 * layers, and what model.c does with the result. */
#ifndef CDP_MODELS_BUILDER_H
#define CDP_MODELS_BUILDER_H

#include <stddef.h>
#include "cdp/model.h"

typedef struct mb {
    cdp_model *m;
    int cap_layers, cap_nodes, cap_blocks;
    char *err;
    size_t errlen;
    int failed;
} mb;

/* The input shape and class count of a model built without data (a config
 * with input.c == 0 or classes == 0): what the builder's spec implies. */
void mb_default_io(mb *b, cdp_shape input, int classes);
/* A layer of the kind with its module name (fields zero, in2 -1): set its
 * kind's fields, then mb_layer.  Returns it. */
cdp_layer mb_named(cdp_layer_kind kind, const char *name);
/* Adds ly reading tensor in (and in2, or -1); its ops compute its output
 * shape.  The output tensor, or -1 after an error.  The mb_ helpers below
 * are this for each kind the builders use. */
int mb_layer(mb *b, cdp_layer ly, int in, int in2);
/* Room for need elements of elem bytes in p (cap of them now), doubling. */
void *cdp_model_grow(void *p, int *cap, int need, size_t elem);
/* Starts a block: the layers added until the next mb_block form it. */
void mb_block(mb *b);
/* Each returns the output tensor (node) index, or -1 after an error. */
int mb_linear(mb *b, const char *name, int in, int out_features);
int mb_conv(mb *b, const char *name, int in, int out_channels, int k, int stride, int pad,
            int bias);
int mb_bn(mb *b, const char *name, int in);
int mb_relu(mb *b, int in);
int mb_maxpool(mb *b, int in, int k, int stride, int pad);
int mb_avgpool(mb *b, int in);
int mb_flatten(mb *b, int in);
int mb_add(mb *b, int x, int y);
/* Tokens [T, 1, D] (cdp/nn.h) */
int mb_linear_tokens(mb *b, const char *name, int in, int out_features);
int mb_layernorm(mb *b, const char *name, int in, float eps);
int mb_gelu(mb *b, int in);
int mb_attention(mb *b, const char *name, int in, int heads);
int mb_class_token(mb *b, int in);
int mb_pos_embed(mb *b, const char *name, int in);
int mb_token_select(mb *b, int in);
/* Sets the initialisation of the layer that produced tensor t; returns t. */
int mb_init_style(mb *b, int t, cdp_init_style style);

/* A family of models, in its own file (mlp.c, resnet.c, vit.c) and one
 * line of registry.c.  build adds blocks to b->m (input node 0 of shape
 * m->input): 0, or -1 with a message; default_stages: the stage count when
 * --stages is not given. */
typedef struct cdp_model_family {
    const char *name;
    const char *form;         /* the free form's pattern, or NULL */
    const char *form_prefix;  /* what a spec of the free form starts with */
    const char *form_about;
    /* the k-th preset into e (name, about, input, classes): 1, or 0 past the last */
    int (*preset)(int k, cdp_model_entry *e);
    int (*build)(mb *b, const char *spec, int *default_stages);
} cdp_model_family;

extern const cdp_model_family cdp_family_mlp, cdp_family_resnet, cdp_family_vit,
    cdp_family_mobile;

/* The family that builds spec (a preset's name or its free form), or NULL. */
const cdp_model_family *cdp_model_family_of(const char *spec);

#endif
