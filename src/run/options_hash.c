/* The hashes of the options: what every rank must agree on, and what fixes
 * the numerics (a checkpoint resumes only under the same). */
#include <string.h>
#include "io/data.h"
#include "optim/optim.h"
#include "run/options.h"
#include "util/rng.h"

static uint64_t hash_bytes(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = cdp_mix64(h ^ b[i]);
    return h;
}

uint64_t cdp_options_numerics_hash(const cdp_options *o)
{
    /* what fixes the trajectory P(0), P(1), ...: a checkpoint resumes only
     * under the same values */
    uint64_t h = 0x6e756d;
    h = hash_bytes(h, o->model, strlen(o->model));
    h = hash_bytes(h, &o->stages, sizeof o->stages);
    if (o->balance)   /* the cut moves the lags: part of the numerics (absent: as before) */
        h = hash_bytes(h, &o->balance, sizeof o->balance);
    h = hash_bytes(h, &o->workers, sizeof o->workers);
    h = hash_bytes(h, &o->batch, sizeof o->batch);
    h = hash_bytes(h, &o->rule, sizeof o->rule);
    h = hash_bytes(h, &o->lr, sizeof o->lr);
    h = hash_bytes(h, &o->momentum, sizeof o->momentum);
    h = hash_bytes(h, &o->weight_decay, sizeof o->weight_decay);
    h = hash_bytes(h, &o->lr_gamma, sizeof o->lr_gamma);
    h = hash_bytes(h, &o->lr_decay_epochs, sizeof o->lr_decay_epochs);
    h = hash_bytes(h, &o->seed, sizeof o->seed);
    char data[sizeof o->data];
    cdp_data_spec_numerics(o->data, data, sizeof data);
    h = hash_bytes(h, data, strlen(data));
    h = hash_bytes(h, &o->shuffle, sizeof o->shuffle);
    /* the transforms only when set: the hash of a run without them (and
     * the checkpoints it wrote) is the one of the versions before them */
    if (o->augment.crop_pad || o->augment.flip) {
        h = hash_bytes(h, "augment", 7);
        h = hash_bytes(h, &o->augment, sizeof o->augment);
    }
    /* the optimizer and schedule likewise only when not SGD with step
     * decay and no warm-up (the runs and checkpoints of before them) */
    if (o->optimizer != CDP_OPTIM_SGD) {
        h = hash_bytes(h, "optimizer", 9);
        h = hash_bytes(h, &o->optimizer, sizeof o->optimizer);
        h = hash_bytes(h, o->betas, sizeof o->betas);
        h = hash_bytes(h, &o->eps, sizeof o->eps);
    }
    if (o->lr_schedule != CDP_LR_STEP) {
        /* cosine depends on the run's length */
        h = hash_bytes(h, "lr_schedule", 11);
        h = hash_bytes(h, &o->lr_schedule, sizeof o->lr_schedule);
        h = hash_bytes(h, &o->steps, sizeof o->steps);
        if (!o->steps)
            h = hash_bytes(h, &o->epochs, sizeof o->epochs);
    }
    if (o->warmup_steps) {
        h = hash_bytes(h, "warmup", 6);
        h = hash_bytes(h, &o->warmup_steps, sizeof o->warmup_steps);
    }
    if (o->flush_denormals) {   /* another arithmetic: other bits */
        h = hash_bytes(h, "flush_denormals", 15);
        h = hash_bytes(h, &o->flush_denormals, sizeof o->flush_denormals);
    }
    if (o->precision) {
        h = hash_bytes(h, "precision", 9);
        h = hash_bytes(h, &o->precision, sizeof o->precision);
    }
    if (o->norm_count) {
        h = hash_bytes(h, "normalize", 9);
        h = hash_bytes(h, &o->norm_count, sizeof o->norm_count);
        h = hash_bytes(h, o->norm_mean, (size_t)o->norm_count * sizeof(float));
        h = hash_bytes(h, o->norm_std, (size_t)o->norm_count * sizeof(float));
    }
    return h;
}

uint64_t cdp_options_hash(const cdp_options *o)
{
    /* the numerics, plus what else every rank must agree on */
    uint64_t h = cdp_options_numerics_hash(o);
    h = hash_bytes(h, &o->framework, sizeof o->framework);
    h = hash_bytes(h, &o->deterministic, sizeof o->deterministic);
    h = hash_bytes(h, &o->epochs, sizeof o->epochs);
    h = hash_bytes(h, &o->steps, sizeof o->steps);
    h = hash_bytes(h, o->data_dir, strlen(o->data_dir));
    if (!strncmp(o->data, "folder:", 7))   /* its DIR, decoders=, prefetch= */
        h = hash_bytes(h, o->data, strlen(o->data));
    h = hash_bytes(h, o->init_weights, strlen(o->init_weights));
    h = hash_bytes(h, o->resume, strlen(o->resume));
    h = hash_bytes(h, o->checkpoint, strlen(o->checkpoint));
    h = hash_bytes(h, &o->checkpoint_every, sizeof o->checkpoint_every);
    h = hash_bytes(h, &o->checkpoint_every_steps, sizeof o->checkpoint_every_steps);
    h = hash_bytes(h, &o->log_every, sizeof o->log_every);   /* its reductions are collective */
    h = hash_bytes(h, &o->keep_checkpoints, sizeof o->keep_checkpoints);
    h = hash_bytes(h, o->backend, strlen(o->backend));
    h = hash_bytes(h, &o->timeout, sizeof o->timeout);   /* turning it on is collective */
    h = hash_bytes(h, &o->allow_mixed, sizeof o->allow_mixed);
    h = hash_bytes(h, &o->plan, sizeof o->plan);
    h = hash_bytes(h, &o->print_model, sizeof o->print_model);
    h = hash_bytes(h, &o->plan_ranks, sizeof o->plan_ranks);
    h = hash_bytes(h, &o->verify, sizeof o->verify);
    h = hash_bytes(h, &o->layer_times, sizeof o->layer_times);   /* its reduction is collective */
    return h;
}
