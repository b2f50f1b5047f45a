/* http/deadline.c: a connection past its deadline has its socket shut
 * down (its peer sees the end of the stream); one re-armed in time, one
 * with no deadline and one removed are left alone. */
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "http/deadline.h"
#include "http/metrics.h"
#include "test.h"

/* true if the peer saw the end of the stream within ms */
static bool peer_sees_eof(int peer, int ms)
{
        struct pollfd p = {peer, POLLIN, 0};
        if (poll(&p, 1, ms) != 1)
                return false;
        char c;
        return read(peer, &c, 1) == 0;
}

TEST(deadline_cuts_a_late_connection_and_spares_the_rest)
{
        int late[2], rearmed[2], none[2], removed[2];
        EXPECT_INT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, late), 0);
        EXPECT_INT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, rearmed), 0);
        EXPECT_INT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, none), 0);
        EXPECT_INT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, removed), 0);
        metrics_init(NULL, NULL);
        struct deadlines *d = deadlines_start();
        EXPECT_NOT_NULL(d);
        struct deadline_watch *wl = deadline_watch_add(d, late[0]);
        struct deadline_watch *wr = deadline_watch_add(d, rearmed[0]);
        struct deadline_watch *wn = deadline_watch_add(d, none[0]);
        struct deadline_watch *wx = deadline_watch_add(d, removed[0]);
        deadline_watch_arm(d, wl, DEADLINE_BODY, 100);
        deadline_watch_arm(d, wr, DEADLINE_HEADERS, 300);
        deadline_watch_arm(d, wn, DEADLINE_HEADERS, 100);
        deadline_watch_arm(d, wn, DEADLINE_NONE, 100); /* answered: none */
        deadline_watch_arm(d, wx, DEADLINE_HEADERS, 100);
        deadline_watch_remove(d, wx); /* closed by libmicrohttpd first */
        usleep(150 * 1000);
        deadline_watch_arm(d, wr, DEADLINE_HEADERS, 5000); /* a new request began */
        EXPECT_TRUE(peer_sees_eof(late[1], 2000));
        EXPECT_TRUE(!peer_sees_eof(rearmed[1], 600));
        EXPECT_TRUE(!peer_sees_eof(none[1], 10));
        EXPECT_TRUE(!peer_sees_eof(removed[1], 10));
        char *t = metrics_render(0);
        EXPECT_STR_CONTAINS(t, "lockbox_http_deadline_closed_total{phase=\"body\"} 1\n");
        EXPECT_STR_CONTAINS(t, "lockbox_http_deadline_closed_total{phase=\"headers\"} 0\n");
        free(t);
        deadlines_stop(d); /* frees the watches still there */
        for (int i = 0; i < 2; i++) {
                close(late[i]);
                close(rearmed[i]);
                close(none[i]);
                close(removed[i]);
        }
}
