/* A folder of image files in torchvision's ImageFolder layout as a data set
 * (--data folder:DIR): DIR/train/CLASS/... and DIR/val/CLASS/...
 *
 * Classes are the sub-folders of DIR/train sorted by name (bytes, as
 * Python sorts str), the label of a class its position; the files of a
 * class are those found by walking its folder (links followed), sorted by
 * folder then name as ImageFolder's sorted(os.walk()) does, keeping the
 * names ending (in any case) in .jpg .jpeg .png .ppm .bmp .pgm .tif .tiff
 * .webp (torchvision's IMG_EXTENSIONS; other files are not part of the
 * layout).  DIR/val must have the same classes.
 *
 * The validation images are decoded when the set is opened, Resize(R) and
 * CenterCrop(S), into the test set's pixels.  The training images are
 * checked then (each file read and its header decoded) but decoded only
 * when a micro-batch takes them, with RandomResizedCrop(S) and the flip
 * drawn from (seed, epoch, index) (io/transforms.h). */
#ifndef CDP_IMAGE_FOLDER_H
#define CDP_IMAGE_FOLDER_H

#include <stddef.h>
#include <stdint.h>
#include "io/data.h"

typedef struct cdp_image_folder {
    int64_t n;
    char **paths;       /* n file paths, in sample order */
    int size;           /* S: the output is 3 x S x S */
    int resize;         /* R of the validation images' Resize */
    int classes;
    int decoders;       /* decoding threads ahead of training; 0: --threads */
    int prefetch;       /* steps decoded ahead; 0: none, each micro-batch is
                         * decoded when taken, on the OpenMP threads */
    int64_t skipped;    /* files left out (bad=skip), both sets */
} cdp_image_folder;

/* Opens spec's folder (kind "folder") into out: the training set with
 * pixels NULL and `folder` set, the test set decoded.  A file that cannot
 * be read or decoded is an error naming it, or, with spec->skip_bad, left
 * out and counted in out->skipped.  0, or -1 with one line in err. */
int cdp_image_folder_open(const cdp_data_spec *spec, cdp_data *out, char *err, size_t errlen);

/* Sample `index` of the training folder as the batcher gives it in epoch
 * `epoch`: decoded, RandomResizedCrop(S), flipped on its draw, CHW into
 * out (3*S*S bytes).  0, or -1 with "PATH: problem" in err. */
int cdp_image_folder_sample(const cdp_image_folder *f, uint64_t seed, int64_t epoch,
                            int64_t index, uint8_t *out, char *err, size_t errlen);

/* The B samples idx[0..B) into pixels (B * 3*S*S bytes), decoded on the
 * OpenMP threads; a file that fails ends the process with one line naming
 * it (the one of the lowest j) and exit status 1: training cannot go on
 * without it and no other rank can be asked at this point. */
void cdp_image_folder_gather(const cdp_image_folder *f, uint64_t seed, int64_t epoch,
                             const int64_t *idx, int B, uint8_t *pixels);

/* The line for a training file that failed ("cdp_run: error: ERR ...") on
 * stderr, then exit(1). */
void cdp_image_folder_fail(const char *err) __attribute__((noreturn));

void cdp_image_folder_free(cdp_image_folder *f);

#endif
