/* The options that fix the numerics as text, kept in each checkpoint so
 * that a refused --resume can name the options that differ (the hash alone
 * says only that some do). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/data.h"
#include "optim/optim.h"
#include "run/options.h"
#include "util/strbuf.h"

/* x in the fewest digits that read back as x (0.1, not 0.10000000000000001) */
static void shortest(char *out, size_t n, double x)
{
    for (int digits = 6; digits <= 17; digits++) {
        snprintf(out, n, "%.*g", digits, x);
        if (strtod(out, NULL) == x)
            return;
    }
}

static void add_num(char *buf, size_t len, size_t *at, const char *name, double x)
{
    char v[40];
    shortest(v, sizeof v, x);
    cdp_strbuf_add(buf, len, at, " %s=%s", name, v);
}

void cdp_options_numerics_text(const cdp_options *o, char *buf, size_t len)
{
    /* what cdp_options_numerics_hash hashes, under the same conditions: an
     * entry that differs here is one that changes the hash */
    size_t at = 0;
    buf[0] = '\0';
    cdp_strbuf_add(buf, len, &at, "--model=%s --stages=%d --balance=%s --workers=%d --batch=%d --rule=%s",
        o->model, o->stages, o->balance ? "activations" : "flops", o->workers, o->batch,
        cdp_rule_name(o->rule));
    cdp_strbuf_add(buf, len, &at, " --optimizer=%s", cdp_optim_name((cdp_optim_kind)o->optimizer));
    add_num(buf, len, &at, "--lr", o->lr);
    add_num(buf, len, &at, "--momentum", o->momentum);
    add_num(buf, len, &at, "--weight-decay", o->weight_decay);
    if (o->optimizer != CDP_OPTIM_SGD) {
        char b0[40], b1[40];
        shortest(b0, sizeof b0, o->betas[0]);
        shortest(b1, sizeof b1, o->betas[1]);
        cdp_strbuf_add(buf, len, &at, " --betas=%s,%s", b0, b1);
        add_num(buf, len, &at, "--eps", o->eps);
    }
    cdp_strbuf_add(buf, len, &at, " --lr-schedule=%s", cdp_lr_schedule_name((cdp_lr_schedule)o->lr_schedule));
    add_num(buf, len, &at, "--lr-gamma", o->lr_gamma);
    cdp_strbuf_add(buf, len, &at, " --lr-decay-epochs=%d", o->lr_decay_epochs);
    if (o->lr_schedule != CDP_LR_STEP) {   /* cosine spans the run's length */
        cdp_strbuf_add(buf, len, &at, " --steps=%lld", (long long)o->steps);
        if (!o->steps)
            cdp_strbuf_add(buf, len, &at, " --epochs=%d", o->epochs);
    }
    char data[sizeof o->data];
    cdp_data_spec_numerics(o->data, data, sizeof data);
    cdp_strbuf_add(buf, len, &at, " --warmup-steps=%lld --seed=%llu --data=%s --no-shuffle=%s",
        (long long)o->warmup_steps, (unsigned long long)o->seed, data,
        o->shuffle ? "off" : "on");
    if (o->augment.crop_pad || o->augment.flip)
        cdp_strbuf_add(buf, len, &at, " --augment=%s%.0d%s%s", o->augment.crop_pad ? "crop=" : "",
            o->augment.crop_pad, o->augment.crop_pad && o->augment.flip ? "," : "",
            o->augment.flip ? "flip" : "");
    else
        cdp_strbuf_add(buf, len, &at, " --augment=none");
    cdp_strbuf_add(buf, len, &at, " --normalize=");
    if (!o->norm_count)
        cdp_strbuf_add(buf, len, &at, "none");
    for (int half = 0; half < 2; half++)
        for (int c = 0; c < o->norm_count; c++) {
            char v[40];
            shortest(v, sizeof v, half ? o->norm_std[c] : o->norm_mean[c]);
            cdp_strbuf_add(buf, len, &at, "%s%s", c ? "," : half ? "/" : "", v);
        }
    cdp_strbuf_add(buf, len, &at, " --flush-denormals=%s", o->flush_denormals ? "on" : "off");
    if (o->precision)   /* only when set: the text of the runs before it */
        cdp_strbuf_add(buf, len, &at, " --precision=bf16");
}
