/* --plan --machine's simulator (src/sched/predict.c) and machine file
 * (src/io/machine_file.c) against cases computed by hand. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "io/machine_file.h"
#include "sched/net_fit.h"
#include "sched/predict.h"
#include "../lib/check_run.h"

/* one rank per host; alpha 0 unless given; 1e6 bytes a second */
static cdp_network net1(double alpha)
{
    return (cdp_network){ 1, { alpha, 1e6, 0, 0 }, { alpha, 1e6, 0, 0 } };
}

static cdp_prediction run(int N, int L, int P, cdp_rule rule, int K, const cdp_stage_cost *st,
                          const cdp_network *net)
{
    cdp_sched_config c = { N, L, P, rule, CDP_FW_REPLICATED, 0, K };
    cdp_prediction p;
    char err[256];
    ck_assert_msg(cdp_predict(&c, st, net, 1, 0, &p, err, sizeof err) == 0, "%s", err);
    return p;
}

/* one stage, one worker, one rank: forward, backward, update */
START_TEST(one_worker_one_stage)
{
    cdp_stage_cost st = { 1.0, 2.0, 0.5, 4e6, 100, 0, 0 };
    cdp_network n = net1(0);
    for (int rule = 0; rule < 3; rule++) {
        cdp_prediction p = run(1, 1, 1, (cdp_rule)rule, 1, &st, &n);
        ck_assert_double_eq(p.step_s, 3.5);
        ck_assert_double_eq(p.compute_s, 3.5);
        ck_assert_double_eq(p.link_busy_s, 0);
        ck_assert_double_eq(p.act_peak_bytes, 100);
        /* dp on one rank: parameters, momentum, one gradient block */
        if (rule == CDP_RULE_DP) ck_assert_double_eq(p.state_bytes, 3 * 4e6);
    }
}
END_TEST

/* the start cost: paid once, by the job's first segment.  One worker, one
 * stage, 2 steps of 1 + 2 + 0.5 s: segment 7 s, with a start of 1 s 8 s,
 * a step 4 s (not 3.5 + 1: it is not a cost per step); the period, rank
 * 0's time from its first step's first tick to its second's (3 s: the
 * update runs in the second step's first tick), does not include it */
START_TEST(start_cost_by_hand)
{
    cdp_stage_cost st = { 1.0, 2.0, 0.5, 4e6, 100, 0, 0 };
    cdp_network n = net1(0);
    cdp_sched_config c = { 1, 1, 1, CDP_RULE_DP, CDP_FW_REPLICATED, 0, 2 };
    cdp_prediction p;
    char err[256];
    ck_assert_int_eq(cdp_predict(&c, &st, &n, 1, 1.0, &p, err, sizeof err), 0);
    ck_assert_double_eq_tol(p.segment_s, 8.0, 1e-12);
    ck_assert_double_eq_tol(p.step_s, 4.0, 1e-12);
    ck_assert_double_eq_tol(p.period_s, 3.0, 1e-12);
    ck_assert_double_eq_tol(p.compute_s, 3.5, 1e-12);
}
END_TEST

/* cdp's all-reduce, its own ring: 2 (S - 1) steps of n/S bytes, each an
 * exchange (a + o + (1 + h) n/S b) on the slowest link it uses; with
 * several ranks a host, a step uses the host links and shared memory */
START_TEST(allreduce_by_hand)
{
    cdp_network n = net1(1e-3);
    const char *algo;
    /* S = 2: reduce-scatter and all-gather, one step each of 0.001 + 0.5 */
    ck_assert_double_eq_tol(cdp_allreduce_time(2, 0, 1e6, &n, &algo), 1.002, 1e-12);
    ck_assert_str_eq(algo, "ring (reduce-scatter + all-gather)");
    /* S = 4, 3, 5: 6 steps of 0.001 + 0.25, 4 of 0.001 + 1/3, 8 of 0.001 + 0.2 */
    ck_assert_double_eq_tol(cdp_allreduce_time(4, 0, 1e6, &n, &algo), 1.506, 1e-12);
    ck_assert_double_eq_tol(cdp_allreduce_time(3, 0, 1e6, &n, &algo), 4 * (0.001 + 1.0 / 3), 1e-12);
    ck_assert_double_eq_tol(cdp_allreduce_time(5, 0, 1e6, &n, &algo), 1.608, 1e-12);
    /* small messages: S = 4, 1000 bytes: 6 (0.001 + 0.00025) */
    ck_assert_double_eq_tol(cdp_allreduce_time(4, 0, 1e3, &n, &algo), 0.0075, 1e-12);
    /* 2 ranks per host, shared memory 10x faster: S = 4 on 2 hosts, a step
     * costs the host link's 0.001 + 0.25 (shared memory's 1e-4 + 0.025 goes
     * beside it); S = 2 inside one host: 2 steps of 1e-4 + 0.05 */
    cdp_network h2 = { 2, { 1e-4, 1e7, 0, 0 }, { 1e-3, 1e6, 0, 0 } };
    ck_assert_double_eq_tol(cdp_allreduce_time(4, 0, 1e6, &h2, &algo), 1.506, 1e-12);
    ck_assert_double_eq_tol(cdp_allreduce_time(2, 0, 1e6, &h2, &algo), 0.1002, 1e-12);
    /* binomial tree (MPI_Bcast, MPI_Reduce), S = 4: two rounds of 0.001 + 1 */
    ck_assert_double_eq_tol(cdp_tree_time(4, 0, 1e6, &n), 2.002, 1e-12);
    ck_assert_double_eq(cdp_allreduce_time(1, 0, 1e6, &n, &algo), 0);
}
END_TEST

/* dp on 2 ranks, one worker each: forward, backward, the all-reduce of the
 * 1e6 bytes (1.002 s, above), the update */
START_TEST(dp_two_ranks)
{
    cdp_stage_cost st = { 1.0, 2.0, 0.5, 1e6, 0, 0, 0 };
    cdp_network n = net1(1e-3);
    cdp_prediction p = run(2, 1, 2, CDP_RULE_DP, 1, &st, &n);
    ck_assert_double_eq_tol(p.step_s, 1 + 2 + 1.002 + 0.5, 1e-12);
    ck_assert_str_eq(p.collective, "ring (reduce-scatter + all-gather)");
    /* each rank counts 2(P-1)/P of the bytes */
    ck_assert_double_eq(p.link_peak_bytes, 1e6);
}
END_TEST

/* cdp-v1, N = 2 workers on 2 ranks, 1 stage, 2 steps; forward = backward =
 * 1 s, every transfer 1 s (1e6 bytes at 1e6 B/s, no latency).  Rank 0
 * (worker 0): F [0,1] B [1,2] sends G0; F [2,3] B [3,4] sends G1.  Rank 1:
 * F [0,1]; its B waits for G0 (arrives 3): [3,4], sends the full sum S0 to
 * rank 0; F [4,5]; G1 (sent at 4, its receive posted at 5) arrives 6;
 * B [6,7], sends S1, which arrives at 8: rank 0's last update waits for it.
 * Four transfers, but S0 goes while both ranks compute: the segment is
 * 4 + 3 transfers + 1 = 8, not 9. */
START_TEST(overlap_by_hand)
{
    cdp_stage_cost st = { 1.0, 1.0, 0.0, 1e6, 0, 0, 0 };
    cdp_network n = net1(0);
    cdp_prediction p = run(2, 1, 2, CDP_RULE_CDP_V1, 2, &st, &n);
    ck_assert_double_eq_tol(p.segment_s, 8.0, 1e-12);
    ck_assert_double_eq_tol(p.step_s, 4.0, 1e-12);
    ck_assert_double_eq_tol(p.compute_s, 2.0, 1e-12);
    /* a free network: the compute alone, rank 1 one tick behind */
    cdp_network fast = { 1, { 0, 1e15, 0, 0 }, { 0, 1e15, 0, 0 } };
    p = run(2, 1, 2, CDP_RULE_CDP_V1, 2, &st, &fast);
    ck_assert_double_eq_tol(p.segment_s, 5.0, 1e-6);
}
END_TEST

/* the per-message cost o: the case above with o = 0.5 s on every message.
 * Its critical path is rank 0's F B [0,2], G0, rank 1's B, S0 (which rank
 * 1 waits for before the tick that receives G1), G1, rank 1's B, S1: 8 s
 * with o = 0 (the case above), four transfers of 1 + 0.5 s here: 10 s
 * (S0 sent at 4.5, arrives 6 > 5.5, the end of rank 1's F).  The collectives:
 * every step of the ring and every round of the trees a + o + n/b */
START_TEST(per_message_by_hand)
{
    cdp_stage_cost st = { 1.0, 1.0, 0.0, 1e6, 0, 0, 0 };
    cdp_network n = net1(0);
    n.intra.per_message_s = n.inter.per_message_s = 0.5;
    cdp_prediction p = run(2, 1, 2, CDP_RULE_CDP_V1, 2, &st, &n);
    ck_assert_double_eq_tol(p.segment_s, 10.0, 1e-12);
    cdp_network c = net1(1e-3);
    c.inter.per_message_s = 0.5e-3;
    ck_assert_double_eq_tol(cdp_allreduce_time(2, 0, 1e6, &c, NULL), 2 * 0.5015, 1e-12);
    ck_assert_double_eq_tol(cdp_allreduce_time(4, 0, 1e6, &c, NULL), 6 * 0.2515, 1e-12);
    /* 1000 bytes, S = 4: 6 (0.001 + 0.0005 + 0.00025) */
    ck_assert_double_eq_tol(cdp_allreduce_time(4, 0, 1e3, &c, NULL), 0.0105, 1e-12);
    ck_assert_double_eq_tol(cdp_tree_time(4, 0, 1e6, &c), 2.003, 1e-12);
}
END_TEST

/* A half-duplex link carries one direction at a time: the ring's steps
 * are exchanges, each 1 + h times one way (a + (1 + h)(o + n/b)); the
 * trees' rounds send one way, and it does not slow them */
START_TEST(half_duplex_by_hand)
{
    cdp_network c = net1(1e-3);
    c.inter.per_message_s = 0.5e-3;
    c.inter.half_duplex = 1;
    ck_assert_double_eq_tol(cdp_allreduce_time(2, 0, 1e6, &c, NULL), 2 * (0.001 + 2 * 0.5005), 1e-12);
    ck_assert_double_eq_tol(cdp_tree_time(4, 0, 1e6, &c), 2.003, 1e-12);
    /* dp on 2 ranks (dp_two_ranks): forward, backward, the all-reduce, the update */
    cdp_stage_cost st = { 1.0, 2.0, 0.5, 1e6, 0, 0, 0 };
    cdp_prediction p = run(2, 1, 2, CDP_RULE_DP, 1, &st, &c);
    ck_assert_double_eq_tol(p.step_s, 1 + 2 + 2.004 + 0.5, 1e-12);
    /* inside a host: the same on the shared-memory link */
    cdp_network h = { 2, { 1e-3, 1e6, 0.5e-3, 1 }, { 1, 1, 0, 0 } };
    ck_assert_double_eq_tol(cdp_allreduce_time(2, 0, 1e6, &h, NULL), 2.004, 1e-12);
}
END_TEST

/* A link with a half_duplex share h: the other direction is held for h of
 * a message's time, so an exchange takes (1 + h) times one way.  dp on 2
 * ranks, 2 steps of forward 1 s, backward 1 s and the all-reduce of 1e6
 * bytes at 1e6 B/s (the ring: 2 exchanges of 0.5e6 bytes, (1 + h) s):
 * 2 (3 + h) s.  cdp-v1 on 2 stages sends point to point (the simulation's transfers):
 * h = 0 and h = 1 bound it, and h = 0.5 adds half of what the directions
 * taking turns add. */
START_TEST(duplex_share_by_hand)
{
    cdp_stage_cost st[2] = { { 1.0, 1.0, 0.0, 1e6, 0, 0, 0 }, { 1.0, 1.0, 0.0, 1e6, 0, 0, 0 } };
    const double h[3] = { 0, 0.5, 1 };
    double seg[3];
    for (int k = 0; k < 3; k++) {
        cdp_network n = net1(0);
        n.inter.half_duplex = n.intra.half_duplex = h[k];
        ck_assert_double_eq_tol(run(2, 1, 2, CDP_RULE_DP, 2, st, &n).segment_s, 6 + 2 * h[k], 1e-12);
        seg[k] = run(2, 2, 2, CDP_RULE_CDP_V1, 2, st, &n).segment_s;
    }
    ck_assert_double_gt(seg[2], seg[0]);
    ck_assert_double_eq_tol(seg[1], 0.5 * (seg[0] + seg[2]), 1e-12);
}
END_TEST

/* cdp_netmeasure's duplex share: the mean over the sizes of 64 KiB and
 * more of exchange / (the fitted link's one-way time) - 1 (smaller sizes,
 * eager, do not count), clamped to [0, 1]; with no large size the largest
 * one alone.  Link: a + o = 1e-5 s, 1e8 B/s: 65536 B 6.636e-4 s, 1 MiB
 * 1.049576e-2 s one way. */
START_TEST(duplex_share_of_measurements)
{
    const cdp_link_cost l = { 0.6e-5, 1e8, 0.4e-5, 0 };
    double bytes[4] = { 8, 1024, 65536, 1048576 };
    double ex[4] = { 9, 9, 1.2 * 6.6536e-4, 1.8 * 1.049576e-2 };   /* 0.2 and 0.8 */
    ck_assert_double_eq_tol(cdp_net_duplex_share(bytes, ex, 4, &l), 0.5, 1e-12);
    ex[2] *= 5;
    ex[3] *= 5;
    ck_assert_double_eq(cdp_net_duplex_share(bytes, ex, 4, &l), 1);
    ex[2] = 0.9 * 6.6536e-4;
    ex[3] = 0.9 * 1.049576e-2;
    ck_assert_double_eq(cdp_net_duplex_share(bytes, ex, 4, &l), 0);
    double ex2[2] = { 0, 1.5 * (1e-5 + 1024 / 1e8) };
    ck_assert_double_eq_tol(cdp_net_duplex_share(bytes, ex2, 2, &l), 0.5, 1e-12);
}
END_TEST

/* cdp_netmeasure's fit: times made from a = 1e-5 s, o = 2e-6 s and
 * b = 1e8 B/s (t = a + o + bytes/b) give them back; the bandwidth comes
 * from the sizes of 64 KiB and more only (the 1 KiB time, off the line,
 * does not move it); the fixed cost is the least the small sizes leave;
 * a gap longer than the small message's time is cut to it (latency 0);
 * too few sizes, or times that do not grow, are refused */
START_TEST(net_fit_by_hand)
{
    const double a = 1e-5, o = 2e-6, b = 1e8;
    double bytes[4] = { 8, 1024, 65536, 1048576 }, t[4];
    for (int k = 0; k < 4; k++) t[k] = a + o + bytes[k] / b;
    t[1] *= 3;   /* the eager protocol's copies: not on the line */
    cdp_link_cost l;
    char err[256];
    ck_assert_int_eq(cdp_net_fit(bytes, t, 4, o, &l, err, sizeof err), 0);
    ck_assert_double_eq_tol(l.bandwidth_Bps, b, 1e-3);
    ck_assert_double_eq_tol(l.per_message_s, o, 1e-15);
    ck_assert_double_eq_tol(l.latency_s, a, 1e-15);
    ck_assert_int_eq(cdp_net_fit(bytes, t, 4, 1.0, &l, err, sizeof err), 0);
    ck_assert_double_eq_tol(l.per_message_s, a + o, 1e-15);
    ck_assert_double_eq(l.latency_s, 0);
    /* the 8-byte time caught by a load spike (50 times its own): the fixed
     * cost comes from the 1 KiB time, 3(a + o + 1024/b) - 1024/b */
    double spike[4] = { 50 * t[0], t[1], t[2], t[3] };
    ck_assert_int_eq(cdp_net_fit(bytes, spike, 4, o, &l, err, sizeof err), 0);
    ck_assert_double_eq_tol((l.per_message_s + l.latency_s), (3 * (a + o) + 2 * 1024 / b), 1e-15);
    ck_assert_double_eq_tol(l.per_message_s, o, 1e-15);
    ck_assert_int_eq(cdp_net_fit(bytes, t, 1, o, &l, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "two message sizes"));
    double flat[4] = { 1e-3, 1e-3, 1e-3, 1e-3 };
    ck_assert_int_eq(cdp_net_fit(bytes, flat, 4, o, &l, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "do not grow"));
}
END_TEST

/* one large size whose round trips a busy machine stretched (7 ms more at
 * 128 KiB) does not move the bandwidth: the median of the slopes between
 * the five large sizes is still b (a least-squares slope gives 1.43e8) */
START_TEST(net_fit_one_size_delayed)
{
    const double a = 1e-5, b = 1e8;
    double bytes[7] = { 8, 1024, 65536, 131072, 262144, 524288, 1048576 }, t[7];
    for (int k = 0; k < 7; k++) t[k] = a + bytes[k] / b;
    t[3] += 7e-3;
    cdp_link_cost l;
    char err[256];
    ck_assert_int_eq(cdp_net_fit(bytes, t, 7, 0, &l, err, sizeof err), 0);
    ck_assert_double_eq_tol(l.bandwidth_Bps / b, 1.0, 1e-9);
}
END_TEST

/* cluster scale: N = L = P = 1024 is simulated (instruction lists of every
 * rank, 2 steps), and cdp's activation peak per rank is dp's or less */
START_TEST(thousand_ranks)
{
    cdp_stage_cost *st = calloc(1024, sizeof *st);
    for (int l = 0; l < 1024; l++)
        st[l] = (cdp_stage_cost){ 1e-4, 2e-4, 1e-5, 4e4, 1e5, 1e4, 1e4 };
    cdp_network n = { 8, { 1e-6, 1e10, 0, 0 }, { 5e-6, 2.5e10, 0, 0 } };
    cdp_prediction p = run(1024, 1024, 1024, CDP_RULE_CDP_V2, 2, st, &n);
    cdp_prediction d = run(1024, 1024, 1024, CDP_RULE_DP, 2, st, &n);
    ck_assert(p.step_s > 0.3 && isfinite(p.step_s));   /* 1024 x 3e-4 s of compute a step */
    ck_assert(d.step_s > 0.3 && isfinite(d.step_s));
    ck_assert(p.act_peak_bytes <= d.act_peak_bytes);
    free(st);
}
END_TEST

static char path[64];

static const char *machine_text(const char *text)
{
    snprintf(path, sizeof path, "/tmp/test_predict.%d.json", (int)getpid());
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
    return path;
}

#define NET "\"network\": {\"ranks_per_host\": 2, \"intra_host\": {\"latency_s\": 1e-6, " \
            "\"bandwidth_Bps\": 5e9}, \"inter_host\": {\"latency_s\": 5e-5, \"bandwidth_Bps\": 1.25e8}}"

START_TEST(machine_file_round_trip)
{
    cdp_machine m;
    char err[256];
    ck_assert_int_eq(cdp_machine_read(machine_text(
        "{\"format\": \"cdp-machine-1\", \"compute\": {\"model\": \"mlp:4-2\", \"input\": [1, 1, 4], "
        "\"batch\": 8, \"loss_s\": 0.5, \"layers\": [{\"index\": 1, \"fwd_s\": 0.25, \"bwd_s\": 0.75}], "
        "\"update_s_per_param\": 1e-9, \"start_s\": 0.125}, " NET "}"), &m, err, sizeof err), 0);
    ck_assert_double_eq(m.start_s, 0.125);
    ck_assert_int_eq(m.nlayers, 2);
    ck_assert_double_eq(m.fwd_s[1], 0.25);
    ck_assert_double_eq(m.bwd_s[0], 0);
    ck_assert_int_eq(m.net.ranks_per_host, 2);
    ck_assert_double_eq(m.net.inter.bandwidth_Bps, 1.25e8);
    ck_assert_double_eq(m.net.inter.half_duplex, 0);
    m.net.inter.half_duplex = 0.375;
    FILE *f = fopen(path, "w");
    cdp_machine_write(f, &m);
    fclose(f);
    cdp_machine back;
    ck_assert_int_eq(cdp_machine_read(path, &back, err, sizeof err), 0);
    ck_assert_double_eq(back.bwd_s[1], 0.75);
    ck_assert_double_eq(back.loss_s, 0.5);
    ck_assert_double_eq(back.start_s, 0.125);
    ck_assert_double_eq(back.net.inter.half_duplex, 0.375);
    ck_assert_str_eq(back.model, "mlp:4-2");
    cdp_machine_free(&m);
    cdp_machine_free(&back);
    /* files written when half_duplex was true or false: 1 and 0 */
    ck_assert_int_eq(cdp_machine_read(machine_text(
        "{\"format\": \"cdp-machine-1\", \"compute\": {\"flops_per_s\": 1e10, \"update_s_per_param\": 0}, "
        "\"network\": {\"ranks_per_host\": 1, \"intra_host\": {\"latency_s\": 0, \"bandwidth_Bps\": 1, "
        "\"half_duplex\": false}, \"inter_host\": {\"latency_s\": 0, \"bandwidth_Bps\": 1, "
        "\"half_duplex\": true}}}"), &m, err, sizeof err), 0);
    ck_assert_double_eq(m.net.intra.half_duplex, 0);
    ck_assert_double_eq(m.net.inter.half_duplex, 1);
    cdp_machine_free(&m);
    unlink(path);
}
END_TEST

/* each bad file: -1 and one line naming the file and what is wrong */
START_TEST(bad_machine_files)
{
    static const struct { const char *text, *says; } bad[] = {
        { "", "not JSON" },
        { "{\"format\": \"cdp-machine-1\", \"compute\": {\"flops_per_s\": 1e10, "
          "\"update_s_per_param\": 0}}", "missing \"network\"" },
        { "{\"format\": \"cdp-machine-2\"}", "\"format\" must be" },
        { "{\"format\": \"cdp-machine-1\", \"compute\": {\"update_s_per_param\": 0}, " NET "}",
          "needs \"layers\"" },
        { "{\"format\": \"cdp-machine-1\", \"compute\": {\"flops_per_s\": 1e10, "
          "\"update_s_per_param\": 0, \"flop_per_s\": 1}, " NET "}", "unknown key \"flop_per_s\"" },
        { "{\"format\": \"cdp-machine-1\", \"compute\": {\"flops_per_s\": -1, "
          "\"update_s_per_param\": 0}, " NET "}", "compute.flops_per_s: -1 is out of range" },
        { "{\"format\": \"cdp-machine-1\", \"compute\": {\"flops_per_s\": 1e10, "
          "\"update_s_per_param\": 0, \"start_s\": -0.5}, " NET "}", "compute.start_s: -0.5 is out of range" },
        { "{\"format\": \"cdp-machine-1\", \"compute\": {\"flops_per_s\": 1e10, "
          "\"update_s_per_param\": 0}, \"network\": {\"ranks_per_host\": 1, \"intra_host\": "
          "{\"latency_s\": 0, \"bandwidth_Bps\": 0}, \"inter_host\": {\"latency_s\": 0, "
          "\"bandwidth_Bps\": 1}}}", "network.intra_host.bandwidth_Bps" },
        { "{\"format\": \"cdp-machine-1\", \"compute\": {\"model\": \"m\", \"input\": [1, 1, 1], "
          "\"batch\": 1, \"loss_s\": 0, \"layers\": [{\"index\": 0, \"fwd_s\": 1, \"bwd_s\": 1}, "
          "{\"index\": 0, \"fwd_s\": 1, \"bwd_s\": 1}], \"update_s_per_param\": 0}, " NET "}",
          "layer 0 given twice" },
        { "{\"format\": \"cdp-machine-1\", \"format\": \"cdp-machine-1\"}", "given twice" },
        { "{\"format\": \"cdp-machine-1\", \"compute\": {\"flops_per_s\": 1e10, "
          "\"update_s_per_param\": 0}, \"network\": {\"ranks_per_host\": 1, \"intra_host\": "
          "{\"latency_s\": 0, \"bandwidth_Bps\": 1, \"half_duplex\": 1.5}, \"inter_host\": "
          "{\"latency_s\": 0, \"bandwidth_Bps\": 1}}}", "intra_host.half_duplex: 1.5 is out of range" },
        { "{\"format\": \"cdp-machine-1\", \"compute\": {\"flops_per_s\": 1e10, "
          "\"update_s_per_param\": 0}, \"network\": {\"ranks_per_host\": 1, \"intra_host\": "
          "{\"latency_s\": 0, \"bandwidth_Bps\": 1}, \"inter_host\": {\"latency_s\": 0, "
          "\"bandwidth_Bps\": 1, \"half_duplex\": \"yes\"}}}", "inter_host.half_duplex: expected a number" },
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        cdp_machine m;
        char err[256] = "";
        ck_assert_int_eq(cdp_machine_read(machine_text(bad[k].text), &m, err, sizeof err), -1);
        ck_assert_msg(strstr(err, bad[k].says) && strstr(err, path) && !strchr(err, '\n'),
                      "case %zu: '%s'", k, err);
    }
    cdp_machine m;
    char err[256];
    ck_assert_int_eq(cdp_machine_read("/nonexistent/m.json", &m, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "cannot open"));
    unlink(path);
}
END_TEST

int main(void)
{
    Suite *su = suite_create("predict");
    TCase *tc = tcase_create("predict");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, one_worker_one_stage);
    tcase_add_test(tc, start_cost_by_hand);
    tcase_add_test(tc, allreduce_by_hand);
    tcase_add_test(tc, dp_two_ranks);
    tcase_add_test(tc, overlap_by_hand);
    tcase_add_test(tc, per_message_by_hand);
    tcase_add_test(tc, half_duplex_by_hand);
    tcase_add_test(tc, duplex_share_by_hand);
    tcase_add_test(tc, duplex_share_of_measurements);
    tcase_add_test(tc, net_fit_by_hand);
    tcase_add_test(tc, net_fit_one_size_delayed);
    tcase_add_test(tc, thousand_ranks);
    tcase_add_test(tc, machine_file_round_trip);
    tcase_add_test(tc, bad_machine_files);
    suite_add_tcase(su, tc);
    int failed = check_run(su);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
