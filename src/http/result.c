/* JSON bodies lockbox sends (see result.h): the reference's envelope and the
 * run result, whose "error" text reproduces dify-sandbox's composition.
 * Every string goes through utf8_sanitize() and json_stringn(), so program
 * output with invalid bytes or NULs still yields valid JSON (\u0000). */
#include "http/result.h"

#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "base/strbuf.h"
#include "base/util.h"

/* Reason lines that take no argument, indexed by enum run_reason. */
static const char *const reason_lines[] = {
    [REASON_TIMEOUT] = "error: timeout",
    [REASON_MEMORY] = "error: memory limit exceeded",
    [REASON_OUTPUT] = "error: output limit exceeded",
    [REASON_CPU] = "error: cpu time limit exceeded",
};

static const char *const status_names[] = {
    [REASON_NONE] = "runtime_error", /* "ok" when exit_code is 0 */
    [REASON_TIMEOUT] = "timeout",     [REASON_SYSCALL] = "syscall_denied",
    [REASON_MEMORY] = "memory_limit", [REASON_OUTPUT] = "output_limit",
    [REASON_CPU] = "timeout",         [REASON_SIGNAL] = "runtime_error",
};

static void jsonref_freep(json_t **j)
{
        json_decref(*j);
}

/* Set key to a JSON string of len bytes made valid UTF-8. */
static int object_set_text(json_t *obj, const char *key, const char *s, size_t len)
{
        size_t clean_len;
        _cleanup_free_ char *clean = utf8_sanitize(s, len, &clean_len);
        if (!clean)
                return -ENOMEM;
        return json_object_set_new(obj, key, json_stringn(clean, clean_len)) < 0 ? -ENOMEM : 0;
}

static int object_set_int(json_t *obj, const char *key, json_int_t v)
{
        return json_object_set_new(obj, key, json_integer(v)) < 0 ? -ENOMEM : 0;
}

static char *object_dump(json_t *obj)
{
        return json_dumps(obj, JSON_COMPACT);
}

char *result_error_json(int code, const char *message)
{
        _cleanup_(jsonref_freep) json_t *obj = json_object();
        if (!obj || object_set_int(obj, "code", code) < 0 ||
            object_set_text(obj, "message", message ? message : "", message ? strlen(message) : 0) <
                0 ||
            json_object_set_new(obj, "data", json_null()) < 0)
                return NULL;
        return object_dump(obj);
}

static bool reason_has_line(const struct proto_result *r)
{
        return (r->reason < ELEMENTSOF(reason_lines) && reason_lines[r->reason]) ||
               r->reason == REASON_SYSCALL || r->reason == REASON_SIGNAL;
}

/* The jailer's name may fill the array without a NUL; then the number. */
static int reason_syscall(struct strbuf *sb, const struct proto_result *r)
{
        size_t n = strnlen(r->syscall_name, sizeof(r->syscall_name));
        if (n > 0)
                return strbuf_appendf(
                    sb, "error: operation not permitted: syscall '%.*s' is not allowed", (int)n,
                    r->syscall_name);
        return strbuf_appendf(
            sb, "error: operation not permitted: syscall '#%" PRId32 "' is not allowed",
            r->syscall_nr);
}

/* sigabbrev_np() came with glibc 2.32; elsewhere the number is shown. */
static const char *signal_abbrev(int sig)
{
#if defined(__GLIBC__)
#if __GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 32)
        return sigabbrev_np(sig);
#endif
#endif
        return NULL;
}

static int reason_signal(struct strbuf *sb, const struct proto_result *r)
{
        const char *abbrev = signal_abbrev(r->signal);
        if (abbrev)
                return strbuf_appendf(sb, "error: killed by signal SIG%s", abbrev);
        return strbuf_appendf(sb, "error: killed by signal %" PRId32, r->signal);
}

/* Append the reason line (no newline); callers check reason_has_line(). */
static int reason_append(struct strbuf *sb, const struct proto_result *r)
{
        if (r->reason == REASON_SYSCALL)
                return reason_syscall(sb, r);
        if (r->reason == REASON_SIGNAL)
                return reason_signal(sb, r);
        return strbuf_appends(sb, reason_lines[r->reason]);
}

char *result_reason_text(const struct proto_result *r)
{
        struct strbuf sb;
        strbuf_init(&sb, 0);
        if (!reason_has_line(r) || reason_append(&sb, r) < 0) {
                strbuf_free(&sb);
                return NULL;
        }
        return strbuf_steal(&sb, NULL);
}

const char *result_status_name(const struct proto_result *r)
{
        if (r->reason == REASON_NONE && r->exit_code == 0)
                return "ok";
        if (r->reason < ELEMENTSOF(status_names))
                return status_names[r->reason];
        return "runtime_error";
}

/* The "error" text as raw bytes (stderr may hold NULs and invalid UTF-8):
 * "process exited with code N", then "\n" + reason + "\n", then stderr on
 * a line of its own, as dify-sandbox composes it since 0.2.15. A clean exit
 * gives "", or with stderr_is_error the stderr alone: dify-sandbox 0.2.15
 * and earlier returned stderr as "error" whatever the exit code. */
static int error_text_build(const struct run_outcome *o, bool stderr_is_error, struct strbuf *sb)
{
        const struct proto_result *r = &o->res;
        if (r->exit_code == 0 && r->reason == REASON_NONE) {
                if (!stderr_is_error || o->err.len == 0)
                        return 0;
                return strbuf_append(sb, o->err.data, o->err.len) < 0 ? -ENOMEM : 0;
        }
        if (strbuf_appendf(sb, "process exited with code %" PRId32, r->exit_code) < 0)
                return -ENOMEM;
        if (reason_has_line(r) && (strbuf_appends(sb, "\n") < 0 || reason_append(sb, r) < 0 ||
                                   strbuf_appends(sb, "\n") < 0))
                return -ENOMEM;
        if (o->err.len == 0)
                return 0;
        if (sb->data[sb->len - 1] != '\n' && strbuf_appends(sb, "\n") < 0)
                return -ENOMEM;
        return strbuf_append(sb, o->err.data, o->err.len) < 0 ? -ENOMEM : 0;
}

/* The sanitized "error" text and its length (it may contain NULs). */
static char *error_text(const struct run_outcome *o, bool stderr_is_error, size_t *ret_len)
{
        struct strbuf sb;
        strbuf_init(&sb, 0);
        char *text = NULL;
        if (error_text_build(o, stderr_is_error, &sb) == 0)
                text = utf8_sanitize(sb.data, sb.len, ret_len);
        strbuf_free(&sb);
        return text;
}

char *result_error_text(const struct run_outcome *o, bool stderr_is_error)
{
        return error_text(o, stderr_is_error, NULL);
}

static json_int_t clamp_u64(uint64_t v)
{
        return v > (uint64_t)LLONG_MAX ? LLONG_MAX : (json_int_t)v;
}

static int run_data_fill(json_t *data, const struct run_outcome *o, bool stderr_is_error)
{
        const struct proto_result *r = &o->res;
        size_t err_len;
        _cleanup_free_ char *err = error_text(o, stderr_is_error, &err_len);
        if (!err)
                return -ENOMEM;
        if (object_set_text(data, "stdout", o->out.data, o->out.len) < 0 ||
            object_set_text(data, "stderr", o->err.data, o->err.len) < 0 ||
            json_object_set_new(data, "error", json_stringn(err, err_len)) < 0 ||
            object_set_int(data, "exit_code", r->exit_code) < 0 ||
            json_object_set_new(data, "status", json_string(result_status_name(r))) < 0 ||
            object_set_int(data, "wall_ms", clamp_u64(r->wall_us / 1000)) < 0 ||
            object_set_int(data, "cpu_ms", clamp_u64(r->cpu_us / 1000)) < 0 ||
            object_set_int(data, "memory_peak_bytes", clamp_u64(r->memory_peak)) < 0 ||
            json_object_set_new(data, "truncated", json_boolean(o->truncated)) < 0 ||
            json_object_set_new(data, "warm", json_boolean(o->warm)) < 0)
                return -ENOMEM;
        return 0;
}

static char *run_done_json(const struct run_outcome *o, bool stderr_is_error)
{
        _cleanup_(jsonref_freep) json_t *obj = json_object();
        _cleanup_(jsonref_freep) json_t *data = json_object();
        if (!obj || !data || run_data_fill(data, o, stderr_is_error) < 0 ||
            object_set_int(obj, "code", 0) < 0 ||
            json_object_set_new(obj, "message", json_string("success")) < 0 ||
            json_object_set(obj, "data", data) < 0)
                return NULL;
        return object_dump(obj);
}

static char *run_failure_json(const struct proto_result *r)
{
        switch (r->status) {
        case RUN_STATUS_NO_IDENTITY:
                return result_error_json(
                    -429, "no sandbox identity free: all UIDs of the pool are in use");
        case RUN_STATUS_BUSY:
                /* The jailer names the reason when it is not plain capacity. */
                if (r->message[0] && memchr(r->message, 0, sizeof(r->message)))
                        return result_error_json(-503, r->message);
                return result_error_json(-503, "Too many requests");
        default:
                break;
        }
        struct strbuf sb;
        strbuf_init(&sb, 0);
        char *json = NULL;
        int r1 =
            r->status == RUN_STATUS_INTERNAL
                ? strbuf_appendf(&sb, "sandbox failure: %.*s",
                                 (int)strnlen(r->message, sizeof(r->message)), r->message)
                : strbuf_appendf(&sb, "sandbox failure: unknown result status %" PRIu32, r->status);
        if (r1 == 0)
                json = result_error_json(-500, sb.data);
        strbuf_free(&sb);
        return json;
}

char *result_run_json(const struct run_outcome *o, bool stderr_is_error)
{
        if (o->res.status == RUN_STATUS_DONE)
                return run_done_json(o, stderr_is_error);
        return run_failure_json(&o->res);
}
