/* The DNS relay (see dnsrelay.h). One thread runs a poll loop over the stop
 * eventfd, the two listening sockets and one fd per slot: a pending UDP
 * query (its own connected socket, so a random source port and only the
 * upstream can answer it) or a TCP client, a small state machine that has
 * exactly one fd of interest at any time. Slots are fixed arrays sized at
 * start; per query only the copy kept for retries is allocated. Each
 * source (run address) has an entry in a small open-addressed table: its
 * slots and its rate (GCRA: a theoretical arrival time that each query
 * pushes on by 1/rate). */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/util.h"
#include "net/dnsmsg.h"
#include "net/dnsrelay.h"

#define DNS_HEADER_SIZE 12
/* Datagrams read and connections accepted per loop turn, so that a flood
 * on one socket still leaves turns for the others. */
#define LISTEN_BATCH 64
/* Datagrams read from one upstream socket per turn (wrong IDs included). */
#define ANSWER_BATCH 16
/* Out of fds or memory: stop accepting for a while rather than spin. */
#define ACCEPT_PAUSE_MS 100
#define MAX_TIMEOUT_MS 600000
#define MAX_INFLIGHT 65536
#define MAX_TCP 4096
#define MAX_SOURCE_RATE 100000
#define MAX_SOURCE_BURST 1000000

/* The source table: a power of two, searched SOURCE_PROBES entries from
 * the address's hash. Only run addresses get an entry, and an entry with
 * no slot and a spent rate is taken over, so it does not fill up. */
#define SOURCE_TABLE 4096
#define SOURCE_PROBES 16

const char *const dns_relay_refusal_names[DNS_REFUSALS] = {
    [DNS_REFUSED_SOURCE] = "source",       [DNS_REFUSED_RESPONSE] = "response",
    [DNS_REFUSED_MALFORMED] = "malformed", [DNS_REFUSED_OPCODE] = "opcode",
    [DNS_REFUSED_QUESTION] = "question",   [DNS_REFUSED_RATE] = "rate",
    [DNS_REFUSED_SHARE] = "share",         [DNS_REFUSED_EVICTED] = "evicted",
};

struct source {
        uint32_t addr;     /* host order; 0: unused */
        unsigned udp, tcp; /* slots held */
        int64_t tat_us;    /* the rate's theoretical arrival time */
        int64_t logged_ms; /* the last dns.refused line */
        uint64_t unlogged; /* refusals since */
};

/* The fixed pollfd entries in front of the slots. */
enum { PFD_STOP, PFD_UDP, PFD_TCP, PFD_FIXED };

struct udp_query {
        int fd; /* connected to upstreams[up]; -1: the slot is free */
        struct source *src;
        size_t up;
        int64_t deadline;
        struct sockaddr_storage client;
        socklen_t client_len;
        unsigned char *msg;
        size_t len;
};

enum tcp_state {
        TCP_FREE,
        TCP_READ_QUERY,   /* client fd, POLLIN */
        TCP_CONNECT,      /* upstream fd, POLLOUT */
        TCP_SEND_QUERY,   /* upstream fd, POLLOUT */
        TCP_READ_ANSWER,  /* upstream fd, POLLIN */
        TCP_WRITE_ANSWER, /* client fd, POLLOUT */
};

/* A message with its 2-byte length prefix, being read or written. */
struct frame {
        unsigned char prefix[2];
        unsigned char *buf; /* prefix + body once the prefix is complete */
        size_t size;        /* 2 + body length; 0 while the prefix is incomplete */
        size_t done;
};

struct tcp_conn {
        enum tcp_state state;
        int fd;    /* the client */
        int up_fd; /* the current upstream attempt, or -1 */
        struct source *src;
        size_t up;
        int64_t deadline;
        int64_t end_of_life; /* no new query after this */
        unsigned queries;    /* asked on this connection */
        bool local;          /* the answer being written is the relay's own */
        struct frame query, answer;
};

struct dns_relay {
        int udp_fd, tcp_fd, stop_fd;
        struct sockaddr_storage upstreams[DNS_RELAY_MAX_UPSTREAMS];
        size_t n_upstreams;
        int timeout_ms;
        unsigned max_inflight, max_tcp;
        struct netaddr_prefix runs;
        unsigned source_inflight, source_tcp, source_burst;
        int64_t source_interval_us;
        struct source *sources;    /* SOURCE_TABLE entries */
        int64_t foreign_logged_ms; /* the same for every peer that is not a run */
        uint64_t foreign_unlogged;
        struct udp_query *udp;
        unsigned n_udp;
        struct tcp_conn *tcp;
        unsigned n_tcp;
        int64_t accept_paused_until;
        /* poll set: PFD_FIXED entries, then one per busy slot; owner[i]
         * is the slot of pfds[i] (UDP slots first, then TCP slots) */
        struct pollfd *pfds;
        unsigned *owner;
        pthread_t thread;
        _Atomic uint64_t queries, answers, timeouts, dropped, refused[DNS_REFUSALS];
        unsigned char buf[65536]; /* one datagram at a time */
};

static void count(_Atomic uint64_t *counter)
{
        atomic_fetch_add_explicit(counter, 1, memory_order_relaxed);
}

static socklen_t addr_len(const struct sockaddr_storage *a)
{
        return a->ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
}

static bool would_block(int err)
{
        return err == EAGAIN || err == EWOULDBLOCK || err == EINTR;
}

/* ---- sources ------------------------------------------------------------- */

/* The peer's address if it is a run's (AF_INET, from runs.addr + 2 to the
 * broadcast address - 1), else 0. */
static uint32_t run_address(const struct dns_relay *r, const struct sockaddr_storage *peer)
{
        if (peer->ss_family != AF_INET)
                return 0;
        uint32_t a = ntohl(((const struct sockaddr_in *)peer)->sin_addr.s_addr);
        uint64_t off = (uint64_t)a - r->runs.addr;
        return netaddr_contains(&r->runs, a) && off >= 2 && off + 1 < netaddr_size(&r->runs) ? a
                                                                                             : 0;
}

/* For log lines: an IPv4 peer's address, else 0. */
static uint32_t peer_address(const struct sockaddr_storage *peer)
{
        return peer->ss_family == AF_INET
                   ? ntohl(((const struct sockaddr_in *)peer)->sin_addr.s_addr)
                   : 0;
}

static bool source_idle(const struct source *s, int64_t now_us)
{
        return s->addr == 0 || (s->udp == 0 && s->tcp == 0 && s->tat_us <= now_us &&
                                now_us / 1000 - s->logged_ms >= DNS_RELAY_LOG_INTERVAL_MS);
}

/* The entry of addr, made if need be; NULL when its probe window is all
 * busy (more sources than the table holds). */
static struct source *source_get(struct dns_relay *r, uint32_t addr, int64_t now_us)
{
        uint32_t h = (addr * 2654435761u) % SOURCE_TABLE;
        struct source *spare = NULL;
        for (unsigned i = 0; i < SOURCE_PROBES; i++) {
                struct source *s = &r->sources[(h + i) % SOURCE_TABLE];
                if (s->addr == addr)
                        return s;
                if (!spare && source_idle(s, now_us))
                        spare = s;
        }
        if (spare)
                *spare = (struct source){.addr = addr, .logged_ms = INT64_MIN / 2};
        return spare;
}

/* Takes one query from the source's rate; false when it is spent. */
static bool source_take(struct dns_relay *r, struct source *s, int64_t now_us)
{
        int64_t tat = s->tat_us > now_us ? s->tat_us : now_us;
        if (tat + r->source_interval_us - now_us > (int64_t)r->source_burst * r->source_interval_us)
                return false;
        s->tat_us = tat + r->source_interval_us;
        return true;
}

static void format_addr(uint32_t a, char *buf, size_t len)
{
        struct netaddr_prefix p = {.addr = a, .len = 32};
        netaddr_format_prefix(&p, buf, len);
}

/* Counts a refusal, and logs it unless the source had a line lately. */
static void refuse(struct dns_relay *r, struct source *s, uint32_t addr, enum dns_relay_refusal why)
{
        count(&r->refused[why]);
        int64_t now = monotonic_ms();
        int64_t *logged = s ? &s->logged_ms : &r->foreign_logged_ms;
        uint64_t *unlogged = s ? &s->unlogged : &r->foreign_unlogged;
        uint64_t n = ++*unlogged;
        if (now - *logged < DNS_RELAY_LOG_INTERVAL_MS)
                return;
        char a[32];
        format_addr(addr, a, sizeof(a));
        log_warn(NULL, "dns.refused", "source=%s reason=%s refused=%llu run=%s", a,
                 dns_relay_refusal_names[why], (unsigned long long)n, s ? "true" : "false");
        *logged = now;
        *unlogged = 0;
}

static enum dns_relay_refusal refusal_of(enum dns_msg_verdict v)
{
        switch (v) {
        case DNS_MSG_DROP:
                return DNS_REFUSED_RESPONSE;
        case DNS_MSG_FORMERR:
                return DNS_REFUSED_MALFORMED;
        case DNS_MSG_NOTIMP:
                return DNS_REFUSED_OPCODE;
        default:
                return DNS_REFUSED_QUESTION;
        }
}

/* ---- UDP ----------------------------------------------------------------- */

static void udp_release(struct dns_relay *r, struct udp_query *q)
{
        q->fd = safe_close(q->fd);
        free(q->msg);
        q->msg = NULL;
        if (q->src)
                q->src->udp--;
        q->src = NULL;
        r->n_udp--;
}

/* Sends the query to upstreams[q->up], or the next that takes it, from a
 * fresh socket. false when none is left. */
static bool udp_attempt(struct dns_relay *r, struct udp_query *q)
{
        for (; q->up < r->n_upstreams; q->up++) {
                const struct sockaddr_storage *u = &r->upstreams[q->up];
                q->fd = safe_close(q->fd);
                q->fd = socket(u->ss_family, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
                if (q->fd < 0)
                        continue;
                if (connect(q->fd, (const struct sockaddr *)u, addr_len(u)) == 0 &&
                    send(q->fd, q->msg, q->len, 0) == (ssize_t)q->len) {
                        q->deadline = monotonic_ms() + r->timeout_ms;
                        return true;
                }
        }
        q->fd = safe_close(q->fd);
        return false;
}

static void udp_next_upstream(struct dns_relay *r, struct udp_query *q)
{
        q->up++;
        if (!udp_attempt(r, q)) {
                count(&r->timeouts);
                udp_release(r, q);
        }
}

static void udp_on_upstream(struct dns_relay *r, struct udp_query *q)
{
        for (int i = 0; i < ANSWER_BATCH; i++) {
                ssize_t n = recv(q->fd, r->buf, sizeof(r->buf), 0);
                if (n < 0) {
                        /* ECONNREFUSED and the like: this upstream is out */
                        if (!would_block(errno))
                                udp_next_upstream(r, q);
                        return;
                }
                /* a stray or stale answer: keep waiting for ours */
                if (n < DNS_HEADER_SIZE || memcmp(r->buf, q->msg, 2) != 0)
                        continue;
                if (sendto(r->udp_fd, r->buf, (size_t)n, MSG_DONTWAIT,
                           (const struct sockaddr *)&q->client, q->client_len) == n)
                        count(&r->answers);
                udp_release(r, q);
                return;
        }
}

/* A free slot; when there is none, the oldest query of the source
 * holding the most, if it holds at least two more than src (its loss is
 * counted as an eviction); else NULL. */
static struct udp_query *udp_slot_for(struct dns_relay *r, const struct source *src)
{
        struct udp_query *victim = NULL;
        for (unsigned i = 0; i < r->max_inflight; i++) {
                struct udp_query *q = &r->udp[i];
                if (q->fd < 0)
                        return q;
                if (!victim || q->src->udp > victim->src->udp ||
                    (q->src->udp == victim->src->udp && q->deadline < victim->deadline))
                        victim = q;
        }
        if (!victim || victim->src->udp < src->udp + 2)
                return NULL;
        refuse(r, victim->src, victim->src->addr, DNS_REFUSED_EVICTED);
        udp_release(r, victim);
        return victim;
}

/* Answers the query in r->buf (n bytes) with an error of its own. */
static void udp_answer_locally(struct dns_relay *r, size_t n, size_t qend, enum dns_msg_verdict v,
                               const struct sockaddr_storage *to, socklen_t to_len)
{
        size_t len = dns_msg_error(r->buf, n, qend, v, r->buf);
        if (len)
                (void)!sendto(r->udp_fd, r->buf, len, MSG_DONTWAIT, (const struct sockaddr *)to,
                              to_len);
}

/* One datagram from a run: judged, then relayed or answered here. */
static void udp_on_datagram(struct dns_relay *r, size_t n, const struct sockaddr_storage *from,
                            socklen_t from_len)
{
        int64_t now_us = monotonic_us();
        uint32_t addr = run_address(r, from);
        if (!addr) {
                refuse(r, NULL, peer_address(from), DNS_REFUSED_SOURCE);
                return;
        }
        struct source *src = source_get(r, addr, now_us);
        if (!src || !source_take(r, src, now_us)) {
                refuse(r, src, addr, src ? DNS_REFUSED_RATE : DNS_REFUSED_SHARE);
                return;
        }
        size_t qend;
        enum dns_msg_verdict v = dns_msg_judge(r->buf, n, &qend);
        if (v != DNS_MSG_PASS) {
                refuse(r, src, addr, refusal_of(v));
                if (v != DNS_MSG_DROP)
                        udp_answer_locally(r, n, qend, v, from, from_len);
                return;
        }
        struct udp_query *q = src->udp < r->source_inflight ? udp_slot_for(r, src) : NULL;
        if (!q || !(q->msg = malloc(n))) {
                refuse(r, src, addr, DNS_REFUSED_SHARE);
                udp_answer_locally(r, n, qend, DNS_MSG_REFUSED, from, from_len);
                return;
        }
        memcpy(q->msg, r->buf, n);
        q->len = n;
        q->client = *from;
        q->client_len = from_len;
        q->up = 0;
        q->src = src;
        src->udp++;
        r->n_udp++;
        count(&r->queries);
        if (!udp_attempt(r, q)) {
                count(&r->timeouts);
                udp_release(r, q);
        }
}

static void udp_on_query(struct dns_relay *r)
{
        for (int i = 0; i < LISTEN_BATCH; i++) {
                struct sockaddr_storage from;
                socklen_t from_len = sizeof(from);
                /* MSG_TRUNC: n is the datagram's real size, so an oversized
                 * one is seen as such */
                ssize_t n = recvfrom(r->udp_fd, r->buf, DNS_RELAY_UDP_MAX_QUERY + 1,
                                     MSG_DONTWAIT | MSG_TRUNC, (struct sockaddr *)&from, &from_len);
                if (n < 0) {
                        if (would_block(errno))
                                return;
                        continue;
                }
                if (n < DNS_HEADER_SIZE || n > DNS_RELAY_UDP_MAX_QUERY) {
                        count(&r->dropped);
                        continue;
                }
                udp_on_datagram(r, (size_t)n, &from, from_len);
        }
}

/* ---- TCP ----------------------------------------------------------------- */

static void frame_reset(struct frame *f)
{
        free(f->buf);
        *f = (struct frame){0};
}

/* 1: complete, 0: more to come, -EPIPE: end of stream, -EBADMSG: a length
 * below a DNS header, or another -errno. */
static int frame_read(int fd, struct frame *f)
{
        for (;;) {
                ssize_t n = f->size == 0 ? recv(fd, f->prefix + f->done, 2 - f->done, 0)
                                         : recv(fd, f->buf + f->done, f->size - f->done, 0);
                if (n < 0)
                        return would_block(errno) ? 0 : -errno;
                if (n == 0)
                        return -EPIPE;
                f->done += (size_t)n;
                if (f->size == 0) {
                        if (f->done < 2)
                                continue;
                        size_t len = (size_t)f->prefix[0] << 8 | f->prefix[1];
                        if (len < DNS_HEADER_SIZE)
                                return -EBADMSG;
                        f->buf = malloc(2 + len);
                        if (!f->buf)
                                return -ENOMEM;
                        memcpy(f->buf, f->prefix, 2);
                        f->size = 2 + len;
                }
                if (f->done == f->size)
                        return 1;
        }
}

/* 1: all written, 0: more to write, or -errno. */
static int frame_write(int fd, struct frame *f)
{
        while (f->done < f->size) {
                ssize_t n = send(fd, f->buf + f->done, f->size - f->done, MSG_NOSIGNAL);
                if (n < 0)
                        return would_block(errno) ? 0 : -errno;
                f->done += (size_t)n;
        }
        return 1;
}

static void tcp_close(struct dns_relay *r, struct tcp_conn *c)
{
        c->fd = safe_close(c->fd);
        c->up_fd = safe_close(c->up_fd);
        frame_reset(&c->query);
        frame_reset(&c->answer);
        if (c->src)
                c->src->tcp--;
        c->src = NULL;
        c->state = TCP_FREE;
        r->n_tcp--;
}

/* Waits for the client's next query (a fresh timeout_ms * 2, within the
 * connection's life), or closes a connection that has had its share. */
static void tcp_await_query(struct dns_relay *r, struct tcp_conn *c)
{
        int64_t now = monotonic_ms();
        if (c->queries >= DNS_RELAY_TCP_QUERIES || now >= c->end_of_life) {
                tcp_close(r, c);
                return;
        }
        frame_reset(&c->query);
        frame_reset(&c->answer);
        c->state = TCP_READ_QUERY;
        c->deadline = now + 2 * (int64_t)r->timeout_ms;
        if (c->deadline > c->end_of_life)
                c->deadline = c->end_of_life;
}

/* Connects to upstreams[c->up], or the next that can be tried. false when
 * none is left. */
static bool tcp_attempt(struct dns_relay *r, struct tcp_conn *c)
{
        for (; c->up < r->n_upstreams; c->up++) {
                const struct sockaddr_storage *u = &r->upstreams[c->up];
                c->up_fd = safe_close(c->up_fd);
                c->up_fd = socket(u->ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
                if (c->up_fd < 0)
                        continue;
                int k = connect(c->up_fd, (const struct sockaddr *)u, addr_len(u));
                if (k < 0 && errno != EINPROGRESS)
                        continue;
                frame_reset(&c->answer);
                c->query.done = 0;
                c->state = k == 0 ? TCP_SEND_QUERY : TCP_CONNECT;
                c->deadline = monotonic_ms() + r->timeout_ms;
                return true;
        }
        c->up_fd = safe_close(c->up_fd);
        return false;
}

static void tcp_next_upstream(struct dns_relay *r, struct tcp_conn *c)
{
        c->up++;
        if (!tcp_attempt(r, c)) {
                count(&r->timeouts);
                tcp_close(r, c);
        }
}

static void tcp_write_answer(struct dns_relay *r, struct tcp_conn *c);

/* Answers the query read with an error of the relay's own. */
static void tcp_answer_locally(struct dns_relay *r, struct tcp_conn *c, size_t qend,
                               enum dns_msg_verdict v)
{
        const unsigned char *q = c->query.buf + 2;
        size_t n = c->query.size - 2;
        frame_reset(&c->answer);
        c->answer.buf = malloc(2 + n);
        if (!c->answer.buf) {
                tcp_close(r, c);
                return;
        }
        size_t len = dns_msg_error(q, n, qend, v, c->answer.buf + 2);
        c->answer.buf[0] = (unsigned char)(len >> 8);
        c->answer.buf[1] = (unsigned char)len;
        c->answer.size = 2 + len;
        c->local = true;
        c->state = TCP_WRITE_ANSWER;
        c->deadline = monotonic_ms() + 2 * (int64_t)r->timeout_ms;
        tcp_write_answer(r, c);
}

/* A whole query from a run's connection: relayed, answered here, or (a
 * response) the end of the connection. false when it is not relayed. */
static bool tcp_judge(struct dns_relay *r, struct tcp_conn *c)
{
        struct source *src = c->src;
        c->queries++;
        size_t qend;
        enum dns_msg_verdict v = dns_msg_judge(c->query.buf + 2, c->query.size - 2, &qend);
        if (v == DNS_MSG_DROP) {
                refuse(r, src, src->addr, DNS_REFUSED_RESPONSE);
                tcp_close(r, c);
                return false;
        }
        if (!source_take(r, src, monotonic_us())) {
                refuse(r, src, src->addr, DNS_REFUSED_RATE);
                tcp_answer_locally(r, c, qend, DNS_MSG_REFUSED);
                return false;
        }
        if (v == DNS_MSG_PASS)
                return true;
        refuse(r, src, src->addr, refusal_of(v));
        tcp_answer_locally(r, c, qend, v);
        return false;
}

static void tcp_on_query_bytes(struct dns_relay *r, struct tcp_conn *c)
{
        int k = frame_read(c->fd, &c->query);
        if (k == 0)
                return;
        if (k < 0) {
                /* a clean close between queries is no error */
                if (k != -EPIPE || c->query.done > 0)
                        count(&r->dropped);
                tcp_close(r, c);
                return;
        }
        if (!tcp_judge(r, c))
                return;
        count(&r->queries);
        c->up = 0;
        if (!tcp_attempt(r, c)) {
                count(&r->timeouts);
                tcp_close(r, c);
        }
}

static void tcp_write_answer(struct dns_relay *r, struct tcp_conn *c)
{
        int k = frame_write(c->fd, &c->answer);
        if (k < 0) {
                tcp_close(r, c);
        } else if (k > 0) {
                if (!c->local)
                        count(&r->answers);
                c->local = false;
                tcp_await_query(r, c);
        }
}

static void tcp_on_answer_bytes(struct dns_relay *r, struct tcp_conn *c)
{
        int k = frame_read(c->up_fd, &c->answer);
        if (k == 0)
                return;
        /* over TCP an answer with another ID means a confused upstream */
        if (k < 0 || memcmp(c->answer.buf + 2, c->query.buf + 2, 2) != 0) {
                tcp_next_upstream(r, c);
                return;
        }
        c->up_fd = safe_close(c->up_fd);
        c->answer.done = 0;
        c->state = TCP_WRITE_ANSWER;
        c->deadline = monotonic_ms() + 2 * (int64_t)r->timeout_ms;
        tcp_write_answer(r, c);
}

static void tcp_send_query(struct dns_relay *r, struct tcp_conn *c)
{
        int k = frame_write(c->up_fd, &c->query);
        if (k < 0)
                tcp_next_upstream(r, c);
        else if (k > 0)
                c->state = TCP_READ_ANSWER;
}

static void tcp_on_connected(struct dns_relay *r, struct tcp_conn *c)
{
        int err = 0;
        socklen_t len = sizeof(err);
        if (getsockopt(c->up_fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0 || err != 0) {
                tcp_next_upstream(r, c);
                return;
        }
        c->state = TCP_SEND_QUERY;
        tcp_send_query(r, c);
}

static void tcp_on_event(struct dns_relay *r, struct tcp_conn *c)
{
        switch (c->state) {
        case TCP_READ_QUERY:
                tcp_on_query_bytes(r, c);
                break;
        case TCP_CONNECT:
                tcp_on_connected(r, c);
                break;
        case TCP_SEND_QUERY:
                tcp_send_query(r, c);
                break;
        case TCP_READ_ANSWER:
                tcp_on_answer_bytes(r, c);
                break;
        case TCP_WRITE_ANSWER:
                tcp_write_answer(r, c);
                break;
        case TCP_FREE:
                break;
        }
}

static void tcp_on_timeout(struct dns_relay *r, struct tcp_conn *c)
{
        switch (c->state) {
        case TCP_READ_QUERY:
                if (c->query.done > 0)
                        count(&r->dropped);
                tcp_close(r, c);
                break;
        case TCP_WRITE_ANSWER:
                tcp_close(r, c);
                break;
        case TCP_CONNECT:
        case TCP_SEND_QUERY:
        case TCP_READ_ANSWER:
                tcp_next_upstream(r, c);
                break;
        case TCP_FREE:
                break;
        }
}

/* A free connection slot; when there is none, a connection of the
 * source holding the most (an idle one if it has one), if it holds at
 * least two more than src (counted as an eviction); else NULL. */
static struct tcp_conn *tcp_slot_for(struct dns_relay *r, const struct source *src)
{
        struct tcp_conn *victim = NULL;
        for (unsigned i = 0; i < r->max_tcp; i++) {
                struct tcp_conn *c = &r->tcp[i];
                if (c->state == TCP_FREE)
                        return c;
                bool idle = c->state == TCP_READ_QUERY && c->query.done == 0;
                bool victim_idle =
                    victim && victim->state == TCP_READ_QUERY && victim->query.done == 0;
                if (!victim || c->src->tcp > victim->src->tcp ||
                    (c->src->tcp == victim->src->tcp && idle && !victim_idle))
                        victim = c;
        }
        if (!victim || victim->src->tcp < src->tcp + 2)
                return NULL;
        refuse(r, victim->src, victim->src->addr, DNS_REFUSED_EVICTED);
        tcp_close(r, victim);
        return victim;
}

/* A new connection: a run's, within its share, gets a slot. */
static void tcp_on_connection(struct dns_relay *r, int fd, const struct sockaddr_storage *peer)
{
        int64_t now_us = monotonic_us();
        uint32_t addr = run_address(r, peer);
        if (!addr) {
                safe_close(fd);
                refuse(r, NULL, peer_address(peer), DNS_REFUSED_SOURCE);
                return;
        }
        struct source *src = source_get(r, addr, now_us);
        struct tcp_conn *c = src && src->tcp < r->source_tcp ? tcp_slot_for(r, src) : NULL;
        if (!c) {
                safe_close(fd);
                refuse(r, src, addr, DNS_REFUSED_SHARE);
                return;
        }
        *c = (struct tcp_conn){.fd = fd,
                               .up_fd = -1,
                               .src = src,
                               .end_of_life = now_us / 1000 +
                                              (int64_t)DNS_RELAY_TCP_LIFE_TIMEOUTS * r->timeout_ms};
        src->tcp++;
        r->n_tcp++;
        tcp_await_query(r, c);
}

static void tcp_on_accept(struct dns_relay *r)
{
        for (int i = 0; i < LISTEN_BATCH; i++) {
                struct sockaddr_storage peer = {0};
                socklen_t peer_len = sizeof(peer);
                int fd = accept4(r->tcp_fd, (struct sockaddr *)&peer, &peer_len,
                                 SOCK_CLOEXEC | SOCK_NONBLOCK);
                if (fd < 0) {
                        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
                            errno == ENOMEM)
                                r->accept_paused_until = monotonic_ms() + ACCEPT_PAUSE_MS;
                        else if (!would_block(errno))
                                continue; /* ECONNABORTED and the like: that one only */
                        return;
                }
                tcp_on_connection(r, fd, &peer);
        }
}

/* ---- the loop ------------------------------------------------------------ */

/* The fd a TCP connection waits on, and for what. */
static int tcp_poll_fd(const struct tcp_conn *c, short *ret_events)
{
        switch (c->state) {
        case TCP_READ_QUERY:
                *ret_events = POLLIN;
                return c->fd;
        case TCP_CONNECT:
        case TCP_SEND_QUERY:
                *ret_events = POLLOUT;
                return c->up_fd;
        case TCP_READ_ANSWER:
                *ret_events = POLLIN;
                return c->up_fd;
        case TCP_WRITE_ANSWER:
                *ret_events = POLLOUT;
                return c->fd;
        case TCP_FREE:
                break;
        }
        return -1;
}

static void poll_add(struct dns_relay *r, size_t *n, int fd, short events, unsigned owner,
                     int64_t deadline, int64_t *next)
{
        r->pfds[*n] = (struct pollfd){.fd = fd, .events = events};
        r->owner[*n] = owner;
        (*n)++;
        if (deadline < *next)
                *next = deadline;
}

/* Fills the poll set; returns its size and the poll timeout. */
static size_t poll_build(struct dns_relay *r, int64_t now, int *ret_timeout)
{
        int64_t next = INT64_MAX;
        bool paused = r->accept_paused_until > now;
        r->pfds[PFD_STOP] = (struct pollfd){.fd = r->stop_fd, .events = POLLIN};
        r->pfds[PFD_UDP] = (struct pollfd){.fd = r->udp_fd, .events = POLLIN};
        r->pfds[PFD_TCP] = (struct pollfd){.fd = paused ? -1 : r->tcp_fd, .events = POLLIN};
        if (paused)
                next = r->accept_paused_until;
        size_t n = PFD_FIXED;
        for (unsigned i = 0; i < r->max_inflight; i++)
                if (r->udp[i].fd >= 0)
                        poll_add(r, &n, r->udp[i].fd, POLLIN, i, r->udp[i].deadline, &next);
        for (unsigned i = 0; i < r->max_tcp; i++) {
                short events = 0;
                int fd = tcp_poll_fd(&r->tcp[i], &events);
                if (fd >= 0)
                        poll_add(r, &n, fd, events, r->max_inflight + i, r->tcp[i].deadline, &next);
        }
        if (next == INT64_MAX)
                *ret_timeout = -1;
        else
                *ret_timeout =
                    next <= now ? 0 : (int)(next - now < INT32_MAX ? next - now : INT32_MAX);
        return n;
}

static void expire(struct dns_relay *r, int64_t now)
{
        for (unsigned i = 0; i < r->max_inflight; i++)
                if (r->udp[i].fd >= 0 && r->udp[i].deadline <= now)
                        udp_next_upstream(r, &r->udp[i]);
        for (unsigned i = 0; i < r->max_tcp; i++)
                if (r->tcp[i].state != TCP_FREE && r->tcp[i].deadline <= now)
                        tcp_on_timeout(r, &r->tcp[i]);
}

static void *relay_main(void *arg)
{
        struct dns_relay *r = arg;
        pthread_setname_np(pthread_self(), "dnsrelay");
        for (;;) {
                int timeout;
                size_t n = poll_build(r, monotonic_ms(), &timeout);
                if (poll(r->pfds, n, timeout) < 0) {
                        if (errno == EINTR || errno == ENOMEM || errno == EAGAIN)
                                continue;
                        break;
                }
                if (r->pfds[PFD_STOP].revents)
                        break;
                /* slots first: each appears once, and only the listeners
                 * below hand slots out, so every entry still means the
                 * slot it was built for */
                for (size_t i = PFD_FIXED; i < n; i++) {
                        if (!r->pfds[i].revents)
                                continue;
                        unsigned s = r->owner[i];
                        if (s < r->max_inflight)
                                udp_on_upstream(r, &r->udp[s]);
                        else
                                tcp_on_event(r, &r->tcp[s - r->max_inflight]);
                }
                if (r->pfds[PFD_UDP].revents)
                        udp_on_query(r);
                if (r->pfds[PFD_TCP].revents)
                        tcp_on_accept(r);
                expire(r, monotonic_ms());
        }
        return NULL;
}

/* ---- start and stop ------------------------------------------------------ */

static void relay_free(struct dns_relay *r)
{
        if (!r)
                return;
        for (unsigned i = 0; r->udp && i < r->max_inflight; i++)
                if (r->udp[i].fd >= 0)
                        udp_release(r, &r->udp[i]);
        for (unsigned i = 0; r->tcp && i < r->max_tcp; i++)
                if (r->tcp[i].state != TCP_FREE)
                        tcp_close(r, &r->tcp[i]);
        safe_close(r->udp_fd);
        safe_close(r->tcp_fd);
        safe_close(r->stop_fd);
        free(r->udp);
        free(r->tcp);
        free(r->sources);
        free(r->pfds);
        free(r->owner);
        free(r);
}

static void relay_freep(struct dns_relay **r)
{
        relay_free(*r);
}

static int sockopt_int(int fd, int opt, int *ret)
{
        socklen_t len = sizeof(*ret);
        return getsockopt(fd, SOL_SOCKET, opt, ret, &len) < 0 ? -errno : 0;
}

/* fd must be a socket of that type (and listening, for a stream); it is
 * made non-blocking. */
static int check_socket(int fd, int type)
{
        int t = 0, listening = 0;
        if (fd < 0)
                return 0;
        int k = sockopt_int(fd, SO_TYPE, &t);
        if (k == 0 && type == SOCK_STREAM)
                k = sockopt_int(fd, SO_ACCEPTCONN, &listening);
        if (k < 0)
                return k == -ENOTSOCK ? -EINVAL : k;
        if (t != type || (type == SOCK_STREAM && !listening))
                return -EINVAL;
        int fl = fcntl(fd, F_GETFL);
        if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
                return -errno;
        return 0;
}

static int check_config(const struct dns_relay_config *cfg)
{
        if (!cfg || !cfg->upstreams || cfg->n_upstreams < 1 ||
            cfg->n_upstreams > DNS_RELAY_MAX_UPSTREAMS || cfg->timeout_ms < 1 ||
            cfg->timeout_ms > MAX_TIMEOUT_MS || (cfg->udp_fd < 0 && cfg->tcp_fd < 0) ||
            cfg->max_inflight < 1 || cfg->max_inflight > MAX_INFLIGHT || cfg->max_tcp < 1 ||
            cfg->max_tcp > MAX_TCP || cfg->runs.len < 1 || cfg->runs.len > 30 ||
            cfg->source_rate < 1 || cfg->source_rate > MAX_SOURCE_RATE || cfg->source_burst < 1 ||
            cfg->source_burst > MAX_SOURCE_BURST || cfg->source_inflight < 1 ||
            cfg->source_inflight > cfg->max_inflight || cfg->source_tcp < 1 ||
            cfg->source_tcp > cfg->max_tcp)
                return -EINVAL;
        for (size_t i = 0; i < cfg->n_upstreams; i++) {
                const struct sockaddr_storage *u = &cfg->upstreams[i];
                if (u->ss_family == AF_INET) {
                        if (((const struct sockaddr_in *)u)->sin_port == 0)
                                return -EINVAL;
                } else if (u->ss_family == AF_INET6) {
                        if (((const struct sockaddr_in6 *)u)->sin6_port == 0)
                                return -EINVAL;
                } else {
                        return -EINVAL;
                }
        }
        return 0;
}

static int relay_alloc(const struct dns_relay_config *cfg, struct dns_relay **ret)
{
        _cleanup_(relay_freep) struct dns_relay *r = calloc(1, sizeof(*r));
        if (!r)
                return -ENOMEM;
        r->udp_fd = r->tcp_fd = r->stop_fd = -1;
        memcpy(r->upstreams, cfg->upstreams, cfg->n_upstreams * sizeof(*cfg->upstreams));
        r->n_upstreams = cfg->n_upstreams;
        r->timeout_ms = cfg->timeout_ms;
        r->max_inflight = cfg->max_inflight;
        r->max_tcp = cfg->max_tcp;
        r->runs = cfg->runs;
        r->runs.addr &= r->runs.len ? ~(uint32_t)0 << (32 - r->runs.len) : 0;
        r->source_inflight = cfg->source_inflight;
        r->source_tcp = cfg->source_tcp;
        r->source_burst = cfg->source_burst;
        r->source_interval_us = 1000000 / cfg->source_rate;
        r->foreign_logged_ms = INT64_MIN / 2;
        r->sources = calloc(SOURCE_TABLE, sizeof(*r->sources));
        size_t n_pfds = PFD_FIXED + (size_t)cfg->max_inflight + cfg->max_tcp;
        r->udp = calloc(cfg->max_inflight, sizeof(*r->udp));
        r->tcp = calloc(cfg->max_tcp, sizeof(*r->tcp));
        r->pfds = calloc(n_pfds, sizeof(*r->pfds));
        r->owner = calloc(n_pfds, sizeof(*r->owner));
        if (!r->udp || !r->tcp || !r->pfds || !r->owner || !r->sources)
                return -ENOMEM;
        for (unsigned i = 0; i < cfg->max_inflight; i++)
                r->udp[i].fd = -1;
        for (unsigned i = 0; i < cfg->max_tcp; i++)
                r->tcp[i] = (struct tcp_conn){.fd = -1, .up_fd = -1};
        r->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (r->stop_fd < 0)
                return -errno;
        /* last: a failure above must leave the caller's sockets open */
        r->udp_fd = cfg->udp_fd;
        r->tcp_fd = cfg->tcp_fd;
        *ret = TAKE_PTR(r);
        return 0;
}

int dns_relay_start(const struct dns_relay_config *cfg, struct dns_relay **ret)
{
        struct dns_relay *r = NULL;
        int k = check_config(cfg);
        if (k < 0 || (k = check_socket(cfg->udp_fd, SOCK_DGRAM)) < 0 ||
            (k = check_socket(cfg->tcp_fd, SOCK_STREAM)) < 0 || (k = relay_alloc(cfg, &r)) < 0)
                return k;
        /* the relay thread takes no signals: they stay the process's */
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        k = pthread_create(&r->thread, NULL, relay_main, r);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (k != 0) {
                /* on failure the sockets stay the caller's */
                r->udp_fd = r->tcp_fd = -1;
                relay_free(r);
                return -k;
        }
        *ret = r;
        return 0;
}

struct dns_relay *dns_relay_stop(struct dns_relay *r)
{
        if (!r)
                return NULL;
        uint64_t one = 1;
        /* an eventfd write fails only when the counter would overflow */
        (void)!write(r->stop_fd, &one, sizeof(one));
        pthread_join(r->thread, NULL);
        relay_free(r);
        return NULL;
}

void dns_relay_counts(const struct dns_relay *r, struct dns_relay_counts *ret)
{
        *ret = (struct dns_relay_counts){
            .queries = atomic_load_explicit(&r->queries, memory_order_relaxed),
            .answers = atomic_load_explicit(&r->answers, memory_order_relaxed),
            .timeouts = atomic_load_explicit(&r->timeouts, memory_order_relaxed),
            .dropped = atomic_load_explicit(&r->dropped, memory_order_relaxed),
        };
        for (size_t i = 0; i < DNS_REFUSALS; i++)
                ret->refused[i] = atomic_load_explicit(&r->refused[i], memory_order_relaxed);
}
