/* libFuzzer harness: the IDX reader (cdp_load_idx, src/io/data.c), plain or
 * gzip through zlib.  Input: a 4-byte little-endian length k, then k bytes
 * of the images file (fewer when the input is shorter), then the labels
 * file. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "io/data.h"
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 4)
        return 0;
    size_t k = (size_t)data[0] | (size_t)data[1] << 8 | (size_t)data[2] << 16 |
               (size_t)data[3] << 24;
    data += 4;
    size -= 4;
    if (k > size)
        k = size;
    const char *img = fuzz_file(0, data, k);
    const char *lab = fuzz_file(1, data + k, size - k);
    cdp_dataset d;
    char err[512] = "";
    int rc = cdp_load_idx(img, lab, &d, err, sizeof err);
    fuzz_check_err(rc, err);
    if (rc == 0) {
        if (d.n < 1 || d.dim != d.height * d.width || d.channels != 1)
            abort();
        unsigned sum = 0;
        for (int64_t i = 0; i < d.n; i++) {
            if (d.labels[i] < 0 || d.labels[i] >= d.classes)
                abort();
            sum += d.pixels[i * d.dim] + d.pixels[(i + 1) * d.dim - 1];
        }
        (void)sum;
        cdp_dataset_free(&d);
    }
    return 0;
}
