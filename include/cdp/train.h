/* The trainer: one training job of cdp_run, on every rank of comm, once
 * its options are parsed and the same on every rank (cdp_run's main does
 * that).  Its phases: the model and --plan, the preparation (backend,
 * data, parameters, executor), the epochs, the results. */
#ifndef CDP_TRAIN_H
#define CDP_TRAIN_H

#include <signal.h>
#include "exec/comm.h"
#include "run/options.h"

/* Runs the job of o; collective.  stop: the stop signal caught so far (0
 * none), read at segment boundaries: every rank stops at the same one,
 * with a checkpoint when --checkpoint is given.  Returns the exit status:
 * 0 done, 1 an error (said once, by the lowest failing rank), 3 diverged,
 * 128 + the signal when stopped. */
int cdp_train(cdp_comm *comm, const cdp_options *o, const volatile sig_atomic_t *stop);

/* Collective: 1 when failed on any rank, whose message the lowest such
 * rank prints as "cdp_run: error: ..." (naming its host when the job spans
 * hosts and not every rank failed). */
int cdp_train_failed(cdp_comm *comm, int failed, const char *msg);

#endif
