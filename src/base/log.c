/* logfmt logger (see log.h). Kept deliberately small: formatting happens
 * into a stack buffer and each line leaves in one write per sink. */
#include "base/log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/file.h"

static const char *log_role = "main";
static bool log_debug_on, log_json;
static int log_file_fd = -1;
static char log_file_path[4096];

void log_setup(const char *role, bool debug, int file_fd)
{
        log_role = role;
        log_debug_on = debug;
        log_file_fd = file_fd;
}

int log_get_file_fd(void)
{
        return log_file_fd;
}

void log_set_json(bool json)
{
        log_json = json;
}

static int open_sink(const char *path)
{
        int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY, 0640);
        return fd < 0 ? -errno : fd;
}

int log_open_file(const char *path)
{
        if (strlen(path) >= sizeof(log_file_path))
                return -ENAMETOOLONG;
        int fd = open_sink(path);
        if (fd < 0)
                return fd;
        strcpy(log_file_path, path);
        log_file_fd = fd;
        return 0;
}

int log_reopen_file(void)
{
        if (log_file_fd < 0 || !log_file_path[0])
                return 0;
        int fd = open_sink(log_file_path);
        if (fd < 0)
                return fd;
        int r = dup3(fd, log_file_fd, O_CLOEXEC) < 0 ? -errno : 0;
        close(fd);
        return r;
}

void log_replace_file(int fd)
{
        if (log_file_fd < 0) {
                log_file_fd = fd;
                return;
        }
        if (dup3(fd, log_file_fd, O_CLOEXEC) >= 0 || errno != EBADF)
                close(fd);
        else
                log_file_fd = fd;
}

/* ---- logfmt to JSON ------------------------------------------------------------ */

struct out {
        char *p;
        size_t len, cap;
        bool clipped; /* a byte did not fit */
};

static void put(struct out *o, char c)
{
        if (o->len + 1 < o->cap)
                o->p[o->len++] = c;
        else
                o->clipped = true;
}

static void put_json_char(struct out *o, unsigned char c)
{
        if (c == '"' || c == '\\') {
                put(o, '\\');
                put(o, (char)c);
        } else if (c < 0x20 || c == 0x7f) {
                char esc[8];
                snprintf(esc, sizeof(esc), "\\u%04x", c);
                for (char *e = esc; *e; e++)
                        put(o, *e);
        } else {
                put(o, (char)c);
        }
}

static bool is_integer(const char *v, size_t n)
{
        size_t i = v[0] == '-';
        if (n == i || n - i > 15 || (v[i] == '0' && n - i > 1))
                return false;
        for (; i < n; i++)
                if (v[i] < '0' || v[i] > '9')
                        return false;
        return true;
}

size_t log_logfmt_to_json(const char *line, size_t len, char *out, size_t outlen)
{
        struct out o = {out, 0, outlen, false};
        const char *p = line, *end = line + len;
        bool first = true;
        if (outlen < 3) { /* no room for "{}" and its NUL */
                if (outlen)
                        out[0] = '\0';
                return 0;
        }
        put(&o, '{');
        /* End of the last pair that fit with room left for "}\0": a
         * clipped line loses its last pairs whole, never half a string. */
        size_t whole = o.len;
        while (p < end && !o.clipped && o.len + 2 <= o.cap) {
                whole = o.len;
                while (p < end && *p == ' ')
                        p++;
                if (p >= end)
                        break;
                const char *k = p;
                while (p < end && *p != '=' && *p != ' ')
                        p++;
                size_t klen = (size_t)(p - k);
                bool has_value = p < end && *p == '=';
                if (!first)
                        put(&o, ',');
                first = false;
                put(&o, '"');
                for (size_t i = 0; i < (has_value ? klen : 0); i++)
                        put_json_char(&o, (unsigned char)k[i]);
                if (!has_value) /* a stray word: keep it as "msg" */
                        for (const char *m = "msg"; *m; m++)
                                put(&o, *m);
                put(&o, '"');
                put(&o, ':');
                if (!has_value) {
                        put(&o, '"');
                        for (size_t i = 0; i < klen; i++)
                                put_json_char(&o, (unsigned char)k[i]);
                        put(&o, '"');
                        continue;
                }
                p++; /* '=' */
                if (p < end && *p == '"') {
                        put(&o, '"');
                        for (p++; p < end && *p != '"'; p++) {
                                if (*p == '\\' && p + 1 < end)
                                        p++;
                                put_json_char(&o, (unsigned char)*p);
                        }
                        if (p < end)
                                p++; /* closing quote */
                        put(&o, '"');
                        continue;
                }
                const char *v = p;
                while (p < end && *p != ' ')
                        p++;
                size_t vlen = (size_t)(p - v);
                if (is_integer(v, vlen)) {
                        for (size_t i = 0; i < vlen; i++)
                                put(&o, v[i]);
                } else {
                        put(&o, '"');
                        for (size_t i = 0; i < vlen; i++)
                                put_json_char(&o, (unsigned char)v[i]);
                        put(&o, '"');
                }
        }
        if (!o.clipped && o.len + 2 <= o.cap)
                whole = o.len;
        o.len = whole;
        o.p[o.len++] = '}';
        o.p[o.len] = '\0';
        return o.len;
}

void log_set_role(const char *role)
{
        log_role = role;
}

const char *log_q(const char *value)
{
        static __thread char ring[4][512];
        static __thread unsigned idx;
        char *out = ring[idx++ % 4];
        size_t o = 0;
        out[o++] = '"';
        for (const char *p = value ? value : ""; *p && o < sizeof(ring[0]) - 4; p++) {
                unsigned char c = (unsigned char)*p;
                if (c == '"' || c == '\\') {
                        out[o++] = '\\';
                        out[o++] = (char)c;
                } else if (c < 0x20 || c == 0x7f) {
                        out[o++] = ' ';
                } else {
                        out[o++] = (char)c;
                }
        }
        out[o++] = '"';
        out[o] = '\0';
        return out;
}

static const char *level_name(enum log_level lvl)
{
        static const char *const names[] = {"debug", "info", "warn", "error"};
        return names[lvl];
}

/* Format at offset at of line[size]: the new offset, at most size - 1
 * (a cut text stays cut, and the next call writes nothing). */
static size_t line_vadd(char *line, size_t size, size_t at, const char *fmt, va_list ap)
    _printf_(4, 0);
static size_t line_vadd(char *line, size_t size, size_t at, const char *fmt, va_list ap)
{
        if (at >= size - 1)
                return size - 1;
        int m = vsnprintf(line + at, size - at, fmt, ap);
        if (m < 0)
                return at;
        return (size_t)m >= size - at ? size - 1 : at + (size_t)m;
}

static size_t line_add(char *line, size_t size, size_t at, const char *fmt, ...) _printf_(4, 5);
static size_t line_add(char *line, size_t size, size_t at, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        at = line_vadd(line, size, at, fmt, ap);
        va_end(ap);
        return at;
}

void log_emit(enum log_level lvl, const char *trace_id, const char *event, const char *fmt, ...)
{
        if (lvl == LOGL_DEBUG && !log_debug_on)
                return;
        int saved_errno = errno;
        char line[2048];
        struct timespec ts;
        struct tm tm;
        clock_gettime(CLOCK_REALTIME, &ts);
        gmtime_r(&ts.tv_sec, &tm);
        size_t n =
            line_add(line, sizeof(line), 0,
                     "time=%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ level=%s proc=%s pid=%d",
                     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                     ts.tv_nsec / 1000000, level_name(lvl), log_role, (int)getpid());
        if (trace_id && *trace_id)
                n = line_add(line, sizeof(line), n, " trace_id=%s", trace_id);
        n = line_add(line, sizeof(line), n, " event=%s", event);
        if (fmt && *fmt && n < sizeof(line) - 2) {
                line[n++] = ' ';
                va_list ap;
                va_start(ap, fmt);
                n = line_vadd(line, sizeof(line), n, fmt, ap);
                va_end(ap);
        }
        if (n > sizeof(line) - 2)
                n = sizeof(line) - 2; /* room for the newline */
        char json[4096];
        const char *text = line;
        size_t len = n;
        if (log_json) {
                len = log_logfmt_to_json(line, len, json, sizeof(json) - 1);
                text = json;
        }
        ((char *)text)[len++] = '\n';
        (void)file_write_all(STDERR_FILENO, text, len);
        if (log_file_fd >= 0)
                (void)file_write_all(log_file_fd, text, len);
        errno = saved_errno;
}
