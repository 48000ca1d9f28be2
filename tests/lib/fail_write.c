/* Fault injector, loaded with LD_PRELOAD: fails the Nth write operation a
 * process makes on the files whose path matches a pattern, as a full disk
 * or a failing device would, so that a test can fail each of an output's
 * write points in turn.
 *   CDP_FAIL_PATH   fnmatch(3) pattern of the paths (as the program names
 *                   them: a temporary file PATH.tmp.HOST.PID included)
 *   CDP_FAIL_AT     N, counting from 1; unset or 0: count only
 *   CDP_FAIL_ERRNO  ENOSPC (the default) or EIO
 *   CDP_FAIL_LOG    a file each process appends "pid N OP PATH" to when it
 *                   fails its Nth operation, and "pid count C" at exit
 * The operations, on a matching path: open or creat for writing, write,
 * fsync, fdatasync, close; rename (either name); fopen for writing, and
 * fflush or fclose of such a stream.  A descriptor fails as a call
 * returning -1 with the errno; close really closes it first (an NFS close
 * reports a deferred write error so).  A stream fails for real: its
 * descriptor becomes /dev/full (ENOSPC from then on, as on a full disk),
 * so what it buffered is lost and its error flag set by glibc itself; an
 * fflush with nothing buffered is no write and is not counted, an fclose
 * with nothing buffered fails after closing, as close does.  Only what
 * the program calls through the dynamic linker is seen: stdio's own
 * writes are not (hence the descriptor swap). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdio_ext.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#define MAXFD 4096
#define MAXSTREAM 64

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static char *fd_path[MAXFD];
static struct {
    FILE *f;
    char *path;
} streams[MAXSTREAM];
static long count;

#define REAL(name) real_##name
#define BIND(name)                                                   \
    do {                                                             \
        if (!REAL(name))                                             \
            *(void **)&REAL(name) = dlsym(RTLD_NEXT, #name);         \
    } while (0)

static int (*real_open)(const char *, int, ...);
static int (*real_open64)(const char *, int, ...);
static int (*real_creat)(const char *, mode_t);
static ssize_t (*real_write)(int, const void *, size_t);
static int (*real_fsync)(int);
static int (*real_fdatasync)(int);
static int (*real_close)(int);
static int (*real_rename)(const char *, const char *);
static FILE *(*real_fopen)(const char *, const char *);
static FILE *(*real_fopen64)(const char *, const char *);
static int (*real_fflush)(FILE *);
static int (*real_fclose)(FILE *);

static int matches(const char *path)
{
    const char *pat = getenv("CDP_FAIL_PATH");
    return path && pat && *pat && fnmatch(pat, path, 0) == 0;
}

static int fail_errno(void)
{
    const char *e = getenv("CDP_FAIL_ERRNO");
    return e && !strcmp(e, "EIO") ? EIO : ENOSPC;
}

static void log_line(const char *fmt, ...)
{
    const char *log = getenv("CDP_FAIL_LOG");
    if (!log)
        return;
    BIND(fopen);
    BIND(fclose);
    FILE *f = REAL(fopen)(log, "a");
    if (!f)
        return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    REAL(fclose)(f);
}

/* One more operation on path: 1 when it is the one to fail. */
static int due(const char *op, const char *path)
{
    pthread_mutex_lock(&mu);
    const long n = ++count;
    pthread_mutex_unlock(&mu);
    const char *at = getenv("CDP_FAIL_AT");
    if (!at || atol(at) != n)
        return 0;
    log_line("%ld %ld %s %s\n", (long)getpid(), n, op, path);
    return 1;
}

__attribute__((destructor)) static void report(void)
{
    if (count)
        log_line("%ld count %ld\n", (long)getpid(), count);
}

static const char *tracked(int fd)
{
    return fd >= 0 && fd < MAXFD ? fd_path[fd] : NULL;
}

static void track(int fd, const char *path)
{
    if (fd >= 0 && fd < MAXFD) {
        free(fd_path[fd]);
        fd_path[fd] = strdup(path);
    }
}

static void untrack(int fd)
{
    if (fd >= 0 && fd < MAXFD) {
        free(fd_path[fd]);
        fd_path[fd] = NULL;
    }
}

static int do_open(int (*real)(const char *, int, ...), const char *path, int flags, mode_t mode)
{
    const int writes = (flags & O_ACCMODE) != O_RDONLY;
    if (writes && matches(path) && due("open", path)) {
        errno = fail_errno();
        return -1;
    }
    const int fd = real(path, flags, mode);
    if (fd >= 0 && writes && matches(path))
        track(fd, path);
    return fd;
}

/* open's third argument, present only when a file may be created */
static mode_t mode_arg(int flags, va_list ap)
{
    return flags & (O_CREAT | O_TMPFILE) ? (mode_t)va_arg(ap, int) : 0;
}

int open(const char *path, int flags, ...)
{
    BIND(open);
    va_list ap;
    va_start(ap, flags);
    const mode_t mode = mode_arg(flags, ap);
    va_end(ap);
    return do_open(REAL(open), path, flags, mode);
}

int open64(const char *path, int flags, ...)
{
    BIND(open64);
    va_list ap;
    va_start(ap, flags);
    const mode_t mode = mode_arg(flags, ap);
    va_end(ap);
    return do_open(REAL(open64), path, flags, mode);
}

int creat(const char *path, mode_t mode)
{
    BIND(creat);
    if (matches(path) && due("creat", path)) {
        errno = fail_errno();
        return -1;
    }
    const int fd = REAL(creat)(path, mode);
    if (fd >= 0 && matches(path))
        track(fd, path);
    return fd;
}

/* 1 when op on descriptor fd is the one to fail: errno is then set */
static int fd_fails(const char *op, int fd)
{
    const char *p = tracked(fd);
    if (!p || !due(op, p))
        return 0;
    errno = fail_errno();
    return 1;
}

ssize_t write(int fd, const void *buf, size_t n)
{
    BIND(write);
    return fd_fails("write", fd) ? -1 : REAL(write)(fd, buf, n);
}

int fsync(int fd)
{
    BIND(fsync);
    return fd_fails("fsync", fd) ? -1 : REAL(fsync)(fd);
}

int fdatasync(int fd)
{
    BIND(fdatasync);
    return fd_fails("fdatasync", fd) ? -1 : REAL(fdatasync)(fd);
}

int close(int fd)
{
    BIND(close);
    const char *p = tracked(fd);
    const int fail = p && due("close", p);
    untrack(fd);
    const int rc = REAL(close)(fd);
    if (fail) {
        errno = fail_errno();
        return -1;
    }
    return rc;
}

int rename(const char *from, const char *to)
{
    BIND(rename);
    if ((matches(from) || matches(to)) && due("rename", matches(to) ? to : from)) {
        errno = fail_errno();
        return -1;
    }
    return REAL(rename)(from, to);
}

static FILE *do_fopen(FILE *(*real)(const char *, const char *), const char *path,
                      const char *mode)
{
    const int writes = mode && strpbrk(mode, "wa+") != NULL;
    if (writes && matches(path) && due("fopen", path)) {
        errno = fail_errno();
        return NULL;
    }
    FILE *f = real(path, mode);
    if (f && writes && matches(path)) {
        pthread_mutex_lock(&mu);
        for (int j = 0; j < MAXSTREAM; j++)
            if (!streams[j].f) {
                streams[j].f = f;
                streams[j].path = strdup(path);
                break;
            }
        pthread_mutex_unlock(&mu);
    }
    return f;
}

FILE *fopen(const char *path, const char *mode)
{
    BIND(fopen);
    return do_fopen(REAL(fopen), path, mode);
}

FILE *fopen64(const char *path, const char *mode)
{
    BIND(fopen64);
    return do_fopen(REAL(fopen64), path, mode);
}

static const char *stream_path(FILE *f, int forget)
{
    const char *p = NULL;
    pthread_mutex_lock(&mu);
    for (int j = 0; f && j < MAXSTREAM; j++)
        if (streams[j].f == f) {
            p = streams[j].path;
            if (forget)
                streams[j].f = NULL;   /* the path is kept for the caller, then leaked */
            break;
        }
    pthread_mutex_unlock(&mu);
    return p;
}

/* From now on the stream's descriptor writes to /dev/full. */
static void break_stream(FILE *f)
{
    BIND(open);
    BIND(close);
    const int full = REAL(open)("/dev/full", O_WRONLY | O_CLOEXEC);
    if (full >= 0) {
        dup2(full, fileno(f));
        REAL(close)(full);
    }
}

int fflush(FILE *f)
{
    BIND(fflush);
    const char *p = stream_path(f, 0);
    if (p && __fpending(f) > 0 && due("fflush", p)) {
        break_stream(f);
        const int rc = REAL(fflush)(f);
        if (rc == 0)
            errno = fail_errno();
        return EOF;
    }
    return REAL(fflush)(f);
}

int fclose(FILE *f)
{
    BIND(fclose);
    const char *p = stream_path(f, 1);
    if (p && due("fclose", p)) {
        const int pending = __fpending(f) > 0;
        if (pending)
            break_stream(f);
        const int rc = REAL(fclose)(f);
        if (!pending || rc == 0)
            errno = fail_errno();
        return EOF;
    }
    return REAL(fclose)(f);
}
