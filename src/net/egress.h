/* The egress policy of runs with network, as one nftables table: what a
 * run may send to the host (DNS to the gateway only), to other runs
 * (nothing) and to the world (public addresses, minus the default denials,
 * plus network.allow; or only network.egress_only), and the NAT that takes
 * runs' traffic out, with per-run bounds on tracked connections (so on
 * conntrack entries and NAT ports) and on new connections per second.
 * Built as text (unit-tested) and loaded atomically with libnftables; its
 * named counters count refusals by reason. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/netaddr.h"
#include "base/strbuf.h"

enum egress_reason {
        EGRESS_HOST,        /* to the host itself, on any of its addresses */
        EGRESS_LOOPBACK,    /* 127.0.0.0/8, 0.0.0.0/8 */
        EGRESS_PRIVATE,     /* RFC 1918, 100.64.0.0/10 */
        EGRESS_LINK_LOCAL,  /* 169.254.0.0/16 */
        EGRESS_MULTICAST,   /* 224.0.0.0/4, 240.0.0.0/4 (broadcast among them) */
        EGRESS_RUNS,        /* another run */
        EGRESS_EGRESS_ONLY, /* not in network.egress_only */
        EGRESS_DNS_RATE,    /* DNS to the gateway over a run's rate (dropped, not refused) */
        EGRESS_CONNECTIONS, /* the run holds network.max_connections already */
        EGRESS_CONN_RATE,   /* over network.new_connections_per_second */
        EGRESS_REASONS
};

/* The kernel's share of the DNS relay for each run address, on top of
 * the relay's own (net/dnsrelay.h): UDP queries and new TCP connections
 * to the gateway's port 53 a second, and the burst. Looser than the
 * relay's rate, so the relay counts and answers a run over its share;
 * this bound keeps a flood from filling the relay socket's queue, where
 * it would crowd out other runs' queries before the relay sees them. */
#define EGRESS_DNS_RATE_PER_SECOND 400
#define EGRESS_DNS_RATE_BURST 800
/* TCP connections to the relay one run address may have open (its
 * connections waiting in the relay's accept queue among them): twice the
 * relay's share, so the relay still sees and refuses a run over it, and
 * one run cannot fill the accept queue (64) that every run's connection
 * waits in while the relay thread is not running. */
#define EGRESS_DNS_CONNECTIONS 8

/* Seconds conntrack keeps a run's UDP query to the relay, answered or not
 * (its default: 30). The entry counts against network.max_connections
 * while it lives, and the relay needs none of it: at 30 s a run looking
 * names up one after another, each connection closed, was refused after
 * max_connections lookups in 30 s. At 2 s, with the defaults (200 new a
 * second, 1000 held), no run reaches max_connections by DNS alone. */
#define EGRESS_DNS_UDP_TRACKED 2

/* Metric label of each reason: "host", "private", "link_local"... */
extern const char *const egress_reason_names[EGRESS_REASONS];

struct egress_policy {
        char table[32];               /* nftables table name (family inet) */
        struct netaddr_prefix subnet; /* the runs' addresses */
        uint32_t gateway;             /* the host's side, DNS relay */
        const struct netaddr_entry *allow;
        size_t n_allow;
        const struct netaddr_entry *egress_only;
        size_t n_egress_only;
        const struct netaddr_entry *always; /* proxies: open in every mode */
        size_t n_always;
        bool drop_foreign_forwarding; /* we turned forwarding on: keep others' off */
        unsigned log_group;           /* nfnetlink_log group for refusals, 0: none */
        unsigned max_connections;     /* tracked connections per run address, 0: no bound */
        unsigned new_per_second;      /* new connections per second per run address, 0: none */
        bool dns_udp_timeout;         /* UDP DNS to the gateway tracked EGRESS_DNS_UDP_TRACKED s */
};

/* The whole table as nft input, replacing any table of that name. */
int egress_ruleset(const struct egress_policy *p, struct strbuf *out);

struct nft_ctx;
/* Run nft commands; on failure the first line of nft's error in err. */
int egress_nft_run(struct nft_ctx *nft, const char *cmds, char *err, size_t errlen);
int egress_load(struct nft_ctx *nft, const struct egress_policy *p, char *err, size_t errlen);
int egress_unload(struct nft_ctx *nft, const char *table);
/* Packets refused so far, by reason. */
int egress_counters(struct nft_ctx *nft, const char *table, uint64_t ret[EGRESS_REASONS]);
/* Delete tables "lockbox_<pid>" whose daemon is gone; how many. */
int egress_remove_stale(struct nft_ctx *nft);
