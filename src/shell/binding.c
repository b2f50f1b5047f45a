/* A binding's init (see internal.h). Cloned by the jailer into new PID,
 * IPC and UTS namespaces, into the binding's network namespace (one of
 * the run network's, or a new one whose loopback it brings up: servers a
 * job starts in the background answer the binding's next jobs on it),
 * names the host, gives up root and reaps whatever the binding's jobs
 * leave orphaned, until the jailer kills it with the binding: then the
 * kernel ends every process left in the namespace. */
#include <errno.h>
#include <linux/sched.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/fd.h"
#include "base/util.h"
#include "jail/jail.h"
#include "jail/landlock.h"
#include "shell/internal.h"

static int loopback_up(void)
{
        _cleanup_close_ int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        struct ifreq ifr = {0};
        strncpy(ifr.ifr_name, "lo", sizeof(ifr.ifr_name) - 1);
        if (s < 0 || ioctl(s, SIOCGIFFLAGS, &ifr) < 0)
                return -errno;
        ifr.ifr_flags |= IFF_UP;
        return ioctl(s, SIOCSIFFLAGS, &ifr) < 0 ? -errno : 0;
}

/* The init needs no file system: its mount namespace, a copy of the
 * host's, would hold every mount of that moment (another lockboxd's
 * shell.home among them, whose loop device could then not be let go) for
 * as long as the binding lives. An empty tmpfs becomes its root and the
 * copy is detached. */
static int empty_root(void)
{
        if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
            mount("none", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k,mode=0555") <
                0 ||
            chdir("/tmp") < 0 || syscall(SYS_pivot_root, ".", ".") < 0 ||
            umount2(".", MNT_DETACH) < 0 || chdir("/") < 0)
                return -errno;
        return 0;
}

static _Noreturn void holder(const char *hostname, uid_t uid, int netns_fd, bool host_net)
{
        prctl(PR_SET_NAME, "lockbox-binding", 0, 0, 0);
        /* only SIGKILL from outside ends it; SIGCHLD is taken synchronously */
        sigset_t all, chld;
        sigfillset(&all);
        sigprocmask(SIG_SETMASK, &all, NULL);
        sigemptyset(&chld);
        sigaddset(&chld, SIGCHLD);
        if (netns_fd >= 0 && setns(netns_fd, CLONE_NEWNET) < 0)
                _exit(1);
        fd_close_from(3);
        if (empty_root() < 0 || (netns_fd < 0 && !host_net && loopback_up() < 0) ||
            sethostname(hostname, strlen(hostname)) < 0 || jail_identity_drop(uid, uid) < 0 ||
            prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0 ||
            /* it outlives lockboxd (shell.keep_jobs): the drop's death
             * signal is taken back */
            prctl(PR_SET_PDEATHSIG, 0, 0, 0, 0) < 0)
                _exit(1);
        int r = landlock_confine(NULL, 0, NULL, 0);
        if (r < 0 && r != -EOPNOTSUPP)
                _exit(1);
        for (;;) {
                while (waitpid(-1, NULL, WNOHANG) > 0)
                        ;
                sigwaitinfo(&chld, NULL);
        }
}

int binding_holder_start(const char *hostname, uid_t uid, int netns_fd, bool host_net,
                         pid_t *ret_pid, int *ret_pidfd)
{
        int pidfd = -1;
        struct clone_args args = {
            .flags = CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWNS | CLONE_PIDFD |
                     (netns_fd < 0 && !host_net ? CLONE_NEWNET : 0),
            .pidfd = (uint64_t)(uintptr_t)&pidfd,
            .exit_signal = SIGCHLD,
        };
        pid_t pid = (pid_t)syscall(SYS_clone3, &args, sizeof(args));
        if (pid < 0)
                return -errno;
        if (pid == 0)
                holder(hostname, uid, netns_fd, host_net);
        *ret_pid = pid;
        *ret_pidfd = pidfd;
        return 0;
}
