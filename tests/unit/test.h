/* Minimal unit-test harness: TEST() registers a case at load time; the
 * runner (tests/unit/main.c) runs each case in its own forked process so a
 * crash (or a hang: each case has a time limit) fails one case, and ends
 * with "N passed, N failed". Assertions print both sides and stop the
 * case: they return from the function they are in, so use them in the
 * TEST body or in void helpers (check test_failed after such a call). */
#pragma once

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

typedef void (*test_fn)(void);
void test_register(const char *name, test_fn fn, const char *file);
/* As test_register, for a case that may take up to seconds (more than the
 * runner's 10 s: a job that starts an interpreter twice, on a slow guest). */
void test_register_slow(const char *name, test_fn fn, const char *file, unsigned seconds);
void test_fail(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Descriptors open in this process (for "nothing leaked" checks), or -1. */
int test_open_fds(void);
/* All len bytes of buf to fd, piece bytes per call (0: as many as it
 * takes); sockets with MSG_NOSIGNAL. 0 or -1. */
int test_write_all(int fd, const void *buf, size_t len, size_t piece);
extern bool test_failed;
/* Only for a case that truly needs root (two accounts, chown to root):
 * without it, say why and skip the case; the runner counts it as
 * skipped, not passed. True when the caller must return. docs/TESTING.md
 * lists the cases that use it. */
bool test_skip_unless_root(const char *why);

#define REQUIRE_ROOT(why)                                                                          \
        do {                                                                                       \
                if (test_skip_unless_root(why))                                                    \
                        return;                                                                    \
        } while (0)

#define TEST(name)                                                                                 \
        static void test_##name(void);                                                             \
        __attribute__((constructor)) static void test_reg_##name(void)                             \
        {                                                                                          \
                test_register(#name, test_##name, __FILE__);                                       \
        }                                                                                          \
        static void test_##name(void)

/* A case given seconds (rather than 10) to end; as TEST otherwise. */
#define TEST_SLOW(name, seconds)                                                                   \
        static void test_##name(void);                                                             \
        __attribute__((constructor)) static void test_reg_##name(void)                             \
        {                                                                                          \
                test_register_slow(#name, test_##name, __FILE__, seconds);                         \
        }                                                                                          \
        static void test_##name(void)

#define EXPECT_TRUE(c)                                                                             \
        do {                                                                                       \
                if (!(c)) {                                                                        \
                        test_fail(__FILE__, __LINE__, "expected true: %s", #c);                    \
                        return;                                                                    \
                }                                                                                  \
        } while (0)

#define EXPECT_FALSE(c)                                                                            \
        do {                                                                                       \
                if (c) {                                                                           \
                        test_fail(__FILE__, __LINE__, "expected false: %s", #c);                   \
                        return;                                                                    \
                }                                                                                  \
        } while (0)

/* Comparisons of signed integers; op is one of == != < <= > >=. */
#define EXPECT_INT_OP(a, op, b)                                                                    \
        do {                                                                                       \
                long long _a = (long long)(a), _b = (long long)(b);                                \
                if (!(_a op _b)) {                                                                 \
                        test_fail(__FILE__, __LINE__, "%s %s %s: %lld vs %lld", #a, #op, #b, _a,   \
                                  _b);                                                             \
                        return;                                                                    \
                }                                                                                  \
        } while (0)

/* Unsigned values (size_t, uint64_t) that a long long would not hold. */
#define EXPECT_UINT_OP(a, op, b)                                                                   \
        do {                                                                                       \
                unsigned long long _a = (unsigned long long)(a), _b = (unsigned long long)(b);     \
                if (!(_a op _b)) {                                                                 \
                        test_fail(__FILE__, __LINE__, "%s %s %s: %llu vs %llu", #a, #op, #b, _a,   \
                                  _b);                                                             \
                        return;                                                                    \
                }                                                                                  \
        } while (0)
#define EXPECT_UINT_EQ(a, b) EXPECT_UINT_OP(a, ==, b)
#define EXPECT_SIZE_EQ(a, b) EXPECT_UINT_OP(a, ==, b)

#define EXPECT_NULL(p)                                                                             \
        do {                                                                                       \
                const void *_p = (p);                                                              \
                if (_p) {                                                                          \
                        test_fail(__FILE__, __LINE__, "%s: expected NULL, got %p", #p, _p);        \
                        return;                                                                    \
                }                                                                                  \
        } while (0)

#define EXPECT_NOT_NULL(p)                                                                         \
        do {                                                                                       \
                if (!(p)) {                                                                        \
                        test_fail(__FILE__, __LINE__, "%s: expected non-NULL", #p);                \
                        return;                                                                    \
                }                                                                                  \
        } while (0)

/* A 0-or-negative-errno result, printed with both error names. */
#define EXPECT_ERRNO(r, want)                                                                      \
        do {                                                                                       \
                long long _r = (long long)(r), _w = (long long)(want);                             \
                if (_r != _w) {                                                                    \
                        test_fail(__FILE__, __LINE__, "%s == %s: %lld (%s) != %lld (%s)", #r,      \
                                  #want, _r, _r < 0 ? strerror((int)-_r) : "no error", _w,         \
                                  _w < 0 ? strerror((int)-_w) : "no error");                       \
                        return;                                                                    \
                }                                                                                  \
        } while (0)

#define EXPECT_INT_EQ(a, b)                                                                        \
        do {                                                                                       \
                long long _a = (long long)(a), _b = (long long)(b);                                \
                if (_a != _b) {                                                                    \
                        test_fail(__FILE__, __LINE__, "%s == %s: %lld != %lld", #a, #b, _a, _b);   \
                        return;                                                                    \
                }                                                                                  \
        } while (0)

#define EXPECT_STR_EQ(a, b)                                                                        \
        do {                                                                                       \
                const char *_a = (a), *_b = (b);                                                   \
                if (!_a || !_b || strcmp(_a, _b) != 0) {                                           \
                        test_fail(__FILE__, __LINE__,                                              \
                                  "%s == %s:\n    got:  \"%s\"\n    want: \"%s\"", #a, #b,         \
                                  _a ? _a : "(null)", _b ? _b : "(null)");                         \
                        return;                                                                    \
                }                                                                                  \
        } while (0)

#define EXPECT_STR_CONTAINS(hay, needle)                                                           \
        do {                                                                                       \
                const char *_h = (hay), *_n = (needle);                                            \
                if (!_h || !strstr(_h, _n)) {                                                      \
                        test_fail(__FILE__, __LINE__,                                              \
                                  "%s contains %s:\n    got:  \"%s\"\n    want substring: \"%s\"", \
                                  #hay, #needle, _h ? _h : "(null)", _n);                          \
                        return;                                                                    \
                }                                                                                  \
        } while (0)

#define EXPECT_STR_NOT_CONTAINS(hay, needle)                                                       \
        do {                                                                                       \
                const char *_h = (hay), *_n = (needle);                                            \
                if (!_h || strstr(_h, _n)) {                                                       \
                        test_fail(__FILE__, __LINE__, "%s lacks %s:\n    got:  \"%s\"", #hay,      \
                                  #needle, _h ? _h : "(null)");                                    \
                        return;                                                                    \
                }                                                                                  \
        } while (0)

#define EXPECT_MEM_EQ(a, alen, b, blen)                                                            \
        do {                                                                                       \
                size_t _al = (alen), _bl = (blen);                                                 \
                if (_al != _bl || memcmp((a), (b), _al) != 0) {                                    \
                        test_fail(__FILE__, __LINE__,                                              \
                                  "%s == %s: lengths %zu vs %zu or bytes differ", #a, #b, _al,     \
                                  _bl);                                                            \
                        return;                                                                    \
                }                                                                                  \
        } while (0)
