/* Value types of the config schema: each one knows how to set its field
 * from text, print it back as YAML, describe its bounds and free it. A set
 * either replaces the field completely or leaves it as it was. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "base/parse.h"
#include "base/util.h"
#include "config/schema.h"

/* What a numeric type's text looks like and how its bounds print. */
struct numeric_syntax {
        int (*parse)(const char *s, int64_t *ret);
        int (*format)(int64_t v, char *buf, size_t len);
        const char *not_this; /* completes "'x' ..." */
};

static int format_int(int64_t v, char *buf, size_t len)
{
        int n = snprintf(buf, len, "%" PRId64, v);
        return n < 0 || (size_t)n >= len ? -ENOBUFS : 0;
}

static const struct numeric_syntax syntax_int = {parse_int64, format_int, "is not an integer"};
static const struct numeric_syntax syntax_size = {
    parse_size, parse_format_size, "is not a size (a byte count, or a number with K, M, G or T)"};
static const struct numeric_syntax syntax_duration = {parse_duration, parse_format_duration,
                                                      "is not a duration (like 30m, 1h30m or 45s)"};

static int numeric_out_of_range(const struct schema_row *row, const struct numeric_syntax *syn,
                                const char *quoted, bool low, struct schema_error *e)
{
        char bound[32];
        syn->format(low ? row->min : row->max, bound, sizeof(bound));
        return schema_fail(e, 0, "%s is %s the %s %s", quoted, low ? "below" : "above",
                           low ? "minimum" : "maximum", bound);
}

/* Parses one item. NULL (a YAML null) is an error here; durations map it
 * to "" before calling. */
static int numeric_parse(const struct schema_row *row, const struct numeric_syntax *syn,
                         const char *text, int64_t *ret, struct schema_error *e)
{
        char q[96];
        int64_t v;
        if (!text)
                return schema_fail(e, 0, "a value is required");
        schema_quote(text, q, sizeof(q));
        int r = syn->parse(text, &v);
        if (r == -ERANGE)
                return numeric_out_of_range(row, syn, q, text[0] == '-', e);
        if (r < 0)
                return schema_fail(e, 0, "'%s' %s", q, syn->not_this);
        if (v < row->min || v > row->max)
                return numeric_out_of_range(row, syn, q, v < row->min, e);
        *ret = v;
        return 0;
}

static void numeric_describe(const struct schema_row *row, const struct numeric_syntax *syn,
                             char *buf, size_t len)
{
        char lo[32], hi[32];
        syn->format(row->min, lo, sizeof(lo));
        syn->format(row->max, hi, sizeof(hi));
        snprintf(buf, len, "%s..%s", lo, hi);
}

static void numeric_dump(const struct numeric_syntax *syn, int64_t v, FILE *out)
{
        char buf[32];
        syn->format(v, buf, sizeof(buf));
        fprintf(out, " %s\n", buf);
}

static void free_nothing(const struct schema_row *row, struct config *cfg)
{
}

/* int: a C int field. */

static int int_set(const struct schema_row *row, struct config *cfg,
                   const struct schema_item *items, size_t n, struct schema_error *e)
{
        int64_t v;
        int r = numeric_parse(row, &syntax_int, items[0].text, &v, e);
        if (r < 0)
                return r;
        *(int *)schema_field(row, cfg) = (int)v;
        return 0;
}

static void int_dump(const struct schema_row *row, const struct config *cfg, FILE *out, int indent)
{
        numeric_dump(&syntax_int, *(const int *)schema_cfield(row, cfg), out);
}

static void int_describe(const struct schema_row *row, char *buf, size_t len)
{
        numeric_describe(row, &syntax_int, buf, len);
}

const struct schema_type schema_type_int = {
    .doc_name = "integer",
    .set = int_set,
    .dump = int_dump,
    .describe = int_describe,
    .free = free_nothing,
};

/* size: an int64_t byte count. */

static int size_set(const struct schema_row *row, struct config *cfg,
                    const struct schema_item *items, size_t n, struct schema_error *e)
{
        int64_t v;
        int r = numeric_parse(row, &syntax_size, items[0].text, &v, e);
        if (r < 0)
                return r;
        *(int64_t *)schema_field(row, cfg) = v;
        return 0;
}

static void size_dump(const struct schema_row *row, const struct config *cfg, FILE *out, int indent)
{
        numeric_dump(&syntax_size, *(const int64_t *)schema_cfield(row, cfg), out);
}

static void size_describe(const struct schema_row *row, char *buf, size_t len)
{
        numeric_describe(row, &syntax_size, buf, len);
}

const struct schema_type schema_type_size = {
    .doc_name = "size",
    .set = size_set,
    .dump = size_dump,
    .describe = size_describe,
    .free = free_nothing,
};

/* duration: int64_t seconds; a YAML null reads as "", which is 0. */

static int duration_set(const struct schema_row *row, struct config *cfg,
                        const struct schema_item *items, size_t n, struct schema_error *e)
{
        int64_t v;
        const char *text = items[0].text ? items[0].text : "";
        int r = numeric_parse(row, &syntax_duration, text, &v, e);
        if (r < 0)
                return r;
        *(int64_t *)schema_field(row, cfg) = v;
        return 0;
}

static void duration_dump(const struct schema_row *row, const struct config *cfg, FILE *out,
                          int indent)
{
        numeric_dump(&syntax_duration, *(const int64_t *)schema_cfield(row, cfg), out);
}

static void duration_describe(const struct schema_row *row, char *buf, size_t len)
{
        numeric_describe(row, &syntax_duration, buf, len);
}

const struct schema_type schema_type_duration = {
    .doc_name = "duration",
    .set = duration_set,
    .dump = duration_dump,
    .describe = duration_describe,
    .free = free_nothing,
};

/* bool */

static int bool_set(const struct schema_row *row, struct config *cfg,
                    const struct schema_item *items, size_t n, struct schema_error *e)
{
        char q[96];
        bool v;
        if (!items[0].text)
                return schema_fail(e, 0, "a value is required");
        if (parse_bool(items[0].text, &v) < 0)
                return schema_fail(e, 0, "'%s' is not a boolean (true or false)",
                                   schema_quote(items[0].text, q, sizeof(q)));
        *(bool *)schema_field(row, cfg) = v;
        return 0;
}

static void bool_dump(const struct schema_row *row, const struct config *cfg, FILE *out, int indent)
{
        fprintf(out, " %s\n", *(const bool *)schema_cfield(row, cfg) ? "true" : "false");
}

const struct schema_type schema_type_bool = {
    .doc_name = "boolean",
    .set = bool_set,
    .dump = bool_dump,
    .describe = schema_describe_nothing,
    .free = free_nothing,
};

/* string: a heap char *; a YAML null reads as "". */

static int string_set(const struct schema_row *row, struct config *cfg,
                      const struct schema_item *items, size_t n, struct schema_error *e)
{
        const char *text = items[0].text ? items[0].text : "";
        if (row->check) {
                int r = row->check(text, e);
                if (r < 0)
                        return r;
        }
        char *copy = strdup(text);
        if (!copy)
                return schema_fail_nomem(e, 0);
        char **field = schema_field(row, cfg);
        free(*field);
        *field = copy;
        return 0;
}

static void string_dump(const struct schema_row *row, const struct config *cfg, FILE *out,
                        int indent)
{
        const char *v = *(char *const *)schema_cfield(row, cfg);
        fputc(' ', out);
        schema_dump_string(out, row->flags & SCHEMA_SECRET ? "<redacted>" : v);
        fputc('\n', out);
}

static void string_free(const struct schema_row *row, struct config *cfg)
{
        char **field = schema_field(row, cfg);
        free(*field);
        *field = NULL;
}

const struct schema_type schema_type_string = {
    .doc_name = "string",
    .set = string_set,
    .dump = string_dump,
    .describe = schema_describe_nothing,
    .free = string_free,
};

/* strlist: char ** plus a size_t count; each entry passes row->check. */

static void strv_free(char **v, size_t n)
{
        for (size_t i = 0; v && i < n; i++)
                free(v[i]);
        free(v);
}

static int strlist_build(const struct schema_row *row, const struct schema_item *items, size_t n,
                         char **v, struct schema_error *e)
{
        for (size_t i = 0; i < n; i++) {
                const char *text = items[i].text ? items[i].text : "";
                int r = row->check ? row->check(text, e) : 0;
                if (r < 0) {
                        e->item = i;
                        return r;
                }
                v[i] = strdup(text);
                if (!v[i])
                        return schema_fail_nomem(e, i);
        }
        return 0;
}

static int strlist_set(const struct schema_row *row, struct config *cfg,
                       const struct schema_item *items, size_t n, struct schema_error *e)
{
        char **v = calloc(n ? n : 1, sizeof(char *));
        if (!v)
                return schema_fail_nomem(e, 0);
        int r = strlist_build(row, items, n, v, e);
        if (r < 0) {
                strv_free(v, n);
                return r;
        }
        char ***field = schema_field(row, cfg);
        size_t *count = (size_t *)((char *)cfg + row->count_offset);
        strv_free(*field, *count);
        *field = v;
        *count = n;
        return 0;
}

static void strlist_dump(const struct schema_row *row, const struct config *cfg, FILE *out,
                         int indent)
{
        char *const *v = *(char **const *)schema_cfield(row, cfg);
        size_t n = *(const size_t *)((const char *)cfg + row->count_offset);
        if (n == 0 || !v) {
                fputs(" []\n", out);
                return;
        }
        fputc('\n', out);
        for (size_t i = 0; i < n; i++) {
                fprintf(out, "%*s- ", indent + 2, "");
                schema_dump_string(out, v[i]);
                fputc('\n', out);
        }
}

static void strlist_free(const struct schema_row *row, struct config *cfg)
{
        char ***field = schema_field(row, cfg);
        size_t *count = (size_t *)((char *)cfg + row->count_offset);
        strv_free(*field, *count);
        *field = NULL;
        *count = 0;
}

const struct schema_type schema_type_strlist = {
    .doc_name = "list of strings",
    .is_list = true,
    .set = strlist_set,
    .dump = strlist_dump,
    .describe = schema_describe_nothing,
    .free = strlist_free,
};

/* deprecated: accepted in any shape, warned about by the loader, never
 * stored; the set is never reached. */

static int deprecated_set(const struct schema_row *row, struct config *cfg,
                          const struct schema_item *items, size_t n, struct schema_error *e)
{
        return 0;
}

static void deprecated_dump(const struct schema_row *row, const struct config *cfg, FILE *out,
                            int indent)
{
}

const struct schema_type schema_type_deprecated = {
    .doc_name = "deprecated",
    .set = deprecated_set,
    .dump = deprecated_dump,
    .describe = schema_describe_nothing,
    .free = free_nothing,
};
