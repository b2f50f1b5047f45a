/* Starting one jailed process. The jailer fills a jail_spec; jail_spawn()
 * clones a child into new namespaces, attaches it to its cgroups, and the
 * child walks the lock sequence (child.c) in a fixed order, reporting the
 * first failing step by name, until the one-shot exec of the interpreter. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "jail/policy.h"

struct cgroup_run;

struct jail_limits {
        int64_t data_bytes; /* RLIMIT_DATA; 0 = unlimited (memory cgroup in use) */
        int nproc;
        int cpu_seconds;
        int open_files;
        int64_t file_bytes;
        int64_t tmp_bytes;
        int tmp_inodes;
};

struct jail_spec {
        uid_t uid;
        gid_t gid;
        bool network;
        const char *hostname;
        const char *const *ro_paths; /* host paths, bound read-only at the same place */
        size_t n_ro_paths;
        struct jail_limits limits;
        const char *exec_path; /* interpreter, absolute */
        char *const *argv;
        char *const *envp;
        int code_fd;   /* becomes fd 3 */
        int stdout_fd; /* becomes fd 1 */
        int stderr_fd; /* becomes fd 2 */
        const struct policy_prog *filter;
        struct cgroup_run *cgroup;
};

struct jail_proc {
        pid_t pid;
        int pidfd;
        int listener; /* seccomp user-notification fd */
};

/* 0 once the child has exec'd the interpreter; otherwise -errno with
 * "step: reason" in err and nothing left running. The child's exec stops
 * in the seccomp filter; jail_spawn() lets that one exec through. */
int jail_spawn(const struct jail_spec *s, struct jail_proc *ret, char *err, size_t errlen);

/* In-child pieces (child.c, mounts.c, rlimits.c, identity.c). Each returns
 * 0 or -errno; they run only in the freshly cloned child. */
int jail_mounts_setup(const struct jail_spec *s);
int jail_rlimits_apply(const struct jail_limits *l);
int jail_identity_drop(uid_t uid, gid_t gid);
_Noreturn void jail_child_main(const struct jail_spec *s, int sync_fd);

/* Messages on the child's sync socket. */
enum jail_sync_type { SYNC_GO = 1, SYNC_FAIL = 2, SYNC_LISTENER = 3 };
struct jail_sync_msg {
        uint32_t type;
        int32_t error;
        char step[32];
};
