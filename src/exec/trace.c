#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "io/output.h"
#include "exec/trace.h"

static void write_events(FILE *f, int rank, const cdp_trace_event *ev, size_t n, int *first)
{
    for (size_t k = 0; k < n; k++) {
        const cdp_trace_event *e = &ev[k];
        const char *cat = (e->op == CDP_OP_FWD || e->op == CDP_OP_BWD || e->op == CDP_OP_ACC ||
                           e->op == CDP_OP_APPLY || e->op == CDP_OP_FINALIZE) ? "compute" : "comm";
        fprintf(f, "%s\n{\"name\": \"%s", *first ? "" : ",", cdp_opcode_name(e->op));
        if (e->worker >= 0) fprintf(f, " w%d", e->worker);
        if (e->stage >= 0) fprintf(f, " l%d", e->stage);
        fprintf(f, "\", \"cat\": \"%s\", \"ph\": \"X\", \"pid\": %d, \"tid\": 0, "
                "\"ts\": %.3f, \"dur\": %.3f, \"args\": {\"tick\": %d, \"step\": %d}}",
                cat, rank, e->t0 * 1e6, (e->t1 - e->t0) * 1e6, e->tick, e->step);
        *first = 0;
    }
}

int cdp_trace_write(cdp_comm *c, cdp_exec *x, const char *path, char *err, size_t errlen)
{
    size_t n;
    const cdp_trace_event *ev = cdp_exec_trace(x, &n);
    if (c->rank != 0) {
        int64_t cnt = (int64_t)n;
        MPI_Send(&cnt, 1, MPI_INT64_T, 0, CDP_TAG_STATS, c->comm);
        const char *p = (const char *)ev;
        size_t bytes = n * sizeof *ev;
        while (bytes) {
            int chunk = bytes > (1u << 30) ? (1 << 30) : (int)bytes;
            MPI_Send(p, chunk, MPI_BYTE, 0, CDP_TAG_STATS, c->comm);
            p += chunk;
            bytes -= (size_t)chunk;
        }
        return 0;
    }
    FILE *f = fopen(path, "w");
    int rc = 0;
    if (!f) {
        snprintf(err, errlen, "--trace %s: %s", path, strerror(errno));
        rc = -1;
    }
    int first = 1;
    if (f) {
        fprintf(f, "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [");
        for (int r = 0; r < c->size; r++)
            fprintf(f, "%s\n{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": %d, "
                    "\"args\": {\"name\": \"rank %d\"}}", first ? "" : ",", r, r), first = 0;
        write_events(f, 0, ev, n, &first);
    }
    for (int r = 1; r < c->size; r++) {
        int64_t cnt;
        MPI_Recv(&cnt, 1, MPI_INT64_T, r, CDP_TAG_STATS, c->comm, MPI_STATUS_IGNORE);
        cdp_trace_event *buf = malloc((size_t)cnt * sizeof *buf + 1);
        if (!buf) abort();
        char *p = (char *)buf;
        size_t bytes = (size_t)cnt * sizeof *buf;
        while (bytes) {
            int chunk = bytes > (1u << 30) ? (1 << 30) : (int)bytes;
            MPI_Recv(p, chunk, MPI_BYTE, r, CDP_TAG_STATS, c->comm, MPI_STATUS_IGNORE);
            p += chunk;
            bytes -= (size_t)chunk;
        }
        if (f) write_events(f, r, buf, (size_t)cnt, &first);
        free(buf);
    }
    if (f) {
        fprintf(f, "\n]}\n");
        /* every event's write, not only the last: a full disk is an error */
        rc = cdp_output_stream_close(f, "--trace", path, err, errlen);
    }
    return rc;
}
