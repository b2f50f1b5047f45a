/* logfmt logger (see log.h). Kept deliberately small: formatting happens
 * into a stack buffer and each line leaves in one write per sink. */
#include "base/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static const char *log_role = "main";
static bool log_debug_on;
static int log_file_fd = -1;

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

static void write_all(int fd, const char *buf, size_t len)
{
        while (len > 0) {
                ssize_t n = write(fd, buf, len);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        return;
                buf += n;
                len -= (size_t)n;
        }
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
        int n = snprintf(line, sizeof(line),
                         "time=%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ level=%s proc=%s pid=%d",
                         tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
                         tm.tm_sec, ts.tv_nsec / 1000000, level_name(lvl), log_role, (int)getpid());
        if (trace_id && *trace_id)
                n += snprintf(line + n, sizeof(line) - (size_t)n, " trace_id=%s", trace_id);
        n += snprintf(line + n, sizeof(line) - (size_t)n, " event=%s", event);
        if (fmt && *fmt && (size_t)n < sizeof(line) - 2) {
                line[n++] = ' ';
                va_list ap;
                va_start(ap, fmt);
                int m = vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
                va_end(ap);
                if (m > 0)
                        n += m;
        }
        if ((size_t)n > sizeof(line) - 2)
                n = (int)sizeof(line) - 2;
        line[n++] = '\n';
        write_all(STDERR_FILENO, line, (size_t)n);
        if (log_file_fd >= 0)
                write_all(log_file_fd, line, (size_t)n);
        errno = saved_errno;
}
