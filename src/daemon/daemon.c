/* lockboxd's process model (see daemon.h): as root, check the host, bind
 * the port and build the jailer; then fork and exec the HTTP process
 * (daemon/http_exec.h), which drops to server.user with no capabilities,
 * and serve runs in the jailer. */
#include "daemon/daemon.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/capability.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/fd.h"
#include "base/log.h"
#include "base/parse.h"
#include "base/util.h"
#include "config/config.h"
#include "daemon/http_exec.h"
#include "jail/policy.h"
#include "jail/uidclaim.h"
#include "net/net.h"
#include "jailer/jailer.h"

/* what names the setting; replaced: what a process holding the port may
 * be. */
static int open_listener(const char *addr, int port, const char *what, const char *replaced,
                         int *ret, char *err, size_t errlen)
{
        struct sockaddr_storage ss = {0};
        socklen_t len;
        struct sockaddr_in *in4 = (struct sockaddr_in *)&ss;
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
        if (inet_pton(AF_INET, addr, &in4->sin_addr) == 1) {
                in4->sin_family = AF_INET;
                in4->sin_port = htons((uint16_t)port);
                len = sizeof(*in4);
        } else if (inet_pton(AF_INET6, addr, &in6->sin6_addr) == 1) {
                in6->sin6_family = AF_INET6;
                in6->sin6_port = htons((uint16_t)port);
                len = sizeof(*in6);
        } else {
                snprintf(err, errlen, "%s: '%s' is not an IP address", what, addr);
                return -EINVAL;
        }
        _cleanup_close_ int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        int one = 1;
        if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
            bind(fd, (struct sockaddr *)&ss, len) < 0 || listen(fd, 511) < 0) {
                int e = errno;
                snprintf(err, errlen, "cannot listen on %s port %d (%s): %s%s%s%s", addr, port,
                         what, strerror(e),
                         e == EADDRINUSE ? "; another process (another lockboxd, or " : "",
                         e == EADDRINUSE ? replaced : "", e == EADDRINUSE ? "?) holds it" : "");
                return -e;
        }
        *ret = TAKE_FD(fd);
        return 0;
}

static int open_metrics(const struct config *cfg, int *ret, char *err, size_t errlen)
{
        char addr[64];
        int port;
        if (parse_host_port(cfg->metrics_listen, addr, sizeof(addr), &port) < 0) {
                snprintf(err, errlen, "server.metrics_listen: '%s' is not ADDRESS:PORT",
                         cfg->metrics_listen);
                return -EINVAL;
        }
        return open_listener(addr, port, "server.metrics_listen", "dify-sandbox", ret, err, errlen);
}

/* The code API's socket, the metrics' and the shell-job API's when
 * configured (-1 otherwise); the caller closes them, also on failure. */
static int open_listeners(const struct config *cfg, int *ret_api, int *ret_metrics, int *ret_shell,
                          char *err, size_t errlen)
{
        int r =
            open_listener(cfg->listen, cfg->port, "app.port", "dify-sandbox", ret_api, err, errlen);
        if (r == 0 && cfg->metrics && *cfg->metrics_listen)
                r = open_metrics(cfg, ret_metrics, err, errlen);
        if (r == 0 && cfg->shell_enabled)
                r = open_listener(cfg->shell_listen, cfg->shell_port, "shell.port", "shellctl",
                                  ret_shell, err, errlen);
        return r;
}

/* ---- start-up checks: refuse with one clear line what cannot work --------- */

static const struct {
        int cap;
        const char *name, *why;
} needed_caps[] = {
    {CAP_SYS_ADMIN, "CAP_SYS_ADMIN", "namespaces and mounts"},
    {CAP_SETUID, "CAP_SETUID", "runs' UIDs"},
    {CAP_SETGID, "CAP_SETGID", "runs' GIDs"},
    {CAP_SETPCAP, "CAP_SETPCAP", "emptying runs' capability bounding set"},
    {CAP_KILL, "CAP_KILL", "stopping runs"},
    {CAP_CHOWN, "CAP_CHOWN", "sealing the dependency layer"},
    {CAP_DAC_OVERRIDE, "CAP_DAC_OVERRIDE", "cgroups and staging directories"},
};

const char *daemon_needed_cap(size_t i)
{
        return i < ELEMENTSOF(needed_caps) ? needed_caps[i].name : NULL;
}

static int check_capabilities(char *err, size_t errlen)
{
        struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3};
        struct __user_cap_data_struct data[2] = {0};
        if (syscall(SYS_capget, &hdr, data) < 0) {
                snprintf(err, errlen, "cannot read capabilities: %s", strerror(errno));
                return -errno;
        }
        char missing[256] = "";
        for (size_t i = 0; i < ELEMENTSOF(needed_caps); i++) {
                int c = needed_caps[i].cap;
                if (!(data[c / 32].effective & (1U << (c % 32))))
                        snprintf(missing + strlen(missing), sizeof(missing) - strlen(missing),
                                 "%s%s (%s)", *missing ? ", " : "", needed_caps[i].name,
                                 needed_caps[i].why);
        }
        if (!*missing)
                return 0;
        snprintf(err, errlen,
                 "missing capabilities: %s; in a container add them "
                 "(docs/DEPLOY.md), do not use --privileged",
                 missing);
        return -EPERM;
}

/* Try in a child what every run needs: the namespaces and a private mount.
 * A container's default seccomp or AppArmor profile fails here. */
static int probe_namespaces(char *err, size_t errlen)
{
        int p[2];
        if (pipe2(p, O_CLOEXEC) < 0)
                return 0; /* no verdict; runs will tell */
        pid_t pid = fork();
        if (pid == 0) {
                int step = 0, e = 0;
                if (unshare(CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS |
                            CLONE_NEWNET | CLONE_NEWCGROUP) < 0)
                        e = errno;
                else if (step = 1, mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
                        e = errno;
                else if (step = 2, mount("lockbox-probe", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV,
                                         "size=64k") < 0)
                        e = errno;
                int msg[2] = {step, e};
                _exit(write(p[1], msg, sizeof(msg)) == sizeof(msg) ? 0 : 1);
        }
        close(p[1]);
        int msg[2] = {0, 0};
        ssize_t n = pid > 0 ? read(p[0], msg, sizeof(msg)) : -1;
        close(p[0]);
        if (pid > 0)
                waitpid(pid, NULL, 0);
        if (n != sizeof(msg) || msg[1] == 0)
                return 0;
        static const char *const what[] = {"create namespaces (unshare)", "make mounts private",
                                           "mount a tmpfs"};
        snprintf(err, errlen,
                 "cannot %s: %s; a container needs CAP_SYS_ADMIN and a seccomp "
                 "and AppArmor profile that allow it (docs/DEPLOY.md)",
                 what[msg[0]], strerror(msg[1]));
        return -msg[1];
}

static bool loopback_only(const char *addr)
{
        struct in_addr a4;
        struct in6_addr a6;
        if (inet_pton(AF_INET, addr, &a4) == 1)
                return (ntohl(a4.s_addr) >> 24) == 127;
        return inet_pton(AF_INET6, addr, &a6) == 1 && IN6_IS_ADDR_LOOPBACK(&a6);
}

static void warn_public_key(const struct config *cfg)
{
        if (strcmp(cfg->key, "dify-sandbox") != 0 || loopback_only(cfg->listen))
                return;
        log_warn(NULL, "security.default_key",
                 "listen=%s msg=\"the API key is the public default 'dify-sandbox' and the API "
                 "listens beyond loopback: anyone who reaches port %d can run code. Set app.key "
                 "(API_KEY).\"",
                 cfg->listen, cfg->port);
}

static void warn_open_shell(const struct config *cfg)
{
        if (!cfg->shell_enabled || *cfg->shell_token || loopback_only(cfg->shell_listen))
                return;
        log_warn(NULL, "security.shell_open",
                 "listen=%s msg=\"the shell-job API has no token and listens beyond loopback: "
                 "anyone who reaches port %d can run shell jobs. Set shell.token "
                 "(SHELLCTL_AUTH_TOKEN).\"",
                 cfg->shell_listen, cfg->shell_port);
}

/* The UDP relay socket's receive buffer: room for a few thousand queries,
 * so the burst every run may send at once (nftables' per-source limit)
 * is queued, not dropped, while the relay thread catches up. Set as root
 * (SO_RCVBUFFORCE), beyond net.core.rmem_max. */
#define DNS_UDP_RCVBUF (4 << 20)

/* The DNS relay's sockets on the gateway's port 53 (bound here, as root;
 * IP_FREEBIND since the address exists only while a run's link does). */
static int open_dns(uint32_t gateway, int type, int *ret)
{
        struct sockaddr_in sa = {
            .sin_family = AF_INET, .sin_port = htons(53), .sin_addr.s_addr = htonl(gateway)};
        int one = 1, rcvbuf = DNS_UDP_RCVBUF;
        _cleanup_close_ int fd = socket(AF_INET, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0 || setsockopt(fd, IPPROTO_IP, IP_FREEBIND, &one, sizeof(one)) < 0 ||
            setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
            bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
            (type == SOCK_STREAM && listen(fd, 64) < 0))
                return -errno;
        /* best effort: the default buffer still works, only smaller */
        if (type == SOCK_DGRAM)
                (void)setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof(rcvbuf));
        *ret = TAKE_FD(fd);
        return 0;
}

static void open_dns_relay(const struct config *cfg, uint32_t gateway, struct http_exec *o)
{
        o->dns_udp_fd = o->dns_tcp_fd = -1;
        if (!gateway)
                return;
        int r = open_dns(gateway, SOCK_DGRAM, &o->dns_udp_fd);
        if (r == 0)
                r = open_dns(gateway, SOCK_STREAM, &o->dns_tcp_fd);
        if (r < 0) {
                log_error(NULL, "dns.listen_failed", "error=%s", log_q(strerror(-r)));
                o->dns_udp_fd = safe_close(o->dns_udp_fd);
                return;
        }
        o->n_dns_upstreams = net_dns_upstreams(cfg, o->dns_upstreams, ELEMENTSOF(o->dns_upstreams));
        /* validated at load; the relay serves these addresses only */
        const char *why;
        if (netaddr_parse_prefix(cfg->net_subnet, &o->dns_runs, &why) < 0)
                o->n_dns_upstreams = 0;
}

/* Each run holds up to nine fds in the jailer (its channel, timerfd, sync
 * socket, seccomp listener, pidfd, the code, stdout and stderr pipe ends
 * until STARTED, the exit report; jailer/run.c release_fds) and four in
 * the HTTP process, and connections one more: lift the soft limit to the
 * hard one. */
static void raise_fd_limit(void)
{
        struct rlimit rl;
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
                rl.rlim_cur = rl.rlim_max;
                setrlimit(RLIMIT_NOFILE, &rl);
        }
}

/* Everything after the UID range is ours: listeners, the jailer, the HTTP
 * process; the exit code. */
static int serve_claimed(const struct config *cfg, int self_fd, char *err, size_t errlen)
{
        uid_t uid;
        gid_t gid;
        _cleanup_close_ int lfd = -1, mfd = -1, sfd = -1;
        struct jailer *j = NULL;
        if (http_exec_user(cfg->user, &uid, &gid, err, errlen) < 0)
                return 1;
        if (uid >= (uid_t)cfg->uid_min && uid <= (uid_t)cfg->uid_max) {
                /* the runs' and pip's UIDs are theirs alone */
                snprintf(err, errlen,
                         "server.user '%s' has uid %u, inside jail.uid_min..jail.uid_max "
                         "(%d..%d): give it an account outside the range",
                         cfg->user, (unsigned)uid, cfg->uid_min, cfg->uid_max);
                return 1;
        }
        if (open_listeners(cfg, &lfd, &mfd, &sfd, err, errlen) < 0 ||
            jailer_new(cfg, &j, err, errlen) < 0)
                return 1;
        /* ctrl: runs and installs; logs: the reopened log file, on SIGHUP */
        int sv[2], lv[2] = {-1, -1};
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0 ||
            (log_get_file_fd() >= 0 &&
             socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, lv) < 0)) {
                snprintf(err, errlen, "control socket: %s", strerror(errno));
                jailer_free(j);
                return 1;
        }
        struct http_exec o = {.cfg = cfg,
                              .uid = uid,
                              .gid = gid,
                              .listen_fd = lfd,
                              .metrics_fd = mfd,
                              .shell_fd = sfd,
                              .ctrl_fd = sv[1],
                              .log_sock = lv[1],
                              .log_file_fd = log_get_file_fd(),
                              .stats_fd = jailer_stats_fd(j)};
        open_dns_relay(cfg, jailer_gateway(j), &o);
        int settings = http_exec_settings(&o);
        pid_t pid = settings < 0 ? (errno = -settings, -1) : fork();
        if (pid == 0)
                http_exec_child(&o, settings, self_fd);
        safe_close(settings);
        safe_close(o.dns_udp_fd);
        safe_close(o.dns_tcp_fd);
        close(sv[1]);
        safe_close(lv[1]);
        lfd = safe_close(lfd);
        mfd = safe_close(mfd);
        sfd = safe_close(sfd);
        if (pid < 0) {
                snprintf(err, errlen, "%s: %s",
                         settings < 0 ? "the HTTP process's settings" : "fork", strerror(errno));
                close(sv[0]);
                safe_close(lv[0]);
                jailer_free(j);
                return 1;
        }
        log_set_role("jailer");
        int code = jailer_run(j, sv[0], lv[0], pid);
        close(sv[0]);
        safe_close(lv[0]);
        jailer_free(j);
        return code;
}

int daemon_main(const struct config *cfg, char *err, size_t errlen)
{
        if (geteuid() != 0) {
                snprintf(err, errlen,
                         "must run as root: it creates namespaces and cgroups "
                         "and switches runs to sandbox UIDs");
                return 1;
        }
        if (check_capabilities(err, errlen) < 0 || probe_namespaces(err, errlen) < 0)
                return 1;
        warn_public_key(cfg);
        warn_open_shell(cfg);
        raise_fd_limit();
        /* a log reader that went away (stderr a closed pipe) must not kill
         * the jailer; every child resets this before it execs */
        signal(SIGPIPE, SIG_IGN);
        /* the HTTP process is this binary again, exec'd (http_exec.h):
         * through a descriptor taken now, whatever happens to the path */
        _cleanup_close_ int self_fd = open("/proc/self/exe", O_PATH | O_CLOEXEC);
        if (self_fd < 0) {
                snprintf(err, errlen, "/proc/self/exe: %s", strerror(errno));
                return 1;
        }
        if (uidclaim_take((uid_t)cfg->uid_min, (uid_t)cfg->uid_max, err, errlen) < 0)
                return 1;
        int code = serve_claimed(cfg, self_fd, err, errlen);
        uidclaim_drop();
        return code;
}
