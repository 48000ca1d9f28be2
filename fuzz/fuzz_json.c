/* libFuzzer harness: the JSON reader (src/io/json.c) on any bytes, with the
 * default limits and with the tight ones safetensors headers get. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "io/json.h"
#include "fuzz_common.h"

static size_t walk(const cdp_json *v, int depth)
{
    size_t n = 1;
    if (depth > 200)
        abort(); /* beyond the depth limit */
    if (v->type == CDP_JSON_STRING && strlen(v->str) != v->len)
        abort(); /* strings hold no NUL */
    for (size_t j = 0; j < v->n; j++)
        n += walk(&v->child[j], depth + 1);
    if (v->type == CDP_JSON_OBJECT)
        (void)cdp_json_get(v, v->n ? v->child[v->n - 1].key : "x");
    return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[200] = "";
    cdp_json *v = cdp_json_parse((const char *)data, size, NULL, err, sizeof err);
    fuzz_check_err(v ? 0 : -1, err);
    if (v) {
        walk(v, 0);
        cdp_json_free(v);
    }
    cdp_json_limits lim = {4, 4096, 64};
    err[0] = '\0';
    v = cdp_json_parse((const char *)data, size, &lim, err, sizeof err);
    fuzz_check_err(v ? 0 : -1, err);
    if (v) {
        if (walk(v, 0) > 64)
            abort(); /* more values than the limit */
        char out[64];
        cdp_json_escape(out, sizeof out, v->type == CDP_JSON_STRING ? v->str : "");
        cdp_json_free(v);
    }
    return 0;
}
