/* --model FILE.json: a model from a description file (doc/reference.md
 * section 11.1), read into the builder one layer at a time, so that the
 * file expresses exactly what cdp/builder.h does and is checked by the same
 * rules.  The reader adds what a file needs beyond the C calls: tensors
 * referred to by the id or name of the layer that made them, every field
 * checked for its type and range, and each error naming the block, the
 * layer and the shapes it reads. */
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/json.h"
#include "model_file.h"

const char *const cdp_model_file_kinds[CDP_LAYER_KINDS] = {
    [CDP_LAYER_LINEAR] = "linear",         [CDP_LAYER_CONV2D] = "conv2d",
    [CDP_LAYER_BATCHNORM2D] = "batchnorm2d", [CDP_LAYER_RELU] = "relu",
    [CDP_LAYER_RELU6] = "relu6",           [CDP_LAYER_DROPOUT] = "dropout",
    [CDP_LAYER_MAXPOOL2D] = "maxpool2d",   [CDP_LAYER_AVGPOOL] = "avgpool",
    [CDP_LAYER_FLATTEN] = "flatten",       [CDP_LAYER_ADD] = "add",
    [CDP_LAYER_LAYERNORM] = "layernorm",   [CDP_LAYER_GELU] = "gelu",
    [CDP_LAYER_ATTENTION] = "attention",   [CDP_LAYER_CLASS_TOKEN] = "class_token",
    [CDP_LAYER_POS_EMBED] = "pos_embed",   [CDP_LAYER_TOKEN_SELECT] = "token_select",
};
const char *const cdp_model_file_inits[4] = {
    [CDP_INIT_STYLE_TORCH] = "torch", [CDP_INIT_STYLE_XAVIER] = "xavier",
    [CDP_INIT_STYLE_PATCH] = "patch", [CDP_INIT_STYLE_ZERO] = "zero",
};

/* the fields a kind takes beyond kind, name, id and in; named: its
 * builder call takes the name (the module path of its tensors) */
static const struct {
    const char *fields;
    int named;
} kind_spec[CDP_LAYER_KINDS] = {
    [CDP_LAYER_LINEAR] = { "out_features tokens init", 1 },
    [CDP_LAYER_CONV2D] = { "out_channels kernel_size stride padding groups bias init", 1 },
    [CDP_LAYER_BATCHNORM2D] = { "", 1 },
    [CDP_LAYER_DROPOUT] = { "p", 1 },
    [CDP_LAYER_MAXPOOL2D] = { "kernel_size stride padding", 0 },
    [CDP_LAYER_AVGPOOL] = { "output_size", 0 },
    [CDP_LAYER_ADD] = { "in2", 0 },
    [CDP_LAYER_LAYERNORM] = { "eps", 1 },
    [CDP_LAYER_ATTENTION] = { "num_heads", 1 },
    [CDP_LAYER_POS_EMBED] = { "", 1 },
};

#define MAX_FILE_BYTES (16 << 20)
#define MAX_INT 65536                 /* any width, kernel, stride, ... (mlp:'s bound) */
#define MAX_INPUT_VALUES (1 << 28)    /* graph.c's bound on a sample */
#define MAX_LAYERS 10000
#define REQUIRED INT_MIN

typedef struct reader {
    cdp_builder *b;
    int nall;                 /* layers in the file */
    const cdp_json **all;     /* each layer's object, in order */
    int *blk, *pos;           /* its block and place in the block */
    int *made;                /* the tensor each layer read so far made */
    int index;                /* the layer now read (-1: none) */
    int x, x2;                /* the tensors it reads, once known (else -1) */
} reader;

int cdp_model_file_spec(const char *spec)
{
    size_t n = strlen(spec);
    return n > 5 && strcmp(spec + n - 5, ".json") == 0;
}

static const char *str_of(const cdp_json *obj, const char *key)
{
    const cdp_json *v = cdp_json_get(obj, key);
    return v && v->type == CDP_JSON_STRING ? v->str : NULL;
}

/* what a reference finds a layer by: its id, else its name */
static const char *key_of(const cdp_json *ly)
{
    const char *id = str_of(ly, "id");
    return id ? id : str_of(ly, "name");
}

/* s for a message of one line: at most 63 bytes, control characters as
 * '?' (a key or a name in the file may hold "\n") */
static const char *safe(const char *s, char *buf)
{
    size_t n = 0;
    for (; s && s[n] && n < 63; n++)
        buf[n] = (unsigned char)s[n] < 0x20 || s[n] == 0x7f ? '?' : s[n];
    buf[n] = '\0';
    return buf;
}

/* 1 when s holds a control character */
static int has_control(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            return 1;
    return 0;
}

static void shape_text(const cdp_builder *b, int t, char *buf, size_t len)
{
    cdp_shape s = cdp_builder_shape(b, t);
    snprintf(buf, len, "%dx%dx%d", s.c, s.h, s.w);
}

/* Fails the build with where the error is: the block, the layer (its kind
 * and name) and the shapes it reads. */
static int rfail(reader *r, const char *fmt, ...)
{
    char msg[700], where[400] = "";
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (r->index >= 0) {
        const cdp_json *ly = r->all[r->index];
        const char *kind = str_of(ly, "kind"), *name = str_of(ly, "name");
        char s1[48] = "", s2[48] = "", sk[64], sn[64];
        if (r->x >= 0)
            shape_text(r->b, r->x, s1, sizeof s1);
        if (r->x2 >= 0)
            shape_text(r->b, r->x2, s2, sizeof s2);
        snprintf(where, sizeof where, "block %d, layer %d (%.20s%s%.63s%s%s%s%s): ",
                 r->blk[r->index], r->pos[r->index], kind ? safe(kind, sk) : "no kind",
                 name ? " " : "", name ? safe(name, sn) : "", s1[0] ? ", reading " : "", s1, s2[0] ? " and " : "", s2);
    }
    return cdp_builder_fail(r->b, "%s%s", where, msg);
}

/* A builder call failed: its message again, with where it happened. */
static int rewrap(reader *r)
{
    cdp_builder *b = r->b;
    char prefix[128], msg[1024];
    snprintf(prefix, sizeof prefix, "--model %s: ", b->m->name);
    const size_t n = strlen(prefix);
    snprintf(msg, sizeof msg, "%s", strncmp(b->err, prefix, n) ? b->err : b->err + n);
    b->failed = 0;
    return rfail(r, "%s", msg);
}

static const char *what(const cdp_json *v, char *buf, size_t len)
{
    if (v->type == CDP_JSON_INT)
        snprintf(buf, len, "%lld", (long long)v->i);
    else if (v->type == CDP_JSON_DOUBLE)
        snprintf(buf, len, "%g", v->d);
    else
        snprintf(buf, len, "a%s %s", v->type == CDP_JSON_INT || v->type == CDP_JSON_ARRAY ||
                 v->type == CDP_JSON_OBJECT ? "n" : "", cdp_json_type_name(v->type));
    return buf;
}

static int get_int(reader *r, const cdp_json *obj, const char *key, int def, int lo, int hi,
                   int *v)
{
    const cdp_json *j = cdp_json_get(obj, key);
    char w[64];
    if (!j) {
        if (def == REQUIRED)
            return rfail(r, "no \"%s\"", key);
        *v = def;
        return 0;
    }
    if (j->type != CDP_JSON_INT || j->i < lo || j->i > hi)
        return rfail(r, "\"%s\": expected an integer in [%d, %d], got %s", key, lo, hi,
                     what(j, w, sizeof w));
    *v = (int)j->i;
    return 0;
}

static int get_bool(reader *r, const char *key, int def, int *v)
{
    const cdp_json *j = cdp_json_get(r->all[r->index], key);
    char w[64];
    if (!j) {
        *v = def;
        return 0;
    }
    if (j->type != CDP_JSON_BOOL)
        return rfail(r, "\"%s\": expected true or false, got %s", key, what(j, w, sizeof w));
    *v = j->boolean;
    return 0;
}

/* a number in [lo, hi] (lo excluded when open) */
static int get_real(reader *r, const char *key, double def, double lo, double hi, int open,
                    float *v)
{
    const cdp_json *j = cdp_json_get(r->all[r->index], key);
    char w[64];
    if (!j) {
        *v = (float)def;
        return 0;
    }
    if ((j->type != CDP_JSON_INT && j->type != CDP_JSON_DOUBLE) || !(j->d >= lo) ||
        !(j->d <= hi) || (open && j->d == lo))
        return rfail(r, "\"%s\": expected a number in %c%g, %g], got %s", key, open ? '(' : '[',
                     lo, hi, what(j, w, sizeof w));
    *v = (float)j->d;
    return 0;
}

static int get_init(reader *r, cdp_init_style *style)
{
    const cdp_json *j = cdp_json_get(r->all[r->index], "init");
    *style = CDP_INIT_STYLE_TORCH;
    if (!j)
        return 0;
    for (int k = 0; j->type == CDP_JSON_STRING && k < 4; k++)
        if (strcmp(j->str, cdp_model_file_inits[k]) == 0) {
            *style = (cdp_init_style)k;
            return 0;
        }
    return rfail(r, "\"init\": expected torch, xavier, patch or zero");
}

/* 1 when word is one of the space-separated words */
static int among(const char *words, const char *word)
{
    const size_t n = strlen(word);
    if (n == 0)
        return 0;   /* strstr would find "" everywhere, for ever */
    for (const char *p = words; (p = strstr(p, word)) != NULL; p += n)
        if ((p == words || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0'))
            return 1;
    return 0;
}

/* every member of obj one of the words, none twice */
static int fields_ok(reader *r, const cdp_json *obj, const char *words, const char *whose)
{
    for (size_t k = 0; k < obj->n; k++) {
        const char *key = obj->child[k].key;
        char sk[64];
        if (!among(words, key))
            return rfail(r, "unknown field \"%s\" (%s takes: %s)", safe(key, sk), whose, words);
        for (size_t i = 0; i < k; i++)
            if (strcmp(obj->child[i].key, key) == 0)
                return rfail(r, "field \"%s\" given twice", safe(key, sk));
    }
    return 0;
}

/* The tensor a reference ("in", "in2") names: "input", or the id or name
 * of the nearest layer before this one that has it. */
static int resolve(reader *r, const char *key, int def, int *t)
{
    const cdp_json *j = cdp_json_get(r->all[r->index], key);
    char sr[64];
    if (!j) {
        if (def == REQUIRED)
            return rfail(r, "no \"%s\": an add reads two tensors", key);
        *t = def;
        return 0;
    }
    if (j->type != CDP_JSON_STRING)
        return rfail(r, "\"%s\": expected \"input\" or the id or name of an earlier layer", key);
    if (strcmp(j->str, "input") == 0) {
        *t = CDP_INPUT;
        return 0;
    }
    for (int i = r->index - 1; i >= 0; i--) {
        const char *k = key_of(r->all[i]);
        if (k && strcmp(k, j->str) == 0) {
            *t = r->made[i];
            return 0;
        }
    }
    for (int i = r->index; i < r->nall; i++) {
        const char *k = key_of(r->all[i]);
        if (k && strcmp(k, j->str) == 0)
            return rfail(r, "\"%s\": \"%s\" is made by %s (block %d, layer %d): a layer "
                         "reads only tensors made before it, so that the graph has no cycle",
                         key, safe(j->str, sr), i == r->index ? "this layer itself" : "a later layer",
                         r->blk[i], r->pos[i]);
    }
    return rfail(r, "\"%s\": no layer has the id or name \"%s\"", key, safe(j->str, sr));
}

static cdp_layer_kind kind_of(const char *s)
{
    for (int k = 0; s && k < CDP_LAYER_KINDS; k++)
        if (cdp_model_file_kinds[k] && strcmp(s, cdp_model_file_kinds[k]) == 0)
            return (cdp_layer_kind)k;
    return CDP_LAYER_KINDS;
}

/* The current layer's own fields: kind, name, id. */
static int layer_head(reader *r, cdp_layer_kind *kind, const char **name)
{
    const cdp_json *ly = r->all[r->index];
    const cdp_json *k = cdp_json_get(ly, "kind"), *n = cdp_json_get(ly, "name"),
                   *id = cdp_json_get(ly, "id");
    if (!k || k->type != CDP_JSON_STRING)
        return rfail(r, "no \"kind\" string");
    *kind = kind_of(k->str);
    if (*kind == CDP_LAYER_KINDS) {
        char kinds[400] = "";
        for (int i = 0; i < CDP_LAYER_KINDS; i++)
            snprintf(kinds + strlen(kinds), sizeof kinds - strlen(kinds), "%s%s", i ? " " : "",
                     cdp_model_file_kinds[i]);
        char sk[64];
        return rfail(r, "unknown kind \"%s\" (the kinds: %s)", safe(k->str, sk), kinds);
    }
    char words[160];
    const char *own = kind_spec[*kind].fields ? kind_spec[*kind].fields : "";
    snprintf(words, sizeof words, "kind name id in%s%s", own[0] ? " " : "", own);
    if (fields_ok(r, ly, words, k->str))
        return -1;
    if (n && (n->type != CDP_JSON_STRING || n->len == 0 || n->len > 63 || has_control(n->str)))
        return rfail(r, "\"name\": expected a module path of 1 to 63 characters, no control "
                     "characters");
    if (!n && kind_spec[*kind].named)
        return rfail(r, "no \"name\": a %s's tensors are named after its module path", k->str);
    if (id && (id->type != CDP_JSON_STRING || id->len == 0 || id->len > 63 ||
               has_control(id->str) || strcmp(id->str, "input") == 0))
        return rfail(r, "\"id\": expected 1 to 63 characters, no control characters, not "
                     "\"input\"");
    for (int i = 0; id && i < r->index; i++) {
        const char *other = str_of(r->all[i], "id");
        if (other && strcmp(other, id->str) == 0)
            return rfail(r, "\"id\": \"%s\" is the id of an earlier layer (block %d, layer %d)",
                         id->str, r->blk[i], r->pos[i]);
    }
    *name = n ? n->str : NULL;
    return 0;
}

/* Adds the current layer; the tensor it makes, or -1. */
static int add_layer(reader *r)
{
    cdp_builder *b = r->b;
    const cdp_json *ly = r->all[r->index];
    cdp_layer_kind kind = CDP_LAYER_KINDS;
    const char *name = NULL;
    r->x = r->x2 = -1;
    const int prev = r->index ? r->made[r->index - 1] : CDP_INPUT;
    int x;
    if (resolve(r, "in", prev, &x))
        return -1;
    r->x = x;
    if (layer_head(r, &kind, &name))
        return -1;
    int t = -1, a = 0, k = 0, s = 0, p = 0, g = 0, bias = 0;
    float f = 0.0f;
    cdp_init_style init = CDP_INIT_STYLE_TORCH;
    switch (kind) {
    case CDP_LAYER_LINEAR:
        if (get_int(r, ly, "out_features", REQUIRED, 1, MAX_INT, &a) ||
            get_bool(r, "tokens", 0, &k) || get_init(r, &init))
            return -1;
        t = k ? cdp_builder_linear_tokens(b, name, x, a) : cdp_builder_linear(b, name, x, a);
        break;
    case CDP_LAYER_CONV2D:
        if (get_int(r, ly, "out_channels", REQUIRED, 1, MAX_INT, &a) ||
            get_int(r, ly, "kernel_size", REQUIRED, 1, MAX_INT, &k) ||
            get_int(r, ly, "stride", 1, 1, MAX_INT, &s) ||
            get_int(r, ly, "padding", 0, 0, MAX_INT, &p) ||
            get_int(r, ly, "groups", 1, 1, MAX_INT, &g) || get_bool(r, "bias", 1, &bias) ||
            get_init(r, &init))
            return -1;
        t = cdp_builder_grouped_conv2d(b, name, x, a, k, s, p, g, bias);
        break;
    case CDP_LAYER_BATCHNORM2D: t = cdp_builder_batchnorm2d(b, name, x); break;
    case CDP_LAYER_RELU: t = cdp_builder_relu(b, x); break;
    case CDP_LAYER_RELU6: t = cdp_builder_relu6(b, x); break;
    case CDP_LAYER_DROPOUT:
        if (get_real(r, "p", 0.5, 0.0, 1.0, 0, &f))
            return -1;
        t = cdp_builder_dropout(b, name, x, f);
        break;
    case CDP_LAYER_MAXPOOL2D:
        if (get_int(r, ly, "kernel_size", REQUIRED, 1, MAX_INT, &k) ||
            get_int(r, ly, "stride", k, 1, MAX_INT, &s) ||
            get_int(r, ly, "padding", 0, 0, MAX_INT, &p))
            return -1;
        t = cdp_builder_maxpool2d(b, x, k, s, p);
        break;
    case CDP_LAYER_AVGPOOL:
        if (get_int(r, ly, "output_size", 1, 1, MAX_INT, &a))
            return -1;
        t = cdp_builder_adaptive_avgpool(b, x, a);
        break;
    case CDP_LAYER_FLATTEN: t = cdp_builder_flatten(b, x); break;
    case CDP_LAYER_ADD:
        if (resolve(r, "in2", REQUIRED, &r->x2))
            return -1;
        t = cdp_builder_add(b, x, r->x2);
        break;
    case CDP_LAYER_LAYERNORM:
        if (get_real(r, "eps", 1e-5, 0.0, 1.0, 1, &f))
            return -1;
        t = cdp_builder_layernorm(b, name, x, f);
        break;
    case CDP_LAYER_GELU: t = cdp_builder_gelu(b, x); break;
    case CDP_LAYER_ATTENTION:
        if (get_int(r, ly, "num_heads", REQUIRED, 1, MAX_INT, &a))
            return -1;
        t = cdp_builder_attention(b, name, x, a);
        break;
    case CDP_LAYER_CLASS_TOKEN: t = cdp_builder_class_token(b, x); break;
    case CDP_LAYER_POS_EMBED: t = cdp_builder_pos_embed(b, name, x); break;
    case CDP_LAYER_TOKEN_SELECT: t = cdp_builder_token_select(b, x); break;
    case CDP_LAYER_KINDS: break;
    }
    if (t >= 0 && init != CDP_INIT_STYLE_TORCH)
        t = cdp_builder_init_style(b, t, init);
    if (t < 0)
        return b->failed ? rewrap(r) : rfail(r, "the layer was refused");
    return t;
}

/* The blocks: arrays of layer objects, none empty; every layer listed
 * (with its block and place) before any is built, so that a reference to
 * a later one can be told from one to none. */
static int list_layers(reader *r, const cdp_json *blocks)
{
    if (!blocks || blocks->type != CDP_JSON_ARRAY || blocks->n == 0)
        return rfail(r, "\"blocks\": expected an array of blocks, each an array of layers");
    int n = 0;
    for (size_t k = 0; k < blocks->n; k++) {
        const cdp_json *bl = &blocks->child[k];
        if (bl->type != CDP_JSON_ARRAY || bl->n == 0)
            return rfail(r, "block %zu: expected a non-empty array of layers", k);
        for (size_t i = 0; i < bl->n; i++)
            if (bl->child[i].type != CDP_JSON_OBJECT)
                return rfail(r, "block %zu, layer %zu: expected an object", k, i);
        n += (int)bl->n;   /* the parser's value limit keeps it an int */
    }
    if (n > MAX_LAYERS)   /* references and checks look back over the layers */
        return rfail(r, "%d layers, at most %d", n, MAX_LAYERS);
    r->all = calloc((size_t)n, sizeof *r->all);
    r->blk = calloc((size_t)n, sizeof *r->blk);
    r->pos = calloc((size_t)n, sizeof *r->pos);
    r->made = calloc((size_t)n, sizeof *r->made);
    if (!r->all || !r->blk || !r->pos || !r->made) abort();
    for (size_t k = 0; k < blocks->n; k++)
        for (size_t i = 0; i < blocks->child[k].n; i++) {
            r->all[r->nall] = &blocks->child[k].child[i];
            r->blk[r->nall] = (int)k;
            r->pos[r->nall++] = (int)i;
        }
    return 0;
}

/* "input": [C, H, W]: the data's shape, or as many values in a flat one
 * (C x 1 x 1: what an mlp: names) */
static int input_shape(reader *r, const cdp_json *doc)
{
    const cdp_json *in = cdp_json_get(doc, "input");
    int v[3];
    if (!in || in->type != CDP_JSON_ARRAY || in->n != 3)
        return rfail(r, "\"input\": expected [C, H, W], the shape of one sample");
    for (int k = 0; k < 3; k++) {
        const cdp_json *e = &in->child[k];
        if (e->type != CDP_JSON_INT || e->i < 1 || e->i > MAX_INT)
            return rfail(r, "\"input\": expected [C, H, W] of integers in [1, %d]", MAX_INT);
        v[k] = (int)e->i;
    }
    const cdp_shape fs = { v[0], v[1], v[2] };
    if (cdp_shape_n(fs) > MAX_INPUT_VALUES)
        return rfail(r, "\"input\": %dx%dx%d is more than %d values", v[0], v[1], v[2],
                     MAX_INPUT_VALUES);
    cdp_model *m = r->b->m;
    const cdp_shape ds = m->input;
    if (ds.c != 0 && (ds.c != fs.c || ds.h != fs.h || ds.w != fs.w) &&
        !(fs.h == 1 && fs.w == 1 && cdp_shape_n(ds) == cdp_shape_n(fs)))
        return rfail(r, "\"input\": the model takes %dx%dx%d samples, the data's are %dx%dx%d",
                     fs.c, fs.h, fs.w, ds.c, ds.h, ds.w);
    m->input = fs;   /* a flat one as an mlp:'s: its Linear flattens the data's */
    return 0;
}

static int read_doc(reader *r, const cdp_json *doc, int *default_stages)
{
    cdp_builder *b = r->b;
    cdp_model *m = b->m;
    int version, classes, stages;
    if (doc->type != CDP_JSON_OBJECT)
        return rfail(r, "expected an object (a model description, doc/reference.md 11.1)");
    if (fields_ok(r, doc, "format version name input classes stages blocks", "a description"))
        return -1;
    const char *format = str_of(doc, "format");
    if (!format || strcmp(format, CDP_MODEL_FILE_FORMAT) != 0)
        return rfail(r, "\"format\": expected \"" CDP_MODEL_FILE_FORMAT "\"");
    if (get_int(r, doc, "version", REQUIRED, 1, INT_MAX, &version))
        return -1;
    if (version != CDP_MODEL_FILE_VERSION)
        return rfail(r, "\"version\": %d, this cdp reads version %d", version,
                     CDP_MODEL_FILE_VERSION);
    const cdp_json *name = cdp_json_get(doc, "name");
    if (name && name->type != CDP_JSON_STRING)
        return rfail(r, "\"name\": expected a string");
    if (input_shape(r, doc) || get_int(r, doc, "classes", REQUIRED, 1, MAX_INT, &classes) ||
        get_int(r, doc, "stages", 0, 1, CDP_MAX_STAGES, &stages) ||
        list_layers(r, cdp_json_get(doc, "blocks")))
        return -1;
    if (m->classes == 0)
        m->classes = classes;
    for (r->index = 0; r->index < r->nall; r->index++) {
        if (r->pos[r->index] == 0)
            cdp_builder_block(b);
        if ((r->made[r->index] = add_layer(r)) < 0)
            return -1;
    }
    r->index--;
    const size_t logits = cdp_shape_n(cdp_builder_shape(b, r->made[r->index]));
    if (logits != (size_t)classes)
        return rfail(r, "the last layer makes %zu values, the logits of \"classes\": %d",
                     logits, classes);
    if (logits < (size_t)m->classes)
        return rfail(r, "%zu logits for the data's %d classes", logits, m->classes);
    m->classes = (int)logits;
    const int blocks = r->blk[r->nall - 1] + 1;
    *default_stages = stages ? stages : blocks < 4 ? blocks : 4;
    return 0;
}

int cdp_model_file_read(cdp_builder *b, const char *text, size_t len, int *default_stages)
{
    char why[256];
    cdp_json_limits lim = { 16, MAX_FILE_BYTES, 0 };
    cdp_json *doc = cdp_json_parse(text, len, &lim, why, sizeof why);
    if (!doc)
        return cdp_builder_fail(b, "not JSON: %s", why);
    reader r = { b, 0, NULL, NULL, NULL, NULL, -1, -1, -1 };
    const int rc = read_doc(&r, doc, default_stages);
    free(r.all);
    free(r.blk);
    free(r.pos);
    free(r.made);
    cdp_json_free(doc);
    return rc;
}

static int build(cdp_builder *b, const char *spec, int *default_stages)
{
    FILE *f = fopen(spec, "rb");
    if (!f)
        return cdp_builder_fail(b, "cannot open it: %s", strerror(errno));
    char *text = malloc(MAX_FILE_BYTES + 1);
    if (!text) abort();
    const size_t n = fread(text, 1, MAX_FILE_BYTES + 1, f);
    const int bad = ferror(f);
    fclose(f);
    int rc;
    if (bad)
        rc = cdp_builder_fail(b, "cannot read it");
    else if (n > MAX_FILE_BYTES)
        rc = cdp_builder_fail(b, "larger than %d bytes", MAX_FILE_BYTES);
    else
        rc = cdp_model_file_read(b, text, n, default_stages);
    free(text);
    return rc;
}

static int no_preset(int k, cdp_model_entry *e)
{
    (void)k;
    (void)e;
    return 0;
}

const cdp_model_family cdp_family_file = {
    "file", "FILE.json", NULL,
    "the model a description file defines (doc/reference.md 11.1; cdp_run --print-model "
    "writes one of any model)",
    no_preset, build, cdp_model_file_spec,
};
