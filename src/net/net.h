/* The run network (network.mode: namespace). Every run with network gets
 * a network namespace of its own, made by the jailer before the run
 * starts: loopback up, IPv6 off, and an eth0 that is one end of a veth
 * pair whose host end, lbx<address in hex>, carries the gateway address.
 * The host routes and NATs the runs' traffic; an nftables table (egress.h)
 * decides what they may reach. A namespace serves another run only if,
 * from inside, it reads as it did when it was made once it has settled
 * (nspool.h); else it goes, its sockets destroyed, with its link and
 * address. */
#pragma once

#include <stdint.h>
#include <stddef.h>
#include <sys/socket.h>

#include "net/egress.h"
#include "net/nspool.h"

struct config;
struct net;

/* Check the host can do it and set it up: stale tables of dead daemons
 * removed, IPv4 forwarding on (see forward.h), the egress table loaded, one
 * probe namespace and veth made and removed. On failure err says what is
 * missing and how to fix it. */
int net_open(const struct config *cfg, struct net **ret, char *err, size_t errlen);
/* Remove every link left, the table, and give back the forwarding setting. */
struct net *net_close(struct net *n);

/* The gateway address (host byte order) runs route and resolve through. */
uint32_t net_gateway(const struct net *n);
/* A network namespace for a run, linked and routed: a new one, or one a
 * finished run left untouched. An fd to it (close-on-exec, the caller's
 * to hand to the run and close) in *ret_fd, the run's address (host byte
 * order) in *ret_addr. 0 or -errno, with err filled. */
int net_run_create(struct net *n, int *ret_fd, uint32_t *ret_addr, char *err, size_t errlen);
/* The run of addr is gone (reaped). Its namespace settles and is kept for
 * another run if it still reads as fresh (nspool.h); else it is let go:
 * every TCP and UDP socket left in it destroyed, so that the kernel frees
 * it, its link and its route in the background at once (deleting a link
 * in the jailer's loop would block it for some ms). */
void net_run_release(struct net *n, uint32_t addr);
/* Every link of the network namespace netns_fd but its loopback deleted
 * (a veth's host end goes with it): a shell binding a killed lockboxd
 * left holds the run network's link and address, which must not outlive
 * it. 0 or -errno; the caller stays in its own namespace. */
int net_unplug_namespace(int netns_fd);
/* Milliseconds until net_tick has work (namespaces settling or
 * lingering), or -1; net_tick does it. n may be NULL. */
int net_wait_ms(const struct net *n);
void net_tick(struct net *n);
void net_pool_stats(const struct net *n, struct nspool_stats *ret);

/* The runs' /etc/resolv.conf (malloc'd): the host's search and options
 * lines, and the gateway as the only nameserver. NULL without memory. */
char *net_resolv_conf(const struct net *n);
/* The same from the host's text, for unit tests. */
char *net_resolv_conf_text(const char *host_text, uint32_t gateway);
/* Resolvers DNS is relayed to: network.dns_servers, else the nameservers
 * of /etc/resolv.conf (port 53). How many were written to ret (max). */
size_t net_dns_upstreams(const struct config *cfg, struct sockaddr_storage *ret, size_t max);

/* A packet the egress table refused (logged at most 50 a second per
 * reason; the counters of net_refused() count them all). */
struct net_refusal {
        uint32_t src, dst; /* host byte order */
        uint8_t proto;     /* IPPROTO_TCP, IPPROTO_UDP, ... */
        uint16_t dport;    /* 0 when not TCP or UDP */
        char reason[16];   /* egress_reason_names[] */
};
/* The fd that becomes readable when refusals wait, or -1 (no logging). */
int net_refusal_fd(const struct net *n);
/* Every refusal waiting, to fn. */
void net_refusals_read(struct net *n, void (*fn)(void *data, const struct net_refusal *r),
                       void *data);

/* Packets refused so far, by reason. */
int net_refused(struct net *n, uint64_t ret[EGRESS_REASONS]);

/* The IPv4 address and port of a proxy URL (scheme://[user@]host[:port]),
 * the host resolved with getaddrinfo if it is a name. 0 or -errno. */
int net_proxy_entry(const char *url, struct netaddr_entry *ret);
