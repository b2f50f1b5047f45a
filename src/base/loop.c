/* The jailer's event loop (see loop.h): epoll, and each event's watch
 * called with its data. */
#include "base/loop.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/epoll.h>

#include "base/util.h"

/* Each watched fd's watch, and a generation counted up at every watch and
 * unwatch of that fd: an event carries the fd and the generation it was
 * watched under, so an event of a batch whose watch a handler before it
 * removed (and maybe freed, or replaced on a reused fd) is dropped, never
 * called with a stale pointer. */
struct slot {
        struct watch *w;
        uint32_t gen;
};

struct loop {
        int epfd;
        struct slot *slots;
        size_t n_slots;
};

int loop_new(struct loop **ret)
{
        struct loop *l = calloc(1, sizeof(*l));
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
                free(l->slots);
                free(l);
        }
        return NULL;
}

static int slot_reserve(struct loop *l, int fd)
{
        if ((size_t)fd < l->n_slots)
                return 0;
        size_t n = l->n_slots ? l->n_slots : 64;
        while (n <= (size_t)fd)
                n *= 2;
        struct slot *s = realloc(l->slots, n * sizeof(*s));
        if (!s)
                return -ENOMEM;
        for (size_t i = l->n_slots; i < n; i++)
                s[i] = (struct slot){0};
        l->slots = s;
        l->n_slots = n;
        return 0;
}

int loop_watch(struct loop *l, int fd, struct watch *w)
{
        if (fd < 0)
                return -EBADF;
        int r = slot_reserve(l, fd);
        if (r < 0)
                return r;
        struct slot *s = &l->slots[fd];
        uint32_t gen = s->gen + 1;
        struct epoll_event ev = {.events = EPOLLIN, .data.u64 = (uint64_t)gen << 32 | (uint32_t)fd};
        if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
                return -errno;
        *s = (struct slot){.w = w, .gen = gen};
        return 0;
}

void loop_unwatch(struct loop *l, int fd)
{
        if (fd < 0)
                return;
        epoll_ctl(l->epfd, EPOLL_CTL_DEL, fd, NULL);
        if ((size_t)fd < l->n_slots) {
                l->slots[fd].w = NULL;
                l->slots[fd].gen++;
        }
}

int loop_run_once(struct loop *l, int timeout_ms)
{
        struct epoll_event evs[32];
        int n = epoll_wait(l->epfd, evs, ELEMENTSOF(evs), timeout_ms);
        if (n < 0)
                return -errno;
        for (int i = 0; i < n; i++) {
                uint32_t fd = (uint32_t)evs[i].data.u64, gen = (uint32_t)(evs[i].data.u64 >> 32);
                if (fd >= l->n_slots || !l->slots[fd].w || l->slots[fd].gen != gen)
                        continue; /* unwatched by a handler of this batch */
                struct watch *w = l->slots[fd].w;
                w->fn(w->data, evs[i].events);
        }
        return n;
}
