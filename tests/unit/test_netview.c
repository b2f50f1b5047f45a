/* What decides whether a run's network namespace may serve another run:
 * net/netview.c (the per-namespace /proc/net files, host-wide figures
 * masked), net/sockdiag.c (the sockets left destroyed) and net/nspool.c
 * (settle, check, reuse or let go). The cases with a namespace need root
 * and run in a process of their own. */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net/netview.h"
#include "net/nspool.h"
#include "net/sockdiag.h"
#include "test.h"

TEST(netview_masks_only_the_host_wide_figures)
{
        char sockstat[] = "sockets: used 3\n"
                          "TCP: inuse 1 orphan 2 tw 3 alloc 44 mem 555\n"
                          "UDP: inuse 1 mem 7\n"
                          "FRAG: inuse 0 memory 0\n";
        netview_mask("sockstat", sockstat);
        EXPECT_STR_EQ(sockstat, "sockets: used 3\n"
                                "TCP: inuse 1 orphan * tw 3 alloc * mem *\n"
                                "UDP: inuse 1 mem *\n"
                                "FRAG: inuse 0 memory 0\n");
        /* the padding before a figure shrinks as it grows: gone too */
        char protocols[] = "protocol  size sockets  memory press maxhdr  slab module\n"
                           "TCP       2304      1     1031   no     192   yes  kernel\n"
                           "UDP       1344      0        0   NI       0   yes  kernel";
        netview_mask("protocols", protocols);
        EXPECT_STR_EQ(protocols, "protocol  size sockets  memory press maxhdr  slab module\n"
                                 "TCP 2304 1 * * 192 yes kernel\n"
                                 "UDP 1344 0 * * 0 yes kernel");
        char snmp[] = "Ip: Forwarding OutNoRoutes\nIp: 1 5\n";
        netview_mask("snmp", snmp);
        EXPECT_STR_EQ(snmp, "Ip: Forwarding OutNoRoutes\nIp: 1 5\n");
}

/* Ip6OutNoRoutes goes up and no packet leaves: an IPv6 socket bound
 * (IPV6_FREEBIND) to an address it lacks finds no route. */
static void bump_no_route(void)
{
        int s = socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        int one = 1;
        struct sockaddr_in6 a = {.sin6_family = AF_INET6};
        inet_pton(AF_INET6, "fd7e:57ab:9::1", &a.sin6_addr);
        EXPECT_INT_EQ(setsockopt(s, IPPROTO_IPV6, 78 /* IPV6_FREEBIND */, &one, sizeof(one)), 0);
        EXPECT_INT_EQ(bind(s, (struct sockaddr *)&a, sizeof(a)), 0);
        inet_pton(AF_INET6, "fd7e:57ab:7::7", &a.sin6_addr);
        a.sin6_port = htons(9);
        EXPECT_INT_EQ(connect(s, (struct sockaddr *)&a, sizeof(a)), -1);
        close(s);
}

/* Traffic in the namespace the test started in (the host's): TCP over
 * 127.0.0.1, which moves host-wide figures only. */
static void host_traffic(int host)
{
        EXPECT_INT_EQ(setns(host, CLONE_NEWNET), 0);
        int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t len = sizeof(a);
        EXPECT_INT_EQ(bind(l, (struct sockaddr *)&a, sizeof(a)), 0);
        EXPECT_INT_EQ(listen(l, 4), 0);
        getsockname(l, (struct sockaddr *)&a, &len);
        int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        EXPECT_INT_EQ(connect(c, (struct sockaddr *)&a, sizeof(a)), 0);
        int s = accept(l, NULL, NULL);
        static char buf[200000];
        EXPECT_INT_OP(write(s, buf, sizeof(buf)), >, 0);
        close(s);
        close(c);
        close(l);
}

TEST(netview_reads_the_same_until_the_namespace_changes)
{
        REQUIRE_ROOT("a network namespace of its own");
        int host = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
        EXPECT_INT_EQ(unshare(CLONE_NEWNET), 0);
        struct netview *v = NULL;
        EXPECT_INT_EQ(netview_open(&v), 0);
        int ns = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
        EXPECT_INT_EQ(netview_record(v, ns), 0);
        EXPECT_INT_EQ(netview_same(v, ns), 1);
        host_traffic(host); /* from the host's namespace: not this one's */
        EXPECT_INT_EQ(netview_same(v, ns), 1);
        EXPECT_INT_EQ(setns(ns, CLONE_NEWNET), 0);
        bump_no_route();
        EXPECT_INT_EQ(netview_same(v, ns), 0);
        EXPECT_INT_EQ(netview_record(v, ns), 0);
        EXPECT_INT_EQ(netview_same(v, ns), 1);
        int u = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(4242)};
        EXPECT_INT_EQ(bind(u, (struct sockaddr *)&a, sizeof(a)), 0);
        EXPECT_INT_EQ(netview_same(v, ns), 0); /* a socket in udp, sockstat, protocols */
        close(u);
        EXPECT_INT_EQ(netview_same(v, ns), 1);
        netview_free(v);
        close(ns);
        close(host);
}

TEST(sockdiag_destroys_every_tcp_and_udp_socket_of_its_namespace)
{
        REQUIRE_ROOT("a network namespace of its own");
        int host = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
        EXPECT_INT_EQ(unshare(CLONE_NEWNET), 0);
        int diag = sockdiag_open();
        EXPECT_INT_OP(diag, >=, 0);
        struct netview *v = NULL;
        EXPECT_INT_EQ(netview_open(&v), 0);
        int u = socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in6 a6 = {.sin6_family = AF_INET6, .sin6_port = htons(4242)};
        EXPECT_INT_EQ(bind(u, (struct sockaddr *)&a6, sizeof(a6)), 0);
        int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(4343)};
        EXPECT_INT_EQ(bind(l, (struct sockaddr *)&a, sizeof(a)), 0);
        EXPECT_INT_EQ(listen(l, 1), 0);
        unsigned long n = 0;
        EXPECT_INT_EQ(netview_sockets(v, &n), 0);
        EXPECT_UINT_EQ(n, 2);
        /* from the host's namespace: the socket still reaches the other */
        EXPECT_INT_EQ(setns(host, CLONE_NEWNET), 0);
        unsigned destroyed = 0;
        EXPECT_INT_EQ(sockdiag_destroy_all(diag, &destroyed), 0);
        EXPECT_UINT_EQ(destroyed, 2);
        /* the listener is gone; the UDP socket keeps the port it was bound
         * to until it is closed (udp_abort leaves explicit binds), which a
         * run's socket is when its process ends */
        EXPECT_INT_EQ(netview_sockets(v, &n), 0);
        EXPECT_UINT_EQ(n, 1);
        int err = 0;
        socklen_t len = sizeof(err);
        EXPECT_INT_EQ(getsockopt(l, SOL_SOCKET, SO_ERROR, &err, &len), 0);
        EXPECT_INT_EQ(err, ECONNABORTED);
        close(u);
        EXPECT_INT_EQ(netview_sockets(v, &n), 0);
        EXPECT_UINT_EQ(n, 0);
        close(l);
        netview_free(v);
        close(diag);
        close(host);
}

static unsigned freed;

static void count_free(struct nsentry *e, void *data)
{
        freed++;
        free(e);
}

static const struct nspool_ops ops = {.free = count_free};

/* A pool entry for the namespace the caller is in (NULL on failure). */
static struct nsentry *entry_here(void)
{
        struct nsentry *e = calloc(1, sizeof(*e));
        e->nsfd = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
        e->diag = -1;
        if (nsentry_open_inside(e) < 0 || nsentry_record(e) < 0)
                return NULL;
        return e;
}

TEST(nspool_reuses_a_namespace_only_after_it_settled_unchanged)
{
        REQUIRE_ROOT("a network namespace of its own");
        struct nspool *p = NULL;
        EXPECT_INT_EQ(nspool_new(&ops, NULL, NSPOOL_SETTLING_MAX, &p), 0);
        EXPECT_INT_EQ(unshare(CLONE_NEWNET), 0);
        struct nsentry *e = entry_here();
        EXPECT_NOT_NULL(e);
        EXPECT_INT_EQ(nspool_wait_ms(p), -1);
        nspool_give(p, e, false);
        EXPECT_NULL(nspool_take(p)); /* settling */
        EXPECT_INT_OP(nspool_wait_ms(p), >, NSPOOL_SETTLE_MS / 2);
        nspool_tick(p);
        EXPECT_NULL(nspool_take(p));
        usleep((NSPOOL_SETTLE_MS + 50) * 1000);
        EXPECT_INT_EQ(nspool_wait_ms(p), 0);
        nspool_tick(p);
        EXPECT_TRUE(nspool_take(p) == e);
        /* changed while its run held it: let go at its check */
        bump_no_route();
        nspool_give(p, e, false);
        usleep((NSPOOL_SETTLE_MS + 50) * 1000);
        nspool_tick(p);
        EXPECT_NULL(nspool_take(p));
        EXPECT_UINT_EQ(freed, 1);
        /* known dirty: let go at once */
        nspool_give(p, entry_here(), true);
        EXPECT_UINT_EQ(freed, 2);
        struct nspool_stats st;
        nspool_get_stats(p, &st);
        EXPECT_UINT_EQ(st.reused, 1);
        EXPECT_UINT_EQ(st.changed, 2);
        EXPECT_UINT_EQ(st.idle + st.settling + st.lingering, 0);
        nspool_free(p);
}
