/* Decoding the shell API's requests (see shell.h) as the reference's Go
 * handlers do: the body is one JSON value read as json.Decoder reads it
 * (what follows it is not looked at; null is an empty request; bytes that
 * are not UTF-8 become U+FFFD), names match fields in any letter case,
 * unknown fields are ignored, null leaves a field at its default, and a
 * field of the wrong JSON type, like a body that does not parse, is
 * 400 invalid_request. Then the reference's checks, with its messages,
 * and lockbox's bounds on every number (shell_proto.h). Bodies are
 * untrusted; every path here is bounded and frees what it took. */
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/strbuf.h"
#include "base/utf8.h"
#include "base/util.h"
#include "http/shell.h"

_printf_(4, 5) static int fail(struct shell_error *e, unsigned status, const char *code,
                               const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(e->message, sizeof(e->message), fmt, ap);
        va_end(ap);
        e->message[utf8_valid_prefix(e->message, strlen(e->message))] = '\0';
        e->status = status;
        e->code = code;
        return -EINVAL;
}

static int invalid_body(struct shell_error *e)
{
        return fail(e, 400, "invalid_request", "Invalid JSON body");
}

static int out_of_memory(struct shell_error *e)
{
        fail(e, 500, "internal_error", "out of memory");
        return -ENOMEM;
}

static int validation(struct shell_error *e, const char *message)
{
        return fail(e, 422, "validation_error", "%s", message);
}

/* 422 with message followed by s quoted as Go's %q. */
static int validation_quoted(struct shell_error *e, const char *message, const char *s, size_t n)
{
        struct strbuf sb;
        strbuf_init(&sb, 0);
        int r = strbuf_appends(&sb, message);
        if (r == 0)
                r = shell_quote(&sb, s, n);
        if (r < 0) {
                strbuf_free(&sb);
                return out_of_memory(e);
        }
        r = fail(e, 422, "validation_error", "%s", sb.data);
        strbuf_free(&sb);
        return r;
}

/* The body's JSON object in *ret: 0, -EINVAL (Go would not decode it into
 * a struct) or -ENOMEM. */
static int body_parse(const char *body, size_t len, json_t **ret)
{
        _cleanup_free_ char *clean = NULL;
        if (!utf8_valid(body, len)) {
                clean = utf8_sanitize(body, len, &len);
                if (!clean)
                        return -ENOMEM;
                body = clean;
        }
        json_error_t err;
        json_t *j =
            json_loadb(body, len, JSON_DECODE_ANY | JSON_ALLOW_NUL | JSON_DISABLE_EOF_CHECK, &err);
        /* jansson holds no NUL in a key; Go decodes one and the run's env
         * check refuses it (-EILSEQ: the caller says so) */
        if (!j && strstr(err.text, "NUL byte in object key"))
                return -EILSEQ;
        if (j && json_is_null(j)) {
                json_decref(j);
                j = json_object();
                if (!j)
                        return -ENOMEM;
        }
        if (!j || !json_is_object(j)) {
                json_decref(j);
                return -EINVAL;
        }
        *ret = j;
        return 0;
}

/* Does key name the field as Go matches names to fields: ASCII letters in
 * either case, and the two letters Unicode folds to ASCII ones, U+017F
 * (long s) and U+212A (Kelvin sign)? Field names are lowercase. */
static bool key_is(const char *key, size_t key_len, const char *name)
{
        size_t i = 0;
        for (const char *n = name; *n; n++) {
                char c = i < key_len ? key[i] : '\0';
                if (c >= 'A' && c <= 'Z')
                        c = (char)(c - 'A' + 'a');
                if (i < key_len && c == *n)
                        i++;
                else if (*n == 's' && key_len - i >= 2 && memcmp(key + i, "\xc5\xbf", 2) == 0)
                        i += 2;
                else if (*n == 'k' && key_len - i >= 3 && memcmp(key + i, "\xe2\x84\xaa", 3) == 0)
                        i += 3;
                else
                        return false;
        }
        return i == key_len;
}

/* The field's value (the last key naming it), or NULL. */
static json_t *field(json_t *obj, const char *name)
{
        json_t *found = NULL;
        for (void *it = json_object_iter(obj); it; it = json_object_iter_next(obj, it))
                if (key_is(json_object_iter_key(it), json_object_iter_key_len(it), name))
                        found = json_object_iter_value(it);
        return found;
}

/* Typed fields: absent or null leave *ret as it was; another JSON type is
 * -EINVAL. Integers take JSON integers only (1.0 is not one, as in Go). */
static int get_text(json_t *obj, const char *name, const char **ret, size_t *ret_len)
{
        json_t *v = field(obj, name);
        if (!v || json_is_null(v))
                return 0;
        if (!json_is_string(v))
                return -EINVAL;
        *ret = json_string_value(v);
        *ret_len = json_string_length(v);
        return 0;
}

static int get_int(json_t *obj, const char *name, int64_t *ret)
{
        json_t *v = field(obj, name);
        if (!v || json_is_null(v))
                return 0;
        if (!json_is_integer(v))
                return -EINVAL;
        *ret = json_integer_value(v);
        return 0;
}

static int get_number(json_t *obj, const char *name, double *ret)
{
        json_t *v = field(obj, name);
        if (!v || json_is_null(v))
                return 0;
        if (!json_is_number(v))
                return -EINVAL;
        *ret = json_number_value(v);
        return 0;
}

/* An object of strings (null values count as ""), null, or absent. */
static int get_env(json_t *obj, json_t **ret)
{
        json_t *v = field(obj, "env");
        if (!v || json_is_null(v))
                return 0;
        if (!json_is_object(v))
                return -EINVAL;
        const char *key;
        json_t *value;
        json_object_foreach(v, key, value)
        {
                if (!json_is_string(value) && !json_is_null(value))
                        return -EINVAL;
        }
        *ret = v;
        return 0;
}

static int get_terminal(json_t *obj, int64_t *ret_cols, int64_t *ret_rows)
{
        json_t *v = field(obj, "terminal");
        if (!v || json_is_null(v))
                return 0;
        if (!json_is_object(v) || get_int(v, "cols", ret_cols) < 0 ||
            get_int(v, "rows", ret_rows) < 0)
                return -EINVAL;
        return 0;
}

/* ---- numbers: the reference's defaults, lockbox's bounds ----------------- */

/* seconds > 0 in whole milliseconds, rounded up (so never 0), at most max_ms. */
static uint32_t ms_of(double seconds, uint32_t max_ms)
{
        if (seconds >= max_ms / 1000.0)
                return max_ms;
        double ms = seconds * 1000;
        uint32_t m = (uint32_t)ms;
        return m < ms ? m + 1 : m;
}

static uint32_t timeout_of(double seconds, uint32_t if_unset)
{
        return seconds > 0 ? ms_of(seconds, SHELL_WAIT_MAX_MS) : if_unset;
}

static uint32_t idle_flush_of(double seconds)
{
        return seconds > 0 ? ms_of(seconds, SHELL_IDLE_FLUSH_MAX_MS) : SHELL_IDLE_FLUSH_DEFAULT_MS;
}

static uint32_t output_limit_of(int64_t v, uint32_t max)
{
        return v <= 0 ? SHELL_OUTPUT_LIMIT_DEFAULT : v > max ? max : (uint32_t)v;
}

static int offset_of(int64_t offset, struct shell_req *req, struct shell_error *e)
{
        /* the reference reads at the negative offset and fails with a 500 */
        if (offset < 0)
                return fail(e, 400, "invalid_offset", "offset %lld is negative", (long long)offset);
        req->offset = offset;
        return 0;
}

/* ---- run ---------------------------------------------------------------- */

struct run_body {
        const char *script, *cwd, *mode, *session_id; /* NULL when absent */
        size_t script_len, cwd_len, mode_len, session_id_len;
        json_t *env; /* an object, or NULL */
        int64_t cols, rows, output_limit;
        double timeout, idle_flush;
};

static int run_body_read(json_t *o, struct run_body *b)
{
        *b = (struct run_body){0};
        if (get_text(o, "script", &b->script, &b->script_len) < 0 ||
            get_text(o, "cwd", &b->cwd, &b->cwd_len) < 0 ||
            get_text(o, "mode", &b->mode, &b->mode_len) < 0 ||
            get_text(o, "session_id", &b->session_id, &b->session_id_len) < 0 ||
            get_env(o, &b->env) < 0 || get_terminal(o, &b->cols, &b->rows) < 0 ||
            get_number(o, "timeout", &b->timeout) < 0 ||
            get_int(o, "output_limit", &b->output_limit) < 0 ||
            get_number(o, "idle_flush_seconds", &b->idle_flush) < 0)
                return -EINVAL;
        return 0;
}

static int check_env(json_t *env, struct shell_error *e)
{
        for (void *it = env ? json_object_iter(env) : NULL; it;
             it = json_object_iter_next(env, it)) {
                const char *name = json_object_iter_key(it);
                size_t name_len = json_object_iter_key_len(it);
                json_t *v = json_object_iter_value(it);
                const char *value = json_is_string(v) ? json_string_value(v) : "";
                size_t value_len = json_is_string(v) ? json_string_length(v) : 0;
                if (name_len == 0)
                        return validation(e, "env names must be non-empty");
                if (memchr(name, '=', name_len))
                        return validation_quoted(e, "env name must not contain '=': ", name,
                                                 name_len);
                if (memchr(name, '\0', name_len) || memchr(value, '\0', value_len))
                        return validation(e, "env entries must not contain NUL");
        }
        return 0;
}

static bool text_is(const char *s, size_t len, const char *word)
{
        return len == strlen(word) && memcmp(s, word, len) == 0;
}

static int check_mode(const struct run_body *b, struct shell_req *req, struct shell_error *e)
{
        if (!b->mode || b->mode_len == 0 || text_is(b->mode, b->mode_len, "pty"))
                req->mode = SHELL_MODE_PTY;
        else if (text_is(b->mode, b->mode_len, "stdio"))
                req->mode = SHELL_MODE_STDIO;
        else
                return validation_quoted(e, "invalid job mode ", b->mode, b->mode_len);
        return 0;
}

static int check_terminal(const struct run_body *b, struct shell_req *req, struct shell_error *e)
{
        if (b->cols > SHELL_TERMINAL_MAX || b->rows > SHELL_TERMINAL_MAX)
                return fail(e, 422, "validation_error", "terminal cols and rows must be at most %d",
                            SHELL_TERMINAL_MAX);
        req->cols = b->cols > 0 ? (uint32_t)b->cols : SHELL_TERMINAL_COLS;
        req->rows = b->rows > 0 ? (uint32_t)b->rows : SHELL_TERMINAL_ROWS;
        return 0;
}

/* The credentials line's session: [A-Za-z0-9_-]{1,128}; "" is no session. */
static int check_session(const struct run_body *b, struct shell_req *req, struct shell_error *e)
{
        size_t n = b->session_id ? b->session_id_len : 0;
        bool ok = n <= SHELL_SESSION_ID_MAX;
        for (size_t i = 0; ok && i < n; i++) {
                char c = b->session_id[i];
                ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                     c == '_' || c == '-';
        }
        if (!ok)
                return validation(e, "session_id must be a non-empty string of letters, digits, "
                                     "'-', or '_' (max 128 chars)");
        memcpy(req->session_id, b->session_id ? b->session_id : "", n);
        req->session_id[n] = '\0';
        return 0;
}

/* A path with a NUL byte names no directory (the jailer reads it as
 * bytes up to its length). */
static int check_cwd(const struct run_body *b, struct shell_error *e)
{
        if (b->cwd && memchr(b->cwd, '\0', b->cwd_len))
                return fail(e, 400, "invalid_cwd", "cwd is not a directory: %s", b->cwd);
        return 0;
}

static int env_record(char **buf, size_t *len, const char *name, size_t name_len, json_t *v)
{
        size_t value_len = json_is_string(v) ? json_string_length(v) : 0;
        _cleanup_free_ char *rec = malloc(name_len + 1 + value_len);
        if (!rec)
                return -ENOMEM;
        memcpy(rec, name, name_len);
        rec[name_len] = '\0';
        if (value_len)
                memcpy(rec + name_len + 1, json_string_value(v), value_len);
        return shell_blob_add(buf, len, SHELL_BLOB_ENV, rec, name_len + 1 + value_len);
}

static int run_blob(const struct run_body *b, char **buf, size_t *len)
{
        int r = shell_blob_add(buf, len, SHELL_BLOB_SCRIPT, b->script, b->script_len);
        if (r == 0 && b->cwd && b->cwd_len > 0)
                r = shell_blob_add(buf, len, SHELL_BLOB_CWD, b->cwd, b->cwd_len);
        for (void *it = b->env ? json_object_iter(b->env) : NULL; r == 0 && it;
             it = json_object_iter_next(b->env, it))
                r = env_record(buf, len, json_object_iter_key(it), json_object_iter_key_len(it),
                               json_object_iter_value(it));
        return r;
}

/* The blob, or the error a failure to build it makes. */
static int blob_result(int r, char *buf, size_t len, char **ret, size_t *ret_len,
                       struct shell_error *e)
{
        if (r < 0) {
                free(buf);
                if (r == -E2BIG)
                        return fail(e, 413, "request_too_large",
                                    "script, cwd and env together larger than %u bytes",
                                    SHELL_BLOB_MAX);
                return out_of_memory(e);
        }
        *ret = buf;
        *ret_len = len;
        return 0;
}

static int run_check(const struct run_body *b, struct shell_req *req, struct shell_error *e)
{
        if (!b->script || b->script_len == 0)
                return fail(e, 400, "invalid_request", "script is required");
        int r = check_env(b->env, e);
        if (r == 0)
                r = check_mode(b, req, e);
        if (r == 0)
                r = check_terminal(b, req, e);
        if (r == 0)
                r = check_session(b, req, e);
        if (r == 0)
                r = check_cwd(b, e);
        return r;
}

int shell_decode_run(const char *body, size_t len, struct shell_req *req, char **ret_blob,
                     size_t *ret_blob_len, struct shell_error *e)
{
        json_auto_t *o = NULL;
        int r = body_parse(body, len, &o);
        if (r == -EILSEQ)
                return fail(e, 422, "validation_error", "env entries must not contain NUL");
        if (r < 0)
                return r == -ENOMEM ? out_of_memory(e) : invalid_body(e);
        struct run_body b;
        if (run_body_read(o, &b) < 0)
                return invalid_body(e);
        r = run_check(&b, req, e);
        if (r < 0)
                return r;
        req->offset = 0;
        req->timeout_ms = timeout_of(b.timeout, SHELL_TIMEOUT_DEFAULT_MS);
        req->output_limit = output_limit_of(b.output_limit, SHELL_OUTPUT_LIMIT_MAX);
        req->idle_flush_ms = idle_flush_of(b.idle_flush);
        char *buf = NULL;
        size_t blen = 0;
        r = run_blob(&b, &buf, &blen);
        return blob_result(r, buf, blen, ret_blob, ret_blob_len, e);
}

/* ---- wait, input, terminate ---------------------------------------------- */

struct window_body {
        int64_t offset, output_limit;
        double timeout, idle_flush;
};

static int window_read(json_t *o, struct window_body *w)
{
        *w = (struct window_body){0};
        if (get_int(o, "offset", &w->offset) < 0 ||
            get_int(o, "output_limit", &w->output_limit) < 0 ||
            get_number(o, "timeout", &w->timeout) < 0 ||
            get_number(o, "idle_flush_seconds", &w->idle_flush) < 0)
                return -EINVAL;
        return 0;
}

/* timeout_unset: wait answers at once (0) without a timeout, input waits
 * the default. */
static int window_set(const struct window_body *w, uint32_t timeout_unset, struct shell_req *req,
                      struct shell_error *e)
{
        int r = offset_of(w->offset, req, e);
        if (r < 0)
                return r;
        req->timeout_ms = timeout_of(w->timeout, timeout_unset);
        req->output_limit = output_limit_of(w->output_limit, SHELL_OUTPUT_LIMIT_MAX);
        req->idle_flush_ms = idle_flush_of(w->idle_flush);
        return 0;
}

int shell_decode_wait(const char *body, size_t len, struct shell_req *req, struct shell_error *e)
{
        json_auto_t *o = NULL;
        int r = body_parse(body, len, &o);
        if (r < 0)
                return r == -ENOMEM ? out_of_memory(e) : invalid_body(e);
        struct window_body w;
        if (window_read(o, &w) < 0)
                return invalid_body(e);
        return window_set(&w, 0, req, e);
}

int shell_decode_input(const char *body, size_t len, struct shell_req *req, char **ret_blob,
                       size_t *ret_blob_len, struct shell_error *e)
{
        json_auto_t *o = NULL;
        int r = body_parse(body, len, &o);
        if (r < 0)
                return r == -ENOMEM ? out_of_memory(e) : invalid_body(e);
        struct window_body w;
        const char *text = "";
        size_t text_len = 0;
        if (window_read(o, &w) < 0 || get_text(o, "text", &text, &text_len) < 0)
                return invalid_body(e);
        r = window_set(&w, SHELL_TIMEOUT_DEFAULT_MS, req, e);
        if (r < 0)
                return r;
        char *buf = NULL;
        size_t blen = 0;
        r = shell_blob_add(&buf, &blen, SHELL_BLOB_TEXT, text, text_len);
        return blob_result(r, buf, blen, ret_blob, ret_blob_len, e);
}

static uint32_t grace_of(double seconds)
{
        return seconds > 0 ? ms_of(seconds, SHELL_GRACE_MAX_MS) : 0;
}

void shell_decode_terminate(const char *body, size_t len, struct shell_req *req)
{
        json_auto_t *o = NULL;
        double grace = SHELL_GRACE_DEFAULT_MS / 1000.0;
        if (body_parse(body, len, &o) < 0 || get_number(o, "grace_seconds", &grace) < 0)
                grace = SHELL_GRACE_DEFAULT_MS / 1000.0;
        req->grace_ms = grace_of(grace);
}

/* ---- prepare ----------------------------------------------------------------- */

/* A string, null or absent (Go leaves the field empty). */
static bool text_or_null(json_t *v)
{
        return !v || json_is_null(v) || json_is_string(v);
}

/* One credential as Go decodes it into the reference's struct: value is
 * raw JSON (anything), the names strings, env_names a list of strings,
 * inject an object whose type is a string. */
static bool credential_ok(json_t *c)
{
        if (json_is_null(c))
                return true;
        if (!json_is_object(c) || !text_or_null(field(c, "provider")) ||
            !text_or_null(field(c, "name")) || !text_or_null(field(c, "env_name")))
                return false;
        json_t *names = field(c, "env_names"), *inject = field(c, "inject"), *v;
        size_t i;
        if (names && !json_is_null(names) && !json_is_array(names))
                return false;
        json_array_foreach(names, i, v)
        {
                if (!json_is_string(v) && !json_is_null(v))
                        return false;
        }
        if (!inject || json_is_null(inject))
                return true;
        return json_is_object(inject) && text_or_null(field(inject, "type"));
}

int shell_decode_prepare(const char *body, size_t len, struct shell_error *e)
{
        json_auto_t *o = NULL;
        int r = body_parse(body, len, &o);
        if (r < 0)
                return r == -ENOMEM ? out_of_memory(e) : invalid_body(e);
        const char *session = "";
        size_t session_len = 0;
        json_t *creds = field(o, "credentials"), *c;
        size_t i;
        if (get_text(o, "session_id", &session, &session_len) < 0 ||
            (creds && !json_is_null(creds) && !json_is_array(creds)))
                return invalid_body(e);
        json_array_foreach(creds, i, c)
        {
                if (!credential_ok(c))
                        return invalid_body(e);
        }
        if (session_len == 0)
                return validation(e, "session_id is required");
        if (json_array_size(creds) == 0)
                return fail(e, 400, "invalid_request", "credentials must not be empty");
        /* The reference checks the session id's form only after this,
         * with its proxy running. */
        return fail(e, 409, "egressproxy_disabled",
                    "Egress proxy is not enabled: lockbox runs no credential-injecting proxy, "
                    "so credentials are neither stored nor injected");
}

/* ---- query strings -------------------------------------------------------- */

/* Go's strconv.Atoi on a 64-bit host: an optional sign, decimal digits,
 * nothing else. */
static bool parse_atoi(const char *s, int64_t *ret)
{
        if (!s)
                return false;
        bool neg = *s == '-';
        if (*s == '+' || *s == '-')
                s++;
        if (!*s)
                return false;
        int64_t v = 0;
        for (; *s; s++) {
                if (*s < '0' || *s > '9' || v > (INT64_MAX - (*s - '0')) / 10)
                        return false;
                v = v * 10 + (*s - '0');
        }
        *ret = neg ? -v : v;
        return true;
}

/* Go's strconv.ParseFloat, near enough: the whole text a number (strtod's
 * spellings, no leading blank), not out of range, not NaN. */
static bool parse_float(const char *s, double *ret)
{
        if (!s || !*s || *s == ' ' || (*s >= '\t' && *s <= '\r'))
                return false;
        char *end;
        errno = 0;
        double v = strtod(s, &end);
        if (*end || v != v || (errno == ERANGE && v != 0))
                return false;
        *ret = v;
        return true;
}

void shell_query_tail(const char *output_limit, struct shell_req *req)
{
        int64_t v = 0;
        if (!parse_atoi(output_limit, &v))
                v = 0;
        req->output_limit = output_limit_of(v, SHELL_TAIL_LIMIT_MAX);
}

void shell_query_list(const char *status, const char *limit, struct shell_req *req)
{
        int64_t v = 0;
        if (!parse_atoi(limit, &v) || v <= 0)
                v = SHELL_LIST_DEFAULT;
        req->list_limit = v > SHELL_LIST_MAX ? SHELL_LIST_MAX : (uint32_t)v;
        if (!status || !*status)
                req->status_filter = -1;
        else {
                int s = shell_status_parse(status);
                req->status_filter = s >= 0 ? s : -2;
        }
}

void shell_query_delete(const char *force, const char *grace_seconds, struct shell_req *req)
{
        double grace;
        if (!parse_float(grace_seconds, &grace))
                grace = SHELL_GRACE_DEFAULT_MS / 1000.0;
        req->force = force && strcmp(force, "true") == 0;
        req->grace_ms = grace_of(grace);
}

int shell_decode_snapshot_save(const char *body, size_t len, char **ret_blob, size_t *ret_blob_len,
                               struct shell_error *e)
{
        *ret_blob = NULL;
        *ret_blob_len = 0;
        if (len == 0) /* no body: no excludes */
                return 0;
        json_t *o = NULL;
        int r = body_parse(body, len, &o);
        if (r == -ENOMEM)
                return out_of_memory(e);
        if (r < 0)
                return invalid_body(e);
        json_t *v = field(o, "excludes");
        char *buf = NULL;
        size_t blen = 0;
        if (v && !json_is_null(v) && !json_is_array(v))
                r = -EINVAL;
        for (size_t i = 0; r == 0 && json_is_array(v) && i < json_array_size(v); i++) {
                json_t *p = json_array_get(v, i);
                if (json_is_null(p)) /* Go leaves the element "" */
                        continue;
                if (!json_is_string(p) || memchr(json_string_value(p), '\0', json_string_length(p)))
                        r = -EINVAL;
                else
                        r = shell_blob_add(&buf, &blen, SHELL_BLOB_EXCLUDE, json_string_value(p),
                                           json_string_length(p));
        }
        json_decref(o);
        if (r == -EINVAL) {
                free(buf);
                return invalid_body(e);
        }
        return blob_result(r, buf, blen, ret_blob, ret_blob_len, e);
}
