/* The schedule: a pure function from (N workers, L stages, P ranks, rule,
 * framework, K steps) to one instruction list per rank.  No MPI, no model:
 * it can be printed, checked and measured for N and L far beyond a machine.
 *
 * Timeline (doc/reference.md section 2): worker i of step s starts at tick
 * 2L*s + offset(i); its forward of stage l runs at start + l and its
 * backward of stage l at start + 2L-1-l.  A segment of K steps ends with a
 * drain at tick `nticks`, where every remaining gradient is applied.
 *
 * Versions and steps in instructions are relative to the segment: the
 * executor adds the segment's first step k0.  Version v of a stage means
 * its parameters after v updates, P_l(k0 + v); a relative version of -1 is
 * P_l(k0 - 1) (P_l(0) when k0 = 0). */
#ifndef CDP_SCHEDULE_H
#define CDP_SCHEDULE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef enum { CDP_RULE_DP = 0, CDP_RULE_CDP_V1, CDP_RULE_CDP_V2 } cdp_rule;
typedef enum { CDP_FW_REPLICATED = 0, CDP_FW_MODEL_PARALLEL, CDP_FW_ZERO } cdp_framework;

typedef enum {
    CDP_OP_FWD = 0,     /* forward of (worker, stage) at version */
    CDP_OP_BWD,         /* backward of (worker, stage) at version; gradient into the stage's
                         * scratch, or with CDP_F_FIRST straight into the accumulator */
    CDP_OP_ACC,         /* stage accumulator += scratch; CDP_F_FIRST: nothing left to do */
    CDP_OP_SEND_GRAD,   /* partial sum of (stage, step) -> peer (next rank on the worker ring) */
    CDP_OP_RECV_GRAD,   /* post the receive of the partial sum of (stage, step) from peer */
    CDP_OP_FINALIZE,    /* full gradient of (stage, step) = the accumulated sum (APPLY scales by 1/N) */
    CDP_OP_SEND_FULL,   /* full gradient of (stage, step) -> peer */
    CDP_OP_RECV_FULL,   /* post the receive of the full gradient of (stage, step) from peer */
    CDP_OP_ALLREDUCE,   /* dp: MPI_Allreduce of every accumulator of step, then finalize all */
    CDP_OP_APPLY,       /* SGD on stage: version-1 -> version, with the full gradient of step version-1 */
    CDP_OP_SEND_ACT,    /* model-parallel: output of (worker, stage) -> peer */
    CDP_OP_RECV_ACT,    /* model-parallel: input of (worker, stage) from peer */
    CDP_OP_SEND_DACT,   /* model-parallel: d input of (worker, stage) -> peer */
    CDP_OP_RECV_DACT,   /* model-parallel: d output of (worker, stage) from peer */
    CDP_OP_SEND_PARAMS, /* zero: parameters of (stage, version) -> peer */
    CDP_OP_RECV_PARAMS, /* zero: post the receive of the parameters of (stage, version) */
    CDP_OP_BCAST_PARAMS,/* zero dp: MPI_Bcast of (stage, version) from peer (the owner) */
    CDP_OP_REDUCE_GRAD, /* zero dp: MPI_Reduce of the accumulator of (stage, step) to peer (the owner) */
    CDP_OP_DROP_PARAMS, /* zero: release the non-owned copy of (stage, version) */
    CDP_OP_COUNT
} cdp_opcode;

#define CDP_F_FIRST 1   /* BWD, ACC: the first contribution to the stage's sum */
#define CDP_F_LAST  2   /* SEND_FULL: the last send of this full gradient */
#define CDP_F_LAST_USE 4 /* FWD, BWD: the last read of this version of the stage on this rank;
                          * the segment overwrites its slot with version+2 later */

typedef struct cdp_instr {
    int32_t tick;
    uint8_t op;
    uint8_t flags;
    int16_t stage;
    int32_t worker;     /* -1 when not about one worker */
    int32_t peer;       /* rank of the other side, -1 when none */
    int32_t step;       /* relative step this instruction belongs to */
    int32_t version;    /* relative parameter version (FWD, BWD, APPLY, *_PARAMS) */
    int32_t due;        /* sends: the tick at which the peer posts the matching receive */
} cdp_instr;

typedef struct cdp_sched_config {
    int N;              /* workers (micro-batches per step) */
    int L;              /* stages */
    int P;              /* ranks */
    cdp_rule rule;
    cdp_framework framework;
    int deterministic;  /* dp: ring reduction in worker order instead of MPI_Allreduce */
    int K;              /* steps in the segment */
} cdp_sched_config;

typedef struct cdp_program {
    cdp_instr *ins;
    size_t n, cap;
} cdp_program;

typedef struct cdp_schedule {
    cdp_sched_config cfg;
    int nticks;             /* ticks 0 .. nticks-1; the drain is at tick nticks */
    int ranks_needed;       /* ranks the schedule uses */
    cdp_program *prog;      /* [P]; only the built ranks are filled */
    int *worker_rank;       /* [N]: rank of each worker (replicated, zero) */
    int *stage_owner;       /* [L]: rank owning each stage (zero) */
    int *slot_rank;         /* [N*L]: rank of (worker, stage) (model-parallel), index i*L + l */
} cdp_schedule;

const char *cdp_rule_name(cdp_rule r);
const char *cdp_framework_name(cdp_framework f);
int cdp_rule_parse(const char *s, cdp_rule *r);
int cdp_framework_parse(const char *s, cdp_framework *f);
const char *cdp_opcode_name(int op);

/* offset(i): 0 for dp, floor(i*2L/N) for cdp-v1/v2. */
int cdp_offset(int N, int L, cdp_rule rule, int i);
/* lag(i, l) of doc/reference.md section 3.1: 0 or 1. */
int cdp_lag(int N, int L, cdp_rule rule, int i, int l);

/* Ranks the configuration needs (model-parallel depends on N, L, rule;
 * replicated and zero use P). */
int cdp_schedule_ranks_needed(const cdp_sched_config *c);

/* Builds the programs of rank `only_rank` (or of every rank when -1).
 * Returns 0, or -1 with one line in err (e.g. too few ranks). */
int cdp_schedule_build(const cdp_sched_config *c, int only_rank, cdp_schedule *s,
                       char *err, size_t errlen);
void cdp_schedule_free(cdp_schedule *s);

/* Whether rank r keeps stage l's parameters (and optimizer state) between
 * uses: every rank under replicated, the ranks of the stage under
 * model-parallel, the owner under zero. */
int cdp_schedule_holds(const cdp_schedule *s, int r, int l);

/* The SEND_FULLs of program p (a schedule of L stages) that pass on a full
 * sum the rank received: recv_of[k] is, for such an instruction k, the
 * index of its RECV_FULL (the same stage and step, before it); SIZE_MAX
 * for every other instruction.  The executor posts them as soon as the
 * receive completes; the simulator does the same. */
void cdp_program_forwards(const cdp_program *p, int L, size_t *recv_of);
/* Whether rank r both starts stage l's gradient sum (worker 0) and finalizes
 * it (worker N-1): its update then comes before the next step's first
 * backward of l, which can reuse the gradient buffer the update read. */
int cdp_schedule_sum_is_local(const cdp_schedule *s, int r, int l);

/* One instruction as text, e.g. "t=12 BWD w=2 l=0 v=1". */
void cdp_instr_format(const cdp_instr *in, char *buf, size_t len);
/* The whole program of a rank, one instruction a line. */
void cdp_schedule_dump(FILE *f, const cdp_schedule *s, int rank);

/* Bytes one rank is counted for in a collective of n bytes over P ranks
 * (the ring algorithms' volume): one formula for --plan's figures and the
 * measured counters (src/sched/traffic.c). */
double cdp_sched_allreduce_bytes(int P, double n);
double cdp_sched_bcast_bytes(int P, double n);   /* also MPI_Reduce */

/* Internal: append one instruction to a program (used by the builders). */
void cdp_program_push(cdp_program *p, cdp_instr in);

#endif
