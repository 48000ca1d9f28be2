#include <math.h>
#include "optim/optim.h"

cdp_optim cdp_optim_sgd(double lr, double momentum, double weight_decay, int decay_epochs,
                        double gamma, int64_t steps_per_epoch)
{
    cdp_optim o = { 0 };
    o.kind = CDP_OPTIM_SGD;
    o.lr = lr;
    o.momentum = momentum;
    o.weight_decay = weight_decay;
    o.beta1 = 0.9;
    o.beta2 = 0.999;
    o.eps = 1e-8;
    o.schedule = CDP_LR_STEP;
    o.decay_epochs = decay_epochs;
    o.gamma = gamma;
    o.steps_per_epoch = steps_per_epoch;
    return o;
}

/* the schedule before the warm-up, in double */
static double schedule_lr(const cdp_optim *o, int64_t c)
{
    double lr = o->lr;
    if (o->schedule == CDP_LR_COSINE) {
        const int64_t T = o->total_steps;
        if (T <= 1)
            return lr;
        if (c >= T - 1)
            return 0.0;
        return lr * (0.5 * (1.0 + cos(M_PI * (double)c / (double)(T - 1))));
    }
    if (o->decay_epochs <= 0 || o->steps_per_epoch <= 0)
        return lr;
    int64_t epoch = c / o->steps_per_epoch;
    int64_t n = epoch / o->decay_epochs;
    /* repeated multiplication, as PyTorch's StepLR does */
    for (int64_t i = 0; i < n; i++)
        lr *= o->gamma;
    return lr;
}

float cdp_optim_lr(const cdp_optim *o, int64_t c)
{
    double lr = schedule_lr(o, c);
    if (c >= 0 && c < o->warmup_steps)
        lr *= (double)(c + 1) / (double)o->warmup_steps;
    return (float)lr;
}

int cdp_optim_state_buffers(const cdp_optim *o)
{
    return o->kind == CDP_OPTIM_ADAMW ? 2 : 1;
}

size_t cdp_optim_state_floats(const cdp_optim *o, size_t n)
{
    return (size_t)cdp_optim_state_buffers(o) * n;
}

cdp_optim_step cdp_optim_step_at(const cdp_optim *o, int64_t c)
{
    cdp_optim_step s = { 0 };
    s.kind = o->kind;
    s.first = c == 0;
    s.lr = cdp_optim_lr(o, c);
    s.momentum = (float)o->momentum;
    s.weight_decay = (float)o->weight_decay;
    if (o->kind == CDP_OPTIM_ADAMW) {
        /* torch.optim.AdamW's host arithmetic (Python floats), on our float lr */
        const double lr = (double)s.lr, t = (double)(c + 1);
        cdp_adamw_coef *a = &s.adamw;
        a->decay = (float)(1.0 - lr * o->weight_decay);
        a->beta1 = (float)o->beta1;
        a->one_minus_beta1 = (float)(1.0 - o->beta1);
        a->beta2 = (float)o->beta2;
        a->one_minus_beta2 = (float)(1.0 - o->beta2);
        a->bc2_sqrt = (float)sqrt(1.0 - pow(o->beta2, t));
        a->step_size = (float)(lr / (1.0 - pow(o->beta1, t)));
        a->eps = (float)o->eps;
    }
    return s;
}

const char *cdp_optim_name(cdp_optim_kind k)
{
    return k == CDP_OPTIM_ADAMW ? "adamw" : "sgd";
}

const char *cdp_lr_schedule_name(cdp_lr_schedule s)
{
    return s == CDP_LR_COSINE ? "cosine" : "step";
}
