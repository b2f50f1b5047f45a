/* libFuzzer target for the shell-job API's decoders and encoders
 * (src/http/shell_decode.c, shell_encode.c). The first byte picks what
 * the rest is: a run, wait, input or terminate body (the last also read
 * as a prepare body, always refused), the query values of
 * log/tail, the list and DELETE (NUL-separated), or a job's output to
 * encode. A decoded request keeps every bound of shell_proto.h and its
 * blob walks whole; a refusal has a status, a code and a UTF-8 message
 * and encodes to JSON; an encoded window reads back as its bytes with
 * each stray byte made U+FFFD. */
#include <errno.h>
#include <jansson.h>

#include "base/utf8.h"
#include "fuzz.h"
#include "http/shell.h"

/* JSON text with the trailing newline that jansson reads back; the
 * decoded object (the caller drops it). */
static json_t *check_json(char *text)
{
        FUZZ_ASSERT(text);
        size_t n = strlen(text);
        FUZZ_ASSERT(n > 0 && text[n - 1] == '\n');
        FUZZ_ASSERT(!strpbrk(text, "<>&"));
        json_t *j = json_loads(text, JSON_ALLOW_NUL, NULL);
        FUZZ_ASSERT(j && json_is_object(j));
        free(text);
        return j;
}

static void check_refusal(int r, const struct shell_error *e)
{
        FUZZ_ASSERT(r == -EINVAL || r == -ENOMEM);
        FUZZ_ASSERT(e->status >= 400 && e->status <= 500 && e->code && *e->code);
        FUZZ_ASSERT(utf8_valid(e->message, strlen(e->message)));
        json_decref(check_json(shell_encode_error(e->code, e->message)));
}

static void check_window_fields(const struct shell_req *req, uint32_t max_limit)
{
        FUZZ_ASSERT(req->offset >= 0);
        FUZZ_ASSERT(req->output_limit >= 1 && req->output_limit <= max_limit);
        FUZZ_ASSERT(req->timeout_ms <= SHELL_WAIT_MAX_MS);
        FUZZ_ASSERT(req->idle_flush_ms >= 1 && req->idle_flush_ms <= SHELL_IDLE_FLUSH_MAX_MS);
}

/* Every record well-formed, the tags the op may carry, the script first. */
static void check_blob(const char *blob, size_t len, uint32_t op)
{
        size_t pos = 0, n = 0;
        struct shell_blob_item it;
        int r;
        while ((r = shell_blob_next(blob, len, &pos, &it)) == 1) {
                if (op == SHELL_RUN)
                        FUZZ_ASSERT(n == 0 ? it.tag == SHELL_BLOB_SCRIPT && it.len > 0
                                           : it.tag == SHELL_BLOB_CWD || it.tag == SHELL_BLOB_ENV);
                else
                        FUZZ_ASSERT(n == 0 && it.tag == SHELL_BLOB_TEXT);
                if (it.tag == SHELL_BLOB_ENV)
                        FUZZ_ASSERT(memchr(it.data, '\0', it.len) && it.data[0] != '\0');
                if (it.tag == SHELL_BLOB_CWD)
                        FUZZ_ASSERT(it.len > 0 && !memchr(it.data, '\0', it.len));
                n++;
        }
        FUZZ_ASSERT(r == 0 && pos == len && n > 0);
}

static void run_body(const char *body, size_t len)
{
        struct shell_req req = {0};
        struct shell_error e = {0};
        char *blob = NULL;
        size_t blob_len = 0;
        int r = shell_decode_run(body, len, &req, &blob, &blob_len, &e);
        if (r < 0) {
                FUZZ_ASSERT(!blob);
                check_refusal(r, &e);
                return;
        }
        check_window_fields(&req, SHELL_OUTPUT_LIMIT_MAX);
        FUZZ_ASSERT(req.mode == SHELL_MODE_PTY || req.mode == SHELL_MODE_STDIO);
        FUZZ_ASSERT(req.cols >= 1 && req.cols <= SHELL_TERMINAL_MAX);
        FUZZ_ASSERT(req.rows >= 1 && req.rows <= SHELL_TERMINAL_MAX);
        FUZZ_ASSERT(strlen(req.session_id) <= SHELL_SESSION_ID_MAX);
        check_blob(blob, blob_len, SHELL_RUN);
        free(blob);
}

static void wait_body(const char *body, size_t len)
{
        struct shell_req req = {0};
        struct shell_error e = {0};
        int r = shell_decode_wait(body, len, &req, &e);
        if (r < 0)
                check_refusal(r, &e);
        else
                check_window_fields(&req, SHELL_OUTPUT_LIMIT_MAX);
}

static void input_body(const char *body, size_t len)
{
        struct shell_req req = {0};
        struct shell_error e = {0};
        char *blob = NULL;
        size_t blob_len = 0;
        int r = shell_decode_input(body, len, &req, &blob, &blob_len, &e);
        if (r < 0) {
                FUZZ_ASSERT(!blob);
                check_refusal(r, &e);
                return;
        }
        check_window_fields(&req, SHELL_OUTPUT_LIMIT_MAX);
        check_blob(blob, blob_len, SHELL_INPUT);
        free(blob);
}

/* Up to three NUL-separated values of a query string. */
static void queries(const char *data, size_t len)
{
        char *s = fuzz_strndup((const uint8_t *)data, len);
        const char *v[3] = {NULL, NULL, NULL};
        char *at = s;
        for (size_t i = 0; i < 3 && at <= s + len; i++) {
                v[i] = at;
                at += strlen(at) + 1;
        }
        struct shell_req req = {0};
        shell_query_tail(v[0], &req);
        FUZZ_ASSERT(req.output_limit >= 1 && req.output_limit <= SHELL_TAIL_LIMIT_MAX);
        shell_query_list(v[0], v[1], &req);
        FUZZ_ASSERT(req.list_limit >= 1 && req.list_limit <= SHELL_LIST_MAX);
        FUZZ_ASSERT(req.status_filter >= -2 && req.status_filter <= SHELL_LOST);
        shell_query_delete(v[1], v[2], &req);
        FUZZ_ASSERT(req.force <= 1 && req.grace_ms <= SHELL_GRACE_MAX_MS);
        free(s);
}

/* A window of output encoded and read back: the same text, each byte
 * that is not UTF-8 as U+FFFD. */
static void output(const char *data, size_t len)
{
        struct shell_reply rep = {.view = {.job_id = "0123456789abcdef",
                                           .status = len ? (uint8_t)data[0] % 9 : 0,
                                           .has_exit_code = len & 1,
                                           .exit_code = (int32_t)len,
                                           .created_at = -1,
                                           .started_at = (int64_t)len,
                                           .ended_at = -1},
                                  .win_end = len};
        json_t *j = check_json(shell_encode_result(&rep, "/state", data, len));
        size_t want_len;
        char *want = utf8_sanitize(data, len, &want_len);
        json_t *out = json_object_get(j, "output");
        FUZZ_ASSERT(want && out && json_string_length(out) == want_len);
        FUZZ_ASSERT(memcmp(json_string_value(out), want, want_len) == 0);
        FUZZ_ASSERT(json_object_size(j) == 8);
        free(want);
        json_decref(j);
        json_decref(check_json(shell_encode_status(&rep.view)));
        json_decref(check_json(shell_encode_list(&rep.view, 1)));
        char *message = fuzz_strndup((const uint8_t *)data, len);
        json_decref(check_json(shell_encode_error("x", message)));
        free(message);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        if (size == 0)
                return 0;
        char *rest = fuzz_copy(data + 1, size - 1);
        size_t len = size - 1;
        switch (data[0] % 6) {
        case 0:
                run_body(rest, len);
                break;
        case 1:
                wait_body(rest, len);
                break;
        case 2:
                input_body(rest, len);
                break;
        case 3: {
                struct shell_req req = {0};
                struct shell_error e = {0};
                shell_decode_terminate(rest, len, &req);
                FUZZ_ASSERT(req.grace_ms <= SHELL_GRACE_MAX_MS);
                check_refusal(shell_decode_prepare(rest, len, &e), &e);
                break;
        }
        case 4:
                queries(rest, len);
                break;
        default:
                output(rest, len);
                break;
        }
        free(rest);
        return 0;
}
