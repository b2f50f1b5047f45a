/* UTF-8-safe windows of an append-only file (see window.h). Everything is
 * computed from the bytes at the window's offset; the arithmetic works on
 * the room left before the file's size, so offsets near 2^63 cannot wrap. */
#include "shell/window.h"

#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/utf8.h"
#include "base/util.h"

/* The bytes a UTF-8 character may skip at a window's start: at most 3
 * continuation bytes follow a lead byte. */
#define WINDOW_SKIP_MAX 3

static bool window_is_cont(unsigned char b)
{
        return (b & 0xc0) == 0x80;
}

int shell_utf8_char(const unsigned char *s, size_t avail)
{
        /* Unicode 15, Table 3-7: the lead byte fixes the length and the
         * range of the second byte (no overlongs, surrogates or code points
         * past U+10FFFF); later bytes are any continuation byte. */
        unsigned char b = s[0], lo = 0x80, hi = 0xbf;
        size_t len;
        if (b < 0x80)
                return 1;
        if (b >= 0xc2 && b <= 0xdf)
                len = 2;
        else if (b >= 0xe0 && b <= 0xef)
                len = 3;
        else if (b >= 0xf0 && b <= 0xf4)
                len = 4;
        else
                return 0;
        if (b == 0xe0)
                lo = 0xa0;
        else if (b == 0xed)
                hi = 0x9f;
        else if (b == 0xf0)
                lo = 0x90;
        else if (b == 0xf4)
                hi = 0x8f;
        for (size_t i = 1; i < len; i++) {
                if (i == avail)
                        return -1;
                unsigned char c = s[i];
                if (i == 1 ? c < lo || c > hi : !window_is_cont(c))
                        return 0;
        }
        return (int)len;
}

/* Bytes of buf[p..avail) to take as the next character, or 0 to end the
 * window before it. t: bytes taken so far. */
static size_t window_next(const unsigned char *buf, size_t avail, size_t p, size_t t,
                          uint32_t limit)
{
        int k = shell_utf8_char(buf + p, avail - p);
        if (k < 0) /* cut by the end of what we have: maybe still being written */
                return t == 0 ? avail - p : 0;
        size_t len = k > 0 ? (size_t)k : 1;
        if (t + len > limit)
                return t == 0 ? len : 0; /* nothing fits: one character anyway */
        return len;
}

void shell_window_compute(const unsigned char *buf, size_t n, uint64_t offset, uint64_t size,
                          uint32_t limit, struct shell_window *ret)
{
        uint64_t room = offset < size ? size - offset : 0;
        size_t avail = (uint64_t)n < room ? n : (size_t)room;
        size_t skip = 0, p;
        while (skip < avail && skip < WINDOW_SKIP_MAX && window_is_cont(buf[skip]))
                skip++;
        for (p = skip; p < avail;) {
                /* a run of ASCII: a byte per character, taken while the
                 * window has room */
                size_t room_left = limit > p - skip ? limit - (p - skip) : 0;
                size_t run = utf8_ascii_prefix(
                    buf + p, room_left < avail - p ? room_left : avail - p, 0, NULL);
                if (run) {
                        p += run;
                        if (p - skip >= limit)
                                break;
                        continue;
                }
                size_t len = window_next(buf, avail, p, p - skip, limit);
                if (len == 0)
                        break;
                p += len;
                if (p - skip >= limit)
                        break;
        }
        *ret = (struct shell_window){
            .start = offset + skip,
            .end = offset + p,
            .truncated = offset + p < size,
        };
}

static int window_size(int fd, uint64_t *ret_size)
{
        struct stat st;
        if (fstat(fd, &st) < 0)
                return -errno;
        *ret_size = st.st_size > 0 ? (uint64_t)st.st_size : 0;
        return 0;
}

/* Up to len bytes of fd at offset (fewer only at the end of the file). */
static ssize_t window_pread(int fd, unsigned char *buf, size_t len, uint64_t offset)
{
        size_t got = 0;
        while (got < len) {
                ssize_t r = RETRY_EINTR(pread(fd, buf + got, len - got, (off_t)(offset + got)));
                if (r < 0)
                        return -errno;
                if (r == 0)
                        break;
                got += (size_t)r;
        }
        return (ssize_t)got;
}

int shell_window_read(int fd, uint64_t offset, uint32_t limit, struct shell_window *ret,
                      uint64_t *ret_size)
{
        uint64_t size;
        int r = window_size(fd, &size);
        if (r < 0)
                return r;
        if (offset > size)
                return -ERANGE;
        if (limit > SHELL_WINDOW_LIMIT_MAX)
                return -EINVAL;
        size_t want = (size_t)limit + SHELL_WINDOW_READ_EXTRA;
        if (want > size - offset)
                want = (size_t)(size - offset);
        _cleanup_free_ unsigned char *buf = malloc(want ? want : 1);
        if (!buf)
                return -ENOMEM;
        ssize_t n = want ? window_pread(fd, buf, want, offset) : 0;
        if (n < 0)
                return (int)n;
        shell_window_compute(buf, (size_t)n, offset, size, limit, ret);
        if (ret_size)
                *ret_size = size;
        return 0;
}

int shell_window_tail(int fd, uint32_t limit, struct shell_window *ret)
{
        uint64_t size;
        int r = window_size(fd, &size);
        if (r < 0)
                return r;
        uint64_t start = size > limit ? size - limit : 0;
        unsigned char head[WINDOW_SKIP_MAX];
        size_t want = size - start < sizeof(head) ? (size_t)(size - start) : sizeof(head);
        ssize_t n = want ? window_pread(fd, head, want, start) : 0;
        if (n < 0)
                return (int)n;
        size_t skip = 0;
        while (skip < (size_t)n && window_is_cont(head[skip]))
                skip++;
        *ret = (struct shell_window){.start = start + skip, .end = size, .truncated = false};
        return 0;
}
