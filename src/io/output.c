/* Output files: what a path names decides how it is written, and every
 * write of a stream is checked.  See include/cdp/output.h. */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include "cdp/output.h"

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
