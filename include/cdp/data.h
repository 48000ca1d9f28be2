/* Data sets: Fashion-MNIST / MNIST IDX files (gzipped or plain), CIFAR-10
 * binary batches, and a synthetic set.  Images are kept as bytes; the
 * executor turns a micro-batch into float32 pixel/255.0f when it uses it. */
#ifndef CDP_DATA_H
#define CDP_DATA_H

#include <stddef.h>
#include <stdint.h>

typedef struct cdp_dataset {
    int64_t n;        /* number of samples */
    int dim;          /* bytes per image (784 for 28x28, 3072 for CIFAR-10) */
    int classes;      /* 10 */
    uint8_t *pixels;  /* n * dim, row-major */
    int32_t *labels;  /* n, each in [0, classes) */
} cdp_dataset;

typedef struct cdp_data {
    cdp_dataset train, test;
    char name[32];    /* "fashion-mnist", "cifar10", "synthetic" */
} cdp_data;

/* All loaders return 0 on success; on failure they return -1 and write one
 * line into err naming the file and the problem (no trailing newline).
 * Nothing is printed. */

/* IDX image + label files (as in MNIST); ".gz" files are read through zlib,
 * others as they are.  Validates magic numbers (0x00000803 images,
 * 0x00000801 labels), dimensions, counts, truncation, trailing bytes, label
 * range, and that images and labels have the same count. */
int cdp_load_idx(const char *images_path, const char *labels_path,
                 cdp_dataset *out, char *err, size_t errlen);

/* One or more CIFAR-10 binary batch files (records of 1 label byte + 3072
 * pixel bytes), concatenated in the given order.  Validates the size is a
 * whole number of records, and labels < 10. */
int cdp_load_cifar10(const char *const *paths, int npaths,
                     cdp_dataset *out, char *err, size_t errlen);

/* Deterministic synthetic classification set: n samples of dim bytes,
 * 10 classes, learnable (class-dependent patterns plus noise) from seed. */
int cdp_make_synthetic(int64_t n, int dim, uint64_t seed, cdp_dataset *out);

/* High level: kind is "fashion-mnist" (also "mnist": same IDX file names),
 * "cifar10" or "synthetic".  For fashion-mnist, dir holds
 * train-images-idx3-ubyte(.gz), train-labels-idx1-ubyte(.gz),
 * t10k-images-idx3-ubyte(.gz), t10k-labels-idx1-ubyte(.gz) (the .gz name is
 * tried first).  For cifar10, dir holds data_batch_1..5.bin and
 * test_batch.bin.  synthetic ignores dir: 8192 train and 2048 test samples
 * of 784 bytes. */
int cdp_data_load(const char *kind, const char *dir, uint64_t seed,
                  cdp_data *out, char *err, size_t errlen);

/* The synthetic set with images of dim bytes (8192 train, 2048 test). */
int cdp_data_synthetic(int dim, uint64_t seed, cdp_data *out, char *err, size_t errlen);

void cdp_dataset_free(cdp_dataset *d);
void cdp_data_free(cdp_data *d);

/* The permutation of epoch `epoch`: perm[0..n) is a permutation of 0..n-1
 * seeded by (seed, epoch); with shuffle == 0 it is the identity. */
void cdp_epoch_permutation(int64_t n, uint64_t seed, int64_t epoch, int shuffle,
                           int64_t *perm);

#endif
