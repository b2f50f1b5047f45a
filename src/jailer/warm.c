/* Warm execution (see docs/ARCHITECTURE.md "Warm execution"): per language
 * a pool of armed runs, processes that have walked the whole lock sequence
 * and wait for their code, refilled in the background; for Python they are
 * forked by the zygote, an interpreter that imported warm.python_preload
 * once and never runs a program. A request with no armed run waiting
 * starts one on demand (a zygote fork, else a cold start). */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <linux/sched.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/fd.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/util.h"
#include "config/config.h"
#include "ipc/channel.h"
#include "ipc/stats.h"
#include "ipc/zygote_proto.h"
#include "jail/cgroup.h"
#include "jail/uidpool.h"
#include "deps/deps.h"
#include "jailer/internal.h"
#include "runtime/runtime.h"

struct pool {
        struct lang_slot *slot;
        bool network;
        bool active; /* the configured mode from the start; the other once asked for */
        unsigned target, armed, spawning;
        struct run *head, *tail; /* armed, oldest first */
        unsigned failures;
        int64_t retry_at_ms; /* monotonic_ms() */
};

struct zygote {
        struct jailer *j;
        pid_t pid;
        int pidfd, sock;
        bool ready, disabled;
        bool retiring; /* replaced: serves no more SPAWNs, killed once none is pending */
        unsigned runs; /* SPAWNs it was sent */
        int64_t ready_at_ms, rotate_after_ms; /* monotonic_ms() */
        struct watch w_sock, w_exit;
        struct run *head, *tail; /* runs waiting for SPAWNED, in order */
        unsigned failures;
        int64_t retry_at_ms; /* monotonic_ms() */
        char binary[PATH_MAX];
};

/* 100 ms, 200 ms, ... up to 30 s after repeated failures. */
static unsigned backoff_ms(unsigned failures)
{
        unsigned ms = 100;
        for (unsigned i = 1; i < failures && ms < 30000; i++)
                ms *= 2;
        return ms < 30000 ? ms : 30000;
}

/* ---- pools ------------------------------------------------------------------ */

/* One pool per network mode: the configured one fills at start; the other
 * (requests without network while the configuration allows it) only once
 * such a request has come, so a Dify deployment keeps one set. */
static int pool_add(struct jailer *j, struct lang_slot *slot, int target)
{
        if (!slot->rt || target <= 0)
                return 0;
        for (int net = 0; net <= 1; net++) {
                if (net && !run_network_usable(j))
                        continue; /* refused, with the reason, until fixed */
                struct pool *p = calloc(1, sizeof(*p));
                if (!p)
                        return -ENOMEM;
                *p = (struct pool){.slot = slot,
                                   .network = net,
                                   .active = net == (int)j->cfg->enable_network,
                                   .target = (unsigned)target};
                slot->pool[net] = p;
        }
        return 0;
}

/* Gone, or going: a SIGKILL pending (sent from outside, say) or exiting. */
static bool exited(const struct run *run)
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

struct run *warm_take(struct jailer *j, struct lang_slot *slot, bool network)
{
        struct pool *p = slot->pool[network];
        if (!p)
                return NULL;
        p->active = true;
        /* Skip armed runs that died since (killed from outside): their
         * pidfd event, still queued, cleans them up. */
        for (struct run *run = p->head, *prev = NULL; run; prev = run, run = run->pool_next) {
                if (exited(run))
                        continue;
                if (prev)
                        prev->pool_next = run->pool_next;
                else
                        p->head = run->pool_next;
                if (p->tail == run)
                        p->tail = prev;
                run->pool_next = NULL;
                p->armed--;
                return run;
        }
        return NULL;
}

static void pool_on_armed(struct jailer *j, struct run *run)
{
        struct pool *p = run->pool;
        if (p)
                p->spawning--;
        /* a request that went away meanwhile, or a dependency layer replaced
         * while it started: not worth keeping */
        if (!p ||
            (run->slot->rt->lang == LANG_PYTHON3 && !deps_layer_is_current(j->deps, run->layer))) {
                run_retire(run);
                return;
        }
        p->armed++;
        p->failures = 0;
        if (p->tail)
                p->tail->pool_next = run;
        else
                p->head = run;
        p->tail = run;
}

void warm_drain(struct jailer *j, int lang)
{
        for (int net = 0; net <= 1; net++) {
                struct pool *p = j->langs[lang].pool[net];
                if (!p)
                        continue;
                struct run *run = p->head;
                p->head = p->tail = NULL;
                p->armed = 0;
                while (run) {
                        struct run *next = run->pool_next;
                        run->pool_next = NULL;
                        run_retire(run);
                        run = next;
                }
        }
}

static void pool_on_gone(struct jailer *j, struct run *run)
{
        struct pool *p = run->pool;
        if (!p)
                return;
        if (run->state == RUN_SPAWNING) {
                p->spawning--;
                p->failures++;
                p->retry_at_ms = monotonic_ms() + backoff_ms(p->failures);
                return;
        }
        struct run **pp = &p->head, *prev = NULL;
        for (; *pp && *pp != run; prev = *pp, pp = &(*pp)->pool_next)
                ;
        if (!*pp)
                return;
        *pp = run->pool_next;
        if (p->tail == run)
                p->tail = prev;
        p->armed--;
}

/* What a pool's runs tell it. */
static const struct run_owner pool_owner = {.armed = pool_on_armed, .gone = pool_on_gone};

/* Whether the UID range leaves any UID for armed runs at all. */
static bool can_arm(const struct jailer *j)
{
        return config_run_uids(j->cfg) > j->cfg->max_workers;
}

void warm_publish(struct jailer *j)
{
        struct shared_stats *s = j->stats;
        bool all = true;
        for (size_t l = 0; l < STATS_LANGS; l++) {
                struct lang_slot *slot = &j->langs[l];
                atomic_store(&s->pool_target[l], slot->pool[0] ? slot->pool[0]->target : 0);
                for (int net = 0; net <= 1; net++) {
                        const struct pool *p = slot->pool[net];
                        atomic_store(&s->armed[l][net], p ? p->armed : 0);
                        atomic_store(&s->spawning[l][net], p ? p->spawning : 0);
                        if (p && p->active && net == (int)j->cfg->enable_network && p->armed == 0)
                                all = false;
                }
        }
        /* warm once every pool of the configured mode has served up an armed
         * run (sticky: a pool drained by load is not a reason to stop
         * sending traffic) */
        if (all || !can_arm(j))
                atomic_store(&s->warmed, 1);
        atomic_store(&s->active, j->n_active);
        atomic_store(&s->zygote_pid, j->zygote ? j->zygote->pid : 0);
}

/* Armed runs never take the UIDs that requests could still need. */
static bool uid_to_spare(struct jailer *j)
{
        unsigned size = (unsigned)config_run_uids(j->cfg);
        unsigned reserved = (unsigned)j->cfg->max_workers - j->n_active;
        return uidpool_in_use(j->uids) + reserved < size;
}

/* A refill competes with running programs for the two things a run's
 * answer waits on: the jailer's loop (making a run's network namespace
 * and link holds it for ~1.3 ms) and the CPUs (the zygote's fork). While
 * programs run and an armed run is still left, it waits for them. */
static bool refill_now(const struct jailer *j, const struct pool *p)
{
        return !(j->n_active > 0 && p->armed > 0);
}

static bool zygote_up(const struct jailer *j);

static void pool_refill(struct jailer *j, struct pool *p)
{
        while (p->active && p->armed + p->spawning < p->target &&
               monotonic_ms() >= p->retry_at_ms && uid_to_spare(j) && refill_now(j, p)) {
                if (p->slot->zygote && !zygote_up(j))
                        return; /* armed Python comes from the zygote only */
                char err[200] = "";
                int r =
                    run_create(j, p->slot, p->network, &pool_owner, p, -1, NULL, err, sizeof(err));
                if (r == -EAGAIN)
                        return; /* every UID is busy: requests first */
                if (r < 0) {
                        p->failures++;
                        p->retry_at_ms = monotonic_ms() + backoff_ms(p->failures);
                        log_error(NULL, "warm.refill_failed", "lang=%s error=%s", p->slot->rt->name,
                                  log_q(err));
                        return;
                }
                p->spawning++;
        }
}

void warm_refill(struct jailer *j)
{
        if (j->stopping)
                return;
        for (size_t i = 0; i < ELEMENTSOF(j->langs); i++)
                for (int net = 0; net <= 1; net++)
                        if (j->langs[i].pool[net])
                                pool_refill(j, j->langs[i].pool[net]);
}

/* ---- the zygote ------------------------------------------------------------- */

static bool zygote_up(const struct jailer *j)
{
        return j->zygote && j->zygote->ready;
}

/* Through the pidfd: never a stale or zero pid. */
static void zygote_kill(struct zygote *z)
{
        if (z->pidfd >= 0)
                syscall(SYS_pidfd_send_signal, z->pidfd, SIGKILL, NULL, 0);
}

static int filter_memfd(const struct policy_prog *p)
{
        int fd = memfd_create("lockbox-filter", MFD_CLOEXEC);
        size_t len = (size_t)p->len * sizeof(struct sock_filter);
        if (fd >= 0 && write(fd, p->insns, len) != (ssize_t)len)
                fd = safe_close(fd);
        return fd;
}

/* The settings of lockbox-pyzygote, as the options it parses: everything
 * it needs, nothing secret (the proxy settings a network run gets come
 * with each SPAWN of such a run, never before). They reach it in a memfd
 * (fd 6), not in its argv: warm runs are its forks and could read that in
 * /proc/self/cmdline. */
static char **zygote_argv(struct jailer *j)
{
        const struct config *c = j->cfg;
        const struct runtime *rt = j->langs[LANG_PYTHON3].rt;
        size_t n = 11 + 2 * (rt->n_ro_paths + c->n_python_preload);
        char **argv = calloc(n, sizeof(char *));
        size_t k = 0;
        if (!argv)
                return NULL;
        argv[k++] = j->zygote->binary;
        argv[k++] = (char *)"--python";
        argv[k++] = c->python_path;
        argv[k++] = (char *)"--hostname";
        argv[k++] = c->hostname;
        if (strcmp(c->log_format, "json") == 0)
                argv[k++] = (char *)"--log-json";
        if (j->resolv_conf) {
                argv[k++] = (char *)"--resolv-conf";
                argv[k++] = j->resolv_conf;
        }
        for (size_t i = 0; i < rt->n_ro_paths; i++) {
                argv[k++] = (char *)"--ro";
                argv[k++] = rt->ro_paths[i];
        }
        for (size_t i = 0; i < c->n_python_preload; i++) {
                argv[k++] = (char *)"--preload";
                argv[k++] = c->python_preload[i];
        }
        return argv;
}

/* argv[1..] as NUL-terminated strings in a memfd, read from the start. */
static int args_memfd(char **argv)
{
        int fd = memfd_create("lockbox-zygote-args", MFD_CLOEXEC);
        for (size_t i = 1; fd >= 0 && argv[i]; i++) {
                size_t len = strlen(argv[i]) + 1;
                if (write(fd, argv[i], len) != (ssize_t)len)
                        fd = safe_close(fd);
        }
        return fd;
}

/* What a network run's environment adds to the zygote's own, as
 * NUL-separated "NAME=value" entries for its SPAWN; 0 or -E2BIG. */
static int net_env_block(struct jailer *j, char *out, size_t size)
{
        size_t used = 0;
        memset(out, 0, size);
        for (char **e = j->env[1]; *e; e++) {
                bool in_base = false;
                for (char **b = j->env[0]; *b; b++)
                        in_base |= strcmp(*b, *e) == 0;
                size_t len = strlen(*e) + 1;
                if (in_base)
                        continue;
                if (used + len >= size)
                        return -E2BIG;
                memcpy(out + used, *e, len);
                used += len;
        }
        return 0;
}

/* In the cloned child: fds 3-6 as the zygote expects, then exec with no
 * argument but its name. */
static _Noreturn void zygote_exec(struct jailer *j, int sock, int f0, int f1, int args, char **argv)
{
        sigset_t none;
        sigemptyset(&none);
        for (int sig = 1; sig < NSIG; sig++)
                signal(sig, SIG_DFL);
        sigprocmask(SIG_SETMASK, &none, NULL);
        int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
        int a = fcntl(sock, F_DUPFD, 10), b = fcntl(f0, F_DUPFD, 10), c = fcntl(f1, F_DUPFD, 10);
        int d = fcntl(args, F_DUPFD, 10);
        if (null < 0 || a < 0 || b < 0 || c < 0 || d < 0 || dup2(null, 0) < 0 || dup2(a, 3) < 0 ||
            dup2(b, 4) < 0 || dup2(c, 5) < 0 || dup2(d, 6) < 0 || lseek(6, 0, SEEK_SET) < 0)
                _exit(127);
        fd_close_from(7);
        /* Root, no credential change: the signal survives the exec. */
        prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
        char *name[] = {argv[0], NULL};
        execve(argv[0], name, j->env[0]);
        _exit(127);
}

static void zygote_on_message(void *data, uint32_t events);
static void zygote_on_exit(void *data, uint32_t events);

static int zygote_start(struct jailer *j, struct zygote *z)
{
        z->j = j;
        int sv[2] = {-1, -1}, f0 = filter_memfd(&j->langs[LANG_PYTHON3].filter[0]);
        int f1 = filter_memfd(&j->langs[LANG_PYTHON3].filter[1]);
        _cleanup_free_ char **argv = zygote_argv(j);
        int opts = argv ? args_memfd(argv) : -1;
        int r = 0;
        if (f0 < 0 || f1 < 0 || opts < 0 ||
            socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
                r = -errno ? -errno : -ENOMEM;
        struct clone_args args = {.flags = CLONE_NEWNS | CLONE_PIDFD,
                                  .pidfd = (uint64_t)(uintptr_t)&z->pidfd,
                                  .exit_signal = SIGCHLD};
        pid_t pid = r == 0 ? (pid_t)syscall(SYS_clone3, &args, sizeof(args)) : -1;
        if (pid == 0)
                zygote_exec(j, sv[1], f0, f1, opts, argv);
        if (r == 0 && pid < 0)
                r = -errno;
        safe_close(f0);
        safe_close(f1);
        safe_close(opts);
        safe_close(sv[1]);
        if (r < 0) {
                safe_close(sv[0]); /* a failed clone3 leaves the pair ours */
                log_error(NULL, "zygote.start_failed", "error=%s", log_q(strerror(-r)));
                return r;
        }
        z->pid = pid;
        z->sock = sv[0];
        z->w_sock = (struct watch){.fn = zygote_on_message, .data = z};
        z->w_exit = (struct watch){.fn = zygote_on_exit, .data = z};
        if ((r = loop_watch(j->loop, z->sock, &z->w_sock)) < 0 ||
            (r = loop_watch(j->loop, z->pidfd, &z->w_exit)) < 0) {
                zygote_kill(z);
                return r;
        }
        log_info(NULL, "zygote.starting", "pid=%d", (int)pid);
        return 0;
}

static int zygote_spawn(struct jailer *j, struct run *run, const struct zygote_fds *f,
                        const struct run_limits *limits)
{
        struct zygote *z = j->zygote;
        if (!zygote_up(j))
                return -EAGAIN;
        struct zygote_spawn m = {
            .magic = ZYGOTE_MAGIC,
            .type = ZYGOTE_SPAWN,
            .uid = run->uid,
            .network = run->network,
            .limits = *limits,
        };
        /* proxy settings go to network runs only, with their own SPAWN */
        if (run->network && net_env_block(j, m.net_env, sizeof(m.net_env)) < 0)
                return -E2BIG;
        int fds[ZYGOTE_SPAWN_MAX_FDS];
        size_t n = zygote_fds_encode(f, &m, fds);
        int r = channel_send(z->sock, &m, sizeof(m), fds, n);
        if (r < 0)
                return r;
        z->runs++;
        run->zygote_next = NULL;
        if (z->tail)
                z->tail->zygote_next = run;
        else
                z->head = run;
        z->tail = run;
        return 0;
}

static struct run *zygote_pop(struct zygote *z)
{
        struct run *run = z->head;
        if (run) {
                z->head = run->zygote_next;
                if (!z->head)
                        z->tail = NULL;
                run->zygote_next = NULL;
        }
        return run;
}

static void on_spawned(struct jailer *j, struct zygote *z, const struct zygote_reply *m)
{
        struct run *run = zygote_pop(z);
        if (z->retiring && !z->head)
                zygote_kill(z); /* its last child is born */
        if (!run) {
                log_error(NULL, "zygote.protocol", "error=\"SPAWNED with nothing asked\"");
                zygote_kill(z);
                return;
        }
        if (m->pid <= 0) {
                snprintf(run->failure, sizeof(run->failure), "zygote: clone: %s",
                         strerror(m->error));
                run_on_exit(j, run); /* no process to wait for */
                return;
        }
        run->pid = m->pid;
        /* Our child now (CLONE_PARENT): a zombie until we reap it, so the
         * pid cannot be reused before pidfd_open. */
        run->pidfd = (int)syscall(SYS_pidfd_open, run->pid, 0);
        if (run->pidfd < 0 || run_watch_exit(j, run) < 0) {
                kill(run->pid, SIGKILL);
                snprintf(run->failure, sizeof(run->failure), "pidfd: %s", strerror(errno));
                return;
        }
        if (run->killed || run->failure[0])
                run_kill(run, REASON_NONE); /* asked for while we waited */
}

/* Why the serving zygote should be replaced now, or NULL. */
static const char *rotation_due(const struct jailer *j, const struct zygote *z)
{
        const struct config *c = j->cfg;
        int64_t now = monotonic_ms();
        if (!z->ready || now < z->rotate_after_ms)
                return NULL;
        if (c->zygote_max_runs > 0 && z->runs >= (unsigned)c->zygote_max_runs)
                return "runs";
        if (c->zygote_max_age > 0 && now - z->ready_at_ms >= c->zygote_max_age * 1000LL)
                return "age";
        return NULL;
}

/* A replacement starts while the serving zygote goes on serving; it takes
 * over once ready (zygote_promote). One replacement at a time. */
static void maybe_rotate(struct jailer *j)
{
        struct zygote *z = j->zygote;
        const char *why;
        if (!z || z->disabled || j->stopping || j->zygote_next || j->zygote_old ||
            !(why = rotation_due(j, z)))
                return;
        struct zygote *next = calloc(1, sizeof(*next));
        if (!next)
                return;
        *next = (struct zygote){.pidfd = -1, .sock = -1};
        memcpy(next->binary, z->binary, sizeof(next->binary));
        if (zygote_start(j, next) < 0) {
                safe_close(next->sock);
                safe_close(next->pidfd);
                free(next);
                z->rotate_after_ms = monotonic_ms() + 10000;
                return;
        }
        j->zygote_next = next;
        log_info(NULL, "zygote.rotating", "pid=%d runs=%u reason=%s next_pid=%d", (int)z->pid,
                 z->runs, why, (int)next->pid);
}

/* The replacement is ready: it serves from now on; the old one is killed
 * once the children it was asked for are born (armed runs it made live on:
 * they are processes of their own). */
static void zygote_promote(struct jailer *j)
{
        struct zygote *old = j->zygote;
        j->zygote = TAKE_PTR(j->zygote_next);
        log_info(NULL, "zygote.rotated", "pid=%d old_pid=%d old_runs=%u", (int)j->zygote->pid,
                 (int)old->pid, old->runs);
        if (!old->pid) { /* it died meanwhile */
                free(old);
                return;
        }
        old->retiring = true;
        j->zygote_old = old;
        if (!old->head)
                zygote_kill(old);
}

static void zygote_on_message(void *data, uint32_t events)
{
        struct zygote *z = data;
        struct jailer *j = z->j;
        while (z->sock >= 0) { /* it may have died earlier in this batch */
                struct zygote_reply m;
                int fd;
                size_t nf = 0;
                int r = channel_recv(z->sock, &m, sizeof(m), &fd, 0, &nf);
                if (r == -EAGAIN)
                        return;
                if (r == 0) { /* EOF: its exit is handled through the pidfd */
                        loop_unwatch(j->loop, z->sock);
                        return;
                }
                if (r < 0 || m.magic != ZYGOTE_MAGIC) {
                        log_error(NULL, "zygote.protocol", "error=%s", log_q(strerror(-r)));
                        zygote_kill(z);
                        return;
                }
                if (m.type == ZYGOTE_READY && !z->ready) {
                        z->ready = true;
                        z->failures = 0;
                        z->ready_at_ms = monotonic_ms();
                        log_info(NULL, "zygote.ready", "pid=%d", (int)z->pid);
                        if (z == j->zygote_next)
                                zygote_promote(j);
                        warm_refill(j);
                } else if (m.type == ZYGOTE_SPAWNED) {
                        on_spawned(j, z, &m);
                }
        }
}

/* Requests waiting on a dead zygote start cold instead: none fails. */
static void rescue_pending(struct jailer *j, struct zygote *z)
{
        struct run *run;
        while ((run = zygote_pop(z))) {
                int chan = TAKE_FD(run->chan);
                char trace[PROTO_TRACE_LEN + 1], err[200] = "";
                snprintf(trace, sizeof(trace), "%s", run->trace);
                if (chan >= 0)
                        loop_unwatch(j->loop, chan);
                snprintf(run->failure, sizeof(run->failure), "the zygote died");
                run_on_exit(j, run);
                if (chan < 0)
                        continue;
                int r = run_create(j, run->slot, run->network, NULL, NULL, chan, trace, err,
                                   sizeof(err));
                if (r < 0) {
                        run_refuse(
                            chan, r == -EAGAIN ? RUN_STATUS_NO_IDENTITY : RUN_STATUS_INTERNAL, err);
                        close(chan);
                }
        }
}

static void zygote_on_exit(void *data, uint32_t events)
{
        struct zygote *z = data;
        struct jailer *j = z->j;
        int status = 0;
        if (RETRY_EINTR(waitpid(z->pid, &status, WNOHANG)) <= 0)
                return;
        loop_unwatch(j->loop, z->pidfd);
        z->pidfd = safe_close(z->pidfd);
        z->sock = safe_close(z->sock);
        bool was_ready = z->ready;
        z->ready = false;
        z->pid = 0;
        rescue_pending(j, z);
        if (z == j->zygote_old || z == j->zygote_next) {
                /* retired as planned, or a replacement that died starting:
                 * the serving one goes on, and tries again later */
                if (z == j->zygote_next && j->zygote)
                        j->zygote->rotate_after_ms = monotonic_ms() + 10000;
                if (z != j->zygote_old || !z->retiring || !WIFSIGNALED(status) ||
                    WTERMSIG(status) != SIGKILL)
                        log_error(NULL, "zygote.died", "status=%d replacement=%d", status,
                                  z == j->zygote_next);
                if (z == j->zygote_old)
                        j->zygote_old = NULL;
                else
                        j->zygote_next = NULL;
                free(z);
                return;
        }
        if (WIFEXITED(status) && WEXITSTATUS(status) == ZYGOTE_EXIT_MISMATCH) {
                z->disabled = true;
                j->langs[LANG_PYTHON3].zygote = false;
                log_warn(NULL, "zygote.disabled",
                         "reason=\"python_path is not the interpreter lockbox-pyzygote embeds\" "
                         "effect=\"Python runs start cold\"");
                return;
        }
        if (j->stopping)
                return;
        z->failures += was_ready ? 0 : 1;
        z->retry_at_ms = monotonic_ms() + backoff_ms(z->failures + 1) * (was_ready ? 1 : 10);
        log_error(NULL, "zygote.died", "status=%d restart_in_ms=%u", status,
                  backoff_ms(z->failures + 1) * (was_ready ? 1 : 10));
}

void warm_on_tick(struct jailer *j)
{
        struct zygote *z = j->zygote;
        if (z && !z->disabled && !z->pid && !j->stopping && monotonic_ms() >= z->retry_at_ms)
                zygote_start(j, z);
        maybe_rotate(j);
        warm_refill(j);
}

/* The serving zygote, the one starting to replace it, the one retiring. */
static struct zygote **zygotes(struct jailer *j, size_t i)
{
        return i == 0 ? &j->zygote : i == 1 ? &j->zygote_next : &j->zygote_old;
}
#define N_ZYGOTES 3

/* Only the supervisor stops the zygote (at shutdown). */
void warm_stop(struct jailer *j)
{
        for (size_t i = 0; i < N_ZYGOTES; i++)
                if (*zygotes(j, i))
                        zygote_kill(*zygotes(j, i));
}

bool warm_zygote_alive(const struct jailer *j)
{
        for (size_t i = 0; i < N_ZYGOTES; i++) {
                const struct zygote *z = *zygotes((struct jailer *)j, i);
                if (z && z->pid > 0)
                        return true;
        }
        return false;
}

bool warm_zygote_owns(const struct jailer *j, pid_t pid)
{
        for (size_t i = 0; i < N_ZYGOTES; i++) {
                const struct zygote *z = *zygotes((struct jailer *)j, i);
                if (z && z->pid > 0 && z->pid == pid)
                        return true;
        }
        return false;
}

bool warm_spawns_pending(const struct jailer *j)
{
        for (size_t i = 0; i < N_ZYGOTES; i++) {
                const struct zygote *z = *zygotes((struct jailer *)j, i);
                if (z && z->head)
                        return true;
        }
        return false;
}

/* lockbox-pyzygote sits next to lockboxd. */
static int find_binary(char *buf, size_t size)
{
        char self[PATH_MAX];
        ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
        if (n < 0)
                return -errno;
        self[n] = '\0';
        if ((size_t)snprintf(buf, size, "%s/lockbox-pyzygote", dirname(self)) >= size)
                return -ENAMETOOLONG;
        return access(buf, X_OK) < 0 ? -errno : 0;
}

/* The zygote as a way of spawning runs (run.c). */
static const struct run_spawner zygote_spawner = {
    .up = zygote_up, .spawn = zygote_spawn, .hung = warm_stop};

int warm_init(struct jailer *j, char *err, size_t errlen)
{
        const struct config *c = j->cfg;
        if (!config_warm(c))
                return 0;
        int r = pool_add(j, &j->langs[LANG_PYTHON3], c->python_pool);
        if (r == 0)
                r = pool_add(j, &j->langs[LANG_NODEJS], c->nodejs_pool);
        if (r < 0) {
                snprintf(err, errlen, "warm pools: %s", strerror(-r));
                return r;
        }
        if (!(j->zygote = calloc(1, sizeof(*j->zygote))))
                return -ENOMEM;
        *j->zygote = (struct zygote){.pidfd = -1, .sock = -1};
        if ((r = find_binary(j->zygote->binary, sizeof(j->zygote->binary))) < 0) {
                log_warn(NULL, "zygote.unavailable", "binary=%s error=%s effect=%s",
                         log_q(j->zygote->binary), log_q(strerror(-r)),
                         log_q("Python runs come from a pool of cold-started processes"));
                j->zygote->disabled = true;
                return 0;
        }
        j->langs[LANG_PYTHON3].zygote = true;
        j->spawner = &zygote_spawner;
        zygote_start(j, j->zygote); /* a failed start is retried on the tick */
        return 0;
}

void warm_free(struct jailer *j)
{
        for (size_t i = 0; i < ELEMENTSOF(j->langs); i++)
                for (int net = 0; net <= 1; net++) {
                        free(j->langs[i].pool[net]);
                        j->langs[i].pool[net] = NULL;
                }
        for (size_t i = 0; i < N_ZYGOTES; i++) {
                struct zygote **z = zygotes(j, i);
                if (*z) {
                        safe_close((*z)->sock);
                        safe_close((*z)->pidfd);
                        free(*z);
                        *z = NULL;
                }
        }
}
