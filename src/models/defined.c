/* The models a program defines itself (cdp_model_define, cdp/builder.h):
 * a family whose presets are the definitions, so that --model, the
 * registry's listing and cdp_model_create treat them as any other model. */
#include <stdio.h>
#include <string.h>

#include "builder.h"

#define MAX_DEFINED 32

typedef struct definition {
    char name[64];
    char about[200];
    cdp_model_build_fn build;
    void *arg;
    int stages;
} definition;

static definition defined[MAX_DEFINED];
static int ndefined;

static const definition *find(const char *name)
{
    for (int k = 0; k < ndefined; k++)
        if (strcmp(defined[k].name, name) == 0)
            return &defined[k];
    return NULL;
}

static int name_chars_ok(const char *name)
{
    for (const char *p = name; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              strchr("-_.+", *p)))
            return 0;
    return 1;
}

int cdp_model_define(const char *name, const char *about, cdp_model_build_fn build,
                     void *arg, int stages, char *err, size_t errlen)
{
    if (!name || !name[0] || strlen(name) >= sizeof defined[0].name || !name_chars_ok(name)) {
        snprintf(err, errlen, "cdp_model_define: name '%.80s': expected 1 to %zu letters, "
                 "digits or -_.+", name ? name : "(null)", sizeof defined[0].name - 1);
        return -1;
    }
    if (!build) {
        snprintf(err, errlen, "cdp_model_define: %s: no build function", name);
        return -1;
    }
    if (cdp_model_family_of(name)) {
        snprintf(err, errlen, "cdp_model_define: %s: the name is taken (cdp_run --list-models "
                 "lists the names taken)", name);
        return -1;
    }
    if (ndefined == MAX_DEFINED) {
        snprintf(err, errlen, "cdp_model_define: %s: already %d models defined, the most a "
                 "program may define", name, MAX_DEFINED);
        return -1;
    }
    definition *d = &defined[ndefined++];
    snprintf(d->name, sizeof d->name, "%s", name);
    snprintf(d->about, sizeof d->about, "%s", about ? about : "");
    d->build = build;
    d->arg = arg;
    d->stages = stages;
    return 0;
}

static int preset(int k, cdp_model_entry *e)
{
    if (k < 0 || k >= ndefined)
        return 0;
    e->name = defined[k].name;
    snprintf(e->about, sizeof e->about, "%s", defined[k].about);
    return 1;   /* input and classes from the data */
}

static int build(cdp_builder *b, const char *spec, int *default_stages)
{
    const definition *d = find(spec);
    if (!d)
        return -1;
    cdp_builder_default_io(b, (cdp_shape){ 1, 28, 28 }, 10);   /* Fashion-MNIST's */
    cdp_model *m = b->m;
    const int out = d->build(b, d->arg);
    if (b->failed)
        return -1;
    if (out < 0)
        return cdp_builder_fail(b, "its build function failed without saying why");
    if (m->nlayers == 0)
        return cdp_builder_fail(b, "its build function added no layer");
    if (out != m->layers[m->nlayers - 1].out)
        return cdp_builder_fail(b, "its build function returned tensor %d: the logits must be "
                                "the last layer's output (tensor %d)", out,
                                m->layers[m->nlayers - 1].out);
    const size_t logits = cdp_shape_n(m->nodes[out].shape);
    if (logits < (size_t)m->classes)
        return cdp_builder_fail(b, "%zu logits for %d classes", logits, m->classes);
    m->classes = (int)logits;
    /* blocks so far: a trailing cdp_builder_block opened one more, empty */
    int blocks = m->nblocks - (m->block_first[m->nblocks - 1] == m->nlayers);
    *default_stages = d->stages > 0 ? d->stages : blocks < 4 ? blocks : 4;
    return 0;
}

const cdp_model_family cdp_family_defined = {
    "defined", NULL, NULL, NULL, preset, build, NULL,
};
