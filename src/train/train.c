/* The trainer: a cdp_run job once its options are parsed and agreed on by
 * every rank.  Its phases run in order: the model and --plan, preparation
 * (backend, data, parameters, executor; setup.c), the epochs (loop.c), the
 * results (results.c).  Any failure is agreed on by all ranks, reported
 * once (by the lowest failing rank) and ends every rank with status 1 (3
 * when the run diverged). */
#include <errno.h>
#include <math.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <mpi.h>
#include "config.h"
#include "backend/backend.h"
#include "io/checkpoint.h"
#include "util/clock.h"
#include "io/safetensors.h"
#include "exec/comm.h"
#include "io/data.h"
#include "run/diverge_hint.h"
#include "exec/exec.h"
#include "models/model.h"
#include "run/options.h"
#include "io/output.h"
#include "sched/plan.h"
#include "run/preflight.h"
#include "exec/reference.h"
#include "models/layer_times.h"
#include "run/report.h"
#include "sched/schedule.h"
#include "exec/trace.h"
#include "trainer.h"

static void release(trainer *r)
{
    if (r->metrics) fclose(r->metrics);
    if (r->sched_K) cdp_schedule_free(&r->sched);
    if (r->have_roles) cdp_schedule_free(&r->roles);
    if (r->x) cdp_exec_destroy(r->x);
    cdp_data_free(&r->data);
    cdp_preflight_free(&r->pf);
    free(r->params); free(r->final_params); free(r->init_params);
    free(r->prev_params); free(r->optim_state);
    free(r->good[0]); free(r->good[1]); free(r->good[2]);
    if (r->have_model) cdp_model_free(&r->model);
    cdp_layer_times_free(&r->lt);
    cdp_layer_times_free(&r->lt_first);
}


int cdp_train(cdp_comm *comm, const cdp_options *o, const volatile sig_atomic_t *stop)
{
    static trainer r;   /* static: large; zeroed for each job */
    memset(&r, 0, sizeof r);
    r.comm = comm;
    r.stop = stop;
    r.o = *o;
    r.root = comm->rank == 0;
    r.test_loss = r.test_acc = -1;
    r.P = o->plan && o->plan_ranks ? o->plan_ranks : comm->size;   /* --plan-ranks: a plan only */
    r.N = o->workers ? o->workers : (r.P > 4 ? r.P : 4);
    int rc = train_model_and_plan(&r);
    if (!rc) rc = train_prepare(&r);
    if (!rc) rc = train_epochs(&r);
    if (!rc) rc = train_results(&r);
    release(&r);
    return rc == RUN_DONE ? 0 : rc;
}
