/* Route handlers of the HTTP API (docs/API.md). Each returns an HTTP
 * status and a malloc'd JSON body (NULL = empty body). */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
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

struct http_reply {
        unsigned status;
        char *body;
        const char *content_type; /* NULL: application/json */
        const char *allow;        /* an Allow header (405), or NULL */
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
