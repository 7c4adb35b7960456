/* A slow disk for one process: LD_PRELOAD this and every fsync, fdatasync, msync and
 * sync_file_range sleeps before doing its real work (dlsym(RTLD_NEXT, ...)).
 *
 * Environment:
 *   SLOW_SYNC_SECONDS  the stall (a decimal number of seconds; default 1.5)
 *   SLOW_SYNC_GATE     stall only while this file exists (unset: always); lets a test start the
 *                      process on a quick disk, then make it slow, then quick again for shutdown
 *   SLOW_SYNC_ONLY     a comma-separated list of the functions to stall (unset or empty: all four)
 *   SLOW_SYNC_LOG      append one line per stalled call: "<function> <start> <end>\n", the
 *                      CLOCK_MONOTONIC seconds (Python's time.monotonic()) the stall began and ended
 *
 * Built by tests/e2e/test_slow_disk.py: cc -shared -fPIC -O2 -o slow_sync.so slow_sync.c -ldl
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* True when the comma-separated ``list`` names ``fn``. */
static int listed(const char *list, const char *fn) {
    size_t n = strlen(fn);
    for (const char *p = list; p != NULL; p = strchr(p, ',') != NULL ? strchr(p, ',') + 1 : NULL) {
        if (strncmp(p, fn, n) == 0 && (p[n] == ',' || p[n] == '\0')) {
            return 1;
        }
    }
    return 0;
}

static void stall(const char *fn) {
    int saved = errno;
    const char *gate = getenv("SLOW_SYNC_GATE");
    struct stat st;
    if (gate != NULL && stat(gate, &st) != 0) {
        errno = saved;
        return;
    }
    const char *only = getenv("SLOW_SYNC_ONLY");
    if (only != NULL && *only != '\0' && !listed(only, fn)) {
        errno = saved;
        return;
    }
    const char *secs = getenv("SLOW_SYNC_SECONDS");
    double want = secs != NULL ? strtod(secs, NULL) : 1.5;
    double start = now();
    struct timespec left = {(time_t)want, (long)((want - (double)(time_t)want) * 1e9)};
    while (nanosleep(&left, &left) != 0 && errno == EINTR) {
    }
    double end = now();
    const char *path = getenv("SLOW_SYNC_LOG");
    if (path != NULL) {
        char line[128];
        int n = snprintf(line, sizeof line, "%s %.6f %.6f\n", fn, start, end);
        int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
        if (fd >= 0) {
            if (write(fd, line, (size_t)n) < 0) { /* a lost line only weakens the test's evidence */
            }
            close(fd);
        }
    }
    errno = saved;
}

typedef int (*fd_fn)(int);
typedef int (*msync_fn)(void *, size_t, int);
typedef int (*range_fn)(int, off_t, off_t, unsigned int);

/* The next definition after this library's (libc's); looked up once (a race only repeats the lookup). */
#define REAL(type, name) \
    static type real; \
    if (real == NULL) real = (type)dlsym(RTLD_NEXT, name)

int fsync(int fd) {
    REAL(fd_fn, "fsync");
    stall("fsync");
    return real(fd);
}

int fdatasync(int fd) {
    REAL(fd_fn, "fdatasync");
    stall("fdatasync");
    return real(fd);
}

int msync(void *addr, size_t length, int flags) {
    REAL(msync_fn, "msync");
    stall("msync");
    return real(addr, length, flags);
}

int sync_file_range(int fd, off_t offset, off_t nbytes, unsigned int flags) {
    REAL(range_fn, "sync_file_range");
    stall("sync_file_range");
    return real(fd, offset, nbytes, flags);
}
