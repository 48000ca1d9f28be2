/* Likely causes of a divergence that lowering --lr does not cure. */
#include <stdio.h>

#include "run/diverge_hint.h"
#include "optim/optim.h"

/* A BatchNorm that normalizes a channel over this many values or fewer
 * learns nothing from it (two values always normalize to -1 and +1) and its
 * 1/sqrt(var + eps) follows every small difference between them: such
 * layers, not the learning rate, are what blows up. */
#define BN_FEW_VALUES 4

int cdp_diverge_hint(const cdp_options *o, const cdp_model *m, char *buf, size_t len)
{
    buf[0] = '\0';
    if (o->optimizer == CDP_OPTIM_ADAMW && o->eps == 0) {
        /* m / (sqrt(v) + 0) is 0/0 for any weight whose gradients were all 0
         * so far (a dead ReLU's), and huge where v is tiny */
        snprintf(buf, len, "likely cause: --eps 0 (adamw divides by sqrt(v) + eps, 0/0 where a "
                 "weight's gradients have all been 0); give --eps a positive value (1e-8, the "
                 "default)");
        return 1;
    }
    const cdp_layer *few = NULL;
    long few_n = 0;
    for (int j = 0; j < m->nlayers; j++) {
        const cdp_layer *ly = &m->layers[j];
        if (ly->kind != CDP_LAYER_BATCHNORM2D)
            continue;
        const long n = (long)o->batch * ly->ys.h * ly->ys.w;
        if (!few || n < few_n) {
            few = ly;
            few_n = n;
        }
    }
    if (few && few_n <= BN_FEW_VALUES) {
        snprintf(buf, len, "likely cause: BatchNorm %.64s normalizes each channel over %ld "
                 "value%s (--batch %d x its %dx%d map), too few for batch statistics; give "
                 "larger inputs or a larger --batch", few->name, few_n, few_n == 1 ? "" : "s",
                 o->batch, few->ys.h, few->ys.w);
        return 1;
    }
    return 0;
}
