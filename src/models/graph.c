/* The layer graph a model's builder makes (cdp/builder.h): tensors (nodes),
 * layers reading and writing them, and the blocks stages are cut between.
 * What a layer kind is (its shape rule, storage, parameters) is asked of
 * its ops (src/nn), so a new kind needs nothing here but its cdp_builder_
 * function: cdp_builder_layer(b, cdp_builder_named(b, KIND, name), in, -1).
 * The arguments are checked here, since a user's builder gives them: a
 * bad one fails the build with a message, never a layer that cannot run. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "builder.h"

/* Values of one sample a tensor may hold: sizes stay well inside an int. */
#define MAX_SAMPLE_VALUES (1 << 28)

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

static int vfail(cdp_builder *b, const char *fmt, va_list ap)
{
    if (!b->failed) {   /* the first error is the one to fix */
        int n = snprintf(b->err, b->errlen, "--model %s: ", b->m->name);
        if (n >= 0 && (size_t)n < b->errlen)
            vsnprintf(b->err + n, b->errlen - (size_t)n, fmt, ap);
        b->failed = 1;
    }
    return -1;
}

int cdp_builder_fail(cdp_builder *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfail(b, fmt, ap);
    va_end(ap);
    return -1;
}

static int add_node(cdp_builder *b, cdp_shape s, int producer, int root)
{
    cdp_model *m = b->m;
    m->nodes = cdp_model_grow(m->nodes, &b->cap_nodes, m->nnodes + 1, sizeof *m->nodes);
    int t = m->nnodes++;
    m->nodes[t] = (cdp_node){ s, producer, root < 0 ? t : root, 0 };
    return t;
}

/* node 0: the network's input, shaped by the time the first layer or
 * question comes */
static void add_input(cdp_builder *b)
{
    if (b->m->nnodes == 0)
        add_node(b, b->m->input, -1, -1);
}

void cdp_builder_default_io(cdp_builder *b, cdp_shape input, int classes)
{
    if (b->m->input.c == 0)
        b->m->input = input;
    if (b->m->classes == 0)
        b->m->classes = classes;
}

cdp_shape cdp_builder_input_shape(const cdp_builder *b)
{
    return b->m->input;
}

int cdp_builder_classes(const cdp_builder *b)
{
    return b->m->classes;
}

cdp_shape cdp_builder_shape(const cdp_builder *b, int t)
{
    if (t == 0)
        return b->m->input;
    if (t < 0 || t >= b->m->nnodes)
        return (cdp_shape){ 0, 0, 0 };
    return b->m->nodes[t].shape;
}

void cdp_builder_block(cdp_builder *b)
{
    cdp_model *m = b->m;
    if (m->nblocks && m->block_first[m->nblocks - 1] == m->nlayers)
        return;   /* the current block is still empty: it stays the one */
    m->block_first = cdp_model_grow(m->block_first, &b->cap_blocks, m->nblocks + 2,
                                    sizeof *m->block_first);
    m->block_first[m->nblocks++] = m->nlayers;
}

/* whether t names a tensor the next layer may read */
static int tensor_ok(cdp_builder *b, int t, const char *kind)
{
    if (t >= 0 && t < b->m->nnodes)
        return 1;
    cdp_builder_fail(b, "%s reads tensor %d, which does not exist (tensors 0 to %d so far)",
                     kind, t, b->m->nnodes - 1);
    return 0;
}

int cdp_builder_layer(cdp_builder *b, cdp_layer ly, int in, int in2)
{
    cdp_model *m = b->m;
    if (b->failed)
        return -1;
    add_input(b);
    const cdp_layer_ops *ops = cdp_layer_ops_of(ly.kind);
    if (!tensor_ok(b, in, ops->name) || (in2 != -1 && !tensor_ok(b, in2, ops->name)))
        return -1;
    if (m->nblocks == 0)
        cdp_builder_block(b);
    ly.in = in;
    ly.in2 = in2;
    ly.xs = m->nodes[in].shape;
    if (in2 >= 0) {
        cdp_shape s2 = m->nodes[in2].shape;
        if (s2.c != ly.xs.c || s2.h != ly.xs.h || s2.w != ly.xs.w)
            return cdp_builder_fail(b, "%s of tensors %d and %d: their shapes %dx%dx%d and "
                                    "%dx%dx%d differ", ops->name, in, in2, ly.xs.c, ly.xs.h,
                                    ly.xs.w, s2.c, s2.h, s2.w);
    }
    char why[400];
    if (ops->shape(&ly, why, sizeof why))
        return cdp_builder_fail(b, "%s", why);
    if (ly.ys.c < 1 || ly.ys.h < 1 || ly.ys.w < 1 || cdp_shape_n(ly.ys) > MAX_SAMPLE_VALUES)
        return cdp_builder_fail(b, "%s %s: its output %dx%dx%d is empty or larger than %d "
                                "values per sample", ops->name, ly.name, ly.ys.c, ly.ys.h,
                                ly.ys.w, MAX_SAMPLE_VALUES);
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

cdp_layer cdp_builder_named(cdp_builder *b, cdp_layer_kind kind, const char *name)
{
    cdp_layer ly;
    memset(&ly, 0, sizeof ly);
    ly.kind = kind;
    ly.in2 = -1;
    if (name && strlen(name) >= sizeof ly.name)
        cdp_builder_fail(b, "layer name '%.40s...' is longer than %zu characters", name,
                         sizeof ly.name - 1);
    else if (name)
        snprintf(ly.name, sizeof ly.name, "%s", name);
    return ly;
}

/* 1 when every value is at least its minimum, else the build fails naming
 * the first that is not */
static int at_least(cdp_builder *b, const char *layer, const char *what, int v, int min)
{
    if (v >= min)
        return 1;
    cdp_builder_fail(b, "%s: %s %d, at least %d", layer, what, v, min);
    return 0;
}

/* 1 when 0 <= pad <= max for a k x k window, else the build fails */
static int pad_ok(cdp_builder *b, const char *layer, int pad, int k, int max)
{
    if (pad >= 0 && pad <= max)
        return 1;
    cdp_builder_fail(b, "%s: padding %d with a %dx%d window, expected 0 to %d", layer, pad, k,
                     k, max);
    return 0;
}

/* token layers read tokens T x 1 x D */
static int tokens_ok(cdp_builder *b, const char *layer, int in)
{
    cdp_shape s = cdp_builder_shape(b, in);
    if (b->failed || in < 0 || in >= b->m->nnodes || s.h == 1)
        return 1;   /* cdp_builder_layer reports a bad tensor */
    cdp_builder_fail(b, "%s reads a %dx%dx%d tensor: it takes tokens T x 1 x D", layer, s.c,
                     s.h, s.w);
    return 0;
}

int cdp_builder_linear(cdp_builder *b, const char *name, int in, int out_features)
{
    cdp_layer ly = cdp_builder_named(b, CDP_LAYER_LINEAR, name);
    if (!at_least(b, ly.name, "out_features", out_features, 1))
        return -1;
    ly.ys.c = out_features;
    return cdp_builder_layer(b, ly, in, -1);
}

int cdp_builder_conv2d(cdp_builder *b, const char *name, int in, int out_channels, int k,
                       int stride, int pad, int bias)
{
    return cdp_builder_grouped_conv2d(b, name, in, out_channels, k, stride, pad, 1, bias);
}

int cdp_builder_grouped_conv2d(cdp_builder *b, const char *name, int in, int out_channels, int k,
                               int stride, int pad, int groups, int bias)
{
    cdp_layer ly = cdp_builder_named(b, CDP_LAYER_CONV2D, name);
    if (!at_least(b, ly.name, "out_channels", out_channels, 1) ||
        !at_least(b, ly.name, "kernel", k, 1) || !at_least(b, ly.name, "stride", stride, 1) ||
        !at_least(b, ly.name, "groups", groups, 1) || !pad_ok(b, ly.name, pad, k, k - 1))
        return -1;
    ly.ys.c = out_channels;
    ly.k = k;
    ly.stride = stride;
    ly.pad = pad;
    ly.groups = groups;
    ly.bias = bias != 0;
    return cdp_builder_layer(b, ly, in, -1);
}

int cdp_builder_batchnorm2d(cdp_builder *b, const char *name, int in)
{
    cdp_layer ly = cdp_builder_named(b, CDP_LAYER_BATCHNORM2D, name);
    ly.eps = 1e-5f;
    ly.momentum = 0.1f;
    return cdp_builder_layer(b, ly, in, -1);
}

int cdp_builder_relu(cdp_builder *b, int in)
{
    return cdp_builder_layer(b, cdp_builder_named(b, CDP_LAYER_RELU, "relu"), in, -1);
}

int cdp_builder_relu6(cdp_builder *b, int in)
{
    return cdp_builder_layer(b, cdp_builder_named(b, CDP_LAYER_RELU6, "relu6"), in, -1);
}

int cdp_builder_dropout(cdp_builder *b, const char *name, int in, float p)
{
    cdp_layer ly = cdp_builder_named(b, CDP_LAYER_DROPOUT, name);
    ly.drop_p = p;   /* its shape rule refuses p outside [0, 1] */
    return cdp_builder_layer(b, ly, in, -1);
}

int cdp_builder_maxpool2d(cdp_builder *b, int in, int k, int stride, int pad)
{
    cdp_layer ly = cdp_builder_named(b, CDP_LAYER_MAXPOOL2D, "maxpool");
    /* PyTorch's bound: padding at most half the window */
    if (!at_least(b, "maxpool", "kernel", k, 1) || !at_least(b, "maxpool", "stride", stride, 1) ||
        !pad_ok(b, "maxpool", pad, k, k / 2))
        return -1;
    ly.k = k;
    ly.stride = stride;
    ly.pad = pad;
    return cdp_builder_layer(b, ly, in, -1);
}

int cdp_builder_avgpool(cdp_builder *b, int in)
{
    return cdp_builder_layer(b, cdp_builder_named(b, CDP_LAYER_AVGPOOL, "avgpool"), in, -1);
}

int cdp_builder_adaptive_avgpool(cdp_builder *b, int in, int out)
{
    cdp_layer ly = cdp_builder_named(b, CDP_LAYER_AVGPOOL, "avgpool");
    if (!at_least(b, "avgpool", "output size", out, 1))
        return -1;
    ly.k = out > 1 ? out : 0;   /* 0: global pooling, the kernels of before */
    return cdp_builder_layer(b, ly, in, -1);
}

int cdp_builder_flatten(cdp_builder *b, int in)
{
    return cdp_builder_layer(b, cdp_builder_named(b, CDP_LAYER_FLATTEN, "flatten"), in, -1);
}

int cdp_builder_add(cdp_builder *b, int x, int y)
{
    if (y < 0 && !b->failed)
        return cdp_builder_fail(b, "add reads tensor %d, which does not exist", y);
    return cdp_builder_layer(b, cdp_builder_named(b, CDP_LAYER_ADD, "add"), x, y);
}

int cdp_builder_init_style(cdp_builder *b, int t, cdp_init_style style)
{
    if (t < 0 || b->failed)
        return -1;
    b->m->layers[b->m->nodes[t].producer].init = style;
    return t;
}

int cdp_builder_linear_tokens(cdp_builder *b, const char *name, int in, int out_features)
{
    cdp_layer ly = cdp_builder_named(b, CDP_LAYER_LINEAR, name);
    if (!at_least(b, ly.name, "out_features", out_features, 1) || !tokens_ok(b, ly.name, in))
        return -1;
    ly.tokens = 1;
    ly.ys.w = out_features;
    return cdp_builder_layer(b, ly, in, -1);
}

int cdp_builder_layernorm(cdp_builder *b, const char *name, int in, float eps)
{
    cdp_layer ly = cdp_builder_named(b, CDP_LAYER_LAYERNORM, name);
    if (!tokens_ok(b, ly.name, in))
        return -1;
    if (!(eps > 0.0f) || !isfinite(eps))
        return cdp_builder_fail(b, "%s: eps %g, must be positive", ly.name, (double)eps);
    ly.eps = eps;
    return cdp_builder_layer(b, ly, in, -1);
}

int cdp_builder_gelu(cdp_builder *b, int in)
{
    return cdp_builder_layer(b, cdp_builder_named(b, CDP_LAYER_GELU, "gelu"), in, -1);
}

int cdp_builder_attention(cdp_builder *b, const char *name, int in, int heads)
{
    cdp_layer ly = cdp_builder_named(b, CDP_LAYER_ATTENTION, name);
    if (!at_least(b, ly.name, "heads", heads, 1) || !tokens_ok(b, ly.name, in))
        return -1;
    ly.heads = heads;
    return cdp_builder_layer(b, ly, in, -1);
}

int cdp_builder_class_token(cdp_builder *b, int in)
{
    return cdp_builder_layer(b, cdp_builder_named(b, CDP_LAYER_CLASS_TOKEN, ""), in, -1);
}

int cdp_builder_pos_embed(cdp_builder *b, const char *name, int in)
{
    cdp_layer ly = cdp_builder_named(b, CDP_LAYER_POS_EMBED, name);
    if (!tokens_ok(b, ly.name, in))
        return -1;
    return cdp_builder_layer(b, ly, in, -1);
}

int cdp_builder_token_select(cdp_builder *b, int in)
{
    if (!tokens_ok(b, "select", in))
        return -1;
    return cdp_builder_layer(b, cdp_builder_named(b, CDP_LAYER_TOKEN_SELECT, "select"), in, -1);
}

/* the layer's kind, and its name when the user gave it one (layers with
 * parameters), for messages */
static const char *layer_label(const cdp_model *m, int j, char *buf, size_t len)
{
    const cdp_layer *ly = &m->layers[j];
    const cdp_layer_ops *ops = cdp_layer_ops_of(ly->kind);
    snprintf(buf, len, "%s%s%s", ops->name, ops->params && ly->name[0] ? " " : "",
             ops->params ? ly->name : "");
    return buf;
}

/* 0 when no two layers with parameters share a name (their tensors would) */
static int names_unique(cdp_builder *b)
{
    const cdp_model *m = b->m;
    char l1[96];
    for (int j = 0; j < m->nlayers; j++) {
        if (!cdp_layer_ops_of(m->layers[j].kind)->params)
            continue;
        for (int i = 0; i < j; i++)
            if (cdp_layer_ops_of(m->layers[i].kind)->params &&
                strcmp(m->layers[i].name, m->layers[j].name) == 0)
                return cdp_builder_fail(b, "%s has the name of an earlier layer with "
                                        "parameters: the weight file names tensors by their "
                                        "layer's name", layer_label(m, j, l1, sizeof l1));
    }
    return 0;
}

int cdp_builder_check(cdp_builder *b)
{
    cdp_model *m = b->m;
    char l1[96];
    if (b->failed)
        return -1;
    if (m->nlayers == 0)
        return cdp_builder_fail(b, "the model has no layer");
    if (m->block_first[m->nblocks - 1] == m->nlayers)
        m->nblocks--;   /* a block started after the last layer: none */
    for (int k = 0; k < m->nblocks; k++) {
        const int first = m->block_first[k];
        const int end = k + 1 < m->nblocks ? m->block_first[k + 1] : m->nlayers;
        const int input = first ? m->layers[first - 1].out : 0;
        for (int j = first; j < end; j++) {
            const cdp_layer *ly = &m->layers[j];
            const int reads[2] = { ly->in, ly->in2 };
            for (int q = 0; q < 2; q++) {
                const int t = reads[q];
                if (t < 0 || t == input || m->nodes[t].producer >= first)
                    continue;
                return cdp_builder_fail(b, "%s (block %d) reads tensor %d of an earlier block: "
                                        "a block reads only its own tensors and its input, the "
                                        "tensor the block before made last (tensor %d)",
                                        layer_label(m, j, l1, sizeof l1), k, t, input);
            }
            const cdp_layer_ops *ops = cdp_layer_ops_of(ly->kind);
            if (ops->storage == CDP_STORAGE_IN_PLACE &&
                (m->nodes[ly->in].consumers != 1 || m->nodes[ly->in].producer < 0))
                return cdp_builder_fail(b, "%s overwrites tensor %d, which %s: an in-place "
                                        "layer must be the one reader of its input",
                                        layer_label(m, j, l1, sizeof l1), ly->in,
                                        ly->in ? "another layer reads too" : "is the input");
            /* a cut before the block makes its input the stage before's
             * output, which that stage's backward may still read */
            if (ops->storage == CDP_STORAGE_IN_PLACE && ly->in == input)
                return cdp_builder_fail(b, "%s (block %d) overwrites the block's input, tensor "
                                        "%d (%dx%dx%d): a stage boundary may fall before the "
                                        "block; end the block before with it instead",
                                        layer_label(m, j, l1, sizeof l1), k, input,
                                        m->nodes[input].shape.c, m->nodes[input].shape.h,
                                        m->nodes[input].shape.w);
        }
    }
    for (int j = 0; j + 1 < m->nlayers; j++)
        if (m->nodes[m->layers[j].out].consumers == 0)
            return cdp_builder_fail(b, "the output of %s (tensor %d) is read by no layer",
                                    layer_label(m, j, l1, sizeof l1), m->layers[j].out);
    return names_unique(b);
}
