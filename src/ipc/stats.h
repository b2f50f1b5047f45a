/* Figures the jailer publishes for the HTTP process (/metrics, /ready): one
 * page of shared memory in a memfd. The jailer maps it writable; the HTTP
 * process (a new exec) gets the descriptor and can only map it read-only
 * (the memfd is sealed against any later writable mapping or write). The
 * jailer never reads it back. */
#pragma once

#include <stdatomic.h>
#include <stdint.h>

#include "ipc/shell_proto.h"

#define STATS_LANGS 3        /* indexed by enum proto_language */
#define STATS_NET_REASONS 10 /* EGRESS_REASONS */

enum stats_proc { STATS_PROC_HTTP, STATS_PROC_JAILER, STATS_PROC_ZYGOTE, STATS_PROCS };

/* Shell jobs (src/shell/stats.c writes them, in the jailer). */
#define STATS_SHELL_STATUSES (SHELL_LOST + 1) /* enum shell_status */
/* Limits a job met. */
enum stats_shell_limit {
        STATS_SHELL_MEMORY,        /* a process of the job killed by its memory limit */
        STATS_SHELL_JOB_TIMEOUT,   /* shell.job_timeout reached */
        STATS_SHELL_OUTPUT,        /* output.log reached shell.max_output */
        STATS_SHELL_SYSCALL,       /* ended for a forbidden system call */
        STATS_SHELL_TOO_MANY_JOBS, /* a run refused: shell.max_jobs alive */
        STATS_SHELL_DISK,          /* a job ended with its HOME or workspace at its bound */
        STATS_SHELL_LIMITS,
};
enum stats_shell_snapshot { STATS_SHELL_SAVE, STATS_SHELL_RESTORE, STATS_SHELL_SNAPSHOTS };
/* What /ready says of the shell side. */
enum stats_shell_state {
        STATS_SHELL_UNKNOWN = 0, /* not checked yet (or shell.enabled is false) */
        STATS_SHELL_OK,
        STATS_SHELL_DISK_UNMOUNTED, /* shell.disk_size set, shell.home not its mount */
        STATS_SHELL_HOME_UNUSABLE,  /* shell.home missing or read-only */
        STATS_SHELL_JOBS_UNUSABLE,  /* the jobs directory missing or read-only */
};
/* Upper bounds of the job duration histogram, in milliseconds; +Inf is
 * implicit. */
#define STATS_SHELL_BUCKETS 12
extern const uint64_t stats_shell_bucket_ms[STATS_SHELL_BUCKETS];

struct shell_figures {
        atomic_uint enabled; /* 1: shell.enabled */
        atomic_uint state;   /* enum stats_shell_state, refreshed each second */
        atomic_llong home_free_bytes;
        atomic_uint live[STATS_SHELL_STATUSES];         /* jobs in a live status now */
        atomic_ulong ended[STATS_SHELL_STATUSES];       /* jobs that ended with this status */
        atomic_ulong duration[STATS_SHELL_BUCKETS + 1]; /* not cumulative; last is +Inf */
        atomic_ulong duration_count, duration_sum_ms;
        atomic_ulong output_bytes; /* output.log bytes of ended jobs */
        atomic_ulong starts[2];    /* jobs started [0] cold, [1] from their binding's spare */
        atomic_ulong limits[STATS_SHELL_LIMITS];
        atomic_ulong snapshots[STATS_SHELL_SNAPSHOTS][2]; /* [route][ok] */
};

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
        struct shell_figures shell;
};

/* A zeroed page, mapped writable, or NULL; *ret_fd is its sealed memfd
 * for stats_attach in another process (close-on-exec). */
struct shared_stats *stats_create(int *ret_fd);
/* The page of a stats_create memfd, read-only, or NULL. */
const struct shared_stats *stats_attach(int fd);
void stats_unmap(const struct shared_stats *s);
