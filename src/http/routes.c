/* Route handlers (see routes.h): health, run, and the three dependency
 * routes. The run route applies max_requests (503), then queues for one of
 * max_workers slots, then hands the run to the jailer. */
#include "http/routes.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/log.h"
#include "base/util.h"
#include "config/config.h"
#include "http/request.h"
#include "http/result.h"
#include "ipc/client.h"
#include "ipc/proto.h"

static struct http_reply reply(unsigned status, char *body)
{
        return (struct http_reply){.status = status, .body = body};
}

static struct http_reply reply_error(unsigned status, int code, const char *message)
{
        return reply(status, result_error_json(code, message));
}

struct http_reply route_health(struct http_state *st, const struct http_call *c)
{
        return reply(200, strdup("\"ok\""));
}

static int language_id(const char *name)
{
        if (strcmp(name, "python3") == 0)
                return LANG_PYTHON3;
        if (strcmp(name, "nodejs") == 0)
                return LANG_NODEJS;
        return -1;
}

static int64_t mono_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Wait for a worker slot; gives up (false) when the server is stopping. */
static bool take_worker(struct http_state *st)
{
        for (;;) {
                if (atomic_load(&st->stopping))
                        return false;
                struct timespec ts;
                clock_gettime(CLOCK_REALTIME, &ts);
                ts.tv_nsec += 200 * 1000000;
                if (ts.tv_nsec >= 1000000000) {
                        ts.tv_sec++;
                        ts.tv_nsec -= 1000000000;
                }
                if (sem_timedwait(&st->workers, &ts) == 0)
                        return true;
        }
}

static struct http_reply execute(struct http_state *st, const struct http_call *c,
                                 const struct run_request *req, int lang)
{
        const struct config *cfg = st->cfg;
        struct ipc_run_params p = {
                .language = (uint32_t)lang,
                .network = req->enable_network && cfg->enable_network,
                .trace_id = c->trace->trace_id,
                .code = req->code,
                .code_len = req->code_len,
                .preload = cfg->enable_preload ? req->preload : "",
                .preload_len = cfg->enable_preload ? req->preload_len : 0,
                .output_cap = (size_t)cfg->output_bytes,
                .deadline_ms = cfg->worker_timeout * 1000 + 30000,
        };
        int64_t queued = mono_ms();
        if (!take_worker(st))
                return reply_error(503, -503, "server is shutting down");
        int64_t started = mono_ms();
        struct run_outcome o;
        int r = ipc_run(st->ctrl_fd, &p, &o);
        sem_post(&st->workers);
        if (r < 0) {
                log_error(c->trace->trace_id, "run.ipc_failed", "error=%s",
                          log_q(strerror(-r)));
                char msg[128];
                snprintf(msg, sizeof(msg), "sandbox unavailable: %s", strerror(-r));
                return reply_error(200, -500, msg);
        }
        log_info(c->trace->trace_id, "run", "lang=%s status=%s exit_code=%d queue_ms=%lld "
                 "total_ms=%lld stdout_bytes=%zu stderr_bytes=%zu",
                 req->language, o.res.status == RUN_STATUS_DONE ? result_status_name(&o.res)
                                                                 : "refused",
                 o.res.exit_code, (long long)(started - queued),
                 (long long)(mono_ms() - queued), o.out.len, o.err.len);
        char *body = result_run_json(&o);
        run_outcome_free(&o);
        unsigned status = 200;
        if (o.res.status == RUN_STATUS_BUSY)
                status = 503;
        return reply(status, body);
}

struct http_reply route_run(struct http_state *st, const struct http_call *c)
{
        struct run_request req;
        char err[256];
        int r = request_decode_run(c->content_type, c->body, c->body_len, &req, err, sizeof(err));
        if (r < 0)
                return reply_error(200, r == -ENOMEM ? -500 : -400, err);
        int lang = language_id(req.language);
        if (lang < 0) {
                run_request_clear(&req);
                return reply_error(400, -400, "unsupported language");
        }
        if (atomic_fetch_add(&st->in_flight, 1) >= st->cfg->max_requests) {
                atomic_fetch_sub(&st->in_flight, 1);
                run_request_clear(&req);
                return reply_error(503, -503, "Too many requests");
        }
        struct http_reply rep = execute(st, c, &req, lang);
        atomic_fetch_sub(&st->in_flight, 1);
        run_request_clear(&req);
        return rep;
}

/* The dependency routes take `language` from the query (GET) or body. */
static bool python_language(const struct http_call *c, struct http_reply *ret)
{
        _cleanup_free_ char *lang = NULL;
        char err[256];
        int r = request_decode_language(c->content_type, c->body, c->body_len,
                                        c->query_language, &lang, err, sizeof(err));
        if (r < 0) {
                *ret = reply_error(200, r == -ENOMEM ? -500 : -400, err);
                return false;
        }
        if (strcmp(lang, "python3") != 0) {
                *ret = reply_error(400, -400, "unsupported language");
                return false;
        }
        return true;
}

/* status.json, written by the jailer: the layer's packages and how the
 * last install went. */
static json_t *read_status(const struct http_state *st)
{
        char path[4096];
        snprintf(path, sizeof(path), "%s/status.json", st->cfg->layer_dir);
        return json_load_file(path, 0, NULL);
}

static struct http_reply list_deps(struct http_state *st)
{
        json_t *status = read_status(st);
        if (!status)
                return reply_error(200, -500, "dependency status unavailable");
        json_t *root = json_pack(
                "{s:i,s:s,s:{s:O,s:{s:O,s:O,s:O},s:O}}", "code", 0, "message", "success", "data",
                "dependencies", json_object_get(status, "dependencies"), "last_install", "status",
                json_object_get(status, "status"), "time", json_object_get(status, "time"),
                "message", json_object_get(status, "message"), "installing",
                json_object_get(status, "installing"));
        char *body = root ? json_dumps(root, JSON_COMPACT) : NULL;
        json_decref(root);
        json_decref(status);
        return reply(200, body);
}

struct http_reply route_deps_list(struct http_state *st, const struct http_call *c)
{
        struct http_reply r;
        if (!python_language(c, &r))
                return r;
        return list_deps(st);
}

/* Install now (pip in the jailer's care) and wait for the outcome. */
static bool install(struct http_state *st, const struct http_call *c, struct http_reply *ret)
{
        char message[1024] = "";
        bool ok = false;
        int deadline = (int)st->cfg->install_timeout * 1000 + 30000;
        int r = ipc_deps_update(st->ctrl_fd, c->trace->trace_id, deadline, &ok, message,
                                sizeof(message));
        if (r < 0 || !ok) {
                char msg[1200];
                snprintf(msg, sizeof(msg), "dependency install failed: %s",
                         r < 0 ? strerror(-r) : message);
                *ret = reply_error(200, -500, msg);
                return false;
        }
        return true;
}

struct http_reply route_deps_update(struct http_state *st, const struct http_call *c)
{
        struct http_reply r;
        if (!python_language(c, &r) || !install(st, c, &r))
                return r;
        return reply(200, strdup("{\"code\":0,\"message\":\"success\",\"data\":{}}"));
}

struct http_reply route_deps_refresh(struct http_state *st, const struct http_call *c)
{
        struct http_reply r;
        if (!python_language(c, &r) || !install(st, c, &r))
                return r;
        return list_deps(st);
}

/* 200 once the service can run code: for now, once the first dependency
 * install has finished (whatever its outcome; the routes above tell it). */
struct http_reply route_ready(struct http_state *st, const struct http_call *c)
{
        json_t *status = read_status(st);
        bool ready = status && json_is_true(json_object_get(status, "ready"));
        json_t *root = ready ? json_pack("{s:i,s:s,s:{s:b,s:O}}", "code", 0, "message",
                                         "success", "data", "ready", 1, "dependencies",
                                         json_object_get(status, "status"))
                             : json_pack("{s:i,s:s,s:n}", "code", -503, "message",
                                         status ? "not ready: installing Python dependencies"
                                                : "not ready: dependency status unavailable",
                                         "data");
        char *body = root ? json_dumps(root, JSON_COMPACT) : NULL;
        json_decref(root);
        json_decref(status);
        return reply(ready ? 200 : 503, body);
}
