/* What a collective costs each rank, in bytes, by the ring algorithms'
 * volume: --plan predicts with it and the communication layer counts with
 * it, so the two figures are comparable (and equal where the plan holds). */
#include "sched/schedule.h"

double cdp_sched_allreduce_bytes(int P, double n)
{
    return 2.0 * (P - 1) / P * n;
}

double cdp_sched_bcast_bytes(int P, double n)
{
    return (double)(P - 1) / P * n;
}
