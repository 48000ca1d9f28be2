/* Every kernel, copy and memset a process runs on the GPU, with its start
 * and end on the GPU's clock: a CUPTI activity trace loaded into any CUDA
 * program with LD_PRELOAD (cdp_run, or python3 running PyTorch), for
 * bench/gpu/profile.sh.  Unlike ncu it does not serialise or replay
 * kernels: the program runs at about its own speed, so the gaps between
 * kernels (launch and host overhead) are measured too.
 *
 *   gcc -O2 -shared -fPIC -o kernel_trace.so bench/gpu/kernel_trace.c \
 *       -I$CUDA_HOME/include -L$DIR_OF_LIBCUPTI -lcupti
 *   CDP_KTRACE_OUT=trace.tsv LD_PRELOAD=./kernel_trace.so PROGRAM ...
 *
 * Writes one line per activity: KIND \t START_NS \t END_NS \t NAME (kind
 * K kernel, C copy, M memset; kernel names as compiled, mangled: c++filt
 * reads them).  Records reach the file as CUPTI hands its buffers back:
 * when a buffer fills, every 100 ms (cuptiActivityFlushPeriod) and at exit;
 * activities of the last 100 ms before exit can be missing (or all of a
 * program killed at a time limit after), which is why
 * bench/gpu/profile_trace.py measures steps in the middle of a run. */
#define _GNU_SOURCE
#include <cupti.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BUF_BYTES (8u << 20)

static FILE *trace_out;
static pthread_mutex_t trace_lock = PTHREAD_MUTEX_INITIALIZER;

static void trace_flush_at_exit(void)
{
    cuptiActivityFlushAll(1);
}

static void register_flush(void)
{
    /* opened here, in the process that runs CUDA: a libtool wrapper or a
     * launcher before it has the same LD_PRELOAD and never gets here */
    const char *path = getenv("CDP_KTRACE_OUT");
    pthread_mutex_lock(&trace_lock);
    trace_out = fopen(path, "a");
    pthread_mutex_unlock(&trace_lock);
    if (!trace_out)
        fprintf(stderr, "kernel_trace: cannot write %s\n", path);
    atexit(trace_flush_at_exit);
}

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
    /* registered here, once CUDA has started (CUPTI asks for its first
     * buffer then), so that it runs before the CUDA runtime's own exit
     * handlers: a preloaded library's destructor runs after every other
     * library's, CUPTI's and the driver's teardown included, too late to
     * flush */
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, register_flush);
    *buffer = aligned_alloc(8, BUF_BYTES);
    *size = *buffer ? BUF_BYTES : 0;
    *max_records = 0;
}

static void write_record(const CUpti_Activity *r)
{
    switch (r->kind) {
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
    case CUPTI_ACTIVITY_KIND_KERNEL: {
        const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)r;
        fprintf(trace_out, "K\t%llu\t%llu\t%s\n", (unsigned long long)k->start,
                (unsigned long long)k->end, k->name ? k->name : "?");
        break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const CUpti_ActivityMemcpy6 *m = (const CUpti_ActivityMemcpy6 *)r;
        fprintf(trace_out, "C\t%llu\t%llu\tcopy kind %u, %llu bytes\n", (unsigned long long)m->start,
                (unsigned long long)m->end, (unsigned)m->copyKind, (unsigned long long)m->bytes);
        break;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
        const CUpti_ActivityMemset4 *m = (const CUpti_ActivityMemset4 *)r;
        fprintf(trace_out, "M\t%llu\t%llu\tmemset %llu bytes\n", (unsigned long long)m->start,
                (unsigned long long)m->end, (unsigned long long)m->bytes);
        break;
    }
    default:
        break;
    }
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size,
                                      size_t valid)
{
    (void)ctx;
    (void)stream;
    (void)size;
    CUpti_Activity *r = NULL;
    pthread_mutex_lock(&trace_lock);
    if (trace_out) {
        while (cuptiActivityGetNextRecord(buffer, valid, &r) == CUPTI_SUCCESS)
            write_record(r);
        fflush(trace_out);
    }
    pthread_mutex_unlock(&trace_lock);
    free(buffer);
}

__attribute__((constructor)) static void trace_start(void)
{
    const char *path = getenv("CDP_KTRACE_OUT");
    if (!path || !*path)
        return;
    CUptiResult e = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
    if (e == CUPTI_SUCCESS)
        e = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    if (e == CUPTI_SUCCESS)
        e = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY);
    if (e == CUPTI_SUCCESS)
        e = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET);
    if (e != CUPTI_SUCCESS) {
        const char *msg = "?";
        cuptiGetResultString(e, &msg);
        fprintf(stderr, "kernel_trace: CUPTI: %s\n", msg);
        return;
    }
    cuptiActivityFlushPeriod(100);
}

__attribute__((destructor)) static void trace_stop(void)
{
    if (!trace_out)
        return;
    pthread_mutex_lock(&trace_lock);
    fclose(trace_out);
    trace_out = NULL;
    pthread_mutex_unlock(&trace_lock);
}
