/* Parent side of starting a jailed child: clone3 into new namespaces (and,
 * on cgroup v2, straight into the run's group), attach on cgroup v1, let
 * the child go, then wait for its seccomp listener and the exec. */
#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <linux/seccomp.h>
#include <seccomp.h>
#include <stdbool.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/util.h"
#include "jail/cgroup.h"
#include "jail/jail.h"
#include "jail/policy.h"

#define SPAWN_TIMEOUT_MS 10000

static pid_t clone_child(const struct jail_spec *s, int *ret_pidfd)
{
        struct clone_args args = {
                .flags = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_PIDFD,
                .pidfd = (uint64_t)(uintptr_t)ret_pidfd,
                .exit_signal = SIGCHLD,
        };
        if (!s->network)
                args.flags |= CLONE_NEWNET;
        int cgfd = s->cgroup ? cgroup_run_dirfd(s->cgroup) : -1;
        if (cgfd >= 0) {
                args.flags |= CLONE_INTO_CGROUP;
                args.cgroup = (uint64_t)cgfd;
        }
        return (pid_t)syscall(SYS_clone3, &args, sizeof(args));
}

static int recv_msg(int fd, struct jail_sync_msg *m, int *ret_fd)
{
        union {
                char buf[CMSG_SPACE(sizeof(int))];
                struct cmsghdr align;
        } u;
        struct iovec iov = {.iov_base = m, .iov_len = sizeof(*m)};
        struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
                            .msg_controllen = sizeof(u.buf)};
        ssize_t n = RETRY_EINTR(recvmsg(fd, &mh, MSG_CMSG_CLOEXEC));
        if (n == 0)
                return 0; /* EOF: the child exec'd (or died) */
        if (n != (ssize_t)sizeof(*m))
                return -EPROTO;
        *ret_fd = -1;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
                if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
                        memcpy(ret_fd, CMSG_DATA(c), sizeof(int));
        return 1;
}

/* The child's exec waits in the filter: continue it if it is the first
 * exec of this child, refuse anything else. */
static int allow_first_exec(int listener, pid_t pid, bool *exec_done)
{
        struct seccomp_notif *req;
        struct seccomp_notif_resp *resp;
        if (seccomp_notify_alloc(&req, &resp) < 0)
                return -ENOMEM;
        int r = seccomp_notify_receive(listener, req);
        if (r == 0) {
                bool ok = !*exec_done && req->pid == (uint32_t)pid &&
                          policy_is_exec(req->data.nr);
                resp->id = req->id;
                resp->error = ok ? 0 : -EPERM;
                resp->flags = ok ? SECCOMP_USER_NOTIF_FLAG_CONTINUE : 0;
                r = seccomp_notify_respond(listener, resp);
                if (r == 0 && !ok)
                        r = -EPERM;
                *exec_done |= ok;
        }
        seccomp_notify_free(req, resp);
        return r == -ENOENT ? 0 : r;
}

static void reap(pid_t pid, int pidfd)
{
        syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
        RETRY_EINTR(waitpid(pid, NULL, 0));
}

/* Talk to the child until its exec: returns the listener fd. */
static int handshake(const struct jail_spec *s, int sync, pid_t pid, int *ret_listener, char *err,
                     size_t errlen)
{
        int r = s->cgroup ? cgroup_run_attach(s->cgroup, pid) : 0;
        if (r < 0) {
                snprintf(err, errlen, "cgroup-attach: %s", strerror(-r));
                return r;
        }
        struct jail_sync_msg go = {.type = SYNC_GO};
        if (send(sync, &go, sizeof(go), MSG_NOSIGNAL) != sizeof(go)) {
                snprintf(err, errlen, "start: child went away");
                return -ECHILD;
        }
        _cleanup_close_ int listener = -1;
        bool exec_done = false;
        for (;;) {
                struct pollfd pfd[2] = {{.fd = sync, .events = POLLIN},
                                        {.fd = listener, .events = POLLIN}};
                int pr = RETRY_EINTR(poll(pfd, 2, SPAWN_TIMEOUT_MS));
                if (pr <= 0) {
                        snprintf(err, errlen, "handshake: %s", pr == 0 ? "child timed out"
                                                                       : strerror(errno));
                        return pr == 0 ? -ETIMEDOUT : -errno;
                }
                if (pfd[1].revents & POLLIN) {
                        if ((r = allow_first_exec(listener, pid, &exec_done)) < 0) {
                                snprintf(err, errlen, "exec: %s", strerror(-r));
                                return r;
                        }
                        continue;
                }
                struct jail_sync_msg m;
                int fd = -1;
                r = recv_msg(sync, &m, &fd);
                if (r < 0) {
                        snprintf(err, errlen, "handshake: %s", strerror(-r));
                        return r;
                }
                if (r == 0)
                        break;
                if (m.type == SYNC_FAIL) {
                        safe_close(fd);
                        m.step[sizeof(m.step) - 1] = '\0';
                        snprintf(err, errlen, "%s: %s", m.step, strerror(m.error));
                        return -m.error ? -m.error : -EIO;
                }
                if (m.type != SYNC_LISTENER || fd < 0 || listener >= 0) {
                        safe_close(fd);
                        snprintf(err, errlen, "handshake: unexpected message");
                        return -EPROTO;
                }
                listener = fd;
        }
        if (listener < 0 || !exec_done) {
                snprintf(err, errlen, "handshake: child ended before its exec");
                return -ECHILD;
        }
        *ret_listener = TAKE_FD(listener);
        return 0;
}

int jail_spawn(const struct jail_spec *s, struct jail_proc *ret, char *err, size_t errlen)
{
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
                snprintf(err, errlen, "sync-socket: %s", strerror(errno));
                return -errno;
        }
        int pidfd = -1;
        pid_t pid = clone_child(s, &pidfd);
        if (pid == 0) {
                close(sv[0]);
                jail_child_main(s, sv[1]);
        }
        close(sv[1]);
        _cleanup_close_ int sync = sv[0];
        if (pid < 0) {
                snprintf(err, errlen, "clone: %s", strerror(errno));
                return -errno;
        }
        int listener = -1;
        int r = handshake(s, sync, pid, &listener, err, errlen);
        if (r < 0) {
                reap(pid, pidfd);
                close(pidfd);
                return r;
        }
        *ret = (struct jail_proc){.pid = pid, .pidfd = pidfd, .listener = listener};
        return 0;
}
