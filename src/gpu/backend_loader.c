/* --backend cuda in a build with CUDA: the CUDA backend is a module of its
 * own (libcdp_cuda.so, from the .cu files of src/gpu), loaded here when a run asks for
 * it.  Linked into libcdp, the CUDA runtime, cuBLAS and cuDNN made every
 * start of every rank map and fault in about 200 MB and take over a second
 * of CPU time, CPU runs included.
 *
 * Where the module is looked for, first found wins:
 *   $CDP_CUDA_MODULE (a path: another build's module, or one moved);
 *   beside the libcdp that runs (the build tree's .libs/), then in its cdp/
 *   subdirectory (libdir/cdp/: where `make install` puts it);
 *   the pkglibdir configured at build time (libcdp linked statically). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE   /* dladdr */
#endif
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/backend.h"

#define MODULE "libcdp_cuda.so"
#define ENTRY "cdp_cuda_module_open"

typedef const cdp_backend *(*module_open_fn)(int local_rank, char *err, size_t errlen);

/* The candidate paths, in order, into paths[] (at most 4); their count. */
static int candidates(char paths[][PATH_MAX])
{
    int n = 0;
    const char *env = getenv("CDP_CUDA_MODULE");
    if (env && *env)
        snprintf(paths[n++], PATH_MAX, "%s", env);
    Dl_info self;
    if (dladdr((void *)&cdp_backend_cuda, &self) && self.dli_fname) {
        char dir[PATH_MAX - 32];   /* room for the module's name after it */
        snprintf(dir, sizeof dir, "%s", self.dli_fname);
        char *slash = strrchr(dir, '/');
        if (slash) {
            *slash = '\0';
            snprintf(paths[n++], PATH_MAX, "%s/%s", dir, MODULE);
            snprintf(paths[n++], PATH_MAX, "%s/cdp/%s", dir, MODULE);
        }
    }
    snprintf(paths[n++], PATH_MAX, "%s/%s", CDP_PKGLIBDIR, MODULE);
    return n;
}

const cdp_backend *cdp_backend_cuda(int local_rank, char *err, size_t errlen)
{
    static module_open_fn open_module;
    if (!open_module) {
        char paths[4][PATH_MAX];
        const int n = candidates(paths);
        int tried = 0;
        for (int i = 0; i < n && !open_module; i++) {
            /* a path set by the user is tried even when it does not exist,
             * so that its error names it */
            if (access(paths[i], F_OK) != 0 && !(i == 0 && getenv("CDP_CUDA_MODULE")))
                continue;
            tried = 1;
            void *h = dlopen(paths[i], RTLD_NOW | RTLD_LOCAL);
            if (!h) {
                snprintf(err, errlen, "the CUDA backend module could not be loaded: %s", dlerror());
                return NULL;
            }
            void *sym = dlsym(h, ENTRY);
            if (!sym) {
                snprintf(err, errlen, "%s is not cdp's CUDA backend module (no %s)", paths[i], ENTRY);
                dlclose(h);
                return NULL;
            }
            memcpy(&open_module, &sym, sizeof open_module);   /* ISO C: no cast from void * */
        }
        if (!tried) {
            snprintf(err, errlen, "the CUDA backend module %s is not installed: looked beside "
                     "libcdp and in %s (set CDP_CUDA_MODULE to its path)", MODULE, CDP_PKGLIBDIR);
            return NULL;
        }
    }
    return open_module(local_rank, err, errlen);
}
