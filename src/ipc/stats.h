/* Figures the jailer publishes for the HTTP process (/metrics, /ready): one
 * page of shared memory in a memfd. The jailer maps it writable; the HTTP
 * process (a new exec) gets the descriptor and can only map it read-only
 * (the memfd is sealed against any later writable mapping or write). The
 * jailer never reads it back. */
#pragma once

#include <stdatomic.h>
#include <stdint.h>

#define STATS_LANGS 3        /* indexed by enum proto_language */
#define STATS_NET_REASONS 10 /* EGRESS_REASONS */

enum stats_proc { STATS_PROC_HTTP, STATS_PROC_JAILER, STATS_PROC_ZYGOTE, STATS_PROCS };

struct shared_stats {
        atomic_uint runtime[STATS_LANGS];     /* 1: the interpreter was found */
        atomic_uint pool_target[STATS_LANGS]; /* armed runs wanted, per network mode */
        atomic_uint armed[STATS_LANGS][2];    /* [lang][network] */
        atomic_uint spawning[STATS_LANGS][2];
        atomic_uint warmed;    /* 1 once the configured mode's pools were full (or cold mode) */
        atomic_uint active;    /* runs holding a request */
        atomic_int zygote_pid; /* 0 when none runs */
        atomic_ulong spawn_failures;                 /* runs that ended before they could serve */
        atomic_ulong net_refused[STATS_NET_REASONS]; /* by enum egress_reason (net/egress.h) */
        /* resident bytes of lockboxd's own processes, refreshed each second;
         * 0 when none runs (the HTTP process reads no /proc) */
        atomic_llong rss[STATS_PROCS]; /* enum stats_proc */
        /* the idle-namespace pools (net/nspool.h), [0] runs without
         * network, [1] with; refreshed each second */
        atomic_ulong netns_reused[2];
        atomic_ulong netns_changed[2];
        atomic_ulong netns_sockets_destroyed[2];
        atomic_ulong netns_abandoned[2];
        atomic_uint netns_idle[2];
        atomic_uint netns_settling[2];
        atomic_uint netns_lingering[2];
};

/* A zeroed page, mapped writable, or NULL; *ret_fd is its sealed memfd
 * for stats_attach in another process (close-on-exec). */
struct shared_stats *stats_create(int *ret_fd);
/* The page of a stats_create memfd, read-only, or NULL. */
const struct shared_stats *stats_attach(int fd);
void stats_unmap(const struct shared_stats *s);
