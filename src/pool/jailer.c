/* The jailer loop (see jailer.h). One epoll set holds the control socket,
 * a signalfd, the HTTP process's pidfd and, per run, its channel, pidfd,
 * deadline timerfd and seccomp listener. Handlers only mark a run finished;
 * finished runs are freed after the batch, never inside a callback. */
#include "pool/jailer.h"

#include <errno.h>
#include <linux/seccomp.h>
#include <seccomp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"
#include "base/util.h"
#include "config/config.h"
#include "ipc/channel.h"
#include "ipc/proto.h"
#include "jail/cgroup.h"
#include "jail/jail.h"
#include "jail/policy.h"
#include "jail/uidpool.h"
#include "runtime/runtime.h"

enum watch_kind { W_CTRL, W_SIGNAL, W_HTTP, W_CHAN, W_PIDFD, W_TIMER, W_LISTENER };

struct watch {
        enum watch_kind kind;
        struct run *run;
};

struct lang_slot {
        struct runtime *rt;
        struct policy_prog filter[2]; /* [network] */
};

struct run {
        struct run *next;
        struct watch w_chan, w_pidfd, w_timer, w_listener;
        const struct lang_slot *slot;
        int chan, timerfd;
        struct jail_proc proc;
        uid_t uid;
        struct cgroup_run *cg;
        char trace[PROTO_TRACE_LEN + 1];
        bool network, finished, killed;
        enum run_reason reason;
        int syscall_nr;
        struct timespec start;
};

struct jailer {
        const struct config *cfg;
        struct lang_slot langs[3]; /* by enum proto_language */
        struct uidpool *uids;
        struct cgroup_root *cg;
        char **env[2];
        int epfd, sigfd, ctrl, http_pidfd;
        pid_t http_pid;
        struct watch w_ctrl, w_sig, w_http;
        struct run *runs;
        unsigned n_runs;
        struct seccomp_notif *notif;
        struct seccomp_notif_resp *resp;
        bool stopping, http_gone;
        int exit_code;
        struct timespec stop_deadline;
};

static uint64_t elapsed_us(const struct timespec *since)
{
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        return (uint64_t)(now.tv_sec - since->tv_sec) * 1000000u +
               (uint64_t)((now.tv_nsec - since->tv_nsec) / 1000);
}

static int watch_add(struct jailer *j, int fd, struct watch *w)
{
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = w};
        return epoll_ctl(j->epfd, EPOLL_CTL_ADD, fd, &ev) < 0 ? -errno : 0;
}

/* ---- start-up ---------------------------------------------------------- */

static int build_filters(struct jailer *j, struct lang_slot *s, char *err, size_t errlen)
{
        for (int net = 0; net <= 1; net++) {
                struct policy_opts o = {
                        .network = net,
                        .no_memcg = cgroup_root_mode(j->cg) == CGROUP_NONE,
                        .spawn_kills = s->rt->spawn_kills,
                        .self_pid = 1,
                        .lang_allow = s->rt->lang_allow,
                        .extra = j->cfg->allowed_syscalls,
                        .n_extra = j->cfg->n_allowed_syscalls,
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

static int setup_loop(struct jailer *j, char *err, size_t errlen)
{
        sigset_t mask;
        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGHUP);
        if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0 ||
            (j->sigfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK)) < 0 ||
            (j->epfd = epoll_create1(EPOLL_CLOEXEC)) < 0) {
                snprintf(err, errlen, "event loop: %s", strerror(errno));
                return -errno;
        }
        if (seccomp_notify_alloc(&j->notif, &j->resp) < 0) {
                snprintf(err, errlen, "seccomp notifications are not supported by this kernel");
                return -ENOTSUP;
        }
        j->w_sig = (struct watch){W_SIGNAL, NULL};
        return watch_add(j, j->sigfd, &j->w_sig);
}

/* Node.js is optional: a host without it still serves Python, and nodejs
 * requests get a clear -500. */
static void add_optional_node(struct jailer *j)
{
        char err[256] = "";
        if (runtime_node_new(j->cfg, &j->langs[LANG_NODEJS].rt, err, sizeof(err)) < 0)
                log_warn(NULL, "runtime.unavailable", "language=nodejs error=%s", log_q(err));
}

int jailer_new(const struct config *cfg, struct jailer **ret, char *err, size_t errlen)
{
        struct jailer *j = calloc(1, sizeof(*j));
        if (!j)
                return -ENOMEM;
        *j = (struct jailer){.cfg = cfg, .epfd = -1, .sigfd = -1, .ctrl = -1, .http_pidfd = -1};
        int r = cgroup_root_open(&j->cg);
        if (r == 0 && (r = uidpool_new((uid_t)cfg->uid_min, (uid_t)cfg->uid_max, &j->uids)) < 0)
                snprintf(err, errlen, "uid pool %d-%d: %s", cfg->uid_min, cfg->uid_max,
                         strerror(-r));
        if (r == 0)
                r = runtime_python_new(cfg, &j->langs[LANG_PYTHON3].rt, err, errlen);
        if (r == 0)
                add_optional_node(j);
        for (size_t i = 0; r == 0 && i < ELEMENTSOF(j->langs); i++)
                if (j->langs[i].rt)
                        r = build_filters(j, &j->langs[i], err, errlen);
        for (int net = 0; r == 0 && net <= 1; net++)
                if (!(j->env[net] = runtime_env(cfg, net)))
                        r = -ENOMEM;
        if (r == 0)
                r = setup_loop(j, err, errlen);
        if (r < 0) {
                jailer_free(j);
                return r;
        }
        log_info(NULL, "jailer.ready", "cgroup=%s uid_pool=%d-%d",
                 (const char *[]){"none", "v1", "v2"}[cgroup_root_mode(j->cg)], cfg->uid_min,
                 cfg->uid_max);
        *ret = j;
        return 0;
}

struct jailer *jailer_free(struct jailer *j)
{
        if (!j)
                return NULL;
        for (size_t i = 0; i < ELEMENTSOF(j->langs); i++) {
                runtime_free(j->langs[i].rt);
                policy_prog_free(&j->langs[i].filter[0]);
                policy_prog_free(&j->langs[i].filter[1]);
        }
        runtime_strv_free(j->env[0]);
        runtime_strv_free(j->env[1]);
        uidpool_free(j->uids);
        cgroup_root_free(j->cg);
        if (j->notif)
                seccomp_notify_free(j->notif, j->resp);
        safe_close(j->epfd);
        safe_close(j->sigfd);
        safe_close(j->http_pidfd);
        free(j);
        return NULL;
}

/* ---- answering --------------------------------------------------------- */

static void send_result(int chan, const struct proto_result *res)
{
        if (chan >= 0 && channel_send(chan, res, sizeof(*res), NULL, 0) < 0)
                log_warn(NULL, "run.result_undeliverable", "error=%s", log_q(strerror(errno)));
}

static void refuse(int chan, enum run_status status, const char *message)
{
        struct proto_result res = {.hdr = {PROTO_MAGIC, PROTO_RESULT}, .status = status};
        snprintf(res.message, sizeof(res.message), "%s", message ? message : "");
        send_result(chan, &res);
}

/* ---- starting a run ------------------------------------------------------ */

/* Remove the run's groups and return its UID (after its processes are gone). */
static void run_release_identity(struct jailer *j, struct run *run)
{
        if (run->cg) {
                int r = cgroup_run_destroy(run->cg);
                if (r < 0) {
                        /* The UID stays out of the pool: its group still
                         * holds something we could not remove. */
                        log_error(run->trace, "run.cgroup_leak", "uid=%u error=%s",
                                  (unsigned)run->uid, log_q(strerror(-r)));
                        run->uid = 0;
                }
                run->cg = cgroup_run_free(run->cg);
        }
        if (run->uid)
                uidpool_release(j->uids, run->uid);
        run->uid = 0;
}

static void run_release(struct jailer *j, struct run *run)
{
        run_release_identity(j, run);
        safe_close(run->timerfd);
        safe_close(run->proc.pidfd);
        safe_close(run->proc.listener);
        safe_close(run->chan);
        run->timerfd = run->proc.pidfd = run->proc.listener = run->chan = -1;
}

static int arm_deadline(struct jailer *j, struct run *run)
{
        run->timerfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
        struct itimerspec its = {.it_value = {.tv_sec = j->cfg->worker_timeout}};
        if (run->timerfd < 0 || timerfd_settime(run->timerfd, 0, &its, NULL) < 0)
                return -errno;
        return 0;
}

static struct jail_spec make_spec(struct jailer *j, struct run *run, const int *fds)
{
        const struct config *c = j->cfg;
        const struct runtime *rt = run->slot->rt;
        bool memcg = cgroup_root_mode(j->cg) != CGROUP_NONE;
        return (struct jail_spec){
                .uid = run->uid,
                .gid = (gid_t)run->uid,
                .network = run->network,
                .hostname = c->hostname,
                .ro_paths = (const char *const *)rt->ro_paths,
                .n_ro_paths = rt->n_ro_paths,
                .limits = {.data_bytes = memcg ? 0 : c->memory_bytes,
                           .nproc = c->processes,
                           .cpu_seconds = c->cpu_seconds,
                           .open_files = c->open_files,
                           .file_bytes = c->file_bytes,
                           .tmp_bytes = c->tmp_bytes,
                           .tmp_inodes = c->tmp_inodes},
                .exec_path = rt->exec_path,
                .argv = rt->argv,
                .envp = j->env[run->network],
                .code_fd = fds[1],
                .stdout_fd = fds[2],
                .stderr_fd = fds[3],
                .filter = &run->slot->filter[run->network],
                .cgroup = run->cg,
        };
}

static int run_spawn(struct jailer *j, struct run *run, const int *fds, char *err, size_t errlen)
{
        int r = uidpool_acquire(j->uids, &run->uid);
        if (r < 0)
                return r;
        if (cgroup_root_mode(j->cg) != CGROUP_NONE) {
                char name[32];
                struct cgroup_limits l = {.memory_bytes = j->cfg->memory_bytes,
                                          .pids = j->cfg->processes};
                snprintf(name, sizeof(name), "run-%u", (unsigned)run->uid);
                if ((r = cgroup_run_create(j->cg, name, &l, &run->cg)) < 0) {
                        snprintf(err, errlen, "cgroup: %s", strerror(-r));
                        return -EIO;
                }
        }
        if ((r = arm_deadline(j, run)) < 0) {
                snprintf(err, errlen, "deadline timer: %s", strerror(-r));
                return -EIO;
        }
        struct jail_spec spec = make_spec(j, run, fds);
        clock_gettime(CLOCK_MONOTONIC, &run->start);
        if ((r = jail_spawn(&spec, &run->proc, err, errlen)) < 0)
                return -EIO;
        run->w_chan = (struct watch){W_CHAN, run};
        run->w_pidfd = (struct watch){W_PIDFD, run};
        run->w_timer = (struct watch){W_TIMER, run};
        run->w_listener = (struct watch){W_LISTENER, run};
        if ((r = watch_add(j, run->chan, &run->w_chan)) < 0 ||
            (r = watch_add(j, run->proc.pidfd, &run->w_pidfd)) < 0 ||
            (r = watch_add(j, run->timerfd, &run->w_timer)) < 0 ||
            (r = watch_add(j, run->proc.listener, &run->w_listener)) < 0) {
                snprintf(err, errlen, "epoll: %s", strerror(-r));
                return -EIO;
        }
        return 0;
}

static bool fd_is(int fd, mode_t type)
{
        struct stat st;
        return fstat(fd, &st) == 0 && (st.st_mode & S_IFMT) == type;
}

static bool run_msg_valid(const struct jailer *j, const struct proto_run *m, const int *fds,
                          size_t nf)
{
        return nf == 4 && m->hdr.magic == PROTO_MAGIC && m->hdr.type == PROTO_RUN &&
               m->language > 0 && m->language < ELEMENTSOF(j->langs) && m->network <= 1 &&
               fd_is(fds[0], S_IFSOCK) && fd_is(fds[1], S_IFIFO) &&
               fd_is(fds[2], S_IFIFO) && fd_is(fds[3], S_IFIFO);
}

static void run_start(struct jailer *j, const struct proto_run *m, int *fds)
{
        if (j->stopping || j->n_runs >= (unsigned)j->cfg->max_workers) {
                refuse(fds[0], RUN_STATUS_BUSY, NULL);
                return;
        }
        if (!j->langs[m->language].rt) {
                refuse(fds[0], RUN_STATUS_INTERNAL, "this language's interpreter is not "
                                                    "available on the host (see the log)");
                return;
        }
        struct run *run = calloc(1, sizeof(*run));
        if (!run) {
                refuse(fds[0], RUN_STATUS_INTERNAL, "out of memory");
                return;
        }
        *run = (struct run){.chan = TAKE_FD(fds[0]), .timerfd = -1,
                            .proc = {.pidfd = -1, .listener = -1},
                            .slot = &j->langs[m->language], .network = m->network};
        memcpy(run->trace, m->trace_id, PROTO_TRACE_LEN);
        for (char *p = run->trace; *p; p++)
                if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
                        *p = '_';
        char err[200] = "";
        int r = run_spawn(j, run, fds, err, sizeof(err));
        if (r < 0) {
                if (r == -EAGAIN)
                        refuse(run->chan, RUN_STATUS_NO_IDENTITY, NULL);
                else {
                        log_error(run->trace, "run.spawn_failed", "error=%s", log_q(err));
                        refuse(run->chan, RUN_STATUS_INTERNAL, err);
                }
                run_release(j, run);
                free(run);
                return;
        }
        run->next = j->runs;
        j->runs = run;
        j->n_runs++;
        log_debug(run->trace, "run.start", "lang=%s uid=%u network=%d pid=%d spawn_us=%llu",
                  run->slot->rt->name, (unsigned)run->uid, run->network, (int)run->proc.pid,
                  (unsigned long long)elapsed_us(&run->start));
}

static void on_ctrl(struct jailer *j)
{
        for (;;) {
                struct proto_run m;
                int fds[4] = {-1, -1, -1, -1};
                size_t nf = 0;
                int r = channel_recv(j->ctrl, &m, sizeof(m), fds, 4, &nf);
                if (r == -EAGAIN)
                        return;
                if (r == 0) { /* the HTTP process closed its end */
                        epoll_ctl(j->epfd, EPOLL_CTL_DEL, j->ctrl, NULL);
                        return;
                }
                if (r < 0) {
                        log_warn(NULL, "ipc.bad_message", "error=%s", log_q(strerror(-r)));
                        continue;
                }
                m.trace_id[PROTO_TRACE_LEN] = '\0';
                if (run_msg_valid(j, &m, fds, nf))
                        run_start(j, &m, fds);
                else
                        log_warn(NULL, "ipc.bad_message", "error=\"invalid RUN\"");
                for (size_t i = 0; i < nf; i++)
                        safe_close(fds[i]);
        }
}

/* ---- during and after a run -------------------------------------------- */

static void run_kill(struct run *run, enum run_reason why)
{
        if (run->reason == REASON_NONE)
                run->reason = why;
        if (!run->killed && run->proc.pidfd >= 0)
                syscall(SYS_pidfd_send_signal, run->proc.pidfd, SIGKILL, NULL, 0);
        run->killed = true;
}

static void on_listener(struct jailer *j, struct run *run, uint32_t events)
{
        if (!(events & EPOLLIN)) {
                epoll_ctl(j->epfd, EPOLL_CTL_DEL, run->proc.listener, NULL);
                return;
        }
        memset(j->notif, 0, sizeof(*j->notif));
        if (seccomp_notify_receive(run->proc.listener, j->notif) < 0)
                return;
        /* The run's one exec is spent (jail_spawn let it through): any
         * later exec is a probe that fails with EPERM; the rest kills. */
        if (!policy_is_exec(j->notif->data.nr)) {
                if (run->reason == REASON_NONE)
                        run->syscall_nr = j->notif->data.nr;
                run_kill(run, REASON_SYSCALL);
        }
        /* Answer anyway so the thread never stays parked if the kill raced. */
        j->resp->id = j->notif->id;
        j->resp->error = -EPERM;
        j->resp->val = 0;
        j->resp->flags = 0;
        seccomp_notify_respond(run->proc.listener, j->resp);
}

static void on_chan(struct run *run)
{
        struct proto_header h;
        int fd;
        size_t nf = 0;
        int r = channel_recv(run->chan, &h, sizeof(h), &fd, 0, &nf);
        if (r == -EAGAIN)
                return;
        if (r == 1 && h.magic == PROTO_MAGIC && h.type == PROTO_KILL) {
                run_kill(run, REASON_OUTPUT);
                return;
        }
        /* EOF or garbage: nobody is waiting for this run any more. */
        run->chan = safe_close(run->chan);
        run_kill(run, REASON_NONE);
}

static void classify(struct run *run, int status, const struct rusage *ru,
                     const struct cgroup_stats *st, int cpu_limit, struct proto_result *res)
{
        uint64_t cpu_us = (uint64_t)(ru->ru_utime.tv_sec + ru->ru_stime.tv_sec) * 1000000u +
                          (uint64_t)(ru->ru_utime.tv_usec + ru->ru_stime.tv_usec);
        int sig = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
        enum run_reason why = run->reason;
        if (why == REASON_NONE && st->oom_kills > 0)
                why = REASON_MEMORY;
        else if (why == REASON_NONE &&
                 (sig == SIGXCPU || (sig == SIGKILL && cpu_us >= (uint64_t)cpu_limit * 1000000u)))
                why = REASON_CPU;
        else if (why == REASON_NONE && sig)
                why = REASON_SIGNAL;
        res->reason = why;
        res->signal = sig;
        res->exit_code = why != REASON_NONE ? -1 : WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        res->cpu_us = cpu_us;
        res->memory_peak = st->memory_peak ? st->memory_peak : (uint64_t)ru->ru_maxrss * 1024;
        if (why == REASON_SYSCALL) {
                res->syscall_nr = run->syscall_nr;
                char *name = policy_syscall_name(run->syscall_nr);
                snprintf(res->syscall_name, sizeof(res->syscall_name), "%s", name ? name : "");
                free(name);
        }
}

static void on_exit_run(struct jailer *j, struct run *run)
{
        int status = 0;
        struct rusage ru = {0};
        pid_t p = (pid_t)RETRY_EINTR(wait4(run->proc.pid, &status, WNOHANG, &ru));
        if (p == 0)
                return;
        struct cgroup_stats st = {0};
        if (run->cg)
                cgroup_run_stats(run->cg, &st);
        struct proto_result res = {.hdr = {PROTO_MAGIC, PROTO_RESULT},
                                   .status = RUN_STATUS_DONE,
                                   .wall_us = elapsed_us(&run->start)};
        classify(run, status, &ru, &st, j->cfg->cpu_seconds, &res);
        run_release_identity(j, run); /* groups gone, UID back: then answer */
        log_info(run->trace, "run.done",
                 "lang=%s exit_code=%d reason=%u signal=%d wall_ms=%llu cpu_ms=%llu "
                 "memory_peak=%llu",
                 run->slot->rt->name, res.exit_code, res.reason, res.signal,
                 (unsigned long long)res.wall_us / 1000, (unsigned long long)res.cpu_us / 1000,
                 (unsigned long long)res.memory_peak);
        if (res.reason == REASON_SYSCALL)
                log_warn(run->trace, "run.syscall_denied", "syscall=%s", res.syscall_name);
        send_result(run->chan, &res);
        run_release(j, run);
        run->finished = true;
        j->n_runs--; /* now: the HTTP side may send the next RUN at once */
}

/* ---- the loop -------------------------------------------------------------- */

static void kill_all(struct jailer *j)
{
        for (struct run *r = j->runs; r; r = r->next)
                run_kill(r, REASON_NONE);
}

static void begin_stop(struct jailer *j, const char *why)
{
        if (j->stopping)
                return;
        j->stopping = true;
        log_info(NULL, "jailer.stopping", "reason=%s runs=%u", why, j->n_runs);
        if (!j->http_gone)
                kill(j->http_pid, SIGTERM);
        clock_gettime(CLOCK_MONOTONIC, &j->stop_deadline);
        /* The HTTP side lets running requests finish: at most one deadline. */
        j->stop_deadline.tv_sec += j->cfg->worker_timeout + 10;
}

static void on_signal(struct jailer *j)
{
        struct signalfd_siginfo si;
        while (read(j->sigfd, &si, sizeof(si)) == sizeof(si)) {
                if (si.ssi_signo == SIGHUP)
                        continue; /* nothing to reload yet */
                if (j->stopping && !j->http_gone) {
                        log_warn(NULL, "jailer.forced_stop", "signal=%u", si.ssi_signo);
                        kill(j->http_pid, SIGKILL);
                }
                begin_stop(j, si.ssi_signo == SIGINT ? "SIGINT" : "SIGTERM");
        }
}

static void on_http_exit(struct jailer *j)
{
        int status = 0;
        if (RETRY_EINTR(waitpid(j->http_pid, &status, WNOHANG)) <= 0)
                return;
        j->http_gone = true;
        epoll_ctl(j->epfd, EPOLL_CTL_DEL, j->http_pidfd, NULL);
        bool clean = j->stopping && WIFEXITED(status) && WEXITSTATUS(status) == 0;
        if (!clean) {
                log_error(NULL, "http.died", "status=%d", status);
                j->exit_code = 1;
        }
        begin_stop(j, "http process exited");
        kill_all(j);
}

static void dispatch(struct jailer *j, const struct epoll_event *ev)
{
        struct watch *w = ev->data.ptr;
        struct run *run = w->run;
        if (run && run->finished)
                return;
        switch (w->kind) {
        case W_CTRL:
                on_ctrl(j);
                break;
        case W_SIGNAL:
                on_signal(j);
                break;
        case W_HTTP:
                on_http_exit(j);
                break;
        case W_CHAN:
                on_chan(run);
                break;
        case W_TIMER:
                run_kill(run, REASON_TIMEOUT);
                epoll_ctl(j->epfd, EPOLL_CTL_DEL, run->timerfd, NULL);
                break;
        case W_LISTENER:
                on_listener(j, run, ev->events);
                break;
        case W_PIDFD:
                on_exit_run(j, run);
                break;
        }
}

static void sweep(struct jailer *j)
{
        for (struct run **pp = &j->runs; *pp;) {
                struct run *run = *pp;
                if (!run->finished) {
                        pp = &run->next;
                        continue;
                }
                *pp = run->next;
                free(run);
        }
}

static int loop_timeout_ms(struct jailer *j)
{
        if (!j->stopping || j->http_gone)
                return -1;
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        int64_t ms = (j->stop_deadline.tv_sec - now.tv_sec) * 1000 +
                     (j->stop_deadline.tv_nsec - now.tv_nsec) / 1000000;
        if (ms <= 0) {
                log_warn(NULL, "jailer.stop_deadline", "effect=\"killing the HTTP process\"");
                kill(j->http_pid, SIGKILL);
                return 1000;
        }
        return (int)ms;
}

int jailer_run(struct jailer *j, int ctrl_fd, pid_t http_pid)
{
        j->ctrl = ctrl_fd;
        j->http_pid = http_pid;
        j->http_pidfd = (int)syscall(SYS_pidfd_open, http_pid, 0);
        j->w_ctrl = (struct watch){W_CTRL, NULL};
        j->w_http = (struct watch){W_HTTP, NULL};
        if (j->http_pidfd < 0 || watch_add(j, ctrl_fd, &j->w_ctrl) < 0 ||
            watch_add(j, j->http_pidfd, &j->w_http) < 0) {
                log_error(NULL, "jailer.start_failed", "error=%s", log_q(strerror(errno)));
                kill(http_pid, SIGKILL);
                waitpid(http_pid, NULL, 0);
                return 1;
        }
        while (!(j->http_gone && j->runs == NULL)) {
                struct epoll_event evs[32];
                int n = epoll_wait(j->epfd, evs, ELEMENTSOF(evs), loop_timeout_ms(j));
                if (n < 0 && errno != EINTR) {
                        log_error(NULL, "jailer.epoll", "error=%s", log_q(strerror(errno)));
                        kill_all(j);
                        return 1;
                }
                for (int i = 0; i < n; i++)
                        dispatch(j, &evs[i]);
                sweep(j);
        }
        log_info(NULL, "jailer.stopped", "exit_code=%d", j->exit_code);
        return j->exit_code;
}
