/* st_compare MODEL A B TOL [CxHxW]: compares two weight files of MODEL
 * (input shape CxHxW, default 1x28x28 for the ResNets).
 * Prints the relative difference max|a-b|/max|b| and the number of values
 * whose bits differ; exits 1 when the files differ by more than TOL
 * (TOL = 0: they must be bitwise identical), 2 on a bad file.
 * TOL = norm:X bounds ||a-b|| / ||b|| (2-norms over every tensor, buffers
 * included) instead: with BatchNorm on small micro-batches a last-bit
 * change of a gradient sum moves a few small tensors (the BN biases) by
 * 1e-3 of their own size in 3 steps, which a maximum over values reads as
 * a large error and the norm over the whole model does not. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "io/safetensors.h"
#include "models/model.h"
#include "exec/reference.h"

int main(int argc, char **argv)
{
    if (argc != 5 && argc != 6) {
        fprintf(stderr, "usage: st_compare MODEL A.safetensors B.safetensors TOL [CxHxW]\n");
        return 2;
    }
    cdp_model m;
    char err[512];
    cdp_model_config mc = { argv[1], 0, { 0, 0, 0 }, 0, 1, CDP_BALANCE_FLOPS, CDP_PRECISION_FP32 };
    if (argc == 6 && sscanf(argv[5], "%dx%dx%d", &mc.input.c, &mc.input.h, &mc.input.w) != 3) {
        fprintf(stderr, "st_compare: bad shape '%s'\n", argv[5]);
        return 2;
    }
    if (cdp_model_build(&mc, &m, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 2;
    }
    float *a = malloc(m.nparams * sizeof(float)), *b = malloc(m.nparams * sizeof(float));
    if (!a || !b) return 2;
    if (cdp_load_weights(argv[2], &m, a, err, sizeof err) ||
        cdp_load_weights(argv[3], &m, b, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 2;
    }
    size_t nd;
    double rel = cdp_max_rel_diff(a, b, m.nparams, &nd);
    int norm = strncmp(argv[4], "norm:", 5) == 0;
    double tol = atof(argv[4] + (norm ? 5 : 0));
    if (norm) {
        double dd = 0.0, bb = 0.0;
        for (size_t i = 0; i < m.nparams; i++) {
            double d = (double)a[i] - (double)b[i];
            dd += d * d;
            bb += (double)b[i] * (double)b[i];
        }
        rel = bb > 0.0 ? sqrt(dd) / sqrt(bb) : sqrt(dd);
        printf("relative 2-norm difference %.3g, ", rel);
    } else
        printf("relative difference %.3g, ", rel);
    printf("%zu of %zu values differ bitwise\n", nd, m.nparams);
    free(a);
    free(b);
    if (tol == 0) return nd ? 1 : 0;
    return rel <= tol ? 0 : 1;
}
