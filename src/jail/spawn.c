/* Starting a jailed child (see jail.h): clone3 into new namespaces (on
 * cgroup v2 straight into the run's group), plus the supervisor's side of
 * the handshake: reading the sync socket and letting the first exec of a
 * cold child through. */
#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/util.h"
#include "ipc/channel.h"
#include "jail/jail.h"
#include "jail/policy.h"

int jail_start(const struct jail_spec *s, bool sibling, struct jail_started *ret, char *err,
               size_t errlen)
{
        int pidfd = -1;
        struct clone_args args = {
            .flags = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_PIDFD,
            .pidfd = (uint64_t)(uintptr_t)&pidfd,
            .exit_signal = SIGCHLD,
        };
        /* The child joins the namespace made for it (netns_fd): with
         * network, its own; without, an empty one the jailer keeps. Else
         * without network the clone makes an empty one, and with network
         * it stays in ours (host mode). */
        if (!s->network && s->netns_fd < 0)
                args.flags |= CLONE_NEWNET;
        if (sibling) {
                /* clone3 takes no exit signal with CLONE_PARENT: the child
                 * inherits ours (SIGCHLD, as the jailer cloned us). */
                args.flags |= CLONE_PARENT;
                args.exit_signal = 0;
        }
        if (s->cgroup_dirfd >= 0) {
                args.flags |= CLONE_INTO_CGROUP;
                args.cgroup = (uint64_t)s->cgroup_dirfd;
        }
        pid_t pid = (pid_t)syscall(SYS_clone3, &args, sizeof(args));
        if (pid < 0) {
                int e = errno;
                snprintf(err, errlen, "clone: %s", strerror(e));
                return -e;
        }
        if (pid == 0) {
                jail_child_main(s); /* a cold child never returns */
                return 1;
        }
        *ret = (struct jail_started){.pid = pid, .pidfd = pidfd};
        return 0;
}

int jail_sync_recv(int sync, struct jail_sync_msg *m, int *ret_fd)
{
        /* EOF (0): a cold child exec'd, or the child died; a message of
         * another size, or with more than one fd, is -EPROTO with every
         * fd that came with it closed */
        size_t n = 0;
        *ret_fd = -1;
        int r = channel_recv(sync, m, sizeof(*m), ret_fd, 1, &n);
        if (r <= 0 || n == 0)
                *ret_fd = -1; /* on an error, channel_recv closed it */
        if (r <= 0)
                return r;
        m->step[sizeof(m->step) - 1] = '\0';
        return 1;
}

int jail_exec_permit(int listener, pid_t pid, bool *exec_done)
{
        struct seccomp_notif *req;
        struct seccomp_notif_resp *resp;
        if (seccomp_notify_alloc(&req, &resp) < 0)
                return -ENOMEM;
        memset(req, 0, sizeof(*req));
        int r = seccomp_notify_receive(listener, req);
        if (r == 0) {
                /* The decision rests on our own state only: the first exec
                 * of this child, which no program byte has reached yet. */
                bool ok = !*exec_done && req->pid == (uint32_t)pid && policy_is_exec(req->data.nr);
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
