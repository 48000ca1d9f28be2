/* The optimizer and schedule of cdp on a vector, for tests/torch/torch_optim.py:
 *   optim_probe KIND SCHEDULE LR MOMENTUM WD BETA1 BETA2 EPS DECAY_EPOCHS GAMMA
 *               STEPS_PER_EPOCH WARMUP TOTAL GSCALE N STEPS
 * reads N initial parameters, then STEPS gradients of N floats (text), and
 * prints for each update c = 0 .. STEPS-1 the lr of update c and the N
 * parameters after it (%.9g: every float exactly).  KIND: sgd | adamw;
 * SCHEDULE: step | cosine.  The update is cdp_optim_step_at and the CPU
 * backend's sgd/adamw, as cdp_stage_update applies them.  Exit status 1
 * when its own checks fail (the lr of cdp_optim_step_at against
 * cdp_optim_lr; the update out of place against in place, bit for bit),
 * 2 on bad input. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "backend/backend.h"
#include "optim/optim.h"

int main(int argc, char **argv)
{
    if (argc != 17) {
        fprintf(stderr, "usage: optim_probe KIND SCHEDULE LR MOMENTUM WD BETA1 BETA2 EPS "
                "DECAY_EPOCHS GAMMA STEPS_PER_EPOCH WARMUP TOTAL GSCALE N STEPS\n");
        return 2;
    }
    cdp_optim o = cdp_optim_sgd(atof(argv[3]), atof(argv[4]), atof(argv[5]), atoi(argv[9]),
                                atof(argv[10]), atoll(argv[11]));
    o.kind = strcmp(argv[1], "adamw") ? CDP_OPTIM_SGD : CDP_OPTIM_ADAMW;
    o.schedule = strcmp(argv[2], "cosine") ? CDP_LR_STEP : CDP_LR_COSINE;
    o.beta1 = atof(argv[6]);
    o.beta2 = atof(argv[7]);
    o.eps = atof(argv[8]);
    o.warmup_steps = atoll(argv[12]);
    o.total_steps = atoll(argv[13]);
    const float gscale = (float)atof(argv[14]);
    const size_t n = (size_t)atol(argv[15]);
    const long steps = atol(argv[16]);
    const cdp_backend *be = cdp_backend_cpu(1);
    float *th = malloc(n * sizeof *th), *g = malloc(n * sizeof *g);
    float *state = calloc(cdp_optim_state_floats(&o, n), sizeof *state);
    if (!th || !g || !state)
        return 2;
    for (size_t i = 0; i < n; i++)
        if (scanf("%f", &th[i]) != 1)
            return 2;
    const size_t ns = cdp_optim_state_floats(&o, n);
    float *out = malloc(n * sizeof *out), *state2 = malloc(ns * sizeof *state2);
    if (!out || !state2)
        return 2;
    for (long c = 0; c < steps; c++) {
        for (size_t i = 0; i < n; i++)
            if (scanf("%f", &g[i]) != 1)
                return 2;
        const cdp_optim_step st = cdp_optim_step_at(&o, c);
        /* the probe's own checks (exit 1): the step's lr is the schedule's,
         * and the update written out of place (theta_out != theta_in, the
         * executor's other path) has the bits of the one made in place */
        if (st.lr != cdp_optim_lr(&o, c)) {
            fprintf(stderr, "optim_probe: update %ld: step lr %.9g, schedule lr %.9g\n", c,
                    (double)st.lr, (double)cdp_optim_lr(&o, c));
            return 1;
        }
        memcpy(state2, state, ns * sizeof *state2);
        if (st.kind == CDP_OPTIM_ADAMW) {
            be->adamw(n, th, out, g, gscale, state2, state2 + n, &st.adamw, st.first, 0);
            be->adamw(n, th, th, g, gscale, state, state + n, &st.adamw, st.first, 0);
        } else {
            be->sgd(n, th, out, g, gscale, state2, st.lr, st.momentum, st.weight_decay, st.first, 0);
            be->sgd(n, th, th, g, gscale, state, st.lr, st.momentum, st.weight_decay, st.first, 0);
        }
        if (memcmp(out, th, n * sizeof *th) || memcmp(state2, state, ns * sizeof *state)) {
            fprintf(stderr, "optim_probe: update %ld: the out-of-place update differs from the "
                    "in-place one\n", c);
            return 1;
        }
        printf("%.9g", (double)st.lr);
        for (size_t i = 0; i < n; i++)
            printf(" %.9g", (double)th[i]);
        printf("\n");
    }
    free(th); free(g); free(state); free(out); free(state2);
    return 0;
}
