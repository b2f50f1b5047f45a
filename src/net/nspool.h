/* The idle-namespace pool both kinds of run namespaces share (net.h for
 * runs with network, emptyns.h for runs without): a namespace a run leaves
 * serves the next run only if, from inside, it reads as it did when it was
 * made (netview.h) once a settle time has passed, long enough for what a
 * kernel timer does shortly after the run (a late report) to show. Others are
 * let go at once: their TCP and UDP sockets destroyed (sockdiag.h) so no
 * orphan holds them, then closed; one whose sockets will not go lingers a
 * bounded time with its link cut, and is then let go anyway. The caller's
 * loop calls nspool_tick when nspool_wait_ms says. Private to src/net/
 * (struct nspool_stats excepted: net.h and emptyns.h hand it out). */
#pragma once

#include <stdbool.h>
#include <stdint.h>

/* How long a namespace settles before its check. What a run can set off
 * in its namespace without a packet crossing a link (which lets it go at
 * once) and that a kernel timer finishes later fires within milliseconds
 * of the run's end (the IGMP report seen leaving ~ms after a run); what
 * fires seconds later (IGMP and MLD retransmissions, flow labels' expiry)
 * comes from socket options the runs' policy refuses. A margin, short
 * enough that at hundreds of runs a second the settling namespaces still
 * fit NSPOOL_SETTLING_MAX. */
#define NSPOOL_SETTLE_MS 250
/* How long a let-go namespace whose sockets could not all be destroyed is
 * kept (its sockets destroyed again each tick), and how many at most. */
#define NSPOOL_LINGER_MS 3000
#define NSPOOL_LINGER_MAX 64
/* Namespaces idle at most, and settling at most (by default: a pool of
 * namespaces with addresses may ask for fewer). About 300 KB of kernel
 * memory each. */
#define NSPOOL_IDLE_MAX 32
#define NSPOOL_SETTLING_MAX 128

struct netview;

/* One namespace, embedded in its owner's record. */
struct nsentry {
        struct nsentry *next;
        int nsfd;
        struct netview *view; /* its fresh state; NULL: never reused */
        int diag;             /* sockdiag.h socket inside it, or -1 */
        int64_t due_ms;       /* settling: when to check; lingering: when to give up */
};

struct nspool_ops {
        /* Let go with sockets left: remove its links now (or NULL). */
        void (*cut)(struct nsentry *e, void *data);
        /* Close what the owner added to e and free it (e->nsfd, view and
         * diag are closed already). */
        void (*free)(struct nsentry *e, void *data);
};

/* What a pool did, for /metrics. */
struct nspool_stats {
        uint64_t reused;            /* namespaces that served another run */
        uint64_t changed;           /* let go: they no longer read as fresh */
        uint64_t sockets_destroyed; /* sockets of let-go namespaces destroyed */
        uint64_t abandoned;         /* let go with sockets left: after NSPOOL_LINGER_MS, or
                                     * at once while NSPOOL_LINGER_MAX linger */
        unsigned idle, settling, lingering;
};

struct nspool;

/* settling_max: at most this many settle at once (others are let go). */
int nspool_new(const struct nspool_ops *ops, void *data, unsigned settling_max,
               struct nspool **ret);
/* Every namespace let go (the lingering ones too, at once). */
struct nspool *nspool_free(struct nspool *p);

/* Open, inside the namespace the caller is in, what the pool needs of it
 * (e->view, e->diag). 0 or -errno. */
int nsentry_open_inside(struct nsentry *e);
/* e's state from now on is its fresh state. 0 or -errno (then never
 * reused). */
int nsentry_record(struct nsentry *e);
/* Close e's descriptors and hand it to ops->free. */
void nspool_drop(struct nspool *p, struct nsentry *e);

/* A namespace ready for a run, or NULL. */
struct nsentry *nspool_take(struct nspool *p);
/* Its run is reaped: settle, then serve again or go. dirty: it is known
 * already that it cannot serve again. */
void nspool_give(struct nspool *p, struct nsentry *e, bool dirty);

/* Milliseconds until nspool_tick has work, or -1. */
int nspool_wait_ms(const struct nspool *p);
void nspool_tick(struct nspool *p);

void nspool_get_stats(const struct nspool *p, struct nspool_stats *ret);
