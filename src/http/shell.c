/* The shell-job API's routes (see shell.h): each handler decodes its
 * request, asks the jailer once (ipc/shell_client.h) and encodes the
 * answer. A window of output is read here, from the job's output.log
 * that the jailer attaches read-only, so output never passes through the
 * privileged process. Routing failures answer as Go's ServeMux does
 * (plain text 404 and 405); everything else in the reference's
 * {"error":{"code","message"}} envelope. */
#include "http/shell.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/log.h"
#include "base/util.h"
#include "config/config.h"
#include "ipc/shell_client.h"

/* How long past its own wait (timeout, grace) a call waits for the
 * jailer's answer: a job's start, or a busy jailer loop. A run may wait
 * for control jobs (10 s at most) and two trees' moves (10 s each) before
 * its job starts. */
#define SHELL_CALL_SLACK_MS 60000

enum answer { ANSWER_RESULT, ANSWER_STATUS, ANSWER_LIST, ANSWER_DELETED };

static struct http_reply reply_body(unsigned status, char *body)
{
        return (struct http_reply){.status = status, .body = body};
}

static struct http_reply reply_error(unsigned status, const char *code, const char *message)
{
        return reply_body(status, shell_encode_error(code, message));
}

static struct http_reply reply_text(unsigned status, const char *text)
{
        return (struct http_reply){
            .status = status, .body = strdup(text), .content_type = "text/plain; charset=utf-8"};
}

static struct http_reply unknown_job(void)
{
        return reply_error(404, "job_not_found", "Unknown job id");
}

bool shell_job_id_valid(const char *id)
{
        size_t n = 0;
        for (; id && id[n]; n++)
                if (!((id[n] >= '0' && id[n] <= '9') || (id[n] >= 'a' && id[n] <= 'f')))
                        return false;
        return n == SHELL_JOB_ID_LEN;
}

bool shell_auth_ok(const char *token, const char *authorization)
{
        if (!*token)
                return true;
        return authorization && strncmp(authorization, "Bearer ", 7) == 0 &&
               router_key_matches(authorization + 7, token);
}

/* ---- the jailer's answer ------------------------------------------------- */

static struct http_reply bad_answer(const struct http_call *c, const char *why)
{
        log_error(c->trace->trace_id, "shell.bad_answer", "error=%s", log_q(why));
        return reply_error(500, "internal_error", "the jailer's answer was malformed");
}

/* len bytes of fd (a regular file) at offset into buf. */
static int read_window(int fd, char *buf, size_t len, uint64_t offset)
{
        struct stat st;
        if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
                return -EBADF;
        for (size_t done = 0; done < len;) {
                ssize_t n = RETRY_EINTR(pread(fd, buf + done, len - done, (off_t)(offset + done)));
                if (n <= 0)
                        return n < 0 ? -errno : -EIO;
                done += (size_t)n;
        }
        return 0;
}

static struct http_reply answer_result(const struct http_state *st, const struct http_call *c,
                                       const struct shell_reply *rep, int fd)
{
        if (rep->win_end < rep->win_start ||
            rep->win_end - rep->win_start > SHELL_OUTPUT_LIMIT_MAX + 4)
                return bad_answer(c, "window out of bounds");
        size_t n = (size_t)(rep->win_end - rep->win_start);
        _cleanup_free_ char *buf = malloc(n + 1);
        if (!buf)
                return reply_body(500, NULL);
        int r = n ? read_window(fd, buf, n, rep->win_start) : 0;
        if (r < 0)
                return bad_answer(c, r == -EBADF ? "no output.log attached" : strerror(-r));
        return reply_body(200, shell_encode_result(rep, st->cfg->shell_state_dir, buf, n));
}

static struct http_reply answer_list(const struct http_call *c, const struct shell_reply *rep,
                                     int fd)
{
        size_t n = rep->n_jobs;
        if (n > SHELL_LIST_MAX)
                return bad_answer(c, "too many jobs listed");
        struct shell_view views[SHELL_LIST_MAX];
        int r = n ? read_window(fd, (char *)views, n * sizeof(views[0]), 0) : 0;
        if (r < 0)
                return bad_answer(c, r == -EBADF ? "no job list attached" : strerror(-r));
        for (size_t i = 0; i < n; i++)
                views[i].job_id[SHELL_JOB_ID_LEN] = '\0';
        return reply_body(200, shell_encode_list(views, n));
}

static struct http_reply answer(const struct http_state *st, const struct http_call *c,
                                const struct shell_req *req, const struct shell_reply *rep, int fd,
                                enum answer kind)
{
        if (rep->http_status != 200) {
                unsigned status =
                    rep->http_status >= 400 && rep->http_status <= 599 ? rep->http_status : 500;
                return reply_error(status, rep->code[0] ? rep->code : "internal_error",
                                   rep->message);
        }
        switch (kind) {
        case ANSWER_RESULT:
                return answer_result(st, c, rep, fd);
        case ANSWER_STATUS:
                return reply_body(200, shell_encode_status(&rep->view));
        case ANSWER_LIST:
                return answer_list(c, rep, fd);
        default:
                return reply_body(200, shell_encode_deleted(req->job_id));
        }
}

static const char *const op_names[] = {
    [SHELL_RUN] = "run",
    [SHELL_WAIT] = "wait",
    [SHELL_INPUT] = "input",
    [SHELL_TAIL] = "tail",
    [SHELL_STATUS] = "status",
    [SHELL_LIST] = "list",
    [SHELL_TERMINATE] = "terminate",
    [SHELL_DELETE] = "delete",
};

/* One call to the jailer, its answer encoded as kind. */
static struct http_reply ask(const struct http_state *st, const struct http_call *c,
                             struct shell_req *req, const char *blob, size_t blob_len,
                             enum answer kind)
{
        req->hdr = (struct proto_header){PROTO_MAGIC, PROTO_SHELL_REQ};
        struct shell_reply rep;
        int fd = -1;
        int deadline = (int)(req->timeout_ms + req->grace_ms) + SHELL_CALL_SLACK_MS;
        int r = ipc_shell_call(st->ctrl_fd, c->trace->trace_id, req, blob, blob_len, deadline,
                               st->shell_cancel_fd, &rep, &fd);
        if (r < 0) {
                log_error(c->trace->trace_id, "shell.ipc_failed", "op=%s error=%s",
                          op_names[req->op], log_q(strerror(-r)));
                char msg[160];
                snprintf(msg, sizeof(msg), "%s%s",
                         r == -ECANCELED ? "server is shutting down"
                                         : "shell jobs are unavailable: ",
                         r == -ECANCELED ? "" : strerror(-r));
                return reply_error(503, "unavailable", msg);
        }
        struct http_reply out = answer(st, c, req, &rep, fd, kind);
        safe_close(fd);
        return out;
}

/* ---- routes ----------------------------------------------------------------- */

static struct http_reply decode_failed(const struct shell_error *e)
{
        return reply_error(e->status, e->code, e->message);
}

/* A request for the job of the path's {id}. */
static bool job_request(const struct http_call *c, uint32_t op, struct shell_req *req)
{
        *req = (struct shell_req){.op = op};
        if (!c->path_id || !shell_job_id_valid(c->path_id))
                return false;
        memcpy(req->job_id, c->path_id, SHELL_JOB_ID_LEN + 1);
        return true;
}

static struct http_reply jobs_health(struct http_state *st, const struct http_call *c)
{
        return reply_body(200, shell_encode_health());
}

static struct http_reply jobs_run(struct http_state *st, const struct http_call *c)
{
        struct shell_req req = {.op = SHELL_RUN};
        struct shell_error e;
        _cleanup_free_ char *blob = NULL;
        size_t blob_len = 0;
        if (shell_decode_run(c->body, c->body_len, &req, &blob, &blob_len, &e) < 0)
                return decode_failed(&e);
        return ask(st, c, &req, blob, blob_len, ANSWER_RESULT);
}

/* The body is decoded before the job is looked at, as in the reference. */
static struct http_reply jobs_wait(struct http_state *st, const struct http_call *c)
{
        struct shell_req req;
        struct shell_error e;
        bool known = job_request(c, SHELL_WAIT, &req);
        if (shell_decode_wait(c->body, c->body_len, &req, &e) < 0)
                return decode_failed(&e);
        return known ? ask(st, c, &req, NULL, 0, ANSWER_RESULT) : unknown_job();
}

static struct http_reply jobs_input(struct http_state *st, const struct http_call *c)
{
        struct shell_req req;
        struct shell_error e;
        _cleanup_free_ char *blob = NULL;
        size_t blob_len = 0;
        bool known = job_request(c, SHELL_INPUT, &req);
        if (shell_decode_input(c->body, c->body_len, &req, &blob, &blob_len, &e) < 0)
                return decode_failed(&e);
        return known ? ask(st, c, &req, blob, blob_len, ANSWER_RESULT) : unknown_job();
}

static struct http_reply jobs_tail(struct http_state *st, const struct http_call *c)
{
        struct shell_req req;
        if (!job_request(c, SHELL_TAIL, &req))
                return unknown_job();
        shell_query_tail(http_call_query(c, "output_limit"), &req);
        return ask(st, c, &req, NULL, 0, ANSWER_RESULT);
}

static struct http_reply jobs_status(struct http_state *st, const struct http_call *c)
{
        struct shell_req req;
        if (!job_request(c, SHELL_STATUS, &req))
                return unknown_job();
        return ask(st, c, &req, NULL, 0, ANSWER_STATUS);
}

static struct http_reply jobs_list(struct http_state *st, const struct http_call *c)
{
        struct shell_req req = {.op = SHELL_LIST};
        shell_query_list(http_call_query(c, "status"), http_call_query(c, "limit"), &req);
        return ask(st, c, &req, NULL, 0, ANSWER_LIST);
}

static struct http_reply jobs_terminate(struct http_state *st, const struct http_call *c)
{
        struct shell_req req;
        if (!job_request(c, SHELL_TERMINATE, &req))
                return unknown_job();
        shell_decode_terminate(c->body, c->body_len, &req);
        return ask(st, c, &req, NULL, 0, ANSWER_STATUS);
}

static struct http_reply jobs_delete(struct http_state *st, const struct http_call *c)
{
        struct shell_req req;
        if (!job_request(c, SHELL_DELETE, &req))
                return unknown_job();
        shell_query_delete(http_call_query(c, "force"), http_call_query(c, "grace_seconds"), &req);
        return ask(st, c, &req, NULL, 0, ANSWER_DELETED);
}

/* Credentials for a session's egress proxy: refused with the reason (see
 * shell_decode_prepare); jobs of the session run as any others. */
static struct http_reply prepare(struct http_state *st, const struct http_call *c)
{
        struct shell_error e;
        shell_decode_prepare(c->body, c->body_len, &e);
        log_info(c->trace->trace_id, "shell.prepare_refused", "status=%u code=%s", e.status,
                 e.code);
        return decode_failed(&e);
}

/* ---- the table ---------------------------------------------------------------- */

static bool auth_ok(const struct config *cfg, const char *value)
{
        return shell_auth_ok(cfg->shell_token, value);
}

/* Go's ServeMux words 404 and 405 in plain text; the rest is JSON. */
static struct http_reply refuse(enum http_refusal why, const char *message)
{
        switch (why) {
        case REFUSE_NOT_FOUND:
                return reply_text(404, "404 page not found\n");
        case REFUSE_METHOD:
                return reply_text(405, "Method Not Allowed\n");
        case REFUSE_AUTH:
                return reply_error(401, "unauthorized", "Missing or invalid bearer token");
        case REFUSE_TOO_LARGE:
                return reply_error(413, "request_too_large", message);
        case REFUSE_HEADERS:
                return reply_error(431, "request_headers_too_large", message);
        case REFUSE_STOPPING:
                return reply_error(503, "unavailable", message);
        default:
                return reply_error(500, "internal_error", message);
        }
}

/* Literal paths before the patterns that would take them too. */
static const struct route shell_routes[] = {
    {"GET", "/healthz", false, BODY_NONE, jobs_health},
    {"POST", "/v1/jobs/run", true, BODY_CONFIGURED, jobs_run},
    {"GET", "/v1/jobs", true, BODY_NONE, jobs_list},
    {"GET", "/v1/jobs/{id}", true, BODY_NONE, jobs_status},
    {"DELETE", "/v1/jobs/{id}", true, BODY_NONE, jobs_delete},
    {"POST", "/v1/jobs/{id}/wait", true, BODY_SMALL, jobs_wait},
    {"POST", "/v1/jobs/{id}/input", true, BODY_TEXT, jobs_input},
    {"POST", "/v1/jobs/{id}/terminate", true, BODY_SMALL, jobs_terminate},
    {"GET", "/v1/jobs/{id}/log/tail", true, BODY_NONE, jobs_tail},
    {"PUT", "/v1/prepare", true, BODY_TEXT, prepare},
    {"POST", "/v1/snapshot/save", true, BODY_OPTIONS, shell_snapshot_save},
    {"POST", "/v1/snapshot/restore", true, BODY_STREAM, shell_snapshot_restore},
};

const struct route_table shell_route_table = {
    .routes = shell_routes,
    .n_routes = ELEMENTSOF(shell_routes),
    .head_as_get = true,
    .metrics = false,
    .auth_header = "Authorization",
    .auth_ok = auth_ok,
    .refuse = refuse,
    .upload = &shell_snapshot_restore_ops,
};
