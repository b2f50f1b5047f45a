/* `lockbox health`: GET /health, which needs no key. Prints "ok" and exits
 * 0 only for HTTP 200 with the body "ok" (a JSON string); anything else is
 * one line and exit 1, so scripts and container probes can rely on it. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

static bool answer_is_ok(const struct cli_reply *reply)
{
        static const char ok[] = "\"ok\"";
        size_t n = reply->body.len;
        /* Tolerate a trailing newline from a proxy or another server. */
        while (n > 0 && (reply->body.data[n - 1] == '\n' || reply->body.data[n - 1] == '\r'))
                n--;
        return reply->status == 200 && n == strlen(ok) && memcmp(reply->body.data, ok, n) == 0;
}

int cli_health_command(const struct cli_options *opts)
{
        struct cli_reply reply;
        char err[1024];
        if (cli_transport_request(opts, "/health", NULL, 0, &reply, err, sizeof(err)) < 0) {
                cli_error("%s", err);
                return CLI_EXIT_UNHEALTHY;
        }
        bool ok = answer_is_ok(&reply);
        if (ok)
                puts("ok");
        else
                cli_error("%s: not healthy (HTTP %ld)", opts->server, reply.status);
        cli_reply_free(&reply);
        return ok ? 0 : CLI_EXIT_UNHEALTHY;
}
