/* Sealing and removing the installer's tree through descriptors (see
 * deps_tree.h). */
#include "deps/deps_tree.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/util.h"

/* Deeper than any package tree; a deeper one is refused, not recursed. */
#define MAX_DEPTH 64

static int open_dir_at(int dirfd, const char *name)
{
        int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        return fd < 0 ? -errno : fd;
}

/* Each entry of the directory open at fd (its "." and ".." skipped), with
 * its type as fstatat without following saw it, to fn; stops at the first
 * error. fd stays open and the caller's. */
static int each_entry(int fd, int (*fn)(int dirfd, const char *name, mode_t type, void *data),
                      void *data)
{
        int dup = fcntl(fd, F_DUPFD_CLOEXEC, 3);
        if (dup < 0)
                return -errno;
        DIR *d = fdopendir(dup);
        if (!d) {
                int e = errno;
                close(dup);
                return -e;
        }
        int r = 0;
        for (struct dirent *e; r == 0 && (errno = 0, e = readdir(d));) {
                struct stat st;
                if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                        continue;
                if (fstatat(fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
                        r = errno == ENOENT ? 0 : -errno;
                        continue;
                }
                r = fn(fd, e->d_name, st.st_mode & S_IFMT, data);
        }
        if (r == 0 && errno)
                r = -errno;
        closedir(d);
        return r;
}

/* ---- sealing ------------------------------------------------------------------- */

struct seal {
        uid_t installer;
        int depth;
};

static bool owned_by(const struct stat *st, uid_t installer)
{
        return st->st_uid == installer || st->st_uid == 0;
}

static int seal_dir_fd(int fd, struct seal *s);

static int seal_file(int dirfd, const char *name, struct seal *s)
{
        struct stat st;
        _cleanup_close_ int fd =
            openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
        if (fd < 0)
                return -errno; /* a symlink now, say: the install is refused */
        if (fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode) || !owned_by(&st, s->installer) || st.st_nlink != 1)
                return -EPERM;
        mode_t mode = (st.st_mode & 0111) ? 0755 : 0644;
        if (fchown(fd, 0, 0) < 0 || fchmod(fd, mode) < 0)
                return -errno;
        return 0;
}

static int seal_entry(int dirfd, const char *name, mode_t type, void *data)
{
        struct seal *s = data;
        if (type == S_IFLNK) /* the link itself, never its target */
                return fchownat(dirfd, name, 0, 0, AT_SYMLINK_NOFOLLOW) < 0 ? -errno : 0;
        if (type == S_IFREG)
                return seal_file(dirfd, name, s);
        if (type == S_IFDIR) {
                int fd = open_dir_at(dirfd, name);
                if (fd < 0)
                        return fd;
                s->depth++;
                int r = s->depth > MAX_DEPTH ? -ELOOP : seal_dir_fd(fd, s);
                s->depth--;
                close(fd);
                return r;
        }
        /* sockets, fifos: nothing a layer needs */
        return unlinkat(dirfd, name, 0) < 0 && errno != ENOENT ? -errno : 0;
}

/* The directory first: once it is root's 0755, the installer can neither
 * add, rename nor remove its entries. */
static int seal_dir_fd(int fd, struct seal *s)
{
        struct stat st;
        if (fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISDIR(st.st_mode) || !owned_by(&st, s->installer))
                return -EPERM;
        if (fchown(fd, 0, 0) < 0 || fchmod(fd, 0755) < 0)
                return -errno;
        return each_entry(fd, seal_entry, s);
}

/* rel's components, opened one by one without following symlinks. */
static int open_rel(int dirfd, const char *rel, bool parent, char *ret_last, size_t len)
{
        char buf[4096];
        if (snprintf(buf, sizeof(buf), "%s", rel) >= (int)sizeof(buf))
                return -ENAMETOOLONG;
        int fd = fcntl(dirfd, F_DUPFD_CLOEXEC, 3);
        if (fd < 0)
                return -errno;
        char *save = NULL, *next;
        for (char *c = strtok_r(buf, "/", &save); c; c = next) {
                next = strtok_r(NULL, "/", &save);
                if (strcmp(c, "..") == 0 || strcmp(c, ".") == 0) {
                        close(fd);
                        return -EINVAL;
                }
                if (!next && parent) {
                        snprintf(ret_last, len, "%s", c);
                        return fd;
                }
                int sub = open_dir_at(fd, c);
                close(fd);
                if (sub < 0)
                        return sub;
                fd = sub;
        }
        return parent ? (close(fd), -EINVAL) : fd;
}

int deps_tree_seal(int dirfd, const char *rel, uid_t installer)
{
        struct seal s = {.installer = installer};
        int fd = open_rel(dirfd, rel, false, NULL, 0);
        if (fd < 0)
                return fd;
        int r = seal_dir_fd(fd, &s);
        close(fd);
        return r;
}

/* ---- removing ------------------------------------------------------------------ */

static int remove_entry(int dirfd, const char *name, mode_t type, void *data)
{
        int *depth = data;
        if (type == S_IFDIR) {
                int fd = open_dir_at(dirfd, name);
                if (fd == -ELOOP || fd == -ENOTDIR) /* swapped for a link: remove that */
                        return unlinkat(dirfd, name, 0) < 0 && errno != ENOENT ? -errno : 0;
                if (fd < 0)
                        return fd == -ENOENT ? 0 : fd;
                (*depth)++;
                int r = *depth > MAX_DEPTH ? -ELOOP : each_entry(fd, remove_entry, depth);
                (*depth)--;
                close(fd);
                if (r < 0)
                        return r;
                return unlinkat(dirfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT ? -errno : 0;
        }
        return unlinkat(dirfd, name, 0) < 0 && errno != ENOENT ? -errno : 0;
}

int deps_tree_remove(int dirfd, const char *rel)
{
        char last[256];
        int parent = open_rel(dirfd, rel, true, last, sizeof(last));
        if (parent < 0)
                return parent == -ENOENT ? 0 : parent;
        struct stat st;
        int depth = 0, r = 0;
        if (fstatat(parent, last, &st, AT_SYMLINK_NOFOLLOW) == 0)
                r = remove_entry(parent, last, st.st_mode & S_IFMT, &depth);
        else if (errno != ENOENT)
                r = -errno;
        close(parent);
        return r;
}
