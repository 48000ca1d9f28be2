/* Internal: the builder behind cdp/builder.h (whose cdp_builder_* add the
 * layers), what only cdp's own families use beside it, and the families
 * model.c builds from. */
#ifndef CDP_MODELS_BUILDER_H
#define CDP_MODELS_BUILDER_H

#include <stddef.h>
#include "cdp/builder.h"
#include "models/model.h"

struct cdp_builder {
    cdp_model *m;
    int cap_layers, cap_nodes, cap_blocks;
    char *err;
    size_t errlen;
    int failed;
};

/* The input shape and class count of a model built without data (a config
 * with input.c == 0 or classes == 0): what the builder's spec implies. */
void cdp_builder_default_io(cdp_builder *b, cdp_shape input, int classes);
/* A layer of the kind with its module name (fields zero, in2 -1): set its
 * kind's fields, then cdp_builder_layer.  Returns it; a name too long for
 * the layer fails the build. */
cdp_layer cdp_builder_named(cdp_builder *b, cdp_layer_kind kind, const char *name);
/* Adds ly reading tensor in (and in2, or -1); its ops compute its output
 * shape.  The output tensor, or -1 after an error.  The cdp_builder_ of
 * cdp/builder.h are this for each kind. */
int cdp_builder_layer(cdp_builder *b, cdp_layer ly, int in, int in2);
/* Room for need elements of elem bytes in p (cap of them now), doubling. */
void *cdp_model_grow(void *p, int *cap, int need, size_t elem);
/* Sets the initialisation of the layer that produced tensor t; returns t. */
int cdp_builder_init_style(cdp_builder *b, int t, cdp_init_style style);
/* After the build: 0 when the graph can be cut and run (cdp/builder.h's
 * rules): every block reads only its own tensors and its input (the
 * tensor the previous block made last), so that any cut into stages passes
 * one tensor across each boundary; an in-place layer is the one reader of
 * its input, which is not its block's input; every output but the last is read; no two layers with
 * parameters share a name.  Else -1 with the error set.  Drops a last
 * block left empty. */
int cdp_builder_check(cdp_builder *b);

/* A family of models, in its own file (mlp.c, resnet.c, vit.c, defined.c,
 * model_file.c)
 * and one line of registry.c.  build adds blocks to b->m (input node 0 of
 * shape m->input): 0, or -1 with a message; default_stages: the stage
 * count when --stages is not given. */
typedef struct cdp_model_family {
    const char *name;
    const char *form;         /* the free form's pattern, or NULL */
    const char *form_prefix;  /* what a spec of the free form starts with */
    const char *form_about;
    /* the k-th preset into e (name, about, input, classes): 1, or 0 past the last */
    int (*preset)(int k, cdp_model_entry *e);
    int (*build)(cdp_builder *b, const char *spec, int *default_stages);
    /* 1 for a spec of the family that is neither a preset nor starts with
     * form_prefix (a description file's path); NULL: none */
    int (*claims)(const char *spec);
} cdp_model_family;

extern const cdp_model_family cdp_family_mlp, cdp_family_resnet, cdp_family_vit,
    cdp_family_mobile, cdp_family_file, cdp_family_defined;

/* The family that builds spec (a preset's name or its free form), or NULL. */
const cdp_model_family *cdp_model_family_of(const char *spec);

#endif
