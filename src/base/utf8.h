/* UTF-8 well-formedness (Unicode 15, Table 3-7) for untrusted bytes: the
 * request decoder rejects invalid text, the response builder repairs the
 * program's output so that every JSON string lockbox sends is valid. NUL is
 * a valid code point here; callers that forbid it check separately. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* Length of the longest prefix of s that is well-formed UTF-8. */
size_t utf8_valid_prefix(const char *s, size_t len);
/* True when all len bytes of s are well-formed UTF-8. */
bool utf8_valid(const char *s, size_t len);
/* Copy len bytes replacing each byte that is not part of a well-formed
 * UTF-8 sequence with U+FFFD (one per byte); valid input comes back
 * byte-identical. Returns a malloc'd NUL-terminated copy (ret_len, if
 * non-NULL, excludes the NUL) or NULL on allocation failure. in may be NULL
 * when len is 0. */
char *utf8_sanitize(const char *in, size_t len, size_t *ret_len);
/* Length of the longest prefix of s made of ASCII bytes (below 0x80) that
 * are not below `below` (0: none is) and not one of the bytes of the
 * string stop (ASCII, at most 8; NULL: none). Eight bytes a step: output
 * is mostly such runs, and a byte at a time they were the costliest part
 * of paging a job's output. */
size_t utf8_ascii_prefix(const void *s, size_t len, unsigned char below, const char *stop);
