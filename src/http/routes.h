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
};

struct http_reply {
        unsigned status;
        char *body;
        const char *content_type; /* NULL: application/json */
};

struct http_reply route_health(struct http_state *st, const struct http_call *c);
struct http_reply route_run(struct http_state *st, const struct http_call *c);
struct http_reply route_deps_list(struct http_state *st, const struct http_call *c);
struct http_reply route_deps_update(struct http_state *st, const struct http_call *c);
struct http_reply route_deps_refresh(struct http_state *st, const struct http_call *c);
struct http_reply route_ready(struct http_state *st, const struct http_call *c);
struct http_reply route_metrics(struct http_state *st, const struct http_call *c);
