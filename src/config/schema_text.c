/* What the schema's value types share to report an error, quote a value
 * in a message and print one back as YAML: below the table (schema.c) and
 * the types (types.c, syscalls.c), which all use it. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "config/schema.h"

void schema_describe_nothing(const struct schema_row *row, char *buf, size_t len)
{
        if (len > 0)
                buf[0] = '\0';
}

const char *schema_quote(const char *value, char *buf, size_t len)
{
        const size_t cut = 60;
        size_t o = 0;
        if (len < 4) {
                if (len > 0)
                        buf[0] = '\0';
                return buf;
        }
        for (const char *p = value; *p && o < len - 4; p++) {
                if (o == cut) {
                        memcpy(buf + o, "...", 3);
                        o += 3;
                        break;
                }
                unsigned char c = (unsigned char)*p;
                buf[o++] = c < 0x20 || c == 0x7f ? '?' : (char)c;
        }
        buf[o] = '\0';
        return buf;
}

int schema_fail(struct schema_error *e, size_t item, const char *fmt, ...)
{
        va_list ap;
        e->item = item;
        va_start(ap, fmt);
        vsnprintf(e->reason, sizeof(e->reason), fmt, ap);
        va_end(ap);
        return -EINVAL;
}

int schema_fail_nomem(struct schema_error *e, size_t item)
{
        schema_fail(e, item, "out of memory");
        return -ENOMEM;
}

/* Characters a YAML file cannot hold raw: libyaml refuses C1 controls
 * (and reads NEL, U+0085, as a line break) and U+FFFE and U+FFFF. Writes
 * the escape of the character at p; returns its length in bytes, or 0. */
static size_t dump_escape(FILE *out, const unsigned char *p)
{
        if (p[0] == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f) {
                fprintf(out, "\\x%02x", p[1]);
                return 2;
        }
        if (p[0] == 0xef && p[1] == 0xbf && (p[2] == 0xbe || p[2] == 0xbf)) {
                fprintf(out, "\\u%04x", 0xffc0 | (p[2] & 0x3f));
                return 3;
        }
        return 0;
}

void schema_dump_string(FILE *out, const char *s)
{
        fputc('"', out);
        for (const char *p = s ? s : ""; *p; p++) {
                unsigned char c = (unsigned char)*p;
                size_t n;
                if (c == '"' || c == '\\')
                        fprintf(out, "\\%c", c);
                else if (c < 0x20 || c == 0x7f)
                        fprintf(out, "\\x%02x", c);
                else if ((n = dump_escape(out, (const unsigned char *)p)) > 0)
                        p += n - 1;
                else
                        fputc(c, out);
        }
        fputc('"', out);
}
