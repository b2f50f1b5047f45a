/* Figures the jailer publishes for the HTTP process (/metrics, /ready): one
 * page of shared memory, mapped before the fork. Only the jailer writes it
 * and it never reads it back, so an HTTP process that scribbles on it can
 * only lie to itself. */
#pragma once

#include <stdatomic.h>
#include <stdint.h>

#define STATS_LANGS 3 /* indexed by enum proto_language */
#define STATS_NET_REASONS 7 /* EGRESS_REASONS */

struct shared_stats {
        atomic_uint runtime[STATS_LANGS];     /* 1: the interpreter was found */
        atomic_uint pool_target[STATS_LANGS]; /* armed runs wanted, per network mode */
        atomic_uint armed[STATS_LANGS][2];    /* [lang][network] */
        atomic_uint spawning[STATS_LANGS][2];
        atomic_uint warmed;     /* 1 once the configured mode's pools were full (or cold mode) */
        atomic_uint active;     /* runs holding a request */
        atomic_int zygote_pid;  /* 0 when none runs */
        atomic_ulong spawn_failures; /* runs that ended before they could serve */
        atomic_ulong net_refused[STATS_NET_REASONS]; /* by enum egress_reason (net/egress.h) */
};

/* A zeroed shared mapping, or NULL. */
struct shared_stats *stats_map(void);
void stats_unmap(struct shared_stats *s);
