/* A new network namespace, made and left (netns.h). */
#include "net/netns.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "base/util.h"

int netns_make(int back_fd, int (*inside)(void *data), void *data, int *ret_fd)
{
        if (unshare(CLONE_NEWNET) < 0)
                return -errno;
        int fd = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
        int r = fd < 0 ? -errno : inside ? inside(data) : 0;
        if (setns(back_fd, CLONE_NEWNET) < 0) {
                log_error(NULL, "net.setns_failed", "error=%s", log_q(strerror(errno)));
                abort();
        }
        if (r < 0) {
                safe_close(fd);
                return r;
        }
        *ret_fd = fd;
        return 0;
}

int netns_run(int ns_fd, int (*fn)(void *data), void *data)
{
        int back = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
        if (back < 0)
                return -errno;
        if (setns(ns_fd, CLONE_NEWNET) < 0) {
                int e = errno;
                close(back);
                return -e;
        }
        int r = fn(data);
        if (setns(back, CLONE_NEWNET) < 0) {
                log_error(NULL, "net.setns_failed", "error=%s", log_q(strerror(errno)));
                abort();
        }
        close(back);
        return r;
}
