/* The grammars of the options whose value has parts (--augment,
 * --normalize, --betas): option_values.h. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "option_values.h"

/* --augment none | crop=P[,flip] | flip[,crop=P] */
int cdp_parse_augment(cdp_options *o, const char *s, char *err, size_t errlen)
{
    cdp_augment *a = &o->augment;
    memset(a, 0, sizeof *a);
    if (strcmp(s, "none") == 0)
        return 0;
    int have_crop = 0;
    const char *p = s;
    for (;;) {
        size_t len = strcspn(p, ",");
        if (len == 4 && strncmp(p, "flip", 4) == 0) {
            if (a->flip) {
                snprintf(err, errlen, "--augment: flip is given twice in '%s'", s);
                return -1;
            }
            a->flip = 1;
        } else if (len > 5 && strncmp(p, "crop=", 5) == 0) {
            char num[32];
            char *end;
            if (have_crop) {
                snprintf(err, errlen, "--augment: crop is given twice in '%s'", s);
                return -1;
            }
            if (len - 5 >= sizeof num) {
                snprintf(err, errlen, "--augment: crop=%.20s...: expected the padding P, an "
                         "integer in [1, 4096]", p + 5);
                return -1;
            }
            memcpy(num, p + 5, len - 5);
            num[len - 5] = '\0';
            errno = 0;
            long v = strtol(num, &end, 10);
            if (errno || end == num || *end || num[0] == '-' || num[0] == '+' || v < 1 || v > 4096) {
                snprintf(err, errlen, "--augment: crop=%s: expected the padding P, an integer "
                         "in [1, 4096]", num);
                return -1;
            }
            a->crop_pad = (int)v;
            have_crop = 1;
        } else {
            snprintf(err, errlen, "--augment: unknown augmentation '%.*s' in '%s' (expected "
                     "crop=P, flip, both as crop=P,flip, or none)", (int)len, p, s);
            return -1;
        }
        if (!p[len])
            break;
        p += len + 1;
    }
    return 0;
}

/* Comma-separated finite numbers; returns how many, or -1. */
static int parse_list(const char *s, size_t len, float *out, int max)
{
    int n = 0;
    const char *p = s, *end_all = s + len;
    while (p <= end_all) {
        const char *c = memchr(p, ',', (size_t)(end_all - p));
        const char *e = c ? c : end_all;
        char num[64];
        if (e == p || (size_t)(e - p) >= sizeof num || n == max)
            return -1;
        memcpy(num, p, (size_t)(e - p));
        num[e - p] = '\0';
        char *end;
        errno = 0;
        double v = strtod(num, &end);
        if (errno || end == num || *end || !isfinite(v) || fabs(v) > 1e30)
            return -1;
        out[n++] = (float)v;
        if (!c)
            break;
        p = c + 1;
    }
    return n;
}

/* --normalize none | MEAN[,MEAN...]/STD[,STD...] */
int cdp_parse_normalize(cdp_options *o, const char *s, char *err, size_t errlen)
{
    o->norm_count = 0;
    if (strcmp(s, "none") == 0)
        return 0;
    const char *slash = strchr(s, '/');
    if (!slash || strchr(slash + 1, '/')) {
        snprintf(err, errlen, "--normalize: expected MEAN/STD with one value per channel, "
                 "e.g. 0.4914,0.4822,0.4465/0.2470,0.2435,0.2616 or 0.5/0.5, got '%s'", s);
        return -1;
    }
    int nm = parse_list(s, (size_t)(slash - s), o->norm_mean, CDP_NORM_MAX_CHANNELS);
    int ns = parse_list(slash + 1, strlen(slash + 1), o->norm_std, CDP_NORM_MAX_CHANNELS);
    if (nm < 0 || ns < 0) {
        snprintf(err, errlen, "--normalize: '%s': expected comma-separated numbers (at most "
                 "%d) on each side of '/'", s, CDP_NORM_MAX_CHANNELS);
        return -1;
    }
    if (nm != ns) {
        snprintf(err, errlen, "--normalize: '%s': %d mean%s but %d std%s (give as many of each)",
                 s, nm, nm == 1 ? "" : "s", ns, ns == 1 ? "" : "s");
        return -1;
    }
    for (int c = 0; c < ns; c++)
        if (!(o->norm_std[c] > 0.0f)) {
            snprintf(err, errlen, "--normalize: '%s': std %d is %g; every std must be > 0",
                     s, c, (double)o->norm_std[c]);
            return -1;
        }
    o->norm_count = nm;
    return 0;
}

/* --betas B1,B2: two numbers in [0, 1), as torch.optim.AdamW accepts */
int cdp_parse_betas(cdp_options *o, const char *s, char *err, size_t errlen)
{
    double *betas = o->betas;
    const char *comma = strchr(s, ',');
    char num[2][64];
    if (!comma || strchr(comma + 1, ',') || comma == s || !comma[1] ||
        (size_t)(comma - s) >= sizeof num[0] || strlen(comma + 1) >= sizeof num[1]) {
        snprintf(err, errlen, "--betas: expected two numbers B1,B2 in [0, 1), e.g. 0.9,0.999, "
                 "got '%.100s'", s);
        return -1;
    }
    snprintf(num[0], sizeof num[0], "%.*s", (int)(comma - s), s);
    snprintf(num[1], sizeof num[1], "%s", comma + 1);
    for (int i = 0; i < 2; i++) {
        char *end;
        errno = 0;
        double v = strtod(num[i], &end);
        if (errno || end == num[i] || *end || !(v >= 0.0 && v < 1.0)) {
            snprintf(err, errlen, "--betas: expected two numbers B1,B2 in [0, 1), e.g. "
                     "0.9,0.999, got '%.100s'", s);
            return -1;
        }
        betas[i] = v;
    }
    return 0;
}


/* --device-memory SIZE: a positive number of bytes, with an optional
 * suffix K, M, G or T (powers of 1024), e.g. 80G */
int cdp_parse_size(cdp_options *o, const char *s, char *err, size_t errlen)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    const char *units = "KMGT";
    const char *u = *end ? strchr(units, *end) : NULL;
    if (u && *end) {
        v *= pow(1024.0, (double)(u - units + 1));
        end++;
    }
    if (errno || end == s || *end || !isfinite(v) || v < 1) {
        snprintf(err, errlen, "--device-memory: expected a size in bytes, optionally with K, M, G "
                 "or T (powers of 1024), e.g. 80G, got '%.100s'", s);
        return -1;
    }
    o->device_memory = v;
    return 0;
}
