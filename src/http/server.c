/* libmicrohttpd plumbing (see server.h): a listener per API, each with
 * its route table (router.h), authentication with a constant-time check,
 * the body cap, response headers, and the graceful stop (refuse new work,
 * let requests in flight finish). */
#include "http/server.h"

#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "ipc/channel.h"
#include "base/log.h"
#include "base/strbuf.h"
#include "base/trace.h"
#include "base/util.h"
#include "config/config.h"
#include "http/deadline.h"
#include "http/metrics.h"
#include "http/peer.h"
#include "http/result.h"
#include "http/router.h"
#include "http/routes.h"
#include "http/shell.h"

static const struct route api_routes[] = {
    {"GET", "/health", false, BODY_NONE, route_health},
    {"GET", "/ready", false, BODY_NONE, route_ready},
    {"GET", "/metrics", false, BODY_NONE, route_metrics},
    {"POST", "/v1/sandbox/run", true, BODY_CONFIGURED, route_run},
    {"GET", "/v1/sandbox/dependencies", true, BODY_NONE, route_deps_list},
    {"POST", "/v1/sandbox/dependencies/update", true, BODY_SMALL, route_deps_update},
    {"GET", "/v1/sandbox/dependencies/refresh", true, BODY_NONE, route_deps_refresh},
};

static bool api_auth_ok(const struct config *cfg, const char *value)
{
        return router_key_matches(value, cfg->key);
}

/* The reference's envelope for every refusal; out of memory keeps its
 * HTTP 200, like the handlers' other -500s. */
static struct http_reply api_refuse(enum http_refusal why, const char *message)
{
        static const struct {
                unsigned status;
                int code;
        } map[] = {
            [REFUSE_NOT_FOUND] = {404, -404}, [REFUSE_METHOD] = {405, -405},
            [REFUSE_AUTH] = {401, -401},      [REFUSE_TOO_LARGE] = {413, -413},
            [REFUSE_HEADERS] = {431, -431},   [REFUSE_STOPPING] = {503, -503},
            [REFUSE_NO_MEMORY] = {200, -500},
        };
        if (why == REFUSE_AUTH)
                message = "missing or wrong API key (X-Api-Key header)";
        return (struct http_reply){.status = map[why].status,
                                   .body = result_error_json(map[why].code, message)};
}

static const struct route_table api_table = {
    .routes = api_routes,
    .n_routes = ELEMENTSOF(api_routes),
    .metrics = true,
    .auth_header = "X-Api-Key",
    .auth_ok = api_auth_ok,
    .refuse = api_refuse,
};

static size_t body_limit(const struct config *cfg, const struct route *r)
{
        switch (r->body) {
        case BODY_NONE:
                return 0;
        case BODY_SMALL:
                return HTTP_BODY_SMALL_BYTES;
        case BODY_TEXT:
                return HTTP_BODY_TEXT_BYTES;
        case BODY_OPTIONS:
                return HTTP_BODY_OPTIONS_BYTES;
        case BODY_STREAM:
                return (size_t)cfg->shell_snapshot_max_bytes;
        default:
                return (size_t)cfg->max_body_bytes;
        }
}

/* One libmicrohttpd daemon: the API's, the metrics-only one of
 * server.metrics_listen, or the shell-job API's. */
struct listener {
        struct http_state *st;
        const struct route_table *table;
        bool metrics_only;
        unsigned port;               /* the one it listens on */
        struct deadlines *deadlines; /* shared by the listeners, or NULL */
};

/* The "{id}" of a path, cut to this size: a longer one is no job id. */
#define PATH_ID_MAX 64

struct request {
        const struct route *route;
        struct strbuf body;
        bool too_large, answered;
        bool counted; /* in st->active until its reply has gone out */
        void *upload; /* BODY_STREAM: the handler's context while the body comes */
        uint64_t upload_bytes;
        struct trace trace;
        int64_t start_ms; /* monotonic_ms() when it came in */
        bool has_id;
        char path_id[PATH_ID_MAX + 1];
        char allow[ROUTER_ALLOW_MAX];
};

/* A streamed body (routes.h): libmicrohttpd sends it chunked, and the
 * footers added at its clean end as the last chunk's trailers. */
struct stream_call {
        struct http_stream *s;
        struct MHD_Response *resp;
};

static void add_footer(void *ctx, const char *name, const char *value)
{
        MHD_add_response_footer(ctx, name, value);
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
        struct stream_call *x = cls;
        ssize_t n = x->s->read(x->s, buf, max);
        if (n > 0)
                return n;
        if (n < 0)
                return MHD_CONTENT_READER_END_WITH_ERROR;
        x->s->trailers(x->s, add_footer, x->resp);
        return MHD_CONTENT_READER_END_OF_STREAM;
}

static void stream_free(void *cls)
{
        struct stream_call *x = cls;
        x->s->free(x->s);
        free(x);
}

static struct MHD_Response *stream_response(struct http_stream *s)
{
        struct stream_call *x = calloc(1, sizeof(*x));
        if (!x) {
                s->free(s);
                return NULL;
        }
        x->s = s;
        x->resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 64 * 1024, stream_read, x,
                                                    stream_free);
        struct MHD_Response *resp = x->resp;
        if (!resp)
                stream_free(x);
        return resp;
}

static enum MHD_Result send_reply(struct MHD_Connection *conn, struct request *rq,
                                  struct http_reply rep, bool close_after)
{
        size_t len = rep.body ? strlen(rep.body) : 0;
        struct MHD_Response *resp =
            rep.stream ? stream_response(rep.stream)
                       : MHD_create_response_from_buffer(len, rep.body ? rep.body : (void *)"",
                                                         rep.body ? MHD_RESPMEM_MUST_FREE
                                                                  : MHD_RESPMEM_PERSISTENT);
        if (rep.stream)
                free(rep.body);
        if (!resp) {
                if (!rep.stream)
                        free(rep.body);
                return MHD_NO;
        }
        char tp[64];
        trace_format(&rq->trace, tp, sizeof(tp));
        if (rep.body || rep.stream)
                MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
                                        rep.content_type ? rep.content_type : "application/json");
        if (rep.allow)
                MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, rep.allow);
        MHD_add_response_header(resp, "traceparent", tp);
        if (close_after)
                MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
        enum MHD_Result r = MHD_queue_response(conn, rep.status, resp);
        MHD_destroy_response(resp);
        rq->answered = true;
        return r;
}

/* /metrics is on the API's port unless turned off or moved to its own
 * listener, which serves nothing else. */
static bool route_visible(const struct route *r, const void *ctx)
{
        const struct listener *l = ctx;
        const struct config *cfg = l->st->cfg;
        if (r->handle != route_metrics)
                return !l->metrics_only;
        return cfg->metrics && (l->metrics_only || !*cfg->metrics_listen);
}

static struct http_reply refuse(const struct listener *l, enum http_refusal why,
                                const char *message)
{
        return l->table->refuse(why, message);
}

/* Headers are capped here (HTTP_HEADERS_MAX), with a JSON answer, below
 * the per-connection pool (HTTP_CONNECTION_MEMORY) where libmicrohttpd
 * would refuse them itself; the pool bounds what any connection, with a
 * key or without, makes the server hold besides a body its route
 * accepts. */
static enum MHD_Result add_header_size(void *cls, enum MHD_ValueKind kind, const char *key,
                                       const char *value)
{
        size_t *total = cls;
        *total += strlen(key) + (value ? strlen(value) : 0) + 4;
        return MHD_YES;
}

static size_t headers_size(struct MHD_Connection *conn)
{
        size_t total = 0;
        MHD_get_connection_values(conn, MHD_HEADER_KIND, add_header_size, &total);
        return total;
}

static struct http_reply too_large(const struct listener *l, const struct route *r)
{
        char msg[128];
        if (r->body == BODY_NONE)
                snprintf(msg, sizeof(msg), "%s %s takes no request body", r->method, r->path);
        else
                snprintf(msg, sizeof(msg), "request body larger than %zu bytes",
                         body_limit(l->st->cfg, r));
        return refuse(l, REFUSE_TOO_LARGE, msg);
}

/* No route: 404, or 405 with the methods the path takes. */
static enum MHD_Result no_route(const struct listener *l, struct MHD_Connection *conn,
                                struct request *rq, const struct route_match *m)
{
        if (!m->path_known)
                return send_reply(conn, rq, refuse(l, REFUSE_NOT_FOUND, "not found"), false);
        struct http_reply rep = refuse(l, REFUSE_METHOD, "method not allowed");
        snprintf(rq->allow, sizeof(rq->allow), "%s", m->allow);
        rep.allow = rq->allow;
        return send_reply(conn, rq, rep, false);
}

static void arm(const struct listener *l, struct MHD_Connection *conn, enum deadline_phase phase,
                int seconds);

static const char *call_query(const struct http_call *c, const char *name)
{
        return MHD_lookup_connection_value(c->query_ctx, MHD_GET_ARGUMENT_KIND, name);
}

static struct http_call call_of(struct MHD_Connection *conn, struct request *rq)
{
        return (struct http_call){
            .content_type =
                MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE),
            .body = rq->body.data ? rq->body.data : "",
            .body_len = rq->body.len,
            .query_language = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "language"),
            .trace = &rq->trace,
            .path_id = rq->has_id ? rq->path_id : NULL,
            .query = call_query,
            .query_ctx = conn,
        };
}

/* A BODY_STREAM route's handler takes the body from the start; its
 * deadline is the snapshot's. */
static enum MHD_Result upload_open(const struct listener *l, struct MHD_Connection *conn,
                                   struct request *rq)
{
        struct http_call call = call_of(conn, rq);
        struct http_reply rep = {0};
        if (l->table->upload->open(l->st, &call, &rq->upload, &rep) < 0) {
                rq->upload = NULL;
                if (!rep.body)
                        rep = refuse(l, REFUSE_NO_MEMORY, "out of memory");
                return send_reply(conn, rq, rep, true);
        }
        arm(l, conn, DEADLINE_BODY, (int)l->st->cfg->shell_snapshot_timeout);
        return MHD_YES;
}

/* First call for a request: route, auth and the declared body size can
 * all be answered before reading the body. */
static enum MHD_Result first_call(const struct listener *l, struct MHD_Connection *conn,
                                  struct request *rq, const char *method, const char *url)
{
        const struct route_table *t = l->table;
        if (headers_size(conn) > HTTP_HEADERS_MAX) {
                char msg[64];
                snprintf(msg, sizeof(msg), "request headers larger than %d bytes",
                         HTTP_HEADERS_MAX);
                return send_reply(conn, rq, refuse(l, REFUSE_HEADERS, msg), true);
        }
        struct route_match m;
        router_find(t, method, url, route_visible, l, &m);
        if (!m.route)
                return no_route(l, conn, rq, &m);
        rq->route = m.route;
        rq->has_id = strstr(m.route->path, "{id}") != NULL;
        snprintf(rq->path_id, sizeof(rq->path_id), "%.*s",
                 (int)(m.id_len < PATH_ID_MAX ? m.id_len : PATH_ID_MAX), url + m.id_off);
        if (rq->route->auth && !t->auth_ok(l->st->cfg, MHD_lookup_connection_value(
                                                           conn, MHD_HEADER_KIND, t->auth_header)))
                return send_reply(conn, rq, refuse(l, REFUSE_AUTH, NULL), false);
        const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Length");
        if (cl && strtoull(cl, NULL, 10) > body_limit(l->st->cfg, rq->route))
                return send_reply(conn, rq, too_large(l, rq->route), true);
        if (rq->route->body == BODY_STREAM && t->upload)
                return upload_open(l, conn, rq);
        strbuf_init(&rq->body, body_limit(l->st->cfg, rq->route));
        return MHD_YES;
}

/* Every request that gets this far counts in st->active until
 * on_completed: its reply is only queued here, and a stopping server
 * must not close the connection before it has been sent. */
static enum MHD_Result final_call(const struct listener *l, struct MHD_Connection *conn,
                                  struct request *rq)
{
        struct http_state *st = l->st;
        atomic_fetch_add(&st->active, 1);
        rq->counted = true;
        if (rq->too_large)
                return send_reply(conn, rq, too_large(l, rq->route), true);
        if (atomic_load(&st->stopping))
                return send_reply(conn, rq, refuse(l, REFUSE_STOPPING, "server is shutting down"),
                                  true);
        struct http_call call = call_of(conn, rq);
        struct http_reply rep;
        if (rq->upload)
                rep = l->table->upload->finish(st, &call, TAKE_PTR(rq->upload));
        else
                rep = rq->route->handle(st, &call);
        if (!rep.body && !rep.stream)
                rep = refuse(l, REFUSE_NO_MEMORY, "out of memory");
        return send_reply(conn, rq, rep, false);
}

/* The connection's deadline (see deadline.h) from now: seconds, 0 none. */
static void arm(const struct listener *l, struct MHD_Connection *conn, enum deadline_phase phase,
                int seconds)
{
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
        if (l->deadlines && ci && ci->socket_context)
                deadline_watch_arm(l->deadlines, ci->socket_context, phase,
                                   (int64_t)seconds * 1000);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **req_cls)
{
        const struct listener *l = cls;
        struct http_state *st = l->st;
        struct request *rq = *req_cls;
        if (!rq) {
                rq = calloc(1, sizeof(*rq));
                if (!rq)
                        return MHD_NO;
                *req_cls = rq;
                rq->start_ms = monotonic_ms();
                trace_from_header(MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "traceparent"),
                                  &rq->trace);
                arm(l, conn, DEADLINE_BODY, st->cfg->body_timeout);
                return first_call(l, conn, rq, method, url);
        }
        if (rq->answered) {
                *upload_data_size = 0; /* discard the rest of a refused body */
                return MHD_YES;
        }
        if (*upload_data_size && rq->upload) {
                /* the handler bounds what it takes; past the route's limit
                 * nothing more goes to it */
                size_t n = *upload_data_size;
                rq->upload_bytes += n;
                if (rq->upload_bytes <= body_limit(st->cfg, rq->route))
                        l->table->upload->write(rq->upload, upload_data, n);
                *upload_data_size = 0;
                return MHD_YES;
        }
        if (*upload_data_size) {
                /* (a strbuf limit of 0 means none: a route without a body
                 * refuses its first byte itself) */
                if (!rq->too_large &&
                    (rq->route->body == BODY_NONE ||
                     strbuf_append(&rq->body, upload_data, *upload_data_size) < 0)) {
                        rq->too_large = true;
                        strbuf_free(&rq->body);
                }
                *upload_data_size = 0;
                return MHD_YES;
        }
        arm(l, conn, DEADLINE_NONE, 0);
        return final_call(l, conn, rq);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **req_cls,
                         enum MHD_RequestTerminationCode toe)
{
        const struct listener *l = cls;
        struct request *rq = *req_cls;
        if (!rq)
                return;
        if (rq->counted)
                atomic_fetch_sub(&l->st->active, 1);
        if (rq->upload)
                l->table->upload->abort(TAKE_PTR(rq->upload));
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_HTTP_STATUS);
        if (ci && l->table->metrics)
                metrics_request(rq->route ? rq->route->path : NULL, ci->http_status);
        log_info(rq->trace.trace_id, "http.request", "route=%s status=%u duration_ms=%lld%s",
                 rq->route ? rq->route->path : "-", ci ? ci->http_status : 0,
                 (long long)(monotonic_ms() - rq->start_ms),
                 toe == MHD_REQUEST_TERMINATED_COMPLETED_OK ? "" : " aborted=1");
        strbuf_free(&rq->body);
        free(rq);
        *req_cls = NULL;
        /* kept alive: the client may stay idle for connection_timeout
         * (libmicrohttpd's), then its next request's headers are due */
        arm(l, conn, DEADLINE_HEADERS, l->st->cfg->connection_timeout + l->st->cfg->header_timeout);
}

/* Every connection gets its deadline watch; its first request's headers
 * are due header_timeout after the accept. */
static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe)
{
        const struct listener *l = cls;
        if (!l->deadlines)
                return;
        if (toe == MHD_CONNECTION_NOTIFY_CLOSED) {
                deadline_watch_remove(l->deadlines, TAKE_PTR(*socket_context));
                return;
        }
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (!ci)
                return;
        *socket_context = deadline_watch_add(l->deadlines, ci->connect_fd);
        arm(l, conn, DEADLINE_HEADERS, l->st->cfg->header_timeout);
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
        char msg[512];
        vsnprintf(msg, sizeof(msg), fmt, ap);
        msg[strcspn(msg, "\n")] = '\0';
        log_warn(NULL, "http.mhd", "msg=%s", log_q(msg));
}

/* Runs with network share the host's network: they must not use up the
 * connections clients need (see peer.h). */
static enum MHD_Result on_accept(void *cls, const struct sockaddr *addr, socklen_t addrlen)
{
        const struct listener *l = cls;
        const struct config *cfg = l->st->cfg;
        if (!peer_is_sandbox_run(addr, addrlen, l->port, (uid_t)cfg->uid_min, (uid_t)cfg->uid_max))
                return MHD_YES;
        metrics_refused_run_connection();
        return MHD_NO;
}

static struct MHD_Daemon *start_daemon(struct listener *l, int listen_fd)
{
        const struct config *cfg = l->st->cfg;
        unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
                         MHD_USE_POLL | MHD_USE_ITC | MHD_USE_ERROR_LOG;
        /* The logger goes first, or libmicrohttpd warns about it. */
        return MHD_start_daemon(
            flags, 0, on_accept, l, on_request, l, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
            MHD_OPTION_LISTEN_SOCKET, listen_fd, MHD_OPTION_CONNECTION_LIMIT,
            (unsigned)cfg->max_connections, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
            (unsigned)cfg->max_connections_per_ip, MHD_OPTION_CONNECTION_TIMEOUT,
            (unsigned)cfg->connection_timeout, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
            (size_t)HTTP_CONNECTION_MEMORY, MHD_OPTION_THREAD_STACK_SIZE, (size_t)1024 * 1024,
            MHD_OPTION_NOTIFY_COMPLETED, on_completed, l, MHD_OPTION_NOTIFY_CONNECTION,
            on_connection, l, MHD_OPTION_END);
}

/* Shell calls waiting for the jailer give up (the eventfd stays
 * readable for every poller). */
static void cancel_shell_calls(struct http_state *st)
{
        uint64_t one = 1;
        if (st->shell_cancel_fd >= 0 && write(st->shell_cancel_fd, &one, sizeof(one)) < 0)
                log_warn(NULL, "http.shell_cancel", "error=%s", log_q(strerror(errno)));
}

/* Requests in flight finish (each run is bounded by worker_timeout; a
 * shell call's wait, up to 600 s, is cut after HTTP_SHELL_STOP_GRACE_MS);
 * new ones are refused with 503 meanwhile. */
static void drain(struct http_state *st)
{
        int64_t limit_ms = (int64_t)st->cfg->worker_timeout * 1000 + 5000;
        int64_t start = monotonic_ms();
        bool cancelled = false;
        while ((atomic_load(&st->active) > 0 || atomic_load(&st->in_flight) > 0) &&
               monotonic_ms() - start < limit_ms) {
                if (!cancelled && monotonic_ms() - start >= HTTP_SHELL_STOP_GRACE_MS) {
                        cancel_shell_calls(st);
                        cancelled = true;
                }
                nanosleep(&(struct timespec){.tv_nsec = 20 * 1000000}, NULL);
        }
}

static unsigned listen_port(int fd)
{
        struct sockaddr_storage ss;
        socklen_t len = sizeof(ss);
        if (fd < 0 || getsockname(fd, (struct sockaddr *)&ss, &len) < 0)
                return 0;
        return ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                              : ((struct sockaddr_in *)&ss)->sin_port);
}

/* A file descriptor sent by the jailer after it reopened the log file. */
static void take_log_fd(int sock)
{
        char byte;
        int fd = -1;
        size_t n = 0;
        if (channel_recv(sock, &byte, 1, &fd, 1, &n) == 1 && n == 1) {
                log_replace_file(fd);
                log_info(NULL, "log.reopened", "%s", "");
        }
}

/* Until SIGTERM or SIGINT (returned); SIGHUP is the jailer's business. */
static int wait_for_stop(const sigset_t *mask, int log_sock)
{
        int sfd = signalfd(-1, mask, SFD_CLOEXEC);
        for (;;) {
                struct pollfd p[2] = {{sfd, POLLIN, 0}, {log_sock, POLLIN, 0}};
                if (sfd < 0 || (poll(p, log_sock >= 0 ? 2 : 1, -1) < 0 && errno != EINTR)) {
                        int sig = 0;
                        sigwait(mask, &sig); /* fall back: signals only */
                        if (sig != SIGHUP)
                                return sig;
                        continue;
                }
                if (p[1].revents & POLLIN)
                        take_log_fd(log_sock);
                else if (p[1].revents & (POLLHUP | POLLERR))
                        log_sock = -1;
                struct signalfd_siginfo si;
                if ((p[0].revents & POLLIN) && read(sfd, &si, sizeof(si)) == sizeof(si) &&
                    si.ssi_signo != SIGHUP) {
                        close(sfd);
                        return (int)si.ssi_signo;
                }
        }
}

/* The listeners' daemons: the API's, and the metrics' and the shell
 * API's when they have a socket. All or none start. */
struct daemons {
        struct MHD_Daemon *api, *metrics, *shell;
};

static void daemons_stop(struct daemons *d)
{
        struct MHD_Daemon **all[] = {&d->api, &d->metrics, &d->shell};
        for (size_t i = 0; i < ELEMENTSOF(all); i++)
                if (*all[i])
                        MHD_stop_daemon(TAKE_PTR(*all[i]));
}

static int daemons_start(struct listener ls[3], const struct http_server_opts *o,
                         struct daemons *ret)
{
        struct daemons d = {start_daemon(&ls[0], o->listen_fd), NULL, NULL};
        bool ok = d.api &&
                  (o->metrics_fd < 0 || (d.metrics = start_daemon(&ls[1], o->metrics_fd))) &&
                  (o->shell_fd < 0 || (d.shell = start_daemon(&ls[2], o->shell_fd)));
        if (!ok) {
                int e = errno ? errno : EIO;
                daemons_stop(&d);
                return -e;
        }
        *ret = d;
        return 0;
}

/* Stop accepting: the listening sockets are closed, open connections
 * stay. */
static void daemons_quiesce(struct daemons *d)
{
        struct MHD_Daemon *all[] = {d->api, d->shell};
        for (size_t i = 0; i < ELEMENTSOF(all); i++) {
                MHD_socket lfd = all[i] ? MHD_quiesce_daemon(all[i]) : MHD_INVALID_SOCKET;
                if (lfd != MHD_INVALID_SOCKET)
                        close(lfd);
        }
}

int http_server_run(const struct http_server_opts *o)
{
        struct http_state st = {
            .cfg = o->cfg, .ctrl_fd = o->ctrl_fd, .stats = o->stats, .shell_cancel_fd = -1};
        if (sem_init(&st.workers, 0, (unsigned)o->cfg->max_workers) < 0)
                return 1;
        if (o->shell_fd >= 0 && (st.shell_cancel_fd = eventfd(0, EFD_CLOEXEC)) < 0) {
                log_error(NULL, "http.start_failed", "error=%s", log_q(strerror(errno)));
                return 1;
        }
        metrics_init(o->stats, o->cfg->layer_dir);
        sigset_t mask;
        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGHUP);
        pthread_sigmask(SIG_BLOCK, &mask, NULL); /* MHD's threads inherit it */
        signal(SIGPIPE, SIG_IGN);
        struct deadlines *deadlines = deadlines_start();
        if (!deadlines)
                log_warn(NULL, "http.deadlines_off", "error=%s", log_q(strerror(errno)));
        struct listener ls[3] = {
            {&st, &api_table, false, (unsigned)o->cfg->port, deadlines},
            {&st, &api_table, true, listen_port(o->metrics_fd), deadlines},
            {&st, &shell_route_table, false, listen_port(o->shell_fd), deadlines},
        };
        struct daemons d;
        int r = daemons_start(ls, o, &d);
        if (r < 0) {
                log_error(NULL, "http.start_failed", "error=%s", log_q(strerror(-r)));
                deadlines_stop(deadlines);
                safe_close(st.shell_cancel_fd);
                return 1;
        }
        log_info(NULL, "http.listening", "listen=%s port=%d metrics=%s shell=%s", o->cfg->listen,
                 o->cfg->port,
                 !o->cfg->metrics ? "off"
                 : d.metrics      ? o->cfg->metrics_listen
                                  : "api-port",
                 d.shell ? "on" : "off");
        int sig = wait_for_stop(&mask, o->log_sock);
        atomic_store(&st.stopping, true);
        daemons_quiesce(&d);
        log_info(NULL, "http.stopping", "signal=%d in_flight=%d", sig, atomic_load(&st.in_flight));
        drain(&st);
        cancel_shell_calls(&st);
        daemons_stop(&d);
        deadlines_stop(deadlines);
        safe_close(st.shell_cancel_fd);
        sem_destroy(&st.workers);
        log_info(NULL, "http.stopped", "%s", "");
        return 0;
}
