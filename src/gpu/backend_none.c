/* Built when configure found no CUDA: --backend cuda must say so clearly. */
#include <stdio.h>
#include "backend/backend.h"

const cdp_backend *cdp_backend_cuda(int local_rank, char *err, size_t errlen)
{
    (void)local_rank;
    snprintf(err, errlen, "this build of cdp has no CUDA backend "
             "(reconfigure with --enable-cuda on a machine with the CUDA Toolkit)");
    return NULL;
}
