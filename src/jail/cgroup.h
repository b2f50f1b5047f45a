/* Per-run control groups: memory (no swap) and task-count limits, OOM
 * detection and peak memory. cgroup v2 when /sys/fs/cgroup is unified,
 * v1 (memory and pids hierarchies) otherwise, none if neither is usable
 * (the jail then relies on rlimits alone; see docs/ARCHITECTURE.md). */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

enum cgroup_mode { CGROUP_NONE, CGROUP_V1, CGROUP_V2 };

struct cgroup_root;
struct cgroup_run;

/* cgroup v1 counts socket buffers apart from memory: a run's limit is
 * split, at most min(limit / 8, 64 MiB) for socket buffers and the rest
 * for its memory, so that both together stay within limits.memory. */
#define CGROUP_V1_TCP_BYTES(memory) ((memory) / 8 < (64 << 20) ? (memory) / 8 : (64 << 20))

struct cgroup_limits {
        int64_t memory_bytes;
        int pids;
        /* shell groups only: CPU weight (1..10000, 100 = the default
         * share; cgroup v1's cpu.shares = weight * 1024 / 100), 0 = none */
        int cpu_weight;
};

struct cgroup_stats {
        uint64_t oom_kills;
        uint64_t memory_peak;
};

/* Detect the hierarchy, create this daemon's parent group and remove stale
 * ones left by daemons that died. Never fails hard: CGROUP_NONE on trouble,
 * with the reason in the log. */
int cgroup_root_open(struct cgroup_root **ret);
struct cgroup_root *cgroup_root_free(struct cgroup_root *root);
enum cgroup_mode cgroup_root_mode(const struct cgroup_root *root);
/* Path of the parent group of runs (memory hierarchy on v1), for tests. */
const char *cgroup_root_path(const struct cgroup_root *root);

/* The group of one UID slot (name), made on first use with its limits,
 * else reused with its peak and OOM counters started afresh. */
int cgroup_run_create(struct cgroup_root *root, const char *name, const struct cgroup_limits *l,
                      struct cgroup_run **ret);
/* Names the shell jobs' parent, "lockbox-shell-<tag>" beside the daemon's
 * own group: not removed at its stop (shell jobs outlive a restart), and
 * the same for the next daemon of the same tag. */
int cgroup_shell_parent(struct cgroup_root *root, const char *tag);
/* A group below the shell jobs' parent, e.g. "shell-b3" or
 * "shell-b3/<job>". */
int cgroup_shell_create(struct cgroup_root *root, const char *name, const struct cgroup_limits *l,
                        struct cgroup_run **ret);
/* A keeper or a binding's init moved into its binding's "holders" group
 * (binding: "shell-b3", made already): out of the daemon's own group (on
 * v2 the next start removes that with what it holds, as a dead daemon's),
 * and where a start that finds no record of the binding sweeps it with
 * the binding's other groups. cgroup_shell_unhold: what is left there
 * killed, the group removed (before the binding's own). */
int cgroup_shell_hold(struct cgroup_root *root, const char *binding, pid_t pid);
void cgroup_shell_unhold(struct cgroup_root *root, const char *binding);
/* Groups below the shell parent, two levels deep, that keep(rel) does not
 * claim: their processes killed, the groups removed. */
void cgroup_shell_sweep(struct cgroup_root *root, bool (*keep)(const char *rel, void *data),
                        void *data);
/* v2: directory fd for clone3(CLONE_INTO_CGROUP); -1 on v1/none. */
int cgroup_run_dirfd(const struct cgroup_run *run);
/* v1: the cgroup.procs files of the run's groups, open for writing, for
 * the child to move itself in; -1 where there is none. Caller closes. */
int cgroup_run_procs_fds(const struct cgroup_run *run, int ret[2]);
/* v1: the cpu hierarchy's cgroup.procs of a shell group made with a CPU
 * weight, open for writing; -1 where there is none (v2 needs none: one
 * hierarchy). Caller closes. */
int cgroup_run_cpu_procs_fd(const struct cgroup_run *run);
int cgroup_run_stats(const struct cgroup_run *run, struct cgroup_stats *ret);
/* The number after "key " on its line of dir/file ("oom_kill 2" in
 * memory.events), 0 if absent or unreadable. Exposed for unit tests. */
uint64_t cgroup_read_keyed(const char *dir, const char *file, const char *key);
/* After the run: make sure nothing is left inside (killing stragglers);
 * the groups stay for the slot's next run. -EBUSY if a group could not be
 * emptied, and then the UID must not be reused. */
int cgroup_run_destroy(struct cgroup_run *run);
/* A group that is not kept for a next run (a shell job's): kill what is
 * inside and remove it. -EBUSY if it could not be emptied. */
int cgroup_run_remove(struct cgroup_run *run);
/* Processes in the group now (0: empty; on v1 the memory hierarchy's),
 * or -errno. */
int cgroup_run_count(const struct cgroup_run *run);
struct cgroup_run *cgroup_run_free(struct cgroup_run *run);
