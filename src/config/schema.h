/* Private to src/config: the schema table. One row per key says where the
 * value lives in struct config, its type, default, bounds, environment
 * variable and documentation; a type is a small ops table (set, dump,
 * describe, free). The loader, config_dump() and config_doc() only walk it. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "config/config.h"

/* A value as it arrived: one item for a scalar, one per list entry. text is
 * NULL for a YAML null; line is 0 when the value is not from the file. */
struct schema_item {
        const char *text;
        int line;
        int col;
};

/* Why a set failed: the offending item and a sentence without the key. */
struct schema_error {
        size_t item;
        char reason[320];
};

struct schema_row;

struct schema_type {
        const char *doc_name; /* "integer", "size"... for docs */
        bool is_list;
        /* Replaces the field from n items, or leaves it untouched and
         * returns -EINVAL/-ENOMEM with e filled in. */
        int (*set)(const struct schema_row *row, struct config *cfg,
                   const struct schema_item *items, size_t n, struct schema_error *e);
        /* Writes what follows "name:" up to and including the newline;
         * list entries are indented by indent + 2 spaces. */
        void (*dump)(const struct schema_row *row, const struct config *cfg, FILE *out, int indent);
        /* Bounds for docs ("1..65535"), "" when there are none. */
        void (*describe)(const struct schema_row *row, char *buf, size_t len);
        void (*free)(const struct schema_row *row, struct config *cfg);
};

enum {
        SCHEMA_SECRET = 1 << 0,     /* dumped as "<redacted>" */
        SCHEMA_DEPRECATED = 1 << 1, /* accepted with a warning, ignored */
        SCHEMA_ENV_EMPTY = 1 << 2,  /* a set but empty variable sets "" (or the empty list) */
};

/* Extra check for a string value or a list entry; fills e->reason. */
typedef int (*schema_check_fn)(const char *value, struct schema_error *e);

struct schema_row {
        const char *name; /* dotted: "app.port", "max_workers" */
        const struct schema_type *type;
        size_t offset;       /* of the field in struct config */
        size_t count_offset; /* lists: of the size_t element count */
        const char *def;     /* default, in the same syntax as the file */
        int64_t min, max;    /* int, size, duration */
        const char *env;     /* NULL: derived, "LOCKBOX_" + NAME_IN_CAPS */
        schema_check_fn check;
        unsigned flags;
        const char *doc;
};

extern const struct schema_row schema_rows[];
extern const size_t schema_n_rows;

/* For types without bounds to describe: an empty string. */
void schema_describe_nothing(const struct schema_row *row, char *buf, size_t len);

extern const struct schema_type schema_type_int;
extern const struct schema_type schema_type_bool;
extern const struct schema_type schema_type_string;
extern const struct schema_type schema_type_size;
extern const struct schema_type schema_type_duration;
extern const struct schema_type schema_type_strlist;
extern const struct schema_type schema_type_syscalls;
extern const struct schema_type schema_type_deprecated;

/* Row for a dotted name, or NULL. */
const struct schema_row *schema_find(const char *name);
/* Length of the section prefix of a dotted name ("app" of "app.port"), 0
 * for a top-level key. */
size_t schema_section_len(const char *name);
/* True if some row lives in section name[0..len). */
bool schema_is_section(const char *name, size_t len);
/* The environment variable that overrides row. */
int schema_env_name(const struct schema_row *row, char *buf, size_t len);

/* Copies value into buf for a message: control bytes become '?', long
 * values are cut with "...". Returns buf. */
const char *schema_quote(const char *value, char *buf, size_t len);
/* snprintf into e->reason; returns -EINVAL. */
int schema_fail(struct schema_error *e, size_t item, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Sets e->reason to "out of memory"; returns -ENOMEM. */
int schema_fail_nomem(struct schema_error *e, size_t item);
/* Writes s as a YAML double-quoted scalar. */
void schema_dump_string(FILE *out, const char *s);

static inline void *schema_field(const struct schema_row *row, struct config *cfg)
{
        return (char *)cfg + row->offset;
}

static inline const void *schema_cfield(const struct schema_row *row, const struct config *cfg)
{
        return (const char *)cfg + row->offset;
}
