/* `lockbox run FILE`: POST /v1/sandbox/run, then replay the answer: the
 * program's stdout and stderr byte for byte, and its exit code. A run the
 * sandbox ended (exit_code -1) gets the sandbox's reason line on stderr and
 * a shell-style code: 124 for time limits, 128+N for a signal the program
 * died of, 137 for the other kills (memory, output, syscall policy). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "base/file.h"
#include "base/util.h"
#include "cli/cli.h"

/* Reason lines of docs/API.md that do not end in SIGKILL's 137. */
static const struct {
        const char *prefix;
        int exit_code;
} reason_codes[] = {
    {"error: timeout", CLI_EXIT_TIMEOUT},
    {"error: cpu time limit exceeded", CLI_EXIT_TIMEOUT},
};

#define SIGNAL_PREFIX "error: killed by signal "

struct run_data {
        const char *out, *err, *error;
        size_t out_len, err_len, error_len;
        json_int_t exit_code;
};

static void jsonp(json_t **j)
{
        json_decref(*j);
}

static char *request_json(const struct cli_source *src, bool network)
{
        _cleanup_(jsonp) json_t *req =
            json_pack("{s:s, s:s%, s:b}", "language", src->language, "code", src->code.data,
                      src->code.len, "enable_network", network);
        return req ? json_dumps(req, JSON_COMPACT) : NULL;
}

/* "SEGV" or "SIGSEGV" or "11" back to the number; 0 if unknown. */
static int signal_number(const char *name)
{
        if (strncmp(name, "SIG", 3) == 0)
                name += 3;
        char *end;
        long n = strtol(name, &end, 10);
        if (end != name && *end == '\0')
                return n > 0 && n < 128 ? (int)n : 0;
        for (int sig = 1; sig < 65; sig++) {
                const char *abbrev = sigabbrev_np(sig);
                if (abbrev && strcmp(abbrev, name) == 0)
                        return sig;
        }
        return 0;
}

static int reason_exit_code(const char *reason)
{
        for (size_t i = 0; i < ELEMENTSOF(reason_codes); i++)
                if (strncmp(reason, reason_codes[i].prefix, strlen(reason_codes[i].prefix)) == 0)
                        return reason_codes[i].exit_code;
        if (strncmp(reason, SIGNAL_PREFIX, strlen(SIGNAL_PREFIX)) == 0) {
                int sig = signal_number(reason + strlen(SIGNAL_PREFIX));
                if (sig)
                        return CLI_EXIT_SIGNAL_BASE + sig;
        }
        return CLI_EXIT_KILLED;
}

/* The reason is the second line of "error" when it starts with "error: "
 * (docs/API.md); copied out since it is not NUL-terminated there. */
static char *reason_line(const struct run_data *d)
{
        const char *end = d->error + d->error_len;
        const char *start = memchr(d->error, '\n', d->error_len);
        if (!start)
                return NULL;
        start++;
        const char *nl = memchr(start, '\n', (size_t)(end - start));
        size_t n = (size_t)((nl ? nl : end) - start);
        if (n <= strlen("error: ") || strncmp(start, "error: ", strlen("error: ")) != 0)
                return NULL;
        return strndup(start, n);
}

/* Exit code of a finished run; prints the reason when the sandbox ended it. */
static int run_exit_code(const struct run_data *d)
{
        if (d->exit_code >= 0 && d->exit_code <= 255)
                return (int)d->exit_code;
        _cleanup_free_ char *reason = reason_line(d);
        if (!reason) {
                cli_error("error: the sandbox ended the run (exit_code %lld)",
                          (long long)d->exit_code);
                return CLI_EXIT_KILLED;
        }
        cli_error("%s", reason);
        return reason_exit_code(reason);
}

static int run_data_unpack(json_t *data, struct run_data *ret)
{
        struct run_data d = {.error = ""};
        if (json_unpack(data, "{s:s%, s:s%, s:I, s?s%}", "stdout", &d.out, &d.out_len, "stderr",
                        &d.err, &d.err_len, "exit_code", &d.exit_code, "error", &d.error,
                        &d.error_len) < 0)
                return -EBADMSG;
        *ret = d;
        return 0;
}

/* A code 0 envelope: replay the run. */
static int run_replay(json_t *data, const struct cli_options *opts)
{
        struct run_data d;
        if (!json_is_object(data) || run_data_unpack(data, &d) < 0) {
                cli_error("%s: answer without stdout, stderr and exit_code", opts->server);
                return CLI_EXIT_SERVER;
        }
        int r = file_write_all(STDOUT_FILENO, d.out, d.out_len);
        if (r == 0)
                r = file_write_all(STDERR_FILENO, d.err, d.err_len);
        if (r < 0) {
                cli_error("cannot write the program's output: %s", strerror(-r));
                return CLI_EXIT_USAGE;
        }
        return run_exit_code(&d);
}

/* Any answer but a run: a refused key, an error envelope, or not ours. */
static int reply_judge(const struct cli_reply *reply, json_t *root, const struct cli_options *opts)
{
        json_int_t code = 0;
        const char *message = "";
        json_t *data = NULL;
        if (reply->status == 401) {
                cli_error("the server refused the API key");
                return CLI_EXIT_SERVER;
        }
        if (!root || json_unpack(root, "{s:I, s?s, s?o}", "code", &code, "message", &message,
                                 "data", &data) < 0) {
                cli_error("%s: unexpected answer (HTTP %ld), not a lockbox server?", opts->server,
                          reply->status);
                return CLI_EXIT_SERVER;
        }
        if (code != 0) {
                cli_error("server error %lld: %s", (long long)code, message);
                return CLI_EXIT_SERVER;
        }
        return run_replay(data, opts);
}

static int run_send(const struct cli_options *opts, const struct cli_source *src)
{
        _cleanup_free_ char *body = request_json(src, opts->network);
        if (!body) {
                cli_error("cannot encode the request");
                return CLI_EXIT_USAGE;
        }
        struct cli_reply reply;
        char err[1024];
        if (cli_transport_request(opts, "/v1/sandbox/run", body, strlen(body), &reply, err,
                                  sizeof(err)) < 0) {
                cli_error("%s", err);
                return CLI_EXIT_SERVER;
        }
        /* JSON_ALLOW_NUL: program output may hold NUL bytes (\u0000). */
        _cleanup_(jsonp) json_t *root =
            json_loadb(reply.body.data, reply.body.len, JSON_ALLOW_NUL, NULL);
        int code = reply_judge(&reply, root, opts);
        cli_reply_free(&reply);
        return code;
}

int cli_run_command(const struct cli_options *opts, const char *path)
{
        struct cli_source src;
        char err[1024];
        if (cli_source_load(path, opts->language, &src, err, sizeof(err)) < 0) {
                cli_error("%s", err);
                return CLI_EXIT_USAGE;
        }
        int code = run_send(opts, &src);
        cli_source_free(&src);
        return code;
}
