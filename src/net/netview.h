/* What a program inside a network namespace can read of it, recorded when
 * the namespace is made and compared before it serves another run: the
 * per-namespace files of /proc/net (counters, sockets, multicast groups,
 * flow labels, routes, neighbours, addresses), with the figures the kernel
 * keeps host-wide masked. A run can open no netlink socket (its socket
 * rule allows TCP and UDP only), so these files are all it sees of the
 * namespace's state. Private to src/net/. */
#pragma once

#include <stdbool.h>

struct netview;

/* A view of the caller's current network namespace: its
 * /proc/net/protocols, opened now (it goes on reading that namespace after
 * a setns elsewhere, and holds it). The other files are opened at each
 * record or check, from inside the namespace (setns to nsfd, the caller's
 * descriptor of it, and back), so that a namespace waiting in a pool holds
 * one descriptor here, not thirty. 0 or -errno. */
int netview_open(struct netview **ret);
struct netview *netview_free(struct netview *v);

/* Record the namespace's present state as its fresh state (files this
 * kernel lacks are left out). 0 or -errno. */
int netview_record(struct netview *v, int nsfd);
/* 1 when every file reads as recorded, 0 when one differs, -errno when
 * one cannot be read whole (the caller treats it as differing). */
int netview_same(struct netview *v, int nsfd);
/* Sockets of every protocol but netlink in the namespace (sockcount.h). */
int netview_sockets(struct netview *v, unsigned long *ret);

/* A file's text with its host-wide figures masked, for tests: name is the
 * file's name under /proc/net, text is changed in place. */
void netview_mask(const char *name, char *text);
