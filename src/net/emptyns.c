/* Empty network namespaces kept for runs without network (emptyns.h). */
#include "net/emptyns.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include "base/util.h"
#include "net/netns.h"
#include "net/sockcount.h"

/* At most this many wait for a run. */
#define IDLE_MAX 32

struct emptyns_slot {
        struct emptyns_slot *next;
        int nsfd;
        int sockets; /* its socket counts (sockcount.h) */
};

struct emptyns {
        int host_ns; /* ours, to come back to */
        struct emptyns_slot *idle;
        unsigned n_idle;
};

int emptyns_new(struct emptyns **ret)
{
        struct emptyns *p = calloc(1, sizeof(*p));
        if (!p)
                return -ENOMEM;
        p->host_ns = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
        if (p->host_ns < 0) {
                int e = errno;
                free(p);
                return -e;
        }
        *ret = p;
        return 0;
}

static struct emptyns_slot *slot_free(struct emptyns_slot *s)
{
        if (s) {
                safe_close(s->sockets);
                safe_close(s->nsfd);
                free(s);
        }
        return NULL;
}

struct emptyns *emptyns_free(struct emptyns *p)
{
        if (!p)
                return NULL;
        while (p->idle) {
                struct emptyns_slot *s = p->idle;
                p->idle = s->next;
                slot_free(s);
        }
        safe_close(p->host_ns);
        free(p);
        return NULL;
}

static int open_counts(void *data)
{
        int *sockets = data;
        *sockets = sockcount_open();
        return *sockets < 0 ? *sockets : 0;
}

/* A new namespace, and its socket counts opened from inside it. */
static int slot_make(struct emptyns *p, struct emptyns_slot **ret)
{
        struct emptyns_slot *s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        s->nsfd = s->sockets = -1;
        int r = netns_make(p->host_ns, open_counts, &s->sockets, &s->nsfd);
        if (r < 0) {
                slot_free(s);
                return r;
        }
        *ret = s;
        return 0;
}

int emptyns_take(struct emptyns *p, int *ret_fd, struct emptyns_slot **ret_slot)
{
        struct emptyns_slot *s = p->idle;
        if (s) {
                p->idle = s->next;
                p->n_idle--;
        } else {
                int r = slot_make(p, &s);
                if (r < 0 || !s)
                        return r < 0 ? r : -ENOMEM;
        }
        int fd = fcntl(s->nsfd, F_DUPFD_CLOEXEC, 3);
        if (fd < 0) {
                int e = errno;
                slot_free(s);
                return -e;
        }
        s->next = NULL;
        *ret_fd = fd;
        *ret_slot = s;
        return 0;
}

void emptyns_release(struct emptyns *p, struct emptyns_slot *s)
{
        unsigned long sockets = 1;
        if (s && p->n_idle < IDLE_MAX && sockcount_read(s->sockets, &sockets) == 0 &&
            sockets == 0) {
                s->next = p->idle;
                p->idle = s;
                p->n_idle++;
                return;
        }
        slot_free(s);
}
