/* Page-locked host buffers for staging MPI traffic of the CUDA backend when
 * the MPI library is not CUDA-aware (cdp_backend_mpi_device_ok() == 0).
 *
 * Only built with --enable-cuda (HAVE_CUDA in config.h); guard calls with
 * #ifdef HAVE_CUDA.  Call after cdp_backend_cuda() so that the memory is
 * registered with this rank's device context.
 *
 * The staging pattern with the backend interface:
 *   send: be->to_host(pinned, dev, n);   MPI_Isend(pinned, ...)
 *         (to_host waits for the copy, so the buffer is ready on return)
 *   recv: MPI_Recv/Wait(pinned, ...);    be->to_device(dev, pinned, n)
 *         (the CUDA backend's to_device waits when the source is page-locked,
 *          so the pinned buffer may be reused as soon as it returns) */
#ifndef CDP_CUDA_STAGING_H
#define CDP_CUDA_STAGING_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* cudaMallocHost; NULL on failure (or bytes == 0 gives a 1-byte buffer). */
void *cdp_cuda_alloc_pinned(size_t bytes);
/* cudaFreeHost; NULL is ignored. */
void cdp_cuda_free_pinned(void *p);

#ifdef __cplusplus
}
#endif

#endif
