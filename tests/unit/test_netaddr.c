/* Unit tests for base/netaddr.c (egress entries and subnets as operators
 * write them) and for the texts src/net/ builds: the nftables egress table
 * and the runs' resolv.conf. */
#include <stdlib.h>
#include <string.h>

#include "base/netaddr.h"
#include "net/egress.h"
#include "net/net.h"
#include "test.h"

static const char *why_of(const char *s)
{
        struct netaddr_entry e;
        const char *why = NULL;
        return netaddr_parse_entry(s, &e, &why) == 0 ? "ok" : why;
}

TEST(netaddr_entries_cidr_port_and_address_port)
{
        struct netaddr_entry e;
        EXPECT_INT_EQ(netaddr_parse_entry("10.213.7.2:8080", &e, NULL), 0);
        EXPECT_INT_EQ(e.dst.addr, 0x0ad50702);
        EXPECT_INT_EQ(e.dst.len, 32);
        EXPECT_INT_EQ(e.port, 8080);
        EXPECT_INT_EQ(netaddr_parse_entry("10.0.0.0/8", &e, NULL), 0);
        EXPECT_INT_EQ(e.dst.addr, 0x0a000000);
        EXPECT_INT_EQ(e.dst.len, 8);
        EXPECT_INT_EQ(e.port, 0);
        EXPECT_INT_EQ(netaddr_parse_entry("192.168.0.0/16:443", &e, NULL), 0);
        EXPECT_INT_EQ(e.dst.len, 16);
        EXPECT_INT_EQ(e.port, 443);
        EXPECT_INT_EQ(netaddr_parse_entry("0.0.0.0/0", &e, NULL), 0);
        EXPECT_INT_EQ(e.dst.len, 0);
}

TEST(netaddr_entries_refused_with_a_reason)
{
        EXPECT_STR_CONTAINS(why_of(""), "empty");
        EXPECT_STR_CONTAINS(why_of("10.0.0.1/8"), "host bits");
        EXPECT_STR_CONTAINS(why_of("10.0.0.0/33"), "prefix length");
        EXPECT_STR_CONTAINS(why_of("10.0.0.1:0"), "port");
        EXPECT_STR_CONTAINS(why_of("10.0.0.1:65536"), "port");
        EXPECT_STR_CONTAINS(why_of("10.0.0.1:80x"), "port");
        EXPECT_STR_CONTAINS(why_of("[::1]:80"), "IPv6");
        EXPECT_STR_CONTAINS(why_of("fd00::/8"), "IPv6");
        EXPECT_STR_CONTAINS(why_of("api.internal:8080"), "host names");
        EXPECT_STR_CONTAINS(why_of("10.1.2"), "not an IPv4");
        EXPECT_STR_CONTAINS(why_of("010.1.2.3"), "not an IPv4");
}

TEST(netaddr_prefix_size_contains_and_format)
{
        struct netaddr_prefix p;
        char buf[32];
        EXPECT_INT_EQ(netaddr_parse_prefix("10.191.0.0/16", &p, NULL), 0);
        EXPECT_INT_EQ(netaddr_size(&p), 65536);
        EXPECT_TRUE(netaddr_contains(&p, 0x0abf1234));
        EXPECT_TRUE(!netaddr_contains(&p, 0x0ac00000));
        netaddr_format_prefix(&p, buf, sizeof(buf));
        EXPECT_STR_EQ(buf, "10.191.0.0/16");
        p = (struct netaddr_prefix){.addr = 0xcb007107, .len = 32};
        netaddr_format_prefix(&p, buf, sizeof(buf));
        EXPECT_STR_EQ(buf, "203.0.113.7");
}

static char *ruleset(const struct egress_policy *p)
{
        struct strbuf sb;
        strbuf_init(&sb, 0);
        if (egress_ruleset(p, &sb) < 0)
                return NULL;
        return strbuf_steal(&sb, NULL);
}

TEST(egress_default_policy_denies_by_reason_and_lets_dns_to_the_gateway)
{
        struct egress_policy p = {.table = "lockbox_42",
                                  .subnet = {.addr = 0x0abf0000, .len = 16},
                                  .gateway = 0x0abf0001};
        char *t = ruleset(&p);
        EXPECT_TRUE(t != NULL);
        /* replaces an older table of the same name in one transaction */
        const char *head = "table inet lockbox_42\ndelete table inet lockbox_42\n";
        EXPECT_TRUE(strncmp(t, head, strlen(head)) == 0);
        /* no IPv6 from runs at all, to the host or through it */
        EXPECT_STR_CONTAINS(t, "hook input priority -5; policy accept;\n"
                               "    meta nfproto ipv6 iifname \"lbx*\" drop\n");
        EXPECT_STR_CONTAINS(t, "hook forward priority -5; policy accept;\n"
                               "    meta nfproto ipv6 iifname \"lbx*\" drop\n");
        /* DNS to the gateway: before anything else, from runs only (their
         * links, their addresses, each its own), within a rate per run */
        EXPECT_STR_CONTAINS(t, "    meta nfproto ipv6 iifname \"lbx*\" drop\n"
                               "    ip daddr 10.191.0.1 meta l4proto { tcp, udp } th dport 53 goto "
                               "dns_to_gateway\n"
                               "    ip saddr 10.191.0.0/16 jump run_to_host\n");
        EXPECT_STR_CONTAINS(t, "  chain dns_to_gateway {\n"
                               "    iifname != \"lbx*\" drop\n"
                               "    ip saddr != 10.191.0.0/16 drop\n"
                               "    fib saddr . iif oif missing drop\n"
                               "    udp length > 4104 drop\n"
                               "    meta l4proto udp update @dns_udp { ip saddr limit rate over "
                               "400/second burst 800 packets } goto deny_dns_rate\n"
                               "    tcp flags & (syn | ack) == syn update @dns_syn { ip saddr "
                               "limit rate over 400/second burst 800 packets } goto "
                               "deny_dns_rate\n"
                               "    meta l4proto tcp ct state new add @dns_conn { ip saddr ct "
                               "count over 8 } goto deny_dns_rate\n"
                               "    accept\n  }\n");
        EXPECT_STR_CONTAINS(t, "  chain run_to_host {\n    goto deny_host\n  }\n");
        /* over the rate: counted and dropped, never answered */
        EXPECT_STR_CONTAINS(t, "  chain deny_dns_rate {\n    counter name dns_rate\n"
                               "    drop\n  }\n");
        EXPECT_STR_CONTAINS(t, "ip daddr 10.191.0.0/16 ip saddr 10.191.0.0/16 goto deny_runs");
        EXPECT_STR_CONTAINS(t, "{ 127.0.0.0/8, 0.0.0.0/8 } goto deny_loopback");
        EXPECT_STR_CONTAINS(t, "{ 10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16, 100.64.0.0/10 } "
                               "goto deny_private");
        EXPECT_STR_CONTAINS(t, "{ 169.254.0.0/16 } goto deny_link_local");
        EXPECT_STR_CONTAINS(t, "{ 224.0.0.0/4, 240.0.0.0/4 } goto deny_multicast");
        /* each reason counts, then refuses; without a log group, no log */
        EXPECT_STR_CONTAINS(t, "  chain deny_private {\n    counter name private\n"
                               "    goto refuse\n  }\n");
        EXPECT_TRUE(strstr(t, " log ") == NULL);
        EXPECT_STR_CONTAINS(t, "ip saddr 10.191.0.0/16 ip daddr != 10.191.0.0/16 masquerade");
        EXPECT_STR_CONTAINS(t, "meta l4proto tcp reject with tcp reset");
        /* forwarding of others is left alone unless we turned it on */
        EXPECT_TRUE(strstr(t, "iifname != \"lbx*\" oifname") == NULL);
        free(t);
}

TEST(egress_allow_entries_come_before_the_denials)
{
        struct netaddr_entry allow[] = {{{0x0ad50702, 32}, 8080}, {{0xc0a80000, 16}, 0}};
        struct netaddr_entry proxy[] = {{{0x0a000009, 32}, 3128}};
        struct egress_policy p = {.table = "lockbox_1",
                                  .subnet = {0x0abf0000, 16},
                                  .gateway = 0x0abf0001,
                                  .allow = allow,
                                  .n_allow = 2,
                                  .always = proxy,
                                  .n_always = 1,
                                  .drop_foreign_forwarding = true};
        char *t = ruleset(&p);
        EXPECT_STR_CONTAINS(t, "set allow_port { type ipv4_addr . inet_proto . inet_service; "
                               "flags interval; elements = { 10.213.7.2 . tcp . 8080, "
                               "10.213.7.2 . udp . 8080 } }");
        EXPECT_STR_CONTAINS(t, "set allow_net { type ipv4_addr; flags interval; elements = { "
                               "192.168.0.0/16 } }");
        EXPECT_STR_CONTAINS(t, "elements = { 10.0.0.9 . tcp . 3128, 10.0.0.9 . udp . 3128 }");
        /* a proxy on an address of the host is open too, and only its port */
        EXPECT_STR_CONTAINS(t, "  chain run_to_host {\n"
                               "    ip daddr . meta l4proto . th dport @always_port accept\n"
                               "    goto deny_host");
        EXPECT_TRUE(strstr(t, "@always_port accept") < strstr(t, "@allow_net accept"));
        EXPECT_TRUE(strstr(t, "@allow_port accept") < strstr(t, "goto deny_private"));
        EXPECT_STR_CONTAINS(t, "iifname != \"lbx*\" oifname != \"lbx*\" drop");
        free(t);
}

TEST(egress_only_refuses_everything_else)
{
        struct netaddr_entry only[] = {{{0xcb007107, 32}, 80}};
        struct netaddr_entry allow[] = {{{0x0ad50702, 32}, 8080}};
        struct egress_policy p = {.table = "lockbox_1",
                                  .subnet = {0x0abf0000, 16},
                                  .gateway = 0x0abf0001,
                                  .allow = allow,
                                  .n_allow = 1,
                                  .egress_only = only,
                                  .n_egress_only = 1};
        char *t = ruleset(&p);
        EXPECT_STR_CONTAINS(t, "elements = { 203.0.113.7 . tcp . 80, 203.0.113.7 . udp . 80 }");
        EXPECT_STR_CONTAINS(t, "@egress_only_port accept\n    goto deny_egress_only\n  }");
        /* allow has no say in egress_only mode, and nothing else is accepted */
        EXPECT_TRUE(strstr(t, "allow_port") == NULL);
        EXPECT_TRUE(strstr(t, "goto deny_private") == NULL);
        free(t);
}

TEST(egress_refusals_are_logged_to_the_group_at_a_bounded_rate)
{
        struct egress_policy p = {.table = "lockbox_1",
                                  .subnet = {0x0abf0000, 16},
                                  .gateway = 0x0abf0001,
                                  .log_group = 20042};
        char *t = ruleset(&p);
        /* the limit is a rule of its own: over it, the next rule still refuses */
        EXPECT_STR_CONTAINS(t, "  chain deny_link_local {\n    counter name link_local\n"
                               "    limit rate 50/second burst 50 packets log prefix "
                               "\"link_local\" group 20042 snaplen 64\n    goto refuse\n  }\n");
        free(t);
}

TEST(egress_bounds_count_and_rate_each_run_address_before_the_policy)
{
        struct egress_policy p = {.table = "lockbox_1",
                                  .subnet = {0x0abf0000, 16},
                                  .gateway = 0x0abf0001,
                                  .log_group = 20042,
                                  .max_connections = 1000,
                                  .new_per_second = 200};
        char *t = ruleset(&p);
        /* one element per run address at most; rate elements expire */
        EXPECT_STR_CONTAINS(t, "  set run_connections { type ipv4_addr; size 65536; "
                               "flags dynamic; }\n");
        EXPECT_STR_CONTAINS(t, "  set run_new_connections { type ipv4_addr; size 65536; "
                               "flags dynamic,timeout; timeout 60s; }\n");
        /* in prerouting, so DNS to the gateway counts too; packets of a
         * connection conntrack holds pass; the rate, then the count */
        EXPECT_STR_CONTAINS(t, "  chain bounds {\n"
                               "    type filter hook prerouting priority -5; policy accept;\n"
                               "    ip saddr != 10.191.0.0/16 accept\n"
                               "    ct status confirmed accept\n"
                               "    update @run_new_connections { ip saddr limit rate over "
                               "200/second burst 200 packets } goto deny_connection_rate\n"
                               "    add @run_connections { ip saddr ct count over 1000 } "
                               "goto deny_connections\n  }\n");
        /* over the count: refused; over the rate: dropped (TCP tries again) */
        EXPECT_STR_CONTAINS(t, "  chain deny_connections {\n    counter name connections\n"
                               "    limit rate 50/second burst 50 packets log prefix "
                               "\"connections\" group 20042 snaplen 64\n    goto refuse\n  }\n");
        EXPECT_STR_CONTAINS(t, "  chain deny_connection_rate {\n"
                               "    counter name connection_rate\n"
                               "    limit rate 50/second burst 50 packets log prefix "
                               "\"connection_rate\" group 20042 snaplen 64\n    drop\n  }\n");
        EXPECT_STR_CONTAINS(t, "  counter connections { }\n  counter connection_rate { }\n");
        free(t);
        /* a smaller subnet, a smaller set; 0 leaves its bound out */
        p.subnet = (struct netaddr_prefix){0x0abf0000, 24};
        p.new_per_second = 0;
        t = ruleset(&p);
        EXPECT_STR_CONTAINS(t, "set run_connections { type ipv4_addr; size 256;");
        EXPECT_STR_CONTAINS(t, "    ct status confirmed accept\n"
                               "    add @run_connections { ip saddr ct count over 1000 }");
        EXPECT_TRUE(strstr(t, "run_new_connections") == NULL);
        free(t);
        /* UDP queries to the relay counted only while in flight */
        p.dns_udp_timeout = true;
        t = ruleset(&p);
        EXPECT_STR_CONTAINS(t, "  ct timeout dns_query { protocol udp; l3proto ip; "
                               "policy = { unreplied : 2, replied : 2 }; }\n");
        EXPECT_STR_CONTAINS(t, "    ct status confirmed accept\n"
                               "    ip daddr 10.191.0.1 udp dport 53 ct timeout set \"dns_query\"\n"
                               "    add @run_connections { ip saddr ct count over 1000 }");
        free(t);
        p.max_connections = 0;
        t = ruleset(&p);
        EXPECT_TRUE(strstr(t, "hook prerouting") == NULL);
        EXPECT_TRUE(strstr(t, "dns_query") == NULL);
        EXPECT_TRUE(strstr(t, "set run_") == NULL);
        free(t);
}

TEST(resolv_conf_names_the_gateway_and_keeps_search_and_options)
{
        char *t = net_resolv_conf_text("# generated\nnameserver 10.255.255.53\nnameserver ::1\n"
                                       "search svc.cluster.local cluster.local\n"
                                       "options ndots:5\nsortlist 10.0.0.0\ndomain x.y\n",
                                       0x0abf0001);
        EXPECT_STR_EQ(t, "# lockbox: DNS through the gateway, relayed to the host's resolvers\n"
                         "nameserver 10.191.0.1\n"
                         "search svc.cluster.local cluster.local\noptions ndots:5\ndomain x.y\n");
        free(t);
        t = net_resolv_conf_text(NULL, 0x0abf0001);
        EXPECT_STR_CONTAINS(t, "nameserver 10.191.0.1\n");
        free(t);
}
