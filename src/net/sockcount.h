/* How many sockets a network namespace holds, from its /proc/net/protocols
 * (the kernel's per-namespace count of each protocol's sockets in use: a
 * sum of per-CPU counters, where a socket-diagnostics dump would walk the
 * host's whole TCP and UDP tables). Private to src/net/. */
#pragma once

/* /proc/self/net/protocols of the caller's current network namespace,
 * opened now: the descriptor goes on reading that namespace's figures
 * after a setns elsewhere. -errno on failure. */
int sockcount_open(void);

/* Sockets of every protocol in that namespace (TCP, UDP, unix, raw,
 * packet, ...) but netlink, whose sockets there are the jailer's own. 0 or
 * -errno. Counted: unix sockets from their creation, UDP ones once bound,
 * TCP ones once listening or connected (and while they close). */
int sockcount_read(int fd, unsigned long *ret);
