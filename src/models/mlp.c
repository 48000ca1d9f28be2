/* mlp:IN-H1-...-OUT: Linear layers fc0, fc1, ... with a ReLU after every
 * one but the last; each Linear (with its ReLU) is a block. */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "builder.h"

#define MAX_WIDTH 65536

static int build(cdp_builder *b, const char *spec, int *default_stages)
{
    const char *p = spec + 4;
    int dims[CDP_MAX_LAYERS + 2];
    int nd = 0;
    for (;;) {
        if (!isdigit((unsigned char)*p)) {
            snprintf(b->err, b->errlen, "--model: expected mlp:IN-H1-...-OUT, got '%.200s'", spec);
            return -1;
        }
        const char *tok = p;
        long v = 0;
        while (isdigit((unsigned char)*p)) {
            if (v <= MAX_WIDTH)
                v = v * 10 + (*p - '0');
            p++;
        }
        if (v < 1 || v > MAX_WIDTH) {
            int len = (int)(p - tok) < 24 ? (int)(p - tok) : 24;
            snprintf(b->err, b->errlen, "--model: width %.*s out of range 1..%d in '%.200s'",
                     len, tok, MAX_WIDTH, spec);
            return -1;
        }
        if (nd > CDP_MAX_LAYERS) {
            /* the count, not the spec: a long spec cut short would show a
             * width that was never given */
            int widths = 1;
            for (const char *q = spec + 4; *q; q++)
                widths += *q == '-';
            snprintf(b->err, b->errlen, "--model: mlp: with %d layers (%d widths), at most %d "
                     "layers", widths - 1, widths, CDP_MAX_LAYERS);
            return -1;
        }
        dims[nd++] = (int)v;
        if (*p == '\0')
            break;
        if (*p != '-') {
            snprintf(b->err, b->errlen, "--model: expected mlp:IN-H1-...-OUT, got '%.200s'", spec);
            return -1;
        }
        p++;
    }
    if (nd < 2) {
        snprintf(b->err, b->errlen, "--model: expected mlp:IN-H1-...-OUT with at least an input "
                 "and an output width, got '%.200s'", spec);
        return -1;
    }
    cdp_builder_default_io(b, (cdp_shape){ dims[0], 1, 1 }, dims[nd - 1]);
    cdp_model *m = b->m;
    if ((size_t)dims[0] != cdp_shape_n(m->input)) {
        snprintf(b->err, b->errlen, "--model: %.200s takes %d inputs, the data has %dx%dx%d = %zu",
                 spec, dims[0], m->input.c, m->input.h, m->input.w, cdp_shape_n(m->input));
        return -1;
    }
    if (dims[nd - 1] < m->classes) {
        snprintf(b->err, b->errlen, "--model: %.200s has %d outputs for %d classes",
                 spec, dims[nd - 1], m->classes);
        return -1;
    }
    m->classes = dims[nd - 1];
    int t = 0;
    char name[32];
    for (int j = 0; j + 1 < nd; j++) {
        cdp_builder_block(b);
        snprintf(name, sizeof name, "fc%d", j);
        t = cdp_builder_linear(b, name, t, dims[j + 1]);
        if (j + 2 < nd)
            t = cdp_builder_relu(b, t);
    }
    *default_stages = nd - 1;
    return t < 0 ? -1 : 0;
}

static int no_preset(int k, cdp_model_entry *e)
{
    (void)k;
    (void)e;
    return 0;
}

const cdp_model_family cdp_family_mlp = {
    "mlp", "mlp:IN-H1-...-OUT", "mlp:",
    "Linear layers of the given widths, a ReLU after each but the last (torch.nn.Sequential)",
    no_preset, build, NULL,
};
