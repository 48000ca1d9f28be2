/* The serial reference of doc/reference.md section 3: one process, no schedule, no
 * MPI.  For step k, worker i runs stage l at P_l(max(k - lag(i, l), 0)); the
 * stage gradients are summed in worker order, multiplied by 1/N and applied
 * with the optimizer (SGD or AdamW).  Used by the tests and by cdp_run --verify. */
#ifndef CDP_REFERENCE_H
#define CDP_REFERENCE_H

#include <stdint.h>
#include "backend/backend.h"
#include "io/data.h"
#include "models/model.h"
#include "optim/optim.h"
#include "sched/schedule.h"

typedef struct cdp_reference_config {
    const cdp_backend *be;
    const cdp_model *model;
    int N, B;
    cdp_rule rule;
    cdp_optim optim;
    const cdp_dataset *train;
    uint64_t seed;
    int shuffle;
    int64_t steps;
} cdp_reference_config;

/* params: P(0) on entry (host), P(steps) on return.  0, or -1 with err. */
int cdp_reference_run(const cdp_reference_config *c, float *params, char *err, size_t errlen);

/* Relative difference max|a - b| / max|b| over n values (the norm-wise
 * relative error in the infinity norm), and the count of values whose bits
 * differ. */
double cdp_max_rel_diff(const float *a, const float *b, size_t n, size_t *nbitdiff);

#endif
