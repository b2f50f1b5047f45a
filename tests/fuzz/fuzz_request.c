/* libFuzzer target for the request decoder (src/http/request.c) and the
 * JSON it leads to (src/http/result.c). The first input line is the
 * Content-Type (and the ?language= value), the rest the body; without a
 * newline the whole input is a body with no Content-Type. */
#include <errno.h>
#include <jansson.h>

#include "base/utf8.h"
#include "fuzz.h"
#include "http/request.h"
#include "http/result.h"

#define ERR_SIZE 256 /* the routes' buffer */
#define ERR_SMALL 24 /* cuts most messages, inside a UTF-8 character too */

struct input {
        char *ct;   /* NUL-terminated or NULL */
        char *body; /* exactly body_len bytes, no NUL after them */
        size_t body_len;
};

static struct input input_split(const uint8_t *data, size_t size)
{
        const uint8_t *nl = memchr(data, '\n', size);
        if (!nl)
                return (struct input){NULL, fuzz_copy(data, size), size};
        size_t ct_len = (size_t)(nl - data);
        return (struct input){fuzz_strndup(data, ct_len), fuzz_copy(nl + 1, size - ct_len - 1),
                              size - ct_len - 1};
}

/* A JSON text jansson reads back, or the response was broken. */
static void check_json(char *json)
{
        FUZZ_ASSERT(json);
        json_t *j = json_loads(json, JSON_ALLOW_NUL, NULL);
        FUZZ_ASSERT(j);
        json_decref(j);
        free(json);
}

/* A refusal names its reason in valid UTF-8 and becomes a -400 envelope. */
static void check_refusal(int r, const char *err)
{
        FUZZ_ASSERT(r == -EINVAL || r == -ENOMEM);
        FUZZ_ASSERT(utf8_valid(err, strlen(err)));
        check_json(result_error_json(-400, err));
}

/* A decoded text field: NUL-free valid UTF-8 of the stated length. */
static void check_text(const char *s, size_t len, bool nonempty)
{
        FUZZ_ASSERT(s);
        FUZZ_ASSERT(strlen(s) == len);
        FUZZ_ASSERT(!nonempty || len > 0);
        FUZZ_ASSERT(utf8_valid(s, len));
}

/* Copy s into a fixed array, without a NUL when it fills the array. */
static void fill_array(char *dst, size_t size, const char *s)
{
        size_t n = strlen(s);
        memset(dst, 0, size);
        memcpy(dst, s, n < size ? n : size);
}

/* The response a finished run with this request would get: code as
 * stdout, the raw body as stderr (NULs, invalid UTF-8), the language as a
 * syscall name that fills its array; then the -500 envelope for a failed
 * jail step whose message is the code. */
static void build_results(const struct run_request *req, const struct input *in)
{
        struct run_outcome o = {0};
        strbuf_init(&o.out, 0);
        strbuf_init(&o.err, 0);
        FUZZ_ASSERT(strbuf_append(&o.out, req->code, req->code_len) == 0);
        FUZZ_ASSERT(strbuf_append(&o.err, in->body, in->body_len) == 0);
        o.truncated = req->enable_network;
        o.res.exit_code = (int32_t)(in->body_len % 3) - 1;
        o.res.reason = (uint32_t)(req->code_len % 9); /* 7 and 8 are unknown reasons */
        o.res.signal = (int32_t)(req->preload_len % 70);
        fill_array(o.res.syscall_name, sizeof(o.res.syscall_name), req->language);
        check_json(result_run_json(&o, false));
        check_json(result_run_json(&o, true));
        o.res.status = RUN_STATUS_INTERNAL;
        fill_array(o.res.message, sizeof(o.res.message), req->code);
        check_json(result_run_json(&o, false));
        run_outcome_free(&o);
}

static void fuzz_run(const char *ct, const struct input *in, size_t errlen)
{
        struct run_request req = {0};
        char err[ERR_SIZE];
        memset(err, 'X', sizeof(err));
        int r = request_decode_run(ct, in->body, in->body_len, &req, err, errlen);
        if (r < 0) {
                FUZZ_ASSERT(memchr(err, '\0', errlen));
                check_refusal(r, err);
                return;
        }
        check_text(req.language, strlen(req.language), true);
        check_text(req.code, req.code_len, true);
        check_text(req.preload, req.preload_len, false);
        build_results(&req, in);
        run_request_clear(&req);
}

static void fuzz_language(const char *ct, const struct input *in, const char *query)
{
        char *lang = NULL;
        char err[ERR_SIZE];
        int r = request_decode_language(ct, in->body, in->body_len, query, &lang, err, sizeof(err));
        if (r < 0) {
                FUZZ_ASSERT(!lang);
                check_refusal(r, err);
                return;
        }
        check_text(lang, strlen(lang), true);
        free(lang);
}

/* utf8_sanitize() promises valid output, identical for valid input. */
static void fuzz_sanitize(const struct input *in)
{
        size_t len;
        char *clean = utf8_sanitize(in->body, in->body_len, &len);
        FUZZ_ASSERT(clean);
        FUZZ_ASSERT(clean[len] == '\0');
        FUZZ_ASSERT(utf8_valid(clean, len));
        if (utf8_valid(in->body, in->body_len))
                FUZZ_ASSERT(len == in->body_len && memcmp(clean, in->body, len) == 0);
        free(clean);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct input in = input_split(data, size);
        struct input whole = {NULL, fuzz_copy(data, size), size};
        fuzz_run(in.ct, &in, ERR_SIZE);
        fuzz_run(NULL, &whole, ERR_SMALL);
        fuzz_language(in.ct, &in, NULL);
        if (in.ct)
                fuzz_language(in.ct, &in, in.ct);
        fuzz_sanitize(&in);
        free(whole.body);
        free(in.body);
        free(in.ct);
        return 0;
}
