/* Initialisation of every tensor with PyTorch's distributions, from a
 * counter-based generator: the same on every rank, and for any number of
 * ranks or stages (tensor j of the file draws from stream j). */
#include <math.h>
#include <string.h>

#include "util/rng.h"
#include "models/model.h"

void cdp_model_init(const cdp_model *m, uint64_t seed, float *host_params)
{
    memset(host_params, 0, m->nparams * sizeof(float));
    for (int j = 0; j < m->ntensors; j++) {
        const cdp_tensor_info *t = &m->tensors[j];
        if (t->kind == CDP_TENSOR_COUNTER)
            continue;
        cdp_param_desc d[8];
        const cdp_layer *ly = &m->layers[t->layer];
        cdp_layer_ops_of(ly->kind)->params(ly, d);
        const int k = t->param;
        float *p = host_params + t->off;
        const float a = d[k].a;
        switch (d[k].init) {
        case CDP_INIT_UNIFORM:
            /* (2u - 1) * a, u = cdp_rand_unit(seed, j, i), in float */
            for (size_t i = 0; i < t->n; i++)
                p[i] = (2.0f * cdp_rand_unit(seed, (uint64_t)j, i) - 1.0f) * a;
            break;
        case CDP_INIT_NORMAL:
            /* Box-Muller on the pair (2i, 2i+1) of the stream, in double */
            for (size_t i = 0; i < t->n; i++) {
                double u1 = 1.0 - (double)cdp_rand_unit(seed, (uint64_t)j, 2 * i);
                double u2 = (double)cdp_rand_unit(seed, (uint64_t)j, 2 * i + 1);
                p[i] = (float)(a * sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
            }
            break;
        case CDP_INIT_TRUNC_NORMAL:
            /* the normal draws of CDP_INIT_NORMAL; one outside [-2, 2] is
             * redrawn from the pair (2i + 2R, 2i + 1 + 2R) of the stream,
             * R = 1, 2, ... (R * 2 * n past the first draws) */
            for (size_t i = 0; i < t->n; i++) {
                double v;
                uint64_t r = 0;
                do {
                    uint64_t q = 2 * (i + r * t->n);
                    double u1 = 1.0 - (double)cdp_rand_unit(seed, (uint64_t)j, q);
                    double u2 = (double)cdp_rand_unit(seed, (uint64_t)j, q + 1);
                    v = a * sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
                    r++;
                } while (v < -2.0 || v > 2.0);
                p[i] = (float)v;
            }
            break;
        case CDP_INIT_CONST:
            for (size_t i = 0; i < t->n; i++)
                p[i] = a;
            break;
        }
    }
}
