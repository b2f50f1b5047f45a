/* `lockbox shell`, private to src/cli/: the parsed command line
 * (shell.c) handed to the commands (shell_cmd.c), which talk to the
 * shell-job API (docs/API.md "Shell jobs") with the client's transport. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "cli/cli.h"

/* Options, one bit each: a command takes only its own. */
enum {
        SH_OPT_JSON = 1u << 0,
        SH_OPT_FOLLOW = 1u << 1,
        SH_OPT_FILE = 1u << 2,
        SH_OPT_CWD = 1u << 3,
        SH_OPT_ENV = 1u << 4,
        SH_OPT_MODE = 1u << 5,
        SH_OPT_SESSION = 1u << 6,
        SH_OPT_COLS = 1u << 7,
        SH_OPT_ROWS = 1u << 8,
        SH_OPT_TIMEOUT = 1u << 9,
        SH_OPT_OFFSET = 1u << 10,
        SH_OPT_LIMIT = 1u << 11,
        SH_OPT_STATUS = 1u << 12,
        SH_OPT_GRACE = 1u << 13,
        SH_OPT_FORCE = 1u << 14,
};

#define SH_ENV_MAX 256

struct shell_args {
        struct cli_options opts; /* server: the shell API's URL; auth_header */
        unsigned seen;           /* SH_OPT_* given */
        const char *file, *cwd, *mode, *session, *status;
        const char *env[SH_ENV_MAX]; /* "NAME=VALUE", as given */
        size_t n_env;
        long cols, rows, limit;
        double timeout, grace; /* seconds */
        int64_t offset;
        char **pos; /* after the command's name */
        int n_pos;
};

/* The commands: each returns the process's exit code. */
int shell_cmd_run(const struct shell_args *a);
int shell_cmd_wait(const struct shell_args *a);
int shell_cmd_input(const struct shell_args *a);
int shell_cmd_tail(const struct shell_args *a);
int shell_cmd_ls(const struct shell_args *a);
int shell_cmd_kill(const struct shell_args *a);
int shell_cmd_rm(const struct shell_args *a);
