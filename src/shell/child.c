/* A shell job's first process, from clone (in the binding's namespaces and
 * a mount namespace of its own) to the script: one ordered table of named
 * steps, as a run's (src/jail/child.c), with what a shell needs instead of
 * an interpreter's: its own view of the filesystem, a pseudo-terminal from
 * its own devpts instance, exec allowed by its filter. A failing step
 * reports its name and errno to the keeper, and the process exits. */
#include <errno.h>
#include <fcntl.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <termios.h>
#include <unistd.h>

#include "base/fd.h"
#include "base/util.h"
#include "ipc/channel.h"
#include "jail/landlock.h"
#include "shell/internal.h"

struct child {
        const struct job_spec *s;
        int sync, out, err; /* stdio: the pipes' write ends; pty: -1 */
        int slave;          /* pty: the terminal's slave */
        int listener;
};

static int send_sync(int sync, uint32_t type, int error, const char *step, int fd)
{
        struct job_sync_msg m = {.type = type, .error = error};
        if (step)
                strncpy(m.step, step, sizeof(m.step) - 1);
        return channel_send(sync, &m, sizeof(m), &fd, fd >= 0 ? 1 : 0) < 0 ? -EPIPE : 0;
}

static int step_signals(struct child *c)
{
        return jail_signals_reset();
}

static int step_close_inherited(struct child *c)
{
        const struct job_spec *s = c->s;
        int keep[8 + 8] = {c->sync,
                           c->out,
                           c->err,
                           s->cgroup_procs[0],
                           s->cgroup_procs[1],
                           s->cgroup_cpu_procs,
                           s->cgroup_dirfd,
                           s->view.file_fd};
        size_t n = 8;
        for (size_t i = 0; i < s->view.n_rw && n < ELEMENTSOF(keep); i++)
                keep[n++] = s->view.rw[i].fd;
        fd_close_all_except(3, keep, n);
        return 0;
}

static int step_cgroup(struct child *c)
{
        for (int i = 0; i < 2; i++)
                if (c->s->cgroup_procs[i] >= 0 && write(c->s->cgroup_procs[i], "0", 1) != 1)
                        return -errno;
        if (c->s->cgroup_cpu_procs >= 0 && write(c->s->cgroup_cpu_procs, "0", 1) != 1)
                return -errno;
        /* after the attach, so the job's own group is its cgroup root */
        return unshare(CLONE_NEWCGROUP) < 0 ? -errno : 0;
}

static int step_mounts(struct child *c)
{
        return jail_view_enter(&c->s->view);
}

/* A session of its own: the terminal's, or (stdio) one that a signal to
 * the group reaches whole. */
static int step_session(struct child *c)
{
        return setsid() < 0 ? -errno : 0;
}

/* The terminal: a pair from the job's devpts instance; the slave becomes
 * the controlling terminal of the session, owned by the job's UID so
 * programs that reopen it by name (ssh, script) can; the master goes to
 * the keeper, which reads what the job prints and types what it is sent. */
static int step_pty(struct child *c)
{
        const struct job_spec *s = c->s;
        if (s->mode != SHELL_MODE_PTY)
                return 0;
        _cleanup_close_ int master = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC);
        if (master < 0)
                return -errno;
        int unlock = 0;
        if (ioctl(master, TIOCSPTLCK, &unlock) < 0)
                return -errno;
        int slave = ioctl(master, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
        if (slave < 0)
                return -errno;
        c->slave = slave;
        struct winsize ws = {.ws_row = (unsigned short)s->rows, .ws_col = (unsigned short)s->cols};
        if (ioctl(slave, TIOCSWINSZ, &ws) < 0 || ioctl(slave, TIOCSCTTY, 0) < 0 ||
            fchown(slave, s->view.uid, s->view.gid) < 0)
                return -errno;
        return send_sync(c->sync, JOB_SYNC_PTY, 0, NULL, master);
}

static int step_fds(struct child *c)
{
        const struct job_spec *s = c->s;
        int in = c->slave, out = c->slave, err = c->slave;
        _cleanup_close_ int null = -1;
        if (s->mode == SHELL_MODE_STDIO) {
                if ((null = open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0)
                        return -errno;
                in = null;
                out = c->out;
                err = c->err;
        }
        int sync = fcntl(c->sync, F_DUPFD_CLOEXEC, 4);
        if (sync < 0 || dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0)
                return -errno;
        null = safe_close(null); /* it may be fd 3, the sync socket's place */
        if (dup3(sync, 3, O_CLOEXEC) < 0)
                return -errno;
        c->sync = 3;
        fd_close_from(4);
        return 0;
}

static int step_rlimits(struct child *c)
{
        const struct {
                int resource;
                rlim_t value;
        } table[] = {
            {RLIMIT_NOFILE, c->s->nofile}, {RLIMIT_CORE, 0},   {RLIMIT_MEMLOCK, 64 << 10},
            {RLIMIT_MSGQUEUE, 0},          {RLIMIT_RTPRIO, 0}, {RLIMIT_NICE, 0},
        };
        for (size_t i = 0; i < ELEMENTSOF(table); i++) {
                struct rlimit rl = {.rlim_cur = table[i].value, .rlim_max = table[i].value};
                if (setrlimit(table[i].resource, &rl) < 0)
                        return -errno;
        }
        return 0;
}

static int step_identity(struct child *c)
{
        return jail_identity_drop(c->s->view.uid, c->s->view.gid);
}

static int step_landlock(struct child *c)
{
        const struct job_spec *s = c->s;
        /* no scopes: the jobs of one binding signal each other's
         * processes (its PID namespace bounds whom) */
        int r = s->ll_on ? landlock_restrict_paths(s->ll_rw, s->n_ll_rw, s->ll_ro, s->n_ll_ro,
                                                   s->ll_dev, s->n_ll_dev, false)
                         : 0;
        return r == -EOPNOTSUPP ? 0 : r;
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
        int r = send_sync(c->sync, SYNC_LISTENER, 0, NULL, c->listener);
        close(c->listener);
        return r;
}

static const struct step {
        const char *name;
        int (*run)(struct child *c);
} steps[] = {
    {"signals", step_signals},   {"close-inherited", step_close_inherited},
    {"cgroup", step_cgroup},     {"mounts", step_mounts},
    {"session", step_session},   {"pty", step_pty},
    {"fds", step_fds},           {"rlimits", step_rlimits},
    {"identity", step_identity}, {"landlock", step_landlock},
    {"seccomp", step_seccomp},   {"hand-listener", step_hand_listener},
};

_Noreturn void job_child_main(const struct job_spec *s, int sync, int out, int err)
{
        struct child c = {
            .s = s, .sync = sync, .out = out, .err = err, .slave = -1, .listener = -1};
        for (size_t i = 0; i < ELEMENTSOF(steps); i++) {
                int r = steps[i].run(&c);
                if (r < 0) {
                        send_sync(c.sync, SYNC_FAIL, -r, steps[i].name, -1);
                        _exit(127);
                }
        }
        execve(s->exec_path, s->argv, s->envp);
        send_sync(c.sync, SYNC_FAIL, errno, "exec", -1);
        _exit(126);
}
