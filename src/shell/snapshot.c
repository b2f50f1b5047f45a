/* HOME snapshots, the jailer's side (see snapshot.h): the one call in
 * flight, its worker (a pidfd), its deadline (a timerfd) and the HTTP
 * side's channel (a duplicate: its hang-up means the client went away),
 * all watched on the jailer's loop. The worker's report waits on its
 * socket until the worker has exited; then the second reply goes out. */
#include "shell/snapshot.h"
#include "shell/stats.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/fd.h"
#include "base/log.h"
#include "base/loop.h"
#include "base/util.h"
#include "config/config.h"
#include "ipc/channel.h"
#include "shell/snapshot_worker.h"

#define BLOB_READ_MAX (4u << 20) /* excludes of a 64 KiB body, with room to spare */

struct snapshot {
        struct loop *loop;
        bool busy;
        uint32_t op;
        int chan, pidfd, res, timer;
        pid_t pid;
        bool timed_out, gone;
        int64_t timeout_s;
        struct watch w_chan, w_pid, w_timer;
        struct policy_prog filter;
        bool filter_ready;
};

static struct snapshot snap = {.chan = -1, .pidfd = -1, .res = -1, .timer = -1};

static const char *op_name(uint32_t op)
{
        return op == SHELL_SNAPSHOT_SAVE ? "save" : "restore";
}

_printf_(4, 5) static void send_error(int chan, unsigned status, const char *code, const char *fmt,
                                      ...)
{
        va_list ap;
        va_start(ap, fmt);
        shell_reply_verror(chan, status, code, fmt, ap);
        va_end(ap);
}

static const char *fail_code(uint32_t op)
{
        return op == SHELL_SNAPSHOT_SAVE ? "snapshot_failed" : "restore_failed";
}

/* ---- the call in flight -------------------------------------------------- */

static void snap_end(void)
{
        loop_unwatch(snap.loop, snap.chan);
        loop_unwatch(snap.loop, snap.pidfd);
        loop_unwatch(snap.loop, snap.timer);
        snap.chan = safe_close(snap.chan);
        snap.pidfd = safe_close(snap.pidfd);
        snap.res = safe_close(snap.res);
        snap.timer = safe_close(snap.timer);
        snap.busy = false;
}

static void snap_kill(void)
{
        if (snap.pidfd >= 0)
                syscall(SYS_pidfd_send_signal, snap.pidfd, SIGKILL, NULL, 0);
}

/* The worker's report, if it sent one (it is gone: never blocks). */
static bool take_result(struct snap_result *ret)
{
        struct snap_result r;
        ssize_t n = RETRY_EINTR(recv(snap.res, &r, sizeof(r), MSG_DONTWAIT));
        if (n != (ssize_t)sizeof(r) || r.kind > SNAP_MALFORMED)
                return false;
        r.message[sizeof(r.message) - 1] = '\0';
        *ret = r;
        return true;
}

static void answer_done(void)
{
        struct snap_result r;
        bool have = take_result(&r);
        struct shell_reply rep = {0};
        if (snap.timed_out) {
                rep.http_status = 500;
                snprintf(rep.code, sizeof(rep.code), "%s", fail_code(snap.op));
                snprintf(rep.message, sizeof(rep.message),
                         "snapshot %s timed out after %lld s (shell.snapshot_timeout)",
                         op_name(snap.op), (long long)snap.timeout_s);
        } else if (!have) {
                rep.http_status = 500;
                snprintf(rep.code, sizeof(rep.code), "%s", fail_code(snap.op));
                snprintf(rep.message, sizeof(rep.message), "the snapshot worker died");
        } else if (r.kind != SNAP_OK) {
                bool bad = r.kind == SNAP_MALFORMED && snap.op == SHELL_SNAPSHOT_RESTORE;
                rep.http_status = bad ? 400 : 500;
                snprintf(rep.code, sizeof(rep.code), "%s",
                         bad ? "archive_malformed" : fail_code(snap.op));
                snprintf(rep.message, sizeof(rep.message), "%s", r.message);
        } else {
                rep.snap_entries = r.entries;
                rep.snap_bytes = r.bytes;
        }
        shell_stats_snapshot(snap.op == SHELL_SNAPSHOT_SAVE ? STATS_SHELL_SAVE
                                                            : STATS_SHELL_RESTORE,
                             rep.http_status == 0);
        if (rep.http_status)
                log_warn(NULL, "shell.snapshot_failed", "op=%s status=%u code=%s error=%s",
                         op_name(snap.op), rep.http_status, rep.code, log_q(rep.message));
        else
                log_info(NULL, "shell.snapshot_done", "op=%s entries=%llu bytes=%llu",
                         op_name(snap.op), (unsigned long long)r.entries,
                         (unsigned long long)r.bytes);
        if (!snap.gone)
                shell_reply_send(snap.chan, &rep, -1);
}

static void on_worker_exit(void *data, uint32_t events)
{
        if (!snap.busy)
                return;
        siginfo_t si = {0};
        /* the jailer may have reaped it already (a stray to it) */
        waitid((idtype_t)P_PIDFD, (id_t)snap.pidfd, &si, WEXITED | WNOHANG);
        answer_done();
        snap_end();
}

static void on_deadline(void *data, uint32_t events)
{
        uint64_t n;
        if (!snap.busy)
                return;
        if (read(snap.timer, &n, sizeof(n)) < 0 && errno == EAGAIN)
                return;
        snap.timed_out = true;
        snap_kill();
}

/* The HTTP side sends nothing after its request: readable means it closed
 * the channel (its client went away, or lockboxd is stopping). */
static void on_channel(void *data, uint32_t events)
{
        if (!snap.busy)
                return;
        snap.gone = true;
        loop_unwatch(snap.loop, snap.chan);
        snap_kill();
}

/* ---- starting ------------------------------------------------------------ */

/* The save's patterns from the blob's memfd: a NULL-ended malloc'd array
 * whose strings live in *ret_text (also malloc'd). */
static int read_patterns(int fd, char ***ret, size_t *ret_n, char **ret_text)
{
        *ret = NULL;
        *ret_n = 0;
        *ret_text = NULL;
        struct stat st;
        if (fd < 0)
                return 0;
        if (fstat(fd, &st) < 0 || st.st_size < 0 || (uint64_t)st.st_size > BLOB_READ_MAX)
                return -EINVAL;
        size_t len = (size_t)st.st_size;
        _cleanup_free_ char *text = malloc(len + 1);
        if (!text)
                return -ENOMEM;
        for (size_t done = 0; done < len;) {
                ssize_t n = RETRY_EINTR(pread(fd, text + done, len - done, (off_t)done));
                if (n <= 0)
                        return n < 0 ? -errno : -EIO;
                done += (size_t)n;
        }
        /* each record is at least 8 bytes: len / 8 + 1 slots are enough */
        _cleanup_free_ char **v = calloc(len / 8 + 2, sizeof(char *));
        _cleanup_free_ char *strings = malloc(len + 1);
        if (!v || !strings)
                return -ENOMEM;
        struct shell_blob_item it;
        size_t pos = 0, n = 0, at = 0;
        int r;
        while ((r = shell_blob_next(text, len, &pos, &it)) > 0) {
                if (it.tag != SHELL_BLOB_EXCLUDE || memchr(it.data, '\0', it.len))
                        return -EINVAL;
                memcpy(strings + at, it.data, it.len);
                strings[at + it.len] = '\0';
                v[n++] = strings + at;
                at += it.len + 1;
        }
        if (r < 0)
                return r;
        *ret = TAKE_PTR(v);
        *ret_n = n;
        *ret_text = TAKE_PTR(strings);
        return 0;
}

static int start_timer(int64_t seconds)
{
        int fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
        struct itimerspec its = {.it_value = {.tv_sec = (time_t)seconds}};
        if (fd < 0 || timerfd_settime(fd, 0, &its, NULL) < 0) {
                int e = -errno;
                safe_close(fd);
                return e;
        }
        return fd;
}

/* Fork the worker with s (its data_fd and res_fd are its ends); 0 with
 * snap.pid and snap.pidfd, or -errno. */
static int fork_worker(struct snap_spec *s)
{
        int pidfd = -1;
        struct clone_args args = {
            .flags = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_PIDFD,
            .pidfd = (uint64_t)(uintptr_t)&pidfd,
            .exit_signal = SIGCHLD,
        };
        pid_t pid = (pid_t)syscall(SYS_clone3, &args, sizeof(args));
        if (pid < 0)
                return -errno;
        if (pid == 0)
                snapshot_worker_main(s);
        snap.pid = pid;
        snap.pidfd = pidfd;
        return 0;
}

/* Everything for one call, up to its first reply: 0, or -errno with the
 * error already answered on chan. */
static int snap_start(const struct config *cfg, int chan, const struct shell_req *q, int blobfd)
{
        bool save = q->op == SHELL_SNAPSHOT_SAVE;
        _cleanup_close_ int home = open(cfg->shell_home, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (home < 0) {
                int e = errno;
                send_error(chan, 500, "home_unavailable", "home directory %s is unavailable: %s",
                           cfg->shell_home, strerror(e));
                return -e;
        }
        _cleanup_free_ char **patterns = NULL;
        _cleanup_free_ char *pattern_text = NULL;
        size_t n_patterns = 0;
        int r = save ? read_patterns(blobfd, &patterns, &n_patterns, &pattern_text) : 0;
        if (r < 0) {
                send_error(chan, 400, "invalid_request", "Invalid JSON body");
                return r;
        }
        if (!snap.filter_ready && (r = policy_build_snapshot(&snap.filter)) == 0)
                snap.filter_ready = true;
        int pipefd[2] = {-1, -1}, pair[2] = {-1, -1};
        if (r == 0 && (pipe2(pipefd, O_CLOEXEC) < 0 ||
                       socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) < 0))
                r = -errno;
        int timer = r == 0 ? start_timer(cfg->shell_snapshot_timeout) : -1;
        if (r == 0 && timer < 0)
                r = timer;
        struct snap_spec spec = {
            .op = q->op,
            .data_fd = save ? pipefd[1] : pipefd[0],
            .res_fd = pair[1],
            .home_fd = home,
            .home = cfg->shell_home,
            .uid = (uid_t)cfg->shell_uid,
            .patterns = (const char *const *)patterns,
            .n_patterns = n_patterns,
            .max_bytes = (uint64_t)cfg->shell_snapshot_max_bytes,
            .max_entries = (uint64_t)cfg->shell_snapshot_max_entries,
            .filter = &snap.filter,
        };
        if (r == 0)
                r = fork_worker(&spec);
        int theirs = save ? pipefd[0] : pipefd[1];
        if (r == 0) {
                snap.res = TAKE_FD(pair[0]);
                snap.timer = TAKE_FD(timer);
                shell_reply_send(chan, &(struct shell_reply){0}, theirs);
        } else {
                send_error(chan, 500, fail_code(q->op), "starting the snapshot worker: %s",
                           strerror(-r));
        }
        safe_close(pipefd[0]);
        safe_close(pipefd[1]);
        safe_close(pair[0]);
        safe_close(pair[1]);
        safe_close(timer);
        return r;
}

bool shell_snapshot_busy(void)
{
        return snap.busy;
}

void shell_snapshot_call(const struct config *cfg, struct loop *loop, int chan,
                         const struct shell_req *q, int blobfd)
{
        if (snap.busy) {
                send_error(chan, 409, "snapshot_busy", "another snapshot operation is in progress");
                return;
        }
        int mine = fcntl(chan, F_DUPFD_CLOEXEC, 3);
        if (mine < 0) {
                send_error(chan, 500, fail_code(q->op), "%s", strerror(errno));
                return;
        }
        snap.loop = loop;
        snap.op = q->op;
        snap.timed_out = snap.gone = false;
        snap.timeout_s = cfg->shell_snapshot_timeout;
        if (snap_start(cfg, chan, q, blobfd) < 0) {
                close(mine);
                return;
        }
        snap.busy = true;
        snap.chan = mine;
        snap.w_chan = (struct watch){.fn = on_channel};
        snap.w_pid = (struct watch){.fn = on_worker_exit};
        snap.w_timer = (struct watch){.fn = on_deadline};
        if (loop_watch(loop, snap.pidfd, &snap.w_pid) < 0 ||
            loop_watch(loop, snap.timer, &snap.w_timer) < 0 ||
            loop_watch(loop, snap.chan, &snap.w_chan) < 0) {
                /* nothing would ever end it: end it now */
                snap_kill();
                siginfo_t si;
                waitid((idtype_t)P_PIDFD, (id_t)snap.pidfd, &si, WEXITED);
                snap.gone = false;
                answer_done();
                snap_end();
                return;
        }
        log_info(NULL, "shell.snapshot_started", "op=%s pid=%d", op_name(q->op), (int)snap.pid);
}
