/* Empty network namespaces kept for runs without network (emptyns.h), in
 * an idle-namespace pool (nspool.h). */
#include "net/emptyns.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include "base/util.h"
#include "net/netns.h"
#include "net/netview.h"
#include "net/nspool.h"

struct emptyns_slot {
        struct nsentry e; /* first: an entry is its slot */
};

struct emptyns {
        int host_ns; /* ours, to come back to */
        struct nspool *pool;
};

static void slot_free(struct nsentry *e, void *data)
{
        free(e);
}

static const struct nspool_ops slot_ops = {.free = slot_free};

int emptyns_new(struct emptyns **ret)
{
        struct emptyns *p = calloc(1, sizeof(*p));
        if (!p)
                return -ENOMEM;
        p->host_ns = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
        if (p->host_ns < 0 || nspool_new(&slot_ops, p, NSPOOL_SETTLING_MAX, &p->pool) < 0) {
                int e = p->host_ns < 0 ? errno : ENOMEM;
                safe_close(p->host_ns);
                free(p);
                return -e;
        }
        *ret = p;
        return 0;
}

struct emptyns *emptyns_free(struct emptyns *p)
{
        if (!p)
                return NULL;
        nspool_free(p->pool);
        safe_close(p->host_ns);
        free(p);
        return NULL;
}

static int open_inside(void *data)
{
        return nsentry_open_inside(data);
}

/* A new namespace, and what the pool reads of it opened from inside. */
static int slot_make(struct emptyns *p, struct emptyns_slot **ret)
{
        struct emptyns_slot *s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        s->e.nsfd = s->e.diag = -1;
        int r = netns_make(p->host_ns, open_inside, &s->e, &s->e.nsfd);
        if (r < 0) {
                s->e.view = netview_free(s->e.view);
                safe_close(s->e.diag);
                free(s);
                return r;
        }
        nsentry_record(&s->e); /* on failure: never reused */
        *ret = s;
        return 0;
}

int emptyns_take(struct emptyns *p, int *ret_fd, struct emptyns_slot **ret_slot)
{
        struct emptyns_slot *s = (struct emptyns_slot *)nspool_take(p->pool);
        if (!s) {
                int r = slot_make(p, &s);
                if (r < 0)
                        return r;
        }
        int fd = fcntl(s->e.nsfd, F_DUPFD_CLOEXEC, 3);
        if (fd < 0) {
                int e = errno;
                nspool_drop(p->pool, &s->e);
                return -e;
        }
        *ret_fd = fd;
        *ret_slot = s;
        return 0;
}

void emptyns_release(struct emptyns *p, struct emptyns_slot *s)
{
        if (!s)
                return;
        /* a socket left (a unix pair held in flight in its own queue, which
         * a later run would see in /proc/self/net/unix): it cannot serve
         * again; else it settles and is checked whole (nspool.h) */
        unsigned long sockets = 1;
        bool dirty = !s->e.view || netview_sockets(s->e.view, &sockets) < 0 || sockets > 0;
        nspool_give(p->pool, &s->e, dirty);
}

int emptyns_wait_ms(const struct emptyns *p)
{
        return p ? nspool_wait_ms(p->pool) : -1;
}

void emptyns_tick(struct emptyns *p)
{
        if (p)
                nspool_tick(p->pool);
}

void emptyns_pool_stats(const struct emptyns *p, struct nspool_stats *ret)
{
        nspool_get_stats(p->pool, ret);
}
