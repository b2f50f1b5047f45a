/* Decoding of request bodies for the sandbox routes: application/json (the
 * reference and Dify) and application/x-www-form-urlencoded. Pure functions
 * over bytes, so they are unit-tested and fuzzed without a server. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

struct run_request {
        char *language; /* NUL-terminated, validated UTF-8, no NUL inside */
        char *code;     /* NUL-terminated; code_len excludes the NUL */
        size_t code_len;
        char *preload; /* never NULL after success; may be "" */
        size_t preload_len;
        bool enable_network;
};

/* Decode a POST /v1/sandbox/run body. content_type may be NULL (treated as
 * JSON). Returns 0, or -EINVAL with a one-line reason in err naming the
 * field ("code: must be a non-empty string"), for the -400 envelope. The
 * language value is NOT checked against the supported list here. */
int request_decode_run(const char *content_type, const char *body, size_t len,
                       struct run_request *ret, char *err, size_t errlen);
void run_request_clear(struct run_request *r);

/* Decode the "language" field of the dependency routes: from the query
 * string value (query_language, may be NULL) for GET, or from the body for
 * POST (JSON or form). Returns 0 with a malloc'd string, or -EINVAL + err. */
int request_decode_language(const char *content_type, const char *body, size_t len,
                            const char *query_language, char **ret_language, char *err,
                            size_t errlen);
