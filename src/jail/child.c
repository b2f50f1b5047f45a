/* The jailed child, from clone to the program. One ordered table of named
 * steps; each lock is on before the next runs, the syscall filter is the
 * last, and nothing the user controls has entered the process when the
 * program starts (the code waits in a pipe on fd 3). A failing step reports
 * its name and errno on the sync socket and the child exits. A cold child
 * builds its root and execs the interpreter; a warm one, cloned from a
 * zygote inside the root, mounts only its own part and returns. */
#include <errno.h>
#include <fcntl.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/fd.h"
#include "base/util.h"
#include "ipc/channel.h"
#include "jail/jail.h"
#include "jail/landlock.h"

/* Where the sync socket ends up once the fds are arranged (it closes on
 * exec, or after READY; before that it stays wherever clone left it), and
 * where the exit-report pipe goes for runtimes that use one. */
#define SYNC_FD 4
#define REPORT_FD 5

struct child {
        const struct jail_spec *s;
        int listener;
};

static int sync_fd = -1;

static int send_msg(int fd, const struct jail_sync_msg *m, int pass_fd)
{
        return channel_send(fd, m, sizeof(*m), &pass_fd, pass_fd >= 0 ? 1 : 0) < 0 ? -EPIPE : 0;
}

static _Noreturn void fail(const char *step, int error)
{
        struct jail_sync_msg m = {.type = SYNC_FAIL, .error = error};
        strncpy(m.step, step, sizeof(m.step) - 1);
        send_msg(sync_fd, &m, -1);
        _exit(127);
}

static int step_signals(struct child *c)
{
        /* The jailer blocks signals for its signalfd and ignores SIGPIPE;
         * neither may leak into the interpreter. (A zygote's interpreter
         * keeps the handlers it installed, as a fresh one would have.) */
        if (c->s->mode == JAIL_WARM)
                return 0;
        return jail_signals_reset();
}

int jail_signals_reset(void)
{
        sigset_t none;
        sigemptyset(&none);
        for (int sig = 1; sig < NSIG; sig++)
                signal(sig, SIG_DFL);
        return sigprocmask(SIG_SETMASK, &none, NULL) < 0 ? -errno : 0;
}

/* Into the network namespace made for this run, before anything else
 * could open a socket in ours. */
static int step_network(struct child *c)
{
        const struct jail_spec *s = c->s;
        if (s->netns_fd < 0)
                return 0;
        int r = setns(s->netns_fd, CLONE_NEWNET) < 0 ? -errno : 0;
        close(s->netns_fd);
        return r;
}

static int step_close_inherited(struct child *c)
{
        /* A clone holds a copy of every fd of its parent, other runs' pipe
         * ends among them; a copy of a code pipe's write end would keep that
         * run's program from seeing the end of its code. Drop them first. */
        const struct jail_spec *s = c->s;
        int keep[] = {s->code_fd,   s->stdout_fd,       s->stderr_fd,       sync_fd,
                      s->report_fd, s->cgroup_procs[0], s->cgroup_procs[1], s->cgroup_dirfd,
                      s->deps_fd};
        fd_close_all_except(3, keep, ELEMENTSOF(keep));
        return 0;
}

static int step_cgroup_attach(struct child *c)
{
        /* cgroup v1: the child moves itself, so the supervisor never waits
         * for the migration (an RCU grace period, up to ~15 ms here). v2
         * runs were cloned straight into their group. */
        for (int i = 0; i < 2; i++)
                if (c->s->cgroup_procs[i] >= 0 && write(c->s->cgroup_procs[i], "0", 1) != 1)
                        return -errno;
        return 0;
}

static int step_cgroup_ns(struct child *c)
{
        /* After the attach, so the run's own group becomes its cgroup root. */
        return unshare(CLONE_NEWCGROUP) < 0 ? -errno : 0;
}

static int step_mounts(struct child *c)
{
        int r = c->s->mode == JAIL_COLD ? jail_mounts_setup(c->s) : jail_run_mounts("", c->s);
        if (r == 0 && chdir("/tmp") < 0)
                r = -errno;
        return r;
}

/* A session (and process group) of its own: kill(0, sig) and friends
 * would otherwise reach the daemon's group, other runs among it. */
static int step_session(struct child *c)
{
        return setsid() < 0 ? -errno : 0;
}

static int step_hostname(struct child *c)
{
        return sethostname(c->s->hostname, strlen(c->s->hostname)) < 0 ? -errno : 0;
}

/* A copy of fd numbered above the ones we place, so no dup2 can hit it. */
static int fresh(int fd, int *ret)
{
        if (fd < 0) {
                *ret = -1;
                return 0;
        }
        int n = fcntl(fd, F_DUPFD_CLOEXEC, REPORT_FD + 1);
        if (n < 0)
                return -errno;
        *ret = n;
        return 0;
}

static int step_fds(struct child *c)
{
        const struct jail_spec *s = c->s;
        int code = -1, out = -1, err = -1, sync = -1, report = -1, r;
        if ((r = fresh(s->code_fd, &code)) < 0 || (r = fresh(s->stdout_fd, &out)) < 0 ||
            (r = fresh(s->stderr_fd, &err)) < 0 || (r = fresh(sync_fd, &sync)) < 0 ||
            (r = fresh(s->report_fd, &report)) < 0)
                return r;
        int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (null < 0)
                return -errno;
        if (dup2(null, 0) < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0 || dup2(code, 3) < 0 ||
            dup3(sync, SYNC_FD, O_CLOEXEC) < 0)
                return -errno;
        sync_fd = SYNC_FD;
        if (report >= 0 && dup2(report, REPORT_FD) < 0)
                return -errno;
        /* Everything else goes: only 0-3, the sync socket and the report
         * pipe stay. */
        fd_close_from(report >= 0 ? REPORT_FD + 1 : SYNC_FD + 1);
        return 0;
}

static int step_rlimits(struct child *c)
{
        return jail_rlimits_apply(&c->s->limits);
}

static int step_identity(struct child *c)
{
        return jail_identity_drop(c->s->uid, c->s->gid);
}

/* Landlock scopes (ABI 6, Linux 6.12), defence in depth behind the
 * session and the socket rules: the run can neither signal a process nor
 * reach an abstract unix socket outside its own domain (the host's, other
 * runs'). No rules, so nothing else changes. Skipped where the kernel
 * lacks them. */
static int step_landlock(struct child *c)
{
        return landlock_scope_self();
}

static int step_seccomp(struct child *c)
{
        int fd = policy_load(c->s->filter);
        if (fd < 0)
                return fd;
        c->listener = fd;
        return 0;
}

static int step_hand_listener(struct child *c)
{
        struct jail_sync_msg m = {.type = SYNC_LISTENER};
        int r = send_msg(sync_fd, &m, c->listener);
        close(c->listener);
        return r;
}

static const struct step {
        const char *name;
        int (*run)(struct child *c);
} steps[] = {
    {"signals", step_signals},
    {"network", step_network},
    {"close-inherited", step_close_inherited},
    {"cgroup-attach", step_cgroup_attach},
    {"cgroup-namespace", step_cgroup_ns},
    {"mounts", step_mounts},
    {"session", step_session},
    {"hostname", step_hostname},
    {"fds", step_fds},
    {"rlimits", step_rlimits},
    {"identity", step_identity},
    {"landlock", step_landlock},
    {"seccomp", step_seccomp},
    {"hand-listener", step_hand_listener},
};

int jail_child_main(const struct jail_spec *s)
{
        struct child c = {.s = s, .listener = -1};
        sync_fd = s->sync_fd;
        for (size_t i = 0; i < ELEMENTSOF(steps); i++) {
                int r = steps[i].run(&c);
                if (r < 0)
                        fail(steps[i].name, -r);
        }
        if (s->mode == JAIL_WARM) {
                struct jail_sync_msg m = {.type = SYNC_READY};
                if (send_msg(sync_fd, &m, -1) < 0)
                        _exit(127);
                close(sync_fd);
                return 0;
        }
        /* The filter holds this exec until the supervisor, which has seen
         * the listener arrive, lets this first and only one through. */
        execve(s->exec_path, s->argv, s->envp);
        fail("exec", errno);
}
