/* The jailer's event loop (see loop.h): epoll, and each event's watch
 * called with its data. */
#include "base/loop.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/epoll.h>

#include "base/util.h"

struct loop {
        int epfd;
};

int loop_new(struct loop **ret)
{
        struct loop *l = malloc(sizeof(*l));
        if (!l)
                return -ENOMEM;
        l->epfd = epoll_create1(EPOLL_CLOEXEC);
        if (l->epfd < 0) {
                int e = errno;
                free(l);
                return -e;
        }
        *ret = l;
        return 0;
}

struct loop *loop_free(struct loop *l)
{
        if (l) {
                safe_close(l->epfd);
                free(l);
        }
        return NULL;
}

int loop_watch(struct loop *l, int fd, struct watch *w)
{
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = w};
        return epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev) < 0 ? -errno : 0;
}

void loop_unwatch(struct loop *l, int fd)
{
        if (fd >= 0)
                epoll_ctl(l->epfd, EPOLL_CTL_DEL, fd, NULL);
}

int loop_run_once(struct loop *l, int timeout_ms)
{
        struct epoll_event evs[32];
        int n = epoll_wait(l->epfd, evs, ELEMENTSOF(evs), timeout_ms);
        if (n < 0)
                return -errno;
        for (int i = 0; i < n; i++) {
                struct watch *w = evs[i].data.ptr;
                w->fn(w->data, evs[i].events);
        }
        return n;
}
