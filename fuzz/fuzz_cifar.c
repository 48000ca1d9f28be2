/* libFuzzer harness: the CIFAR-10 binary reader (cdp_load_cifar10,
 * src/io/data.c).  Input: a byte s, then the data; s odd: two batch files,
 * the data cut at byte (s * length / 256) rounded down to a whole number of
 * records (3073 bytes); s even: one file. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "io/data.h"
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const unsigned s = data[0];
    data++;
    size--;
    const char *paths[2];
    int np = 1;
    if (s & 1) {
        size_t cut = (size_t)s * size / 256;
        if (cut > 3073)
            cut -= cut % 3073;
        paths[0] = fuzz_file(0, data, cut);
        paths[1] = fuzz_file(1, data + cut, size - cut);
        np = 2;
    } else {
        paths[0] = fuzz_file(0, data, size);
    }
    cdp_dataset d;
    char err[512] = "";
    int rc = cdp_load_cifar10(paths, np, &d, err, sizeof err);
    fuzz_check_err(rc, err);
    if (rc == 0) {
        if (d.n < 1 || d.dim != 3072 || (uint64_t)d.n * 3073 != size)
            abort();
        for (int64_t i = 0; i < d.n; i++)
            if (d.labels[i] < 0 || d.labels[i] >= d.classes || d.pixels[(i + 1) * d.dim - 1] > 255)
                abort();
        cdp_dataset_free(&d);
    }
    return 0;
}
