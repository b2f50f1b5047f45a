/* The DNS relay: a thread of the HTTP process that takes the queries runs
 * send to their gateway address (UDP and TCP port 53, sockets bound by the
 * privileged parent) and forwards each, unchanged, to the configured
 * upstream resolvers in order, returning the first answer whose ID matches.
 * It parses nothing beyond the DNS header's ID and the TCP length prefix;
 * what runs may reach is nftables' business. Every queue is bounded. */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define DNS_RELAY_MAX_UPSTREAMS 8

struct dns_relay;

struct dns_relay_config {
        int udp_fd; /* bound UDP socket (owned by the relay after start) or -1 */
        int tcp_fd; /* bound+listening TCP socket (owned by the relay after start) or -1 */
        const struct sockaddr_storage *upstreams; /* IPv4 or IPv6, port set (usually 53) */
        size_t n_upstreams;                       /* 1..DNS_RELAY_MAX_UPSTREAMS */
        int timeout_ms;                           /* per upstream attempt, e.g. 2000 */
        unsigned max_inflight; /* UDP queries waiting for an answer, e.g. 256; more are dropped */
        unsigned max_tcp;      /* TCP client connections at once, e.g. 32; more are closed */
};

struct dns_relay_counts {
        uint64_t queries;  /* relayed (UDP and TCP) */
        uint64_t answers;  /* returned to the asking client */
        uint64_t timeouts; /* given up after every upstream failed or stayed silent */
        /* over a bound (max_inflight, max_tcp), under 12 or over 4096 bytes
         * (UDP), a TCP length under 12 or a TCP query cut short */
        uint64_t dropped;
};

/* Starts the relay thread. 0 or -errno: -EINVAL for a config out of
 * bounds (timeout_ms 1..600000, max_inflight 1..65536, max_tcp 1..4096,
 * at least one socket, upstreams AF_INET/AF_INET6 with a port) or a socket
 * of the wrong kind. On success the relay owns udp_fd and tcp_fd (made
 * non-blocking); on failure they stay the caller's. The upstream list is
 * copied. */
int dns_relay_start(const struct dns_relay_config *cfg, struct dns_relay **ret);
/* Stops the thread (wakes it, joins it), closes every fd, frees; NULL-safe;
 * returns NULL. */
struct dns_relay *dns_relay_stop(struct dns_relay *r);
/* The counters, readable from any thread at any time. */
void dns_relay_counts(const struct dns_relay *r, struct dns_relay_counts *ret);
