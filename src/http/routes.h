/* Route handlers of the HTTP API (docs/API.md). Each returns an HTTP
 * status and a malloc'd JSON body (NULL = empty body). */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <semaphore.h>

#include "base/trace.h"

struct config;
struct shared_stats;

struct http_state {
        const struct config *cfg;
        const struct shared_stats *stats; /* the jailer's figures */
        int ctrl_fd;
        int shell_cancel_fd; /* readable once shell calls must give up (stopping), or -1 */
        sem_t workers;
        atomic_int in_flight; /* run requests accepted: running or queued */
        atomic_int active;    /* requests being answered right now */
        atomic_bool stopping;
};

struct http_call {
        const char *content_type;
        const char *body;
        size_t body_len;
        const char *query_language; /* ?language=, or NULL */
        const struct trace *trace;
        const char *path_id; /* the path's "{id}" segment (router.h), or NULL */
        /* A query argument's value (NULL when absent), or NULL itself when
         * the call has no query string to read. */
        const char *(*query)(const struct http_call *c, const char *name);
        void *query_ctx;
};

/* A response body made while it is sent (chunked), and its trailers. */
struct http_stream {
        /* Up to max bytes into buf: how many (> 0), 0 at a clean end, or
         * < 0 to abort the connection (the client sees no clean end). */
        ssize_t (*read)(struct http_stream *s, char *buf, size_t max);
        /* After a clean end: the trailers, each given to add(ctx, ...). */
        void (*trailers)(struct http_stream *s,
                         void (*add)(void *ctx, const char *name, const char *value), void *ctx);
        void (*free)(struct http_stream *s);
};

struct http_reply {
        unsigned status;
        char *body;
        const char *content_type;   /* NULL: application/json */
        const char *allow;          /* an Allow header (405), or NULL */
        struct http_stream *stream; /* instead of body (the server frees it), or NULL */
};

/* A route whose body goes to its handler piece by piece (BODY_STREAM)
 * instead of being held: opened once the route and the credential are
 * known, before any of the body is read. */
struct http_upload_ops {
        /* 0 with *ret_ctx to take the body, or -1 with *ret (the answer). */
        int (*open)(struct http_state *st, const struct http_call *c, void **ret_ctx,
                    struct http_reply *ret);
        /* A piece of the body (which the handler may drop). */
        void (*write)(void *ctx, const char *data, size_t n);
        /* The whole body came: the answer; ctx is freed. */
        struct http_reply (*finish)(struct http_state *st, const struct http_call *c, void *ctx);
        /* The request ended without finish (the client went away): free ctx. */
        void (*abort)(void *ctx);
};

static inline const char *http_call_query(const struct http_call *c, const char *name)
{
        return c->query ? c->query(c, name) : NULL;
}

struct http_reply route_health(struct http_state *st, const struct http_call *c);
struct http_reply route_run(struct http_state *st, const struct http_call *c);
struct http_reply route_deps_list(struct http_state *st, const struct http_call *c);
struct http_reply route_deps_update(struct http_state *st, const struct http_call *c);
struct http_reply route_deps_refresh(struct http_state *st, const struct http_call *c);
struct http_reply route_ready(struct http_state *st, const struct http_call *c);
struct http_reply route_metrics(struct http_state *st, const struct http_call *c);
