/* The temporary files a killed writer leaves (SIGKILL, a lost host: no
 * handler runs to remove them), found and removed when --resume latest
 * looks for the newest checkpoint.  See src/io/checkpoint.h. */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>
#include "io/checkpoint.h"
#include "io/output.h"
#include "ckpt_dir.h"

/* The length of the checkpoint name name starts with: base, or
 * base.step-DIGITS (1 to 18 digits, as cdp_checkpoint_list accepts), the
 * longest such prefix; 0 when none. */
static size_t checkpoint_prefix(const char *name, const char *base)
{
    const size_t bl = strlen(base);
    if (strncmp(name, base, bl))
        return 0;
    if (strncmp(name + bl, ".step-", 6))
        return bl;
    size_t d = 0;
    while (name[bl + 6 + d] >= '0' && name[bl + 6 + d] <= '9')
        d++;
    return d >= 1 && d <= 18 ? bl + 6 + d : bl;
}

static void put(char *msg, size_t n, const char *fmt, ...)
{
    const size_t at = strlen(msg);
    if (at + 1 >= n)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg + at, n - at, fmt, ap);
    va_end(ap);
}

int cdp_checkpoint_clean_stale(const char *stem, char *msg, size_t msglen, char *err,
                               size_t errlen)
{
    char dir[4096], me[256];
    const char *base;
    msg[0] = '\0';
    /* without this host's name no file can be known to be this host's */
    if (cdp_output_host(me, sizeof me))
        return 0;
    DIR *d;
    if (cdp_ckpt_dir_open(stem, dir, sizeof dir, &base, &d, err, errlen))
        return -1;
    if (!d)   /* no directory: nothing to clean */
        return 0;
    char removed[2048] = "", kept[1024] = "", failed[1024] = "";
    int nremoved = 0, nkept = 0;
    double bytes = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        char ckpt[4096], host[256], path[8400];
        long pid;
        const size_t pl = checkpoint_prefix(e->d_name, base);
        if (!pl || pl >= sizeof ckpt)
            continue;
        memcpy(ckpt, e->d_name, pl);
        ckpt[pl] = '\0';
        if (cdp_output_tmp_parse(e->d_name, ckpt, host, sizeof host, &pid))
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat st;
        if (lstat(path, &st) || !S_ISREG(st.st_mode))
            continue;   /* a link or a directory of that name is nobody's temporary file */
        /* EPERM: alive, another user's; a PID reused since keeps its file,
         * which errs on the side of the file */
        if (strcmp(host, me) || pid == (long)getpid() || kill((pid_t)pid, 0) == 0 ||
            errno != ESRCH) {
            nkept++;
            put(kept, sizeof kept, "%s%s", nkept > 1 ? ", " : "", e->d_name);
            continue;
        }
        if (unlink(path) && errno != ENOENT) {
            put(failed, sizeof failed, "; cannot remove %s: %s", e->d_name, strerror(errno));
            continue;
        }
        nremoved++;
        bytes += (double)st.st_size;
        put(removed, sizeof removed, "%s%s", nremoved > 1 ? ", " : "", e->d_name);
    }
    closedir(d);
    if (nremoved)
        put(msg, msglen, "removed %d temporary file%s of dead processes of this host (%s, "
            "%.1f MB) in %s: %s", nremoved, nremoved > 1 ? "s" : "", me, bytes / 1e6, dir,
            removed);
    if (nkept)
        put(msg, msglen, "%sleft %d temporary file%s of live processes or other hosts alone: %s",
            nremoved ? "; " : "", nkept, nkept > 1 ? "s" : "", kept);
    if (failed[0])
        put(msg, msglen, "%s", failed + (msg[0] ? 0 : 2));
    return nremoved;
}
