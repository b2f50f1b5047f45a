/* The syscall policy: data tables (policy.c) compiled with libseccomp into
 * a BPF program once at start-up, loaded by each jailed child as the last
 * lock. Unknown syscalls fail with ENOSYS, probes that programs make
 * harmlessly fail with EPERM, and the dangerous list is routed to the
 * jailer through SECCOMP_RET_USER_NOTIF so it can stop the run and name
 * the call. */
#pragma once

#include <linux/filter.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum policy_action {
        POLICY_DEFAULT = 0, /* not listed: ENOSYS */
        POLICY_ALLOW,
        POLICY_EPERM,
        POLICY_ENOSYS,
        POLICY_KILL, /* user notification: the jailer kills and names it */
        POLICY_EXEC, /* user notification: the jailer lets exactly one through,
                      * the jail's own exec of the interpreter; then EPERM */
        POLICY_ARGS, /* decided on arguments by a rule in policy.c */
};

struct policy_opts {
        bool network;                  /* allow AF_INET/AF_INET6 sockets */
        bool no_memcg;                 /* no memory cgroup: deny shared anonymous memory */
        bool spawn_kills;              /* fork/vfork/clone of a process stop the run (else EPERM) */
        int self_pid;                  /* the run's own pid as it sees it (1 in its pid ns) */
        const char *const *lang_allow; /* extra names for this language, NULL-ended */
        const int *extra;              /* allowed_syscalls from the configuration */
        size_t n_extra;
};

struct policy_prog {
        struct sock_filter *insns;
        unsigned short len;
};

int policy_build(const struct policy_opts *o, struct policy_prog *ret);
/* The HTTP process's own filter, deny by default: an allowlist of what a
 * threaded network server needs (ENOSYS for the rest); a new process, an
 * exec, a debugger or a namespace kill it, so a bug in the HTTP code
 * cannot become a shell. */
int policy_build_server(struct policy_prog *ret);
/* A shell job's filter (built once at start-up, like the runs'): shells,
 * coreutils, git, cc/ld, make, Python with pip and venv, Node.js with npm
 * and uv run under it. Exec and new processes and threads are allowed,
 * new namespaces are not; ptys, job control and signals within the job
 * work; sockets are Unix, route netlink, and TCP/UDP/ICMP echo with a
 * network; the runs' kill list goes to the keeper's listener (the
 * jailer ends the job and names the call). policy.c says what differs
 * from the runs and why. */
struct policy_shell_opts {
        bool network;     /* AF_INET/AF_INET6 sockets (the binding has a network) */
        const int *extra; /* allowed_syscalls of the configuration */
        size_t n_extra;
};
int policy_build_shell(const struct policy_shell_opts *o, struct policy_prog *ret);
/* What a shell job's filter does with a syscall name: the shell's own entry,
 * else the runs' (policy_lookup). */
enum policy_action policy_shell_lookup(const char *name);
/* The HOME snapshot worker's: files, its pipe and report socket, memory;
 * nothing else (ENOSYS), the runs' kill list kills it. */
int policy_build_snapshot(struct policy_prog *ret);
/* The shell's subvolume worker's: the snapshot worker's, with FICLONE
 * (the only ioctl) and fifos. */
int policy_build_subvol(struct policy_prog *ret);
/* The Python zygote's (inherited by its children): no exec. */
int policy_build_zygote(struct policy_prog *ret);
void policy_prog_free(struct policy_prog *p);
/* Load p on the calling thread with SECCOMP_FILTER_FLAG_NEW_LISTENER: the
 * listener's fd (for the supervisor), or -errno. The last lock of a jailed
 * child (a run's, a shell job's). */
int policy_load(const struct policy_prog *p);
/* The static table entry for a syscall name (POLICY_DEFAULT if unlisted). */
enum policy_action policy_lookup(const char *name);
/* 0 when no name sits in two of the runs' tables, nor in two of the
 * shell's, and no shell entry repeats the runs' verdict for its name. */
int policy_check_tables(const char **ret_bad);
/* True for execve/execveat: notifications the jailer answers, not kills. */
bool policy_is_exec(int nr);
/* malloc'd name of a native syscall number ("#NR" if unknown). */
char *policy_syscall_name(int nr);
