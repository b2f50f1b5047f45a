/* The shell API's response bodies (see shell.h), written as Go's
 * json.Encoder writes the reference's structs: compact, fields in struct
 * order, a trailing newline, "<" ">" "&" and U+2028/U+2029 escaped,
 * control characters as \b \f \n \r \t or \u00XX, each byte that is not
 * UTF-8 as \ufffd. Dify's client rejects any field it does not know, so
 * the field sets are fixed here, not built from a JSON library's object.
 * Also Go's %q quoting, which the reference uses in some error messages. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "base/strbuf.h"
#include "base/utf8.h"
#include "http/shell.h"

/* The character at s (len bytes left): its length, and its code point in
 * *ret; 0 when s does not start with a well-formed sequence. */
static size_t utf8_next(const unsigned char *s, size_t len, uint32_t *ret)
{
        size_t n = s[0] < 0x80 ? 1 : s[0] < 0xe0 ? 2 : s[0] < 0xf0 ? 3 : 4;
        if (n > len || utf8_valid_prefix((const char *)s, n) != n)
                return 0;
        static const unsigned char lead_bits[] = {0, 0x7f, 0x1f, 0x0f, 0x07};
        uint32_t cp = s[0] & lead_bits[n];
        for (size_t i = 1; i < n; i++)
                cp = cp << 6 | (s[i] & 0x3f);
        *ret = cp;
        return n;
}

/* One escaped ASCII byte, as Go's encoder writes it. */
static int put_ascii_escape(struct strbuf *sb, unsigned char c)
{
        static const char named[] = {
            ['\b'] = 'b', ['\f'] = 'f', ['\n'] = 'n', ['\r'] = 'r', ['\t'] = 't'};
        static const char hex[] = "0123456789abcdef";
        /* written out, not through printf: a page of output may hold a
         * few hundred newlines */
        if (c == '"' || c == '\\')
                return strbuf_append(sb, (const char[]){'\\', (char)c}, 2);
        if (c < sizeof(named) && named[c])
                return strbuf_append(sb, (const char[]){'\\', named[c]}, 2);
        return strbuf_append(sb, (const char[]){'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]}, 6);
}

/* What Go's encoder escapes among ASCII: controls, and these (HTML's
 * three too). */
#define ESCAPED_BELOW 0x20
#define ESCAPED "\"\\<>&"

static bool ascii_needs_escape(unsigned char c)
{
        return c < ESCAPED_BELOW || strchr(ESCAPED, c);
}

/* Bytes from s on that go out as they are and stand for themselves:
 * ASCII needing no escape (ascii_needs_escape's). Output is mostly such
 * runs, so they are taken eight bytes a step and the UTF-8 decoder runs
 * only past them. */
static size_t plain_ascii_run(const unsigned char *s, size_t len)
{
        return utf8_ascii_prefix(s, len, ESCAPED_BELOW, ESCAPED);
}

/* A JSON string of len bytes. */
static int put_string(struct strbuf *sb, const char *s, size_t len)
{
        const unsigned char *u = (const unsigned char *)s;
        int r = strbuf_reserve(sb, len + 2);
        if (r == 0)
                r = strbuf_appends(sb, "\"");
        for (size_t i = 0, start = 0; r == 0 && i <= len;) {
                size_t run = i < len ? plain_ascii_run(u + i, len - i) : 0;
                if (run) {
                        i += run;
                        continue;
                }
                uint32_t cp = 0;
                size_t n = i < len ? utf8_next(u + i, len - i, &cp) : 0;
                bool plain = i < len && n > 0 &&
                             (n > 1 ? cp != 0x2028 && cp != 0x2029 : !ascii_needs_escape(u[i]));
                if (plain) {
                        i += n;
                        continue;
                }
                r = strbuf_append(sb, s + start, i - start); /* the plain run before */
                if (r == 0 && i < len)
                        r = n == 0   ? strbuf_appends(sb, "\\ufffd")
                            : n == 1 ? put_ascii_escape(sb, u[i])
                                     : strbuf_appendf(sb, "\\u%04" PRIx32, cp);
                i += n ? n : 1;
                start = i;
        }
        return r < 0 ? r : strbuf_appends(sb, "\"");
}

static int put_cstring(struct strbuf *sb, const char *s)
{
        return put_string(sb, s, strlen(s));
}

/* UTC, second precision ("2026-08-04T10:00:00Z"), or null when unset. */
static int put_time(struct strbuf *sb, int64_t t)
{
        struct tm tm;
        time_t tt = (time_t)t;
        if (t < 0 || !gmtime_r(&tt, &tm))
                return strbuf_appends(sb, "null");
        return strbuf_appendf(sb, "\"%04d-%02d-%02dT%02d:%02d:%02dZ\"", tm.tm_year + 1900,
                              tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
}

static int put_exit_code(struct strbuf *sb, const struct shell_view *v)
{
        if (!v->has_exit_code)
                return strbuf_appends(sb, "null");
        return strbuf_appendf(sb, "%" PRId32, v->exit_code);
}

static const char *bool_text(bool b)
{
        return b ? "true" : "false";
}

/* The body, "\n" appended, or NULL when a step failed. */
static char *finish(struct strbuf *sb, int r)
{
        if (r == 0)
                r = strbuf_appends(sb, "\n");
        if (r < 0) {
                strbuf_free(sb);
                return NULL;
        }
        return strbuf_steal(sb, NULL);
}

char *shell_encode_error(const char *code, const char *message)
{
        struct strbuf sb;
        strbuf_init(&sb, 0);
        int r = strbuf_appends(&sb, "{\"error\":{\"code\":");
        if (r == 0)
                r = put_cstring(&sb, code);
        if (r == 0)
                r = strbuf_appends(&sb, ",\"message\":");
        if (r == 0)
                r = put_cstring(&sb, message);
        if (r == 0)
                r = strbuf_appends(&sb, "}}");
        return finish(&sb, r);
}

/* "job_id":...,"done":...,"status":...,"exit_code":... (JobResult's order) */
static int put_result_head(struct strbuf *sb, const struct shell_view *v)
{
        int r = strbuf_appends(sb, "{\"job_id\":");
        if (r == 0)
                r = put_cstring(sb, v->job_id);
        if (r == 0)
                r = strbuf_appendf(
                    sb, ",\"done\":%s,\"status\":", bool_text(SHELL_STATUS_TERMINAL(v->status)));
        if (r == 0)
                r = put_cstring(sb, shell_status_name(v->status));
        if (r == 0)
                r = strbuf_appends(sb, ",\"exit_code\":");
        return r == 0 ? put_exit_code(sb, v) : r;
}

char *shell_encode_result(const struct shell_reply *rep, const char *state_dir, const char *output,
                          size_t output_len)
{
        struct strbuf sb, path;
        strbuf_init(&sb, 0);
        strbuf_init(&path, 0);
        int r = strbuf_appendf(&path, "%s/jobs/%s/output.log", state_dir, rep->view.job_id);
        if (r == 0)
                r = put_result_head(&sb, &rep->view);
        if (r == 0)
                r = strbuf_appends(&sb, ",\"output_path\":");
        if (r == 0)
                r = put_string(&sb, path.data, path.len);
        if (r == 0)
                r = strbuf_appends(&sb, ",\"output\":");
        if (r == 0)
                r = put_string(&sb, output, output_len);
        if (r == 0)
                r = strbuf_appendf(&sb, ",\"offset\":%" PRIu64 ",\"truncated\":%s}", rep->win_end,
                                   bool_text(rep->truncated));
        strbuf_free(&path);
        return finish(&sb, r);
}

char *shell_encode_status(const struct shell_view *v)
{
        struct strbuf sb;
        strbuf_init(&sb, 0);
        int r = strbuf_appends(&sb, "{\"job_id\":");
        if (r == 0)
                r = put_cstring(&sb, v->job_id);
        if (r == 0)
                r = strbuf_appends(&sb, ",\"status\":");
        if (r == 0)
                r = put_cstring(&sb, shell_status_name(v->status));
        if (r == 0)
                r = strbuf_appendf(&sb, ",\"done\":%s,\"exit_code\":",
                                   bool_text(SHELL_STATUS_TERMINAL(v->status)));
        if (r == 0)
                r = put_exit_code(&sb, v);
        const struct {
                const char *key;
                int64_t t;
        } times[] = {{"created_at", v->created_at},
                     {"started_at", v->started_at},
                     {"ended_at", v->ended_at}};
        for (size_t i = 0; r == 0 && i < sizeof(times) / sizeof(times[0]); i++) {
                r = strbuf_appendf(&sb, ",\"%s\":", times[i].key);
                if (r == 0)
                        r = put_time(&sb, times[i].t);
        }
        if (r == 0)
                r = strbuf_appendf(&sb, ",\"offset\":%" PRIu64 "}", v->size);
        return finish(&sb, r);
}

/* JobInfo: started_at and ended_at are left out while unset (Go's
 * omitempty). */
static int put_info(struct strbuf *sb, const struct shell_view *v)
{
        int r = strbuf_appends(sb, "{\"job_id\":");
        if (r == 0)
                r = put_cstring(sb, v->job_id);
        if (r == 0)
                r = strbuf_appends(sb, ",\"status\":");
        if (r == 0)
                r = put_cstring(sb, shell_status_name(v->status));
        if (r == 0)
                r = strbuf_appends(sb, ",\"created_at\":");
        if (r == 0)
                r = put_time(sb, v->created_at);
        if (r == 0 && v->started_at >= 0) {
                r = strbuf_appends(sb, ",\"started_at\":");
                if (r == 0)
                        r = put_time(sb, v->started_at);
        }
        if (r == 0 && v->ended_at >= 0) {
                r = strbuf_appends(sb, ",\"ended_at\":");
                if (r == 0)
                        r = put_time(sb, v->ended_at);
        }
        return r == 0 ? strbuf_appends(sb, "}") : r;
}

/* {"jobs":[...]}: an empty list is [], never the reference's null. */
char *shell_encode_list(const struct shell_view *views, size_t n)
{
        struct strbuf sb;
        strbuf_init(&sb, 0);
        int r = strbuf_appends(&sb, "{\"jobs\":[");
        for (size_t i = 0; r == 0 && i < n; i++) {
                if (i > 0)
                        r = strbuf_appends(&sb, ",");
                if (r == 0)
                        r = put_info(&sb, &views[i]);
        }
        if (r == 0)
                r = strbuf_appends(&sb, "]}");
        return finish(&sb, r);
}

char *shell_encode_deleted(const char *job_id)
{
        struct strbuf sb;
        strbuf_init(&sb, 0);
        int r = strbuf_appends(&sb, "{\"job_id\":");
        if (r == 0)
                r = put_cstring(&sb, job_id);
        if (r == 0)
                r = strbuf_appends(&sb, ",\"deleted\":true}");
        return finish(&sb, r);
}

char *shell_encode_health(void)
{
        struct strbuf sb;
        strbuf_init(&sb, 0);
        return finish(&sb, strbuf_appends(&sb, "{\"status\":\"ok\"}"));
}

/* ---- Go's %q (strconv.Quote) ------------------------------------------- */

/* Code points Go's unicode.IsPrint refuses beyond ASCII's controls: the
 * C1 controls, spaces other than U+0020, format characters, line and
 * paragraph separators, private use and the noncharacters at the end of
 * the BMP. (Go also refuses unassigned code points, which this list does
 * not know.) */
static const struct {
        uint32_t lo, hi;
} not_printable[] = {
    {0x80, 0xa0},     {0xad, 0xad},     {0x600, 0x605},     {0x61c, 0x61c},     {0x6dd, 0x6dd},
    {0x70f, 0x70f},   {0x1680, 0x1680}, {0x180e, 0x180e},   {0x2000, 0x200f},   {0x2028, 0x202f},
    {0x205f, 0x2064}, {0x2066, 0x206f}, {0x3000, 0x3000},   {0xe000, 0xf8ff},   {0xfeff, 0xfeff},
    {0xfff9, 0xfffb}, {0xfffe, 0xffff}, {0xe0001, 0xe0001}, {0xe0020, 0xe007f}, {0xf0000, 0x10ffff},
};

static bool go_printable(uint32_t cp)
{
        if (cp < 0x80)
                return cp >= 0x20 && cp < 0x7f;
        for (size_t i = 0; i < sizeof(not_printable) / sizeof(not_printable[0]); i++)
                if (cp >= not_printable[i].lo && cp <= not_printable[i].hi)
                        return false;
        return true;
}

static int quote_rune(struct strbuf *sb, const char *s, size_t n, uint32_t cp)
{
        static const char named[] = {['\a'] = 'a', ['\b'] = 'b', ['\f'] = 'f', ['\n'] = 'n',
                                     ['\r'] = 'r', ['\t'] = 't', ['\v'] = 'v'};
        if (cp == '"' || cp == '\\')
                return strbuf_appendf(sb, "\\%c", (char)cp);
        if (go_printable(cp))
                return strbuf_append(sb, s, n);
        if (cp < sizeof(named) && named[cp])
                return strbuf_appendf(sb, "\\%c", named[cp]);
        if (cp < 0x20 || cp == 0x7f)
                return strbuf_appendf(sb, "\\x%02" PRIx32, cp);
        if (cp < 0x10000)
                return strbuf_appendf(sb, "\\u%04" PRIx32, cp);
        return strbuf_appendf(sb, "\\U%08" PRIx32, cp);
}

int shell_quote(struct strbuf *sb, const char *s, size_t len)
{
        const unsigned char *u = (const unsigned char *)s;
        int r = strbuf_appends(sb, "\"");
        for (size_t i = 0; r == 0 && i < len;) {
                uint32_t cp;
                size_t n = utf8_next(u + i, len - i, &cp);
                if (n == 0) {
                        r = strbuf_appendf(sb, "\\x%02x", u[i]);
                        i++;
                        continue;
                }
                r = quote_rune(sb, s + i, n, cp);
                i += n;
        }
        return r < 0 ? r : strbuf_appends(sb, "\"");
}
