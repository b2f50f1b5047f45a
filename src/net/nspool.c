/* The idle-namespace pool (nspool.h). Settling and lingering namespaces
 * are queues in the order they came, each with one fixed delay, so their
 * heads are always the first due. */
#include "net/nspool.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/clock.h"
#include "base/util.h"
#include "net/netview.h"
#include "net/sockdiag.h"

struct queue {
        struct nsentry *head, *tail;
        unsigned n;
};

struct nspool {
        const struct nspool_ops *ops;
        void *data;
        struct nsentry *idle; /* a stack: the last in serves first */
        unsigned n_idle;
        struct queue settling, lingering;
        unsigned settling_max;
        struct nspool_stats st;
};

static void push(struct queue *q, struct nsentry *e)
{
        e->next = NULL;
        if (q->tail)
                q->tail->next = e;
        else
                q->head = e;
        q->tail = e;
        q->n++;
}

static struct nsentry *pop(struct queue *q)
{
        struct nsentry *e = q->head;
        if (e) {
                q->head = e->next;
                if (!q->head)
                        q->tail = NULL;
                q->n--;
                e->next = NULL;
        }
        return e;
}

int nspool_new(const struct nspool_ops *ops, void *data, unsigned settling_max, struct nspool **ret)
{
        struct nspool *p = calloc(1, sizeof(*p));
        if (!p)
                return -ENOMEM;
        p->ops = ops;
        p->data = data;
        p->settling_max = settling_max;
        *ret = p;
        return 0;
}

void nspool_drop(struct nspool *p, struct nsentry *e)
{
        if (!e)
                return;
        e->view = netview_free(e->view);
        e->diag = safe_close(e->diag);
        e->nsfd = safe_close(e->nsfd);
        p->ops->free(e, p->data);
}

int nsentry_open_inside(struct nsentry *e)
{
        int r = netview_open(&e->view);
        if (r < 0)
                return r;
        /* without it sockets are not destroyed, only closed with the rest */
        e->diag = sockdiag_open();
        if (e->diag < 0)
                e->diag = -1;
        return 0;
}

int nsentry_record(struct nsentry *e)
{
        int r = e->view ? netview_record(e->view, e->nsfd) : -ENOENT;
        if (r < 0)
                e->view = netview_free(e->view);
        return r;
}

struct nsentry *nspool_take(struct nspool *p)
{
        struct nsentry *e = p->idle;
        if (e) {
                p->idle = e->next;
                p->n_idle--;
                e->next = NULL;
                p->st.reused++;
        }
        return e;
}

/* Its sockets destroyed; true when none is left (or none can be counted:
 * then the kernel frees it with its last). */
static bool destroy_sockets(struct nspool *p, struct nsentry *e)
{
        unsigned long left = 1;
        if (e->view && netview_sockets(e->view, &left) == 0 && left == 0)
                return true;
        unsigned n = 0;
        if (e->diag >= 0)
                sockdiag_destroy_all(e->diag, &n);
        p->st.sockets_destroyed += n;
        return !e->view || (netview_sockets(e->view, &left) == 0 && left == 0);
}

/* Let go: closed now if no socket holds it, else with its links cut (its
 * address is free again at once) lingering, or if too many linger,
 * closed too and counted. */
static void let_go(struct nspool *p, struct nsentry *e)
{
        if (destroy_sockets(p, e)) {
                nspool_drop(p, e);
                return;
        }
        if (p->ops->cut)
                p->ops->cut(e, p->data);
        if (p->lingering.n >= NSPOOL_LINGER_MAX) {
                p->st.abandoned++;
                nspool_drop(p, e);
                return;
        }
        e->due_ms = monotonic_ms() + NSPOOL_LINGER_MS;
        push(&p->lingering, e);
}

struct nspool *nspool_free(struct nspool *p)
{
        if (!p)
                return NULL;
        /* sockets destroyed, so that no namespace outlives the daemon */
        for (struct queue *q = &p->settling; q; q = q == &p->settling ? &p->lingering : NULL)
                for (struct nsentry *e; (e = pop(q));) {
                        destroy_sockets(p, e);
                        nspool_drop(p, e);
                }
        while (p->idle) {
                struct nsentry *e = p->idle;
                p->idle = e->next;
                nspool_drop(p, e);
        }
        free(p);
        return NULL;
}

void nspool_give(struct nspool *p, struct nsentry *e, bool dirty)
{
        if (!e)
                return;
        if (dirty || !e->view || p->settling.n >= p->settling_max) {
                p->st.changed += dirty;
                let_go(p, e);
                return;
        }
        e->due_ms = monotonic_ms() + NSPOOL_SETTLE_MS;
        push(&p->settling, e);
}

int nspool_wait_ms(const struct nspool *p)
{
        int64_t due = -1;
        if (p->settling.head)
                due = p->settling.head->due_ms;
        if (p->lingering.head && (due < 0 || p->lingering.head->due_ms < due))
                due = p->lingering.head->due_ms;
        if (due < 0)
                return -1;
        int64_t ms = due - monotonic_ms();
        return ms < 0 ? 0 : ms > 60000 ? 60000 : (int)ms;
}

static void settle_due(struct nspool *p, int64_t now)
{
        while (p->settling.head && p->settling.head->due_ms <= now) {
                struct nsentry *e = pop(&p->settling);
                if (p->n_idle < NSPOOL_IDLE_MAX && netview_same(e->view, e->nsfd) == 1) {
                        e->next = p->idle;
                        p->idle = e;
                        p->n_idle++;
                        continue;
                }
                p->st.changed += p->n_idle < NSPOOL_IDLE_MAX;
                let_go(p, e);
        }
}

/* Lingering namespaces at their deadline: their sockets destroyed again,
 * then let go whatever is left (the kernel frees each with its last
 * socket; their links are gone already). */
static void linger_due(struct nspool *p, int64_t now)
{
        while (p->lingering.head && p->lingering.head->due_ms <= now) {
                struct nsentry *e = pop(&p->lingering);
                if (!destroy_sockets(p, e)) {
                        unsigned long left = 0;
                        netview_sockets(e->view, &left);
                        log_warn(NULL, "net.namespace_abandoned",
                                 "sockets=%lu msg=\"sockets left that could not be destroyed; "
                                 "the kernel frees the namespace with the last one\"",
                                 left);
                        p->st.abandoned++;
                }
                nspool_drop(p, e);
        }
}

void nspool_tick(struct nspool *p)
{
        int64_t now = monotonic_ms();
        settle_due(p, now);
        linger_due(p, now);
}

void nspool_get_stats(const struct nspool *p, struct nspool_stats *ret)
{
        *ret = p->st;
        ret->idle = p->n_idle;
        ret->settling = p->settling.n;
        ret->lingering = p->lingering.n;
}
