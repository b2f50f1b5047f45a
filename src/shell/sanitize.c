/* A terminal's output made plain text (see sanitize.h). Bytes are decoded
 * to characters (a character cut by the end of a feed waits for the next;
 * an invalid byte is one U+FFFD), then each character goes through the
 * escape-sequence states and, when it is text, into the line buffer. */
#include "shell/sanitize.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "shell/window.h"

/* Where the escape-sequence parser is. */
enum san_state {
        SAN_TEXT,      /* not in a sequence */
        SAN_ESC,       /* after ESC */
        SAN_ESC_INTER, /* after ESC and intermediates (0x20-0x2F): ESC ( B */
        SAN_CSI,       /* after ESC [ or U+009B: parameters until a final byte */
        SAN_STR,       /* OSC, DCS, SOS, PM or APC string until ST (or BEL for OSC) */
        SAN_STR_ESC,   /* ESC inside a string: ST if a '\' follows */
};

struct sanitizer {
        enum san_state state;
        bool str_bel;        /* the string is an OSC: BEL ends it too */
        size_t seq_len;      /* bytes of the open sequence */
        bool pending_cr;     /* a '\r' whose meaning the next character decides */
        bool partial_out;    /* part of the open line is already in the output */
        unsigned char u8[4]; /* the start of a character cut by the end of a feed */
        size_t u8_len;
        size_t line_len;
        char line[SANITIZE_LINE_MAX + 1]; /* + the '\n' that ends it */
};

/* One decoded character: its code point, the bytes that stand for it in
 * the output, and how many input bytes it took (a sequence's length). */
struct san_char {
        uint32_t cp;
        const char *bytes;
        size_t len;
        size_t in_len;
};

#define SAN_ESC_CP 0x1b
#define SAN_BEL_CP 0x07
#define SAN_C1_CSI 0x9b
#define SAN_C1_ST 0x9c

static const char san_replacement[] = "\xef\xbf\xbd"; /* U+FFFD */

int sanitizer_new(struct sanitizer **ret)
{
        struct sanitizer *s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        *ret = s;
        return 0;
}

struct sanitizer *sanitizer_free(struct sanitizer *s)
{
        free(s);
        return NULL;
}

/* Text goes into the open line. A '\r' before it (not followed by '\n')
 * sends the cursor back: the line held so far is overwritten. */
static int san_line_add(struct sanitizer *s, const struct san_char *c, struct strbuf *out)
{
        int r;
        if (s->pending_cr) {
                s->pending_cr = false;
                s->line_len = 0;
                if (s->partial_out) {
                        /* what was shown stays; the new text starts a line */
                        s->partial_out = false;
                        r = strbuf_append(out, "\n", 1);
                        if (r < 0)
                                return r;
                }
        }
        if (s->line_len + c->len > SANITIZE_LINE_MAX) {
                r = strbuf_append(out, s->line, s->line_len);
                if (r < 0)
                        return r;
                s->line_len = 0;
                s->partial_out = true;
        }
        memcpy(s->line + s->line_len, c->bytes, c->len);
        s->line_len += c->len;
        return 0;
}

static int san_line_end(struct sanitizer *s, struct strbuf *out)
{
        s->line[s->line_len++] = '\n';
        int r = strbuf_append(out, s->line, s->line_len);
        s->line_len = 0;
        s->pending_cr = false;
        s->partial_out = false;
        return r;
}

static void san_enter(struct sanitizer *s, enum san_state state, size_t len)
{
        s->state = state;
        s->seq_len = len;
}

static int san_text(struct sanitizer *s, const struct san_char *c, struct strbuf *out)
{
        switch (c->cp) {
        case SAN_ESC_CP:
                san_enter(s, SAN_ESC, c->in_len);
                return 0;
        case SAN_C1_CSI:
                san_enter(s, SAN_CSI, c->in_len);
                return 0;
        case '\n':
                return san_line_end(s, out);
        case '\r':
                s->pending_cr = true;
                return 0;
        default:
                return san_line_add(s, c, out);
        }
}

/* The state after ESC and c; SAN_TEXT with *ret_again when c does not
 * belong to the sequence (it is then read as text). */
static enum san_state san_after_esc(uint32_t cp, bool *ret_str_bel, bool *ret_again)
{
        *ret_again = false;
        switch (cp) {
        case '[':
                return SAN_CSI;
        case ']':
                *ret_str_bel = true;
                return SAN_STR;
        case 'P': /* DCS */
        case 'X': /* SOS */
        case '^': /* PM */
        case '_': /* APC */
                *ret_str_bel = false;
                return SAN_STR;
        }
        if (cp >= 0x20 && cp <= 0x2f)
                return SAN_ESC_INTER;
        if (cp < 0x30 || cp > 0x7e)
                *ret_again = true;
        return SAN_TEXT; /* a final byte: ESC 7, ESC =, ... */
}

/* c inside a sequence: the next state, or SAN_TEXT with *ret_again when c
 * ends the sequence without belonging to it. */
static enum san_state san_in_seq(struct sanitizer *s, const struct san_char *c, bool *ret_again)
{
        uint32_t cp = c->cp;
        *ret_again = false;
        switch (s->state) {
        case SAN_ESC:
                return san_after_esc(cp, &s->str_bel, ret_again);
        case SAN_ESC_INTER:
                if (cp >= 0x20 && cp <= 0x2f)
                        return SAN_ESC_INTER;
                *ret_again = cp < 0x30 || cp > 0x7e;
                return SAN_TEXT;
        case SAN_CSI:
                if (cp >= 0x20 && cp <= 0x3f)
                        return SAN_CSI;
                *ret_again = cp < 0x40 || cp > 0x7e;
                return SAN_TEXT;
        case SAN_STR:
                if (cp == SAN_ESC_CP)
                        return SAN_STR_ESC;
                if (cp == SAN_C1_ST || (cp == SAN_BEL_CP && s->str_bel))
                        return SAN_TEXT;
                return SAN_STR;
        case SAN_STR_ESC:
                if (cp == '\\')
                        return SAN_TEXT;
                /* that ESC ended the string and starts a sequence of its own */
                s->seq_len = 1 + c->in_len;
                return san_after_esc(cp, &s->str_bel, ret_again);
        case SAN_TEXT:
                break;
        }
        *ret_again = true;
        return SAN_TEXT;
}

static int san_char(struct sanitizer *s, const struct san_char *c, struct strbuf *out)
{
        if (s->state == SAN_TEXT)
                return san_text(s, c, out);
        if (s->seq_len + c->in_len > SANITIZE_SEQ_MAX) {
                /* too long to be a sequence: what follows is text again */
                s->state = SAN_TEXT;
                return san_text(s, c, out);
        }
        bool again;
        s->seq_len += c->in_len;
        s->state = san_in_seq(s, c, &again);
        return again ? san_text(s, c, out) : 0;
}

static int san_invalid(struct sanitizer *s, struct strbuf *out)
{
        struct san_char c = {0xfffd, san_replacement, 3, 1};
        return san_char(s, &c, out);
}

static int san_valid(struct sanitizer *s, const unsigned char *b, size_t len, struct strbuf *out)
{
        static const unsigned char lead_mask[5] = {0, 0x7f, 0x1f, 0x0f, 0x07};
        uint32_t cp = b[0] & lead_mask[len];
        for (size_t i = 1; i < len; i++)
                cp = cp << 6 | (b[i] & 0x3f);
        struct san_char c = {cp, (const char *)b, len, len};
        return san_char(s, &c, out);
}

/* Decode the held bytes as far as they go; a well-formed start of a
 * character stays held. */
static int san_drain(struct sanitizer *s, struct strbuf *out)
{
        while (s->u8_len > 0) {
                int k = shell_utf8_char(s->u8, s->u8_len);
                if (k < 0)
                        return 0;
                size_t used = k > 0 ? (size_t)k : 1;
                int r = k > 0 ? san_valid(s, s->u8, used, out) : san_invalid(s, out);
                if (r < 0)
                        return r;
                s->u8_len -= used;
                memmove(s->u8, s->u8 + used, s->u8_len);
        }
        return 0;
}

/* How many bytes of b (printable ASCII, read as text, no '\r' pending)
 * go straight into the line: the common case, copied in one go. */
static size_t san_ascii_run(struct sanitizer *s, const unsigned char *b, size_t n)
{
        if (s->state != SAN_TEXT || s->pending_cr)
                return 0;
        size_t room = SANITIZE_LINE_MAX - s->line_len, m = 0;
        while (m < n && m < room && b[m] >= 0x20 && b[m] < 0x7f)
                m++;
        memcpy(s->line + s->line_len, b, m);
        s->line_len += m;
        return m;
}

int sanitizer_feed(struct sanitizer *s, const char *in, size_t n, struct strbuf *out)
{
        const unsigned char *b = (const unsigned char *)in;
        size_t i = 0;
        int r;
        /* first finish the character the last feed cut */
        while (s->u8_len > 0 && i < n) {
                s->u8[s->u8_len++] = b[i++];
                r = san_drain(s, out);
                if (r < 0)
                        return r;
        }
        while (i < n) {
                size_t m = san_ascii_run(s, b + i, n - i);
                if (m > 0) {
                        i += m;
                        continue;
                }
                int k = shell_utf8_char(b + i, n - i);
                if (k < 0) { /* fewer than 4 bytes left: keep them for the next feed */
                        memcpy(s->u8, b + i, n - i);
                        s->u8_len = n - i;
                        return 0;
                }
                size_t used = k > 0 ? (size_t)k : 1;
                r = k > 0 ? san_valid(s, b + i, used, out) : san_invalid(s, out);
                if (r < 0)
                        return r;
                i += used;
        }
        return 0;
}

int sanitizer_flush_partial(struct sanitizer *s, struct strbuf *out)
{
        if (s->line_len == 0)
                return 0;
        int r = strbuf_append(out, s->line, s->line_len);
        if (r < 0)
                return r;
        s->line_len = 0;
        s->partial_out = true;
        return 0;
}

int sanitizer_finish(struct sanitizer *s, struct strbuf *out)
{
        /* a character cut by the end: each of its bytes is invalid */
        for (size_t i = 0; i < s->u8_len; i++) {
                int r = san_invalid(s, out);
                if (r < 0)
                        return r;
        }
        int r = strbuf_append(out, s->line, s->line_len);
        if (r < 0)
                return r;
        memset(s, 0, offsetof(struct sanitizer, line));
        return 0;
}
