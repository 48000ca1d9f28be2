/* SGD as torch.optim.SGD (momentum, weight decay) with a step-decay
 * learning-rate schedule.  The kernel itself is the backend's sgd(). */
#ifndef CDP_OPTIM_H
#define CDP_OPTIM_H

#include <stdint.h>

typedef struct cdp_sgd {
    double lr;             /* base learning rate */
    double momentum;
    double weight_decay;
    int decay_epochs;      /* multiply lr by gamma every decay_epochs epochs; 0 = never */
    double gamma;
    int64_t steps_per_epoch;
} cdp_sgd;

/* Learning rate of the update computed from the gradient of step c:
 * lr * gamma^floor(epoch(c) / decay_epochs), epoch(c) = c / steps_per_epoch. */
float cdp_sgd_lr(const cdp_sgd *o, int64_t c);

#endif
