/* cdp_run --plan: the timeline as a text picture (ticks across, stages down,
 * workers as letters: upper case forward, lower case backward) and the
 * per-tick activation and traffic figures computed from the schedule. */
#ifndef CDP_PLAN_H
#define CDP_PLAN_H

#include <stdio.h>
#include "models/model.h"
#include "sched/schedule.h"

/* m may be NULL (figures then in stage-activation units only).  Returns 0,
 * or -1 with err. */
int cdp_plan_print(FILE *f, const cdp_sched_config *c, const cdp_model *m, int B,
                   char *err, size_t errlen);

#endif
