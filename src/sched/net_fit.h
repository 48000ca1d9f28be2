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

/* The first of bytes[0..n) (ascending) the duplex share is taken over:
 * the first of at least CDP_NET_FIT_LARGE bytes, else the last. */
int cdp_net_duplex_first(const double *bytes, int n);

/* The link's half_duplex share: how much of a transfer's time the other
 * direction is held, the mean over the sizes from cdp_net_duplex_first on
 * of exchange_s / t - 1 (an
 * exchange: both ends send that size at once; t: the fitted link's one-way
 * time, latency_s + per_message_s + bytes / bandwidth_Bps), clamped to
 * [0, 1]: 0 when an exchange takes one way's time, 1 when it takes two.
 * Against the fit rather than the measured one-way time: a shaped link
 * (a token bucket) sends a message of up to its burst faster when the
 * other way was idle just before, as in a ping-pong, never in an exchange. */
double cdp_net_duplex_share(const double *bytes, const double *exchange_s, int n,
                            const cdp_link_cost *fit);

#endif
