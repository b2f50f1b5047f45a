/* The state of one config_load() and how it reports: where a value came
 * from, errors that say where, setting a row from its items. Used by the
 * YAML walker (yamlfile.c) and the entry points (config.c). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

#include "base/log.h"
#include "base/util.h"
#include "config/loader.h"

#define CONFIG_LIST_MAX 4096 /* entries in one list key */

static void origin_format(const struct loader *L, const struct origin *o, char *buf, size_t len)
{
        if (o->kind == ORIGIN_FILE)
                snprintf(buf, len, "%s:%d:%d", L->name, o->line, o->col);
        else if (o->kind == ORIGIN_ENV)
                snprintf(buf, len, "env %s", o->env);
        else
                snprintf(buf, len, "%s", L->name);
}

/* vsnprintf, not snprintf: the error buffer's size is the caller's, and
 * cutting a long message there is intended. */
void loader_err_set(char *err, size_t errlen, const char *fmt, ...)
{
        va_list ap;
        if (!err || errlen == 0)
                return;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
}

int loader_fail(struct loader *L, int r, const struct origin *o, const char *key, const char *fmt,
                ...)
{
        char where[512], reason[512];
        va_list ap;
        if (!L->err || L->errlen == 0)
                return r;
        origin_format(L, o, where, sizeof(where));
        va_start(ap, fmt);
        vsnprintf(reason, sizeof(reason), fmt, ap);
        va_end(ap);
        if (key && o->kind != ORIGIN_ENV)
                loader_err_set(L->err, L->errlen, "%s: %s: %s", where, key, reason);
        else
                loader_err_set(L->err, L->errlen, "%s: %s", where, reason);
        return r;
}

int loader_apply(struct loader *L, const struct schema_row *row, const struct schema_item *items,
                 size_t n, const struct origin *o)
{
        struct schema_error e = {0};
        if (n > CONFIG_LIST_MAX)
                return loader_fail(L, -EINVAL, o, row->name, "more than %d entries",
                                   CONFIG_LIST_MAX);
        int r = row->type->set(row, &L->cfg, items, n, &e);
        if (r < 0) {
                struct origin at = *o;
                if (e.item < n && items[e.item].line > 0) {
                        at.line = items[e.item].line;
                        at.col = items[e.item].col;
                }
                return loader_fail(L, r, &at, row->name, "%s", e.reason);
        }
        L->state[row - schema_rows].origin = *o;
        return 0;
}

void loader_warn_deprecated(const struct loader *L, const struct schema_row *row,
                            const struct origin *o)
{
        char where[512];
        origin_format(L, o, where, sizeof(where));
        log_warn(NULL, "config.deprecated", "key=%s source=%s detail=%s", row->name, log_q(where),
                 log_q("accepted but ignored; library paths come from python_path"));
}
