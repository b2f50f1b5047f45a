/* A terminal's output made plain text: what a PTY job writes (colours,
 * cursor moves, titles, progress bars redrawn with '\r') becomes the lines
 * a reader would have seen, in valid UTF-8 with LF line ends. A streaming
 * state machine: bytes may arrive in any pieces (a character or an escape
 * sequence split across feeds comes out as if read at once); it holds at
 * most one line (SANITIZE_LINE_MAX) and drops escape sequences longer than
 * SANITIZE_SEQ_MAX without keeping them. */
#pragma once

#include <stddef.h>

#include "base/strbuf.h"

/* A line longer than this is written out as it is, in pieces of at most
 * this many bytes, with no newline added: memory stays bounded. */
#define SANITIZE_LINE_MAX 65536
/* An escape sequence (CSI, OSC, DCS, ...) still open after this many bytes
 * is abandoned: those bytes are dropped and what follows is text again. */
#define SANITIZE_SEQ_MAX 4096

struct sanitizer;

int sanitizer_new(struct sanitizer **ret);
struct sanitizer *sanitizer_free(struct sanitizer *s);

/* Feed n bytes of raw terminal output (in may be NULL when n is 0); what is
 * final (whole lines, mostly) is appended to out. 0, or strbuf_append's
 * error (-ENOMEM; -E2BIG if out has a limit), after which part of the text
 * may be lost: free the sanitizer. */
int sanitizer_feed(struct sanitizer *s, const char *in, size_t n, struct strbuf *out);

/* The output went quiet: append the line held back so far (a prompt such as
 * "name? ") so that a reader sees it. The line stays open: text that
 * continues it is appended after it, a '\n' ends it. If a lone '\r' then
 * overwrites it (a progress bar), a '\n' is written first: the text already
 * out stays on a line of its own and the new text starts the next. */
int sanitizer_flush_partial(struct sanitizer *s, struct strbuf *out);

/* End of output: append the open line (no newline added) after turning a
 * character cut by the end into U+FFFD (one per byte); an escape sequence
 * still open is dropped. The sanitizer is then as new. */
int sanitizer_finish(struct sanitizer *s, struct strbuf *out);
