/* Pieces every runtime shares: the read-only view of the host and the
 * environment of a run (see runtime.h). */
#include "runtime/runtime.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/util.h"
#include "config/config.h"

/* What any interpreter on a Debian-like host needs: /usr (merged-/usr
 * symlinks are recreated), the loader cache, CA certificates, zone info,
 * the tiny databases libc consults, and /etc/alternatives, through whose
 * symlinks Debian resolves BLAS, LAPACK and other libraries (numpy needs
 * libblas.so.3 from there; it holds only symlinks). /etc/resolv.conf and /etc/hosts
 * are copied by the jail, passwd/group generated. */
static const char *const system_paths[] = {
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/alternatives",
    "/etc/ssl",
    "/etc/ca-certificates",
    "/etc/localtime",
    "/etc/timezone",
    "/etc/mime.types",
    "/etc/services",
    "/etc/protocols",
    /* Debian's configuration of libraries runs import: matplotlib does not
     * load without its matplotlibrc, fontconfig reads /etc/fonts */
    "/etc/matplotlibrc",
    "/etc/fonts",
};

void runtime_strv_free(char **v)
{
        for (char **p = v; p && *p; p++)
                free(*p);
        free(v);
}

static bool is_under(const char *path, const char *dir)
{
        size_t n = strlen(dir);
        return strncmp(path, dir, n) == 0 && (path[n] == '/' || path[n] == '\0');
}

static int push(struct runtime *rt, const char *path)
{
        for (size_t i = 0; i < rt->n_ro_paths; i++)
                if (is_under(path, rt->ro_paths[i]))
                        return 0;
        char **n = realloc(rt->ro_paths, (rt->n_ro_paths + 2) * sizeof(char *));
        if (!n)
                return -ENOMEM;
        rt->ro_paths = n;
        if (!(n[rt->n_ro_paths] = strdup(path)))
                return -ENOMEM;
        n[++rt->n_ro_paths] = NULL;
        return 0;
}

int runtime_ro_paths(const struct config *cfg, const char *exec_path, struct runtime *rt, char *err,
                     size_t errlen)
{
        int r = 0;
        for (size_t i = 0; i < ELEMENTSOF(system_paths) && r == 0; i++)
                r = push(rt, system_paths[i]);
        for (size_t i = 0; i < cfg->n_extra_ro_paths && r == 0; i++)
                r = push(rt, cfg->extra_ro_paths[i]);
        if (r < 0)
                return r;
        /* An interpreter outside /usr (say /opt/python/bin/python3) brings
         * its prefix: two levels above the real binary. */
        char real[PATH_MAX];
        if (!realpath(exec_path, real) || access(real, X_OK) < 0) {
                int e = errno;
                snprintf(err, errlen, "%s: %s", exec_path, strerror(e));
                return -e;
        }
        char *slash = strrchr(real, '/');
        if (slash && slash != real)
                *slash = '\0';
        slash = strrchr(real, '/');
        if (slash && slash != real)
                *slash = '\0';
        return push(rt, real);
}

static int add_env(char **env, size_t *n, const char *name, const char *value)
{
        if (asprintf(&env[*n], "%s=%s", name, value) < 0)
                return -ENOMEM;
        (*n)++;
        return 0;
}

char **runtime_env(const struct config *cfg, int network)
{
        char **env = calloc(RUN_ENV_MAX + 1, sizeof(char *));
        size_t n = 0;
        if (!env)
                return NULL;
        int r = add_env(env, &n, "PATH", "/usr/local/bin:/usr/bin:/bin");
        if (r == 0)
                r = add_env(env, &n, "LANG", "C.UTF-8");
        if (r == 0)
                r = add_env(env, &n, "HOME", "/tmp");
        if (r == 0)
                r = add_env(env, &n, "TMPDIR", "/tmp");
        /* The reference's rule: a SOCKS5 proxy serves both schemes. */
        const char *http = *cfg->proxy_socks5 ? cfg->proxy_socks5 : cfg->proxy_http;
        const char *https = *cfg->proxy_socks5 ? cfg->proxy_socks5 : cfg->proxy_https;
        if (network && r == 0 && *http)
                if ((r = add_env(env, &n, "HTTP_PROXY", http)) == 0)
                        r = add_env(env, &n, "http_proxy", http);
        if (network && r == 0 && *https)
                if ((r = add_env(env, &n, "HTTPS_PROXY", https)) == 0)
                        r = add_env(env, &n, "https_proxy", https);
        if (r < 0) {
                runtime_strv_free(env);
                return NULL;
        }
        return env;
}

int runtime_new_common(const char *name, uint32_t lang, const char *exec_path,
                       const char *const *args, size_t n_args, const char *const *lang_allow,
                       const struct config *cfg, struct runtime **ret, char *err, size_t errlen)
{
        struct runtime *rt = calloc(1, sizeof(*rt));
        if (!rt)
                return -ENOMEM;
        rt->name = name;
        rt->lang = lang;
        rt->lang_allow = lang_allow;
        rt->exec_path = strdup(exec_path);
        rt->argv = calloc(n_args + 2, sizeof(char *));
        int r = rt->exec_path && rt->argv ? 0 : -ENOMEM;
        /* argv[0] is the configured path: CPython derives its prefix from it. */
        if (r == 0 && !(rt->argv[0] = strdup(exec_path)))
                r = -ENOMEM;
        for (size_t i = 0; r == 0 && i < n_args; i++)
                if (!(rt->argv[i + 1] = strdup(args[i])))
                        r = -ENOMEM;
        if (r == 0)
                r = runtime_ro_paths(cfg, exec_path, rt, err, errlen);
        if (r < 0) {
                if (!*err)
                        snprintf(err, errlen, "%s runtime: %s", name, strerror(-r));
                runtime_free(rt);
                return r;
        }
        *ret = rt;
        return 0;
}

struct runtime *runtime_free(struct runtime *rt)
{
        if (rt) {
                free(rt->exec_path);
                runtime_strv_free(rt->argv);
                runtime_strv_free(rt->ro_paths);
                free(rt);
        }
        return NULL;
}
