/* Destroying every TCP and UDP socket left in a network namespace, through
 * the kernel's socket diagnostics (NETLINK_SOCK_DIAG, SOCK_DESTROY: needs
 * CONFIG_INET_DIAG_DESTROY and CAP_NET_ADMIN). Sockets a run leaves behind
 * once its processes are gone (orphaned TCP connections still closing, say,
 * for as long as TCP_USER_TIMEOUT lets them) would otherwise hold its
 * namespace, link and address. Private to src/net/. */
#pragma once

/* A diagnostics socket in the caller's current network namespace (it
 * stays bound to it after a setns; close-on-exec). fd or -errno. */
int sockdiag_open(void);

/* Abort every TCP and UDP socket (IPv4 and IPv6, any state) of the
 * socket's namespace. How many the kernel destroyed in *ret (at most a
 * bounded number per call). 0 or -errno (-EOPNOTSUPP: a kernel without
 * SOCK_DESTROY). */
int sockdiag_destroy_all(int fd, unsigned *ret);
