/* UTF-8 validation and repair (see utf8.h). The lead byte decides the
 * sequence length and the allowed range of the second byte, which is where
 * overlongs (E0, F0), surrogates (ED) and code points above U+10FFFF (F4)
 * are excluded; later bytes are plain continuations 80..BF. */
#include "base/utf8.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* U+FFFD REPLACEMENT CHARACTER */
static const char utf8_replacement[3] = {'\xef', '\xbf', '\xbd'};

struct utf8_lead {
        unsigned char len; /* 0: not a lead byte */
        unsigned char lo;  /* range of the second byte */
        unsigned char hi;
};

static struct utf8_lead utf8_lead_of(unsigned char b)
{
        if (b < 0x80)
                return (struct utf8_lead){1, 0, 0};
        if (b >= 0xc2 && b <= 0xdf)
                return (struct utf8_lead){2, 0x80, 0xbf};
        if (b == 0xe0)
                return (struct utf8_lead){3, 0xa0, 0xbf};
        if (b == 0xed)
                return (struct utf8_lead){3, 0x80, 0x9f};
        if (b >= 0xe1 && b <= 0xef)
                return (struct utf8_lead){3, 0x80, 0xbf};
        if (b == 0xf0)
                return (struct utf8_lead){4, 0x90, 0xbf};
        if (b >= 0xf1 && b <= 0xf3)
                return (struct utf8_lead){4, 0x80, 0xbf};
        if (b == 0xf4)
                return (struct utf8_lead){4, 0x80, 0x8f};
        return (struct utf8_lead){0, 0, 0};
}

/* Length (1-4) of the well-formed sequence starting at s, 0 if there is
 * none (invalid lead, bad continuation, or truncated by the end). */
static size_t utf8_seq_len(const unsigned char *s, size_t avail)
{
        struct utf8_lead l = utf8_lead_of(s[0]);
        if (l.len == 0 || l.len > avail)
                return 0;
        if (l.len == 1)
                return 1;
        if (s[1] < l.lo || s[1] > l.hi)
                return 0;
        for (size_t i = 2; i < l.len; i++)
                if (s[i] < 0x80 || s[i] > 0xbf)
                        return 0;
        return l.len;
}

/* Word-at-a-time tests (each exact as "is there such a byte in v"): */
#define BYTES(c) (0x0101010101010101ull * (uint64_t)(c))
#define HIGH BYTES(0x80)
/* a byte below n (n <= 0x80) */
#define ANY_BELOW(v, n) (((v)-BYTES(n)) & ~(v)&HIGH)
/* a byte equal to c */
#define ANY_EQUAL(v, c) ANY_BELOW((v) ^ BYTES(c), 1)

static bool stops_at(unsigned char b, unsigned char below, const char *stop)
{
        return b >= 0x80 || b < below || (stop && b && strchr(stop, b));
}

size_t utf8_ascii_prefix(const void *s, size_t len, unsigned char below, const char *stop)
{
        const unsigned char *u = s;
        size_t n_stop = stop ? strlen(stop) : 0;
        size_t i = 0;
        /* out of contract (below past 0x80, more stops): a byte at a time */
        for (; n_stop <= 8 && below <= 0x80 && i + 8 <= len; i += 8) {
                uint64_t v;
                memcpy(&v, u + i, sizeof(v));
                uint64_t hit = v & HIGH;
                if (below)
                        hit |= ANY_BELOW(v, below);
                for (size_t k = 0; k < n_stop; k++)
                        hit |= ANY_EQUAL(v, (unsigned char)stop[k]);
                if (hit)
                        break;
        }
        while (i < len && !stops_at(u[i], below, stop))
                i++;
        return i;
}

size_t utf8_valid_prefix(const char *s, size_t len)
{
        const unsigned char *u = (const unsigned char *)s;
        size_t i = 0;
        while (i < len) {
                i += utf8_ascii_prefix(u + i, len - i, 0, NULL);
                if (i == len)
                        break;
                size_t n = utf8_seq_len(u + i, len - i);
                if (n == 0)
                        break;
                i += n;
        }
        return i;
}

bool utf8_valid(const char *s, size_t len)
{
        return utf8_valid_prefix(s, len) == len;
}

/* Size of the sanitized copy, or SIZE_MAX if it would not fit in size_t. */
static size_t utf8_sanitized_size(const unsigned char *u, size_t len)
{
        size_t out = 0;
        for (size_t i = 0; i < len;) {
                size_t run = utf8_ascii_prefix(u + i, len - i, 0, NULL);
                if (run) {
                        if (out > SIZE_MAX - 1 - run)
                                return SIZE_MAX;
                        out += run;
                        i += run;
                        continue;
                }
                size_t n = utf8_seq_len(u + i, len - i);
                size_t add = n ? n : sizeof(utf8_replacement);
                if (out > SIZE_MAX - 1 - add)
                        return SIZE_MAX;
                out += add;
                i += n ? n : 1;
        }
        return out;
}

char *utf8_sanitize(const char *in, size_t len, size_t *ret_len)
{
        const unsigned char *u = (const unsigned char *)in;
        size_t size = len ? utf8_sanitized_size(u, len) : 0;
        if (size == SIZE_MAX)
                return NULL;
        char *out = malloc(size + 1);
        if (!out)
                return NULL;
        size_t o = 0;
        for (size_t i = 0; i < len;) {
                size_t run = utf8_ascii_prefix(u + i, len - i, 0, NULL);
                if (run) {
                        memcpy(out + o, in + i, run);
                        o += run;
                        i += run;
                        continue;
                }
                size_t n = utf8_seq_len(u + i, len - i);
                if (n) {
                        memcpy(out + o, in + i, n);
                        o += n;
                        i += n;
                } else {
                        memcpy(out + o, utf8_replacement, sizeof(utf8_replacement));
                        o += sizeof(utf8_replacement);
                        i++;
                }
        }
        out[o] = '\0';
        if (ret_len)
                *ret_len = o;
        return out;
}
