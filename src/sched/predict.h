/* --plan --machine: the step time of a schedule on a described machine,
 * by simulating its instruction lists event by event (doc/reference.md
 * section 2.7).  Each rank runs its list in order, as the executor does:
 * forwards, backwards and updates take the machine's compute times; a send
 * is posted and goes on when its link is free (and, above the eager limit,
 * once the receiver has posted its receive); the instruction that reads a
 * received buffer waits for its arrival; a send is waited for at the tick
 * the executor waits for it; a collective starts when its last rank
 * arrives and costs the alpha-beta time of the algorithm MPI runs for it.
 * No model and no MPI: the costs come in per stage. */
#ifndef CDP_PREDICT_H
#define CDP_PREDICT_H

#include <stddef.h>
#include "io/machine_file.h"
#include "sched/schedule.h"

/* What one stage costs: per micro-batch (times, activation bytes) and per
 * copy of the stage (parameter bytes, the update). */
typedef struct cdp_stage_cost {
    double fwd_s, bwd_s;     /* forward, backward of one worker */
    double update_s;         /* the optimizer's update of the stage */
    double param_bytes;      /* its parameters (= its gradient) */
    double act_bytes;        /* what a worker keeps from its forward to its backward */
    double out_bytes;        /* its output (model-parallel: sent to the next stage) */
    double in_bytes;         /* its input's gradient (sent to the previous stage) */
} cdp_stage_cost;

typedef struct cdp_prediction {
    int ranks;
    double segment_s;        /* the K steps of the schedule, fill and drain, and the start cost */
    double step_s;           /* segment_s / K: what cdp_run's step_time_s measures */
    double period_s;         /* rank 0's step period (K >= 2; else step_s) */
    double compute_s;        /* the busiest rank's compute, per step */
    double link_busy_s;      /* the busiest link's transfer time, per step */
    double link_peak_bytes;  /* the busiest link in its busiest tick */
    double act_peak_bytes;   /* activations, the most one rank holds */
    double state_bytes;      /* parameters, optimizer state, gradient buffers: the most one rank holds */
    const char *collective;  /* the all-reduce algorithm used, or NULL */
} cdp_prediction;

/* The alpha-beta time of cdp's all-reduce of n bytes over S ranks placed
 * in contiguous blocks of net->ranks_per_host, first rank `first`: its
 * ring, 2 (S - 1) steps of n / S bytes, each an exchange on the slowest
 * link it uses; *algo says so. */
double cdp_allreduce_time(int S, int first, double n, const cdp_network *net, const char **algo);
/* MPI_Bcast / MPI_Reduce: a binomial tree, ceil(log2 S) rounds. */
double cdp_tree_time(int S, int first, double n, const cdp_network *net);

/* Simulates the schedule of c (all ranks, K = c->K steps) with the costs
 * st[0..L) on net; opt_buffers: optimizer state floats per parameter;
 * start_s: what the job's first segment costs beyond the simulated one
 * (added to segment_s once: a job of one segment).
 * 0, or -1 with one line in err (too big, out of memory). */
int cdp_predict(const cdp_sched_config *c, const cdp_stage_cost *st, const cdp_network *net,
                int opt_buffers, double start_s, cdp_prediction *p, char *err, size_t errlen);

#endif
