/* Vision Transformers as torchvision's VisionTransformer, with its module
 * names: a patch embedding (conv_proj, kernel and stride = patch), the class
 * token, the position embedding, K pre-norm encoder blocks
 *     x = x + self_attention(ln_1(x));  x = x + mlp(ln_2(x))
 * (mlp: Linear D->M, GELU, Linear M->D), the final LayerNorm (encoder.ln),
 * the class token's output and the linear head (heads.head).  LayerNorm eps
 * 1e-6, no dropout.  Blocks: the embedding, each encoder block, the head,
 * so stages are cut between encoder blocks.
 *
 * Specs: vit:patch=P,dim=D,depth=K,heads=H,mlp=M and the presets. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "builder.h"

typedef struct vit_spec {
    int patch, dim, depth, heads, mlp;
} vit_spec;

static const struct {
    const char *name;
    vit_spec s;
    const char *paper;
    int size;   /* the images it is made for: size x size */
} presets[] = {
    { "vit-tiny", { 4, 192, 6, 3, 768 }, "a small ViT for 28x28 and 32x32 images", 32 },
    { "vit-b16", { 16, 768, 12, 12, 3072 }, "torchvision.models.vit_b_16", 224 },
    { "vit-b32", { 32, 768, 12, 12, 3072 }, "torchvision.models.vit_b_32", 224 },
    { "vit-l16", { 16, 1024, 24, 16, 4096 }, "torchvision.models.vit_l_16", 224 },
};

#define VIT_FORMAT "vit:patch=P,dim=D,depth=K,heads=H,mlp=M"

/* "vit:patch=4,dim=192,depth=6,heads=3,mlp=768": every key once, in any order */
static int parse(cdp_builder *b, const char *spec, vit_spec *v)
{
    const char *keys[5] = { "patch", "dim", "depth", "heads", "mlp" };
    int *vals[5] = { &v->patch, &v->dim, &v->depth, &v->heads, &v->mlp };
    int seen[5] = { 0 };
    const char *p = spec + 4;
    while (*p) {
        int k = 0;
        for (; k < 5; k++) {
            size_t n = strlen(keys[k]);
            if (strncmp(p, keys[k], n) == 0 && p[n] == '=')
                break;
        }
        if (k == 5 || seen[k]) {
            snprintf(b->err, b->errlen, "--model: '%.200s': %s key in '%.40s' (expected "
                     VIT_FORMAT ")", spec, k == 5 ? "unknown" : "repeated", p);
            return -1;
        }
        p += strlen(keys[k]) + 1;
        char *end;
        long x = strtol(p, &end, 10);
        if (end == p || x < 1 || x > 65536 || (*end && *end != ',')) {
            snprintf(b->err, b->errlen, "--model: '%.200s': %s must be an integer in "
                     "[1, 65536]", spec, keys[k]);
            return -1;
        }
        *vals[k] = (int)x;
        seen[k] = 1;
        p = *end ? end + 1 : end;
    }
    for (int k = 0; k < 5; k++)
        if (!seen[k]) {
            snprintf(b->err, b->errlen, "--model: '%.200s': no %s= (expected " VIT_FORMAT ")",
                     spec, keys[k]);
            return -1;
        }
    return 0;
}

static int encoder_block(cdp_builder *b, int x, int i, const vit_spec *v)
{
    char pre[64], n[96];
    snprintf(pre, sizeof pre, "encoder.layers.encoder_layer_%d", i);
    snprintf(n, sizeof n, "%s.ln_1", pre);
    int a = cdp_builder_layernorm(b, n, x, 1e-6f);
    snprintf(n, sizeof n, "%s.self_attention", pre);
    a = cdp_builder_attention(b, n, a, v->heads);
    x = cdp_builder_add(b, a, x);
    snprintf(n, sizeof n, "%s.ln_2", pre);
    int y = cdp_builder_layernorm(b, n, x, 1e-6f);
    snprintf(n, sizeof n, "%s.mlp.0", pre);
    y = cdp_builder_linear_tokens(b, n, y, v->mlp);
    y = cdp_builder_init_style(b, y, CDP_INIT_STYLE_XAVIER);
    y = cdp_builder_gelu(b, y);
    snprintf(n, sizeof n, "%s.mlp.3", pre);
    y = cdp_builder_linear_tokens(b, n, y, v->dim);
    y = cdp_builder_init_style(b, y, CDP_INIT_STYLE_XAVIER);
    return cdp_builder_add(b, y, x);
}

static int build(cdp_builder *b, const char *spec, int *default_stages)
{
    vit_spec v;
    int found = 0;
    for (size_t k = 0; k < sizeof presets / sizeof *presets; k++)
        if (strcmp(spec, presets[k].name) == 0) {
            v = presets[k].s;
            found = 1;
        }
    if (!found) {
        if (strncmp(spec, "vit:", 4) != 0)
            return -1;
        if (parse(b, spec, &v))
            return -1;
    }
    cdp_builder_default_io(b, (cdp_shape){ 1, 28, 28 }, 10);   /* Fashion-MNIST's */
    cdp_model *m = b->m;
    if (v.dim % v.heads) {
        snprintf(b->err, b->errlen, "--model %.200s: dim %d is not a multiple of heads %d",
                 spec, v.dim, v.heads);
        return -1;
    }
    if (m->input.h % v.patch || m->input.w % v.patch) {
        snprintf(b->err, b->errlen, "--model %.200s: the %dx%d images do not split into "
                 "%dx%d patches", spec, m->input.h, m->input.w, v.patch, v.patch);
        return -1;
    }

    cdp_builder_block(b);
    int x = cdp_builder_conv2d(b, "conv_proj", 0, v.dim, v.patch, v.patch, 0, 1);
    x = cdp_builder_init_style(b, x, CDP_INIT_STYLE_PATCH);
    x = cdp_builder_class_token(b, x);
    x = cdp_builder_pos_embed(b, "encoder", x);
    for (int i = 0; i < v.depth; i++) {
        cdp_builder_block(b);
        x = encoder_block(b, x, i, &v);
    }
    cdp_builder_block(b);
    x = cdp_builder_layernorm(b, "encoder.ln", x, 1e-6f);
    x = cdp_builder_token_select(b, x);
    x = cdp_builder_linear(b, "heads.head", x, m->classes);
    x = cdp_builder_init_style(b, x, CDP_INIT_STYLE_ZERO);
    *default_stages = v.depth + 2 < 4 ? v.depth + 2 : 4;
    return x < 0 ? -1 : 0;
}

static int preset(int k, cdp_model_entry *e)
{
    if (k < 0 || (size_t)k >= sizeof presets / sizeof *presets)
        return 0;
    const vit_spec *v = &presets[k].s;
    e->name = presets[k].name;
    snprintf(e->about, sizeof e->about, "%s: patch %d, dim %d, depth %d, heads %d, mlp %d",
             presets[k].paper, v->patch, v->dim, v->depth, v->heads, v->mlp);
    e->input = (cdp_shape){ 3, presets[k].size, presets[k].size };
    e->classes = presets[k].size == 224 ? 1000 : 10;
    return 1;
}

const cdp_model_family cdp_family_vit = {
    "vit", VIT_FORMAT, "vit:",
    "a Vision Transformer of the given sizes (torchvision.models.VisionTransformer)",
    preset, build, NULL,
};
