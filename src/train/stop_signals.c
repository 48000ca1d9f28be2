/* The stop signals (stop_signals.h).
 *
 * Why a thread of their own.  The JIT GEMM kernels of oneDNN 2.x (its
 * AVX2 and AVX-512 sgemm, which the Linear layers and attention products
 * call) point the stack pointer into a heap buffer while they run.  A
 * signal handler run by such a thread pushes its frame (a few KB with the
 * AVX-512 state) below that pointer, into the heap, and a later free()
 * aborts the process ("corrupted size vs. prev_size while consolidating";
 * seen in runs stopped by SIGTERM under load, and at every try when a
 * handled signal arrives a thousand times during sgemm calls).  A signal's
 * handler runs on whichever thread does not block it, so every thread
 * blocks the stop signals, from cdp_preinit on (threads inherit their
 * creator's mask: MPI's, OpenMP's and the data loaders' are created after
 * it), except one that never computes: it waits in pause() and runs the
 * handler on its own stack. */
#include "stop_signals.h"

#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include "io/safetensors.h"

static volatile sig_atomic_t got_signal;

static void stop_set(sigset_t *s)
{
    sigemptyset(s);
    sigaddset(s, SIGTERM);
    sigaddset(s, SIGINT);
}

static void on_signal(int sig)
{
    if (!got_signal) {
        got_signal = sig;
        return;
    }
    cdp_st_discard_pending();
    signal(sig, SIG_DFL);
    raise(sig);   /* this thread does not block it: the process ends here */
}

static void *signal_thread(void *arg)
{
    (void)arg;
    sigset_t s;
    stop_set(&s);
    pthread_sigmask(SIG_UNBLOCK, &s, NULL);
    for (;;)
        pause();
    return NULL;
}

static pthread_mutex_t shield_mu = PTHREAD_MUTEX_INITIALIZER;
static int shielded;

void cdp_stop_signals_shield(void)
{
    sigset_t s;
    stop_set(&s);
    pthread_mutex_lock(&shield_mu);
    if (!shielded) {
        sigset_t before;
        pthread_sigmask(SIG_BLOCK, &s, &before);
        pthread_attr_t a;
        pthread_t th;
        int ok = pthread_attr_init(&a) == 0;
        if (ok) {
            pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
            pthread_attr_setstacksize(&a, 256 * 1024);
            ok = pthread_create(&th, &a, signal_thread, NULL) == 0;
            pthread_attr_destroy(&a);
        }
        if (ok) {
            pthread_setname_np(th, "cdp-signals");
            shielded = 1;
        } else {
            /* no thread to take them: this one must, as before */
            pthread_sigmask(SIG_SETMASK, &before, NULL);
        }
    }
    pthread_mutex_unlock(&shield_mu);
    if (shielded)
        pthread_sigmask(SIG_BLOCK, &s, NULL);   /* a later caller's thread too */
}

static struct sigaction before_act[2];   /* the handlers to restore */
static sigset_t before_mask;             /* the caller's mask to restore */
static int caught;

const volatile sig_atomic_t *cdp_stop_signals_catch(void)
{
    sigset_t s;
    stop_set(&s);
    pthread_sigmask(SIG_BLOCK, NULL, &before_mask);
    cdp_stop_signals_shield();
#ifdef _OPENMP
    if (shielded) {
#pragma omp parallel
        pthread_sigmask(SIG_BLOCK, &s, NULL);
    }
#endif
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART;   /* reads and writes carry on */
    sigemptyset(&sa.sa_mask);
    got_signal = 0;
    sigaction(SIGTERM, &sa, &before_act[0]);
    sigaction(SIGINT, &sa, &before_act[1]);
    caught = 1;
    return &got_signal;
}

void cdp_stop_signals_restore(void)
{
    if (!caught)
        return;
    sigaction(SIGTERM, &before_act[0], NULL);
    sigaction(SIGINT, &before_act[1], NULL);
    pthread_sigmask(SIG_SETMASK, &before_mask, NULL);
    caught = 0;
}
