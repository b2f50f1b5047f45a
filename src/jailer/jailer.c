/* The jailer (see jailer.h), in src/jailer/ with its runs and pools. Its
 * event loop (loop.c) watches the control socket, a signalfd, the HTTP
 * process's pidfd, a one-second tick for retries and, each with its own
 * callback, per run its channel, pidfd, timerfd, sync socket and seccomp
 * listener (run.c), the zygote's socket and pidfd (zygote.c) and pip's
 * (src/deps/). jailer.c owns what every run is made with (struct run_env)
 * and wires the rest: the pools to the dependency layer's switches.
 * Handlers only mark a run finished; finished runs are freed after the
 * batch. */
#include "jailer/jailer.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/util.h"
#include "config/config.h"
#include "ipc/channel.h"
#include "ipc/proto.h"
#include "ipc/stats.h"
#include "net/emptyns.h"
#include "net/net.h"
#include "jail/cgroup.h"
#include "jail/policy.h"
#include "jail/uidpool.h"
#include "deps/deps.h"
#include "jailer/internal.h"
#include "shell/shell.h"
#include "shell/stats.h"
#include "ipc/shell_proto.h"
#include "runtime/runtime.h"

struct pending;

struct jailer {
        struct run_env env; /* what runs are made with, lent to runs, pools and zygote */
        struct runs *runs;
        struct warm *warm;
        struct shell *shell; /* shell jobs (shell.enabled), or NULL */
        int stats_fd;        /* the statistics page's sealed memfd, handed to the HTTP process */
        int sigfd, ctrl, http_pidfd, tickfd;
        int log_sock; /* to the HTTP process: the reopened log file */
        pid_t http_pid;
        struct watch w_ctrl, w_sig, w_http, w_tick, w_net;
        struct pending *pending, *pending_tail; /* RUNs waiting for a dying run */
        bool stopping, http_gone;
        bool ctrl_closed; /* the HTTP process sent what is off the menu */
        int exit_code;
        int64_t stop_deadline_ms; /* monotonic_ms() */
};

/* ---- start-up ---------------------------------------------------------- */

static int build_filters(struct jailer *j, struct lang_slot *s, char *err, size_t errlen)
{
        for (int net = 0; net <= 1; net++) {
                struct policy_opts o = {
                    .network = net,
                    .no_memcg = cgroup_root_mode(j->env.cg) == CGROUP_NONE,
                    .spawn_kills = s->rt->spawn_kills,
                    .self_pid = 1,
                    .lang_allow = s->rt->lang_allow,
                    .extra = j->env.cfg->allowed_syscalls,
                    .n_extra = j->env.cfg->n_allowed_syscalls,
                };
                int r = policy_build(&o, &s->filter[net]);
                if (r < 0) {
                        snprintf(err, errlen, "seccomp policy for %s: %s", s->rt->name,
                                 strerror(-r));
                        return r;
                }
        }
        return 0;
}

static void on_signal(void *data, uint32_t events);
static void on_tick(void *data, uint32_t events);
static void on_refusals(void *data, uint32_t events);

static int setup_loop(struct jailer *j, char *err, size_t errlen)
{
        sigset_t mask;
        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGHUP);
        /* the first tick at once: it starts the first dependency install */
        struct itimerspec tick = {.it_value = {.tv_nsec = 1}, .it_interval = {.tv_sec = 1}};
        int r = loop_new(&j->env.loop);
        if (r < 0) {
                snprintf(err, errlen, "event loop: %s", strerror(-r));
                return r;
        }
        if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0 ||
            (j->sigfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK)) < 0 ||
            (j->tickfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK)) < 0 ||
            timerfd_settime(j->tickfd, 0, &tick, NULL) < 0) {
                snprintf(err, errlen, "event loop: %s", strerror(errno));
                return -errno;
        }
        j->w_sig = (struct watch){.fn = on_signal, .data = j};
        j->w_tick = (struct watch){.fn = on_tick, .data = j};
        j->w_net = (struct watch){.fn = on_refusals, .data = j};
        r = loop_watch(j->env.loop, j->sigfd, &j->w_sig);
        if (r == 0 && j->env.net && net_refusal_fd(j->env.net) >= 0)
                r = loop_watch(j->env.loop, net_refusal_fd(j->env.net), &j->w_net);
        return r < 0 ? r : loop_watch(j->env.loop, j->tickfd, &j->w_tick);
}

/* Node.js is optional: a host without it still serves Python, and nodejs
 * requests get a clear -500. */
static void add_optional_node(struct jailer *j)
{
        char err[256] = "";
        if (runtime_node_new(j->env.cfg, &j->env.langs[LANG_NODEJS].rt, err, sizeof(err)) < 0)
                log_warn(NULL, "runtime.unavailable", "language=nodejs error=%s", log_q(err));
}

/* Namespace mode: build the runs' network. A host that cannot is not a
 * reason to stop serving: runs with network are refused with the reason,
 * and the fix, in one line logged now and answered to each. */
static void setup_network(struct jailer *j)
{
        const struct config *c = j->env.cfg;
        char err[256] = "out of memory";
        if (!c->enable_network || !config_net_namespace(c))
                return;
        /* also with the shell API off now: its kept bindings' links
         * would hold the subnet */
        shell_unplug_kept(c);
        if (net_open(c, &j->env.net, err, sizeof(err)) == 0 &&
            (j->env.resolv_conf = net_resolv_conf(j->env.net)) != NULL) {
                char gw[32];
                struct netaddr_prefix g = {.addr = net_gateway(j->env.net), .len = 32};
                netaddr_format_prefix(&g, gw, sizeof(gw));
                log_info(NULL, "network.ready", "subnet=%s gateway=%s allow=%zu egress_only=%zu",
                         c->net_subnet, gw, c->n_net_allow, c->n_net_egress_only);
                return;
        }
        snprintf(j->env.net_error, sizeof(j->env.net_error),
                 "network unavailable: %s (lockboxd needs CAP_NET_ADMIN, veth and nftables; "
                 "or set enable_network: false, see docs/DEPLOY.md)",
                 err);
        log_error(NULL, "network.unavailable", "error=%s", log_q(j->env.net_error));
}

/* A new dependency layer: armed Python runs hold the old one. */
static void drain_python_pools(void *data)
{
        struct jailer *j = data;
        warm_drain(j->warm, LANG_PYTHON3);
}

int jailer_new(const struct config *cfg, struct jailer **ret, char *err, size_t errlen)
{
        struct jailer *j = calloc(1, sizeof(*j));
        if (!j)
                return -ENOMEM;
        *j = (struct jailer){.env.cfg = cfg,
                             .sigfd = -1,
                             .ctrl = -1,
                             .http_pidfd = -1,
                             .stats_fd = -1,
                             .tickfd = -1,
                             .log_sock = -1};
        int r = cgroup_root_open(&j->env.cg);
        if (r == 0 && (r = uidpool_new((uid_t)cfg->uid_min, (uid_t)config_installer_uid(cfg) - 1,
                                       &j->env.uids)) < 0)
                snprintf(err, errlen, "uid pool %d-%d: %s", cfg->uid_min, cfg->uid_max,
                         strerror(-r));
        if (r == 0)
                r = runtime_python_new(cfg, &j->env.langs[LANG_PYTHON3].rt, err, errlen);
        if (r == 0)
                add_optional_node(j);
        for (size_t i = 0; r == 0 && i < ELEMENTSOF(j->env.langs); i++)
                if (j->env.langs[i].rt)
                        r = build_filters(j, &j->env.langs[i], err, errlen);
        for (int net = 0; r == 0 && net <= 1; net++)
                if (!(j->env.envp[net] = runtime_env(cfg, net)))
                        r = -ENOMEM;
        if (r == 0 && !(j->env.stats = stats_create(&j->stats_fd))) {
                snprintf(err, errlen, "shared statistics page: %s", strerror(errno));
                r = -ENOMEM;
        }
        for (size_t i = 0; r == 0 && i < ELEMENTSOF(j->env.langs); i++)
                atomic_store(&j->env.stats->runtime[i], j->env.langs[i].rt != NULL);
        if (r == 0)
                setup_network(j);
        if (r == 0 && (r = emptyns_new(&j->env.emptyns)) < 0) {
                /* runs without network then get theirs from the clone */
                log_warn(NULL, "network.empty_namespaces_unavailable", "error=%s",
                         log_q(strerror(-r)));
                r = 0;
        }
        if (r == 0)
                r = setup_loop(j, err, errlen);
        if (r == 0)
                r = runs_new(&j->env, &j->runs, err, errlen);
        if (r == 0 && (r = deps_new(cfg, j->env.loop, &j->env.deps, err, errlen)) == 0)
                deps_on_layer_switched(j->env.deps, drain_python_pools, j);
        if (r == 0 && cfg->shell_enabled) {
                /* bindings reach the network as runs with network do */
                struct shell_deps d = {.cfg = cfg, .loop = j->env.loop, .cg = j->env.cg};
                if (cfg->enable_network && !config_net_namespace(cfg))
                        d.net_mode = SHELL_NET_HOST;
                else if (cfg->enable_network && j->env.net && run_env_network_usable(&j->env))
                        d = (struct shell_deps){.cfg = cfg,
                                                .loop = j->env.loop,
                                                .cg = j->env.cg,
                                                .net_mode = SHELL_NET_NAMESPACE,
                                                .net = j->env.net,
                                                .resolv_conf = j->env.resolv_conf};
                shell_stats_attach(j->env.stats, cfg);
                r = shell_new(&d, &j->shell, err, errlen);
        }
        if (r < 0) {
                jailer_free(j);
                return r;
        }
        log_info(NULL, "jailer.ready", "cgroup=%s uid_pool=%d-%d mode=%s",
                 (const char *[]){"none", "v1", "v2"}[cgroup_root_mode(j->env.cg)], cfg->uid_min,
                 cfg->uid_max, cfg->warm_mode);
        *ret = j;
        return 0;
}

struct jailer *jailer_free(struct jailer *j)
{
        if (!j)
                return NULL;
        j->warm = warm_free(j->warm);
        j->shell = shell_free(j->shell);
        j->runs = runs_free(j->runs);
        j->env.deps = deps_free(j->env.deps);
        for (size_t i = 0; i < ELEMENTSOF(j->env.langs); i++) {
                runtime_free(j->env.langs[i].rt);
                policy_prog_free(&j->env.langs[i].filter[0]);
                policy_prog_free(&j->env.langs[i].filter[1]);
        }
        runtime_strv_free(j->env.envp[0]);
        runtime_strv_free(j->env.envp[1]);
        uidpool_free(j->env.uids);
        cgroup_root_free(j->env.cg);
        loop_free(j->env.loop);
        safe_close(j->sigfd);
        safe_close(j->tickfd);
        safe_close(j->http_pidfd);
        stats_unmap(j->env.stats);
        safe_close(j->stats_fd);
        net_close(j->env.net);
        emptyns_free(j->env.emptyns);
        free(j->env.resolv_conf);
        free(j);
        return NULL;
}

uint32_t jailer_gateway(const struct jailer *j)
{
        return j->env.net ? net_gateway(j->env.net) : 0;
}

int jailer_stats_fd(const struct jailer *j)
{
        return j->stats_fd;
}

/* ---- requests --------------------------------------------------------------- */

static bool fd_is(int fd, mode_t type)
{
        struct stat st;
        return fstat(fd, &st) == 0 && (st.st_mode & S_IFMT) == type;
}

static bool run_msg_valid(const struct proto_run *m, const int *fds, size_t nf)
{
        return nf == 1 && m->hdr.magic == PROTO_MAGIC && m->hdr.type == PROTO_RUN &&
               m->language > 0 && m->language < PROTO_LANG_SLOTS && m->network <= 1 &&
               fd_is(fds[0], S_IFSOCK);
}

static void sanitize_trace(char *t)
{
        for (; *t; t++)
                if (!((*t >= '0' && *t <= '9') || (*t >= 'a' && *t <= 'f')))
                        *t = '_';
}

/* An armed run if one waits, else a new one (a zygote fork or a cold
 * start). chan is consumed. */
static void start_run(struct jailer *j, struct proto_run *m, int chan)
{
        struct run *run = warm_take(j->warm, m->language, m->network);
        if (run) {
                run_assign(run, TAKE_FD(chan), m->trace_id);
                return;
        }
        char err[200] = "";
        int r = run_create(j->runs, m->language, m->network, NULL, NULL, chan, m->trace_id, err,
                           sizeof(err));
        if (r == -EAGAIN && runs_reap_answered(j->runs))
                r = run_create(j->runs, m->language, m->network, NULL, NULL, chan, m->trace_id, err,
                               sizeof(err));
        if (r == -EAGAIN)
                run_refuse(chan, RUN_STATUS_NO_IDENTITY, NULL);
        else if (r < 0) {
                log_error(m->trace_id, "run.spawn_failed", "error=%s", log_q(err));
                run_refuse(chan, RUN_STATUS_INTERNAL, err);
        } else
                chan = -1; /* the run's now */
        safe_close(chan);
}

/* A RUN whose worker slot a run answered early still holds: its process
 * is dying (SIGKILLed, the kernel tearing it down, ~1.5 ms for a copy of
 * the zygote). Started once that one is reaped, so no more than
 * max_workers runs, each up to limits.memory, ever live at once. */
struct pending {
        struct pending *next;
        struct proto_run m;
        int chan;
};

static void serve(struct jailer *j, struct proto_run *m, int chan);

static bool wait_for_dying(struct jailer *j, struct proto_run *m, int chan)
{
        if (j->stopping ||
            runs_active(j->runs) + runs_dying(j->runs) < (unsigned)j->env.cfg->max_workers ||
            runs_active(j->runs) >= (unsigned)j->env.cfg->max_workers)
                return false;
        struct pending *p = calloc(1, sizeof(*p));
        if (!p)
                return false;
        *p = (struct pending){.m = *m, .chan = chan};
        if (j->pending_tail)
                j->pending_tail->next = p;
        else
                j->pending = p;
        j->pending_tail = p;
        return true;
}

/* After each event batch: the RUNs that waited for a dying run, in order,
 * as slots come free (or refused, when stopping). */
static void serve_pending(struct jailer *j)
{
        while (j->pending && (j->stopping || runs_active(j->runs) + runs_dying(j->runs) <
                                                 (unsigned)j->env.cfg->max_workers)) {
                struct pending *p = j->pending;
                j->pending = p->next;
                if (!j->pending)
                        j->pending_tail = NULL;
                serve(j, &p->m, p->chan);
                free(p);
        }
}

/* Refuse what cannot be served, else start it. chan is consumed. */
static void serve(struct jailer *j, struct proto_run *m, int chan)
{
        const struct lang_slot *slot = &j->env.langs[m->language];
        char msg[sizeof(j->env.net_error)] = "";
        enum run_status refusal = RUN_STATUS_INTERNAL;
        if (wait_for_dying(j, m, chan))
                return;
        if (j->stopping || runs_active(j->runs) >= (unsigned)j->env.cfg->max_workers) {
                refusal = RUN_STATUS_BUSY;
                snprintf(msg, sizeof(msg), "%s", j->stopping ? "server is shutting down" : "");
        } else if (!slot->rt) {
                snprintf(msg, sizeof(msg),
                         "%s is not available on this host (%s was not found at start-up)",
                         m->language == LANG_NODEJS ? "nodejs" : "python3",
                         m->language == LANG_NODEJS ? "nodejs_path" : "python_path");
        } else if (m->network && !run_env_network_usable(&j->env)) {
                snprintf(msg, sizeof(msg), "%s", j->env.net_error);
        } else {
                start_run(j, m, chan);
                return;
        }
        /* Every refusal answers and closes the channel it was handed. */
        run_refuse(chan, refusal, msg[0] ? msg : NULL);
        safe_close(chan);
}

/* A message off the menu: the HTTP process is broken or not ours any
 * more. Close its channel (kill it: it has no other) and let the usual
 * way out follow, every run killed and exit 1 for the supervisor. */
static void distrust_http(struct jailer *j, const char *why, int *fds, size_t nf)
{
        for (size_t i = 0; i < nf; i++)
                safe_close(fds[i]);
        log_error(NULL, "ipc.bad_message", "error=%s effect=\"the HTTP process is killed\"",
                  log_q(why));
        loop_unwatch(j->env.loop, j->ctrl);
        j->ctrl_closed = true;
        if (j->http_pidfd >= 0)
                syscall(SYS_pidfd_send_signal, j->http_pidfd, SIGKILL, NULL, 0);
}

static void on_run_msg(struct jailer *j)
{
        struct proto_run m;
        int fds[1] = {-1};
        size_t nf = 0;
        int r = channel_recv(j->ctrl, &m, sizeof(m), fds, 1, &nf);
        if (r <= 0 || !run_msg_valid(&m, fds, nf)) {
                distrust_http(j, r < 0 ? strerror(-r) : "invalid RUN", fds, nf);
                return;
        }
        m.trace_id[PROTO_TRACE_LEN] = '\0';
        sanitize_trace(m.trace_id);
        serve(j, &m, fds[0]);
}

static void on_deps_msg(struct jailer *j)
{
        struct proto_deps m;
        int fds[1] = {-1};
        size_t nf = 0;
        int r = channel_recv(j->ctrl, &m, sizeof(m), fds, 1, &nf);
        if (r <= 0 || nf != 1 || m.hdr.magic != PROTO_MAGIC || !fd_is(fds[0], S_IFSOCK)) {
                distrust_http(j, "invalid DEPS", fds, nf);
                return;
        }
        deps_request(j->env.deps, fds[0]);
}

static void on_shell_msg(struct jailer *j)
{
        struct proto_shell m;
        int fds[1] = {-1};
        size_t nf = 0;
        int r = channel_recv(j->ctrl, &m, sizeof(m), fds, 1, &nf);
        if (r <= 0 || nf != 1 || m.hdr.magic != PROTO_MAGIC || !fd_is(fds[0], S_IFSOCK) ||
            !j->shell) {
                distrust_http(j, "invalid SHELL", fds, nf);
                return;
        }
        shell_call(j->shell, fds[0]);
}

/* The menu: RUN, DEPS and SHELL, told apart by the header; anything else
 * ends the HTTP process (distrust_http). */
static void on_ctrl(void *data, uint32_t events)
{
        struct jailer *j = data;
        for (;;) {
                struct proto_header h;
                ssize_t n = RETRY_EINTR(recv(j->ctrl, &h, sizeof(h), MSG_PEEK | MSG_DONTWAIT));
                if (n < 0 && errno == EAGAIN)
                        return;
                if (n == 0) { /* the HTTP process closed its end */
                        loop_unwatch(j->env.loop, j->ctrl);
                        return;
                }
                if (n == (ssize_t)sizeof(h) && h.magic == PROTO_MAGIC && h.type == PROTO_DEPS)
                        on_deps_msg(j);
                else if (n == (ssize_t)sizeof(h) && h.magic == PROTO_MAGIC && h.type == PROTO_SHELL)
                        on_shell_msg(j);
                else
                        on_run_msg(j); /* validates: what is not a RUN ends it */
                if (j->ctrl_closed)
                        return;
        }
}

/* ---- the loop -------------------------------------------------------------- */

static void kill_all(struct jailer *j)
{
        runs_kill_all(j->runs);
        warm_stop(j->warm);
        shell_stop(j->shell);
}

static void begin_stop(struct jailer *j, const char *why)
{
        if (j->stopping)
                return;
        j->stopping = true;
        log_info(NULL, "jailer.stopping", "reason=%s runs=%u", why, runs_active(j->runs));
        /* Armed runs and the zygote serve no one any more. */
        runs_stop(j->runs);
        warm_stop(j->warm);
        /* calls waiting on a shell job are answered now, so the HTTP side
         * can finish; the jobs themselves go on (shell.keep_jobs) */
        shell_stop(j->shell);
        if (!j->http_gone)
                kill(j->http_pid, SIGTERM);
        /* The HTTP side lets running requests finish: at most one deadline. */
        j->stop_deadline_ms = monotonic_ms() + ((int64_t)j->env.cfg->worker_timeout + 10) * 1000;
}

/* SIGHUP: log rotation. Reopen log_path's file and hand it to the HTTP
 * process, which cannot open it itself. */
static void reopen_log(struct jailer *j)
{
        int r = log_reopen_file();
        if (r < 0) {
                log_error(NULL, "log.reopen_failed", "error=%s", log_q(strerror(-r)));
                return;
        }
        int fd = log_get_file_fd();
        if (fd < 0 || j->log_sock < 0)
                return;
        if ((r = channel_send(j->log_sock, "L", 1, &fd, 1)) < 0)
                log_warn(NULL, "log.handover_failed", "error=%s", log_q(strerror(-r)));
        log_info(NULL, "log.reopened", "%s", "");
}

static void on_signal(void *data, uint32_t events)
{
        struct jailer *j = data;
        struct signalfd_siginfo si;
        while (read(j->sigfd, &si, sizeof(si)) == sizeof(si)) {
                if (si.ssi_signo == SIGHUP) {
                        reopen_log(j);
                        continue;
                }
                if (j->stopping && !j->http_gone) {
                        log_warn(NULL, "jailer.forced_stop", "signal=%u", si.ssi_signo);
                        kill(j->http_pid, SIGKILL);
                }
                begin_stop(j, si.ssi_signo == SIGINT ? "SIGINT" : "SIGTERM");
        }
}

static void on_http_exit(void *data, uint32_t events)
{
        struct jailer *j = data;
        int status = 0;
        if (RETRY_EINTR(waitpid(j->http_pid, &status, WNOHANG)) <= 0)
                return;
        j->http_gone = true;
        loop_unwatch(j->env.loop, j->http_pidfd);
        bool clean = j->stopping && WIFEXITED(status) && WEXITSTATUS(status) == 0;
        if (!clean) {
                log_error(NULL, "http.died", "status=%d", status);
                j->exit_code = 1;
        }
        begin_stop(j, "http process exited");
        kill_all(j);
}

static bool tracked(const struct jailer *j, pid_t pid)
{
        return pid == j->http_pid || warm_zygote_owns(j->warm, pid) ||
               deps_owns(j->env.deps, pid) || runs_own(j->runs, pid) || shell_owns(j->shell, pid);
}

/* The jailer's children now, from /proc (at most max); -1 if unreadable. */
static int list_children(pid_t *out, int max)
{
        char path[64], buf[4096];
        snprintf(path, sizeof(path), "/proc/self/task/%d/children", (int)getpid());
        FILE *f = fopen(path, "re");
        if (!f)
                return -1;
        size_t n = fread(buf, 1, sizeof(buf) - 1, f);
        fclose(f);
        buf[n] = '\0';
        int k = 0;
        for (char *save = NULL, *t = strtok_r(buf, " \n", &save); t && k < max;
             t = strtok_r(NULL, " \n", &save))
                if ((out[k] = (pid_t)atoi(t)) > 0)
                        k++;
        return k;
}

/* A child nobody tracks (one the zygote cloned just before it died, so its
 * SPAWNED never came) exits by itself when its pipes close; reap it then.
 * Only while no SPAWNED is pending, or a pid about to be named could go. */
static void reap_strays(struct jailer *j)
{
        pid_t kids[512];
        if (warm_spawns_pending(j->warm))
                return;
        int n = list_children(kids, (int)ELEMENTSOF(kids));
        for (int i = 0; i < n; i++)
                if (!tracked(j, kids[i]) && waitpid(kids[i], NULL, WNOHANG) == kids[i])
                        log_warn(NULL, "jailer.reaped_stray", "pid=%d", (int)kids[i]);
}

/* At exit nothing is tracked any more; a stray still exiting (or not yet
 * reaped) must not outlive lockboxd, so kill it and wait for it. Shell
 * jobs' keepers and bindings' inits let go alive are no strays: the next
 * lockboxd adopts them. */
static void reap_all_children(const struct jailer *j)
{
        pid_t kids[512];
        int n;
        for (int round = 0; round < 64 && (n = list_children(kids, (int)ELEMENTSOF(kids))) > 0;
             round++) {
                int strays = 0;
                for (int i = 0; i < n; i++) {
                        if (shell_keeps(j->shell, kids[i]))
                                continue;
                        strays++;
                        kill(kids[i], SIGKILL);
                        if (RETRY_EINTR(waitpid(kids[i], NULL, 0)) == kids[i])
                                log_warn(NULL, "jailer.reaped_stray", "pid=%d at exit",
                                         (int)kids[i]);
                }
                if (strays == 0)
                        break;
        }
}

/* Resident bytes of a process, from /proc/<pid>/statm; 0 if unknown. */
static long long resident_bytes(pid_t pid)
{
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/statm", (int)pid);
        FILE *f = pid > 0 ? fopen(path, "re") : NULL;
        long long size, resident;
        int n = f ? fscanf(f, "%lld %lld", &size, &resident) : 0;
        if (f)
                fclose(f);
        return n == 2 ? resident * sysconf(_SC_PAGESIZE) : 0;
}

/* lockboxd's own memory for /metrics: the HTTP process reads no /proc */
static void publish_memory(struct jailer *j)
{
        if (!j->env.cfg->metrics)
                return; /* nobody reads them */
        atomic_store(&j->env.stats->rss[STATS_PROC_HTTP], resident_bytes(j->http_pid));
        atomic_store(&j->env.stats->rss[STATS_PROC_JAILER], resident_bytes(getpid()));
        atomic_store(&j->env.stats->rss[STATS_PROC_ZYGOTE],
                     resident_bytes(atomic_load(&j->env.stats->zygote_pid)));
}

/* What the idle-namespace pools did, [0] without network, [1] with. */
static void publish_namespaces(struct jailer *j)
{
        struct shared_stats *st = j->env.stats;
        for (int net = 0; net <= 1; net++) {
                struct nspool_stats ps = {0};
                if (net && j->env.net)
                        net_pool_stats(j->env.net, &ps);
                else if (!net && j->env.emptyns)
                        emptyns_pool_stats(j->env.emptyns, &ps);
                atomic_store(&st->netns_reused[net], ps.reused);
                atomic_store(&st->netns_changed[net], ps.changed);
                atomic_store(&st->netns_sockets_destroyed[net], ps.sockets_destroyed);
                atomic_store(&st->netns_abandoned[net], ps.abandoned);
                atomic_store(&st->netns_idle[net], ps.idle);
                atomic_store(&st->netns_settling[net], ps.settling);
                atomic_store(&st->netns_lingering[net], ps.lingering);
        }
}

static void on_tick(void *data, uint32_t events)
{
        struct jailer *j = data;
        uint64_t ticks;
        if (read(j->tickfd, &ticks, sizeof(ticks)) != sizeof(ticks))
                return;
        warm_on_tick(j->warm);
        if (!j->stopping)
                deps_on_tick(j->env.deps);
        reap_strays(j);
        runs_publish_refused(j->runs);
        publish_memory(j);
        publish_namespaces(j);
        shell_stats_publish();
}

static void on_refusals(void *data, uint32_t events)
{
        struct jailer *j = data;
        runs_read_refusals(j->runs);
}

static int loop_timeout_ms(struct jailer *j)
{
        if (!j->stopping || j->http_gone)
                return -1;
        int64_t ms = j->stop_deadline_ms - monotonic_ms();
        if (ms <= 0) {
                log_warn(NULL, "jailer.stop_deadline", "effect=\"killing the HTTP process\"");
                kill(j->http_pid, SIGKILL);
                return 1000;
        }
        return (int)ms;
}

int jailer_run(struct jailer *j, int ctrl_fd, int log_sock, pid_t http_pid)
{
        char err[200] = "";
        j->ctrl = ctrl_fd;
        j->log_sock = log_sock;
        j->http_pid = http_pid;
        j->http_pidfd = (int)syscall(SYS_pidfd_open, http_pid, 0);
        j->w_ctrl = (struct watch){.fn = on_ctrl, .data = j};
        j->w_http = (struct watch){.fn = on_http_exit, .data = j};
        if (j->http_pidfd < 0 || loop_watch(j->env.loop, ctrl_fd, &j->w_ctrl) < 0 ||
            loop_watch(j->env.loop, j->http_pidfd, &j->w_http) < 0 ||
            warm_new(&j->env, j->runs, &j->warm, err, sizeof(err)) < 0) {
                log_error(NULL, "jailer.start_failed", "error=%s",
                          log_q(*err ? err : strerror(errno)));
                kill(http_pid, SIGKILL);
                waitpid(http_pid, NULL, 0);
                return 1;
        }
        warm_refill(j->warm);
        warm_publish(j->warm);
        while (!(j->http_gone && runs_empty(j->runs) && !warm_zygote_alive(j->warm))) {
                int timeout = loop_timeout_ms(j);
                int waits[] = {warm_refill_wait_ms(j->warm), net_wait_ms(j->env.net),
                               emptyns_wait_ms(j->env.emptyns), shell_wait_ms(j->shell)};
                for (size_t i = 0; i < ELEMENTSOF(waits); i++)
                        if (waits[i] >= 0 && (timeout < 0 || waits[i] < timeout))
                                timeout = waits[i];
                int n = loop_run_once(j->env.loop, timeout);
                if (n < 0 && n != -EINTR) {
                        log_error(NULL, "jailer.epoll", "error=%s", log_q(strerror(-n)));
                        kill_all(j);
                        return 1;
                }
                runs_sweep(j->runs);
                shell_tick(j->shell);
                net_tick(j->env.net); /* namespaces settled: serve again or go */
                emptyns_tick(j->env.emptyns);
                warm_sweep(j->warm);
                serve_pending(j);
                warm_refill(j->warm);
                warm_publish(j->warm);
        }
        j->stopping = true;
        serve_pending(j); /* refused: none may be left unanswered */
        reap_all_children(j);
        log_info(NULL, "jailer.stopped", "exit_code=%d", j->exit_code);
        return j->exit_code;
}
