/* The shell-job API (Dify's shellctl, docs/API.md "Shell jobs") on its own
 * listener: its route table (shell.c), the decoding of its requests into
 * the jailer's struct shell_req (shell_decode.c: Go's JSON rules, the
 * reference's defaults, lockbox's bounds) and the encoding of the replies
 * (shell_encode.c: Go's encoder, byte for byte). Each call is one exchange
 * with the jailer (ipc/shell_client.h), which owns the jobs. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "http/router.h"
#include "ipc/shell_proto.h"

extern const struct route_table shell_route_table;

/* Defaults where a request leaves a number out (or <= 0). */
#define SHELL_TIMEOUT_DEFAULT_MS 30000
#define SHELL_IDLE_FLUSH_DEFAULT_MS 500
#define SHELL_GRACE_DEFAULT_MS 10000
#define SHELL_LIST_DEFAULT 50
#define SHELL_TERMINAL_COLS 200
#define SHELL_TERMINAL_ROWS 50

/* A request the decoder refuses: the HTTP status and the error envelope's
 * code and message. */
struct shell_error {
        unsigned status;
        const char *code;
        char message[600];
};

/* The bodies of run, wait and input: 0 with *req filled (op and job id
 * aside) and, for run and input, the blob (shell_proto.h) in *ret_blob
 * (malloc'd); or -EINVAL (-ENOMEM) with *e. Bodies are untrusted bytes of
 * len bytes, not NUL-terminated. */
int shell_decode_run(const char *body, size_t len, struct shell_req *req, char **ret_blob,
                     size_t *ret_blob_len, struct shell_error *e);
int shell_decode_wait(const char *body, size_t len, struct shell_req *req, struct shell_error *e);
int shell_decode_input(const char *body, size_t len, struct shell_req *req, char **ret_blob,
                       size_t *ret_blob_len, struct shell_error *e);
/* PUT /v1/prepare (the reference's credentials line): -EINVAL with *e
 * always, in the reference's order: a body that does not decode, an
 * empty session_id, no credentials, then 409 egressproxy_disabled, as
 * lockbox has no egress proxy to give them to. */
int shell_decode_prepare(const char *body, size_t len, struct shell_error *e);

/* A snapshot save's optional body, {"excludes":["pattern",...]}: 0 with
 * the patterns as a blob of SHELL_BLOB_EXCLUDE records (*ret_blob NULL
 * when there are none; an empty body has none), or -EINVAL with *e
 * (400 invalid_request: not JSON, not an object, excludes not a list of
 * strings, or a pattern holding NUL). */
int shell_decode_snapshot_save(const char *body, size_t len, char **ret_blob, size_t *ret_blob_len,
                               struct shell_error *e);
/* Best effort, as the reference: a body that does not decode means the
 * default grace. */
void shell_decode_terminate(const char *body, size_t len, struct shell_req *req);
/* Query strings (each value NULL when absent): log/tail's output_limit,
 * the list's status and limit, DELETE's force and grace_seconds. */
void shell_query_tail(const char *output_limit, struct shell_req *req);
void shell_query_list(const char *status, const char *limit, struct shell_req *req);
void shell_query_delete(const char *force, const char *grace_seconds, struct shell_req *req);

/* The snapshot routes (shell_snapshot.c): save answers with a stream
 * (routes.h); restore's body goes to shell_snapshot_restore_ops. */
struct http_reply shell_snapshot_save(struct http_state *st, const struct http_call *c);
struct http_reply shell_snapshot_restore(struct http_state *st, const struct http_call *c);
extern const struct http_upload_ops shell_snapshot_restore_ops;

/* 16 lowercase hex digits. */
bool shell_job_id_valid(const char *id);
/* token empty: every call passes; else authorization (NULL: absent) must
 * be exactly "Bearer <token>" (compared in constant time). */
bool shell_auth_ok(const char *token, const char *authorization);

/* The response bodies: compact JSON in the reference's field order, "<",
 * ">" and "&" escaped, invalid UTF-8 as \ufffd, ending in "\n";
 * malloc'd, or NULL when out of memory. */
char *shell_encode_error(const char *code, const char *message);
/* JobResult: output holds output.log's bytes [win_start, win_end). */
char *shell_encode_result(const struct shell_reply *rep, const char *state_dir, const char *output,
                          size_t output_len);
char *shell_encode_status(const struct shell_view *v);
char *shell_encode_list(const struct shell_view *views, size_t n);
char *shell_encode_deleted(const char *job_id);
char *shell_encode_health(void);

struct strbuf;
/* Append s (len bytes) quoted as Go's %q quotes it (strconv.Quote), as
 * the reference's messages do: 0 or -ENOMEM. */
int shell_quote(struct strbuf *sb, const char *s, size_t len);
