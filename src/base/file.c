/* Whole small files and whole descriptors (see file.h). */
#include "base/file.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/strbuf.h"
#include "base/util.h"

int file_read_fd(int fd, struct strbuf *sb)
{
        char chunk[8192];
        for (;;) {
                ssize_t n = RETRY_EINTR(read(fd, chunk, sizeof(chunk)));
                if (n < 0)
                        return -errno;
                if (n == 0)
                        return 0;
                int r = strbuf_append(sb, chunk, (size_t)n);
                if (r < 0)
                        return r;
        }
}

int file_read(const char *path, int flags, size_t max, struct strbuf *sb)
{
        /* sb is set up first: the caller may free it whatever happens */
        strbuf_init(sb, max);
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY | flags);
        struct stat st;
        if (fd < 0)
                return -errno;
        if (fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode))
                return S_ISDIR(st.st_mode) ? -EISDIR : -EINVAL;
        int r = file_read_fd(fd, sb);
        if (r < 0)
                strbuf_free(sb);
        return r;
}

ssize_t file_read_buf(const char *path, char *buf, size_t size)
{
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        ssize_t n = fd < 0 ? -1 : RETRY_EINTR(read(fd, buf, size - 1));
        buf[n < 0 ? 0 : n] = '\0';
        return n < 0 ? -errno : n;
}

int file_write_all(int fd, const void *buf, size_t len)
{
        const char *p = buf;
        while (len > 0) {
                ssize_t n = RETRY_EINTR(write(fd, p, len));
                if (n < 0)
                        return -errno;
                if (n == 0)
                        return -EIO;
                p += n;
                len -= (size_t)n;
        }
        return 0;
}

int file_write(const char *path, const char *text, int flags, mode_t mode)
{
        _cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC | flags, mode);
        if (fd < 0)
                return -errno;
        return file_write_all(fd, text, strlen(text));
}

int file_mkdir_parents(const char *path, size_t skip)
{
        char tmp[PATH_MAX];
        if ((size_t)snprintf(tmp, sizeof(tmp), "%s", path) >= sizeof(tmp))
                return -ENAMETOOLONG;
        if (skip >= strlen(tmp))
                return 0;
        for (char *p = tmp + skip + 1; (p = strchr(p, '/')); p++) {
                *p = '\0';
                if (mkdir(tmp, 0755) < 0 && errno != EEXIST)
                        return -errno;
                *p = '/';
        }
        return 0;
}

int file_dir_each(int fd, int (*fn)(int dfd, const char *name, void *data), void *data)
{
        DIR *d = fd < 0 ? NULL : fdopendir(fd);
        if (!d) {
                int r = fd < 0 ? -EBADF : -errno;
                safe_close(fd);
                return r;
        }
        int r = 0;
        for (struct dirent *de; r == 0 && (errno = 0, de = readdir(d));)
                if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
                        r = fn(dirfd(d), de->d_name, data);
        if (r == 0 && errno)
                r = -errno;
        closedir(d);
        return r;
}

static int tree_remove_at(int dfd, const char *name, unsigned depth, unsigned max_depth);

/* depths: {this entry's depth, the most} */
static int remove_entry(int dfd, const char *name, void *depths)
{
        const unsigned *dp = depths;
        return tree_remove_at(dfd, name, dp[0], dp[1]);
}

static int tree_remove_at(int dfd, const char *name, unsigned depth, unsigned max_depth)
{
        struct stat st;
        if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return errno == ENOENT ? 0 : -errno;
        if (!S_ISDIR(st.st_mode))
                return unlinkat(dfd, name, 0) < 0 ? -errno : 0;
        if (depth >= max_depth)
                return -ELOOP;
        if ((st.st_mode & 0700) != 0700 && fchmodat(dfd, name, 0700, 0) < 0)
                return -errno;
        int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        unsigned depths[2] = {depth + 1, max_depth};
        int r = file_dir_each(fd, remove_entry, depths);
        if (r == 0 && unlinkat(dfd, name, AT_REMOVEDIR) < 0)
                r = -errno;
        return r;
}

int file_tree_remove(int dfd, const char *name, unsigned max_depth)
{
        return tree_remove_at(dfd, name, 0, max_depth);
}
