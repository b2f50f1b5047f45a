/* Telling a sandbox run from a client: a run with network shares the
 * host's network namespace and could otherwise connect to lockboxd's own
 * port, hundreds of times, and lock every client out. A connection from a
 * local address is looked up with sock_diag (as ss(8) does); if the
 * socket belongs to a UID of the sandbox range, the connection is refused
 * at accept. */
#pragma once

#include <stdbool.h>
#include <sys/socket.h>
#include <sys/types.h>

/* local_port: the listener's port the peer connected to. */
bool peer_is_sandbox_run(const struct sockaddr *sa, socklen_t len, unsigned local_port,
                         uid_t uid_min, uid_t uid_max);

/* The UID owning this host's TCP socket (family AF_INET or AF_INET6) with
 * local port sport and remote port dport, or -1. */
long peer_owner_uid(int family, unsigned sport, unsigned dport);
