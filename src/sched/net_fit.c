/* The ping-pong's fit (sched/net_fit.h). */
#include <math.h>
#include <stdio.h>
#include "sched/net_fit.h"

int cdp_net_fit(const double *bytes, const double *one_way_s, int n, double gap_s,
                cdp_link_cost *out, char *err, size_t errlen)
{
    if (n < 2) {
        snprintf(err, errlen, "the fit needs times at two message sizes at least (got %d)", n);
        return -1;
    }
    int large = 0;
    for (int k = 0; k < n; k++) large += bytes[k] >= CDP_NET_FIT_LARGE;
    const double from = large >= 2 ? CDP_NET_FIT_LARGE : 0;
    double sx = 0, sy = 0, m = 0;
    for (int k = 0; k < n; k++)
        if (bytes[k] >= from) {
            sx += bytes[k];
            sy += one_way_s[k];
            m++;
        }
    double sxx = 0, sxy = 0;
    for (int k = 0; k < n; k++)
        if (bytes[k] >= from) {
            sxx += (bytes[k] - sx / m) * (bytes[k] - sx / m);
            sxy += (bytes[k] - sx / m) * (one_way_s[k] - sy / m);
        }
    if (!(sxx > 0) || !(sxy > 0)) {
        snprintf(err, errlen, "the one-way times do not grow with the message size "
                 "(%.3g s at %.0f bytes, %.3g s at %.0f bytes): no bandwidth to fit",
                 one_way_s[0], bytes[0], one_way_s[n - 1], bytes[n - 1]);
        return -1;
    }
    out->bandwidth_Bps = sxx / sxy;
    /* the smallest message: its latency, the gap, its few bytes */
    const double fixed = fmax(0, one_way_s[0] - bytes[0] / out->bandwidth_Bps);
    out->per_message_s = fmin(fmax(gap_s, 0), fixed);
    out->latency_s = fixed - out->per_message_s;
    return 0;
}
