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
    /* the median of the slopes between every two sizes (Theil-Sen): one
     * size whose time a loaded machine stretched moves a least-squares
     * slope by its whole delay, the median not at all */
    double slope[CDP_NET_FIT_MAX_PAIRS];
    int np = 0;
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n && np < CDP_NET_FIT_MAX_PAIRS; j++)
            if (bytes[i] >= from && bytes[j] > bytes[i])
                slope[np++] = (one_way_s[j] - one_way_s[i]) / (bytes[j] - bytes[i]);
    for (int i = 1; i < np; i++)   /* insertion sort: a few dozen pairs */
        for (int j = i; j > 0 && slope[j - 1] > slope[j]; j--) {
            double t = slope[j];
            slope[j] = slope[j - 1];
            slope[j - 1] = t;
        }
    const double med = np == 0 ? 0 : np % 2 ? slope[np / 2] : 0.5 * (slope[np / 2 - 1] + slope[np / 2]);
    if (!(med > 0)) {
        snprintf(err, errlen, "the one-way times do not grow with the message size "
                 "(%.3g s at %.0f bytes, %.3g s at %.0f bytes): no bandwidth to fit",
                 one_way_s[0], bytes[0], one_way_s[n - 1], bytes[n - 1]);
        return -1;
    }
    out->bandwidth_Bps = 1.0 / med;
    /* the fixed cost of a message (its latency and the gap): what the
     * small sizes' times leave after their bytes, the least of them (a
     * size that a load spike delayed cannot raise it above what a larger
     * message took: one run measured 0.67 ms for 8 bytes and 0.8 us for
     * 1 KiB in shared memory) */
    double fixed = INFINITY;
    for (int k = 0; k < n; k++)
        if (k == 0 || bytes[k] < CDP_NET_FIT_LARGE)
            fixed = fmin(fixed, one_way_s[k] - bytes[k] / out->bandwidth_Bps);
    fixed = fmax(0, fixed);
    out->per_message_s = fmin(fmax(gap_s, 0), fixed);
    out->latency_s = fixed - out->per_message_s;
    return 0;
}

int cdp_net_duplex_first(const double *bytes, int n)
{
    int k = 0;
    while (k < n - 1 && bytes[k] < CDP_NET_FIT_LARGE) k++;
    return k;
}

double cdp_net_duplex_share(const double *bytes, const double *exchange_s, int n,
                            const cdp_link_cost *fit)
{
    double sum = 0;
    int m = 0;
    for (int k = cdp_net_duplex_first(bytes, n); k < n; k++) {
        const double one_way = fit->latency_s + fit->per_message_s + bytes[k] / fit->bandwidth_Bps;
        if (one_way > 0) {
            sum += exchange_s[k] / one_way - 1;
            m++;
        }
    }
    return m ? fmin(1, fmax(0, sum / m)) : 0;
}
