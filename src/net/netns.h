/* Making a network namespace from the jailer's thread without staying in
 * it. Private to src/net/. */
#pragma once

/* unshare(CLONE_NEWNET); inside(data) there (sockets it opens stay bound
 * to the new namespace); setns back to back_fd. *ret_fd: the new
 * namespace (close-on-exec). A failure to come back aborts the process:
 * the jailer must never go on in a run's namespace. 0 or -errno (from
 * unshare, or inside's own). */
int netns_make(int back_fd, int (*inside)(void *data), void *data, int *ret_fd);

/* setns to the namespace ns_fd, fn(data) there, setns back to the one the
 * caller was in (a failure to come back aborts, as above). fn's result,
 * or -errno. */
int netns_run(int ns_fd, int (*fn)(void *data), void *data);
