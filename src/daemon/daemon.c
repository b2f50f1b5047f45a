/* lockboxd's process model (see daemon.h): as root, check the host, bind
 * the port and build the jailer; then fork the HTTP process, which drops to
 * server.user with no capabilities, and serve runs in the jailer. */
#include "daemon/daemon.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <pwd.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/fd.h"
#include "base/log.h"
#include "base/util.h"
#include "config/config.h"
#include "http/server.h"
#include "jail/policy.h"
#include "pool/jailer.h"

static int open_listener(const struct config *cfg, int *ret, char *err, size_t errlen)
{
        struct sockaddr_storage ss = {0};
        socklen_t len;
        struct sockaddr_in *in4 = (struct sockaddr_in *)&ss;
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
        if (inet_pton(AF_INET, cfg->listen, &in4->sin_addr) == 1) {
                in4->sin_family = AF_INET;
                in4->sin_port = htons((uint16_t)cfg->port);
                len = sizeof(*in4);
        } else if (inet_pton(AF_INET6, cfg->listen, &in6->sin6_addr) == 1) {
                in6->sin6_family = AF_INET6;
                in6->sin6_port = htons((uint16_t)cfg->port);
                len = sizeof(*in6);
        } else {
                snprintf(err, errlen, "server.listen: '%s' is not an IP address", cfg->listen);
                return -EINVAL;
        }
        _cleanup_close_ int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        int one = 1;
        if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
            bind(fd, (struct sockaddr *)&ss, len) < 0 || listen(fd, 511) < 0) {
                snprintf(err, errlen, "cannot listen on %s port %d: %s", cfg->listen, cfg->port,
                         strerror(errno));
                return -errno;
        }
        *ret = TAKE_FD(fd);
        return 0;
}

static int lookup_user(const char *name, uid_t *ret_uid, gid_t *ret_gid, char *err,
                       size_t errlen)
{
        struct passwd *pw = getpwnam(name);
        if (pw) {
                *ret_uid = pw->pw_uid;
                *ret_gid = pw->pw_gid;
        } else if (strcmp(name, "nobody") == 0) {
                *ret_uid = *ret_gid = 65534;
        } else {
                snprintf(err, errlen, "server.user: no such user '%s'", name);
                return -ENOENT;
        }
        if (*ret_uid == 0) {
                snprintf(err, errlen, "server.user: '%s' is root; the HTTP side must not be",
                         name);
                return -EINVAL;
        }
        return 0;
}

/* The HTTP process: no capabilities, not dumpable (so other processes of
 * the same account cannot read the API key from it), dies with the jailer. */
static _Noreturn void http_child(const struct config *cfg, const struct http_server_opts *o,
                                 uid_t uid, gid_t gid, pid_t jailer)
{
        log_set_role("http");
        struct policy_prog filter;
        int r = policy_build_server(&filter);
        if (r < 0) {
                log_error(NULL, "http.filter", "error=%s", log_q(strerror(-r)));
                _exit(1);
        }
        struct sock_fprog prog = {.len = filter.len, .filter = filter.insns};
        if (setgroups(0, NULL) < 0 || setresgid(gid, gid, gid) < 0 ||
            setresuid(uid, uid, uid) < 0 || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
            prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0 || prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 ||
            prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) < 0) {
                log_error(NULL, "http.drop_privileges", "error=%s", log_q(strerror(errno)));
                _exit(1);
        }
        policy_prog_free(&filter);
        if (getppid() != jailer)
                _exit(1);
        _exit(http_server_run(o));
}

/* Each run holds about seven fds in the jailer and four in the HTTP
 * process, and connections one more: lift the soft limit to the hard one. */
static void raise_fd_limit(void)
{
        struct rlimit rl;
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
                rl.rlim_cur = rl.rlim_max;
                setrlimit(RLIMIT_NOFILE, &rl);
        }
}

int daemon_main(const struct config *cfg, char *err, size_t errlen)
{
        if (geteuid() != 0) {
                snprintf(err, errlen, "must run as root: it creates namespaces and cgroups "
                                      "and switches runs to sandbox UIDs");
                return 1;
        }
        raise_fd_limit();
        uid_t uid;
        gid_t gid;
        _cleanup_close_ int lfd = -1;
        struct jailer *j = NULL;
        if (lookup_user(cfg->user, &uid, &gid, err, errlen) < 0 ||
            open_listener(cfg, &lfd, err, errlen) < 0 || jailer_new(cfg, &j, err, errlen) < 0)
                return 1;
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
                snprintf(err, errlen, "control socket: %s", strerror(errno));
                jailer_free(j);
                return 1;
        }
        pid_t jailer_pid = getpid();
        pid_t pid = fork();
        if (pid == 0) {
                int keep[] = {lfd, sv[1], log_get_file_fd()};
                fd_close_all_except(3, keep, ELEMENTSOF(keep));
                struct http_server_opts o = {.cfg = cfg, .listen_fd = lfd, .ctrl_fd = sv[1]};
                http_child(cfg, &o, uid, gid, jailer_pid);
        }
        close(sv[1]);
        lfd = safe_close(lfd);
        if (pid < 0) {
                snprintf(err, errlen, "fork: %s", strerror(errno));
                close(sv[0]);
                jailer_free(j);
                return 1;
        }
        log_set_role("jailer");
        int code = jailer_run(j, sv[0], pid);
        close(sv[0]);
        jailer_free(j);
        return code;
}
