/* Per-binding disk bounds: shell.home's btrfs image (disk.c) has quota
 * groups on; a HOME (shell.binding_disk) or a workspace
 * (shell.workspace_disk) is a subvolume whose quota group has a limit on
 * referenced bytes, so a job writing past it gets EDQUOT ("Disk quota
 * exceeded"), however the data came there (reflinked extents count in
 * full). Jobs can make no subvolume and touch no quota (the job filter
 * allows no btrfs ioctl but FICLONE and FICLONERANGE).
 *
 * A tree that exists as a plain directory (Dify's control scripts make
 * HOMEs with mkdir and cp -a) is converted: root makes a new subvolume
 * beside it, under a name of its own, and sets its limit; a worker forked
 * for it, as shell.uid in namespaces of its own, Landlock confining it to
 * shell.home and a syscall allowlist (policy_build_subvol), copies the
 * tree in with reflinks (metadata only, never following a symlink; modes,
 * times, user extended attributes and ACLs kept),
 * exchanges the two (renameat2 RENAME_EXCHANGE) and removes the old tree.
 * Root only ever makes, limits and destroys the subvolume it named; the
 * tree written by jobs is walked by the worker alone.
 *
 * Each conversion records its temporary name and the parent's path in
 * a file of root's (shell.state_dir) before the worker starts, and drops
 * it once the old tree is gone: a conversion cut short after the
 * exchange (a stop, a crash) leaves the record, and the next start has a
 * worker in the same jail remove that one tree (subvol_sweep_left).
 * Nothing is ever removed for its name alone. */
#include "shell/subvol.h"

#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/btrfs.h>
#include <linux/btrfs_tree.h>
#include <linux/fs.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <linux/sched.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/fd.h"
#include "base/file.h"
#include "base/log.h"
#include "base/util.h"
#include "jail/jail.h"
#include "jail/landlock.h"

#define TMP_PREFIX ".lockbox-subvol-"
#define DEPTH_MAX 256
#define WORKER_NOFILE 1024
#define LINKS_MAX 65536            /* hard-linked files remembered (beyond: copied apart) */
#define LINKS_BYTES_MAX (8u << 20) /* and the bytes of their paths, at most */

static int remove_at(int dfd, const char *name, dev_t dev, unsigned depth);

bool subvol_fs(int fd)
{
        struct statfs sf;
        return fstatfs(fd, &sf) == 0 && sf.f_type == BTRFS_SUPER_MAGIC;
}

bool subvol_is(int fd)
{
        struct stat st;
        return subvol_fs(fd) && fstat(fd, &st) == 0 && S_ISDIR(st.st_mode) &&
               st.st_ino == BTRFS_FIRST_FREE_OBJECTID;
}

int subvol_quota_enable(int fd)
{
        struct btrfs_ioctl_quota_ctl_args a = {.cmd = BTRFS_QUOTA_CTL_ENABLE};
        return ioctl(fd, BTRFS_IOC_QUOTA_CTL, &a) < 0 ? -errno : 0;
}

int subvol_quota_disable(int fd)
{
        struct btrfs_ioctl_quota_ctl_args a = {.cmd = BTRFS_QUOTA_CTL_DISABLE};
        if (ioctl(fd, BTRFS_IOC_QUOTA_CTL, &a) == 0)
                return 1;
        return errno == ENOENT ? 0 : -errno; /* ENOENT: they were off */
}

int subvol_limit(int fd, uint64_t bytes)
{
        /* qgroupid 0: the subvolume fd lies in */
        struct btrfs_ioctl_qgroup_limit_args a = {
            .lim = {.flags = BTRFS_QGROUP_LIMIT_MAX_RFER,
                    .max_rfer = bytes ? bytes : (uint64_t)-1}};
        return ioctl(fd, BTRFS_IOC_QGROUP_LIMIT, &a) < 0 ? -errno : 0;
}

static uint64_t sys_u64(const char *dir, const char *name)
{
        char path[256], buf[32];
        snprintf(path, sizeof(path), "%s/%s", dir, name);
        ssize_t n = file_read_buf(path, buf, sizeof(buf));
        return n > 0 ? strtoull(buf, NULL, 10) : 0;
}

/* /sys/fs/btrfs/<fsid>/qgroups/0_<id> of the subvolume whose root is
 * fd: 0, or -1. */
static int qgroup_dir(int fd, char *dir, size_t len)
{
        struct btrfs_ioctl_fs_info_args fi = {0};
        struct btrfs_ioctl_ino_lookup_args il = {.objectid = BTRFS_FIRST_FREE_OBJECTID};
        if (!subvol_is(fd) || ioctl(fd, BTRFS_IOC_FS_INFO, &fi) < 0 ||
            ioctl(fd, BTRFS_IOC_INO_LOOKUP, &il) < 0)
                return -1;
        int n = snprintf(dir, len, "/sys/fs/btrfs/");
        for (int i = 0; i < BTRFS_FSID_SIZE; i++)
                n += snprintf(dir + n, len - (size_t)n, "%s%02x",
                              i == 4 || i == 6 || i == 8 || i == 10 ? "-" : "", fi.fsid[i]);
        snprintf(dir + n, len - (size_t)n, "/qgroups/0_%llu", (unsigned long long)il.treeid);
        return 0;
}

int subvol_limit_ensure(int fd, uint64_t bytes)
{
        char dir[160];
        if (qgroup_dir(fd, dir, sizeof(dir)) == 0 && sys_u64(dir, "max_referenced") == bytes)
                return 0;
        return subvol_limit(fd, bytes);
}

bool subvol_full(int fd)
{
        char dir[160];
        if (qgroup_dir(fd, dir, sizeof(dir)) < 0)
                return false;
        uint64_t max = sys_u64(dir, "max_referenced");
        if (max == 0 || max == (uint64_t)-1)
                return false;
        uint64_t used = sys_u64(dir, "referenced") + sys_u64(dir, "rsv_data") +
                        sys_u64(dir, "rsv_meta_pertrans") + sys_u64(dir, "rsv_meta_prealloc");
        return used + max / 32 >= max;
}

/* One search of tree for items of type between objectid lo..hi: the
 * number found (at most a buffer's worth), their headers walked by fn. */
static int search(int fd, uint64_t tree, uint64_t lo, uint64_t hi, uint32_t type, uint64_t off_lo,
                  uint64_t off_hi, struct btrfs_ioctl_search_args *a)
{
        memset(a, 0, sizeof(*a));
        a->key = (struct btrfs_ioctl_search_key){.tree_id = tree,
                                                 .min_objectid = lo,
                                                 .max_objectid = hi,
                                                 .min_type = type,
                                                 .max_type = type,
                                                 .min_offset = off_lo,
                                                 .max_offset = off_hi,
                                                 .max_transid = (uint64_t)-1,
                                                 .nr_items = 4096};
        return ioctl(fd, BTRFS_IOC_TREE_SEARCH, a) < 0 ? -errno : (int)a->key.nr_items;
}

static bool root_exists(int fd, uint64_t id)
{
        static struct btrfs_ioctl_search_args a;
        int n =
            search(fd, BTRFS_ROOT_TREE_OBJECTID, id, id, BTRFS_ROOT_ITEM_KEY, 0, (uint64_t)-1, &a);
        return n != 0; /* an error counts as there: nothing is removed on doubt */
}

int subvol_sweep(int fd)
{
        static struct btrfs_ioctl_search_args a;
        uint64_t next = BTRFS_FIRST_FREE_OBJECTID;
        int removed = 0;
        for (;;) {
                /* level-0 quota groups (a subvolume's): key (0, INFO, id) */
                int n = search(fd, BTRFS_QUOTA_TREE_OBJECTID, 0, 0, BTRFS_QGROUP_INFO_KEY, next,
                               (1ULL << 48) - 1, &a);
                if (n < 0)
                        return n == -ENOENT ? removed : n; /* quotas off */
                if (n == 0)
                        return removed;
                size_t at = 0;
                for (int i = 0; i < n; i++) {
                        struct btrfs_ioctl_search_header h;
                        memcpy(&h, a.buf + at, sizeof(h));
                        at += sizeof(h) + h.len;
                        next = h.offset + 1;
                        if (h.offset < BTRFS_FIRST_FREE_OBJECTID || root_exists(fd, h.offset))
                                continue;
                        struct btrfs_ioctl_qgroup_create_args c = {.create = 0,
                                                                   .qgroupid = h.offset};
                        if (ioctl(fd, BTRFS_IOC_QGROUP_CREATE, &c) == 0)
                                removed++;
                }
                if (next == 0 || next >= (1ULL << 48))
                        return removed;
        }
}

int subvol_sweep_tmp(int fd)
{
        static struct btrfs_ioctl_search_args a;
        uint64_t next = BTRFS_FIRST_FREE_OBJECTID;
        int removed = 0;
        for (;;) {
                /* each subvolume's link to its parent: key (id,
                 * ROOT_BACKREF, parent), a btrfs_root_ref and the name */
                int n = search(fd, BTRFS_ROOT_TREE_OBJECTID, next, BTRFS_LAST_FREE_OBJECTID,
                               BTRFS_ROOT_BACKREF_KEY, 0, (uint64_t)-1, &a);
                if (n <= 0)
                        return n < 0 ? n : removed;
                size_t at = 0;
                for (int i = 0; i < n; i++) {
                        struct btrfs_ioctl_search_header h;
                        struct btrfs_root_ref ref;
                        memcpy(&h, a.buf + at, sizeof(h));
                        const char *item = a.buf + at + sizeof(h);
                        at += sizeof(h) + h.len;
                        next = h.objectid + 1;
                        if (h.type != BTRFS_ROOT_BACKREF_KEY || h.len < sizeof(ref))
                                continue;
                        memcpy(&ref, item, sizeof(ref));
                        size_t len = le16toh(ref.name_len);
                        if (len != strlen(TMP_PREFIX) + 16 || sizeof(ref) + len > h.len ||
                            memcmp(item + sizeof(ref), TMP_PREFIX, strlen(TMP_PREFIX)) != 0)
                                continue;
                        struct btrfs_ioctl_vol_args_v2 d = {.flags = BTRFS_SUBVOL_SPEC_BY_ID,
                                                            .subvolid = h.objectid};
                        if (ioctl(fd, BTRFS_IOC_SNAP_DESTROY_V2, &d) == 0)
                                removed++;
                        else
                                log_warn(NULL, "shell.subvol_destroy_failed", "id=%llu error=%s",
                                         (unsigned long long)h.objectid, log_q(strerror(errno)));
                }
                if (next == 0 || next > BTRFS_LAST_FREE_OBJECTID)
                        return removed;
        }
}

/* ---- the worker (as shell.uid) --------------------------------------------- */

struct link_seen {
        ino_t ino;
        char *path; /* relative to the new tree's root */
};

struct copy {
        int dst_root;
        dev_t dev; /* the tree's: another (a nested subvolume, a mount) is refused */
        char path[PATH_MAX];
        struct link_seen *links;
        size_t n_links, links_bytes;
        char msg[256];
        char buf[65536];
        char names[XATTR_LIST_MAX];
};

_printf_(2, 3) static int cfail(struct copy *c, const char *fmt, ...)
{
        if (!c->msg[0]) {
                va_list ap;
                va_start(ap, fmt);
                vsnprintf(c->msg, sizeof(c->msg), fmt, ap);
                va_end(ap);
        }
        return -1;
}

/* The extended attributes a job may set (user.*, and POSIX ACLs, which
 * cp -a keeps too) from in to out; others (security.*, trusted.*) are
 * root's, which a job never set. */
static int copy_xattrs(struct copy *c, int in, int out)
{
        ssize_t len = flistxattr(in, c->names, sizeof(c->names));
        if (len < 0)
                return errno == ENOTSUP ? 0 : -errno;
        for (const char *n = c->names; n < c->names + len; n += strlen(n) + 1) {
                if (strncmp(n, "user.", 5) != 0 && strncmp(n, "system.posix_acl_", 17) != 0)
                        continue;
                ssize_t v = fgetxattr(in, n, c->buf, sizeof(c->buf));
                if (v < 0 && errno == ENODATA)
                        continue; /* removed meanwhile */
                if (v < 0 || fsetxattr(out, n, c->buf, (size_t)v, 0) < 0)
                        return -errno;
        }
        return 0;
}

static int copy_data(struct copy *c, int in, int out)
{
        if (ioctl(out, FICLONE, in) == 0)
                return 0;
        for (;;) {
                ssize_t n = read(in, c->buf, sizeof(c->buf));
                if (n < 0)
                        return -errno;
                if (n == 0)
                        return 0;
                for (ssize_t done = 0; done < n;) {
                        ssize_t w = write(out, c->buf + done, (size_t)(n - done));
                        if (w < 0)
                                return -errno;
                        done += w;
                }
        }
}

static int copy_file(struct copy *c, int src, int dst, const char *name, const struct stat *st)
{
        int flags = O_RDONLY | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK | O_CLOEXEC;
        _cleanup_close_ int in = openat(src, name, flags);
        /* the owner may have taken its own read right away: lent (the
         * old tree goes anyway) */
        if (in < 0 && errno == EACCES &&
            fchmodat(src, name, (st->st_mode & 07777) | S_IRUSR, 0) == 0)
                in = openat(src, name, flags);
        if (in < 0)
                return cfail(c, "%s: %s", c->path, strerror(errno));
        _cleanup_close_ int out =
            openat(dst, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (out < 0)
                return cfail(c, "%s: %s", c->path, strerror(errno));
        int r = copy_data(c, in, out);
        if (r == 0)
                r = copy_xattrs(c, in, out);
        if (r < 0)
                return cfail(c, "%s: %s", c->path, strerror(-r));
        if (fchmod(out, st->st_mode & 07777) < 0 ||
            futimens(out, (struct timespec[]){st->st_atim, st->st_mtim}) < 0)
                return cfail(c, "%s: %s", c->path, strerror(errno));
        return 0;
}

static int copy_dir(struct copy *c, int src, int dst, size_t plen, unsigned depth);

/* src/name to dst/name; c->path holds its path, plen its length. */
static int copy_one(struct copy *c, int src, int dst, const char *name, size_t plen, unsigned depth)
{
        struct stat st;
        if (fstatat(src, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return errno == ENOENT ? 0 : cfail(c, "%s: %s", c->path, strerror(errno));
        if (st.st_dev != c->dev)
                return cfail(c, "%s is another subvolume or a mount", c->path);
        struct timespec times[2] = {st.st_atim, st.st_mtim};
        if (S_ISDIR(st.st_mode)) {
                if (depth + 1 >= DEPTH_MAX)
                        return cfail(c, "%s: more than %d levels", c->path, DEPTH_MAX);
                /* lent, as a file's read right below */
                if ((st.st_mode & 0700) != 0700 &&
                    fchmodat(src, name, (st.st_mode & 07777) | 0700, 0) < 0)
                        return cfail(c, "%s: %s", c->path, strerror(errno));
                if (mkdirat(dst, name, 0700) < 0)
                        return cfail(c, "%s: %s", c->path, strerror(errno));
                int a = openat(src, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                _cleanup_close_ int b =
                    openat(dst, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (a < 0 || b < 0) {
                        safe_close(a);
                        return cfail(c, "%s: %s", c->path, strerror(errno));
                }
                if (copy_dir(c, a, b, plen, depth + 1) < 0)
                        return -1;
                /* after its entries, so a default ACL gives them nothing
                 * they had not */
                _cleanup_close_ int again =
                    openat(src, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                int r = again < 0 ? -errno : copy_xattrs(c, again, b);
                if (r < 0)
                        return cfail(c, "%s: %s", c->path, strerror(-r));
                if (fchmod(b, st.st_mode & 07777) < 0 || futimens(b, times) < 0)
                        return cfail(c, "%s: %s", c->path, strerror(errno));
                return 0;
        }
        if (S_ISLNK(st.st_mode)) {
                char target[PATH_MAX];
                ssize_t n = readlinkat(src, name, target, sizeof(target) - 1);
                if (n < 0)
                        return cfail(c, "%s: %s", c->path, strerror(errno));
                target[n] = '\0';
                if (symlinkat(target, dst, name) < 0 ||
                    utimensat(dst, name, times, AT_SYMLINK_NOFOLLOW) < 0)
                        return cfail(c, "%s: %s", c->path, strerror(errno));
                return 0;
        }
        if (S_ISFIFO(st.st_mode)) {
                if (mkfifoat(dst, name, 0600) < 0 ||
                    fchmodat(dst, name, st.st_mode & 07777, 0) < 0 ||
                    utimensat(dst, name, times, AT_SYMLINK_NOFOLLOW) < 0)
                        return cfail(c, "%s: %s", c->path, strerror(errno));
                return 0;
        }
        if (!S_ISREG(st.st_mode))
                return 0; /* sockets (nothing listens there any more), devices */
        if (st.st_nlink > 1) {
                for (size_t i = 0; i < c->n_links; i++)
                        if (c->links[i].ino == st.st_ino) {
                                if (linkat(c->dst_root, c->links[i].path, dst, name, 0) < 0)
                                        return cfail(c, "%s: %s", c->path, strerror(errno));
                                return 0;
                        }
        }
        if (copy_file(c, src, dst, name, &st) < 0)
                return -1;
        size_t plen_all = strlen(c->path) + 1;
        if (st.st_nlink > 1 && c->n_links < LINKS_MAX &&
            c->links_bytes + plen_all <= LINKS_BYTES_MAX) {
                if (c->n_links % 64 == 0) {
                        struct link_seen *l =
                            realloc(c->links, (c->n_links + 64) * sizeof(*c->links));
                        if (!l)
                                return cfail(c, "out of memory");
                        c->links = l;
                }
                char *p = strdup(c->path);
                if (!p)
                        return cfail(c, "out of memory");
                c->links[c->n_links++] = (struct link_seen){.ino = st.st_ino, .path = p};
                c->links_bytes += plen_all;
        }
        return 0;
}

struct copy_at {
        struct copy *c;
        int dst;
        size_t plen;
        unsigned depth;
};

static int copy_entry(int src, const char *name, void *data)
{
        const struct copy_at *a = data;
        struct copy *c = a->c;
        size_t n = strlen(name), at = a->plen ? a->plen + 1 : 0;
        if (at + n >= sizeof(c->path))
                return cfail(c, "a path is longer than %d bytes", PATH_MAX);
        if (a->plen)
                c->path[a->plen] = '/';
        memcpy(c->path + at, name, n + 1);
        int r = copy_one(c, src, a->dst, name, at + n, a->depth);
        c->path[a->plen] = '\0';
        return r;
}

/* src (taken) to dst: the directory at c->path[0, plen). */
static int copy_dir(struct copy *c, int src, int dst, size_t plen, unsigned depth)
{
        struct copy_at at = {c, dst, plen, depth};
        int r = file_dir_each(src, copy_entry, &at);
        /* a message of an entry's, if it has one, is kept */
        return r < 0 ? cfail(c, "listing %s: %s", plen ? c->path : ".", strerror(-r)) : 0;
}

static int lock_down(const struct subvol_conv *cv, int dst, int report, const char **step)
{
        int keep[] = {cv->parent_fd, dst, report};
        int r;
        *step = "pdeathsig";
        if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 ||
            prctl(PR_SET_NAME, "lockbox-subvol", 0, 0, 0) < 0)
                return -errno;
        *step = "signals";
        if ((r = jail_signals_reset()) < 0)
                return r;
        fd_close_all_except(0, keep, ELEMENTSOF(keep));
        *step = "mount namespace";
        if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
                return -errno;
        *step = "rlimits";
        if (setrlimit(RLIMIT_NOFILE, &(struct rlimit){WORKER_NOFILE, WORKER_NOFILE}) < 0 ||
            setrlimit(RLIMIT_CORE, &(struct rlimit){0, 0}) < 0)
                return -errno;
        *step = "identity";
        if ((r = jail_identity_drop(cv->uid, cv->uid)) < 0)
                return r;
        *step = "landlock";
        const char *rw[] = {cv->home};
        r = landlock_restrict_paths(rw, 1, NULL, 0, NULL, 0, true);
        if (r < 0 && r != -EOPNOTSUPP)
                return r;
        *step = "seccomp";
        int listener = policy_load(cv->filter);
        if (listener < 0)
                return listener;
        close(listener);
        return 0;
}

static _Noreturn void worker(const struct subvol_conv *cv, const char *tmp, int dst, int report)
{
        static struct copy c;
        const char *step = "";
        prctl(PR_SET_NAME, "lockbox-subvol", 0, 0, 0);
        int r = lock_down(cv, dst, report, &step);
        if (r < 0) {
                cfail(&c, "worker: %s: %s", step, strerror(-r));
                goto out;
        }
        struct stat st;
        int src = openat(cv->parent_fd, cv->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (src < 0 || fstat(src, &st) < 0) {
                cfail(&c, "%s", strerror(errno));
                safe_close(src);
                goto out;
        }
        c.dst_root = dst;
        c.dev = st.st_dev;
        if (copy_dir(&c, src, dst, 0, 0) < 0)
                goto out;
        src = openat(cv->parent_fd, cv->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        r = src < 0 ? -errno : copy_xattrs(&c, src, dst);
        safe_close(src);
        if (r < 0) {
                cfail(&c, "%s", strerror(-r));
                goto out;
        }
        if (fchmod(dst, st.st_mode & 07777) < 0 ||
            futimens(dst, (struct timespec[]){st.st_atim, st.st_mtim}) < 0 ||
            renameat2(cv->parent_fd, tmp, cv->parent_fd, cv->name, RENAME_EXCHANGE) < 0) {
                cfail(&c, "%s", strerror(errno));
                goto out;
        }
        /* now tmp names the old tree */
        r = remove_at(cv->parent_fd, tmp, st.st_dev, 0);
        if (r < 0)
                cfail(&c, "removing the old tree: %s", strerror(-r));
out:
        if (c.msg[0])
                RETRY_EINTR(write(report, c.msg, strlen(c.msg)));
        _exit(c.msg[0] ? 1 : 0);
}

/* ---- the remover (as shell.uid) ------------------------------------------ */

struct remove_in {
        dev_t dev;
        unsigned depth;
};

static int remove_entry(int dfd, const char *name, void *data)
{
        const struct remove_in *in = data;
        return remove_at(dfd, name, in->dev, in->depth);
}

/* The directory dfd/name opened to be listed; one its owner closed is
 * opened up to it first, through the very inode looked up without a
 * symlink (fchmodat of the name would follow one a job swapped in since,
 * and chmod is no Landlock right). A descriptor, or -errno. */
static int open_dir_lent(int dfd, const char *name)
{
        int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd >= 0 || errno != EACCES)
                return fd < 0 ? -errno : fd;
        _cleanup_close_ int at = openat(dfd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        char proc[64];
        snprintf(proc, sizeof(proc), "/proc/self/fd/%d", at);
        if (at < 0 || fchmodat(AT_FDCWD, proc, 0700, 0) < 0)
                return -errno;
        fd = openat(at, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        return fd < 0 ? -errno : fd;
}

/* dfd/name and all below it, never following a symlink, never entering
 * another file system or subvolume (the removal stops there with EXDEV:
 * what a control job moved in is left); a directory its owner closed is
 * opened up to it first. 0 (also when absent) or -errno. */
static int remove_at(int dfd, const char *name, dev_t dev, unsigned depth)
{
        struct stat st;
        if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return errno == ENOENT ? 0 : -errno;
        if (!S_ISDIR(st.st_mode))
                return unlinkat(dfd, name, 0) < 0 && errno != ENOENT ? -errno : 0;
        if (st.st_dev != dev)
                return -EXDEV;
        if (depth >= DEPTH_MAX)
                return -ELOOP;
        int fd = open_dir_lent(dfd, name);
        if (fd < 0)
                return fd;
        if (fstat(fd, &st) < 0 || st.st_dev != dev) { /* swapped in since */
                int r = st.st_dev != dev ? -EXDEV : -errno;
                close(fd);
                return r;
        }
        struct remove_in in = {dev, depth + 1};
        int r = file_dir_each(fd, remove_entry, &in);
        if (r == 0 && unlinkat(dfd, name, AT_REMOVEDIR) < 0)
                r = -errno;
        return r;
}

/* The leftover tree cv->parent_fd/cv->name, a plain directory (not a
 * subvolume, which the start's sweep destroys), removed. */
static _Noreturn void remover(const struct subvol_conv *cv, int report)
{
        char msg[256] = "";
        const char *step = "";
        struct stat pst, st;
        int r = lock_down(cv, -1, report, &step);
        if (r < 0) {
                snprintf(msg, sizeof(msg), "worker: %s: %s", step, strerror(-r));
                goto out;
        }
        _cleanup_close_ int fd =
            openat(cv->parent_fd, cv->name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0 && errno == ENOENT)
                goto out;
        if (fd < 0 || fstat(fd, &st) < 0 || fstat(cv->parent_fd, &pst) < 0) {
                snprintf(msg, sizeof(msg), "%s", strerror(errno));
                goto out;
        }
        if (st.st_dev != pst.st_dev || st.st_ino == BTRFS_FIRST_FREE_OBJECTID) {
                snprintf(msg, sizeof(msg), "not a plain directory: left");
                goto out;
        }
        r = remove_at(cv->parent_fd, cv->name, pst.st_dev, 0);
        if (r < 0)
                snprintf(msg, sizeof(msg), "%s", strerror(-r));
out:
        if (msg[0])
                RETRY_EINTR(write(report, msg, strlen(msg)));
        _exit(msg[0] ? 1 : 0);
}

/* ---- root's side --------------------------------------------------------- */

static int tmp_name(char *buf, size_t len)
{
        uint8_t rnd[8];
        if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
                return -EIO;
        int n = snprintf(buf, len, TMP_PREFIX);
        for (size_t i = 0; i < sizeof(rnd); i++)
                n += snprintf(buf + n, len - (size_t)n, "%02x", rnd[i]);
        return 0;
}

static int make_subvol(int parent, const char *name)
{
        struct btrfs_ioctl_vol_args a = {0};
        snprintf(a.name, sizeof(a.name), "%s", name);
        return ioctl(parent, BTRFS_IOC_SUBVOL_CREATE, &a) < 0 ? -errno : 0;
}

static void destroy_subvol(int parent, const char *name)
{
        struct btrfs_ioctl_vol_args a = {0};
        snprintf(a.name, sizeof(a.name), "%s", name);
        if (ioctl(parent, BTRFS_IOC_SNAP_DESTROY, &a) < 0)
                log_warn(NULL, "shell.subvol_destroy_failed", "name=%s error=%s", log_q(name),
                         log_q(strerror(errno)));
}

/* The record of a conversion (see the top): tmp's file in dir, holding
 * the parent's path beneath shell.home, written through before the
 * worker may exchange anything. 0 or -errno. */
static int record_write(int dir, const char *tmp, const char *parent_rel)
{
        _cleanup_close_ int fd =
            openat(dir, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
                return -errno;
        int r = file_write_all(fd, parent_rel, strlen(parent_rel));
        if (r == 0 && fsync(fd) < 0)
                r = -errno;
        if (r < 0)
                unlinkat(dir, tmp, 0);
        return r;
}

static void record_drop(int dir, const char *tmp)
{
        if (dir >= 0 && unlinkat(dir, tmp, 0) < 0 && errno != ENOENT)
                log_warn(NULL, "shell.subvol_record_failed", "name=%s error=%s", log_q(tmp),
                         log_q(strerror(errno)));
}

/* A worker in new mount, PID, network and IPC namespaces: its pid (0 in
 * it) and *pidfd, or -errno. */
static pid_t spawn(int *pidfd)
{
        struct clone_args args = {
            .flags = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_PIDFD,
            .pidfd = (uint64_t)(uintptr_t)pidfd,
            .exit_signal = SIGCHLD,
        };
        pid_t pid = (pid_t)syscall(SYS_clone3, &args, sizeof(args));
        return pid < 0 ? -errno : pid;
}

/* A conversion under way (see subvol.h): its worker and what it made. */
struct subvol_pending {
        int parent_fd; /* a copy of the caller's */
        int record_fd; /* and of the records' directory */
        char name[NAME_MAX + 1];
        char tmp[64];
        int dst, report_r, pidfd;
        pid_t pid;
        struct stat made;
        uint64_t limit;
        int timeout_ms;
        int64_t t0;
        bool killed; /* before it ended (its deadline, or a stop) */
};

static struct subvol_pending *pending_free(struct subvol_pending *p)
{
        if (p) {
                safe_close(p->parent_fd);
                safe_close(p->record_fd);
                safe_close(p->dst);
                safe_close(p->report_r);
                safe_close(p->pidfd);
                free(p);
        }
        return NULL;
}

int subvol_pending_fd(const struct subvol_pending *p)
{
        return p->pidfd;
}

int subvol_convert_start(const struct subvol_conv *cv, struct subvol_pending **ret, char *err,
                         size_t errlen)
{
        struct subvol_pending *p = calloc(1, sizeof(*p));
        if (!p || strlen(cv->name) >= sizeof(p->name)) {
                free(p);
                snprintf(err, errlen, "%s", p ? "name too long" : "out of memory");
                return p ? -ENAMETOOLONG : -ENOMEM;
        }
        *p = (struct subvol_pending){.parent_fd = fcntl(cv->parent_fd, F_DUPFD_CLOEXEC, 3),
                                     .record_fd = fcntl(cv->record_fd, F_DUPFD_CLOEXEC, 3),
                                     .dst = -1,
                                     .report_r = -1,
                                     .pidfd = -1,
                                     .limit = cv->limit,
                                     .timeout_ms = cv->timeout_ms,
                                     .t0 = monotonic_ms()};
        snprintf(p->name, sizeof(p->name), "%s", cv->name);
        int r = p->parent_fd < 0 || p->record_fd < 0 ? -errno : tmp_name(p->tmp, sizeof(p->tmp));
        /* recorded first: a crash between the two leaves a subvolume of
         * that name, which the start's sweep destroys, and the record */
        if (r == 0 && (r = record_write(p->record_fd, p->tmp, cv->parent_rel)) < 0) {
                snprintf(err, errlen, "recording the move: %s", strerror(-r));
                pending_free(p);
                return r;
        }
        if (r == 0)
                r = make_subvol(p->parent_fd, p->tmp);
        if (r < 0) {
                snprintf(err, errlen, "making a subvolume: %s", strerror(-r));
                record_drop(p->record_fd, p->tmp);
                pending_free(p);
                return r;
        }
        int pipefd[2] = {-1, -1};
        p->dst = openat(p->parent_fd, p->tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (p->dst < 0 || fstat(p->dst, &p->made) < 0 || fchown(p->dst, cv->uid, cv->uid) < 0 ||
            pipe2(pipefd, O_CLOEXEC) < 0)
                r = -errno;
        else if (!subvol_is(p->dst))
                r = -EIO; /* not what was made: another's in between */
        if (r < 0) {
                snprintf(err, errlen, "setting up the subvolume: %s", strerror(-r));
                destroy_subvol(p->parent_fd, p->tmp);
                record_drop(p->record_fd, p->tmp);
                pending_free(p);
                return r;
        }
        p->report_r = pipefd[0];
        _cleanup_close_ int report_w = pipefd[1];
        pid_t pid = spawn(&p->pidfd);
        if (pid < 0) {
                r = pid;
                snprintf(err, errlen, "starting the worker: %s", strerror(-r));
                destroy_subvol(p->parent_fd, p->tmp);
                record_drop(p->record_fd, p->tmp);
                pending_free(p);
                return r;
        }
        if (pid == 0)
                worker(cv, p->tmp, p->dst, report_w);
        p->pid = pid;
        *ret = p;
        return 0;
}

bool subvol_pending_swapped(const struct subvol_pending *p)
{
        /* the name now holds the subvolume made above */
        struct stat now;
        _cleanup_close_ int at =
            openat(p->parent_fd, p->name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        return at >= 0 && fstat(at, &now) == 0 && now.st_dev == p->made.st_dev &&
               now.st_ino == p->made.st_ino;
}

void subvol_convert_kill(struct subvol_pending *p)
{
        if (!p->killed)
                syscall(SYS_pidfd_send_signal, p->pidfd, SIGKILL, NULL, 0);
        p->killed = true;
}

int subvol_convert_finish(struct subvol_pending *p, bool kill, char *err, size_t errlen)
{
        int status = 0;
        bool stop = kill;
        if (kill)
                subvol_convert_kill(p);
        kill = p->killed;
        waitpid(p->pid, &status, 0);
        char msg[256] = "";
        ssize_t n = read(p->report_r, msg, sizeof(msg) - 1);
        msg[n > 0 ? n : 0] = '\0';
        if (subvol_pending_swapped(p)) {
                /* the limit only now: what the tree held is moved in
                 * whole, even past its bound (then its jobs' writes fail
                 * until they remove some) */
                int r = subvol_limit(p->dst, p->limit);
                if (r < 0)
                        log_warn(NULL, "shell.subvol_limit_failed", "name=%s error=%s",
                                 log_q(p->name), log_q(strerror(-r)));
                /* no commit asked for here (BTRFS_IOC_START_SYNC blocks
                 * while other writers hold the transaction): the moved
                 * tree counts from the kernel's next one (30 s at most) */
                if (msg[0] || kill) /* the old tree left in part: the next start */
                        log_warn(NULL, "shell.subvol_leftover",
                                 "name=%s error=%s: removed at the next start", log_q(p->tmp),
                                 log_q(kill ? "killed while removing the old tree" : msg));
                else
                        record_drop(p->record_fd, p->tmp);
                log_info(NULL, "shell.subvol_converted", "name=%s limit=%llu ms=%lld",
                         log_q(p->name), (unsigned long long)p->limit,
                         (long long)(monotonic_ms() - p->t0));
                pending_free(p);
                return 0;
        }
        destroy_subvol(p->parent_fd, p->tmp);
        record_drop(p->record_fd, p->tmp);
        if (stop)
                snprintf(err, errlen, "lockboxd stopped while the tree was being moved in");
        else if (kill)
                snprintf(err, errlen, "moving the tree in took longer than %d ms", p->timeout_ms);
        else
                snprintf(err, errlen, "%s",
                         msg[0]                ? msg
                         : WIFSIGNALED(status) ? "the worker was killed"
                                               : "failed");
        pending_free(p);
        return kill ? -ETIMEDOUT : -EIO;
}

/* ---- leftovers of conversions cut short ----------------------------------- */

static bool record_name(const char *n)
{
        size_t k = strlen(TMP_PREFIX);
        if (strncmp(n, TMP_PREFIX, k) != 0 || strlen(n) != k + 16)
                return false;
        return strspn(n + k, "0123456789abcdef") == 16;
}

/* One record: its leftover removed within the time left (ms). 1 removed
 * (or nothing there), 0 left for the next start (the record kept),
 * -errno when nothing can be done (the record dropped, said). */
static int sweep_one(const struct subvol_sweep *s, const char *tmp, int64_t left_ms)
{
        char rel[PATH_MAX];
        _cleanup_close_ int rfd = openat(s->record_fd, tmp, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        ssize_t n = rfd < 0 ? -1 : read(rfd, rel, sizeof(rel) - 1);
        if (n <= 0)
                return n < 0 ? -errno : -EINVAL;
        rel[n] = '\0';
        /* as the conversion opened it: beneath shell.home, no symlink */
        struct open_how how = {.flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC,
                               .resolve =
                                   RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS};
        _cleanup_close_ int parent = (int)syscall(SYS_openat2, s->home_fd, rel, &how, sizeof(how));
        if (parent < 0)
                return errno == ENOENT ? 1 : -errno; /* gone with its parent */
        struct stat st;
        if (fstatat(parent, tmp, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return errno == ENOENT ? 1 : -errno;
        int pipefd[2];
        if (pipe2(pipefd, O_CLOEXEC) < 0)
                return -errno;
        _cleanup_close_ int report_r = pipefd[0];
        _cleanup_close_ int report_w = pipefd[1];
        struct subvol_conv cv = {
            .parent_fd = parent, .name = tmp, .home = s->home, .uid = s->uid, .filter = s->filter};
        _cleanup_close_ int pidfd = -1;
        pid_t pid = spawn(&pidfd);
        if (pid < 0)
                return pid;
        if (pid == 0)
                remover(&cv, report_w);
        report_w = safe_close(report_w);
        struct pollfd pfd = {.fd = pidfd, .events = POLLIN};
        int64_t t0 = monotonic_ms();
        int pr;
        for (;;) {
                int64_t wait = left_ms - (monotonic_ms() - t0);
                pr = poll(&pfd, 1, wait > 0 ? (int)wait : 0);
                if (pr >= 0 || errno != EINTR)
                        break;
        }
        bool killed = pr == 0;
        if (killed)
                syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
        int status = 0;
        waitpid(pid, &status, 0);
        char msg[256] = "";
        n = read(report_r, msg, sizeof(msg) - 1);
        msg[n > 0 ? n : 0] = '\0';
        if (killed) {
                log_warn(NULL, "shell.subvol_leftover_kept",
                         "name=%s parent=%s: not removed within %lld ms, the next start goes on",
                         log_q(tmp), log_q(rel), (long long)left_ms);
                return 0;
        }
        if (msg[0] || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                log_warn(NULL, "shell.subvol_leftover_failed", "name=%s parent=%s error=%s",
                         log_q(tmp), log_q(rel), log_q(msg[0] ? msg : "the worker failed"));
                return -ECANCELED; /* said */
        }
        log_info(NULL, "shell.subvol_leftover_removed", "name=%s parent=%s ms=%lld", log_q(tmp),
                 log_q(rel), (long long)(monotonic_ms() - t0));
        return 1;
}

int subvol_sweep_left(const struct subvol_sweep *s)
{
        _cleanup_close_ int fd = openat(s->record_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR *d = fd < 0 ? NULL : fdopendir(fd);
        if (!d)
                return -errno;
        fd = -1;
        /* the names first: the directory changes under readdir below */
        char(*names)[64] = NULL;
        size_t n = 0;
        int r = 0;
        for (struct dirent *de; (errno = 0, de = readdir(d));) {
                if (!record_name(de->d_name))
                        continue;
                if (n % 16 == 0) {
                        void *more = realloc(names, (n + 16) * sizeof(*names));
                        if (!more) {
                                r = -ENOMEM;
                                break;
                        }
                        names = more;
                }
                snprintf(names[n++], sizeof(*names), "%s", de->d_name);
        }
        closedir(d);
        int64_t end = monotonic_ms() + s->timeout_ms;
        int removed = 0;
        for (size_t i = 0; r == 0 && i < n; i++) {
                int64_t left = end - monotonic_ms();
                int k = left > 0 ? sweep_one(s, names[i], left) : 0;
                if (k < 0 && k != -ECANCELED)
                        log_warn(NULL, "shell.subvol_leftover_failed", "name=%s error=%s",
                                 log_q(names[i]), log_q(strerror(-k)));
                if (k != 0)
                        unlinkat(s->record_fd, names[i], 0);
                removed += k > 0;
        }
        free(names);
        return r < 0 ? r : removed;
}
