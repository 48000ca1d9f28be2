/* LD_PRELOAD=ftz_preload.so: turns the SSE flush-to-zero and
 * denormals-are-zero modes on before main, for bench/denormal.sh.  Threads
 * created later (OpenMP's pool) inherit the mode from the thread that
 * creates them, and cdp_run's start-up re-exec loads this library again. */
#include <pmmintrin.h>
#include <xmmintrin.h>

__attribute__((constructor)) static void ftz_on(void)
{
    _MM_SET_FLUSH_ZERO_MODE(_MM_FLUSH_ZERO_ON);
    _MM_SET_DENORMALS_ZERO_MODE(_MM_DENORMALS_ZERO_ON);
}
