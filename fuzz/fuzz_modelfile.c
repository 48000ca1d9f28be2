/* libFuzzer harness: the model description reader (src/models/model_file.c)
 * on any bytes, through the builder and its check, as --model FILE.json
 * builds a model: it ends with a model or one line of error. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "models/model_file.h"
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[1024] = "";
    cdp_model m;
    memset(&m, 0, sizeof m);
    snprintf(m.name, sizeof m.name, "fuzz.json");
    cdp_builder b = { &m, 0, 0, 0, err, sizeof err, 0 };
    int stages = 0;
    int rc = cdp_model_file_read(&b, (const char *)data, size, &stages);
    if (!rc)
        rc = cdp_builder_check(&b);
    fuzz_check_err(rc, err);
    if (!rc && (stages < 1 || m.nlayers < 1))
        abort(); /* a model without a stage or a layer */
    cdp_model_free(&m);
    return 0;
}
