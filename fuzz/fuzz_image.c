/* libFuzzer harness: the image path of --data folder (src/io/image_decode.c,
 * transforms.c, image_folder.c).  Input: a selector byte s, then the bytes
 * of one image file.  The file is probed and decoded in memory; when it
 * decodes, Resize(R) + CenterCrop(S) runs on it (S = 1 + s % 16, R = S +
 * s / 16), and it is read back from a scratch file as a training sample of
 * a one-file folder (seed and index from s).  Probe and decode must agree on
 * the size; a failure must leave one line of error. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "io/image_decode.h"
#include "io/image_folder.h"
#include "io/transforms.h"
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const unsigned s = data[0];
    data++;
    size--;
    char why[512] = "";
    int w = 0, h = 0;
    const int prc = cdp_image_probe(data, size, &w, &h, why, sizeof why);
    fuzz_check_err(prc, why);
    cdp_image im;
    why[0] = '\0';
    const int rc = cdp_image_decode(data, size, &im, why, sizeof why);
    fuzz_check_err(rc, why);
    if (rc != 0) {
        if (im.rgb || im.width || im.height)
            abort();    /* a failure leaves nothing behind */
        return 0;
    }
    /* a file that decodes has the size its header says */
    if (prc != 0 || im.width != w || im.height != h || !im.rgb || w < 1 || h < 1 ||
        w > CDP_IMAGE_MAX_SIDE || h > CDP_IMAGE_MAX_SIDE)
        abort();
    const int S = 1 + (int)(s % 16), R = S + (int)(s / 16);
    uint8_t out[3 * 16 * 16];
    if (cdp_resize_center_crop(im.rgb, im.width, im.height, R, S, out) != 0)
        abort();
    cdp_image_free(&im);

    char *path = (char *)fuzz_file(0, data, size);
    cdp_image_folder f = {1, &path, S, R, 1, 0, 0, 0};
    why[0] = '\0';
    const int src = cdp_image_folder_sample(&f, s, s & 3, 0, out, why, sizeof why);
    fuzz_check_err(src, why);
    if (src != 0)
        abort();        /* it decoded in memory: it must from the file */
    return 0;
}
