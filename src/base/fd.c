/* File-descriptor helpers (see fd.h). */
#include "base/fd.h"
#include "base/file.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

static bool kept(int fd, const int *keep, size_t n)
{
        for (size_t i = 0; i < n; i++)
                if (keep[i] == fd)
                        return true;
        return false;
}

/* Without close_range: each fd /proc/self/fd lists, else every number the
 * fd limit allows. Never leaves an fd it could not see. */
static void close_by_hand(int from, const int *keep, size_t n)
{
        DIR *d = opendir("/proc/self/fd");
        if (d) {
                int self = dirfd(d);
                for (struct dirent *e; (e = readdir(d));) {
                        char *end;
                        long fd = strtol(e->d_name, &end, 10);
                        if (*end || e->d_name[0] == '.' || fd < from || fd == self ||
                            kept((int)fd, keep, n))
                                continue;
                        close((int)fd);
                }
                closedir(d);
                return;
        }
        struct rlimit rl;
        long max = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
                           rl.rlim_cur < INT_MAX
                       ? (long)rl.rlim_cur
                       : 65536;
        for (long fd = from; fd < max; fd++)
                if (!kept((int)fd, keep, n))
                        close((int)fd);
}

void fd_close_all_except(int from, const int *keep, size_t n)
{
        int lo = from;
        for (;;) {
                int next = INT_MAX;
                for (size_t i = 0; i < n; i++)
                        if (keep[i] >= lo && keep[i] < next)
                                next = keep[i];
                if (next > lo && syscall(SYS_close_range, lo,
                                         next == INT_MAX ? ~0U : (unsigned)next - 1, 0) < 0) {
                        /* a kernel without it, or a filter that refuses it */
                        close_by_hand(from, keep, n);
                        return;
                }
                if (next == INT_MAX)
                        return;
                lo = next + 1;
        }
}

void fd_close_from(int from)
{
        fd_close_all_except(from, NULL, 0);
}

int fd_lock_in(const char *dir, const char *name)
{
        char path[PATH_MAX];
        if (snprintf(path, sizeof(path), "%s/%s", dir, name) >= (int)sizeof(path))
                return -ENAMETOOLONG;
        int r = file_mkdir_parents(path, 0);
        if (r < 0)
                return r;
        int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
                return -errno;
        if (flock(fd, LOCK_EX) < 0) {
                r = -errno;
                close(fd);
                return r;
        }
        return fd;
}
