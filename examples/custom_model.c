/* A network of one's own, trained with Cyclic Data Parallelism through
 * cdp's public API alone (<cdp/cdp.h>): a small residual CNN defined layer
 * by layer, trained a few steps on synthetic images with rule cdp-v1 on
 * however many ranks mpirun starts, its weights then read back.
 *
 * Build against an installed cdp:
 *   mpicc -std=c11 custom_model.c $(pkg-config --cflags --libs cdp) -o custom_model
 * Run:
 *   mpirun -np 2 ./custom_model weights.safetensors
 *   mpirun -np 2 ./custom_model weights.safetensors --steps 100 --rule cdp-v2
 * The first argument is the weight file to write; the others are cdp_run's
 * options (cdp_run --help), given after the example's own and so winning
 * over them (but for --data and --model, which the example's read-back
 * assumes).  The weights are the same bits on any number of ranks. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <mpi.h>
#include <cdp/cdp.h>

/* What the build function is given: the network's width. */
typedef struct tiny_resnet {
    int width;
} tiny_resnet;

/* conv 3x3 -> BatchNorm, the unit of a ResNet */
static int conv_bn(cdp_builder *b, const char *conv, const char *bn, int x, int width, int stride)
{
    return cdp_builder_batchnorm2d(b, bn, cdp_builder_conv2d(b, conv, x, width, 3, stride, 1, 0));
}

/* stem (conv, BatchNorm, ReLU), one residual block, a downsampling
 * residual block, head (global average pool, Linear): four blocks, so
 * training may cut it into up to four stages */
static int build(cdp_builder *b, void *arg)
{
    const tiny_resnet *t = arg;
    const int w = t->width;
    cdp_shape in = cdp_builder_input_shape(b);
    if (in.h < 8 || in.w < 8)
        return cdp_builder_fail(b, "images of at least 8x8 pixels, not %dx%d", in.h, in.w);

    cdp_builder_block(b);
    int x = cdp_builder_relu(b, conv_bn(b, "conv1", "bn1", CDP_INPUT, w, 1));

    cdp_builder_block(b);   /* x + F(x) */
    int y = cdp_builder_relu(b, conv_bn(b, "block1.conv1", "block1.bn1", x, w, 1));
    y = conv_bn(b, "block1.conv2", "block1.bn2", y, w, 1);
    x = cdp_builder_relu(b, cdp_builder_add(b, y, x));

    cdp_builder_block(b);   /* half the size, twice the channels: a 1x1 conv shortcut */
    y = cdp_builder_relu(b, conv_bn(b, "block2.conv1", "block2.bn1", x, 2 * w, 2));
    y = conv_bn(b, "block2.conv2", "block2.bn2", y, 2 * w, 1);
    int s = cdp_builder_conv2d(b, "block2.shortcut.0", x, 2 * w, 1, 2, 0, 0);
    s = cdp_builder_batchnorm2d(b, "block2.shortcut.1", s);
    x = cdp_builder_relu(b, cdp_builder_add(b, y, s));

    cdp_builder_block(b);
    x = cdp_builder_flatten(b, cdp_builder_avgpool(b, x));
    return cdp_builder_linear(b, "fc", x, cdp_builder_classes(b));
}

/* Rank 0: the model as training will build it. */
static int describe(cdp_shape input, int classes)
{
    char err[512];
    cdp_model *m;
    if (cdp_model_create("tiny-resnet", input, classes, 0, &m, err, sizeof err)) {
        fprintf(stderr, "custom_model: %s\n", err);
        return -1;
    }
    printf("custom_model: tiny-resnet on %dx%dx%d images: %zu parameters in %d tensors, "
           "%d stages\n", input.c, input.h, input.w, cdp_model_param_count(m),
           cdp_model_tensor_count(m), cdp_model_stage_count(m));
    cdp_model_destroy(m);
    return 0;
}

/* Rank 0: the trained weights, read back through the model's tensors. */
static int report_weights(const char *path, cdp_shape input, int classes)
{
    char err[512];
    cdp_model *m;
    if (cdp_model_create("tiny-resnet", input, classes, 0, &m, err, sizeof err)) {
        fprintf(stderr, "custom_model: %s\n", err);
        return -1;
    }
    float *p = calloc(cdp_model_param_floats(m), sizeof *p);
    if (!p || cdp_load_weights(path, m, p, err, sizeof err)) {
        fprintf(stderr, "custom_model: %s\n", p ? err : "out of memory");
        free(p);
        cdp_model_destroy(m);
        return -1;
    }
    for (int j = 0; j < cdp_model_tensor_count(m); j++) {
        int ndim;
        int64_t shape[4];
        size_t off, n;
        const char *name = cdp_model_tensor(m, j, &ndim, shape, &off, &n);
        if (n == 0)
            continue;   /* num_batches_tracked: a counter, no floats */
        double ss = 0;
        for (size_t i = 0; i < n; i++)
            ss += (double)p[off + i] * p[off + i];
        printf("custom_model: %-22s %zu values, norm %.6f\n", name, n, sqrt(ss));
    }
    free(p);
    cdp_model_destroy(m);
    return 0;
}

int main(int argc, char **argv)
{
    cdp_preinit(argc, argv);
    MPI_Init(&argc, &argv);
    int rank, rc = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (argc < 2 || argv[1][0] == '-') {
        if (rank == 0)
            fprintf(stderr, "usage: custom_model WEIGHTS [cdp_run options]\n");
        MPI_Finalize();
        return 2;
    }
    const char *weights = argv[1];

    /* every rank defines the same models, before training */
    static tiny_resnet net = { 8 };
    char err[512];
    if (cdp_model_define("tiny-resnet", "a residual CNN of examples/custom_model.c", build, &net,
                         0, err, sizeof err)) {
        if (rank == 0)
            fprintf(stderr, "custom_model: %s\n", err);
        MPI_Finalize();
        return 1;
    }
    const cdp_shape input = { 3, 16, 16 };   /* the data below */
    if (rank == 0 && describe(input, 10))
        rc = 1;
    MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);

    /* cdp_run's options: the example's, then the user's */
    char *ours[] = {
        argv[0], "--model", "tiny-resnet", "--data", "synthetic:3x16x16:n=1024:test=256",
        "--rule", "cdp-v1", "--workers", "4", "--batch", "8", "--steps", "40",
        "--lr", "0.05", "--momentum", "0.9", "--eval-every", "0",
        "--save-weights", (char *)weights,
    };
    const int nours = (int)(sizeof ours / sizeof *ours);
    char **args = malloc(sizeof *args * (size_t)(nours + argc));
    if (!args)
        abort();
    int n = 0;
    for (int k = 0; k < nours; k++)
        args[n++] = ours[k];
    for (int k = 2; k < argc; k++)
        args[n++] = argv[k];
    args[n] = NULL;
    if (!rc)
        rc = cdp_train_main(MPI_COMM_WORLD, n, args);
    free(args);
    if (!rc && rank == 0 && report_weights(weights, input, 10))
        rc = 1;
    MPI_Finalize();
    return rc;
}
