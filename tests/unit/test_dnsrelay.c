/* Unit tests for the DNS relay (src/net/dnsrelay.c), on loopback only: a
 * fake upstream (UDP and TCP on one kernel-chosen port, answering from a
 * thread of its own) echoes each query with the QR bit and a tag byte that
 * says which upstream answered; clients are plain sockets bound to
 * 127.0.0.N, each N a run address of its own. Nothing here sends a packet
 * to any address but 127.0.0.0/8 and ::1. */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/util.h"
#include "net/dnsrelay.h"
#include "test.h"

enum fake_mode {
        FAKE_ANSWER,   /* answer every query at once */
        FAKE_SILENT,   /* read UDP queries, never answer; leave TCP ones in the backlog */
        FAKE_WRONG_ID, /* first a runt and an answer with another ID, then the right one */
        FAKE_REVERSE,  /* hold a UDP query until the next, answer the later one first */
};

struct fake {
        enum fake_mode mode;
        unsigned char tag;
        int udp, tcp, stop;
        struct sockaddr_storage addr;
        atomic_uint udp_seen, tcp_seen;
        unsigned char pending[512];
        size_t pending_len;
        struct sockaddr_storage pending_from;
        socklen_t pending_from_len;
        pthread_t thread;
};

static void sleep_ms(int ms)
{
        struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
        nanosleep(&ts, NULL);
}

static struct sockaddr_storage loopback(int family, uint16_t port)
{
        struct sockaddr_storage ss = {0};
        if (family == AF_INET6) {
                struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
                a->sin6_family = AF_INET6;
                a->sin6_addr = in6addr_loopback;
                a->sin6_port = htons(port);
        } else {
                struct sockaddr_in *a = (struct sockaddr_in *)&ss;
                a->sin_family = AF_INET;
                a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
                a->sin_port = htons(port);
        }
        return ss;
}

static socklen_t sa_len(const struct sockaddr_storage *ss)
{
        return ss->ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
}

/* A socket of that type bound to loopback port `port` (0: the kernel's
 * choice), its address in ret_addr. */
static int bound_socket(int family, int type, uint16_t port, struct sockaddr_storage *ret_addr)
{
        int fd = socket(family, type | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        struct sockaddr_storage a = loopback(family, port);
        socklen_t len = sizeof(a);
        if (bind(fd, (struct sockaddr *)&a, sa_len(&a)) < 0 ||
            getsockname(fd, (struct sockaddr *)&a, &len) < 0) {
                int k = -errno;
                close(fd);
                return k;
        }
        *ret_addr = a;
        return fd;
}

/* A 12-byte header with that ID and RD, then one question: name. IN A. */
static size_t make_query(unsigned char *buf, uint16_t id, const char *name)
{
        size_t n = strlen(name);
        unsigned char hdr[12] = {id >> 8, id & 0xff, 0x01, 0x00, 0x00, 0x01};
        memcpy(buf, hdr, sizeof(hdr));
        buf[12] = (unsigned char)n;
        memcpy(buf + 13, name, n);
        memcpy(buf + 13 + n, "\0\0\1\0\1", 5);
        return 13 + n + 5;
}

/* What the fake answers: the query, QR set, then its tag byte. */
static size_t fake_answer(const struct fake *f, const unsigned char *q, size_t n,
                          unsigned char *out)
{
        memcpy(out, q, n);
        out[2] |= 0x80;
        out[n] = f->tag;
        return n + 1;
}

static void fake_on_udp(struct fake *f)
{
        unsigned char q[512], a[513];
        struct sockaddr_storage from;
        socklen_t from_len = sizeof(from);
        ssize_t n = recvfrom(f->udp, q, sizeof(q), 0, (struct sockaddr *)&from, &from_len);
        if (n <= 0)
                return;
        atomic_fetch_add(&f->udp_seen, 1);
        size_t an = fake_answer(f, q, (size_t)n, a);
        switch (f->mode) {
        case FAKE_SILENT:
                return;
        case FAKE_WRONG_ID:
                sendto(f->udp, a, 5, 0, (struct sockaddr *)&from, from_len);
                a[0] ^= 0xff;
                sendto(f->udp, a, an, 0, (struct sockaddr *)&from, from_len);
                a[0] ^= 0xff;
                break;
        case FAKE_REVERSE:
                if (f->pending_len == 0) {
                        memcpy(f->pending, q, (size_t)n);
                        f->pending_len = (size_t)n;
                        f->pending_from = from;
                        f->pending_from_len = from_len;
                        return;
                }
                sendto(f->udp, a, an, 0, (struct sockaddr *)&from, from_len);
                an = fake_answer(f, f->pending, f->pending_len, a);
                from = f->pending_from;
                from_len = f->pending_from_len;
                f->pending_len = 0;
                break;
        case FAKE_ANSWER:
                break;
        }
        sendto(f->udp, a, an, 0, (struct sockaddr *)&from, from_len);
}

static int read_full(int fd, void *buf, size_t n)
{
        size_t got = 0;
        while (got < n) {
                ssize_t k = recv(fd, (char *)buf + got, n - got, 0);
                if (k <= 0)
                        return -1;
                got += (size_t)k;
        }
        return 0;
}

/* Serves one TCP connection to its end (the fake's thread is the test's,
 * so blocking here is fine; the receive timeout bounds it). */
static void fake_serve_tcp(struct fake *f, int fd)
{
        struct timeval tv = {.tv_sec = 2};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        for (;;) {
                unsigned char pre[2], q[1024], a[2 + 1025];
                if (read_full(fd, pre, 2) < 0)
                        break;
                size_t n = (size_t)pre[0] << 8 | pre[1];
                if (n > sizeof(q) || read_full(fd, q, n) < 0)
                        break;
                atomic_fetch_add(&f->tcp_seen, 1);
                size_t an = fake_answer(f, q, n, a + 2);
                a[0] = (unsigned char)(an >> 8);
                a[1] = (unsigned char)an;
                if (test_write_all(fd, a, an + 2, 0) < 0)
                        break;
        }
        close(fd);
}

static void *fake_main(void *arg)
{
        struct fake *f = arg;
        for (;;) {
                struct pollfd p[3] = {
                    {.fd = f->stop, .events = POLLIN},
                    {.fd = f->udp, .events = POLLIN},
                    {.fd = f->mode == FAKE_SILENT ? -1 : f->tcp, .events = POLLIN},
                };
                if (poll(p, 3, -1) < 0 || p[0].revents)
                        break;
                if (p[1].revents)
                        fake_on_udp(f);
                if (p[2].revents) {
                        int fd = accept4(f->tcp, NULL, NULL, SOCK_CLOEXEC);
                        if (fd >= 0)
                                fake_serve_tcp(f, fd);
                }
        }
        return NULL;
}

/* UDP and TCP on the same kernel-chosen loopback port. */
static int fake_start(struct fake *f, int family, enum fake_mode mode, unsigned char tag)
{
        *f = (struct fake){.mode = mode, .tag = tag, .udp = -1, .tcp = -1};
        for (int i = 0; i < 50 && f->udp < 0; i++) {
                f->tcp = bound_socket(family, SOCK_STREAM, 0, &f->addr);
                if (f->tcp < 0)
                        return f->tcp;
                struct sockaddr_storage same;
                uint16_t port =
                    ntohs(family == AF_INET6 ? ((struct sockaddr_in6 *)&f->addr)->sin6_port
                                             : ((struct sockaddr_in *)&f->addr)->sin_port);
                f->udp = bound_socket(family, SOCK_DGRAM, port, &same);
                if (f->udp < 0)
                        f->tcp = safe_close(f->tcp);
        }
        if (f->udp < 0 || listen(f->tcp, 16) < 0)
                return -EADDRINUSE;
        f->stop = eventfd(0, EFD_CLOEXEC);
        if (f->stop < 0)
                return -errno;
        return -pthread_create(&f->thread, NULL, fake_main, f);
}

static void fake_stop(struct fake *f)
{
        uint64_t one = 1;
        if (write(f->stop, &one, sizeof(one)) == sizeof(one))
                pthread_join(f->thread, NULL);
        close(f->udp);
        close(f->tcp);
        close(f->stop);
}

/* An address that refuses: a TCP socket bound but not listening (the
 * connection is reset) whose port has no UDP socket (port unreachable).
 * The socket stays open so the port is not handed out again. */
static int refuser(struct sockaddr_storage *ret_addr)
{
        return bound_socket(AF_INET, SOCK_STREAM, 0, ret_addr);
}

/* ---- the fixture ---------------------------------------------------------- */

/* Every case: up to three upstreams (fakes, or a refusing address first),
 * a relay on 127.0.0.1 serving 127.0.0.0/8 (so clients bound to 127.0.0.2,
 * .3, ... are runs and 127.0.0.1, the gateway's place, is not), and the
 * client sockets the case opened; env_stop() undoes all of it. */
struct env_opts {
        enum fake_mode modes[3];
        size_t n_fakes;
        bool refuser_first;
        int family; /* of the fakes */
        int timeout_ms;
        unsigned max_inflight, max_tcp, rate, burst, source_inflight, source_tcp;
        struct netaddr_prefix runs;
};

struct env {
        struct fake up[3];
        size_t n_fakes;
        int refuser_fd;
        struct dns_relay *r;
        struct sockaddr_storage udp, tcp; /* where clients ask */
        int clients[64];
        size_t n_clients;
};

/* ENV_OPTS(.field = value, ...): the defaults, with the case's own
 * values written over them (designated initializers, later ones win). */
#pragma GCC diagnostic ignored "-Woverride-init"
#define ENV_OPTS(...)                                                                              \
        ((struct env_opts){.modes = {FAKE_ANSWER},                                                 \
                           .n_fakes = 1,                                                           \
                           .family = AF_INET,                                                      \
                           .timeout_ms = 2000,                                                     \
                           .max_inflight = 16,                                                     \
                           .max_tcp = 4,                                                           \
                           .rate = 10000,                                                          \
                           .burst = 10000,                                                         \
                           .source_inflight = 16,                                                  \
                           .source_tcp = 4,                                                        \
                           .runs = {0x7f000000, 8},                                                \
                           __VA_ARGS__})

static int env_start(struct env *e, struct env_opts o)
{
        *e = (struct env){.refuser_fd = -1};
        struct sockaddr_storage ups[4];
        size_t n = 0;
        if (o.refuser_first && (e->refuser_fd = refuser(&ups[n++])) < 0)
                return e->refuser_fd;
        for (size_t i = 0; i < o.n_fakes; i++) {
                int k = fake_start(&e->up[i], o.family, o.modes[i], (unsigned char)('A' + i));
                if (k < 0)
                        return k;
                e->n_fakes++;
                ups[n++] = e->up[i].addr;
        }
        struct dns_relay_config cfg = {
            .upstreams = ups,
            .n_upstreams = n,
            .timeout_ms = o.timeout_ms,
            .max_inflight = o.max_inflight,
            .max_tcp = o.max_tcp,
            .runs = o.runs,
            .source_rate = o.rate,
            .source_burst = o.burst,
            .source_inflight = o.source_inflight,
            .source_tcp = o.source_tcp,
        };
        cfg.udp_fd = bound_socket(AF_INET, SOCK_DGRAM, 0, &e->udp);
        cfg.tcp_fd = bound_socket(AF_INET, SOCK_STREAM, 0, &e->tcp);
        if (cfg.udp_fd < 0 || cfg.tcp_fd < 0 || listen(cfg.tcp_fd, 64) < 0)
                return -EIO;
        return dns_relay_start(&cfg, &e->r);
}

static void env_stop(struct env *e)
{
        e->r = dns_relay_stop(e->r);
        for (size_t i = 0; i < e->n_clients; i++)
                safe_close(e->clients[i]);
        for (size_t i = 0; i < e->n_fakes; i++)
                fake_stop(&e->up[i]);
        safe_close(e->refuser_fd);
        *e = (struct env){.refuser_fd = -1};
}

/* A client socket from 127.0.0.<octet> (2 and up: a run), kept for
 * env_stop(); TCP ones connected to the relay. -1 on failure. */
static int env_client(struct env *e, int type, unsigned octet)
{
        int fd = socket(AF_INET, type | SOCK_CLOEXEC, 0);
        struct sockaddr_in a = {.sin_family = AF_INET,
                                .sin_addr.s_addr = htonl(0x7f000000 | octet)};
        struct timeval tv = {.tv_sec = 3};
        if (fd < 0 || e->n_clients == ELEMENTSOF(e->clients))
                return safe_close(fd);
        e->clients[e->n_clients++] = fd;
        if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0)
                return -1;
        if (type == SOCK_STREAM &&
            connect(fd, (const struct sockaddr *)&e->tcp, sa_len(&e->tcp)) < 0)
                return -1;
        return fd;
}

static int udp_client(struct env *e, unsigned octet)
{
        return env_client(e, SOCK_DGRAM, octet);
}

static int tcp_client(struct env *e, unsigned octet)
{
        return env_client(e, SOCK_STREAM, octet);
}

static int udp_ask(int fd, const struct env *e, const void *q, size_t n)
{
        return sendto(fd, q, n, 0, (const struct sockaddr *)&e->udp, sa_len(&e->udp)) == (ssize_t)n
                   ? 0
                   : -1;
}

/* The next datagram within ms, its size; -1 when none came. */
static ssize_t recv_within(int fd, void *buf, size_t size, int ms)
{
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, ms) <= 0)
                return -1;
        return recv(fd, buf, size, MSG_DONTWAIT);
}

/* true when the peer closed fd within ms (reads end-of-stream). */
static bool closed_within(int fd, int ms)
{
        unsigned char junk[256];
        int64_t end = monotonic_ms() + ms;
        for (;;) {
                int left = (int)(end - monotonic_ms());
                struct pollfd p = {.fd = fd, .events = POLLIN};
                if (left <= 0 || poll(&p, 1, left) <= 0)
                        return false;
                ssize_t n = recv(fd, junk, sizeof(junk), MSG_DONTWAIT);
                if (n == 0 || (n < 0 && errno == ECONNRESET))
                        return true;
        }
}

/* Sends a length-prefixed query in two pieces (the first ends inside the
 * prefix) and reads the length-prefixed answer; its body size or -1. */
static ssize_t tcp_ask(int fd, const unsigned char *q, size_t n, unsigned char *ans, size_t size)
{
        unsigned char msg[600], pre[2];
        msg[0] = (unsigned char)(n >> 8);
        msg[1] = (unsigned char)n;
        memcpy(msg + 2, q, n);
        if (test_write_all(fd, msg, 1, 0) < 0)
                return -1;
        sleep_ms(20);
        if (test_write_all(fd, msg + 1, n + 1, 0) < 0 || read_full(fd, pre, 2) < 0)
                return -1;
        size_t len = (size_t)pre[0] << 8 | pre[1];
        if (len > size || read_full(fd, ans, len) < 0)
                return -1;
        return (ssize_t)len;
}

/* Waits until *field (in a fresh copy of the counts) reaches want. */
#define WAIT_COUNT(r, field, want, ms)                                                             \
        ({                                                                                         \
                struct dns_relay_counts _c;                                                        \
                int64_t _end = monotonic_ms() + (ms);                                              \
                for (;;) {                                                                         \
                        dns_relay_counts((r), &_c);                                                \
                        if (_c.field >= (want) || monotonic_ms() > _end)                           \
                                break;                                                             \
                        sleep_ms(5);                                                               \
                }                                                                                  \
                _c.field;                                                                          \
        })

/* Waits until the fake's counter reaches want: the relay counts a query
 * when it takes it, the fake when the forwarded copy arrives. */
static unsigned wait_seen(atomic_uint *seen, unsigned want, int ms)
{
        int64_t end = monotonic_ms() + ms;
        while (atomic_load(seen) < want && monotonic_ms() <= end)
                sleep_ms(5);
        return atomic_load(seen);
}

/* The answer got (got bytes) is what fake f answers to query q. */
#define EXPECT_ANSWER_FROM(f, a, got, q, n)                                                        \
        do {                                                                                       \
                unsigned char _want[700];                                                          \
                EXPECT_MEM_EQ((a), (size_t)((got) < 0 ? 0 : (got)), _want,                         \
                              fake_answer((f), (q), (n), _want));                                  \
        } while (0)

/* ---- relaying ------------------------------------------------------------- */

TEST(dnsrelay_udp_answer_reaches_the_asking_client)
{
        struct env e;
        EXPECT_INT_EQ(env_start(&e, ENV_OPTS()), 0);
        int c = udp_client(&e, 2);
        unsigned char q[64], a[600];
        size_t n = make_query(q, 0x1234, "example");
        EXPECT_INT_EQ(udp_ask(c, &e, q, n), 0);
        ssize_t got = recv_within(c, a, sizeof(a), 2000);
        EXPECT_ANSWER_FROM(&e.up[0], a, got, q, n);
        EXPECT_INT_EQ(a[0] << 8 | a[1], 0x1234);
        /* counted just after the answer is sent: wait for it */
        EXPECT_INT_EQ(WAIT_COUNT(e.r, answers, 1, 1000), 1);
        struct dns_relay_counts k;
        dns_relay_counts(e.r, &k);
        EXPECT_INT_EQ(k.queries, 1);
        EXPECT_INT_EQ(k.timeouts + k.dropped, 0);
        env_stop(&e);
}

/* Two clients, same ID, both queries pending at once (the fake holds the
 * first until the second arrives and answers the second first): each gets
 * the answer to its own question. */
TEST(dnsrelay_udp_concurrent_clients_each_get_their_own)
{
        struct env e;
        EXPECT_INT_EQ(env_start(&e, ENV_OPTS(.modes = {FAKE_REVERSE})), 0);
        int c1 = udp_client(&e, 2), c2 = udp_client(&e, 3);
        unsigned char q1[64], q2[64], a[600];
        size_t n1 = make_query(q1, 0x4242, "first"), n2 = make_query(q2, 0x4242, "second");
        EXPECT_INT_EQ(udp_ask(c1, &e, q1, n1), 0);
        EXPECT_INT_EQ(WAIT_COUNT(e.r, queries, 1, 2000), 1);
        EXPECT_INT_EQ(udp_ask(c2, &e, q2, n2), 0);
        ssize_t got = recv_within(c2, a, sizeof(a), 2000);
        EXPECT_ANSWER_FROM(&e.up[0], a, got, q2, n2);
        got = recv_within(c1, a, sizeof(a), 2000);
        EXPECT_ANSWER_FROM(&e.up[0], a, got, q1, n1);
        EXPECT_INT_EQ(recv_within(c1, a, sizeof(a), 100), -1);
        EXPECT_INT_EQ(recv_within(c2, a, sizeof(a), 0), -1);
        EXPECT_INT_EQ(WAIT_COUNT(e.r, answers, 2, 1000), 2);
        env_stop(&e);
}

TEST(dnsrelay_udp_answer_with_another_id_is_ignored)
{
        struct env e;
        EXPECT_INT_EQ(env_start(&e, ENV_OPTS(.modes = {FAKE_WRONG_ID})), 0);
        int c = udp_client(&e, 2);
        unsigned char q[64], a[600];
        size_t n = make_query(q, 0xbeef, "example");
        EXPECT_INT_EQ(udp_ask(c, &e, q, n), 0);
        ssize_t got = recv_within(c, a, sizeof(a), 2000);
        EXPECT_ANSWER_FROM(&e.up[0], a, got, q, n);
        /* only the matching answer came through */
        EXPECT_INT_EQ(recv_within(c, a, sizeof(a), 200), -1);
        EXPECT_INT_EQ(WAIT_COUNT(e.r, answers, 1, 1000), 1);
        struct dns_relay_counts k;
        dns_relay_counts(e.r, &k);
        EXPECT_INT_EQ(k.timeouts, 0);
        env_stop(&e);
}

TEST(dnsrelay_udp_silent_first_upstream_falls_back)
{
        struct env e;
        EXPECT_INT_EQ(env_start(&e, ENV_OPTS(.modes = {FAKE_SILENT, FAKE_ANSWER}, .n_fakes = 2,
                                             .timeout_ms = 150)),
                      0);
        int c = udp_client(&e, 2);
        unsigned char q[64], a[600];
        size_t n = make_query(q, 7, "example");
        EXPECT_INT_EQ(udp_ask(c, &e, q, n), 0);
        ssize_t got = recv_within(c, a, sizeof(a), 2000);
        EXPECT_ANSWER_FROM(&e.up[1], a, got, q, n);
        EXPECT_INT_EQ(atomic_load(&e.up[0].udp_seen), 1);
        EXPECT_INT_EQ(atomic_load(&e.up[1].udp_seen), 1);
        EXPECT_INT_EQ(WAIT_COUNT(e.r, answers, 1, 1000), 1);
        struct dns_relay_counts k;
        dns_relay_counts(e.r, &k);
        EXPECT_INT_EQ(k.timeouts, 0);
        env_stop(&e);
}

/* Port unreachable comes back as ECONNREFUSED on the connected socket:
 * the next upstream is asked at once, not after the timeout. */
TEST(dnsrelay_udp_refusing_first_upstream_falls_back_at_once)
{
        struct env e;
        EXPECT_INT_EQ(env_start(&e, ENV_OPTS(.refuser_first = true, .timeout_ms = 5000)), 0);
        int c = udp_client(&e, 2);
        unsigned char q[64], a[600];
        size_t n = make_query(q, 0x0102, "example");
        int64_t t0 = monotonic_ms();
        EXPECT_INT_EQ(udp_ask(c, &e, q, n), 0);
        ssize_t got = recv_within(c, a, sizeof(a), 4000);
        EXPECT_ANSWER_FROM(&e.up[0], a, got, q, n);
        EXPECT_TRUE(monotonic_ms() - t0 < 2000);
        env_stop(&e);
}

TEST(dnsrelay_udp_all_upstreams_silent_counts_a_timeout)
{
        struct env e;
        EXPECT_INT_EQ(env_start(&e, ENV_OPTS(.modes = {FAKE_SILENT, FAKE_SILENT}, .n_fakes = 2,
                                             .timeout_ms = 100)),
                      0);
        int c = udp_client(&e, 2);
        unsigned char q[64], a[600];
        size_t n = make_query(q, 99, "example");
        EXPECT_INT_EQ(udp_ask(c, &e, q, n), 0);
        EXPECT_INT_EQ(WAIT_COUNT(e.r, timeouts, 1, 2000), 1);
        EXPECT_INT_EQ(recv_within(c, a, sizeof(a), 100), -1);
        /* each upstream was asked exactly once */
        EXPECT_INT_EQ(atomic_load(&e.up[0].udp_seen), 1);
        EXPECT_INT_EQ(atomic_load(&e.up[1].udp_seen), 1);
        struct dns_relay_counts k;
        dns_relay_counts(e.r, &k);
        EXPECT_INT_EQ(k.queries, 1);
        EXPECT_INT_EQ(k.answers, 0);
        env_stop(&e);
}

TEST(dnsrelay_udp_short_and_oversized_datagrams_are_dropped)
{
        struct env e;
        EXPECT_INT_EQ(env_start(&e, ENV_OPTS()), 0);
        int c = udp_client(&e, 2);
        static unsigned char big[4097];
        unsigned char q[64], a[600];
        EXPECT_INT_EQ(udp_ask(c, &e, "\x12\x34\x01\x00\x00\x01\0\0\0\0\0", 11), 0);
        EXPECT_INT_EQ(udp_ask(c, &e, "", 0), 0);
        EXPECT_INT_EQ(udp_ask(c, &e, big, sizeof(big)), 0);
        EXPECT_INT_EQ(WAIT_COUNT(e.r, dropped, 3, 2000), 3);
        EXPECT_INT_EQ(recv_within(c, a, sizeof(a), 50), -1);
        /* exactly 4096 bytes: a query with 4096 - 18 bytes of EDNS-like
         * padding behind its question passes (the fake reads 512) */
        size_t n = make_query(q, 0x5151, "ok");
        memcpy(big, q, n);
        EXPECT_INT_EQ(udp_ask(c, &e, big, 4096), 0);
        EXPECT_INT_EQ(recv_within(c, a, sizeof(a), 2000), 513);
        EXPECT_INT_EQ(udp_ask(c, &e, q, n), 0);
        ssize_t got = recv_within(c, a, sizeof(a), 2000);
        EXPECT_ANSWER_FROM(&e.up[0], a, got, q, n);
        EXPECT_INT_EQ(atomic_load(&e.up[0].udp_seen), 2);
        struct dns_relay_counts k;
        dns_relay_counts(e.r, &k);
        EXPECT_INT_EQ(k.dropped, 3);
        EXPECT_INT_EQ(k.queries, 2);
        env_stop(&e);
}

TEST(dnsrelay_tcp_query_relayed_both_ways)
{
        struct env e;
        EXPECT_INT_EQ(env_start(&e, ENV_OPTS()), 0);
        int c = tcp_client(&e, 2);
        EXPECT_TRUE(c >= 0);
        unsigned char q[64], a[600];
        size_t n = make_query(q, 0x7777, "tcp");
        ssize_t got = tcp_ask(c, q, n, a, sizeof(a));
        EXPECT_ANSWER_FROM(&e.up[0], a, got, q, n);
        /* a second query on the same connection */
        n = make_query(q, 0x7778, "again");
        got = tcp_ask(c, q, n, a, sizeof(a));
        EXPECT_ANSWER_FROM(&e.up[0], a, got, q, n);
        EXPECT_INT_EQ(atomic_load(&e.up[0].tcp_seen), 2);
        EXPECT_INT_EQ(WAIT_COUNT(e.r, answers, 2, 1000), 2);
        env_stop(&e);
}

TEST(dnsrelay_tcp_refused_or_silent_upstreams_fall_back)
{
        struct env e;
        EXPECT_INT_EQ(
            env_start(&e, ENV_OPTS(.refuser_first = true, .modes = {FAKE_SILENT, FAKE_ANSWER},
                                   .n_fakes = 2, .timeout_ms = 200)),
            0);
        int c = tcp_client(&e, 2);
        EXPECT_TRUE(c >= 0);
        unsigned char q[64], a[600];
        size_t n = make_query(q, 0x0a0b, "fallback");
        ssize_t got = tcp_ask(c, q, n, a, sizeof(a));
        EXPECT_ANSWER_FROM(&e.up[1], a, got, q, n);
        EXPECT_INT_EQ(WAIT_COUNT(e.r, answers, 1, 1000), 1);
        EXPECT_INT_EQ(atomic_load(&e.up[1].tcp_seen), 1);
        env_stop(&e);
}

TEST(dnsrelay_tcp_all_upstreams_silent_closes_the_client)
{
        struct env e;
        EXPECT_INT_EQ(env_start(&e, ENV_OPTS(.modes = {FAKE_SILENT}, .timeout_ms = 150)), 0);
        int c = tcp_client(&e, 2);
        EXPECT_TRUE(c >= 0);
        unsigned char q[64], msg[66];
        size_t n = make_query(q, 1, "nobody");
        msg[0] = 0;
        msg[1] = (unsigned char)n;
        memcpy(msg + 2, q, n);
        EXPECT_INT_EQ(test_write_all(c, msg, n + 2, 0), 0);
        EXPECT_TRUE(closed_within(c, 2000));
        struct dns_relay_counts k;
        dns_relay_counts(e.r, &k);
        EXPECT_INT_EQ(k.queries, 1);
        EXPECT_INT_EQ(k.timeouts, 1);
        EXPECT_INT_EQ(k.answers, 0);
        env_stop(&e);
}

/* Hostile TCP clients: half a length, a length with too few bytes behind
 * it, a length below a DNS header. Each is closed; UDP still works. */
TEST(dnsrelay_tcp_truncated_clients_do_not_break_the_relay)
{
        struct env e;
        EXPECT_INT_EQ(env_start(&e, ENV_OPTS()), 0);
        int c1 = tcp_client(&e, 2), c2 = tcp_client(&e, 3), c3 = tcp_client(&e, 4);
        EXPECT_TRUE(c1 >= 0 && c2 >= 0 && c3 >= 0);
        unsigned char junk[22] = {0, 100};
        EXPECT_INT_EQ(test_write_all(c1, junk, 1, 0), 0);
        EXPECT_INT_EQ(test_write_all(c2, junk, sizeof(junk), 0), 0);
        EXPECT_INT_EQ(test_write_all(c3, "\0\5hello", 7, 0), 0);
        EXPECT_TRUE(closed_within(c3, 2000));
        shutdown(c1, SHUT_RDWR);
        shutdown(c2, SHUT_RDWR);
        EXPECT_INT_EQ(WAIT_COUNT(e.r, dropped, 3, 2000), 3);
        int c = udp_client(&e, 5);
        unsigned char q[64], a[600];
        size_t n = make_query(q, 0x3333, "after");
        EXPECT_INT_EQ(udp_ask(c, &e, q, n), 0);
        ssize_t got = recv_within(c, a, sizeof(a), 2000);
        EXPECT_ANSWER_FROM(&e.up[0], a, got, q, n);
        EXPECT_INT_EQ(atomic_load(&e.up[0].tcp_seen), 0);
        env_stop(&e);
}

TEST(dnsrelay_tcp_idle_and_extra_clients_are_closed)
{
        struct env e;
        EXPECT_INT_EQ(env_start(&e, ENV_OPTS(.timeout_ms = 300, .max_tcp = 1, .source_tcp = 1)), 0);
        int c1 = tcp_client(&e, 2);
        EXPECT_TRUE(c1 >= 0);
        unsigned char q[64], a[600];
        size_t n = make_query(q, 0x1111, "one");
        ssize_t got = tcp_ask(c1, q, n, a, sizeof(a));
        int64_t t0 = monotonic_ms();
        EXPECT_ANSWER_FROM(&e.up[0], a, got, q, n);
        /* max_tcp is 1: a second client (holding no more than the first
         * one's source) is closed at once */
        int c2 = tcp_client(&e, 3);
        EXPECT_TRUE(c2 >= 0);
        EXPECT_TRUE(closed_within(c2, 200));
        EXPECT_INT_EQ(WAIT_COUNT(e.r, refused[DNS_REFUSED_SHARE], 1, 1000), 1);
        /* the first, idle for timeout_ms * 2, is closed without a drop */
        EXPECT_TRUE(closed_within(c1, 5000));
        EXPECT_TRUE(monotonic_ms() - t0 >= 500);
        /* and its slot is free again */
        int c3 = tcp_client(&e, 3);
        EXPECT_TRUE(c3 >= 0);
        got = tcp_ask(c3, q, n, a, sizeof(a));
        EXPECT_ANSWER_FROM(&e.up[0], a, got, q, n);
        struct dns_relay_counts k;
        dns_relay_counts(e.r, &k);
        EXPECT_INT_EQ(k.dropped, 0);
        env_stop(&e);
}

TEST(dnsrelay_ipv6_upstream)
{
        struct env e;
        int k = env_start(&e, ENV_OPTS(.family = AF_INET6));
        if (k == -EADDRNOTAVAIL || k == -EAFNOSUPPORT) {
                fprintf(stderr, "  no ::1 here: skipped\n");
                env_stop(&e);
                return;
        }
        EXPECT_INT_EQ(k, 0);
        int c = udp_client(&e, 2);
        unsigned char q[64], a[600];
        size_t n = make_query(q, 0x6666, "six");
        EXPECT_INT_EQ(udp_ask(c, &e, q, n), 0);
        ssize_t got = recv_within(c, a, sizeof(a), 2000);
        EXPECT_ANSWER_FROM(&e.up[0], a, got, q, n);
        int t = tcp_client(&e, 2);
        EXPECT_TRUE(t >= 0);
        got = tcp_ask(t, q, n, a, sizeof(a));
        EXPECT_ANSWER_FROM(&e.up[0], a, got, q, n);
        env_stop(&e);
}

/* Stopped with a UDP query in flight and TCP clients in every kind of
 * state, the relay leaves no fd behind. */
TEST(dnsrelay_stop_joins_and_closes_every_fd)
{
        int before = test_open_fds();
        struct env e;
        EXPECT_INT_EQ(env_start(&e, ENV_OPTS(.modes = {FAKE_SILENT, FAKE_ANSWER}, .n_fakes = 2,
                                             .timeout_ms = 1000)),
                      0);
        int c = udp_client(&e, 2), t1 = tcp_client(&e, 3), t2 = tcp_client(&e, 4);
        EXPECT_TRUE(c >= 0 && t1 >= 0 && t2 >= 0);
        unsigned char q[64], msg[66];
        size_t n = make_query(q, 0x0f0f, "pending");
        EXPECT_INT_EQ(udp_ask(c, &e, q, n), 0);
        msg[0] = 0;
        msg[1] = (unsigned char)n;
        memcpy(msg + 2, q, n);
        EXPECT_INT_EQ(test_write_all(t1, msg, n + 2, 0), 0); /* waits on the silent upstream */
        EXPECT_INT_EQ(test_write_all(t2, msg, 5, 0), 0);     /* half a query */
        EXPECT_INT_EQ(WAIT_COUNT(e.r, queries, 2, 2000), 2);
        e.r = dns_relay_stop(e.r);
        EXPECT_TRUE(e.r == NULL);
        EXPECT_TRUE(closed_within(t1, 1000));
        EXPECT_TRUE(closed_within(t2, 1000));
        EXPECT_TRUE(dns_relay_stop(NULL) == NULL);
        env_stop(&e);
        EXPECT_INT_EQ(test_open_fds(), before);
}

TEST(dnsrelay_start_rejects_bad_configs_and_keeps_the_sockets)
{
        struct sockaddr_storage ups[DNS_RELAY_MAX_UPSTREAMS + 1], a;
        for (size_t i = 0; i < ELEMENTSOF(ups); i++)
                ups[i] = loopback(AF_INET, 53);
        int udp = bound_socket(AF_INET, SOCK_DGRAM, 0, &a);
        int tcp = bound_socket(AF_INET, SOCK_STREAM, 0, &a); /* not listening */
        EXPECT_TRUE(udp >= 0 && tcp >= 0);
        struct dns_relay_config ok = {
            .udp_fd = udp,
            .tcp_fd = -1,
            .upstreams = ups,
            .n_upstreams = 1,
            .timeout_ms = 100,
            .max_inflight = 4,
            .max_tcp = 4,
            .runs = {0x7f000000, 8},
            .source_rate = 10,
            .source_burst = 10,
            .source_inflight = 4,
            .source_tcp = 4,
        };
        struct dns_relay *r = NULL;
        struct dns_relay_config c = ok;
        c.n_upstreams = 0;
        EXPECT_INT_EQ(dns_relay_start(&c, &r), -EINVAL);
        c.n_upstreams = DNS_RELAY_MAX_UPSTREAMS + 1;
        EXPECT_INT_EQ(dns_relay_start(&c, &r), -EINVAL);
        c = ok;
        c.timeout_ms = 0;
        EXPECT_INT_EQ(dns_relay_start(&c, &r), -EINVAL);
        c = ok;
        c.max_inflight = 0;
        EXPECT_INT_EQ(dns_relay_start(&c, &r), -EINVAL);
        c = ok;
        c.udp_fd = -1;
        EXPECT_INT_EQ(dns_relay_start(&c, &r), -EINVAL);
        c = ok;
        c.udp_fd = tcp; /* a stream socket as the UDP one */
        EXPECT_INT_EQ(dns_relay_start(&c, &r), -EINVAL);
        c = ok;
        c.tcp_fd = tcp; /* bound but not listening */
        EXPECT_INT_EQ(dns_relay_start(&c, &r), -EINVAL);
        /* no runs' subnet, or one without room for a run */
        c = ok;
        c.runs.len = 0;
        EXPECT_INT_EQ(dns_relay_start(&c, &r), -EINVAL);
        c.runs.len = 31;
        EXPECT_INT_EQ(dns_relay_start(&c, &r), -EINVAL);
        /* shares: none, or more than the whole */
        c = ok;
        c.source_rate = 0;
        EXPECT_INT_EQ(dns_relay_start(&c, &r), -EINVAL);
        c = ok;
        c.source_burst = 0;
        EXPECT_INT_EQ(dns_relay_start(&c, &r), -EINVAL);
        c = ok;
        c.source_inflight = 5;
        EXPECT_INT_EQ(dns_relay_start(&c, &r), -EINVAL);
        c = ok;
        c.source_tcp = 0;
        EXPECT_INT_EQ(dns_relay_start(&c, &r), -EINVAL);
        c = ok;
        struct sockaddr_storage unix_up = {.ss_family = AF_UNIX};
        c.upstreams = &unix_up;
        EXPECT_INT_EQ(dns_relay_start(&c, &r), -EINVAL);
        struct sockaddr_storage no_port = loopback(AF_INET, 0);
        c.upstreams = &no_port;
        EXPECT_INT_EQ(dns_relay_start(&c, &r), -EINVAL);
        EXPECT_TRUE(r == NULL);
        /* the caller still owns both sockets */
        EXPECT_TRUE(fcntl(udp, F_GETFD) >= 0);
        EXPECT_TRUE(fcntl(tcp, F_GETFD) >= 0);
        /* and a good config starts and owns them */
        EXPECT_INT_EQ(dns_relay_start(&ok, &r), 0);
        dns_relay_stop(r);
        EXPECT_TRUE(fcntl(udp, F_GETFD) < 0 && errno == EBADF);
        close(tcp);
}

/* Garbage of every size over UDP, TCP clients that send random bytes and
 * vanish (some with a reset): the relay stays up and still answers. */
TEST(dnsrelay_survives_a_flood_of_garbage)
{
        struct env e;
        EXPECT_INT_EQ(
            env_start(&e, ENV_OPTS(.timeout_ms = 200, .max_inflight = 8, .source_inflight = 8)), 0);
        static unsigned char junk[4200];
        srand(1234);
        for (size_t i = 0; i < sizeof(junk); i++)
                junk[i] = (unsigned char)rand();
        int c = udp_client(&e, 2);
        for (int i = 0; i < 2000; i++)
                udp_ask(c, &e, junk + rand() % 100, (size_t)(rand() % 4100));
        for (int i = 0; i < 40; i++) {
                int t = tcp_client(&e, 3 + (unsigned)i);
                EXPECT_TRUE(t >= 0);
                size_t off = (size_t)(rand() % 100);
                test_write_all(t, junk + off, (size_t)(rand() % 3000), 0);
                if (i % 2) {
                        struct linger l = {.l_onoff = 1, .l_linger = 0};
                        setsockopt(t, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
                }
                shutdown(t, SHUT_RDWR);
        }
        EXPECT_TRUE(WAIT_COUNT(e.r, dropped, 1, 2000) > 0);
        sleep_ms(500); /* the garbage that went upstream times out or is answered */
        c = udp_client(&e, 2);
        unsigned char q[64], a[600];
        size_t n = make_query(q, 0x9999, "still");
        EXPECT_INT_EQ(udp_ask(c, &e, q, n), 0);
        ssize_t got = recv_within(c, a, sizeof(a), 2000);
        EXPECT_ANSWER_FROM(&e.up[0], a, got, q, n);
        int t = tcp_client(&e, 60);
        EXPECT_TRUE(t >= 0);
        got = tcp_ask(t, q, n, a, sizeof(a));
        EXPECT_ANSWER_FROM(&e.up[0], a, got, q, n);
        env_stop(&e);
}

/* ---- who is served, and what -------------------------------------------- */

/* The gateway's own address (what a host process appears as) and an
 * address outside the runs' subnet get nothing, over UDP or TCP; the
 * upstream never sees them. */
TEST(dnsrelay_serves_run_addresses_only)
{
        struct env e;
        EXPECT_INT_EQ(env_start(&e, ENV_OPTS(.runs = {0x7f000000, 24})), 0);
        unsigned char q[64], a[600];
        size_t n = make_query(q, 0x2222, "who");
        int gw = udp_client(&e, 1), outside = udp_client(&e, 0x0105), bcast = udp_client(&e, 255);
        EXPECT_TRUE(gw >= 0 && outside >= 0 && bcast >= 0);
        EXPECT_INT_EQ(udp_ask(gw, &e, q, n), 0);
        EXPECT_INT_EQ(udp_ask(outside, &e, q, n), 0);
        EXPECT_INT_EQ(udp_ask(bcast, &e, q, n), 0);
        int t = tcp_client(&e, 1);
        EXPECT_TRUE(t >= 0);
        EXPECT_TRUE(closed_within(t, 2000));
        EXPECT_INT_EQ(WAIT_COUNT(e.r, refused[DNS_REFUSED_SOURCE], 4, 2000), 4);
        EXPECT_INT_EQ(recv_within(gw, a, sizeof(a), 100), -1);
        EXPECT_INT_EQ(recv_within(outside, a, sizeof(a), 0), -1);
        EXPECT_INT_EQ(recv_within(bcast, a, sizeof(a), 0), -1);
        /* the first and last run addresses are served */
        int first = udp_client(&e, 2), last = udp_client(&e, 254);
        EXPECT_INT_EQ(udp_ask(first, &e, q, n), 0);
        ssize_t got = recv_within(first, a, sizeof(a), 2000);
        EXPECT_ANSWER_FROM(&e.up[0], a, got, q, n);
        EXPECT_INT_EQ(udp_ask(last, &e, q, n), 0);
        got = recv_within(last, a, sizeof(a), 2000);
        EXPECT_ANSWER_FROM(&e.up[0], a, got, q, n);
        EXPECT_INT_EQ(atomic_load(&e.up[0].udp_seen) + atomic_load(&e.up[0].tcp_seen), 2);
        env_stop(&e);
}

/* A message of 12 + len bytes: header (id, flags, counts) then body. */
static size_t make_msg(unsigned char *buf, uint16_t id, uint16_t flags, uint16_t qd, uint16_t an,
                       uint16_t ns, const void *body, size_t len)
{
        unsigned char hdr[12] = {id >> 8,   id & 0xff, flags >> 8, flags & 0xff, qd >> 8,
                                 qd & 0xff, an >> 8,   an & 0xff,  ns >> 8,      ns & 0xff};
        memcpy(buf, hdr, 12);
        memcpy(buf + 12, body, len);
        return 12 + len;
}

#define QUESTION(type) "\7example\3lab\0\0" type "\0\1"
#define Q_A QUESTION("\1")
#define Q_AXFR QUESTION("\xfc")
#define Q_IXFR QUESTION("\xfb")

/* What the relay answers itself, and what it ignores: the upstream sees
 * none of it (DNS UPDATE, NOTIFY, zone transfers, odd counts, malformed
 * questions, responses). */
TEST(dnsrelay_answers_what_is_not_a_standard_query_itself)
{
        struct env e;
        EXPECT_INT_EQ(env_start(&e, ENV_OPTS()), 0);
        static const struct {
                uint16_t flags, qd, an, ns;
                const char *body;
                size_t len;
                int rcode; /* -1: no answer */
                bool question_echoed;
        } cases[] = {
            {0x2800, 1, 0, 1, Q_A, sizeof(Q_A) - 1, 4, false},      /* UPDATE */
            {0x2000, 1, 0, 0, Q_A, sizeof(Q_A) - 1, 4, false},      /* NOTIFY */
            {0x1000, 1, 0, 0, Q_A, sizeof(Q_A) - 1, 4, false},      /* STATUS */
            {0x0000, 1, 0, 0, Q_AXFR, sizeof(Q_AXFR) - 1, 5, true}, /* AXFR */
            {0x0100, 1, 0, 0, Q_IXFR, sizeof(Q_IXFR) - 1, 5, true}, /* IXFR */
            {0x0100, 2, 0, 0, Q_A Q_A, 2 * (sizeof(Q_A) - 1), 5, false},
            {0x0100, 0, 0, 0, "", 0, 5, false},
            {0x0100, 1, 1, 0, Q_A, sizeof(Q_A) - 1, 1, false},            /* an answer in a query */
            {0x0100, 1, 0, 0, "\7example\300\014\0\1\0\1", 14, 1, false}, /* a pointer */
            {0x0100, 1, 0, 0, "\100xx\0\0\1\0\1", 8, 1, false},           /* label of 64 */
            {0x0100, 1, 0, 0, "\7exam", 5, 1, false},                     /* cut short */
            {0x0100, 1, 0, 0, "\3lab\0\0\1\0", 8, 1, false},              /* no full QCLASS */
            {0x8180, 1, 0, 0, Q_A, sizeof(Q_A) - 1, -1, false},           /* a response */
        };
        int c = udp_client(&e, 2), t = tcp_client(&e, 3);
        EXPECT_TRUE(c >= 0 && t >= 0);
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                unsigned char m[600], a[600];
                size_t n = make_msg(m, (uint16_t)(0x100 + i), cases[i].flags, cases[i].qd,
                                    cases[i].an, cases[i].ns, cases[i].body, cases[i].len);
                EXPECT_INT_EQ(udp_ask(c, &e, m, n), 0);
                ssize_t got = recv_within(c, a, sizeof(a), cases[i].rcode < 0 ? 200 : 2000);
                if (cases[i].rcode < 0) {
                        EXPECT_INT_EQ(got, -1);
                        continue;
                }
                size_t want_len = cases[i].question_echoed ? n : 12;
                EXPECT_INT_EQ(got, (ssize_t)want_len);
                EXPECT_INT_EQ(a[0] << 8 | a[1], 0x100 + (int)i);
                EXPECT_INT_EQ(a[2] & 0x80, 0x80);                      /* a response */
                EXPECT_INT_EQ(a[2] & 0x79, m[2] & 0x79);               /* opcode, RD */
                EXPECT_INT_EQ(a[3], cases[i].rcode);                   /* RA clear */
                EXPECT_INT_EQ(a[5], cases[i].question_echoed ? 1 : 0); /* QDCOUNT */
                EXPECT_INT_EQ(a[7] | a[9] | a[11], 0);
                if (cases[i].question_echoed)
                        EXPECT_MEM_EQ(a + 12, want_len - 12, m + 12, n - 12);
        }
        /* AXFR over TCP: REFUSED on the connection, which stays open; a
         * standard query after it is relayed */
        unsigned char m[600], a[600];
        size_t n = make_msg(m, 0x0a0a, 0x0000, 1, 0, 0, Q_AXFR, sizeof(Q_AXFR) - 1);
        ssize_t got = tcp_ask(t, m, n, a, sizeof(a));
        EXPECT_INT_EQ(got, (ssize_t)n);
        EXPECT_INT_EQ(a[3], 5);
        n = make_msg(m, 0x0b0b, 0x0100, 1, 0, 0, Q_A, sizeof(Q_A) - 1);
        got = tcp_ask(t, m, n, a, sizeof(a));
        EXPECT_ANSWER_FROM(&e.up[0], a, got, m, n);
        /* a response over TCP ends the connection, unanswered */
        n = make_msg(m, 0x0c0c, 0x8180, 1, 0, 0, Q_A, sizeof(Q_A) - 1);
        EXPECT_INT_EQ(tcp_ask(t, m, n, a, sizeof(a)), -1);
        EXPECT_INT_EQ(atomic_load(&e.up[0].udp_seen), 0);
        EXPECT_INT_EQ(atomic_load(&e.up[0].tcp_seen), 1);
        struct dns_relay_counts k;
        dns_relay_counts(e.r, &k);
        EXPECT_INT_EQ(k.refused[DNS_REFUSED_OPCODE], 3);
        EXPECT_INT_EQ(k.refused[DNS_REFUSED_QUESTION], 5);
        EXPECT_INT_EQ(k.refused[DNS_REFUSED_MALFORMED], 5);
        EXPECT_INT_EQ(k.refused[DNS_REFUSED_RESPONSE], 2);
        EXPECT_INT_EQ(k.queries, 1);
        env_stop(&e);
}

/* ---- each source's share -------------------------------------------------- */

/* A source over its rate loses its queries; another source is served. */
TEST(dnsrelay_udp_rate_is_per_source)
{
        struct env e;
        EXPECT_INT_EQ(env_start(&e, ENV_OPTS(.rate = 5, .burst = 10)), 0);
        int flood = udp_client(&e, 2), other = udp_client(&e, 3);
        unsigned char q[64], a[600];
        for (uint16_t id = 1; id <= 40; id++)
                EXPECT_INT_EQ(udp_ask(flood, &e, q, make_query(q, id, "flood")), 0);
        /* 10 of the burst (and one more if 200 ms went by), the rest dropped */
        EXPECT_TRUE(WAIT_COUNT(e.r, refused[DNS_REFUSED_RATE], 29, 2000) >= 29);
        int answered = 0;
        while (recv_within(flood, a, sizeof(a), 300) > 0)
                answered++;
        EXPECT_TRUE(answered >= 10 && answered <= 11);
        size_t n = make_query(q, 0x7070, "other");
        EXPECT_INT_EQ(udp_ask(other, &e, q, n), 0);
        ssize_t got = recv_within(other, a, sizeof(a), 2000);
        EXPECT_ANSWER_FROM(&e.up[0], a, got, q, n);
        env_stop(&e);
}

/* Queries in flight: a source over its share gets REFUSED at once; when
 * every slot is taken, the oldest query of the source holding the most
 * makes room for a source holding fewer. */
TEST(dnsrelay_udp_inflight_share_and_eviction)
{
        struct env e;
        EXPECT_INT_EQ(env_start(&e, ENV_OPTS(.modes = {FAKE_SILENT}, .timeout_ms = 3000,
                                             .max_inflight = 4, .source_inflight = 3)),
                      0);
        int flood = udp_client(&e, 2), other = udp_client(&e, 3);
        unsigned char q[64], a[600];
        size_t n = 0;
        for (uint16_t id = 1; id <= 5; id++)
                EXPECT_INT_EQ(udp_ask(flood, &e, q, n = make_query(q, id, "slow")), 0);
        EXPECT_INT_EQ(WAIT_COUNT(e.r, refused[DNS_REFUSED_SHARE], 2, 2000), 2);
        /* the two over the share are answered REFUSED, question and all */
        for (int i = 0; i < 2; i++) {
                EXPECT_INT_EQ(recv_within(flood, a, sizeof(a), 1000), (ssize_t)n);
                EXPECT_INT_EQ(a[3], 5);
        }
        EXPECT_INT_EQ(WAIT_COUNT(e.r, queries, 3, 2000), 3);
        /* one slot left: the other source takes it, then a second query of
         * it evicts one of the flood's (3 held against its 1) */
        EXPECT_INT_EQ(udp_ask(other, &e, q, make_query(q, 100, "mine")), 0);
        EXPECT_INT_EQ(udp_ask(other, &e, q, make_query(q, 101, "mine")), 0);
        EXPECT_INT_EQ(WAIT_COUNT(e.r, queries, 5, 2000), 5);
        struct dns_relay_counts k;
        dns_relay_counts(e.r, &k);
        EXPECT_INT_EQ(k.refused[DNS_REFUSED_EVICTED], 1);
        EXPECT_INT_EQ(k.refused[DNS_REFUSED_SHARE], 2);
        EXPECT_INT_EQ(wait_seen(&e.up[0].udp_seen, 5, 2000), 5);
        env_stop(&e);
}

/* TCP connections: a source over its share is closed at once; a full
 * table hands an idle connection of the source holding the most to a
 * newcomer. */
TEST(dnsrelay_tcp_connection_share_and_eviction)
{
        struct env e;
        EXPECT_INT_EQ(env_start(&e, ENV_OPTS(.max_tcp = 4, .source_tcp = 3)), 0);
        int held[3];
        for (int i = 0; i < 3; i++)
                EXPECT_TRUE((held[i] = tcp_client(&e, 2)) >= 0);
        int over = tcp_client(&e, 2);
        EXPECT_TRUE(over >= 0);
        EXPECT_TRUE(closed_within(over, 2000));
        EXPECT_INT_EQ(WAIT_COUNT(e.r, refused[DNS_REFUSED_SHARE], 1, 2000), 1);
        int b = tcp_client(&e, 3), c = tcp_client(&e, 4);
        EXPECT_TRUE(b >= 0 && c >= 0);
        unsigned char q[64], a[600];
        size_t n = make_query(q, 0x5a5a, "served");
        ssize_t got = tcp_ask(b, q, n, a, sizeof(a));
        EXPECT_ANSWER_FROM(&e.up[0], a, got, q, n);
        got = tcp_ask(c, q, n, a, sizeof(a));
        EXPECT_ANSWER_FROM(&e.up[0], a, got, q, n);
        EXPECT_INT_EQ(WAIT_COUNT(e.r, refused[DNS_REFUSED_EVICTED], 1, 2000), 1);
        int closed = 0;
        for (int i = 0; i < 3; i++)
                closed += closed_within(held[i], 100);
        EXPECT_INT_EQ(closed, 1);
        env_stop(&e);
}

/* A connection that keeps asking is closed after DNS_RELAY_TCP_QUERIES
 * answers, so it cannot hold its slot for ever. */
TEST(dnsrelay_tcp_connection_asks_a_bounded_number_of_queries)
{
        struct env e;
        EXPECT_INT_EQ(env_start(&e, ENV_OPTS()), 0);
        int t = tcp_client(&e, 2);
        EXPECT_TRUE(t >= 0);
        unsigned char q[64], a[600];
        for (unsigned i = 0; i < DNS_RELAY_TCP_QUERIES; i++) {
                size_t n = make_query(q, (uint16_t)i, "again");
                unsigned char msg[80] = {0, (unsigned char)n};
                memcpy(msg + 2, q, n);
                unsigned char pre[2];
                EXPECT_INT_EQ(test_write_all(t, msg, n + 2, 0), 0);
                EXPECT_INT_EQ(read_full(t, pre, 2), 0);
                EXPECT_INT_EQ(read_full(t, a, (size_t)(pre[0] << 8 | pre[1])), 0);
        }
        EXPECT_TRUE(closed_within(t, 2000));
        EXPECT_INT_EQ(WAIT_COUNT(e.r, answers, DNS_RELAY_TCP_QUERIES, 1000), DNS_RELAY_TCP_QUERIES);
        env_stop(&e);
}
