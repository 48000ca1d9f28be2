/* Data sets: Fashion-MNIST / MNIST IDX files (gzipped or plain), CIFAR-10
 * binary batches, and a synthetic set of any image shape.  Images are kept
 * as bytes, CHW (channel planes, each row-major), like a PyTorch image
 * tensor; the executor turns a micro-batch into float32 (pixel / 255.0f,
 * then the data set's per-channel normalisation, if any) when it uses it.
 *
 * The training set also carries the augmentation (random crop, flip) that
 * the batcher (io/batch.h) applies when it gathers a micro-batch, like the
 * `transform` of a torchvision data set; the test set carries none. */
#ifndef CDP_DATA_H
#define CDP_DATA_H

#include <stddef.h>
#include <stdint.h>

/* Most per-channel values --normalize takes. */
#define CDP_NORM_MAX_CHANNELS 64

/* torchvision's RandomCrop((H, W), padding=crop_pad) (zero fill) then
 * RandomHorizontalFlip(p=0.5), drawn per (seed, epoch, sample index): see
 * io/batch.h for the exact draws. */
typedef struct cdp_augment {
    int crop_pad;     /* P > 0: random crop of the image padded by P zeros; 0: none */
    int flip;         /* 1: horizontal flip with probability 1/2 */
} cdp_augment;

struct cdp_image_folder;

typedef struct cdp_dataset {
    int64_t n;        /* number of samples */
    int dim;          /* bytes per image = channels * height * width */
    int classes;      /* 10 */
    uint8_t *pixels;  /* n * dim, image after image, each CHW */
    int32_t *labels;  /* n, each in [0, classes) */
    int channels, height, width;  /* 1x28x28 (MNIST), 3x32x32 (CIFAR-10), ... */
    cdp_augment augment;  /* applied by the batcher (training set only) */
    float *norm;      /* NULL: x = p / 255.0f; else 2*channels floats (owned),
                       * means then stds: x = (p / 255.0f - mean_c) / std_c */
    struct cdp_image_folder *folder;  /* non-NULL: pixels is NULL and each sample
                       * is decoded when gathered (io/image_folder.h; owned) */
    uint32_t files_crc;   /* folder: CRC-32C of the files' names and sizes */
} cdp_dataset;

typedef struct cdp_data {
    cdp_dataset train, test;
    char name[32];    /* "fashion-mnist", "mnist", "cifar10", "synthetic", "folder" */
    int64_t skipped;  /* folder with bad=skip: the files left out */
} cdp_data;

/* A parsed --data value:
 *     fashion-mnist | mnist | cifar10 | synthetic[:CxHxW][:n=TRAIN][:test=TEST]
 *     | folder:DIR[:size=S][:resize=R][:bad=error|skip][:decoders=T][:prefetch=K]
 * (the fields after the kind in any order, each at most once; DIR holds no
 * ':'). */
typedef struct cdp_data_spec {
    char kind[16];                /* "fashion-mnist", "mnist", "cifar10", "synthetic", "folder" */
    int channels, height, width;  /* synthetic: the image shape; 0: not given */
    int64_t train_n, test_n;      /* synthetic: the sample counts; 0: not given */
    char dir[1024];               /* folder: DIR */
    int size, resize;             /* folder: S (default 224) and R (default
                                   * round(S * 256 / 224)), R >= S */
    int skip_bad;                 /* folder: 1 with bad=skip */
    int decoders;                 /* folder: decoders=T, threads decoding
                                   * ahead (0: the rank's --threads) */
    int prefetch;                 /* folder: prefetch=K steps ahead [2] */
} cdp_data_spec;

/* The part of --data value spec that fixes the samples' bytes, into buf:
 * spec itself, but for folder "folder:size=S:resize=R[:bad=skip]" (DIR is
 * where the files are, like --data-dir, and decoders= and prefetch= change
 * no bit).  A checkpoint resumes under the same. */
void cdp_data_spec_numerics(const char *spec, char *buf, size_t len);

/* One line into err (printf's format; a newline, which a path may hold,
 * becomes a space): the loaders' messages. */
void cdp_data_err(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Opens path for reading when it is a regular file, and only then (a FIFO
 * is not opened for a blocking read): the descriptor, or -1 with one line
 * "PATH: problem" in err. */
int cdp_open_regular(const char *path, char *err, size_t errlen);

/* All loaders return 0 on success; on failure they return -1 and write one
 * line into err naming the file and the problem (no trailing newline).
 * Nothing is printed. */

/* 0, or -1 with one line in err naming the value and the problem. */
int cdp_data_spec_parse(const char *s, cdp_data_spec *out, char *err, size_t errlen);

/* The synthetic sample counts of spec s for a run whose step takes
 * step_samples = N*B samples of dim bytes: the given ones, else
 *     train = max(min(8192, floor(256 MiB / dim)), step_samples)
 *     test  = max(1, train / 4)      (test = n/4 when only n= is given)
 * so that the default of 784-byte images is 8192 and 2048, as always. */
void cdp_data_synthetic_counts(const cdp_data_spec *s, int dim, int64_t step_samples,
                               int64_t *train_n, int64_t *test_n);

/* The default data directory of a kind: $CDP_DATA_DIR/KIND when the
 * environment variable CDP_DATA_DIR is set and not empty, else
 * /usr/share/datasets/KIND (Debian's dataset-fashion-mnist installs
 * /usr/share/datasets/fashion-mnist).  "" for synthetic.  0, or -1 (buf "")
 * for an unknown kind or a buffer too small. */
int cdp_data_default_dir(const char *kind, char *buf, size_t len);

/* IDX image + label files (as in MNIST); ".gz" files are read through zlib,
 * others as they are.  Validates the file type (a regular file: a FIFO, a
 * device, a directory or a symbolic-link loop is refused, never opened for
 * a blocking read), magic numbers (0x00000803 images, 0x00000801 labels),
 * dimensions, counts, truncation, trailing bytes, label range, and that
 * images and labels have the same count.  Shape 1 x rows x cols. */
int cdp_load_idx(const char *images_path, const char *labels_path,
                 cdp_dataset *out, char *err, size_t errlen);

/* One or more CIFAR-10 binary batch files (records of 1 label byte + 3072
 * pixel bytes: 1024 red, 1024 green, 1024 blue, each plane row-major 32x32,
 * i.e. already CHW), concatenated in the given order.  Validates the file
 * type, that the size is a whole number of records, and labels < 10.
 * Shape 3 x 32 x 32. */
int cdp_load_cifar10(const char *const *paths, int npaths,
                     cdp_dataset *out, char *err, size_t errlen);

/* Deterministic synthetic classification set: n samples of dim bytes,
 * 10 classes, learnable (class-dependent patterns plus noise) from seed.
 * Shape: see cdp_data_flat_shape.  The bytes depend on (seed, n, dim) only,
 * not on the shape. */
int cdp_make_synthetic(int64_t n, int dim, uint64_t seed, cdp_dataset *out);

/* The shape given to dim bytes with no shape of their own: 1 x s x s when
 * dim = s*s (784: 1x28x28), else 1 x 1 x dim. */
void cdp_data_flat_shape(int dim, int *channels, int *height, int *width);

/* High level: spec is a --data value (cdp_data_spec_parse).  dir: where
 * the files are; NULL or "" for the kind's default (cdp_data_default_dir).
 *   fashion-mnist, mnist: dir holds train-images-idx3-ubyte(.gz),
 *     train-labels-idx1-ubyte(.gz), t10k-images-idx3-ubyte(.gz),
 *     t10k-labels-idx1-ubyte(.gz) (the .gz name is tried first);
 *   cifar10: dir (or dir/cifar-10-batches-bin) holds data_batch_1..5.bin
 *     and test_batch.bin;
 *   synthetic: dir is ignored; the shape is the spec's, else the flat shape
 *     of input_dim bytes (the model's input; 0: 784, i.e. 1x28x28); the
 *     counts are cdp_data_synthetic_counts(spec, dim, step_samples).
 * A missing file or directory is one line naming the file (and, for mnist
 * and cifar10, where to get it). */
int cdp_data_open(const char *spec, const char *dir, uint64_t seed, int64_t step_samples,
                  int input_dim, cdp_data *out, char *err, size_t errlen);

/* cdp_data_open(kind, dir, seed, 0, 0, ...): plain "synthetic" is 8192
 * train and 2048 test samples of 1x28x28. */
int cdp_data_load(const char *kind, const char *dir, uint64_t seed,
                  cdp_data *out, char *err, size_t errlen);

/* The synthetic set with images of dim bytes (8192 train, 2048 test). */
int cdp_data_synthetic(int dim, uint64_t seed, cdp_data *out, char *err, size_t errlen);

/* Sets the transforms of a loaded data set: augment (NULL: none) on the
 * training set only; the normalisation (norm_count 0: none; 1: the same
 * mean and std for every channel; else one per channel, norm_count ==
 * channels) on both sets.  0, or -1 with one line in err (nothing changed). */
int cdp_data_set_transforms(cdp_data *d, const cdp_augment *augment, int norm_count,
                            const float *mean, const float *std, char *err, size_t errlen);

void cdp_dataset_free(cdp_dataset *d);
void cdp_data_free(cdp_data *d);

/* The permutation of epoch `epoch`: perm[0..n) is a permutation of 0..n-1
 * seeded by (seed, epoch); with shuffle == 0 it is the identity. */
void cdp_epoch_permutation(int64_t n, uint64_t seed, int64_t epoch, int shuffle,
                           int64_t *perm);

#endif
