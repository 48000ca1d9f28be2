/* The link costs of the machine file (io/machine_file.h) from a ping-pong
 * between two ranks: one-way times at several message sizes and the gap
 * between back-to-back small messages (cdp_netmeasure, doc/reference.md
 * section 2.7).  No MPI here, so that the fit is tested on its own. */
#ifndef CDP_NET_FIT_H
#define CDP_NET_FIT_H

#include <stddef.h>
#include "io/machine_file.h"

/* Sizes at or above this decide the bandwidth: below it the latency and
 * the eager protocol's copies dominate. */
#define CDP_NET_FIT_LARGE 65536.0
/* pairs of sizes the median is taken over (8 B to 1 GiB by doubling: 29
 * sizes, 406 pairs) */
#define CDP_NET_FIT_MAX_PAIRS 512

/* bytes[0..n) ascending with their median one-way times; gap_s the time a
 * small message holds the link when messages follow each other.  The
 * bandwidth is the inverse of the median slope of time over size between
 * every two sizes of at least CDP_NET_FIT_LARGE bytes (all sizes when
 * fewer than two are; the first CDP_NET_FIT_MAX_PAIRS pairs);
 * the fixed cost of a message is the least that a size below
 * CDP_NET_FIT_LARGE (or the smallest size) leaves after its bytes;
 * per_message_s is the gap (at most that fixed cost), latency_s the
 * rest.  0, or -1 with one line in err (fewer than two sizes, times that
 * do not grow with the size). */
int cdp_net_fit(const double *bytes, const double *one_way_s, int n, double gap_s,
                cdp_link_cost *out, char *err, size_t errlen);

#endif
