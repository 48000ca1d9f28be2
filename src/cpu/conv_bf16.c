/* The convolution kernels of --precision bf16 on the CPU (conv2d_fwd_bf16,
 * conv2d_bwd_bf16, conv2d_bf16_ws_floats): oneDNN's bfloat16 convolutions
 * where they run on bfloat16 instructions, the float32 kernels elsewhere.
 *
 * What runs (doc/reference.md section 3.12).  The stage has rounded x, w
 * and dy to bfloat16 values; kernels_conv_dnnl.c packs them to two bytes
 * each on the way into oneDNN's forward, backward-data and backward-weights
 * primitives (bf16 operands, float32 sums in the order of oneDNN's kernel,
 * float32 results), in the sample slots of every CPU convolution path, each
 * slot's primitives on one thread: the bits depend on the shape, the gemm
 * split and oneDNN's ISA, never on the thread or rank count.  The bias is
 * added to the float32 result by kernels_conv_dnnl.c's loop, db is
 * kernels_conv.c's sum in double, and the slots' dw partials are summed in
 * slot order, as in float32.
 *
 * Which shapes.  Every ungrouped convolution when oneDNN's ISA has the
 * AVX512_BF16 instructions (the stem and the 1x1 shortcuts included:
 * oneDNN's bf16 kernels are the fastest path for them too, and two
 * precisions in one network would only complicate the rule); grouped and
 * depthwise convolutions, a CPU without AVX512_BF16 (where oneDNN would
 * emulate bf16, slower than float32), CDP_CONV_DNNL=0 and a build without
 * oneDNN: the float32 kernels on the rounded values. */
#include "config.h"

#include "backend/backend.h"
#include "cpu_internal.h"

/* whether s runs on oneDNN's bf16 primitives */
static int use_dnnl_bf16(const cdp_conv_shape *s)
{
#ifdef HAVE_DNNL
    return cdp_cpu_conv_dnnl > 0 && cdp_conv_groups(s) <= 1 && cdp_cpu_conv_dnnl_supported(s)
           && cdp_cpu_dnnl_has_bf16();
#else
    (void)s;
    return 0;
#endif
}

const char *cdp_cpu_conv_bf16_library(void)
{
#ifdef HAVE_DNNL
    if (cdp_cpu_conv_dnnl > 0 && cdp_cpu_dnnl_has_bf16())
        return "oneDNN bf16 avx512_core_bf16";
#endif
    return "the float32 kernels";
}

size_t cdp_cpu_conv2d_bf16_ws_floats(const cdp_conv_shape *s)
{
#ifdef HAVE_DNNL
    if (use_dnnl_bf16(s))
        return cdp_cpu_conv_dnnl_bf16_ws_floats(s);
#endif
    return cdp_cpu_conv2d_ws_floats(s);
}

void cdp_cpu_conv2d_fwd_bf16(const cdp_conv_shape *s, const float *x, const float *w,
                             const float *b, float *y, float *ws)
{
#ifdef HAVE_DNNL
    if (use_dnnl_bf16(s)) {
        cdp_cpu_conv2d_dnnl_fwd_bf16(s, x, w, b, y, ws);
        return;
    }
#endif
    cdp_cpu_conv2d_fwd(s, x, w, b, y, ws);
}

void cdp_cpu_conv2d_bwd_bf16(const cdp_conv_shape *s, const float *x, const float *w,
                             const float *dy, float *dx, float *dw, float *db, int accumulate,
                             float *ws)
{
#ifdef HAVE_DNNL
    if (use_dnnl_bf16(s)) {
        if (db)
            cdp_cpu_conv_db(s, (size_t)s->OH * (size_t)s->OW, dy, db, accumulate);
        cdp_cpu_conv2d_dnnl_bwd_bf16(s, x, w, dy, dx, dw, accumulate, ws);
        return;
    }
#endif
    cdp_cpu_conv2d_bwd(s, x, w, dy, dx, dw, db, accumulate, ws);
}
