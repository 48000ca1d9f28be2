/* The machine file (io/machine_file.h): read strictly, written back in the
 * same layout. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include "io/json.h"
#include "io/machine_file.h"

#define MACHINE_FORMAT "cdp-machine-1"
#define MACHINE_MAX_BYTES ((size_t)16 << 20)

typedef struct reader {
    const char *path;
    char *err;
    size_t errlen;
} reader;

static int fail(const reader *r, const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(r->err, r->errlen, "machine file %s: %s", r->path, msg);
    return -1;
}

/* obj is an object whose keys are all in `known` (NULL-terminated), none
 * twice: a misspelt key would otherwise be silently ignored */
static int check_keys(const reader *r, const cdp_json *obj, const char *where,
                      const char *const *known)
{
    if (!obj || obj->type != CDP_JSON_OBJECT)
        return fail(r, "%s: expected an object", where);
    for (size_t i = 0; i < obj->n; i++) {
        const char *k = obj->child[i].key;
        int ok = 0;
        for (const char *const *q = known; *q; q++)
            ok |= !strcmp(*q, k);
        if (!ok)
            return fail(r, "%s: unknown key \"%s\"", where, k);
        for (size_t j = 0; j < i; j++)
            if (!strcmp(obj->child[j].key, k))
                return fail(r, "%s: key \"%s\" given twice", where, k);
    }
    return 0;
}

/* A number in [lo, hi] (hi_open: below hi); missing is an error when required. */
static int get_num(const reader *r, const cdp_json *obj, const char *where, const char *key,
                   int required, double lo, double hi, double *out)
{
    const cdp_json *v = cdp_json_get(obj, key);
    if (!v) {
        if (required) return fail(r, "%s: missing \"%s\"", where, key);
        return 0;
    }
    if (v->type != CDP_JSON_INT && v->type != CDP_JSON_DOUBLE)
        return fail(r, "%s.%s: expected a number, got %s", where, key, cdp_json_type_name(v->type));
    if (!(v->d >= lo && v->d <= hi))
        return fail(r, "%s.%s: %g is out of range [%g, %g]", where, key, v->d, lo, hi);
    *out = v->d;
    return 0;
}

static int get_int(const reader *r, const cdp_json *obj, const char *where, const char *key,
                   int lo, int hi, int *out)
{
    const cdp_json *v = cdp_json_get(obj, key);
    if (!v) return fail(r, "%s: missing \"%s\"", where, key);
    if (v->type != CDP_JSON_INT)
        return fail(r, "%s.%s: expected an integer, got %s", where, key, cdp_json_type_name(v->type));
    if (v->i < lo || v->i > hi)
        return fail(r, "%s.%s: %lld is out of range [%d, %d]", where, key, (long long)v->i, lo, hi);
    *out = (int)v->i;
    return 0;
}

static int read_link(const reader *r, const cdp_json *net, const char *key, cdp_link_cost *l)
{
    static const char *const known[] = { "latency_s", "bandwidth_Bps", "per_message_s",
                                         "half_duplex", NULL };
    char where[64];
    snprintf(where, sizeof where, "network.%s", key);
    const cdp_json *o = cdp_json_get(net, key);
    if (!o) return fail(r, "network: missing \"%s\"", key);
    if (check_keys(r, o, where, known)) return -1;
    if (get_num(r, o, where, "latency_s", 1, 0, 1e3, &l->latency_s)) return -1;
    l->per_message_s = 0;   /* optional: files written before it was measured */
    if (get_num(r, o, where, "per_message_s", 0, 0, 1e3, &l->per_message_s)) return -1;
    /* optional: true / false (files written before it was a share) or 0..1 */
    const cdp_json *hd = cdp_json_get(o, "half_duplex");
    l->half_duplex = 0;
    if (hd && hd->type == CDP_JSON_BOOL) l->half_duplex = hd->boolean;
    else if (get_num(r, o, where, "half_duplex", 0, 0, 1, &l->half_duplex)) return -1;
    return get_num(r, o, where, "bandwidth_Bps", 1, 1, 1e15, &l->bandwidth_Bps);
}

static int read_network(const reader *r, const cdp_json *root, cdp_network *n)
{
    static const char *const known[] = { "ranks_per_host", "intra_host", "inter_host", NULL };
    const cdp_json *o = cdp_json_get(root, "network");
    if (!o) return fail(r, "missing \"network\"");
    if (check_keys(r, o, "network", known)) return -1;
    if (get_int(r, o, "network", "ranks_per_host", 1, 1 << 20, &n->ranks_per_host)) return -1;
    if (read_link(r, o, "intra_host", &n->intra)) return -1;
    return read_link(r, o, "inter_host", &n->inter);
}

static int read_layers(const reader *r, const cdp_json *a, cdp_machine *m)
{
    static const char *const known[] = { "index", "fwd_s", "bwd_s", NULL };
    if (a->type != CDP_JSON_ARRAY || a->n == 0)
        return fail(r, "compute.layers: expected a non-empty array");
    int top = -1;
    for (size_t k = 0; k < a->n; k++) {
        const cdp_json *e = cdp_json_get(&a->child[k], "index");
        if (e && e->type == CDP_JSON_INT && e->i > top && e->i < 1 << 20) top = (int)e->i;
    }
    m->nlayers = top + 1;
    m->fwd_s = calloc((size_t)m->nlayers + 1, sizeof *m->fwd_s);
    m->bwd_s = calloc((size_t)m->nlayers + 1, sizeof *m->bwd_s);
    char *seen = calloc((size_t)m->nlayers + 1, 1);
    int bad = !m->fwd_s || !m->bwd_s || !seen;
    if (bad) fail(r, "out of memory");
    for (size_t k = 0; k < a->n && !bad; k++) {
        char where[48];
        snprintf(where, sizeof where, "compute.layers[%zu]", k);
        int idx;
        bad = check_keys(r, &a->child[k], where, known) ||
              get_int(r, &a->child[k], where, "index", 0, (1 << 20) - 1, &idx);
        if (!bad && seen[idx])
            bad = fail(r, "%s: layer %d given twice", where, idx);
        if (!bad) {
            seen[idx] = 1;
            bad = get_num(r, &a->child[k], where, "fwd_s", 1, 0, 1e6, &m->fwd_s[idx]) ||
                  get_num(r, &a->child[k], where, "bwd_s", 1, 0, 1e6, &m->bwd_s[idx]);
        }
    }
    free(seen);
    return bad ? -1 : 0;
}

static int read_compute(const reader *r, const cdp_json *root, cdp_machine *m)
{
    static const char *const known[] = { "model", "input", "batch", "layers", "loss_s",
                                         "flops_per_s", "update_s_per_param", "start_s", NULL };
    const cdp_json *o = cdp_json_get(root, "compute");
    if (!o) return fail(r, "missing \"compute\"");
    if (check_keys(r, o, "compute", known)) return -1;
    if (get_num(r, o, "compute", "update_s_per_param", 1, 0, 1, &m->update_s_per_param)) return -1;
    if (get_num(r, o, "compute", "flops_per_s", 0, 1, 1e21, &m->flops_per_s)) return -1;
    /* optional: files written before it was measured */
    if (get_num(r, o, "compute", "start_s", 0, 0, 1e6, &m->start_s)) return -1;
    const cdp_json *layers = cdp_json_get(o, "layers");
    if (!layers) {
        if (m->flops_per_s <= 0)
            return fail(r, "compute: needs \"layers\" (measured, with \"model\", \"input\", "
                        "\"batch\", \"loss_s\") or \"flops_per_s\"");
        return 0;
    }
    const cdp_json *name = cdp_json_get(o, "model");
    if (!name || name->type != CDP_JSON_STRING || name->len == 0 || name->len >= sizeof m->model)
        return fail(r, "compute.model: expected the model's name (a string), as the layers are its");
    memcpy(m->model, name->str, name->len + 1);
    const cdp_json *in = cdp_json_get(o, "input");
    if (!in || in->type != CDP_JSON_ARRAY || in->n != 3)
        return fail(r, "compute.input: expected [channels, height, width]");
    for (int k = 0; k < 3; k++) {
        const cdp_json *e = &in->child[k];
        if (e->type != CDP_JSON_INT || e->i < 1 || e->i > 1 << 16)
            return fail(r, "compute.input[%d]: expected an integer in [1, 65536]", k);
        m->input[k] = (int)e->i;
    }
    if (get_int(r, o, "compute", "batch", 1, 1 << 20, &m->batch)) return -1;
    if (get_num(r, o, "compute", "loss_s", 1, 0, 1e6, &m->loss_s)) return -1;
    return read_layers(r, layers, m);
}

int cdp_machine_read(const char *path, cdp_machine *m, char *err, size_t errlen)
{
    reader r = { path, err, errlen };
    memset(m, 0, sizeof *m);
    FILE *f = fopen(path, "rb");
    if (!f) return fail(&r, "cannot open: %s", strerror(errno));
    char *text = malloc(MACHINE_MAX_BYTES + 1);
    size_t len = text ? fread(text, 1, MACHINE_MAX_BYTES + 1, f) : 0;
    int rerr = ferror(f);
    fclose(f);
    if (!text) return fail(&r, "out of memory");
    if (rerr || len > MACHINE_MAX_BYTES) {
        free(text);
        return fail(&r, rerr ? "read error" : "larger than 16 MiB");
    }
    char jerr[160];
    cdp_json *root = cdp_json_parse(text, len, NULL, jerr, sizeof jerr);
    free(text);
    if (!root) return fail(&r, "not JSON: %s", jerr);
    static const char *const known[] = { "format", "compute", "network", NULL };
    int bad = check_keys(&r, root, "the top level", known);
    if (!bad) {
        const cdp_json *fmt = cdp_json_get(root, "format");
        if (!fmt || fmt->type != CDP_JSON_STRING || strcmp(fmt->str, MACHINE_FORMAT))
            bad = fail(&r, "\"format\" must be \"%s\"", MACHINE_FORMAT);
    }
    if (!bad) bad = read_compute(&r, root, m);
    if (!bad) bad = read_network(&r, root, &m->net);
    cdp_json_free(root);
    if (bad) cdp_machine_free(m);
    return bad ? -1 : 0;
}

void cdp_machine_free(cdp_machine *m)
{
    free(m->fwd_s);
    free(m->bwd_s);
    m->fwd_s = m->bwd_s = NULL;
    m->nlayers = 0;
}

static void link_json(FILE *f, const char *key, const cdp_link_cost *l, const char *tail)
{
    fprintf(f, "    \"%s\": {\"latency_s\": ", key);
    cdp_json_write_double(f, l->latency_s);
    fprintf(f, ", \"bandwidth_Bps\": ");
    cdp_json_write_double(f, l->bandwidth_Bps);
    fprintf(f, ", \"per_message_s\": ");
    cdp_json_write_double(f, l->per_message_s);
    fprintf(f, ", \"half_duplex\": ");
    cdp_json_write_double(f, l->half_duplex);
    fprintf(f, "}%s\n", tail);
}

void cdp_machine_write(FILE *f, const cdp_machine *m)
{
    fprintf(f, "{\n  \"format\": \"%s\",\n  \"compute\": {\n", MACHINE_FORMAT);
    if (m->nlayers > 0) {
        fprintf(f, "    \"model\": ");
        cdp_json_write_string(f, m->model);
        fprintf(f, ",\n    \"input\": [%d, %d, %d],\n    \"batch\": %d,\n    \"loss_s\": ",
                m->input[0], m->input[1], m->input[2], m->batch);
        cdp_json_write_double(f, m->loss_s);
        fprintf(f, ",\n    \"layers\": [\n");
        int first = 1;
        for (int j = 0; j < m->nlayers; j++) {
            if (m->fwd_s[j] == 0 && m->bwd_s[j] == 0) continue;   /* no work of its own */
            fprintf(f, "%s      {\"index\": %d, \"fwd_s\": ", first ? "" : ",\n", j);
            cdp_json_write_double(f, m->fwd_s[j]);
            fprintf(f, ", \"bwd_s\": ");
            cdp_json_write_double(f, m->bwd_s[j]);
            fprintf(f, "}");
            first = 0;
        }
        fprintf(f, "\n    ],\n");
    }
    if (m->flops_per_s > 0) {
        fprintf(f, "    \"flops_per_s\": ");
        cdp_json_write_double(f, m->flops_per_s);
        fprintf(f, ",\n");
    }
    fprintf(f, "    \"start_s\": ");
    cdp_json_write_double(f, m->start_s);
    fprintf(f, ",\n    \"update_s_per_param\": ");
    cdp_json_write_double(f, m->update_s_per_param);
    fprintf(f, "\n  },\n  \"network\": {\n    \"ranks_per_host\": %d,\n", m->net.ranks_per_host);
    link_json(f, "intra_host", &m->net.intra, ",");
    link_json(f, "inter_host", &m->net.inter, "");
    fprintf(f, "  }\n}\n");
}
