/* cdp_run --print-model: a built model as a description file (doc/reference.md
 * section 11.1) that --model FILE.json builds back into the same model: the
 * same layers with the same names, hyper-parameters and initialisations,
 * in the same blocks, so the same parameters and the same bits. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/json.h"
#include "model_file.h"

/* The shortest decimal that reads back (strtof) as x: "1e-06", not the
 * 17 digits of the double nearest the float. */
static void write_float(FILE *f, float x)
{
    char buf[32];
    for (int digits = 1; digits <= 9; digits++) {
        snprintf(buf, sizeof buf, "%.*g", digits, (double)x);
        if (strtof(buf, NULL) == x)
            break;
    }
    fputs(buf, f);
}

/* A layer's file name: its name where its builder call takes one. */
static int named(const cdp_layer *ly)
{
    switch (ly->kind) {
    case CDP_LAYER_LINEAR: case CDP_LAYER_CONV2D: case CDP_LAYER_BATCHNORM2D:
    case CDP_LAYER_DROPOUT: case CDP_LAYER_LAYERNORM: case CDP_LAYER_ATTENTION:
    case CDP_LAYER_POS_EMBED:
        return 1;
    default:
        return 0;
    }
}

/* 1 when layer j's name finds it from any later layer: no other layer's
 * file name or id ("t" and a number) is the same */
static int name_finds(const cdp_model *m, int j)
{
    const cdp_layer *ly = &m->layers[j];
    if (!named(ly) || ly->name[0] == '\0' || strcmp(ly->name, "input") == 0 ||
        (ly->name[0] == 't' && strspn(ly->name + 1, "0123456789") == strlen(ly->name + 1)))
        return 0;
    for (int i = 0; i < m->nlayers; i++)
        if (i != j && named(&m->layers[i]) && strcmp(m->layers[i].name, ly->name) == 0)
            return 0;
    return 1;
}

/* how a layer refers to tensor t: "input", its maker's name, or its id */
static void write_ref(FILE *f, const cdp_model *m, int t)
{
    const int j = m->nodes[t].producer;
    if (t == CDP_INPUT) {
        fputs("\"input\"", f);
    } else if (name_finds(m, j)) {
        cdp_json_write_string(f, m->layers[j].name);
    } else {
        fprintf(f, "\"t%d\"", t);
    }
}

static void write_layer(FILE *f, const cdp_model *m, int j, const char *referred)
{
    const cdp_layer *ly = &m->layers[j];
    fprintf(f, "{\"kind\": \"%s\"", cdp_model_file_kinds[ly->kind]);
    if (named(ly)) {
        fputs(", \"name\": ", f);
        cdp_json_write_string(f, ly->name);
    }
    if (referred[ly->out] && !name_finds(m, j))
        fprintf(f, ", \"id\": \"t%d\"", ly->out);
    if (ly->in != (j ? m->layers[j - 1].out : CDP_INPUT)) {
        fputs(", \"in\": ", f);
        write_ref(f, m, ly->in);
    }
    if (ly->in2 >= 0) {
        fputs(", \"in2\": ", f);
        write_ref(f, m, ly->in2);
    }
    switch (ly->kind) {
    case CDP_LAYER_LINEAR:
        fprintf(f, ", \"out_features\": %d", ly->tokens ? ly->ys.w : ly->ys.c);
        if (ly->tokens)
            fputs(", \"tokens\": true", f);
        break;
    case CDP_LAYER_CONV2D:
        fprintf(f, ", \"out_channels\": %d, \"kernel_size\": %d, \"stride\": %d, \"padding\": %d, "
                "\"groups\": %d, \"bias\": %s", ly->ys.c, ly->k, ly->stride, ly->pad,
                ly->groups > 1 ? ly->groups : 1, ly->bias ? "true" : "false");
        break;
    case CDP_LAYER_DROPOUT:
        fputs(", \"p\": ", f);
        write_float(f, (float)ly->drop_p);
        break;
    case CDP_LAYER_MAXPOOL2D:
        fprintf(f, ", \"kernel_size\": %d, \"stride\": %d, \"padding\": %d", ly->k, ly->stride,
                ly->pad);
        break;
    case CDP_LAYER_AVGPOOL:
        if (ly->k > 1)
            fprintf(f, ", \"output_size\": %d", ly->k);
        break;
    case CDP_LAYER_LAYERNORM:
        fputs(", \"eps\": ", f);
        write_float(f, ly->eps);
        break;
    case CDP_LAYER_ATTENTION:
        fprintf(f, ", \"num_heads\": %d", ly->heads);
        break;
    default:
        break;
    }
    if ((ly->kind == CDP_LAYER_LINEAR || ly->kind == CDP_LAYER_CONV2D) &&
        ly->init != CDP_INIT_STYLE_TORCH)
        fprintf(f, ", \"init\": \"%s\"", cdp_model_file_inits[ly->init]);
    fputc('}', f);
}

int cdp_model_print(FILE *f, const cdp_model *m)
{
    /* the tensors some layer reads other than as the layer after their
     * maker: they need a name or an id */
    char *referred = calloc((size_t)m->nnodes, 1);
    if (!referred) abort();
    for (int j = 0; j < m->nlayers; j++) {
        const cdp_layer *ly = &m->layers[j];
        if (ly->in != (j ? m->layers[j - 1].out : CDP_INPUT))
            referred[ly->in] = 1;
        if (ly->in2 >= 0)
            referred[ly->in2] = 1;
    }
    fprintf(f, "{\n  \"format\": \"%s\",\n  \"version\": %d,\n  \"name\": ", CDP_MODEL_FILE_FORMAT,
            CDP_MODEL_FILE_VERSION);
    cdp_json_write_string(f, m->name);
    fprintf(f, ",\n  \"input\": [%d, %d, %d],\n  \"classes\": %d,\n  \"stages\": %d,\n"
            "  \"blocks\": [\n", m->input.c, m->input.h, m->input.w, m->classes, m->nstages);
    for (int k = 0; k < m->nblocks; k++) {
        fputs("    [\n", f);
        for (int j = m->block_first[k]; j < m->block_first[k + 1]; j++) {
            fputs("      ", f);
            write_layer(f, m, j, referred);
            fputs(j + 1 < m->block_first[k + 1] ? ",\n" : "\n", f);
        }
        fputs(k + 1 < m->nblocks ? "    ],\n" : "    ]\n", f);
    }
    fputs("  ]\n}\n", f);
    free(referred);
    fflush(f);
    return ferror(f) ? -1 : 0;
}
