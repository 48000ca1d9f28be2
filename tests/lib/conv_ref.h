/* The direct convolution in double, with groups (nn.Conv2d's), that the
 * Check suites compare the backends' conv2d with (test_nn_kernels,
 * test_nn_layers): loops over the definition, no im2col.  Output channel
 * co of group g = co / (Cout/G) reads the input channels g*Cg .. g*Cg +
 * Cg - 1 (Cg = Cin/G) through w[co][ci - g*Cg][kh][kw]. */
#ifndef CDP_TESTS_CONV_REF_H
#define CDP_TESTS_CONV_REF_H

#include <string.h>
#include "backend/backend.h"

/* y = conv(x, w) + b; b may be NULL */
static inline void conv_ref_fwd(const cdp_conv_shape *s, const double *x, const double *w,
                                const double *b, double *y)
{
    const int G = cdp_conv_groups(s), Cg = s->Cin / G, Og = s->Cout / G;
    for (int n = 0; n < s->B; n++)
        for (int co = 0; co < s->Cout; co++)
            for (int oh = 0; oh < s->OH; oh++)
                for (int ow = 0; ow < s->OW; ow++) {
                    double acc = b ? b[co] : 0.0;
                    for (int c = 0; c < Cg; c++)
                        for (int kh = 0; kh < s->KH; kh++)
                            for (int kw = 0; kw < s->KW; kw++) {
                                int ih = oh * s->stride - s->pad + kh;
                                int iw = ow * s->stride - s->pad + kw;
                                if (ih < 0 || ih >= s->H || iw < 0 || iw >= s->W)
                                    continue;
                                int ci = (co / Og) * Cg + c;
                                acc += x[(((size_t)n * s->Cin + ci) * s->H + ih) * s->W + iw]
                                     * w[(((size_t)co * Cg + c) * s->KH + kh) * s->KW + kw];
                            }
                    y[(((size_t)n * s->Cout + co) * s->OH + oh) * s->OW + ow] = acc;
                }
}

/* its backward, by the chain rule on the same loops */
static inline void conv_ref_bwd(const cdp_conv_shape *s, const double *x, const double *w,
                                const double *dy, double *dx, double *dw, double *db)
{
    const int G = cdp_conv_groups(s), Cg = s->Cin / G, Og = s->Cout / G;
    memset(dx, 0, (size_t)s->B * s->Cin * s->H * s->W * sizeof *dx);
    memset(dw, 0, cdp_conv_weight_count(s) * sizeof *dw);
    memset(db, 0, (size_t)s->Cout * sizeof *db);
    for (int n = 0; n < s->B; n++)
        for (int co = 0; co < s->Cout; co++)
            for (int oh = 0; oh < s->OH; oh++)
                for (int ow = 0; ow < s->OW; ow++) {
                    double g = dy[(((size_t)n * s->Cout + co) * s->OH + oh) * s->OW + ow];
                    db[co] += g;
                    for (int c = 0; c < Cg; c++)
                        for (int kh = 0; kh < s->KH; kh++)
                            for (int kw = 0; kw < s->KW; kw++) {
                                int ih = oh * s->stride - s->pad + kh;
                                int iw = ow * s->stride - s->pad + kw;
                                if (ih < 0 || ih >= s->H || iw < 0 || iw >= s->W)
                                    continue;
                                int ci = (co / Og) * Cg + c;
                                size_t xi = (((size_t)n * s->Cin + ci) * s->H + ih) * s->W + iw;
                                size_t wi = (((size_t)co * Cg + c) * s->KH + kh) * s->KW + kw;
                                dx[xi] += g * w[wi];
                                dw[wi] += g * x[xi];
                            }
                }
}

#endif
