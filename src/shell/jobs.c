/* The jobs table (see shell.h). A job is a directory under
 * shell.state_dir/jobs/<id> (script, output.log, stderr.log), a cgroup of
 * its own, a keeper process (keeper.c) and a binding whose namespaces it
 * joins (binding.c). A call reads one struct shell_req from its channel,
 * and is answered at once or parked: a wait polls the job's output size
 * (5 ms doubling to 50 ms, as the reference) and ends at the job's exit,
 * a full window, an idle flush or its deadline; a terminate waits for the
 * job's processes to end or its grace to pass, then kills the group. */
#include "shell/shell.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/fd.h"
#include "base/file.h"
#include "base/log.h"
#include "base/loop.h"
#include "base/util.h"
#include "config/config.h"
#include "ipc/channel.h"
#include "jail/cgroup.h"
#include "net/net.h"
#include "shell/disk.h"
#include "shell/internal.h"
#include "shell/snapshot.h"
#include "shell/stats.h"
#include "shell/store.h"
#include "shell/subvol.h"
#include "shell/window.h"

#define POLL_FIRST_MS 5
#define POLL_MAX_MS 50
#define GC_EVERY_MS 1000
#define TIMEOUT_GRACE_MS 10000 /* shell.job_timeout: interrupt, then this, then kill */
#define NOFILE 4096
#define CONVERT_TIMEOUT_MS 10000 /* a tree moved into its subvolume (its run waits) */
#define REMOVE_TIMEOUT_MS 300000 /* then the old tree's removal (nobody waits) */
#define CONTROL_WAIT_MS 10000    /* a move waits this long for control jobs to end */
#define SPARE_DELAY_MS 50        /* a binding's spare is made this long after a start */
#define SPARE_END_MS 500         /* a dropped spare's keeper ends by then, or is killed */
#define KEEPER_END_MS 1000       /* a removed job's keeper tells its exit by then, or is killed */

/* pidfd_send_signal to the process group of the pidfd's process (Linux
 * 6.9); older headers lack it */
#ifndef PIDFD_SIGNAL_PROCESS_GROUP
#define PIDFD_SIGNAL_PROCESS_GROUP (1U << 2)
#endif

/* /etc entries a shell job sees besides the ones the jail writes itself
 * (passwd, group, hostname, hosts, resolv.conf, nsswitch.conf): what
 * shells, git, compilers, Python, Node.js and TLS clients read. Never the
 * whole /etc, which holds secrets (lockbox's own configuration among
 * them). */
static const char *const etc_paths[] = {
    "/etc/alternatives",
    "/etc/bash.bashrc",
    "/etc/ca-certificates",
    "/etc/ca-certificates.conf",
    "/etc/debian_version",
    "/etc/environment",
    "/etc/fonts",
    "/etc/gai.conf",
    "/etc/gitconfig",
    "/etc/host.conf",
    "/etc/inputrc",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/locale.alias",
    "/etc/localtime",
    "/etc/magic",
    "/etc/magic.mime",
    "/etc/matplotlibrc",
    "/etc/mime.types",
    "/etc/nanorc",
    "/etc/npmrc",
    "/etc/os-release",
    "/etc/pip.conf",
    "/etc/profile",
    "/etc/profile.d",
    "/etc/protocols",
    "/etc/python3",
    "/etc/python3.11",
    "/etc/rpc",
    "/etc/services",
    "/etc/ssh/ssh_config",
    "/etc/ssh/ssh_config.d",
    "/etc/ssl",
    "/etc/terminfo",
    "/etc/timezone",
    "/etc/vim",
    "/etc/wgetrc",
    "/etc/xdg",
};

/* Landlock's read-only list entries the jail provides itself. */
static bool jail_owned(const char *p)
{
        static const char *const own[] = {"/etc", "/proc", "/dev", "/tmp"};
        for (size_t i = 0; i < ELEMENTSOF(own); i++) {
                size_t n = strlen(own[i]);
                if (strncmp(p, own[i], n) == 0 && (p[n] == '\0' || p[n] == '/'))
                        return true;
        }
        return false;
}

struct binding {
        struct binding *next;
        struct shell *sh;
        char *key;
        pid_t pid;
        int pidfd;
        int ns[4];             /* pid, net, ipc, uts */
        uint32_t addr;         /* its address on the run network, or 0 */
        unsigned serial;       /* names its cgroup, shell-b<serial> */
        bool retired;          /* adopted with a network the last lockboxd took away:
                                * its jobs go on, new ones get a new binding */
        struct cgroup_run *cg; /* the binding's group, its jobs' groups inside; or NULL */
        unsigned jobs;
        struct watch w;
        int64_t idle_ms;   /* monotonic: when its last job was removed, or 0 */
        struct job *spare; /* its next job, made ahead (spare_make), or NULL */
        int64_t spare_ms;  /* when to make one, or 0 */
        char *spare_home;  /* the HOME and workspace (or NULL) of its last job: */
        char *spare_ws;    /* the spare's view */
};

struct job {
        struct job *next;
        struct shell *sh;
        char id[SHELL_JOB_ID_LEN + 1];
        enum shell_mode mode;
        uint32_t status;
        bool has_exit;
        int exit_code;
        int64_t created, started, ended; /* Unix seconds, -1 unset */
        int64_t ended_ms;                /* monotonic, for shell.retention */
        int64_t started_ms;              /* monotonic, 0 unset (shell/stats.c) */
        int64_t deadline_ms;             /* shell.job_timeout */
        int64_t kill_at_ms;              /* a terminate's grace ends, or -1 */
        int dirfd, out_rfd;
        pid_t keeper_pid, pid;
        int keeper_pidfd, sock;
        int pidfd; /* the job's first process, its group's leader (from KEEPER_STARTED) */
        bool keeper_gone;
        bool exit_heard;   /* the keeper told the exit: it has reaped the first process */
        bool unsaved;      /* its row is written at the end of the loop's turn */
        bool terminating;  /* being terminated: its end is "terminated" */
        uint64_t oom_seen; /* OOM kills already told */
        char *home;        /* its HOME (another binding's workspace may not hold it) */
        char *ws;          /* its workspace, or NULL (none, or not known) */
        bool ws_unknown;   /* adopted from a table that did not record workspaces */
        struct binding *b;
        unsigned serial; /* its binding's, kept if the binding is gone */
        struct cgroup_run *cg;
        struct watch w_sock, w_keeper;
        bool spare;     /* a binding's spare: in no list, its keeper waits for a job */
        size_t n_trees; /* a spare: the HOME and workspace its view holds, */
        int tree_fd[2]; /* held open: a tree removed since is seen so */
};

/* CALL_CONVERT: a run waiting for a tree of its job to be moved into
 * its subvolume (then the run starts over) */
enum call_state { CALL_READ, CALL_WAIT, CALL_TERMINATE, CALL_CONVERT, CALL_DONE };

/* A tree (HOME or workspace) being moved into a subvolume of its own by
 * subvol.c's worker, on the loop; the runs that need it wait. Kept while
 * a run waits, so each learns how it ended. */
struct conversion {
        struct conversion *next;
        struct shell *sh;
        char path[PATH_MAX];
        struct subvol_pending *p; /* NULL once over */
        struct watch w;
        int64_t deadline_ms;
        bool removing; /* moved in at its deadline: the old tree's removal goes on */
        int result;    /* once over: 0, or -errno with err */
        char err[300];
        unsigned waiters;
};

struct call {
        struct call *next;
        struct shell *sh;
        int chan;
        struct watch w;
        enum call_state state;
        struct shell_req req;
        int64_t deadline_ms, next_ms, poll_ms, last_growth_ms;
        uint64_t last_size;
        bool saw_output;
        bool delete_after;       /* a forced DELETE waiting for its terminate */
        int blobfd;              /* CALL_CONVERT: the run's request, for its start over */
        struct conversion *conv; /* CALL_CONVERT: what it waits for */
        int64_t parked_ms;       /* CALL_CONVERT: when the run first waited, or 0 */
        bool control;            /* CALL_CONVERT: a control job's run (waits for a copy) */
};

struct shell {
        const struct config *cfg;
        struct loop *loop;
        struct cgroup_root *cg;
        enum shell_net net_mode;
        struct net *net;
        const char *resolv_conf;
        struct policy_prog filter;
        struct store *store;
        int home_fd, jobs_fd;
        char *jobs_dir;
        struct job *jobs;
        struct binding *bindings;
        struct call *calls;
        struct conversion *conversions;
        char **ro_paths; /* the view's read-only binds */
        size_t n_ro_paths;
        int64_t next_gc_ms;
        unsigned next_binding;
        bool bounds;                 /* shell.home is lockbox's btrfs image: trees bounded */
        struct policy_prog subvol_f; /* the subvolume worker's filter (bounds) */
        int moves_fd;                /* shell.state_dir/moves: the moves' records (subvol.c) */
        bool kept;                   /* jobs left running at stop: the disk stays mounted */
        pid_t *keep;                 /* their keepers and inits, which the jailer leaves at exit */
        size_t n_keep;
};

/* ---- small pieces ------------------------------------------------------ */

static int under_home(const char *home, const char *path, const char **ret_rel);
static int open_beneath(int dirfd, const char *rel, int flags);

static int64_t now_s(void)
{
        return (int64_t)time(NULL);
}

static bool terminal(const struct job *j)
{
        return SHELL_STATUS_TERMINAL(j->status);
}

static struct job *job_find(struct shell *sh, const char *id)
{
        for (struct job *j = sh->jobs; j; j = j->next)
                if (strcmp(j->id, id) == 0)
                        return j;
        return NULL;
}

static uint64_t out_size(const struct job *j)
{
        struct stat st;
        return fstat(j->out_rfd, &st) == 0 ? (uint64_t)st.st_size : 0;
}

static void view_of(const struct job *j, struct shell_view *v)
{
        *v = (struct shell_view){.status = j->status,
                                 .has_exit_code = j->has_exit,
                                 .exit_code = j->exit_code,
                                 .created_at = j->created,
                                 .started_at = j->started,
                                 .ended_at = j->ended,
                                 .size = out_size(j)};
        memcpy(v->job_id, j->id, sizeof(v->job_id));
}

/* Calls parked on the job look again at the next tick, not at their next
 * poll: a wait answers a job's end at once. */
static void wake_calls(struct job *j)
{
        for (struct call *c = j->sh->calls; c; c = c->next)
                if (strcmp(c->req.job_id, j->id) == 0)
                        c->next_ms = 0;
}

/* The job's row (store.h), after each change a restart must know. */
static void job_save(const struct job *j)
{
        struct store_job r = {.id = j->id,
                              .mode = j->mode,
                              .status = (int)j->status,
                              .has_exit = j->has_exit,
                              .exit_code = j->exit_code,
                              .created = j->created,
                              .started = j->started,
                              .ended = j->ended,
                              .home = j->home ? j->home : "",
                              .binding = j->serial,
                              .keeper = j->keeper_gone ? 0 : j->keeper_pid,
                              .ws = j->ws           ? j->ws
                                    : j->ws_unknown ? NULL
                                                    : ""};
        store_job_put(j->sh->store, &r);
}

/* A job being terminated stays running until it has ended, so no wait
 * sees it done without its exit code; then its end is "terminated". */
static void set_status(struct job *j, uint32_t status)
{
        if (terminal(j))
                return;
        if (j->terminating && (status == SHELL_EXITED || status == SHELL_LOST))
                status = SHELL_TERMINATED;
        if (status == SHELL_LOST && !j->has_exit) {
                /* how it ended is not known: -1, never a code a script
                 * gives (Dify's client needs a number once done) */
                j->has_exit = true;
                j->exit_code = -1;
        }
        wake_calls(j);
        shell_stats_status(j->status, status, &j->started_ms, out_size(j));
        if ((status == SHELL_STARTING || status == SHELL_RUNNING) && j->started < 0)
                j->started = now_s();
        j->status = status;
        if (SHELL_STATUS_TERMINAL(status)) {
                j->ended = now_s();
                j->ended_ms = monotonic_ms();
                log_info(NULL, "shell.job_ended", "job=%s status=%s exit_code=%d", j->id,
                         shell_status_name(status), j->has_exit ? j->exit_code : -1);
        }
        /* written once the calls it wakes are answered (save_rows): the
         * row is a restart's, no answer waits for it */
        j->unsaved = true;
}

static void save_rows(struct shell *sh)
{
        for (struct job *j = sh->jobs; j; j = j->next)
                if (j->unsaved) {
                        j->unsaved = false;
                        job_save(j);
                }
}

/* A line for whoever reads the job's output: on a terminal in output.log,
 * as a shell prints "Killed"; stdio's output stays byte-exact, so there it
 * goes to stderr.log. Always in the daemon's log. */
static void verdict(struct job *j, const char *fmt, ...) _printf_(2, 3);
static void verdict(struct job *j, const char *fmt, ...)
{
        char text[256], line[300];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(text, sizeof(text), fmt, ap);
        va_end(ap);
        int n = snprintf(line, sizeof(line), "\n[lockbox] %s\n", text);
        _cleanup_close_ int fd =
            openat(j->dirfd, j->mode == SHELL_MODE_PTY ? "output.log" : "stderr.log",
                   O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW);
        if (fd >= 0 && n > 0)
                file_write_all(fd, line, (size_t)n);
        log_warn(NULL, "shell.job_verdict", "job=%s verdict=%s", j->id, log_q(text));
}

/* ---- replies ----------------------------------------------------------- */

static void reply_send(struct call *c, struct shell_reply *rep, int fd)
{
        shell_reply_send(c->chan, rep, fd);
        c->state = CALL_DONE;
}

static void reply_error(struct call *c, unsigned status, const char *code, const char *fmt, ...)
    _printf_(4, 5);
static void reply_error(struct call *c, unsigned status, const char *code, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        shell_reply_verror(c->chan, status, code, fmt, ap);
        va_end(ap);
        c->state = CALL_DONE;
}

static void reply_not_found(struct call *c)
{
        reply_error(c, 404, "job_not_found", "Unknown job id");
}

static void reply_view(struct call *c, const struct job *j)
{
        struct shell_reply rep = {0};
        view_of(j, &rep.view);
        reply_send(c, &rep, -1);
}

/* A window of the job's output at the call's offset (or its tail). */
static void reply_window(struct call *c, struct job *j, bool tail)
{
        struct shell_reply rep = {0};
        struct shell_window w;
        uint64_t size = 0;
        int r = tail ? shell_window_tail(j->out_rfd, c->req.output_limit, &w)
                     : shell_window_read(j->out_rfd, (uint64_t)c->req.offset, c->req.output_limit,
                                         &w, &size);
        if (r == -ERANGE) {
                reply_error(c, 400, "invalid_offset", "offset %lld exceeds current file size %llu",
                            (long long)c->req.offset, (unsigned long long)out_size(j));
                return;
        }
        if (r < 0) {
                reply_error(c, 500, "internal_error", "reading output: %s", strerror(-r));
                return;
        }
        view_of(j, &rep.view);
        rep.win_start = w.start;
        rep.win_end = w.end;
        rep.truncated = w.truncated;
        reply_send(c, &rep, w.end > w.start ? j->out_rfd : -1);
}

/* ---- bindings ---------------------------------------------------------- */

/* After its SIGKILL: waited for through its pidfd (2 s at most), so what
 * it held (an init's namespaces, the disk's mounts in them) is let go
 * before this returns, and reaped if it is this jailer's child (one
 * adopted from the last lockboxd is init's). Never a blocking waitpid: a
 * binding's init ends only once every process of its namespace is
 * reaped, and one may be this jailer's to reap (lockboxd is PID 1 in its
 * container), which the loop does (reap_strays) once this returns. */
static void gone(int pidfd, pid_t pid)
{
        struct pollfd p = {.fd = pidfd, .events = POLLIN};
        if (waitpid(pid, NULL, WNOHANG) != pid && RETRY_EINTR(poll(&p, 1, 2000)) > 0)
                waitpid(pid, NULL, WNOHANG);
}

static void binding_unlink(struct binding *b)
{
        struct shell *sh = b->sh;
        for (struct binding **p = &sh->bindings; *p; p = &(*p)->next)
                if (*p == b) {
                        *p = b->next;
                        break;
                }
        if (b->pidfd >= 0)
                loop_unwatch(sh->loop, b->pidfd);
}

static void binding_close(struct binding *b)
{
        safe_close(b->pidfd);
        for (int i = 0; i < 4; i++)
                safe_close(b->ns[i]);
        cgroup_run_free(b->cg);
        free(b->key);
        free(b->spare_home);
        free(b->spare_ws);
        free(b);
}

static void spare_drop(struct binding *b);

/* A keeper or the init into the binding's holders group, where a start
 * that has lost the binding's record finds and ends them. */
static int hold(const struct binding *b, pid_t pid)
{
        char name[32];
        snprintf(name, sizeof(name), "shell-b%u", b->serial);
        return cgroup_shell_hold(b->sh->cg, name, pid);
}

/* The binding ends: its init killed (the kernel ends what is left in its
 * namespaces), its address and groups given back, its row gone. */
static void binding_free(struct binding *b)
{
        struct shell *sh = b->sh;
        spare_drop(b);
        binding_unlink(b);
        if (b->pidfd >= 0) {
                syscall(SYS_pidfd_send_signal, b->pidfd, SIGKILL, NULL, 0);
                gone(b->pidfd, b->pid);
        }
        if (b->addr)
                net_run_release(sh->net, b->addr);
        if (b->cg) {
                char name[32];
                snprintf(name, sizeof(name), "shell-b%u", b->serial);
                cgroup_shell_unhold(sh->cg, name);
                cgroup_run_remove(b->cg);
        }
        store_binding_delete(sh->store, b->serial);
        log_info(NULL, "shell.binding_ended", "binding=%s", log_q(b->key));
        binding_close(b);
}

/* Its last job removed: the binding stays shell.binding_linger, with its
 * spare, for its next job (gc ends it then). At most shell.max_jobs
 * bindings wait so; beyond, the one idle longest ends. */
static void binding_idle(struct binding *b)
{
        struct shell *sh = b->sh;
        if (!sh->cfg->shell_binding_linger || b->retired || b->pidfd < 0) {
                binding_free(b);
                return;
        }
        b->idle_ms = monotonic_ms();
        unsigned idle = 0;
        struct binding *oldest = NULL;
        for (struct binding *o = sh->bindings; o; o = o->next)
                if (o->jobs == 0 && o->idle_ms) {
                        idle++;
                        if (!oldest || o->idle_ms < oldest->idle_ms)
                                oldest = o;
                }
        if (idle > (unsigned)sh->cfg->shell_max_jobs)
                binding_free(oldest);
}

/* The start time of a process (clock ticks since boot, /proc/PID/stat's
 * 22nd field): with its PID, what names it across a restart. 0 if gone. */
static uint64_t start_ticks(pid_t pid)
{
        char path[64], buf[1024];
        snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
        ssize_t n = file_read_buf(path, buf, sizeof(buf));
        char *p = n > 0 ? strrchr(buf, ')') : NULL;
        unsigned long long t = 0;
        /* after ") ": state, then 18 fields, then starttime */
        if (p && sscanf(p + 2,
                        "%*c %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s "
                        "%*s %*s %*s %llu",
                        &t) != 1)
                t = 0;
        return t;
}

static void on_binding_exit(void *data, uint32_t events)
{
        struct binding *b = data;
        /* an init that died (it never should) takes its namespace with it;
         * jobs still using it have lost their processes */
        loop_unwatch(b->sh->loop, b->pidfd);
        waitpid(b->pid, NULL, WNOHANG);
        log_warn(NULL, "shell.binding_died", "binding=%s", log_q(b->key));
        b->pidfd = safe_close(b->pidfd);
}

static struct binding *binding_find(struct shell *sh, const char *key)
{
        for (struct binding *b = sh->bindings; b; b = b->next)
                if (strcmp(b->key, key) == 0 && b->pidfd >= 0 && !b->retired)
                        return b;
        return NULL;
}

static int binding_get(struct shell *sh, const char *key, struct binding **ret)
{
        if ((*ret = binding_find(sh, key)))
                return 0;
        struct binding *b = calloc(1, sizeof(*b));
        if (!b || !(b->key = strdup(key))) {
                free(b);
                return -ENOMEM;
        }
        b->sh = sh;
        b->pidfd = -1;
        for (int i = 0; i < 4; i++)
                b->ns[i] = -1;
        int r = 0;
        char err[256] = "";
        b->serial = ++sh->next_binding;
        if (cgroup_root_mode(sh->cg) != CGROUP_NONE) {
                struct cgroup_limits lim = {.memory_bytes = sh->cfg->shell_binding_memory_bytes,
                                            .pids = sh->cfg->shell_binding_processes,
                                            .cpu_weight = sh->cfg->shell_cpu_weight};
                char name[32];
                snprintf(name, sizeof(name), "shell-b%u", b->serial);
                r = cgroup_shell_create(sh->cg, name, &lim, &b->cg);
        }
        if (r == 0 && sh->net_mode == SHELL_NET_NAMESPACE)
                r = net_run_create(sh->net, &b->ns[1], &b->addr, err, sizeof(err));
        if (r == 0)
                r = binding_holder_start(sh->cfg->hostname, (uid_t)sh->cfg->shell_uid, b->ns[1],
                                         sh->net_mode == SHELL_NET_HOST, &b->pid, &b->pidfd);
        else if (*err)
                log_error(NULL, "shell.binding_network", "binding=%s error=%s", log_q(key),
                          log_q(err));
        if (r == 0 && b->cg)
                r = hold(b, b->pid);
        static const char *const names[] = {"pid", "net", "ipc", "uts"};
        for (int i = 0; r == 0 && i < 4; i++) {
                char path[64];
                snprintf(path, sizeof(path), "/proc/%d/ns/%s", (int)b->pid, names[i]);
                if (b->ns[i] < 0 && (b->ns[i] = open(path, O_RDONLY | O_CLOEXEC)) < 0)
                        r = -errno;
        }
        b->w = (struct watch){.fn = on_binding_exit, .data = b};
        if (r == 0)
                r = loop_watch(sh->loop, b->pidfd, &b->w);
        b->next = sh->bindings;
        sh->bindings = b;
        if (r < 0) {
                binding_free(b);
                return r;
        }
        store_binding_put(sh->store, &(struct store_binding){.serial = b->serial,
                                                             .key = b->key,
                                                             .pid = b->pid,
                                                             .start_ticks = start_ticks(b->pid)});
        log_info(NULL, "shell.binding_started", "binding=%s pid=%d", log_q(key), (int)b->pid);
        *ret = b;
        return 0;
}

/* ---- jobs: ending and removing ----------------------------------------- */

/* A signal to the job's process group, named by the pidfd of its leader
 * (the job's first process, its session's leader too), never by its
 * number: once the leader is reaped the number is free and may come to
 * lead any group of the host, which the jailer, root, may signal; the
 * pidfd names only the group the job made, and nothing once that is empty
 * (-ESRCH). -EINVAL: the kernel cannot signal a group by pidfd (before
 * Linux 6.9). */
static int signal_group(const struct job *j, int sig)
{
        if (j->pidfd < 0)
                return -ESRCH;
        if (syscall(SYS_pidfd_send_signal, j->pidfd, sig, NULL, PIDFD_SIGNAL_PROCESS_GROUP) < 0)
                return -errno;
        return 0;
}

/* Every process of the job (its group) killed; the keeper then drains
 * what they printed and exits by itself. */
static void job_kill(struct job *j)
{
        if (j->cg)
                cgroup_run_remove(j->cg);
        else if (signal_group(j, SIGKILL) == -EINVAL) /* no cgroups: its group, at least */
                syscall(SYS_pidfd_send_signal, j->pidfd, SIGKILL, NULL, 0); /* or its leader */
}

/* rm -rf of one job directory: only files lockbox wrote, no subdirectory */
static void remove_job_dir(struct shell *sh, const char *id)
{
        _cleanup_close_ int dfd =
            openat(sh->jobs_fd, id, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (dfd >= 0) {
                DIR *d = fdopendir(dfd);
                struct dirent *de;
                while (d && (de = readdir(d)))
                        if (de->d_name[0] != '.' || (de->d_name[1] && de->d_name[1] != '.' &&
                                                     strcmp(de->d_name, "..") != 0))
                                unlinkat(dfd, de->d_name, 0);
                if (d) {
                        closedir(d);
                        dfd = -1;
                }
        }
        unlinkat(sh->jobs_fd, id, AT_REMOVEDIR);
}

static void job_unlink(struct job *j)
{
        struct shell *sh = j->sh;
        for (struct job **p = &sh->jobs; *p; p = &(*p)->next)
                if (*p == j) {
                        *p = j->next;
                        break;
                }
        if (j->sock >= 0)
                loop_unwatch(sh->loop, j->sock);
        if (j->keeper_pidfd >= 0)
                loop_unwatch(sh->loop, j->keeper_pidfd);
}

static void job_close(struct job *j)
{
        safe_close(j->sock);
        safe_close(j->keeper_pidfd);
        safe_close(j->pidfd);
        safe_close(j->out_rfd);
        safe_close(j->dirfd);
        for (size_t i = 0; i < j->n_trees; i++)
                safe_close(j->tree_fd[i]);
        cgroup_run_free(j->cg);
        free(j->home);
        free(j->ws);
        free(j);
}

/* The job's processes killed, its keeper is killed once it has told the
 * exit (KEEPER_END_MS at most): it has reaped the job's first process
 * then. A process of the binding's PID namespace whose parent dies
 * unreaped goes to the reaper of the parent's namespace (the host's init,
 * or lockboxd itself as a container's PID 1), and the binding's init
 * cannot end until that one has reaped it. */
static void keeper_end(struct job *j)
{
        int64_t until = monotonic_ms() + KEEPER_END_MS;
        bool heard = j->exit_heard;
        while (j->sock >= 0 && !heard && !j->keeper_gone) {
                int64_t left = until - monotonic_ms();
                struct pollfd p = {.fd = j->sock, .events = POLLIN};
                if (left <= 0 || RETRY_EINTR(poll(&p, 1, (int)left)) <= 0)
                        break;
                struct keeper_msg m;
                size_t nf = 0;
                _cleanup_close_ int fd = -1;
                int r = channel_recv(j->sock, &m, sizeof(m), &fd, 1, &nf);
                if (r == 0 || (r < 0 && r != -EAGAIN))
                        break;
                heard = r > 0 && m.type == KEEPER_EXITED;
        }
        syscall(SYS_pidfd_send_signal, j->keeper_pidfd, SIGKILL, NULL, 0);
        gone(j->keeper_pidfd, j->keeper_pid);
}

static void job_free(struct job *j)
{
        struct shell *sh = j->sh;
        job_unlink(j);
        job_kill(j);
        if (j->keeper_pidfd >= 0)
                keeper_end(j);
        remove_job_dir(sh, j->id);
        store_job_delete(sh->store, j->id);
        struct binding *b = j->b;
        log_info(NULL, "shell.job_removed", "job=%s", j->id);
        job_close(j);
        if (b && --b->jobs == 0)
                binding_idle(b);
}

/* ---- spares: a binding's next job made ahead ---------------------------- */

/* A spare's keeper is told nothing more: it and the first process waiting
 * in its view end (the job group's removal takes the process), and so do
 * its directory and group. */
static void spare_free(struct job *j)
{
        struct shell *sh = j->sh;
        job_unlink(j);
        /* told by its socket's end, the keeper ends the first process and
         * reaps it (keeper.c says why that matters); killed if it has not
         * gone by SPARE_END_MS */
        j->sock = safe_close(j->sock);
        if (j->keeper_pidfd >= 0) {
                struct pollfd p = {.fd = j->keeper_pidfd, .events = POLLIN};
                if (RETRY_EINTR(poll(&p, 1, SPARE_END_MS)) <= 0)
                        syscall(SYS_pidfd_send_signal, j->keeper_pidfd, SIGKILL, NULL, 0);
                gone(j->keeper_pidfd, j->keeper_pid);
        }
        job_kill(j);
        remove_job_dir(sh, j->id);
        job_close(j);
}

static void spare_drop(struct binding *b)
{
        if (b->spare)
                spare_free(b->spare);
        b->spare = NULL;
}

/* A tree the spare holds was removed since it was made: a deleted btrfs
 * subvolume shows device 0 (its number is freed at the removal, not when
 * the last user lets go), a deleted directory no links. */
static bool spare_tree_gone(const struct job *j, size_t i, struct stat *held)
{
        return fstat(j->tree_fd[i], held) < 0 || held->st_nlink == 0 || held->st_dev == 0;
}

/* The job's trees are the spare's when they are the same directories
 * now: the spare holds its own open, so a tree removed since (the HOME
 * released and made again) is not taken for a new one that reuses its
 * numbers (a btrfs subvolume's root is always inode 256). */
static bool spare_fits(const struct job *j, const char *home, const struct jail_view_rw *rw,
                       size_t n_rw)
{
        if (!j || j->keeper_gone || j->sock < 0 || j->n_trees != n_rw || strcmp(j->home, home))
                return false;
        if (n_rw == 2 && (!j->ws || strcmp(j->ws, rw[1].path)))
                return false;
        for (size_t i = 0; i < n_rw; i++) {
                struct stat st, held;
                if (fstat(rw[i].fd, &st) < 0 || spare_tree_gone(j, i, &held) ||
                    st.st_dev != held.st_dev || st.st_ino != held.st_ino)
                        return false;
        }
        return true;
}

/* ^C: typed on its terminal by the keeper (the line discipline signals
 * the foreground group, as the reference's tmux send-keys does); for a
 * stdio job SIGINT to its group, from here (from Linux 6.12 the keeper's
 * Landlock domain may not signal the job), named by its leader's pidfd.
 * Before 6.9 the keeper sends it, while it has not reaped the leader. */
static void interrupt(struct job *j)
{
        struct keeper_msg m = {.type = KEEPER_INTERRUPT};
        if (j->mode != SHELL_MODE_STDIO || j->pidfd < 0 || signal_group(j, SIGINT) == -EINVAL) {
                if (j->sock >= 0)
                        channel_send(j->sock, &m, sizeof(m), NULL, 0);
        }
}

/* The memory limit killed a process of the job: say so where its output
 * goes (the job itself may go on, if its shell survived). */
static void check_oom(struct job *j)
{
        struct cgroup_stats st;
        if (!j->cg || cgroup_run_stats(j->cg, &st) < 0 || st.oom_kills <= j->oom_seen)
                return;
        verdict(j,
                "%llu process(es) killed: the job's memory limit (shell.memory, %lld MiB) "
                "was reached",
                (unsigned long long)(st.oom_kills - j->oom_seen),
                (long long)(j->sh->cfg->shell_memory_bytes >> 20));
        shell_stats_limit(STATS_SHELL_MEMORY);
        j->oom_seen = st.oom_kills;
}

/* At a job's end: its HOME or workspace at its bound (shell.binding_disk,
 * shell.workspace_disk), where its writes failed with EDQUOT, said in its
 * output as the memory limit is. */
static void check_disk(struct job *j)
{
        struct shell *sh = j->sh;
        if (!sh->bounds)
                return;
        const char *trees[] = {j->home, j->ws};
        const char *what[] = {"HOME", "workspace"};
        const int64_t limit[] = {sh->cfg->shell_binding_disk_bytes,
                                 sh->cfg->shell_workspace_disk_bytes};
        const char *setting[] = {"shell.binding_disk", "shell.workspace_disk"};
        for (size_t i = 0; i < 2; i++) {
                const char *rel;
                if (!trees[i] || limit[i] <= 0 ||
                    under_home(sh->cfg->shell_home, trees[i], &rel) < 0 || strcmp(rel, ".") == 0)
                        continue;
                _cleanup_close_ int fd = open_beneath(sh->home_fd, rel, O_RDONLY | O_DIRECTORY);
                if (fd < 0 || !subvol_full(fd))
                        continue;
                verdict(j,
                        "the job's %s %s is full: its disk bound (%s, %lld MiB) was reached; "
                        "writes there fail with \"Disk quota exceeded\"",
                        what[i], trees[i], setting[i], (long long)(limit[i] >> 20));
                shell_stats_limit(STATS_SHELL_DISK);
        }
}

/* ---- keeper events ----------------------------------------------------- */

static void on_keeper_msg(void *data, uint32_t events)
{
        struct job *j = data;
        struct keeper_msg m;
        size_t nf = 0;
        _cleanup_close_ int fd = -1;
        int r = channel_recv(j->sock, &m, sizeof(m), &fd, 1, &nf);
        if (j->spare) {
                /* before its job: only a failure is heard, and it ends the
                 * spare (the binding's next job starts cold) */
                if (r > 0 && m.type == KEEPER_FAILED) {
                        m.step[sizeof(m.step) - 1] = '\0';
                        log_warn(NULL, "shell.spare_failed", "binding=%s step=%s error=%s",
                                 log_q(j->b->key), log_q(m.step), log_q(strerror(m.error)));
                }
                if (r <= 0 || m.type == KEEPER_FAILED)
                        spare_drop(j->b);
                return;
        }
        if (r <= 0) {
                loop_unwatch(j->sh->loop, j->sock);
                j->sock = safe_close(j->sock);
                return;
        }
        m.step[sizeof(m.step) - 1] = '\0';
        switch (m.type) {
        case KEEPER_STARTED:
        case KEEPER_HELLO: /* a keeper adopted at start: the job is running */
                j->pid = m.pid;
                if (nf == 1 && j->pidfd < 0)
                        j->pidfd = TAKE_FD(fd);
                set_status(j, SHELL_RUNNING);
                break;
        case KEEPER_FAILED:
                if (terminal(j))
                        break;
                j->has_exit = true;
                j->exit_code = strcmp(m.step, "exec") == 0 ? 126 : 125;
                verdict(j, "the job could not start: %s: %s", m.step, strerror(m.error));
                set_status(j, SHELL_FAILED);
                break;
        case KEEPER_VIOLATION: {
                _cleanup_free_ char *name = policy_syscall_name(m.nr);
                if (!terminal(j) || cgroup_run_count(j->cg) > 0)
                        verdict(j, "job killed: forbidden system call %s", name ? name : "?");
                if (!terminal(j)) {
                        shell_stats_limit(STATS_SHELL_SYSCALL);
                        j->has_exit = true;
                        j->exit_code = 128 + SIGSYS;
                        set_status(j, SHELL_EXITED);
                }
                job_kill(j);
                break;
        }
        case KEEPER_EXITED:
                j->exit_heard = true;
                check_oom(j);
                check_disk(j);
                if (!j->has_exit) { /* also for a job terminated meanwhile */
                        j->has_exit = true;
                        j->exit_code = m.code;
                }
                set_status(j, SHELL_EXITED);
                if (j->b && j->b->spare_ms)
                        j->b->spare_ms = monotonic_ms(); /* once the run is answered */
                /* on record: the keeper may go */
                channel_send(j->sock, &(struct keeper_msg){.type = KEEPER_ACK},
                             sizeof(struct keeper_msg), NULL, 0);
                break;
        default:
                break;
        }
}

static void on_keeper_exit(void *data, uint32_t events)
{
        struct job *j = data;
        if (j->spare) {
                log_warn(NULL, "shell.spare_failed", "binding=%s step=keeper", log_q(j->b->key));
                spare_drop(j->b);
                return;
        }
        /* messages it sent before dying come first */
        char probe;
        while (j->sock >= 0 && recv(j->sock, &probe, 1, MSG_PEEK | MSG_DONTWAIT) > 0)
                on_keeper_msg(j, 0);
        loop_unwatch(j->sh->loop, j->keeper_pidfd);
        waitpid(j->keeper_pid, NULL, 0);
        j->keeper_pidfd = safe_close(j->keeper_pidfd);
        j->keeper_gone = true;
        if (!terminal(j))
                set_status(j, SHELL_LOST);
}

/* ---- starting a job ---------------------------------------------------- */

/* The keeper's socket, jobs/<id>/keeper.sock, named through the job
 * directory's descriptor (a path of any length): bound for a new keeper
 * (which listens on it), or connected to by a jailer that adopts one. */
static int keeper_socket(const struct job *j, int *ret, bool connect_to)
{
        struct sockaddr_un a = {.sun_family = AF_UNIX};
        snprintf(a.sun_path, sizeof(a.sun_path), "/proc/self/fd/%d/keeper.sock", j->dirfd);
        int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        int r = connect_to ? connect(fd, (struct sockaddr *)&a, sizeof(a))
                           : bind(fd, (struct sockaddr *)&a, sizeof(a));
        if (r < 0) {
                r = -errno;
                close(fd);
                return r;
        }
        *ret = fd;
        return 0;
}

/* path is absolute and lexically clean (no "", "." or ".." component, no
 * trailing "/"), and home or below it: *ret_rel is the part after home
 * ("." for home itself). */
static int under_home(const char *home, const char *path, const char **ret_rel)
{
        size_t hl = strlen(home);
        if (path[0] != '/' || strncmp(path, home, hl) != 0 || (path[hl] && path[hl] != '/'))
                return -EXDEV;
        for (const char *p = path + 1;;) {
                size_t n = strcspn(p, "/");
                if (n == 0 || (n == 1 && p[0] == '.') || (n == 2 && strncmp(p, "..", 2) == 0))
                        return -EINVAL;
                if (!p[n])
                        break;
                p += n + 1;
        }
        *ret_rel = path[hl] ? path + hl + 1 : ".";
        return 0;
}

static int open_beneath(int dirfd, const char *rel, int flags)
{
        struct open_how how = {.flags = (uint64_t)(flags | O_CLOEXEC),
                               .resolve =
                                   RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS};
        int fd = (int)syscall(SYS_openat2, dirfd, rel, &how, sizeof(how));
        return fd < 0 ? -errno : fd;
}

/* A detached copy of the directory rel beneath shell.home, for the job's
 * mount namespace (jail_tree_detach). */
static int detached(const struct shell *sh, const char *rel)
{
        _cleanup_close_ int fd = open_beneath(sh->home_fd, rel, O_PATH | O_DIRECTORY);
        return fd < 0 ? fd : jail_tree_detach(fd, false);
}

/* mkdir -p of rel beneath home, as the jobs' UID would have made it
 * (0755, owned by it), without following any symbolic link. */
static int make_home(struct shell *sh, const char *rel)
{
        char buf[PATH_MAX];
        snprintf(buf, sizeof(buf), "%s", rel);
        for (char *p = buf;; p++) {
                if (*p != '/' && *p != '\0')
                        continue;
                char c = *p;
                *p = '\0';
                if (strcmp(buf, ".") != 0) {
                        _cleanup_close_ int fd =
                            open_beneath(sh->home_fd, buf, O_PATH | O_DIRECTORY);
                        if (fd == -ENOENT) {
                                char *slash = strrchr(buf, '/');
                                _cleanup_close_ int parent = -1;
                                const char *name = buf;
                                if (slash) {
                                        *slash = '\0';
                                        parent =
                                            open_beneath(sh->home_fd, buf, O_RDONLY | O_DIRECTORY);
                                        *slash = '/';
                                        name = slash + 1;
                                } else {
                                        parent = fcntl(sh->home_fd, F_DUPFD_CLOEXEC, 3);
                                }
                                if (parent < 0)
                                        return parent;
                                if (mkdirat(parent, name, 0755) < 0 && errno != EEXIST)
                                        return -errno;
                                if (fchownat(parent, name, (uid_t)sh->cfg->shell_uid,
                                             (gid_t)sh->cfg->shell_uid, AT_SYMLINK_NOFOLLOW) < 0)
                                        return -errno;
                        } else if (fd < 0) {
                                return fd;
                        }
                }
                if (c == '\0')
                        return 0;
                *p = c;
        }
}

struct run_text {
        const char *script;
        uint32_t script_len;
        char cwd[PATH_MAX];
        char home[PATH_MAX];
        char **env; /* NAME=VALUE, the overlay */
        size_t n_env;
};

static void run_text_free(struct run_text *t)
{
        for (size_t i = 0; i < t->n_env; i++)
                free(t->env[i]);
        free(t->env);
}

/* Strip a trailing "/" (not of "/" itself). */
static void chomp_slash(char *p)
{
        size_t n = strlen(p);
        while (n > 1 && p[n - 1] == '/')
                p[--n] = '\0';
}

static int parse_blob(const char *buf, size_t len, struct run_text *t)
{
        struct shell_blob_item it;
        size_t pos = 0;
        int r;
        bool have_cwd = false;
        while ((r = shell_blob_next(buf, len, &pos, &it)) > 0) {
                if (it.tag == SHELL_BLOB_SCRIPT) {
                        t->script = it.data;
                        t->script_len = it.len;
                } else if (it.tag == SHELL_BLOB_CWD) {
                        if (it.len >= sizeof(t->cwd) || memchr(it.data, '\0', it.len))
                                return -ENAMETOOLONG;
                        memcpy(t->cwd, it.data, it.len);
                        t->cwd[it.len] = '\0';
                        have_cwd = it.len > 0;
                } else if (it.tag == SHELL_BLOB_ENV) {
                        const char *nul = memchr(it.data, '\0', it.len);
                        if (!nul || nul == it.data ||
                            memchr(it.data, '=', (size_t)(nul - it.data)) ||
                            memchr(nul + 1, '\0', it.len - (size_t)(nul - it.data) - 1))
                                return -EINVAL;
                        char **v = realloc(t->env, (t->n_env + 1) * sizeof(*v));
                        if (!v)
                                return -ENOMEM;
                        t->env = v;
                        char *e = malloc(it.len + 1);
                        if (!e)
                                return -ENOMEM;
                        memcpy(e, it.data, it.len);
                        e[nul - it.data] = '=';
                        e[it.len] = '\0';
                        t->env[t->n_env++] = e;
                        if (strncmp(e, "HOME=", 5) == 0 && e[5]) {
                                if (strlen(e + 5) >= sizeof(t->home))
                                        return -ENAMETOOLONG;
                                snprintf(t->home, sizeof(t->home), "%s", e + 5);
                        }
                }
        }
        if (r < 0 || !t->script || t->script_len == 0)
                return -EINVAL;
        if (!have_cwd)
                t->cwd[0] = '\0';
        return 0;
}

static void strv_free(char **v)
{
        for (size_t i = 0; v && v[i]; i++)
                free(v[i]);
        free(v);
}

/* Environment names compare up to their '='. */
static int env_name_cmp(const char *a, const char *b)
{
        size_t la = strcspn(a, "="), lb = strcspn(b, "=");
        int c = memcmp(a, b, la < lb ? la : lb);
        return c ? c : (la > lb) - (la < lb);
}

struct env_slot {
        const char *entry;
        size_t pos;
};

static int env_slot_cmp(const void *x, const void *y)
{
        const struct env_slot *a = x, *b = y;
        int c = env_name_cmp(a->entry, b->entry);
        return c ? c : (a->pos > b->pos) - (a->pos < b->pos);
}

/* Keep the last entry of each name, the rest in their order. Sorted, not
 * compared pairwise: an overlay may hold a million names (a 16 MiB body),
 * and the jailer serves every call from one thread. */
static int env_keep_last(char **v, size_t *n)
{
        _cleanup_free_ struct env_slot *slots = calloc(*n + 1, sizeof(*slots));
        if (!slots)
                return -ENOMEM;
        for (size_t i = 0; i < *n; i++)
                slots[i] = (struct env_slot){.entry = v[i], .pos = i};
        qsort(slots, *n, sizeof(*slots), env_slot_cmp);
        for (size_t i = 0; i + 1 < *n; i++)
                if (env_name_cmp(slots[i].entry, slots[i + 1].entry) == 0) {
                        free(v[slots[i].pos]);
                        v[slots[i].pos] = NULL;
                }
        size_t k = 0;
        for (size_t i = 0; i < *n; i++)
                if (v[i])
                        v[k++] = v[i];
        v[k] = NULL;
        *n = k;
        return 0;
}

static int env_add(char **v, size_t *n, const char *fmt, ...) _printf_(3, 4);
static int env_add(char **v, size_t *n, const char *fmt, ...)
{
        char *e;
        va_list ap;
        va_start(ap, fmt);
        int r = vasprintf(&e, fmt, ap);
        va_end(ap);
        if (r < 0)
                return -ENOMEM;
        v[(*n)++] = e;
        return 0;
}

/* Environment: a fixed base, the proxies of the deployment, the overlay
 * (which replaces or adds), and TMPDIR/TMP/TEMP at the working directory
 * (as the reference): later entries win. */
static char **job_env(const struct shell *sh, const struct run_text *t, enum shell_mode mode)
{
        const struct config *cfg = sh->cfg;
        size_t n = 0;
        char **v = calloc(t->n_env + 24 + 1, sizeof(*v));
        if (!v)
                return NULL;
        const char *http = *cfg->proxy_socks5 ? cfg->proxy_socks5 : cfg->proxy_http;
        const char *https = *cfg->proxy_socks5 ? cfg->proxy_socks5 : cfg->proxy_https;
        int r = 0;
        if (env_add(v, &n, "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin") <
                0 ||
            env_add(v, &n, "LANG=C.UTF-8") < 0 || env_add(v, &n, "HOME=%s", t->home) < 0 ||
            env_add(v, &n, "USER=sandbox") < 0 || env_add(v, &n, "LOGNAME=sandbox") < 0 ||
            env_add(v, &n, "SHELL=/bin/sh") < 0 ||
            (mode == SHELL_MODE_PTY && env_add(v, &n, "TERM=xterm-256color") < 0) ||
            (*http && (env_add(v, &n, "HTTP_PROXY=%s", http) < 0 ||
                       env_add(v, &n, "http_proxy=%s", http) < 0)) ||
            (*https && (env_add(v, &n, "HTTPS_PROXY=%s", https) < 0 ||
                        env_add(v, &n, "https_proxy=%s", https) < 0)))
                r = -ENOMEM;
        for (size_t i = 0; r == 0 && i < t->n_env; i++)
                r = env_add(v, &n, "%s", t->env[i]);
        static const char *const tmp[] = {"TMPDIR", "TMP", "TEMP"};
        for (size_t i = 0; r == 0 && i < ELEMENTSOF(tmp); i++)
                r = env_add(v, &n, "%s=%s", tmp[i], t->cwd);
        if (r == 0)
                r = env_keep_last(v, &n);
        if (r < 0) {
                strv_free(v);
                return NULL;
        }
        return v;
}

/* What a job may see beyond the system: its HOME and the workspace its
 * cwd lies in (control jobs: all of shell.home). Sets rw[] (paths and
 * O_PATH fds) and fails with a message for the caller. */
static bool within(const char *a, const char *b)
{
        size_t n = strlen(b);
        return strncmp(a, b, n) == 0 && (a[n] == '\0' || a[n] == '/');
}

/* The HOME of a job of another binding that path is, holds or lies in
 * (control jobs' HOME, shell.home itself, excepted), or NULL: a job never
 * gets another binding's HOME as its own or as its workspace. What the
 * jailer knows: the HOMEs of the jobs it keeps. */
static const char *other_home(const struct shell *sh, const char *key, const char *path,
                              bool same_ok)
{
        for (const struct job *j = sh->jobs; j; j = j->next)
                if (j->home && j->b && strcmp(j->b->key, key) != 0 &&
                    strcmp(j->home, sh->cfg->shell_home) != 0 &&
                    !(same_ok && strcmp(j->home, path) == 0) &&
                    (within(path, j->home) || within(j->home, path)))
                        return j->home;
        return NULL;
}

/* The job, or what it left running, may still have its mounts of its
 * HOME and workspace: running, or processes left in its group; without
 * cgroups, while its binding lives. */
static bool job_holds_trees(const struct job *j)
{
        if (!terminal(j))
                return true;
        if (j->cg)
                return cgroup_run_count(j->cg) > 0;
        return j->b && j->b->pidfd >= 0;
}

/* A tree (HOME or workspace) a job of the table holds (above) as its own,
 * or holds one, or lies in one: moving it into a subvolume would leave
 * that job on the old tree. Control jobs' shell.home aside. The table
 * records each job's workspace, so adopted jobs' are known; only a job
 * adopted from a table of an older version has none recorded: while one
 * holds its trees, no workspace is converted. */
static bool tree_in_use(const struct shell *sh, const char *path, bool workspace)
{
        for (const struct job *j = sh->jobs; j; j = j->next) {
                if (!job_holds_trees(j))
                        continue;
                if (j->home && strcmp(j->home, sh->cfg->shell_home) != 0 &&
                    (within(path, j->home) || within(j->home, path)))
                        return true;
                if (j->ws && (within(path, j->ws) || within(j->ws, path)))
                        return true;
                if (workspace && j->ws_unknown)
                        return true;
        }
        return false;
}

/* A control job (HOME shell.home: it may write anywhere below it) whose
 * script or processes live: a tree moved meanwhile could lose what it
 * writes into the old copy (by an open file, a cwd inside, or a path
 * walked before the exchange), removed with it. */
static const struct job *control_live(const struct shell *sh)
{
        for (const struct job *j = sh->jobs; j; j = j->next)
                if (j->home && strcmp(j->home, sh->cfg->shell_home) == 0 && job_holds_trees(j))
                        return j;
        return NULL;
}

/* A control job's run waiting for the copies under way when it was asked
 * for (copying()): no move starts meanwhile, or a stream of bindings'
 * first jobs would keep it waiting for good. */
static bool control_waiting(const struct shell *sh)
{
        for (const struct call *c = sh->calls; c; c = c->next)
                if (c->state == CALL_CONVERT && c->control)
                        return true;
        return false;
}

/* ---- trees moved into subvolumes ------------------------------------- */

static struct conversion *conversion_find(struct shell *sh, const char *path)
{
        for (struct conversion *cv = sh->conversions; cv; cv = cv->next)
                if (within(path, cv->path) || within(cv->path, path))
                        return cv;
        return NULL;
}

static void conversion_release(struct conversion *cv)
{
        if (cv->p || cv->waiters)
                return;
        struct shell *sh = cv->sh;
        for (struct conversion **q = &sh->conversions; *q; q = &(*q)->next)
                if (*q == cv) {
                        *q = cv->next;
                        break;
                }
        free(cv);
}

static void do_run(struct call *c, int blobfd);

/* A parked run (CALL_CONVERT) starts over from its request. */
static void run_again(struct call *c)
{
        int fd = c->blobfd;
        c->blobfd = -1;
        c->state = CALL_READ;
        do_run(c, fd);
        safe_close(fd);
}

/* The runs waiting for cv start over. */
static void conversion_resume(struct conversion *cv)
{
        for (struct call *c = cv->sh->calls; c; c = c->next) {
                if (c->state != CALL_CONVERT || c->conv != cv)
                        continue;
                c->conv = NULL;
                cv->waiters--;
                run_again(c);
        }
}

/* The worker is done (killed at its deadline, or not): how it went is
 * kept for the runs waiting, which start over now. */
static void conversion_end(struct conversion *cv)
{
        struct shell *sh = cv->sh;
        loop_unwatch(sh->loop, subvol_pending_fd(cv->p));
        cv->result = subvol_convert_finish(cv->p, false, cv->err, sizeof(cv->err));
        cv->p = NULL;
        if (cv->result < 0)
                log_warn(NULL, "shell.subvol_convert_failed", "tree=%s error=%s", log_q(cv->path),
                         log_q(cv->err));
        conversion_resume(cv);
        conversion_release(cv);
}

/* Its deadline: a worker still copying is killed (the tree is left as it
 * was), and its end, on the loop, ends the conversion; one that moved the
 * tree in already is only removing the old one, which it may go on with
 * (killed, it would leave that tree behind until the next start removes
 * it): the runs start over now, finding the subvolume, and set its
 * limit. */
static void conversion_deadline(struct conversion *cv, int64_t now)
{
        if (cv->removing || !subvol_pending_swapped(cv->p)) {
                /* no deadline left: its pidfd says when it is gone (a
                 * past one would have the loop spin meanwhile) */
                cv->deadline_ms = INT64_MAX;
                subvol_convert_kill(cv->p);
                log_info(NULL, "shell.subvol_killed", "tree=%s removing=%s", log_q(cv->path),
                         cv->removing ? "yes" : "no");
                return;
        }
        cv->removing = true;
        cv->deadline_ms = now + REMOVE_TIMEOUT_MS;
        log_info(NULL, "shell.subvol_removing", "tree=%s", log_q(cv->path));
        conversion_resume(cv);
}

static void on_conversion_exit(void *data, uint32_t events)
{
        conversion_end(data);
}

/* The tree path (rel beneath shell.home) bounded to limit bytes (its
 * setting named by what): a subvolume already has its limit set again
 * (the setting may have changed, or be 0: no limit); a directory is moved
 * into one (subvol.c) unless in use (then it stays unbounded this time,
 * said in the log): -EINPROGRESS and *ret_conv, the conversion the run
 * waits for (also one of a tree holding or held by this one), or NULL: a
 * snapshot at work, or (may_wait) a control job alive or waiting to
 * start, which the move waits for (past that, the tree stays unbounded
 * this time, said in the log, as a tree in use does). */
static int bound_tree(struct shell *sh, const char *path, const char *rel, int64_t limit,
                      const char *what, bool may_wait, char *why, size_t whylen,
                      struct conversion **ret_conv)
{
        if (!sh->bounds || strcmp(rel, ".") == 0)
                return 0;
        _cleanup_close_ int fd = open_beneath(sh->home_fd, rel, O_RDONLY | O_DIRECTORY);
        if (fd < 0)
                return 0; /* the caller says what is wrong with it */
        if (subvol_is(fd)) {
                /* 0 (the setting turned off): the limit an earlier start
                 * set is removed */
                int r = subvol_limit_ensure(fd, limit > 0 ? (uint64_t)limit : 0);
                if (r < 0)
                        log_warn(NULL, "shell.subvol_limit_failed", "tree=%s error=%s", log_q(path),
                                 log_q(strerror(-r)));
                return 0;
        }
        if (limit <= 0)
                return 0;
        struct conversion *cv = conversion_find(sh, path);
        if (cv && cv->p && !cv->removing) {
                *ret_conv = cv;
                return -EINPROGRESS;
        }
        if (cv && strcmp(cv->path, path) == 0 && cv->result < 0) {
                snprintf(why, whylen, "cannot bound %s to %s (%lld bytes): %s", path, what,
                         (long long)limit, cv->err);
                return cv->result;
        }
        if (shell_snapshot_busy()) {
                /* a snapshot's worker walks or writes shell.home: the
                 * move waits for it (the run tries again shortly) */
                *ret_conv = NULL;
                return -EINPROGRESS;
        }
        if (tree_in_use(sh, path, strcmp(what, "shell.workspace_disk") == 0)) {
                log_warn(NULL, "shell.subvol_in_use", "tree=%s: in use, left unbounded (%s)",
                         log_q(path), what);
                return 0;
        }
        const struct job *ctl = control_live(sh);
        if (ctl || control_waiting(sh)) {
                if (may_wait) {
                        *ret_conv = NULL;
                        return -EINPROGRESS;
                }
                log_warn(NULL, "shell.subvol_in_use",
                         "tree=%s: control job %s still %s after %d ms, left unbounded (%s)",
                         log_q(path), ctl ? ctl->id : "asked for", ctl ? "runs" : "waits to start",
                         CONTROL_WAIT_MS, what);
                return 0;
        }
        char parent[PATH_MAX];
        snprintf(parent, sizeof(parent), "%s", rel);
        char *slash = strrchr(parent, '/');
        const char *name = slash ? slash + 1 : rel;
        if (slash)
                *slash = '\0';
        _cleanup_close_ int pfd =
            open_beneath(sh->home_fd, slash ? parent : ".", O_RDONLY | O_DIRECTORY);
        if (pfd < 0)
                return 0;
        struct subvol_conv conv = {.parent_fd = pfd,
                                   .name = name,
                                   .parent_rel = slash ? parent : ".",
                                   .record_fd = sh->moves_fd,
                                   .home = sh->cfg->shell_home,
                                   .uid = (uid_t)sh->cfg->shell_uid,
                                   .limit = (uint64_t)limit,
                                   .timeout_ms = CONVERT_TIMEOUT_MS,
                                   .filter = &sh->subvol_f};
        char err[300] = "";
        struct subvol_pending *p = NULL;
        int r = (cv = calloc(1, sizeof(*cv))) ? subvol_convert_start(&conv, &p, err, sizeof(err))
                                              : -ENOMEM;
        if (r == 0) {
                *cv = (struct conversion){
                    .sh = sh, .p = p, .deadline_ms = monotonic_ms() + CONVERT_TIMEOUT_MS};
                snprintf(cv->path, sizeof(cv->path), "%s", path);
                cv->w = (struct watch){.fn = on_conversion_exit, .data = cv};
                r = loop_watch(sh->loop, subvol_pending_fd(p), &cv->w);
                cv->next = sh->conversions;
                sh->conversions = cv;
                if (r < 0) { /* no watch: ended at once */
                        subvol_convert_kill(p);
                        conversion_end(cv);
                        snprintf(err, sizeof(err), "watching its worker: %s", strerror(-r));
                } else {
                        *ret_conv = cv;
                        return -EINPROGRESS;
                }
        } else {
                free(cv);
                if (!err[0])
                        snprintf(err, sizeof(err), "%s", strerror(-r));
        }
        snprintf(why, whylen, "cannot bound %s to %s (%lld bytes): %s", path, what,
                 (long long)limit, err);
        log_warn(NULL, "shell.subvol_convert_failed", "tree=%s error=%s", log_q(path), log_q(err));
        return r;
}

/* The moving conversion (copying, not yet exchanged) a control job's
 * start waits for, or NULL. */
static struct conversion *copying(struct shell *sh)
{
        for (struct conversion *cv = sh->conversions; cv; cv = cv->next)
                if (cv->p && !cv->removing && !subvol_pending_swapped(cv->p))
                        return cv;
        return NULL;
}

static int job_paths(struct shell *sh, struct run_text *t, const char *session, bool may_wait,
                     struct jail_view_rw *rw, size_t *n_rw, char *why, size_t whylen,
                     struct conversion **conv)
{
        const char *home = sh->cfg->shell_home, *rel_home, *rel_cwd;
        if (!t->home[0])
                snprintf(t->home, sizeof(t->home), "%s", home);
        chomp_slash(t->home);
        if (under_home(home, t->home, &rel_home) < 0) {
                snprintf(why, whylen, "HOME must be shell.home (%s) or a directory below it: %s",
                         home, t->home);
                return -EXDEV;
        }
        /* the same HOME under another session id is the same owner (a
         * new lease of Dify's); one inside another binding's is not */
        const char *key = session[0] ? session : t->home, *other;
        if (strcmp(t->home, home) != 0 && (other = other_home(sh, key, t->home, true))) {
                snprintf(why, whylen, "HOME must not hold or lie in another binding's HOME (%s)",
                         other);
                return -EXDEV;
        }
        int r = make_home(sh, rel_home);
        if (r < 0) {
                snprintf(why, whylen, "cannot create HOME %s: %s", t->home, strerror(-r));
                return r;
        }
        if (!t->cwd[0])
                snprintf(t->cwd, sizeof(t->cwd), "%s", t->home);
        else if (t->cwd[0] != '/') {
                char abs[PATH_MAX];
                if ((size_t)snprintf(abs, sizeof(abs), "%s/%s", home, t->cwd) >= sizeof(abs))
                        return -ENAMETOOLONG;
                snprintf(t->cwd, sizeof(t->cwd), "%s", abs);
        }
        chomp_slash(t->cwd);
        if (under_home(home, t->cwd, &rel_cwd) < 0) {
                snprintf(why, whylen, "cwd is outside what the job may see: %s", t->cwd);
                return -EXDEV;
        }
        _cleanup_close_ int cwd_fd = open_beneath(sh->home_fd, rel_cwd, O_PATH | O_DIRECTORY);
        if (cwd_fd < 0) {
                snprintf(why, whylen,
                         cwd_fd == -ELOOP ? "cwd must not pass through a symbolic link: %s"
                                          : "cwd is not a directory: %s",
                         t->cwd);
                return cwd_fd;
        }
        if (strcmp(rel_home, ".") == 0 && sh->bounds && (*conv = copying(sh)))
                return -EINPROGRESS; /* a control job starts once no tree is half moved */
        if ((r = bound_tree(sh, t->home, rel_home, sh->cfg->shell_binding_disk_bytes,
                            "shell.binding_disk", may_wait, why, whylen, conv)) < 0)
                return r;
        int home_fd = detached(sh, rel_home);
        if (home_fd < 0) {
                snprintf(why, whylen, "HOME is not a directory: %s", t->home);
                return home_fd;
        }
        rw[0] = (struct jail_view_rw){.path = t->home, .fd = home_fd};
        *n_rw = 1;
        size_t hl = strlen(t->home);
        bool control = strcmp(rel_home, ".") == 0;
        if (control || (strncmp(t->cwd, t->home, hl) == 0 && (!t->cwd[hl] || t->cwd[hl] == '/')))
                return 0;
        /* the workspace: the first two levels of cwd below shell.home */
        const char *second = strchr(rel_cwd, '/');
        if (!second) {
                snprintf(why, whylen,
                         "cwd must lie in the job's HOME or in a workspace two levels below "
                         "shell.home (%s): %s",
                         home, t->cwd);
                return -EXDEV;
        }
        size_t wl = strlen(home) + 1 + (size_t)(second - rel_cwd);
        const char *third = strchr(second + 1, '/');
        wl += 1 + (third ? (size_t)(third - second - 1) : strlen(second + 1));
        static char ws[PATH_MAX]; /* the jailer is single-threaded; copied below */
        snprintf(ws, sizeof(ws), "%.*s", (int)wl, t->cwd);
        size_t n = strlen(ws);
        if ((strncmp(t->home, ws, n) == 0 && (!t->home[n] || t->home[n] == '/'))) {
                snprintf(why, whylen, "the workspace %s would hold the job's HOME", ws);
                return -EXDEV;
        }
        if ((other = other_home(sh, key, ws, false))) {
                snprintf(why, whylen, "the workspace %s would hold another binding's HOME (%s)", ws,
                         other);
                return -EXDEV;
        }
        const char *rel_ws;
        under_home(home, ws, &rel_ws);
        if ((r = bound_tree(sh, ws, rel_ws, sh->cfg->shell_workspace_disk_bytes,
                            "shell.workspace_disk", may_wait, why, whylen, conv)) < 0)
                return r;
        int ws_fd = detached(sh, rel_ws);
        if (ws_fd < 0) {
                snprintf(why, whylen, "workspace is not a directory: %s", ws);
                return ws_fd;
        }
        rw[1] = (struct jail_view_rw){.path = ws, .fd = ws_fd};
        *n_rw = 2;
        return 0;
}

static int write_file_at(int dirfd, const char *name, const void *data, size_t len, mode_t mode)
{
        _cleanup_close_ int fd =
            openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
        if (fd < 0)
                return -errno;
        int r = file_write_all(fd, data, len);
        if (r == 0 && fchmod(fd, mode) < 0)
                r = -errno;
        return r;
}

static unsigned live_jobs(const struct shell *sh)
{
        unsigned n = 0;
        for (const struct job *j = sh->jobs; j; j = j->next)
                n += !terminal(j) || (j->cg && cgroup_run_count(j->cg) > 0);
        return n;
}

static int new_id(struct shell *sh, char id[SHELL_JOB_ID_LEN + 1])
{
        for (int attempt = 0; attempt < 20; attempt++) {
                unsigned char b[8];
                if (getrandom(b, sizeof(b), 0) != sizeof(b))
                        return -errno;
                for (int i = 0; i < 8; i++)
                        snprintf(id + 2 * i, 3, "%02x", b[i]);
                if (mkdirat(sh->jobs_fd, id, 0700) == 0)
                        return 0;
                if (errno != EEXIST)
                        return -errno;
        }
        return -EEXIST;
}

/* Fork the keeper; the job is then STARTING. t NULL: a spare, for a job
 * with HOME home and the trees rw, told the rest at KEEPER_GO. */
static int start_keeper(struct shell *sh, struct job *j, const struct run_text *t, const char *home,
                        struct jail_view_rw *rw, size_t n_rw, char **env, unsigned cols,
                        unsigned rows)
{
        const struct config *cfg = sh->cfg;
        char script_path[PATH_MAX];
        snprintf(script_path, sizeof(script_path), "%s/%s/script", sh->jobs_dir, j->id);
        bool shebang = t && t->script_len >= 2 && t->script[0] == '#' && t->script[1] == '!';
        char sh_name[] = "sh";
        char *argv_sh[] = {sh_name, script_path, NULL};
        char *argv_self[] = {script_path, NULL};
        int pair[2] = {-1, -1}, procs[2] = {-1, -1};
        _cleanup_close_ int out_fd = -1, err_fd = -1, file_fd = -1, listen_fd = -1, cpu_procs = -1;
        out_fd = openat(j->dirfd, "output.log", O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW);
        err_fd = openat(j->dirfd, "stderr.log", O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW);
        if (out_fd < 0 || err_fd < 0)
                return -errno;
        {
                _cleanup_close_ int path =
                    openat(j->dirfd, "script", O_PATH | O_CLOEXEC | O_NOFOLLOW);
                if (path < 0)
                        return -errno;
                if ((file_fd = jail_tree_detach(path, true)) < 0)
                        return file_fd;
        }
        struct cgroup_limits lim = {.memory_bytes = cfg->shell_memory_bytes,
                                    .pids = cfg->shell_processes,
                                    .cpu_weight = 100};
        char cgname[64];
        snprintf(cgname, sizeof(cgname), "shell-b%u/%s", j->b->serial, j->id);
        int r = cgroup_root_mode(sh->cg) == CGROUP_NONE
                    ? 0
                    : cgroup_shell_create(sh->cg, cgname, &lim, &j->cg);
        if (r == 0 && j->cg)
                r = cgroup_run_procs_fds(j->cg, procs);
        if (r == 0 && j->cg)
                cpu_procs = cgroup_run_cpu_procs_fd(j->cg);
        if (r == 0 && socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) < 0)
                r = -errno;
        if (r == 0)
                r = keeper_socket(j, &listen_fd, false);
        if (r < 0)
                goto out;
        bool ll_on = strcmp(cfg->shell_path_isolation, "true") == 0;
        /* Landlock: read-write where the view is, plus the operator's list */
        const char *ll_rw[8 + 64];
        size_t n_ll_rw = 0;
        for (size_t i = 0; i < n_rw; i++)
                ll_rw[n_ll_rw++] = rw[i].path;
        /* the job's own: /tmp, POSIX shared memory, its devpts instance */
        ll_rw[n_ll_rw++] = "/tmp";
        ll_rw[n_ll_rw++] = "/dev/shm";
        ll_rw[n_ll_rw++] = "/dev/pts";
        for (size_t i = 0; i < cfg->n_shell_landlock_rw && n_ll_rw < ELEMENTSOF(ll_rw); i++)
                ll_rw[n_ll_rw++] = cfg->shell_landlock_rw[i];
        const char *ll_ro[64 + 1];
        size_t n_ll_ro = 0;
        for (size_t i = 0; i < cfg->n_shell_landlock_ro && n_ll_ro < ELEMENTSOF(ll_ro) - 1; i++)
                ll_ro[n_ll_ro++] = cfg->shell_landlock_ro[i];
        ll_ro[n_ll_ro++] = script_path;
        const char *ll_dev[64 + 1];
        size_t n_ll_dev = 0;
        for (size_t i = 0; i < cfg->n_shell_landlock_rw_dev && n_ll_dev < ELEMENTSOF(ll_dev) - 1;
             i++)
                ll_dev[n_ll_dev++] = cfg->shell_landlock_rw_dev[i];
        ll_dev[n_ll_dev++] = "/dev/ptmx"; /* new terminals come from the job's own instance */
        struct jail_view_rw all_rw[8 + 64];
        size_t n_all = 0;
        for (size_t i = 0; i < n_rw; i++)
                all_rw[n_all++] = rw[i];
        for (size_t i = 0; i < cfg->n_shell_landlock_rw && n_all < ELEMENTSOF(all_rw); i++)
                if (access(cfg->shell_landlock_rw[i], F_OK) == 0)
                        all_rw[n_all++] =
                            (struct jail_view_rw){.path = cfg->shell_landlock_rw[i], .fd = -1};
        struct job_spec spec = {
            .mode = j->mode,
            .cols = cols,
            .rows = rows,
            .ns_pid = j->b->ns[0],
            .ns_net = j->b->ns[1],
            .ns_ipc = j->b->ns[2],
            .ns_uts = j->b->ns[3],
            .cgroup_procs = {procs[0], procs[1]},
            .cgroup_cpu_procs = cpu_procs,
            .cgroup_dirfd = j->cg ? cgroup_run_dirfd(j->cg) : -1,
            .out_fd = out_fd,
            .err_fd = err_fd,
            .sock = pair[1],
            .listen_fd = listen_fd,
            .view = {.ro_paths = (const char *const *)sh->ro_paths,
                     .n_ro_paths = sh->n_ro_paths,
                     .rw = all_rw,
                     .n_rw = n_all,
                     .file_path = script_path,
                     .file_fd = file_fd,
                     .hostname = cfg->hostname,
                     .resolv_conf = sh->resolv_conf,
                     .home = home,
                     .uid = (uid_t)cfg->shell_uid,
                     .gid = (gid_t)cfg->shell_uid,
                     .tmp_bytes = cfg->shell_memory_bytes,
                     .cwd = t ? t->cwd : NULL},
            .exec_path = !t        ? NULL
                         : shebang ? script_path
                                   : "/bin/sh",
            .argv = !t        ? NULL
                    : shebang ? argv_self
                              : argv_sh,
            .envp = env,
            .filter = &sh->filter,
            .ll_on = ll_on,
            .ll_rw = ll_rw,
            .n_ll_rw = n_ll_rw,
            .ll_ro = ll_ro,
            .n_ll_ro = n_ll_ro,
            .ll_dev = ll_dev,
            .n_ll_dev = n_ll_dev,
            .max_output = cfg->shell_max_output,
            .nofile = NOFILE,
            .spare = !t,
            .parent = getpid(),
        };
        memcpy(spec.job_id, j->id, sizeof(spec.job_id));
        pid_t pid = fork();
        if (pid < 0) {
                r = -errno;
                goto out;
        }
        if (pid == 0) {
                /* no PR_SET_PDEATHSIG: the job outlives lockboxd */
                int keep[] = {spec.sock,   listen_fd,         out_fd,
                              err_fd,      procs[0],          procs[1],
                              cpu_procs,   spec.cgroup_dirfd, file_fd,
                              spec.ns_pid, spec.ns_net,       spec.ns_ipc,
                              spec.ns_uts, all_rw[0].fd,      n_all > 1 ? all_rw[1].fd : -1};
                fd_close_all_except(3, keep, ELEMENTSOF(keep));
                keeper_main(&spec);
        }
        j->keeper_pid = pid;
        j->keeper_pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
        if (j->b->cg && (r = hold(j->b, pid)) < 0) {
                kill(pid, SIGKILL);
                goto out;
        }
        j->sock = pair[0];
        pair[0] = -1;
        j->w_sock = (struct watch){.fn = on_keeper_msg, .data = j};
        j->w_keeper = (struct watch){.fn = on_keeper_exit, .data = j};
        if (j->keeper_pidfd < 0 || loop_watch(sh->loop, j->sock, &j->w_sock) < 0 ||
            loop_watch(sh->loop, j->keeper_pidfd, &j->w_keeper) < 0) {
                r = -errno;
                kill(pid, SIGKILL);
        }
out:
        safe_close(pair[0]);
        safe_close(pair[1]);
        safe_close(procs[0]);
        safe_close(procs[1]);
        return r;
}

/* A job record with nothing attached yet. */
static struct job *job_new(struct shell *sh, enum shell_mode mode)
{
        struct job *j = calloc(1, sizeof(*j));
        if (j)
                *j = (struct job){.sh = sh,
                                  .mode = mode,
                                  .status = SHELL_CREATED,
                                  .created = -1,
                                  .started = -1,
                                  .ended = -1,
                                  .kill_at_ms = -1,
                                  .dirfd = -1,
                                  .out_rfd = -1,
                                  .keeper_pidfd = -1,
                                  .pidfd = -1,
                                  .sock = -1,
                                  .tree_fd = {-1, -1}};
        return j;
}

/* jobs/<id> (made by new_id): the script (empty for a spare, written at
 * its go), output.log, stderr.log, and output.log open for reading. */
static int job_files(struct shell *sh, struct job *j, const char *script, size_t len)
{
        j->dirfd = openat(sh->jobs_fd, j->id, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        int r = j->dirfd < 0 ? -errno : 0;
        if (r == 0)
                r = write_file_at(j->dirfd, "script", script, len, 0555);
        if (r == 0)
                r = write_file_at(j->dirfd, "output.log", "", 0, 0600);
        if (r == 0)
                r = write_file_at(j->dirfd, "stderr.log", "", 0, 0600);
        if (r == 0 &&
            (j->out_rfd = openat(j->dirfd, "output.log", O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) < 0)
                r = -errno;
        return r;
}

/* A binding's next job, made ahead with its last job's HOME and
 * workspace: directory, files, group, keeper, and a first process that
 * waits in its mount view (keeper.c, child.c). On the loop (shell_tick),
 * once the job that asked for it has been answered or has run a while. */
static void spare_make(struct binding *b)
{
        struct shell *sh = b->sh;
        b->spare_ms = 0;
        if (b->spare || b->retired || b->pidfd < 0 || !b->spare_home)
                return;
        if (conversion_find(sh, b->spare_home) ||
            (b->spare_ws && conversion_find(sh, b->spare_ws))) {
                b->spare_ms = monotonic_ms() + SPARE_DELAY_MS; /* its trees move */
                return;
        }
        struct jail_view_rw rw[2] = {{.path = b->spare_home, .fd = -1},
                                     {.path = b->spare_ws, .fd = -1}};
        size_t n_rw = b->spare_ws ? 2 : 1;
        struct job *j = job_new(sh, SHELL_MODE_PTY);
        if (!j)
                return;
        j->spare = true;
        j->b = b;
        j->serial = b->serial;
        j->n_trees = n_rw;
        int r = 0;
        for (size_t i = 0; r == 0 && i < n_rw; i++) {
                const char *rel;
                if ((r = under_home(sh->cfg->shell_home, rw[i].path, &rel)) < 0 ||
                    (r = rw[i].fd = detached(sh, rel)) < 0)
                        break;
                /* the tree its view holds, for spare_fits */
                j->tree_fd[i] = fcntl(rw[i].fd, F_DUPFD_CLOEXEC, 3);
                r = j->tree_fd[i] < 0 ? -errno : 0;
        }
        if (r == 0 &&
            (!(j->home = strdup(b->spare_home)) || (b->spare_ws && !(j->ws = strdup(b->spare_ws)))))
                r = -ENOMEM;
        /* the script's file is bound into the view now, written at the go */
        if (r == 0 && (r = new_id(sh, j->id)) == 0)
                r = job_files(sh, j, "", 0);
        if (r == 0)
                r = start_keeper(sh, j, NULL, j->home, rw, n_rw, NULL, 0, 0);
        for (size_t i = 0; i < 2; i++)
                safe_close(rw[i].fd);
        if (r < 0) {
                log_warn(NULL, "shell.spare_failed", "binding=%s error=%s", log_q(b->key),
                         log_q(strerror(-r)));
                spare_free(j);
                return;
        }
        b->spare = j;
}

/* Its job for the spare's keeper: mode, terminal size, whether the script
 * runs itself, cwd and environment, in a sealed memfd (struct job_go). */
static int spare_go(struct job *j, const struct run_text *t, char **env, unsigned cols,
                    unsigned rows)
{
        struct job_go h = {.mode = (uint32_t)j->mode,
                           .cols = cols,
                           .rows = rows,
                           .shebang =
                               t->script_len >= 2 && t->script[0] == '#' && t->script[1] == '!',
                           .cwd_len = (uint32_t)strlen(t->cwd) + 1};
        size_t env_len = 0;
        for (char **e = env; *e; e++) {
                env_len += strlen(*e) + 1;
                h.n_env++;
        }
        if (sizeof(h) + h.cwd_len + env_len > JOB_GO_MAX)
                return -E2BIG;
        h.env_len = (uint32_t)env_len;
        size_t size = sizeof(h) + h.cwd_len + env_len;
        _cleanup_free_ char *buf = malloc(size);
        if (!buf)
                return -ENOMEM;
        char *p = mempcpy(mempcpy(buf, &h, sizeof(h)), t->cwd, h.cwd_len);
        for (char **e = env; *e; e++)
                p = mempcpy(p, *e, strlen(*e) + 1);
        _cleanup_close_ int fd = memfd_create("lockbox-job-go", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        if (fd < 0)
                return -errno;
        int r = file_write_all(fd, buf, size);
        if (r == 0 &&
            fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0)
                r = -errno;
        if (r == 0 && channel_send(j->sock, &(struct keeper_msg){.type = KEEPER_GO},
                                   sizeof(struct keeper_msg), &fd, 1) < 0)
                r = -EPIPE;
        return r;
}

/* ---- calls ------------------------------------------------------------- */

static void call_park_wait(struct call *c, uint64_t size)
{
        int64_t now = monotonic_ms();
        c->state = CALL_WAIT;
        c->deadline_ms = now + c->req.timeout_ms;
        c->last_size = size;
        c->saw_output = size > (uint64_t)c->req.offset;
        c->last_growth_ms = c->saw_output ? now : -1;
        c->poll_ms = POLL_FIRST_MS;
        c->next_ms = now; /* the first pass at once */
}

/* One pass of the wait loop (SHELLCTL's WaitJob): true when answered. */
static bool wait_pass(struct call *c)
{
        struct job *j = job_find(c->sh, c->req.job_id);
        if (!j) {
                reply_not_found(c);
                return true;
        }
        int64_t now = monotonic_ms();
        uint64_t size = out_size(j), offset = (uint64_t)c->req.offset;
        if (size > c->last_size) {
                c->last_size = size;
                if (size > offset) {
                        c->saw_output = true;
                        c->last_growth_ms = now;
                }
        }
        if (terminal(j) || now >= c->deadline_ms) {
                reply_window(c, j, false);
                return true;
        }
        if (size > offset) {
                struct shell_window w;
                uint64_t sz;
                /* a full page is ready: only possible with more than a
                 * page past the offset, so the file is read only then */
                if (size - offset > c->req.output_limit &&
                    shell_window_read(j->out_rfd, offset, c->req.output_limit, &w, &sz) == 0 &&
                    w.truncated) {
                        reply_window(c, j, false);
                        return true;
                }
                if (c->saw_output && now - c->last_growth_ms >= c->req.idle_flush_ms) {
                        reply_window(c, j, false);
                        return true;
                }
        }
        c->next_ms = now + c->poll_ms;
        c->poll_ms = c->poll_ms * 2 > POLL_MAX_MS ? POLL_MAX_MS : c->poll_ms * 2;
        return false;
}

static void do_delete(struct call *c, struct job *j)
{
        struct shell_reply rep = {0};
        memcpy(rep.view.job_id, j->id, sizeof(rep.view.job_id));
        job_free(j);
        reply_send(c, &rep, -1);
}

/* A terminate's end: grace over or nothing left running. */
static bool terminate_pass(struct call *c)
{
        struct job *j = job_find(c->sh, c->req.job_id);
        if (!j) {
                reply_not_found(c);
                return true;
        }
        int64_t now = monotonic_ms();
        bool empty = !j->cg ? j->keeper_gone : cgroup_run_count(j->cg) == 0;
        if (!empty && now < j->kill_at_ms) {
                c->next_ms =
                    now + POLL_MAX_MS / 2 < j->kill_at_ms ? now + POLL_MAX_MS / 2 : j->kill_at_ms;
                return false;
        }
        if (!j->has_exit) {
                j->has_exit = true;
                j->exit_code = empty ? 128 + SIGINT : 128 + SIGKILL;
        }
        job_kill(j);
        j->kill_at_ms = -1;
        set_status(j, SHELL_TERMINATED);
        if (c->delete_after)
                do_delete(c, j);
        else
                reply_view(c, j);
        return true;
}

static void start_terminate(struct call *c, struct job *j)
{
        if (terminal(j)) {
                /* over already: whatever it left running goes now */
                job_kill(j);
                if (c->delete_after)
                        do_delete(c, j);
                else
                        reply_view(c, j);
                return;
        }
        if (!terminal(j) && j->kill_at_ms < 0) {
                j->terminating = true;
                interrupt(j);
                j->kill_at_ms = monotonic_ms() + c->req.grace_ms;
                log_info(NULL, "shell.job_terminate", "job=%s grace_ms=%u", j->id, c->req.grace_ms);
        }
        c->state = CALL_TERMINATE;
        c->next_ms = monotonic_ms();
        terminate_pass(c);
}

/* The job is STARTING (or FAILED): the run waits for its output or end;
 * the binding's next job is made ahead (spare_make) once this one has
 * been answered or has run SPARE_DELAY_MS. */
static void run_started(struct call *c, struct job *j, const char *binding, const char *cwd,
                        const char *how)
{
        log_info(NULL, "shell.job_started", "job=%s mode=%s binding=%s cwd=%s start=%s", j->id,
                 j->mode == SHELL_MODE_PTY ? "pty" : "stdio", log_q(binding), log_q(cwd), how);
        struct binding *b = j->b;
        if (!terminal(j))
                shell_stats_start(strcmp(how, "spare") == 0);
        if (b && !terminal(j) && !b->spare) {
                free(b->spare_home);
                free(b->spare_ws);
                b->spare_home = strdup(j->home);
                b->spare_ws = j->ws ? strdup(j->ws) : NULL;
                b->spare_ms = monotonic_ms() + SPARE_DELAY_MS;
        }
        memcpy(c->req.job_id, j->id, sizeof(c->req.job_id));
        c->req.offset = 0;
        call_park_wait(c, 0);
        wait_pass(c);
}

/* The binding's spare becomes the job: its script written to the file
 * its view already holds, its row saved, its keeper told the rest. */
static void start_spare(struct call *c, struct binding *b, const struct run_text *t, char **env)
{
        struct shell *sh = c->sh;
        struct job *j = b->spare;
        b->spare = NULL;
        j->spare = false;
        for (size_t i = 0; i < j->n_trees; i++)
                j->tree_fd[i] = safe_close(j->tree_fd[i]);
        j->mode = c->req.mode;
        j->created = now_s();
        j->deadline_ms = monotonic_ms() + sh->cfg->shell_job_timeout * 1000;
        j->next = sh->jobs;
        sh->jobs = j;
        b->jobs++;
        b->idle_ms = 0;
        int r = 0;
        {
                _cleanup_close_ int fd =
                    openat(j->dirfd, "script", O_WRONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);
                r = fd < 0 ? -errno : file_write_all(fd, t->script, t->script_len);
        }
        if (r == 0)
                r = spare_go(j, t, env, c->req.cols, c->req.rows);
        set_status(j, SHELL_STARTING); /* its row: written while the job starts */
        if (r < 0) {
                j->has_exit = true;
                j->exit_code = 125;
                verdict(j, "the job could not start: %s", strerror(-r));
                set_status(j, SHELL_FAILED);
                job_kill(j);
                syscall(SYS_pidfd_send_signal, j->keeper_pidfd, SIGKILL, NULL, 0);
        }
        run_started(c, j, b->key, t->cwd, "spare");
}

static void do_run(struct call *c, int blobfd)
{
        struct shell *sh = c->sh;
        struct stat st;
        unsigned seals = (unsigned)fcntl(blobfd, F_GET_SEALS);
        if (fstat(blobfd, &st) < 0 || st.st_size <= 0 || st.st_size > SHELL_BLOB_MAX ||
            (int)seals < 0 || !(seals & F_SEAL_WRITE) || !(seals & F_SEAL_SHRINK)) {
                reply_error(c, 400, "invalid_request", "Invalid JSON body");
                return;
        }
        char *blob = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, blobfd, 0);
        if (blob == MAP_FAILED) {
                reply_error(c, 500, "internal_error", "reading the request: %s", strerror(errno));
                return;
        }
        struct run_text t = {0};
        struct jail_view_rw rw[2] = {{.fd = -1}, {.fd = -1}};
        size_t n_rw = 0;
        char why[PATH_MAX + 200] = "", **env = NULL;
        struct job *j = NULL;
        int r = parse_blob(blob, (size_t)st.st_size, &t);
        if (r < 0) {
                reply_error(c, 400, "invalid_request", "script is required");
                goto out;
        }
        if (live_jobs(sh) >= (unsigned)sh->cfg->shell_max_jobs) {
                shell_stats_limit(STATS_SHELL_TOO_MANY_JOBS);
                reply_error(c, 429, "too_many_jobs",
                            "%d jobs are alive (shell.max_jobs); terminate or delete one",
                            sh->cfg->shell_max_jobs);
                goto out;
        }
        struct conversion *conv = NULL;
        bool may_wait = !c->parked_ms || monotonic_ms() - c->parked_ms < CONTROL_WAIT_MS;
        if ((r = job_paths(sh, &t, c->req.session_id, may_wait, rw, &n_rw, why, sizeof(why),
                           &conv)) < 0) {
                if (r == -EINPROGRESS) {
                        if (!c->parked_ms)
                                c->parked_ms = monotonic_ms();
                        /* a tree of the job is being moved into its
                         * subvolume: the run starts over once it is */
                        if ((c->blobfd = fcntl(blobfd, F_DUPFD_CLOEXEC, 3)) < 0) {
                                reply_error(c, 500, "internal_error", "out of descriptors");
                                goto out;
                        }
                        c->state = CALL_CONVERT;
                        c->conv = conv;
                        c->control = strcmp(t.home, sh->cfg->shell_home) == 0;
                        if (conv)
                                conv->waiters++;
                        else /* a snapshot at work, a control job: again shortly */
                                c->next_ms = monotonic_ms() + POLL_FIRST_MS * 4;
                        goto out;
                }
                if (strncmp(why, "HOME must", 9) == 0)
                        reply_error(c, 422, "validation_error", "%s", why);
                else if (strncmp(why, "cannot bound", 12) == 0)
                        reply_error(c, 500, "disk_bound_failed", "%s", why);
                else
                        reply_error(c, 400, "invalid_cwd", "%s",
                                    *why ? why : "cwd is not a directory");
                goto out;
        }
        if (!(env = job_env(sh, &t, c->req.mode))) {
                reply_error(c, 500, "internal_error", "out of memory");
                goto out;
        }
        const char *binding = c->req.session_id[0] ? c->req.session_id : t.home;
        struct binding *b = binding_find(sh, binding);
        if (b && b->spare && spare_fits(b->spare, t.home, rw, n_rw)) {
                start_spare(c, b, &t, env);
                goto out;
        }
        if (b && !b->jobs)
                /* a lingering binding is taken again only with the very
                 * trees it had: a HOME removed and made again, or a
                 * session id used with another HOME, is a new lease
                 * (maybe another tenant's), which gets new namespaces */
                binding_free(b);
        else if (b)
                spare_drop(b); /* its trees are not this job's (any more) */
        if (!(j = job_new(sh, c->req.mode))) {
                reply_error(c, 500, "internal_error", "out of memory");
                goto out;
        }
        j->created = now_s();
        if ((r = new_id(sh, j->id)) < 0) {
                reply_error(c, 500, "job_id_collision", "Failed to allocate a unique job id");
                free(j);
                j = NULL;
                goto out;
        }
        j->next = sh->jobs;
        sh->jobs = j;
        j->deadline_ms = monotonic_ms() + sh->cfg->shell_job_timeout * 1000;
        r = job_files(sh, j, t.script, t.script_len);
        if (r == 0 && (r = binding_get(sh, binding, &j->b)) == 0) {
                j->b->jobs++;
                j->b->idle_ms = 0;
                j->serial = j->b->serial;
        }
        if (r == 0 && !(j->home = strdup(t.home)))
                r = -ENOMEM;
        if (r == 0 && n_rw == 2 && !(j->ws = strdup(rw[1].path)))
                r = -ENOMEM;
        if (r == 0) {
                set_status(j, SHELL_STARTING);
                r = start_keeper(sh, j, &t, t.home, rw, n_rw, env, c->req.cols, c->req.rows);
        }
        if (r < 0) {
                j->has_exit = true;
                j->exit_code = 125;
                if (j->dirfd >= 0 && j->out_rfd >= 0)
                        verdict(j, "the job could not start: %s", strerror(-r));
                set_status(j, SHELL_FAILED);
                if (j->out_rfd < 0) {
                        reply_error(c, 500, "internal_error", "job directory: %s", strerror(-r));
                        job_free(j);
                        goto out;
                }
        }
        run_started(c, j, binding, t.cwd, "cold");
out:
        for (size_t i = 0; i < 2; i++)
                safe_close(rw[i].fd);
        strv_free(env);
        run_text_free(&t);
        munmap(blob, (size_t)st.st_size);
}

static void do_input(struct call *c, struct job *j, int textfd)
{
        if (terminal(j)) {
                reply_error(c, 409, "job_not_running", "Job %s is already terminal", j->id);
                return;
        }
        if (j->mode == SHELL_MODE_STDIO) {
                reply_error(c, 409, "input_unsupported", "stdio jobs do not support input");
                return;
        }
        uint64_t size = out_size(j);
        if ((uint64_t)c->req.offset > size) {
                reply_window(c, j, false); /* invalid_offset */
                return;
        }
        struct keeper_msg m = {.type = KEEPER_INPUT};
        log_info(NULL, "shell.job_input", "job=%s offset=%lld", j->id, (long long)c->req.offset);
        if (textfd >= 0 && j->sock >= 0)
                channel_send(j->sock, &m, sizeof(m), &textfd, 1);
        call_park_wait(c, size);
        wait_pass(c);
}

static int cmp_created_desc(const void *a, const void *b)
{
        const struct shell_view *x = a, *y = b;
        if (x->created_at != y->created_at)
                return x->created_at > y->created_at ? -1 : 1;
        return strcmp(x->job_id, y->job_id);
}

static void do_list(struct call *c)
{
        struct shell *sh = c->sh;
        size_t n = 0, cap = 0;
        for (struct job *j = sh->jobs; j; j = j->next)
                cap++;
        _cleanup_free_ struct shell_view *v = calloc(cap + 1, sizeof(*v));
        if (!v) {
                reply_error(c, 500, "internal_error", "out of memory");
                return;
        }
        for (struct job *j = sh->jobs; j; j = j->next)
                view_of(j, &v[n++]);
        qsort(v, n, sizeof(*v), cmp_created_desc);
        size_t k = 0;
        for (size_t i = 0; i < n && k < c->req.list_limit; i++)
                if (c->req.status_filter == -1 || c->req.status_filter == (int32_t)v[i].status)
                        v[k++] = v[i];
        _cleanup_close_ int fd = memfd_create("lockbox-jobs", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        if (fd < 0 || file_write_all(fd, v, k * sizeof(*v)) < 0 ||
            fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE) < 0) {
                reply_error(c, 500, "internal_error", "listing jobs: %s", strerror(errno));
                return;
        }
        struct shell_reply rep = {.n_jobs = (uint32_t)k};
        reply_send(c, &rep, k ? fd : -1);
}

/* The bounds the HTTP side applied, checked again: each op's own fields. */
static bool req_valid(const struct shell_req *q)
{
        if (q->hdr.magic != PROTO_MAGIC || q->hdr.type != PROTO_SHELL_REQ || q->op < SHELL_RUN ||
            q->op > SHELL_OP_LAST || q->offset < 0 || q->timeout_ms > SHELL_WAIT_MAX_MS ||
            q->grace_ms > SHELL_GRACE_MAX_MS)
                return false;
        bool window = q->op == SHELL_RUN || q->op == SHELL_WAIT || q->op == SHELL_INPUT;
        if (window && (q->output_limit < 1 || q->output_limit > SHELL_OUTPUT_LIMIT_MAX ||
                       q->idle_flush_ms < 1 || q->idle_flush_ms > SHELL_IDLE_FLUSH_MAX_MS))
                return false;
        if (q->op == SHELL_TAIL && (q->output_limit < 1 || q->output_limit > SHELL_TAIL_LIMIT_MAX))
                return false;
        if (q->op == SHELL_RUN &&
            (q->mode > SHELL_MODE_STDIO || q->cols < 1 || q->cols > SHELL_TERMINAL_MAX ||
             q->rows < 1 || q->rows > SHELL_TERMINAL_MAX))
                return false;
        if (q->op == SHELL_LIST && (q->list_limit < 1 || q->list_limit > SHELL_LIST_MAX ||
                                    q->status_filter < -2 || q->status_filter > SHELL_LOST))
                return false;
        return true;
}

static void dispatch(struct call *c, int fd)
{
        struct shell_req *q = &c->req;
        q->job_id[SHELL_JOB_ID_LEN] = '\0';
        q->session_id[SHELL_SESSION_ID_MAX] = '\0';
        if (q->op == SHELL_RUN) {
                if (fd < 0)
                        reply_error(c, 400, "invalid_request", "Invalid JSON body");
                else
                        do_run(c, fd);
                return;
        }
        if (q->op == SHELL_LIST) {
                do_list(c);
                return;
        }
        if (q->op == SHELL_SNAPSHOT_SAVE || q->op == SHELL_SNAPSHOT_RESTORE) {
                bool moving = false;
                for (const struct conversion *cv = c->sh->conversions; cv; cv = cv->next)
                        moving |= cv->p != NULL;
                if (moving) { /* a tree being moved: a walk would see it half */
                        reply_error(c, 409, "snapshot_busy",
                                    "a tree of shell.home is being moved into its subvolume; "
                                    "try again shortly");
                        return;
                }
                shell_snapshot_call(c->sh->cfg, c->sh->loop, c->chan, q, fd);
                c->state = CALL_DONE;
                return;
        }
        struct job *j = job_find(c->sh, q->job_id);
        if (!j) {
                reply_not_found(c);
                return;
        }
        switch (q->op) {
        case SHELL_WAIT:
                if ((uint64_t)q->offset > out_size(j)) {
                        reply_window(c, j, false);
                        return;
                }
                call_park_wait(c, out_size(j));
                wait_pass(c);
                return;
        case SHELL_INPUT:
                do_input(c, j, fd);
                return;
        case SHELL_TAIL:
                reply_window(c, j, true);
                return;
        case SHELL_STATUS:
                reply_view(c, j);
                return;
        case SHELL_TERMINATE:
                start_terminate(c, j);
                return;
        case SHELL_DELETE:
                if (!terminal(j) && !q->force) {
                        reply_error(c, 409, "job_running", "Job %s is still running", j->id);
                        return;
                }
                c->delete_after = true;
                start_terminate(c, j);
                return;
        default:
                reply_error(c, 400, "invalid_request", "Invalid JSON body");
        }
}

static void call_free(struct call *c)
{
        struct shell *sh = c->sh;
        for (struct call **p = &sh->calls; *p; p = &(*p)->next)
                if (*p == c) {
                        *p = c->next;
                        break;
                }
        loop_unwatch(sh->loop, c->chan);
        safe_close(c->chan);
        safe_close(c->blobfd);
        if (c->conv) { /* its client left while it waited */
                c->conv->waiters--;
                conversion_release(c->conv);
        }
        free(c);
}

static void on_call(void *data, uint32_t events)
{
        struct call *c = data;
        if (c->state != CALL_READ) {
                /* the HTTP side gave up (its client left): nothing to answer */
                c->state = CALL_DONE;
                return;
        }
        int fd = -1;
        size_t nf = 0;
        int r = channel_recv(c->chan, &c->req, sizeof(c->req), &fd, 1, &nf);
        if (r <= 0 || !req_valid(&c->req)) {
                if (nf)
                        safe_close(fd);
                if (r > 0)
                        log_warn(NULL, "shell.bad_request", "op=%u", c->req.op);
                c->state = CALL_DONE;
                return;
        }
        dispatch(c, nf ? fd : -1);
        if (nf)
                safe_close(fd);
}

void shell_call(struct shell *sh, int chan)
{
        struct call *c = calloc(1, sizeof(*c));
        if (!c) {
                safe_close(chan);
                return;
        }
        *c = (struct call){.sh = sh, .chan = chan, .state = CALL_READ, .blobfd = -1};
        c->w = (struct watch){.fn = on_call, .data = c};
        if (loop_watch(sh->loop, chan, &c->w) < 0) {
                safe_close(chan);
                free(c);
                return;
        }
        c->next = sh->calls;
        sh->calls = c;
}

/* ---- the jailer's loop ------------------------------------------------- */

int shell_wait_ms(const struct shell *sh)
{
        if (!sh)
                return -1;
        int64_t now = monotonic_ms(), next = sh->next_gc_ms;
        for (const struct call *c = sh->calls; c; c = c->next) {
                if (c->state == CALL_DONE)
                        return 0;
                if ((c->state == CALL_WAIT || c->state == CALL_TERMINATE ||
                     (c->state == CALL_CONVERT && !c->conv)) &&
                    c->next_ms < next)
                        next = c->next_ms;
        }
        for (const struct conversion *cv = sh->conversions; cv; cv = cv->next)
                if (cv->p && cv->deadline_ms < next)
                        next = cv->deadline_ms;
        for (const struct binding *b = sh->bindings; b; b = b->next)
                if (b->spare_ms && b->spare_ms < next)
                        next = b->spare_ms;
        return next <= now ? 0 : (int)(next - now);
}

static void gc(struct shell *sh)
{
        int64_t now = monotonic_ms();
        for (struct binding *b = sh->bindings, *next; b; b = next) {
                next = b->next;
                if (!b->jobs && b->idle_ms &&
                    now - b->idle_ms >= sh->cfg->shell_binding_linger * 1000) {
                        binding_free(b);
                        continue;
                }
                /* a spare whose tree a control script removed would keep
                 * it (a subvolume's space and quota group) while the
                 * binding lives: dropped (the binding's next job starts
                 * cold and leaves the next spare) */
                for (size_t i = 0; b->spare && i < b->spare->n_trees; i++) {
                        struct stat held;
                        if (spare_tree_gone(b->spare, i, &held))
                                spare_drop(b);
                }
        }
        for (struct job *j = sh->jobs, *next; j; j = next) {
                next = j->next;
                if (j->kill_at_ms < 0 && (!terminal(j) || now - j->ended_ms < 2000))
                        check_oom(j);
                if (!terminal(j) && !j->terminating && now >= j->deadline_ms) {
                        verdict(j, "job ended: shell.job_timeout (%llds) reached",
                                (long long)sh->cfg->shell_job_timeout);
                        shell_stats_limit(STATS_SHELL_JOB_TIMEOUT);
                        j->terminating = true;
                        interrupt(j);
                        j->kill_at_ms = now + TIMEOUT_GRACE_MS;
                } else if (j->kill_at_ms >= 0 &&
                           (now >= j->kill_at_ms ||
                            (terminal(j) && (!j->cg || cgroup_run_count(j->cg) <= 0)))) {
                        /* shell.job_timeout's grace over, or the job ended
                         * whole before it (a terminate call does this
                         * itself) */
                        bool waited = false;
                        for (struct call *c = sh->calls; c; c = c->next)
                                waited |=
                                    c->state == CALL_TERMINATE && strcmp(c->req.job_id, j->id) == 0;
                        if (!waited) {
                                if (!j->has_exit) {
                                        j->has_exit = true;
                                        j->exit_code = 128 + SIGKILL;
                                }
                                job_kill(j);
                                j->kill_at_ms = -1;
                                set_status(j, SHELL_TERMINATED);
                        }
                } else if (terminal(j) && j->kill_at_ms < 0 &&
                           now - j->ended_ms >= sh->cfg->shell_retention * 1000) {
                        bool busy = false;
                        for (struct call *c = sh->calls; c; c = c->next)
                                busy |= c->state != CALL_DONE && strcmp(c->req.job_id, j->id) == 0;
                        if (!busy)
                                job_free(j);
                }
        }
}

/* Finished jobs kept for shell.retention are bounded too (4 x
 * shell.max_jobs), so their output cannot pile up on the state
 * directory's disk: beyond, the oldest goes early. */
static void evict_finished(struct shell *sh)
{
        unsigned kept = 0, cap = 4u * (unsigned)sh->cfg->shell_max_jobs;
        for (struct job *j = sh->jobs; j; j = j->next)
                kept += terminal(j) && j->kill_at_ms < 0;
        while (kept > cap) {
                struct job *oldest = NULL;
                for (struct job *j = sh->jobs; j; j = j->next) {
                        bool busy = false;
                        for (struct call *c = sh->calls; c; c = c->next)
                                busy |= c->state != CALL_DONE && strcmp(c->req.job_id, j->id) == 0;
                        if (terminal(j) && j->kill_at_ms < 0 && !busy &&
                            (!oldest || j->ended_ms < oldest->ended_ms))
                                oldest = j;
                }
                if (!oldest)
                        return;
                log_info(NULL, "shell.job_evicted", "job=%s kept=%u", oldest->id, kept);
                job_free(oldest);
                kept--;
        }
}

void shell_tick(struct shell *sh)
{
        if (!sh)
                return;
        int64_t now = monotonic_ms();
        for (struct conversion *cv = sh->conversions, *next; cv; cv = next) {
                next = cv->next;
                if (cv->p && now >= cv->deadline_ms)
                        conversion_deadline(cv, now);
        }
        for (struct call *c = sh->calls; c; c = c->next) {
                if (c->next_ms > now)
                        continue;
                if (c->state == CALL_WAIT)
                        wait_pass(c);
                else if (c->state == CALL_TERMINATE)
                        terminate_pass(c);
                else if (c->state == CALL_CONVERT && !c->conv)
                        run_again(c);
        }
        save_rows(sh);
        if (now >= sh->next_gc_ms) {
                gc(sh);
                evict_finished(sh);
                sh->next_gc_ms = now + GC_EVERY_MS;
        }
        for (struct binding *b = sh->bindings; b; b = b->next)
                if (b->spare_ms && now >= b->spare_ms)
                        spare_make(b);
        for (struct call *c = sh->calls, *next; c; c = next) {
                next = c->next;
                if (c->state == CALL_DONE)
                        call_free(c);
        }
}

bool shell_owns(const struct shell *sh, pid_t pid)
{
        if (!sh)
                return false;
        for (const struct job *j = sh->jobs; j; j = j->next)
                if (j->keeper_pid == pid && !j->keeper_gone)
                        return true;
        for (const struct binding *b = sh->bindings; b; b = b->next)
                if (b->pid == pid || (b->spare && b->spare->keeper_pid == pid))
                        return true;
        return false;
}

unsigned shell_jobs(const struct shell *sh)
{
        unsigned n = 0;
        for (const struct job *j = sh ? sh->jobs : NULL; j; j = j->next)
                n++;
        return n;
}

/* lockboxd stops with shell.keep_jobs: the jobs and their bindings go on
 * (keepers, inits, groups and the disk stay), only this process's hold on
 * them ends; the next start adopts them. */
static void detach_all(struct shell *sh)
{
        save_rows(sh); /* the next start adopts from them */
        for (struct binding *b = sh->bindings; b; b = b->next)
                spare_drop(b); /* a spare has no job to keep */
        /* a binding with nothing running (its jobs over, none left a
         * process) ends now; its jobs' records and output stay */
        for (struct binding *b = sh->bindings, *next; b; b = next) {
                next = b->next;
                bool live = false;
                for (const struct job *j = sh->jobs; j && !live; j = j->next)
                        live = j->b == b && (!terminal(j) || !j->keeper_gone ||
                                             (j->cg && cgroup_run_count(j->cg) > 0));
                if (live)
                        continue;
                log_info(NULL, "shell.binding_idle", "binding=%s", log_q(b->key));
                for (struct job *j = sh->jobs; j; j = j->next)
                        if (j->b == b) {
                                if (j->cg)
                                        cgroup_run_remove(j->cg);
                                j->cg = cgroup_run_free(j->cg);
                                j->b = NULL;
                        }
                binding_free(b);
        }
        size_t n = 0;
        for (struct job *j = sh->jobs; j; j = j->next)
                n++;
        for (struct binding *b = sh->bindings; b; b = b->next)
                n++;
        pid_t *keep = reallocarray(sh->keep, sh->n_keep + n, sizeof(pid_t));
        if (keep)
                sh->keep = keep;
        while (sh->jobs) {
                struct job *j = sh->jobs;
                if (keep && !j->keeper_gone)
                        sh->keep[sh->n_keep++] = j->keeper_pid;
                job_unlink(j);
                job_close(j);
                sh->kept = true;
        }
        while (sh->bindings) {
                struct binding *b = sh->bindings;
                if (keep)
                        sh->keep[sh->n_keep++] = b->pid;
                binding_unlink(b);
                binding_close(b);
                sh->kept = true;
        }
}

bool shell_keeps(const struct shell *sh, pid_t pid)
{
        for (size_t i = 0; sh && i < sh->n_keep; i++)
                if (sh->keep[i] == pid)
                        return true;
        return false;
}

void shell_stop(struct shell *sh)
{
        if (!sh)
                return;
        for (struct call *c = sh->calls; c; c = c->next)
                if (c->state != CALL_DONE)
                        reply_error(c, 503, "unavailable", "lockboxd is stopping");
        if (sh->cfg->shell_keep_jobs && (sh->jobs || sh->bindings)) {
                log_info(NULL, "shell.jobs_kept", "jobs=%u", shell_jobs(sh));
                detach_all(sh);
                return;
        }
        while (sh->jobs)
                job_free(sh->jobs);
        while (sh->bindings)
                binding_free(sh->bindings);
}

/* ---- start-up ---------------------------------------------------------- */

/* What the last lockboxd left (its rows in shell.db): bindings whose init
 * is still the process it started (PID and start time), and jobs, whose
 * keepers are asked in (a keeper that does not answer is gone: its job,
 * if it was not over, is lost). Then rows, groups and job directories that
 * nothing claims are removed, and the rows written again. */
static void adopt_binding(const struct store_binding *row, void *data)
{
        struct shell *sh = data;
        if (row->serial > sh->next_binding)
                sh->next_binding = row->serial;
        int pidfd = (int)syscall(SYS_pidfd_open, row->pid, 0);
        if (pidfd < 0 || row->start_ticks == 0 || start_ticks(row->pid) != row->start_ticks) {
                safe_close(pidfd);
                return;
        }
        struct binding *b = calloc(1, sizeof(*b));
        if (!b || !(b->key = strdup(row->key))) {
                free(b);
                close(pidfd);
                return;
        }
        *b = (struct binding){.sh = sh,
                              .key = b->key,
                              .pid = row->pid,
                              .pidfd = pidfd,
                              .ns = {-1, -1, -1, -1},
                              .serial = row->serial,
                              /* the last lockboxd's network went with it */
                              .retired = sh->net_mode == SHELL_NET_NAMESPACE};
        static const char *const names[] = {"pid", "net", "ipc", "uts"};
        for (int i = 0; i < 4 && !b->retired; i++) {
                char path[64];
                snprintf(path, sizeof(path), "/proc/%d/ns/%s", (int)b->pid, names[i]);
                if ((b->ns[i] = open(path, O_RDONLY | O_CLOEXEC)) < 0)
                        b->retired = true;
        }
        char name[32];
        struct cgroup_limits lim = {.memory_bytes = sh->cfg->shell_binding_memory_bytes,
                                    .pids = sh->cfg->shell_binding_processes,
                                    .cpu_weight = sh->cfg->shell_cpu_weight};
        snprintf(name, sizeof(name), "shell-b%u", b->serial);
        if (cgroup_root_mode(sh->cg) != CGROUP_NONE)
                cgroup_shell_create(sh->cg, name, &lim, &b->cg);
        b->w = (struct watch){.fn = on_binding_exit, .data = b};
        loop_watch(sh->loop, b->pidfd, &b->w);
        b->next = sh->bindings;
        sh->bindings = b;
}

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77
#endif

/* The job's keeper, if it is there: connected, from root (it listened
 * before giving root up), watched. */
static void adopt_keeper(struct job *j)
{
        int fd = -1;
        struct ucred cred;
        socklen_t len = sizeof(cred);
        if (keeper_socket(j, &fd, true) < 0)
                return;
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 || cred.uid != 0) {
                close(fd);
                return;
        }
        len = sizeof(j->keeper_pidfd);
        if (getsockopt(fd, SOL_SOCKET, SO_PEERPIDFD, &j->keeper_pidfd, &len) < 0)
                j->keeper_pidfd = (int)syscall(SYS_pidfd_open, cred.pid, 0);
        j->keeper_pid = cred.pid;
        j->keeper_gone = false;
        j->sock = fd;
        j->w_sock = (struct watch){.fn = on_keeper_msg, .data = j};
        j->w_keeper = (struct watch){.fn = on_keeper_exit, .data = j};
        loop_watch(j->sh->loop, j->sock, &j->w_sock);
        if (j->keeper_pidfd >= 0)
                loop_watch(j->sh->loop, j->keeper_pidfd, &j->w_keeper);
}

static void adopt_job(const struct store_job *row, void *data)
{
        struct shell *sh = data;
        if (strlen(row->id) != SHELL_JOB_ID_LEN || strchr(row->id, '/') || row->id[0] == '.')
                return;
        struct job *j = calloc(1, sizeof(*j));
        if (!j)
                return;
        int64_t now = now_s(), mono = monotonic_ms();
        *j = (struct job){.sh = sh,
                          .mode = row->mode == SHELL_MODE_STDIO ? SHELL_MODE_STDIO : SHELL_MODE_PTY,
                          .status = (uint32_t)row->status,
                          .has_exit = row->has_exit,
                          .exit_code = row->exit_code,
                          .created = row->created,
                          .started = row->started,
                          .ended = row->ended,
                          .kill_at_ms = -1,
                          .keeper_pidfd = -1,
                          .pidfd = -1,
                          .sock = -1,
                          .keeper_gone = true,
                          .serial = row->binding,
                          .ws_unknown = !row->ws,
                          .home = strdup(row->home),
                          .ws = row->ws && row->ws[0] ? strdup(row->ws) : NULL};
        memcpy(j->id, row->id, SHELL_JOB_ID_LEN);
        j->dirfd = openat(sh->jobs_fd, j->id, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        j->out_rfd =
            j->dirfd < 0 ? -1 : openat(j->dirfd, "output.log", O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (j->out_rfd < 0 || !j->home || (row->ws && row->ws[0] && !j->ws)) {
                job_close(j); /* its files are gone: nothing to show */
                return;
        }
        int64_t since = j->started >= 0 ? j->started : j->created;
        j->deadline_ms = mono + (since + sh->cfg->shell_job_timeout - now) * 1000;
        j->ended_ms = mono - (now - (j->ended >= 0 ? j->ended : now)) * 1000;
        for (struct binding *b = sh->bindings; b; b = b->next)
                if (b->serial == row->binding) {
                        j->b = b;
                        b->jobs++;
                }
        if (j->b && cgroup_root_mode(sh->cg) != CGROUP_NONE) {
                char name[64];
                struct cgroup_limits lim = {.memory_bytes = sh->cfg->shell_memory_bytes,
                                            .pids = sh->cfg->shell_processes,
                                            .cpu_weight = 100};
                snprintf(name, sizeof(name), "shell-b%u/%s", j->b->serial, j->id);
                cgroup_shell_create(sh->cg, name, &lim, &j->cg);
        }
        j->next = sh->jobs;
        sh->jobs = j;
        if (!terminal(j)) { /* counted live again, its duration from its start */
                j->started_ms = j->started >= 0 ? mono - (now - j->started) * 1000 : 0;
                shell_stats_status(SHELL_CREATED, j->status, &j->started_ms, 0);
        }
        /* a keeper whose job ended may still wait for its exit to be on
         * record, even where the row says it is */
        adopt_keeper(j);
        if (j->sock < 0 && !terminal(j)) {
                log_warn(NULL, "shell.job_lost", "job=%s reason=\"its keeper is gone\"", j->id);
                set_status(j, SHELL_LOST);
        }
}

/* Before the run network is built: bindings the last lockboxd left (a
 * kill gives it no time to take their links back) hold links and
 * addresses of its network, which the new one needs; they are taken out
 * of their namespaces, which keep their loopback. */
static void unplug_binding(const struct store_binding *row, void *data)
{
        _cleanup_close_ int pidfd = (int)syscall(SYS_pidfd_open, row->pid, 0);
        if (pidfd < 0 || row->start_ticks == 0 || start_ticks(row->pid) != row->start_ticks)
                return;
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/ns/net", (int)row->pid);
        _cleanup_close_ int ns = open(path, O_RDONLY | O_CLOEXEC);
        struct stat a, b;
        if (ns < 0 || fstat(ns, &a) < 0 || stat("/proc/self/ns/net", &b) < 0 ||
            a.st_ino == b.st_ino)
                return; /* the host's own (network.mode host) */
        int r = net_unplug_namespace(ns);
        log_info(NULL, "shell.binding_unplugged", "binding=%s error=%s", log_q(row->key),
                 log_q(r < 0 ? strerror(-r) : "none"));
}

static void skip_job(const struct store_job *row, void *data)
{
}

void shell_unplug_kept(const struct config *cfg)
{
        char path[PATH_MAX], err[256];
        struct store *st = NULL;
        snprintf(path, sizeof(path), "%s/shell.db", cfg->shell_state_dir);
        if (access(path, F_OK) < 0 || store_open(path, &st, err, sizeof(err)) < 0)
                return;
        store_load(st, unplug_binding, skip_job, NULL);
        store_close(st);
}

static bool claimed(const char *rel, void *data)
{
        const struct shell *sh = data;
        unsigned serial;
        int n = 0;
        if (sscanf(rel, "shell-b%u%n", &serial, &n) != 1)
                return false;
        /* a binding whose init died while lockboxd was down: the keepers
         * of its jobs are kept until they have told how the jobs ended */
        for (const struct job *j = sh->jobs; j; j = j->next)
                if (!j->b && j->serial == serial && j->sock >= 0 &&
                    (rel[n] == '\0' || strcmp(rel + n, "/holders") == 0))
                        return true;
        for (const struct binding *b = sh->bindings; b; b = b->next)
                if (b->serial == serial && b->cg) {
                        if (rel[n] == '\0' || strcmp(rel + n, "/holders") == 0)
                                return true;
                        for (const struct job *j = sh->jobs; j; j = j->next)
                                if (j->b == b && strcmp(rel + n + 1, j->id) == 0)
                                        return true;
                }
        return false;
}

static void empty_jobs_dir(struct shell *sh)
{
        DIR *d = opendir(sh->jobs_dir);
        struct dirent *de;
        unsigned n = 0;
        while (d && (de = readdir(d))) {
                if (de->d_name[0] == '.' || job_find(sh, de->d_name))
                        continue;
                remove_job_dir(sh, de->d_name);
                n++;
        }
        if (d)
                closedir(d);
        if (n)
                log_warn(NULL, "shell.stale_jobs_removed", "count=%u", n);
}

static int adopt(struct shell *sh, char *err, size_t errlen)
{
        /* the groups' parent is named after shell.state_dir (FNV-1a), so
         * that daemons with state of their own never sweep each other's */
        uint64_t h = 0xcbf29ce484222325ULL;
        for (const char *p = sh->cfg->shell_state_dir; *p; p++)
                h = (h ^ (unsigned char)*p) * 0x100000001b3ULL;
        char tag[17];
        snprintf(tag, sizeof(tag), "%016llx", (unsigned long long)h);
        if (cgroup_root_mode(sh->cg) != CGROUP_NONE && cgroup_shell_parent(sh->cg, tag) < 0)
                return -ENOMEM;
        char path[PATH_MAX];
        snprintf(path, sizeof(path), "%s/shell.db", sh->cfg->shell_state_dir);
        int r = store_open(path, &sh->store, err, errlen);
        if (r < 0)
                return r;
        if (store_load(sh->store, adopt_binding, adopt_job, sh) < 0) {
                snprintf(err, errlen, "shell jobs: %s: cannot read the records", path);
                return -EIO;
        }
        for (struct binding *b = sh->bindings, *next; b; b = next) {
                next = b->next;
                if (b->jobs == 0)
                        binding_free(b);
        }
        if (cgroup_root_mode(sh->cg) != CGROUP_NONE)
                cgroup_shell_sweep(sh->cg, claimed, sh);
        empty_jobs_dir(sh);
        store_rewrite_begin(sh->store);
        unsigned jobs = 0, live = 0, bindings = 0;
        for (struct binding *b = sh->bindings; b; b = b->next, bindings++)
                store_binding_put(sh->store,
                                  &(struct store_binding){.serial = b->serial,
                                                          .key = b->key,
                                                          .pid = b->pid,
                                                          .start_ticks = start_ticks(b->pid)});
        for (struct job *j = sh->jobs; j; j = j->next, jobs++) {
                job_save(j);
                live += !j->keeper_gone;
        }
        store_rewrite_end(sh->store);
        if (jobs || bindings)
                log_info(NULL, "shell.adopted", "jobs=%u keepers=%u bindings=%u", jobs, live,
                         bindings);
        return 0;
}

static int mkdir_owned(const char *path, mode_t mode, uid_t uid)
{
        int r = file_mkdir_parents(path, 0);
        if (r < 0)
                return r;
        if (mkdir(path, mode) == 0) {
                if (chown(path, uid, uid) < 0)
                        return -errno;
        } else if (errno != EEXIST) {
                return -errno;
        }
        return 0;
}

#define SWEEP_TIMEOUT_MS 30000 /* a start removing old trees moves left behind */

/* shell.home on lockbox's btrfs image: the moves' records opened, and
 * the old trees of moves a stop or a crash cut short removed (bounded:
 * what is left, the next start goes on with), also with the bounds off
 * now. */
static int moves_ready(struct shell *sh)
{
        char path[PATH_MAX];
        snprintf(path, sizeof(path), "%s/moves", sh->cfg->shell_state_dir);
        int r = mkdir_owned(path, 0700, 0);
        if (r < 0)
                return r;
        if ((sh->moves_fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
                return -errno;
        struct policy_prog own = {0};
        if (!sh->bounds && (r = policy_build_subvol(&own)) < 0)
                return r;
        struct subvol_sweep sw = {.home_fd = sh->home_fd,
                                  .home = sh->cfg->shell_home,
                                  .uid = (uid_t)sh->cfg->shell_uid,
                                  .record_fd = sh->moves_fd,
                                  .timeout_ms = SWEEP_TIMEOUT_MS,
                                  .filter = sh->bounds ? &sh->subvol_f : &own};
        r = subvol_sweep_left(&sw);
        if (r < 0)
                log_warn(NULL, "shell.subvol_leftover_failed", "records=%s error=%s", log_q(path),
                         log_q(strerror(-r)));
        policy_prog_free(&own);
        return 0;
}

int shell_new(const struct shell_deps *d, struct shell **ret, char *err, size_t errlen)
{
        const struct config *cfg = d->cfg;
        struct shell *sh = calloc(1, sizeof(*sh));
        if (!sh)
                return -ENOMEM;
        *sh = (struct shell){.cfg = cfg,
                             .loop = d->loop,
                             .cg = d->cg,
                             .net_mode = d->net_mode,
                             .net = d->net,
                             .resolv_conf = d->resolv_conf,
                             .home_fd = -1,
                             .jobs_fd = -1,
                             .moves_fd = -1};
        int r = 0;
        const char *what = "";
        if (asprintf(&sh->jobs_dir, "%s/jobs", cfg->shell_state_dir) < 0) {
                free(sh);
                return -ENOMEM;
        }
        if ((r = mkdir_owned(cfg->shell_state_dir, 0700, 0)) < 0 ||
            (r = mkdir_owned(sh->jobs_dir, 0700, 0)) < 0)
                what = cfg->shell_state_dir;
        else if ((r = mkdir_owned(cfg->shell_home, 0755, (uid_t)cfg->shell_uid)) < 0)
                what = cfg->shell_home;
        else if ((r = shell_disk_mount(cfg, err, errlen)) < 0) {
                free(sh->jobs_dir);
                free(sh);
                return r;
        } else if ((sh->home_fd = open(cfg->shell_home, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0 ||
                   (sh->jobs_fd = open(sh->jobs_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
                r = -errno;
                what = "open";
        }
        if (r == 0 && cfg->shell_disk_bytes > 0 && subvol_fs(sh->home_fd) &&
            (cfg->shell_binding_disk_bytes > 0 || cfg->shell_workspace_disk_bytes > 0)) {
                sh->bounds = true;
                if ((r = policy_build_subvol(&sh->subvol_f)) < 0)
                        what = "the subvolume worker's syscall filter";
        }
        if (r == 0 && cfg->shell_disk_bytes > 0 && subvol_fs(sh->home_fd) &&
            (r = moves_ready(sh)) < 0)
                what = "shell.state_dir/moves";
        if (r == 0) {
                struct policy_shell_opts po = {.network = d->net_mode != SHELL_NET_NONE,
                                               .extra = cfg->allowed_syscalls,
                                               .n_extra = cfg->n_allowed_syscalls};
                if ((r = policy_build_shell(&po, &sh->filter)) < 0)
                        what = "the shell jobs' syscall filter";
        }
        /* the view's read-only binds: the system (always: the view is not
         * Landlock's, which SHELLCTL_* may empty or turn off), Landlock's
         * list, the operator's extra paths, the /etc entries above */
        static const char *const system[] = {"/usr", "/bin", "/sbin", "/lib", "/lib64"};
        size_t cap = ELEMENTSOF(system) + cfg->n_shell_landlock_ro + cfg->n_extra_ro_paths +
                     ELEMENTSOF(etc_paths);
        if (r == 0 && !(sh->ro_paths = calloc(cap + 1, sizeof(char *))))
                r = -ENOMEM;
        for (size_t i = 0; r == 0 && i < ELEMENTSOF(system); i++)
                sh->ro_paths[sh->n_ro_paths++] = (char *)system[i];
        for (size_t i = 0; r == 0 && i < cfg->n_shell_landlock_ro; i++) {
                bool seen = jail_owned(cfg->shell_landlock_ro[i]);
                for (size_t k = 0; k < ELEMENTSOF(system) && !seen; k++)
                        seen = strcmp(system[k], cfg->shell_landlock_ro[i]) == 0;
                if (!seen)
                        sh->ro_paths[sh->n_ro_paths++] = cfg->shell_landlock_ro[i];
        }
        for (size_t i = 0; r == 0 && i < cfg->n_extra_ro_paths; i++)
                sh->ro_paths[sh->n_ro_paths++] = cfg->extra_ro_paths[i];
        for (size_t i = 0; r == 0 && i < ELEMENTSOF(etc_paths); i++)
                sh->ro_paths[sh->n_ro_paths++] = (char *)etc_paths[i];
        if (r < 0) {
                snprintf(err, errlen, "shell jobs: %s: %s", what, strerror(-r));
                shell_free(sh);
                return r;
        }
        if ((r = adopt(sh, err, errlen)) < 0) {
                shell_free(sh);
                return r;
        }
        sh->next_gc_ms = monotonic_ms() + GC_EVERY_MS;
        log_info(NULL, "shell.ready", "home=%s state_dir=%s uid=%d network=%s",
                 log_q(cfg->shell_home), log_q(cfg->shell_state_dir), cfg->shell_uid,
                 (const char *[]){"none", "namespace", "host"}[d->net_mode]);
        *ret = sh;
        return 0;
}

struct shell *shell_free(struct shell *sh)
{
        if (!sh)
                return NULL;
        shell_stop(sh);
        while (sh->calls)
                call_free(sh->calls);
        /* a tree being moved in: the worker is killed, the tree left as it
         * was (or, swapped already, in its subvolume) */
        for (struct conversion *cv = sh->conversions, *next; cv; cv = next) {
                next = cv->next;
                if (cv->p) {
                        loop_unwatch(sh->loop, subvol_pending_fd(cv->p));
                        subvol_convert_finish(cv->p, true, cv->err, sizeof(cv->err));
                }
                free(cv);
        }
        sh->conversions = NULL;
        policy_prog_free(&sh->filter);
        policy_prog_free(&sh->subvol_f);
        safe_close(sh->moves_fd);
        safe_close(sh->home_fd);
        if (!sh->kept)
                shell_disk_unmount(sh->cfg);
        sh->store = store_close(sh->store);
        safe_close(sh->jobs_fd);
        free(sh->ro_paths);
        free(sh->keep);
        free(sh->jobs_dir);
        free(sh);
        return NULL;
}
