/* The CPU backend: host memory (64-byte aligned) and the kernels of
 * kernels_cpu.c, kernels_conv.c, kernels_norm.c, kernels_pool.c, kernels_tokens.c
 * and kernels_gelu.c behind the cdp_backend interface, one cdp_cpu_NAME for
 * every kernel of backend/backend_kernels.def. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/backend.h"
#include "cpu_internal.h"

static void *cpu_alloc(size_t bytes)
{
    /* aligned_alloc wants a multiple of the alignment */
    size_t n = (bytes + 63) / 64 * 64;
    if (n < bytes)
        return NULL;
    return aligned_alloc(64, n ? n : 64);
}

static void cpu_free(void *p)
{
    free(p);
}

static void cpu_copy(void *dst, const void *src, size_t bytes)
{
    if (bytes && dst != src)
        memcpy(dst, src, bytes);
}

static void cpu_sync(void)
{
}

static char cpu_desc[512];

static const char *cpu_describe(void)
{
    return cpu_desc;
}

static char cpu_numerics_text[512];

static const char *cpu_numerics(void)
{
    return cpu_numerics_text;
}

#ifdef HAVE_DNNL
/* --precision bf16's products on bfloat16 storage (oneDNN's bf16 matmul);
 * the backend offers them unless CDP_GEMM_DNNL=0 */
static const cdp_bf16_kernels cpu_bf16 = {
    .linear_fwd = cdp_cpu_bf16_linear_fwd,
    .linear_bwd = cdp_cpu_bf16_linear_bwd,
    .gemm_batched = cdp_cpu_bf16_gemm_batched,
    .add3 = cdp_cpu_bf16_add3,
    .gelu_fwd = cdp_cpu_bf16_gelu_fwd,
    .gelu_bwd = cdp_cpu_bf16_gelu_bwd,
    .ln_fwd = cdp_cpu_bf16_ln_fwd,
    .ln_bwd = cdp_cpu_bf16_ln_bwd,
    .relu_fwd = cdp_cpu_bf16_relu_fwd,
    .relu_bwd = cdp_cpu_bf16_relu_bwd,
    .bn_fwd_train = cdp_cpu_bf16_bn_fwd_train,
    .bn_fwd_eval = cdp_cpu_bf16_bn_fwd_eval,
};
#endif

static cdp_backend cpu_backend = {
    .name = "cpu",
    .host_memory = 1,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .to_device = cpu_copy,
    .to_host = cpu_copy,
    .copy = cpu_copy,
    .zero = cdp_cpu_zero,
    .sync = cpu_sync,
#define CDP_KERNEL(ret, name, params) .name = cdp_cpu_##name,
#include "backend/backend_kernels.def"
#undef CDP_KERNEL
    .describe = cpu_describe,
    .numerics = cpu_numerics,
};

/* Most column blocks per GEMM (kernels_cpu.c).  The bits of a GEMM depend on
 * its decomposition, so this must be the same for every rank and every
 * thread count that are to agree bit for bit: CDP_GEMM_SPLIT from the
 * environment (mpirun passes it to all ranks), else the number of CPUs
 * online on this machine (not the affinity mask, which mpirun's binding
 * changes per rank), rounded down to a power of two, at most 8.  More blocks
 * than threads cost a little (each block packs its own copy of the shared
 * operand: ~2-5% for 2 blocks on one thread, ~10% for 4 at 1024 columns). */
int cdp_cpu_gemm_split_default(void)
{
    const char *e = getenv("CDP_GEMM_SPLIT");
    if (e && *e) {
        char *end;
        long v = strtol(e, &end, 10);
        if (*end == '\0' && v >= 1 && v <= 256)
            return (int)v;
        fprintf(stderr, "cdp: warning: ignoring CDP_GEMM_SPLIT='%s' (expected 1..256)\n", e);
    }
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    int s = 1;
    while (s * 2 <= n && s * 2 <= 8)
        s *= 2;
    return s;
}

static int gemm_split_used;

void cdp_cpu_use_gemm_split(int split)
{
    gemm_split_used = split;
}

/* A oneDNN switch NAME=0..max from the environment into *level: a value
 * out of range is ignored with a warning; in a build without oneDNN any
 * value but 0 warns and *level stays 0. */
static void dnnl_level_from_env(const char *name, int max, int *level)
{
    const char *e = getenv(name);
    if (!e || !*e)
        return;
    if (e[0] < '0' || e[0] > '0' + max || e[1]) {
        fprintf(stderr, "cdp: warning: ignoring %s='%s' (expected 0 to %d)\n", name, e, max);
        return;
    }
#ifdef HAVE_DNNL
    *level = e[0] - '0';
#else
    (void)level;
    if (e[0] != '0')
        fprintf(stderr, "cdp: warning: %s=%s: this build has no oneDNN "
                        "(configure --with-dnnl)\n", name, e);
#endif
}

/* the convolution paths in use, for the banner; then those of
 * --precision bf16 (conv_bf16.c) */
static const char *conv_paths(void)
{
    static char s[160];
    const char *dnnl = cdp_cpu_conv_dnnl > 0 ? cdp_cpu_dnnl_version() : NULL;
    const char *direct = cdp_cpu_conv_direct > 0 ? "direct 3x3, " : "";
    if (dnnl)
        snprintf(s, sizeof s, "%s (%s), %sim2col (bf16: %s)", dnnl,
                 cdp_cpu_conv_dnnl >= 2 ? "every shape" : "3x3, >=16 ch", direct,
                 cdp_cpu_conv_bf16_library());
    else
        snprintf(s, sizeof s, "%sim2col (bf16: %s)", direct, cdp_cpu_conv_bf16_library());
    return s;
}

/* threads <= 0: one thread per CPU of this process's affinity mask. */
const cdp_backend *cdp_backend_cpu(int threads)
{
    int cpus = cdp_cpu_affinity_count();
    if (threads <= 0)
        threads = cpus;
    cdp_cpu_set_threads(threads);
    cdp_cpu_gemm_split = gemm_split_used > 0 ? gemm_split_used : cdp_cpu_gemm_split_default();
    /* CDP_CONV_DIRECT=0|1|2: the direct 3x3 convolution never, on the
     * measured shapes (default), on every shape it supports (A/B runs) */
    const char *cd = getenv("CDP_CONV_DIRECT");
    if (cd && (strcmp(cd, "0") == 0 || strcmp(cd, "1") == 0 || strcmp(cd, "2") == 0))
        cdp_cpu_conv_direct = cd[0] - '0';
    else if (cd && *cd)
        fprintf(stderr, "cdp: warning: ignoring CDP_CONV_DIRECT='%s' (expected 0, 1 or 2)\n", cd);

    /* CDP_CONV_DNNL=0|1|2: oneDNN's convolutions never, on 3x3 with >= 16
     * channels (the default), on every shape (A/B runs); read before
     * anything sizes a workspace: the sizes depend on it.  CDP_GEMM_DNNL=0|1:
     * the Linear GEMMs through OpenBLAS or oneDNN (sgemm.c) */
    dnnl_level_from_env("CDP_CONV_DNNL", 2, &cdp_cpu_conv_dnnl);
    dnnl_level_from_env("CDP_GEMM_DNNL", 1, &cdp_cpu_gemm_dnnl);
#ifdef HAVE_DNNL
    cpu_backend.bf16 = cdp_cpu_gemm_dnnl ? &cpu_bf16 : NULL;
#endif

    const char *wait = getenv("OMP_WAIT_POLICY"), *spin = getenv("GOMP_SPINCOUNT");
    const char *note = cdp_cpu_preinit_note();
    int n = snprintf(cpu_desc, sizeof cpu_desc, "cpu: %s kernel %s%s, %d thread%s, "
                     "gemm split %d", cdp_cpu_blas_version(), cdp_cpu_blas_kernel(),
                     cdp_cpu_blas_hint(), threads,
                     threads == 1 ? "" : "s", cdp_cpu_gemm_split);
    if (n > 0 && (size_t)n < sizeof cpu_desc && threads > cpus)
        n += snprintf(cpu_desc + n, sizeof cpu_desc - (size_t)n,
                      " on %d CPU%s (oversubscribed: mpirun --bind-to none, or fewer threads)",
                      cpus, cpus == 1 ? "" : "s");
    if (n > 0 && (size_t)n < sizeof cpu_desc)
        n += snprintf(cpu_desc + n, sizeof cpu_desc - (size_t)n, ", OMP_WAIT_POLICY %s%s%s",
                      wait ? wait : "default", spin ? " GOMP_SPINCOUNT " : "", spin ? spin : "");
    if (n > 0 && (size_t)n < sizeof cpu_desc)
        n += snprintf(cpu_desc + n, sizeof cpu_desc - (size_t)n, ", linear %s (bf16: %s%s%s), conv %s",
                      cdp_cpu_gemm_library(), cdp_cpu_bf16_library(),
                      cdp_cpu_gemm_dnnl ? " " : "", cdp_cpu_gemm_dnnl ? cdp_cpu_dnnl_isa() : "",
                      conv_paths());
    if (n > 0 && (size_t)n < sizeof cpu_desc && note[0])
        snprintf(cpu_desc + n, sizeof cpu_desc - (size_t)n, " (set by cdp: %s)", note);
    snprintf(cpu_numerics_text, sizeof cpu_numerics_text,
             "backend: cpu\nBLAS: %s kernel %s\nGEMM split: %d\nlinear GEMMs: %s\n"
             "bf16 linear GEMMs: %s\nconvolutions: %s%s%s",
             cdp_cpu_blas_version(), cdp_cpu_blas_kernel(), cdp_cpu_gemm_split,
             cdp_cpu_gemm_library(), cdp_cpu_bf16_library(), conv_paths(),
             cdp_cpu_conv_dnnl > 0 || cdp_cpu_gemm_dnnl ? ", oneDNN ISA " : "",
             cdp_cpu_conv_dnnl > 0 || cdp_cpu_gemm_dnnl ? cdp_cpu_dnnl_isa() : "");
    return &cpu_backend;
}
