/* The snapshot routes of the shell API (docs/API.md "Snapshots"): each is
 * a call to the jailer that answers twice (ipc/shell_proto.h). A save's
 * archive comes on a pipe from the jailer's worker and goes out chunked,
 * hashed (SHA-256, nettle) and counted here, with the trailers
 * X-Snapshot-Status, -Sha256 and -Bytes once the worker said it finished
 * and its count matches; anything else aborts the connection. A
 * restore's body goes into the worker's pipe as it arrives (never held
 * whole), and the worker's verdict is the answer. */
#include <errno.h>
#include <nettle/sha2.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/util.h"
#include "config/config.h"
#include "http/shell.h"
#include "ipc/shell_client.h"

#define SNAP_SLACK_MS 30000 /* past shell.snapshot_timeout: the jailer's answer */

static struct http_reply snap_error(unsigned status, const char *code, const char *message)
{
        return (struct http_reply){.status = status, .body = shell_encode_error(code, message)};
}

static struct http_reply jailer_error(const struct shell_reply *rep)
{
        unsigned status =
            rep->http_status >= 400 && rep->http_status <= 599 ? rep->http_status : 500;
        return snap_error(status, rep->code[0] ? rep->code : "internal_error", rep->message);
}

static struct http_reply unreachable(const struct http_call *c, const char *op, int r)
{
        log_error(c->trace->trace_id, "shell.ipc_failed", "op=%s error=%s", op,
                  log_q(strerror(-r)));
        char msg[160];
        snprintf(msg, sizeof(msg), "%s%s",
                 r == -ECANCELED ? "server is shutting down" : "shell jobs are unavailable: ",
                 r == -ECANCELED ? "" : strerror(-r));
        return snap_error(503, "unavailable", msg);
}

static int snap_deadline_ms(const struct http_state *st)
{
        return (int)st->cfg->shell_snapshot_timeout * 1000 + SNAP_SLACK_MS;
}

/* The first reply of a snapshot call: 0 with the channel and the pipe's
 * end, or -1 with *ret the answer. */
static int snap_open(struct http_state *st, const struct http_call *c, uint32_t op,
                     const char *blob, size_t blob_len, int *ret_chan, int *ret_fd,
                     struct http_reply *ret)
{
        struct shell_req req = {.hdr = {PROTO_MAGIC, PROTO_SHELL_REQ}, .op = op};
        struct shell_reply rep;
        int fd = -1, chan = -1;
        const char *name = op == SHELL_SNAPSHOT_SAVE ? "snapshot_save" : "snapshot_restore";
        int r = ipc_shell_open(st->ctrl_fd, c->trace->trace_id, &req, blob, blob_len, SNAP_SLACK_MS,
                               st->shell_cancel_fd, &rep, &fd, &chan);
        if (r < 0) {
                *ret = unreachable(c, name, r);
                return -1;
        }
        if (rep.http_status != 200 || fd < 0) {
                *ret = rep.http_status != 200
                           ? jailer_error(&rep)
                           : snap_error(500, "internal_error", "the jailer's answer was malformed");
                safe_close(fd);
                safe_close(chan);
                return -1;
        }
        *ret_chan = chan;
        *ret_fd = fd;
        return 0;
}

/* ---- save ------------------------------------------------------------------ */

struct save_stream {
        struct http_stream base;
        int chan, pipe, cancel_fd;
        int64_t deadline; /* monotonic ms */
        struct sha256_ctx sha;
        uint64_t bytes;
        char *first; /* the first piece, read before the answer was chosen */
        size_t first_len;
        char hex[2 * SHA256_DIGEST_SIZE + 1];
        char count[24];
        char trace_id[PROTO_TRACE_LEN + 1];
};

/* Up to max bytes of the pipe: n > 0, 0 at its end, -ETIMEDOUT, -ECANCELED
 * or -errno. */
static ssize_t pipe_read(struct save_stream *ss, char *buf, size_t max)
{
        for (;;) {
                int64_t left = ss->deadline - monotonic_ms();
                if (left <= 0)
                        return -ETIMEDOUT;
                struct pollfd p[2] = {{.fd = ss->pipe, .events = POLLIN},
                                      {.fd = ss->cancel_fd, .events = POLLIN}};
                int n = poll(p, ss->cancel_fd >= 0 ? 2 : 1, (int)left);
                if (n < 0 && errno != EINTR)
                        return -errno;
                if (n > 0 && p[0].revents) {
                        ssize_t k = RETRY_EINTR(read(ss->pipe, buf, max));
                        return k < 0 ? -errno : k;
                }
                if (n > 0 && p[1].revents)
                        return -ECANCELED;
        }
}

/* The pipe ended: did the worker finish, and send what came? 0 or -1. */
static int save_verdict(struct save_stream *ss, struct shell_reply *ret)
{
        int64_t left = ss->deadline - monotonic_ms();
        int r = ipc_shell_next(ss->chan, left > 0 ? (int)left : 1, ss->cancel_fd, ret);
        if (r < 0) {
                snprintf(ret->message, sizeof(ret->message), "the jailer did not answer: %s",
                         strerror(-r));
                ret->http_status = 500;
                snprintf(ret->code, sizeof(ret->code), "snapshot_failed");
                return -1;
        }
        if (ret->http_status == 200 && ret->snap_bytes != ss->bytes) {
                snprintf(ret->message, sizeof(ret->message),
                         "the worker wrote %llu bytes, %llu arrived",
                         (unsigned long long)ret->snap_bytes, (unsigned long long)ss->bytes);
                ret->http_status = 500;
                return -1;
        }
        return ret->http_status == 200 ? 0 : -1;
}

static ssize_t save_read(struct http_stream *s, char *buf, size_t max)
{
        struct save_stream *ss = (struct save_stream *)s;
        if (ss->first) {
                size_t n = ss->first_len < max ? ss->first_len : max;
                memcpy(buf, ss->first, n);
                memmove(ss->first, ss->first + n, ss->first_len - n);
                ss->first_len -= n;
                if (ss->first_len == 0) {
                        free(ss->first);
                        ss->first = NULL;
                }
                return (ssize_t)n;
        }
        ssize_t n = pipe_read(ss, buf, max);
        if (n > 0) {
                sha256_update(&ss->sha, (size_t)n, (const uint8_t *)buf);
                ss->bytes += (uint64_t)n;
                return n;
        }
        struct shell_reply rep = {0};
        if (n == 0 && save_verdict(ss, &rep) == 0)
                return 0;
        log_warn(ss->trace_id, "shell.snapshot_stream_aborted", "bytes=%llu error=%s",
                 (unsigned long long)ss->bytes, log_q(n < 0 ? strerror((int)-n) : rep.message));
        return -1;
}

static void save_trailers(struct http_stream *s,
                          void (*add)(void *ctx, const char *name, const char *value), void *ctx)
{
        struct save_stream *ss = (struct save_stream *)s;
        uint8_t digest[SHA256_DIGEST_SIZE];
        sha256_digest(&ss->sha, sizeof(digest), digest);
        for (size_t i = 0; i < sizeof(digest); i++)
                snprintf(ss->hex + 2 * i, 3, "%02x", digest[i]);
        snprintf(ss->count, sizeof(ss->count), "%llu", (unsigned long long)ss->bytes);
        add(ctx, "X-Snapshot-Status", "ok");
        add(ctx, "X-Snapshot-Sha256", ss->hex);
        add(ctx, "X-Snapshot-Bytes", ss->count);
}

static void save_free(struct http_stream *s)
{
        struct save_stream *ss = (struct save_stream *)s;
        safe_close(ss->pipe);
        safe_close(ss->chan); /* before the end: the jailer kills the worker */
        free(ss->first);
        free(ss);
}

/* Wait for the first piece: a worker that fails before it wrote anything
 * gets a 500 snapshot_failed instead of a stream. */
static struct http_reply save_first(struct save_stream *ss)
{
        char *buf = malloc(65536);
        ssize_t n = buf ? pipe_read(ss, buf, 65536) : -ENOMEM;
        struct shell_reply rep = {0};
        if (n > 0) {
                sha256_update(&ss->sha, (size_t)n, (const uint8_t *)buf);
                ss->bytes = (uint64_t)n;
                ss->first = buf;
                ss->first_len = (size_t)n;
                return (struct http_reply){
                    .status = 200, .content_type = "application/octet-stream", .stream = &ss->base};
        }
        free(buf);
        struct http_reply out;
        if (n == 0 && save_verdict(ss, &rep) < 0)
                out = jailer_error(&rep);
        else
                out = snap_error(500, "snapshot_failed",
                                 n == 0            ? "the archive was empty"
                                 : n == -ETIMEDOUT ? "snapshot save timed out"
                                                   : strerror((int)-n));
        save_free(&ss->base);
        return out;
}

struct http_reply shell_snapshot_save(struct http_state *st, const struct http_call *c)
{
        struct shell_error e;
        _cleanup_free_ char *blob = NULL;
        size_t blob_len = 0;
        if (shell_decode_snapshot_save(c->body, c->body_len, &blob, &blob_len, &e) < 0)
                return snap_error(e.status, e.code, e.message);
        struct http_reply out;
        int chan, fd;
        if (snap_open(st, c, SHELL_SNAPSHOT_SAVE, blob, blob_len, &chan, &fd, &out) < 0)
                return out;
        struct save_stream *ss = calloc(1, sizeof(*ss));
        if (!ss) {
                close(fd);
                close(chan);
                return snap_error(500, "internal_error", "out of memory");
        }
        *ss = (struct save_stream){
            .base = {.read = save_read, .trailers = save_trailers, .free = save_free},
            .chan = chan,
            .pipe = fd,
            .cancel_fd = st->shell_cancel_fd,
            .deadline = monotonic_ms() + snap_deadline_ms(st),
        };
        snprintf(ss->trace_id, sizeof(ss->trace_id), "%s", c->trace->trace_id);
        sha256_init(&ss->sha);
        return save_first(ss);
}

/* ---- restore ---------------------------------------------------------------- */

struct restore_upload {
        int chan, pipe, cancel_fd;
        int deadline_ms;
        char trace_id[PROTO_TRACE_LEN + 1];
};

static int restore_open(struct http_state *st, const struct http_call *c, void **ret_ctx,
                        struct http_reply *ret)
{
        int chan, fd;
        if (snap_open(st, c, SHELL_SNAPSHOT_RESTORE, NULL, 0, &chan, &fd, ret) < 0)
                return -1;
        struct restore_upload *u = calloc(1, sizeof(*u));
        if (!u) {
                close(fd);
                close(chan);
                *ret = snap_error(500, "internal_error", "out of memory");
                return -1;
        }
        *u = (struct restore_upload){.chan = chan,
                                     .pipe = fd,
                                     .cancel_fd = st->shell_cancel_fd,
                                     .deadline_ms = snap_deadline_ms(st)};
        snprintf(u->trace_id, sizeof(u->trace_id), "%s", c->trace->trace_id);
        *ret_ctx = u;
        return 0;
}

/* Into the worker's pipe (this connection's thread waits while it is
 * full); once the worker stopped reading, the rest is dropped. */
static void restore_write(void *ctx, const char *data, size_t n)
{
        struct restore_upload *u = ctx;
        for (size_t done = 0; u->pipe >= 0 && done < n;) {
                ssize_t k = RETRY_EINTR(write(u->pipe, data + done, n - done));
                if (k <= 0)
                        u->pipe = safe_close(u->pipe);
                else
                        done += (size_t)k;
        }
}

static void restore_abort(void *ctx)
{
        struct restore_upload *u = ctx;
        safe_close(u->pipe);
        safe_close(u->chan);
        free(u);
}

static struct http_reply restore_finish(struct http_state *st, const struct http_call *c, void *ctx)
{
        struct restore_upload *u = ctx;
        u->pipe = safe_close(u->pipe); /* the end of the archive */
        struct shell_reply rep;
        int r = ipc_shell_next(u->chan, u->deadline_ms, u->cancel_fd, &rep);
        restore_abort(u);
        if (r < 0)
                return unreachable(c, "snapshot_restore", r);
        if (rep.http_status != 200)
                return jailer_error(&rep);
        char *body = NULL;
        if (asprintf(&body, "{\"entries\":%llu,\"bytes_written\":%llu}\n",
                     (unsigned long long)rep.snap_entries, (unsigned long long)rep.snap_bytes) < 0)
                body = NULL;
        return (struct http_reply){.status = 200, .body = body};
}

const struct http_upload_ops shell_snapshot_restore_ops = {
    .open = restore_open,
    .write = restore_write,
    .finish = restore_finish,
    .abort = restore_abort,
};

/* Never called: the restore's body goes to shell_snapshot_restore_ops. */
struct http_reply shell_snapshot_restore(struct http_state *st, const struct http_call *c)
{
        return snap_error(500, "internal_error", "restore without its body handler");
}
