/* How cdp_run writes its output files (--save-weights, --checkpoint,
 * --metrics, --trace), by what the path names:
 *   absent or a regular file   replaced: weight files and checkpoints through
 *                              a temporary file renamed onto the path (a
 *                              reader never sees half a file); the JSON
 *                              streams opened and truncated
 *   a character device, FIFO   written in place: opened and written, never
 *                              replaced or removed, no fsync (/dev/null stays
 *                              the system's /dev/null; a pipe gets the bytes)
 *   anything else              refused before the run starts (a directory, a
 *                              block device: writing a disk's first bytes is
 *                              never what was meant; a socket)
 * and every write is checked: a failed one (a full disk) is an error that
 * names the file. */
#ifndef CDP_OUTPUT_H
#define CDP_OUTPUT_H

#include <stddef.h>
#include <stdio.h>

typedef enum cdp_output_kind {
    CDP_OUTPUT_REPLACE,    /* absent or a regular file (or not stat-able: the write says why) */
    CDP_OUTPUT_IN_PLACE,   /* a character device or a FIFO */
    CDP_OUTPUT_REFUSED     /* anything else */
} cdp_output_kind;

/* What path names now (symbolic links followed), and with
 * CDP_OUTPUT_REFUSED, *what says what it is ("a directory"). */
cdp_output_kind cdp_output_kind_of(const char *path, const char **what);

/* A stream output (--metrics, --trace) flushed, and any write that failed
 * since it was opened reported (the stream's error flag is sticky, so a
 * line lost in the middle is found at the next check): 0, or -1 with one
 * line "OPT PATH: cannot write: WHY" in err.  Called right after writes,
 * WHY is the errno of a write that failed inside them (a stream drops the
 * bytes of a failed write: a later fflush succeeds). */
int cdp_output_stream_check(FILE *f, const char *opt, const char *path, char *err,
                            size_t errlen);

/* cdp_output_stream_check, then fclose, whose result is checked too; f is
 * closed either way. */
int cdp_output_stream_close(FILE *f, const char *opt, const char *path, char *err,
                            size_t errlen);

/* The temporary file a weight file or checkpoint PATH is written through:
 * PATH.tmp.HOST.PID, HOST this host's name (cdp_output_host), PID this
 * process.  Jobs run on several hosts over one shared file system, so a
 * PID alone cannot say whether its writer still lives: with the host, a
 * later run on the same host can (kill(PID, 0)).  0, or -1 when out is too
 * short. */
int cdp_output_tmp_name(const char *path, char *out, size_t n);
/* This host's name as the temporary files carry it (characters other than
 * letters, digits, '-', '.', '_' made '_').  0, or -1 when it is unknown or
 * longer than n - 1. */
int cdp_output_host(char *out, size_t n);
/* name is exactly PATH.tmp.HOST.PID (HOST: one or more of the characters
 * above, PID: decimal, no leading zero, at most 9 digits): 0 with host and
 * pid, else -1. */
int cdp_output_tmp_parse(const char *name, const char *path, char *host, size_t hostlen,
                         long *pid);

#endif
