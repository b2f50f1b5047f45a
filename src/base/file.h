/* Whole small files and whole descriptors, read or written in one call:
 * the one place lockbox loops over read() to an end or writes a text. */
#pragma once

#include <stddef.h>
#include <sys/types.h>

struct strbuf;

/* Read fd to its end into sb (retrying EINTR): 0, -E2BIG past sb's limit,
 * or -errno. */
int file_read_fd(int fd, struct strbuf *sb);
/* A regular file (never a FIFO or device, which could block or never end:
 * -EINVAL; a directory: -EISDIR) into sb, at most max bytes (-E2BIG past
 * it); flags are added to O_RDONLY (O_NOFOLLOW: not through a final
 * symlink). sb is set up even on failure (strbuf_free it). 0 or -errno. */
int file_read(const char *path, int flags, size_t max, struct strbuf *sb);
/* At most size - 1 bytes of path into buf, always NUL-terminated (empty
 * on failure): the length read, or -errno. For /proc, /sys and state files. */
ssize_t file_read_buf(const char *path, char *buf, size_t size);
/* All len bytes of buf to fd, retrying EINTR and short writes: 0, -errno,
 * or -EIO if the fd takes nothing. */
int file_write_all(int fd, const void *buf, size_t len);
/* Write text to path, opened O_WRONLY with flags added (O_CREAT: with
 * mode): 0, -errno, or -EIO when it takes nothing more. */
int file_write(const char *path, const char *text, int flags, mode_t mode);
/* mkdir -p of the directories path names before its last '/' (mode
 * 0755), leaving the first skip bytes alone (a prefix known to exist):
 * "/a/b/c" makes /a and /a/b, "/a/b/" all of them. 0 or -errno. */
int file_mkdir_parents(const char *path, size_t skip);
/* Remove dfd/name, whatever it is, never following a symbolic link: a
 * directory depth first (one its owner may not list or enter is opened
 * up to the owner first), at most max_depth levels down (beyond: -ELOOP).
 * 0 (also when it is absent) or -errno. */
int file_tree_remove(int dfd, const char *name, unsigned max_depth);
/* fn(dirfd, name, data) for each entry of the directory open at fd
 * (taken: closed here), "." and ".." aside, until one returns non-zero:
 * that, or -errno when the directory cannot be listed, or 0. */
int file_dir_each(int fd, int (*fn)(int dfd, const char *name, void *data), void *data);
