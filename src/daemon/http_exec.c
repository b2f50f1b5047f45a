/* The HTTP process as a program of its own (see http_exec.h). */
#include "daemon/http_exec.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <jansson.h>
#include <linux/seccomp.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/fd.h"
#include "base/log.h"
#include "base/util.h"
#include "config/config.h"
#include "http/metrics.h"
#include "http/server.h"
#include "ipc/stats.h"
#include "jail/jail.h"
#include "jail/landlock.h"
#include "jail/policy.h"
#include "net/dnsrelay.h"

#define SETTINGS_MAGIC 0x6c6278687474700aULL /* "lbxhttp\n" */
#define CONFIG_MAX (1 << 20)

/* The runs' DNS relay's bounds (net/dnsrelay.h; docs/ARCHITECTURE.md):
 * per upstream attempt; UDP queries in flight and TCP clients for the
 * whole daemon; each run address's share of them (an eighth), and its
 * rate: queries a second and the burst it may spend at once (a run
 * resolving a few hundred names at start-up is not slowed; a flood is). */
#define DNS_TIMEOUT_MS 2000
#define DNS_MAX_INFLIGHT 256
#define DNS_MAX_TCP 32
#define DNS_SOURCE_INFLIGHT (DNS_MAX_INFLIGHT / 8)
#define DNS_SOURCE_TCP (DNS_MAX_TCP / 8)
#define DNS_SOURCE_RATE 200
#define DNS_SOURCE_BURST 400

/* The memfd's layout: this header, then `config_len` bytes of YAML. Both
 * ends are the same binary, so a plain struct is the format. */
struct settings {
        uint64_t magic;
        int32_t listen_fd, metrics_fd, shell_fd, ctrl_fd, log_sock, log_file_fd, dns_udp_fd,
            dns_tcp_fd, stats_fd;
        uint32_t uid, gid;
        int32_t jailer_pid;
        uint32_t n_dns, runs_addr, runs_len;
        struct sockaddr_storage dns[HTTP_EXEC_DNS_MAX];
        char layer_dir[4096];
        uint64_t config_len;
};

int http_exec_settings(const struct http_exec *x)
{
        struct settings s = {
            .magic = SETTINGS_MAGIC,
            .listen_fd = x->listen_fd,
            .metrics_fd = x->metrics_fd,
            .shell_fd = x->shell_fd,
            .ctrl_fd = x->ctrl_fd,
            .log_sock = x->log_sock,
            .log_file_fd = x->log_file_fd,
            .dns_udp_fd = x->dns_udp_fd,
            .dns_tcp_fd = x->dns_tcp_fd,
            .stats_fd = x->stats_fd,
            .uid = x->uid,
            .gid = x->gid,
            .jailer_pid = getpid(),
            .n_dns = (uint32_t)(x->n_dns_upstreams < HTTP_EXEC_DNS_MAX ? x->n_dns_upstreams
                                                                       : HTTP_EXEC_DNS_MAX),
            .runs_addr = x->dns_runs.addr,
            .runs_len = x->dns_runs.len,
        };
        memcpy(s.dns, x->dns_upstreams, sizeof(s.dns));
        if ((size_t)snprintf(s.layer_dir, sizeof(s.layer_dir), "%s", x->cfg->layer_dir) >=
            sizeof(s.layer_dir))
                return -ENAMETOOLONG;
        char *yaml = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&yaml, &len);
        if (!f)
                return -ENOMEM;
        config_dump_secrets(x->cfg, f);
        if (fclose(f) != 0 || !yaml) {
                free(yaml);
                return -ENOMEM;
        }
        s.config_len = len;
        int fd = memfd_create("lockbox-http-settings", MFD_CLOEXEC);
        int r = fd < 0 ? -errno : 0;
        if (r == 0 && (write(fd, &s, sizeof(s)) != (ssize_t)sizeof(s) ||
                       write(fd, yaml, len) != (ssize_t)len))
                r = -EIO;
        explicit_bzero(yaml, len); /* the key */
        free(yaml);
        if (r < 0)
                safe_close(fd);
        return r < 0 ? r : fd;
}

_Noreturn void http_exec_child(const struct http_exec *x, int settings, int self_fd)
{
        int keep[] = {x->listen_fd, x->metrics_fd,  x->shell_fd,   x->ctrl_fd,
                      x->log_sock,  x->log_file_fd, x->dns_udp_fd, x->dns_tcp_fd,
                      x->stats_fd,  settings,       self_fd};
        fd_close_all_except(3, keep, ELEMENTSOF(keep));
        for (size_t i = 0; i + 1 < ELEMENTSOF(keep); i++) /* all but self_fd cross the exec */
                if (keep[i] >= 0 && fcntl(keep[i], F_SETFD, 0) < 0)
                        _exit(1);
        char arg[32];
        snprintf(arg, sizeof(arg), "--http=%d", settings);
        char *argv[] = {(char *)"lockboxd", arg, NULL}, *envp[] = {NULL};
        signal(SIGPIPE, SIG_DFL);
        execveat(self_fd, "", argv, envp, AT_EMPTY_PATH);
        log_error(NULL, "http.exec_failed", "error=%s", log_q(strerror(errno)));
        _exit(1);
}

int http_exec_user(const char *name, uid_t *ret_uid, gid_t *ret_gid, char *err, size_t errlen)
{
        struct passwd *pw = getpwnam(name);
        if (pw) {
                *ret_uid = pw->pw_uid;
                *ret_gid = pw->pw_gid;
        } else if (strcmp(name, "nobody") == 0) {
                *ret_uid = *ret_gid = 65534; /* a host without the account */
        } else {
                snprintf(err, errlen, "server.user: no such user '%s'", name);
                return -ENOENT;
        }
        if (*ret_uid == 0) {
                snprintf(err, errlen, "server.user: '%s' is root; the HTTP side must not be", name);
                return -EINVAL;
        }
        return 0;
}

/* ---- the new image ----------------------------------------------------------- */

/* Drop to server.user for good, then take away what the HTTP side never
 * needs: the filesystem beyond the layer directory (status.json), TCP
 * beyond the DNS relay's upstreams, every syscall off its list. */
static int confine(uid_t uid, gid_t gid, const char *layer_dir, bool dns_relay)
{
        struct policy_prog filter;
        int r = policy_build_server(&filter);
        if (r < 0) {
                log_error(NULL, "http.filter", "error=%s", log_q(strerror(-r)));
                return r;
        }
        struct sock_fprog prog = {.len = filter.len, .filter = filter.insns};
        /* opened while root: a layer directory server.user cannot reach
         * stays unreadable, but the rule is made all the same */
        _cleanup_close_ int layer = open(layer_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
        /* the runs' identity step: an empty bounding set, locked
         * securebits, no groups, server.user for every id, no capability
         * left (checked), no_new_privs, the parent-death signal */
        if ((r = jail_identity_drop(uid, gid)) < 0 ||
            (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0 && (r = -errno) < 0)) {
                log_error(NULL, "http.drop_privileges", "error=%s", log_q(strerror(-r)));
                policy_prog_free(&filter);
                return r;
        }
        const uint16_t dns_port[] = {53};
        r = landlock_confine(&layer, layer >= 0 ? 1 : 0, dns_port, dns_relay ? 1 : 0);
        if (r == -EOPNOTSUPP)
                log_warn(NULL, "http.landlock_unavailable",
                         "effect=\"the HTTP process can read what server.user can read\"");
        else if (r < 0)
                log_error(NULL, "http.landlock", "error=%s", log_q(strerror(-r)));
        if ((r == 0 || r == -EOPNOTSUPP) &&
            prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) < 0) {
                r = -errno;
                log_error(NULL, "http.filter", "error=%s", log_q(strerror(errno)));
        }
        policy_prog_free(&filter);
        return r == -EOPNOTSUPP ? 0 : r;
}

static int read_settings(int fd, struct settings *s, char **ret_yaml)
{
        if (pread(fd, s, sizeof(*s), 0) != (ssize_t)sizeof(*s) || s->magic != SETTINGS_MAGIC ||
            s->config_len > CONFIG_MAX || s->n_dns > HTTP_EXEC_DNS_MAX || s->runs_len > 32 ||
            !memchr(s->layer_dir, '\0', sizeof(s->layer_dir)))
                return -EINVAL;
        char *yaml = malloc(s->config_len + 1);
        if (!yaml)
                return -ENOMEM;
        if (pread(fd, yaml, s->config_len, sizeof(*s)) != (ssize_t)s->config_len) {
                free(yaml);
                return -EINVAL;
        }
        yaml[s->config_len] = '\0';
        *ret_yaml = yaml;
        return 0;
}

/* Runs with network resolve through the gateway: relay their queries to
 * the host's resolvers, from this process (unprivileged, in the host's
 * network). NULL when there is no relay; the sockets are then closed. */
static struct dns_relay *start_relay(const struct settings *s)
{
        struct dns_relay *relay = NULL;
        if (s->dns_udp_fd < 0)
                return NULL;
        struct dns_relay_config rc = {
            .udp_fd = s->dns_udp_fd,
            .tcp_fd = s->dns_tcp_fd,
            .upstreams = s->dns,
            .n_upstreams = s->n_dns,
            .timeout_ms = DNS_TIMEOUT_MS,
            .max_inflight = DNS_MAX_INFLIGHT,
            .max_tcp = DNS_MAX_TCP,
            .runs = {.addr = s->runs_addr, .len = s->runs_len},
            .source_rate = DNS_SOURCE_RATE,
            .source_burst = DNS_SOURCE_BURST,
            .source_inflight = DNS_SOURCE_INFLIGHT,
            .source_tcp = DNS_SOURCE_TCP,
        };
        int r = s->n_dns ? dns_relay_start(&rc, &relay) : -ENOENT;
        if (r < 0) {
                log_error(
                    NULL, "dns.relay_failed", "error=%s",
                    log_q(r == -ENOENT ? "no resolver: set network.dns_servers" : strerror(-r)));
                safe_close(s->dns_udp_fd);
                safe_close(s->dns_tcp_fd);
        }
        return relay;
}

int http_exec_main(int settings_fd)
{
        /* nothing of server.user's may look into this process, from now */
        prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
        log_setup("http", false, -1);
        struct settings s;
        char *yaml = NULL;
        int r = read_settings(settings_fd, &s, &yaml);
        close(settings_fd);
        if (r < 0) {
                log_error(NULL, "http.settings", "error=%s", log_q(strerror(-r)));
                return 1;
        }
        log_setup("http", false, s.log_file_fd);
        json_object_seed(0); /* jansson's hash seed, from /dev/urandom while it can */
        /* after confine() set the parent-death signal: a jailer gone before
         * that is seen here, one gone after kills this process */
        if (confine(s.uid, s.gid, s.layer_dir, s.dns_udp_fd >= 0) < 0 ||
            getppid() != s.jailer_pid) {
                explicit_bzero(yaml, s.config_len);
                free(yaml);
                return 1;
        }
        struct config cfg;
        char err[512];
        r = config_load_buffer(&cfg, "settings", yaml, s.config_len, NULL, err, sizeof(err));
        explicit_bzero(yaml, s.config_len);
        free(yaml);
        if (r < 0) {
                log_error(NULL, "http.settings", "error=%s", log_q(err));
                return 1;
        }
        log_setup("http", cfg.debug, s.log_file_fd);
        log_set_json(strcmp(cfg.log_format, "json") == 0);
        const struct shared_stats *stats = stats_attach(s.stats_fd);
        close(s.stats_fd);
        struct http_server_opts o = {.cfg = &cfg,
                                     .listen_fd = s.listen_fd,
                                     .metrics_fd = s.metrics_fd,
                                     .shell_fd = s.shell_fd,
                                     .ctrl_fd = s.ctrl_fd,
                                     .log_sock = s.log_sock,
                                     .stats = stats};
        struct dns_relay *relay = start_relay(&s);
        metrics_set_dns_relay(relay);
        int code = http_server_run(&o);
        metrics_set_dns_relay(NULL);
        dns_relay_stop(relay);
        return code;
}

/* ---- --check-http-confinement ------------------------------------------------- */

/* In the confined child: what each attempt got, as a line for the parent;
 * true if it was allowed. */
static bool try_open(const char *path, int flags)
{
        int fd = open(path, flags | O_CLOEXEC, 0600);
        printf("%s %s: %s\n", fd < 0 ? "refused" : "ALLOWED",
               (flags & O_ACCMODE) == O_RDONLY ? "read" : "write", path);
        if (fd < 0)
                printf("  (%s)\n", strerror(errno));
        else
                close(fd);
        return fd >= 0;
}

static bool try_connect(uint16_t port)
{
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in sa = {.sin_family = AF_INET,
                                 .sin_port = htons(port),
                                 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        int r = fd < 0 ? -1 : connect(fd, (struct sockaddr *)&sa, sizeof(sa));
        bool refused = r < 0 && (errno == EACCES || errno == EPERM);
        printf("%s connect: 127.0.0.1:%u\n  (%s)\n", refused ? "refused" : "ALLOWED",
               (unsigned)port, r < 0 ? strerror(errno) : "connected");
        if (fd >= 0)
                close(fd);
        return !refused;
}

int http_exec_check(const struct config *cfg)
{
        uid_t uid;
        gid_t gid;
        char err[256];
        if (http_exec_user(cfg->user, &uid, &gid, err, sizeof(err)) < 0) {
                fprintf(stderr, "lockboxd: %s\n", err);
                return 1;
        }
        int abi = landlock_abi();
        printf("landlock: %s (ABI %d)\n", abi > 0 ? "available" : "NOT AVAILABLE", abi);
        fflush(stdout);
        int allowed[2];
        if (pipe2(allowed, O_CLOEXEC) < 0)
                return 1;
        pid_t pid = fork();
        if (pid == 0) {
                if (confine(uid, gid, cfg->layer_dir, true) < 0)
                        _exit(3);
                /* world-readable files, server.user's own /proc entry, a
                 * write where its permissions would not stop it */
                char path[4200];
                snprintf(path, sizeof(path), "%s/lockbox-confinement-check", cfg->layer_dir);
                unsigned char n = try_open("/etc/passwd", O_RDONLY) +
                                  try_open("/proc/self/status", O_RDONLY) +
                                  try_open(path, O_WRONLY | O_CREAT) + try_connect(22);
                fflush(stdout);
                if (write(allowed[1], &n, 1) != 1)
                        _exit(5);
                /* the filter kills the process: the parent reports it */
                execve("/bin/true", (char *[]){(char *)"true", NULL}, (char *[]){NULL});
                _exit(4);
        }
        close(allowed[1]);
        unsigned char n_allowed = 1; /* none reported: the child failed */
        int status = 0;
        bool got = pid > 0 && read(allowed[0], &n_allowed, 1) == 1;
        close(allowed[0]);
        if (pid < 0 || waitpid(pid, &status, 0) < 0)
                return 1;
        bool killed = WIFSIGNALED(status) && WTERMSIG(status) == SIGSYS;
        printf("%s execve: /bin/true\n  (%s)\n", killed ? "refused" : "ALLOWED",
               killed ? "killed by the syscall filter" : "not killed");
        return got && n_allowed == 0 && killed && abi > 0 ? 0 : 1;
}
