/* What the C benches that time a cdp model's shapes share
 * (kernels/conv_gemm_bound.c, kernels/linear_bound.c): the command line
 * MODEL CxHxW BATCH [THREADS] [--rounds R] [--min-ms MS] [--classes C],
 * and the model built by libcdp itself, so that the shapes are those
 * cdp_run trains.  Needs models/model.h (clib benches). */
#ifndef CDP_BENCH_MODEL_H
#define CDP_BENCH_MODEL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/model.h"

typedef struct bench_model_args {
    const char *spec, *shape;
    int B, threads, rounds, classes;
    double min_ms;
    int pos;   /* positional arguments seen */
} bench_model_args;

static inline bench_model_args bench_model_defaults(void)
{
    bench_model_args m = {NULL, NULL, 0, 1, 5, 10, 20.0, 0};
    return m;
}

/* argv[*a] (and its value): 1 if it is one of the shared arguments (then
 * *a points at its last word), 0 if not, -1 for an unknown option or a
 * fifth positional argument */
static inline int bench_model_arg(bench_model_args *m, int argc, char **argv, int *a)
{
    const char *s = argv[*a];
    int more = *a + 1 < argc;
    if (!strcmp(s, "--rounds") && more)
        m->rounds = atoi(argv[++*a]);
    else if (!strcmp(s, "--min-ms") && more)
        m->min_ms = atof(argv[++*a]);
    else if (!strcmp(s, "--classes") && more)
        m->classes = atoi(argv[++*a]);
    else if (s[0] == '-')
        return 0;
    else if (m->pos == 0)
        m->spec = s, m->pos++;
    else if (m->pos == 1)
        m->shape = s, m->pos++;
    else if (m->pos == 2)
        m->B = atoi(s), m->pos++;
    else if (m->pos == 3)
        m->threads = atoi(s), m->pos++;
    else
        return -1;
    return 1;
}

/* the model of the arguments, on one stage; 0, or 2 with a message
 * (prog: the bench's name) */
static inline int bench_model_build(const bench_model_args *m, cdp_model *model, const char *prog)
{
    cdp_model_config c = {0};
    if (!m->spec || !m->shape || m->B < 1 || m->threads < 1 || m->rounds < 1 ||
        sscanf(m->shape, "%dx%dx%d", &c.input.c, &c.input.h, &c.input.w) != 3) {
        fprintf(stderr, "%s: needs MODEL CxHxW BATCH [THREADS], a batch, threads and rounds "
                "of at least 1\n", prog);
        return 2;
    }
    c.spec = m->spec;
    c.stages = 1;
    c.classes = m->classes;
    c.workers = 1;
    c.balance = CDP_BALANCE_FLOPS;
    char err[256];
    if (cdp_model_build(&c, model, err, sizeof err)) {
        fprintf(stderr, "%s: %s\n", prog, err);
        return 2;
    }
    return 0;
}

#endif
