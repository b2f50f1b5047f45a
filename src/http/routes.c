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

#include "base/clock.h"
#include "base/log.h"
#include "base/util.h"
#include "config/config.h"
#include "http/metrics.h"
#include "http/request.h"
#include "http/result.h"
#include "ipc/client.h"
#include "ipc/proto.h"
#include "ipc/stats.h"

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
        int64_t queued = monotonic_us();
        metrics_queued(1);
        bool got = take_worker(st);
        metrics_queued(-1);
        if (!got)
                return reply_error(503, -503, "server is shutting down");
        int64_t started = monotonic_us();
        struct run_outcome o;
        int r = ipc_run(st->ctrl_fd, &p, &o);
        sem_post(&st->workers);
        int64_t done = monotonic_us();
        if (r < 0) {
                metrics_run(lang, NULL, NULL, false, (uint64_t)(started - queued),
                            (uint64_t)(done - started));
                log_error(c->trace->trace_id, "run.ipc_failed", "error=%s", log_q(strerror(-r)));
                char msg[128];
                snprintf(msg, sizeof(msg), "sandbox unavailable: %s", strerror(-r));
                return reply_error(200, -500, msg);
        }
        const char *outcome = o.res.status == RUN_STATUS_DONE ? result_status_name(&o.res) : NULL;
        metrics_run(lang, outcome, o.res.syscall_name, o.warm, (uint64_t)(started - queued),
                    (uint64_t)(done - started));
        log_info(c->trace->trace_id, "run",
                 "lang=%s outcome=%s exit_code=%d warm=%d "
                 "queue_ms=%lld run_ms=%lld stdout_bytes=%zu stderr_bytes=%zu",
                 req->language, outcome ? outcome : "refused", o.res.exit_code, o.warm,
                 (long long)(started - queued) / 1000, (long long)(done - started) / 1000,
                 o.out.len, o.err.len);
        char *body = result_run_json(&o, cfg->stderr_is_error);
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
        int r = request_decode_language(c->content_type, c->body, c->body_len, c->query_language,
                                        &lang, err, sizeof(err));
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
        if ((size_t)snprintf(path, sizeof(path), "%s/status.json", st->cfg->layer_dir) >=
            sizeof(path))
                return NULL;
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
            json_object_get(status, "status"), "time", json_object_get(status, "time"), "message",
            json_object_get(status, "message"), "installing",
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

/* With shell.enabled, why shell jobs cannot be served now, or NULL. */
static const char *shell_not_ready(const struct http_state *st)
{
        const struct shared_stats *s = st->stats;
        if (!st->cfg->shell_enabled)
                return NULL;
        switch (s ? atomic_load(&s->shell.state) : STATS_SHELL_UNKNOWN) {
        case STATS_SHELL_OK:
                return NULL;
        case STATS_SHELL_DISK_UNMOUNTED:
                return "not ready: shell.home's file system (shell.disk_size) is not mounted";
        case STATS_SHELL_HOME_UNUSABLE:
                return "not ready: shell.home is missing or read-only";
        case STATS_SHELL_JOBS_UNUSABLE:
                return "not ready: the shell jobs directory (shell.state_dir/jobs) is missing or "
                       "read-only";
        default:
                return "not ready: checking shell.home";
        }
}

/* 200 once the service can run code: the interpreters found (Python is
 * required, the daemon does not start without it), the configured mode's
 * warm pools filled once, and the first dependency install finished
 * (whatever its outcome; the dependency routes tell it); with
 * shell.enabled, shell.home and the jobs directory usable too. */
struct http_reply route_ready(struct http_state *st, const struct http_call *c)
{
        json_t *status = read_status(st);
        const struct shared_stats *s = st->stats;
        bool deps = status && json_is_true(json_object_get(status, "ready"));
        bool python = s && atomic_load(&s->runtime[LANG_PYTHON3]);
        bool node = s && atomic_load(&s->runtime[LANG_NODEJS]);
        bool warm = s && atomic_load(&s->warmed);
        const char *why = !python   ? "not ready: the Python interpreter is missing"
                          : !warm   ? "not ready: starting the warm pools"
                          : !status ? "not ready: dependency status unavailable"
                          : !deps   ? "not ready: installing Python dependencies"
                                    : shell_not_ready(st);
        json_t *root;
        if (why)
                root = json_pack("{s:i,s:s,s:n}", "code", -503, "message", why, "data");
        else
                root = json_pack("{s:i,s:s,s:{s:b,s:O,s:s,s:{s:b,s:b}}}", "code", 0, "message",
                                 "success", "data", "ready", 1, "dependencies",
                                 json_object_get(status, "status"), "pools",
                                 strcmp(st->cfg->warm_mode, "warm") == 0 ? "warm" : "cold",
                                 "runtimes", "python3", python, "nodejs", node);
        if (root && !why && st->cfg->shell_enabled)
                json_object_set_new(json_object_get(root, "data"), "shell", json_string("ok"));
        char *body = root ? json_dumps(root, JSON_COMPACT) : NULL;
        json_decref(root);
        json_decref(status);
        return reply(why ? 503 : 200, body);
}

struct http_reply route_metrics(struct http_state *st, const struct http_call *c)
{
        return (struct http_reply){.status = 200,
                                   .body = metrics_render(atomic_load(&st->in_flight)),
                                   .content_type = "text/plain; version=0.0.4; charset=utf-8"};
}
