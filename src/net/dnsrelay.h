/* The DNS relay: a thread of the HTTP process that takes the queries runs
 * send to their gateway address (UDP and TCP port 53, sockets bound by the
 * privileged parent) and forwards each standard query, unchanged, to the
 * configured upstream resolvers in order, returning the first answer whose
 * ID matches. It serves run addresses only, answers what is not a standard
 * query itself (net/dnsmsg.h), and gives each run address a share of it:
 * a rate, UDP queries in flight and TCP connections, so one run can slow
 * only itself. Every queue is bounded. */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "base/netaddr.h"

#define DNS_RELAY_MAX_UPSTREAMS 8
/* The largest UDP query relayed; a larger datagram is dropped unread
 * (the runs' table drops it before the socket's queue, net/egress.c). */
#define DNS_RELAY_UDP_MAX_QUERY 4096
/* Queries one TCP connection may ask before the relay closes it (after
 * the last answer), and its whole life in timeout_ms units: a client that
 * keeps asking does not keep its slot for ever. */
#define DNS_RELAY_TCP_QUERIES 64
#define DNS_RELAY_TCP_LIFE_TIMEOUTS 10
/* At most one dns.refused log line per source in this many ms (the
 * counters count every refusal). */
#define DNS_RELAY_LOG_INTERVAL_MS 5000

/* Why a query got no relaying (label of lockbox_dns_refused_total). */
enum dns_relay_refusal {
        DNS_REFUSED_SOURCE,    /* the peer is not a run address: ignored */
        DNS_REFUSED_RESPONSE,  /* QR set: dropped, never answered */
        DNS_REFUSED_MALFORMED, /* FORMERR */
        DNS_REFUSED_OPCODE,    /* UPDATE, NOTIFY, ...: NOTIMP */
        DNS_REFUSED_QUESTION,  /* QDCOUNT != 1, AXFR, IXFR: REFUSED */
        DNS_REFUSED_RATE,      /* over the source's rate: dropped (UDP), REFUSED (TCP) */
        DNS_REFUSED_SHARE,     /* over the source's queries in flight or connections */
        DNS_REFUSED_EVICTED,   /* a query or idle connection dropped for another source's */
        DNS_REFUSALS
};
extern const char *const dns_relay_refusal_names[DNS_REFUSALS];

struct dns_relay;

struct dns_relay_config {
        int udp_fd; /* bound UDP socket (owned by the relay after start) or -1 */
        int tcp_fd; /* bound+listening TCP socket (owned by the relay after start) or -1 */
        const struct sockaddr_storage *upstreams; /* IPv4 or IPv6, port set (usually 53) */
        size_t n_upstreams;                       /* 1..DNS_RELAY_MAX_UPSTREAMS */
        int timeout_ms;                           /* per upstream attempt, e.g. 2000 */
        unsigned max_inflight; /* UDP queries waiting for an answer, e.g. 256; more are dropped */
        unsigned max_tcp;      /* TCP client connections at once, e.g. 32; more are closed */
        /* the runs' subnet: only peers from its address + 2 (past the
         * gateway) to its broadcast address - 1 are served; len 1..30 */
        struct netaddr_prefix runs;
        /* each source's share: queries a second (both transports) and the
         * burst it may spend at once; UDP queries in flight
         * (<= max_inflight); TCP connections (<= max_tcp). When every slot
         * is taken, one of the source holding the most is given to a
         * source holding fewer. */
        unsigned source_rate, source_burst, source_inflight, source_tcp;
};

struct dns_relay_counts {
        uint64_t queries;  /* relayed (UDP and TCP) */
        uint64_t answers;  /* returned to the asking client */
        uint64_t timeouts; /* given up after every upstream failed or stayed silent */
        /* over a bound (max_inflight, max_tcp), under 12 or over 4096 bytes
         * (UDP), a TCP length under 12 or a TCP query cut short */
        uint64_t dropped;
        uint64_t refused[DNS_REFUSALS]; /* by enum dns_relay_refusal */
};

/* Starts the relay thread. 0 or -errno: -EINVAL for a config out of
 * bounds (timeout_ms 1..600000, max_inflight 1..65536, max_tcp 1..4096,
 * at least one socket, upstreams AF_INET/AF_INET6 with a port, runs.len
 * 1..30, source_rate 1..100000, source_burst >= 1, source_inflight
 * 1..max_inflight, source_tcp 1..max_tcp) or a socket
 * of the wrong kind. On success the relay owns udp_fd and tcp_fd (made
 * non-blocking); on failure they stay the caller's. The upstream list is
 * copied. */
int dns_relay_start(const struct dns_relay_config *cfg, struct dns_relay **ret);
/* Stops the thread (wakes it, joins it), closes every fd, frees; NULL-safe;
 * returns NULL. */
struct dns_relay *dns_relay_stop(struct dns_relay *r);
/* The counters, readable from any thread at any time. */
void dns_relay_counts(const struct dns_relay *r, struct dns_relay_counts *ret);
