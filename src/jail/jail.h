/* Starting one jailed process. The caller fills a jail_spec; jail_start()
 * clones a child into new namespaces and returns at once; the child walks
 * the lock sequence (child.c) in a fixed order, reporting on its sync
 * socket the first failing step by name, its seccomp listener, and, for a
 * warm child, that it is ready. A cold child ends the sequence by exec'ing
 * the interpreter (the exec waits in the filter until the supervisor lets
 * this one through); a warm child, cloned from a zygote that already holds
 * the jail's root and an initialised interpreter, returns to its caller. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "ipc/limits.h"
#include "jail/policy.h"

enum jail_mode {
        JAIL_COLD, /* build the root, exec the interpreter */
        JAIL_WARM, /* inside a zygote's root: per-run mounts, then return */
};

struct jail_spec {
        enum jail_mode mode;
        uid_t uid;
        gid_t gid;
        bool network;
        const char *hostname;
        const char *const *ro_paths; /* cold: host paths, bound read-only at the same place */
        size_t n_ro_paths;
        struct run_limits limits;
        const char *exec_path; /* cold: interpreter, absolute */
        char *const *argv;
        char *const *envp;
        int code_fd;             /* becomes fd 3 */
        int stdout_fd;           /* becomes fd 1 */
        int stderr_fd;           /* becomes fd 2 */
        int sync_fd;             /* the child's end of the sync socket */
        int report_fd;           /* becomes fd 5 (exit report), or -1 */
        int deps_fd;             /* detached read-only mount of the dependency layer, or -1 */
        int netns_fd;            /* the run's network namespace (with network), or -1 */
        const char *resolv_conf; /* cold: text of /etc/resolv.conf; NULL: the host's */
        const struct policy_prog *filter;
        int cgroup_procs[2]; /* v1: cgroup.procs files the child moves itself into, or -1 */
        int cgroup_dirfd;    /* v2: the run's group, entered by clone3; or -1 */
};

struct jail_started {
        pid_t pid;
        int pidfd;
};

/* Clone the child. sibling: make it a child of our parent (CLONE_PARENT),
 * as a zygote does for its supervisor. In the parent: 0 and *ret filled. In
 * a warm child: 1, with every lock on (never returns for a cold child). */
int jail_start(const struct jail_spec *s, bool sibling, struct jail_started *ret, char *err,
               size_t errlen);

/* Messages on the sync socket, child to supervisor. */
enum jail_sync_type { SYNC_FAIL = 1, SYNC_LISTENER = 2, SYNC_READY = 3 };
struct jail_sync_msg {
        uint32_t type;
        int32_t error;
        char step[32];
};

/* Supervisor side: one message (1, fd in *ret_fd for LISTENER), EOF (0:
 * a cold child exec'd or any child died), or -errno. */
int jail_sync_recv(int sync, struct jail_sync_msg *m, int *ret_fd);
/* Answer a pending notification on a starting child's listener: continue
 * the first exec of pid, refuse anything else (-EPERM). */
int jail_exec_permit(int listener, pid_t pid, bool *exec_done);

/* In-child pieces (child.c, mounts.c, rlimits.c, identity.c). Each returns
 * 0 or -errno. */
int jail_root_build(const char *const *ro_paths, size_t n_ro_paths, const char *hostname,
                    const char *resolv_conf);
int jail_root_enter(void);
/* The run's /etc/hosts from the host's: every name of the server (its
 * nodename, short or qualified) removed, lines left without a name
 * dropped, and "127.0.1.1 <hostname>" added, so a run learns no name of
 * the server and resolves its own. Clipped to outlen. */
void jail_hosts_text(const char *host_text, const char *nodename, const char *hostname, char *out,
                     size_t outlen);
/* base: "" inside the root, or where the new root is before pivot_root. */
int jail_run_mounts(const char *base, const struct jail_spec *s);
int jail_mounts_setup(const struct jail_spec *s);
int jail_rlimits_apply(const struct run_limits *l);
/* The capability bounding set emptied ahead (what jail_identity_drop
 * does first): a spare shell job does it before it waits, root. */
int jail_bounding_drop(void);
int jail_identity_drop(uid_t uid, gid_t gid);
/* After jail_identity_drop(uid, gid): a user namespace of the caller's
 * own mapping only uid and gid (to themselves), in which it keeps
 * CAP_DAC_READ_SEARCH and no other capability: it may read and list
 * whatever uid:gid owns, whatever the modes (an inode whose owner or
 * group is not mapped gets no such override; none of the namespaces it
 * is in but this one is owned by it, so it can mount nothing). 0; 1
 * when this system gives no user namespace (none made, nothing changed);
 * or -errno (the caller must not go on: it may hold capabilities in its
 * namespace). */
int jail_userns_read_all(uid_t uid, gid_t gid);
/* Default dispositions and an empty mask: what the jailer blocks or
 * ignores (its signalfd's signals, SIGPIPE) never reaches a program. */
int jail_signals_reset(void);
/* Where runs see the dependency layer (read-only, last on sys.path). */
#define JAIL_DEPS_PATH "/opt/lockbox/python"

/* A shell job's filesystem (src/shell/): the host's system paths and a
 * few /etc entries read-only, the job's HOME and workspace read-write at
 * the absolute paths the client names, its script read-only at its own
 * path, a generated /etc identity, /dev with its own devpts instance, a
 * /proc of the binding's PID namespace and a private /tmp. */
struct jail_view_rw {
        const char *path; /* absolute, where the job sees it */
        int fd;           /* jail_tree_detach() of the directory, or -1: bind path itself */
};
struct jail_view {
        const char *const *ro_paths; /* host paths bound read-only at the same place */
        size_t n_ro_paths;
        const struct jail_view_rw *rw;
        size_t n_rw;
        const char *file_path; /* the script: bound read-only at its own path */
        int file_fd;           /* jail_tree_detach(..., true) of it */
        const char *hostname;
        const char *resolv_conf; /* NULL: the host's */
        const char *home;        /* the passwd entry's home */
        uid_t uid;
        gid_t gid;
        int64_t tmp_bytes; /* /tmp's size */
        const char *cwd;   /* where the job starts; NULL: chdir later (a spare) */
};
/* A detached copy of the mount at fd (a directory or file opened with
 * O_PATH in the caller's mount namespace), nosuid and nodev, read-only if
 * asked: a namespace made later attaches it with move_mount, which a bind
 * of a path from another namespace cannot do. The fd or -errno. */
int jail_tree_detach(int fd, bool readonly);
/* Build it in the caller's (private) mount namespace, enter it, chdir to
 * cwd (jail_view_chdir). 0 or -errno. */
int jail_view_enter(const struct jail_view *v);
/* chdir to path in the view through no symbolic link, as the jailer
 * checked it: a link swapped in since is refused (-ELOOP), not followed
 * by a process still root (/proc/1/root leads out of the view). */
int jail_view_chdir(const char *path);

/* Runs the steps; cold: exec, never returns; warm: returns 0. */
int jail_child_main(const struct jail_spec *s);
