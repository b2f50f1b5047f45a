/* libFuzzer target for what lockboxd reads from request headers and the
 * query string: the W3C traceparent (src/base/trace.c), the Content-Type
 * (the media type dispatch in src/http/request.c) and the ?language=
 * value. The input is one header value, NUL-terminated as libmicrohttpd
 * hands it over. */
#include <errno.h>

#include "base/trace.h"
#include "base/utf8.h"
#include "fuzz.h"
#include "http/request.h"

static const char json_body[] = "{\"language\":\"python3\",\"code\":\"print(1)\"}";
static const char form_body[] = "language=python3&code=print%281%29&enable_network=on";

static bool is_lower_hex(const char *s, size_t n)
{
        for (size_t i = 0; i < n; i++)
                if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
                        return false;
        return s[n] == '\0';
}

/* An accepted traceparent gives back its own trace id; whatever came in,
 * the trace we answer with is well-formed and parses back. */
static void fuzz_trace(const char *value)
{
        char id[TRACE_ID_LEN + 1];
        bool ok = trace_parse(value, id);
        if (ok) {
                FUZZ_ASSERT(strlen(value) >= 55);
                FUZZ_ASSERT(is_lower_hex(id, TRACE_ID_LEN));
                FUZZ_ASSERT(memcmp(id, value + 3, TRACE_ID_LEN) == 0);
        }
        struct trace t;
        trace_from_header(value, &t);
        FUZZ_ASSERT(is_lower_hex(t.trace_id, TRACE_ID_LEN));
        FUZZ_ASSERT(is_lower_hex(t.span_id, SPAN_ID_LEN));
        FUZZ_ASSERT(!ok || strcmp(t.trace_id, id) == 0);
        char header[64], back[TRACE_ID_LEN + 1];
        trace_format(&t, header, sizeof(header));
        FUZZ_ASSERT(trace_parse(header, back) && strcmp(back, t.trace_id) == 0);
}

/* A copy of a constant body with no NUL after it. */
static int decode_body(const char *ct, const char *body, char *err, size_t errlen)
{
        struct run_request req = {0};
        size_t len = strlen(body);
        char *copy = fuzz_copy((const uint8_t *)body, len);
        int r = request_decode_run(ct, copy, len, &req, err, errlen);
        free(copy);
        run_request_clear(&req);
        FUZZ_ASSERT(r == 0 || r == -EINVAL);
        FUZZ_ASSERT(utf8_valid(err, strlen(err)));
        return r;
}

/* Any Content-Type but multipart/form-data lets a JSON object through. */
static void fuzz_content_type(const char *value)
{
        char err[256];
        if (decode_body(value, json_body, err, sizeof(err)) < 0)
                FUZZ_ASSERT(strstr(err, "multipart/form-data"));
        decode_body(value, form_body, err, sizeof(err));
}

/* A query value is taken as it is when it is non-empty valid UTF-8. */
static void fuzz_query_language(const char *value)
{
        char *lang = NULL;
        char err[256];
        int r = request_decode_language(NULL, "", 0, value, &lang, err, sizeof(err));
        bool want = value[0] && utf8_valid(value, strlen(value));
        FUZZ_ASSERT((r == 0) == want);
        FUZZ_ASSERT(r < 0 || strcmp(lang, value) == 0);
        free(lang);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        char *value = fuzz_strndup(data, size);
        fuzz_trace(value);
        fuzz_content_type(value);
        fuzz_query_language(value);
        free(value);
        return 0;
}
