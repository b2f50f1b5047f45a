/* libFuzzer target for a shell job's output: src/shell/sanitize.c on any
 * bytes a program writes to its terminal, and src/shell/window.c on any
 * bytes in output.log. Input: 5 header bytes (a seed for the chunking and
 * the flushes, the window's limit, its offset), then the bytes.
 * Sanitizer: the text is valid UTF-8, holds no ESC and no U+009B, is at
 * most 3 bytes per input byte, and is the same whatever the pieces fed;
 * with flushes between pieces it is still valid, and the same as without
 * when the input has no '\r'. Windows: start <= end <= size, at most 3
 * bytes skipped, at most max(limit, 4) bytes, truncated exactly when end <
 * size, never starting or ending inside a well-formed character, always
 * moving a reader forward; a reader paging valid UTF-8 gets every byte. */
#include "base/strbuf.h"
#include "base/utf8.h"
#include "fuzz.h"
#include "shell/sanitize.h"
#include "shell/window.h"

#define HEADER 5

static uint32_t next_rand(uint32_t *st)
{
        *st ^= *st << 13;
        *st ^= *st >> 17;
        *st ^= *st << 5;
        return *st;
}

/* in fed in pieces (sizes from *st; all at once when st is NULL), with a
 * flush after some pieces when flush is set, then finished. */
static void sanitize(const char *in, size_t len, uint32_t *st, bool flush, struct strbuf *out)
{
        struct sanitizer *s = NULL;
        strbuf_init(out, 0);
        FUZZ_ASSERT(sanitizer_new(&s) == 0);
        for (size_t i = 0; i < len;) {
                size_t n = st ? 1 + next_rand(st) % 9 : len - i;
                if (n > len - i)
                        n = len - i;
                char *piece = fuzz_copy((const uint8_t *)in + i, n);
                FUZZ_ASSERT(sanitizer_feed(s, piece, n, out) == 0);
                free(piece);
                i += n;
                if (flush && next_rand(st) % 3 == 0)
                        FUZZ_ASSERT(sanitizer_flush_partial(s, out) == 0);
        }
        FUZZ_ASSERT(sanitizer_finish(s, out) == 0);
        sanitizer_free(s);
}

static void check_text(const struct strbuf *out, size_t in_len)
{
        const char *t = out->data ? out->data : "";
        FUZZ_ASSERT(utf8_valid(t, out->len));
        FUZZ_ASSERT(out->len <= 3 * in_len);
        FUZZ_ASSERT(!memchr(t, 0x1b, out->len));
        for (size_t i = 0; i + 1 < out->len; i++)
                FUZZ_ASSERT(!((unsigned char)t[i] == 0xc2 && (unsigned char)t[i + 1] == 0x9b));
}

static void fuzz_sanitizer(const char *in, size_t len, uint32_t seed)
{
        struct strbuf once, pieces, flushed;
        uint32_t st = seed | 1;
        sanitize(in, len, NULL, false, &once);
        check_text(&once, len);
        sanitize(in, len, &st, false, &pieces);
        FUZZ_ASSERT(pieces.len == once.len);
        FUZZ_ASSERT(once.len == 0 || memcmp(pieces.data, once.data, once.len) == 0);
        sanitize(in, len, &st, true, &flushed);
        check_text(&flushed, len);
        if (!memchr(in, '\r', len)) {
                FUZZ_ASSERT(flushed.len == once.len);
                FUZZ_ASSERT(once.len == 0 || memcmp(flushed.data, once.data, once.len) == 0);
        }
        strbuf_free(&once);
        strbuf_free(&pieces);
        strbuf_free(&flushed);
}

/* True when pos lies strictly inside a well-formed character of f. */
static bool inside_char(const unsigned char *f, size_t size, size_t pos)
{
        for (size_t s = pos > 3 ? pos - 3 : 0; s < pos; s++) {
                int k = shell_utf8_char(f + s, size - s);
                if (k > 0 && s + (size_t)k > pos)
                        return true;
        }
        return false;
}

/* The window at offset, computed from n bytes there (n: what a read would
 * return when honest, else any smaller count), checked. */
static struct shell_window window_at(const unsigned char *f, size_t size, size_t offset,
                                     uint32_t limit, size_t n, bool honest)
{
        struct shell_window w;
        unsigned char *buf = (unsigned char *)fuzz_copy(f + offset, n);
        shell_window_compute(buf, n, offset, size, limit, &w);
        free(buf);
        FUZZ_ASSERT(offset <= w.start && w.start <= w.end && w.end <= offset + n);
        FUZZ_ASSERT(w.start - offset <= 3);
        FUZZ_ASSERT(w.end - w.start <= (limit > 4 ? limit : 4));
        FUZZ_ASSERT(w.truncated == (w.end < size));
        if (!honest)
                return w;
        FUZZ_ASSERT(offset == size || w.end > offset);
        FUZZ_ASSERT(!inside_char(f, size, w.end));
        if (w.start > offset)
                FUZZ_ASSERT(!inside_char(f, size, w.start));
        return w;
}

static size_t honest_n(size_t size, size_t offset, uint32_t limit)
{
        size_t n = size - offset;
        size_t want = (size_t)limit + SHELL_WINDOW_READ_EXTRA;
        return n < want ? n : want;
}

static void fuzz_windows(const unsigned char *f, size_t size, uint32_t limit, size_t offset)
{
        window_at(f, size, offset, limit, honest_n(size, offset, limit), true);
        if (offset < size)
                window_at(f, size, offset, limit, (offset * 7 + limit) % (size - offset), false);
        /* a reader paging from 0 */
        bool valid = utf8_valid((const char *)f, size);
        size_t off = 0, calls = 0;
        while (off < size) {
                struct shell_window w =
                    window_at(f, size, off, limit, honest_n(size, off, limit), true);
                if (valid)
                        FUZZ_ASSERT(w.start == off);
                off = (size_t)w.end;
                FUZZ_ASSERT(++calls <= size);
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        if (size < HEADER)
                return 0;
        uint32_t seed = (uint32_t)data[0] << 8 | 0x5a;
        uint32_t limit = (uint32_t)data[1] << 8 | data[2];
        if (!(data[0] & 0x80))
                limit %= 16; /* mostly small windows, so pages cut characters */
        const uint8_t *body = data + HEADER;
        size_t len = size - HEADER;
        size_t offset = len ? ((size_t)data[3] << 8 | data[4]) % (len + 1) : 0;
        char *in = fuzz_copy(body, len);
        fuzz_sanitizer(in, len, seed);
        fuzz_windows((const unsigned char *)in, len, limit, offset);
        free(in);
        return 0;
}
