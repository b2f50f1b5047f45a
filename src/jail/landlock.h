/* Landlock: a process takes away its own access to the filesystem (and,
 * where the kernel can, to TCP ports and to processes outside itself):
 * landlock_confine() for the HTTP process, landlock_restrict_paths() for
 * a shell job, landlock_scope_self() for runs.
 *
 * After landlock_confine() the calling process (and what it starts) may
 * only read files and list directories beneath `read_dirs` (directory
 * descriptors, O_PATH will do: opened before privileges are dropped,
 * they need not be reachable by the confined account); it may not
 * write, create, remove, execute or truncate anything anywhere, connect a
 * TCP socket except to `connect_ports`, bind one at all, signal a process
 * outside its domain or reach an abstract Unix socket outside it. Rights
 * the running kernel's Landlock does not know are left as they were
 * (older ABIs): the filesystem rules need ABI 1, TCP ports ABI 4, the
 * scopes ABI 6. Needs no_new_privs (or CAP_SYS_ADMIN). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The kernel's Landlock ABI version, or a negative errno (-EOPNOTSUPP
 * when Landlock is absent or off). */
int landlock_abi(void);

/* 0, -EOPNOTSUPP when the kernel has no Landlock (nothing was changed),
 * or another negative errno. */
int landlock_confine(const int *read_dirs, size_t n_dirs, const uint16_t *connect_ports,
                     size_t n_ports);

/* Only the scopes (ABI 6): the caller can no longer signal a process nor
 * reach an abstract Unix socket outside its own domain; nothing else
 * changes. 0 (also when the kernel has no scopes: nothing was done) or a
 * negative errno. */
int landlock_scope_self(void);

/* A shell job's path rules: read, write, create, remove and execute
 * beneath the `rw` directories; read, list and execute beneath `ro`;
 * read and write (with O_TRUNC and terminal requests) on the `rw_dev`
 * files; nothing else anywhere. Paths that do not exist are skipped; a
 * rule on a file gets the rights that apply to files. Best effort over the
 * kernel's ABI: REFER (renames and links across directories, ABI 2;
 * before it they fail with EXDEV), TRUNCATE (ABI 3) and IOCTL_DEV (ABI 5)
 * are handled, and granted with write access, where the kernel knows
 * them; with scoped, the scopes of landlock_scope_self come with it on
 * ABI 6 (a shell job goes without: the jobs of one binding signal each
 * other's processes, its PID namespace is the boundary). The
 * opened fds the caller holds (a pty, pipes) stay usable: Landlock checks
 * at open. 0, -EOPNOTSUPP without Landlock (nothing was done), or a
 * negative errno. Needs no_new_privs. */
int landlock_restrict_paths(const char *const *rw, size_t n_rw, const char *const *ro, size_t n_ro,
                            const char *const *rw_dev, size_t n_dev, bool scoped);
/* The same rules as a ruleset fd, for landlock_restrict_self later (a
 * shell job's are made before its identity is dropped): the fd,
 * -EOPNOTSUPP or a negative errno. */
int landlock_paths_ruleset(const char *const *rw, size_t n_rw, const char *const *ro, size_t n_ro,
                           const char *const *rw_dev, size_t n_dev, bool scoped);
