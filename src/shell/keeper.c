/* A job's keeper: forked by the jailer for one job, it clones the job's
 * first process into the binding's namespaces (child.c), then gives up
 * root and keeps the job: it holds the terminal's master (or the stdio
 * pipes), writes what the job prints to output.log (a terminal's output
 * made plain text by sanitize.c), types the input the jailer sends,
 * answers the job's forbidden system calls with EPERM while telling the
 * jailer, and reports the exit once every byte is written. It never opens
 * a file after its start: Landlock leaves it none.
 *
 * It outlives the jailer: when lockboxd stops or dies the job goes on,
 * and the next lockboxd connects to the socket the keeper listens on
 * (jobs/<id>/keeper.sock in the root-only state directory; a connection
 * is taken only from root). A keeper whose job has ended stays until a
 * jailer has acknowledged the exit, so no exit code is lost while
 * lockboxd is down. */
#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/file.h"
#include "base/strbuf.h"
#include "base/util.h"
#include "ipc/channel.h"
#include "jail/landlock.h"
#include "shell/internal.h"
#include "shell/sanitize.h"

/* How long the terminal must stay quiet before a partial line (a prompt)
 * is written, and how long, once the job's first process has ended, the
 * keeper waits for the last bytes a background process may still hold. */
#define PARTIAL_FLUSH_MS 300
#define DRAIN_QUIET_MS 20
#define DRAIN_MAX_MS 500 /* a background process that never stops printing */
#define INPUT_MAX (1 << 20)

struct keeper {
        const struct job_spec *s;
        pid_t pid;
        int pidfd, master, out_r, err_r, listener, mntns;
        int sync; /* to the first process until its exec, or -1 */
        int sock; /* to the jailer, -1 while none is connected */
        struct sanitizer *san;
        int64_t written;     /* bytes in output.log */
        int64_t err_written; /* bytes in stderr.log */
        bool capped;         /* max_output reached: the rest is dropped */
        bool partial;        /* the sanitiser may hold a partial line */
        struct strbuf input; /* typed text not yet taken by the terminal */
        bool exited;
        int code;
        int untold_nr; /* a forbidden call no jailer heard of (it was down), or -1 */
};

static bool tell(const struct keeper *k, const struct keeper_msg *m)
{
        /* the jailer may be gone (it restarts): the job goes on */
        return k->sock >= 0 && channel_send(k->sock, m, sizeof(*m), NULL, 0) == 0;
}

/* A jailer connects (a lockboxd started after the one that made the job):
 * taken only from root, it replaces the old connection and hears who the
 * job is (and how it ended, if it has). */
static void on_connect(struct keeper *k)
{
        int fd = accept4(k->s->listen_fd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0)
                return;
        struct ucred cred;
        socklen_t len = sizeof(cred);
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 || cred.uid != 0) {
                close(fd);
                return;
        }
        safe_close(k->sock);
        k->sock = fd;
        struct keeper_msg m = {.type = KEEPER_HELLO, .pid = k->pid};
        channel_send(k->sock, &m, sizeof(m), &k->pidfd, 1);
        /* a forbidden call made while lockboxd was down ends the job now */
        m = (struct keeper_msg){.type = KEEPER_VIOLATION, .nr = k->untold_nr, .pid = k->pid};
        if (k->untold_nr >= 0 && tell(k, &m))
                k->untold_nr = -1;
}

static _Noreturn void fail(const struct job_spec *s, const char *step, int error)
{
        struct keeper_msg m = {.type = KEEPER_FAILED, .error = error};
        strncpy(m.step, step, sizeof(m.step) - 1);
        channel_send(s->sock, &m, sizeof(m), NULL, 0);
        _exit(1);
}

/* A failed start (or a spare's end before its job): the first process is
 * killed and reaped here before the keeper goes. A process of the binding's PID namespace whose
 * parent dies unreaped goes to the reaper of the parent's namespace (the host's init), and the
 * binding's init cannot end until that one reaps it. */
static _Noreturn void child_end(struct keeper *k, const char *step, int error)
{
        /* a spare's process, root until its go, cannot be signalled from
         * here: the end of its socket ends it */
        k->sync = safe_close(k->sync);
        syscall(SYS_pidfd_send_signal, k->pidfd, SIGKILL, NULL, 0);
        siginfo_t si;
        waitid(P_PIDFD, (id_t)k->pidfd, &si, WEXITED);
        if (step)
                fail(k->s, step, error);
        _exit(0);
}

/* Append to output.log up to max_output; the rest is dropped, with one
 * notice on a terminal (stdio output stays byte-exact). */
static void emit(struct keeper *k, const char *p, size_t n)
{
        if (k->capped || n == 0)
                return;
        size_t room = (size_t)(k->s->max_output - k->written);
        if (n > room) {
                n = room;
                k->capped = true;
        }
        if (file_write_all(k->s->out_fd, p, n) == 0)
                k->written += (int64_t)n;
        if (k->capped && k->s->mode == SHELL_MODE_PTY) {
                static const char note[] = "\n[lockbox] output limit reached: the rest of this "
                                           "job's output is dropped\n";
                if (file_write_all(k->s->out_fd, note, sizeof(note) - 1) == 0)
                        k->written += (int64_t)sizeof(note) - 1;
        }
}

static void emit_sanitized(struct keeper *k, struct strbuf *sb)
{
        emit(k, sb->data, sb->len);
        sb->len = 0;
}

/* Read what the terminal (or a pipe) has. 1: read some, 0: nothing now,
 * -1: closed (EOF, or EIO once no process holds the terminal). */
static int pump(struct keeper *k, int fd, bool to_stderr)
{
        char buf[65536];
        ssize_t n = read(fd, buf, sizeof(buf));
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return 0;
        if (n <= 0)
                return -1;
        if (to_stderr) {
                /* private, but on the state directory's disk: bounded too */
                size_t room = (size_t)(k->s->max_output - k->err_written);
                size_t take = (size_t)n < room ? (size_t)n : room;
                if (take && file_write_all(k->s->err_fd, buf, take) == 0)
                        k->err_written += (int64_t)take;
        } else if (k->san) {
                struct strbuf sb;
                strbuf_init(&sb, 0);
                sanitizer_feed(k->san, buf, (size_t)n, &sb);
                emit_sanitized(k, &sb);
                strbuf_free(&sb);
                k->partial = true;
        } else {
                emit(k, buf, (size_t)n);
        }
        return 1;
}

static void flush_partial(struct keeper *k, bool finish)
{
        if (!k->san)
                return;
        struct strbuf sb;
        strbuf_init(&sb, 0);
        if (finish)
                sanitizer_finish(k->san, &sb);
        else
                sanitizer_flush_partial(k->san, &sb);
        emit_sanitized(k, &sb);
        strbuf_free(&sb);
        k->partial = false;
}

/* Typed text, as a terminal paste does it: each LF becomes CR (the line
 * discipline's ICRNL turns it back for a reader in canonical mode). Only
 * a sealed memfd is mapped: one its sender could still shrink would turn
 * a read of the mapping into SIGBUS, the keeper's end. */
static void queue_input(struct keeper *k, int memfd)
{
        struct stat st;
        int seals = fcntl(memfd, F_GET_SEALS);
        if (fstat(memfd, &st) < 0 || st.st_size <= 0 || st.st_size > INPUT_MAX ||
            k->input.len + (size_t)st.st_size > INPUT_MAX || seals < 0 || !(seals & F_SEAL_SHRINK))
                return;
        char *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, memfd, 0);
        if (p == MAP_FAILED)
                return;
        /* the call's blob (ipc/shell_proto.h): its one text record */
        size_t pos = 0;
        struct shell_blob_item it;
        while (shell_blob_next(p, (size_t)st.st_size, &pos, &it) == 1)
                for (uint32_t i = 0; it.tag == SHELL_BLOB_TEXT && i < it.len; i++) {
                        char ch = it.data[i] == '\n' ? '\r' : it.data[i];
                        strbuf_append(&k->input, &ch, 1);
                }
        munmap(p, (size_t)st.st_size);
}

static void push_input(struct keeper *k)
{
        if (k->master < 0 || k->input.len == 0)
                return;
        ssize_t n = write(k->master, k->input.data, k->input.len);
        if (n > 0) {
                memmove(k->input.data, k->input.data + n, k->input.len - (size_t)n);
                k->input.len -= (size_t)n;
        }
}

static void on_jailer(struct keeper *k)
{
        struct keeper_msg m;
        int fd = -1;
        size_t nf = 0;
        int r = channel_recv(k->sock, &m, sizeof(m), &fd, 1, &nf);
        if (r <= 0) {
                if (r != -EAGAIN) /* gone: the next one connects */
                        k->sock = safe_close(k->sock);
                return;
        }
        if (m.type == KEEPER_INPUT && nf == 1)
                queue_input(k, fd);
        else if (m.type == KEEPER_INTERRUPT && k->master >= 0)
                strbuf_append(&k->input, "\x03", 1);
        else if (m.type == KEEPER_INTERRUPT && !k->exited)
                /* stdio, on a kernel where the jailer cannot signal a group
                 * by pidfd (jobs.c): the job's first process leads its
                 * group, and until the keeper reaps it its number cannot
                 * name another group */
                kill(-k->pid, SIGINT);
        if (nf == 1)
                close(fd);
        push_input(k);
}

/* A forbidden call: refused here (EPERM), named to the jailer, which ends
 * the job. If the keeper is gone the kernel answers ENOSYS: still refused. */
static void on_violation(struct keeper *k)
{
        struct seccomp_notif *req;
        struct seccomp_notif_resp *resp;
        if (seccomp_notify_alloc(&req, &resp) < 0)
                return;
        memset(req, 0, sizeof(*req));
        if (seccomp_notify_receive(k->listener, req) == 0) {
                resp->id = req->id;
                resp->error = -EPERM;
                resp->flags = 0;
                seccomp_notify_respond(k->listener, resp);
                struct keeper_msg m = {
                    .type = KEEPER_VIOLATION, .nr = req->data.nr, .pid = (int32_t)req->pid};
                if (!tell(k, &m) && k->untold_nr < 0)
                        k->untold_nr = req->data.nr; /* for the next jailer */
        }
        seccomp_notify_free(req, resp);
}

static void on_exit_status(struct keeper *k)
{
        siginfo_t si = {0};
        if (waitid(P_PIDFD, (id_t)k->pidfd, &si, WEXITED | WNOHANG) < 0 || si.si_pid == 0)
                return;
        k->exited = true;
        k->code = si.si_code == CLD_EXITED ? si.si_status : 128 + si.si_status;
}

/* The job's first process, cloned into the binding's PID namespace and a
 * mount namespace of its own (and on cgroup v2 straight into its group). */
static int start_child(struct keeper *k, int *ret_sync)
{
        const struct job_spec *s = k->s;
        int out[2] = {-1, -1}, err[2] = {-1, -1}, sync[2];
        if (!s->spare && s->mode == SHELL_MODE_STDIO &&
            (pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0))
                return -errno;
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sync) < 0)
                return -errno;
        int pidfd = -1;
        struct clone_args args = {
            .flags = CLONE_NEWNS | CLONE_PIDFD,
            .pidfd = (uint64_t)(uintptr_t)&pidfd,
            .exit_signal = SIGCHLD,
        };
        if (s->cgroup_dirfd >= 0) {
                args.flags |= CLONE_INTO_CGROUP;
                args.cgroup = (uint64_t)s->cgroup_dirfd;
        }
        pid_t pid = (pid_t)syscall(SYS_clone3, &args, sizeof(args));
        if (pid < 0)
                return -errno;
        if (pid == 0) {
                close(sync[0]);
                job_child_main(s, sync[1], out[1], err[1]);
        }
        close(sync[1]);
        safe_close(out[1]);
        safe_close(err[1]);
        k->pid = pid;
        k->pidfd = pidfd;
        k->out_r = out[0];
        k->err_r = err[0];
        *ret_sync = sync[0];
        return 0;
}

/* Follow the child's lock sequence: the terminal's master, the listener,
 * then EOF (its exec closed the sync socket) or a failing step. */
static void await_child(struct keeper *k, int sync)
{
        for (;;) {
                struct job_sync_msg m;
                int fd = -1;
                struct pollfd p = {.fd = sync, .events = POLLIN};
                if (RETRY_EINTR(poll(&p, 1, -1)) < 0)
                        child_end(k, "sync", errno);
                int r = jail_sync_recv(sync, (struct jail_sync_msg *)&m, &fd);
                if (r < 0)
                        child_end(k, "sync", -r);
                if (r == 0)
                        break;
                if (m.type == SYNC_FAIL)
                        child_end(k, m.step, m.error);
                if (m.type == JOB_SYNC_PTY && fd >= 0 && k->master < 0)
                        k->master = fd;
                else if (m.type == JOB_SYNC_MNTNS && fd >= 0 && k->mntns < 0)
                        k->mntns = fd; /* closed at the keeper's exit */
                else if (m.type == SYNC_LISTENER && fd >= 0 && k->listener < 0)
                        k->listener = fd;
                else
                        safe_close(fd);
        }
        k->sync = safe_close(sync);
        if (k->listener < 0 || (k->s->mode == SHELL_MODE_PTY && k->master < 0))
                child_end(k, "exec", ECHILD);
}

/* A spare's keeper waits for its job: KEEPER_GO from the jailer (the
 * job's struct job_go memfd), passed on to the first process with the
 * stdio pipes' write ends; a dropped spare (the jailer's end closed) or a
 * first process that failed ends it. Then it is the job's keeper, kept
 * like any other past lockboxd's end. */
static void wait_go(struct keeper *k, struct job_spec *mine, int sync)
{
        int memfd = -1;
        while (memfd < 0) {
                struct pollfd p[2] = {{.fd = k->sock, .events = POLLIN},
                                      {.fd = sync, .events = POLLIN}};
                if (RETRY_EINTR(poll(p, 2, -1)) < 0)
                        child_end(k, "spare", errno);
                if (p[1].revents) {
                        struct job_sync_msg m;
                        int fd = -1;
                        int r = jail_sync_recv(sync, (struct jail_sync_msg *)&m, &fd);
                        safe_close(fd);
                        child_end(k, r > 0 && m.type == SYNC_FAIL ? m.step : "spare",
                                  r > 0 && m.type == SYNC_FAIL ? m.error : ECHILD);
                }
                if (!p[0].revents)
                        continue;
                struct keeper_msg in;
                size_t nf = 0;
                int r = channel_recv(k->sock, &in, sizeof(in), &memfd, 1, &nf);
                if (r == 0 || (r < 0 && r != -EAGAIN))
                        child_end(k, NULL, 0); /* dropped */
                if (nf == 1 && (r < 0 || in.type != KEEPER_GO))
                        memfd = safe_close(memfd);
        }
        struct job_go h;
        if (pread(memfd, &h, sizeof(h), 0) != (ssize_t)sizeof(h) ||
            (h.mode != SHELL_MODE_PTY && h.mode != SHELL_MODE_STDIO))
                child_end(k, "go", EPROTO);
        /* the job's now: it outlives lockboxd */
        prctl(PR_SET_PDEATHSIG, 0, 0, 0, 0);
        prctl(PR_SET_NAME, "lockbox-keeper", 0, 0, 0);
        mine->mode = (enum shell_mode)h.mode;
        mine->cols = h.cols;
        mine->rows = h.rows;
        int fds[3] = {memfd, -1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1};
        size_t nf = 1;
        if (mine->mode == SHELL_MODE_PTY && sanitizer_new(&k->san) < 0)
                child_end(k, "keeper-sanitizer", ENOMEM);
        if (mine->mode == SHELL_MODE_STDIO) {
                if (pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0)
                        child_end(k, "keeper-pipes", errno);
                fds[1] = out[1];
                fds[2] = err[1];
                nf = 3;
        }
        struct job_sync_msg m = {.type = JOB_SYNC_GO};
        if (channel_send(sync, &m, sizeof(m), fds, nf) < 0)
                child_end(k, "go", EPIPE);
        close(memfd);
        safe_close(out[1]);
        safe_close(err[1]);
        k->out_r = out[0];
        k->err_r = err[0];
}

/* Root is needed no more: the job's UID, no capabilities, not dumpable,
 * and no file access at all. */
static void give_up_root(const struct job_spec *s)
{
        int r = jail_identity_drop(s->view.uid, s->view.gid);
        /* not dumpable; and it outlives lockboxd: the drop's death signal
         * is taken back */
        if (r == 0 &&
            (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0 || prctl(PR_SET_PDEATHSIG, 0, 0, 0, 0) < 0))
                r = -errno;
        if (r == 0) {
                r = landlock_confine(NULL, 0, NULL, 0);
                if (r == -EOPNOTSUPP)
                        r = 0;
        }
        if (r < 0)
                fail(s, "keeper-identity", -r);
}

static void loop(struct keeper *k)
{
        bool out_open = true, err_open = k->err_r >= 0, lis_open = true;
        int64_t quiet_since = -1, exited_at = -1;
        for (;;) {
                struct pollfd p[7];
                int n = 0, i_out = -1, i_err = -1, i_pid = -1, i_lis = -1, i_sock = -1, i_con;
                int src = k->master >= 0 ? k->master : k->out_r;
                if (out_open) {
                        i_out = n;
                        p[n++] = (struct pollfd){.fd = src,
                                                 .events = POLLIN | (k->input.len ? POLLOUT : 0)};
                }
                if (err_open) {
                        i_err = n;
                        p[n++] = (struct pollfd){.fd = k->err_r, .events = POLLIN};
                }
                if (!k->exited) {
                        i_pid = n;
                        p[n++] = (struct pollfd){.fd = k->pidfd, .events = POLLIN};
                }
                if (lis_open) {
                        i_lis = n;
                        p[n++] = (struct pollfd){.fd = k->listener, .events = POLLIN};
                }
                if (k->sock >= 0) {
                        i_sock = n;
                        p[n++] = (struct pollfd){.fd = k->sock, .events = POLLIN};
                }
                i_con = n;
                p[n++] = (struct pollfd){.fd = k->s->listen_fd, .events = POLLIN};
                int timeout = -1;
                if (k->partial)
                        timeout = PARTIAL_FLUSH_MS;
                if (k->exited && k->master >= 0)
                        timeout = DRAIN_QUIET_MS;
                int r = poll(p, (nfds_t)n, timeout);
                if (r < 0 && errno != EINTR)
                        return;
                if (r == 0 && k->partial && !k->exited)
                        flush_partial(k, false);
                if (i_out >= 0 && (p[i_out].revents & POLLOUT))
                        push_input(k);
                if (i_out >= 0 && (p[i_out].revents & (POLLIN | POLLHUP | POLLERR))) {
                        while ((r = pump(k, src, false)) > 0)
                                ;
                        if (r < 0)
                                out_open = false;
                }
                if (i_err >= 0 && (p[i_err].revents & (POLLIN | POLLHUP | POLLERR))) {
                        while ((r = pump(k, k->err_r, true)) > 0)
                                ;
                        if (r < 0)
                                err_open = false;
                }
                if (i_lis >= 0 && (p[i_lis].revents & POLLIN))
                        on_violation(k);
                else if (i_lis >= 0 && (p[i_lis].revents & (POLLHUP | POLLERR)))
                        lis_open = false; /* no process uses the filter any more: polled
                                             again, it would answer at once, forever */
                if (i_sock >= 0 && (p[i_sock].revents & POLLIN))
                        on_jailer(k);
                else if (i_sock >= 0 && (p[i_sock].revents & (POLLHUP | POLLERR)))
                        k->sock = safe_close(k->sock);
                if (p[i_con].revents & POLLIN)
                        on_connect(k);
                if (i_pid >= 0 && (p[i_pid].revents & POLLIN))
                        on_exit_status(k);
                if (!k->exited)
                        continue;
                if (k->master >= 0) {
                        /* a terminal: done at EIO (no process holds it any
                         * more), or once quiet; what a background process
                         * prints later is not the job's (as the reference's
                         * pane, which closes with the script) */
                        int64_t now = monotonic_ms();
                        if (exited_at < 0)
                                exited_at = now;
                        if (r > 0 && out_open)
                                quiet_since = now;
                        if (quiet_since < 0)
                                quiet_since = now;
                        if (!out_open || now - quiet_since >= DRAIN_QUIET_MS ||
                            now - exited_at >= DRAIN_MAX_MS)
                                return;
                } else if (!out_open && !err_open) {
                        return; /* stdio: both pipes at EOF */
                }
        }
}

/* The exit, told until a jailer acknowledges it: the one that made the
 * job, or a later one if lockboxd is down meanwhile. */
static _Noreturn void report_exit(struct keeper *k)
{
        struct keeper_msg m = {.type = KEEPER_EXITED, .code = k->code, .pid = k->pid};
        tell(k, &m);
        for (;;) {
                struct pollfd p[2] = {{.fd = k->s->listen_fd, .events = POLLIN},
                                      {.fd = k->sock, .events = POLLIN}};
                if (RETRY_EINTR(poll(p, k->sock >= 0 ? 2 : 1, -1)) < 0)
                        _exit(1);
                if (p[0].revents & POLLIN) {
                        on_connect(k);
                        tell(k, &m);
                        continue;
                }
                if (k->sock < 0 || !(p[1].revents & (POLLIN | POLLHUP | POLLERR)))
                        continue;
                struct keeper_msg in;
                int fd = -1;
                size_t nf = 0;
                int r = channel_recv(k->sock, &in, sizeof(in), &fd, 1, &nf);
                if (nf == 1)
                        close(fd);
                if (r == 1 && in.type == KEEPER_ACK)
                        _exit(0);
                if (r == 0 || (r < 0 && r != -EAGAIN))
                        k->sock = safe_close(k->sock);
        }
}

_Noreturn void keeper_main(const struct job_spec *spec)
{
        struct job_spec mine = *spec;
        const struct job_spec *s = &mine;
        struct keeper k = {.s = s,
                           .pidfd = -1,
                           .master = -1,
                           .out_r = -1,
                           .err_r = -1,
                           .listener = -1,
                           .mntns = -1,
                           .sync = -1,
                           .sock = s->sock,
                           .untold_nr = -1};
        strbuf_init(&k.input, 0);
        prctl(PR_SET_NAME, s->spare ? "lockbox-spare" : "lockbox-keeper", 0, 0, 0);
        /* a spare ends with the jailer that made it: no job has it yet */
        if (s->spare && (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 || getppid() != s->parent))
                _exit(0);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        signal(SIGPIPE, SIG_IGN);
        /* the binding's network, IPC and host name; its PID namespace for
         * the child only */
        const int ns[][2] = {{s->ns_net, CLONE_NEWNET},
                             {s->ns_ipc, CLONE_NEWIPC},
                             {s->ns_uts, CLONE_NEWUTS},
                             {s->ns_pid, CLONE_NEWPID}};
        for (size_t i = 0; i < ELEMENTSOF(ns); i++)
                if (setns(ns[i][0], ns[i][1]) < 0)
                        fail(s, "keeper-setns", errno);
        if (!s->spare && s->mode == SHELL_MODE_PTY && sanitizer_new(&k.san) < 0)
                fail(s, "keeper-sanitizer", ENOMEM);
        int r = start_child(&k, &k.sync);
        if (r < 0)
                fail(s, "clone", -r);
        /* root is not needed past the clone: given up before the job's own
         * code can run (its exec ends the sync below); a later jailer's
         * connection shows the keeper's credentials from listen(), root's */
        if (listen(s->listen_fd, 4) < 0)
                fail(s, "keeper-listen", errno);
        give_up_root(s);
        if (s->spare) {
                prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0); /* the drop took it back */
                if (getppid() != s->parent)
                        _exit(0);
                wait_go(&k, &mine, k.sync);
        }
        await_child(&k, k.sync);
        if (k.master >= 0)
                fcntl(k.master, F_SETFL, O_NONBLOCK);
        if (k.out_r >= 0)
                fcntl(k.out_r, F_SETFL, O_NONBLOCK);
        if (k.err_r >= 0)
                fcntl(k.err_r, F_SETFL, O_NONBLOCK);
        /* with the pidfd of the job's first process: the jailer signals its
         * group through it */
        struct keeper_msg m = {.type = KEEPER_STARTED, .pid = k.pid};
        channel_send(k.sock, &m, sizeof(m), &k.pidfd, 1);
        loop(&k);
        flush_partial(&k, true);
        if (!k.exited) { /* the loop broke: collect the status anyway */
                siginfo_t si = {0};
                waitid(P_PIDFD, (id_t)k.pidfd, &si, WEXITED);
                k.code = si.si_code == CLD_EXITED ? si.si_status : 128 + si.si_status;
        }
        /* the job's processes that are left get ENOSYS for a forbidden
         * call from now on, not a wait for an answer */
        k.listener = safe_close(k.listener);
        report_exit(&k);
}
