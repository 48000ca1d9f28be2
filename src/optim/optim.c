#include <math.h>
#include "cdp/optim.h"

float cdp_sgd_lr(const cdp_sgd *o, int64_t c)
{
    if (o->decay_epochs <= 0 || o->steps_per_epoch <= 0)
        return (float)o->lr;
    int64_t epoch = c / o->steps_per_epoch;
    int64_t n = epoch / o->decay_epochs;
    double lr = o->lr;
    /* repeated multiplication, as PyTorch's StepLR does */
    for (int64_t i = 0; i < n; i++)
        lr *= o->gamma;
    return (float)lr;
}
