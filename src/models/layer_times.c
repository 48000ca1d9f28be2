/* --layer-times: the rows of src/models/layer_times.h, filled by the
 * stage functions (stage.c). */
#include <stdlib.h>
#include "util/clock.h"
#include "models/layer_times.h"
#include "models/model.h"

int cdp_layer_times_init(cdp_layer_times *t, const cdp_model *m)
{
    t->rows = m->nlayers + 2;
    t->s = calloc(2 * (size_t)t->rows, sizeof *t->s);
    t->n = calloc(2 * (size_t)t->rows, sizeof *t->n);
    if (!t->s || !t->n) {
        cdp_layer_times_free(t);
        return -1;
    }
    return 0;
}

void cdp_layer_times_free(cdp_layer_times *t)
{
    free(t->s);
    free(t->n);
    t->s = t->n = NULL;
    t->rows = 0;
}

double cdp_layer_times_begin(const cdp_layer_times *t, const cdp_backend *be)
{
    if (!t)
        return 0.0;
    be->sync();   /* what was queued before is not this layer's */
    return cdp_now_s();
}

void cdp_layer_times_end(cdp_layer_times *t, const cdp_backend *be, int row, int bwd, double t0)
{
    if (!t)
        return;
    be->sync();
    t->s[2 * row + bwd] += cdp_now_s() - t0;
    t->n[2 * row + bwd] += 1.0;
}
