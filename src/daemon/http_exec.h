/* The HTTP process as a program of its own.
 *
 * lockboxd (root) forks; the child closes every descriptor but the ones
 * the HTTP side needs and execs lockboxd again as `lockboxd --http=FD`:
 * the new image holds none of root's memory (heap, the jailer's tables,
 * the layout). FD is a memfd with its settings: the descriptors it got,
 * server.user, and the configuration as YAML (the API key included). The
 * new image reads them, drops to server.user, confines itself (Landlock:
 * read-only access to the dependency layer directory and nothing else of
 * the filesystem, TCP connections only to port 53 for the DNS relay; a
 * deny-by-default syscall allowlist), and only then parses anything. */
#pragma once

#include <stddef.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "base/netaddr.h"

struct config;

#define HTTP_EXEC_DNS_MAX 8

/* What the parent hands over. */
struct http_exec {
        const struct config *cfg;
        uid_t uid; /* server.user */
        gid_t gid;
        int listen_fd, metrics_fd, shell_fd, ctrl_fd, log_sock, log_file_fd, dns_udp_fd, dns_tcp_fd,
            stats_fd; /* -1 where there is none */
        struct sockaddr_storage dns_upstreams[HTTP_EXEC_DNS_MAX];
        size_t n_dns_upstreams;
        struct netaddr_prefix dns_runs; /* the runs' subnet: the relay serves them only */
};

/* server.user's UID and GID (refusing root), or a negative errno with a
 * message in err. */
int http_exec_user(const char *name, uid_t *ret_uid, gid_t *ret_gid, char *err, size_t errlen);

/* The settings memfd (close-on-exec), or a negative errno. */
int http_exec_settings(const struct http_exec *x);

/* In the forked child: keep only x's descriptors and `settings`, exec
 * lockboxd (self_fd: an O_PATH descriptor of its own binary). */
_Noreturn void http_exec_child(const struct http_exec *x, int settings, int self_fd);

/* `lockboxd --http=FD`: the HTTP process; returns its exit code. */
int http_exec_main(int settings_fd);

/* `lockboxd --check-http-confinement`: confine a child exactly as the HTTP
 * process is confined and try what it must not be able to do; prints one
 * line per check and returns 0 if every one was refused. */
int http_exec_check(const struct config *cfg);
