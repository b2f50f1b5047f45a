/* A shell job's first process, from clone (in the binding's namespaces and
 * a mount namespace of its own) to the script: one ordered table of named
 * steps, as a run's (src/jail/child.c), with what a shell needs instead of
 * an interpreter's: its own view of the filesystem, a pseudo-terminal from
 * its own devpts instance, exec allowed by its filter. A failing step
 * reports its name and errno to the keeper, and the process exits. */
#include <errno.h>
#include <fcntl.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
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
        int ruleset;          /* Landlock's, made before the go */
        struct job_spec go;   /* a spare's: its spec, completed at KEEPER_GO */
        char *argv[3];        /* a spare's: the script's command line */
        const char *sh_argv0; /* "sh" */
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

/* What needs no knowledge of the job is done before the go (a spare
 * waits after it): the capability bounding set emptied (root keeps its
 * effective set until the identity step) and Landlock's rules made from
 * the view, applied at the landlock step. */
static int step_prepare(struct child *c)
{
        const struct job_spec *s = c->s;
        int r = jail_bounding_drop();
        if (r < 0 || !s->ll_on)
                return r;
        /* no scopes: the jobs of one binding signal each other's
         * processes (its PID namespace bounds whom) */
        r = landlock_paths_ruleset(s->ll_rw, s->n_ll_rw, s->ll_ro, s->n_ll_ro, s->ll_dev,
                                   s->n_ll_dev, false);
        if (r >= 0)
                c->ruleset = r;
        return r == -EOPNOTSUPP || r >= 0 ? 0 : r;
}

/* A spare's job arrives: its mode, terminal size, environment and cwd
 * from the keeper (the jailer's sealed memfd, read whole here), and for a
 * stdio job the pipes' write ends. Until then the process waits in its
 * mount view, root, seen by the binding's jobs but not theirs to signal;
 * the keeper's death ends it. A job made cold has all this already. */
static int step_go(struct child *c)
{
        if (!c->s->spare)
                return 0;
        if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
                return -errno;
        if (getppid() == 1)
                _exit(0); /* the keeper is gone already: the binding's init took it */
        struct job_sync_msg m;
        int fds[3] = {-1, -1, -1};
        size_t nf = 0;
        int r;
        do {
                struct pollfd p = {.fd = c->sync, .events = POLLIN};
                if (RETRY_EINTR(poll(&p, 1, -1)) < 0)
                        return -errno;
                r = channel_recv(c->sync, &m, sizeof(m), fds, 3, &nf);
        } while (r == -EAGAIN);
        if (r <= 0)
                _exit(0); /* the spare was dropped */
        if (m.type != JOB_SYNC_GO || nf < 1)
                return -EPROTO;
        _cleanup_close_ int memfd = fds[0];
        c->out = nf == 3 ? fds[1] : -1;
        c->err = nf == 3 ? fds[2] : -1;
        struct stat st;
        if (fstat(memfd, &st) < 0)
                return -errno;
        if (st.st_size < (off_t)sizeof(struct job_go) || st.st_size > JOB_GO_MAX)
                return -EPROTO;
        size_t size = (size_t)st.st_size;
        const char *p = mmap(NULL, size, PROT_READ, MAP_PRIVATE, memfd, 0);
        if (p == MAP_FAILED)
                return -errno;
        struct job_go h;
        memcpy(&h, p, sizeof(h));
        const char *cwd = p + sizeof(h), *env = cwd + h.cwd_len;
        if (h.cwd_len < 2 || h.cwd_len > size - sizeof(h) ||
            h.env_len != size - sizeof(h) - h.cwd_len || cwd[h.cwd_len - 1] != '\0' ||
            (h.env_len && env[h.env_len - 1] != '\0') || h.n_env > h.env_len ||
            (h.mode != SHELL_MODE_PTY && h.mode != SHELL_MODE_STDIO) ||
            (h.mode == SHELL_MODE_STDIO) != (nf == 3))
                return -EPROTO;
        char **envp = calloc((size_t)h.n_env + 1, sizeof(char *));
        if (!envp)
                return -ENOMEM;
        for (size_t i = 0, off = 0; i < h.n_env; i++) {
                if (off >= h.env_len)
                        return -EPROTO;
                envp[i] = (char *)env + off;
                off += strlen(env + off) + 1;
        }
        c->go = *c->s;
        c->go.mode = (enum shell_mode)h.mode;
        c->go.cols = h.cols;
        c->go.rows = h.rows;
        c->go.envp = envp;
        c->argv[0] = h.shebang ? (char *)c->s->view.file_path : (char *)c->sh_argv0;
        c->argv[1] = h.shebang ? NULL : (char *)c->s->view.file_path;
        c->argv[2] = NULL;
        c->go.argv = c->argv;
        c->go.exec_path = h.shebang ? c->s->view.file_path : "/bin/sh";
        c->s = &c->go;
        return jail_view_chdir(cwd);
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
        int sync = fcntl(c->sync, F_DUPFD_CLOEXEC, 5);
        int ruleset = c->ruleset < 0 ? -1 : fcntl(c->ruleset, F_DUPFD_CLOEXEC, 5);
        if (sync < 0 || (c->ruleset >= 0 && ruleset < 0) || dup2(in, 0) < 0 || dup2(out, 1) < 0 ||
            dup2(err, 2) < 0)
                return -errno;
        null = safe_close(null); /* it may be fd 3, the sync socket's place */
        if (dup3(sync, 3, O_CLOEXEC) < 0 || (ruleset >= 0 && dup3(ruleset, 4, O_CLOEXEC) < 0))
                return -errno;
        c->sync = 3;
        c->ruleset = ruleset >= 0 ? 4 : -1;
        fd_close_from(5);
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
        if (c->ruleset < 0)
                return 0; /* off, or no Landlock in this kernel */
        int r = syscall(SYS_landlock_restrict_self, c->ruleset, 0) < 0 ? -errno : 0;
        c->ruleset = safe_close(c->ruleset);
        return r;
}

static int step_seccomp(struct child *c)
{
        int fd = policy_load(c->s->filter);
        if (fd < 0)
                return fd;
        c->listener = fd;
        return 0;
}

/* The keeper holds the job's mount namespace too, so its end (dozens of
 * mounts taken down) comes after the exit has been told, not before. */
static int step_hand_listener(struct child *c)
{
        int ns = open("/proc/self/ns/mnt", O_RDONLY | O_CLOEXEC);
        if (ns >= 0) {
                send_sync(c->sync, JOB_SYNC_MNTNS, 0, NULL, ns);
                close(ns);
        }
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
    {"prepare", step_prepare},   {"go", step_go},
    {"session", step_session},   {"pty", step_pty},
    {"fds", step_fds},           {"rlimits", step_rlimits},
    {"identity", step_identity}, {"landlock", step_landlock},
    {"seccomp", step_seccomp},   {"hand-listener", step_hand_listener},
};

_Noreturn void job_child_main(const struct job_spec *s, int sync, int out, int err)
{
        struct child c = {.s = s,
                          .sync = sync,
                          .out = out,
                          .err = err,
                          .slave = -1,
                          .listener = -1,
                          .ruleset = -1,
                          .sh_argv0 = "sh"};
        for (size_t i = 0; i < ELEMENTSOF(steps); i++) {
                int r = steps[i].run(&c);
                if (r < 0) {
                        send_sync(c.sync, SYNC_FAIL, -r, steps[i].name, -1);
                        _exit(127);
                }
        }
        execve(c.s->exec_path, c.s->argv, c.s->envp);
        send_sync(c.sync, SYNC_FAIL, errno, "exec", -1);
        _exit(126);
}
