/* One run as seen from the HTTP process (see client.h). Everything is
 * driven by one poll loop in the request's thread: the RUN goes out, the
 * STARTED brings the pipes, the code goes in, the streams come out; no
 * buffer grows past the output cap, and the loop ends only when the RESULT
 * has arrived and both streams are at EOF (the program closed them or is
 * gone), so the output is complete. */
#include "ipc/client.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/util.h"
#include "ipc/channel.h"

struct pump {
        const struct ipc_run_params *p;
        struct run_outcome *o;
        int chan, code_w, out_r, err_r;
        uint8_t header[8];
        size_t written; /* bytes of header+preload+code sent */
        bool started, have_result, kill_sent;
};

static void feed_code(struct pump *u);

static int start_run(int ctrl_fd, const struct ipc_run_params *p, struct pump *u)
{
        int ch[2];
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ch) < 0)
                return -errno;
        struct proto_run m = {
            .hdr = {PROTO_MAGIC, PROTO_RUN}, .language = p->language, .network = p->network};
        strncpy(m.trace_id, p->trace_id ? p->trace_id : "", PROTO_TRACE_LEN);
        int r = channel_send(ctrl_fd, &m, sizeof(m), &ch[1], 1);
        close(ch[1]);
        u->chan = ch[0];
        return r;
}

/* STARTED brings our ends of the run's pipes. */
static int take_pipes(struct pump *u, const int *fds, size_t nf)
{
        if (nf != 3)
                return -EPROTO;
        u->code_w = fds[0];
        u->out_r = fds[1];
        u->err_r = fds[2];
        fcntl(u->code_w, F_SETFL, O_NONBLOCK);
        feed_code(u);
        return 0;
}

/* Write as much of header, preload, code as the pipe takes. */
static void feed_code(struct pump *u)
{
        const struct ipc_run_params *p = u->p;
        const struct {
                const void *data;
                size_t len;
        } parts[] = {{u->header, 8}, {p->preload, p->preload_len}, {p->code, p->code_len}};
        size_t base = 0;
        for (size_t i = 0; i < ELEMENTSOF(parts); i++) {
                while (u->written < base + parts[i].len) {
                        size_t off = u->written - base;
                        ssize_t n =
                            write(u->code_w, (const char *)parts[i].data + off, parts[i].len - off);
                        if (n < 0 && errno == EINTR)
                                continue;
                        if (n < 0 && errno == EAGAIN)
                                return;
                        if (n <= 0) { /* EPIPE: the program is gone or never read */
                                u->code_w = safe_close(u->code_w);
                                return;
                        }
                        u->written += (size_t)n;
                }
                base += parts[i].len;
        }
        u->code_w = safe_close(u->code_w); /* all sent: the reader sees EOF */
}

static void request_kill(struct pump *u)
{
        if (u->kill_sent || u->have_result)
                return;
        struct proto_header k = {PROTO_MAGIC, PROTO_KILL};
        channel_send(u->chan, &k, sizeof(k), NULL, 0);
        u->kill_sent = true;
}

/* Keep bytes up to the shared cap; past it, drain and ask for a kill. */
static void drain(struct pump *u, int *fd, struct strbuf *sb)
{
        char buf[65536];
        ssize_t n = read(*fd, buf, sizeof(buf));
        if (n < 0 && (errno == EINTR || errno == EAGAIN))
                return;
        if (n <= 0) {
                *fd = safe_close(*fd);
                return;
        }
        size_t used = u->o->out.len + u->o->err.len;
        size_t room = used < u->p->output_cap ? u->p->output_cap - used : 0;
        size_t keep = (size_t)n < room ? (size_t)n : room;
        if (keep && strbuf_append(sb, buf, keep) < 0)
                keep = 0;
        if (keep < (size_t)n) {
                u->o->truncated = true;
                request_kill(u);
        }
}

/* One message on the channel: STARTED (once) or RESULT (last). */
static int read_channel(struct pump *u)
{
        union {
                struct proto_header hdr;
                struct proto_started started;
                struct proto_result res;
        } msg;
        int fds[3];
        size_t nf = 0;
        ssize_t n = RETRY_EINTR(recv(u->chan, &msg, sizeof(msg), MSG_PEEK | MSG_DONTWAIT));
        if (n < 0)
                return errno == EAGAIN ? 0 : -errno;
        if (n == 0)
                return -ECONNRESET;
        if ((size_t)n < sizeof(msg.hdr) || msg.hdr.magic != PROTO_MAGIC)
                return -EPROTO;
        if (msg.hdr.type == PROTO_STARTED && !u->started) {
                int r = channel_recv(u->chan, &msg.started, sizeof(msg.started), fds, 3, &nf);
                if (r <= 0)
                        return r == 0 ? -ECONNRESET : r;
                u->started = true;
                u->o->warm = msg.started.warm;
                return take_pipes(u, fds, nf);
        }
        if (msg.hdr.type != PROTO_RESULT)
                return -EPROTO;
        int r = channel_recv(u->chan, &msg.res, sizeof(msg.res), fds, 0, &nf);
        if (r <= 0)
                return r == 0 ? -ECONNRESET : r;
        msg.res.syscall_name[sizeof(msg.res.syscall_name) - 1] = '\0';
        msg.res.message[sizeof(msg.res.message) - 1] = '\0';
        u->o->res = msg.res;
        u->have_result = true;
        return 0;
}

static int pump_loop(struct pump *u, int64_t deadline)
{
        while (!u->have_result || u->out_r >= 0 || u->err_r >= 0) {
                struct pollfd pfd[4] = {
                    {.fd = u->have_result ? -1 : u->chan, .events = POLLIN},
                    {.fd = u->out_r, .events = POLLIN},
                    {.fd = u->err_r, .events = POLLIN},
                    {.fd = u->code_w, .events = POLLOUT},
                };
                int64_t left = deadline - monotonic_ms();
                if (left <= 0)
                        return -ETIMEDOUT;
                if (RETRY_EINTR(poll(pfd, 4, (int)left)) < 0)
                        return -errno;
                if (pfd[3].revents)
                        feed_code(u);
                if (pfd[1].revents)
                        drain(u, &u->out_r, &u->o->out);
                if (pfd[2].revents)
                        drain(u, &u->err_r, &u->o->err);
                if (pfd[0].revents) {
                        int r = read_channel(u);
                        if (r < 0)
                                return r;
                }
        }
        return 0;
}

int ipc_run(int ctrl_fd, const struct ipc_run_params *p, struct run_outcome *ret)
{
        struct run_outcome o = {0};
        struct pump u = {.p = p, .o = &o, .chan = -1, .code_w = -1, .out_r = -1, .err_r = -1};
        for (int i = 0; i < 8; i++)
                u.header[i] = (uint8_t)((uint64_t)p->preload_len >> (8 * i));
        strbuf_init(&o.out, 0);
        strbuf_init(&o.err, 0);
        int r = start_run(ctrl_fd, p, &u);
        if (r == 0)
                r = pump_loop(&u, monotonic_ms() + p->deadline_ms);
        safe_close(u.chan);
        safe_close(u.code_w);
        safe_close(u.out_r);
        safe_close(u.err_r);
        if (r < 0) {
                run_outcome_free(&o);
                return r;
        }
        /* Output past the cap is an output-limit verdict even when the
         * program ended before the kill for it could be asked (its last
         * bytes were still in the pipe when the RESULT came). */
        if (o.truncated && o.res.status == RUN_STATUS_DONE && o.res.reason == REASON_NONE) {
                o.res.reason = REASON_OUTPUT;
                o.res.exit_code = -1;
        }
        *ret = o;
        return 0;
}

int ipc_deps_update(int ctrl_fd, const char *trace_id, int deadline_ms, bool *ret_ok, char *message,
                    size_t size)
{
        int ch[2];
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ch) < 0)
                return -errno;
        _cleanup_close_ int chan = ch[0];
        struct proto_deps m = {.hdr = {PROTO_MAGIC, PROTO_DEPS}};
        strncpy(m.trace_id, trace_id ? trace_id : "", PROTO_TRACE_LEN);
        int r = channel_send(ctrl_fd, &m, sizeof(m), &ch[1], 1);
        close(ch[1]);
        if (r < 0)
                return r;
        struct pollfd pfd = {.fd = chan, .events = POLLIN};
        if (RETRY_EINTR(poll(&pfd, 1, deadline_ms)) <= 0)
                return -ETIMEDOUT;
        struct proto_deps_done done;
        int fd;
        size_t nf = 0;
        r = channel_recv(chan, &done, sizeof(done), &fd, 0, &nf);
        if (r <= 0)
                return r == 0 ? -ECONNRESET : r;
        if (done.hdr.magic != PROTO_MAGIC || done.hdr.type != PROTO_DEPS_DONE)
                return -EPROTO;
        done.message[sizeof(done.message) - 1] = '\0';
        snprintf(message, size, "%s", done.message);
        *ret_ok = done.ok;
        return 0;
}
