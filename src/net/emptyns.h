/* Empty network namespaces for runs without network, kept for the next
 * run when the last one left nothing in them. A run without network
 * either gets a namespace of its own from clone3(CLONE_NEWNET), which the
 * kernel makes (~0.4 ms of CPU) and tears down after the run (as much
 * again, in a worker), or one from here. Each has only its loopback,
 * down; it serves again only if no socket is left in it once its run has
 * been reaped (a run without network cannot make one but a unix pair,
 * which could outlive its processes held in flight in its own queue, and
 * a later run would see in /proc/self/net/unix) and it reads as fresh once
 * settled (nspool.h). Used by the jailer only. */
#pragma once

#include "net/nspool.h"

struct emptyns;
struct emptyns_slot;

/* The pool; -errno if the caller's own namespace cannot be held (to come
 * back to). */
int emptyns_new(struct emptyns **ret);
struct emptyns *emptyns_free(struct emptyns *p);

/* A namespace for one run: *ret_fd is a new descriptor of it for the
 * child (close-on-exec), *ret_slot what to give back once the run is
 * reaped. -errno (and the caller lets the clone make one) on failure. */
int emptyns_take(struct emptyns *p, int *ret_fd, struct emptyns_slot **ret_slot);
/* The run is reaped: the namespace waits for the next run, or goes. */
void emptyns_release(struct emptyns *p, struct emptyns_slot *s);
/* Milliseconds until emptyns_tick has work, or -1 (p may be NULL). */
int emptyns_wait_ms(const struct emptyns *p);
void emptyns_tick(struct emptyns *p);
void emptyns_pool_stats(const struct emptyns *p, struct nspool_stats *ret);
