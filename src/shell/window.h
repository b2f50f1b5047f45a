/* Windows of a shell job's output.log: byte ranges a reader is given, so
 * that paging through an append-only file by offsets never cuts a valid
 * UTF-8 character in two and always moves forward, whatever bytes the file
 * holds (a stdio job's output is copied byte for byte). Also the one UTF-8
 * character classifier the shell code shares (sanitize.c decodes with it). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The largest limit shell_window_read takes (the API's output_limit bound). */
#define SHELL_WINDOW_LIMIT_MAX (1u << 20)
/* Bytes shell_window_read reads past limit: enough to see whole the last
 * character that could fit after up to 3 skipped bytes, or the one
 * character taken when nothing fits (3 + 4 <= limit + 7 for any limit). */
#define SHELL_WINDOW_READ_EXTRA 8

/* What s[0..avail) starts with: 1-4 for a well-formed character of that
 * many bytes, 0 for a byte that starts none (invalid: one U+FFFD), -1 when
 * the avail bytes are the well-formed start of a longer character. */
int shell_utf8_char(const unsigned char *s, size_t avail);

/* output.log[start, end): the window; truncated: end < the file's size. */
struct shell_window {
        uint64_t start, end;
        bool truncated;
};

/* Pure: buf holds the n bytes of the file at [offset, offset + n) (what a
 * read of limit + SHELL_WINDOW_READ_EXTRA bytes returned; bytes past size
 * are ignored); size is the file's size, offset <= size. offset == size:
 * the empty window at offset. Else up to 3 continuation bytes at offset are
 * skipped (start moves past them), then at most limit bytes are taken,
 * never ending inside a well-formed character; invalid bytes are taken as
 * they are (one character each). A well-formed start of a character that
 * the file's end cuts is left for the next window, unless it is all there
 * is: then it is taken, so a reader always moves on. When not even one
 * character fits in limit, one is taken anyway (at most 4 bytes). */
void shell_window_compute(const unsigned char *buf, size_t n, uint64_t offset, uint64_t size,
                          uint32_t limit, struct shell_window *ret);

/* The window at offset of the file fd (read with pread: the fd's position
 * is left alone). 0; -ERANGE when offset is past the file's size (the
 * API's invalid_offset); -EINVAL when limit > SHELL_WINDOW_LIMIT_MAX;
 * -ENOMEM; or the -errno of fstat or pread. *ret_size (if not NULL) gets
 * the size the window was computed against. */
int shell_window_read(int fd, uint64_t offset, uint32_t limit, struct shell_window *ret,
                      uint64_t *ret_size);

/* The last <= limit bytes of fd, starting at a character start (up to 3
 * continuation bytes skipped): end is the file's size, truncated false.
 * 0 or -errno. */
int shell_window_tail(int fd, uint32_t limit, struct shell_window *ret);
