/* The socket-diagnostics dump that decides whether a run's network
 * namespace may serve another run (net/rtnl.c): it must see a TCP or UDP
 * socket, IPv4 or IPv6, that still holds a port in the namespace, and a
 * unix socket (which a later run would see in /proc/self/net/unix). */
#include <errno.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "net/rtnl.h"
#include "test.h"

static unsigned count(struct rtnl *diag)
{
        unsigned n = 999;
        int r = sockdiag_sockets(diag, &n);
        return r < 0 ? 1000 + (unsigned)-r : n;
}

/* Linux 6.9 added bound but inactive TCP sockets to the dump. */
static bool kernel_dumps_bound_tcp(void)
{
        struct utsname u;
        int major = 0, minor = 0;
        return uname(&u) == 0 && sscanf(u.release, "%d.%d", &major, &minor) == 2 &&
               (major > 6 || (major == 6 && minor >= 9));
}

TEST(sockdiag_counts_the_sockets_left_in_a_namespace)
{
        REQUIRE_ROOT("a network namespace of its own (each case runs in a process of its own)");
        EXPECT_INT_OP(unshare(CLONE_NEWNET), ==, 0);
        struct rtnl diag = {0};
        EXPECT_INT_OP(sockdiag_open(&diag), ==, 0);
        EXPECT_INT_OP(count(&diag), ==, 0);
        int udp = socket(AF_INET, SOCK_DGRAM, 0);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(4242)};
        EXPECT_INT_OP(bind(udp, (struct sockaddr *)&a, sizeof(a)), ==, 0);
        EXPECT_INT_OP(count(&diag), ==, 1);
        int tcp6 = socket(AF_INET6, SOCK_STREAM, 0);
        struct sockaddr_in6 a6 = {.sin6_family = AF_INET6, .sin6_port = htons(4343)};
        EXPECT_INT_OP(bind(tcp6, (struct sockaddr *)&a6, sizeof(a6)), ==, 0);
        if (kernel_dumps_bound_tcp())
                EXPECT_INT_OP(count(&diag), ==, 2); /* bound, not listening: as a run's is */
        EXPECT_INT_OP(listen(tcp6, 1), ==, 0);
        EXPECT_INT_OP(count(&diag), ==, 2);
        int pair[2];
        EXPECT_INT_OP(socketpair(AF_UNIX, SOCK_STREAM, 0, pair), ==, 0);
        EXPECT_INT_OP(count(&diag), ==, 4); /* a pair: two unix sockets */
        close(udp);
        close(tcp6);
        close(pair[0]);
        close(pair[1]);
        EXPECT_INT_OP(count(&diag), ==, 0);
        rtnl_close(&diag);
}
