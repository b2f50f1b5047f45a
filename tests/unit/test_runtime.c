/* Unit tests for runtime/runtime.c, python.c and node.c: the environment
 * of a run (exactly PATH, LANG, HOME, TMPDIR; proxy variables only with
 * network, SOCKS5 serving both schemes; nothing of the daemon's own), the
 * read-only paths (system paths once each, extra paths, an interpreter's
 * prefix outside /usr, a missing or non-executable interpreter), and each
 * language's command line. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config/config.h"
#include "ipc/proto.h"
#include "runtime/runtime.h"
#include "test.h"

static char err[512];

static int load(struct config *cfg, const char *yaml)
{
        err[0] = '\0';
        return config_load_buffer(cfg, "x.yaml", yaml, strlen(yaml), NULL, err, sizeof(err));
}

/* The environment joined with '|', for one comparison. */
static void env_text(char **env, char *out, size_t size)
{
        size_t o = 0;
        out[0] = '\0';
        for (char **e = env; e && *e; e++)
                o += (size_t)snprintf(out + o, size - o, "%s%s", o ? "|" : "", *e);
}

static const char *const base_env =
    "PATH=/usr/local/bin:/usr/bin:/bin|LANG=C.UTF-8|HOME=/tmp|TMPDIR=/tmp";

static void expect_env(const char *yaml, int network, const char *want)
{
        struct config cfg;
        if (load(&cfg, yaml) != 0) {
                test_fail(__FILE__, __LINE__, "config: %s", err);
                return;
        }
        char **env = runtime_env(&cfg, network);
        char text[1024];
        env_text(env, text, sizeof(text));
        EXPECT_STR_EQ(text, want);
        runtime_strv_free(env);
        config_free(&cfg);
}

TEST(runtime_env_without_proxy)
{
        setenv("LOCKBOX_UNIT_SECRET", "must-not-leak", 1); /* the daemon's own environment */
        expect_env("", 0, base_env);
        expect_env("", 1, base_env);
}

TEST(runtime_env_proxies_only_with_network)
{
        const char *yaml = "proxy:\n  http: http://proxy:3128\n  https: http://proxy:3129\n";
        expect_env(yaml, 0, base_env);
        char want[512];
        snprintf(want, sizeof(want),
                 "%s|HTTP_PROXY=http://proxy:3128|http_proxy=http://proxy:3128"
                 "|HTTPS_PROXY=http://proxy:3129|https_proxy=http://proxy:3129",
                 base_env);
        expect_env(yaml, 1, want);
}

TEST(runtime_env_one_scheme_and_socks5)
{
        char want[512];
        snprintf(want, sizeof(want), "%s|HTTPS_PROXY=http://p:1|https_proxy=http://p:1", base_env);
        expect_env("proxy:\n  https: http://p:1\n", 1, want);
        /* SOCKS5 serves both schemes, whatever http/https say */
        snprintf(want, sizeof(want),
                 "%s|HTTP_PROXY=socks5://s:1080|http_proxy=socks5://s:1080"
                 "|HTTPS_PROXY=socks5://s:1080|https_proxy=socks5://s:1080",
                 base_env);
        expect_env("proxy:\n  socks5: socks5://s:1080\n  http: http://p:1\n", 1, want);
}

static bool has_path(const struct runtime *rt, const char *path)
{
        for (size_t i = 0; i < rt->n_ro_paths; i++)
                if (strcmp(rt->ro_paths[i], path) == 0)
                        return true;
        return false;
}

TEST(runtime_ro_paths_system_extra_and_no_duplicates)
{
        struct config cfg;
        EXPECT_ERRNO(load(&cfg, "jail:\n  extra_ro_paths: [/usr/share, /opt/models, /etc/ssl]\n"),
                     0);
        struct runtime rt = {0};
        EXPECT_ERRNO(runtime_ro_paths(&cfg, "/bin/sh", &rt, err, sizeof(err)), 0);
        EXPECT_TRUE(has_path(&rt, "/usr"));
        EXPECT_TRUE(has_path(&rt, "/etc/ld.so.cache"));
        EXPECT_TRUE(has_path(&rt, "/etc/ssl"));
        EXPECT_TRUE(has_path(&rt, "/opt/models"));
        /* under /usr already: not bound twice */
        EXPECT_FALSE(has_path(&rt, "/usr/share"));
        for (size_t i = 0; i < rt.n_ro_paths; i++)
                for (size_t k = i + 1; k < rt.n_ro_paths; k++)
                        EXPECT_TRUE(strcmp(rt.ro_paths[i], rt.ro_paths[k]) != 0);
        EXPECT_NULL(rt.ro_paths[rt.n_ro_paths]);
        /* /bin/sh is /usr/bin/dash (merged /usr): its prefix is /usr, known */
        runtime_strv_free(rt.ro_paths);
        config_free(&cfg);
}

/* An interpreter outside the system paths brings the directory two levels
 * above its real binary; a missing or non-executable one is an error
 * naming it. */
TEST(runtime_ro_paths_interpreter_prefix_and_errors)
{
        char dir[] = "/tmp/lockbox-unit-rt-XXXXXX";
        EXPECT_NOT_NULL(mkdtemp(dir));
        char bin[128], exe[160], link[160];
        snprintf(bin, sizeof(bin), "%s/bin", dir);
        snprintf(exe, sizeof(exe), "%s/bin/python3", dir);
        snprintf(link, sizeof(link), "%s/python", dir);
        EXPECT_INT_EQ(mkdir(bin, 0755), 0);
        int fd = open(exe, O_WRONLY | O_CREAT | O_CLOEXEC, 0755);
        EXPECT_INT_OP(fd, >=, 0);
        close(fd);
        EXPECT_INT_EQ(symlink(exe, link), 0);
        struct config cfg;
        EXPECT_ERRNO(load(&cfg, ""), 0);
        struct runtime rt = {0};
        EXPECT_ERRNO(runtime_ro_paths(&cfg, link, &rt, err, sizeof(err)), 0);
        EXPECT_TRUE(has_path(&rt, dir)); /* through the symlink to .../bin/python3 */
        runtime_strv_free(rt.ro_paths);

        rt = (struct runtime){0};
        EXPECT_INT_EQ(chmod(exe, 0644), 0);
        /* no execute bit at all: refused even for root */
        EXPECT_ERRNO(runtime_ro_paths(&cfg, exe, &rt, err, sizeof(err)), -EACCES);
        EXPECT_STR_CONTAINS(err, exe);
        runtime_strv_free(rt.ro_paths);

        rt = (struct runtime){0};
        unlink(exe);
        EXPECT_ERRNO(runtime_ro_paths(&cfg, link, &rt, err, sizeof(err)), -ENOENT);
        char want[256];
        snprintf(want, sizeof(want), "%s: No such file or directory", link);
        EXPECT_STR_EQ(err, want);
        runtime_strv_free(rt.ro_paths);
        config_free(&cfg);
        unlink(link);
        rmdir(bin);
        rmdir(dir);
}

TEST(runtime_python_command_line)
{
        struct config cfg;
        EXPECT_ERRNO(load(&cfg, ""), 0);
        struct runtime *rt = NULL;
        EXPECT_ERRNO(runtime_python_new(&cfg, &rt, err, sizeof(err)), 0);
        EXPECT_STR_EQ(rt->name, "python3");
        EXPECT_UINT_EQ(rt->lang, LANG_PYTHON3);
        EXPECT_STR_EQ(rt->exec_path, cfg.python_path);
        EXPECT_STR_EQ(rt->argv[0], cfg.python_path); /* CPython finds its prefix from it */
        EXPECT_STR_EQ(rt->argv[1], "-I");
        EXPECT_STR_EQ(rt->argv[2], "-B");
        EXPECT_STR_EQ(rt->argv[3], "-u");
        EXPECT_STR_EQ(rt->argv[4], "-c");
        EXPECT_STR_EQ(rt->argv[5], runtime_python_boot);
        EXPECT_NULL(rt->argv[6]);
        EXPECT_TRUE(rt->exit_report);
        EXPECT_FALSE(rt->spawn_kills);
        EXPECT_TRUE(has_path(rt, "/usr"));
        EXPECT_NULL(runtime_free(rt));
        EXPECT_NULL(runtime_free(NULL));
        config_free(&cfg);
}

TEST(runtime_node_command_line_and_missing_interpreter)
{
        struct config cfg;
        EXPECT_ERRNO(load(&cfg, "nodejs_path: /nonexistent/node\n"), 0);
        struct runtime *rt = NULL;
        EXPECT_ERRNO(runtime_node_new(&cfg, &rt, err, sizeof(err)), -ENOENT);
        EXPECT_NULL(rt);
        EXPECT_STR_EQ(err, "/nonexistent/node: No such file or directory");
        config_free(&cfg);
        /* any executable stands in for node: only the command line is built */
        EXPECT_ERRNO(load(&cfg, "nodejs_path: /bin/sh\n"), 0);
        EXPECT_ERRNO(runtime_node_new(&cfg, &rt, err, sizeof(err)), 0);
        EXPECT_STR_EQ(rt->name, "nodejs");
        EXPECT_UINT_EQ(rt->lang, LANG_NODEJS);
        EXPECT_STR_EQ(rt->argv[0], "/bin/sh");
        EXPECT_STR_EQ(rt->argv[1], "--no-addons");
        EXPECT_STR_EQ(rt->argv[2], "-e");
        EXPECT_NOT_NULL(rt->argv[3]);
        EXPECT_NULL(rt->argv[4]);
        EXPECT_TRUE(rt->spawn_kills);
        runtime_free(rt);
        config_free(&cfg);
}
