/* Unit tests for the shell-job API's HTTP side: the decoders (every
 * refusal with its status, code and message; defaults and bounds; Go's
 * JSON rules), the encoders (field order, escapes, U+FFFD, the trailing
 * newline, null against omitted times, an empty list), the bearer check,
 * the route matcher (ids in paths, 404, 405 and its Allow), and
 * ipc_shell_call and the route handlers against a fake jailer in a forked
 * process, which reports what it saw in its exit status. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/strbuf.h"
#include "config/config.h"
#include "http/router.h"
#include "http/routes.h"
#include "http/shell.h"
#include "ipc/channel.h"
#include "ipc/shell_client.h"
#include "test.h"

#define TRACE "0af7651916cd43dd8448eb211c80319c"
#define JOB "0123456789abcdef"
#define STATE "/var/lib/lockbox/shell"

/* ---- decoding ------------------------------------------------------------ */

struct refusal {
        const char *body;
        size_t len; /* 0: strlen(body) */
        unsigned status;
        const char *code, *message;
};

static void expect_run_refused(const struct refusal *t)
{
        struct shell_req req = {0};
        struct shell_error e = {0};
        char *blob = NULL;
        size_t blob_len = 0;
        int r = shell_decode_run(t->body, t->len ? t->len : strlen(t->body), &req, &blob, &blob_len,
                                 &e);
        bool blob_made = blob != NULL;
        free(blob);
        if (r != -EINVAL)
                test_fail(__FILE__, __LINE__, "body %s: decoded (%d)", t->body, r);
        else if (e.status != t->status || strcmp(e.code, t->code) != 0 ||
                 strcmp(e.message, t->message) != 0)
                test_fail(__FILE__, __LINE__,
                          "body %s:\n    got:  %u %s \"%s\"\n    want: %u %s \"%s\"", t->body,
                          e.status, e.code, e.message, t->status, t->code, t->message);
        if (r == -EINVAL && blob_made)
                test_fail(__FILE__, __LINE__, "body %s: refused with a blob", t->body);
}

TEST(shell_run_refusals)
{
        static const struct refusal cases[] = {
            /* Go's decoder: nothing, not an object, a type mismatch */
            {"", 0, 400, "invalid_request", "Invalid JSON body"},
            {" \n ", 0, 400, "invalid_request", "Invalid JSON body"},
            {"[]", 0, 400, "invalid_request", "Invalid JSON body"},
            {"\"script\"", 0, 400, "invalid_request", "Invalid JSON body"},
            {"{\"script\":\"x\"", 0, 400, "invalid_request", "Invalid JSON body"},
            {"{\"script\":5}", 0, 400, "invalid_request", "Invalid JSON body"},
            {"{\"script\":\"x\",\"timeout\":\"5\"}", 0, 400, "invalid_request",
             "Invalid JSON body"},
            {"{\"script\":\"x\",\"output_limit\":1.5}", 0, 400, "invalid_request",
             "Invalid JSON body"},
            {"{\"script\":\"x\",\"env\":[]}", 0, 400, "invalid_request", "Invalid JSON body"},
            {"{\"script\":\"x\",\"env\":{\"A\":1}}", 0, 400, "invalid_request",
             "Invalid JSON body"},
            {"{\"script\":\"x\",\"terminal\":{\"cols\":\"80\"}}", 0, 400, "invalid_request",
             "Invalid JSON body"},
            {"{\"script\":\"x\",\"terminal\":7}", 0, 400, "invalid_request", "Invalid JSON body"},
            {"{\"script\":\"x\",\"cwd\":false}", 0, 400, "invalid_request", "Invalid JSON body"},
            /* a type error anywhere comes before the missing script */
            {"{\"mode\":3}", 0, 400, "invalid_request", "Invalid JSON body"},
            /* script */
            {"null", 0, 400, "invalid_request", "script is required"},
            {"{}", 0, 400, "invalid_request", "script is required"},
            {"{\"script\":\"\"}", 0, 400, "invalid_request", "script is required"},
            {"{\"script\":null}", 0, 400, "invalid_request", "script is required"},
            /* env */
            {"{\"script\":\"x\",\"env\":{\"\":\"v\"}}", 0, 422, "validation_error",
             "env names must be non-empty"},
            {"{\"script\":\"x\",\"env\":{\"A=B\":\"v\"}}", 0, 422, "validation_error",
             "env name must not contain '=': \"A=B\""},
            {"{\"script\":\"x\",\"env\":{\"A=\\u0001\\\"\\\\\\n\":\"v\"}}", 0, 422,
             "validation_error", "env name must not contain '=': \"A=\\x01\\\"\\\\\\n\""},
            {"{\"script\":\"x\",\"env\":{\"\xc3\xa9=\\u00a0\\u2028\":\"v\"}}", 0, 422,
             "validation_error", "env name must not contain '=': \"\xc3\xa9=\\u00a0\\u2028\""},
            {"{\"script\":\"x\",\"env\":{\"A\":\"v\\u0000w\"}}", 0, 422, "validation_error",
             "env entries must not contain NUL"},
            /* mode, terminal, session */
            {"{\"script\":\"x\",\"mode\":\"stdout\"}", 0, 422, "validation_error",
             "invalid job mode \"stdout\""},
            {"{\"script\":\"x\",\"mode\":\"PTY\"}", 0, 422, "validation_error",
             "invalid job mode \"PTY\""},
            {"{\"script\":\"x\",\"terminal\":{\"cols\":4097}}", 0, 422, "validation_error",
             "terminal cols and rows must be at most 4096"},
            {"{\"script\":\"x\",\"terminal\":{\"cols\":80,\"rows\":5000}}", 0, 422,
             "validation_error", "terminal cols and rows must be at most 4096"},
            {"{\"script\":\"x\",\"session_id\":\"a b\"}", 0, 422, "validation_error",
             "session_id must be a non-empty string of letters, digits, '-', or '_' (max 128 "
             "chars)"},
            /* cwd */
            {"{\"script\":\"x\",\"cwd\":\"/tmp\\u0000/x\"}", 0, 400, "invalid_cwd",
             "cwd is not a directory: /tmp"},
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                expect_run_refused(&cases[i]);
                if (test_failed)
                        return;
        }
        /* 129 characters of session id */
        char body[300];
        snprintf(body, sizeof(body), "{\"script\":\"x\",\"session_id\":\"%0129d\"}", 0);
        expect_run_refused(&(struct refusal){body, 0, 422, "validation_error",
                                             "session_id must be a non-empty string of letters, "
                                             "digits, '-', or '_' (max 128 chars)"});
}

/* The blob's records in order: tag and bytes. */
static void expect_record(const char *blob, size_t len, size_t *pos, uint32_t tag, const char *data,
                          size_t n)
{
        struct shell_blob_item it;
        int r = shell_blob_next(blob, len, pos, &it);
        EXPECT_INT_EQ(r, 1);
        EXPECT_INT_EQ(it.tag, tag);
        EXPECT_MEM_EQ(it.data, it.len, data, n);
}

TEST(shell_run_defaults)
{
        const char *body = "{\"script\":\"echo hi\",\"unknown\":[1,{}]}";
        struct shell_req req = {0};
        struct shell_error e;
        char *blob = NULL;
        size_t len = 0, pos = 0;
        EXPECT_ERRNO(shell_decode_run(body, strlen(body), &req, &blob, &len, &e), 0);
        EXPECT_INT_EQ(req.mode, SHELL_MODE_PTY);
        EXPECT_INT_EQ(req.cols, 200);
        EXPECT_INT_EQ(req.rows, 50);
        EXPECT_INT_EQ(req.timeout_ms, 30000);
        EXPECT_INT_EQ(req.output_limit, 16384);
        EXPECT_INT_EQ(req.idle_flush_ms, 500);
        EXPECT_INT_EQ(req.offset, 0);
        EXPECT_STR_EQ(req.session_id, "");
        expect_record(blob, len, &pos, SHELL_BLOB_SCRIPT, "echo hi", 7);
        EXPECT_INT_EQ(pos, len); /* no cwd, no env */
        free(blob);
}

TEST(shell_run_fields)
{
        const char *body = "{\"script\":\"ls\",\"cwd\":\"/home/dify/ws\",\"mode\":\"stdio\","
                           "\"env\":{\"A\":\"1\",\"B\":null,\"C\":\"x=y\"},"
                           "\"terminal\":{\"cols\":80,\"rows\":0},\"timeout\":5.0001,"
                           "\"output_limit\":99999999,\"idle_flush_seconds\":1000,"
                           "\"session_id\":\"abc_-9\"}";
        struct shell_req req = {0};
        struct shell_error e;
        char *blob = NULL;
        size_t len = 0, pos = 0;
        EXPECT_ERRNO(shell_decode_run(body, strlen(body), &req, &blob, &len, &e), 0);
        EXPECT_INT_EQ(req.mode, SHELL_MODE_STDIO);
        EXPECT_INT_EQ(req.cols, 80);
        EXPECT_INT_EQ(req.rows, 50);
        EXPECT_INT_EQ(req.timeout_ms, 5001); /* rounded up */
        EXPECT_INT_EQ(req.output_limit, 1 << 20);
        EXPECT_INT_EQ(req.idle_flush_ms, 30000);
        EXPECT_STR_EQ(req.session_id, "abc_-9");
        expect_record(blob, len, &pos, SHELL_BLOB_SCRIPT, "ls", 2);
        expect_record(blob, len, &pos, SHELL_BLOB_CWD, "/home/dify/ws", 13);
        expect_record(blob, len, &pos, SHELL_BLOB_ENV,
                      "A\0"
                      "1",
                      3);
        expect_record(blob, len, &pos, SHELL_BLOB_ENV, "B", 2);
        expect_record(blob, len, &pos, SHELL_BLOB_ENV, "C\0x=y", 5);
        EXPECT_INT_EQ(pos, len);
        free(blob);
}

/* As Go decodes: names in any case (and the long s), the last one wins,
 * bytes after the value ignored, invalid UTF-8 made U+FFFD, timeouts over
 * the bound clamped, an empty cwd and session left out. */
TEST(shell_run_go_decoding)
{
        static const struct {
                const char *body;
                const char *script;
                uint32_t timeout_ms;
        } cases[] = {
            {"{\"Script\":\"a\"}", "a", 30000},
            {"{\"SCRIPT\":\"a\",\"script\":\"b\"}", "b", 30000},
            {"{\"\xc5\xbf"
             "cript\":\"a\",\"TIMEOUT\":-4}",
             "a", 30000},
            {"{\"script\":\"a\"} trailing garbage", "a", 30000},
            {"{\"script\":\"\xff\",\"timeout\":1e9}", "\xef\xbf\xbd", 600000},
            {"{\"script\":\"a\",\"cwd\":\"\",\"session_id\":\"\",\"mode\":\"\"}", "a", 30000},
            {"{\"script\":\"a\",\"cwd\":null,\"env\":null,\"terminal\":null,\"timeout\":0}", "a",
             30000},
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                struct shell_req req = {0};
                struct shell_error e = {0};
                char *blob = NULL;
                size_t len = 0, pos = 0;
                int r =
                    shell_decode_run(cases[i].body, strlen(cases[i].body), &req, &blob, &len, &e);
                if (r != 0)
                        test_fail(__FILE__, __LINE__, "%s: %s", cases[i].body, e.message);
                EXPECT_ERRNO(r, 0);
                EXPECT_INT_EQ(req.timeout_ms, cases[i].timeout_ms);
                EXPECT_INT_EQ(req.mode, SHELL_MODE_PTY);
                expect_record(blob, len, &pos, SHELL_BLOB_SCRIPT, cases[i].script,
                              strlen(cases[i].script));
                EXPECT_INT_EQ(pos, len);
                free(blob);
        }
}

TEST(shell_wait_decoding)
{
        struct shell_req req = {0};
        struct shell_error e = {0};
        EXPECT_ERRNO(shell_decode_wait("{}", 2, &req, &e), 0);
        EXPECT_INT_EQ(req.timeout_ms, 0); /* answer at once */
        EXPECT_INT_EQ(req.offset, 0);
        EXPECT_INT_EQ(req.output_limit, 16384);
        EXPECT_INT_EQ(req.idle_flush_ms, 500);
        const char *b = "{\"timeout\":1000,\"offset\":6,\"output_limit\":0,"
                        "\"idle_flush_seconds\":0.0001}";
        EXPECT_ERRNO(shell_decode_wait(b, strlen(b), &req, &e), 0);
        EXPECT_INT_EQ(req.timeout_ms, 600000);
        EXPECT_INT_EQ(req.offset, 6);
        EXPECT_INT_EQ(req.output_limit, 16384);
        EXPECT_INT_EQ(req.idle_flush_ms, 1);
        b = "{\"offset\":-1}";
        EXPECT_ERRNO(shell_decode_wait(b, strlen(b), &req, &e), -EINVAL);
        EXPECT_INT_EQ(e.status, 400);
        EXPECT_STR_EQ(e.code, "invalid_offset");
        EXPECT_STR_EQ(e.message, "offset -1 is negative");
        static const char *const invalid[] = {"", "{\"offset\":1.5}", "{\"timeout\":true}",
                                              "{\"output_limit\":\"9\"}", "[1]"};
        for (size_t i = 0; i < sizeof(invalid) / sizeof(invalid[0]); i++) {
                e = (struct shell_error){0};
                EXPECT_ERRNO(shell_decode_wait(invalid[i], strlen(invalid[i]), &req, &e), -EINVAL);
                EXPECT_INT_EQ(e.status, 400);
                EXPECT_STR_EQ(e.code, "invalid_request");
                EXPECT_STR_EQ(e.message, "Invalid JSON body");
        }
}

static void expect_prepare(const char *body, unsigned status, const char *code, const char *message)
{
        struct shell_error e = {0};
        int r = shell_decode_prepare(body, strlen(body), &e);
        if (r != -EINVAL || e.status != status || strcmp(e.code, code) != 0 ||
            strncmp(e.message, message, strlen(message)) != 0)
                test_fail(__FILE__, __LINE__,
                          "prepare %s:\n    got:  %d %u %s \"%s\"\n    want: %u %s \"%s...\"", body,
                          r, e.status, e.code ? e.code : "", e.message, status, code, message);
}

/* The reference's order: decoding, session_id, credentials, the proxy
 * (which lockbox does not have; the session's form would come after). */
TEST(shell_prepare_decoding)
{
        static const char *const undecodable[] = {
            "",
            "[1]",
            "{\"session_id\":1,\"credentials\":[]}",
            "{\"session_id\":\"s\",\"credentials\":{}}",
            "{\"session_id\":\"s\",\"credentials\":[1]}",
            "{\"session_id\":\"s\",\"credentials\":[{\"name\":5}]}",
            "{\"session_id\":\"s\",\"credentials\":[{\"env_names\":\"X\"}]}",
            "{\"session_id\":\"s\",\"credentials\":[{\"inject\":[]}]}",
            "{\"session_id\":\"s\",\"credentials\":[{\"inject\":{\"type\":1}}]}"};
        for (size_t i = 0; i < sizeof(undecodable) / sizeof(undecodable[0]); i++)
                expect_prepare(undecodable[i], 400, "invalid_request", "Invalid JSON body");
        expect_prepare("{}", 422, "validation_error", "session_id is required");
        expect_prepare("null", 422, "validation_error", "session_id is required");
        expect_prepare("{\"session_id\":\"\",\"credentials\":[{}]}", 422, "validation_error",
                       "session_id is required");
        expect_prepare("{\"session_id\":\"s\"}", 400, "invalid_request",
                       "credentials must not be empty");
        expect_prepare("{\"session_id\":\"s\",\"credentials\":[]}", 400, "invalid_request",
                       "credentials must not be empty");
        const char *full = "{\"session_id\":\"sess-1\",\"credentials\":[{\"provider\":"
                           "\"github\",\"name\":\"token\",\"value\":{\"k\":[1]},\"inject\":{"
                           "\"type\":\"http-header\",\"config\":{\"name\":\"A\"}},"
                           "\"env_name\":\"GH\",\"env_names\":[\"X\"]},null]}";
        expect_prepare(full, 409, "egressproxy_disabled", "Egress proxy is not enabled");
        /* a session id of the wrong form meets the missing proxy first */
        expect_prepare("{\"session_id\":\"a b\",\"credentials\":[{}]}", 409, "egressproxy_disabled",
                       "Egress proxy is not enabled");
}

TEST(shell_input_decoding)
{
        struct shell_req req = {0};
        struct shell_error e = {0};
        char *blob = NULL;
        size_t len = 0, pos = 0;
        const char *b = "{\"text\":\"yes\\n\",\"offset\":17}";
        EXPECT_ERRNO(shell_decode_input(b, strlen(b), &req, &blob, &len, &e), 0);
        EXPECT_INT_EQ(req.timeout_ms, 30000); /* input waits by default */
        EXPECT_INT_EQ(req.offset, 17);
        expect_record(blob, len, &pos, SHELL_BLOB_TEXT, "yes\n", 4);
        EXPECT_INT_EQ(pos, len);
        free(blob);
        /* no text: an empty one, which still waits */
        pos = 0;
        EXPECT_ERRNO(shell_decode_input("{}", 2, &req, &blob, &len, &e), 0);
        expect_record(blob, len, &pos, SHELL_BLOB_TEXT, "", 0);
        free(blob);
        blob = NULL;
        EXPECT_ERRNO(shell_decode_input("{\"text\":1}", 10, &req, &blob, &len, &e), -EINVAL);
        EXPECT_STR_EQ(e.message, "Invalid JSON body");
        EXPECT_NULL(blob);
        EXPECT_ERRNO(shell_decode_input("{\"offset\":-9}", 13, &req, &blob, &len, &e), -EINVAL);
        EXPECT_STR_EQ(e.code, "invalid_offset");
        EXPECT_NULL(blob);
}

TEST(shell_terminate_decoding)
{
        static const struct {
                const char *body;
                uint32_t grace_ms;
        } cases[] = {
            {"", 10000},
            {"{}", 10000},
            {"{\"grace_seconds\":0}", 0},
            {"{\"grace_seconds\":2.5}", 2500},
            {"{\"grace_seconds\":\"3\"}", 10000},
            {"{\"grace_seconds\":null}", 10000},
            {"not json", 10000},
            {"{\"grace_seconds\":1e6}", 600000},
            {"{\"grace_seconds\":-3}", 0},
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                struct shell_req req = {0};
                shell_decode_terminate(cases[i].body, strlen(cases[i].body), &req);
                if (req.grace_ms != cases[i].grace_ms)
                        test_fail(__FILE__, __LINE__, "%s: grace %u, want %u", cases[i].body,
                                  req.grace_ms, cases[i].grace_ms);
                EXPECT_INT_EQ(req.grace_ms, cases[i].grace_ms);
        }
}

TEST(shell_query_decoding)
{
        static const struct {
                const char *v;
                uint32_t limit;
        } tail[] = {{NULL, 16384},
                    {"", 16384},
                    {"abc", 16384},
                    {"0", 16384},
                    {"-5", 16384},
                    {"100", 100},
                    {"+7", 7},
                    {" 7", 16384},
                    {"7x", 16384},
                    {"9999999", 524288},
                    {"99999999999999999999", 16384}};
        for (size_t i = 0; i < sizeof(tail) / sizeof(tail[0]); i++) {
                struct shell_req req = {0};
                shell_query_tail(tail[i].v, &req);
                EXPECT_INT_EQ(req.output_limit, tail[i].limit);
        }
        static const struct {
                const char *status, *limit;
                int32_t filter;
                uint32_t n;
        } list[] = {{NULL, NULL, -1, 50},
                    {"running", "10", SHELL_RUNNING, 10},
                    {"lost", "0", SHELL_LOST, 50},
                    {"bogus", "500", -2, 200},
                    {"", "x", -1, 50},
                    {"Running", "-1", -2, 50}};
        for (size_t i = 0; i < sizeof(list) / sizeof(list[0]); i++) {
                struct shell_req req = {0};
                shell_query_list(list[i].status, list[i].limit, &req);
                EXPECT_INT_EQ(req.status_filter, list[i].filter);
                EXPECT_INT_EQ(req.list_limit, list[i].n);
        }
        static const struct {
                const char *force, *grace;
                uint32_t f, grace_ms;
        } del[] = {
            {"true", "2", 1, 2000},   {"True", NULL, 0, 10000},   {"1", "abc", 0, 10000},
            {NULL, "0", 0, 0},        {"true", "1e3", 1, 600000}, {"true", "nan", 1, 10000},
            {"true", " 1", 1, 10000}, {"false", "-2", 0, 0},      {"true", "1e999", 1, 10000}};
        for (size_t i = 0; i < sizeof(del) / sizeof(del[0]); i++) {
                struct shell_req req = {0};
                shell_query_delete(del[i].force, del[i].grace, &req);
                EXPECT_INT_EQ(req.force, del[i].f);
                EXPECT_INT_EQ(req.grace_ms, del[i].grace_ms);
        }
}

TEST(shell_job_ids_and_auth)
{
        EXPECT_TRUE(shell_job_id_valid(JOB));
        EXPECT_FALSE(shell_job_id_valid("0123456789ABCDEF"));
        EXPECT_FALSE(shell_job_id_valid("0123456789abcde"));
        EXPECT_FALSE(shell_job_id_valid("0123456789abcdef0"));
        EXPECT_FALSE(shell_job_id_valid("0123456789abcdeg"));
        EXPECT_FALSE(shell_job_id_valid("run"));
        EXPECT_FALSE(shell_job_id_valid(""));
        EXPECT_FALSE(shell_job_id_valid(NULL));
        /* no token: open */
        EXPECT_TRUE(shell_auth_ok("", NULL));
        EXPECT_TRUE(shell_auth_ok("", "Bearer whatever"));
        EXPECT_TRUE(shell_auth_ok("s3cret", "Bearer s3cret"));
        static const char *const wrong[] = {"bearer s3cret",  "Bearer  s3cret", "Bearer s3cre",
                                            "Bearer s3cretX", "s3cret",         "Bearer",
                                            "Bearer ",        "Basic s3cret",   ""};
        for (size_t i = 0; i < sizeof(wrong) / sizeof(wrong[0]); i++)
                if (shell_auth_ok("s3cret", wrong[i]))
                        test_fail(__FILE__, __LINE__, "\"%s\" passed", wrong[i]);
        EXPECT_FALSE(shell_auth_ok("s3cret", NULL));
        EXPECT_TRUE(router_key_matches("k", "k"));
        EXPECT_FALSE(router_key_matches("", "k"));
        EXPECT_FALSE(router_key_matches(NULL, "k"));
}

/* ---- encoding -------------------------------------------------------------- */

static void expect_body(char *got, const char *want)
{
        EXPECT_STR_EQ(got, want);
        free(got);
}

static struct shell_view view_of(uint32_t status, bool has_exit, int32_t exit_code)
{
        return (struct shell_view){.job_id = JOB,
                                   .status = status,
                                   .has_exit_code = has_exit,
                                   .exit_code = exit_code,
                                   .created_at = 1785837600,
                                   .started_at = 1785837601,
                                   .ended_at = -1,
                                   .size = 1234};
}

TEST(shell_encode_errors_and_escapes)
{
        expect_body(shell_encode_error("job_not_found", "Unknown job id"),
                    "{\"error\":{\"code\":\"job_not_found\",\"message\":\"Unknown job id\"}}\n");
        if (test_failed)
                return;
        /* Go's encoder: <>& and U+2028/9 escaped, \b \f \n \r \t named,
         * other controls \u00XX, DEL and non-ASCII raw, a stray byte \ufffd */
        expect_body(shell_encode_error("c", "<a>&\"\\\b\f\n\r\t\x01\x1b\x7f"
                                            "\xc3\xa9\xe2\x80\xa8\xe2\x80\xa9\xff\xe2\x80"),
                    "{\"error\":{\"code\":\"c\",\"message\":\"\\u003ca\\u003e\\u0026\\\"\\\\\\b"
                    "\\f\\n\\r\\t\\u0001\\u001b\x7f\xc3\xa9\\u2028\\u2029\\ufffd\\ufffd\\ufffd\"}}"
                    "\n");
}

TEST(shell_encode_result_body)
{
        struct shell_reply rep = {
            .view = view_of(SHELL_RUNNING, false, 0), .win_start = 0, .win_end = 6, .truncated = 1};
        expect_body(shell_encode_result(&rep, STATE, "hello\n", 6),
                    "{\"job_id\":\"" JOB
                    "\",\"done\":false,\"status\":\"running\",\"exit_code\":null,"
                    "\"output_path\":\"" STATE "/jobs/" JOB "/output.log\",\"output\":\"hello\\n\","
                    "\"offset\":6,\"truncated\":true}\n");
        if (test_failed)
                return;
        /* terminal, an exit code, output with a NUL and a byte that is not
         * UTF-8, read from offset 10 */
        rep = (struct shell_reply){
            .view = view_of(SHELL_EXITED, true, -1), .win_start = 10, .win_end = 14};
        expect_body(shell_encode_result(&rep, STATE, "a\0\xfe<", 4),
                    "{\"job_id\":\"" JOB "\",\"done\":true,\"status\":\"exited\",\"exit_code\":-1,"
                    "\"output_path\":\"" STATE "/jobs/" JOB "/output.log\","
                    "\"output\":\"a\\u0000\\ufffd\\u003c\",\"offset\":14,\"truncated\":false}\n");
}

TEST(shell_encode_status_body)
{
        struct shell_view v = view_of(SHELL_RUNNING, false, 0);
        expect_body(
            shell_encode_status(&v),
            "{\"job_id\":\"" JOB "\",\"status\":\"running\",\"done\":false,\"exit_code\":null,"
            "\"created_at\":\"2026-08-04T10:00:00Z\",\"started_at\":\"2026-08-04T10:00:01Z\","
            "\"ended_at\":null,\"offset\":1234}\n");
        if (test_failed)
                return;
        v = view_of(SHELL_TERMINATED, true, 130);
        v.started_at = -1;
        v.ended_at = 1785837659;
        v.size = 0;
        expect_body(shell_encode_status(&v),
                    "{\"job_id\":\"" JOB "\",\"status\":\"terminated\",\"done\":true,"
                    "\"exit_code\":130,\"created_at\":\"2026-08-04T10:00:00Z\",\"started_at\":null,"
                    "\"ended_at\":\"2026-08-04T10:00:59Z\",\"offset\":0}\n");
}

TEST(shell_encode_list_body)
{
        expect_body(shell_encode_list(NULL, 0), "{\"jobs\":[]}\n");
        if (test_failed)
                return;
        struct shell_view v[3] = {view_of(SHELL_RUNNING, false, 0), view_of(SHELL_LOST, true, 0),
                                  view_of(SHELL_CREATED, false, 0)};
        v[1].ended_at = 1785837659;
        v[1].job_id[15] = '0';
        v[2].started_at = -1;
        expect_body(
            shell_encode_list(v, 3),
            "{\"jobs\":[{\"job_id\":\"" JOB "\",\"status\":\"running\","
            "\"created_at\":\"2026-08-04T10:00:00Z\",\"started_at\":\"2026-08-04T10:00:01Z\"},"
            "{\"job_id\":\"0123456789abcde0\",\"status\":\"lost\","
            "\"created_at\":\"2026-08-04T10:00:00Z\",\"started_at\":\"2026-08-04T10:00:01Z\","
            "\"ended_at\":\"2026-08-04T10:00:59Z\"},"
            "{\"job_id\":\"" JOB "\",\"status\":\"created\","
            "\"created_at\":\"2026-08-04T10:00:00Z\"}]}\n");
        if (test_failed)
                return;
        expect_body(shell_encode_deleted(JOB), "{\"job_id\":\"" JOB "\",\"deleted\":true}\n");
        if (test_failed)
                return;
        expect_body(shell_encode_health(), "{\"status\":\"ok\"}\n");
}

TEST(shell_go_quote)
{
        static const struct {
                const char *in;
                size_t len;
                const char *out;
        } cases[] = {
            {"A=B", 3, "\"A=B\""},
            {"a\"b\\c", 5, "\"a\\\"b\\\\c\""},
            {"\a\b\f\n\r\t\v", 7, "\"\\a\\b\\f\\n\\r\\t\\v\""},
            {"\0\x1f\x7f", 3, "\"\\x00\\x1f\\x7f\""},
            {"\xff", 1, "\"\\xff\""},
            {"\xc3\xa9\xe6\x97\xa5", 5, "\"\xc3\xa9\xe6\x97\xa5\""},
            {"\xc2\x85\xc2\xa0\xef\xbb\xbf", 7, "\"\\u0085\\u00a0\\ufeff\""},
            {"\xf3\xb0\x80\x80", 4, "\"\\U000f0000\""},
            {"\xf0\x9f\x98\x80", 4, "\"\xf0\x9f\x98\x80\""},
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                struct strbuf sb;
                strbuf_init(&sb, 0);
                EXPECT_ERRNO(shell_quote(&sb, cases[i].in, cases[i].len), 0);
                EXPECT_STR_EQ(sb.data, cases[i].out);
                strbuf_free(&sb);
        }
}

/* ---- routes ------------------------------------------------------------------ */

static void expect_route(const char *method, const char *path, const char *want_path,
                         const char *want_id, const char *want_allow)
{
        struct route_match m;
        router_find(&shell_route_table, method, path, NULL, NULL, &m);
        if (!want_path) {
                if (m.route)
                        test_fail(__FILE__, __LINE__, "%s %s: matched %s %s", method, path,
                                  m.route->method, m.route->path);
                EXPECT_NULL(m.route);
                EXPECT_INT_EQ(m.path_known, want_allow != NULL);
                if (want_allow)
                        EXPECT_STR_EQ(m.allow, want_allow);
                return;
        }
        if (!m.route)
                test_fail(__FILE__, __LINE__, "%s %s: no route", method, path);
        EXPECT_NOT_NULL(m.route);
        EXPECT_STR_EQ(m.route->path, want_path);
        if (want_id)
                EXPECT_MEM_EQ(path + m.id_off, m.id_len, want_id, strlen(want_id));
}

TEST(shell_route_matching)
{
        expect_route("GET", "/healthz", "/healthz", NULL, NULL);
        expect_route("HEAD", "/healthz", "/healthz", NULL, NULL);
        expect_route("POST", "/healthz", NULL, NULL, "GET, HEAD");
        expect_route("POST", "/v1/jobs/run", "/v1/jobs/run", NULL, NULL);
        /* as in Go's ServeMux, GET /v1/jobs/run is a job named "run" */
        expect_route("GET", "/v1/jobs/run", "/v1/jobs/{id}", "run", NULL);
        expect_route("PUT", "/v1/jobs/run", NULL, NULL, "DELETE, GET, HEAD, POST");
        expect_route("GET", "/v1/jobs/" JOB, "/v1/jobs/{id}", JOB, NULL);
        expect_route("HEAD", "/v1/jobs/" JOB, "/v1/jobs/{id}", JOB, NULL);
        expect_route("DELETE", "/v1/jobs/" JOB, "/v1/jobs/{id}", JOB, NULL);
        expect_route("POST", "/v1/jobs/" JOB, NULL, NULL, "DELETE, GET, HEAD");
        expect_route("POST", "/v1/jobs/x/wait", "/v1/jobs/{id}/wait", "x", NULL);
        expect_route("GET", "/v1/jobs/x/wait", NULL, NULL, "POST");
        expect_route("POST", "/v1/jobs/x/input", "/v1/jobs/{id}/input", "x", NULL);
        expect_route("POST", "/v1/jobs/x/terminate", "/v1/jobs/{id}/terminate", "x", NULL);
        expect_route("GET", "/v1/jobs/x/log/tail", "/v1/jobs/{id}/log/tail", "x", NULL);
        expect_route("GET", "/v1/jobs", "/v1/jobs", NULL, NULL);
        expect_route("DELETE", "/v1/jobs", NULL, NULL, "GET, HEAD");
        expect_route("PUT", "/v1/prepare", "/v1/prepare", NULL, NULL);
        expect_route("POST", "/v1/prepare", NULL, NULL, "PUT");
        static const char *const unknown[] = {"/",
                                              "/v1/jobs/",
                                              "/v1/jobs//wait",
                                              "/v1/jobs/x/log",
                                              "/v1/jobs/x/wait/",
                                              "/v1/jobs/x/y/wait",
                                              "/healthz/",
                                              "/health",
                                              "/v1/sandbox/run"};
        for (size_t i = 0; i < sizeof(unknown) / sizeof(unknown[0]); i++)
                expect_route("GET", unknown[i], NULL, NULL, NULL);
}

TEST(shell_refusals_wording)
{
        struct http_reply r = shell_route_table.refuse(REFUSE_NOT_FOUND, "not found");
        EXPECT_INT_EQ(r.status, 404);
        EXPECT_STR_EQ(r.body, "404 page not found\n");
        EXPECT_STR_EQ(r.content_type, "text/plain; charset=utf-8");
        free(r.body);
        r = shell_route_table.refuse(REFUSE_METHOD, "method not allowed");
        EXPECT_INT_EQ(r.status, 405);
        EXPECT_STR_EQ(r.body, "Method Not Allowed\n");
        free(r.body);
        r = shell_route_table.refuse(REFUSE_AUTH, NULL);
        EXPECT_INT_EQ(r.status, 401);
        EXPECT_NULL(r.content_type);
        EXPECT_STR_EQ(r.body, "{\"error\":{\"code\":\"unauthorized\","
                              "\"message\":\"Missing or invalid bearer token\"}}\n");
        free(r.body);
        r = shell_route_table.refuse(REFUSE_STOPPING, "server is shutting down");
        EXPECT_INT_EQ(r.status, 503);
        EXPECT_STR_EQ(r.body, "{\"error\":{\"code\":\"unavailable\","
                              "\"message\":\"server is shutting down\"}}\n");
        free(r.body);
        EXPECT_STR_EQ(shell_route_table.auth_header, "Authorization");
        struct config cfg = {.shell_token = (char *)"t0k"};
        EXPECT_TRUE(shell_route_table.auth_ok(&cfg, "Bearer t0k"));
        EXPECT_FALSE(shell_route_table.auth_ok(&cfg, NULL));
}

/* ---- against a fake jailer ------------------------------------------------------ */

/* Exit statuses of the fake, so a failure says what it saw. */
enum fake_status {
        FAKE_OK = 0,
        FAKE_NO_CALL = 10, /* no PROTO_SHELL with a channel */
        FAKE_BAD_TRACE = 11,
        FAKE_NO_REQ = 12,
        FAKE_BAD_REQ = 13,   /* the request's fields */
        FAKE_BLOB_FD = 14,   /* a memfd missing or unexpected */
        FAKE_BAD_SEALS = 15, /* not sealed against write, grow, shrink */
        FAKE_BAD_BLOB = 16,  /* its bytes */
        FAKE_BLOB_POS = 17,  /* its file offset not at 0 */
        FAKE_IO = 18,
};

enum fake_act {
        ACT_REPLY,        /* reply (with a file when file is set) */
        ACT_SILENT,       /* hold the channel, never answer */
        ACT_CLOSE,        /* close the channel unanswered */
        ACT_BAD_MAGIC,    /* a reply with the wrong magic */
        ACT_REPLY_UNREAD, /* reply and close before reading the request */
};

struct fake {
        enum fake_act act;
        struct shell_reply rep;
        const char *file; /* a memfd of file_len bytes attached to the reply */
        size_t file_len;
        const struct shell_req *want; /* the fields to expect, or NULL */
        const char *blob;             /* the memfd the request must carry, or NULL: none */
        size_t blob_len;
};

static int recv_wait(int sock, void *msg, size_t len, int *fds, size_t max_fds, size_t *nf)
{
        struct pollfd p = {.fd = sock, .events = POLLIN};
        if (poll(&p, 1, 5000) <= 0)
                return -ETIMEDOUT;
        return channel_recv(sock, msg, len, fds, max_fds, nf);
}

static bool req_equal(const struct shell_req *a, const struct shell_req *b)
{
        return a->op == b->op && strcmp(a->job_id, b->job_id) == 0 && a->mode == b->mode &&
               a->cols == b->cols && a->rows == b->rows &&
               strcmp(a->session_id, b->session_id) == 0 && a->offset == b->offset &&
               a->output_limit == b->output_limit && a->timeout_ms == b->timeout_ms &&
               a->idle_flush_ms == b->idle_flush_ms && a->grace_ms == b->grace_ms &&
               a->force == b->force && a->list_limit == b->list_limit &&
               a->status_filter == b->status_filter;
}

static int check_blob(const struct fake *f, int fd, size_t nf)
{
        if (!f->blob)
                return nf ? FAKE_BLOB_FD : FAKE_OK;
        if (nf != 1)
                return FAKE_BLOB_FD;
        int need = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE;
        if ((fcntl(fd, F_GET_SEALS) & need) != need)
                return FAKE_BAD_SEALS;
        if (lseek(fd, 0, SEEK_CUR) != 0)
                return FAKE_BLOB_POS;
        char *buf = malloc(f->blob_len + 1);
        ssize_t n = pread(fd, buf, f->blob_len + 1, 0);
        bool same = n == (ssize_t)f->blob_len && memcmp(buf, f->blob, f->blob_len) == 0;
        free(buf);
        return same ? FAKE_OK : FAKE_BAD_BLOB;
}

static int fake_reply(const struct fake *f, int chan)
{
        struct shell_reply rep = f->rep;
        rep.hdr = (struct proto_header){PROTO_MAGIC, PROTO_SHELL_REPLY};
        if (f->act == ACT_BAD_MAGIC)
                rep.hdr.magic = 0;
        int fd = -1;
        if (f->file) {
                fd = memfd_create("fake-output", MFD_CLOEXEC);
                if (fd < 0 || test_write_all(fd, f->file, f->file_len, 0) < 0)
                        return FAKE_IO;
        }
        return channel_send(chan, &rep, sizeof(rep), &fd, fd >= 0 ? 1 : 0) < 0 ? FAKE_IO : FAKE_OK;
}

static int fake_serve(int ctrl, const struct fake *f)
{
        struct proto_shell m;
        int chan = -1, fd = -1;
        size_t nf = 0;
        if (recv_wait(ctrl, &m, sizeof(m), &chan, 1, &nf) != 1 || nf != 1 ||
            m.hdr.magic != PROTO_MAGIC || m.hdr.type != PROTO_SHELL)
                return FAKE_NO_CALL;
        if (strcmp(m.trace_id, TRACE) != 0)
                return FAKE_BAD_TRACE;
        if (f->act == ACT_REPLY_UNREAD)
                return fake_reply(f, chan);
        struct shell_req req;
        nf = 0;
        if (recv_wait(chan, &req, sizeof(req), &fd, 1, &nf) != 1 || req.hdr.magic != PROTO_MAGIC ||
            req.hdr.type != PROTO_SHELL_REQ)
                return FAKE_NO_REQ;
        if (f->want && !req_equal(&req, f->want))
                return FAKE_BAD_REQ;
        int r = check_blob(f, fd, nf);
        if (r != FAKE_OK || f->act == ACT_CLOSE)
                return r;
        if (f->act == ACT_SILENT) {
                struct pollfd p = {.fd = chan, .events = POLLIN};
                poll(&p, 1, 5000); /* until the caller gives up and closes */
                return FAKE_OK;
        }
        return fake_reply(f, chan);
}

/* The fake in a child on the other end of *ret_ctrl. */
static pid_t fake_start(const struct fake *f, int *ret_ctrl)
{
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
                return -1;
        pid_t pid = fork();
        if (pid == 0) {
                close(sv[0]);
                _exit(fake_serve(sv[1], f));
        }
        close(sv[1]);
        *ret_ctrl = sv[0];
        return pid;
}

static int fake_end(pid_t pid, int ctrl)
{
        close(ctrl);
        int status = 0;
        if (pid <= 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
                return -1;
        return WEXITSTATUS(status);
}

static struct shell_reply reply_ok(void)
{
        struct shell_reply rep = {.http_status = 200, .view = view_of(SHELL_RUNNING, false, 0)};
        return rep;
}

TEST(shell_call_reply_with_fd)
{
        struct shell_req req = {.hdr = {PROTO_MAGIC, PROTO_SHELL_REQ},
                                .op = SHELL_INPUT,
                                .job_id = JOB,
                                .offset = 3,
                                .output_limit = 100,
                                .timeout_ms = 5,
                                .idle_flush_ms = 500};
        const char blob[] = "\x04\0\0\0\x03\0\0\0yes";
        struct fake f = {.act = ACT_REPLY,
                         .rep = reply_ok(),
                         .file = "hello",
                         .file_len = 5,
                         .want = &req,
                         .blob = blob,
                         .blob_len = sizeof(blob) - 1};
        /* the jailer's strings need not end: the caller's copy does */
        memset(f.rep.code, 'c', sizeof(f.rep.code));
        memset(f.rep.message, 'm', sizeof(f.rep.message));
        f.rep.win_end = 5;
        int ctrl;
        pid_t pid = fake_start(&f, &ctrl);
        struct shell_reply rep;
        int fd = -1;
        int r = ipc_shell_call(ctrl, TRACE, &req, blob, sizeof(blob) - 1, 5000, -1, &rep, &fd);
        EXPECT_INT_EQ(fake_end(pid, ctrl), FAKE_OK);
        EXPECT_ERRNO(r, 0);
        EXPECT_INT_EQ(rep.http_status, 200);
        EXPECT_STR_EQ(rep.view.job_id, JOB);
        EXPECT_INT_EQ(rep.win_end, 5);
        EXPECT_INT_EQ(strlen(rep.code), sizeof(rep.code) - 1);
        EXPECT_INT_EQ(strlen(rep.message), sizeof(rep.message) - 1);
        EXPECT_TRUE(fd >= 0);
        char buf[8] = "";
        EXPECT_INT_EQ(pread(fd, buf, sizeof(buf), 0), 5);
        EXPECT_STR_EQ(buf, "hello");
        close(fd);
}

TEST(shell_call_reply_without_fd)
{
        struct shell_req req = {
            .hdr = {PROTO_MAGIC, PROTO_SHELL_REQ}, .op = SHELL_STATUS, .job_id = JOB};
        struct fake f = {.act = ACT_REPLY, .rep = reply_ok(), .want = &req};
        f.rep.http_status = 404;
        snprintf(f.rep.code, sizeof(f.rep.code), "job_not_found");
        int ctrl, fd = 7;
        pid_t pid = fake_start(&f, &ctrl);
        struct shell_reply rep;
        int r = ipc_shell_call(ctrl, TRACE, &req, NULL, 0, 5000, -1, &rep, &fd);
        EXPECT_INT_EQ(fake_end(pid, ctrl), FAKE_OK); /* and no memfd came with the request */
        EXPECT_ERRNO(r, 0);
        EXPECT_INT_EQ(fd, -1);
        EXPECT_INT_EQ(rep.http_status, 404);
        EXPECT_STR_EQ(rep.code, "job_not_found");
}

/* A jailer that refuses at once, before reading the request, and closes
 * the channel: its answer is still read. */
TEST(shell_call_early_answer)
{
        struct shell_req req = {.hdr = {PROTO_MAGIC, PROTO_SHELL_REQ}, .op = SHELL_LIST};
        struct fake f = {.act = ACT_REPLY_UNREAD, .rep = reply_ok()};
        f.rep.http_status = 429;
        int ctrl, fd;
        pid_t pid = fake_start(&f, &ctrl);
        struct shell_reply rep;
        int r = ipc_shell_call(ctrl, TRACE, &req, NULL, 0, 5000, -1, &rep, &fd);
        EXPECT_INT_EQ(fake_end(pid, ctrl), FAKE_OK);
        EXPECT_ERRNO(r, 0);
        EXPECT_INT_EQ(rep.http_status, 429);
}

static int call_with(enum fake_act act, int deadline_ms, int cancel_fd)
{
        struct shell_req req = {.hdr = {PROTO_MAGIC, PROTO_SHELL_REQ}, .op = SHELL_LIST};
        struct fake f = {.act = act, .rep = reply_ok()};
        int ctrl, fd = -1;
        pid_t pid = fake_start(&f, &ctrl);
        struct shell_reply rep;
        int r = ipc_shell_call(ctrl, TRACE, &req, NULL, 0, deadline_ms, cancel_fd, &rep, &fd);
        if (fake_end(pid, ctrl) != FAKE_OK)
                return 1;
        return r;
}

TEST(shell_call_failures)
{
        EXPECT_ERRNO(call_with(ACT_SILENT, 200, -1), -ETIMEDOUT);
        EXPECT_ERRNO(call_with(ACT_CLOSE, 5000, -1), -ECONNRESET);
        EXPECT_ERRNO(call_with(ACT_BAD_MAGIC, 5000, -1), -EPROTO);
        int cancel = eventfd(1, EFD_CLOEXEC); /* already readable: the server stops */
        EXPECT_TRUE(cancel >= 0);
        EXPECT_ERRNO(call_with(ACT_SILENT, 5000, cancel), -ECANCELED);
        close(cancel);
        /* no jailer at all */
        int sv[2];
        EXPECT_INT_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
        close(sv[1]);
        struct shell_req req = {.op = SHELL_LIST};
        struct shell_reply rep;
        int fd;
        int before = test_open_fds();
        EXPECT_ERRNO(ipc_shell_call(sv[0], TRACE, &req, NULL, 0, 1000, -1, &rep, &fd), -EPIPE);
        EXPECT_INT_EQ(test_open_fds(), before);
        close(sv[0]);
}

/* ---- the handlers, end to end against the fake ----------------------------------- */

static const char *query_of(const struct http_call *c, const char *name)
{
        const char *const *kv = c->query_ctx;
        for (size_t i = 0; kv && kv[i]; i += 2)
                if (strcmp(kv[i], name) == 0)
                        return kv[i + 1];
        return NULL;
}

struct handled {
        struct http_reply rep;
        int fake; /* the fake's exit status */
};

/* method path body through the shell table's handler, the fake (NULL: a
 * control socket whose jailer is gone) answering. */
static struct handled handle(const char *method, const char *path, const char *body,
                             const char *const *query, const struct fake *f)
{
        struct config cfg = {.shell_state_dir = (char *)STATE, .shell_token = (char *)""};
        struct http_state st = {.cfg = &cfg, .shell_cancel_fd = -1};
        struct route_match m;
        router_find(&shell_route_table, method, path, NULL, NULL, &m);
        if (!m.route)
                return (struct handled){.fake = -2};
        char id[65];
        snprintf(id, sizeof(id), "%.*s", (int)m.id_len, path + m.id_off);
        struct trace tr = {.trace_id = TRACE};
        struct http_call c = {.body = body,
                              .body_len = strlen(body),
                              .trace = &tr,
                              .path_id = m.id_len ? id : NULL,
                              .query = query_of,
                              .query_ctx = (void *)query};
        pid_t pid = -1;
        if (f)
                pid = fake_start(f, &st.ctrl_fd);
        else {
                int sv[2];
                if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
                        return (struct handled){.fake = -3};
                close(sv[1]);
                st.ctrl_fd = sv[0];
        }
        struct handled h = {.rep = m.route->handle(&st, &c)};
        h.fake = f ? fake_end(pid, st.ctrl_fd) : (close(st.ctrl_fd), 0);
        return h;
}

static void expect_handled(struct handled h, unsigned status, const char *body)
{
        EXPECT_INT_EQ(h.fake, FAKE_OK);
        EXPECT_INT_EQ(h.rep.status, status);
        EXPECT_STR_EQ(h.rep.body, body);
        free(h.rep.body);
}

TEST(shell_handler_run)
{
        const char *body = "{\"script\":\"echo hello\",\"timeout\":2,\"output_limit\":6,"
                           "\"env\":{\"K\":\"v\"}}";
        struct shell_req want = {.op = SHELL_RUN,
                                 .cols = 200,
                                 .rows = 50,
                                 .output_limit = 6,
                                 .timeout_ms = 2000,
                                 .idle_flush_ms = 500};
        const char blob[] = "\x01\0\0\0\x0a\0\0\0echo hello\x03\0\0\0\x03\0\0\0K\0v";
        struct fake f = {.act = ACT_REPLY,
                         .rep = reply_ok(),
                         .file = "hello\nworld",
                         .file_len = 11,
                         .want = &want,
                         .blob = blob,
                         .blob_len = sizeof(blob) - 1};
        f.rep.win_end = 6;
        f.rep.truncated = 1;
        expect_handled(handle("POST", "/v1/jobs/run", body, NULL, &f), 200,
                       "{\"job_id\":\"" JOB "\",\"done\":false,\"status\":\"running\","
                       "\"exit_code\":null,\"output_path\":\"" STATE "/jobs/" JOB "/output.log\","
                       "\"output\":\"hello\\n\",\"offset\":6,\"truncated\":true}\n");
}

TEST(shell_handler_wait_window)
{
        struct shell_req want = {.op = SHELL_WAIT,
                                 .job_id = JOB,
                                 .offset = 6,
                                 .output_limit = 16384,
                                 .timeout_ms = 1000,
                                 .idle_flush_ms = 500};
        struct fake f = {.act = ACT_REPLY,
                         .rep = reply_ok(),
                         .file = "hello\nworld",
                         .file_len = 11,
                         .want = &want};
        f.rep.view = view_of(SHELL_EXITED, true, 0);
        f.rep.win_start = 6;
        f.rep.win_end = 11;
        expect_handled(
            handle("POST", "/v1/jobs/" JOB "/wait", "{\"offset\":6,\"timeout\":1}", NULL, &f), 200,
            "{\"job_id\":\"" JOB "\",\"done\":true,\"status\":\"exited\","
            "\"exit_code\":0,\"output_path\":\"" STATE "/jobs/" JOB "/output.log\","
            "\"output\":\"world\",\"offset\":11,\"truncated\":false}\n");
}

/* A job id that cannot be one is not asked for; the body is decoded
 * first, as in the reference. */
TEST(shell_handler_unknown_ids)
{
        static const char *const paths[][2] = {
            {"POST", "/v1/jobs/ABCDEF0123456789/wait"},
            {"POST", "/v1/jobs/x/input"},
            {"GET", "/v1/jobs/run"},
            {"GET", "/v1/jobs/x/log/tail"},
            {"POST", "/v1/jobs/x/terminate"},
            {"DELETE", "/v1/jobs/" JOB "0"},
        };
        for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
                /* NULL fake: asking the jailer would answer 503 */
                expect_handled(handle(paths[i][0], paths[i][1], "{}", NULL, NULL), 404,
                               "{\"error\":{\"code\":\"job_not_found\",\"message\":\"Unknown job "
                               "id\"}}\n");
                if (test_failed)
                        return;
        }
        expect_handled(handle("POST", "/v1/jobs/x/wait", "", NULL, NULL), 400,
                       "{\"error\":{\"code\":\"invalid_request\",\"message\":\"Invalid JSON "
                       "body\"}}\n");
}

TEST(shell_handler_errors)
{
        /* the jailer's error, passed on */
        struct shell_req want = {.op = SHELL_INPUT,
                                 .job_id = JOB,
                                 .output_limit = 16384,
                                 .timeout_ms = 30000,
                                 .idle_flush_ms = 500};
        const char blob[] = "\x04\0\0\0\x02\0\0\0y\n";
        struct fake f = {.act = ACT_REPLY,
                         .rep = {.http_status = 409},
                         .want = &want,
                         .blob = blob,
                         .blob_len = sizeof(blob) - 1};
        snprintf(f.rep.code, sizeof(f.rep.code), "input_unsupported");
        snprintf(f.rep.message, sizeof(f.rep.message), "stdio jobs do not support input");
        expect_handled(handle("POST", "/v1/jobs/" JOB "/input", "{\"text\":\"y\\n\"}", NULL, &f),
                       409,
                       "{\"error\":{\"code\":\"input_unsupported\",\"message\":\"stdio jobs do "
                       "not support input\"}}\n");
        if (test_failed)
                return;
        /* no jailer */
        expect_handled(handle("GET", "/v1/jobs/" JOB, "", NULL, NULL), 503,
                       "{\"error\":{\"code\":\"unavailable\",\"message\":\"shell jobs are "
                       "unavailable: Broken pipe\"}}\n");
        if (test_failed)
                return;
        /* a window and no file to read it from */
        struct fake nofile = {.act = ACT_REPLY, .rep = reply_ok()};
        nofile.rep.win_end = 4;
        expect_handled(handle("GET", "/v1/jobs/" JOB "/log/tail", "", NULL, &nofile), 500,
                       "{\"error\":{\"code\":\"internal_error\",\"message\":\"the jailer's answer "
                       "was malformed\"}}\n");
}

TEST(shell_handler_list_status_delete)
{
        struct shell_view views[2] = {view_of(SHELL_RUNNING, false, 0),
                                      view_of(SHELL_EXITED, true, 3)};
        views[1].ended_at = 1785837659;
        struct shell_req want = {.op = SHELL_LIST, .list_limit = 5, .status_filter = -2};
        struct fake f = {.act = ACT_REPLY,
                         .rep = reply_ok(),
                         .file = (const char *)views,
                         .file_len = sizeof(views),
                         .want = &want};
        f.rep.n_jobs = 2;
        const char *const q[] = {"limit", "5", "status", "nope", NULL};
        expect_handled(handle("GET", "/v1/jobs", "", q, &f), 200,
                       "{\"jobs\":[{\"job_id\":\"" JOB "\",\"status\":\"running\","
                       "\"created_at\":\"2026-08-04T10:00:00Z\","
                       "\"started_at\":\"2026-08-04T10:00:01Z\"},"
                       "{\"job_id\":\"" JOB "\",\"status\":\"exited\","
                       "\"created_at\":\"2026-08-04T10:00:00Z\","
                       "\"started_at\":\"2026-08-04T10:00:01Z\","
                       "\"ended_at\":\"2026-08-04T10:00:59Z\"}]}\n");
        if (test_failed)
                return;
        struct shell_req empty = {.op = SHELL_LIST, .list_limit = 50, .status_filter = -1};
        struct fake none = {.act = ACT_REPLY, .rep = reply_ok(), .want = &empty};
        expect_handled(handle("GET", "/v1/jobs", "", NULL, &none), 200, "{\"jobs\":[]}\n");
        if (test_failed)
                return;
        struct shell_req term = {.op = SHELL_TERMINATE, .job_id = JOB, .grace_ms = 0};
        struct fake t = {.act = ACT_REPLY, .rep = reply_ok(), .want = &term};
        t.rep.view = view_of(SHELL_TERMINATED, true, 130);
        t.rep.view.ended_at = 1785837659;
        expect_handled(
            handle("POST", "/v1/jobs/" JOB "/terminate", "{\"grace_seconds\":0}", NULL, &t), 200,
            "{\"job_id\":\"" JOB "\",\"status\":\"terminated\",\"done\":true,"
            "\"exit_code\":130,\"created_at\":\"2026-08-04T10:00:00Z\","
            "\"started_at\":\"2026-08-04T10:00:01Z\","
            "\"ended_at\":\"2026-08-04T10:00:59Z\",\"offset\":1234}\n");
        if (test_failed)
                return;
        struct shell_req del = {.op = SHELL_DELETE, .job_id = JOB, .force = 1, .grace_ms = 1500};
        struct fake d = {.act = ACT_REPLY, .rep = reply_ok(), .want = &del};
        const char *const dq[] = {"force", "true", "grace_seconds", "1.5", NULL};
        expect_handled(handle("DELETE", "/v1/jobs/" JOB, "", dq, &d), 200,
                       "{\"job_id\":\"" JOB "\",\"deleted\":true}\n");
        if (test_failed)
                return;
        expect_handled(handle("HEAD", "/healthz", "", NULL, NULL), 200, "{\"status\":\"ok\"}\n");
}
