/* The HTTP side of lockboxd: libmicrohttpd, one thread per connection,
 * running without privileges. It authenticates, bounds bodies and
 * concurrency, decodes requests, and asks the jailer (over ctrl_fd) to run
 * code. It never touches namespaces, cgroups or the syscall filter. */
#pragma once

struct config;

struct http_server_opts {
        const struct config *cfg;
        int listen_fd;     /* bound and listening */
        int ctrl_fd;       /* SEQPACKET socket to the jailer */
};

/* Serve until SIGTERM/SIGINT, then finish requests in flight and return
 * the process exit code. */
int http_server_run(const struct http_server_opts *o);
