/* The Python zygote's client in the jailer (see docs/ARCHITECTURE.md "Warm
 * execution"): it starts lockbox-pyzygote, an interpreter that imported
 * warm.python_preload once and never runs a program, sends it a SPAWN per
 * warm Python run and hands the child it names (SPAWNED) to its run. It
 * restarts a zygote that died, replaces one past zygote_max_runs or
 * _max_age, and is, for run.c, one way of spawning a run (struct
 * run_spawner); warm.c is told when a zygote is ready (a hook). */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/fd.h"
#include "base/log.h"
#include "base/util.h"
#include "config/config.h"
#include "ipc/channel.h"
#include "ipc/zygote_proto.h"
#include "jailer/internal.h"
#include "runtime/runtime.h"

/* A run waiting for its zygote's SPAWNED, in the order asked. */
struct waiting {
        struct waiting *next;
        struct run *run;
};

struct zygote {
        struct zygotes *zs;
        pid_t pid;
        int pidfd, sock;
        bool ready, disabled;
        bool retiring; /* replaced: serves no more SPAWNs, killed once none is pending */
        unsigned runs; /* SPAWNs it was sent */
        int64_t ready_at_ms, rotate_after_ms; /* monotonic_ms() */
        struct watch w_sock, w_exit;
        struct waiting *head, *tail; /* runs waiting for SPAWNED, in order */
        unsigned failures;
        int64_t retry_at_ms;      /* monotonic_ms() */
        struct zygote *next_dead; /* in zs->dead, freed after the event batch */
        char binary[PATH_MAX];
};

struct zygotes {
        const struct run_env *env;
        struct runs *rs;
        /* the zygote serving SPAWNs; while it is replaced
         * (warm.zygote_max_runs/_max_age), the one starting to take over
         * and the one retiring */
        struct zygote *serving, *next, *old;
        /* replaced or failed replacements, gone: freed by zygotes_sweep()
         * once the loop's batch is over (it may still hold their events) */
        struct zygote *dead;
        bool stopping; /* the jailer stops: no restart, no replacement */
        void (*on_ready)(void *data);
        void *on_ready_data;
};

bool zygotes_up(const struct zygotes *zs)
{
        return zs && zs->serving && zs->serving->ready;
}

bool zygotes_serving(const struct zygotes *zs)
{
        return zs && zs->serving && !zs->serving->disabled;
}

pid_t zygotes_pid(const struct zygotes *zs)
{
        return zs && zs->serving ? zs->serving->pid : 0;
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
static char **zygote_argv(struct zygotes *zs)
{
        const struct config *c = zs->env->cfg;
        const struct runtime *rt = zs->env->langs[LANG_PYTHON3].rt;
        size_t n = 11 + 2 * (rt->n_ro_paths + c->n_python_preload);
        char **argv = calloc(n, sizeof(char *));
        size_t k = 0;
        if (!argv)
                return NULL;
        argv[k++] = zs->serving->binary;
        argv[k++] = (char *)"--python";
        argv[k++] = c->python_path;
        argv[k++] = (char *)"--hostname";
        argv[k++] = c->hostname;
        if (strcmp(c->log_format, "json") == 0)
                argv[k++] = (char *)"--log-json";
        if (zs->env->resolv_conf) {
                argv[k++] = (char *)"--resolv-conf";
                argv[k++] = zs->env->resolv_conf;
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
static int net_env_block(struct zygotes *zs, char *out, size_t size)
{
        size_t used = 0;
        memset(out, 0, size);
        for (char **e = zs->env->envp[1]; *e; e++) {
                bool in_base = false;
                for (char **b = zs->env->envp[0]; *b; b++)
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
static _Noreturn void zygote_exec(struct zygotes *zs, int sock, int f0, int f1, int args,
                                  char **argv)
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
        /* the runs' environment, and LD_BIND_NOW for the dynamic linker
         * alone (the zygote drops it at once: see its main()) */
        char *envp[RUN_ENV_MAX + 2];
        size_t n = 0;
        envp[n++] = (char *)"LD_BIND_NOW=1";
        for (char **e = zs->env->envp[0]; *e; e++)
                envp[n++] = *e; /* runtime_env() made at most RUN_ENV_MAX */
        envp[n] = NULL;
        execve(argv[0], name, envp);
        _exit(127);
}

static void zygote_on_message(void *data, uint32_t events);
static void zygote_on_exit(void *data, uint32_t events);

static int zygote_start(struct zygotes *zs, struct zygote *z)
{
        z->zs = zs;
        int sv[2] = {-1, -1}, f0 = filter_memfd(&zs->env->langs[LANG_PYTHON3].filter[0]);
        int f1 = filter_memfd(&zs->env->langs[LANG_PYTHON3].filter[1]);
        _cleanup_free_ char **argv = zygote_argv(zs);
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
                zygote_exec(zs, sv[1], f0, f1, opts, argv);
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
        z->runs = 0;
        if ((r = loop_watch(zs->env->loop, z->sock, &z->w_sock)) < 0 ||
            (r = loop_watch(zs->env->loop, z->pidfd, &z->w_exit)) < 0) {
                /* unwatched, its exit would never be seen: reap it now */
                zygote_kill(z);
                RETRY_EINTR(waitpid(z->pid, NULL, 0));
                loop_unwatch(zs->env->loop, z->sock);
                z->sock = safe_close(z->sock);
                z->pidfd = safe_close(z->pidfd);
                z->pid = 0;
                return r;
        }
        log_info(NULL, "zygote.starting", "pid=%d", (int)pid);
        return 0;
}

static int zygote_spawn(void *data, struct run *run, uid_t uid, bool network,
                        const struct zygote_fds *f, const struct run_limits *limits)
{
        struct zygotes *zs = data;
        struct zygote *z = zs->serving;
        if (!zygotes_up(zs))
                return -EAGAIN;
        struct zygote_spawn m = {
            .magic = ZYGOTE_MAGIC,
            .type = ZYGOTE_SPAWN,
            .uid = uid,
            .network = network,
            .limits = *limits,
        };
        /* proxy settings go to network runs only, with their own SPAWN */
        if (network && net_env_block(zs, m.net_env, sizeof(m.net_env)) < 0)
                return -E2BIG;
        struct waiting *w = calloc(1, sizeof(*w));
        if (!w)
                return -ENOMEM;
        int fds[ZYGOTE_SPAWN_MAX_FDS];
        size_t n = zygote_fds_encode(f, &m, fds);
        int r = channel_send(z->sock, &m, sizeof(m), fds, n);
        if (r < 0) {
                free(w);
                return r;
        }
        z->runs++;
        w->run = run;
        if (z->tail)
                z->tail->next = w;
        else
                z->head = w;
        z->tail = w;
        return 0;
}

static struct run *zygote_pop(struct zygote *z)
{
        struct waiting *w = z->head;
        if (!w)
                return NULL;
        z->head = w->next;
        if (!z->head)
                z->tail = NULL;
        struct run *run = w->run;
        free(w);
        return run;
}

static void on_spawned(struct zygotes *zs, struct zygote *z, const struct zygote_reply *m)
{
        struct run *run = zygote_pop(z);
        if (z->retiring && !z->head)
                zygote_kill(z); /* its last child is born */
        if (!run) {
                log_error(NULL, "zygote.protocol", "error=\"SPAWNED with nothing asked\"");
                zygote_kill(z);
                return;
        }
        run_spawned(run, m->pid, m->error);
}

/* Why the serving zygote should be replaced now, or NULL. */
static const char *rotation_due(const struct zygotes *zs, const struct zygote *z)
{
        const struct config *c = zs->env->cfg;
        int64_t now = monotonic_ms();
        if (!z->ready || now < z->rotate_after_ms)
                return NULL;
        if (c->zygote_max_runs > 0 && z->runs >= (unsigned)c->zygote_max_runs)
                return "runs";
        if (c->zygote_max_age > 0 && now - z->ready_at_ms >= c->zygote_max_age * 1000LL)
                return "age";
        return NULL;
}

/* A zygote let go (retired, or a replacement that failed): freed by
 * zygotes_sweep() after the loop's batch, which may hold its events. */
static void bury(struct zygotes *zs, struct zygote *z)
{
        z->next_dead = zs->dead;
        zs->dead = z;
}

/* A replacement starts while the serving zygote goes on serving; it takes
 * over once ready (zygote_promote). One replacement at a time. */
static void maybe_rotate(struct zygotes *zs)
{
        struct zygote *z = zs->serving;
        const char *why;
        if (!z || z->disabled || zs->stopping || zs->next || zs->old ||
            !(why = rotation_due(zs, z)))
                return;
        struct zygote *next = calloc(1, sizeof(*next));
        if (!next)
                return;
        *next = (struct zygote){.pidfd = -1, .sock = -1};
        memcpy(next->binary, z->binary, sizeof(next->binary));
        if (zygote_start(zs, next) < 0) {
                bury(zs, next); /* (nothing of it is watched) */
                z->rotate_after_ms = monotonic_ms() + ZYGOTE_ROTATE_RETRY_S * 1000;
                return;
        }
        zs->next = next;
        log_info(NULL, "zygote.rotating", "pid=%d runs=%u reason=%s next_pid=%d", (int)z->pid,
                 z->runs, why, (int)next->pid);
}

/* The replacement is ready: it serves from now on; the old one is killed
 * once the children it was asked for are born (armed runs it made live on:
 * they are processes of their own). */
static void zygote_promote(struct zygotes *zs)
{
        struct zygote *old = zs->serving;
        zs->serving = TAKE_PTR(zs->next);
        log_info(NULL, "zygote.rotated", "pid=%d old_pid=%d old_runs=%u", (int)zs->serving->pid,
                 (int)old->pid, old->runs);
        if (!old->pid) { /* it died meanwhile */
                bury(zs, old);
                return;
        }
        old->retiring = true;
        zs->old = old;
        if (!old->head)
                zygote_kill(old);
}

static void zygote_on_message(void *data, uint32_t events)
{
        struct zygote *z = data;
        struct zygotes *zs = z->zs;
        while (z->sock >= 0) { /* it may have died earlier in this batch */
                struct zygote_reply m;
                int fd;
                size_t nf = 0;
                int r = channel_recv(z->sock, &m, sizeof(m), &fd, 0, &nf);
                if (r == -EAGAIN)
                        return;
                if (r == 0) { /* EOF: its exit is handled through the pidfd */
                        loop_unwatch(zs->env->loop, z->sock);
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
                        if (z == zs->next)
                                zygote_promote(zs);
                        if (zs->on_ready)
                                zs->on_ready(zs->on_ready_data);
                } else if (m.type == ZYGOTE_SPAWNED) {
                        on_spawned(zs, z, &m);
                }
        }
}

/* Requests waiting on a dead zygote start cold instead: none fails. */
static void rescue_pending(struct zygote *z)
{
        struct run *run;
        while ((run = zygote_pop(z)))
                run_spawn_lost(run);
}

static void zygote_on_exit(void *data, uint32_t events)
{
        struct zygote *z = data;
        struct zygotes *zs = z->zs;
        int status = 0;
        if (RETRY_EINTR(waitpid(z->pid, &status, WNOHANG)) <= 0)
                return;
        loop_unwatch(zs->env->loop, z->pidfd);
        loop_unwatch(zs->env->loop, z->sock); /* a clone may still hold a copy of it */
        z->pidfd = safe_close(z->pidfd);
        z->sock = safe_close(z->sock);
        bool was_ready = z->ready;
        z->ready = false;
        z->pid = 0;
        rescue_pending(z);
        if (z == zs->old || z == zs->next) {
                /* retired as planned, or a replacement that died starting:
                 * the serving one goes on, and tries again later */
                if (z == zs->next && zs->serving)
                        zs->serving->rotate_after_ms =
                            monotonic_ms() + ZYGOTE_ROTATE_RETRY_S * 1000;
                if (z != zs->old || !z->retiring || !WIFSIGNALED(status) ||
                    WTERMSIG(status) != SIGKILL)
                        log_error(NULL, "zygote.died", "status=%d replacement=%d", status,
                                  z == zs->next);
                if (z == zs->old)
                        zs->old = NULL;
                else
                        zs->next = NULL;
                bury(zs, z);
                return;
        }
        if (WIFEXITED(status) && WEXITSTATUS(status) == ZYGOTE_EXIT_MISMATCH) {
                z->disabled = true;
                log_warn(NULL, "zygote.disabled",
                         "reason=\"python_path is not the interpreter lockbox-pyzygote embeds\" "
                         "effect=\"Python runs start cold\"");
                return;
        }
        if (zs->stopping)
                return;
        z->failures += was_ready ? 0 : 1;
        z->retry_at_ms = monotonic_ms() + backoff_ms(z->failures + 1) * (was_ready ? 1 : 10);
        log_error(NULL, "zygote.died", "status=%d restart_in_ms=%u", status,
                  backoff_ms(z->failures + 1) * (was_ready ? 1 : 10));
}

void zygotes_sweep(struct zygotes *zs)
{
        while (zs && zs->dead) {
                struct zygote *z = zs->dead;
                zs->dead = z->next_dead;
                free(z);
        }
}

void zygotes_on_tick(struct zygotes *zs)
{
        struct zygote *z = zs->serving;
        /* (a replacement already starting takes over instead) */
        if (z && !z->disabled && !z->pid && !zs->stopping && !zs->next &&
            monotonic_ms() >= z->retry_at_ms)
                zygote_start(zs, z);
        maybe_rotate(zs);
}

/* The serving zygote, the one starting to replace it, the one retiring. */
static struct zygote **zygote_slot(struct zygotes *zs, size_t i)
{
        return i == 0 ? &zs->serving : i == 1 ? &zs->next : &zs->old;
}
#define N_ZYGOTES 3

/* Kill them all (a hung one, or at shutdown), through their pidfds. */
static void zygotes_kill(struct zygotes *zs)
{
        for (size_t i = 0; i < N_ZYGOTES; i++)
                if (*zygote_slot(zs, i))
                        zygote_kill(*zygote_slot(zs, i));
}

bool zygotes_alive(const struct zygotes *zs)
{
        if (!zs)
                return false;
        for (size_t i = 0; i < N_ZYGOTES; i++) {
                const struct zygote *z = *zygote_slot((struct zygotes *)zs, i);
                if (z && z->pid > 0)
                        return true;
        }
        return false;
}

bool zygotes_own(const struct zygotes *zs, pid_t pid)
{
        if (!zs)
                return false;
        for (size_t i = 0; i < N_ZYGOTES; i++) {
                const struct zygote *z = *zygote_slot((struct zygotes *)zs, i);
                if (z && z->pid > 0 && z->pid == pid)
                        return true;
        }
        return false;
}

bool zygotes_pending(const struct zygotes *zs)
{
        if (!zs)
                return false;
        for (size_t i = 0; i < N_ZYGOTES; i++) {
                const struct zygote *z = *zygote_slot((struct zygotes *)zs, i);
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

/* The zygote as a way of spawning Python runs (run.c). */

static void zygote_hung(void *data)
{
        zygotes_kill(data);
}

static bool zygote_spawner_up(void *data)
{
        return zygotes_up(data);
}

static const struct run_spawner zygote_spawner = {
    .up = zygote_spawner_up, .spawn = zygote_spawn, .hung = zygote_hung};

int zygotes_new(const struct run_env *env, struct runs *rs, void (*on_ready)(void *data),
                void *data, struct zygotes **ret)
{
        struct zygotes *zs = calloc(1, sizeof(*zs));
        struct zygote *z = calloc(1, sizeof(*z));
        if (!zs || !z) {
                free(zs);
                free(z);
                return -ENOMEM;
        }
        *zs = (struct zygotes){
            .env = env, .rs = rs, .serving = z, .on_ready = on_ready, .on_ready_data = data};
        *z = (struct zygote){.pidfd = -1, .sock = -1};
        *ret = zs;
        int r = find_binary(z->binary, sizeof(z->binary));
        if (r < 0) {
                log_warn(NULL, "zygote.unavailable", "binary=%s error=%s effect=%s",
                         log_q(z->binary), log_q(strerror(-r)),
                         log_q("Python runs come from a pool of cold-started processes"));
                z->disabled = true;
                return 0;
        }
        runs_set_spawner(rs, LANG_PYTHON3, &zygote_spawner, zs);
        zygote_start(zs, z); /* a failed start is retried on the tick */
        return 0;
}

void zygotes_stop(struct zygotes *zs)
{
        if (!zs)
                return;
        zs->stopping = true;
        zygotes_kill(zs);
}

struct zygotes *zygotes_free(struct zygotes *zs)
{
        if (!zs)
                return NULL;
        for (size_t i = 0; i < N_ZYGOTES; i++) {
                struct zygote **z = zygote_slot(zs, i);
                if (!*z)
                        continue;
                safe_close((*z)->sock);
                safe_close((*z)->pidfd);
                while ((*z)->head)
                        zygote_pop(*z);
                free(*z);
                *z = NULL;
        }
        zygotes_sweep(zs);
        free(zs);
        return NULL;
}
