/* Unit tests for src/base/parse.c: every accepted spelling of integers,
 * booleans, sizes and durations, the rejects next to them, overflow at the
 * exact int64 edges, and the formatters used by config dumps. */
#include <errno.h>

#include "base/parse.h"
#include "test.h"

static int64_t i64(const char *s, int want_r)
{
        int64_t v = -4242;
        int r = parse_int64(s, &v);
        if (r != want_r)
                test_fail(__FILE__, __LINE__, "parse_int64(\"%s\") = %d, want %d", s, r, want_r);
        return v;
}

TEST(parse_int64_accepts_decimal_with_sign)
{
        EXPECT_INT_EQ(i64("0", 0), 0);
        EXPECT_INT_EQ(i64("8194", 0), 8194);
        EXPECT_INT_EQ(i64("-5", 0), -5);
        EXPECT_INT_EQ(i64("+7", 0), 7);
        EXPECT_INT_EQ(i64("007", 0), 7);
        EXPECT_INT_EQ(i64("9223372036854775807", 0), INT64_MAX);
        EXPECT_INT_EQ(i64("-9223372036854775808", 0), INT64_MIN);
        EXPECT_TRUE(!test_failed);
}

TEST(parse_int64_rejects_junk_and_overflow)
{
        const char *junk[] = {
            "", "-", "+", "12a", " 1", "1 ", "0x10", "1.0", "1e3", "--1", "99999999999999999999x"};
        for (size_t i = 0; i < sizeof(junk) / sizeof(junk[0]); i++)
                EXPECT_INT_EQ(i64(junk[i], -EINVAL), -4242);
        EXPECT_INT_EQ(i64("9223372036854775808", -ERANGE), -4242);
        EXPECT_INT_EQ(i64("-9223372036854775809", -ERANGE), -4242);
        EXPECT_INT_EQ(i64("99999999999999999999999", -ERANGE), -4242);
        int64_t v;
        EXPECT_INT_EQ(parse_int64(NULL, &v), -EINVAL);
}

TEST(parse_int_range_checks_bounds)
{
        int v = 99;
        EXPECT_INT_EQ(parse_int_range("1", 1, 65535, &v), 0);
        EXPECT_INT_EQ(v, 1);
        EXPECT_INT_EQ(parse_int_range("65535", 1, 65535, &v), 0);
        EXPECT_INT_EQ(v, 65535);
        EXPECT_INT_EQ(parse_int_range("0", 1, 65535, &v), -ERANGE);
        EXPECT_INT_EQ(parse_int_range("65536", 1, 65535, &v), -ERANGE);
        EXPECT_INT_EQ(parse_int_range("x", 1, 65535, &v), -EINVAL);
        EXPECT_INT_EQ(v, 65535);
        int64_t w;
        EXPECT_INT_EQ(parse_int64_range("-3", -3, 3, &w), 0);
        EXPECT_INT_EQ(w, -3);
}

TEST(parse_bool_words)
{
        const char *yes[] = {"true", "TRUE", "True", "yes", "Yes", "on", "ON", "1", "t", "T"};
        const char *no[] = {"false", "False", "no", "NO", "off", "Off", "0", "f", "F"};
        const char *bad[] = {"", "maybe", "2", "true ", "y", "n", "tru", "-1", "yess"};
        bool v;
        for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
                v = false;
                EXPECT_INT_EQ(parse_bool(yes[i], &v), 0);
                EXPECT_TRUE(v);
        }
        for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++) {
                v = true;
                EXPECT_INT_EQ(parse_bool(no[i], &v), 0);
                EXPECT_TRUE(!v);
        }
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                EXPECT_INT_EQ(parse_bool(bad[i], &v), -EINVAL);
}

TEST(parse_size_suffixes)
{
        static const struct {
                const char *s;
                int64_t want;
        } ok[] = {
            {"0", 0},
            {"4096", 4096},
            {"1K", 1024},
            {"1k", 1024},
            {"1Ki", 1024},
            {"1KiB", 1024},
            {"1kib", 1024},
            {"1KB", 1024},
            {"1kb", 1024},
            {"16M", 16 << 20},
            {"2MiB", 2 << 20},
            {"1G", INT64_C(1) << 30},
            {"64g", INT64_C(64) << 30},
            {"1T", INT64_C(1) << 40},
            {"8388607T", INT64_C(8388607) << 40},
            {"9223372036854775807", INT64_MAX},
        };
        for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
                int64_t v = -1;
                EXPECT_INT_EQ(parse_size(ok[i].s, &v), 0);
                EXPECT_INT_EQ(v, ok[i].want);
        }
}

TEST(parse_size_rejects)
{
        const char *bad[] = {"",    "K",   "1X", "-1K", "+1K", "1.5K", "1KiBB",
                             "1 K", "1K ", "1B", "1iB", "1Kx", "16MM", "99999999999999999999Q"};
        int64_t v;
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                if (parse_size(bad[i], &v) != -EINVAL)
                        test_fail(__FILE__, __LINE__, "parse_size(\"%s\") accepted", bad[i]);
        }
        EXPECT_INT_EQ(parse_size("8388608T", &v), -ERANGE);
        EXPECT_INT_EQ(parse_size("9223372036854775808", &v), -ERANGE);
        EXPECT_INT_EQ(parse_size("99999999999999999999G", &v), -ERANGE);
}

TEST(parse_duration_go_style)
{
        static const struct {
                const char *s;
                int64_t want;
        } ok[] = {
            {"", 0},          {"0", 0},
            {"0s", 0},        {"30m", 1800},
            {"1h30m", 5400},  {"45s", 45},
            {"2h", 7200},     {"1800", 1800},
            {"1.5h", 5400},   {"1m30s", 90},
            {"1h0m0s", 3600}, {"500ms", 1},
            {"1500ms", 2},    {"1\xc2\xb5s", 1},
            {"1ns", 1},       {"2000000us", 2},
            {".5m", 30},      {"1.h", 3600},
            {"90m", 5400},    {"2562047h", INT64_C(2562047) * 3600},
        };
        for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
                int64_t v = -1;
                int r = parse_duration(ok[i].s, &v);
                if (r != 0 || v != ok[i].want)
                        test_fail(__FILE__, __LINE__,
                                  "parse_duration(\"%s\") = %d, %lld; want %lld", ok[i].s, r,
                                  (long long)v, (long long)ok[i].want);
        }
}

TEST(parse_duration_rejects)
{
        const char *bad[] = {"abc", "1x",  "h",   "1h30",  "-1h", ".h", "30 m",
                             "1d",  "m30", "+5m", "1h-5m", " 5s", "5s "};
        int64_t v;
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                if (parse_duration(bad[i], &v) != -EINVAL)
                        test_fail(__FILE__, __LINE__, "parse_duration(\"%s\") accepted", bad[i]);
        }
        EXPECT_INT_EQ(parse_duration("2562048h", &v), -ERANGE);
        EXPECT_INT_EQ(parse_duration("99999999999999999999s", &v), -ERANGE);
        EXPECT_INT_EQ(parse_duration("2562047h2562047h", &v), -ERANGE);
}

TEST(parse_format_size_and_duration)
{
        char buf[32];
        static const struct {
                int64_t v;
                const char *want;
        } sizes[] = {{0, "0"},
                     {1024, "1K"},
                     {1025, "1025"},
                     {1536, "1536"},
                     {16 << 20, "16M"},
                     {INT64_C(1) << 30, "1G"},
                     {INT64_C(3) << 40, "3T"},
                     {INT64_C(2048) << 40, "2048T"}};
        for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
                EXPECT_INT_EQ(parse_format_size(sizes[i].v, buf, sizeof(buf)), 0);
                EXPECT_STR_EQ(buf, sizes[i].want);
        }
        static const struct {
                int64_t v;
                const char *want;
        } durs[] = {{0, "0"},         {1800, "30m"}, {5400, "1h30m"},    {45, "45s"},
                    {3661, "1h1m1s"}, {7200, "2h"},  {31536000, "8760h"}};
        for (size_t i = 0; i < sizeof(durs) / sizeof(durs[0]); i++) {
                EXPECT_INT_EQ(parse_format_duration(durs[i].v, buf, sizeof(buf)), 0);
                EXPECT_STR_EQ(buf, durs[i].want);
        }
        EXPECT_INT_EQ(parse_format_duration(5400, buf, 4), -ENOBUFS);
        EXPECT_INT_EQ(parse_format_size(4097, buf, 3), -ENOBUFS);
}

TEST(parse_format_round_trips)
{
        char buf[32];
        for (int64_t v = 0; v < 5000000; v += 4093) {
                int64_t back = -1;
                EXPECT_INT_EQ(parse_format_size(v, buf, sizeof(buf)), 0);
                EXPECT_INT_EQ(parse_size(buf, &back), 0);
                EXPECT_INT_EQ(back, v);
                EXPECT_INT_EQ(parse_format_duration(v, buf, sizeof(buf)), 0);
                EXPECT_INT_EQ(parse_duration(buf, &back), 0);
                EXPECT_INT_EQ(back, v);
        }
}
