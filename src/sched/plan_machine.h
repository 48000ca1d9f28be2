/* cdp_run --plan --machine FILE: the stage costs of a model on a described
 * machine (sched/predict.h simulates the schedule with them), and the
 * prediction's lines (doc/reference.md section 2.7). */
#ifndef CDP_PLAN_MACHINE_H
#define CDP_PLAN_MACHINE_H

#include <stdio.h>
#include "io/machine_file.h"
#include "models/model.h"
#include "sched/predict.h"

/* The costs of the L stages of m at micro-batch B on mach.  m has L stages,
 * or (uniform) it is the whole model, spread evenly over L stages, for a
 * plan with more stages than the model has blocks.  *how: what the times
 * come from.  0, or -1 with one line in err (the file's layer times are
 * for another model or batch and it gives no flops_per_s). */
int cdp_plan_stage_costs(const cdp_model *m, int L, int uniform, int B, const cdp_machine *mach,
                         const char *path, cdp_stage_cost *st, const char **how,
                         char *err, size_t errlen);

/* Prints the prediction for c's rule and for dp, under c's framework.
 * opt_buffers: optimizer state floats per parameter; device_bytes: 0 or the
 * memory a rank has.  0, or -1 with err. */
int cdp_plan_predict_print(FILE *out, const cdp_sched_config *c, const cdp_model *m, int uniform,
                           int B, const cdp_machine *mach, const char *path, int opt_buffers,
                           double device_bytes, char *err, size_t errlen);

#endif
