/* The optimizers and learning-rate schedules (doc/reference.md section
 * 3.5): SGD as torch.optim.SGD (momentum, weight decay) or AdamW as
 * torch.optim.AdamW, with a step-decay or cosine schedule and an optional
 * linear warm-up.  Everything an update needs is a function of the update
 * index c alone (the c-th update applies the gradient of step c), so every
 * rule stays exact and independent of the rank count.  The kernels
 * themselves are the backend's sgd() and adamw(). */
#ifndef CDP_OPTIM_H
#define CDP_OPTIM_H

#include <stddef.h>
#include <stdint.h>
#include "backend/backend.h"

typedef enum cdp_optim_kind { CDP_OPTIM_SGD = 0, CDP_OPTIM_ADAMW = 1 } cdp_optim_kind;
typedef enum cdp_lr_schedule { CDP_LR_STEP = 0, CDP_LR_COSINE = 1 } cdp_lr_schedule;

typedef struct cdp_optim {
    cdp_optim_kind kind;
    double lr;             /* base learning rate */
    double momentum;       /* sgd */
    double weight_decay;   /* sgd: L2 added to the gradient; adamw: decoupled */
    double beta1, beta2, eps;   /* adamw */
    cdp_lr_schedule schedule;
    int decay_epochs;      /* step: multiply lr by gamma every decay_epochs epochs; 0 = never */
    double gamma;
    int64_t steps_per_epoch;
    int64_t warmup_steps;  /* W: linear warm-up over updates 0 .. W-1; 0 = none */
    int64_t total_steps;   /* cosine: the run's updates T (the lr is 0 at update T-1) */
} cdp_optim;

/* SGD with step decay and no warm-up (what cdp did before AdamW). */
cdp_optim cdp_optim_sgd(double lr, double momentum, double weight_decay, int decay_epochs,
                        double gamma, int64_t steps_per_epoch);

/* Learning rate of update c (the one computed from the gradient of step c),
 * in double, rounded to float once:
 *   step:    lr * gamma^floor(epoch(c) / decay_epochs), epoch(c) = c / steps_per_epoch,
 *            the power by repeated multiplication (as PyTorch's StepLR)
 *   cosine:  lr * 0.5 * (1 + cos(pi * min(c, T-1) / (T-1))), T = total_steps
 *            (lr for T = 1; exactly 0 from update T-1 on)
 *   warm-up: for c < W the schedule's value times (double)(c+1) / (double)W. */
float cdp_optim_lr(const cdp_optim *o, int64_t c);

/* Float buffers of optimizer state per parameter: 1 (sgd: momentum) or 2
 * (adamw: exp_avg then exp_avg_sq).  A stage of n floats keeps
 * cdp_optim_state_floats(o, n) = buffers * n floats, buffer j at j*n. */
int cdp_optim_state_buffers(const cdp_optim *o);
size_t cdp_optim_state_floats(const cdp_optim *o, size_t n);

/* Everything the kernels need for update c, computed on the host. */
typedef struct cdp_optim_step {
    cdp_optim_kind kind;
    int first;             /* c == 0: the state buffers are taken as zero */
    float lr;              /* cdp_optim_lr(o, c) */
    float momentum, weight_decay;   /* sgd */
    cdp_adamw_coef adamw;  /* adamw (backend.h) */
} cdp_optim_step;

cdp_optim_step cdp_optim_step_at(const cdp_optim *o, int64_t c);

const char *cdp_optim_name(cdp_optim_kind k);            /* "sgd", "adamw" */
const char *cdp_lr_schedule_name(cdp_lr_schedule s);     /* "step", "cosine" */

#endif
