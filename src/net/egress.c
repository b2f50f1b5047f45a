/* The runs' egress policy as an nftables table (egress.h), family inet:
 * runs have no IPv6 route and every IPv6 packet from a run's link is
 * dropped; an IPv4-mapped IPv6 address leaves a run as an IPv4 packet, so
 * it meets the IPv4 rules like any other. */
#include <errno.h>
#include <jansson.h>
#include <nftables/libnftables.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/dnsrelay.h"
#include "net/egress.h"

const char *const egress_reason_names[EGRESS_REASONS] = {
    [EGRESS_HOST] = "host",
    [EGRESS_LOOPBACK] = "loopback",
    [EGRESS_PRIVATE] = "private",
    [EGRESS_LINK_LOCAL] = "link_local",
    [EGRESS_MULTICAST] = "multicast",
    [EGRESS_RUNS] = "runs",
    [EGRESS_EGRESS_ONLY] = "egress_only",
    [EGRESS_DNS_RATE] = "dns_rate",
    [EGRESS_CONNECTIONS] = "connections",
    [EGRESS_CONN_RATE] = "connection_rate",
};

/* The default denials, by reason, in the order they are checked. */
static const struct {
        enum egress_reason reason;
        const char *set;
} denials[] = {
    {EGRESS_LOOPBACK, "127.0.0.0/8, 0.0.0.0/8"},
    {EGRESS_PRIVATE, "10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16, 100.64.0.0/10"},
    {EGRESS_LINK_LOCAL, "169.254.0.0/16"},
    {EGRESS_MULTICAST, "224.0.0.0/4, 240.0.0.0/4"},
};

/* "a . tcp . 80, a . udp . 80" for the port entries; "a/8" for the rest. */
static void append_elements(struct strbuf *sb, const struct netaddr_entry *e, size_t n,
                            bool with_port)
{
        bool first = true;
        for (size_t i = 0; i < n; i++) {
                char a[32];
                if ((e[i].port != 0) != with_port)
                        continue;
                netaddr_format_prefix(&e[i].dst, a, sizeof(a));
                if (with_port)
                        strbuf_appendf(sb, "%s%s . tcp . %u, %s . udp . %u", first ? "" : ", ", a,
                                       e[i].port, a, e[i].port);
                else
                        strbuf_appendf(sb, "%s%s", first ? "" : ", ", a);
                first = false;
        }
}

static size_t count_entries(const struct netaddr_entry *e, size_t n, bool with_port)
{
        size_t k = 0;
        for (size_t i = 0; i < n; i++)
                k += (e[i].port != 0) == with_port;
        return k;
}

/* Sets name_net (addresses) and name_port (address . protocol . port)
 * with the entries, and the rules accepting them. */
static void append_sets(struct strbuf *sets, struct strbuf *rules, const char *name,
                        const struct netaddr_entry *e, size_t n)
{
        if (count_entries(e, n, false)) {
                strbuf_appendf(sets, "  set %s_net { type ipv4_addr; flags interval; elements = { ",
                               name);
                append_elements(sets, e, n, false);
                strbuf_appends(sets, " } }\n");
                strbuf_appendf(rules, "    ip daddr @%s_net accept\n", name);
        }
        if (count_entries(e, n, true)) {
                strbuf_appendf(sets,
                               "  set %s_port { type ipv4_addr . inet_proto . inet_service; "
                               "flags interval; elements = { ",
                               name);
                append_elements(sets, e, n, true);
                strbuf_appends(sets, " } }\n");
                strbuf_appendf(rules, "    ip daddr . meta l4proto . th dport @%s_port accept\n",
                               name);
        }
}

/* One chain per reason: count, log (at most 50 a second, so a flood costs
 * nothing but the counter), refuse. The limit is a match of its own rule:
 * over it, that rule ends and the next one still refuses. Two reasons
 * drop instead of refusing: a run over its DNS rate (an ICMP error per
 * datagram of a flood would only add to it), and a connection over the
 * rate (TCP sends its SYN again a second later and gets through once the
 * run is back under the rate, as a burst of a scraper should; the program
 * sees a delay, not an error). */
static void append_deny_chains(struct strbuf *out, unsigned log_group)
{
        for (size_t i = 0; i < EGRESS_REASONS; i++) {
                const char *r = egress_reason_names[i];
                strbuf_appendf(out, "  chain deny_%s {\n    counter name %s\n", r, r);
                if (log_group)
                        strbuf_appendf(out,
                                       "    limit rate 50/second burst 50 packets log prefix "
                                       "\"%s\" group %u snaplen 64\n",
                                       r, log_group);
                bool drop = i == EGRESS_DNS_RATE || i == EGRESS_CONN_RATE;
                strbuf_appends(out, drop ? "    drop\n  }\n" : "    goto refuse\n  }\n");
        }
}

/* Elements of the per-run sets: one per run address with connections of
 * late. A subnet larger than a /16 gets the 65536 of a /16 (nft's own
 * default is 65535): elements leave as their connections expire, but an
 * address that found the set full would go unbounded until they do. */
static unsigned bound_set_size(const struct egress_policy *p)
{
        uint64_t n = netaddr_size(&p->subnet);
        return n > 65536 ? 65536 : (unsigned)n;
}

/* The sets of the per-run bounds, keyed by the run's address: its tracked
 * connections (nf_conncount: an element goes when its count falls to 0)
 * and its rate of new ones (an element goes a minute after the address
 * last opened one). */
static void append_bound_sets(struct strbuf *out, const struct egress_policy *p)
{
        if (p->dns_udp_timeout && p->max_connections)
                strbuf_appendf(out,
                               "  ct timeout dns_query { protocol udp; l3proto ip; "
                               "policy = { unreplied : %u, replied : %u }; }\n",
                               EGRESS_DNS_UDP_TRACKED, EGRESS_DNS_UDP_TRACKED);
        if (p->max_connections)
                strbuf_appendf(
                    out, "  set run_connections { type ipv4_addr; size %u; flags dynamic; }\n",
                    bound_set_size(p));
        if (p->new_per_second)
                strbuf_appendf(out,
                               "  set run_new_connections { type ipv4_addr; size %u; "
                               "flags dynamic,timeout; timeout 60s; }\n",
                               bound_set_size(p));
}

/* The per-run bounds, in prerouting: they see every connection a run
 * opens, to the world and to the host (DNS) alike, before the policy. A
 * packet of a connection conntrack already holds (confirmed: its first
 * packet was let through) passes, whatever its state: the bounds count
 * conntrack entries, not packets (a one-way UDP flow stays "new" to
 * conntrack until it sees a reply). The first packet of a new entry then
 * takes a token of its address's rate, then is counted with the entries
 * its address holds (ct count: TCP connections that have closed are not
 * counted; UDP entries are, until they expire, 30 s unanswered, 120 s once
 * both sides have talked for 2 s). Every NATed connection is one of these
 * entries, so the masquerade ports a run holds to one destination are
 * bounded too. A refused first packet never confirms its entry, and the
 * count drops it on its next walk. */
static void append_bounds(struct strbuf *out, const struct egress_policy *p, const char *subnet,
                          const char *gw)
{
        if (!p->max_connections && !p->new_per_second)
                return;
        strbuf_appendf(out,
                       "  chain bounds {\n"
                       "    type filter hook prerouting priority -5; policy accept;\n"
                       "    ip saddr != %s accept\n"
                       "    ct status confirmed accept\n",
                       subnet);
        /* A run's UDP query to the relay is counted only while in flight
         * (EGRESS_DNS_UDP_TRACKED): the timeout is set on its entry made
         * but not yet confirmed. Needs the kernel's conntrack timeout
         * policies (nf_conntrack_timeout); without, the table loads
         * without it (net.c). */
        if (p->dns_udp_timeout && p->max_connections)
                strbuf_appendf(out, "    ip daddr %s udp dport 53 ct timeout set \"dns_query\"\n",
                               gw);
        if (p->new_per_second)
                strbuf_appendf(out,
                               "    update @run_new_connections { ip saddr limit rate over "
                               "%u/second burst %u packets } goto deny_connection_rate\n",
                               p->new_per_second, p->new_per_second);
        if (p->max_connections)
                strbuf_appendf(out,
                               "    add @run_connections { ip saddr ct count over %u } "
                               "goto deny_connections\n",
                               p->max_connections);
        strbuf_appends(out, "  }\n");
}

int egress_ruleset(const struct egress_policy *p, struct strbuf *out)
{
        char subnet[32], gw[32];
        struct netaddr_prefix g = {.addr = p->gateway, .len = 32};
        netaddr_format_prefix(&p->subnet, subnet, sizeof(subnet));
        netaddr_format_prefix(&g, gw, sizeof(gw));
        struct strbuf sets, always, rules;
        strbuf_init(&sets, 0);
        strbuf_init(&always, 0);
        strbuf_init(&rules, 0);
        /* the proxies: open in every mode, also on an address of the host */
        append_sets(&sets, &always, "always", p->always, p->n_always);
        bool only = p->n_egress_only > 0;
        if (only)
                append_sets(&sets, &rules, "egress_only", p->egress_only, p->n_egress_only);
        else
                append_sets(&sets, &rules, "allow", p->allow, p->n_allow);

        /* Declaring then deleting makes the load replace an older table in
         * the same transaction, whether or not one exists. */
        strbuf_appendf(out, "table inet %s\ndelete table inet %s\ntable inet %s {\n", p->table,
                       p->table, p->table);
        for (size_t i = 0; i < EGRESS_REASONS; i++)
                strbuf_appendf(out, "  counter %s { }\n", egress_reason_names[i]);
        strbuf_append(out, sets.data ? sets.data : "", sets.len);
        /* each run address's DNS rate (dns_to_gateway), forgotten 10 s
         * after its last packet, and its open TCP connections to the relay */
        strbuf_appends(out, "  set dns_udp { type ipv4_addr; size 65536; flags dynamic,timeout; "
                            "timeout 10s; }\n"
                            "  set dns_syn { type ipv4_addr; size 65536; flags dynamic,timeout; "
                            "timeout 10s; }\n"
                            "  set dns_conn { type ipv4_addr; size 65536; flags dynamic; }\n");
        append_bound_sets(out, p);
        append_deny_chains(out, p->log_group);
        append_bounds(out, p, subnet, gw);
        strbuf_appendf(out,
                       "  chain refuse {\n"
                       "    meta l4proto tcp reject with tcp reset\n"
                       "    reject\n"
                       "  }\n"
                       "  chain input {\n"
                       "    type filter hook input priority -5; policy accept;\n"
                       "    meta nfproto ipv6 iifname \"lbx*\" drop\n"
                       "    ip daddr %s meta l4proto { tcp, udp } th dport 53 goto dns_to_gateway\n"
                       "    ip saddr %s jump run_to_host\n"
                       "  }\n"
                       /* the relay serves runs only: a run's address, on a
                        * run's link, the one its route goes through (no
                        * run speaks as another); from the host itself (lo),
                        * a neighbour or a container: dropped. A datagram
                        * the relay would not read is dropped before the
                        * rate, which counts packets: 64 of 64 KiB would
                        * fill the relay socket's queue (8 MiB) */
                       "  chain dns_to_gateway {\n"
                       "    iifname != \"lbx*\" drop\n"
                       "    ip saddr != %s drop\n"
                       "    fib saddr . iif oif missing drop\n"
                       "    udp length > %u drop\n"
                       "    meta l4proto udp update @dns_udp { ip saddr limit rate over "
                       "%u/second burst %u packets } goto deny_dns_rate\n"
                       "    tcp flags & (syn | ack) == syn update @dns_syn { ip saddr limit rate "
                       "over %u/second burst %u packets } goto deny_dns_rate\n"
                       "    meta l4proto tcp ct state new add @dns_conn { ip saddr ct count over "
                       "%u } goto deny_dns_rate\n"
                       "    accept\n"
                       "  }\n"
                       "  chain run_to_host {\n"
                       "%s"
                       "    goto deny_host\n"
                       "  }\n"
                       "  chain forward {\n"
                       "    type filter hook forward priority -5; policy accept;\n"
                       "    meta nfproto ipv6 iifname \"lbx*\" drop\n"
                       "    ip daddr %s ct state established,related accept\n"
                       "    ip daddr %s ip saddr %s goto deny_runs\n"
                       "    ip daddr %s drop\n"
                       "    ip saddr %s jump egress\n",
                       gw, subnet, subnet, DNS_RELAY_UDP_MAX_QUERY + 8, EGRESS_DNS_RATE_PER_SECOND,
                       EGRESS_DNS_RATE_BURST, EGRESS_DNS_RATE_PER_SECOND, EGRESS_DNS_RATE_BURST,
                       EGRESS_DNS_CONNECTIONS, always.data ? always.data : "", subnet, subnet,
                       subnet, subnet, subnet);
        if (p->drop_foreign_forwarding)
                strbuf_appends(out, "    iifname != \"lbx*\" oifname != \"lbx*\" drop\n");
        strbuf_appends(out, "  }\n"
                            "  chain egress {\n"
                            "    ct state established,related accept\n"
                            "    meta l4proto != { tcp, udp } drop\n");
        strbuf_append(out, always.data ? always.data : "", always.len);
        strbuf_append(out, rules.data ? rules.data : "", rules.len);
        if (only) {
                strbuf_appends(out, "    goto deny_egress_only\n");
        } else {
                for (size_t i = 0; i < ELEMENTSOF(denials); i++)
                        strbuf_appendf(out, "    ip daddr { %s } goto deny_%s\n", denials[i].set,
                                       egress_reason_names[denials[i].reason]);
                strbuf_appends(out, "    accept\n");
        }
        strbuf_appendf(out,
                       "  }\n"
                       "  chain postrouting {\n"
                       "    type nat hook postrouting priority 100; policy accept;\n"
                       "    ip saddr %s ip daddr != %s masquerade\n"
                       "  }\n"
                       "}\n",
                       subnet, subnet);
        strbuf_free(&sets);
        strbuf_free(&always);
        strbuf_free(&rules);
        return out->data ? 0 : -ENOMEM;
}

int egress_nft_run(struct nft_ctx *nft, const char *cmds, char *err, size_t errlen)
{
        nft_ctx_buffer_error(nft);
        int r = nft_run_cmd_from_buffer(nft, cmds);
        const char *e = nft_ctx_get_error_buffer(nft);
        if (r != 0 && err) {
                /* nft's message names the command line; keep its first line */
                size_t n = e ? strcspn(e, "\n") : 0;
                snprintf(err, errlen, "%.*s", (int)n, n ? e : "nft failed");
        }
        nft_ctx_unbuffer_error(nft);
        return r == 0 ? 0 : -EIO;
}

int egress_load(struct nft_ctx *nft, const struct egress_policy *p, char *err, size_t errlen)
{
        struct strbuf sb;
        strbuf_init(&sb, 0);
        int r = egress_ruleset(p, &sb);
        if (r == 0)
                r = egress_nft_run(nft, sb.data, err, errlen);
        strbuf_free(&sb);
        return r;
}

int egress_unload(struct nft_ctx *nft, const char *table)
{
        char cmd[96];
        snprintf(cmd, sizeof(cmd), "delete table inet %s", table);
        return egress_nft_run(nft, cmd, NULL, 0);
}

/* nft's JSON output for cmd, parsed; NULL on failure. */
static json_t *nft_json(struct nft_ctx *nft, const char *cmd)
{
        unsigned flags = nft_ctx_output_get_flags(nft);
        nft_ctx_output_set_flags(nft, flags | NFT_CTX_OUTPUT_JSON);
        nft_ctx_buffer_output(nft);
        nft_ctx_buffer_error(nft);
        json_t *root = NULL;
        if (nft_run_cmd_from_buffer(nft, cmd) == 0) {
                const char *text = nft_ctx_get_output_buffer(nft);
                root = text ? json_loads(text, 0, NULL) : NULL;
        }
        nft_ctx_unbuffer_output(nft);
        nft_ctx_unbuffer_error(nft);
        nft_ctx_output_set_flags(nft, flags);
        return root;
}

int egress_counters(struct nft_ctx *nft, const char *table, uint64_t ret[EGRESS_REASONS])
{
        char cmd[96];
        snprintf(cmd, sizeof(cmd), "list counters table inet %s", table);
        json_t *root = nft_json(nft, cmd);
        if (!root)
                return -EIO;
        uint64_t v[EGRESS_REASONS] = {0};
        json_t *items = json_object_get(root, "nftables"), *it;
        size_t i;
        json_array_foreach(items, i, it)
        {
                json_t *c = json_object_get(it, "counter");
                const char *name = json_string_value(json_object_get(c, "name"));
                for (size_t k = 0; name && k < EGRESS_REASONS; k++)
                        if (strcmp(name, egress_reason_names[k]) == 0)
                                v[k] = (uint64_t)json_integer_value(json_object_get(c, "packets"));
        }
        json_decref(root);
        memcpy(ret, v, sizeof(v));
        return 0;
}

int egress_remove_stale(struct nft_ctx *nft)
{
        json_t *root = nft_json(nft, "list tables inet");
        if (!root)
                return -EIO;
        int removed = 0;
        json_t *items = json_object_get(root, "nftables"), *it;
        size_t i;
        json_array_foreach(items, i, it)
        {
                const char *name =
                    json_string_value(json_object_get(json_object_get(it, "table"), "name"));
                char *end;
                if (!name || strncmp(name, "lockbox_", 8) != 0)
                        continue;
                long pid = strtol(name + 8, &end, 10);
                if (*end || pid <= 0 || (kill((pid_t)pid, 0) == 0 || errno != ESRCH))
                        continue;
                removed += egress_unload(nft, name) == 0;
        }
        json_decref(root);
        return removed;
}
