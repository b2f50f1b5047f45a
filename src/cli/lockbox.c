/* lockbox: command-line client of lockboxd. Parses the options, fills in
 * the defaults from the environment (LOCKBOX_SERVER, LOCKBOX_KEY, API_KEY)
 * and hands over to `run` or `health`. Every error is one "lockbox: ..."
 * line on stderr. */
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "base/version.h"
#include "cli/cli.h"

#define DEFAULT_SERVER "http://127.0.0.1:8194"
#define DEFAULT_KEY "dify-sandbox"

static const char help_text[] =
    "usage: lockbox run FILE [--network] [--language LANG] [--server URL] [--key KEY]\n"
    "       lockbox health [--server URL]\n"
    "       lockbox shell run|wait|input|tail|ls|kill|rm ... (see lockbox shell --help)\n"
    "       lockbox --help | --version\n"
    "\n"
    "run sends FILE to a lockboxd (or dify-sandbox) daemon, writes the program's\n"
    "stdout and stderr as they came back, and exits with the program's exit code.\n"
    "The language comes from the extension: .py is python3, .js and .cjs are\n"
    "nodejs. FILE - reads the program from standard input (give --language).\n"
    "health prints ok when the daemon answers GET /health.\n"
    "shell drives shell jobs on the shell-job API (port 5004).\n"
    "\n"
    "options:\n"
    "  --network        let the program use the network (if the daemon allows it)\n"
    "  --language LANG  python3 or nodejs, whatever the extension says\n"
    "  --server URL     the daemon; default $LOCKBOX_SERVER, else " DEFAULT_SERVER "\n"
    "  --key KEY        API key; default $LOCKBOX_KEY, else $API_KEY, else " DEFAULT_KEY "\n"
    "  -h, --help       print this text\n"
    "  --version        print the version\n"
    "\n"
    "exit status of run:\n"
    "  0-255  the program's own exit code\n"
    "  124    the sandbox stopped the program: time limit (wall clock or CPU)\n"
    "  137    the sandbox stopped the program: memory, output or syscall policy\n"
    "  128+N  the program died of signal N (139 for SIGSEGV)\n"
    "  2      usage or local error: options, unreadable, empty, unsupported or\n"
    "         too large file (16 MiB)\n"
    "  3      server or transport error: unreachable, API key refused, an error\n"
    "         answer from the server\n"
    "When the sandbox stopped the program its reason follows the program's\n"
    "stderr, e.g. \"lockbox: error: timeout\". Errors of lockbox itself start\n"
    "with \"lockbox: \" and come alone.\n"
    "exit status of health: 0 the daemon answers ok, 1 it does not, 2 usage.\n";

struct cli_args {
        struct cli_options opts;
        char *server; /* owned copy behind opts.server */
        bool help, version;
        char **positional;
        int n_positional;
};

static const char *env_nonempty(const char *name)
{
        const char *v = getenv(name);
        return v && *v ? v : NULL;
}

/* The first of the values that is set, else fallback. */
static const char *first_set(const char *a, const char *b, const char *c, const char *fallback)
{
        return a ? a : b ? b : c ? c : fallback;
}

/* Base URL without trailing slashes, so paths can be appended. */
static char *server_normalize(const char *url)
{
        size_t n = strlen(url);
        while (n > 0 && url[n - 1] == '/')
                n--;
        return strndup(url, n);
}

static void option_unknown(char **argv, int c)
{
        const char *arg = argv[optind - 1];
        char short_name[3] = {'-', (char)optopt, '\0'};
        const char *name = strncmp(arg, "--", 2) == 0 ? arg : short_name;
        if (c == ':')
                cli_error("option '%s' needs a value (see lockbox --help)", name);
        else
                cli_error("unknown option '%s' (see lockbox --help)", name);
}

static int options_parse(int argc, char **argv, struct cli_args *a, const char **ret_server)
{
        static const struct option opts[] = {{"network", no_argument, NULL, 'n'},
                                             {"server", required_argument, NULL, 's'},
                                             {"key", required_argument, NULL, 'k'},
                                             {"language", required_argument, NULL, 'l'},
                                             {"help", no_argument, NULL, 'h'},
                                             {"version", no_argument, NULL, 'V'},
                                             {NULL, 0, NULL, 0}};
        const char *server = NULL;
        int c;
        opterr = 0;
        while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
                switch (c) {
                case 'n':
                        a->opts.network = true;
                        break;
                case 's':
                        server = optarg;
                        break;
                case 'k':
                        a->opts.key = optarg;
                        break;
                case 'l':
                        a->opts.language = optarg;
                        break;
                case 'h':
                        a->help = true;
                        break;
                case 'V':
                        a->version = true;
                        break;
                default:
                        option_unknown(argv, c);
                        return -EINVAL;
                }
        }
        *ret_server = server;
        return 0;
}

static int args_parse(int argc, char **argv, struct cli_args *a)
{
        const char *server;
        *a = (struct cli_args){0};
        int r = options_parse(argc, argv, a, &server);
        if (r < 0)
                return r;
        server = first_set(server, env_nonempty("LOCKBOX_SERVER"), NULL, DEFAULT_SERVER);
        if (!*server) {
                cli_error("--server needs a URL such as " DEFAULT_SERVER);
                return -EINVAL;
        }
        a->server = server_normalize(server);
        if (!a->server) {
                cli_error("out of memory");
                return -ENOMEM;
        }
        a->opts.server = a->server;
        a->opts.key = first_set(a->opts.key, env_nonempty("LOCKBOX_KEY"), env_nonempty("API_KEY"),
                                DEFAULT_KEY);
        a->positional = argv + optind;
        a->n_positional = argc - optind;
        return 0;
}

static int command_dispatch(const struct cli_args *a)
{
        if (a->n_positional == 0) {
                cli_error("missing command: run FILE or health (see lockbox --help)");
                return CLI_EXIT_USAGE;
        }
        const char *cmd = a->positional[0];
        if (strcmp(cmd, "run") == 0) {
                if (a->n_positional != 2) {
                        cli_error(a->n_positional < 2 ? "run: missing FILE (see lockbox --help)"
                                                      : "run: takes one FILE, got more");
                        return CLI_EXIT_USAGE;
                }
                return cli_run_command(&a->opts, a->positional[1]);
        }
        if (strcmp(cmd, "health") == 0) {
                if (a->n_positional != 1) {
                        cli_error("health: takes no arguments");
                        return CLI_EXIT_USAGE;
                }
                return cli_health_command(&a->opts);
        }
        cli_error("unknown command '%s': use run, health or shell (see lockbox --help)", cmd);
        return CLI_EXIT_USAGE;
}

int main(int argc, char **argv)
{
        /* its own options and commands */
        if (argc >= 2 && strcmp(argv[1], "shell") == 0)
                return cli_shell_main(argc - 1, argv + 1);
        struct cli_args a;
        if (args_parse(argc, argv, &a) < 0)
                return CLI_EXIT_USAGE;
        _cleanup_free_ char *server = a.server;
        if (a.help) {
                fputs(help_text, stdout);
                return 0;
        }
        if (a.version) {
                printf("lockbox %s\n", LOCKBOX_VERSION);
                return 0;
        }
        if (cli_transport_init() < 0) {
                cli_error("cannot initialize libcurl");
                return CLI_EXIT_SERVER;
        }
        int code = command_dispatch(&a);
        cli_transport_done();
        return code;
}
