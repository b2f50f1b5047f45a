/* The run network (net.h): namespaces, veth pairs, the egress table. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <nftables/libnftables.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/file.h"
#include "base/log.h"
#include "base/netaddr.h"
#include "base/strbuf.h"
#include "base/util.h"
#include "config/config.h"
#include "net/egress.h"
#include "net/forward.h"
#include "net/net.h"
#include "net/nflog.h"
#include "net/netns.h"
#include "net/netview.h"
#include "net/nspool.h"
#include "net/rtnl.h"

/* The peer's index and name inside a run's namespace (lo is 1). */
#define RUN_IFINDEX 2
#define RUN_IFNAME "eth0"

/* A run's network: its namespace and what the pool keeps of it
 * (nspool.h; first, so that an entry is its slot), its address and a route
 * netlink socket inside it. */
struct slot {
        struct nsentry e;
        struct slot *next_busy;
        uint32_t addr;
        struct rtnl inner;
};

struct net {
        struct netaddr_prefix subnet;
        int host_ns;      /* our own network namespace, to come back to */
        struct rtnl rtnl; /* in our namespace */
        struct nft_ctx *nft;
        struct egress_policy policy;
        struct netaddr_entry *entries; /* allow, egress_only, proxies */
        bool forwarding;               /* held through /proc/sys (forward.h) */
        bool link_forwarding;          /* else turned on link by link, ours included */
        int nflog;                     /* refusals as they happen, or -1 */
        int *forwarded;                /* links whose forwarding we turned on, to turn off */
        size_t n_forwarded;
        uint32_t n_slots;    /* run addresses: subnet minus network, gateway, broadcast */
        uint32_t next_slot;  /* handed out round-robin */
        struct slot *busy;   /* held by runs */
        struct nspool *pool; /* namespaces runs left, settling or clean */
};

uint32_t net_gateway(const struct net *n)
{
        return n->subnet.addr + 1;
}

/* The host's end of a run's veth is named after the run's address, so
 * that names never collide between daemons (their subnets do not overlap)
 * and a name still present tells the address is still in use. */
static void link_name(char *buf, size_t len, uint32_t addr)
{
        snprintf(buf, len, "lbx%08x", addr);
}

/* IPv6 off in the namespace we are in, before eth0 exists, where /proc/sys
 * can be written (a container's is often read-only): an extra layer, since
 * the egress table drops every IPv6 packet from runs anyway. */
static void ipv6_off(void)
{
        static const char *const knobs[] = {"/proc/sys/net/ipv6/conf/all/disable_ipv6",
                                            "/proc/sys/net/ipv6/conf/default/disable_ipv6"};
        for (size_t i = 0; i < ELEMENTSOF(knobs); i++) {
                _cleanup_close_ int fd = open(knobs[i], O_WRONLY | O_CLOEXEC);
                if (fd >= 0 && write(fd, "1", 1) != 1)
                        break;
        }
}

struct inner {
        struct rtnl *rtnl;
        struct nsentry *e;
};

/* Inside the new namespace: lo up, a route netlink socket that stays
 * there, and (if wanted) what the pool reads of it. */
static int inner_setup(void *data)
{
        struct inner *in = data;
        ipv6_off();
        int r = rtnl_open(in->rtnl);
        if (r == 0)
                r = rtnl_link_up(in->rtnl, 1);
        if (r == 0 && in->e && nsentry_open_inside(in->e) < 0)
                in->e->view = NULL; /* never reused */
        return r;
}

/* A fresh namespace (its fd) with lo up, and a netlink socket in it. */
static int make_namespace(struct net *n, struct rtnl *inner, struct nsentry *e, int *ret_fd)
{
        struct inner in = {inner, e};
        int r = netns_make(n->host_ns, inner_setup, &in, ret_fd);
        if (r < 0)
                rtnl_close(inner);
        return r;
}

static int link_run(struct net *n, struct rtnl *inner, const char *name, int nsfd, uint32_t addr)
{
        uint32_t gw = net_gateway(n);
        int r = rtnl_veth_create(&n->rtnl, name, RUN_IFNAME, RUN_IFINDEX, nsfd);
        if (r < 0)
                return r;
        int index = (int)if_nametoindex(name);
        if (index <= 0)
                return -ENODEV;
        /* No IPv6 address on the host's end (its packets are dropped by
         * the egress table in any case). */
        rtnl_link_no_ipv6_address(&n->rtnl, index);
        if (n->link_forwarding && (r = rtnl_link_ipv4_forwarding(&n->rtnl, index, true)) < 0)
                return r;
        if ((r = rtnl_link_up(&n->rtnl, index)) < 0)
                return r;
        if ((r = rtnl_addr_add_peer(&n->rtnl, index, gw, addr)) < 0)
                return r;
        if ((r = rtnl_link_up(inner, RUN_IFINDEX)) < 0 ||
            (r = rtnl_addr_add_peer(inner, RUN_IFINDEX, addr, gw)) < 0)
                return r;
        return rtnl_route_default(inner, RUN_IFINDEX, gw);
}

/* The next address whose previous namespace (and so its link) is gone.
 * A namespace outlives its run while a socket of the run still closes
 * (TCP's FIN handshake, say), so an address can stay busy for a while. */
static int next_address(struct net *n, uint32_t *ret)
{
        char name[IF_NAMESIZE];
        for (uint32_t tries = 0; tries < n->n_slots; tries++) {
                uint32_t addr = n->subnet.addr + 2 + n->next_slot;
                n->next_slot = (n->next_slot + 1) % n->n_slots;
                link_name(name, sizeof(name), addr);
                if (if_nametoindex(name) == 0) {
                        *ret = addr;
                        return 0;
                }
        }
        return -EADDRINUSE;
}

/* nspool's: the rest of a slot closed. */
static void slot_free(struct nsentry *e, void *data)
{
        struct slot *s = (struct slot *)e;
        rtnl_close(&s->inner);
        free(s);
}

/* nspool's: a namespace let go whose sockets would not all go: its link
 * removed now, which frees its address (this blocks the loop for a few
 * ms, and happens only when destroying its sockets failed). */
static void slot_cut(struct nsentry *e, void *data)
{
        struct net *n = data;
        char name[IF_NAMESIZE];
        link_name(name, sizeof(name), ((struct slot *)e)->addr);
        rtnl_link_delete(&n->rtnl, name);
}

static const struct nspool_ops slot_ops = {.cut = slot_cut, .free = slot_free};

/* A new namespace, linked and routed, for a slot of its own. */
static int slot_make(struct net *n, struct slot **ret, char *err, size_t errlen)
{
        char name[IF_NAMESIZE];
        struct slot *s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        s->e.nsfd = s->e.diag = -1;
        int r = next_address(n, &s->addr);
        if (r < 0) {
                snprintf(err, errlen, "network: every address of network.subnet is in use");
                free(s);
                return r;
        }
        link_name(name, sizeof(name), s->addr);
        if ((r = make_namespace(n, &s->inner, &s->e, &s->e.nsfd)) < 0) {
                snprintf(err, errlen, "network namespace: %s", strerror(-r));
                s->e.view = netview_free(s->e.view);
                safe_close(s->e.diag);
                free(s);
                return r;
        }
        if ((r = link_run(n, &s->inner, name, s->e.nsfd, s->addr)) < 0) {
                snprintf(err, errlen, "network link %s: %s", name, strerror(-r));
                rtnl_link_delete(&n->rtnl, name);
                nspool_drop(n->pool, &s->e);
                return r;
        }
        nsentry_record(&s->e); /* on failure: never reused */
        *ret = s;
        return 0;
}

int net_run_create(struct net *n, int *ret_fd, uint32_t *ret_addr, char *err, size_t errlen)
{
        struct slot *s = (struct slot *)nspool_take(n->pool);
        if (!s) {
                int r = slot_make(n, &s, err, errlen);
                if (r < 0)
                        return r;
        }
        int fd = fcntl(s->e.nsfd, F_DUPFD_CLOEXEC, 3);
        if (fd < 0) {
                int e = errno;
                snprintf(err, errlen, "network namespace: %s", strerror(e));
                nspool_drop(n->pool, &s->e);
                return -e;
        }
        s->next_busy = n->busy;
        n->busy = s;
        *ret_fd = fd;
        *ret_addr = s->addr;
        return 0;
}

void net_run_release(struct net *n, uint32_t addr)
{
        struct slot **p = n ? &n->busy : NULL;
        while (p && *p && (*p)->addr != addr)
                p = &(*p)->next_busy;
        if (!p || !*p)
                return;
        struct slot *s = *p;
        *p = s->next_busy;
        /* A packet that crossed a link, or a socket left (a run's socket
         * can outlive its processes: an orphaned TCP connection still
         * closing, or one held in flight in a unix pair's queue), tells at
         * once it cannot serve again; else the pool checks everything a run
         * can read of it once it has settled. */
        uint64_t packets = 1;
        unsigned long sockets = 1;
        bool dirty = !s->e.view || rtnl_links_packets(&s->inner, &packets) < 0 || packets > 0 ||
                     netview_sockets(s->e.view, &sockets) < 0 || sockets > 0;
        nspool_give(n->pool, &s->e, dirty);
}

int net_wait_ms(const struct net *n)
{
        return n ? nspool_wait_ms(n->pool) : -1;
}

void net_tick(struct net *n)
{
        if (n)
                nspool_tick(n->pool);
}

void net_pool_stats(const struct net *n, struct nspool_stats *ret)
{
        nspool_get_stats(n->pool, ret);
}

/* ---- DNS ------------------------------------------------------------------- */

/* The host's /etc/resolv.conf, or NULL. */
static char *host_resolv_conf(void)
{
        struct strbuf sb;
        if (file_read("/etc/resolv.conf", 0, 65536, &sb) < 0)
                return NULL;
        return strbuf_steal(&sb, NULL);
}

char *net_resolv_conf_text(const char *host_text, uint32_t gateway)
{
        struct strbuf sb;
        struct in_addr a = {.s_addr = htonl(gateway)};
        char gw[INET_ADDRSTRLEN];
        inet_ntop(AF_INET, &a, gw, sizeof(gw));
        strbuf_init(&sb, 0);
        strbuf_appendf(&sb,
                       "# lockbox: DNS through the gateway, relayed to the host's resolvers\n"
                       "nameserver %s\n",
                       gw);
        for (const char *p = host_text ? host_text : ""; *p;) {
                size_t len = strcspn(p, "\n");
                static const char *const keep[] = {"search", "domain", "options"};
                for (size_t i = 0; i < ELEMENTSOF(keep); i++) {
                        size_t k = strlen(keep[i]);
                        if (len > k && strncmp(p, keep[i], k) == 0 &&
                            (p[k] == ' ' || p[k] == '\t')) {
                                strbuf_append(&sb, p, len);
                                strbuf_appends(&sb, "\n");
                        }
                }
                p += len + (p[len] == '\n');
        }
        return strbuf_steal(&sb, NULL);
}

char *net_resolv_conf(const struct net *n)
{
        _cleanup_free_ char *host = host_resolv_conf();
        return net_resolv_conf_text(host, net_gateway(n));
}

static bool put_upstream(const char *text, struct sockaddr_storage *ss)
{
        struct sockaddr_in *in4 = (struct sockaddr_in *)ss;
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
        memset(ss, 0, sizeof(*ss));
        if (inet_pton(AF_INET, text, &in4->sin_addr) == 1) {
                in4->sin_family = AF_INET;
                in4->sin_port = htons(53);
                return true;
        }
        if (inet_pton(AF_INET6, text, &in6->sin6_addr) == 1) {
                in6->sin6_family = AF_INET6;
                in6->sin6_port = htons(53);
                return true;
        }
        return false;
}

size_t net_dns_upstreams(const struct config *c, struct sockaddr_storage *ret, size_t max)
{
        size_t n = 0;
        for (size_t i = 0; i < c->n_net_dns_servers && n < max; i++)
                n += put_upstream(c->net_dns_servers[i], &ret[n]);
        if (c->n_net_dns_servers)
                return n;
        _cleanup_free_ char *text = host_resolv_conf();
        for (char *save = NULL, *line = text ? strtok_r(text, "\n", &save) : NULL; line && n < max;
             line = strtok_r(NULL, "\n", &save)) {
                char addr[INET6_ADDRSTRLEN + 1];
                if (sscanf(line, " nameserver %46s", addr) == 1)
                        n += put_upstream(addr, &ret[n]);
        }
        return n;
}

int net_refusal_fd(const struct net *n)
{
        return n->nflog;
}

void net_refusals_read(struct net *n, void (*fn)(void *data, const struct net_refusal *r),
                       void *data)
{
        if (n->nflog >= 0)
                nflog_drain(n->nflog, fn, data);
}

int net_refused(struct net *n, uint64_t ret[EGRESS_REASONS])
{
        return egress_counters(n->nft, n->policy.table, ret);
}

/* ---- set-up ------------------------------------------------------------------ */

int net_proxy_entry(const char *url, struct netaddr_entry *ret)
{
        const char *p = strstr(url, "://");
        unsigned port = strncmp(url, "https", 5) == 0   ? 443
                        : strncmp(url, "socks", 5) == 0 ? 1080
                                                        : 80;
        p = p ? p + 3 : url;
        const char *at = strchr(p, '@'), *end = p + strcspn(p, "/?#");
        if (at && at < end)
                p = at + 1;
        char host[256];
        size_t len = (size_t)(end - p);
        if (len == 0 || len >= sizeof(host))
                return -EINVAL;
        memcpy(host, p, len);
        host[len] = '\0';
        char *colon = strrchr(host, ':');
        if (colon && !strchr(host, ']')) {
                *colon = '\0';
                port = (unsigned)atoi(colon + 1);
                if (port == 0 || port > 65535)
                        return -EINVAL;
        }
        struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *ai = NULL;
        if (getaddrinfo(host, NULL, &hints, &ai) != 0 || !ai)
                return -EHOSTUNREACH;
        uint32_t a = ntohl(((struct sockaddr_in *)ai->ai_addr)->sin_addr.s_addr);
        freeaddrinfo(ai);
        *ret = (struct netaddr_entry){.dst = {.addr = a, .len = 32}, .port = port};
        return 0;
}

/* network.allow, network.egress_only and the proxies, parsed into one array. */
static int build_entries(struct net *n, const struct config *c)
{
        const char *proxies[] = {c->proxy_http, c->proxy_https, c->proxy_socks5};
        size_t total = c->n_net_allow + c->n_net_egress_only + ELEMENTSOF(proxies);
        n->entries = calloc(total, sizeof(*n->entries));
        if (!n->entries)
                return -ENOMEM;
        struct netaddr_entry *e = n->entries;
        for (size_t i = 0; i < c->n_net_allow; i++)
                netaddr_parse_entry(c->net_allow[i], e++, NULL); /* checked by config */
        struct egress_policy *p = &n->policy;
        p->allow = n->entries;
        p->n_allow = c->n_net_allow;
        p->egress_only = e;
        for (size_t i = 0; i < c->n_net_egress_only; i++)
                netaddr_parse_entry(c->net_egress_only[i], e++, NULL);
        p->n_egress_only = c->n_net_egress_only;
        p->always = e;
        for (size_t i = 0; i < ELEMENTSOF(proxies); i++) {
                if (!proxies[i] || !*proxies[i])
                        continue;
                if (net_proxy_entry(proxies[i], e) < 0) {
                        /* not a reason to refuse every run: this proxy
                         * just stays closed to runs (logged without its
                         * user and password) */
                        const char *at = strrchr(proxies[i], '@');
                        log_warn(NULL, "network.proxy_unresolved",
                                 "proxy=%s msg=\"no IPv4 address and port found at start-up: "
                                 "runs cannot reach it\"",
                                 log_q(at ? at + 1 : proxies[i]));
                        continue;
                }
                e++;
                p->n_always++;
        }
        return 0;
}

/* A namespace and a veth made and removed, so a host that cannot (no
 * veth driver, no CAP_NET_ADMIN) is found at start-up. */
static int probe(struct net *n, char *err, size_t errlen)
{
        struct rtnl inner = {0};
        int nsfd = -1;
        char name[IF_NAMESIZE];
        snprintf(name, sizeof(name), "lbxp%ld", (long)(getpid() % 100000000));
        int r = make_namespace(n, &inner, NULL, &nsfd);
        if (r < 0) {
                snprintf(err, errlen, "cannot create a network namespace: %s", strerror(-r));
                return r;
        }
        rtnl_close(&inner);
        r = rtnl_veth_create(&n->rtnl, name, RUN_IFNAME, RUN_IFINDEX, nsfd);
        if (r == 0)
                rtnl_link_delete(&n->rtnl, name);
        else
                snprintf(err, errlen, "cannot create a veth pair: %s", strerror(-r));
        close(nsfd);
        return r;
}

/* The subnet must be ours alone: no address of the host in it (another
 * daemon's gateway, a real network). */
static int check_subnet_free(struct net *n, char *err, size_t errlen)
{
        struct ifaddrs *list = NULL;
        if (getifaddrs(&list) < 0)
                return 0;
        int r = 0;
        for (struct ifaddrs *i = list; i && r == 0; i = i->ifa_next) {
                if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET)
                        continue;
                uint32_t a = ntohl(((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr);
                if (!netaddr_contains(&n->subnet, a))
                        continue;
                char sub[32];
                netaddr_format_prefix(&n->subnet, sub, sizeof(sub));
                snprintf(err, errlen,
                         "network.subnet %s is in use on this host (interface %s%s); choose "
                         "a range no interface or other lockboxd uses",
                         sub, i->ifa_name,
                         strncmp(i->ifa_name, "lbx", 3) == 0 ? ", another lockboxd's run" : "");
                r = -EADDRINUSE;
        }
        freeifaddrs(list);
        return r;
}

int net_unplug_namespace(int netns_fd)
{
        _cleanup_close_ int own = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
        if (own < 0)
                return -errno;
        if (setns(netns_fd, CLONE_NEWNET) < 0)
                return -errno;
        struct rtnl r = {0};
        int err = rtnl_open(&r);
        struct if_nameindex *names = if_nameindex();
        if (setns(own, CLONE_NEWNET) < 0)
                abort(); /* the jailer would go on in another namespace */
        for (struct if_nameindex *i = names; err == 0 && i && i->if_index; i++)
                if (strcmp(i->if_name, "lo") != 0)
                        err = rtnl_link_delete(&r, i->if_name);
        if (names)
                if_freenameindex(names);
        rtnl_close(&r);
        return err;
}

static bool link_forwards(const char *name)
{
        char path[96], text[4];
        snprintf(path, sizeof(path), "/proc/sys/net/ipv4/conf/%s/forwarding", name);
        return file_read_buf(path, text, sizeof(text)) > 0 && text[0] == '1';
}

/* /proc/sys is read-only (a container's, or systemd's ProtectKernelTunables):
 * forwarding on through netlink for every link of this namespace that had
 * it off (turned off again at stop), and for each run's link as it is
 * made. */
static int forward_by_link(struct net *n, char *err, size_t errlen)
{
        struct if_nameindex *list = if_nameindex();
        size_t count = 0;
        for (struct if_nameindex *i = list; i && i->if_index; i++)
                count++;
        n->forwarded = calloc(count + 1, sizeof(int));
        int r = list && n->forwarded ? 0 : -ENOMEM;
        for (struct if_nameindex *i = list; r == 0 && i && i->if_index; i++) {
                if (strncmp(i->if_name, "lbx", 3) == 0 || link_forwards(i->if_name))
                        continue;
                r = rtnl_link_ipv4_forwarding(&n->rtnl, (int)i->if_index, true);
                if (r == 0)
                        n->forwarded[n->n_forwarded++] = (int)i->if_index;
        }
        if (list)
                if_freenameindex(list);
        if (r < 0) {
                snprintf(err, errlen,
                         "cannot turn on IPv4 forwarding (/proc/sys is read-only and netlink "
                         "says %s); in a container start it with --sysctl net.ipv4.ip_forward=1",
                         strerror(-r));
                return r;
        }
        n->link_forwarding = true;
        log_info(NULL, "network.forwarding", "%s",
                 "msg=\"/proc/sys is read-only: IPv4 forwarding turned on link by link\"");
        return 0;
}

/* The egress table with UDP queries to the relay tracked briefly where the
 * kernel has conntrack timeout policies; else with conntrack's default. */
static int load_table(struct net *n, char *why, size_t whylen)
{
        n->policy.dns_udp_timeout = n->policy.max_connections > 0;
        int r = egress_load(n->nft, &n->policy, why, whylen);
        if (r < 0 && n->policy.dns_udp_timeout) {
                n->policy.dns_udp_timeout = false;
                if ((r = egress_load(n->nft, &n->policy, NULL, 0)) == 0)
                        log_warn(NULL, "network.no_dns_timeout", "error=%s", log_q(why));
        }
        return r;
}

/* The egress table, logging refusals to a group of ours where the kernel
 * can (nfnetlink_log); without it, counters only. */
static int load_policy(struct net *n, char *err, size_t errlen)
{
        char why[200];
        uint16_t group;
        if (nflog_open((uint16_t)(20000 + getpid() % 40000), &n->nflog, &group) == 0) {
                n->policy.log_group = group;
                if (load_table(n, why, sizeof(why)) == 0)
                        return 0;
                log_warn(NULL, "network.no_refusal_log", "error=%s", log_q(why));
                n->nflog = safe_close(n->nflog);
                n->policy.log_group = 0;
        }
        int r = load_table(n, why, sizeof(why));
        if (r < 0)
                snprintf(err, errlen, "cannot load the nftables egress table: %s", why);
        return r;
}

static int open_steps(struct net *n, const struct config *c, char *err, size_t errlen)
{
        int r;
        n->host_ns = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
        if (n->host_ns < 0) {
                snprintf(err, errlen, "cannot open /proc/self/ns/net: %s", strerror(errno));
                return -errno;
        }
        if ((r = rtnl_open(&n->rtnl)) < 0) {
                snprintf(err, errlen, "cannot open a route netlink socket: %s", strerror(-r));
                return r;
        }
        if ((r = check_subnet_free(n, err, errlen)) < 0 || (r = build_entries(n, c)) < 0)
                return r;
        if ((r = probe(n, err, errlen)) < 0)
                return r;
        if (!(n->nft = nft_ctx_new(NFT_CTX_DEFAULT))) {
                snprintf(err, errlen, "cannot start libnftables");
                return -ENOMEM;
        }
        egress_remove_stale(n->nft);
        r = forward_acquire(&n->policy.drop_foreign_forwarding, err, errlen);
        if (r == -EROFS)
                r = forward_by_link(n, err, errlen);
        else
                n->forwarding = r == 0;
        if (r < 0)
                return r;
        return load_policy(n, err, errlen);
}

int net_open(const struct config *c, struct net **ret, char *err, size_t errlen)
{
        struct net *n = calloc(1, sizeof(*n));
        if (!n)
                return -ENOMEM;
        n->host_ns = -1;
        n->nflog = -1;
        netaddr_parse_prefix(c->net_subnet, &n->subnet, NULL);
        n->n_slots = (uint32_t)(netaddr_size(&n->subnet) - 3);
        snprintf(n->policy.table, sizeof(n->policy.table), "lockbox_%ld", (long)getpid());
        /* settling namespaces keep their addresses: half the subnet at most */
        uint32_t settling =
            n->n_slots / 2 < NSPOOL_SETTLING_MAX ? n->n_slots / 2 : NSPOOL_SETTLING_MAX;
        if (nspool_new(&slot_ops, n, settling, &n->pool) < 0) {
                free(n);
                return -ENOMEM;
        }
        n->policy.subnet = n->subnet;
        n->policy.gateway = net_gateway(n);
        n->policy.max_connections = (unsigned)c->net_max_connections;
        n->policy.new_per_second = (unsigned)c->net_new_connections_per_second;
        int r = open_steps(n, c, err, errlen);
        if (r < 0) {
                net_close(n);
                return r;
        }
        *ret = n;
        return 0;
}

/* Links of ours still present: namespaces the kernel has yet to free. */
static size_t links_left(const struct net *n)
{
        struct if_nameindex *list = if_nameindex();
        size_t left = 0;
        for (struct if_nameindex *i = list; i && i->if_index; i++) {
                unsigned addr;
                char end;
                if (sscanf(i->if_name, "lbx%8x%c", &addr, &end) == 1 &&
                    netaddr_contains(&n->subnet, addr))
                        left++;
        }
        if (list)
                if_freenameindex(list);
        return left;
}

/* The last runs' namespaces go in the background once they are gone:
 * wait a little for their links, so a stopped daemon leaves none. */
static void wait_links_gone(const struct net *n)
{
        for (int i = 0; i < 100 && links_left(n) > 0; i++)
                usleep(20 * 1000);
        size_t left = links_left(n);
        if (left)
                log_warn(NULL, "net.links_left",
                         "count=%zu msg=\"the kernel frees them with "
                         "their namespaces\"",
                         left);
}

struct net *net_close(struct net *n)
{
        if (!n)
                return NULL;
        for (struct slot *s = n->busy, *next; s; s = next) {
                next = s->next_busy;
                nspool_give(n->pool, &s->e, true);
        }
        n->pool = nspool_free(n->pool);
        if (n->rtnl.nl)
                wait_links_gone(n);
        if (n->nft) {
                egress_unload(n->nft, n->policy.table);
                nft_ctx_free(n->nft);
        }
        if (n->forwarding)
                forward_release();
        for (size_t i = 0; i < n->n_forwarded; i++)
                rtnl_link_ipv4_forwarding(&n->rtnl, n->forwarded[i], false);
        free(n->forwarded);
        rtnl_close(&n->rtnl);
        safe_close(n->host_ns);
        safe_close(n->nflog);
        free(n->entries);
        free(n);
        return NULL;
}
