/* SIGTERM and SIGINT, the stop signals of a training job (cdp/train.h):
 * caught by a thread of their own, never by a thread that computes. */
#ifndef CDP_TRAIN_STOP_SIGNALS_H
#define CDP_TRAIN_STOP_SIGNALS_H

#include <signal.h>

/* Blocks the stop signals in the calling thread (and so in every thread it
 * creates from now on: MPI's, OpenMP's, the data loaders') and starts the
 * thread that takes them, "cdp-signals".  Idempotent.  Until
 * cdp_stop_signals_catch, a stop signal has its default action (the
 * process ends), as it would without cdp. */
void cdp_stop_signals_shield(void);

/* From now on the first stop signal sets the flag returned (to the
 * signal's number) and a second one ends the process by the signal, after
 * removing the temporary file of an output being written.  Also blocks the
 * signals in the OpenMP threads that exist already (a program that did not
 * call cdp_preinit first thing). */
const volatile sig_atomic_t *cdp_stop_signals_catch(void);

/* The handlers and the calling thread's signal mask as they were before
 * cdp_stop_signals_catch; nothing when it was not called. */
void cdp_stop_signals_restore(void);

#endif
