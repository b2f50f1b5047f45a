/* utf8_sanitize / utf8_valid: every row of Unicode Table 3-7 at its
 * boundaries, each kind of ill-formed sequence, truncation at the end of
 * the buffer, and an exhaustive cross-check against a bit-arithmetic
 * decoder for all 1-3 byte inputs. */
#include <stdlib.h>

#include "base/utf8.h"
#include "test.h"

#define FFFD "\xef\xbf\xbd"

/* Sanitize a heap copy of exactly len bytes (no NUL after it), so ASan and
 * valgrind see any read past the end; returns the text or NULL. */
static char *sanitize_exact(const char *in, size_t len, size_t *ret_len)
{
        char *copy = malloc(len ? len : 1);
        if (!copy)
                return NULL;
        memcpy(copy, in, len);
        char *out = utf8_sanitize(copy, len, ret_len);
        free(copy);
        return out;
}

/* Expect in (len bytes) to sanitize to want (a C string literal). The
 * variadic front lets LIT() supply in and len. */
#define EXPECT_SANITIZE(...) EXPECT_SANITIZE3(__VA_ARGS__)
#define EXPECT_SANITIZE3(in, len, want)                                                            \
        do {                                                                                       \
                size_t _ol = 0;                                                                    \
                char *_o = sanitize_exact((in), (len), &_ol);                                      \
                EXPECT_TRUE(_o != NULL);                                                           \
                bool _ok = _ol == sizeof(want) - 1 && memcmp(_o, want, _ol) == 0 && _o[_ol] == 0;  \
                free(_o);                                                                          \
                EXPECT_TRUE(_ok);                                                                  \
        } while (0)

#define LIT(s) s, sizeof(s) - 1

TEST(utf8_ascii_and_empty)
{
        EXPECT_SANITIZE(LIT("hello, world\n"), "hello, world\n");
        EXPECT_SANITIZE(LIT(""), "");
        size_t n = 99;
        char *o = utf8_sanitize(NULL, 0, &n);
        EXPECT_TRUE(o != NULL);
        EXPECT_STR_EQ(o, "");
        EXPECT_INT_EQ(n, 0);
        free(o);
}

TEST(utf8_valid_multibyte_is_identical)
{
        const char text[] = "h\xc3\xa9llo \xe2\x82\xac \xf0\x9d\x84\x9e \xe4\xb8\xad\xe6\x96\x87 "
                            "\xf0\x9f\x98\x80";
        EXPECT_SANITIZE(LIT(text), text);
        EXPECT_TRUE(utf8_valid(text, sizeof(text) - 1));
}

TEST(utf8_table_boundaries_valid)
{
        EXPECT_SANITIZE(LIT("\x7f"), "\x7f");                         /* U+007F */
        EXPECT_SANITIZE(LIT("\xc2\x80"), "\xc2\x80");                 /* U+0080 */
        EXPECT_SANITIZE(LIT("\xdf\xbf"), "\xdf\xbf");                 /* U+07FF */
        EXPECT_SANITIZE(LIT("\xe0\xa0\x80"), "\xe0\xa0\x80");         /* U+0800 */
        EXPECT_SANITIZE(LIT("\xed\x9f\xbf"), "\xed\x9f\xbf");         /* U+D7FF */
        EXPECT_SANITIZE(LIT("\xee\x80\x80"), "\xee\x80\x80");         /* U+E000 */
        EXPECT_SANITIZE(LIT("\xef\xbf\xbf"), "\xef\xbf\xbf");         /* U+FFFF */
        EXPECT_SANITIZE(LIT("\xf0\x90\x80\x80"), "\xf0\x90\x80\x80"); /* U+10000 */
        EXPECT_SANITIZE(LIT("\xf4\x8f\xbf\xbf"), "\xf4\x8f\xbf\xbf"); /* U+10FFFF */
}

TEST(utf8_nul_is_kept)
{
        size_t n = 0;
        char *o = sanitize_exact("a\0b", 3, &n);
        EXPECT_TRUE(o != NULL);
        EXPECT_INT_EQ(n, 3);
        EXPECT_MEM_EQ(o, 4, "a\0b", 4);
        free(o);
        EXPECT_TRUE(utf8_valid("\0", 1));
}

TEST(utf8_lone_continuation_and_bad_leads)
{
        EXPECT_SANITIZE(LIT("\x80"), FFFD);
        EXPECT_SANITIZE(LIT("a\xbf"
                            "b"),
                        "a" FFFD "b");
        EXPECT_SANITIZE(LIT("\xfe\xff"), FFFD FFFD);
        EXPECT_SANITIZE(LIT("\xf5\x80\x80\x80"), FFFD FFFD FFFD FFFD);
        EXPECT_SANITIZE(LIT("\xf8\x88\x80\x80\x80"), FFFD FFFD FFFD FFFD FFFD);
}

TEST(utf8_overlongs)
{
        EXPECT_SANITIZE(LIT("\xc0\x80"), FFFD FFFD);          /* overlong NUL */
        EXPECT_SANITIZE(LIT("\xc1\xbf"), FFFD FFFD);          /* overlong U+007F */
        EXPECT_SANITIZE(LIT("\xe0\x80\x80"), FFFD FFFD FFFD); /* overlong NUL */
        EXPECT_SANITIZE(LIT("\xe0\x9f\xbf"), FFFD FFFD FFFD); /* overlong U+07FF */
        EXPECT_SANITIZE(LIT("\xf0\x80\x80\x80"), FFFD FFFD FFFD FFFD);
        EXPECT_SANITIZE(LIT("\xf0\x8f\xbf\xbf"), FFFD FFFD FFFD FFFD); /* overlong U+FFFF */
        EXPECT_SANITIZE(LIT("\xc0\xaf"), FFFD FFFD);                   /* the classic '/' */
}

TEST(utf8_surrogates)
{
        EXPECT_SANITIZE(LIT("\xed\xa0\x80"), FFFD FFFD FFFD); /* U+D800 */
        EXPECT_SANITIZE(LIT("\xed\xbf\xbf"), FFFD FFFD FFFD); /* U+DFFF */
        /* a CESU-8 pair for U+1F600 */
        EXPECT_SANITIZE(LIT("\xed\xa0\xbd\xed\xb8\x80"), FFFD FFFD FFFD FFFD FFFD FFFD);
}

TEST(utf8_above_max)
{
        EXPECT_SANITIZE(LIT("\xf4\x90\x80\x80"), FFFD FFFD FFFD FFFD); /* U+110000 */
        EXPECT_SANITIZE(LIT("\xf7\xbf\xbf\xbf"), FFFD FFFD FFFD FFFD);
}

TEST(utf8_truncated_at_end)
{
        EXPECT_SANITIZE(LIT("a\xc3"), "a" FFFD);
        EXPECT_SANITIZE(LIT("a\xe2\x82"), "a" FFFD FFFD);
        EXPECT_SANITIZE(LIT("\xf0\x9f\x98"), FFFD FFFD FFFD);
        EXPECT_SANITIZE(LIT("\xf0\x9f"), FFFD FFFD);
        /* a valid sequence whose last byte lies past len is still cut */
        EXPECT_SANITIZE("ok\xe2\x82\xac", 4, "ok" FFFD FFFD);
}

TEST(utf8_truncated_in_middle_resyncs)
{
        EXPECT_SANITIZE(LIT("\xe2\x82"
                            "a"),
                        FFFD FFFD "a");
        EXPECT_SANITIZE(LIT("\xf0\x9f\x98"
                            "\xc3\xa9"),
                        FFFD FFFD FFFD "\xc3\xa9");
        EXPECT_SANITIZE(LIT("\xff\xc3\xa9"), FFFD "\xc3\xa9");
        EXPECT_SANITIZE(LIT("\xc3\xc3\xa9"), FFFD "\xc3\xa9");
}

TEST(utf8_valid_prefix)
{
        EXPECT_INT_EQ(utf8_valid_prefix(LIT("abc")), 3);
        EXPECT_INT_EQ(utf8_valid_prefix(LIT("ab\xc3\xa9\xe2\x82")), 4);
        EXPECT_INT_EQ(utf8_valid_prefix(LIT("\xff"
                                            "abc")),
                      0);
        EXPECT_INT_EQ(utf8_valid_prefix(NULL, 0), 0);
        EXPECT_TRUE(!utf8_valid(LIT("ab\xed\xa0\x80")));
        EXPECT_TRUE(utf8_valid(NULL, 0));
}

/* Independent reference: decode by bit patterns, then reject overlongs,
 * surrogates and values above U+10FFFF. Returns the length or 0. */
static size_t ref_seq(const unsigned char *s, size_t avail)
{
        static const unsigned long min_cp[] = {0, 0, 0x80, 0x800, 0x10000};
        size_t n = s[0] < 0x80             ? 1
                   : (s[0] & 0xe0) == 0xc0 ? 2
                   : (s[0] & 0xf0) == 0xe0 ? 3
                   : (s[0] & 0xf8) == 0xf0 ? 4
                                           : 0;
        if (n == 0 || n > avail)
                return 0;
        unsigned long cp = n == 1 ? s[0] : s[0] & (0x7f >> n);
        for (size_t i = 1; i < n; i++) {
                if ((s[i] & 0xc0) != 0x80)
                        return 0;
                cp = cp << 6 | (s[i] & 0x3f);
        }
        if (cp < min_cp[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
                return 0;
        return n;
}

static bool ref_valid(const unsigned char *s, size_t len)
{
        for (size_t i = 0, n; i < len; i += n)
                if ((n = ref_seq(s + i, len - i)) == 0)
                        return false;
        return true;
}

TEST(utf8_exhaustive_up_to_three_bytes)
{
        unsigned char b[3];
        for (unsigned long v = 0; v < (1ul << 24); v++) {
                b[0] = (unsigned char)(v >> 16);
                b[1] = (unsigned char)(v >> 8);
                b[2] = (unsigned char)v;
                if (utf8_valid((const char *)b, 3) != ref_valid(b, 3)) {
                        test_fail(__FILE__, __LINE__, "mismatch on %02x %02x %02x", b[0], b[1],
                                  b[2]);
                        return;
                }
        }
}

TEST(utf8_four_byte_leads)
{
        static const unsigned char tails[] = {0x00, 0x7f, 0x80, 0x8f, 0x90, 0xbf, 0xc0, 0xff};
        unsigned char b[4];
        for (unsigned lead = 0xe0; lead <= 0xff; lead++)
                for (unsigned second = 0; second <= 0xff; second++)
                        for (size_t i = 0; i < sizeof(tails); i++)
                                for (size_t j = 0; j < sizeof(tails); j++) {
                                        b[0] = (unsigned char)lead;
                                        b[1] = (unsigned char)second;
                                        b[2] = tails[i];
                                        b[3] = tails[j];
                                        EXPECT_INT_EQ(utf8_valid((const char *)b, 4),
                                                      ref_valid(b, 4));
                                }
}

TEST(utf8_sanitize_output_is_valid_and_counts_bytes)
{
        /* each invalid byte becomes exactly one U+FFFD: 3 output bytes */
        const char in[] = "x\xc0\xed\xa0\x80\xf4\x90\x80\x80\xe2\x82";
        size_t n = 0;
        char *o = sanitize_exact(in, sizeof(in) - 1, &n);
        EXPECT_TRUE(o != NULL);
        bool ok = utf8_valid(o, n) && n == 1 + 10 * 3;
        free(o);
        EXPECT_TRUE(ok);
}

/* utf8_ascii_prefix against a byte-at-a-time reading of its contract, on
 * buffers (heap copies of exactly their length) of every length 0..40 at
 * every start 0..7, each byte value placed at each position in turn. */
static size_t ascii_prefix_slow(const unsigned char *s, size_t len, unsigned char below,
                                const char *stop)
{
        size_t i = 0;
        while (i < len && s[i] < 0x80 && s[i] >= below && !(stop && s[i] && strchr(stop, s[i])))
                i++;
        return i;
}

static void check_ascii_prefix(unsigned char below, const char *stop)
{
        unsigned char base[48];
        for (size_t i = 0; i < sizeof(base); i++)
                base[i] = (unsigned char)('a' + i % 26);
        for (size_t len = 0; len <= 40; len++)
                for (size_t at = 0; at < 8; at++)
                        for (unsigned v = 0; v < 256; v += len ? 1 : 256)
                                for (size_t pos = 0; pos < (len ? len : 1); pos += 3) {
                                        unsigned char *buf = malloc(len ? len : 1);
                                        memcpy(buf, base + at, len);
                                        if (len)
                                                buf[pos] = (unsigned char)v;
                                        size_t got = utf8_ascii_prefix(buf, len, below, stop);
                                        size_t want = ascii_prefix_slow(buf, len, below, stop);
                                        free(buf);
                                        if (got != want) {
                                                EXPECT_TRUE(got == want);
                                                return;
                                        }
                                }
}

TEST(utf8_ascii_prefix_matches_its_contract)
{
        check_ascii_prefix(0, NULL);
        check_ascii_prefix(0x20, "\"\\<>&");
        check_ascii_prefix(0x80, "");
        check_ascii_prefix(1, "abcdefgh");
        check_ascii_prefix(0, "abcdefghi"); /* nine stops: a byte at a time */
}

TEST(utf8_ascii_prefix_runs)
{
        EXPECT_INT_EQ(utf8_ascii_prefix("hello world, a long line\n", 25, 0x20, "\""), 24);
        EXPECT_INT_EQ(utf8_ascii_prefix("caf\xc3\xa9 au lait et plus", 21, 0, NULL), 3);
        EXPECT_INT_EQ(utf8_ascii_prefix("0123456789abcdef<tag>", 21, 0x20, "<>&"), 16);
        EXPECT_INT_EQ(utf8_ascii_prefix("", 0, 0x20, "<"), 0);
}
