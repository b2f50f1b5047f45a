/* The socket count that decides whether a run's network namespace may
 * serve another run (net/sockcount.c): read through a descriptor opened
 * inside the namespace, it sees the namespace's unix sockets, bound UDP
 * ones and listening TCP ones, of IPv4 and IPv6, and not the caller's own
 * netlink sockets nor any socket of another namespace. */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <linux/netlink.h>

#include "net/sockcount.h"
#include "test.h"

static long count(int fd)
{
        unsigned long n = 999;
        int r = sockcount_read(fd, &n);
        return r < 0 ? r : (long)n;
}

TEST(sockcount_counts_the_sockets_left_in_a_namespace)
{
        REQUIRE_ROOT("a network namespace of its own (each case runs in a process of its own)");
        int host = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
        EXPECT_INT_OP(unshare(CLONE_NEWNET), ==, 0);
        int fd = sockcount_open();
        EXPECT_INT_OP(fd, >=, 0);
        int nl = socket(AF_NETLINK, SOCK_RAW, NETLINK_ROUTE); /* as the jailer's */
        EXPECT_INT_OP(nl, >=, 0);
        EXPECT_INT_OP(count(fd), ==, 0);
        int udp = socket(AF_INET, SOCK_DGRAM, 0);
        EXPECT_INT_OP(count(fd), ==, 0); /* not bound: holds nothing */
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(4242)};
        EXPECT_INT_OP(bind(udp, (struct sockaddr *)&a, sizeof(a)), ==, 0);
        EXPECT_INT_OP(count(fd), ==, 1);
        int tcp6 = socket(AF_INET6, SOCK_STREAM, 0);
        struct sockaddr_in6 a6 = {.sin6_family = AF_INET6, .sin6_port = htons(4343)};
        EXPECT_INT_OP(bind(tcp6, (struct sockaddr *)&a6, sizeof(a6)), ==, 0);
        EXPECT_INT_OP(listen(tcp6, 1), ==, 0);
        EXPECT_INT_OP(count(fd), ==, 2);
        int pair[2];
        EXPECT_INT_OP(socketpair(AF_UNIX, SOCK_STREAM, 0, pair), ==, 0);
        EXPECT_INT_OP(count(fd), ==, 4);
        /* back in the first namespace, the descriptor still reads the new one */
        EXPECT_INT_OP(setns(host, CLONE_NEWNET), ==, 0);
        int here = socket(AF_UNIX, SOCK_DGRAM, 0);
        EXPECT_INT_OP(count(fd), ==, 4);
        close(here);
        close(udp);
        close(tcp6);
        close(pair[0]);
        close(pair[1]);
        EXPECT_INT_OP(count(fd), ==, 0);
        close(nl);
        close(fd);
        close(host);
}
