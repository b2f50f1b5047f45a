/* Syscall policy tables and their compilation (see policy.h).
 *
 * Deliberately left out of the allow list (they get ENOSYS, the kernel's
 * answer for "not here", so libc and runtimes fall back): io_uring (its
 * ops bypass this filter), memfd_create (anonymous executable files),
 * splice/tee/vmsplice, SysV shm/sem/msg, mq_*, mbind and NUMA policy,
 * sched_set*, inotify/fanotify, pidfd_*, landlock_*, process_madvise. */
#include "jail/policy.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <sched.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

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

static const struct {
        const char *const *names;
        size_t n;
        enum policy_action action;
} tables[] = {
    {allow_names, ELEMENTSOF(allow_names), POLICY_ALLOW},
    {eperm_names, ELEMENTSOF(eperm_names), POLICY_EPERM},
    {enosys_names, ELEMENTSOF(enosys_names), POLICY_ENOSYS},
    {kill_names, ELEMENTSOF(kill_names), POLICY_KILL},
    {exec_names, ELEMENTSOF(exec_names), POLICY_EXEC},
};

enum policy_action policy_lookup(const char *name)
{
        for (size_t i = 0; i < ELEMENTSOF(arg_rules); i++)
                if (strcmp(arg_rules[i].name, name) == 0)
                        return POLICY_ARGS;
        for (size_t t = 0; t < ELEMENTSOF(tables); t++)
                for (size_t i = 0; i < tables[t].n; i++)
                        if (strcmp(tables[t].names[i], name) == 0)
                                return tables[t].action;
        return POLICY_DEFAULT;
}

static unsigned count_name(const char *name)
{
        unsigned n = 0;
        for (size_t i = 0; i < ELEMENTSOF(arg_rules); i++)
                n += strcmp(arg_rules[i].name, name) == 0;
        for (size_t t = 0; t < ELEMENTSOF(tables); t++)
                for (size_t i = 0; i < tables[t].n; i++)
                        n += strcmp(tables[t].names[i], name) == 0;
        return n;
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

static bool is_extra(const struct policy_opts *o, int nr)
{
        for (size_t i = 0; i < o->n_extra; i++)
                if (o->extra[i] == nr)
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
static int add_named(scmp_filter_ctx ctx, const char *name, enum policy_action a,
                     const struct policy_opts *o)
{
        int nr = seccomp_syscall_resolve_name(name);
        if (nr < 0 || is_extra(o, nr) || a == POLICY_ENOSYS)
                return 0; /* not on this arch, added below, or the default already */
        return seccomp_rule_add(ctx, action_of(a), nr, 0);
}

static int add_all(scmp_filter_ctx ctx, const struct policy_opts *o)
{
        int r;
        for (size_t t = 0; t < ELEMENTSOF(tables); t++)
                for (size_t i = 0; i < tables[t].n; i++)
                        if ((r = add_named(ctx, tables[t].names[i], tables[t].action, o)) < 0)
                                return r;
        for (const char *const *l = o->lang_allow; l && *l; l++)
                if (policy_lookup(*l) != POLICY_ALLOW &&
                    (r = add_named(ctx, *l, POLICY_ALLOW, o)) < 0)
                        return r;
        for (size_t i = 0; i < ELEMENTSOF(arg_rules); i++) {
                int nr = seccomp_syscall_resolve_name(arg_rules[i].name);
                if (nr < 0 || is_extra(o, nr))
                        continue;
                if ((r = arg_rules[i].add(ctx, nr, o)) < 0)
                        return r;
        }
        for (size_t i = 0; i < o->n_extra; i++)
                if ((r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, o->extra[i], 0)) < 0 && r != -EEXIST)
                        return r;
        return 0;
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

int policy_build(const struct policy_opts *o, struct policy_prog *ret)
{
        scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ERRNO(ENOSYS));
        if (!ctx)
                return -ENOMEM;
        int r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
        if (r >= 0)
                r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 0);
        /* A binary tree of syscall numbers, not a chain: the kernel
         * evaluates the filter once per syscall number when it is loaded
         * (to cache the always-allowed ones), on every run, and a chain
         * of ~170 rules made that ~0.3 ms of each run's CPU. */
        if (r >= 0)
                r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2);
        if (r >= 0)
                r = add_all(ctx, o);
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
        scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ERRNO(ENOSYS));
        if (!ctx)
                return -ENOMEM;
        int r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
        for (size_t i = 0; r >= 0 && i < ELEMENTSOF(server_names); i++) {
                int nr = seccomp_syscall_resolve_name(server_names[i]);
                if (nr >= 0)
                        r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 0);
        }
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
        const char *fatal[] = {"execve", "execveat", "fork", "vfork"};
        for (size_t i = 0; r >= 0 && i < ELEMENTSOF(fatal); i++)
                r = seccomp_rule_add(ctx, SCMP_ACT_KILL_PROCESS,
                                     seccomp_syscall_resolve_name(fatal[i]), 0);
        for (size_t i = 0; r >= 0 && i < ELEMENTSOF(kill_names); i++) {
                int nr = seccomp_syscall_resolve_name(kill_names[i]);
                if (nr >= 0)
                        r = seccomp_rule_add(ctx, SCMP_ACT_KILL_PROCESS, nr, 0);
        }
        if (r >= 0)
                r = export_prog(ctx, ret);
        seccomp_release(ctx);
        return r;
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

void policy_prog_free(struct policy_prog *p)
{
        free(p->insns);
        *p = (struct policy_prog){0};
}
