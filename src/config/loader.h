/* Private to src/config: the state of one config_load() — the config
 * being built, where each key's value came from, and the error buffer —
 * shared by the YAML walker (yamlfile.c) and the entry points (config.c);
 * loader.c holds what both use. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "config/schema.h"

enum origin_kind { ORIGIN_DEFAULT, ORIGIN_FILE, ORIGIN_ENV };

/* Where a value came from; a message about it starts with this. */
struct origin {
        enum origin_kind kind;
        int line; /* ORIGIN_FILE, 1-based */
        int col;
        char env[64]; /* ORIGIN_ENV: the variable */
};

struct key_state {
        struct origin origin;
        bool seen;         /* set by the file: a second time is a duplicate */
        bool section_seen; /* first row of a section: the section was opened */
};

struct loader {
        const char *name; /* file name in messages */
        char *err;
        size_t errlen;
        struct key_state *state; /* schema_n_rows entries */
        struct config cfg;       /* being built */
};

/* vsnprintf into err (nothing when err is NULL or errlen 0): cutting a
 * long message at the caller's buffer is intended. */
void loader_err_set(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Writes "WHERE: KEY: REASON" to the error buffer; key may be NULL, and is
 * left out for environment origins ("env NAME: REASON"). Returns r. */
int loader_fail(struct loader *L, int r, const struct origin *o, const char *key, const char *fmt,
                ...) __attribute__((format(printf, 5, 6)));
/* Sets row from items; on failure reports at the failing item (or at o
 * when it has no position of its own) and returns the error. */
int loader_apply(struct loader *L, const struct schema_row *row, const struct schema_item *items,
                 size_t n, const struct origin *o);
/* Logs that a deprecated key was given and is ignored. */
void loader_warn_deprecated(const struct loader *L, const struct schema_row *row,
                            const struct origin *o);
/* Parses buf as the config file and applies it. */
int loader_load_yaml(struct loader *L, const char *buf, size_t len);
