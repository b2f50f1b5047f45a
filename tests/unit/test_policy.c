/* Unit tests for the syscall policy: the tables are consistent, and the
 * compiled filter, loaded in a forked child, answers as documented. */
#include <errno.h>
#include <fcntl.h>
#include <linux/seccomp.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "config/config.h"
#include "jail/policy.h"
#include "test.h"

extern const char *const config_never_allowed_syscalls[];

TEST(policy_tables_have_no_duplicates)
{
        const char *bad = NULL;
        int r = policy_check_tables(&bad);
        if (r != 0)
                test_fail(__FILE__, __LINE__, "duplicate policy entry: %s", bad);
        EXPECT_INT_EQ(r, 0);
}

TEST(policy_lookup_classes)
{
        EXPECT_INT_EQ(policy_lookup("read"), POLICY_ALLOW);
        EXPECT_INT_EQ(policy_lookup("fork"), POLICY_ARGS);
        EXPECT_INT_EQ(policy_lookup("listen"), POLICY_EPERM);
        EXPECT_INT_EQ(policy_lookup("clone3"), POLICY_ENOSYS);
        EXPECT_INT_EQ(policy_lookup("io_uring_setup"), POLICY_ENOSYS);
        EXPECT_INT_EQ(policy_lookup("ptrace"), POLICY_KILL);
        EXPECT_INT_EQ(policy_lookup("mount"), POLICY_KILL);
        EXPECT_INT_EQ(policy_lookup("clone"), POLICY_ARGS);
        EXPECT_INT_EQ(policy_lookup("no_such_call"), POLICY_DEFAULT);
}

TEST(policy_never_list_is_denied_by_default)
{
        /* Every syscall the configuration refuses to add must be one the
         * policy denies on its own (or guards with argument rules). */
        for (const char *const *n = config_never_allowed_syscalls; *n; n++) {
                enum policy_action a = policy_lookup(*n);
                if (a == POLICY_ALLOW || a == POLICY_DEFAULT)
                        test_fail(__FILE__, __LINE__, "%s is never-allowed but policy says %d", *n,
                                  (int)a);
                EXPECT_TRUE(a != POLICY_ALLOW && a != POLICY_DEFAULT);
        }
}

TEST(policy_exec_goes_to_the_supervisor)
{
        EXPECT_INT_EQ(policy_lookup("execve"), POLICY_EXEC);
        EXPECT_INT_EQ(policy_lookup("execveat"), POLICY_EXEC);
        EXPECT_TRUE(policy_is_exec(seccomp_syscall_resolve_name("execve")));
        EXPECT_TRUE(policy_is_exec(seccomp_syscall_resolve_name("execveat")));
        EXPECT_TRUE(!policy_is_exec(seccomp_syscall_resolve_name("fork")));
}

TEST(policy_syscall_name)
{
        char *n = policy_syscall_name(seccomp_syscall_resolve_name("mount"));
        EXPECT_STR_EQ(n, "mount");
        free(n);
        n = policy_syscall_name(99999);
        EXPECT_STR_EQ(n, "#99999");
        free(n);
}

static const struct policy_opts base_opts = {
    .network = false, .self_pid = 0, /* replaced by the child's pid */
};

/* Load the filter in a child and run check(); the child's exit code is the
 * number of failed expectations. The listener is closed, so KILL-class calls
 * return ENOSYS there (no supervisor attached). */
static int in_filtered_child(struct policy_opts o, int (*check)(void))
{
        pid_t pid = fork();
        if (pid == 0) {
                o.self_pid = getpid();
                struct policy_prog p;
                if (policy_build(&o, &p) < 0)
                        _exit(100);
                struct sock_fprog fp = {.len = p.len, .filter = p.insns};
                if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                        _exit(101);
                int l = (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
                                     SECCOMP_FILTER_FLAG_NEW_LISTENER, &fp);
                if (l < 0)
                        _exit(102);
                close(l);
                _exit(check());
        }
        int st;
        waitpid(pid, &st, 0);
        return WIFEXITED(st) ? WEXITSTATUS(st) : 200 + WTERMSIG(st);
}

#define CHECK_ERR(expr, e)                                                                         \
        do {                                                                                       \
                errno = 0;                                                                         \
                long _r = (long)(expr);                                                            \
                if (_r != -1 || errno != (e)) {                                                    \
                        fprintf(stderr, "  %s: got %ld errno %d, want errno %d\n", #expr, _r,      \
                                errno, (e));                                                       \
                        bad++;                                                                     \
                }                                                                                  \
        } while (0)
#define CHECK_OK(expr)                                                                             \
        do {                                                                                       \
                errno = 0;                                                                         \
                long _r = (long)(expr);                                                            \
                if (_r < 0) {                                                                      \
                        fprintf(stderr, "  %s failed: errno %d\n", #expr, errno);                  \
                        bad++;                                                                     \
                }                                                                                  \
        } while (0)

static int check_processes(void)
{
        int bad = 0;
        CHECK_ERR(syscall(SYS_fork), EPERM);
        CHECK_ERR(syscall(SYS_vfork), EPERM);
        CHECK_ERR(syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0), EPERM);
        CHECK_ERR(syscall(SYS_clone3, NULL, 0), ENOSYS);
        char arg0[] = "true";
        char *argv[] = {arg0, NULL};
        /* exec is routed to the supervisor; with none attached the kernel
         * answers ENOSYS, and nothing runs */
        CHECK_ERR(syscall(SYS_execve, "/bin/true", argv, argv + 1), ENOSYS);
        CHECK_ERR(syscall(SYS_execveat, AT_FDCWD, "/bin/true", argv, argv + 1, 0), ENOSYS);
        return bad;
}

TEST(policy_filter_denies_processes_and_exec)
{
        EXPECT_INT_EQ(in_filtered_child(base_opts, check_processes), 0);
}

static int check_threads_and_basics(void);

static int check_spawn_goes_to_supervisor(void)
{
        int bad = 0;
        /* routed to the supervisor, which would kill; none here: ENOSYS */
        CHECK_ERR(syscall(SYS_fork), ENOSYS);
        CHECK_ERR(syscall(SYS_vfork), ENOSYS);
        CHECK_ERR(syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0), ENOSYS);
        return bad;
}

TEST(policy_spawn_kills_routes_process_creation_to_the_supervisor)
{
        struct policy_opts o = base_opts;
        o.spawn_kills = true;
        EXPECT_INT_EQ(in_filtered_child(o, check_spawn_goes_to_supervisor), 0);
        EXPECT_INT_EQ(in_filtered_child(o, check_threads_and_basics), 0);
}

static void *thread_fn(void *arg)
{
        return arg;
}

#include <pthread.h>
static int check_threads_and_basics(void)
{
        int bad = 0;
        pthread_t t;
        if (pthread_create(&t, NULL, thread_fn, NULL) != 0)
                bad++;
        else
                pthread_join(t, NULL);
        CHECK_OK(getpid());
        int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        CHECK_OK(fd);
        close(fd);
        struct rlimit rl;
        CHECK_OK(getrlimit(RLIMIT_NOFILE, &rl));
        CHECK_ERR(prlimit(0, RLIMIT_NOFILE, &rl, NULL), EPERM);
        CHECK_ERR(setrlimit(RLIMIT_NOFILE, &rl), EPERM);
        int sv[2];
        CHECK_OK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv));
        CHECK_ERR(socketpair(AF_INET, SOCK_STREAM, 0, sv), EPERM);
        int n;
        CHECK_OK(ioctl(sv[0], FIONREAD, &n));
        char c = 'x';
        CHECK_ERR(ioctl(0, TIOCSTI, &c), EPERM);
        CHECK_ERR(prctl(PR_SET_SECCOMP, 0, 0, 0, 0), EPERM);
        CHECK_OK(prctl(PR_SET_NAME, "t", 0, 0, 0));
        CHECK_ERR(kill(12345, 0), EPERM);
        CHECK_OK(kill(getpid(), 0));
        /* kill-class: no listener attached here, so ENOSYS */
        CHECK_ERR(syscall(SYS_ptrace, 0, 0, 0, 0), ENOSYS);
        CHECK_ERR(syscall(SYS_io_uring_setup, 1, NULL), ENOSYS);
        CHECK_ERR(syscall(SYS_memfd_create, "x", 0), ENOSYS);
        return bad;
}

TEST(policy_filter_allows_threads_and_basics)
{
        EXPECT_INT_EQ(in_filtered_child(base_opts, check_threads_and_basics), 0);
}

static int check_no_network(void)
{
        int bad = 0;
        CHECK_ERR(socket(AF_INET, SOCK_STREAM, 0), EPERM);
        CHECK_ERR(socket(AF_INET6, SOCK_DGRAM, 0), EPERM);
        CHECK_ERR(socket(AF_UNIX, SOCK_STREAM, 0), EPERM);
        CHECK_ERR(socket(AF_NETLINK, SOCK_RAW, 0), EPERM);
        return bad;
}

TEST(policy_filter_no_network)
{
        EXPECT_INT_EQ(in_filtered_child(base_opts, check_no_network), 0);
}

static int check_network(void)
{
        int bad = 0;
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        CHECK_OK(fd);
        close(fd);
        fd = socket(AF_INET6, SOCK_DGRAM, 0);
        CHECK_OK(fd);
        close(fd);
        CHECK_ERR(socket(AF_UNIX, SOCK_STREAM, 0), EPERM);
        CHECK_ERR(socket(AF_NETLINK, SOCK_RAW, 0), EPERM);
        CHECK_ERR(socket(AF_PACKET, SOCK_RAW, 0), EPERM);
        CHECK_ERR(socket(AF_INET, SOCK_RAW, 1), EPERM);
        CHECK_ERR(listen(0, 1), EPERM);
        /* a refused option stays refused with bits above the 32 the kernel
         * reads in level or optname (optlen 0: the kernel, were it asked,
         * would refuse with EINVAL and change nothing) */
        fd = socket(AF_INET6, SOCK_DGRAM, 0);
        CHECK_ERR(syscall(SYS_setsockopt, fd, (1UL << 32) | IPPROTO_IP, IP_ADD_MEMBERSHIP, NULL, 0),
                  EPERM);
        CHECK_ERR(syscall(SYS_setsockopt, fd, IPPROTO_IPV6, (1UL << 63) | 32 /* FLOWLABEL_MGR */,
                          NULL, 0),
                  EPERM);
        CHECK_ERR(syscall(SYS_setsockopt, fd, IPPROTO_IPV6, 32, NULL, 0), EPERM);
        CHECK_ERR(syscall(SYS_setsockopt, fd, (7UL << 40) | IPPROTO_IPV6, IPV6_V6ONLY, NULL, 0),
                  EINVAL);
        close(fd);
        return bad;
}

TEST(policy_filter_network)
{
        struct policy_opts o = base_opts;
        o.network = true;
        EXPECT_INT_EQ(in_filtered_child(o, check_network), 0);
}

static int check_extra_allows_ptrace_probe(void)
{
        int bad = 0;
        /* personality(0xffffffff) only queries the persona */
        CHECK_OK(syscall(SYS_personality, 0xffffffffUL));
        return bad;
}

TEST(policy_extra_syscalls_add_to_defaults)
{
        struct policy_opts o = base_opts;
        int extra[] = {seccomp_syscall_resolve_name("personality")};
        o.extra = extra;
        o.n_extra = 1;
        EXPECT_INT_EQ(in_filtered_child(o, check_extra_allows_ptrace_probe), 0);
        /* and the defaults still hold */
        EXPECT_INT_EQ(in_filtered_child(o, check_processes), 0);
}

/* The HTTP process's filter, loaded in a forked child: its sockets, a
 * terminal ioctl that could type into a terminal, a call off its list, a
 * thread, then a fork, which kills it. Each step's verdict goes to the
 * parent through a pipe (the child's assertions would die with it). */
static void *thread_ok(void *arg)
{
        return arg;
}

TEST(policy_server_filter_allows_its_calls_and_nothing_else)
{
        struct policy_prog p;
        EXPECT_INT_EQ(policy_build_server(&p), 0);
        int fds[2];
        EXPECT_INT_EQ(pipe(fds), 0);
        pid_t pid = fork();
        if (pid == 0) {
                struct sock_fprog prog = {.len = p.len, .filter = p.insns};
                char v[8] = {0};
                if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
                    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) < 0)
                        _exit(2);
                int s = socket(AF_INET, SOCK_STREAM, 0);
                v[0] = s >= 0;
                v[1] = socket(AF_UNIX, SOCK_STREAM, 0) < 0 && errno == EPERM;
                char c = 'x';
                v[2] = ioctl(0, TIOCSTI, &c) < 0 && errno == EPERM;
                v[3] = syscall(SYS_mknodat, AT_FDCWD, "/nonexistent", 0, 0) < 0 && errno == ENOSYS;
                pthread_t t;
                v[4] = pthread_create(&t, NULL, thread_ok, NULL) == 0 && pthread_join(t, NULL) == 0;
                v[5] =
                    prlimit(0, RLIMIT_NOFILE, &(struct rlimit){64, 64}, NULL) < 0 && errno == EPERM;
                if (write(fds[1], v, sizeof(v)) != sizeof(v))
                        _exit(3);
                fork(); /* killed here */
                _exit(4);
        }
        close(fds[1]);
        char v[8] = {0};
        EXPECT_INT_EQ(read(fds[0], v, sizeof(v)), sizeof(v));
        close(fds[0]);
        int status = 0;
        EXPECT_INT_EQ(waitpid(pid, &status, 0), pid);
        policy_prog_free(&p);
        EXPECT_TRUE(v[0]); /* TCP socket */
        EXPECT_TRUE(v[1]); /* AF_UNIX socket(): EPERM (its channels come from socketpair) */
        EXPECT_TRUE(v[2]); /* TIOCSTI: EPERM */
        EXPECT_TRUE(v[3]); /* off the list: ENOSYS */
        EXPECT_TRUE(v[4]); /* threads */
        EXPECT_TRUE(v[5]); /* setting limits: EPERM */
        EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGSYS);
}
