/* Unit tests for shell/sanitize.c (a PTY's output made plain text) and
 * shell/window.c (UTF-8-safe windows of an output file): every rule, with
 * the input fed at once, byte by byte and split at every point. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/strbuf.h"
#include "base/utf8.h"
#include "shell/sanitize.h"
#include "shell/window.h"
#include "test.h"

#define FFFD "\xef\xbf\xbd"
#define LIT(s) s, sizeof(s) - 1

/* len bytes of s as a C literal would show them, into a static buffer. */
static const char *shown(const char *s, size_t len)
{
        static char buf[2][512];
        static int which;
        char *b = buf[which ^= 1];
        size_t o = 0;
        for (size_t i = 0; i < len && o < sizeof(buf[0]) - 8; i++) {
                unsigned char c = (unsigned char)s[i];
                if (c >= 0x20 && c < 0x7f && c != '\\')
                        b[o++] = (char)c;
                else
                        o += (size_t)snprintf(b + o, 8, "\\x%02x", c);
        }
        if (o >= sizeof(buf[0]) - 8)
                o += (size_t)snprintf(b + o, 8, "...");
        b[o] = '\0';
        return b;
}

/* A heap copy of exactly len bytes, so ASan sees a read past the end. */
static char *exact(const char *in, size_t len)
{
        char *p = malloc(len ? len : 1);
        if (p && len)
                memcpy(p, in, len);
        return p;
}

/* Feed in[0..len) to s in pieces of piece bytes (0: at once), each its own
 * heap block. 0 or the first error. */
static int feed_pieces(struct sanitizer *s, const char *in, size_t len, size_t piece,
                       struct strbuf *out)
{
        size_t step = piece ? piece : (len ? len : 1);
        for (size_t i = 0; i < len; i += step) {
                size_t n = len - i < step ? len - i : step;
                char *p = exact(in + i, n);
                if (!p)
                        return -ENOMEM;
                int r = sanitizer_feed(s, p, n, out);
                free(p);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* in fed in pieces then finished; the text in out (initialised here). */
static int sanitize_pieces(const char *in, size_t len, size_t piece, struct strbuf *out)
{
        struct sanitizer *s = NULL;
        strbuf_init(out, 0);
        int r = sanitizer_new(&s);
        if (r < 0)
                return r;
        r = feed_pieces(s, in, len, piece, out);
        if (r == 0)
                r = sanitizer_finish(s, out);
        sanitizer_free(s);
        return r;
}

static void expect_text(const char *file, int line, const char *what, const char *got,
                        size_t got_len, const char *want, size_t want_len)
{
        if (got_len == want_len && memcmp(got ? got : "", want, want_len) == 0)
                return;
        test_fail(file, line, "%s:\n    got:  \"%s\" (%zu bytes)\n    want: \"%s\" (%zu bytes)",
                  what, shown(got ? got : "", got_len), got_len, shown(want, want_len), want_len);
}

/* in sanitized at once, byte by byte and in pieces of 2, 3 and 5 gives want. */
static void check_sanitize(const char *file, int line, const char *in, size_t len, const char *want,
                           size_t want_len)
{
        static const size_t pieces[] = {0, 1, 2, 3, 5};
        for (size_t i = 0; i < sizeof(pieces) / sizeof(pieces[0]) && !test_failed; i++) {
                struct strbuf out;
                int r = sanitize_pieces(in, len, pieces[i], &out);
                if (r < 0)
                        test_fail(file, line, "sanitizing \"%s\": %s", shown(in, len),
                                  strerror(-r));
                char what[640];
                snprintf(what, sizeof(what), "\"%s\" in pieces of %zu", shown(in, len), pieces[i]);
                expect_text(file, line, what, out.data, out.len, want, want_len);
                strbuf_free(&out);
        }
}

#define EXPECT_SANITIZE(in, want)                                                                  \
        do {                                                                                       \
                check_sanitize(__FILE__, __LINE__, LIT(in), LIT(want));                            \
                if (test_failed)                                                                   \
                        return;                                                                    \
        } while (0)

/* What is in out so far, checked and then emptied. */
#define EXPECT_OUT(out, want)                                                                      \
        do {                                                                                       \
                expect_text(__FILE__, __LINE__, #out, (out)->data, (out)->len, LIT(want));         \
                if (test_failed)                                                                   \
                        return;                                                                    \
                (out)->len = 0;                                                                    \
                if ((out)->data)                                                                   \
                        (out)->data[0] = '\0';                                                     \
        } while (0)

#define FEED(s, text, out) EXPECT_INT_EQ(sanitizer_feed((s), LIT(text), (out)), 0)

TEST(shell_sanitize_passes_plain_lines_unchanged)
{
        EXPECT_SANITIZE("hello\nworld\n", "hello\nworld\n");
        EXPECT_SANITIZE("<<<DIFY_WORKSPACE_BEGIN>>>\neyJhIjoxfQ==\n<<<DIFY_WORKSPACE_END>>>\n",
                        "<<<DIFY_WORKSPACE_BEGIN>>>\neyJhIjoxfQ==\n<<<DIFY_WORKSPACE_END>>>\n");
        EXPECT_SANITIZE("h\xc3\xa9llo \xe2\x82\xac \xf0\x9f\x98\x80\n",
                        "h\xc3\xa9llo \xe2\x82\xac \xf0\x9f\x98\x80\n");
        EXPECT_SANITIZE("", "");
        EXPECT_SANITIZE("\n\n", "\n\n");
}

TEST(shell_sanitize_crlf_becomes_lf)
{
        EXPECT_SANITIZE("one\r\ntwo\r\n", "one\ntwo\n");
        EXPECT_SANITIZE("\r\n", "\n");
        /* a program's own CRLF through ONLCR: "\r\r\n" is still one line end */
        EXPECT_SANITIZE("abc\r\r\n", "abc\n");
}

TEST(shell_sanitize_lone_cr_overwrites_the_line)
{
        EXPECT_SANITIZE("10%\r20%\r30%\n", "30%\n");
        EXPECT_SANITIZE("abc\rxy\n", "xy\n");
        EXPECT_SANITIZE("first\nabc\rdef\r\nnext\n", "first\ndef\nnext\n");
        /* an erase-line after the '\r' is dropped; the overwrite still holds */
        EXPECT_SANITIZE("50%\r\x1b[K60%\n", "60%\n");
        /* nothing after the '\r': the line stays as the terminal shows it */
        EXPECT_SANITIZE("abc\r", "abc");
}

TEST(shell_sanitize_drops_csi_sequences)
{
        EXPECT_SANITIZE("\x1b[31mred\x1b[0m\n", "red\n");
        EXPECT_SANITIZE("\x1b[1;38;5;208mX\x1b[K\x1b[2J\x1b[H\x1b[?25l\x1b[?1049h\n", "X\n");
        EXPECT_SANITIZE("a\x1b[ @b\n", "ab\n"); /* intermediate, final '@' */
        EXPECT_SANITIZE("a\x1b[~b\n", "ab\n");  /* final '~' */
        /* the 8-bit CSI, U+009B in UTF-8 */
        EXPECT_SANITIZE("\xc2\x9b"
                        "31mred\xc2\x9b"
                        "0m\n",
                        "red\n");
        /* a byte that cannot be in a CSI ends it and is read as text */
        EXPECT_SANITIZE("a\x1b[3\nb\n", "a\nb\n");
        EXPECT_SANITIZE("a\x1b[3\x1b[0mb\n", "ab\n");
}

TEST(shell_sanitize_drops_osc_with_bel_and_with_st)
{
        EXPECT_SANITIZE("\x1b]0;my title\x07text\n", "text\n");
        EXPECT_SANITIZE("\x1b]8;;http://example.test/\x1b\\link\x1b]8;;\x1b\\\n", "link\n");
        EXPECT_SANITIZE("\x1b]2;t\xc2\x9c"
                        "after\n",
                        "after\n"); /* ST as U+009C */
        /* a newline inside the title is part of it */
        EXPECT_SANITIZE("\x1b]0;a\nb\x07"
                        "c\n",
                        "c\n");
        /* BEL outside an OSC is kept */
        EXPECT_SANITIZE("ding\x07\n", "ding\x07\n");
        /* an ESC that is not ST ends the string and starts a sequence */
        EXPECT_SANITIZE("\x1b]0;t\x1b[31mred\n", "red\n");
}

TEST(shell_sanitize_drops_other_escapes_whole)
{
        EXPECT_SANITIZE("\x1b(Bplain\x1b)0\n", "plain\n");
        EXPECT_SANITIZE("a\x1b"
                        "7b\x1b"
                        "8c\x1b=d\x1b>e\x1b"
                        "cf\n",
                        "abcdef\n");
        EXPECT_SANITIZE("\x1b#8x\x1b%Gy\x1b $Bz\n", "xyz\n");
        /* ESC then a byte no sequence has: the ESC alone goes */
        EXPECT_SANITIZE("a\x1b\nb\n", "a\nb\n");
        EXPECT_SANITIZE("a\x1b\xc3\xa9\n", "a\xc3\xa9\n");
        EXPECT_SANITIZE("a\x1b\x1b[1mb\n", "ab\n");
}

TEST(shell_sanitize_drops_dcs_sos_pm_apc_strings)
{
        EXPECT_SANITIZE("\x1bPq#0;2;0;0;0#0~~@@\x1b\\a\n", "a\n");
        EXPECT_SANITIZE("\x1bXsos\x1b\\b\n", "b\n");
        EXPECT_SANITIZE("\x1b^pm\x1b\\c\n", "c\n");
        EXPECT_SANITIZE("\x1b_Gf=100;AAAA\x1b\\d\n", "d\n");
        /* BEL ends an OSC only */
        EXPECT_SANITIZE("\x1bP1\x07"
                        "2\x1b\\x\n",
                        "x\n");
}

TEST(shell_sanitize_keeps_other_control_characters)
{
        EXPECT_SANITIZE("a\tb\bc\x01\x7f\x00z\n", "a\tb\bc\x01\x7f\x00z\n");
        EXPECT_SANITIZE("\xc2\x85\xc2\x9c!\n", "\xc2\x85\xc2\x9c!\n"); /* NEL, ST outside strings */
}

TEST(shell_sanitize_replaces_each_invalid_byte)
{
        EXPECT_SANITIZE("a\xff"
                        "b\n",
                        "a" FFFD "b\n");
        EXPECT_SANITIZE("\xc0\x80|\xe2\x82"
                        "d|\xed\xa0\x80|\xf4\x90\x80\x80|\x80\xbf\n",
                        FFFD FFFD "|" FFFD FFFD "d|" FFFD FFFD FFFD "|" FFFD FFFD FFFD FFFD
                                  "|" FFFD FFFD "\n");
        /* a cut character at the end: one U+FFFD per byte */
        EXPECT_SANITIZE("ok\xf0\x9f\x98", "ok" FFFD FFFD FFFD);
        EXPECT_SANITIZE("ok\xe2", "ok" FFFD);
        /* invalid bytes inside a sequence are part of it */
        EXPECT_SANITIZE("\x1b]0;\xff\xfe\x07x\n", "x\n");
}

/* Pseudo-random bytes, the same each run. */
static uint32_t xorshift(uint32_t *st)
{
        *st ^= *st << 13;
        *st ^= *st >> 17;
        *st ^= *st << 5;
        return *st;
}

TEST(shell_sanitize_invalid_bytes_agree_with_utf8_sanitize)
{
        /* with no control characters the sanitizer decodes exactly like
         * base/utf8.c: the same U+FFFD for the same bytes */
        uint32_t st = 2463534242u;
        char in[64];
        for (int round = 0; round < 2000; round++) {
                size_t len = xorshift(&st) % sizeof(in);
                for (size_t i = 0; i < len; i++) {
                        unsigned char b = (unsigned char)xorshift(&st);
                        in[i] = (char)(b < 0x20 || b == 0x7f ? 'a' + b % 26 : b);
                        if (xorshift(&st) % 4 == 0) /* mostly well-formed lead/tail pairs */
                                in[i] = (char)(0x80 | (b & 0x3f));
                }
                size_t want_len;
                char *want = utf8_sanitize(in, len, &want_len);
                EXPECT_NOT_NULL(want);
                bool c1 = false; /* U+009B would start a CSI here */
                for (size_t i = 0; i + 1 < want_len; i++)
                        c1 |= (unsigned char)want[i] == 0xc2 && (unsigned char)want[i + 1] == 0x9b;
                if (!c1)
                        check_sanitize(__FILE__, __LINE__, in, len, want, want_len);
                free(want);
                if (test_failed)
                        return;
        }
}

/* text split in two feeds at every point gives want. */
static void check_every_split(const char *file, int line, const char *text, size_t len,
                              const char *want, size_t want_len)
{
        for (size_t cut = 0; cut <= len && !test_failed; cut++) {
                struct sanitizer *s = NULL;
                struct strbuf out;
                strbuf_init(&out, 0);
                if (sanitizer_new(&s) < 0) {
                        test_fail(file, line, "sanitizer_new");
                        return;
                }
                char *a = exact(text, cut), *b = exact(text + cut, len - cut);
                int r = sanitizer_feed(s, a, cut, &out);
                if (r == 0)
                        r = sanitizer_feed(s, b, len - cut, &out);
                if (r == 0)
                        r = sanitizer_finish(s, &out);
                free(a);
                free(b);
                sanitizer_free(s);
                char what[640];
                snprintf(what, sizeof(what), "\"%s\" cut at %zu (r=%d)", shown(text, len), cut, r);
                expect_text(file, line, what, out.data, out.len, want, want_len);
                strbuf_free(&out);
        }
}

#define EXPECT_EVERY_SPLIT(in, want)                                                               \
        do {                                                                                       \
                check_every_split(__FILE__, __LINE__, LIT(in), LIT(want));                         \
                if (test_failed)                                                                   \
                        return;                                                                    \
        } while (0)

TEST(shell_sanitize_character_split_across_feeds_is_carried_over)
{
        /* every split point of a 4-, 3- and 2-byte character */
        EXPECT_EVERY_SPLIT("a\xf0\x9f\x98\x80"
                           "b\n",
                           "a\xf0\x9f\x98\x80"
                           "b\n");
        EXPECT_EVERY_SPLIT("\xe2\x82\xac\xc3\xa9\n", "\xe2\x82\xac\xc3\xa9\n");
        /* a cut invalid sequence comes out the same as when read at once */
        EXPECT_EVERY_SPLIT("\xf0\x9f\x98z\xe2\x82\n", FFFD FFFD FFFD "z" FFFD FFFD "\n");
        /* and a sequence split anywhere is still dropped whole */
        EXPECT_EVERY_SPLIT("\x1b]0;t\xc3\xa9\x1b\\x\x1b[1;31my\xc2\x9b"
                           "0mz\x1b(B\n",
                           "xyz\n");
}

TEST(shell_sanitize_feeds_in_any_pieces_give_the_same_text)
{
        /* random terminal-ish bytes: once at a time equals in random pieces,
         * and the text is valid UTF-8 */
        static const char alphabet[] = "\x1b\x1b[]()P\\\x07\r\r\n\n;0123456789mAKa\xc2\x9b\x9c"
                                       "\xe2\x82\xac\xf0\x9f\x98\x80\xff";
        uint32_t st = 88172645u;
        char in[256];
        for (int round = 0; round < 500; round++) {
                size_t len = xorshift(&st) % sizeof(in);
                for (size_t i = 0; i < len; i++)
                        in[i] = alphabet[xorshift(&st) % (sizeof(alphabet) - 1)];
                struct strbuf once, pieces;
                EXPECT_INT_EQ(sanitize_pieces(in, len, 0, &once), 0);
                EXPECT_INT_EQ(sanitize_pieces(in, len, 1 + xorshift(&st) % 7, &pieces), 0);
                bool valid = utf8_valid(once.data ? once.data : "", once.len);
                expect_text(__FILE__, __LINE__, shown(in, len), pieces.data, pieces.len,
                            once.data ? once.data : "", once.len);
                strbuf_free(&once);
                strbuf_free(&pieces);
                if (test_failed)
                        return;
                EXPECT_TRUE(valid);
        }
}

TEST(shell_sanitize_flush_partial_shows_a_prompt)
{
        struct sanitizer *s = NULL;
        struct strbuf out;
        strbuf_init(&out, 0);
        EXPECT_INT_EQ(sanitizer_new(&s), 0);
        FEED(s, "name? ", &out);
        EXPECT_OUT(&out, ""); /* line-buffered: held back */
        EXPECT_INT_EQ(sanitizer_flush_partial(s, &out), 0);
        EXPECT_OUT(&out, "name? ");
        EXPECT_INT_EQ(sanitizer_flush_partial(s, &out), 0); /* nothing new */
        EXPECT_OUT(&out, "");
        /* the echo of the answer continues the same line */
        FEED(s, "alice\r\n", &out);
        EXPECT_OUT(&out, "alice\n");
        FEED(s, "got:alice\r\n", &out);
        EXPECT_OUT(&out, "got:alice\n");
        /* a plain continuation after a flush, then its end */
        FEED(s, "abc", &out);
        EXPECT_INT_EQ(sanitizer_flush_partial(s, &out), 0);
        FEED(s, "def", &out);
        EXPECT_INT_EQ(sanitizer_flush_partial(s, &out), 0);
        FEED(s, "\n", &out);
        EXPECT_OUT(&out, "abcdef\n");
        EXPECT_INT_EQ(sanitizer_finish(s, &out), 0);
        EXPECT_OUT(&out, "");
        sanitizer_free(s);
        strbuf_free(&out);
}

TEST(shell_sanitize_flush_partial_then_cr_starts_a_new_line)
{
        struct sanitizer *s = NULL;
        struct strbuf out;
        strbuf_init(&out, 0);
        EXPECT_INT_EQ(sanitizer_new(&s), 0);
        FEED(s, "10%", &out);
        EXPECT_INT_EQ(sanitizer_flush_partial(s, &out), 0);
        EXPECT_OUT(&out, "10%");
        FEED(s, "\r20%", &out);
        EXPECT_OUT(&out, "\n"); /* 10% stays shown; 20% starts the next line */
        EXPECT_INT_EQ(sanitizer_flush_partial(s, &out), 0);
        EXPECT_OUT(&out, "20%");
        FEED(s, "\r30%\r", &out);
        EXPECT_OUT(&out, "\n");
        FEED(s, "\n", &out); /* "\r\n" is a line end, not an overwrite */
        EXPECT_OUT(&out, "30%\n");
        /* a '\r' held at the flush: the line is out, a '\n' ends it */
        FEED(s, "abc\r", &out);
        EXPECT_INT_EQ(sanitizer_flush_partial(s, &out), 0);
        EXPECT_OUT(&out, "abc");
        FEED(s, "\n", &out);
        EXPECT_OUT(&out, "\n");
        /* without a flush the overwritten text never shows */
        FEED(s, "x\ry\n", &out);
        EXPECT_OUT(&out, "y\n");
        EXPECT_INT_EQ(sanitizer_finish(s, &out), 0);
        sanitizer_free(s);
        strbuf_free(&out);
}

TEST(shell_sanitize_finish_writes_the_open_line_and_drops_an_open_sequence)
{
        struct sanitizer *s = NULL;
        struct strbuf out;
        strbuf_init(&out, 0);
        EXPECT_INT_EQ(sanitizer_new(&s), 0);
        FEED(s, "done\ntail\x1b[31", &out);
        EXPECT_OUT(&out, "done\n");
        EXPECT_INT_EQ(sanitizer_finish(s, &out), 0);
        EXPECT_OUT(&out, "tail");
        /* as new afterwards */
        FEED(s, "again\n", &out);
        EXPECT_OUT(&out, "again\n");
        FEED(s, "x\x1b]0;title", &out);
        EXPECT_INT_EQ(sanitizer_finish(s, &out), 0);
        EXPECT_OUT(&out, "x");
        FEED(s, "\xe2\x82", &out);
        EXPECT_INT_EQ(sanitizer_finish(s, &out), 0);
        EXPECT_OUT(&out, FFFD FFFD);
        sanitizer_free(s);
        strbuf_free(&out);
}

/* n copies of c into a new buffer, after prefix and before suffix. */
static char *repeat(const char *prefix, char c, size_t n, const char *suffix, size_t *ret_len)
{
        size_t a = strlen(prefix), b = strlen(suffix);
        char *p = malloc(a + n + b + 1);
        if (!p)
                return NULL;
        memcpy(p, prefix, a);
        memset(p + a, c, n);
        memcpy(p + a + n, suffix, b + 1);
        *ret_len = a + n + b;
        return p;
}

TEST(shell_sanitize_line_is_bounded_at_64_kib)
{
        struct sanitizer *s = NULL;
        struct strbuf out;
        size_t len;
        strbuf_init(&out, 0);
        EXPECT_INT_EQ(sanitizer_new(&s), 0);
        /* a line of exactly the bound ends normally */
        char *in = repeat("", 'a', SANITIZE_LINE_MAX, "\n", &len);
        EXPECT_NOT_NULL(in);
        EXPECT_INT_EQ(sanitizer_feed(s, in, len, &out), 0);
        free(in);
        EXPECT_SIZE_EQ(out.len, SANITIZE_LINE_MAX + 1);
        out.len = 0;
        /* 3 x 64 KiB + 10 with no newline: all but the last piece is out */
        in = repeat("", 'b', 3 * SANITIZE_LINE_MAX + 10, "", &len);
        EXPECT_NOT_NULL(in);
        EXPECT_INT_EQ(sanitizer_feed(s, in, len, &out), 0);
        EXPECT_SIZE_EQ(out.len, 3 * SANITIZE_LINE_MAX);
        EXPECT_INT_EQ(sanitizer_feed(s, LIT("\n"), &out), 0);
        EXPECT_SIZE_EQ(out.len, len + 1);
        EXPECT_TRUE(memcmp(out.data, in, len) == 0 && out.data[len] == '\n');
        free(in);
        out.len = 0;
        /* the bound never cuts a character */
        in = repeat("", 'c', SANITIZE_LINE_MAX - 1, "\xc3\xa9", &len);
        EXPECT_NOT_NULL(in);
        EXPECT_INT_EQ(sanitizer_feed(s, in, len, &out), 0);
        EXPECT_SIZE_EQ(out.len, SANITIZE_LINE_MAX - 1);
        EXPECT_INT_EQ(sanitizer_finish(s, &out), 0);
        EXPECT_SIZE_EQ(out.len, len);
        EXPECT_TRUE(utf8_valid(out.data, out.len));
        free(in);
        out.len = 0;
        /* a '\r' after a piece went out: the rest starts a line of its own */
        in = repeat("", 'd', SANITIZE_LINE_MAX + 100, "\rX\n", &len);
        EXPECT_NOT_NULL(in);
        EXPECT_INT_EQ(sanitizer_feed(s, in, len, &out), 0);
        free(in);
        EXPECT_SIZE_EQ(out.len, SANITIZE_LINE_MAX + 3);
        EXPECT_TRUE(out.data[SANITIZE_LINE_MAX - 1] == 'd');
        EXPECT_STR_EQ(out.data + SANITIZE_LINE_MAX, "\nX\n");
        sanitizer_free(s);
        strbuf_free(&out);
}

TEST(shell_sanitize_sequence_is_bounded_at_4_kib)
{
        size_t len;
        struct strbuf out;
        /* an OSC of exactly the bound (ESC ] ... BEL) is dropped whole */
        char *in = repeat("\x1b]", 'b', SANITIZE_SEQ_MAX - 3, "\aok\n", &len);
        EXPECT_NOT_NULL(in);
        EXPECT_INT_EQ(sanitize_pieces(in, len, 7, &out), 0);
        free(in);
        EXPECT_STR_EQ(out.data, "ok\n");
        strbuf_free(&out);
        /* one byte more: the first SANITIZE_SEQ_MAX bytes go, the BEL is text */
        in = repeat("\x1b]", 'b', SANITIZE_SEQ_MAX - 2, "\aok\n", &len);
        EXPECT_NOT_NULL(in);
        EXPECT_INT_EQ(sanitize_pieces(in, len, 0, &out), 0);
        free(in);
        EXPECT_STR_EQ(out.data, "\aok\n");
        strbuf_free(&out);
        /* an unterminated OSC does not swallow the rest of the output */
        in = repeat("\x1b]0;", 'a', 10000, "\nhello\n", &len);
        EXPECT_NOT_NULL(in);
        EXPECT_INT_EQ(sanitize_pieces(in, len, 1000, &out), 0);
        free(in);
        EXPECT_SIZE_EQ(out.len, 10000 - (SANITIZE_SEQ_MAX - 4) + strlen("\nhello\n"));
        EXPECT_STR_EQ(out.data + out.len - 8, "a\nhello\n");
        strbuf_free(&out);
        /* nor does a CSI with endless parameters */
        in = repeat("\x1b[", '1', 5000, "mX\n", &len);
        EXPECT_NOT_NULL(in);
        EXPECT_INT_EQ(sanitize_pieces(in, len, 0, &out), 0);
        free(in);
        EXPECT_SIZE_EQ(out.len, 5000 - (SANITIZE_SEQ_MAX - 2) + 3);
        EXPECT_STR_EQ(out.data + out.len - 4, "1mX\n");
        strbuf_free(&out);
}

TEST(shell_sanitize_output_limit_is_reported)
{
        struct sanitizer *s = NULL;
        struct strbuf out;
        strbuf_init(&out, 4);
        EXPECT_INT_EQ(sanitizer_new(&s), 0);
        EXPECT_INT_EQ(sanitizer_feed(s, LIT("abc\n"), &out), 0);
        EXPECT_INT_EQ(sanitizer_feed(s, LIT("def\n"), &out), -E2BIG);
        EXPECT_NULL(sanitizer_free(s));
        EXPECT_NULL(sanitizer_free(NULL));
        strbuf_free(&out);
}

/* ---- windows ---- */

TEST(shell_utf8_char_classifies_the_first_character)
{
        const unsigned char *u;
#define U(s) (u = (const unsigned char *)(s))
        EXPECT_INT_EQ(shell_utf8_char(U("a"), 1), 1);
        EXPECT_INT_EQ(shell_utf8_char(U("\xc3\xa9"), 2), 2);
        EXPECT_INT_EQ(shell_utf8_char(U("\xe2\x82\xac"), 3), 3);
        EXPECT_INT_EQ(shell_utf8_char(U("\xf0\x9f\x98\x80"), 4), 4);
        EXPECT_INT_EQ(shell_utf8_char(U("\xf0\x9f\x98"), 3), -1);
        EXPECT_INT_EQ(shell_utf8_char(U("\xe2"), 1), -1);
        EXPECT_INT_EQ(shell_utf8_char(U("\x80"), 1), 0);
        EXPECT_INT_EQ(shell_utf8_char(U("\xc0\x80"), 2), 0);     /* overlong */
        EXPECT_INT_EQ(shell_utf8_char(U("\xe0\x80"), 2), 0);     /* overlong */
        EXPECT_INT_EQ(shell_utf8_char(U("\xed\xa0\x80"), 3), 0); /* surrogate */
        EXPECT_INT_EQ(shell_utf8_char(U("\xf4\x90"), 2), 0);     /* past U+10FFFF */
        EXPECT_INT_EQ(shell_utf8_char(U("\xf5"), 1), 0);
        EXPECT_INT_EQ(shell_utf8_char(U("\xe2\x82z"), 3), 0);
#undef U
}

#define EXPECT_WINDOW(w, s, e, t)                                                                  \
        do {                                                                                       \
                EXPECT_UINT_EQ((w).start, (s));                                                    \
                EXPECT_UINT_EQ((w).end, (e));                                                      \
                EXPECT_INT_EQ((w).truncated, (t));                                                 \
        } while (0)

/* The window of file[offset..] as shell_window_read would compute it. */
static struct shell_window window_of(const char *file, size_t size, size_t offset, uint32_t limit)
{
        struct shell_window w;
        size_t n = size - offset;
        if (n > (size_t)limit + SHELL_WINDOW_READ_EXTRA)
                n = (size_t)limit + SHELL_WINDOW_READ_EXTRA;
        char *buf = exact(file + offset, n);
        shell_window_compute((const unsigned char *)buf, n, offset, size, limit, &w);
        free(buf);
        return w;
}

TEST(shell_window_never_cuts_a_character_at_its_edge)
{
        static const char f[] = "ab\xe2\x82\xac"
                                "cd";
        struct shell_window w = window_of(LIT(f), 0, 3);
        EXPECT_WINDOW(w, 0, 2, true); /* "ab": the euro sign does not fit */
        w = window_of(LIT(f), 0, 4);
        EXPECT_WINDOW(w, 0, 2, true);
        w = window_of(LIT(f), 0, 5);
        EXPECT_WINDOW(w, 0, 5, true);
        w = window_of(LIT(f), 2, 3);
        EXPECT_WINDOW(w, 2, 5, true);
        w = window_of(LIT(f), 0, 100);
        EXPECT_WINDOW(w, 0, 7, false);
}

TEST(shell_window_starting_on_a_continuation_byte_skips_it)
{
        static const char f[] = "\xf0\x9f\x98\x80xy";
        struct shell_window w = window_of(LIT(f), 1, 100);
        EXPECT_WINDOW(w, 4, 6, false);
        w = window_of(LIT(f), 3, 1);
        EXPECT_WINDOW(w, 4, 5, true);
        /* at most 3 are skipped: a fourth is an invalid byte, taken */
        static const char g[] = "\x80\x80\x80\x80z";
        w = window_of(LIT(g), 0, 100);
        EXPECT_WINDOW(w, 3, 5, false);
        /* only continuation bytes left: the empty window at the end */
        w = window_of("\xbf\xbf", 2, 0, 100);
        EXPECT_WINDOW(w, 2, 2, false);
}

TEST(shell_window_limit_smaller_than_one_character_takes_one)
{
        static const char f[] = "\xf0\x9f\x98\x80\xf0\x9f\x98\x81";
        struct shell_window w = window_of(LIT(f), 0, 1);
        EXPECT_WINDOW(w, 0, 4, true);
        w = window_of(LIT(f), 4, 3);
        EXPECT_WINDOW(w, 4, 8, false);
        w = window_of(LIT(f), 0, 0);
        EXPECT_WINDOW(w, 0, 4, true);
        /* after 3 skipped bytes, with limit 1: 7 bytes must be seen */
        static const char g[] = "\x98\x80\x80\xf0\x9f\x98\x81!";
        w = window_of(LIT(g), 0, 1);
        EXPECT_WINDOW(w, 3, 7, true);
}

TEST(shell_window_at_and_past_the_end)
{
        struct shell_window w;
        shell_window_compute((const unsigned char *)"", 0, 5, 5, 100, &w);
        EXPECT_WINDOW(w, 5, 5, false);
        shell_window_compute((const unsigned char *)"", 0, 0, 0, 100, &w);
        EXPECT_WINDOW(w, 0, 0, false);
        /* bytes past size (the file grew after fstat) are not taken */
        shell_window_compute((const unsigned char *)"abcdef", 6, 0, 3, 100, &w);
        EXPECT_WINDOW(w, 0, 3, false);
}

TEST(shell_window_takes_invalid_bytes_and_always_advances)
{
        static const char f[] = "\xff\xfe"
                                "ab\xc0\xaf\xe2\x82z";
        struct shell_window w = window_of(LIT(f), 0, 2);
        EXPECT_WINDOW(w, 0, 2, true);
        w = window_of(LIT(f), 0, 100);
        EXPECT_WINDOW(w, 0, 9, false);
        w = window_of(LIT(f), 4, 4);
        EXPECT_WINDOW(w, 4, 8, true); /* \xc0 \xaf \xe2 \x82: four invalid bytes */
        /* a reader with limit 1 moves on at every call over every byte */
        uint64_t off = 0;
        int calls = 0;
        while (off < sizeof(f) - 1 && calls < 100) {
                w = window_of(LIT(f), off, 1);
                EXPECT_UINT_OP(w.end, >, off);
                off = w.end;
                calls++;
        }
        EXPECT_UINT_EQ(off, sizeof(f) - 1);
}

TEST(shell_window_character_cut_by_the_end_of_the_file)
{
        /* maybe still being written: left for the next window ... */
        static const char f[] = "ab\xe2\x82";
        struct shell_window w = window_of(LIT(f), 0, 100);
        EXPECT_WINDOW(w, 0, 2, true);
        /* ... unless it is all there is: then a reader still moves on */
        w = window_of(LIT(f), 2, 100);
        EXPECT_WINDOW(w, 2, 4, false);
}

TEST(shell_window_arithmetic_near_the_top_of_the_range)
{
        struct shell_window w;
        const unsigned char *b = (const unsigned char *)"\x80xyz\xe2\x82\xac!";
        uint64_t off = (UINT64_C(1) << 63) - 8;
        shell_window_compute(b, 8, off, off + 8, 3, &w);
        EXPECT_WINDOW(w, off + 1, off + 4, true);
        shell_window_compute(b, 8, off, off + 8, SHELL_WINDOW_LIMIT_MAX, &w);
        EXPECT_WINDOW(w, off + 1, off + 8, false);
        off = UINT64_MAX - 9;
        shell_window_compute(b, 8, off, UINT64_MAX, UINT32_MAX, &w);
        EXPECT_WINDOW(w, off + 1, off + 8, true);
        shell_window_compute(b, 8, UINT64_MAX, UINT64_MAX, UINT32_MAX, &w);
        EXPECT_WINDOW(w, UINT64_MAX, UINT64_MAX, false);
}

/* A memfd holding len bytes of data, or -1. */
static int file_with(const char *data, size_t len)
{
        int fd = memfd_create("shell-output", MFD_CLOEXEC);
        if (fd >= 0 && test_write_all(fd, data, len, 0) < 0) {
                close(fd);
                return -1;
        }
        return fd;
}

TEST(shell_window_read_pages_a_file_whole)
{
        /* mixed widths; every limit reassembles the file exactly */
        static const char f[] = "a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80"
                                "b\n\xe4\xb8\xad\xe6\x96\x87\xf0\x9f\x98\x81z";
        int fd = file_with(LIT(f));
        EXPECT_INT_OP(fd, >=, 0);
        for (uint32_t limit = 1; limit <= sizeof(f); limit++) {
                uint64_t off = 0, size = 0;
                struct shell_window w = {0};
                int calls = 0;
                do {
                        EXPECT_INT_EQ(shell_window_read(fd, off, limit, &w, &size), 0);
                        EXPECT_UINT_EQ(size, sizeof(f) - 1);
                        EXPECT_UINT_EQ(w.start, off); /* never skips a byte of valid text */
                        EXPECT_UINT_OP(w.end - w.start, <=, limit < 4 ? 4 : limit);
                        EXPECT_TRUE(utf8_valid(f + w.start, w.end - w.start));
                        EXPECT_INT_EQ(w.truncated, w.end < size);
                        off = w.end;
                } while (w.truncated && ++calls < 100);
                EXPECT_UINT_EQ(off, sizeof(f) - 1);
        }
        close(fd);
}

TEST(shell_window_read_refuses_an_offset_past_the_end)
{
        int fd = file_with(LIT("hello"));
        EXPECT_INT_OP(fd, >=, 0);
        struct shell_window w = {1, 2, true};
        uint64_t size = 7;
        EXPECT_ERRNO(shell_window_read(fd, 6, 10, &w, &size), -ERANGE);
        EXPECT_ERRNO(shell_window_read(fd, UINT64_MAX, 10, &w, &size), -ERANGE);
        EXPECT_WINDOW(w, 1, 2, true); /* left alone */
        EXPECT_UINT_EQ(size, 7);
        EXPECT_ERRNO(shell_window_read(fd, 5, 10, &w, &size), 0);
        EXPECT_WINDOW(w, 5, 5, false);
        EXPECT_UINT_EQ(size, 5);
        EXPECT_ERRNO(shell_window_read(fd, 0, SHELL_WINDOW_LIMIT_MAX + 1, &w, NULL), -EINVAL);
        EXPECT_ERRNO(shell_window_read(fd, 0, SHELL_WINDOW_LIMIT_MAX, &w, NULL), 0);
        EXPECT_WINDOW(w, 0, 5, false);
        close(fd);
        EXPECT_ERRNO(shell_window_read(fd, 0, 10, &w, NULL), -EBADF);
}

TEST(shell_window_read_of_a_large_sparse_file)
{
        /* offsets far past 4 GiB: a sparse file of 2^40 + 3 bytes */
        int fd = memfd_create("shell-output", MFD_CLOEXEC);
        EXPECT_INT_OP(fd, >=, 0);
        uint64_t big = UINT64_C(1) << 40;
        EXPECT_INT_EQ(pwrite(fd, "\xe2\x82\xac", 3, (off_t)big), 3);
        struct shell_window w;
        uint64_t size;
        EXPECT_INT_EQ(shell_window_read(fd, big + 1, 16, &w, &size), 0);
        EXPECT_WINDOW(w, big + 3, big + 3, false);
        EXPECT_INT_EQ(shell_window_read(fd, big - 2, 2, &w, &size), 0);
        EXPECT_WINDOW(w, big - 2, big, true); /* two NULs; the euro sign does not fit */
        EXPECT_INT_EQ(shell_window_tail(fd, 4, &w), 0);
        EXPECT_WINDOW(w, big - 1, big + 3, false);
        close(fd);
}

TEST(shell_window_tail_starts_at_a_character)
{
        static const char f[] = "abc\xf0\x9f\x98\x80xyz";
        int fd = file_with(LIT(f));
        EXPECT_INT_OP(fd, >=, 0);
        struct shell_window w;
        EXPECT_INT_EQ(shell_window_tail(fd, 5, &w), 0); /* would start inside the emoji */
        EXPECT_WINDOW(w, 7, 10, false);
        EXPECT_INT_EQ(shell_window_tail(fd, 6, &w), 0);
        EXPECT_WINDOW(w, 7, 10, false);
        EXPECT_INT_EQ(shell_window_tail(fd, 7, &w), 0);
        EXPECT_WINDOW(w, 3, 10, false);
        EXPECT_INT_EQ(shell_window_tail(fd, 1000, &w), 0);
        EXPECT_WINDOW(w, 0, 10, false);
        EXPECT_INT_EQ(shell_window_tail(fd, 0, &w), 0);
        EXPECT_WINDOW(w, 10, 10, false);
        close(fd);
        /* at most 3 continuation bytes are skipped; an empty file */
        fd = file_with(LIT("\x80\x80\x80\x80\x80"));
        EXPECT_INT_OP(fd, >=, 0);
        EXPECT_INT_EQ(shell_window_tail(fd, 5, &w), 0);
        EXPECT_WINDOW(w, 3, 5, false);
        close(fd);
        fd = file_with("", 0);
        EXPECT_INT_OP(fd, >=, 0);
        EXPECT_INT_EQ(shell_window_tail(fd, 5, &w), 0);
        EXPECT_WINDOW(w, 0, 0, false);
        close(fd);
}
