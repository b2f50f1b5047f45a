/* Unit tests for the lockbox client (src/cli/). source.c is linked in:
 * the language from --language or the extension, and the file checks
 * (empty, NUL, invalid UTF-8, the 16 MiB cap for files and pipes, stdin).
 * The option parser lives beside main() in lockbox.c, so it is driven
 * through the built client (build/lockbox, next to this binary) with a
 * clean environment: usage errors and their one line, --help/--version,
 * options after the command, trailing slashes, and which of --server /
 * LOCKBOX_SERVER and --key / LOCKBOX_KEY / API_KEY / the default wins,
 * seen by a one-shot HTTP listener on 127.0.0.1. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/cli.h"
#include "test.h"

/* ---- source.c --------------------------------------------------------------------- */

static char err[1024];

TEST(cli_source_language_from_extension_or_option)
{
        const char *lang = NULL;
        EXPECT_ERRNO(cli_source_language("dir/prog.py", NULL, &lang, err, sizeof(err)), 0);
        EXPECT_STR_EQ(lang, "python3");
        EXPECT_ERRNO(cli_source_language("a.js", NULL, &lang, err, sizeof(err)), 0);
        EXPECT_STR_EQ(lang, "nodejs");
        EXPECT_ERRNO(cli_source_language("a.cjs", NULL, &lang, err, sizeof(err)), 0);
        EXPECT_STR_EQ(lang, "nodejs");
        /* the option wins over the extension */
        EXPECT_ERRNO(cli_source_language("a.py", "nodejs", &lang, err, sizeof(err)), 0);
        EXPECT_STR_EQ(lang, "nodejs");
        EXPECT_ERRNO(cli_source_language("-", "python3", &lang, err, sizeof(err)), 0);
        EXPECT_STR_EQ(lang, "python3");
}

TEST(cli_source_language_refusals)
{
        const char *lang = "unchanged";
        EXPECT_ERRNO(cli_source_language("a.py", "ruby", &lang, err, sizeof(err)), -EINVAL);
        EXPECT_STR_EQ(err, "unknown language 'ruby': use python3 or nodejs");
        EXPECT_ERRNO(cli_source_language("a.py", "Python3", &lang, err, sizeof(err)), -EINVAL);
        EXPECT_ERRNO(cli_source_language("-", NULL, &lang, err, sizeof(err)), -EINVAL);
        EXPECT_STR_EQ(err, "standard input: give --language python3|nodejs");
        EXPECT_ERRNO(cli_source_language("prog.mjs", NULL, &lang, err, sizeof(err)), -EINVAL);
        EXPECT_STR_CONTAINS(err, "prog.mjs: cannot tell the language from the name");
        /* a bare extension is a name, not a suffix; the case matters */
        EXPECT_ERRNO(cli_source_language(".py", NULL, &lang, err, sizeof(err)), -EINVAL);
        EXPECT_ERRNO(cli_source_language("A.PY", NULL, &lang, err, sizeof(err)), -EINVAL);
        EXPECT_STR_EQ(lang, "unchanged");
}

static char tmpdir[64];

static const char *tmp_file(const char *name, const void *data, size_t len)
{
        static char path[128];
        if (!tmpdir[0]) {
                snprintf(tmpdir, sizeof(tmpdir), "/tmp/lockbox-unit-cli-XXXXXX");
                if (!mkdtemp(tmpdir))
                        return "/nonexistent";
        }
        snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd >= 0) {
                if (write(fd, data, len) != (ssize_t)len)
                        unlink(path);
                close(fd);
        }
        return path;
}

/* Every case that makes files calls this after its checks, which are in
 * a helper of their own so that a failed one (which returns) still gets
 * here. */
static void tmp_clean(void)
{
        char cmd[128];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
        if (tmpdir[0] && system(cmd) != 0)
                fprintf(stderr, "  could not remove %s\n", tmpdir);
}

static void cli_source_load_reads_and_checks_the_text_checks(void)
{
        struct cli_source src;
        const char *p = tmp_file("ok.py", "print('h\xc3\xa9')\n", 13);
        EXPECT_ERRNO(cli_source_load(p, NULL, &src, err, sizeof(err)), 0);
        EXPECT_STR_EQ(src.language, "python3");
        EXPECT_MEM_EQ(src.code.data, src.code.len, "print('h\xc3\xa9')\n", 13);
        cli_source_free(&src);

        p = tmp_file("empty.py", "", 0);
        EXPECT_ERRNO(cli_source_load(p, NULL, &src, err, sizeof(err)), -ENODATA);
        EXPECT_STR_CONTAINS(err, "empty.py: the file is empty");
        p = tmp_file("nul.js", "ab\0c", 4);
        EXPECT_ERRNO(cli_source_load(p, NULL, &src, err, sizeof(err)), -EILSEQ);
        EXPECT_STR_CONTAINS(err, "nul.js: NUL byte at offset 2");
        p = tmp_file("latin1.py", "# caf\xe9\n", 7);
        EXPECT_ERRNO(cli_source_load(p, NULL, &src, err, sizeof(err)), -EILSEQ);
        EXPECT_STR_CONTAINS(err, "latin1.py: not valid UTF-8 at offset 5");
        EXPECT_ERRNO(cli_source_load(tmpdir, "python3", &src, err, sizeof(err)), -EISDIR);
        EXPECT_ERRNO(cli_source_load("/nonexistent/x.py", NULL, &src, err, sizeof(err)), -ENOENT);
        EXPECT_STR_EQ(err, "/nonexistent/x.py: No such file or directory");
        /* the language is checked before the file is opened */
        EXPECT_ERRNO(cli_source_load("/nonexistent/x.rb", NULL, &src, err, sizeof(err)), -EINVAL);
}

TEST(cli_source_load_reads_and_checks_the_text)
{
        cli_source_load_reads_and_checks_the_text_checks();
        tmp_clean(); /* after a failed check too */
}

/* 16 MiB is sent, one byte more is refused: by size for a file, by the
 * buffer's cap for a pipe (stdin). */
static void cli_source_load_size_cap_file_and_pipe_checks(void)
{
        const char *p = tmp_file("big.py", "#", 1);
        EXPECT_INT_EQ(truncate(p, CLI_SOURCE_MAX + 1), 0);
        struct cli_source src;
        EXPECT_ERRNO(cli_source_load(p, NULL, &src, err, sizeof(err)), -E2BIG);
        EXPECT_STR_CONTAINS(err, "big.py: larger than 16 MiB");
        char *buf = malloc(CLI_SOURCE_MAX + 1);
        EXPECT_NOT_NULL(buf);
        memset(buf, '#', CLI_SOURCE_MAX + 1);
        for (int extra = 0; extra <= 1; extra++) {
                int pp[2];
                EXPECT_INT_EQ(pipe2(pp, O_CLOEXEC), 0);
                pid_t pid = fork();
                if (pid == 0) {
                        close(pp[0]);
                        size_t left = CLI_SOURCE_MAX + (size_t)extra, off = 0;
                        while (left) {
                                ssize_t n = write(pp[1], buf + off, left);
                                if (n <= 0)
                                        _exit(1);
                                off += (size_t)n;
                                left -= (size_t)n;
                        }
                        _exit(0);
                }
                close(pp[1]);
                EXPECT_INT_EQ(dup2(pp[0], STDIN_FILENO), STDIN_FILENO);
                close(pp[0]);
                int r = cli_source_load("-", "python3", &src, err, sizeof(err));
                int null = open("/dev/null", O_RDONLY | O_CLOEXEC); /* keep fd 0 taken */
                dup2(null, STDIN_FILENO);
                close(null);
                waitpid(pid, NULL, 0);
                if (extra) {
                        EXPECT_ERRNO(r, -E2BIG);
                        EXPECT_STR_CONTAINS(err, "-: larger than 16 MiB");
                } else {
                        EXPECT_ERRNO(r, 0);
                        EXPECT_SIZE_EQ(src.code.len, CLI_SOURCE_MAX);
                        cli_source_free(&src);
                }
        }
        free(buf);
}

TEST(cli_source_load_size_cap_file_and_pipe)
{
        cli_source_load_size_cap_file_and_pipe_checks();
        tmp_clean(); /* after a failed check too */
}

/* ---- option parsing, through build/lockbox ------------------------------------------ */

struct cli_result {
        int status; /* exit code, or -1 */
        char out[4096], err[4096];
};

static void client_path(char *out, size_t size)
{
        char self[PATH_MAX];
        ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
        self[n > 0 ? n : 0] = '\0';
        char *slash = strrchr(self, '/');
        if (slash)
                *slash = '\0';
        snprintf(out, size, "%s/lockbox", self);
}

static void read_into(int fd, char *buf, size_t size)
{
        size_t o = 0;
        ssize_t n;
        while (o < size - 1 && (n = read(fd, buf + o, size - 1 - o)) > 0)
                o += (size_t)n;
        buf[o] = '\0';
}

/* Run the client with argv and exactly env (plus PATH); a NULL-ended list. */
static void run_client(struct cli_result *res, const char *const *args, const char *const *env)
{
        char exe[PATH_MAX + 16];
        client_path(exe, sizeof(exe));
        res->status = -1;
        res->out[0] = res->err[0] = '\0';
        if (access(exe, X_OK) < 0) {
                test_fail(__FILE__, __LINE__, "%s missing: `make unit` builds it", exe);
                return;
        }
        const char *argv[16] = {exe};
        size_t n = 1;
        for (; args[n - 1] && n < 15; n++)
                argv[n] = args[n - 1];
        argv[n] = NULL;
        const char *envp[8] = {"PATH=/usr/bin:/bin"};
        size_t ne = 1;
        for (; env && env[ne - 1] && ne < 7; ne++)
                envp[ne] = env[ne - 1];
        envp[ne] = NULL;
        int o[2], e[2];
        if (pipe2(o, O_CLOEXEC) < 0 || pipe2(e, O_CLOEXEC) < 0)
                return;
        pid_t pid = fork();
        if (pid == 0) {
                dup2(o[1], STDOUT_FILENO);
                dup2(e[1], STDERR_FILENO);
                execve(exe, (char *const *)argv, (char *const *)envp);
                _exit(127);
        }
        close(o[1]);
        close(e[1]);
        read_into(o[0], res->out, sizeof(res->out));
        read_into(e[0], res->err, sizeof(res->err));
        close(o[0]);
        close(e[0]);
        int status;
        if (waitpid(pid, &status, 0) == pid && WIFEXITED(status))
                res->status = WEXITSTATUS(status);
}

#define ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})

/* Exit status 2 and exactly one line on stderr, nothing on stdout. */
#define EXPECT_USAGE(args, line)                                                                   \
        do {                                                                                       \
                struct cli_result _r;                                                              \
                run_client(&_r, args, NULL);                                                       \
                EXPECT_INT_EQ(_r.status, CLI_EXIT_USAGE);                                          \
                EXPECT_STR_EQ(_r.err, line);                                                       \
                EXPECT_STR_EQ(_r.out, "");                                                         \
        } while (0)

TEST(cli_options_usage_errors)
{
        struct cli_result r;
        run_client(&r, (const char *const[]){NULL}, NULL);
        EXPECT_INT_EQ(r.status, CLI_EXIT_USAGE);
        EXPECT_STR_EQ(r.err, "lockbox: missing command: run FILE or health (see lockbox --help)\n");
        EXPECT_USAGE(ARGS("--bogus", "health"),
                     "lockbox: unknown option '--bogus' (see lockbox --help)\n");
        EXPECT_USAGE(ARGS("-x", "health"), "lockbox: unknown option '-x' (see lockbox --help)\n");
        EXPECT_USAGE(ARGS("health", "--server"),
                     "lockbox: option '--server' needs a value (see lockbox --help)\n");
        EXPECT_USAGE(ARGS("run", "a.py", "--key"),
                     "lockbox: option '--key' needs a value (see lockbox --help)\n");
        EXPECT_USAGE(ARGS("--server", "", "health"),
                     "lockbox: --server needs a URL such as http://127.0.0.1:8194\n");
        EXPECT_USAGE(ARGS("run"), "lockbox: run: missing FILE (see lockbox --help)\n");
        EXPECT_USAGE(ARGS("run", "a.py", "b.py"), "lockbox: run: takes one FILE, got more\n");
        EXPECT_USAGE(ARGS("health", "now"), "lockbox: health: takes no arguments\n");
        EXPECT_USAGE(
            ARGS("frob"),
            "lockbox: unknown command 'frob': use run, health or shell (see lockbox --help)\n");
        EXPECT_USAGE(ARGS("run", "x.py", "--language", "ruby"),
                     "lockbox: unknown language 'ruby': use python3 or nodejs\n");
}

TEST(cli_options_help_and_version)
{
        struct cli_result r;
        /* --help wins over everything else on the line, even a bad command */
        const char *const *forms[] = {ARGS("--help"), ARGS("-h"), ARGS("frob", "--help")};
        for (size_t i = 0; i < 3; i++) {
                run_client(&r, forms[i], NULL);
                EXPECT_INT_EQ(r.status, 0);
                EXPECT_TRUE(strncmp(r.out, "usage: lockbox run FILE", 23) == 0);
                EXPECT_STR_EQ(r.err, "");
        }
        run_client(&r, ARGS("--version"), NULL);
        EXPECT_INT_EQ(r.status, 0);
        unsigned a, b, c;
        char nl;
        EXPECT_INT_EQ(sscanf(r.out, "lockbox %u.%u.%u%c", &a, &b, &c, &nl), 4);
        EXPECT_INT_EQ(nl, '\n');
}

/* A port on 127.0.0.1 that refuses connections: bound, never listening. */
static int dead_port(int *ret_fd)
{
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t len = sizeof(sa);
        if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
            getsockname(fd, (struct sockaddr *)&sa, &len) < 0)
                return -1;
        *ret_fd = fd;
        return ntohs(sa.sin_port);
}

/* The server a command used shows in its error line: trailing slashes
 * gone, --server before LOCKBOX_SERVER, options after the command. */
TEST(cli_options_server_choice)
{
        int fd1 = -1, fd2 = -1;
        int p1 = dead_port(&fd1), p2 = dead_port(&fd2);
        EXPECT_TRUE(p1 > 0 && p2 > 0);
        char url1[64], url1_slashes[64], env2[96], want[160];
        snprintf(url1, sizeof(url1), "http://127.0.0.1:%d", p1);
        EXPECT_TRUE((size_t)snprintf(url1_slashes, sizeof(url1_slashes), "%s///", url1) <
                    sizeof(url1_slashes));
        snprintf(env2, sizeof(env2), "LOCKBOX_SERVER=http://127.0.0.1:%d/", p2);
        struct cli_result r;
        run_client(&r, ARGS("health", "--server", url1_slashes), NULL);
        EXPECT_INT_EQ(r.status, CLI_EXIT_UNHEALTHY);
        snprintf(want, sizeof(want), "lockbox: cannot reach %s: Connection refused\n", url1);
        EXPECT_STR_EQ(r.err, want);
        run_client(&r, ARGS("health", "--server", url1), ARGS(env2));
        EXPECT_STR_EQ(r.err, want);
        run_client(&r, ARGS("health"), ARGS(env2));
        snprintf(want, sizeof(want),
                 "lockbox: cannot reach http://127.0.0.1:%d: Connection refused\n", p2);
        EXPECT_STR_EQ(r.err, want);
        close(fd1);
        close(fd2);
}

/* Accepts one connection on listen_fd, returns the X-Api-Key it carried
 * (or "(none)") and answers a successful empty run. */
static void serve_one(int listen_fd, char *key, size_t size)
{
        snprintf(key, size, "(no request)");
        struct pollfd p = {.fd = listen_fd, .events = POLLIN};
        if (poll(&p, 1, 5000) != 1)
                return;
        int c = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);
        if (c < 0)
                return;
        char req[8192];
        size_t o = 0;
        ssize_t n;
        req[0] = '\0';
        while (o < sizeof(req) - 1 && !strstr(req, "\r\n\r\n") &&
               (n = read(c, req + o, sizeof(req) - 1 - o)) > 0) {
                o += (size_t)n;
                req[o] = '\0';
        }
        const char *h = strcasestr(req, "\r\nX-Api-Key: ");
        if (h)
                snprintf(key, size, "%.*s", (int)strcspn(h + 13, "\r\n"), h + 13);
        else
                snprintf(key, size, "(none)");
        static const char body[] = "{\"code\":0,\"message\":\"success\",\"data\":{\"stdout\":\"\","
                                   "\"stderr\":\"\",\"error\":\"\",\"exit_code\":0}}";
        char resp[512];
        int len = snprintf(resp, sizeof(resp),
                           "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                           "Content-Length: %zu\r\nConnection: close\r\n\r\n%s",
                           strlen(body), body);
        if (write(c, resp, (size_t)len) != len)
                snprintf(key, size, "(answer failed)");
        close(c);
}

/* The key a `run` sent, given these arguments and environment. */
static void key_sent(const char *const *extra_args, const char *const *env, char *key, size_t size)
{
        int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t len = sizeof(sa);
        snprintf(key, size, "(no listener)");
        if (l < 0 || bind(l, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(l, 1) < 0 ||
            getsockname(l, (struct sockaddr *)&sa, &len) < 0)
                return;
        char url[64];
        snprintf(url, sizeof(url), "http://127.0.0.1:%d", ntohs(sa.sin_port));
        const char *prog = tmp_file("k.py", "print(1)\n", 9);
        const char *args[8] = {"run", prog, "--server", url};
        size_t n = 4;
        for (; extra_args && *extra_args && n < 7; extra_args++)
                args[n++] = *extra_args;
        args[n] = NULL;
        pid_t pid = fork();
        if (pid == 0) { /* the client runs in a child, the listener here */
                struct cli_result r;
                run_client(&r, args, env);
                _exit(r.status == 0 ? 0 : 1);
        }
        serve_one(l, key, size);
        int status = -1;
        waitpid(pid, &status, 0);
        close(l);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
                snprintf(key, size, "(client failed)");
}

static void cli_options_key_precedence_checks(void)
{
        char key[128];
        key_sent(NULL, NULL, key, sizeof(key));
        EXPECT_STR_EQ(key, "dify-sandbox");
        key_sent(NULL, ARGS("API_KEY=from-api-key"), key, sizeof(key));
        EXPECT_STR_EQ(key, "from-api-key");
        key_sent(NULL, ARGS("API_KEY=from-api-key", "LOCKBOX_KEY=from-lockbox-key"), key,
                 sizeof(key));
        EXPECT_STR_EQ(key, "from-lockbox-key");
        key_sent(ARGS("--key", "from-option"), ARGS("API_KEY=a", "LOCKBOX_KEY=b"), key,
                 sizeof(key));
        EXPECT_STR_EQ(key, "from-option");
        /* an empty variable counts as unset */
        key_sent(NULL, ARGS("LOCKBOX_KEY=", "API_KEY=fallback"), key, sizeof(key));
        EXPECT_STR_EQ(key, "fallback");
}

TEST(cli_options_key_precedence)
{
        cli_options_key_precedence_checks();
        tmp_clean(); /* after a failed check too */
}
