/* Output files: what a path names decides how it is written, and every
 * write of a stream is checked.  See src/io/output.h. */
#include <errno.h>
#include <string.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include "io/output.h"

cdp_output_kind cdp_output_kind_of(const char *path, const char **what)
{
    struct stat st;
    *what = NULL;
    if (stat(path, &st) != 0 || S_ISREG(st.st_mode))
        return CDP_OUTPUT_REPLACE;
    if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode))
        return CDP_OUTPUT_IN_PLACE;
    *what = S_ISDIR(st.st_mode)    ? "a directory"
            : S_ISBLK(st.st_mode)  ? "a block device"
            : S_ISSOCK(st.st_mode) ? "a socket"
                                   : "not a regular file";
    return CDP_OUTPUT_REFUSED;
}

static int stream_fail(int e, const char *opt, const char *path, char *err, size_t errlen)
{
    /* errno of a write that failed inside an earlier fprintf is gone by now */
    snprintf(err, errlen, "%s %.900s: cannot write: %s", opt, path,
             e ? strerror(e) : "a write failed");
    return -1;
}

int cdp_output_stream_check(FILE *f, const char *opt, const char *path, char *err,
                            size_t errlen)
{
    const int before = errno;   /* a write that failed in the caller's last fprintf */
    errno = 0;
    if (fflush(f) == 0 && !ferror(f))
        return 0;
    return stream_fail(errno ? errno : before, opt, path, err, errlen);
}

int cdp_output_stream_close(FILE *f, const char *opt, const char *path, char *err,
                            size_t errlen)
{
    int rc = cdp_output_stream_check(f, opt, path, err, errlen);
    errno = 0;
    if (fclose(f) != 0 && rc == 0)
        rc = stream_fail(errno, opt, path, err, errlen);
    return rc;
}

/* A host name as it goes into a file name: the characters of a DNS name
 * kept, anything else (never expected, but a name must not gain a '/')
 * made '_'. */
int cdp_output_host(char *out, size_t n)
{
    char h[256];
    if (n < 2 || gethostname(h, sizeof h) != 0)
        return -1;
    h[sizeof h - 1] = '\0';
    if (!h[0])
        return -1;
    size_t j = 0;
    for (; h[j] && j + 1 < n; j++) {
        const char c = h[j];
        out[j] = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                         c == '-' || c == '.' || c == '_'
                     ? c
                     : '_';
    }
    out[j] = '\0';
    return h[j] ? -1 : 0;   /* cut short: not this host's name */
}

int cdp_output_tmp_name(const char *path, char *out, size_t n)
{
    char host[256];
    if (cdp_output_host(host, sizeof host))
        snprintf(host, sizeof host, "unknown-host");
    const int w = snprintf(out, n, "%s.tmp.%s.%ld", path, host, (long)getpid());
    return w < 0 || (size_t)w >= n ? -1 : 0;
}

int cdp_output_tmp_parse(const char *name, const char *path, char *host, size_t hostlen,
                         long *pid)
{
    const size_t pl = strlen(path);
    if (strncmp(name, path, pl) || strncmp(name + pl, ".tmp.", 5))
        return -1;
    const char *h = name + pl + 5, *dot = strrchr(h, '.');
    if (!dot || dot == h || (size_t)(dot - h) >= hostlen)
        return -1;
    for (const char *c = h; c < dot; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
              *c == '-' || *c == '.' || *c == '_'))
            return -1;
    const char *d = dot + 1;
    /* a pid as getpid() prints it: no sign, no leading zero, fits pid_t */
    if (!*d || *d == '0' || strlen(d) > 9)
        return -1;
    for (const char *c = d; *c; c++)
        if (*c < '0' || *c > '9')
            return -1;
    memcpy(host, h, (size_t)(dot - h));
    host[dot - h] = '\0';
    *pid = strtol(d, NULL, 10);
    return 0;
}
