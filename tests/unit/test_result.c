/* Response bodies: the error envelope, the reason lines and status names
 * for every reason, the exact composition of the "error" text, and the run
 * JSON with its key order, UTF-8 repair and \u0000 for NUL bytes. */
#include <jansson.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>

#include "http/result.h"
#include "test.h"

static struct run_outcome outcome(int32_t exit_code, enum run_reason reason, const char *out,
                                  const char *err_text)
{
        struct run_outcome o = {0};
        strbuf_init(&o.out, 0);
        strbuf_init(&o.err, 0);
        if (out)
                strbuf_appends(&o.out, out);
        if (err_text)
                strbuf_appends(&o.err, err_text);
        o.res.status = RUN_STATUS_DONE;
        o.res.exit_code = exit_code;
        o.res.reason = reason;
        return o;
}

static struct proto_result reason_only(enum run_reason reason)
{
        return (struct proto_result){.reason = reason, .exit_code = -1};
}

/* The value of data.<key> as compact JSON text (caller frees). */
static char *data_field(const char *json, const char *key)
{
        json_t *root = json_loads(json, 0, NULL);
        json_t *v = json_object_get(json_object_get(root, "data"), key);
        char *s = v ? json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
        json_decref(root);
        return s;
}

TEST(result_error_json_envelope)
{
        char *j = result_error_json(-400, "code: must be a non-empty string");
        EXPECT_STR_EQ(
            j, "{\"code\":-400,\"message\":\"code: must be a non-empty string\",\"data\":null}");
        free(j);
        j = result_error_json(-503, "Too many requests");
        EXPECT_STR_EQ(j, "{\"code\":-503,\"message\":\"Too many requests\",\"data\":null}");
        free(j);
}

TEST(result_error_json_escapes_and_utf8)
{
        char *j = result_error_json(-400, "near '\"x\\'\n\t caf\xc3\xa9 \xff");
        /* escaped quotes and controls, raw UTF-8 (no \u escapes), U+FFFD for 0xff */
        EXPECT_STR_EQ(j, "{\"code\":-400,\"message\":\"near '\\\"x\\\\'\\n\\t caf\xc3\xa9 "
                         "\xef\xbf\xbd\",\"data\":null}");
        free(j);
        j = result_error_json(-500, NULL);
        EXPECT_STR_EQ(j, "{\"code\":-500,\"message\":\"\",\"data\":null}");
        free(j);
}

TEST(result_reason_text_each_reason)
{
        struct proto_result r = reason_only(REASON_NONE);
        EXPECT_TRUE(result_reason_text(&r) == NULL);
        static const struct {
                enum run_reason reason;
                const char *text;
        } fixed[] = {
            {REASON_TIMEOUT, "error: timeout"},
            {REASON_MEMORY, "error: memory limit exceeded"},
            {REASON_OUTPUT, "error: output limit exceeded"},
            {REASON_CPU, "error: cpu time limit exceeded"},
        };
        for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++) {
                r = reason_only(fixed[i].reason);
                char *t = result_reason_text(&r);
                EXPECT_STR_EQ(t, fixed[i].text);
                free(t);
        }
        r = reason_only(99);
        EXPECT_TRUE(result_reason_text(&r) == NULL);
}

TEST(result_reason_text_syscall)
{
        struct proto_result r = reason_only(REASON_SYSCALL);
        r.syscall_nr = 41;
        snprintf(r.syscall_name, sizeof(r.syscall_name), "socket");
        char *t = result_reason_text(&r);
        EXPECT_STR_EQ(t, "error: operation not permitted: syscall 'socket' is not allowed");
        free(t);
        r.syscall_name[0] = '\0';
        t = result_reason_text(&r);
        EXPECT_STR_EQ(t, "error: operation not permitted: syscall '#41' is not allowed");
        free(t);
        /* a name that fills the array without a NUL is bounded by it */
        memset(r.syscall_name, 'a', sizeof(r.syscall_name));
        t = result_reason_text(&r);
        EXPECT_TRUE(t != NULL);
        EXPECT_INT_EQ(strlen(t),
                      strlen("error: operation not permitted: syscall '' is not allowed") +
                          sizeof(r.syscall_name));
        free(t);
}

TEST(result_reason_text_signal)
{
        struct proto_result r = reason_only(REASON_SIGNAL);
        r.signal = SIGKILL;
        char *t = result_reason_text(&r);
        EXPECT_STR_EQ(t, "error: killed by signal SIGKILL");
        free(t);
        r.signal = SIGSEGV;
        t = result_reason_text(&r);
        EXPECT_STR_EQ(t, "error: killed by signal SIGSEGV");
        free(t);
        r.signal = 200; /* no name: the number */
        t = result_reason_text(&r);
        EXPECT_STR_EQ(t, "error: killed by signal 200");
        free(t);
}

TEST(result_status_names)
{
        struct proto_result r = {.reason = REASON_NONE, .exit_code = 0};
        EXPECT_STR_EQ(result_status_name(&r), "ok");
        r.exit_code = 1;
        EXPECT_STR_EQ(result_status_name(&r), "runtime_error");
        r.exit_code = -1;
        EXPECT_STR_EQ(result_status_name(&r), "runtime_error");
        static const struct {
                enum run_reason reason;
                const char *name;
        } rows[] = {
            {REASON_TIMEOUT, "timeout"},
            {REASON_CPU, "timeout"},
            {REASON_SYSCALL, "syscall_denied"},
            {REASON_MEMORY, "memory_limit"},
            {REASON_OUTPUT, "output_limit"},
            {REASON_SIGNAL, "runtime_error"},
            {77, "runtime_error"},
        };
        for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
                r = reason_only(rows[i].reason);
                EXPECT_STR_EQ(result_status_name(&r), rows[i].name);
                r.exit_code = 0; /* the reason decides, whatever the exit code */
                EXPECT_STR_EQ(result_status_name(&r), rows[i].name);
        }
}

static const char *error_text_of(int32_t exit_code, enum run_reason reason, const char *err_text)
{
        static char buf[512];
        struct run_outcome o = outcome(exit_code, reason, NULL, err_text);
        char *t = result_error_text(&o, false);
        snprintf(buf, sizeof(buf), "%s", t ? t : "(null)");
        free(t);
        run_outcome_free(&o);
        return buf;
}

TEST(result_error_text_composition)
{
        EXPECT_STR_EQ(error_text_of(0, REASON_NONE, NULL), "");
        EXPECT_STR_EQ(error_text_of(0, REASON_NONE, "warning: x\n"), "");
        EXPECT_STR_EQ(error_text_of(1, REASON_NONE, NULL), "process exited with code 1");
        EXPECT_STR_EQ(error_text_of(1, REASON_NONE, "Traceback (most recent call last):\n  x\n"),
                      "process exited with code 1\nTraceback (most recent call last):\n  x\n");
        EXPECT_STR_EQ(error_text_of(-1, REASON_TIMEOUT, NULL),
                      "process exited with code -1\nerror: timeout\n");
        EXPECT_STR_EQ(error_text_of(-1, REASON_TIMEOUT, "partial\n"),
                      "process exited with code -1\nerror: timeout\npartial\n");
        EXPECT_STR_EQ(error_text_of(-1, REASON_MEMORY, "MemoryError"),
                      "process exited with code -1\nerror: memory limit exceeded\nMemoryError");
        EXPECT_STR_EQ(error_text_of(-1, REASON_OUTPUT, NULL),
                      "process exited with code -1\nerror: output limit exceeded\n");
        EXPECT_STR_EQ(error_text_of(-1, REASON_CPU, NULL),
                      "process exited with code -1\nerror: cpu time limit exceeded\n");
        EXPECT_STR_EQ(error_text_of(0, REASON_OUTPUT, NULL),
                      "process exited with code 0\nerror: output limit exceeded\n");
        EXPECT_STR_EQ(error_text_of(137, REASON_NONE, "x"), "process exited with code 137\nx");
}

static const char *compat_error_text_of(int32_t exit_code, enum run_reason reason,
                                        const char *err_text)
{
        static char buf[512];
        struct run_outcome o = outcome(exit_code, reason, NULL, err_text);
        char *t = result_error_text(&o, true);
        snprintf(buf, sizeof(buf), "%s", t ? t : "(null)");
        free(t);
        run_outcome_free(&o);
        return buf;
}

/* compat.stderr_is_error: a clean exit's stderr is the error, as in
 * dify-sandbox 0.2.15; any other run's text does not change. */
TEST(result_error_text_stderr_is_error)
{
        EXPECT_STR_EQ(compat_error_text_of(0, REASON_NONE, NULL), "");
        EXPECT_STR_EQ(compat_error_text_of(0, REASON_NONE, ""), "");
        EXPECT_STR_EQ(compat_error_text_of(0, REASON_NONE, "warning: x\n"), "warning: x\n");
        EXPECT_STR_EQ(compat_error_text_of(0, REASON_NONE, "bad \xff"), "bad \xef\xbf\xbd");
        EXPECT_STR_EQ(compat_error_text_of(1, REASON_NONE, "Traceback\n"),
                      "process exited with code 1\nTraceback\n");
        EXPECT_STR_EQ(compat_error_text_of(-1, REASON_TIMEOUT, "partial\n"),
                      "process exited with code -1\nerror: timeout\npartial\n");
        EXPECT_STR_EQ(compat_error_text_of(0, REASON_OUTPUT, "x"),
                      "process exited with code 0\nerror: output limit exceeded\nx");
}

TEST(result_run_json_stderr_is_error)
{
        struct run_outcome o = outcome(0, REASON_NONE, "hi\n", "careful\n");
        char *j = result_run_json(&o, true);
        EXPECT_STR_CONTAINS(j, "\"stderr\":\"careful\\n\",\"error\":\"careful\\n\","
                               "\"exit_code\":0,\"status\":\"ok\"");
        free(j);
        j = result_run_json(&o, false);
        EXPECT_STR_CONTAINS(j, "\"stderr\":\"careful\\n\",\"error\":\"\",\"exit_code\":0,");
        free(j);
        run_outcome_free(&o);
}

TEST(result_error_text_syscall_and_signal)
{
        struct run_outcome o = outcome(-1, REASON_SYSCALL, NULL, "Bad system call\n");
        snprintf(o.res.syscall_name, sizeof(o.res.syscall_name), "connect");
        char *t = result_error_text(&o, false);
        EXPECT_STR_EQ(
            t, "process exited with code -1\nerror: operation not permitted: syscall 'connect' is "
               "not allowed\nBad system call\n");
        free(t);
        o.res.reason = REASON_SIGNAL;
        o.res.signal = SIGABRT;
        t = result_error_text(&o, false);
        EXPECT_STR_EQ(
            t, "process exited with code -1\nerror: killed by signal SIGABRT\nBad system call\n");
        free(t);
        run_outcome_free(&o);
}

TEST(result_error_text_sanitizes_stderr)
{
        EXPECT_STR_EQ(error_text_of(2, REASON_NONE, "bad \xff byte"),
                      "process exited with code 2\nbad \xef\xbf\xbd byte");
}

TEST(result_run_json_success_exact)
{
        struct run_outcome o = outcome(0, REASON_NONE, "hi\n", "");
        o.res.wall_us = 12345;
        o.res.cpu_us = 999;
        o.res.memory_peak = 1048576;
        char *j = result_run_json(&o, false);
        EXPECT_STR_EQ(
            j, "{\"code\":0,\"message\":\"success\",\"data\":{\"stdout\":\"hi\\n\",\"stderr\":\"\","
               "\"error\":\"\",\"exit_code\":0,\"status\":\"ok\",\"wall_ms\":12,\"cpu_ms\":0,"
               "\"memory_peak_bytes\":1048576,\"truncated\":false,\"warm\":false}}");
        free(j);
        run_outcome_free(&o);
}

TEST(result_run_json_empty_buffers)
{
        struct run_outcome o = {0}; /* strbufs never allocated: data is NULL */
        char *j = result_run_json(&o, false);
        EXPECT_STR_CONTAINS(
            j, "\"data\":{\"stdout\":\"\",\"stderr\":\"\",\"error\":\"\",\"exit_code\":0,");
        free(j);
}

TEST(result_run_json_timeout_exact)
{
        struct run_outcome o = outcome(-1, REASON_TIMEOUT, "tick\n", "Killed\n");
        o.res.wall_us = 5000999;
        o.res.cpu_us = 4990000;
        o.res.memory_peak = 7;
        char *j = result_run_json(&o, false);
        EXPECT_STR_EQ(
            j,
            "{\"code\":0,\"message\":\"success\",\"data\":{\"stdout\":\"tick\\n\",\"stderr\":"
            "\"Killed\\n\",\"error\":\"process exited with code -1\\nerror: timeout\\nKilled\\n\","
            "\"exit_code\":-1,\"status\":\"timeout\",\"wall_ms\":5000,\"cpu_ms\":4990,"
            "\"memory_peak_bytes\":7,\"truncated\":false,\"warm\":false}}");
        free(j);
        run_outcome_free(&o);
}

TEST(result_run_json_nul_survives)
{
        struct run_outcome o = outcome(1, REASON_NONE, NULL, NULL);
        strbuf_append(&o.out, "a\0b", 3);
        strbuf_append(&o.err, "e\0f", 3);
        char *j = result_run_json(&o, false);
        EXPECT_STR_CONTAINS(j, "\"stdout\":\"a\\u0000b\"");
        EXPECT_STR_CONTAINS(j, "\"stderr\":\"e\\u0000f\"");
        EXPECT_STR_CONTAINS(j, "\"error\":\"process exited with code 1\\ne\\u0000f\"");
        /* and it parses back to the same three bytes */
        json_t *root = json_loads(j, JSON_ALLOW_NUL, NULL);
        json_t *out = json_object_get(json_object_get(root, "data"), "stdout");
        EXPECT_TRUE(out != NULL);
        EXPECT_MEM_EQ(json_string_value(out), json_string_length(out), "a\0b", 3);
        json_decref(root);
        free(j);
        run_outcome_free(&o);
}

TEST(result_run_json_utf8)
{
        struct run_outcome o =
            outcome(0, REASON_NONE, "caf\xc3\xa9 \xf0\x9f\x98\x80 \xff\xfe", "\xc3");
        char *j = result_run_json(&o, false);
        char *out = data_field(j, "stdout");
        char *err = data_field(j, "stderr");
        EXPECT_STR_EQ(out, "\"caf\xc3\xa9 \xf0\x9f\x98\x80 \xef\xbf\xbd\xef\xbf\xbd\"");
        EXPECT_STR_EQ(err, "\"\xef\xbf\xbd\"");
        free(out);
        free(err);
        free(j);
        run_outcome_free(&o);
}

TEST(result_run_json_limits_and_flags)
{
        struct run_outcome o = outcome(-1, REASON_OUTPUT, "xxxx", NULL);
        o.truncated = true;
        o.res.memory_peak = UINT64_MAX;
        o.res.wall_us = UINT64_MAX;
        char *j = result_run_json(&o, false);
        EXPECT_STR_CONTAINS(
            j, "\"error\":\"process exited with code -1\\nerror: output limit exceeded\\n\"");
        EXPECT_STR_CONTAINS(j, "\"status\":\"output_limit\"");
        EXPECT_STR_CONTAINS(j, "\"wall_ms\":18446744073709551,");
        EXPECT_STR_CONTAINS(j, "\"memory_peak_bytes\":9223372036854775807,");
        EXPECT_STR_CONTAINS(j, "\"truncated\":true,\"warm\":false}}");
        free(j);
        run_outcome_free(&o);
}

TEST(result_run_json_statuses)
{
        struct {
                enum run_reason reason;
                const char *status;
        } rows[] = {
            {REASON_SYSCALL, "\"status\":\"syscall_denied\""},
            {REASON_MEMORY, "\"status\":\"memory_limit\""},
            {REASON_CPU, "\"status\":\"timeout\""},
            {REASON_SIGNAL, "\"status\":\"runtime_error\""},
        };
        for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
                struct run_outcome o = outcome(-1, rows[i].reason, NULL, NULL);
                char *j = result_run_json(&o, false);
                EXPECT_STR_CONTAINS(j, rows[i].status);
                free(j);
        }
}

TEST(result_run_json_failures)
{
        struct run_outcome o = outcome(0, REASON_NONE, "ignored", NULL);
        o.res.status = RUN_STATUS_NO_IDENTITY;
        char *j = result_run_json(&o, false);
        EXPECT_STR_EQ(
            j, "{\"code\":-429,\"message\":\"no sandbox identity free: all UIDs of the pool are in "
               "use\",\"data\":null}");
        free(j);
        o.res.status = RUN_STATUS_BUSY;
        j = result_run_json(&o, false);
        EXPECT_STR_EQ(j, "{\"code\":-503,\"message\":\"Too many requests\",\"data\":null}");
        free(j);
        o.res.status = RUN_STATUS_INTERNAL;
        snprintf(o.res.message, sizeof(o.res.message), "cgroup: mkdir: Permission denied");
        j = result_run_json(&o, false);
        EXPECT_STR_EQ(
            j, "{\"code\":-500,\"message\":\"sandbox failure: cgroup: mkdir: Permission denied\","
               "\"data\":null}");
        free(j);
        o.res.status = 9;
        j = result_run_json(&o, false);
        EXPECT_STR_EQ(j, "{\"code\":-500,\"message\":\"sandbox failure: unknown result status "
                         "9\",\"data\":null}");
        free(j);
        run_outcome_free(&o);
}

TEST(result_run_json_internal_message_unterminated)
{
        struct run_outcome o = outcome(0, REASON_NONE, NULL, NULL);
        o.res.status = RUN_STATUS_INTERNAL;
        memset(o.res.message, 'm', sizeof(o.res.message));
        char *j = result_run_json(&o, false);
        EXPECT_TRUE(j != NULL);
        json_t *root = json_loads(j, 0, NULL);
        const char *msg = json_string_value(json_object_get(root, "message"));
        EXPECT_TRUE(msg != NULL);
        EXPECT_INT_EQ(strlen(msg), strlen("sandbox failure: ") + sizeof(o.res.message));
        json_decref(root);
        free(j);
}
