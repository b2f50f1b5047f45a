/* HOME snapshots (POST /v1/snapshot/save and /restore), the jailer's
 * side: one call at a time (another gets 409 snapshot_busy); each forks a
 * snapshot worker that reads (save) or writes (restore) shell.home in a
 * jail of its own (new mount, PID, network and IPC namespaces, shell.uid,
 * no capabilities, no_new_privs, Landlock beneath shell.home only, a
 * small syscall allowlist) and moves the archive through a pipe whose
 * other end goes to the HTTP process; the jailer only starts, watches,
 * times out and answers (the protocol is in ipc/shell_proto.h). */
#pragma once

#include <stdbool.h>

#include "ipc/shell_proto.h"

struct config;
struct loop;

/* A SHELL_SNAPSHOT_SAVE or _RESTORE request q read from chan (which stays
 * the caller's: a call that goes on keeps a duplicate). blobfd: the save's
 * excludes (a sealed memfd), or -1. Answers on chan at once when the call
 * is refused, else the first reply now and the second when the worker is
 * done; a worker is killed at shell.snapshot_timeout or when the HTTP
 * side closes the channel, and is a child of the jailer (which reaps
 * whatever is left at exit; the worker also dies with the jailer). */
void shell_snapshot_call(const struct config *cfg, struct loop *loop, int chan,
                         const struct shell_req *q, int blobfd);
/* A snapshot's worker is at work (a save walks shell.home, a restore
 * writes it): no tree is moved into a subvolume meanwhile. */
bool shell_snapshot_busy(void);
