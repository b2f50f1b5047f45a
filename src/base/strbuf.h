/* Growable byte buffer with an optional hard cap. Used for HTTP bodies,
 * captured program output and JSON assembly; never truncates silently:
 * appends past the cap fail with -E2BIG and leave the buffer intact. */
#pragma once

#include <stdarg.h>
#include <stddef.h>

#include "base/util.h"

struct strbuf {
        char *data; /* always NUL-terminated when non-NULL */
        size_t len;
        size_t cap;   /* allocated bytes */
        size_t limit; /* 0 = unlimited */
};

void strbuf_init(struct strbuf *sb, size_t limit);
void strbuf_free(struct strbuf *sb);
int strbuf_append(struct strbuf *sb, const void *data, size_t len);
int strbuf_appends(struct strbuf *sb, const char *s);
int strbuf_appendf(struct strbuf *sb, const char *fmt, ...) _printf_(2, 3);
int strbuf_reserve(struct strbuf *sb, size_t extra);
/* Detach the data (caller frees); the buffer is left empty. */
char *strbuf_steal(struct strbuf *sb, size_t *ret_len);
