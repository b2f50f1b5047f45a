/* The life of one run in the jailer: created (UID, cgroups, pipes, sync
 * socket, then a cold clone or a zygote fork), SPAWNING while the child
 * walks the lock sequence, ARMED in a warm pool or straight to ACTIVE for a
 * request, and over when its pidfd says the process is gone. Every end
 * goes through run_on_exit(): reap, classify, remove the cgroups, return
 * the UID, answer. Handlers only mark a run finished; the loop frees it. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <fcntl.h>
#include <poll.h>
#include <seccomp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/util.h"
#include "config/config.h"
#include "ipc/channel.h"
#include "ipc/stats.h"
#include "ipc/zygote_proto.h"
#include "jail/cgroup.h"
#include "jail/jail.h"
#include "jail/uidpool.h"
#include "net/emptyns.h"
#include "net/net.h"
#include "deps/deps.h"
#include "jailer/internal.h"
#include "runtime/runtime.h"

enum run_state {
        RUN_SPAWNING, /* cloned (or asked of the zygote), walking the lock sequence */
        RUN_ARMED,    /* every lock on, waiting in its pool for a request */
        RUN_ACTIVE,   /* a request's: the program runs, the deadline ticks */
};

struct run {
        struct run *next; /* all runs */
        struct watch w_chan, w_pidfd, w_timer, w_listener, w_sync, w_report;
        struct runs *rs;
        const struct lang_slot *slot;
        int lang;                      /* enum proto_language */
        const struct run_owner *owner; /* told when it is armed and gone, or NULL */
        void *owner_data;              /* its owner's (a pool), or NULL */
        enum run_state state;
        bool network, warm, zygote, exec_done, killed, finished, counted;
        bool retired;  /* killed on purpose before serving: not a failure */
        bool answered; /* its result went out at its exit report, before the reap */
        int chan, timerfd, sync, listener, pidfd;
        pid_t pid;
        int code_w, out_r, err_r; /* our pipe ends, until STARTED hands them over */
        int report_r;             /* the program's exit report, or -1 */
        int reported;             /* its reported exit code, -1 before */
        struct layer *layer;      /* the dependency layer it binds (Python) */
        uid_t uid;
        struct cgroup_run *cg;
        uint32_t net_addr;            /* its address, with a network namespace */
        struct emptyns_slot *emptyns; /* its namespace, without network (or NULL) */
        unsigned net_refused;         /* packets the egress policy refused it (logged ones) */
        char trace[PROTO_TRACE_LEN + 1];
        char failure[160]; /* why the start failed, for the request's -500 */
        enum run_reason reason;
        int syscall_nr;
        int64_t start_us; /* monotonic_us() of the program: when STARTED was sent */
};

/* Every run of the jailer, and what they share. */
struct runs {
        const struct run_env *env;
        struct run *head;
        unsigned n_active;      /* runs that hold a request: <= max_workers */
        unsigned n_dying;       /* runs answered at their exit report, not yet reaped */
        bool stopping;          /* the jailer stops: a start that fails is no failure */
        bool net_dirty;         /* a run with network ended since counters were read */
        int64_t last_answer_ms; /* when the last result went to the HTTP side */
        /* by language: another way of spawning its runs (the zygote), or NULL */
        const struct run_spawner *spawner[PROTO_LANG_SLOTS];
        void *spawner_data[PROTO_LANG_SLOTS];
        /* the seccomp listener's buffers, one pair for every run */
        struct seccomp_notif *notif;
        struct seccomp_notif_resp *resp;
};

void run_refuse(int chan, enum run_status status, const char *message)
{
        struct proto_result res = {.hdr = {PROTO_MAGIC, PROTO_RESULT}, .status = status};
        snprintf(res.message, sizeof(res.message), "%s", message ? message : "");
        if (chan >= 0 && channel_send(chan, &res, sizeof(res), NULL, 0) < 0)
                log_warn(NULL, "run.result_undeliverable", "error=%s", log_q(strerror(errno)));
}

static int arm_timer(struct run *run, int seconds)
{
        struct itimerspec its = {.it_value = {.tv_sec = seconds}};
        return timerfd_settime(run->timerfd, 0, &its, NULL) < 0 ? -errno : 0;
}

void run_retire(struct run *run)
{
        run->owner = NULL;
        run->owner_data = NULL;
        run->retired = true;
        run_kill(run, REASON_NONE);
}

void run_kill(struct run *run, enum run_reason why)
{
        if (run->reason == REASON_NONE)
                run->reason = why;
        /* Without a pidfd yet (the zygote's SPAWNED is on its way), the
         * kill is kept and sent when the pid arrives. */
        run->killed = true;
        if (run->pidfd >= 0)
                syscall(SYS_pidfd_send_signal, run->pidfd, SIGKILL, NULL, 0);
}

static void fail_start(struct run *run, const char *what, const char *detail)
{
        if (!run->failure[0])
                snprintf(run->failure, sizeof(run->failure), "%s%s%s", what, detail ? ": " : "",
                         detail ? detail : "");
        run_kill(run, REASON_NONE);
}

/* ---- creating ------------------------------------------------------------- */

/* Our ends stay in run; the child's ends go into child[]: sync, code read
 * end, stdout write end, stderr write end. */
static int make_channels(struct run *run, int child[4])
{
        int code[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1}, sv[2] = {-1, -1};
        if (pipe2(code, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0 ||
            socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
                int e = errno;
                int *all[] = {code, out, err, sv};
                for (size_t i = 0; i < ELEMENTSOF(all); i++) {
                        safe_close(all[i][0]);
                        safe_close(all[i][1]);
                }
                return -e;
        }
        run->code_w = code[1];
        run->out_r = out[0];
        run->err_r = err[0];
        run->sync = sv[0];
        child[0] = sv[1];
        child[1] = code[0];
        child[2] = out[1];
        child[3] = err[1];
        return 0;
}

struct child_ends {
        int fds[4]; /* sync, code read end, stdout write end, stderr write end */
        int report; /* exit report write end, or -1 */
        int deps;   /* the dependency layer's directory, or -1 */
        int procs[2];
        int netns; /* the run's network namespace, or -1 */
};

static void child_ends_close(struct child_ends *c)
{
        c->report = safe_close(c->report);
        c->deps = safe_close(c->deps);
        c->netns = safe_close(c->netns);
        for (size_t i = 0; i < 4; i++)
                c->fds[i] = safe_close(c->fds[i]);
        for (size_t i = 0; i < 2; i++)
                c->procs[i] = safe_close(c->procs[i]);
}

/* What the configuration limits a run to; RLIMIT_DATA only without a
 * memory cgroup. The one place for both cold and zygote runs. */
static struct run_limits run_limits(const struct runs *rs)
{
        const struct config *c = rs->env->cfg;
        bool memcg = cgroup_root_mode(rs->env->cg) != CGROUP_NONE;
        return (struct run_limits){.data_bytes = memcg ? 0 : c->memory_bytes,
                                   .nproc = c->processes,
                                   .cpu_seconds = c->cpu_seconds,
                                   .open_files = c->open_files,
                                   .file_bytes = c->file_bytes,
                                   .tmp_bytes = c->tmp_bytes,
                                   .tmp_inodes = c->tmp_inodes};
}

static struct jail_spec make_spec(struct runs *rs, struct run *run, const struct child_ends *ends,
                                  int cg_dirfd)
{
        const struct config *c = rs->env->cfg;
        const struct runtime *rt = run->slot->rt;
        return (struct jail_spec){
            .mode = JAIL_COLD,
            .uid = run->uid,
            .gid = (gid_t)run->uid,
            .network = run->network,
            .hostname = c->hostname,
            .ro_paths = (const char *const *)rt->ro_paths,
            .n_ro_paths = rt->n_ro_paths,
            .limits = run_limits(rs),
            .exec_path = rt->exec_path,
            .argv = rt->argv,
            .envp = rs->env->envp[run->network],
            .sync_fd = ends->fds[0],
            .code_fd = ends->fds[1],
            .stdout_fd = ends->fds[2],
            .stderr_fd = ends->fds[3],
            .report_fd = ends->report,
            .deps_fd = ends->deps,
            .netns_fd = ends->netns,
            .resolv_conf = rs->env->resolv_conf,
            .filter = &run->slot->filter[run->network],
            .cgroup_procs = {ends->procs[0], ends->procs[1]},
            .cgroup_dirfd = cg_dirfd,
        };
}

static int make_cgroup(struct runs *rs, struct run *run, int procs[2], char *err, size_t errlen)
{
        if (cgroup_root_mode(rs->env->cg) == CGROUP_NONE)
                return 0;
        char name[32];
        struct cgroup_limits l = {.memory_bytes = rs->env->cfg->memory_bytes,
                                  .pids = rs->env->cfg->processes};
        snprintf(name, sizeof(name), "uid-%u", (unsigned)run->uid);
        int r = cgroup_run_create(rs->env->cg, name, &l, &run->cg);
        if (r == 0)
                r = cgroup_run_procs_fds(run->cg, procs);
        if (r < 0)
                snprintf(err, errlen, "cgroup: %s", strerror(-r));
        return r;
}

static int run_watch_exit(struct runs *rs, struct run *run)
{
        return loop_watch(rs->env->loop, run->pidfd, &run->w_pidfd);
}

/* Clone a cold child, or ask the zygote for a warm one. */
static int launch(struct runs *rs, struct run *run, struct child_ends *c, char *err, size_t errlen)
{
        int dirfd = run->cg ? cgroup_run_dirfd(run->cg) : -1;
        const struct run_spawner *sp = rs->spawner[run->lang];
        void *sp_data = rs->spawner_data[run->lang];
        if (sp && sp->up(sp_data)) {
                struct zygote_fds f = {.sync = c->fds[0],
                                       .code = c->fds[1],
                                       .out = c->fds[2],
                                       .err = c->fds[3],
                                       .cgroup_procs = {c->procs[0], c->procs[1]},
                                       .cgroup_dirfd = dirfd,
                                       .deps = c->deps,
                                       .report = c->report,
                                       .netns = c->netns};
                struct run_limits limits = run_limits(rs);
                run->warm = run->zygote = true;
                int r = sp->spawn(sp_data, run, run->uid, run->network, &f, &limits);
                if (r < 0)
                        snprintf(err, errlen, "zygote: %s", strerror(-r));
                return r;
        }
        struct jail_spec spec = make_spec(rs, run, c, dirfd);
        struct jail_started st;
        int r = jail_start(&spec, false, &st, err, errlen);
        if (r < 0)
                return r;
        run->pid = st.pid;
        run->pidfd = st.pidfd;
        if ((r = run_watch_exit(rs, run)) < 0) {
                syscall(SYS_pidfd_send_signal, run->pidfd, SIGKILL, NULL, 0);
                waitpid(run->pid, NULL, 0);
                snprintf(err, errlen, "epoll: %s", strerror(-r));
        }
        return r;
}

static void on_chan_event(void *data, uint32_t events);
static void on_timer_event(void *data, uint32_t events);
static void on_listener_event(void *data, uint32_t events);
static void on_sync_event(void *data, uint32_t events);
static void on_exit_event(void *data, uint32_t events);
static void on_report_event(void *data, uint32_t events);

static int watch_run(struct runs *rs, struct run *run)
{
        run->w_chan = (struct watch){.fn = on_chan_event, .data = run};
        run->w_timer = (struct watch){.fn = on_timer_event, .data = run};
        run->w_listener = (struct watch){.fn = on_listener_event, .data = run};
        run->w_sync = (struct watch){.fn = on_sync_event, .data = run};
        run->w_pidfd = (struct watch){.fn = on_exit_event, .data = run};
        run->w_report = (struct watch){.fn = on_report_event, .data = run};
        int r = loop_watch(rs->env->loop, run->sync, &run->w_sync);
        if (r == 0)
                r = loop_watch(rs->env->loop, run->timerfd, &run->w_timer);
        if (r == 0 && run->chan >= 0)
                r = loop_watch(rs->env->loop, run->chan, &run->w_chan);
        return r;
}

static void release_identity(struct runs *rs, struct run *run)
{
        deps_layer_release(rs->env->deps, run->layer);
        run->layer = NULL;
        if (run->net_addr)
                net_run_release(rs->env->net, run->net_addr); /* once: then no longer held */
        if (run->emptyns)
                emptyns_release(rs->env->emptyns, run->emptyns);
        run->emptyns = NULL;
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
                uidpool_release(rs->env->uids, run->uid);
        run->uid = 0;
}

/* Unwatch before closing: a clone that has not yet dropped its inherited
 * fds holds copies, and while any copy lives epoll keeps the registration
 * and would report it with a pointer to this run after it is freed. */
static void release_fds(struct runs *rs, struct run *run)
{
        int *fds[] = {&run->chan,   &run->timerfd, &run->sync,  &run->listener, &run->pidfd,
                      &run->code_w, &run->out_r,   &run->err_r, &run->report_r};
        for (size_t i = 0; i < ELEMENTSOF(fds); i++) {
                loop_unwatch(rs->env->loop, *fds[i]);
                *fds[i] = safe_close(*fds[i]);
        }
}

static void run_destroy(struct runs *rs, struct run *run)
{
        release_identity(rs, run);
        release_fds(rs, run);
        free(run);
}

/* UID, deadline timer, cgroups, pipes: everything but the process. */
static int prepare(struct runs *rs, struct run *run, struct child_ends *c, char *err, size_t errlen)
{
        int r = uidpool_acquire(rs->env->uids, &run->uid);
        if (r < 0)
                return r; /* -EAGAIN: no identity free */
        run->timerfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
        if (run->timerfd < 0 || arm_timer(run, RUN_SPAWN_TIMEOUT_S) < 0) {
                snprintf(err, errlen, "timer: %s", strerror(errno));
                return -EIO;
        }
        if (make_cgroup(rs, run, c->procs, err, errlen) < 0)
                return -EIO;
        if ((r = make_channels(run, c->fds)) < 0) {
                snprintf(err, errlen, "pipes: %s", strerror(-r));
                return -EIO;
        }
        if (run->slot->rt->lang == LANG_PYTHON3 &&
            (r = deps_layer_acquire(rs->env->deps, &run->layer, &c->deps)) < 0) {
                snprintf(err, errlen, "dependency layer: %s", strerror(-r));
                return -EIO;
        }
        if (run->network && rs->env->net &&
            (r = net_run_create(rs->env->net, &c->netns, &run->net_addr, err, errlen)) < 0)
                return -EIO;
        /* without network: an empty namespace kept from an earlier run, or
         * (failing that) the one the clone makes */
        if (!run->network && rs->env->emptyns &&
            emptyns_take(rs->env->emptyns, &c->netns, &run->emptyns) < 0)
                c->netns = -1;
        int rp[2];
        if (run->slot->rt->exit_report) {
                if (pipe2(rp, O_CLOEXEC | O_NONBLOCK) < 0) {
                        snprintf(err, errlen, "pipes: %s", strerror(errno));
                        return -EIO;
                }
                run->report_r = rp[0];
                c->report = rp[1];
        }
        return 0;
}

int run_create(struct runs *rs, int lang, bool network, const struct run_owner *owner,
               void *owner_data, int chan, const char *trace, char *err, size_t errlen)
{
        struct run *run = calloc(1, sizeof(*run));
        if (!run)
                return -ENOMEM;
        *run = (struct run){.rs = rs,
                            .slot = &rs->env->langs[lang],
                            .lang = lang,
                            .owner = owner,
                            .owner_data = owner_data,
                            .network = network,
                            .warm = owner != NULL,
                            .chan = -1,
                            .timerfd = -1,
                            .sync = -1,
                            .listener = -1,
                            .pidfd = -1,
                            .code_w = -1,
                            .out_r = -1,
                            .err_r = -1,
                            .report_r = -1,
                            .reported = -1};
        snprintf(run->trace, sizeof(run->trace), "%s", trace ? trace : "");
        struct child_ends c = {{-1, -1, -1, -1}, -1, -1, {-1, -1}, -1};
        int r = prepare(rs, run, &c, err, errlen);
        run->chan = chan;
        if (r == 0 && (r = watch_run(rs, run)) < 0) {
                snprintf(err, errlen, "epoll: %s", strerror(-r));
                r = -EIO;
        }
        if (r == 0 && launch(rs, run, &c, err, errlen) < 0)
                r = -EIO;
        child_ends_close(&c);
        if (r < 0) {
                run->chan = -1; /* the caller answers on it */
                run_destroy(rs, run);
                return r;
        }
        run->counted = chan >= 0;
        rs->n_active += run->counted;
        run->next = rs->head;
        rs->head = run;
        return 0;
}

/* ---- starting the program --------------------------------------------------- */

/* Hand the pipes to the HTTP side and start the clock. */
static void start_program(struct runs *rs, struct run *run)
{
        struct proto_started m = {.hdr = {PROTO_MAGIC, PROTO_STARTED}, .warm = run->warm};
        int fds[3] = {run->code_w, run->out_r, run->err_r};
        int r = channel_send(run->chan, &m, sizeof(m), fds, 3);
        run->code_w = safe_close(run->code_w);
        run->out_r = safe_close(run->out_r);
        run->err_r = safe_close(run->err_r);
        run->state = RUN_ACTIVE;
        run->start_us = monotonic_us();
        if (r < 0 || arm_timer(run, rs->env->cfg->worker_timeout) < 0 ||
            (run->report_r >= 0 && loop_watch(rs->env->loop, run->report_r, &run->w_report) < 0))
                run_kill(run, REASON_NONE); /* nobody to run it for */
        log_debug(run->trace, "run.start", "lang=%s uid=%u network=%d pid=%d warm=%d",
                  run->slot->rt->name, (unsigned)run->uid, run->network, (int)run->pid, run->warm);
}

void run_assign(struct run *run, int chan, const char *trace)
{
        struct runs *rs = run->rs;
        run->chan = chan;
        snprintf(run->trace, sizeof(run->trace), "%s", trace);
        run->counted = true;
        rs->n_active++;
        run->owner = NULL;
        run->owner_data = NULL;
        if (loop_watch(rs->env->loop, run->chan, &run->w_chan) < 0)
                run_kill(run, REASON_NONE);
        start_program(rs, run);
}

/* Every lock is on and the program's pipe is empty: serve or arm. */
static void ready(struct runs *rs, struct run *run)
{
        if (run->chan >= 0) {
                start_program(rs, run);
                return;
        }
        run->state = RUN_ARMED;
        struct itimerspec off = {0};
        timerfd_settime(run->timerfd, 0, &off, NULL);
        /* nobody to serve (a request that went away meanwhile): not kept */
        if (run->owner)
                run->owner->armed(run->owner_data, run);
        else
                run_retire(run);
}

static void run_on_sync(struct runs *rs, struct run *run)
{
        for (;;) {
                struct jail_sync_msg m;
                int fd = -1;
                int r = jail_sync_recv(run->sync, &m, &fd);
                if (r == -EAGAIN)
                        return;
                if (r == 1 && m.type == SYNC_LISTENER && fd >= 0 && run->listener < 0) {
                        run->listener = fd;
                        if (loop_watch(rs->env->loop, run->listener, &run->w_listener) < 0)
                                fail_start(run, "epoll on the listener failed", NULL);
                        continue;
                }
                safe_close(fd);
                loop_unwatch(rs->env->loop, run->sync);
                run->sync = safe_close(run->sync);
                if (r == 1 && m.type == SYNC_READY && run->listener >= 0)
                        ready(rs, run);
                else if (r == 0 && run->exec_done && run->listener >= 0)
                        ready(rs, run); /* a cold child's exec closed the socket */
                else if (r == 1 && m.type == SYNC_FAIL) {
                        fail_start(run, m.step, strerror(m.error));
                } else
                        fail_start(run, "the child ended its start-up early", NULL);
                return;
        }
}

/* After the start: a notification is a forbidden call. Exec is a probe
 * that fails with EPERM; anything else stops the run and is named. */
static void on_forbidden(struct runs *rs, struct run *run)
{
        memset(rs->notif, 0, sizeof(*rs->notif));
        if (seccomp_notify_receive(run->listener, rs->notif) < 0)
                return;
        if (!policy_is_exec(rs->notif->data.nr)) {
                if (run->reason == REASON_NONE)
                        run->syscall_nr = rs->notif->data.nr;
                run_kill(run, REASON_SYSCALL);
        }
        /* Answer anyway so the thread never stays parked if the kill raced. */
        rs->resp->id = rs->notif->id;
        rs->resp->error = -EPERM;
        rs->resp->val = 0;
        rs->resp->flags = 0;
        seccomp_notify_respond(run->listener, rs->resp);
}

static void run_on_listener(struct runs *rs, struct run *run, uint32_t events)
{
        if (!(events & EPOLLIN)) {
                loop_unwatch(rs->env->loop, run->listener);
                return;
        }
        if (run->state == RUN_SPAWNING && !run->zygote && !run->exec_done) {
                int r = jail_exec_permit(run->listener, run->pid, &run->exec_done);
                if (r < 0)
                        fail_start(run, "exec", strerror(-r));
                return;
        }
        on_forbidden(rs, run);
}

static void run_on_chan(struct runs *rs, struct run *run)
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
        loop_unwatch(rs->env->loop, run->chan);
        run->chan = safe_close(run->chan);
        run_kill(run, REASON_NONE);
}

static void run_on_timer(struct runs *rs, struct run *run)
{
        uint64_t ticks;
        if (read(run->timerfd, &ticks, sizeof(ticks)) != sizeof(ticks))
                return;
        if (run->state == RUN_ACTIVE) {
                run_kill(run, REASON_TIMEOUT);
                return;
        }
        fail_start(run, "start-up took too long", NULL);
        if (run->pid <= 0) {
                /* still waiting for the zygote's answer: it hangs */
                log_error(run->trace, "zygote.unresponsive", "effect=\"restarting it\"");
                const struct run_spawner *sp = rs->spawner[run->lang];
                if (sp)
                        sp->hung(rs->spawner_data[run->lang]);
        }
}

static void classify(struct run *run, int status, const struct rusage *ru,
                     const struct cgroup_stats *st, int cpu_limit, struct proto_result *res)
{
        uint64_t cpu_us = (uint64_t)(ru->ru_utime.tv_sec + ru->ru_stime.tv_sec) * 1000000u +
                          (uint64_t)(ru->ru_utime.tv_usec + ru->ru_stime.tv_usec);
        int sig = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
        enum run_reason why = run->reason;
        if (why == REASON_NONE && run->reported >= 0 && sig == SIGKILL) {
                status = run->reported << 8; /* as if it had exited so itself */
                sig = 0;
        }
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

/* The result for the HTTP side, and the run's log line. Once the process
 * is reaped, its identity goes back before the answer. */
static void answer(struct runs *rs, struct run *run, int status, const struct rusage *ru,
                   bool reaped)
{
        struct cgroup_stats st = {0};
        if (run->cg)
                cgroup_run_stats(run->cg, &st);
        struct proto_result res = {.hdr = {PROTO_MAGIC, PROTO_RESULT},
                                   .status = RUN_STATUS_DONE,
                                   .wall_us = (uint64_t)(monotonic_us() - run->start_us)};
        classify(run, status, ru, &st, rs->env->cfg->cpu_seconds, &res);
        if (reaped)
                release_identity(rs, run); /* groups gone, UID back: then answer */
        if (run->net_addr)
                runs_read_refusals(rs); /* the last ones may still wait */
        log_info(run->trace, "run.done",
                 "lang=%s warm=%d exit_code=%d reason=%u signal=%d wall_ms=%llu cpu_ms=%llu "
                 "memory_peak=%llu network=%d net_refused=%u",
                 run->slot->rt->name, run->warm, res.exit_code, res.reason, res.signal,
                 (unsigned long long)res.wall_us / 1000, (unsigned long long)res.cpu_us / 1000,
                 (unsigned long long)res.memory_peak, run->network, run->net_refused);
        if (res.reason == REASON_SYSCALL)
                log_warn(run->trace, "run.syscall_denied", "syscall=%s", res.syscall_name);
        if (run->chan >= 0 && channel_send(run->chan, &res, sizeof(res), NULL, 0) < 0)
                log_warn(run->trace, "run.result_undeliverable", "error=%s",
                         log_q(strerror(errno)));
        rs->last_answer_ms = monotonic_ms();
}

/* The report came and nothing stopped the run: answer now. The process is
 * SIGKILLed and its output complete (the bootstrap closed stdout and
 * stderr first; if something still holds them, the HTTP side waits for
 * their EOF), so only the kernel's tear-down of the process is left, which
 * for a copy of the zygote takes ~1.5 ms. Its CPU time is read from its
 * clock now; its UID, cgroup and layer stay held until it is reaped. */
static void answer_early(struct runs *rs, struct run *run)
{
        struct rusage ru = {0};
        clockid_t clock;
        struct timespec ts;
        if (clock_getcpuclockid(run->pid, &clock) == 0 && clock_gettime(clock, &ts) == 0) {
                ru.ru_utime.tv_sec = ts.tv_sec;
                ru.ru_utime.tv_usec = ts.tv_nsec / 1000;
        }
        answer(rs, run, run->reported << 8, &ru, false);
        run->answered = true;
        if (run->counted) {
                /* its worker slot is free: the HTTP side may send the next,
                 * which waits (jailer.c) until this one is gone */
                rs->n_active--;
                rs->n_dying++;
        }
        run->counted = false;
}

/* The program reported its exit code: it is over, end it now rather than
 * wait for its runtime's tear-down. Whatever it wrote is its exit status,
 * as much its own choice as calling exit would be. */
static void run_on_report(struct runs *rs, struct run *run)
{
        char buf[16];
        ssize_t n = read(run->report_r, buf, sizeof(buf) - 1);
        if (n < 0 && errno == EAGAIN)
                return;
        loop_unwatch(rs->env->loop, run->report_r);
        run->report_r = safe_close(run->report_r);
        if (n <= 0 || run->reported >= 0)
                return;
        buf[n] = '\0';
        char *end;
        long code = strtol(buf, &end, 10);
        if (end == buf || *end != '\0')
                return;
        run->reported = (int)(code & 0xff);
        if (run->reason == REASON_NONE) {
                run->killed = true;
                syscall(SYS_pidfd_send_signal, run->pidfd, SIGKILL, NULL, 0);
                if (run->pid > 0 && run->state == RUN_ACTIVE)
                        answer_early(rs, run);
        }
}

/* ---- the end ---------------------------------------------------------------- */

/* A process that never became a program: answer its request, if any. */
static void finish_start(struct runs *rs, struct run *run, int status)
{
        if (!run->failure[0])
                snprintf(run->failure, sizeof(run->failure),
                         "the sandbox process ended during start-up (status %d)", status);
        if (run->retired)
                log_debug(run->trace, "run.retired", "lang=%s", run->slot->rt->name);
        else if (run->chan >= 0 || !rs->stopping)
                atomic_fetch_add(&rs->env->stats->spawn_failures, 1);
        if (!run->retired && (run->chan >= 0 || !rs->stopping))
                log_error(run->trace, "run.spawn_failed", "lang=%s warm=%d error=%s",
                          run->slot->rt->name, run->warm, log_q(run->failure));
        release_identity(rs, run);
        if (run->chan >= 0)
                run_refuse(run->chan, RUN_STATUS_INTERNAL, run->failure);
        if (run->owner)
                run->owner->gone(run->owner_data, run, run->state == RUN_ARMED);
}

static void run_on_exit(struct runs *rs, struct run *run)
{
        int status = 0;
        struct rusage ru = {0};
        if (run->pid > 0 && RETRY_EINTR(wait4(run->pid, &status, WNOHANG, &ru)) == 0)
                return; /* not yet */
        if (run->answered) {
                release_identity(rs, run);
                rs->n_dying--;
        } else if (run->state == RUN_ACTIVE)
                answer(rs, run, status, &ru, true);
        else
                finish_start(rs, run, status);
        if (run->net_addr)
                rs->net_dirty = true; /* its refusals, if any, are counted */
        if (run->counted)
                rs->n_active--; /* now: the HTTP side may send the next RUN at once */
        run->counted = false;
        release_fds(rs, run);
        run->finished = true;
}

/* ---- network ---------------------------------------------------------------- */

static void on_refusal(void *data, const struct net_refusal *r)
{
        struct runs *rs = data;
        struct run *run = rs->head;
        while (run && !(run->net_addr == r->src && !run->finished))
                run = run->next;
        if (!run)
                return; /* a run already gone: the counters have it */
        char dst[INET_ADDRSTRLEN];
        struct in_addr a = {.s_addr = htonl(r->dst)};
        inet_ntop(AF_INET, &a, dst, sizeof(dst));
        run->net_refused++;
        log_info(run->trace, "run.net_refused", "dst=%s port=%u proto=%s reason=%s", dst,
                 (unsigned)r->dport,
                 r->proto == IPPROTO_TCP   ? "tcp"
                 : r->proto == IPPROTO_UDP ? "udp"
                                           : "other",
                 r->reason);
}

void runs_read_refusals(struct runs *rs)
{
        if (rs->env->net)
                net_refusals_read(rs->env->net, on_refusal, rs);
}

/* The egress table's refusal counters, for /metrics: read at most once a
 * second (the jailer's tick), and only after runs with network. */
_Static_assert(STATS_NET_REASONS == EGRESS_REASONS, "one counter per refusal reason");

void runs_publish_refused(struct runs *rs)
{
        uint64_t v[EGRESS_REASONS];
        if (!rs->env->net || !rs->net_dirty || net_refused(rs->env->net, v) < 0)
                return;
        rs->net_dirty = false;
        for (size_t i = 0; i < EGRESS_REASONS && i < STATS_NET_REASONS; i++)
                atomic_store(&rs->env->stats->net_refused[i], v[i]);
}

/* ---- what the zygote tells (zygote.c) --------------------------------------- */

void run_spawned(struct run *run, pid_t pid, int error)
{
        struct runs *rs = run->rs;
        if (pid <= 0) {
                snprintf(run->failure, sizeof(run->failure), "zygote: clone: %s", strerror(error));
                run_on_exit(rs, run); /* no process to wait for */
                return;
        }
        run->pid = pid;
        /* Our child now (CLONE_PARENT): a zombie until we reap it, so the
         * pid cannot be reused before pidfd_open. */
        run->pidfd = (int)syscall(SYS_pidfd_open, run->pid, 0);
        if (run->pidfd < 0 || run_watch_exit(rs, run) < 0) {
                /* unwatched, its exit would never be seen: reap it now */
                snprintf(run->failure, sizeof(run->failure), "pidfd: %s", strerror(errno));
                kill(run->pid, SIGKILL);
                RETRY_EINTR(waitpid(run->pid, NULL, 0));
                run->pid = 0;
                run_on_exit(rs, run);
                return;
        }
        if (run->killed || run->failure[0])
                run_kill(run, REASON_NONE); /* asked for while we waited */
}

void run_spawn_lost(struct run *run)
{
        struct runs *rs = run->rs;
        int chan = TAKE_FD(run->chan);
        char trace[PROTO_TRACE_LEN + 1], err[200] = "";
        snprintf(trace, sizeof(trace), "%s", run->trace);
        if (chan >= 0)
                loop_unwatch(rs->env->loop, chan);
        snprintf(run->failure, sizeof(run->failure), "the zygote died");
        run_on_exit(rs, run);
        if (chan < 0)
                return;
        int r = run_create(rs, run->lang, run->network, NULL, NULL, chan, trace, err, sizeof(err));
        if (r < 0) {
                run_refuse(chan, r == -EAGAIN ? RUN_STATUS_NO_IDENTITY : RUN_STATUS_INTERNAL, err);
                close(chan);
        }
}

/* ---- what the pools ask (warm.c) -------------------------------------------- */

bool run_exited(const struct run *run)
{
        struct pollfd pfd = {.fd = run->pidfd, .events = POLLIN};
        if (run->pidfd < 0 || poll(&pfd, 1, 0) != 0)
                return true;
        char path[64], buf[2048];
        snprintf(path, sizeof(path), "/proc/%d/status", (int)run->pid);
        FILE *f = fopen(path, "re");
        size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
        if (f)
                fclose(f);
        buf[n] = '\0';
        const char *shd = strstr(buf, "\nShdPnd:");
        const char *state = strstr(buf, "\nState:");
        bool kill_pending = shd && (strtoull(shd + 8, NULL, 16) & (1ULL << (SIGKILL - 1)));
        bool zombie = state && (strstr(state, "(zombie)") || strstr(state, "(dead)"));
        return !f || kill_pending || zombie;
}

bool run_layer_is_current(const struct run *run)
{
        return run->slot->rt->lang != LANG_PYTHON3 ||
               deps_layer_is_current(run->rs->env->deps, run->layer);
}

/* ---- every run (jailer.c) --------------------------------------------------- */

int runs_new(const struct run_env *env, struct runs **ret, char *err, size_t errlen)
{
        struct runs *rs = calloc(1, sizeof(*rs));
        if (!rs)
                return -ENOMEM;
        rs->env = env;
        if (seccomp_notify_alloc(&rs->notif, &rs->resp) < 0) {
                snprintf(err, errlen, "seccomp notifications are not supported by this kernel");
                free(rs);
                return -ENOTSUP;
        }
        *ret = rs;
        return 0;
}

struct runs *runs_free(struct runs *rs)
{
        if (!rs)
                return NULL;
        /* none is left once the jailer's loop ended, but after a failure of
         * the loop itself: their processes may live on, so nothing of
         * theirs is released, only our memory */
        while (rs->head) {
                struct run *run = rs->head;
                rs->head = run->next;
                free(run);
        }
        seccomp_notify_free(rs->notif, rs->resp);
        free(rs);
        return NULL;
}

void runs_set_spawner(struct runs *rs, int lang, const struct run_spawner *sp, void *data)
{
        rs->spawner[lang] = sp;
        rs->spawner_data[lang] = data;
}

unsigned runs_active(const struct runs *rs)
{
        return rs->n_active;
}

int64_t runs_last_answer_ms(const struct runs *rs)
{
        return rs->last_answer_ms;
}

unsigned runs_dying(const struct runs *rs)
{
        return rs->n_dying;
}

bool runs_empty(const struct runs *rs)
{
        return rs->head == NULL;
}

bool runs_own(const struct runs *rs, pid_t pid)
{
        for (const struct run *r = rs->head; r; r = r->next)
                if (r->pid == pid)
                        return true;
        return false;
}

void runs_kill_all(struct runs *rs)
{
        for (struct run *r = rs->head; r; r = r->next)
                run_kill(r, REASON_NONE);
}

void runs_stop(struct runs *rs)
{
        rs->stopping = true;
        /* Armed runs serve no one any more. */
        for (struct run *r = rs->head; r; r = r->next)
                if (r->chan < 0)
                        run_kill(r, REASON_NONE);
}

/* At most 100 ms, once: the run is already SIGKILLed, and the event loop
 * is stalled meanwhile. */
bool runs_reap_answered(struct runs *rs)
{
        for (struct run *r = rs->head; r; r = r->next) {
                if (!r->answered || r->finished || r->pidfd < 0)
                        continue;
                struct pollfd p = {.fd = r->pidfd, .events = POLLIN};
                if (RETRY_EINTR(poll(&p, 1, 100)) != 1)
                        return false;
                run_on_exit(rs, r);
                return r->finished;
        }
        return false;
}

void runs_sweep(struct runs *rs)
{
        for (struct run **pp = &rs->head; *pp;) {
                struct run *run = *pp;
                if (!run->finished) {
                        pp = &run->next;
                        continue;
                }
                *pp = run->next;
                free(run);
        }
}

/* ---- events ----------------------------------------------------------------- */

/* The loop's calls; a run that finished earlier in the same batch has
 * closed its fds and waits to be freed: its stale events are dropped. */

static void on_chan_event(void *data, uint32_t events)
{
        struct run *run = data;
        if (!run->finished)
                run_on_chan(run->rs, run);
}

static void on_timer_event(void *data, uint32_t events)
{
        struct run *run = data;
        if (!run->finished)
                run_on_timer(run->rs, run);
}

static void on_listener_event(void *data, uint32_t events)
{
        struct run *run = data;
        if (!run->finished)
                run_on_listener(run->rs, run, events);
}

static void on_sync_event(void *data, uint32_t events)
{
        struct run *run = data;
        if (!run->finished)
                run_on_sync(run->rs, run);
}

static void on_exit_event(void *data, uint32_t events)
{
        struct run *run = data;
        if (!run->finished)
                run_on_exit(run->rs, run);
}

static void on_report_event(void *data, uint32_t events)
{
        struct run *run = data;
        if (!run->finished)
                run_on_report(run->rs, run);
}
