/* st_compare MODEL A B TOL: compares two weight files of MODEL.
 * Prints the relative difference max|a-b|/max|b| and the number of values
 * whose bits differ; exits 1 when the files differ by more than TOL
 * (TOL = 0: they must be bitwise identical), 2 on a bad file. */
#include <stdio.h>
#include <stdlib.h>
#include "cdp/ckpt.h"
#include "cdp/model.h"
#include "cdp/reference.h"

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: st_compare MODEL A.safetensors B.safetensors TOL\n");
        return 2;
    }
    cdp_model m;
    char err[512];
    if (cdp_model_parse(argv[1], 0, &m, err, sizeof err)) {
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
    double tol = atof(argv[4]);
    printf("relative difference %.3g, %zu of %zu values differ bitwise\n", rel, nd, m.nparams);
    free(a);
    free(b);
    if (tol == 0) return nd ? 1 : 0;
    return rel <= tol ? 0 : 1;
}
