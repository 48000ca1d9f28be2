/* What a diverged run most likely needs changed, when the options or the
 * model point at something more specific than "lower --lr". */
#ifndef CDP_DIVERGE_HINT_H
#define CDP_DIVERGE_HINT_H

#include <stddef.h>
#include "models/model.h"
#include "run/options.h"

/* Writes the likely cause and its remedy into buf ("--eps 0: ...") and
 * returns 1, or returns 0 (buf "") when nothing specific applies. */
int cdp_diverge_hint(const cdp_options *o, const cdp_model *m, char *buf, size_t len);

#endif
