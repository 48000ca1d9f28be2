/* A handled signal arriving while oneDNN's JIT sgemm runs: with the
 * handler run by the computing threads, and with the discipline of cdp's
 * stop signals (src/train/stop_signals.c: blocked in every computing
 * thread, taken by a thread of their own).
 *
 *   jit_signals MODE ROUNDS    MODE: compute | thread
 *
 * Two OpenMP threads each run ROUNDS single-threaded dnnl_sgemm calls of a
 * Linear layer's shape (256 x 784 -> 128, cdp's forward block), with a
 * malloc/free between calls; SIGUSR1, sent from outside as fast as it
 * comes (jit_signals.sh), counts itself in a handler.  Prints the signals
 * handled; a corrupted heap ends the process by SIGABRT or SIGSEGV first. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>

static volatile sig_atomic_t handled;

static void on_usr1(int sig)
{
    (void)sig;
    handled++;
}

static void *taker(void *arg)
{
    sigset_t *s = arg;
    pthread_sigmask(SIG_UNBLOCK, s, NULL);
    for (;;)
        pause();
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 3 || (strcmp(argv[1], "compute") && strcmp(argv[1], "thread"))) {
        fprintf(stderr, "usage: jit_signals compute|thread ROUNDS\n");
        return 2;
    }
    const int rounds = atoi(argv[2]);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, NULL);
    static sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGUSR1);
    if (strcmp(argv[1], "thread") == 0) {
        pthread_t th;
        pthread_sigmask(SIG_BLOCK, &s, NULL);   /* inherited by the OpenMP threads */
        if (pthread_create(&th, NULL, taker, &s) != 0)
            return 2;
    }
    const int M = 256, N = 128, K = 784;
    float *W = malloc(sizeof(float) * N * K);
    for (int i = 0; i < N * K; i++)
        W[i] = (float)(i % 7) * 0.1f;
    printf("ready\n");
    fflush(stdout);
#pragma omp parallel num_threads(2)
    {
        omp_set_num_threads(1);
        float *x = malloc(sizeof(float) * M * K), *y = calloc((size_t)M * N, sizeof(float));
        for (int i = 0; i < M * K; i++)
            x[i] = (float)(i % 5) * 0.2f;
        for (int r = 0; r < rounds; r++) {
            dnnl_sgemm('N', 'T', M, N, K, 1.0f, x, K, W, K, 1.0f, y, N);
            free(malloc(1000 + (size_t)(r % 5000)));
        }
        free(x);
        free(y);
    }
    free(W);
    printf("%d signals handled\n", (int)handled);
    return 0;
}
