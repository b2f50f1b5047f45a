/* The HTTP side of lockboxd: libmicrohttpd, one thread per connection,
 * running without privileges. It authenticates, bounds bodies and
 * concurrency, decodes requests, and asks the jailer (over ctrl_fd) to run
 * code, and with shell.enabled to serve the shell-job API's calls on a
 * listener of its own. It never touches namespaces, cgroups or the
 * syscall filter. */
#pragma once

#include <stddef.h>
#include <sys/socket.h>
#include <sys/types.h>

struct config;
struct shared_stats;

/* What a connection may make the server hold (docs/ARCHITECTURE.md,
 * SECURITY.md and API.md state them; tests/unit/test_docs.c keeps them
 * true): its headers, its memory besides a body its route accepts, the
 * body of a route that takes a small JSON object (a dependency update, a
 * shell job's wait or terminate), and the body of a shell job's input. */
#define HTTP_HEADERS_MAX (64 * 1024)
#define HTTP_CONNECTION_MEMORY (256 * 1024)
#define HTTP_BODY_SMALL_BYTES 4096
#define HTTP_BODY_TEXT_BYTES (1024 * 1024)
#define HTTP_BODY_OPTIONS_BYTES 65536

/* When the server stops, shell calls still waiting for the jailer after
 * this long give up (503), as the reference's own shutdown cuts its
 * long-polls after 5 s. */
#define HTTP_SHELL_STOP_GRACE_MS 5000

struct http_server_opts {
        const struct config *cfg;
        int listen_fd;                    /* bound and listening */
        int metrics_fd;                   /* server.metrics_listen's socket, or -1 */
        int shell_fd;                     /* shell.listen:shell.port's socket, or -1 */
        int ctrl_fd;                      /* SEQPACKET socket to the jailer */
        int log_sock;                     /* the jailer sends the reopened log file here, or -1 */
        const struct shared_stats *stats; /* the jailer's figures (shared memory) */
};

/* Serve until SIGTERM/SIGINT, then finish requests in flight and return
 * the process exit code. */
int http_server_run(const struct http_server_opts *o);
