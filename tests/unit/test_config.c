/* Unit tests for src/config: defaults, the reference's own config shape,
 * every value syntax, every error with its exact "file:line:col: key:
 * reason" text, environment overrides, cross-field checks, the dump and the
 * generated docs (docs/CONFIG.md must match config_doc()). */
#include <errno.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config/config.h"
#include "config/schema.h"
#include "test.h"

static char err[512];
static const char *const *fake_env;

static const char *fake_getenv(const char *name)
{
        for (const char *const *p = fake_env; p && *p; p += 2)
                if (strcmp(p[0], name) == 0)
                        return p[1];
        return NULL;
}

/* Loads text as "x.yaml" with the fake environment env (NULL-terminated
 * name/value pairs, or NULL). */
static int load(struct config *cfg, const char *text, const char *const *env)
{
        fake_env = env;
        return config_load_buffer(cfg, "x.yaml", text, strlen(text), fake_getenv, err, sizeof(err));
}

/* Expects text to fail with exactly want. */
static void expect_error(const char *file, int line, const char *text, const char *const *env,
                         const char *want)
{
        struct config cfg;
        int r = load(&cfg, text, env);
        if (r != -EINVAL)
                test_fail(file, line, "load returned %d, want -EINVAL (err \"%s\")", r, err);
        else if (strcmp(err, want) != 0)
                test_fail(file, line, "error:\n    got:  \"%s\"\n    want: \"%s\"", err, want);
        config_free(&cfg);
}
#define EXPECT_LOAD_ERROR(text, env, want) expect_error(__FILE__, __LINE__, text, env, want)

static int nr(const char *name)
{
        return seccomp_syscall_resolve_name_arch(SCMP_ARCH_NATIVE, name);
}

static void expect_defaults(const struct config *c)
{
        EXPECT_INT_EQ(c->port, 8194);
        EXPECT_TRUE(!c->debug);
        EXPECT_STR_EQ(c->key, "dify-sandbox");
        EXPECT_INT_EQ(c->max_workers, 4);
        EXPECT_INT_EQ(c->max_requests, 50);
        EXPECT_INT_EQ(c->worker_timeout, 5);
        EXPECT_STR_EQ(c->python_path, "/usr/bin/python3");
        EXPECT_STR_EQ(c->python_pip_mirror_url, "");
        EXPECT_INT_EQ(c->python_deps_update_interval, 1800);
        EXPECT_STR_EQ(c->nodejs_path, "/usr/bin/node");
        EXPECT_TRUE(c->enable_network);
        EXPECT_TRUE(!c->enable_preload);
        EXPECT_INT_EQ(c->n_allowed_syscalls, 0);
        EXPECT_STR_EQ(c->log_path, "");
        EXPECT_STR_EQ(c->proxy_socks5, "");
        EXPECT_STR_EQ(c->proxy_http, "");
        EXPECT_STR_EQ(c->proxy_https, "");
        EXPECT_STR_EQ(c->listen, "0.0.0.0");
        EXPECT_INT_EQ(c->max_body_bytes, 16 << 20);
        EXPECT_STR_EQ(c->user, "nobody");
        EXPECT_INT_EQ(c->connection_timeout, 30);
        EXPECT_INT_EQ(c->max_connections, 256);
        EXPECT_INT_EQ(c->memory_bytes, 512 << 20);
        EXPECT_INT_EQ(c->processes, 64);
        EXPECT_INT_EQ(c->output_bytes, 8 << 20);
        EXPECT_INT_EQ(c->tmp_bytes, 64 << 20);
        EXPECT_INT_EQ(c->tmp_inodes, 4096);
        EXPECT_INT_EQ(c->cpu_seconds, 30);
        EXPECT_INT_EQ(c->open_files, 256);
        EXPECT_INT_EQ(c->file_bytes, 64 << 20);
        EXPECT_INT_EQ(c->uid_min, 10000);
        EXPECT_INT_EQ(c->uid_max, 10999);
        EXPECT_INT_EQ(c->n_extra_ro_paths, 0);
        EXPECT_STR_EQ(c->hostname, "sandbox");
        EXPECT_STR_EQ(c->python_requirements, "dependencies/python-requirements.txt");
}

TEST(config_defaults_all_keys)
{
        struct config c;
        config_defaults(&c);
        expect_defaults(&c);
        config_free(&c);
        config_free(&c);
        EXPECT_TRUE(c.key == NULL && c.python_path == NULL && c.allowed_syscalls == NULL);
}

TEST(config_empty_file_and_comments_give_defaults)
{
        const char *texts[] = {"", "# nothing here\n\n   # still nothing\n", "---\n", "~\n"};
        for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
                struct config c;
                EXPECT_INT_EQ(load(&c, texts[i], NULL), 0);
                EXPECT_STR_EQ(err, "");
                expect_defaults(&c);
                config_free(&c);
        }
}

TEST(config_null_path_is_defaults_plus_env)
{
        struct config c;
        const char *env[] = {"MAX_WORKERS", "7", NULL};
        fake_env = env;
        EXPECT_INT_EQ(config_load(&c, NULL, fake_getenv, err, sizeof(err)), 0);
        EXPECT_INT_EQ(c.max_workers, 7);
        EXPECT_INT_EQ(c.port, 8194);
        config_free(&c);
}

/* Redirects stderr (where log lines go) into a temporary file. */
static FILE *stderr_capture(int *saved)
{
        FILE *f = tmpfile();
        fflush(stderr);
        *saved = dup(STDERR_FILENO);
        dup2(fileno(f), STDERR_FILENO);
        return f;
}

static void stderr_restore(FILE *f, int saved, char *buf, size_t len)
{
        fflush(stderr);
        dup2(saved, STDERR_FILENO);
        close(saved);
        rewind(f);
        size_t n = fread(buf, 1, len - 1, f);
        buf[n] = '\0';
        fclose(f);
}

/* docker/volumes/sandbox/conf/config.yaml of a Dify deployment. */
static const char reference_yaml[] =
    "app:\n"
    "  port: 8194\n"
    "  debug: True\n"
    "  key: dify-sandbox\n"
    "max_workers: 4\n"
    "max_requests: 50\n"
    "worker_timeout: 5\n"
    "python_path: /usr/local/bin/python3\n"
    "python_lib_path:\n"
    "  - /usr/local/lib/python3.10\n"
    "  - /usr/lib/python3.10\n"
    "  - /etc/ssl/certs/ca-certificates.crt\n"
    "python_pip_mirror_url: https://pypi.tuna.tsinghua.edu.cn/simple\n"
    "python_deps_update_interval: 30m\n"
    "nodejs_path: /usr/local/bin/node\n"
    "enable_network: True # please make sure there is no network risk\n"
    "allowed_syscalls: # please leave it empty if you have no idea how seccomp works\n"
    "log_path: \"./logs\"\n"
    "proxy:\n"
    "  socks5: ''\n"
    "  http: ''\n"
    "  https: ''\n";

TEST(config_loads_reference_shape)
{
        struct config c;
        char logged[4096];
        int saved;
        FILE *f = stderr_capture(&saved);
        int r = load(&c, reference_yaml, NULL);
        stderr_restore(f, saved, logged, sizeof(logged));
        EXPECT_INT_EQ(r, 0);
        EXPECT_INT_EQ(c.port, 8194);
        EXPECT_TRUE(c.debug);
        EXPECT_STR_EQ(c.key, "dify-sandbox");
        EXPECT_STR_EQ(c.python_path, "/usr/local/bin/python3");
        EXPECT_STR_EQ(c.python_pip_mirror_url, "https://pypi.tuna.tsinghua.edu.cn/simple");
        EXPECT_INT_EQ(c.python_deps_update_interval, 1800);
        EXPECT_STR_EQ(c.nodejs_path, "/usr/local/bin/node");
        EXPECT_TRUE(c.enable_network);
        EXPECT_INT_EQ(c.n_allowed_syscalls, 0);
        EXPECT_STR_EQ(c.log_path, "./logs");
        EXPECT_STR_EQ(c.proxy_socks5, "");
        EXPECT_STR_EQ(c.proxy_http, "");
        EXPECT_STR_EQ(c.proxy_https, "");
        EXPECT_STR_CONTAINS(logged, "level=warn");
        EXPECT_STR_CONTAINS(logged, "event=config.deprecated key=python_lib_path");
        EXPECT_STR_CONTAINS(logged, "source=\"x.yaml:9:1\"");
        EXPECT_STR_CONTAINS(logged, "ignored");
        config_free(&c);
}

TEST(config_loads_every_prefix_of_reference_without_crashing)
{
        /* Every truncation is either valid or a clean error. */
        static char logged[65536];
        int saved;
        FILE *f = stderr_capture(&saved);
        for (size_t n = 0; n <= strlen(reference_yaml); n++) {
                struct config c;
                int r = config_load_buffer(&c, "x.yaml", reference_yaml, n, NULL, err, sizeof(err));
                config_free(&c);
                if (r != 0 && (r != -EINVAL || strncmp(err, "x.yaml:", 7) != 0))
                        test_fail(__FILE__, __LINE__, "prefix %zu: %d \"%s\"", n, r, err);
        }
        stderr_restore(f, saved, logged, sizeof(logged));
}

TEST(config_default_file_loads)
{
        struct config c;
        EXPECT_INT_EQ(config_load(&c, "conf/config.yaml", NULL, err, sizeof(err)), 0);
        EXPECT_STR_EQ(err, "");
        expect_defaults(&c);
        config_free(&c);
}

TEST(config_value_syntaxes)
{
        struct config c;
        EXPECT_INT_EQ(load(&c,
                           "app: {port: '8080', debug: on, key: \"s3cret\"}\n"
                           "max_workers: +8\n"
                           "enable_network: off\n"
                           "enable_preload: YES\n"
                           "python_deps_update_interval: 1h30m\n"
                           "limits:\n"
                           "  memory: 1GiB\n"
                           "  output: 65536\n"
                           "  tmp_size: 2gb\n"
                           "  file_size: 16Mi\n"
                           "server:\n"
                           "  listen: \"::1\"\n"
                           "  max_body_bytes: 1k\n"
                           "jail:\n"
                           "  hostname: box-1\n"
                           "  uid_min: 20000\n"
                           "  uid_max: 20014\n"
                           "  extra_ro_paths:\n"
                           "    - /opt/models\n"
                           "    - \"/srv/data set\"\n"
                           "proxy:\n"
                           "  http: http://proxy:3128\n"
                           "  socks5:\n",
                           NULL),
                      0);
        EXPECT_INT_EQ(c.port, 8080);
        EXPECT_TRUE(c.debug);
        EXPECT_STR_EQ(c.key, "s3cret");
        EXPECT_INT_EQ(c.max_workers, 8);
        EXPECT_TRUE(!c.enable_network);
        EXPECT_TRUE(c.enable_preload);
        EXPECT_INT_EQ(c.python_deps_update_interval, 5400);
        EXPECT_INT_EQ(c.memory_bytes, INT64_C(1) << 30);
        EXPECT_INT_EQ(c.output_bytes, 65536);
        EXPECT_INT_EQ(c.tmp_bytes, INT64_C(2) << 30);
        EXPECT_INT_EQ(c.file_bytes, 16 << 20);
        EXPECT_STR_EQ(c.listen, "::1");
        EXPECT_INT_EQ(c.max_body_bytes, 1024);
        EXPECT_STR_EQ(c.hostname, "box-1");
        EXPECT_INT_EQ(c.uid_min, 20000);
        EXPECT_INT_EQ(c.uid_max, 20014);
        EXPECT_INT_EQ(c.n_extra_ro_paths, 2);
        EXPECT_STR_EQ(c.extra_ro_paths[0], "/opt/models");
        EXPECT_STR_EQ(c.extra_ro_paths[1], "/srv/data set");
        EXPECT_STR_EQ(c.proxy_http, "http://proxy:3128");
        EXPECT_STR_EQ(c.proxy_socks5, "");
        config_free(&c);
}

TEST(config_duration_forms)
{
        static const struct {
                const char *text;
                int64_t want;
        } cases[] = {
            {"python_deps_update_interval: 45s", 45},
            {"python_deps_update_interval: 2h", 7200},
            {"python_deps_update_interval: 600", 600},
            {"python_deps_update_interval: 0", 0},
            {"python_deps_update_interval: ''", 0},
            {"python_deps_update_interval:", 0},
            {"python_deps_update_interval: 8760h", 31536000},
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                struct config c;
                EXPECT_INT_EQ(load(&c, cases[i].text, NULL), 0);
                EXPECT_INT_EQ(c.python_deps_update_interval, cases[i].want);
                config_free(&c);
        }
        EXPECT_LOAD_ERROR("python_deps_update_interval: 8761h", NULL,
                          "x.yaml:1:30: python_deps_update_interval: 8761h is above the maximum "
                          "8760h");
        EXPECT_LOAD_ERROR("python_deps_update_interval: soon", NULL,
                          "x.yaml:1:30: python_deps_update_interval: 'soon' is not a duration "
                          "(like 30m, 1h30m or 45s)");
}

TEST(config_allowed_syscalls_names_numbers_dedupe)
{
        struct config c;
        EXPECT_INT_EQ(
            load(&c, "allowed_syscalls:\n  - getpid\n  - 0 # read\n  - read\n  - getpid\n", NULL),
            0);
        EXPECT_INT_EQ(c.n_allowed_syscalls, 2);
        EXPECT_INT_EQ(c.allowed_syscalls[0], nr("getpid"));
        EXPECT_INT_EQ(c.allowed_syscalls[1], 0);
        EXPECT_INT_EQ(nr("read"), 0);
        config_free(&c);
        EXPECT_INT_EQ(load(&c, "allowed_syscalls: []", NULL), 0);
        EXPECT_INT_EQ(c.n_allowed_syscalls, 0);
        config_free(&c);
}

TEST(config_allowed_syscalls_env)
{
        struct config c;
        char num[16];
        snprintf(num, sizeof(num), "%d", nr("gettid"));
        const char *env[] = {"ALLOWED_SYSCALLS", NULL, NULL};
        char value[64];
        snprintf(value, sizeof(value), " getpid,%s , read,getpid", num);
        env[1] = value;
        EXPECT_INT_EQ(load(&c, "allowed_syscalls: [write]", env), 0);
        EXPECT_INT_EQ(c.n_allowed_syscalls, 3);
        EXPECT_INT_EQ(c.allowed_syscalls[0], nr("getpid"));
        EXPECT_INT_EQ(c.allowed_syscalls[1], nr("gettid"));
        EXPECT_INT_EQ(c.allowed_syscalls[2], nr("read"));
        config_free(&c);
        const char *bad[] = {"ALLOWED_SYSCALLS", "read,,write", NULL};
        EXPECT_LOAD_ERROR("", bad, "env ALLOWED_SYSCALLS: empty entry in a comma-separated list");
        const char *never[] = {"ALLOWED_SYSCALLS", "read, ptrace", NULL};
        EXPECT_LOAD_ERROR("", never,
                          "env ALLOWED_SYSCALLS: 'ptrace' can never be allowed: it would let "
                          "jailed code escape or reshape the jail");
}

TEST(config_never_list_rejected_by_name_and_number)
{
        char text[128], want[256];
        for (size_t i = 0; config_never_allowed_syscalls[i]; i++) {
                const char *name = config_never_allowed_syscalls[i];
                snprintf(text, sizeof(text), "allowed_syscalls: [read, %s]", name);
                snprintf(want, sizeof(want),
                         "x.yaml:1:26: allowed_syscalls: '%s' can never be allowed: it would let "
                         "jailed code escape or reshape the jail",
                         name);
                EXPECT_LOAD_ERROR(text, NULL, want);
        }
        snprintf(text, sizeof(text), "allowed_syscalls:\n  - %d\n", nr("execve"));
        snprintf(want, sizeof(want),
                 "x.yaml:2:5: allowed_syscalls: '%d' (execve) can never be allowed: it would let "
                 "jailed code escape or reshape the jail",
                 nr("execve"));
        EXPECT_LOAD_ERROR(text, NULL, want);
}

TEST(config_never_list_resolves_natively)
{
        size_t n = 0;
        for (; config_never_allowed_syscalls[n]; n++)
                if (nr(config_never_allowed_syscalls[n]) < 0)
                        test_fail(__FILE__, __LINE__, "%s does not resolve",
                                  config_never_allowed_syscalls[n]);
        EXPECT_INT_EQ(n, 25);
}

TEST(config_errors_unknown_and_duplicate)
{
        EXPECT_LOAD_ERROR("app:\n  port: 1\n\nfoo: 1\n", NULL, "x.yaml:4:1: foo: unknown key");
        EXPECT_LOAD_ERROR("app:\n  foo: 1\n", NULL, "x.yaml:2:3: app.foo: unknown key");
        EXPECT_LOAD_ERROR("limits:\n  memory: 1G\n  memroy: 1G\n", NULL,
                          "x.yaml:3:3: limits.memroy: unknown key");
        EXPECT_LOAD_ERROR("app.port: 1\n", NULL, "x.yaml:1:1: app.port: unknown key");
        EXPECT_LOAD_ERROR("port: 1\n", NULL, "x.yaml:1:1: port: unknown key");
        EXPECT_LOAD_ERROR("max_workers: 4\nmax_requests: 9\n\n\nmax_workers: 5\n", NULL,
                          "x.yaml:5:1: max_workers: duplicate key");
        EXPECT_LOAD_ERROR("app:\n  port: 1\napp:\n  debug: true\n", NULL,
                          "x.yaml:3:1: app: duplicate key");
        EXPECT_LOAD_ERROR("app:\n  port: 1\n  port: 2\n", NULL,
                          "x.yaml:3:3: app.port: duplicate key");
        char logged[4096];
        int saved;
        FILE *f = stderr_capture(&saved);
        EXPECT_LOAD_ERROR("python_lib_path: []\npython_lib_path: []\n", NULL,
                          "x.yaml:2:1: python_lib_path: duplicate key");
        stderr_restore(f, saved, logged, sizeof(logged));
        EXPECT_LOAD_ERROR("? [a]\n: 1\n", NULL, "x.yaml:1:3: keys must be plain strings");
        EXPECT_LOAD_ERROR("'': 1\n", NULL, "x.yaml:1:1: '': unknown key");
}

TEST(config_errors_node_kinds)
{
        EXPECT_LOAD_ERROR("app: 3\n", NULL, "x.yaml:1:6: app: expected a mapping");
        EXPECT_LOAD_ERROR("app: [1]\n", NULL, "x.yaml:1:6: app: expected a mapping");
        EXPECT_LOAD_ERROR("allowed_syscalls: read\n", NULL,
                          "x.yaml:1:19: allowed_syscalls: expected a list");
        EXPECT_LOAD_ERROR("allowed_syscalls: {a: 1}\n", NULL,
                          "x.yaml:1:19: allowed_syscalls: expected a list");
        EXPECT_LOAD_ERROR("max_workers: [1]\n", NULL,
                          "x.yaml:1:14: max_workers: expected a single value, not a list");
        EXPECT_LOAD_ERROR("max_workers: {a: 1}\n", NULL,
                          "x.yaml:1:14: max_workers: expected a single value, not a mapping");
        EXPECT_LOAD_ERROR("jail:\n  extra_ro_paths:\n    - [/a]\n", NULL,
                          "x.yaml:3:7: jail.extra_ro_paths: list entries must be single values");
        EXPECT_LOAD_ERROR("- 1\n", NULL, "x.yaml:1:1: the top level must be a mapping");
        EXPECT_LOAD_ERROR("just text\n", NULL, "x.yaml:1:1: the top level must be a mapping");
        EXPECT_LOAD_ERROR("max_workers:\n", NULL, "x.yaml:1:13: max_workers: a value is required");
        EXPECT_LOAD_ERROR("app:\n  debug: ~\n", NULL,
                          "x.yaml:2:10: app.debug: a value is required");
}

TEST(config_errors_yaml_syntax_and_documents)
{
        EXPECT_LOAD_ERROR("app:\n  port: 1\n debug: true\n", NULL,
                          "x.yaml:3:2: YAML syntax error: did not find expected key");
        EXPECT_LOAD_ERROR("app: [1, 2\n", NULL,
                          "x.yaml:2:1: YAML syntax error: did not find expected ',' or ']'");
        EXPECT_LOAD_ERROR("a: b\n  c: d\n", NULL,
                          "x.yaml:2:4: YAML syntax error: mapping values are not allowed in this "
                          "context");
        EXPECT_LOAD_ERROR("a:\n\tb: 1\n", NULL,
                          "x.yaml:2:1: YAML syntax error: found character that cannot start any "
                          "token");
        EXPECT_LOAD_ERROR("a: \xc3\x28\n", NULL,
                          "x.yaml:1:5: YAML syntax error: invalid trailing UTF-8 octet");
        EXPECT_LOAD_ERROR("max_workers: 4\n---\nmax_workers: 5\n", NULL,
                          "x.yaml:2:1: only one YAML document is allowed");
        EXPECT_LOAD_ERROR("max_workers: *nope\n", NULL,
                          "x.yaml:1:14: YAML syntax error: found undefined alias");
}

TEST(config_errors_hostile_shapes)
{
        /* Deep flow nesting makes libyaml quadratic: refused early. */
        size_t depth = 100000;
        char *deep = malloc(2 * depth + 8);
        memcpy(deep, "a: ", 3);
        memset(deep + 3, '[', depth);
        memset(deep + 3 + depth, ']', depth);
        deep[3 + 2 * depth] = '\0';
        EXPECT_LOAD_ERROR(deep, NULL, "x.yaml:1:35: YAML nested deeper than 32 levels");
        free(deep);
        /* libyaml looks each alias up among all anchors: capped. */
        char anchors[8192];
        size_t o = (size_t)snprintf(anchors, sizeof(anchors), "x: &a 1\n");
        for (int i = 0; i < 300; i++)
                o += (size_t)snprintf(anchors + o, sizeof(anchors) - o, "k%03d: *a\n", i);
        EXPECT_LOAD_ERROR(anchors, NULL, "x.yaml:257:7: more than 256 YAML anchors and aliases");
        EXPECT_LOAD_ERROR("app:\n  key: \"ab\\0cd\"\n", NULL,
                          "x.yaml:2:8: app.key: contains a NUL byte");
}

TEST(config_errors_values)
{
        EXPECT_LOAD_ERROR("max_workers: 0\n", NULL,
                          "x.yaml:1:14: max_workers: 0 is below the minimum 1");
        EXPECT_LOAD_ERROR("max_workers: 257\n", NULL,
                          "x.yaml:1:14: max_workers: 257 is above the maximum 256");
        EXPECT_LOAD_ERROR("app:\n  port: abc\n", NULL,
                          "x.yaml:2:9: app.port: 'abc' is not an integer");
        EXPECT_LOAD_ERROR("app:\n  port: 99999999999999999999\n", NULL,
                          "x.yaml:2:9: app.port: 99999999999999999999 is above the maximum 65535");
        EXPECT_LOAD_ERROR("app:\n  port: -99999999999999999999\n", NULL,
                          "x.yaml:2:9: app.port: -99999999999999999999 is below the minimum 1");
        EXPECT_LOAD_ERROR("app:\n  port: 8194.5\n", NULL,
                          "x.yaml:2:9: app.port: '8194.5' is not an integer");
        EXPECT_LOAD_ERROR("app:\n  debug: maybe\n", NULL,
                          "x.yaml:2:10: app.debug: 'maybe' is not a boolean (true or false)");
        EXPECT_LOAD_ERROR("app:\n  key: ''\n", NULL, "x.yaml:2:8: app.key: must not be empty");
        EXPECT_LOAD_ERROR("limits:\n  memory: 8M\n", NULL,
                          "x.yaml:2:11: limits.memory: 8M is below the minimum 16M");
        EXPECT_LOAD_ERROR("limits:\n  memory: 65G\n", NULL,
                          "x.yaml:2:11: limits.memory: 65G is above the maximum 64G");
        EXPECT_LOAD_ERROR("limits:\n  memory: 1.5G\n", NULL,
                          "x.yaml:2:11: limits.memory: '1.5G' is not a size (a byte count, or a "
                          "number with K, M, G or T)");
        EXPECT_LOAD_ERROR("limits:\n  output: 99999999999T\n", NULL,
                          "x.yaml:2:11: limits.output: 99999999999T is above the maximum 1G");
        EXPECT_LOAD_ERROR("limits:\n  open_files: 70000\n", NULL,
                          "x.yaml:2:15: limits.open_files: 70000 is above the maximum 65536");
        EXPECT_LOAD_ERROR("python_path: python3\n", NULL,
                          "x.yaml:1:14: python_path: 'python3' is not an absolute path");
        EXPECT_LOAD_ERROR("nodejs_path: ''\n", NULL,
                          "x.yaml:1:14: nodejs_path: '' is not an absolute path");
        EXPECT_LOAD_ERROR("server:\n  listen: localhost\n", NULL,
                          "x.yaml:2:11: server.listen: 'localhost' is not an IPv4 or IPv6 address");
        EXPECT_LOAD_ERROR("server:\n  user:\n", NULL, "x.yaml:2:8: server.user: must not be empty");
        EXPECT_LOAD_ERROR("jail:\n  hostname: my_box\n", NULL,
                          "x.yaml:2:13: jail.hostname: 'my_box' is not a hostname (1 to 63 "
                          "letters, digits or '-')");
        EXPECT_LOAD_ERROR("jail:\n  hostname: "
                          "a234567890123456789012345678901234567890123456789012345678901234\n",
                          NULL,
                          "x.yaml:2:13: jail.hostname: "
                          "'a23456789012345678901234567890123456789012345678901234567890...' is "
                          "not a hostname (1 to 63 letters, digits or '-')");
        EXPECT_LOAD_ERROR("allowed_syscalls: [read, frobnicate]\n", NULL,
                          "x.yaml:1:26: allowed_syscalls: 'frobnicate' is not a system call on "
                          "this architecture");
        EXPECT_LOAD_ERROR("allowed_syscalls: [99999]\n", NULL,
                          "x.yaml:1:20: allowed_syscalls: '99999' is not a system call on this "
                          "architecture");
        EXPECT_LOAD_ERROR("allowed_syscalls: [-1]\n", NULL,
                          "x.yaml:1:20: allowed_syscalls: '-1' is not a system call on this "
                          "architecture");
}

TEST(config_errors_extra_ro_paths)
{
        EXPECT_LOAD_ERROR("jail:\n  extra_ro_paths: [/opt, opt]\n", NULL,
                          "x.yaml:2:26: jail.extra_ro_paths: 'opt' is not an absolute path");
        EXPECT_LOAD_ERROR("jail:\n  extra_ro_paths: [/a/../etc]\n", NULL,
                          "x.yaml:2:20: jail.extra_ro_paths: '/a/../etc' must not contain '..'");
        EXPECT_LOAD_ERROR("jail:\n  extra_ro_paths: [/]\n", NULL,
                          "x.yaml:2:20: jail.extra_ro_paths: '/' cannot be bound read-only into "
                          "the jail");
        EXPECT_LOAD_ERROR("jail:\n  extra_ro_paths: [/tmp/models]\n", NULL,
                          "x.yaml:2:20: jail.extra_ro_paths: '/tmp/models' is inside /tmp, which "
                          "the jail provides itself");
        EXPECT_LOAD_ERROR("jail:\n  extra_ro_paths: [/etc/passwd]\n", NULL,
                          "x.yaml:2:20: jail.extra_ro_paths: '/etc/passwd' is inside /etc/passwd, "
                          "which the jail provides itself");
        EXPECT_LOAD_ERROR("jail:\n  extra_ro_paths: [/dev]\n", NULL,
                          "x.yaml:2:20: jail.extra_ro_paths: '/dev' is inside /dev, which the jail "
                          "provides itself");
        const char *unnormal[] = {"/a//b", "/a/", "/a/./b", "//a", "/."};
        for (size_t i = 0; i < sizeof(unnormal) / sizeof(unnormal[0]); i++) {
                char text[64], want[160];
                snprintf(text, sizeof(text), "jail:\n  extra_ro_paths: ['%s']\n", unnormal[i]);
                snprintf(want, sizeof(want),
                         "x.yaml:2:20: jail.extra_ro_paths: '%s' is not a normalised path",
                         unnormal[i]);
                EXPECT_LOAD_ERROR(text, NULL, want);
        }
        EXPECT_LOAD_ERROR("jail:\n  extra_ro_paths: [\"/a\\nb\"]\n", NULL,
                          "x.yaml:2:20: jail.extra_ro_paths: '/a?b' contains a control character");
}

TEST(config_env_overrides_reference_names)
{
        struct config c;
        const char *env[] = {"SANDBOX_PORT",
                             "9000",
                             "DEBUG",
                             "true",
                             "API_KEY",
                             "k3y",
                             "MAX_WORKERS",
                             "6",
                             "MAX_REQUESTS",
                             "70",
                             "WORKER_TIMEOUT",
                             "15",
                             "PYTHON_PATH",
                             "/opt/py/bin/python3",
                             "PIP_MIRROR_URL",
                             "https://mirror/simple",
                             "PYTHON_DEPS_UPDATE_INTERVAL",
                             "1h",
                             "NODEJS_PATH",
                             "/opt/node/bin/node",
                             "ENABLE_NETWORK",
                             "false",
                             "ENABLE_PRELOAD",
                             "1",
                             "SOCKS5_PROXY",
                             "socks5://p:1080",
                             "HTTP_PROXY",
                             "http://p:3128",
                             "HTTPS_PROXY",
                             "http://p:3129",
                             NULL};
        EXPECT_INT_EQ(load(&c, "app:\n  port: 1234\nmax_workers: 2\n", env), 0);
        EXPECT_INT_EQ(c.port, 9000);
        EXPECT_TRUE(c.debug);
        EXPECT_STR_EQ(c.key, "k3y");
        EXPECT_INT_EQ(c.max_workers, 6);
        EXPECT_INT_EQ(c.max_requests, 70);
        EXPECT_INT_EQ(c.worker_timeout, 15);
        EXPECT_STR_EQ(c.python_path, "/opt/py/bin/python3");
        EXPECT_STR_EQ(c.python_pip_mirror_url, "https://mirror/simple");
        EXPECT_INT_EQ(c.python_deps_update_interval, 3600);
        EXPECT_STR_EQ(c.nodejs_path, "/opt/node/bin/node");
        EXPECT_TRUE(!c.enable_network);
        EXPECT_TRUE(c.enable_preload);
        EXPECT_STR_EQ(c.proxy_socks5, "socks5://p:1080");
        EXPECT_STR_EQ(c.proxy_http, "http://p:3128");
        EXPECT_STR_EQ(c.proxy_https, "http://p:3129");
        config_free(&c);
}

TEST(config_env_overrides_lockbox_names)
{
        struct config c;
        const char *env[] = {"LOCKBOX_LIMITS_MEMORY",
                             "1G",
                             "LOCKBOX_SERVER_LISTEN",
                             "127.0.0.1",
                             "LOCKBOX_JAIL_EXTRA_RO_PATHS",
                             "/opt/a, /opt/b",
                             "LOCKBOX_LOG_PATH",
                             "/var/log/lockbox",
                             "LOCKBOX_JAIL_UID_MIN",
                             "50000",
                             "LOCKBOX_JAIL_UID_MAX",
                             "50100",
                             "LOCKBOX_DEPENDENCIES_PYTHON_REQUIREMENTS",
                             "/etc/req.txt",
                             "LOCKBOX_SERVER_MAX_BODY_BYTES",
                             "1M",
                             NULL};
        EXPECT_INT_EQ(load(&c, "jail:\n  extra_ro_paths: [/srv]\n", env), 0);
        EXPECT_INT_EQ(c.memory_bytes, INT64_C(1) << 30);
        EXPECT_STR_EQ(c.listen, "127.0.0.1");
        EXPECT_INT_EQ(c.n_extra_ro_paths, 2);
        EXPECT_STR_EQ(c.extra_ro_paths[0], "/opt/a");
        EXPECT_STR_EQ(c.extra_ro_paths[1], "/opt/b");
        EXPECT_STR_EQ(c.log_path, "/var/log/lockbox");
        EXPECT_INT_EQ(c.uid_min, 50000);
        EXPECT_INT_EQ(c.uid_max, 50100);
        EXPECT_STR_EQ(c.python_requirements, "/etc/req.txt");
        EXPECT_INT_EQ(c.max_body_bytes, 1 << 20);
        config_free(&c);
}

TEST(config_empty_requirements_path_is_no_packages)
{
        struct config c;
        EXPECT_INT_EQ(load(&c, "dependencies:\n  python_requirements: \"\"\n", NULL), 0);
        EXPECT_STR_EQ(c.python_requirements, "");
        config_free(&c);
}

TEST(config_env_empty_is_unset_and_errors_name_the_variable)
{
        struct config c;
        const char *empty[] = {"MAX_WORKERS", "", "HTTP_PROXY", "", NULL};
        EXPECT_INT_EQ(load(&c, "max_workers: 3\nproxy:\n  http: http://x\n", empty), 0);
        EXPECT_INT_EQ(c.max_workers, 3);
        EXPECT_STR_EQ(c.proxy_http, "http://x");
        config_free(&c);
        const char *bad[] = {"MAX_WORKERS", "abc", NULL};
        EXPECT_LOAD_ERROR("", bad, "env MAX_WORKERS: 'abc' is not an integer");
        const char *low[] = {"SANDBOX_PORT", "0", NULL};
        EXPECT_LOAD_ERROR("", low, "env SANDBOX_PORT: 0 is below the minimum 1");
        const char *dbg[] = {"DEBUG", "yes please", NULL};
        EXPECT_LOAD_ERROR("", dbg, "env DEBUG: 'yes please' is not a boolean (true or false)");
        const char *mem[] = {"LOCKBOX_LIMITS_MEMORY", "lots", NULL};
        EXPECT_LOAD_ERROR("", mem,
                          "env LOCKBOX_LIMITS_MEMORY: 'lots' is not a size (a byte count, or a "
                          "number with K, M, G or T)");
        const char *ro[] = {"LOCKBOX_JAIL_EXTRA_RO_PATHS", "/ok,rel", NULL};
        EXPECT_LOAD_ERROR("", ro, "env LOCKBOX_JAIL_EXTRA_RO_PATHS: 'rel' is not an absolute path");
}

TEST(config_deprecated_env_warns)
{
        struct config c;
        char logged[4096];
        int saved;
        const char *env[] = {"PYTHON_LIB_PATH", "/usr/lib/python3,/etc/hosts", NULL};
        FILE *f = stderr_capture(&saved);
        int r = load(&c, "", env);
        stderr_restore(f, saved, logged, sizeof(logged));
        EXPECT_INT_EQ(r, 0);
        EXPECT_STR_CONTAINS(logged, "event=config.deprecated key=python_lib_path");
        EXPECT_STR_CONTAINS(logged, "source=\"env PYTHON_LIB_PATH\"");
        config_free(&c);
}

TEST(config_warm_section)
{
        struct config c;
        EXPECT_INT_EQ(load(&c, "", NULL), 0);
        EXPECT_TRUE(config_warm(&c));
        EXPECT_INT_EQ(c.python_pool, 4);
        EXPECT_INT_EQ(c.nodejs_pool, 2);
        EXPECT_INT_EQ(c.n_python_preload, 11);
        EXPECT_STR_EQ(c.python_preload[0], "json");
        EXPECT_STR_EQ(c.python_preload[10], "jinja2");
        config_free(&c);
        const char *env[] = {"LOCKBOX_WARM_MODE", "cold", "LOCKBOX_WARM_PYTHON_PRELOAD",
                             "json, xml.etree.ElementTree", NULL};
        EXPECT_INT_EQ(load(&c, "warm:\n  python_pool: 8\n", env), 0);
        EXPECT_TRUE(!config_warm(&c));
        EXPECT_INT_EQ(c.python_pool, 8);
        EXPECT_INT_EQ(c.n_python_preload, 2);
        EXPECT_STR_EQ(c.python_preload[1], "xml.etree.ElementTree");
        config_free(&c);
        EXPECT_LOAD_ERROR("warm:\n  mode: hot\n", NULL,
                          "x.yaml:2:9: warm.mode: 'hot' is not warm or cold");
        EXPECT_LOAD_ERROR("warm:\n  python_preload: [json, 'os; import x']\n", NULL,
                          "x.yaml:2:26: warm.python_preload: 'os; import x' is not a Python "
                          "module name");
        EXPECT_LOAD_ERROR("warm:\n  nodejs_pool: 65\n", NULL,
                          "x.yaml:2:16: warm.nodejs_pool: 65 is above the maximum 64");
}

TEST(config_uid_cross_checks)
{
        EXPECT_LOAD_ERROR("jail:\n  uid_min: 20000\n  uid_max: 19999\n", NULL,
                          "x.yaml:3:12: jail.uid_max: 19999 is below jail.uid_min 20000");
        EXPECT_LOAD_ERROR("jail:\n  uid_min: 20000\n", NULL,
                          "x.yaml:2:12: jail.uid_min: 20000 is above jail.uid_max 10999");
        EXPECT_LOAD_ERROR("jail:\n  uid_max: 10002\n", NULL,
                          "x.yaml:2:12: jail.uid_max: max_workers is 4 and the warm pools hold "
                          "6 but the UID pool jail.uid_min..jail.uid_max (10000..10002) holds "
                          "only 2 for runs (its last UID is pip's); each concurrent run and armed "
                          "process needs its own UID");
        EXPECT_LOAD_ERROR("max_workers: 8\njail:\n  uid_max: 10006\n", NULL,
                          "x.yaml:1:14: max_workers: max_workers is 8 and the warm pools hold "
                          "6 but the UID pool jail.uid_min..jail.uid_max (10000..10006) holds "
                          "only 6 for runs (its last UID is pip's); each concurrent run and armed "
                          "process needs its own UID");
        const char *env[] = {"MAX_WORKERS", "9", NULL};
        EXPECT_LOAD_ERROR(
            "jail:\n  uid_max: 10007\n", env,
            "env MAX_WORKERS: max_workers is 9 and the warm pools hold 6 but the "
            "UID pool jail.uid_min..jail.uid_max (10000..10007) holds only 7 for runs "
            "(its last UID is pip's); each concurrent run and armed process needs "
            "its own UID");
        struct config c;
        /* five UIDs: enough for four workers and pip once the pools are
         * off (cold) */
        EXPECT_INT_EQ(load(&c,
                           "max_workers: 4\nwarm:\n  mode: cold\njail:\n  uid_min: 5000\n"
                           "  uid_max: 5004\n",
                           NULL),
                      0);
        config_free(&c);
        EXPECT_INT_EQ(load(&c,
                           "max_workers: 4\nwarm: {python_pool: 0, nodejs_pool: 0}\njail:\n"
                           "  uid_min: 5000\n  uid_max: 5004\n",
                           NULL),
                      0);
        config_free(&c);
}

TEST(config_failed_load_leaves_zeroed_config)
{
        struct config c;
        memset(&c, 0x5a, sizeof(c));
        EXPECT_INT_EQ(load(&c, "max_workers: 0\n", NULL), -EINVAL);
        EXPECT_TRUE(c.key == NULL && c.allowed_syscalls == NULL && c.port == 0);
        config_free(&c);
}

TEST(config_small_error_buffer_truncates)
{
        struct config c;
        char small[12];
        EXPECT_INT_EQ(config_load_buffer(&c, "x.yaml", "foo: 1", 6, NULL, small, sizeof(small)),
                      -EINVAL);
        EXPECT_STR_EQ(small, "x.yaml:1:1:");
        EXPECT_INT_EQ(config_load_buffer(&c, "x.yaml", "foo: 1", 6, NULL, NULL, 0), -EINVAL);
}

TEST(config_missing_file)
{
        struct config c;
        EXPECT_INT_EQ(config_load(&c, "/nonexistent/lockbox.yaml", NULL, err, sizeof(err)),
                      -ENOENT);
        EXPECT_STR_EQ(err, "/nonexistent/lockbox.yaml: No such file or directory");
        EXPECT_INT_EQ(config_load(&c, "/", NULL, err, sizeof(err)), -EISDIR);
        EXPECT_STR_EQ(err, "/: Is a directory");
        /* a FIFO is refused, not waited on: start-up never hangs on it */
        char fifo[] = "/tmp/lockbox-test-fifo-XXXXXX";
        EXPECT_NOT_NULL(mkdtemp(fifo));
        char path[64];
        snprintf(path, sizeof(path), "%s/config.yaml", fifo);
        EXPECT_INT_EQ(mkfifo(path, 0600), 0);
        EXPECT_INT_EQ(config_load(&c, path, NULL, err, sizeof(err)), -EINVAL);
        EXPECT_TRUE(strstr(err, ": not a regular file") != NULL);
        unlink(path);
        rmdir(fifo);
        config_free(&c);
}

TEST(config_file_errors_name_the_file)
{
        char path[] = "/tmp/lockbox-test-XXXXXX";
        int fd = mkstemp(path);
        EXPECT_TRUE(fd >= 0);
        const char text[] = "max_workers: 4\nlimits:\n  cpu_time: 0\n";
        EXPECT_INT_EQ(write(fd, text, sizeof(text) - 1), (long)sizeof(text) - 1);
        close(fd);
        struct config c;
        int r = config_load(&c, path, NULL, err, sizeof(err));
        unlink(path);
        EXPECT_INT_EQ(r, -EINVAL);
        char want[128];
        snprintf(want, sizeof(want), "%s:3:13: limits.cpu_time: 0 is below the minimum 1", path);
        EXPECT_STR_EQ(err, want);
}

static char *dump_to_string(const struct config *c)
{
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        config_dump(c, f);
        fclose(f);
        return buf;
}

TEST(config_dump_redacts_key_and_round_trips)
{
        struct config c, back;
        const char *env[] = {"API_KEY", "super-secret-key", NULL};
        EXPECT_INT_EQ(load(&c,
                           "allowed_syscalls: [getpid, read]\n"
                           "python_deps_update_interval: 1h30m\n"
                           "proxy:\n  http: 'http://a\"b'\n"
                           "jail:\n  extra_ro_paths: [/opt/x]\n",
                           env),
                      0);
        char *text = dump_to_string(&c);
        EXPECT_TRUE(strstr(text, "super-secret-key") == NULL);
        EXPECT_STR_CONTAINS(text, "app:\n  port: 8194\n  debug: false\n  key: \"<redacted>\"\n");
        EXPECT_STR_CONTAINS(text, "python_deps_update_interval: 1h30m\n");
        EXPECT_STR_CONTAINS(text, "limits:\n  memory: 512M\n");
        EXPECT_STR_CONTAINS(text, "  extra_ro_paths:\n    - \"/opt/x\"\n");
        EXPECT_TRUE(strstr(text, "python_lib_path") == NULL);
        EXPECT_INT_EQ(load(&back, text, NULL), 0);
        EXPECT_STR_EQ(back.key, "<redacted>");
        free(back.key);
        back.key = strdup(c.key);
        char *again = dump_to_string(&back);
        EXPECT_STR_EQ(again, text);
        EXPECT_INT_EQ(back.n_allowed_syscalls, 2);
        EXPECT_INT_EQ(back.allowed_syscalls[0], nr("getpid"));
        EXPECT_STR_EQ(back.proxy_http, "http://a\"b");
        free(text);
        free(again);
        config_free(&c);
        config_free(&back);
}

TEST(config_schema_table_is_sound)
{
        for (size_t i = 0; i < schema_n_rows; i++) {
                const struct schema_row *row = &schema_rows[i];
                char env_i[80], env_j[80];
                EXPECT_INT_EQ(schema_env_name(row, env_i, sizeof(env_i)), 0);
                EXPECT_TRUE(row->doc && *row->doc && !strchr(row->doc, '|'));
                if (row->type == &schema_type_int)
                        EXPECT_TRUE(row->min <= row->max && row->min >= INT32_MIN &&
                                    row->max <= INT32_MAX);
                for (size_t j = i + 1; j < schema_n_rows; j++) {
                        EXPECT_TRUE(strcmp(row->name, schema_rows[j].name) != 0);
                        schema_env_name(&schema_rows[j], env_j, sizeof(env_j));
                        EXPECT_TRUE(strcmp(env_i, env_j) != 0);
                }
                /* Sections are contiguous: a row's section never reappears
                 * after another section started. */
                size_t sl = schema_section_len(row->name);
                for (size_t j = i + 2; sl && j < schema_n_rows; j++) {
                        bool same = schema_section_len(schema_rows[j].name) == sl &&
                                    strncmp(schema_rows[j].name, row->name, sl) == 0;
                        bool prev_same = schema_section_len(schema_rows[j - 1].name) == sl &&
                                         strncmp(schema_rows[j - 1].name, row->name, sl) == 0;
                        EXPECT_TRUE(!same || prev_same);
                }
        }
        char env[80];
        EXPECT_INT_EQ(schema_env_name(schema_find("limits.tmp_size"), env, sizeof(env)), 0);
        EXPECT_STR_EQ(env, "LOCKBOX_LIMITS_TMP_SIZE");
        EXPECT_INT_EQ(schema_env_name(schema_find("app.port"), env, sizeof(env)), 0);
        EXPECT_STR_EQ(env, "SANDBOX_PORT");
}

static char *doc_to_string(void)
{
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        config_doc(f);
        fclose(f);
        return buf;
}

TEST(config_doc_lists_every_key)
{
        char *doc = doc_to_string();
        EXPECT_TRUE(strncmp(doc, "| key | env | type | default | description |\n", 45) == 0);
        EXPECT_STR_CONTAINS(doc, "| `app.port` | `SANDBOX_PORT` | integer, 1..65535 | `8194` |");
        EXPECT_STR_CONTAINS(doc, "| `limits.memory` | `LOCKBOX_LIMITS_MEMORY` | size, 16M..64G | "
                                 "`512M` |");
        EXPECT_STR_CONTAINS(doc, "| `python_lib_path` | `PYTHON_LIB_PATH` | deprecated |");
        EXPECT_STR_CONTAINS(doc, "| `log_path` | `LOCKBOX_LOG_PATH` | string | `\"\"` |");
        for (size_t i = 0; i < schema_n_rows; i++) {
                char cell[96];
                snprintf(cell, sizeof(cell), "| `%s` |", schema_rows[i].name);
                EXPECT_STR_CONTAINS(doc, cell);
        }
        free(doc);
}

#define DOC_BEGIN "<!-- BEGIN config_doc() output -->\n"
#define DOC_END "<!-- END config_doc() output -->\n"

/* docs/CONFIG.md carries config_doc()'s table between two markers. With
 * LOCKBOX_UPDATE_DOCS=1 this test rewrites it: run
 * `LOCKBOX_UPDATE_DOCS=1 build/unit_tests config_doc_matches` from the
 * repository root. */
TEST(config_doc_matches_docs_config_md)
{
        FILE *f = fopen("docs/CONFIG.md", "r");
        if (!f) {
                test_fail(__FILE__, __LINE__, "run from the repository root: docs/CONFIG.md");
                return;
        }
        static char md[65536];
        size_t n = fread(md, 1, sizeof(md) - 1, f);
        fclose(f);
        md[n] = '\0';
        char *begin = strstr(md, DOC_BEGIN), *end = begin ? strstr(begin, DOC_END) : NULL;
        EXPECT_TRUE(begin && end);
        begin += strlen(DOC_BEGIN);
        char *doc = doc_to_string();
        if (getenv("LOCKBOX_UPDATE_DOCS")) {
                f = fopen("docs/CONFIG.md", "w");
                fprintf(f, "%.*s%s%s", (int)(begin - md), md, doc, end);
                fclose(f);
        } else if (strlen(doc) != (size_t)(end - begin) || strncmp(doc, begin, strlen(doc)) != 0) {
                test_fail(__FILE__, __LINE__,
                          "docs/CONFIG.md is stale; regenerate with "
                          "LOCKBOX_UPDATE_DOCS=1 build/unit_tests config_doc_matches");
        }
        free(doc);
}

TEST(config_network_section)
{
        struct config c;
        const char *env[] = {"LOCKBOX_NETWORK_ALLOW", "10.213.7.2:8080, 192.168.0.0/16",
                             "LOCKBOX_NETWORK_EGRESS_ONLY", "203.0.113.7:443", NULL};
        EXPECT_INT_EQ(load(&c, "", NULL), 0);
        EXPECT_STR_EQ(c.net_mode, "namespace");
        EXPECT_STR_EQ(c.net_subnet, "10.191.0.0/16");
        EXPECT_TRUE(config_net_namespace(&c));
        EXPECT_INT_EQ(c.n_net_allow + c.n_net_egress_only + c.n_net_dns_servers, 0);
        config_free(&c);
        EXPECT_INT_EQ(load(&c, "network:\n  mode: host\n  dns_servers: [10.0.0.2, '::1']\n", env),
                      0);
        EXPECT_TRUE(!config_net_namespace(&c));
        EXPECT_INT_EQ(c.n_net_allow, 2);
        EXPECT_STR_EQ(c.net_allow[1], "192.168.0.0/16");
        EXPECT_INT_EQ(c.n_net_egress_only, 1);
        EXPECT_INT_EQ(c.n_net_dns_servers, 2);
        config_free(&c);
}

TEST(config_network_errors)
{
        EXPECT_LOAD_ERROR("network:\n  mode: bridge\n", NULL,
                          "x.yaml:2:9: network.mode: 'bridge' is not namespace or host");
        EXPECT_LOAD_ERROR("network:\n  allow: [10.0.0.1/8]\n", NULL,
                          "x.yaml:2:11: network.allow: '10.0.0.1/8': host bits set after the "
                          "prefix length (want CIDR, CIDR:port or ADDRESS:port)");
        EXPECT_LOAD_ERROR("network:\n  egress_only: ['[::1]:80']\n", NULL,
                          "x.yaml:2:17: network.egress_only: '[::1]:80': IPv6 is not offered "
                          "to runs (they have no IPv6 route) (want CIDR, CIDR:port or "
                          "ADDRESS:port)");
        EXPECT_LOAD_ERROR("network:\n  subnet: 10.191.0.0/31\n", NULL,
                          "x.yaml:2:11: network.subnet: '10.191.0.0/31' is too small: at least "
                          "a /30");
        EXPECT_LOAD_ERROR("network:\n  subnet: 10.191.0.0/24\n", NULL,
                          "x.yaml:2:11: network.subnet: 10.191.0.0/24 holds 256 addresses but "
                          "the UID pool jail.uid_min..jail.uid_max needs 1002 (one per UID, the "
                          "network and the gateway)");
        EXPECT_LOAD_ERROR("network:\n  dns_servers: [resolver.local]\n", NULL,
                          "x.yaml:2:17: network.dns_servers: 'resolver.local' is not an IPv4 "
                          "or IPv6 address");
}

/* shell.uid outside the runs' pool; the state directory and shell.home
 * apart; Landlock's extra read-write paths outside both (bound by path,
 * as root). */
TEST(config_shell_cross_checks)
{
        EXPECT_LOAD_ERROR("shell:\n  uid: 10005\n", NULL,
                          "x.yaml:2:8: shell.uid: 10005 lies in the runs' UID pool "
                          "jail.uid_min..jail.uid_max (10000..10999)");
        EXPECT_LOAD_ERROR("shell:\n  enabled: true\n  home: /srv/h\n  state_dir: /srv/h/state\n",
                          NULL,
                          "x.yaml:4:14: shell.state_dir: /srv/h/state and shell.home /srv/h must "
                          "not lie one inside the other");
        EXPECT_LOAD_ERROR("shell:\n  enabled: true\n  home: /srv/h\n  landlock_rw_paths: "
                          "[/srv/h/x]\n",
                          NULL,
                          "x.yaml:4:22: shell.landlock_rw_paths: /srv/h/x lies inside shell.home "
                          "or shell.state_dir");
        struct config cfg;
        EXPECT_INT_EQ(load(&cfg, "shell:\n  home: /srv/h\n  state_dir: /srv/h/state\n", NULL), 0);
        config_free(&cfg); /* checked only when shell jobs are on */
}

/* shellctl's Landlock variables tell "set and empty" from "unset", as the
 * reference reads them; lockbox's other variables do not. */
TEST(config_shellctl_variables_set_and_empty_count)
{
        struct config cfg;
        const char *env[] = {"SHELLCTL_LANDLOCK_RO_PATHS",
                             "",
                             "SHELLCTL_ENABLE_PATH_ISOLATION",
                             "",
                             "LOCKBOX_SHELL_HOME",
                             "",
                             NULL};
        EXPECT_INT_EQ(load(&cfg, "", env), 0);
        EXPECT_SIZE_EQ(cfg.n_shell_landlock_ro, 0);
        EXPECT_STR_EQ(cfg.shell_path_isolation, "");
        EXPECT_SIZE_EQ(cfg.n_shell_landlock_rw_dev, 5); /* unset: the default list */
        EXPECT_STR_EQ(cfg.shell_home, "/home/dify");    /* empty, not one of those: unset */
        config_free(&cfg);
        const char *env2[] = {"SHELLCTL_LANDLOCK_RW_DEV_PATHS", "/dev/null", NULL};
        EXPECT_INT_EQ(load(&cfg, "", env2), 0);
        EXPECT_SIZE_EQ(cfg.n_shell_landlock_rw_dev, 1);
        config_free(&cfg);
}
