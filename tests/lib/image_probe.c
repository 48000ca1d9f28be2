/* Runs cdp's image decoding and transforms on one file, for
 * tests/torch/torch_image_folder.py to compare with PIL and torchvision:
 *
 *   image_probe decode FILE OUT
 *       prints "size W H"; OUT: the RGB bytes, HWC
 *   image_probe val FILE S R OUT
 *       OUT: Resize(R) + CenterCrop(S), CHW
 *   image_probe train FILE S SEED EPOCH INDEX OUT
 *       prints "draw T SCALE LOG_RATIO TOP LEFT" for the 10 attempts (the
 *       floats with 9 digits: exact), "box TOP LEFT H W" and "flip F";
 *       OUT: the training sample as the batcher gives it for sample INDEX
 *       of a folder whose every file is FILE, CHW
 *   image_probe list DIR
 *       opens DIR as --data folder:DIR:size=4 does and prints the training
 *       samples in order, "LABEL PATH" (PATH relative to DIR/train)
 *
 * Exit 0, or 1 with "image_probe: PROBLEM" on stderr. */
#include "io/image_decode.h"
#include "io/image_folder.h"
#include "io/transforms.h"
#include "io/batch.h"
#include "io/data.h"
#include "util/rng.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void die(const char *msg)
{
    fprintf(stderr, "image_probe: %s\n", msg);
    exit(1);
}

static uint8_t *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        die("cannot open the input");
    size_t cap = 1 << 16, n = 0;
    uint8_t *b = malloc(cap);
    for (size_t r; b && (r = fread(b + n, 1, cap - n, f)) > 0;) {
        n += r;
        if (n == cap)
            b = realloc(b, cap *= 2);
    }
    fclose(f);
    if (!b)
        die("out of memory");
    *len = n;
    return b;
}

static void spill(const char *path, const uint8_t *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, n, f) != n || fclose(f) != 0)
        die("cannot write the output");
}

int main(int argc, char **argv)
{
    char why[600];
    if (argc == 4 && !strcmp(argv[1], "decode")) {
        size_t len;
        uint8_t *b = slurp(argv[2], &len);
        cdp_image im;
        if (cdp_image_decode(b, len, &im, why, sizeof why))
            die(why);
        printf("size %d %d\n", im.width, im.height);
        spill(argv[3], im.rgb, (size_t)im.width * im.height * 3);
        return 0;
    }
    if (argc == 6 && !strcmp(argv[1], "val")) {
        size_t len;
        uint8_t *b = slurp(argv[2], &len);
        const int S = atoi(argv[3]), R = atoi(argv[4]);
        cdp_image im;
        if (cdp_image_decode(b, len, &im, why, sizeof why))
            die(why);
        uint8_t *out = malloc((size_t)3 * S * S);
        if (!out || cdp_resize_center_crop(im.rgb, im.width, im.height, R, S, out))
            die("out of memory");
        spill(argv[5], out, (size_t)3 * S * S);
        return 0;
    }
    if (argc == 8 && !strcmp(argv[1], "train")) {
        size_t len;
        uint8_t *b = slurp(argv[2], &len);
        const int S = atoi(argv[3]);
        const uint64_t seed = strtoull(argv[4], NULL, 10);
        const int64_t epoch = atoll(argv[5]), index = atoll(argv[6]);
        int W, H;
        if (cdp_image_probe(b, len, &W, &H, why, sizeof why))
            die(why);
        cdp_rrc_draw d[CDP_RRC_ATTEMPTS];
        for (int t = 0; t < CDP_RRC_ATTEMPTS; t++) {
            d[t] = cdp_rrc_draws(seed, epoch, index, t);
            printf("draw %d %.9g %.9g %llu %llu\n", t, (double)d[t].scale,
                   (double)d[t].log_ratio, (unsigned long long)d[t].top,
                   (unsigned long long)d[t].left);
        }
        cdp_box box = cdp_rrc_box(W, H, d);
        printf("box %d %d %d %d\n", box.top, box.left, box.h, box.w);
        printf("flip %d\n", cdp_rand_unit(seed, CDP_STREAM_AUG_FLIP ^ cdp_mix64((uint64_t)epoch),
                                          (uint64_t)index) < 0.5f);
        /* the folder's own sample path: INDEX + 1 entries, all FILE */
        cdp_image_folder f = {index + 1, calloc((size_t)index + 1, sizeof(char *)), S, S, 1, 0, 0, 0};
        if (!f.paths)
            die("out of memory");
        for (int64_t i = 0; i <= index; i++)
            f.paths[i] = argv[2];
        uint8_t *out = malloc((size_t)3 * S * S);
        if (!out || cdp_image_folder_sample(&f, seed, epoch, index, out, why, sizeof why))
            die(out ? why : "out of memory");
        spill(argv[7], out, (size_t)3 * S * S);
        return 0;
    }
    if (argc == 3 && !strcmp(argv[1], "list")) {
        char spec[1200];
        snprintf(spec, sizeof spec, "folder:%s:size=4", argv[2]);
        cdp_data d;
        if (cdp_data_open(spec, NULL, 1, 1, 0, &d, why, sizeof why))
            die(why);
        const size_t skip = strlen(argv[2]) + strlen("/train/");
        for (int64_t i = 0; i < d.train.n; i++)
            printf("%d %s\n", (int)d.train.labels[i], d.train.folder->paths[i] + skip);
        cdp_data_free(&d);
        return 0;
    }
    die("usage: image_probe decode FILE OUT | val FILE S R OUT | "
        "train FILE S SEED EPOCH INDEX OUT | list DIR");
}
