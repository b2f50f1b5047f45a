/* The `lockbox` command-line client: sends a program file to a running
 * lockboxd (or dify-sandbox) over HTTP and mirrors the run on the terminal.
 * It is not part of liblockbox: only this client links libcurl. Helpers
 * return 0 or -errno with one line in err; the commands turn that into the
 * "lockbox: ..." line and an exit code (see cli_help() for the table). */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "base/strbuf.h"

/* Exit codes besides the program's own 0-255. */
enum {
        CLI_EXIT_UNHEALTHY = 1,    /* lockbox health: the daemon did not answer ok */
        CLI_EXIT_USAGE = 2,        /* bad options, the file, local I/O */
        CLI_EXIT_SERVER = 3,       /* transport errors, refused key, server errors */
        CLI_EXIT_JOB_LOST = 4,     /* lockbox shell: the job was lost (its keeper died) */
        CLI_EXIT_JOB_FAILED = 125, /* lockbox shell: the job could not start */
        CLI_EXIT_TIMEOUT = 124,    /* the sandbox's time limit, as timeout(1) */
        CLI_EXIT_KILLED = 137,     /* other sandbox kills: 128 + SIGKILL */
        CLI_EXIT_SIGNAL_BASE = 128,
};

/* Largest program file sent, the daemon's default request body cap. */
#define CLI_SOURCE_MAX (16u * 1024 * 1024)

struct cli_options {
        const char *server; /* base URL, trailing slashes removed */
        const char *key;
        const char *auth_header; /* a whole header line sent on every request, or NULL */
        const char *language;    /* NULL: from the file's extension */
        bool network;
};

struct cli_source {
        const char *language; /* "python3" or "nodejs" (static) */
        struct strbuf code;
};

/* One HTTP exchange: status 0 means no answer arrived. */
struct cli_reply {
        long status;
        struct strbuf body;
};

/* error.c: one "lockbox: ..." line on stderr, newlines flattened. */
void cli_error(const char *fmt, ...) _printf_(1, 2);

/* source.c: language of path, from opts->language or the extension. */
int cli_source_language(const char *path, const char *override, const char **ret, char *err,
                        size_t errlen);
/* Read the whole file ("-" is stdin) and check it can be sent as JSON. */
int cli_source_load(const char *path, const char *override, struct cli_source *ret, char *err,
                    size_t errlen);
void cli_source_free(struct cli_source *src);

/* transport.c: GET when body is NULL, else POST of JSON. */
int cli_transport_init(void);
void cli_transport_done(void);
int cli_transport_request(const struct cli_options *opts, const char *path, const char *body,
                          size_t body_len, struct cli_reply *ret, char *err, size_t errlen);
/* Any method; body (JSON) may be NULL. */
int cli_transport_call(const struct cli_options *opts, const char *method, const char *path,
                       const char *body, size_t body_len, struct cli_reply *ret, char *err,
                       size_t errlen);
void cli_reply_free(struct cli_reply *reply);

/* run.c and health.c: the commands; they return the exit code. */
int cli_run_command(const struct cli_options *opts, const char *path);
int cli_health_command(const struct cli_options *opts);
/* shell.c: `lockbox shell ...` (argv[0] is "shell"): the shell-job API. */
int cli_shell_main(int argc, char **argv);
