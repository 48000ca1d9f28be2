/* Before the first step: the hosts of the job, one numerics identity for
 * all its ranks, and options that differ named (run/preflight.h). */
#include <stdlib.h>
#include <string.h>
#include "config.h"
#include "run/preflight.h"

void cdp_preflight_identity(const char *backend_numerics, char *buf, size_t len)
{
    snprintf(buf, len, "%s\nbuild: cdp %s, %s %s, CFLAGS %s", backend_numerics, PACKAGE_VERSION,
#if defined(__clang__)
             "clang",
#elif defined(__GNUC__)
             "gcc",
#else
             "cc",
#endif
             __VERSION__, CDP_BUILD_CFLAGS);
}

void cdp_rank_list(const unsigned char *in, int n, char *buf, size_t len)
{
    size_t at = 0;
    buf[0] = '\0';
    for (int r = 0; r < n && at < len; r++) {
        if (!in[r])
            continue;
        int e = r;
        while (e + 1 < n && in[e + 1])
            e++;
        int w = e > r ? snprintf(buf + at, len - at, "%s%d-%d", at ? "," : "", r, e)
                      : snprintf(buf + at, len - at, "%s%d", at ? "," : "", r);
        if (w < 0)
            break;
        at += (size_t)w;
        r = e;
    }
}

/* The value of `field` in an identity ("field: value" lines) into val;
 * "(none)" when it has no such line. */
static void field_value(const char *identity, const char *field, char *val, size_t len)
{
    size_t fl = strlen(field);
    for (const char *l = identity; l && *l;) {
        const char *end = strchr(l, '\n');
        size_t ll = end ? (size_t)(end - l) : strlen(l);
        if (ll > fl + 1 && !strncmp(l, field, fl) && l[fl] == ':' && l[fl + 1] == ' ') {
            size_t vl = ll - fl - 2;
            if (vl >= len)
                vl = len - 1;
            memcpy(val, l + fl + 2, vl);
            val[vl] = '\0';
            return;
        }
        l = end ? end + 1 : NULL;
    }
    snprintf(val, len, "(none)");
}

/* Appends to why: "FIELD: A on ranks 0-1 (node1), B on ranks 2-3 (node2)"
 * when the ranks' values of FIELD differ; 1 when they do. */
static int describe_field(const cdp_preflight *pf, const cdp_comm *c, const char *field,
                          char *why, size_t whylen)
{
    const int P = c->size;
    unsigned char *done = calloc((size_t)P, 1), *in = calloc((size_t)P, 1);
    unsigned char *hosts = calloc((size_t)c->nhosts, 1);
    char v[CDP_IDENTITY_MAX], w[CDP_IDENTITY_MAX], ranks[256], on[256], text[4096] = "";
    int groups = 0;
    size_t at = 0;
    for (int r = 0; done && in && hosts && r < P; r++) {
        if (done[r])
            continue;
        field_value(pf->identity[r], field, v, sizeof v);
        memset(in, 0, (size_t)P);
        memset(hosts, 0, (size_t)c->nhosts);
        for (int q = r; q < P; q++) {
            if (done[q])
                continue;
            field_value(pf->identity[q], field, w, sizeof w);
            if (!strcmp(v, w))
                done[q] = in[q] = 1, hosts[c->host_of[q]] = 1;
        }
        cdp_rank_list(in, P, ranks, sizeof ranks);
        size_t o = 0;
        int nh = 0;
        on[0] = '\0';
        for (int h = 0; h < c->nhosts; h++)
            if (hosts[h] && nh++ < 3 && o < sizeof on)
                o += (size_t)snprintf(on + o, sizeof on - o, "%s%s", nh > 1 ? ", " : "",
                                      c->host_name[h]);
        if (nh > 3 && o < sizeof on)
            snprintf(on + o, sizeof on - o, ", ... %d hosts", nh);
        if (at < sizeof text)
            at += (size_t)snprintf(text + at, sizeof text - at, "%s\"%s\" on rank%s %s (%s)",
                                   groups ? ", " : "", v, strpbrk(ranks, ",-") ? "s" : "", ranks,
                                   on);
        groups++;
    }
    if (groups > 1) {
        size_t n = strlen(why);
        if (n < whylen)
            snprintf(why + n, whylen - n, "%s%s: %s", n ? "; " : "", field, text);
    }
    free(done);
    free(in);
    free(hosts);
    return groups > 1;
}

int cdp_preflight_numerics(cdp_preflight *pf, const cdp_comm *c, const char *identity,
                           char *why, size_t whylen)
{
    char mine[CDP_IDENTITY_MAX];
    memset(mine, 0, sizeof mine);
    snprintf(mine, sizeof mine, "%s", identity);
    int bad = 0, any;
    if (c->rank == 0) {
        pf->identity = calloc((size_t)c->size, sizeof *pf->identity);
        bad = !pf->identity;
    }
    MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, c->comm);
    if (any)
        return -1;
    MPI_Gather(mine, CDP_IDENTITY_MAX, MPI_CHAR, c->rank == 0 ? pf->identity[0] : NULL,
               CDP_IDENTITY_MAX, MPI_CHAR, 0, c->comm);
    int differ = 0;
    if (c->rank == 0) {
        why[0] = '\0';
        /* the fields of every rank, in the order of their first appearance */
        for (int r = 0; r < c->size; r++)
            for (const char *l = pf->identity[r]; l && *l;) {
                const char *colon = strstr(l, ": "), *end = strchr(l, '\n');
                if (!colon || (end && colon > end))
                    break;
                char field[64];
                size_t fl = (size_t)(colon - l) < sizeof field ? (size_t)(colon - l)
                                                                : sizeof field - 1;
                memcpy(field, l, fl);
                field[fl] = '\0';
                int seen = 0;   /* described already (a field of an earlier rank) */
                for (int q = 0; q < r && !seen; q++) {
                    char v[8];
                    field_value(pf->identity[q], field, v, sizeof v);
                    seen = strcmp(v, "(none)") != 0;
                }
                for (const char *m = pf->identity[r]; !seen && m < l;) {
                    seen = !strncmp(m, field, fl) && m[fl] == ':';
                    m = strchr(m, '\n');
                    m = m ? m + 1 : l;
                }
                if (!seen)
                    differ |= describe_field(pf, c, field, why, whylen);
                l = end ? end + 1 : NULL;
            }
        if (!differ)
            why[0] = '\0';
    }
    MPI_Bcast(&differ, 1, MPI_INT, 0, c->comm);
    return differ;
}

void cdp_preflight_print_hosts(FILE *out, const cdp_preflight *pf, const cdp_comm *c)
{
    unsigned char *in = calloc((size_t)c->size, 1);
    if (!in)
        return;
    for (int h = 0; h < c->nhosts; h++) {
        int first = -1, n = 0;
        for (int r = 0; r < c->size; r++) {
            in[r] = c->host_of[r] == h;
            if (in[r] && first < 0)
                first = r;
            n += in[r];
        }
        char ranks[256], backend[128] = "?", blas[256] = "";
        cdp_rank_list(in, c->size, ranks, sizeof ranks);
        if (pf->identity) {
            field_value(pf->identity[first], "backend", backend, sizeof backend);
            field_value(pf->identity[first], !strcmp(backend, "cpu") ? "BLAS" : "device", blas,
                        sizeof blas);
        }
        fprintf(out, "  host %s: rank%s %s (%d), %d cpus, backend %s%s%s\n", c->host_name[h],
                n > 1 ? "s" : "", ranks, n, c->host_cpus[h], backend,
                strcmp(blas, "(none)") ? ", " : "", strcmp(blas, "(none)") ? blas : "");
    }
    free(in);
}

void cdp_preflight_free(cdp_preflight *pf)
{
    free(pf->identity);
    pf->identity = NULL;
}

/* The options of argv as items, "--lr 0.1" or "--flush-denormals", into
 * buf separated by '\n' (an option and the values after it). */
static void option_items(int argc, char **argv, char *buf, size_t len)
{
    size_t at = 0;
    buf[0] = '\0';
    for (int i = 1; i < argc && at < len; i++) {
        int opt = argv[i][0] == '-' && argv[i][1] != '\0' && !(argv[i][1] >= '0' && argv[i][1] <= '9');
        int w = snprintf(buf + at, len - at, "%s%s", !at ? "" : opt ? "\n" : " ", argv[i]);
        if (w < 0)
            break;
        at += (size_t)w;
    }
}

/* Appends to out the items of a that are not in b, separated by spaces. */
static void items_missing(const char *a, const char *b, char *out, size_t len)
{
    size_t at = strlen(out);
    for (const char *l = a; l && *l;) {
        const char *end = strchr(l, '\n');
        size_t ll = end ? (size_t)(end - l) : strlen(l);
        int found = 0;
        for (const char *m = b; m && *m && !found;) {
            const char *me = strchr(m, '\n');
            size_t ml = me ? (size_t)(me - m) : strlen(m);
            found = ml == ll && !strncmp(l, m, ll);
            m = me ? me + 1 : NULL;
        }
        if (!found && at < len)
            at += (size_t)snprintf(out + at, len - at, "%s%.*s", at ? " " : "", (int)ll, l);
        l = end ? end + 1 : NULL;
    }
}

void cdp_preflight_options(const cdp_comm *c, uint64_t hash, int argc, char **argv, char *why,
                           size_t whylen)
{
    uint64_t h0 = hash;
    MPI_Bcast(&h0, 1, MPI_UINT64_T, 0, c->comm);
    int key = hash != h0 ? c->rank : c->size, d;
    MPI_Allreduce(&key, &d, 1, MPI_INT, MPI_MIN, c->comm);
    enum { ITEMS = 4096 };
    char *mine = malloc(ITEMS), *theirs = malloc(ITEMS);
    if (!mine || !theirs) {
        free(mine);
        free(theirs);
        mine = theirs = NULL;
    }
    int ok = mine != NULL, all;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, c->comm);
    snprintf(why, whylen, "the ranks were started with different options");
    if (!all || d >= c->size) {   /* out of memory (d < size: some rank differs from rank 0) */
        free(mine);
        free(theirs);
        return;
    }
    option_items(argc, argv, mine, ITEMS);
    if (c->rank == d)
        MPI_Send(mine, ITEMS, MPI_CHAR, 0, 0, c->comm);
    if (c->rank == 0) {
        char more[1024] = "", less[1024] = "";
        MPI_Recv(theirs, ITEMS, MPI_CHAR, d, 0, c->comm, MPI_STATUS_IGNORE);
        theirs[ITEMS - 1] = '\0';
        items_missing(theirs, mine, more, sizeof more);
        items_missing(mine, theirs, less, sizeof less);
        char hd[CDP_HOST_MAX + 16] = "", h0s[CDP_HOST_MAX + 16] = "";
        if (c->nhosts > 1) {
            snprintf(hd, sizeof hd, " (host %s)", cdp_comm_host(c, d));
            snprintf(h0s, sizeof h0s, " (host %s)", cdp_comm_host(c, 0));
        }
        if (more[0] || less[0])
            snprintf(why, whylen, "the ranks were started with different options: rank %d%s has "
                     "%s where rank 0%s has %s; every rank needs the same options", d, hd,
                     more[0] ? more : "none of them", h0s, less[0] ? less : "none of them");
    }
    free(mine);
    free(theirs);
}

void cdp_preflight_keepalive(const cdp_comm *c, int timeout, char *buf, size_t len)
{
    buf[0] = '\0';
    if (c->rank != 0 || c->nhosts < 2 || timeout <= 0 || !getenv("OMPI_COMM_WORLD_SIZE"))
        return;
    /* Open MPI's defaults, unless mpirun was given others (it passes its
     * --mca settings to the ranks' environment) */
    const char *names[3] = { "OMPI_MCA_oob_tcp_keepalive_time", "OMPI_MCA_oob_tcp_keepalive_intvl",
                             "OMPI_MCA_oob_tcp_keepalive_probes" };
    long v[3] = { 300, 20, 9 };
    for (int i = 0; i < 3; i++) {
        const char *e = getenv(names[i]);
        if (e && *e)
            v[i] = strtol(e, NULL, 10);
    }
    long notice = v[0] <= 0 ? -1 : v[0] + v[1] * v[2];
    long limit = timeout + CDP_WATCHDOG_GRACE_S + CDP_WATCHDOG_HOST_WAIT_S;
    if (notice >= 0 && notice <= limit)
        return;
    /* probes x interval just above the watchdog's verdict, so that cdp names
     * the lost rank first; the idle time short, so that mpirun notices soon */
    long intvl = (timeout + CDP_WATCHDOG_GRACE_S + 3) / 3 + 1;
    char now[64];
    if (notice < 0)
        snprintf(now, sizeof now, "never (oob_tcp_keepalive_time %ld)", v[0]);
    else
        snprintf(now, sizeof now, "after up to %ld s", notice);
    snprintf(buf, len, "cdp_run: warning: this job spans %d hosts: if one is cut from the network, "
             "mpirun ends the job only once it notices the lost host itself, %s, not within "
             "--timeout %d; start mpirun with --mca oob_tcp_keepalive_time 2 --mca "
             "oob_tcp_keepalive_intvl %ld --mca oob_tcp_keepalive_probes 3\n", c->nhosts, now,
             timeout, intvl);
}
