/* Wall-clock time for the figures cdp prints (step times, traces, the
 * watchdog, --layer-times): one monotonic clock, so that they all agree. */
#ifndef CDP_CLOCK_H
#define CDP_CLOCK_H

/* Seconds of CLOCK_MONOTONIC: differences are meaningful, the origin is not. */
double cdp_now_s(void);

#endif
