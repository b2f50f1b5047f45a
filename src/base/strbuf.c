/* Growable, capped byte buffer (see strbuf.h). */
#include "base/strbuf.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void strbuf_init(struct strbuf *sb, size_t limit)
{
        *sb = (struct strbuf){.limit = limit};
}

void strbuf_free(struct strbuf *sb)
{
        free(sb->data);
        *sb = (struct strbuf){.limit = sb->limit};
}

int strbuf_reserve(struct strbuf *sb, size_t extra)
{
        if (sb->limit && (extra > sb->limit || sb->len > sb->limit - extra))
                return -E2BIG;
        if (extra >= SIZE_MAX - sb->len) /* len + extra + 1 would wrap */
                return -E2BIG;
        size_t need = sb->len + extra + 1;
        if (need <= sb->cap)
                return 0;
        size_t ncap = sb->cap ? sb->cap : 256;
        while (ncap < need) {
                if (ncap > SIZE_MAX / 2)
                        return -ENOMEM;
                ncap *= 2;
        }
        char *n = realloc(sb->data, ncap);
        if (!n)
                return -ENOMEM;
        n[sb->len] = '\0'; /* a first allocation is a string too (strbuf_steal) */
        sb->data = n;
        sb->cap = ncap;
        return 0;
}

int strbuf_append(struct strbuf *sb, const void *data, size_t len)
{
        int r = strbuf_reserve(sb, len);
        if (r < 0)
                return r;
        if (len)
                memcpy(sb->data + sb->len, data, len);
        sb->len += len;
        sb->data[sb->len] = '\0';
        return 0;
}

int strbuf_appends(struct strbuf *sb, const char *s)
{
        return strbuf_append(sb, s, strlen(s));
}

int strbuf_appendf(struct strbuf *sb, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(NULL, 0, fmt, ap);
        va_end(ap);
        if (n < 0)
                return -EINVAL;
        int r = strbuf_reserve(sb, (size_t)n);
        if (r < 0)
                return r;
        va_start(ap, fmt);
        vsnprintf(sb->data + sb->len, (size_t)n + 1, fmt, ap);
        va_end(ap);
        sb->len += (size_t)n;
        return 0;
}

char *strbuf_steal(struct strbuf *sb, size_t *ret_len)
{
        if (!sb->data && strbuf_reserve(sb, 0) < 0)
                return NULL;
        char *d = sb->data;
        if (ret_len)
                *ret_len = sb->len;
        *sb = (struct strbuf){.limit = sb->limit};
        return d;
}
