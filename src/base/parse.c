/* Leaf value parsers (see parse.h). Hand-written digit loops instead of
 * strtoll(): strtoll skips leading blanks and reports overflow through
 * errno, and config values must be rejected whole or taken whole. */
#include "base/parse.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "base/util.h"

#define NS_PER_SEC INT64_C(1000000000)

static bool is_digit(char c)
{
        return c >= '0' && c <= '9';
}

/* Reads one or more digits at *p into *ret; advances *p. */
static int parse_digits(const char **p, uint64_t limit, uint64_t *ret)
{
        const char *s = *p;
        uint64_t v = 0;
        if (!is_digit(*s))
                return -EINVAL;
        for (; is_digit(*s); s++) {
                unsigned d = (unsigned)(*s - '0');
                if (v > (limit - d) / 10)
                        return -ERANGE;
                v = v * 10 + d;
        }
        *p = s;
        *ret = v;
        return 0;
}

int parse_int64(const char *s, int64_t *ret)
{
        bool neg = false;
        uint64_t v;
        if (!s)
                return -EINVAL;
        if (*s == '+' || *s == '-')
                neg = *s++ == '-';
        /* INT64_MIN has one more unit than INT64_MAX. */
        uint64_t limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
        const char *p = s;
        int r = parse_digits(&p, limit, &v);
        if (r == -ERANGE) {
                /* Only call it overflow if the rest is digits too. */
                while (is_digit(*p))
                        p++;
                return *p ? -EINVAL : -ERANGE;
        }
        if (r < 0 || *p)
                return -EINVAL;
        *ret = neg ? (int64_t)(0 - v) : (int64_t)v;
        return 0;
}

int parse_int64_range(const char *s, int64_t min, int64_t max, int64_t *ret)
{
        int64_t v;
        int r = parse_int64(s, &v);
        if (r < 0)
                return r;
        if (v < min || v > max)
                return -ERANGE;
        *ret = v;
        return 0;
}

int parse_int_range(const char *s, int min, int max, int *ret)
{
        int64_t v;
        int r = parse_int64_range(s, min, max, &v);
        if (r < 0)
                return r;
        *ret = (int)v;
        return 0;
}

int parse_bool(const char *s, bool *ret)
{
        static const char *const yes[] = {"true", "yes", "on", "1", "t"};
        static const char *const no[] = {"false", "no", "off", "0", "f"};
        if (!s)
                return -EINVAL;
        for (size_t i = 0; i < ELEMENTSOF(yes); i++) {
                if (strcasecmp(s, yes[i]) == 0) {
                        *ret = true;
                        return 0;
                }
                if (strcasecmp(s, no[i]) == 0) {
                        *ret = false;
                        return 0;
                }
        }
        return -EINVAL;
}

/* "", "i", "ib", "b" may follow a size unit letter. */
static bool size_tail_ok(const char *t)
{
        return !*t || strcasecmp(t, "i") == 0 || strcasecmp(t, "ib") == 0 ||
               strcasecmp(t, "b") == 0;
}

static int size_multiplier(const char *p, int64_t *ret)
{
        static const char units[] = "kmgt";
        if (!*p) {
                *ret = 1;
                return 0;
        }
        const char *u = strchr(units, *p | 0x20);
        if (!u || !size_tail_ok(p + 1))
                return -EINVAL;
        *ret = INT64_C(1) << (10 * (u - units + 1));
        return 0;
}

int parse_size(const char *s, int64_t *ret)
{
        uint64_t v;
        int64_t mult;
        if (!s)
                return -EINVAL;
        const char *p = s;
        int r = parse_digits(&p, INT64_MAX, &v);
        if (r == -ERANGE) {
                while (is_digit(*p))
                        p++;
                return size_multiplier(p, &mult) < 0 ? -EINVAL : -ERANGE;
        }
        if (r < 0)
                return r;
        r = size_multiplier(p, &mult);
        if (r < 0)
                return r;
        if (v > (uint64_t)(INT64_MAX / mult))
                return -ERANGE;
        *ret = (int64_t)v * mult;
        return 0;
}

struct duration_unit {
        const char *name;
        int64_t ns;
};

/* Longer names first: "m" must not swallow the "m" of "ms". */
/* clang-format off */
static const struct duration_unit duration_units[] = {
        {"ns", 1},
        {"us", 1000},
        {"\xc2\xb5s", 1000}, /* U+00B5 micro sign, as Go accepts */
        {"\xce\xbcs", 1000}, /* U+03BC greek mu */
        {"ms", 1000000},
        {"s", NS_PER_SEC},
        {"m", 60 * NS_PER_SEC},
        {"h", 3600 * NS_PER_SEC},
};
/* clang-format on */

static const struct duration_unit *duration_unit_at(const char **p)
{
        for (size_t i = 0; i < ELEMENTSOF(duration_units); i++) {
                size_t n = strlen(duration_units[i].name);
                if (strncmp(*p, duration_units[i].name, n) == 0) {
                        *p += n;
                        return &duration_units[i];
                }
        }
        return NULL;
}

/* Digits after the '.', as value/scale; digits past 18 are below one
 * nanosecond of any unit and are skipped. */
static double duration_fraction(const char **p)
{
        uint64_t frac = 0, scale = 1;
        const char *s = *p;
        for (; is_digit(*s); s++) {
                if (scale < UINT64_C(1000000000000000000)) {
                        frac = frac * 10 + (uint64_t)(*s - '0');
                        scale *= 10;
                }
        }
        *p = s;
        return (double)frac / (double)scale;
}

/* One "<number><unit>" component, in nanoseconds. */
static int duration_component(const char **p, int64_t *ret_ns)
{
        const char *s = *p;
        uint64_t whole = 0;
        double frac = 0;
        bool digits = is_digit(*s);
        if (digits && parse_digits(&s, INT64_MAX, &whole) < 0)
                return -ERANGE;
        if (*s == '.') {
                s++;
                digits = digits || is_digit(*s);
                frac = duration_fraction(&s);
        }
        const struct duration_unit *u = digits ? duration_unit_at(&s) : NULL;
        if (!u)
                return -EINVAL;
        if (whole > (uint64_t)(INT64_MAX / u->ns))
                return -ERANGE;
        int64_t ns = (int64_t)whole * u->ns;
        int64_t extra = (int64_t)(frac * (double)u->ns);
        if (ns > INT64_MAX - extra)
                return -ERANGE;
        *p = s;
        *ret_ns = ns + extra;
        return 0;
}

int parse_duration(const char *s, int64_t *ret_seconds)
{
        int64_t total = 0, v;
        if (!s)
                return -EINVAL;
        if (!*s) {
                *ret_seconds = 0;
                return 0;
        }
        if (is_digit(*s) && parse_int64(s, &v) == 0) {
                *ret_seconds = v;
                return 0;
        }
        for (const char *p = s; *p;) {
                int r = duration_component(&p, &v);
                if (r < 0)
                        return r;
                if (total > INT64_MAX - v)
                        return -ERANGE;
                total += v;
        }
        *ret_seconds = total / NS_PER_SEC + (total % NS_PER_SEC != 0);
        return 0;
}

int parse_format_size(int64_t bytes, char *buf, size_t len)
{
        static const char units[] = "TGMK";
        int n = -1;
        for (size_t i = 0; i < 4 && bytes != 0 && n < 0; i++) {
                int64_t mult = INT64_C(1) << (10 * (4 - i));
                if (bytes % mult == 0)
                        n = snprintf(buf, len, "%" PRId64 "%c", bytes / mult, units[i]);
        }
        if (n < 0)
                n = snprintf(buf, len, "%" PRId64, bytes);
        return n < 0 || (size_t)n >= len ? -ENOBUFS : 0;
}

int parse_format_duration(int64_t seconds, char *buf, size_t len)
{
        static const struct {
                int64_t secs;
                char unit;
        } parts[] = {{3600, 'h'}, {60, 'm'}, {1, 's'}};
        size_t o = 0;
        if (seconds <= 0) {
                int n = snprintf(buf, len, "%" PRId64, seconds);
                return n < 0 || (size_t)n >= len ? -ENOBUFS : 0;
        }
        if (len == 0)
                return -ENOBUFS;
        buf[0] = '\0';
        for (size_t i = 0; i < ELEMENTSOF(parts); i++) {
                int64_t q = seconds / parts[i].secs;
                seconds %= parts[i].secs;
                if (q == 0)
                        continue;
                int n = snprintf(buf + o, len - o, "%" PRId64 "%c", q, parts[i].unit);
                if (n < 0 || (size_t)n >= len - o)
                        return -ENOBUFS;
                o += (size_t)n;
        }
        return 0;
}

int parse_host_port(const char *s, char *addr, size_t addrlen, int *ret_port)
{
        const char *colon = s ? strrchr(s, ':') : NULL;
        if (!colon)
                return -EINVAL;
        const char *a = s;
        size_t alen = (size_t)(colon - s);
        if (alen >= 2 && s[0] == '[' && colon[-1] == ']') {
                a++;
                alen -= 2;
        } else if (memchr(s, ':', alen)) {
                return -EINVAL; /* an IPv6 address needs its brackets */
        }
        int port;
        unsigned char bin[sizeof(struct in6_addr)];
        char buf[INET6_ADDRSTRLEN + 1];
        if (alen == 0 || alen >= sizeof(buf) || alen >= addrlen ||
            parse_int_range(colon + 1, 1, 65535, &port) < 0)
                return -EINVAL;
        memcpy(buf, a, alen);
        buf[alen] = '\0';
        if (inet_pton(AF_INET, buf, bin) != 1 && inet_pton(AF_INET6, buf, bin) != 1)
                return -EINVAL;
        memcpy(addr, buf, alen + 1);
        *ret_port = port;
        return 0;
}
