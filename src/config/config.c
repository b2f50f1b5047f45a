/* Configuration entry points: defaults from the schema table, then the
 * YAML file (yamlfile.c), then environment overrides, then the checks that
 * involve more than one key. Loading stops at the first error and says
 * where: "FILE:LINE:COL: KEY: REASON" or "env NAME: REASON". */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/file.h"
#include "base/log.h"
#include "base/netaddr.h"
#include "base/strbuf.h"
#include "base/utf8.h"
#include "base/util.h"
#include "config/loader.h"

#define CONFIG_FILE_MAX (4u << 20) /* a config file is a few KiB */

/* Splits "a, b,c" into trimmed entries pointing into copy. */
static int env_split(char *copy, struct schema_item *items, size_t *ret_n)
{
        size_t n = 0;
        for (char *p = copy;; n++) {
                char *end = p + strcspn(p, ",");
                bool last = *end == '\0';
                *end = '\0';
                while (*p == ' ' || *p == '\t')
                        p++;
                for (char *t = end; t > p && (t[-1] == ' ' || t[-1] == '\t');)
                        *--t = '\0';
                if (!*p)
                        return -EINVAL;
                items[n] = (struct schema_item){.text = p};
                if (last)
                        break;
                p = end + 1;
        }
        *ret_n = n + 1;
        return 0;
}

static int env_apply_list(struct loader *L, const struct schema_row *row, const char *value,
                          const struct origin *o)
{
        size_t max = 1, n;
        for (const char *p = value; *p; p++)
                max += *p == ',';
        _cleanup_free_ char *copy = strdup(value);
        _cleanup_free_ struct schema_item *items = calloc(max, sizeof(*items));
        if (!copy || !items)
                return loader_fail(L, -ENOMEM, o, NULL, "out of memory");
        if (env_split(copy, items, &n) < 0)
                return loader_fail(L, -EINVAL, o, NULL, "empty entry in a comma-separated list");
        return loader_apply(L, row, items, n, o);
}

static int env_apply_row(struct loader *L, const struct schema_row *row, config_getenv_fn getenv_fn)
{
        struct origin o = {.kind = ORIGIN_ENV};
        if (schema_env_name(row, o.env, sizeof(o.env)) < 0)
                return 0;
        const char *value = getenv_fn(o.env);
        /* Unset and empty are the same, as in the reference: compose files
         * often pass "${VAR:-}". But for the shellctl variables that tell
         * them apart (SCHEMA_ENV_EMPTY): there an empty value is a value. */
        if (value && !*value && (row->flags & SCHEMA_ENV_EMPTY))
                return loader_apply(L, row, &(struct schema_item){.text = ""},
                                    row->type->is_list ? 0 : 1, &o);
        if (!value || !*value)
                return 0;
        if (row->flags & SCHEMA_DEPRECATED) {
                loader_warn_deprecated(L, row, &o);
                return 0;
        }
        /* A YAML file cannot hold other bytes, so config_dump() could not
         * write the value back. */
        if (!utf8_valid(value, strlen(value)))
                return loader_fail(L, -EINVAL, &o, NULL, "not valid UTF-8");
        if (row->type->is_list)
                return env_apply_list(L, row, value, &o);
        struct schema_item item = {.text = value};
        return loader_apply(L, row, &item, 1, &o);
}

static int env_apply(struct loader *L, config_getenv_fn getenv_fn)
{
        for (size_t i = 0; getenv_fn && i < schema_n_rows; i++) {
                int r = env_apply_row(L, &schema_rows[i], getenv_fn);
                if (r < 0)
                        return r;
        }
        return 0;
}

static const struct origin *origin_of(const struct loader *L, const char *name)
{
        const struct schema_row *row = schema_find(name);
        return &L->state[row - schema_rows].origin;
}

static int check_uid_order(struct loader *L)
{
        const struct config *c = &L->cfg;
        if (c->uid_max >= c->uid_min)
                return 0;
        const struct origin *omax = origin_of(L, "jail.uid_max");
        if (omax->kind == ORIGIN_DEFAULT)
                return loader_fail(L, -EINVAL, origin_of(L, "jail.uid_min"), "jail.uid_min",
                                   "%d is above jail.uid_max %d", c->uid_min, c->uid_max);
        return loader_fail(L, -EINVAL, omax, "jail.uid_max", "%d is below jail.uid_min %d",
                           c->uid_max, c->uid_min);
}

bool config_warm(const struct config *cfg)
{
        return cfg->warm_mode && strcmp(cfg->warm_mode, "warm") == 0;
}

/* Each run executing at once needs a UID of its own, and so does each
 * armed process waiting in a warm pool. */
static int check_uid_pool(struct loader *L)
{
        const struct config *c = &L->cfg;
        int64_t pool = config_run_uids(c);
        int64_t armed = config_warm(c) ? (int64_t)c->python_pool + c->nodejs_pool : 0;
        if (pool >= c->max_workers + armed)
                return 0;
        const char *blame =
            origin_of(L, "max_workers")->kind != ORIGIN_DEFAULT ? "max_workers" : "jail.uid_max";
        return loader_fail(L, -EINVAL, origin_of(L, blame), blame,
                           "max_workers is %d and the warm pools hold %" PRId64 " but the UID "
                           "pool jail.uid_min..jail.uid_max (%d..%d) holds only %" PRId64
                           " for runs (its last UID is pip's); each concurrent run and armed "
                           "process needs its own UID",
                           c->max_workers, armed, c->uid_min, c->uid_max, pool);
}

bool config_net_namespace(const struct config *cfg)
{
        return cfg->net_mode && strcmp(cfg->net_mode, "namespace") == 0;
}

/* Run addresses: the gateway, then one per UID of the pool. */
static int check_subnet_size(struct loader *L)
{
        const struct config *c = &L->cfg;
        struct netaddr_prefix p;
        if (!config_net_namespace(c) || netaddr_parse_prefix(c->net_subnet, &p, NULL) < 0)
                return 0;
        uint64_t need = (uint64_t)c->uid_max - (uint64_t)c->uid_min + 3;
        if (netaddr_size(&p) >= need)
                return 0;
        return loader_fail(L, -EINVAL, origin_of(L, "network.subnet"), "network.subnet",
                           "%s holds %" PRIu64 " addresses but the UID pool jail.uid_min.."
                           "jail.uid_max needs %" PRIu64 " (one per UID, the network and the "
                           "gateway)",
                           c->net_subnet, netaddr_size(&p), need);
}

/* Shell jobs run as one UID of their own, never one a run may borrow. */
static int check_shell_uid(struct loader *L)
{
        const struct config *c = &L->cfg;
        if (c->shell_uid < c->uid_min || c->shell_uid > c->uid_max)
                return 0;
        return loader_fail(L, -EINVAL, origin_of(L, "shell.uid"), "shell.uid",
                           "%d lies in the runs' UID pool jail.uid_min..jail.uid_max (%d..%d)",
                           c->shell_uid, c->uid_min, c->uid_max);
}

/* a is b or lies below it */
static bool path_within(const char *a, const char *b)
{
        size_t n = strlen(b);
        return strncmp(a, b, n) == 0 && (a[n] == '\0' || a[n] == '/');
}

/* The state directory and shell.home apart (jobs see shell.home; the
 * state holds every job's output), and no extra read-write path of
 * Landlock's inside either: those are bound by path as root, and a job
 * could turn one below shell.home into a link elsewhere. */
static int check_shell_paths(struct loader *L)
{
        const struct config *c = &L->cfg;
        if (!c->shell_enabled)
                return 0;
        if (path_within(c->shell_state_dir, c->shell_home) ||
            path_within(c->shell_home, c->shell_state_dir))
                return loader_fail(L, -EINVAL, origin_of(L, "shell.state_dir"), "shell.state_dir",
                                   "%s and shell.home %s must not lie one inside the other",
                                   c->shell_state_dir, c->shell_home);
        for (size_t i = 0; i < c->n_shell_landlock_rw; i++)
                if (path_within(c->shell_landlock_rw[i], c->shell_home) ||
                    path_within(c->shell_landlock_rw[i], c->shell_state_dir))
                        return loader_fail(L, -EINVAL, origin_of(L, "shell.landlock_rw_paths"),
                                           "shell.landlock_rw_paths",
                                           "%s lies inside shell.home or shell.state_dir",
                                           c->shell_landlock_rw[i]);
        return 0;
}

static int check_cross(struct loader *L)
{
        int r = check_uid_order(L);
        if (r == 0)
                r = check_uid_pool(L);
        if (r == 0)
                r = check_shell_uid(L);
        if (r == 0)
                r = check_shell_paths(L);
        return r < 0 ? r : check_subnet_size(L);
}

/* A list's default is its comma-separated text (none: the empty list). */
static size_t default_items(const struct schema_row *row, char *buf, size_t size,
                            struct schema_item *items, size_t max)
{
        if (!row->type->is_list) {
                items[0] = (struct schema_item){.text = row->def};
                return 1;
        }
        size_t n = 0;
        snprintf(buf, size, "%s", row->def ? row->def : "");
        for (char *save = NULL, *t = strtok_r(buf, ",", &save); t && n < max;
             t = strtok_r(NULL, ",", &save))
                items[n++] = (struct schema_item){.text = t};
        return n;
}

static int defaults_fill(struct config *cfg)
{
        *cfg = (struct config){0};
        for (size_t i = 0; i < schema_n_rows; i++) {
                const struct schema_row *row = &schema_rows[i];
                struct schema_item items[32];
                char buf[512];
                struct schema_error e;
                if (row->flags & SCHEMA_DEPRECATED)
                        continue;
                size_t n = default_items(row, buf, sizeof(buf), items, ELEMENTSOF(items));
                int r = row->type->set(row, cfg, items, n, &e);
                if (r < 0) {
                        config_free(cfg);
                        return r;
                }
        }
        return 0;
}

void config_defaults(struct config *cfg)
{
        /* Only allocation can fail here (the unit tests load every default
         * through the same checks); without memory there is no daemon. */
        if (defaults_fill(cfg) < 0) {
                log_error(NULL, "config.defaults", "error=%s", log_q("out of memory"));
                abort();
        }
}

int config_load_buffer(struct config *cfg, const char *name, const char *yaml, size_t len,
                       config_getenv_fn getenv_fn, char *err, size_t errlen)
{
        _cleanup_free_ struct key_state *state = calloc(schema_n_rows, sizeof(*state));
        struct loader L = {
            .name = name ? name : "config", .err = err, .errlen = errlen, .state = state};
        struct origin start = {0};
        if (err && errlen)
                err[0] = '\0';
        *cfg = (struct config){0};
        if (!state)
                return loader_fail(&L, -ENOMEM, &start, NULL, "out of memory");
        int r = defaults_fill(&L.cfg);
        if (r < 0)
                return loader_fail(&L, r, &start, NULL, "out of memory");
        if (yaml)
                r = loader_load_yaml(&L, yaml, len);
        if (r == 0)
                r = env_apply(&L, getenv_fn);
        if (r == 0)
                r = check_cross(&L);
        if (r < 0) {
                config_free(&L.cfg);
                return r;
        }
        *cfg = L.cfg;
        return 0;
}

int config_load(struct config *cfg, const char *path, config_getenv_fn getenv_fn, char *err,
                size_t errlen)
{
        struct strbuf sb = {0};
        if (!path)
                return config_load_buffer(cfg, "(no file)", NULL, 0, getenv_fn, err, errlen);
        /* a regular file only: a FIFO or a device could hold start-up */
        int r = file_read(path, 0, CONFIG_FILE_MAX, &sb);
        if (r < 0) {
                strbuf_free(&sb);
                *cfg = (struct config){0};
                loader_err_set(err, errlen, "%s: %s", path,
                               r == -E2BIG    ? "file is larger than 4M"
                               : r == -EINVAL ? "not a regular file"
                                              : strerror(-r));
                return r == -E2BIG ? -EFBIG : r;
        }
        r = config_load_buffer(cfg, path, sb.data ? sb.data : "", sb.len, getenv_fn, err, errlen);
        strbuf_free(&sb);
        return r;
}

void config_free(struct config *cfg)
{
        for (size_t i = 0; cfg && i < schema_n_rows; i++)
                schema_rows[i].type->free(&schema_rows[i], cfg);
}

const char *config_getenv_process(const char *name)
{
        return getenv(name);
}
