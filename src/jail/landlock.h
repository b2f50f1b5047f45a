/* Landlock: a process takes away its own access to the filesystem (and,
 * where the kernel can, to TCP ports and to processes outside itself).
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
