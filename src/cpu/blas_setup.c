/* Process set-up for the CPU backend, before MPI_Init (doc/reference.md
 * section 9: the BLAS kernel and the two thread pools), and the
 * identification of the BLAS library for the banner.
 *
 * Trap 1: OpenBLAS (DYNAMIC_ARCH build) picks its kernels when the library is
 * loaded.  On some CPUs it does not recognise the model and falls back to a
 * generic kernel ("Prescott": SSE3, ~32 GFLOP/s per thread where the AVX-512
 * "SkylakeX" kernel gives ~130-160).  The only cure is OPENBLAS_CORETYPE in
 * the environment *before* the library loads, hence a re-exec of the program.
 *
 * Trap 2: OpenBLAS (pthread build) and libgomp each keep a thread pool whose
 * idle threads spin, and the two fight for the cores (measured on 2 cores:
 * sgemm + OpenMP bias/ReLU loop 4,336 us with OpenMP 2 + OpenBLAS 2 threads,
 * 1,186 us with one OpenMP thread).  cdp avoids the fight at the root: OpenBLAS runs single-threaded (kernels_cpu.c
 * parallelises each GEMM itself over OpenMP), so libgomp's is the only pool.
 * What remains is how long libgomp's idle threads spin before they sleep:
 * its default (~300,000 iterations, ~7 ms here) burns a core long after the
 * work is done, and OMP_WAIT_POLICY=PASSIVE (no spin) makes every one of a
 * step's ~20 parallel regions pay a futex wake-up.  We set GOMP_SPINCOUNT to
 * CDP_SPINCOUNT: about 1.4 ms of spinning here (measured ~28 ns per
 * iteration), longer than the gaps between the regions of a step, short
 * enough that an idle rank gives its core back.  bench/kernels/cdp_knobs.sh
 * compares the policies (PASSIVE was ~10% slower per step on
 * mlp:784-1024-1024-10, B=128, 2 threads).  libgomp reads the variable in
 * its load-time constructor, so setting it requires the re-exec; both
 * settings are made in a single re-exec, and only when one is missing.  A
 * value the user set (OPENBLAS_CORETYPE, OMP_WAIT_POLICY, GOMP_SPINCOUNT)
 * is always respected. */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <cblas.h>
#include <omp.h>

#include "backend/backend.h"
#include "cpu_internal.h"

#define GUARD "CDP_REEXEC"
/* the re-executed program's note of an OMP_NUM_THREADS that libgomp rejects
 * (taken out of its environment) */
#define REJECTED_OMP "CDP_REEXEC_OMP_NUM_THREADS"
#define CDP_SPINCOUNT "50000"

int cdp_cpu_affinity_count(void)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        int n = CPU_COUNT(&set);
        if (n > 0)
            return n;
    }
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

void cdp_cpu_set_threads(int threads)
{
    if (threads < 1)
        threads = 1;
    /* sgemm is parallelised by kernels_cpu.c, over OpenMP, in blocks that
     * do not depend on the thread count: OpenBLAS itself runs serially */
    openblas_set_num_threads(1);
    omp_set_num_threads(threads);
    cdp_cpu_omp_threads = threads;
}

const char *cdp_cpu_blas_kernel(void)
{
    const char *c = openblas_get_corename();
    return c ? c : "unknown";
}

const char *cdp_cpu_blas_version(void)
{
    /* openblas_get_config(): "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH ..." */
    static char v[64];
    if (!v[0]) {
        const char *cfg = openblas_get_config();
        if (!cfg)
            cfg = "OpenBLAS";
        int words = 0;
        size_t k = 0;
        for (; k < sizeof v - 1 && cfg[k]; k++) {
            if (cfg[k] == ' ' && ++words == 2)
                break;
            v[k] = cfg[k];
        }
        v[k] = '\0';
    }
    return v;
}

/* What libgomp accepts as OMP_NUM_THREADS: positive integers separated by
 * commas, blanks around each */
static int omp_threads_valid(const char *v)
{
    for (;;) {
        while (*v == ' ' || *v == '\t')
            v++;
        if (*v < '0' || *v > '9')
            return 0;
        char *end;
        errno = 0;
        const unsigned long n = strtoul(v, &end, 10);
        if (errno || n == 0)
            return 0;
        for (v = end; *v == ' ' || *v == '\t'; v++) {}
        if (*v == '\0')
            return 1;
        if (*v++ != ',')
            return 0;
    }
}

const char *cdp_cpu_rejected_omp_threads(void)
{
    const char *v = getenv("OMP_NUM_THREADS");
    if (v && !omp_threads_valid(v))
        return v;
    return getenv(GUARD) ? getenv(REJECTED_OMP) : NULL;
}

const char *cdp_cpu_preinit_note(void)
{
    const char *g = getenv(GUARD);
    return g && strcmp(g, "1") != 0 ? g : "";
}

/* Kernel classes: 3 AVX-512, 2 AVX2/FMA, 1 AVX, 0 older or generic. */
static int core_rank(const char *core)
{
    static const char *const r3[] = {"SkylakeX", "Cooperlake", "SapphireRapids"};
    static const char *const r2[] = {"Haswell", "Zen", "Excavator", "Steamroller"};
    static const char *const r1[] = {"Sandybridge", "Bulldozer", "Piledriver"};
    for (size_t k = 0; k < sizeof r3 / sizeof *r3; k++)
        if (!strcasecmp(core, r3[k]))
            return 3;
    for (size_t k = 0; k < sizeof r2 / sizeof *r2; k++)
        if (!strcasecmp(core, r2[k]))
            return 2;
    for (size_t k = 0; k < sizeof r1 / sizeof *r1; k++)
        if (!strcasecmp(core, r1[k]))
            return 1;
    return 0;
}

/* What OpenBLAS's SkylakeX kernel needs */
static int cpu_has_avx512(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
}

/* The kernel this CPU supports, when the library runs a generic or pre-AVX2
 * one; NULL when the library's choice is fine. */
static const char *better_core(const char *core)
{
    __builtin_cpu_init();
    int rank = core_rank(core);
    if (rank >= 2)
        return NULL;
    if (cpu_has_avx512())
        return "SkylakeX";
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return "Haswell";
    return NULL;
}

/* The banner's word on a kernel slower than the CPU allows, which cdp does
 * not change by itself: an AVX2 kernel on an AVX-512 CPU, chosen by the
 * user's OPENBLAS_CORETYPE (respected, but not silently: on an AMD EPYC
 * whose environment set OPENBLAS_CORETYPE=Haswell, vit-tiny ran 220
 * samples/s against 355 with the SkylakeX kernel, 2 ranks x 1 thread).
 * "" when the kernel is the best class the CPU supports. */
const char *cdp_cpu_blas_hint(void)
{
    static char hint[128];
    if (!cpu_has_avx512() || core_rank(cdp_cpu_blas_kernel()) >= 3)
        return "";
    const char *user = getenv("OPENBLAS_CORETYPE");
    snprintf(hint, sizeof hint, " (%s; SkylakeX is faster here)",
             user ? "OPENBLAS_CORETYPE" : "OpenBLAS's choice");
    return hint;
}

void cdp_backend_cpu_preinit(int argc, char **argv)
{
    const char *core = cdp_cpu_blas_kernel();
    const char *want = better_core(core);
    const char *cfg = openblas_get_config();
    int dynamic = cfg && strstr(cfg, "DYNAMIC_ARCH") != NULL;

    const char *user_core = getenv("OPENBLAS_CORETYPE");
    if (getenv(GUARD)) {
        /* second run: whatever could be done has been done */
        if (want && strstr(cdp_cpu_preinit_note(), "OPENBLAS_CORETYPE="))
            fprintf(stderr, "cdp: warning: OpenBLAS still runs the generic '%s' kernel on a "
                    "CPU that supports '%s' (OPENBLAS_CORETYPE=%s had no effect); sgemm will "
                    "be several times slower\n", core, want, user_core ? user_core : "?");
        return;
    }

    int set_core = want && dynamic && !user_core;
    int set_wait = !getenv("OMP_WAIT_POLICY") && !getenv("GOMP_SPINCOUNT");
    if (want && !set_core) {
        char why[96];
        if (user_core)
            snprintf(why, sizeof why, "OPENBLAS_CORETYPE=%.40s is set", user_core);
        else
            snprintf(why, sizeof why, "this OpenBLAS has no DYNAMIC_ARCH");
        fprintf(stderr, "cdp: warning: OpenBLAS runs the generic '%s' kernel on a CPU that "
                "supports '%s' (%s); sgemm will be several times slower\n", core, want, why);
    }
    if (!set_core && !set_wait)
        return;
    if (argc < 1 || !argv || !argv[0]) {
        fprintf(stderr, "cdp: warning: cannot re-execute without argv; "
                "OPENBLAS_CORETYPE / GOMP_SPINCOUNT left as they are\n");
        return;
    }

    char note[128];
    snprintf(note, sizeof note, "%s%s%s%s", set_core ? "OPENBLAS_CORETYPE=" : "",
             set_core ? want : "", set_core && set_wait ? " " : "",
             set_wait ? "GOMP_SPINCOUNT=" CDP_SPINCOUNT : "");
    if (set_core)
        setenv("OPENBLAS_CORETYPE", want, 1);
    if (set_wait)
        setenv("GOMP_SPINCOUNT", CDP_SPINCOUNT, 1);
    /* OpenBLAS runs single-threaded under cdp (kernels_cpu.c): spare the
     * process its thread pool */
    int set_nthr = !getenv("OPENBLAS_NUM_THREADS");
    if (set_nthr)
        setenv("OPENBLAS_NUM_THREADS", "1", 1);
    setenv(GUARD, note, 1);
    /* libgomp warned of a value it rejects when this process loaded; the
     * program re-executed without it warns no second time */
    const char *omp = getenv("OMP_NUM_THREADS");
    char omp_copy[256] = "";
    if (omp && !omp_threads_valid(omp)) {
        snprintf(omp_copy, sizeof omp_copy, "%s", omp);
        setenv(REJECTED_OMP, omp_copy, 1);
        unsetenv("OMP_NUM_THREADS");
    }
    fflush(stdout);
    fflush(stderr);
    execv("/proc/self/exe", argv);

    int e = errno;
    unsetenv(GUARD);
    if (omp_copy[0]) {
        setenv("OMP_NUM_THREADS", omp_copy, 1);
        unsetenv(REJECTED_OMP);
    }
    if (set_core)
        unsetenv("OPENBLAS_CORETYPE");
    if (set_wait)
        unsetenv("GOMP_SPINCOUNT");
    if (set_nthr)
        unsetenv("OPENBLAS_NUM_THREADS");
    fprintf(stderr, "cdp: warning: could not re-execute the program to set %s (%s); "
            "continuing without\n", note, strerror(e));
}
