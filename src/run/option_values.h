/* The options whose value has parts: each reads s into its fields of o and
 * returns 0, or -1 with one line in err naming the option and what it
 * expected. */
#ifndef CDP_RUN_OPTION_VALUES_H
#define CDP_RUN_OPTION_VALUES_H

#include <stddef.h>
#include "run/options.h"

/* --augment none | crop=P[,flip] | flip[,crop=P]: o->augment */
int cdp_parse_augment(cdp_options *o, const char *s, char *err, size_t errlen);
/* --normalize none | MEAN[,MEAN...]/STD[,STD...]: o->norm_count, norm_mean, norm_std */
int cdp_parse_normalize(cdp_options *o, const char *s, char *err, size_t errlen);
/* --betas B1,B2: two numbers in [0, 1): o->betas */
int cdp_parse_betas(cdp_options *o, const char *s, char *err, size_t errlen);

/* --device-memory SIZE: bytes, or with a suffix K, M, G, T (powers of
 * 1024; "80G"): o->device_memory */
int cdp_parse_size(cdp_options *o, const char *s, char *err, size_t errlen);

#endif
