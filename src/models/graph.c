/* The layer graph a family's builder makes (mb_* of builder.h): tensors
 * (nodes), layers reading and writing them, and the blocks stages are cut
 * between.  What a layer kind is (its shape rule, storage, parameters) is
 * asked of its ops (src/nn), so a new kind needs nothing here: a builder
 * adds it with mb_layer(b, mb_named(KIND, name), in, -1). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "builder.h"

void *cdp_model_grow(void *p, int *cap, int need, size_t elem)
{
    if (need <= *cap)
        return p;
    int c = *cap ? *cap : 16;
    while (c < need)
        c *= 2;
    void *q = realloc(p, (size_t)c * elem);
    if (!q) abort();
    *cap = c;
    return q;
}

static int add_node(mb *b, cdp_shape s, int producer, int root)
{
    cdp_model *m = b->m;
    m->nodes = cdp_model_grow(m->nodes, &b->cap_nodes, m->nnodes + 1, sizeof *m->nodes);
    int t = m->nnodes++;
    m->nodes[t] = (cdp_node){ s, producer, root < 0 ? t : root, 0 };
    return t;
}

void mb_default_io(mb *b, cdp_shape input, int classes)
{
    if (b->m->input.c == 0)
        b->m->input = input;
    if (b->m->classes == 0)
        b->m->classes = classes;
}

void mb_block(mb *b)
{
    cdp_model *m = b->m;
    m->block_first = cdp_model_grow(m->block_first, &b->cap_blocks, m->nblocks + 2, sizeof *m->block_first);
    m->block_first[m->nblocks++] = m->nlayers;
}

int mb_layer(mb *b, cdp_layer ly, int in, int in2)
{
    cdp_model *m = b->m;
    if (b->failed || in < 0 || (in2 < -1))
        return -1;
    if (m->nnodes == 0)   /* node 0: the network's input, shaped by now */
        add_node(b, m->input, -1, -1);
    ly.in = in;
    ly.in2 = in2;
    ly.xs = m->nodes[in].shape;
    if (in2 >= 0) {
        cdp_shape s2 = m->nodes[in2].shape;
        if (s2.c != ly.xs.c || s2.h != ly.xs.h || s2.w != ly.xs.w) {
            snprintf(b->err, b->errlen, "--model: internal error: add of %dx%dx%d and %dx%dx%d",
                     ly.xs.c, ly.xs.h, ly.xs.w, s2.c, s2.h, s2.w);
            b->failed = 1;
            return -1;
        }
    }
    const cdp_layer_ops *ops = cdp_layer_ops_of(ly.kind);
    if (ops->shape(&ly, b->err, b->errlen)) {
        b->failed = 1;
        return -1;
    }
    m->layers = cdp_model_grow(m->layers, &b->cap_layers, m->nlayers + 1, sizeof *m->layers);
    const int j = m->nlayers++;
    /* in place and views share their input's storage */
    ly.out = add_node(b, ly.ys, j, ops->storage != CDP_STORAGE_NEW ? m->nodes[in].root : -1);
    m->layers[j] = ly;
    m->nodes[in].consumers++;
    if (in2 >= 0)
        m->nodes[in2].consumers++;
    return ly.out;
}

cdp_layer mb_named(cdp_layer_kind kind, const char *name)
{
    cdp_layer ly;
    memset(&ly, 0, sizeof ly);
    ly.kind = kind;
    ly.in2 = -1;
    if (name)
        snprintf(ly.name, sizeof ly.name, "%s", name);
    return ly;
}

int mb_linear(mb *b, const char *name, int in, int out_features)
{
    cdp_layer ly = mb_named(CDP_LAYER_LINEAR, name);
    ly.ys.c = out_features;
    return mb_layer(b, ly, in, -1);
}

int mb_conv(mb *b, const char *name, int in, int out_channels, int k, int stride, int pad,
            int bias)
{
    cdp_layer ly = mb_named(CDP_LAYER_CONV2D, name);
    ly.ys.c = out_channels;
    ly.k = k;
    ly.stride = stride;
    ly.pad = pad;
    ly.bias = bias;
    return mb_layer(b, ly, in, -1);
}

int mb_bn(mb *b, const char *name, int in)
{
    cdp_layer ly = mb_named(CDP_LAYER_BATCHNORM2D, name);
    ly.eps = 1e-5f;
    ly.momentum = 0.1f;
    return mb_layer(b, ly, in, -1);
}

int mb_relu(mb *b, int in)
{
    return mb_layer(b, mb_named(CDP_LAYER_RELU, "relu"), in, -1);
}

int mb_maxpool(mb *b, int in, int k, int stride, int pad)
{
    cdp_layer ly = mb_named(CDP_LAYER_MAXPOOL2D, "maxpool");
    ly.k = k;
    ly.stride = stride;
    ly.pad = pad;
    return mb_layer(b, ly, in, -1);
}

int mb_avgpool(mb *b, int in)
{
    return mb_layer(b, mb_named(CDP_LAYER_AVGPOOL, "avgpool"), in, -1);
}

int mb_flatten(mb *b, int in)
{
    return mb_layer(b, mb_named(CDP_LAYER_FLATTEN, "flatten"), in, -1);
}

int mb_add(mb *b, int x, int y)
{
    return mb_layer(b, mb_named(CDP_LAYER_ADD, "add"), x, y);
}

int mb_init_style(mb *b, int t, cdp_init_style style)
{
    if (t < 0 || b->failed)
        return -1;
    b->m->layers[b->m->nodes[t].producer].init = style;
    return t;
}

int mb_linear_tokens(mb *b, const char *name, int in, int out_features)
{
    cdp_layer ly = mb_named(CDP_LAYER_LINEAR, name);
    ly.tokens = 1;
    ly.ys.w = out_features;
    return mb_layer(b, ly, in, -1);
}

int mb_layernorm(mb *b, const char *name, int in, float eps)
{
    cdp_layer ly = mb_named(CDP_LAYER_LAYERNORM, name);
    ly.eps = eps;
    return mb_layer(b, ly, in, -1);
}

int mb_gelu(mb *b, int in)
{
    return mb_layer(b, mb_named(CDP_LAYER_GELU, "gelu"), in, -1);
}

int mb_attention(mb *b, const char *name, int in, int heads)
{
    cdp_layer ly = mb_named(CDP_LAYER_ATTENTION, name);
    ly.heads = heads;
    return mb_layer(b, ly, in, -1);
}

int mb_class_token(mb *b, int in)
{
    return mb_layer(b, mb_named(CDP_LAYER_CLASS_TOKEN, ""), in, -1);
}

int mb_pos_embed(mb *b, const char *name, int in)
{
    return mb_layer(b, mb_named(CDP_LAYER_POS_EMBED, name), in, -1);
}

int mb_token_select(mb *b, int in)
{
    return mb_layer(b, mb_named(CDP_LAYER_TOKEN_SELECT, "select"), in, -1);
}
