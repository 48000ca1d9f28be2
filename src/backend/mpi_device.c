/* Whether MPI may be handed device pointers of a backend directly.
 *
 * Host-memory backends: always.  The CUDA backend: only when the MPI library
 * says, at run time, that it is CUDA-aware (Open MPI's
 * MPIX_Query_cuda_support() from <mpi-ext.h>); otherwise the executor stages
 * through page-locked host buffers (src/gpu/cuda_staging.h).
 *
 * The environment variable CDP_CUDA_AWARE_MPI overrides the detection:
 * 0 or no forces staging (useful to compare, or with a library that claims
 * support it does not have), 1 or yes forces device pointers (an MPI library
 * that is CUDA-aware without saying so, e.g. MPICH built with CUDA); any
 * other value leaves it to the detection, so that a typo never hands device
 * pointers to an MPI that cannot read them. */
#include <stdlib.h>
#include <string.h>

#include <mpi.h>
#if defined(__has_include)
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>
#endif
#endif

#include "backend/backend.h"

int cdp_backend_mpi_device_ok(const cdp_backend *be)
{
    if (!be)
        return 0;
    if (be->host_memory)
        return 1;
    const char *force = getenv("CDP_CUDA_AWARE_MPI");
    if (force && (!strcmp(force, "1") || !strcmp(force, "yes")))
        return 1;
    if (force && (!strcmp(force, "0") || !strcmp(force, "no")))
        return 0;   /* anything else: detect */
#if defined(MPIX_CUDA_AWARE_SUPPORT)
    /* MPIX_CUDA_AWARE_SUPPORT is the compile-time answer (0 for Debian's
     * Open MPI); ask the library loaded at run time, which may differ. */
    return MPIX_Query_cuda_support() ? 1 : 0;
#else
    return 0;
#endif
}
