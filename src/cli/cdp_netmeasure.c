/* cdp_netmeasure: the network part of a machine file (doc/reference.md
 * section 2.7), measured on the links a job really has.  Under mpirun,
 *
 *     mpirun -np P cdp_netmeasure --machine IN --machine-out OUT
 *
 * rank 0 ping-pongs with the first rank of its own host (the link inside a
 * host) and with the first rank of another host (the link between hosts),
 * at message sizes from 8 bytes to --max-bytes, and sends bursts of small
 * messages for the gap between messages; the fit (sched/net_fit.h) gives
 * each link's latency, bandwidth and per-message cost.  OUT is IN with
 * those links replaced (a link the job has no pair for keeps IN's values,
 * and IN's ranks_per_host, the job it describes, stays).  The other ranks
 * wait in a barrier meanwhile, polling as a training job's ranks would.
 * Exit status: 0, or 1 with one line naming the error. */
#include <errno.h>
#include <getopt.h>
#include <libgen.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "exec/comm.h"
#include "io/machine_file.h"
#include "sched/net_fit.h"

#define MAX_SIZES 32
#define BURST 100         /* small messages a burst: the gap is its time / BURST */

typedef struct opts {
    char in[4096], out[4096];
    int reps;
    long max_bytes;
} opts;

static const char usage[] =
"usage: mpirun -np P cdp_netmeasure --machine IN --machine-out OUT [options]\n"
"Measures the links between the job's ranks (ping-pong, 8 bytes to --max-bytes)\n"
"and writes the machine file IN (as --layer-times-out writes it) with its\n"
"network links replaced by the measured ones to OUT (doc/reference.md 2.7).\n"
"  --machine IN         the machine file to complete\n"
"  --machine-out OUT    where to write it (may be IN)\n"
"  --reps N             round trips per size from 256 KiB (default 20: N / 4,\n"
"                       at least 3); smaller sizes and the bursts get 3 N\n"
"  --max-bytes SIZE     the largest message (default 4M; K, M suffixes: 1024s)\n"
"  --help               this text\n";

static int parse_count(const char *s, long lo, long hi, int sizes, long *v)
{
    char *end;
    errno = 0;
    long x = strtol(s, &end, 10);
    if (sizes && (*end == 'K' || *end == 'M')) {
        long unit = *end == 'K' ? 1024 : 1024 * 1024;
        if (x > hi / unit) return -1;
        x *= unit;
        end++;
    }
    if (errno || end == s || *end || x < lo || x > hi) return -1;
    *v = x;
    return 0;
}

static int parse(int argc, char **argv, opts *o, char *err, size_t errlen)
{
    static const struct option lo[] = {
        { "machine", required_argument, 0, 'm' }, { "machine-out", required_argument, 0, 'o' },
        { "reps", required_argument, 0, 'r' }, { "max-bytes", required_argument, 0, 'b' },
        { "help", no_argument, 0, 'h' }, { 0, 0, 0, 0 } };
    memset(o, 0, sizeof *o);
    o->reps = 20;
    o->max_bytes = 4L << 20;
    opterr = 0;
    for (int c; (c = getopt_long(argc, argv, ":h", lo, NULL)) != -1;) {
        long v;
        switch (c) {
        case 'm': case 'o':
            if (strlen(optarg) >= sizeof o->in || !optarg[0]) {
                snprintf(err, errlen, "--%s: expected a file name", c == 'm' ? "machine" : "machine-out");
                return -1;
            }
            strcpy(c == 'm' ? o->in : o->out, optarg);
            break;
        case 'r':
            if (parse_count(optarg, 1, 100000, 0, &v)) {
                snprintf(err, errlen, "--reps: expected an integer in [1, 100000], got '%s'", optarg);
                return -1;
            }
            o->reps = (int)v;
            break;
        case 'b':
            if (parse_count(optarg, 1024, 1L << 30, 1, &v)) {
                snprintf(err, errlen, "--max-bytes: expected a size from 1K to 1024M, got '%s'", optarg);
                return -1;
            }
            o->max_bytes = v;
            break;
        case 'h': return 1;
        case ':':
            snprintf(err, errlen, "%s needs a value", argv[optind - 1]);
            return -1;
        default:
            snprintf(err, errlen, "unknown option '%s' (see --help)", argv[optind - 1]);
            return -1;
        }
    }
    if (optind < argc) {
        snprintf(err, errlen, "unexpected argument '%s' (see --help)", argv[optind]);
        return -1;
    }
    if (!o->in[0] || !o->out[0]) {
        snprintf(err, errlen, "%s FILE is needed (the machine file to complete, as --layer-times-out "
                 "writes it, and where to write it)", !o->in[0] ? "--machine" : "--machine-out");
        return -1;
    }
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The mean of the middle 80%: a training step pays the usual delays of a
 * loaded machine (a peer descheduled now and then), which a median would
 * hide, but not the odd stall of one message in a few tens. */
static double trimmed_mean(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    const int cut = n / 10;
    double s = 0;
    for (int k = cut; k < n - cut; k++) s += v[k];
    return s / (n - 2 * cut);
}

/* one-way time of `bytes` between a and b: half the round trip, a trimmed
 * mean (meaningful on a; b returns 0); exchange: both send at once
 * (MPI_Sendrecv), the time of one exchange */
static double pingpong(int me, int a, int b, char *buf, int bytes, int reps, int exchange)
{
    double *t = malloc(sizeof(double) * (size_t)reps);
    if (!t) MPI_Abort(MPI_COMM_WORLD, 1);
    for (int r = -2; r < reps; r++) {   /* two round trips to warm up the connection */
        double t0 = MPI_Wtime();
        if (exchange) {
            const int peer = me == a ? b : a;
            MPI_Sendrecv(buf, bytes, MPI_BYTE, peer, 4, buf + bytes, bytes, MPI_BYTE, peer, 4,
                         MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else if (me == a) {
            MPI_Send(buf, bytes, MPI_BYTE, b, 1, MPI_COMM_WORLD);
            MPI_Recv(buf, bytes, MPI_BYTE, b, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(buf, bytes, MPI_BYTE, a, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(buf, bytes, MPI_BYTE, a, 1, MPI_COMM_WORLD);
        }
        if (r >= 0) t[r] = (MPI_Wtime() - t0) / (exchange ? 1 : 2);
    }
    double m = trimmed_mean(t, reps);
    free(t);
    return me == a ? m : 0;
}

/* a burst of BURST 8-byte messages from a to b and b's one reply: the
 * (trimmed mean) burst, less the first message's and the reply's flight, over the
 * BURST - 1 messages that followed the first */
static double burst_gap(int me, int a, int b, char *buf, double one_way, int reps)
{
    double *t = malloc(sizeof(double) * (size_t)reps);
    if (!t) MPI_Abort(MPI_COMM_WORLD, 1);
    for (int r = -1; r < reps; r++) {
        double t0 = MPI_Wtime();
        if (me == a) {
            for (int k = 0; k < BURST; k++) MPI_Send(buf, 8, MPI_BYTE, b, 2, MPI_COMM_WORLD);
            MPI_Recv(buf, 8, MPI_BYTE, b, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            for (int k = 0; k < BURST; k++)
                MPI_Recv(buf + 8, 8, MPI_BYTE, a, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(buf, 8, MPI_BYTE, a, 3, MPI_COMM_WORLD);
        }
        if (r >= 0) t[r] = (MPI_Wtime() - t0 - 2 * one_way) / (BURST - 1);
    }
    double g = trimmed_mean(t, reps);
    free(t);
    return me == a ? g : 0;
}

/* The link between a and b, on every rank (a's figures broadcast); the
 * per-size table printed by rank 0.  0, or -1 with err (on every rank). */
static int measure(int me, int a, int b, const char *what, const opts *o, char *buf,
                   cdp_link_cost *l, char *err, size_t errlen)
{
    /* t: the one-way times by size, then the gap, then the exchanges by size */
    double bytes[MAX_SIZES], t[2 * MAX_SIZES + 1];
    int n = 0, pair = me == a || me == b, large = o->reps / 4 > 3 ? o->reps / 4 : 3;
    if (pair) pingpong(me, a, b, buf, 1024, 10, 0);   /* the connection is made on first use */
    for (long s = 8; n < MAX_SIZES; s = s < 1024 ? 1024 : s * 4) {
        if (s > o->max_bytes) s = o->max_bytes;
        bytes[n] = (double)s;
        t[n++] = pair ? pingpong(me, a, b, buf, (int)s, s >= 262144 ? large : 3 * o->reps, 0) : 0;
        if (s == o->max_bytes) break;
    }
    t[n] = pair ? burst_gap(me, a, b, buf, t[0], 3 * o->reps) : 0;
    /* both ways at once, at every size the duplex share is taken over: over
     * TCP whether Open MPI's two transfers overlap differs from one
     * exchange to the next (1.0 or 2.0 times one way), so one size is not
     * enough */
    double *x = t + n + 1;
    const int first = cdp_net_duplex_first(bytes, n);
    for (int k = 0; k < n; k++)
        x[k] = pair && k >= first
                   ? pingpong(me, a, b, buf, (int)bytes[k], bytes[k] >= 262144 ? large : 3 * o->reps, 1)
                   : 0;
    MPI_Bcast(t, 2 * n + 1, MPI_DOUBLE, a, MPI_COMM_WORLD);
    int bad = cdp_net_fit(bytes, t, n, t[n], l, err, errlen);
    l->half_duplex = bad ? 0 : cdp_net_duplex_share(bytes, x, n, l);
    if (me == 0) {
        printf("%s (ranks %d and %d): one-way time by message size; both ways at once\n", what, a, b);
        for (int k = 0; k < n; k++) {
            printf("  %10.0f bytes  %.6g s  (%.4g B/s)", bytes[k], t[k], bytes[k] / t[k]);
            if (x[k] > 0) printf("  both ways %.6g s (%.2f x one way)", x[k], x[k] / t[k]);
            printf("\n");
        }
        printf("  gap between back-to-back 8-byte messages: %.6g s\n", t[n]);
        if (!bad)
            printf("  fit: latency_s %.6g  per_message_s %.6g  bandwidth_Bps %.6g  half_duplex %.3g\n",
                   l->latency_s, l->per_message_s, l->bandwidth_Bps, l->half_duplex);
    }
    if (bad) {
        char tmp[512];
        snprintf(tmp, sizeof tmp, "%s (ranks %d and %d): %s", what, a, b, err);
        snprintf(err, errlen, "%s", tmp);
    }
    return bad ? -1 : 0;
}

/* every rank's host, as the index of the first rank with its processor name */
static int *hosts_of(int P)
{
    char name[MPI_MAX_PROCESSOR_NAME] = { 0 };
    int len;
    MPI_Get_processor_name(name, &len);
    char *all = malloc((size_t)P * MPI_MAX_PROCESSOR_NAME);
    int *host = malloc(sizeof(int) * (size_t)P);
    if (!all || !host) MPI_Abort(MPI_COMM_WORLD, 1);
    MPI_Allgather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all, MPI_MAX_PROCESSOR_NAME, MPI_CHAR,
                  MPI_COMM_WORLD);
    for (int r = 0; r < P; r++) {
        host[r] = r;
        for (int q = 0; q < r && host[r] == r; q++)
            if (!strncmp(all + (size_t)q * MPI_MAX_PROCESSOR_NAME, all + (size_t)r * MPI_MAX_PROCESSOR_NAME,
                         MPI_MAX_PROCESSOR_NAME))
                host[r] = host[q];
    }
    free(all);
    return host;
}

/* 0, or 1 with err set identically on every rank (rank 0 decides) */
static int agree(int bad, char *err, size_t errlen)
{
    MPI_Bcast(&bad, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (bad) MPI_Bcast(err, (int)errlen, MPI_CHAR, 0, MPI_COMM_WORLD);
    return bad;
}

static int run(int me, int P, const opts *o, char *err, size_t errlen)
{
    cdp_machine m;
    memset(&m, 0, sizeof m);
    int bad = 0;
    if (P < 2) {
        snprintf(err, errlen, "needs two ranks at least, to measure the link between them "
                 "(mpirun -np 2 cdp_netmeasure ...)");
        return -1;
    }
    if (me == 0) bad = cdp_machine_read(o->in, &m, err, errlen);
    if (me == 0 && !bad) {   /* an output that cannot be written: said before the measuring */
        char dir[sizeof o->out];
        memcpy(dir, o->out, sizeof dir);
        if (access(dirname(dir), W_OK | X_OK)) {
            snprintf(err, errlen, "--machine-out %s: cannot write: %s", o->out, strerror(errno));
            bad = -1;
        }
    }
    if (agree(bad, err, errlen)) return -1;
    int *host = hosts_of(P);
    int intra_a = -1, intra_b = -1, inter_b = -1;
    for (int r = 1; r < P && inter_b < 0; r++)
        if (host[r] != host[0]) inter_b = r;
    for (int a = 0; a < P && intra_b < 0; a++)   /* rank 0's host first: the lowest pair */
        for (int b = a + 1; b < P && intra_b < 0; b++)
            if (host[a] == host[b]) intra_a = a, intra_b = b;
    free(host);
    char *buf = calloc(2 * (size_t)o->max_bytes + 16, 1);
    if (!buf) MPI_Abort(MPI_COMM_WORLD, 1);
    cdp_link_cost intra, inter;
    if (intra_b >= 0)
        bad = measure(me, intra_a, intra_b, "inside a host", o, buf, &intra, err, errlen);
    MPI_Barrier(MPI_COMM_WORLD);
    if (!bad && inter_b >= 0)
        bad = measure(me, 0, inter_b, "between hosts", o, buf, &inter, err, errlen);
    free(buf);
    if (me == 0 && !bad) {
        if (intra_b >= 0) m.net.intra = intra;
        if (inter_b >= 0) m.net.inter = inter;
        FILE *f = fopen(o->out, "w");
        if (!f) {
            snprintf(err, errlen, "--machine-out %s: cannot write: %s", o->out, strerror(errno));
            bad = -1;
        } else {
            cdp_machine_write(f, &m);
            if (fclose(f)) {
                snprintf(err, errlen, "--machine-out %s: cannot write: %s", o->out, strerror(errno));
                bad = -1;
            }
        }
        if (!bad)
            printf("wrote %s: %s%s%s measured (ranks_per_host %d kept from %s)\n", o->out,
                   intra_b >= 0 ? "intra_host" : "", intra_b >= 0 && inter_b >= 0 ? " and " : "",
                   inter_b >= 0 ? "inter_host" : "", m.net.ranks_per_host, o->in);
    }
    cdp_machine_free(&m);
    return agree(bad != 0, err, errlen) ? -1 : 0;
}

int main(int argc, char **argv)
{
    cdp_comm_preinit();   /* the links as cdp_run's ranks see them */
    MPI_Init(&argc, &argv);
    int me, P;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &P);
    opts o;
    char err[8192 + 512] = { 0 };   /* room for a file name */
    int rc = parse(argc, argv, &o, err, sizeof err);
    if (rc == 1) {
        if (me == 0) fputs(usage, stdout);
        MPI_Finalize();
        return 0;
    }
    if (rc == 0) rc = run(me, P, &o, err, sizeof err);
    if (rc && me == 0) fprintf(stderr, "cdp_netmeasure: error: %s\n", err);
    MPI_Finalize();
    return rc ? 1 : 0;
}
