/* Chrome trace (chrome://tracing, Perfetto) of what each rank did when:
 * one complete event per executed instruction, one process row per rank. */
#ifndef CDP_TRACE_H
#define CDP_TRACE_H

#include "exec/comm.h"
#include "exec/exec.h"

/* Collective over c: every rank sends its events to rank 0, which writes
 * path.  Returns 0, or -1 with err on rank 0. */
int cdp_trace_write(cdp_comm *c, cdp_exec *x, const char *path, char *err, size_t errlen);

#endif
