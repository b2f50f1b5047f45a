/* Unit tests for base/strbuf.c: growth keeps the bytes and the NUL, the
 * hard limit refuses an append whole (-E2BIG) and leaves the buffer as it
 * was, formatted appends, steal and free. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "base/strbuf.h"
#include "test.h"

TEST(strbuf_append_grows_and_keeps_nul)
{
        struct strbuf sb;
        strbuf_init(&sb, 0);
        EXPECT_NULL(sb.data);
        EXPECT_SIZE_EQ(sb.len, 0);
        char chunk[100];
        memset(chunk, 'x', sizeof(chunk));
        for (int i = 0; i < 50; i++) /* 5000 bytes: several doublings past 256 */
                EXPECT_ERRNO(strbuf_append(&sb, chunk, sizeof(chunk)), 0);
        EXPECT_SIZE_EQ(sb.len, 5000);
        EXPECT_UINT_OP(sb.cap, >, sb.len);
        EXPECT_INT_EQ(sb.data[5000], '\0');
        EXPECT_SIZE_EQ(strlen(sb.data), 5000);
        strbuf_free(&sb);
}

TEST(strbuf_binary_bytes_and_empty_appends)
{
        struct strbuf sb;
        strbuf_init(&sb, 0);
        EXPECT_ERRNO(strbuf_append(&sb, "a\0b", 3), 0);
        EXPECT_ERRNO(strbuf_append(&sb, NULL, 0), 0);
        EXPECT_ERRNO(strbuf_appends(&sb, ""), 0);
        EXPECT_MEM_EQ(sb.data, sb.len, "a\0b", 3);
        EXPECT_INT_EQ(sb.data[3], '\0');
        strbuf_free(&sb);
}

TEST(strbuf_limit_refuses_whole_append_and_keeps_contents)
{
        struct strbuf sb;
        strbuf_init(&sb, 10);
        EXPECT_ERRNO(strbuf_appends(&sb, "12345678"), 0);
        EXPECT_ERRNO(strbuf_appends(&sb, "abc"), -E2BIG); /* 11 > 10: nothing of it */
        EXPECT_STR_EQ(sb.data, "12345678");
        EXPECT_SIZE_EQ(sb.len, 8);
        EXPECT_ERRNO(strbuf_appends(&sb, "ab"), 0); /* exactly the limit */
        EXPECT_STR_EQ(sb.data, "12345678ab");
        EXPECT_ERRNO(strbuf_append(&sb, "c", 1), -E2BIG);
        EXPECT_ERRNO(strbuf_append(&sb, "", 0), 0); /* nothing more is fine */
        EXPECT_ERRNO(strbuf_appendf(&sb, "%d", 1), -E2BIG);
        EXPECT_STR_EQ(sb.data, "12345678ab");
        strbuf_free(&sb);
        EXPECT_SIZE_EQ(sb.limit, 10); /* free keeps the limit for reuse */
        EXPECT_ERRNO(strbuf_appends(&sb, "12345678901"), -E2BIG);
        EXPECT_NULL(sb.data);
}

TEST(strbuf_reserve_overflow_is_refused)
{
        struct strbuf sb;
        strbuf_init(&sb, 0);
        EXPECT_ERRNO(strbuf_appends(&sb, "x"), 0);
        EXPECT_ERRNO(strbuf_reserve(&sb, SIZE_MAX), -E2BIG); /* len + extra + 1 wraps */
        /* Refused by the doubling's bound, before any allocation. */
        EXPECT_ERRNO(strbuf_reserve(&sb, SIZE_MAX / 2 + 10), -ENOMEM);
        EXPECT_STR_EQ(sb.data, "x");
        strbuf_free(&sb);
        strbuf_init(&sb, 100);
        EXPECT_ERRNO(strbuf_reserve(&sb, SIZE_MAX), -E2BIG); /* above the limit */
        strbuf_free(&sb);
}

TEST(strbuf_appendf_formats_and_grows)
{
        struct strbuf sb;
        strbuf_init(&sb, 0);
        EXPECT_ERRNO(strbuf_appendf(&sb, "%s=%d;", "a", -5), 0);
        EXPECT_ERRNO(strbuf_appendf(&sb, "%s", ""), 0);
        char big[1000];
        memset(big, 'z', sizeof(big) - 1);
        big[sizeof(big) - 1] = '\0';
        EXPECT_ERRNO(strbuf_appendf(&sb, "[%s]", big), 0);
        EXPECT_SIZE_EQ(sb.len, 5 + 1001);
        EXPECT_SIZE_EQ(strlen(sb.data), sb.len);
        EXPECT_TRUE(strncmp(sb.data, "a=-5;[zzz", 9) == 0);
        EXPECT_INT_EQ(sb.data[sb.len - 1], ']');
        strbuf_free(&sb);
}

TEST(strbuf_appendf_fits_limit_exactly)
{
        struct strbuf sb;
        strbuf_init(&sb, 6);
        EXPECT_ERRNO(strbuf_appendf(&sb, "%06d", 42), 0);
        EXPECT_STR_EQ(sb.data, "000042");
        strbuf_free(&sb);
}

TEST(strbuf_steal_hands_over_and_empties)
{
        struct strbuf sb;
        strbuf_init(&sb, 50);
        EXPECT_ERRNO(strbuf_appends(&sb, "hello"), 0);
        size_t len = 0;
        char *d = strbuf_steal(&sb, &len);
        EXPECT_STR_EQ(d, "hello");
        EXPECT_SIZE_EQ(len, 5);
        EXPECT_NULL(sb.data);
        EXPECT_SIZE_EQ(sb.len, 0);
        EXPECT_SIZE_EQ(sb.limit, 50);
        free(d);
        /* Nothing appended yet: still a string, the empty one. */
        d = strbuf_steal(&sb, &len);
        EXPECT_STR_EQ(d, "");
        EXPECT_SIZE_EQ(len, 0);
        free(d);
        d = strbuf_steal(&sb, NULL);
        EXPECT_NOT_NULL(d);
        free(d);
}

TEST(strbuf_free_twice_is_harmless)
{
        struct strbuf sb;
        strbuf_init(&sb, 0);
        strbuf_free(&sb);
        EXPECT_ERRNO(strbuf_appends(&sb, "again"), 0);
        EXPECT_STR_EQ(sb.data, "again");
        strbuf_free(&sb);
        strbuf_free(&sb);
        EXPECT_NULL(sb.data);
}
