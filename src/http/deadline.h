/* Deadlines for what a client sends (server.header_timeout, .body_timeout).
 *
 * libmicrohttpd's own timeout is an idle one: a client that sends one
 * byte every few seconds keeps its connection, and enough of them hold
 * every connection. Each connection gets a watch here, armed for the
 * phase it is in (headers, which on a kept-alive connection includes the
 * idle time before them; body; or none while its request is answered); a thread shuts down the
 * socket of a connection past its deadline, so libmicrohttpd's own
 * thread for it sees the end of the stream and closes it cleanly (counted
 * in lockbox_http_deadline_closed_total, logged as http.deadline).
 *
 * A watch is removed before libmicrohttpd closes the socket (its
 * connection-closed notice comes first), and the thread shuts a socket
 * down only under the lock that removal takes: it never touches a
 * descriptor number that may have been reused. */
#pragma once

#include <stdint.h>

struct deadlines;
struct deadline_watch;

enum deadline_phase {
        DEADLINE_NONE,    /* being answered: no deadline */
        DEADLINE_HEADERS, /* its request's headers must arrive in full */
        DEADLINE_BODY,    /* its request's body must arrive in full */
};

/* Starts the watching thread; NULL (errno set) if it cannot. */
struct deadlines *deadlines_start(void);
void deadlines_stop(struct deadlines *d);

/* A new connection on socket fd; NULL when out of memory (the connection
 * then has no deadline: libmicrohttpd's idle timeout still holds). */
struct deadline_watch *deadline_watch_add(struct deadlines *d, int fd);
void deadline_watch_remove(struct deadlines *d, struct deadline_watch *w);

/* From now on, `phase` must be over within `ms` milliseconds (ms <= 0 or
 * DEADLINE_NONE: no deadline). */
void deadline_watch_arm(struct deadlines *d, struct deadline_watch *w, enum deadline_phase phase,
                        int64_t ms);
