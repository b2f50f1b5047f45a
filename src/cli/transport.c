/* HTTP for the client, with libcurl: one request per call, the answer
 * collected in a capped buffer. Failures become one line naming the server
 * and the operating system's reason ("Connection refused") when there is
 * one. Proxy variables (http_proxy, no_proxy, ...) apply as in curl(1). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <curl/curl.h>

#include "base/util.h"
#include "cli/cli.h"
#include "base/version.h"

/* An answer carries at most limits.output (1G at most) of program output,
 * JSON-escaped and repeated in "error"; beyond this it is not a daemon. */
#define REPLY_MAX (1024u * 1024 * 1024)
#define CONNECT_TIMEOUT_S 10L

struct request_state {
        struct strbuf *body;
        bool too_large;
};

static void easyp(CURL **c)
{
        if (*c)
                curl_easy_cleanup(*c);
}

static void slistp(struct curl_slist **l)
{
        curl_slist_free_all(*l);
}

int cli_transport_init(void)
{
        return curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK ? 0 : -EIO;
}

void cli_transport_done(void)
{
        curl_global_cleanup();
}

void cli_reply_free(struct cli_reply *reply)
{
        strbuf_free(&reply->body);
}

static size_t body_collect(char *data, size_t size, size_t n, void *userdata)
{
        struct request_state *st = userdata;
        if (strbuf_append(st->body, data, n) < 0) {
                st->too_large = true;
                return 0; /* libcurl stops with CURLE_WRITE_ERROR */
        }
        return n;
}

/* Before a connection exists the server "cannot be reached"; later the
 * request itself failed. */
static bool error_is_unreachable(CURLcode rc)
{
        return rc == CURLE_COULDNT_RESOLVE_HOST || rc == CURLE_COULDNT_RESOLVE_PROXY ||
               rc == CURLE_COULDNT_CONNECT || rc == CURLE_UNSUPPORTED_PROTOCOL ||
               rc == CURLE_URL_MALFORMAT;
}

static void error_describe(CURL *c, CURLcode rc, const char *errbuf, const struct cli_options *opts,
                           char *err, size_t errlen)
{
        long os_errno = 0;
        const char *why = *errbuf ? errbuf : curl_easy_strerror(rc);
        if (rc == CURLE_COULDNT_CONNECT &&
            curl_easy_getinfo(c, CURLINFO_OS_ERRNO, &os_errno) == CURLE_OK && os_errno > 0)
                why = strerror((int)os_errno);
        snprintf(err, errlen, error_is_unreachable(rc) ? "cannot reach %s: %s" : "%s: %s",
                 opts->server, why);
}

static int easy_setup(CURL *c, const char *url, struct request_state *st, char *errbuf)
{
        CURLcode rc = curl_easy_setopt(c, CURLOPT_URL, url);
        if (rc == CURLE_OK)
                rc = curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
        if (rc == CURLE_OK)
                rc = curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
        if (rc == CURLE_OK)
                rc = curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
        if (rc == CURLE_OK)
                rc = curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, CONNECT_TIMEOUT_S);
        if (rc == CURLE_OK)
                rc = curl_easy_setopt(c, CURLOPT_USERAGENT, "lockbox/" LOCKBOX_VERSION);
        if (rc == CURLE_OK)
                rc = curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, body_collect);
        if (rc == CURLE_OK)
                rc = curl_easy_setopt(c, CURLOPT_WRITEDATA, st);
        return rc == CURLE_OK ? 0 : -EINVAL;
}

static int header_add(struct curl_slist **headers, const char *line)
{
        struct curl_slist *l = curl_slist_append(*headers, line);
        if (!l)
                return -ENOMEM;
        *headers = l;
        return 0;
}

/* The credential: opts->auth_header on every request when set (the shell
 * API's bearer token), else the code API's key with a body. */
static int auth_setup(const struct cli_options *opts, bool body, struct curl_slist **headers)
{
        char key_header[1024];
        if (opts->auth_header)
                return header_add(headers, opts->auth_header);
        if (!body)
                return 0;
        if ((size_t)snprintf(key_header, sizeof(key_header), "X-Api-Key: %s", opts->key) >=
            sizeof(key_header))
                return -ENAMETOOLONG;
        return header_add(headers, key_header);
}

/* The method (curl's GET, or POST with a body, unless told otherwise),
 * the body as JSON and the credential; curl's "Expect: 100-continue" for
 * large bodies is dropped so the daemon gets the body right away. */
static int method_setup(CURL *c, const struct cli_options *opts, const char *method,
                        const char *body, size_t len, struct curl_slist **headers)
{
        int r = auth_setup(opts, body != NULL, headers);
        if (r == 0 && body)
                r = header_add(headers, "Content-Type: application/json");
        if (r == 0 && body)
                r = header_add(headers, "Expect:");
        if (r < 0)
                return r;
        CURLcode rc = curl_easy_setopt(c, CURLOPT_HTTPHEADER, *headers);
        if (rc == CURLE_OK && body)
                rc = curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
        if (rc == CURLE_OK && body)
                rc = curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        if (rc == CURLE_OK && strcmp(method, body ? "POST" : "GET") != 0)
                rc = curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
        return rc == CURLE_OK ? 0 : -EINVAL;
}

static int request_perform(CURL *c, const struct cli_options *opts, struct request_state *st,
                           const char *errbuf, long *ret_status, char *err, size_t errlen)
{
        CURLcode rc = curl_easy_perform(c);
        if (st->too_large) {
                snprintf(err, errlen, "%s: answer larger than %u bytes", opts->server, REPLY_MAX);
                return -E2BIG;
        }
        if (rc != CURLE_OK) {
                error_describe(c, rc, errbuf, opts, err, errlen);
                return -EIO;
        }
        long status = 0;
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
        *ret_status = status;
        return 0;
}

static int url_build(const struct cli_options *opts, const char *path, struct strbuf *url)
{
        return strbuf_appendf(url, "%s%s", opts->server, path);
}

int cli_transport_request(const struct cli_options *opts, const char *path, const char *body,
                          size_t body_len, struct cli_reply *ret, char *err, size_t errlen)
{
        return cli_transport_call(opts, body ? "POST" : "GET", path, body, body_len, ret, err,
                                  errlen);
}

int cli_transport_call(const struct cli_options *opts, const char *method, const char *path,
                       const char *body, size_t body_len, struct cli_reply *ret, char *err,
                       size_t errlen)
{
        _cleanup_(easyp) CURL *c = curl_easy_init();
        _cleanup_(slistp) struct curl_slist *headers = NULL;
        struct strbuf url, answer;
        strbuf_init(&url, 0);
        strbuf_init(&answer, REPLY_MAX);
        struct request_state st = {.body = &answer};
        char errbuf[CURL_ERROR_SIZE] = "";
        long status = 0;
        int r = c && url_build(opts, path, &url) == 0 ? 0 : -ENOMEM;
        if (r == 0)
                r = easy_setup(c, url.data, &st, errbuf);
        if (r == 0)
                r = method_setup(c, opts, method, body, body_len, &headers);
        if (r < 0)
                snprintf(err, errlen, "cannot prepare the request: %s", strerror(-r));
        else
                r = request_perform(c, opts, &st, errbuf, &status, err, errlen);
        strbuf_free(&url);
        if (r < 0) {
                strbuf_free(&answer);
                return r;
        }
        *ret = (struct cli_reply){.status = status, .body = answer};
        return 0;
}
