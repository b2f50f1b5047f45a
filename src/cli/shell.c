/* `lockbox shell COMMAND`: the shell-job API's client (docs/API.md "Shell
 * jobs"). Parses the options (each command takes its own set), finds the
 * API (--url, $LOCKBOX_SHELL_URL, http://127.0.0.1:5004) and its token
 * ($SHELLCTL_AUTH_TOKEN, the variable lockboxd reads), and hands over to
 * the command in shell_cmd.c. */
#include "cli/shell.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"

#define DEFAULT_SHELL_URL "http://127.0.0.1:5004"

static const char help_text[] =
    "usage: lockbox shell run [SCRIPT] [--file FILE] [--cwd DIR] [--env NAME=VALUE]...\n"
    "                         [--mode pty|stdio] [--session ID] [--cols N] [--rows N]\n"
    "                         [--timeout SECONDS] [--follow | --json]\n"
    "       lockbox shell wait JOB [--follow] [--offset N] [--timeout SECONDS] [--json]\n"
    "       lockbox shell input JOB [TEXT] [--offset N] [--timeout SECONDS] [--json]\n"
    "       lockbox shell tail JOB [--limit BYTES] [--json]\n"
    "       lockbox shell ls [--status STATUS] [--limit N] [--json]\n"
    "       lockbox shell kill JOB [--grace SECONDS] [--json]\n"
    "       lockbox shell rm JOB [--force] [--grace SECONDS] [--json]\n"
    "\n"
    "Shell jobs on lockboxd's shell-job API (shell.enabled, port 5004).\n"
    "  run    start a job: the script is SCRIPT, else FILE (--file; - is standard\n"
    "         input), else standard input; prints the job id. --timeout: how long\n"
    "         the call waits for the job's first output (default: not at all).\n"
    "         --follow writes the job's output as it comes and exits with the\n"
    "         job's exit code; --json prints the API's answer.\n"
    "  wait   wait for the job's end and exit with its exit code; --follow also\n"
    "         writes its output from --offset (default 0). --json: one wait call\n"
    "         (--timeout, default 0: answer at once), its answer printed.\n"
    "  input  type TEXT (else standard input) at a PTY job's terminal; writes the\n"
    "         output that follows --offset (default: the output's end before the\n"
    "         input), waiting up to --timeout (default 5) for it.\n"
    "  tail   the last --limit bytes of the job's output (default 16384).\n"
    "  ls     the jobs, newest first (--status: only those; --limit, default 50).\n"
    "  kill   terminate the job: ^C, then after --grace seconds (default 10) kill\n"
    "         what is left of it.\n"
    "  rm     delete an ended job and its output; --force: terminate it first.\n"
    "\n"
    "options:\n"
    "  --url URL   the API; default $LOCKBOX_SHELL_URL, else " DEFAULT_SHELL_URL "\n"
    "  -h, --help  print this text\n"
    "The token comes from $SHELLCTL_AUTH_TOKEN (sent as \"Authorization: Bearer\").\n"
    "\n"
    "exit status:\n"
    "  0-255  run --follow, wait: the job's exit code (a shell's: 128+N when\n"
    "         signal N ended it, 130 for a job terminated by ^C, 137 killed)\n"
    "  125    run --follow, wait: the job failed to start\n"
    "  4      run --follow, wait: the job was lost\n"
    "  2      usage or local error\n"
    "  3      server or transport error; the API's error code and message follow\n"
    "         \"lockbox: \" on stderr\n";

enum {
        O_URL = 256,
        O_JSON,
        O_FOLLOW,
        O_FILE,
        O_CWD,
        O_ENV,
        O_MODE,
        O_SESSION,
        O_COLS,
        O_ROWS,
        O_TIMEOUT,
        O_OFFSET,
        O_LIMIT,
        O_STATUS,
        O_GRACE,
        O_FORCE,
};

static const struct option options[] = {
    {"url", required_argument, NULL, O_URL},
    {"json", no_argument, NULL, O_JSON},
    {"follow", no_argument, NULL, O_FOLLOW},
    {"file", required_argument, NULL, O_FILE},
    {"cwd", required_argument, NULL, O_CWD},
    {"env", required_argument, NULL, O_ENV},
    {"mode", required_argument, NULL, O_MODE},
    {"session", required_argument, NULL, O_SESSION},
    {"cols", required_argument, NULL, O_COLS},
    {"rows", required_argument, NULL, O_ROWS},
    {"timeout", required_argument, NULL, O_TIMEOUT},
    {"offset", required_argument, NULL, O_OFFSET},
    {"limit", required_argument, NULL, O_LIMIT},
    {"status", required_argument, NULL, O_STATUS},
    {"grace", required_argument, NULL, O_GRACE},
    {"force", no_argument, NULL, O_FORCE},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* Each command: its options, and how many positional arguments it takes. */
static const struct {
        const char *name;
        unsigned opts;
        int min_pos, max_pos;
        const char *usage;
        int (*run)(const struct shell_args *a);
} commands[] = {
    {"run",
     SH_OPT_JSON | SH_OPT_FOLLOW | SH_OPT_FILE | SH_OPT_CWD | SH_OPT_ENV | SH_OPT_MODE |
         SH_OPT_SESSION | SH_OPT_COLS | SH_OPT_ROWS | SH_OPT_TIMEOUT,
     0, 1, "run [SCRIPT]", shell_cmd_run},
    {"wait", SH_OPT_JSON | SH_OPT_FOLLOW | SH_OPT_OFFSET | SH_OPT_TIMEOUT, 1, 1, "wait JOB",
     shell_cmd_wait},
    {"input", SH_OPT_JSON | SH_OPT_OFFSET | SH_OPT_TIMEOUT, 1, 2, "input JOB [TEXT]",
     shell_cmd_input},
    {"tail", SH_OPT_JSON | SH_OPT_LIMIT, 1, 1, "tail JOB", shell_cmd_tail},
    {"ls", SH_OPT_JSON | SH_OPT_STATUS | SH_OPT_LIMIT, 0, 0, "ls", shell_cmd_ls},
    {"kill", SH_OPT_JSON | SH_OPT_GRACE, 1, 1, "kill JOB", shell_cmd_kill},
    {"rm", SH_OPT_JSON | SH_OPT_FORCE | SH_OPT_GRACE, 1, 1, "rm JOB", shell_cmd_rm},
};

static int usage(const char *fmt, ...) _printf_(1, 2);
static int usage(const char *fmt, ...)
{
        char line[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(line, sizeof(line), fmt, ap);
        va_end(ap);
        cli_error("shell: %s (see lockbox shell --help)", line);
        return -EINVAL;
}

static int number_seconds(const char *s, double *ret)
{
        char *end;
        errno = 0;
        double v = strtod(s, &end);
        if (!*s || *end || errno || !isfinite(v) || v < 0)
                return usage("'%s' is not a number of seconds", s);
        *ret = v;
        return 0;
}

static int number_long(const char *s, long min, long max, long *ret)
{
        char *end;
        errno = 0;
        long v = strtol(s, &end, 10);
        if (!*s || *end || errno || v < min || v > max)
                return usage("'%s' is not a whole number in range", s);
        *ret = v;
        return 0;
}

static int env_add(struct shell_args *a, const char *arg)
{
        if (!strchr(arg, '=') || arg[0] == '=')
                return usage("--env takes NAME=VALUE, got '%s'", arg);
        if (a->n_env == SH_ENV_MAX)
                return usage("%s: too many --env", "run");
        a->env[a->n_env++] = arg;
        return 0;
}

/* One option's value into a; *url for --url. */
static int option_take(struct shell_args *a, int c, const char **url)
{
        long v;
        int r = 0;
        switch (c) {
        case O_URL:
                *url = optarg;
                return 0;
        case O_JSON:
                a->seen |= SH_OPT_JSON;
                return 0;
        case O_FOLLOW:
                a->seen |= SH_OPT_FOLLOW;
                return 0;
        case O_FORCE:
                a->seen |= SH_OPT_FORCE;
                return 0;
        case O_FILE:
                a->seen |= SH_OPT_FILE;
                a->file = optarg;
                return 0;
        case O_CWD:
                a->seen |= SH_OPT_CWD;
                a->cwd = optarg;
                return 0;
        case O_MODE:
                a->seen |= SH_OPT_MODE;
                a->mode = optarg;
                return 0;
        case O_SESSION:
                a->seen |= SH_OPT_SESSION;
                a->session = optarg;
                return 0;
        case O_STATUS:
                a->seen |= SH_OPT_STATUS;
                a->status = optarg;
                return 0;
        case O_ENV:
                a->seen |= SH_OPT_ENV;
                return env_add(a, optarg);
        case O_COLS:
                a->seen |= SH_OPT_COLS;
                return number_long(optarg, 1, 4096, &a->cols);
        case O_ROWS:
                a->seen |= SH_OPT_ROWS;
                return number_long(optarg, 1, 4096, &a->rows);
        case O_LIMIT:
                a->seen |= SH_OPT_LIMIT;
                return number_long(optarg, 1, 1 << 20, &a->limit);
        case O_TIMEOUT:
                a->seen |= SH_OPT_TIMEOUT;
                return number_seconds(optarg, &a->timeout);
        case O_GRACE:
                a->seen |= SH_OPT_GRACE;
                return number_seconds(optarg, &a->grace);
        case O_OFFSET:
                a->seen |= SH_OPT_OFFSET;
                r = number_long(optarg, 0, LONG_MAX, &v);
                a->offset = v;
                return r;
        default:
                return -EINVAL;
        }
}

static int options_parse(int argc, char **argv, struct shell_args *a, const char **url, bool *help)
{
        int c;
        optind = 1;
        opterr = 0;
        while ((c = getopt_long(argc, argv, ":h", options, NULL)) != -1) {
                if (c == 'h') {
                        *help = true;
                        continue;
                }
                if (c == '?' || c == ':') {
                        const char *arg = argv[optind - 1];
                        char short_name[3] = {'-', (char)optopt, '\0'};
                        const char *name = strncmp(arg, "--", 2) == 0 ? arg : short_name;
                        if (c == ':')
                                return usage("option '%s' needs a value", name);
                        return usage("unknown option '%s'", name);
                }
                int r = option_take(a, c, url);
                if (r < 0)
                        return r;
        }
        a->pos = argv + optind;
        a->n_pos = argc - optind;
        return 0;
}

static int command_check(const struct shell_args *a, size_t i)
{
        unsigned extra = a->seen & ~commands[i].opts;
        if (extra) {
                for (const struct option *o = options; o->name; o++)
                        if (o->val >= O_JSON && (extra & (1u << (o->val - O_JSON))))
                                return usage("--%s does not go with this command", o->name);
        }
        if (a->n_pos - 1 < commands[i].min_pos || a->n_pos - 1 > commands[i].max_pos)
                return usage("usage: lockbox shell %s", commands[i].usage);
        if ((a->seen & SH_OPT_JSON) && (a->seen & SH_OPT_FOLLOW) && strcmp(a->pos[0], "run") == 0)
                return usage("%s: --json and --follow do not go together", "run");
        return 0;
}

/* The API's address and the token's header. */
static int endpoint_set(struct shell_args *a, const char *url, char **ret_url, char **ret_auth)
{
        const char *env_url = getenv("LOCKBOX_SHELL_URL");
        if (!url)
                url = env_url && *env_url ? env_url : DEFAULT_SHELL_URL;
        if (!*url)
                return usage("%s needs a URL such as " DEFAULT_SHELL_URL, "--url");
        size_t n = strlen(url);
        while (n > 0 && url[n - 1] == '/')
                n--;
        const char *token = getenv("SHELLCTL_AUTH_TOKEN");
        char *auth = NULL;
        if (token && *token && asprintf(&auth, "Authorization: Bearer %s", token) < 0)
                auth = NULL, token = NULL;
        char *copy = strndup(url, n);
        if (!copy || (token && *token && !auth)) {
                free(copy);
                free(auth);
                cli_error("out of memory");
                return -ENOMEM;
        }
        a->opts.server = *ret_url = copy;
        a->opts.auth_header = *ret_auth = auth;
        return 0;
}

static int command_index(const char *name)
{
        for (size_t i = 0; i < ELEMENTSOF(commands); i++)
                if (strcmp(commands[i].name, name) == 0)
                        return (int)i;
        return -1;
}

int cli_shell_main(int argc, char **argv)
{
        struct shell_args a = {.timeout = -1, .grace = -1, .offset = -1};
        const char *url = NULL;
        bool help = false;
        if (options_parse(argc, argv, &a, &url, &help) < 0)
                return CLI_EXIT_USAGE;
        if (help) {
                fputs(help_text, stdout);
                return 0;
        }
        if (a.n_pos == 0) {
                usage("missing command: %s", "run, wait, input, tail, ls, kill or rm");
                return CLI_EXIT_USAGE;
        }
        int i = command_index(a.pos[0]);
        if (i < 0) {
                usage("unknown command '%s'", a.pos[0]);
                return CLI_EXIT_USAGE;
        }
        if (command_check(&a, (size_t)i) < 0)
                return CLI_EXIT_USAGE;
        _cleanup_free_ char *server = NULL, *auth = NULL;
        if (endpoint_set(&a, url, &server, &auth) < 0)
                return CLI_EXIT_USAGE;
        a.pos++;
        a.n_pos--;
        if (cli_transport_init() < 0) {
                cli_error("cannot initialize libcurl");
                return CLI_EXIT_SERVER;
        }
        int code = commands[i].run(&a);
        cli_transport_done();
        return code;
}
