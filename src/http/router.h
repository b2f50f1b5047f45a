/* Which handler answers a request, and whether it may: route tables (one
 * per API: the code-run API's, the shell-job API's), path patterns with
 * one variable segment, the methods a path takes (a 405's Allow), and the
 * constant-time check of a credential. Pure functions, unit-tested without
 * a server; server.c wires a table to each listener. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "http/routes.h"

struct config;

/* What a route's body may hold: none, a small JSON object
 * (HTTP_BODY_SMALL_BYTES), a text (HTTP_BODY_TEXT_BYTES: a shell job's
 * input), or up to server.max_body_bytes (code, a job's script), a
 * snapshot save's options, or a snapshot archive streamed to its handler
 * (routes.h, struct http_upload_ops). Nothing
 * of a body is kept before the route and the credential (from the
 * headers) have been checked. */
enum body_kind {
        BODY_NONE,
        BODY_SMALL,
        BODY_TEXT,
        BODY_CONFIGURED,
        BODY_OPTIONS, /* HTTP_BODY_OPTIONS_BYTES: a snapshot save's options */
        BODY_STREAM,  /* not held: given to the route's upload ops, up to
                       * shell.snapshot_max_bytes */
};

struct route {
        const char *method;
        const char *path; /* literal segments, and "{id}" for any one non-empty segment */
        bool auth;
        enum body_kind body;
        struct http_reply (*handle)(struct http_state *st, const struct http_call *c);
};

/* Why a request was answered without its handler. */
enum http_refusal {
        REFUSE_NOT_FOUND, /* no route has the path */
        REFUSE_METHOD,    /* routes have the path, not the method */
        REFUSE_AUTH,      /* the credential is missing or wrong */
        REFUSE_TOO_LARGE, /* the body is larger than the route takes */
        REFUSE_HEADERS,   /* the headers are larger than HTTP_HEADERS_MAX */
        REFUSE_STOPPING,  /* the server is shutting down */
        REFUSE_NO_MEMORY, /* the handler could not build its answer */
};

struct route_table {
        const struct route *routes;
        size_t n_routes;
        bool head_as_get; /* HEAD is answered by the GET route, without the body */
        bool metrics;     /* counted in lockbox_http_requests_total */
        const char *auth_header;
        /* value: the auth_header's, or NULL when absent */
        bool (*auth_ok)(const struct config *cfg, const char *value);
        /* The answer, in this API's words; message says what the server
         * saw (NULL for REFUSE_AUTH: the API words it). */
        struct http_reply (*refuse)(enum http_refusal why, const char *message);
        /* The body handler of the table's BODY_STREAM routes (NULL: none). */
        const struct http_upload_ops *upload;
};

#define ROUTER_ALLOW_MAX 64

struct route_match {
        const struct route *route;    /* NULL: none (see path_known) */
        bool path_known;              /* some route has the path */
        size_t id_off, id_len;        /* the "{id}" segment's place in the path */
        char allow[ROUTER_ALLOW_MAX]; /* the path's methods, sorted, ", "-separated */
};

/* Match method and path against t (routes for which visible(r, ctx) is
 * false are skipped; visible may be NULL). */
void router_find(const struct route_table *t, const char *method, const char *path,
                 bool (*visible)(const struct route *r, const void *ctx), const void *ctx,
                 struct route_match *ret);

/* Does given (NULL: absent) equal key? Looks at every byte of the key
 * whatever the input: only the key's length could leak, never its
 * content. */
bool router_key_matches(const char *given, const char *key);
