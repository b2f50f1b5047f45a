/* Syscall policy tables and their compilation (see policy.h): the runs'
 * tables first, then what shell jobs change in them ("Shell jobs" below).
 *
 * Deliberately left out of the runs' allow list (they get ENOSYS, the kernel's
 * answer for "not here", so libc and runtimes fall back): io_uring (its
 * ops bypass this filter), memfd_create (anonymous executable files),
 * splice/tee/vmsplice, SysV shm/sem/msg, mq_*, mbind and NUMA policy,
 * sched_set*, inotify/fanotify, pidfd_*, landlock_*, process_madvise. */
#include "jail/policy.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/fs.h>
#include <linux/netlink.h>
#include <linux/random.h>
#include <linux/sockios.h>

#include "base/util.h"

/* Plain allow: file I/O on what the jail lets the program see, memory,
 * signals to itself, time, threads, and socket I/O on sockets it already
 * holds (creating one is decided by the socket rule below). */
static const char *const allow_names[] = {
    "read",
    "write",
    "readv",
    "writev",
    "pread64",
    "pwrite64",
    "preadv",
    "pwritev",
    "preadv2",
    "pwritev2",
    "open",
    "openat",
    "close",
    "close_range",
    "stat",
    "fstat",
    "lstat",
    "newfstatat",
    "statx",
    "statfs",
    "fstatfs",
    "lseek",
    "mprotect",
    "munmap",
    "mremap",
    "madvise",
    "brk",
    "msync",
    "mincore",
    "rt_sigaction",
    "rt_sigprocmask",
    "rt_sigreturn",
    "rt_sigpending",
    "rt_sigtimedwait",
    "rt_sigsuspend",
    "sigaltstack",
    "access",
    "faccessat",
    "faccessat2",
    "pipe",
    "pipe2",
    "select",
    "pselect6",
    "poll",
    "ppoll",
    "epoll_create",
    "epoll_create1",
    "epoll_ctl",
    "epoll_wait",
    "epoll_pwait",
    "epoll_pwait2",
    "eventfd",
    "eventfd2",
    "timerfd_create",
    "timerfd_settime",
    "timerfd_gettime",
    "signalfd",
    "signalfd4",
    "sched_yield",
    "sched_getaffinity",
    "sched_getparam",
    "sched_getscheduler",
    "sched_get_priority_max",
    "sched_get_priority_min",
    "sched_rr_get_interval",
    "dup",
    "dup2",
    "dup3",
    "nanosleep",
    "clock_nanosleep",
    "clock_gettime",
    "clock_getres",
    "gettimeofday",
    "time",
    "getpid",
    "getppid",
    "gettid",
    "getuid",
    "geteuid",
    "getgid",
    "getegid",
    "getgroups",
    "getresuid",
    "getresgid",
    "getpgrp",
    "getpgid",
    "getsid",
    "getcwd",
    "chdir",
    "fchdir",
    "uname",
    "sysinfo",
    "times",
    "getrusage",
    "getrlimit",
    "getpriority",
    "setpriority",
    "capget",
    "fcntl",
    "fsync",
    "fdatasync",
    "truncate",
    "ftruncate",
    "fallocate",
    "getdents",
    "getdents64",
    "rename",
    "renameat",
    "renameat2",
    "mkdir",
    "mkdirat",
    "rmdir",
    "creat",
    "link",
    "linkat",
    "unlink",
    "unlinkat",
    "symlink",
    "symlinkat",
    "readlink",
    "readlinkat",
    "chmod",
    "fchmod",
    "fchmodat",
    "chown",
    "fchown",
    "lchown",
    "fchownat",
    "umask",
    "utime",
    "utimes",
    "utimensat",
    "futimesat",
    "mknod",
    "mknodat",
    "sendfile",
    "copy_file_range",
    "futex",
    "futex_waitv",
    "set_robust_list",
    "get_robust_list",
    "set_tid_address",
    "rseq",
    "restart_syscall",
    "exit",
    "exit_group",
    "getrandom",
    "arch_prctl",
    "membarrier",
    "alarm",
    "setitimer",
    "getitimer",
    "timer_create",
    "timer_settime",
    "timer_gettime",
    "timer_getoverrun",
    "timer_delete",
    "pause",
    "wait4",
    "waitid",
    "tkill",
    "sendto",
    "recvfrom",
    "sendmsg",
    "recvmsg",
    "sendmmsg",
    "recvmmsg",
    "shutdown",
    "getsockname",
    "getpeername",
    "getsockopt",
    "connect",
    "bind",
};

/* Probes a program may make harmlessly: fail with EPERM, run continues. */
static const char *const eperm_names[] = {
    "listen",
    "accept",
    "accept4",
    "setrlimit",
    /* BSD locks work on read-only fds: one run's LOCK_EX on a file of
     * the shared read-only tree (the host's inodes) would be seen by
     * other runs and host processes. POSIX locks (fcntl, SQLite's)
     * stay: a write lock needs a writable fd, which only the run's own
     * /tmp gives. */
    "flock",
};

/* Exec goes to the jailer, which continues exactly one per run: the jail's
 * own exec of the interpreter, made before any user byte exists in the
 * process. Every later one gets EPERM. The decision rests on the jailer's
 * state, never on memory the program could change. */
static const char *const exec_names[] = {"execve", "execveat"};

/* Named ENOSYS (the default too; listed so the intent is visible and the
 * table test can see them). */
static const char *const enosys_names[] = {
    "clone3", /* flags live in memory the filter cannot read */
    "io_uring_setup", "io_uring_enter", "io_uring_register", "memfd_create", "splice", "tee",
    "vmsplice",
};

/* Never legitimate in a sandboxed snippet: the jailer kills the run and
 * reports the name. */
static const char *const kill_names[] = {
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "unshare",
    "setns",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "keyctl",
    "add_key",
    "request_key",
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
    "open_by_handle_at",
    "name_to_handle_at",
    "pidfd_getfd",
    "seccomp",
    "personality",
    "setuid",
    "setgid",
    "setreuid",
    "setregid",
    "setresuid",
    "setresgid",
    "setgroups",
    "setfsuid",
    "setfsgid",
    "capset",
    "modify_ldt",
    "iopl",
    "ioperm",
    "reboot",
    "syslog",
    "swapon",
    "swapoff",
    "acct",
    "quotactl",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "move_mount",
    "open_tree",
    "mount_setattr",
    "lookup_dcookie",
    "vhangup",
    "settimeofday",
    "clock_settime",
    "clock_adjtime",
    "adjtimex",
    "sethostname",
    "setdomainname",
    "uselib",
    "fanotify_init",
    "_sysctl",
    "nfsservctl",
};

#define NS_FLAGS                                                                                   \
        (CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER |             \
         CLONE_NEWPID | CLONE_NEWNET)

/* After specific ALLOW rules on argument N: every other value gets EPERM.
 * libseccomp checks the equality rules first (tested in test_policy.c). */
static int eperm_otherwise(scmp_filter_ctx ctx, int nr, unsigned arg)
{
        return seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 1, SCMP_CMP(arg, SCMP_CMP_GE, 0));
}

/* A new process: EPERM, which Python reports as "Operation not permitted";
 * or, for runtimes whose spawn error would not say so (Node.js prints
 * "spawn ls EPERM"), stop the run and name the call. */
static uint32_t spawn_action(const struct policy_opts *o)
{
        return o->spawn_kills ? SCMP_ACT_NOTIFY : SCMP_ACT_ERRNO(EPERM);
}

static int add_clone(scmp_filter_ctx ctx, int nr, const struct policy_opts *o)
{
        /* Threads yes (CLONE_THREAD, no new namespaces); processes no. */
        int r =
            seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 1,
                             SCMP_A0_64(SCMP_CMP_MASKED_EQ, CLONE_THREAD | NS_FLAGS, CLONE_THREAD));
        if (r < 0)
                return r;
        return seccomp_rule_add(ctx, spawn_action(o), nr, 1,
                                SCMP_A0_64(SCMP_CMP_MASKED_EQ, CLONE_THREAD, 0));
}

static int add_fork(scmp_filter_ctx ctx, int nr, const struct policy_opts *o)
{
        return seccomp_rule_add(ctx, spawn_action(o), nr, 0);
}

static int add_socket(scmp_filter_ctx ctx, int nr, const struct policy_opts *o)
{
        static const int families[] = {AF_INET, AF_INET6};
        /* TCP and UDP only, by default protocol (0) or by name: no UDP-Lite,
         * MPTCP, SCTP or ICMP echo sockets. */
        static const struct {
                int type, protocol;
        } kinds[] = {{SOCK_STREAM, 0},
                     {SOCK_STREAM, IPPROTO_TCP},
                     {SOCK_DGRAM, 0},
                     {SOCK_DGRAM, IPPROTO_UDP}};
        if (!o->network)
                return seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 0);
        for (size_t f = 0; f < ELEMENTSOF(families); f++)
                for (size_t k = 0; k < ELEMENTSOF(kinds); k++) {
                        /* the low bits of type; SOCK_NONBLOCK/CLOEXEC may be set */
                        int r = seccomp_rule_add(
                            ctx, SCMP_ACT_ALLOW, nr, 3,
                            SCMP_A0_64(SCMP_CMP_EQ, (uint64_t)families[f]),
                            SCMP_A1_64(SCMP_CMP_MASKED_EQ, 0xf, (uint64_t)kinds[k].type),
                            SCMP_A2_64(SCMP_CMP_EQ, (uint64_t)kinds[k].protocol));
                        if (r < 0)
                                return r;
                }
        /* Unix (abstract names reach host services in the host netns),
         * netlink, packet, raw, vsock, other protocols...: refused. */
        return eperm_otherwise(ctx, nr, 0);
}

static int add_socketpair(scmp_filter_ctx ctx, int nr, const struct policy_opts *o)
{
        /* asyncio's self-pipe needs a connected AF_UNIX stream pair: it
         * cannot reach anything outside the process. Datagram and seqpacket
         * pairs could sendto() an abstract name, which with network is the
         * host's namespace. */
        int r =
            seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 2, SCMP_A0_64(SCMP_CMP_EQ, (uint64_t)AF_UNIX),
                             SCMP_A1_64(SCMP_CMP_MASKED_EQ, 0xf, (uint64_t)SOCK_STREAM));
        if (r < 0)
                return r;
        return eperm_otherwise(ctx, nr, 0);
}

#ifndef IPV6_FLOWLABEL_MGR
#define IPV6_FLOWLABEL_MGR 32 /* linux/in6.h, which clashes with netinet/in.h */
#endif

static int add_setsockopt(scmp_filter_ctx ctx, int nr, const struct policy_opts *o)
{
        /* State a run would leave in its network namespace for the next
         * run there, kept by kernel timers past the check at its end:
         * multicast memberships and source filters (IGMP and MLD reports
         * sent later from a timer; /proc/net/igmp, mcfilter), anycast
         * addresses, and IPv6 flow labels (ip6_flowlabel, kept up to
         * 150 s after their socket). EPERM; every other option is
         * allowed. IPv4 options reach IPv6 sockets too (SOL_IP on an
         * AF_INET6 socket), so the level alone decides. Level and optname
         * are ints: the kernel reads the low 32 bits of each register, so
         * only those are compared (a 64-bit comparison is passed by a value
         * with its upper half set). */
        static const struct {
                int level, optname;
        } refused[] = {{SOL_IP, IP_ADD_MEMBERSHIP},
                       {SOL_IP, IP_DROP_MEMBERSHIP},
                       {SOL_IP, IP_UNBLOCK_SOURCE},
                       {SOL_IP, IP_BLOCK_SOURCE},
                       {SOL_IP, IP_ADD_SOURCE_MEMBERSHIP},
                       {SOL_IP, IP_DROP_SOURCE_MEMBERSHIP},
                       {SOL_IP, IP_MSFILTER},
                       {SOL_IP, MCAST_JOIN_GROUP},
                       {SOL_IP, MCAST_BLOCK_SOURCE},
                       {SOL_IP, MCAST_UNBLOCK_SOURCE},
                       {SOL_IP, MCAST_LEAVE_GROUP},
                       {SOL_IP, MCAST_JOIN_SOURCE_GROUP},
                       {SOL_IP, MCAST_LEAVE_SOURCE_GROUP},
                       {SOL_IP, MCAST_MSFILTER},
                       {SOL_IPV6, IPV6_ADD_MEMBERSHIP},
                       {SOL_IPV6, IPV6_DROP_MEMBERSHIP},
                       {SOL_IPV6, IPV6_JOIN_ANYCAST},
                       {SOL_IPV6, IPV6_LEAVE_ANYCAST},
                       {SOL_IPV6, IPV6_FLOWLABEL_MGR},
                       {SOL_IPV6, MCAST_JOIN_GROUP},
                       {SOL_IPV6, MCAST_BLOCK_SOURCE},
                       {SOL_IPV6, MCAST_UNBLOCK_SOURCE},
                       {SOL_IPV6, MCAST_LEAVE_GROUP},
                       {SOL_IPV6, MCAST_JOIN_SOURCE_GROUP},
                       {SOL_IPV6, MCAST_LEAVE_SOURCE_GROUP},
                       {SOL_IPV6, MCAST_MSFILTER}};
        for (size_t i = 0; i < ELEMENTSOF(refused); i++) {
                int r = seccomp_rule_add(
                    ctx, SCMP_ACT_ERRNO(EPERM), nr, 2,
                    SCMP_A1_64(SCMP_CMP_MASKED_EQ, 0xffffffff, (uint32_t)refused[i].level),
                    SCMP_A2_64(SCMP_CMP_MASKED_EQ, 0xffffffff, (uint32_t)refused[i].optname));
                if (r < 0)
                        return r;
        }
        /* libseccomp tries the exact rules first, then this one */
        return seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 1, SCMP_A1_64(SCMP_CMP_GE, 0));
}

static int add_ioctl(scmp_filter_ctx ctx, int nr, const struct policy_opts *o)
{
        /* Terminal probes and fd flags only; TIOCSTI and friends never. */
        static const unsigned long ok[] = {TCGETS,  TIOCGWINSZ, TIOCGPGRP, FIONREAD,
                                           FIONBIO, FIOCLEX,    FIONCLEX};
        for (size_t i = 0; i < ELEMENTSOF(ok); i++) {
                int r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 1,
                                         SCMP_A1_64(SCMP_CMP_EQ, (uint64_t)ok[i]));
                if (r < 0)
                        return r;
        }
        return eperm_otherwise(ctx, nr, 1);
}

static int add_prctl(scmp_filter_ctx ctx, int nr, const struct policy_opts *o)
{
        /* Thread names, dumpable and capability queries, anonymous VMA
         * names (glibc, V8). Everything else, e.g. PR_SET_SECCOMP or
         * PR_SET_MM, is refused. */
        static const uint64_t ok[] = {PR_SET_NAME,     PR_GET_NAME,         PR_GET_DUMPABLE,
                                      PR_CAPBSET_READ, PR_GET_NO_NEW_PRIVS, PR_GET_SECCOMP,
                                      0x53564d41 /* PR_SET_VMA */};
        for (size_t i = 0; i < ELEMENTSOF(ok); i++) {
                int r =
                    seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 1, SCMP_A0_64(SCMP_CMP_EQ, ok[i]));
                if (r < 0)
                        return r;
        }
        return eperm_otherwise(ctx, nr, 0);
}

static int add_prlimit(scmp_filter_ctx ctx, int nr, const struct policy_opts *o)
{
        /* Reading limits only (new_limit == NULL): a program may lower its
         * own limits but never touch them through this door. */
        int r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 1, SCMP_A2_64(SCMP_CMP_EQ, 0));
        if (r < 0)
                return r;
        return seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 1, SCMP_A2_64(SCMP_CMP_NE, 0));
}

static int add_kill(scmp_filter_ctx ctx, int nr, const struct policy_opts *o)
{
        /* kill(0|self, sig): only the run's own process (group). */
        int r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 1, SCMP_A0_64(SCMP_CMP_EQ, 0));
        if (r < 0)
                return r;
        r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 1,
                             SCMP_A0_64(SCMP_CMP_EQ, (uint64_t)o->self_pid));
        if (r < 0)
                return r;
        return eperm_otherwise(ctx, nr, 0);
}

static int add_tgkill(scmp_filter_ctx ctx, int nr, const struct policy_opts *o)
{
        int r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 1,
                                 SCMP_A0_64(SCMP_CMP_EQ, (uint64_t)o->self_pid));
        if (r < 0)
                return r;
        return eperm_otherwise(ctx, nr, 0);
}

static int add_mmap(scmp_filter_ctx ctx, int nr, const struct policy_opts *o)
{
        /* Without a memory cgroup RLIMIT_DATA is the only memory limit, and
         * it does not count shared anonymous memory: refuse that kind. */
        if (!o->no_memcg)
                return seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 0);
        int r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 1,
                                 SCMP_A3_64(SCMP_CMP_MASKED_EQ, MAP_SHARED, 0));
        if (r < 0)
                return r;
        r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 1,
                             SCMP_A3_64(SCMP_CMP_MASKED_EQ, MAP_ANONYMOUS, 0));
        if (r < 0)
                return r;
        return seccomp_rule_add(
            ctx, SCMP_ACT_ERRNO(EPERM), nr, 1,
            SCMP_A3_64(SCMP_CMP_MASKED_EQ, MAP_SHARED | MAP_ANONYMOUS, MAP_SHARED | MAP_ANONYMOUS));
}

static const struct arg_rule {
        const char *name;
        int (*add)(scmp_filter_ctx ctx, int nr, const struct policy_opts *o);
} arg_rules[] = {
    {"clone", add_clone},
    {"fork", add_fork},
    {"vfork", add_fork},
    {"socket", add_socket},
    {"socketpair", add_socketpair},
    {"setsockopt", add_setsockopt},
    {"ioctl", add_ioctl},
    {"prctl", add_prctl},
    {"prlimit64", add_prlimit},
    {"kill", add_kill},
    {"tgkill", add_tgkill},
    {"mmap", add_mmap},
};

/* Names and what the filter does with them. */
struct name_table {
        const char *const *names;
        size_t n;
        enum policy_action action;
};

/* How many times name stands in the tables; *ret the action of the last
 * table holding it (untouched when none does). */
static unsigned tables_find(const struct name_table *t, size_t nt, const char *name,
                            enum policy_action *ret)
{
        unsigned n = 0;
        for (size_t k = 0; k < nt; k++)
                for (size_t i = 0; i < t[k].n; i++)
                        if (strcmp(t[k].names[i], name) == 0) {
                                *ret = t[k].action;
                                n++;
                        }
        return n;
}

static const struct name_table tables[] = {
    {allow_names, ELEMENTSOF(allow_names), POLICY_ALLOW},
    {eperm_names, ELEMENTSOF(eperm_names), POLICY_EPERM},
    {enosys_names, ELEMENTSOF(enosys_names), POLICY_ENOSYS},
    {kill_names, ELEMENTSOF(kill_names), POLICY_KILL},
    {exec_names, ELEMENTSOF(exec_names), POLICY_EXEC},
};

/* ---- Shell jobs ----
 *
 * A shell job is a user's own Linux userland: shells, coreutils, git,
 * compilers and the code they build, make, Python with pip and venv,
 * Node.js with npm, uv. It may run any program it can read, so exec and
 * new processes are allowed and the filter is the bound on the kernel the
 * job reaches, not on what it runs. The job's filter starts from the
 * runs' tables and overrides the names below (policy_check_tables keeps
 * each override different from the runs' verdict). What the shell leaves
 * as the runs have it, among others: the kill list (ptrace, the mount
 * API, namespaces, bpf, perf, keyrings, modules, kexec, clock setting,
 * syslog, iopl...), clone3 and io_uring (ENOSYS: glibc falls back to
 * clone, libuv to its thread pool), splice/tee/vmsplice (ENOSYS: coreutils,
 * Rust and Go fall back to read/write), the setsockopt rule (multicast,
 * anycast and flow labels would outlive the job in its namespace).
 *
 * Deliberately left out of the shell's allow list (ENOSYS): SysV IPC and
 * POSIX message queues (objects that outlive the process that made them,
 * in a namespace a later job may share), sync/syncfs (a flush of the
 * whole host file system; fsync/fdatasync of its own files stay), NUMA
 * policy, Linux AIO (io_setup...), process_madvise, memfd_secret,
 * fanotify_mark (fanotify_init is on the kill list). */

/* Allowed outright for a job, unlike runs (which refuse, kill or argue). */
static const char *const shell_allow_names[] = {
    /* programs and processes (clone is an argument rule below) */
    "execve",
    "execveat",
    "fork",
    "vfork",
    /* job control; signals (the job's PID namespace bounds whom, and
     * Landlock's signal scope, where the kernel has it) */
    "setpgid",
    "setsid",
    "kill",
    "tgkill",
    "rt_sigqueueinfo",
    "rt_tgsigqueueinfo",
    "pidfd_open",
    "pidfd_send_signal",
    /* servers inside the job's own network namespace; BSD locks (cargo,
     * uv, flock(1) on its own files; one on a file of the shared read-only
     * tree is seen by other jobs, which tools only lock in their caches) */
    "listen",
    "accept",
    "accept4",
    "flock",
    /* limits: lowering them, or a soft one up to its hard one (raising a
     * hard limit needs CAP_SYS_RESOURCE, which a job never holds) */
    "setrlimit",
    "prlimit64",
    /* memory: the job's memory cgroup counts shared and memfd pages (no
     * RLIMIT_DATA gap to close, unlike runs without one); locking is
     * bounded by RLIMIT_MEMLOCK */
    "mmap",
    "memfd_create",
    "mlock",
    "mlock2",
    "munlock",
    "mlockall",
    "munlockall",
    "pkey_alloc",
    "pkey_free",
    "pkey_mprotect",
    /* files */
    "openat2",
    "fchmodat2",
    "fadvise64",
    "readahead",
    "sync_file_range",
    "inotify_init",
    "inotify_init1",
    "inotify_add_watch",
    "inotify_rm_watch",
    /* extended attributes: cp -a, tar --xattrs, Python's shutil.copy2
     * (which raises on ENOSYS); trusted.* and security.* need
     * capabilities the job lacks */
    "getxattr",
    "lgetxattr",
    "fgetxattr",
    "listxattr",
    "llistxattr",
    "flistxattr",
    "setxattr",
    "lsetxattr",
    "fsetxattr",
    "removexattr",
    "lremovexattr",
    "fremovexattr",
    /* scheduling of its own tasks (real-time classes need RLIMIT_RTPRIO
     * or CAP_SYS_NICE, which a job has neither of) */
    "getcpu",
    "sched_setaffinity",
    "sched_getattr",
    "sched_setattr",
    "sched_setscheduler",
    "sched_setparam",
    "ioprio_get",
    "ioprio_set",
    /* identity: without capabilities the kernel lets a process only
     * shuffle the IDs it already holds (all the job's one UID and GID)
     * and drop capabilities, so a sudo-like change fails with EPERM from
     * the kernel. A no-op must succeed: glibc's posix_spawn with
     * POSIX_SPAWN_RESETIDS, which make uses for every recipe, calls
     * seteuid(getuid()) and fails the spawn on an error. */
    "setuid",
    "setgid",
    "setreuid",
    "setregid",
    "setresuid",
    "setresgid",
    "setfsuid",
    "setfsgid",
    "capset",
    /* sandboxing itself further: programs that confine themselves
     * (browsers' renderers, tools built with libseccomp or Landlock
     * support) load their own filter or domain, which only stacks on
     * the job's layers, never loosens them */
    "seccomp",
    "landlock_create_ruleset",
    "landlock_add_rule",
    "landlock_restrict_self",
};

/* EPERM where runs are killed: supplementary groups and the host name
 * are what sudo-like probes and `hostname NAME` try to change; the job has
 * no capability for either, the kernel would refuse too (this keeps them
 * refused were a capability ever left behind), and the job goes on. */
static const char *const shell_eperm_names[] = {"setgroups", "sethostname", "setdomainname"};

/* Killed and named for jobs (runs get ENOSYS, the default, for these):
 * kcmp compares other processes' kernel objects (a ptrace-class probe),
 * quotactl_fd is quotactl's newer door. */
static const char *const shell_kill_names[] = {"kcmp", "quotactl_fd"};

/* clone: processes and threads, never a new namespace. CLONE_NEWTIME
 * shares its bit with the exit signal in clone's flags, so it can only
 * come through unshare (killed) or clone3 (ENOSYS). The kernel reads the
 * low 32 bits of the flags; the mask covers no other. */
static int shell_add_clone(scmp_filter_ctx ctx, int nr, const struct policy_shell_opts *o)
{
        static const uint64_t ns[] = {CLONE_NEWNS,   CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC,
                                      CLONE_NEWUSER, CLONE_NEWPID,    CLONE_NEWNET};
        int r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 1,
                                 SCMP_A0_64(SCMP_CMP_MASKED_EQ, NS_FLAGS, 0));
        for (size_t i = 0; r >= 0 && i < ELEMENTSOF(ns); i++)
                r = seccomp_rule_add(ctx, SCMP_ACT_NOTIFY, nr, 1,
                                     SCMP_A0_64(SCMP_CMP_MASKED_EQ, ns[i], ns[i]));
        return r;
}

static int shell_add_socket(scmp_filter_ctx ctx, int nr, const struct policy_shell_opts *o)
{
        /* Unix sockets of every type: the job's abstract names live in its
         * own network namespace, and Landlock's scope (kernel 6.12) keeps
         * it from those of processes outside the job. */
        int r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 1,
                                 SCMP_A0_64(SCMP_CMP_EQ, (uint64_t)AF_UNIX));
        /* Route netlink: the addresses and routes of its own namespace
         * (glibc's getaddrinfo with AI_ADDRCONFIG, `ip addr`); changing
         * them needs CAP_NET_ADMIN. Other netlink families (audit, uevents,
         * sock_diag, netfilter, generic...) are refused. */
        static const int nl_types[] = {SOCK_RAW, SOCK_DGRAM};
        for (size_t i = 0; r >= 0 && i < ELEMENTSOF(nl_types); i++)
                r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 3,
                                     SCMP_A0_64(SCMP_CMP_EQ, (uint64_t)AF_NETLINK),
                                     SCMP_A1_64(SCMP_CMP_MASKED_EQ, 0xf, (uint64_t)nl_types[i]),
                                     SCMP_A2_64(SCMP_CMP_EQ, (uint64_t)NETLINK_ROUTE));
        /* With a network: TCP, UDP and ICMP echo ("ping" sockets, which
         * the namespace's ping_group_range still decides), by default
         * protocol or by name. No raw sockets (CAP_NET_RAW anyway), SCTP,
         * MPTCP or UDP-Lite, whose modules a socket() would load. */
        static const struct {
                int family, type, protocol;
        } inet[] = {
            {AF_INET, SOCK_STREAM, 0},
            {AF_INET, SOCK_STREAM, IPPROTO_TCP},
            {AF_INET, SOCK_DGRAM, 0},
            {AF_INET, SOCK_DGRAM, IPPROTO_UDP},
            {AF_INET, SOCK_DGRAM, IPPROTO_ICMP},
            {AF_INET6, SOCK_STREAM, 0},
            {AF_INET6, SOCK_STREAM, IPPROTO_TCP},
            {AF_INET6, SOCK_DGRAM, 0},
            {AF_INET6, SOCK_DGRAM, IPPROTO_UDP},
            {AF_INET6, SOCK_DGRAM, IPPROTO_ICMPV6},
        };
        for (size_t i = 0; r >= 0 && o->network && i < ELEMENTSOF(inet); i++)
                r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 3,
                                     SCMP_A0_64(SCMP_CMP_EQ, (uint64_t)inet[i].family),
                                     SCMP_A1_64(SCMP_CMP_MASKED_EQ, 0xf, (uint64_t)inet[i].type),
                                     SCMP_A2_64(SCMP_CMP_EQ, (uint64_t)inet[i].protocol));
        /* Everything else (IP without a network, packet, raw, vsock,
         * bluetooth, alg, xdp, can...): EPERM, "Operation not permitted",
         * the answer a policy gives (EAFNOSUPPORT would claim the kernel
         * lacks IPv4, and send programs looking for a fallback). */
        if (r >= 0)
                r = eperm_otherwise(ctx, nr, 0);
        return r;
}

static int shell_add_socketpair(scmp_filter_ctx ctx, int nr, const struct policy_shell_opts *o)
{
        /* Unix pairs of every type (make's and Python's pipes, Node's
         * stdio, asyncio); no other family makes pairs anyway. */
        int r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 1,
                                 SCMP_A0_64(SCMP_CMP_EQ, (uint64_t)AF_UNIX));
        return r < 0 ? r : eperm_otherwise(ctx, nr, 0);
}

/* ioctl, an allowlist (docs/SECURITY.md, "Shell jobs: system calls and
 * Landlock"): the requests shells, terminal programs, compilers and
 * runtimes make on what a job can open (ttys and its pty, pipes, sockets,
 * regular files, /dev/null, zero, random, urandom). Each driver and file
 * system behind an fd dispatches requests of its own, a denylist would
 * have to know them all, and every request the kernel does not know for
 * an fd answers ENOTTY, which programs take as "not supported here". The
 * kernel reads the request's low 32 bits (an unsigned int): only those are
 * compared. */
#define SH_TCGETS2 0x802c542aU /* _IOR('T', 0x2A, struct termios2), which */
#define SH_TCSETS2 0x402c542bU /* glibc's headers cannot spell */
#define SH_TCSETSW2 0x402c542cU
#define SH_TCSETSF2 0x402c542dU
static const unsigned shell_ioctl_ok[] = {
    /* terminal attributes, sizes, job control (sh, bash, stty, less,
     * readline, vim; glibc's and libuv's isatty) */
    TCGETS, TCSETS, TCSETSW, TCSETSF, SH_TCGETS2, SH_TCSETS2, SH_TCSETSW2, SH_TCSETSF2, TCGETA,
    TCSETA, TCSETAW, TCSETAF, TCSBRK, TCSBRKP, TCXONC, TCFLSH, TIOCGWINSZ, TIOCSWINSZ, TIOCGPGRP,
    TIOCSPGRP, TIOCGSID, TIOCSCTTY, TIOCNOTTY, TIOCOUTQ, TIOCEXCL, TIOCNXCL, TIOCGEXCL, TIOCGETD,
    /* ptys of its own (Python's pty, script, expect, tmux, node-pty; libuv
     * asks TIOCGPTN to tell a pty's two ends apart) */
    TIOCGPTN, TIOCSPTLCK, TIOCGPTLCK, TIOCGPTPEER, TIOCPKT, TIOCGPKT, TIOCSIG,
    /* any fd: bytes waiting, flags */
    FIONREAD, FIONBIO, FIOASYNC, FIOCLEX, FIONCLEX,
    /* sockets: queue sizes, urgent mark, receive time, and reading the
     * interfaces of its own namespace (ifconfig, hostname -I) */
    SIOCATMARK, SIOCGSTAMP_OLD, SIOCGSTAMPNS_OLD, SIOCOUTQNSD, SIOCGIFNAME, SIOCGIFCONF,
    SIOCGIFFLAGS, SIOCGIFADDR, SIOCGIFDSTADDR, SIOCGIFBRDADDR, SIOCGIFNETMASK, SIOCGIFMETRIC,
    SIOCGIFMTU, SIOCGIFHWADDR, SIOCGIFINDEX, SIOCGIFTXQLEN,
    /* files: reflink copies (cp --reflink=auto tries them first), reading
     * inode flags (lsattr); the entropy count of /dev/random */
    FICLONE, FICLONERANGE, FS_IOC_GETFLAGS, FS_IOC_FSGETXATTR, RNDGETENTCNT};

/* Refused with EPERM, named so the answer is "not permitted", not "not a
 * tty": typing into a terminal's input (TIOCSTI), the console's
 * selection and keyboard (TIOCLINUX), redirecting the console (TIOCCONS),
 * changing a line discipline (TIOCSETD, the door to n_gsm, n_hdlc and
 * their bugs), inode flags and project ids (FS_IOC_SETFLAGS,
 * FS_IOC_FSSETXATTR: a project id escapes project quotas). */
static const unsigned shell_ioctl_refused[] = {TIOCSTI,  TIOCLINUX,       TIOCCONS,
                                               TIOCSETD, FS_IOC_SETFLAGS, FS_IOC_FSSETXATTR};

static int shell_add_ioctl(scmp_filter_ctx ctx, int nr, const struct policy_shell_opts *o)
{
        int r = 0;
        for (size_t i = 0; r >= 0 && i < ELEMENTSOF(shell_ioctl_refused); i++)
                r = seccomp_rule_add(
                    ctx, SCMP_ACT_ERRNO(EPERM), nr, 1,
                    SCMP_A1_64(SCMP_CMP_MASKED_EQ, 0xffffffff, (uint64_t)shell_ioctl_refused[i]));
        for (size_t i = 0; r >= 0 && i < ELEMENTSOF(shell_ioctl_ok); i++)
                r = seccomp_rule_add(
                    ctx, SCMP_ACT_ALLOW, nr, 1,
                    SCMP_A1_64(SCMP_CMP_MASKED_EQ, 0xffffffff, (uint64_t)shell_ioctl_ok[i]));
        /* libseccomp tries the exact rules first, then this one */
        if (r >= 0)
                r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOTTY), nr, 1,
                                     SCMP_A1_64(SCMP_CMP_GE, 0));
        return r;
}

#ifndef PR_SET_MDWE
#define PR_SET_MDWE 65
#define PR_GET_MDWE 66
#endif
#ifndef PR_GET_AUXV
#define PR_GET_AUXV 0x41555856
#endif

static int shell_add_prctl(scmp_filter_ctx ctx, int nr, const struct policy_shell_opts *o)
{
        /* What programs do to themselves: names, death signals,
         * subreapers (tini, make-like supervisors), dumpability, timer
         * slack, THP, speculation and W^X hardening, VMA names, the
         * no_new_privs and seccomp pair that self-sandboxing tools use,
         * and queries. Each acts on the caller alone or needs a
         * capability the job lacks (ambient raises, keepcaps). Everything
         * else, e.g. PR_SET_MM or PR_SET_SECUREBITS, is refused. */
        static const uint64_t ok[] = {PR_SET_PDEATHSIG,
                                      PR_GET_PDEATHSIG,
                                      PR_GET_DUMPABLE,
                                      PR_SET_DUMPABLE,
                                      PR_GET_KEEPCAPS,
                                      PR_SET_KEEPCAPS,
                                      PR_SET_NAME,
                                      PR_GET_NAME,
                                      PR_GET_SECCOMP,
                                      PR_SET_SECCOMP,
                                      PR_CAPBSET_READ,
                                      PR_GET_SECUREBITS,
                                      PR_GET_TIMERSLACK,
                                      PR_SET_TIMERSLACK,
                                      PR_SET_CHILD_SUBREAPER,
                                      PR_GET_CHILD_SUBREAPER,
                                      PR_SET_NO_NEW_PRIVS,
                                      PR_GET_NO_NEW_PRIVS,
                                      PR_GET_TID_ADDRESS,
                                      PR_SET_THP_DISABLE,
                                      PR_GET_THP_DISABLE,
                                      PR_CAP_AMBIENT,
                                      PR_GET_SPECULATION_CTRL,
                                      PR_SET_SPECULATION_CTRL,
                                      PR_SET_MDWE,
                                      PR_GET_MDWE,
                                      PR_GET_AUXV,
                                      PR_SET_PTRACER,
                                      0x53564d41 /* PR_SET_VMA */};
        int r = 0;
        for (size_t i = 0; r >= 0 && i < ELEMENTSOF(ok); i++)
                r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 1, SCMP_A0_64(SCMP_CMP_EQ, ok[i]));
        return r < 0 ? r : eperm_otherwise(ctx, nr, 0);
}

static int shell_add_personality(scmp_filter_ctx ctx, int nr, const struct policy_shell_opts *o)
{
        /* The query (0xffffffff), Linux, its 32-bit flavour (linux32,
         * uname says i686) and no address randomisation for itself
         * (setarch -R, debuggers, reproducible builds). The rest
         * (MMAP_PAGE_ZERO, READ_IMPLIES_EXEC, foreign personalities) only
         * serves exploits and old binaries: killed and named. The kernel
         * reads an unsigned int: the low 32 bits are compared. */
        static const uint32_t ok[] = {0xffffffffU, PER_LINUX, PER_LINUX | ADDR_NO_RANDOMIZE,
                                      PER_LINUX32, PER_LINUX32 | ADDR_NO_RANDOMIZE};
        int r = 0;
        for (size_t i = 0; r >= 0 && i < ELEMENTSOF(ok); i++)
                r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 1,
                                     SCMP_A0_64(SCMP_CMP_MASKED_EQ, 0xffffffff, ok[i]));
        if (r >= 0)
                r = seccomp_rule_add(ctx, SCMP_ACT_NOTIFY, nr, 1, SCMP_A0_64(SCMP_CMP_GE, 0));
        return r;
}

static const struct shell_arg_rule {
        const char *name;
        int (*add)(scmp_filter_ctx ctx, int nr, const struct policy_shell_opts *o);
} shell_arg_rules[] = {
    {"clone", shell_add_clone},           {"socket", shell_add_socket},
    {"socketpair", shell_add_socketpair}, {"ioctl", shell_add_ioctl},
    {"prctl", shell_add_prctl},           {"personality", shell_add_personality},
};

static const struct name_table shell_tables[] = {
    {shell_allow_names, ELEMENTSOF(shell_allow_names), POLICY_ALLOW},
    {shell_eperm_names, ELEMENTSOF(shell_eperm_names), POLICY_EPERM},
    {shell_kill_names, ELEMENTSOF(shell_kill_names), POLICY_KILL},
};

enum policy_action policy_lookup(const char *name)
{
        enum policy_action a = POLICY_DEFAULT;
        for (size_t i = 0; i < ELEMENTSOF(arg_rules); i++)
                if (strcmp(arg_rules[i].name, name) == 0)
                        return POLICY_ARGS;
        tables_find(tables, ELEMENTSOF(tables), name, &a);
        return a;
}

static unsigned count_name(const char *name)
{
        enum policy_action a;
        unsigned n = tables_find(tables, ELEMENTSOF(tables), name, &a);
        for (size_t i = 0; i < ELEMENTSOF(arg_rules); i++)
                n += strcmp(arg_rules[i].name, name) == 0;
        return n;
}

/* The shell's own entry for a name: POLICY_DEFAULT when it has none and
 * the runs' verdict holds. */
static enum policy_action shell_entry(const char *name)
{
        enum policy_action a = POLICY_DEFAULT;
        for (size_t i = 0; i < ELEMENTSOF(shell_arg_rules); i++)
                if (strcmp(shell_arg_rules[i].name, name) == 0)
                        return POLICY_ARGS;
        tables_find(shell_tables, ELEMENTSOF(shell_tables), name, &a);
        return a;
}

enum policy_action policy_shell_lookup(const char *name)
{
        enum policy_action a = shell_entry(name);
        return a != POLICY_DEFAULT ? a : policy_lookup(name);
}

static unsigned count_shell_name(const char *name)
{
        enum policy_action a;
        unsigned n = tables_find(shell_tables, ELEMENTSOF(shell_tables), name, &a);
        for (size_t i = 0; i < ELEMENTSOF(shell_arg_rules); i++)
                n += strcmp(shell_arg_rules[i].name, name) == 0;
        return n;
}

/* A shell entry is in one shell table only, and says something else than
 * the runs' (an entry that agrees belongs in the shared table). Argument
 * rules differ from the runs' by being the shell's own. */
static bool shell_name_ok(const char *name, enum policy_action a)
{
        return count_shell_name(name) == 1 && (a == POLICY_ARGS || policy_lookup(name) != a);
}

int policy_check_tables(const char **ret_bad)
{
        for (size_t t = 0; t < ELEMENTSOF(tables); t++)
                for (size_t i = 0; i < tables[t].n; i++)
                        if (count_name(tables[t].names[i]) != 1) {
                                *ret_bad = tables[t].names[i];
                                return -EEXIST;
                        }
        for (size_t i = 0; i < ELEMENTSOF(arg_rules); i++)
                if (count_name(arg_rules[i].name) != 1) {
                        *ret_bad = arg_rules[i].name;
                        return -EEXIST;
                }
        for (size_t t = 0; t < ELEMENTSOF(shell_tables); t++)
                for (size_t i = 0; i < shell_tables[t].n; i++)
                        if (!shell_name_ok(shell_tables[t].names[i], shell_tables[t].action)) {
                                *ret_bad = shell_tables[t].names[i];
                                return -EEXIST;
                        }
        for (size_t i = 0; i < ELEMENTSOF(shell_arg_rules); i++)
                if (!shell_name_ok(shell_arg_rules[i].name, POLICY_ARGS)) {
                        *ret_bad = shell_arg_rules[i].name;
                        return -EEXIST;
                }
        return 0;
}

bool policy_is_exec(int nr)
{
        for (size_t i = 0; i < ELEMENTSOF(exec_names); i++)
                if (seccomp_syscall_resolve_name(exec_names[i]) == nr)
                        return true;
        return false;
}

char *policy_syscall_name(int nr)
{
        char *n = seccomp_syscall_resolve_num_arch(SCMP_ARCH_NATIVE, nr);
        if (n)
                return n;
        char buf[32];
        snprintf(buf, sizeof(buf), "#%d", nr);
        return strdup(buf);
}

static bool is_extra(const int *extra, size_t n_extra, int nr)
{
        for (size_t i = 0; i < n_extra; i++)
                if (extra[i] == nr)
                        return true;
        return false;
}

static uint32_t action_of(enum policy_action a)
{
        switch (a) {
        case POLICY_ALLOW:
                return SCMP_ACT_ALLOW;
        case POLICY_EPERM:
                return SCMP_ACT_ERRNO(EPERM);
        case POLICY_KILL:
        case POLICY_EXEC:
                return SCMP_ACT_NOTIFY;
        default:
                return SCMP_ACT_ERRNO(ENOSYS);
        }
}

/* Add one plain table entry unless the configuration allowed it outright. */
static int add_named(scmp_filter_ctx ctx, const char *name, enum policy_action a, const int *extra,
                     size_t n_extra)
{
        int nr = seccomp_syscall_resolve_name(name);
        if (nr < 0 || is_extra(extra, n_extra, nr) || a == POLICY_ENOSYS)
                return 0; /* not on this arch, added below, or the default already */
        return seccomp_rule_add(ctx, action_of(a), nr, 0);
}

/* allowed_syscalls: plain allow rules, after every other rule */
static int add_extras(scmp_filter_ctx ctx, const int *extra, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                int r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, extra[i], 0);
                if (r < 0 && r != -EEXIST)
                        return r;
        }
        return 0;
}

static int add_all(scmp_filter_ctx ctx, const struct policy_opts *o)
{
        int r;
        for (size_t t = 0; t < ELEMENTSOF(tables); t++)
                for (size_t i = 0; i < tables[t].n; i++)
                        if ((r = add_named(ctx, tables[t].names[i], tables[t].action, o->extra,
                                           o->n_extra)) < 0)
                                return r;
        for (const char *const *l = o->lang_allow; l && *l; l++)
                if (policy_lookup(*l) != POLICY_ALLOW &&
                    (r = add_named(ctx, *l, POLICY_ALLOW, o->extra, o->n_extra)) < 0)
                        return r;
        for (size_t i = 0; i < ELEMENTSOF(arg_rules); i++) {
                int nr = seccomp_syscall_resolve_name(arg_rules[i].name);
                if (nr < 0 || is_extra(o->extra, o->n_extra, nr))
                        continue;
                if ((r = arg_rules[i].add(ctx, nr, o)) < 0)
                        return r;
        }
        return add_extras(ctx, o->extra, o->n_extra);
}

/* libseccomp 2.5 exports BPF only to an fd: go through a memfd. */
static int export_prog(scmp_filter_ctx ctx, struct policy_prog *ret)
{
        _cleanup_close_ int fd = memfd_create("lockbox-bpf", MFD_CLOEXEC);
        if (fd < 0)
                return -errno;
        int r = seccomp_export_bpf(ctx, fd);
        if (r < 0)
                return r;
        off_t size = lseek(fd, 0, SEEK_END);
        if (size <= 0 || size % (off_t)sizeof(struct sock_filter) != 0 ||
            size / (off_t)sizeof(struct sock_filter) > BPF_MAXINSNS)
                return -E2BIG;
        struct sock_filter *insns = malloc((size_t)size);
        if (!insns)
                return -ENOMEM;
        if (pread(fd, insns, (size_t)size, 0) != size) {
                free(insns);
                return -EIO;
        }
        ret->insns = insns;
        ret->len = (unsigned short)(size / (off_t)sizeof(struct sock_filter));
        return 0;
}

/* A filter whose default is ENOSYS and which kills foreign architectures
 * (i386, x32), or NULL. */
static scmp_filter_ctx filter_new(void)
{
        scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ERRNO(ENOSYS));
        if (!ctx)
                return NULL;
        int r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
        if (r >= 0)
                r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 0);
        /* A binary tree of syscall numbers, not a chain: the kernel
         * evaluates the filter once per syscall number when it is loaded
         * (to cache the always-allowed ones), on every run, and a chain
         * of ~170 rules made that ~0.3 ms of each run's CPU. */
        if (r >= 0)
                r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2);
        if (r < 0) {
                seccomp_release(ctx);
                return NULL;
        }
        return ctx;
}

int policy_build(const struct policy_opts *o, struct policy_prog *ret)
{
        scmp_filter_ctx ctx = filter_new();
        if (!ctx)
                return -ENOMEM;
        int r = add_all(ctx, o);
        if (r >= 0)
                r = export_prog(ctx, ret);
        seccomp_release(ctx);
        return r;
}

/* The runs' tables and rules where the shell has no entry of its own. */
static int add_shell_shared(scmp_filter_ctx ctx, const struct policy_shell_opts *o)
{
        const struct policy_opts runs = {.network = o->network};
        int r;
        for (size_t t = 0; t < ELEMENTSOF(tables); t++)
                for (size_t i = 0; i < tables[t].n; i++)
                        if (shell_entry(tables[t].names[i]) == POLICY_DEFAULT &&
                            (r = add_named(ctx, tables[t].names[i], tables[t].action, o->extra,
                                           o->n_extra)) < 0)
                                return r;
        for (size_t i = 0; i < ELEMENTSOF(arg_rules); i++) {
                int nr = seccomp_syscall_resolve_name(arg_rules[i].name);
                if (nr < 0 || is_extra(o->extra, o->n_extra, nr) ||
                    shell_entry(arg_rules[i].name) != POLICY_DEFAULT)
                        continue;
                if ((r = arg_rules[i].add(ctx, nr, &runs)) < 0)
                        return r;
        }
        return 0;
}

static int add_shell_all(scmp_filter_ctx ctx, const struct policy_shell_opts *o)
{
        int r = add_shell_shared(ctx, o);
        if (r < 0)
                return r;
        for (size_t t = 0; t < ELEMENTSOF(shell_tables); t++)
                for (size_t i = 0; i < shell_tables[t].n; i++)
                        if ((r = add_named(ctx, shell_tables[t].names[i], shell_tables[t].action,
                                           o->extra, o->n_extra)) < 0)
                                return r;
        for (size_t i = 0; i < ELEMENTSOF(shell_arg_rules); i++) {
                int nr = seccomp_syscall_resolve_name(shell_arg_rules[i].name);
                if (nr < 0 || is_extra(o->extra, o->n_extra, nr))
                        continue;
                if ((r = shell_arg_rules[i].add(ctx, nr, o)) < 0)
                        return r;
        }
        return add_extras(ctx, o->extra, o->n_extra);
}

int policy_build_shell(const struct policy_shell_opts *o, struct policy_prog *ret)
{
        scmp_filter_ctx ctx = filter_new();
        if (!ctx)
                return -ENOMEM;
        int r = add_shell_all(ctx, o);
        if (r >= 0)
                r = export_prog(ctx, ret);
        seccomp_release(ctx);
        return r;
}

/* Each of names this kernel knows gets action (the others are left out). */
static int add_names(scmp_filter_ctx ctx, uint32_t action, const char *const *names, size_t n)
{
        int r = 0;
        for (size_t i = 0; r >= 0 && i < n; i++) {
                int nr = seccomp_syscall_resolve_name(names[i]);
                if (nr >= 0)
                        r = seccomp_rule_add(ctx, action, nr, 0);
        }
        return r;
}

/* A filter of lockbox's own processes: a call off its list fails with
 * ENOSYS (as one this kernel lacks), another architecture's kills. */
static scmp_filter_ctx deny_by_default(int *r)
{
        scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ERRNO(ENOSYS));
        *r = ctx ? seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS) : -ENOMEM;
        return ctx;
}

/* Its end, if r says all went well: the kill list, then the program. */
static int kill_list_and_export(scmp_filter_ctx ctx, int r, struct policy_prog *ret)
{
        if (r >= 0)
                r = add_names(ctx, SCMP_ACT_KILL_PROCESS, kill_names, ELEMENTSOF(kill_names));
        if (r >= 0)
                r = export_prog(ctx, ret);
        seccomp_release(ctx);
        return r;
}

/* What the HTTP process (libmicrohttpd's threads, jansson, libyaml, glibc)
 * calls once it has confined itself; anything else fails with ENOSYS, and
 * the runs' kill list, exec and new processes kill it. */
static const char *const server_names[] = {
    /* descriptors and files (Landlock limits which files) */
    "read",
    "write",
    "readv",
    "writev",
    "pread64",
    "pwrite64",
    "lseek",
    "close",
    "fstat",
    "newfstatat",
    "statx",
    "openat",
    "fcntl",
    "dup",
    "dup2",
    "dup3",
    "pipe2",
    "eventfd2",
    "memfd_create", /* a shell job's script, handed to the jailer sealed */
    /* waiting */
    "poll",
    "ppoll",
    "select",
    "pselect6",
    "epoll_create1",
    "epoll_ctl",
    "epoll_wait",
    "epoll_pwait",
    "nanosleep",
    "clock_nanosleep",
    "futex",
    "sched_yield",
    /* sockets: clients, the jailer's channels, the DNS relay, peer checks */
    "socketpair",
    "bind",
    "connect",
    "accept",
    "accept4",
    "getsockname",
    "getpeername",
    "setsockopt",
    "getsockopt",
    "sendto",
    "recvfrom",
    "sendmsg",
    "recvmsg",
    "sendmmsg",
    "recvmmsg",
    "shutdown",
    /* memory */
    "mmap",
    "munmap",
    "mremap",
    "mprotect",
    "madvise",
    "brk",
    /* threads and signals */
    "set_robust_list",
    "rseq",
    "exit",
    "exit_group",
    "rt_sigaction",
    "rt_sigprocmask",
    "rt_sigreturn",
    "rt_sigtimedwait",
    "sigaltstack",
    "signalfd4",
    "restart_syscall",
    /* facts about itself and the time */
    "clock_gettime",
    "clock_getres",
    "gettimeofday",
    "getpid",
    "gettid",
    "getppid",
    "getuid",
    "geteuid",
    "getgid",
    "getegid",
    "getrandom",
    "uname",
    "getrusage",
    "sched_getaffinity",
};

int policy_build_server(struct policy_prog *ret)
{
        /* off the list: ENOSYS, as for a call this kernel lacks (and what
         * clone3 needs, see below); the argument rules answer EPERM */
        int r;
        scmp_filter_ctx ctx = deny_by_default(&r);
        if (!ctx)
                return r;
        if (r >= 0)
                r = add_names(ctx, SCMP_ACT_ALLOW, server_names, ELEMENTSOF(server_names));
        /* the runs' argument rules where they fit (terminal ioctls and fd
         * flags only; reading limits only; signals to itself only), and
         * sockets of the families it uses (clients, DNS upstreams,
         * netlink for the host's addresses and peers' owners) */
        const struct policy_opts self = {.self_pid = getpid()};
        if (r >= 0)
                r = add_ioctl(ctx, seccomp_syscall_resolve_name("ioctl"), &self);
        if (r >= 0)
                r = add_prlimit(ctx, seccomp_syscall_resolve_name("prlimit64"), &self);
        if (r >= 0)
                r = add_tgkill(ctx, seccomp_syscall_resolve_name("tgkill"), &self);
        static const int families[] = {AF_INET, AF_INET6, AF_NETLINK};
        for (size_t i = 0; r >= 0 && i < ELEMENTSOF(families); i++)
                r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, seccomp_syscall_resolve_name("socket"), 1,
                                     SCMP_A0_64(SCMP_CMP_EQ, (uint64_t)families[i]));
        if (r >= 0)
                r = eperm_otherwise(ctx, seccomp_syscall_resolve_name("socket"), 0);
        /* threads only: clone3's flags are in memory the filter cannot
         * read, so it is not listed (ENOSYS) and glibc falls back to clone */
        if (r >= 0)
                r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, seccomp_syscall_resolve_name("clone"), 1,
                                     SCMP_A0_64(SCMP_CMP_MASKED_EQ, CLONE_THREAD, CLONE_THREAD));
        if (r >= 0)
                r = seccomp_rule_add(ctx, SCMP_ACT_KILL_PROCESS,
                                     seccomp_syscall_resolve_name("clone"), 1,
                                     SCMP_A0_64(SCMP_CMP_MASKED_EQ, CLONE_THREAD, 0));
        /* libmicrohttpd names its threads */
        if (r >= 0)
                r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, seccomp_syscall_resolve_name("prctl"), 1,
                                     SCMP_A0_64(SCMP_CMP_EQ, PR_SET_NAME));
        static const char *const fatal[] = {"execve", "execveat", "fork", "vfork"};
        if (r >= 0)
                r = add_names(ctx, SCMP_ACT_KILL_PROCESS, fatal, ELEMENTSOF(fatal));
        return kill_list_and_export(ctx, r, ret);
}

/* The snapshot worker's (src/shell/snapshot_worker.c), deny by default:
 * it reads and writes files beneath HOME (Landlock bounds where), a pipe
 * and its report socket, and allocates; off the list (ENOSYS): sockets,
 * processes, exec, namespaces, mounts, ptrace, chown (it restores no
 * owner), xattrs, ioctls. */
static const char *const snapshot_names[] = {
    "read",
    "write",
    "readv",
    "writev",
    "pread64",
    "pwrite64",
    "lseek",
    "close",
    "fstat",
    "newfstatat",
    "statx",
    "openat",
    "openat2",
    "getdents64",
    "fcntl",
    "dup",
    "dup3",
    "mkdirat",
    "symlinkat",
    "linkat",
    "renameat",
    "renameat2",
    "unlinkat",
    "fchmod",
    "fchmodat",
    "readlinkat",
    "utimensat",
    "fchdir",
    "getcwd",
    "ftruncate",
    "fsync",
    "fdatasync",
    "umask",
    "fstatfs",
    "mmap",
    "munmap",
    "mremap",
    "mprotect",
    "madvise",
    "brk",
    "futex",
    "exit",
    "exit_group",
    "rt_sigreturn",
    "rt_sigprocmask",
    "clock_gettime",
    "gettimeofday",
    "getpid",
    "getuid",
    "geteuid",
    "getgid",
    "getegid",
    "getrandom",
    "sendto",
    "sendmsg",
    /* glibc calls the old path syscalls where the kernel has them */
    "mkdir",
    "rmdir",
    "symlink",
    "link",
    "unlink",
    "rename",
    "chmod",
    "readlink",
    "stat",
    "lstat",
    "access",
    "faccessat",
    "faccessat2",
    "utimes",
    "chdir",
    "open",
};

int policy_build_snapshot(struct policy_prog *ret)
{
        int r;
        scmp_filter_ctx ctx = deny_by_default(&r);
        if (!ctx)
                return r;
        if (r >= 0)
                r = add_names(ctx, SCMP_ACT_ALLOW, snapshot_names, ELEMENTSOF(snapshot_names));
        return kill_list_and_export(ctx, r, ret);
}

/* The subvolume worker's (src/shell/subvol.c): the snapshot worker's
 * list, and what copying a tree into a subvolume adds: FICLONE (no other
 * ioctl), fifos (mknodat, S_IFIFO only) and extended attributes through
 * an fd. */
static const char *const subvol_names[] = {"flistxattr", "fgetxattr", "fsetxattr"};

int policy_build_subvol(struct policy_prog *ret)
{
        int r;
        scmp_filter_ctx ctx = deny_by_default(&r);
        if (!ctx)
                return r;
        if (r >= 0)
                r = add_names(ctx, SCMP_ACT_ALLOW, snapshot_names, ELEMENTSOF(snapshot_names));
        if (r >= 0)
                r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(ioctl), 1,
                                     SCMP_A1_64(SCMP_CMP_MASKED_EQ, 0xffffffff, (uint64_t)FICLONE));
        if (r >= 0)
                r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(mknodat), 1,
                                     SCMP_A2_32(SCMP_CMP_MASKED_EQ, S_IFMT, S_IFIFO));
        if (r >= 0)
                r = add_names(ctx, SCMP_ACT_ALLOW, subvol_names, ELEMENTSOF(subvol_names));
        return kill_list_and_export(ctx, r, ret);
}

int policy_build_zygote(struct policy_prog *ret)
{
        /* Filters stack and the stricter action wins, so whatever this one
         * kills would override the runs' own verdicts (EPERM for exec, the
         * named kill for ptrace...). It only makes sure the zygote and its
         * children never exec: EPERM, the runs' own answer too. */
        scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
        if (!ctx)
                return -ENOMEM;
        int r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
        for (size_t i = 0; r >= 0 && i < ELEMENTSOF(exec_names); i++)
                r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM),
                                     seccomp_syscall_resolve_name(exec_names[i]), 0);
        if (r >= 0)
                r = export_prog(ctx, ret);
        seccomp_release(ctx);
        return r;
}

int policy_load(const struct policy_prog *p)
{
        struct sock_fprog prog = {.len = p->len, .filter = p->insns};
        int fd = (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
                              SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog);
        return fd < 0 ? -errno : fd;
}

void policy_prog_free(struct policy_prog *p)
{
        free(p->insns);
        *p = (struct policy_prog){0};
}
