/* src/shell/: what its files share, private to the folder. jobs.c (the
 * jobs table in the jailer) forks one keeper per job (keeper.c), which
 * clones the job's first process into the binding's namespaces and walks
 * the job's lock sequence (child.c) before the script runs; a binding's
 * namespaces are held by a small init (binding.c). */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "ipc/shell_proto.h"
#include "jail/jail.h"
#include "jail/policy.h"

/* Everything the keeper and the job's first process are made with; built
 * by the jailer before the fork, so nothing here is allocated after it. */
struct job_spec {
        char job_id[SHELL_JOB_ID_LEN + 1];
        enum shell_mode mode;
        unsigned cols, rows;
        /* the binding's namespaces, entered before the clone */
        int ns_pid, ns_net, ns_ipc, ns_uts;
        int cgroup_procs[2];  /* v1: the job group's cgroup.procs, or -1 */
        int cgroup_cpu_procs; /* v1: its cpu hierarchy's cgroup.procs, or -1 */
        int cgroup_dirfd;     /* v2: the job group, or -1 */
        int out_fd;           /* output.log, O_APPEND */
        int err_fd;           /* stderr.log, O_APPEND (stdio mode) */
        int sock;             /* the keeper's end of its socket to the jailer */
        int listen_fd;        /* bound to jobs/<id>/keeper.sock: a later jailer's way in */
        struct jail_view view;
        const char *exec_path; /* /bin/sh or the script itself */
        char *const *argv;
        char *const *envp;
        const struct policy_prog *filter;
        /* Landlock path rules, or n_ll_* all 0 and ll_on false */
        bool ll_on;
        const char *const *ll_rw;
        size_t n_ll_rw;
        const char *const *ll_ro;
        size_t n_ll_ro;
        const char *const *ll_dev;
        size_t n_ll_dev;
        int64_t max_output; /* bytes kept in output.log */
        unsigned nofile;    /* RLIMIT_NOFILE */
        /* a spare: made ahead for the binding's next job, its mode,
         * script, environment and cwd not known yet; the keeper and the
         * first process wait for KEEPER_GO (mode, exec_path, argv, envp
         * and view.cwd unset) */
        bool spare;
        pid_t parent; /* the jailer: a spare's keeper ends with it */
};

/* What a spare learns at KEEPER_GO, in a sealed memfd: this header, then
 * cwd (cwd_len bytes with its NUL), then n_env NUL-ended strings
 * (env_len bytes). */
struct job_go {
        uint32_t mode; /* enum shell_mode */
        uint32_t cols, rows;
        uint32_t shebang; /* the script is run itself, not by /bin/sh */
        uint32_t cwd_len, n_env, env_len;
};
#define JOB_GO_MAX (SHELL_BLOB_MAX + (1u << 20))

/* keeper <-> jailer, on a SEQPACKET pair, fixed-size messages. */
enum keeper_msg_type {
        KEEPER_STARTED = 1,   /* keeper -> jailer: pid = the job's first process, its pidfd
                               * attached */
        KEEPER_FAILED = 2,    /* keeper -> jailer: a lock step failed: step, error */
        KEEPER_VIOLATION = 3, /* keeper -> jailer: nr = the forbidden call */
        KEEPER_EXITED = 4,    /* keeper -> jailer: code, output drained; then it exits */
        KEEPER_INPUT = 5,     /* jailer -> keeper: a memfd of text to type, attached */
        KEEPER_INTERRUPT = 6, /* jailer -> keeper: type ^C on the terminal (PTY jobs), or
                               * SIGINT to the group of a stdio job when the jailer
                               * cannot signal it by pidfd (before Linux 6.9) */
        KEEPER_ACK = 7,       /* jailer -> keeper: EXITED is on record; the keeper may go */
        KEEPER_HELLO = 8,     /* keeper -> a jailer that connected to keeper.sock: pid =
                               * the job's first process, its pidfd attached; EXITED
                               * follows if the job has ended */
        KEEPER_GO = 9,        /* jailer -> a spare's keeper: the job's struct job_go
                               * memfd attached; STARTED or FAILED follows */
};

struct keeper_msg {
        uint32_t type;
        int32_t pid;
        int32_t code;  /* EXITED: exit status as a shell shows it (128 + signal) */
        int32_t error; /* FAILED: errno */
        int32_t nr;    /* VIOLATION: syscall number */
        char step[32];
};

/* The keeper's whole life (after fork, as root): never returns. */
_Noreturn void keeper_main(const struct job_spec *s);

/* The job's first process after clone (child.c): walks the lock steps,
 * reporting a failure on sync, and execs the script. Never returns. */
_Noreturn void job_child_main(const struct job_spec *s, int sync, int out, int err);

/* Messages of the job's first process to its keeper on the sync socket:
 * the job's seccomp listener (fd attached), or the failing step. */
#define JOB_SYNC_PTY 4 /* the master of the job's terminal, attached */
#define JOB_SYNC_GO                                                                                \
        5                /* keeper -> a spare's first process: the job_go memfd, and               \
                          * (stdio) the write ends of the output and error pipes */
#define JOB_SYNC_MNTNS 6 /* the job's mount namespace, attached: the keeper holds it */
struct job_sync_msg {
        uint32_t type; /* SYNC_FAIL, SYNC_LISTENER (jail.h) or JOB_SYNC_PTY */
        int32_t error;
        char step[32];
};

/* A binding's init: PID 1 of the binding's PID namespace, holding its IPC,
 * UTS and network namespaces while jobs come and go (binding.c). netns_fd:
 * the namespace to join, or -1 for a new one with only its loopback
 * (up); host_net: stay in the caller's. 0 with the pid and a pidfd, or
 * -errno. */
int binding_holder_start(const char *hostname, uid_t uid, int netns_fd, bool host_net,
                         pid_t *ret_pid, int *ret_pidfd);
