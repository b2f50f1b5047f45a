/* The jailer: the root half of lockboxd. A single-threaded epoll loop that
 * serves the HTTP process's RUN requests (a closed menu, see ipc/proto.h),
 * starts each run in a fresh jail, enforces its deadline, names syscalls
 * the policy stopped, reaps it, cleans up, and answers with a RESULT. */
#pragma once

#include <stdint.h>
#include <sys/types.h>

struct config;
struct jailer;

/* Everything that needs root and can fail at start-up: runtimes, syscall
 * filters, UID pool, cgroups, exec guard. err gets one clear line. */
int jailer_new(const struct config *cfg, struct jailer **ret, char *err, size_t errlen);
/* Serve until the HTTP process has exited after SIGTERM/SIGINT (exit 0) or
 * died on its own (exit 1). Every run is killed and cleaned up first.
 * log_sock (or -1): where the log file, reopened on SIGHUP, is sent to the
 * HTTP process. */
int jailer_run(struct jailer *j, int ctrl_fd, int log_sock, pid_t http_pid);
struct jailer *jailer_free(struct jailer *j);
/* The runs' gateway address (host byte order), 0 without a run network. */
uint32_t jailer_gateway(const struct jailer *j);
/* The page of figures the jailer keeps up to date for the HTTP process
 * (shared memory: map it before forking). */
/* The memfd of the statistics page the jailer publishes (ipc/stats.h). */
int jailer_stats_fd(const struct jailer *j);
