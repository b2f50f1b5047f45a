/* Unit tests for ipc/channel.c over socketpairs: a message and its fds
 * arrive whole and close-on-exec; a message of the wrong size, one cut by
 * the buffer, or more fds than asked for is a protocol error that leaves
 * no received fd open; EOF, an empty queue and a gone peer; the jail's
 * sync channel on top of it. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ipc/channel.h"
#include "jail/jail.h"
#include "test.h"

struct msg {
        uint32_t a, b;
        char text[16];
};

static void seqpacket_pair(int sv[2])
{
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
                sv[0] = sv[1] = -1;
}

TEST(channel_message_and_fds_arrive_whole)
{
        int sv[2], p[2], q[2];
        seqpacket_pair(sv);
        EXPECT_INT_OP(sv[0], >=, 0);
        EXPECT_INT_EQ(pipe2(p, O_CLOEXEC), 0);
        EXPECT_INT_EQ(pipe2(q, O_CLOEXEC), 0);
        struct msg m = {.a = 7, .b = 0xdeadbeef, .text = "hello"};
        int fds[] = {p[1], q[0], p[0]};
        EXPECT_ERRNO(channel_send(sv[0], &m, sizeof(m), fds, 3), 0);
        struct msg got = {0};
        int rfds[4] = {-1, -1, -1, -1};
        size_t nf = 99;
        EXPECT_INT_EQ(channel_recv(sv[1], &got, sizeof(got), rfds, 4, &nf), 1);
        EXPECT_SIZE_EQ(nf, 3);
        EXPECT_UINT_EQ(got.a, 7);
        EXPECT_UINT_EQ(got.b, 0xdeadbeef);
        EXPECT_STR_EQ(got.text, "hello");
        for (size_t i = 0; i < 3; i++) {
                EXPECT_INT_OP(rfds[i], >=, 0);
                EXPECT_INT_OP(rfds[i], !=, fds[i]); /* new descriptors of the same files */
                EXPECT_INT_EQ(fcntl(rfds[i], F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
        }
        EXPECT_INT_EQ(rfds[3], -1);
        /* the received write end feeds the original read end, in order */
        EXPECT_INT_EQ(write(rfds[0], "xy", 2), 2);
        char buf[4] = "";
        EXPECT_INT_EQ(read(p[0], buf, sizeof(buf)), 2);
        EXPECT_MEM_EQ(buf, 2, "xy", 2);
        EXPECT_INT_EQ(write(q[1], "z", 1), 1);
        EXPECT_INT_EQ(read(rfds[1], buf, sizeof(buf)), 1);
        EXPECT_INT_EQ(buf[0], 'z');
}

TEST(channel_message_without_fds)
{
        int sv[2];
        seqpacket_pair(sv);
        uint64_t v = 0x0102030405060708ull, got = 0;
        EXPECT_ERRNO(channel_send(sv[1], &v, sizeof(v), NULL, 0), 0);
        int fd = -1;
        size_t nf = 5;
        EXPECT_INT_EQ(channel_recv(sv[0], &got, sizeof(got), &fd, 0, &nf), 1);
        EXPECT_SIZE_EQ(nf, 0);
        EXPECT_UINT_EQ(got, v);
}

TEST(channel_recv_empty_queue_and_eof)
{
        int sv[2];
        seqpacket_pair(sv);
        struct msg m;
        int fd;
        size_t nf = 0;
        EXPECT_ERRNO(channel_recv(sv[0], &m, sizeof(m), &fd, 1, &nf), -EAGAIN);
        close(sv[1]);
        EXPECT_INT_EQ(channel_recv(sv[0], &m, sizeof(m), &fd, 1, &nf), 0);
}

/* A message shorter than expected (a peer that sent half a message, or a
 * different version): refused, its fds closed. */
TEST(channel_short_message_is_refused_and_its_fds_closed)
{
        int sv[2], p[2];
        seqpacket_pair(sv);
        EXPECT_INT_EQ(pipe2(p, O_CLOEXEC), 0);
        uint32_t half = 7;
        EXPECT_ERRNO(channel_send(sv[0], &half, sizeof(half), p, 2), 0);
        close(p[0]);
        close(p[1]);
        int before = test_open_fds();
        struct msg m;
        int rfds[2];
        size_t nf = 0;
        EXPECT_ERRNO(channel_recv(sv[1], &m, sizeof(m), rfds, 2, &nf), -EPROTO);
        EXPECT_INT_EQ(test_open_fds(), before);
        /* a later, well-formed message still comes through */
        struct msg ok = {.a = 1};
        EXPECT_ERRNO(channel_send(sv[0], &ok, sizeof(ok), NULL, 0), 0);
        EXPECT_INT_EQ(channel_recv(sv[1], &m, sizeof(m), rfds, 2, &nf), 1);
        EXPECT_UINT_EQ(m.a, 1);
}

TEST(channel_long_message_is_refused_whole)
{
        int sv[2], p[2];
        seqpacket_pair(sv);
        EXPECT_INT_EQ(pipe2(p, O_CLOEXEC), 0);
        char big[sizeof(struct msg) + 8];
        memset(big, 'b', sizeof(big));
        EXPECT_ERRNO(channel_send(sv[0], big, sizeof(big), &p[0], 1), 0);
        close(p[0]);
        int before = test_open_fds();
        struct msg m;
        int fd = -1;
        size_t nf = 0;
        EXPECT_ERRNO(channel_recv(sv[1], &m, sizeof(m), &fd, 1, &nf), -EPROTO);
        EXPECT_INT_EQ(test_open_fds(), before);
        /* the rest of that message is not read as the next one */
        EXPECT_ERRNO(channel_recv(sv[1], &m, sizeof(m), &fd, 1, &nf), -EAGAIN);
}

TEST(channel_more_fds_than_asked_is_refused_and_all_closed)
{
        int sv[2], p[2];
        seqpacket_pair(sv);
        EXPECT_INT_EQ(pipe2(p, O_CLOEXEC), 0);
        struct msg m = {0};
        int fds[] = {p[0], p[1], p[0]};
        EXPECT_ERRNO(channel_send(sv[0], &m, sizeof(m), fds, 3), 0);
        int before = test_open_fds();
        int rfds[1] = {-1};
        size_t nf = 0;
        EXPECT_ERRNO(channel_recv(sv[1], &m, sizeof(m), rfds, 1, &nf), -EPROTO);
        EXPECT_INT_EQ(test_open_fds(), before);
        /* fds where none are expected: refused too */
        EXPECT_ERRNO(channel_send(sv[0], &m, sizeof(m), fds, 1), 0);
        EXPECT_ERRNO(channel_recv(sv[1], &m, sizeof(m), rfds, 0, &nf), -EPROTO);
        EXPECT_INT_EQ(test_open_fds(), before);
}

TEST(channel_send_limits_and_gone_peer)
{
        int sv[2];
        seqpacket_pair(sv);
        int fds[13];
        for (size_t i = 0; i < 13; i++)
                fds[i] = 0;
        struct msg m = {0};
        EXPECT_ERRNO(channel_send(sv[0], &m, sizeof(m), fds, 13), -EINVAL);
        EXPECT_ERRNO(channel_send(sv[0], &m, sizeof(m), fds, 12), 0);
        EXPECT_ERRNO(channel_send(sv[0], &m, sizeof(m), (int[]){-1}, 1), -EBADF);
        /* A peer gone with messages unread resets the connection; one gone
         * with nothing queued is a broken pipe. No SIGPIPE either way
         * (MSG_NOSIGNAL): the case would die of it. */
        close(sv[1]);
        EXPECT_ERRNO(channel_send(sv[0], &m, sizeof(m), NULL, 0), -ECONNRESET);
        seqpacket_pair(sv);
        close(sv[1]);
        EXPECT_ERRNO(channel_send(sv[0], &m, sizeof(m), NULL, 0), -EPIPE);
}

/* The jail's sync channel goes through the same code: a message with the
 * one descriptor it may carry arrives, one with two is refused and leaves
 * neither open (jail/spawn.c once kept the descriptors of a control
 * message of an unexpected size, unreported). */
TEST(channel_jail_sync_takes_one_fd_at_most)
{
        int sv[2], p[2];
        seqpacket_pair(sv);
        EXPECT_INT_EQ(pipe2(p, O_CLOEXEC), 0);
        struct jail_sync_msg m = {.type = 3, .error = 0, .step = "listener"}, got;
        int fd = -2;
        EXPECT_ERRNO(channel_send(sv[0], &m, sizeof(m), &p[0], 1), 0);
        EXPECT_INT_EQ(jail_sync_recv(sv[1], &got, &fd), 1);
        EXPECT_INT_OP(fd, >=, 0);
        EXPECT_STR_EQ(got.step, "listener");
        close(fd);
        int before = test_open_fds();
        EXPECT_ERRNO(channel_send(sv[0], &m, sizeof(m), p, 2), 0);
        EXPECT_INT_EQ(jail_sync_recv(sv[1], &got, &fd), -EPROTO);
        EXPECT_INT_EQ(fd, -1);
        EXPECT_INT_EQ(test_open_fds(), before);
        EXPECT_ERRNO(channel_send(sv[0], &m, sizeof(m), NULL, 0), 0);
        EXPECT_INT_EQ(jail_sync_recv(sv[1], &got, &fd), 1);
        EXPECT_INT_EQ(fd, -1);
        close(sv[0]);
        EXPECT_INT_EQ(jail_sync_recv(sv[1], &got, &fd), 0); /* EOF */
        close(sv[1]);
        close(p[0]);
        close(p[1]);
}
