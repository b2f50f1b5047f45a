/* The snapshot worker (see snapshot_worker.h). Its lock steps, in order:
 * parent-death signal, default signals (SIGPIPE ignored: a closed pipe is
 * an error, not a death), only its three descriptors, a private mount
 * namespace (PID, network and IPC ones came with the clone), rlimits,
 * into HOME, shell.uid with no capabilities and no_new_privs, for a save
 * a user namespace of its own keeping CAP_DAC_READ_SEARCH alone, Landlock
 * (read beneath HOME for a save, read-write for a restore, nothing
 * else), the syscall allowlist (policy_build_snapshot).
 *
 * Save walks HOME itself (never following a symlink, never entering an
 * excluded directory) and writes a pax tar through zstd into the pipe,
 * bounded in entries and archive bytes; what is not a regular file, a
 * directory or a symlink (fifos, sockets, devices) is left out.
 *
 * Restore reads tar (zstd or not) from the pipe, bounded in archive
 * bytes, entries and file bytes, and checks every entry before libarchive
 * writes it: no absolute path, no "..", only regular files, directories,
 * symlinks and hard links to a regular file already unpacked (reached
 * without a symlink); devices, fifos and sockets refuse the archive;
 * setuid, setgid and sticky bits are dropped. It unpacks into a staging
 * directory under HOME/.local (which saves never include), libarchive's
 * secure flags on (no path through a symlink); only after the whole
 * archive was read and checked is the staging tree moved into HOME:
 * an entry absent from HOME is renamed in, a directory present in both is
 * merged, anything else in HOME in an entry's way is removed first (as
 * the reference, which unpacks over HOME; files of HOME the archive does
 * not name stay). A refused archive leaves HOME as it was. */
#include "shell/snapshot_worker.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/fd.h"
#include "base/file.h"
#include "base/util.h"
#include "ipc/shell_proto.h"
#include "jail/jail.h"
#include "jail/landlock.h"
#include "shell/exclude.h"

#define DEPTH_MAX 256              /* directory levels walked, unpacked or merged */
#define WORKER_NOFILE 1024         /* two descriptors a level at most, and libarchive's */
#define WORKER_DATA (512ull << 20) /* heap: zstd's windows and libarchive's buffers */
#define IO_CHUNK 65536

struct worker {
        const struct snap_spec *s;
        struct snap_result res;
        uint64_t io_bytes; /* archive bytes through the pipe */
        bool over_bound;   /* ... passed max_bytes */
        bool pipe_error;
        char path[PATH_MAX];
        struct exclude_set *x;
        char buf[IO_CHUNK];
};

/* Record the first failure (later ones follow from it); -1. */
_printf_(3, 4) static int wfail(struct worker *w, uint32_t kind, const char *fmt, ...)
{
        if (w->res.kind != SNAP_OK)
                return -1;
        w->res.kind = kind;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(w->res.message, sizeof(w->res.message), fmt, ap);
        va_end(ap);
        return -1;
}

/* ---- the lock steps ------------------------------------------------------ */

static int step_rlimits(const struct snap_spec *s)
{
        const struct {
                int res;
                rlim_t v;
        } lim[] = {
            {RLIMIT_NOFILE, WORKER_NOFILE},
            {RLIMIT_DATA, WORKER_DATA},
            {RLIMIT_CORE, 0},
            {RLIMIT_FSIZE, (rlim_t)s->max_bytes},
        };
        for (size_t i = 0; i < ELEMENTSOF(lim); i++)
                if (setrlimit(lim[i].res, &(struct rlimit){lim[i].v, lim[i].v}) < 0)
                        return -errno;
        return 0;
}

static int step_landlock(const struct snap_spec *s)
{
        const char *home[] = {s->home};
        bool save = s->op == SHELL_SNAPSHOT_SAVE;
        int r = landlock_restrict_paths(save ? NULL : home, save ? 0 : 1, save ? home : NULL,
                                        save ? 1 : 0, NULL, 0, true);
        return r == -EOPNOTSUPP ? 0 : r;
}

static int lock_down(const struct snap_spec *s, const char **ret_step)
{
        int keep[] = {s->data_fd, s->res_fd, s->home_fd};
        int r = 0;
        *ret_step = "pdeathsig";
        if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 ||
            prctl(PR_SET_NAME, "lockbox-snap", 0, 0, 0) < 0)
                return -errno;
        *ret_step = "signals";
        if ((r = jail_signals_reset()) < 0)
                return r;
        signal(SIGPIPE, SIG_IGN);
        fd_close_all_except(0, keep, ELEMENTSOF(keep)); /* stdio too: nothing to say there */
        *ret_step = "mount namespace";
        if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
                return -errno;
        *ret_step = "rlimits";
        if ((r = step_rlimits(s)) < 0)
                return r;
        *ret_step = "home";
        if (fchdir(s->home_fd) < 0)
                return -errno;
        *ret_step = "identity";
        if ((r = jail_identity_drop(s->uid, s->uid)) < 0)
                return r;
        /* a save reads what the jobs closed even to themselves (chmod
         * 000): CAP_DAC_READ_SEARCH over the jobs' UID's inodes alone, in
         * a user namespace of its own, no mode ever changed */
        *ret_step = "user namespace";
        if (s->op == SHELL_SNAPSHOT_SAVE && (r = jail_userns_read_all(s->uid, s->uid)) < 0)
                return r;
        *ret_step = "landlock";
        if ((r = step_landlock(s)) < 0)
                return r;
        *ret_step = "seccomp";
        int listener = policy_load(s->filter);
        if (listener < 0)
                return listener;
        close(listener);
        return 0;
}

/* ---- save ---------------------------------------------------------------- */

static la_ssize_t save_write(struct archive *a, void *ctx, const void *buf, size_t n)
{
        struct worker *w = ctx;
        if (w->io_bytes + n > w->s->max_bytes) {
                w->over_bound = true;
                archive_set_error(a, EFBIG,
                                  "the archive would be larger than %llu bytes "
                                  "(shell.snapshot_max_bytes)",
                                  (unsigned long long)w->s->max_bytes);
                return -1;
        }
        for (size_t done = 0; done < n;) {
                ssize_t k = RETRY_EINTR(write(w->s->data_fd, (const char *)buf + done, n - done));
                if (k <= 0) {
                        w->pipe_error = true;
                        archive_set_error(a, k < 0 ? errno : EIO, "the stream was closed");
                        return -1;
                }
                done += (size_t)k;
        }
        w->io_bytes += n;
        return (la_ssize_t)n;
}

static int save_data(struct worker *w, struct archive *a, int fd, int64_t size)
{
        while (size > 0) {
                size_t want = size < IO_CHUNK ? (size_t)size : IO_CHUNK;
                ssize_t n = RETRY_EINTR(read(fd, w->buf, want));
                if (n < 0)
                        return wfail(w, SNAP_FAILED, "reading %s: %s", w->path, strerror(errno));
                if (n == 0)
                        break; /* it shrank: libarchive pads the entry */
                if (archive_write_data(a, w->buf, (size_t)n) < 0)
                        return wfail(w, SNAP_FAILED, "%s", archive_error_string(a));
                size -= n;
        }
        return 0;
}

/* One entry's header and data (not a directory's contents). */
static int save_entry(struct worker *w, struct archive *a, int dfd, const char *name,
                      const struct stat *st)
{
        _cleanup_close_ int fd = -1;
        char target[PATH_MAX];
        if (S_ISREG(st->st_mode) &&
            (fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC)) < 0)
                return wfail(w, SNAP_FAILED, "opening %s: %s", w->path, strerror(errno));
        ssize_t tl = S_ISLNK(st->st_mode) ? readlinkat(dfd, name, target, sizeof(target) - 1) : 0;
        if (tl < 0)
                return wfail(w, SNAP_FAILED, "reading the link %s: %s", w->path, strerror(errno));
        target[tl] = '\0';
        struct archive_entry *e = archive_entry_new();
        if (!e)
                return wfail(w, SNAP_FAILED, "out of memory");
        archive_entry_set_pathname(e, w->path);
        archive_entry_set_filetype(e, st->st_mode & S_IFMT);
        archive_entry_set_perm(e, st->st_mode & 07777);
        archive_entry_set_size(e, S_ISREG(st->st_mode) ? st->st_size : 0);
        archive_entry_set_mtime(e, st->st_mtim.tv_sec, st->st_mtim.tv_nsec);
        archive_entry_set_uid(e, st->st_uid);
        archive_entry_set_gid(e, st->st_gid);
        if (S_ISLNK(st->st_mode))
                archive_entry_set_symlink(e, target);
        int r = archive_write_header(a, e) < ARCHIVE_WARN
                    ? wfail(w, SNAP_FAILED, "%s: %s", w->path, archive_error_string(a))
                    : 0;
        archive_entry_free(e);
        if (r == 0 && fd >= 0)
                r = save_data(w, a, fd, st->st_size);
        if (r == 0 && archive_write_finish_entry(a) < ARCHIVE_WARN)
                r = wfail(w, SNAP_FAILED, "%s: %s", w->path, archive_error_string(a));
        return r;
}

static int save_dir(struct worker *w, struct archive *a, int fd, size_t plen, unsigned depth);

/* The entry name of the directory dfd, whose path is w->path[0, plen). */
static int save_one(struct worker *w, struct archive *a, int dfd, const char *name, size_t plen,
                    unsigned depth)
{
        size_t n = strlen(name), at = plen ? plen + 1 : 0;
        if (at + n >= sizeof(w->path))
                return wfail(w, SNAP_FAILED, "a path in HOME is longer than %d bytes", PATH_MAX);
        if (plen)
                w->path[plen] = '/';
        memcpy(w->path + at, name, n + 1);
        struct stat st;
        int r = 0;
        if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
                if (errno != ENOENT) /* gone meanwhile: not in the snapshot */
                        r = wfail(w, SNAP_FAILED, "%s: %s", w->path, strerror(errno));
                goto out;
        }
        bool dir = S_ISDIR(st.st_mode);
        int ex = exclude_set_match(w->x, w->path, dir);
        if (ex < 0) {
                r = wfail(w, SNAP_FAILED, "an exclude pattern is too complex to match %s", w->path);
                goto out;
        }
        if (ex || !(dir || S_ISREG(st.st_mode) || S_ISLNK(st.st_mode)))
                goto out;
        if (++w->res.entries > w->s->max_entries) {
                r = wfail(w, SNAP_FAILED,
                          "HOME holds more than %llu entries "
                          "(shell.snapshot_max_entries)",
                          (unsigned long long)w->s->max_entries);
                goto out;
        }
        r = save_entry(w, a, dfd, name, &st);
        if (r == 0 && dir) {
                int sub = depth + 1 < DEPTH_MAX
                              ? openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
                              : (errno = ELOOP, -1);
                r = sub < 0 ? wfail(w, SNAP_FAILED, "%s: %s", w->path, strerror(errno))
                            : save_dir(w, a, sub, at + n, depth + 1);
        }
out:
        w->path[plen] = '\0';
        return r;
}

struct save_at {
        struct worker *w;
        struct archive *a;
        size_t plen;
        unsigned depth;
};

static int save_entry_at(int dfd, const char *name, void *data)
{
        const struct save_at *at = data;
        /* never: the workspace, .local (state, a restore's staging), and
         * the file system's own lost+found (root's) */
        if (at->depth == 0 && (strcmp(name, "workspace") == 0 || strcmp(name, ".local") == 0 ||
                               strcmp(name, "lost+found") == 0))
                return 0;
        return save_one(at->w, at->a, dfd, name, at->plen, at->depth);
}

/* fd (taken) is the directory at w->path[0, plen). */
static int save_dir(struct worker *w, struct archive *a, int fd, size_t plen, unsigned depth)
{
        struct save_at at = {w, a, plen, depth};
        int r = file_dir_each(fd, save_entry_at, &at);
        /* an entry's own message, if it has one, is kept */
        return r < 0
                   ? wfail(w, SNAP_FAILED, "listing %s: %s", plen ? w->path : "HOME", strerror(-r))
                   : 0;
}

static void save_home(struct worker *w)
{
        const struct snap_spec *s = w->s;
        if (exclude_set_new(s->patterns, s->n_patterns, &w->x) < 0) {
                wfail(w, SNAP_FAILED, "out of memory");
                return;
        }
        struct archive *a = archive_write_new();
        if (!a || archive_write_add_filter_zstd(a) != ARCHIVE_OK ||
            archive_write_set_format_pax_restricted(a) != ARCHIVE_OK ||
            archive_write_set_bytes_in_last_block(a, 1) != ARCHIVE_OK ||
            archive_write_open2(a, w, NULL, save_write, NULL, NULL) != ARCHIVE_OK) {
                wfail(w, SNAP_FAILED, "starting the archive: %s",
                      a ? archive_error_string(a) : "out of memory");
                archive_write_free(a);
                return;
        }
        int home = openat(s->home_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        int r = home < 0 ? wfail(w, SNAP_FAILED, "HOME: %s", strerror(errno))
                         : save_dir(w, a, home, 0, 0);
        if (r == 0 && archive_write_close(a) != ARCHIVE_OK)
                wfail(w, SNAP_FAILED, "%s", archive_error_string(a));
        archive_write_free(a);
        w->res.bytes = w->io_bytes;
}

/* ---- restore: removing and moving trees ----------------------------------- */

static int copy_in(int src, int dst, const char *name, const struct stat *st, unsigned depth);

/* src/name into dst/name (absent there). Moving a directory to another
 * parent needs write access to it: lent for the rename. Into another
 * btrfs subvolume (a bounded HOME or workspace, shell.binding_disk) a
 * rename fails with EXDEV: copied then, as mv does. */
static int move_in(int src, int dst, const char *name, const struct stat *st)
{
        bool lend = S_ISDIR(st->st_mode) && !(st->st_mode & S_IWUSR);
        if (lend && fchmodat(src, name, (st->st_mode & 07777) | S_IWUSR, 0) < 0)
                return -errno;
        int r = renameat(src, name, dst, name) < 0 ? -errno : 0;
        if (r == -EXDEV)
                return copy_in(src, dst, name, st, 0);
        if (lend && fchmodat(r == 0 ? dst : src, name, st->st_mode & 07777, 0) < 0 && r == 0)
                r = -errno;
        return r;
}

static int copy_file_in(int src, int dst, const char *name, const struct stat *st)
{
        _cleanup_close_ int in = openat(src, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        _cleanup_close_ int out =
            in < 0 ? -1
                   : openat(dst, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (in < 0 || out < 0)
                return -errno;
        char buf[IO_CHUNK];
        for (ssize_t n; (n = read(in, buf, sizeof(buf))) != 0;) {
                if (n < 0)
                        return -errno;
                for (ssize_t done = 0; done < n;) {
                        ssize_t w = write(out, buf + done, (size_t)(n - done));
                        if (w < 0)
                                return -errno;
                        done += w;
                }
        }
        return 0;
}

/* src/name copied to dst/name (absent there), its mode and times kept
 * (the staging tree, which goes anyway, is left as it is). Only what
 * the archive may hold: directories, regular files, symlinks. */
static int copy_in(int src, int dst, const char *name, const struct stat *st, unsigned depth)
{
        struct timespec times[2] = {st->st_atim, st->st_mtim};
        int r = 0;
        if (S_ISLNK(st->st_mode)) {
                char target[PATH_MAX];
                ssize_t n = readlinkat(src, name, target, sizeof(target) - 1);
                if (n < 0)
                        return -errno;
                target[n] = '\0';
                return symlinkat(target, dst, name) < 0 ? -errno : 0;
        }
        if (S_ISREG(st->st_mode))
                r = copy_file_in(src, dst, name, st);
        else if (!S_ISDIR(st->st_mode))
                return -EINVAL;
        else if (depth + 1 >= DEPTH_MAX)
                return -ELOOP;
        else if (mkdirat(dst, name, 0700) < 0)
                return -errno;
        else {
                _cleanup_close_ int a =
                    openat(src, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                _cleanup_close_ int b =
                    openat(dst, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                int fd = a < 0 || b < 0 ? -1 : openat(a, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                DIR *d = fd < 0 ? NULL : fdopendir(fd);
                if (!d) {
                        safe_close(fd);
                        return -errno;
                }
                for (struct dirent *de; r == 0 && (de = readdir(d));) {
                        struct stat s;
                        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                                continue;
                        r = fstatat(a, de->d_name, &s, AT_SYMLINK_NOFOLLOW) < 0
                                ? -errno
                                : copy_in(a, b, de->d_name, &s, depth + 1);
                }
                closedir(d);
        }
        if (r == 0 && (fchmodat(dst, name, st->st_mode & 07777, 0) < 0 ||
                       utimensat(dst, name, times, AT_SYMLINK_NOFOLLOW) < 0))
                r = -errno;
        return r;
}

struct merge {
        struct worker *w;
        struct stat stage; /* the staging directory: never merged into itself */
};

static int merge_dir(struct merge *m, int src, int dst, unsigned depth);

static int merge_both_dirs(struct merge *m, int src, int dst, const char *name,
                           const struct stat *s, const struct stat *t, unsigned depth)
{
        if (depth + 1 >= DEPTH_MAX)
                return -ELOOP;
        if ((t->st_mode & 0700) != 0700 && fchmodat(dst, name, (t->st_mode & 07777) | 0700, 0) < 0)
                return -errno;
        if ((s->st_mode & 0700) != 0700 && fchmodat(src, name, (s->st_mode & 07777) | 0700, 0) < 0)
                return -errno;
        _cleanup_close_ int a = openat(src, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        _cleanup_close_ int b = openat(dst, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (a < 0 || b < 0)
                return -errno;
        int r = merge_dir(m, a, b, depth + 1);
        /* the archive's mode and time, as unpacking over it would leave */
        if (r == 0 && (fchmod(b, s->st_mode & 07777) < 0 ||
                       futimens(b, (struct timespec[]){s->st_atim, s->st_mtim}) < 0))
                r = -errno;
        return r;
}

static int merge_one(struct merge *m, int src, int dst, const char *name, unsigned depth)
{
        struct stat s, t;
        if (fstatat(src, name, &s, AT_SYMLINK_NOFOLLOW) < 0)
                return -errno;
        if (fstatat(dst, name, &t, AT_SYMLINK_NOFOLLOW) < 0)
                return errno == ENOENT ? move_in(src, dst, name, &s) : -errno;
        if (t.st_dev == m->stage.st_dev && t.st_ino == m->stage.st_ino)
                return 0;
        if (S_ISDIR(s.st_mode) && S_ISDIR(t.st_mode))
                return merge_both_dirs(m, src, dst, name, &s, &t, depth);
        int r = file_tree_remove(dst, name, DEPTH_MAX);
        return r < 0 ? r : move_in(src, dst, name, &s);
}

struct merge_at {
        struct merge *m;
        int src, dst;
        unsigned depth;
};

static int merge_entry(int dfd, const char *name, void *data)
{
        const struct merge_at *at = data;
        (void)dfd; /* the same directory as at->src */
        return merge_one(at->m, at->src, at->dst, name, at->depth);
}

static int merge_dir(struct merge *m, int src, int dst, unsigned depth)
{
        /* opened again, not duplicated: btrfs lists only the entries a
         * directory had when its file was opened, and the staging
         * directory was opened before the archive was unpacked in it */
        int fd = openat(src, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        struct merge_at at = {m, src, dst, depth};
        return file_dir_each(fd, merge_entry, &at);
}

/* ---- restore: reading and checking the archive ---------------------------- */

static la_ssize_t restore_read(struct archive *a, void *ctx, const void **buf)
{
        struct worker *w = ctx;
        ssize_t n = RETRY_EINTR(read(w->s->data_fd, w->buf, sizeof(w->buf)));
        if (n < 0) {
                w->pipe_error = true;
                archive_set_error(a, errno, "reading the upload: %s", strerror(errno));
                return -1;
        }
        if (w->io_bytes + (uint64_t)n > w->s->max_bytes) {
                w->over_bound = true;
                archive_set_error(a, EFBIG,
                                  "the archive is larger than %llu bytes "
                                  "(shell.snapshot_max_bytes)",
                                  (unsigned long long)w->s->max_bytes);
                return -1;
        }
        w->io_bytes += (uint64_t)n;
        *buf = w->buf;
        return n;
}

/* Why path may not be unpacked, or NULL. *ret_root: it names the staging
 * directory itself ("." or "./"). */
static const char *path_problem(const char *p, bool *ret_root)
{
        *ret_root = false;
        if (!p || !*p)
                return "an empty path";
        if (*p == '/')
                return "an absolute path";
        if (strlen(p) >= PATH_MAX - 64)
                return "a path too long";
        bool only_dots = true;
        for (const char *c = p; *c;) {
                size_t n = strcspn(c, "/");
                if (n == 2 && c[0] == '.' && c[1] == '.')
                        return "a \"..\" component";
                if (!(n == 0 || (n == 1 && c[0] == '.')))
                        only_dots = false;
                c += n;
                while (*c == '/')
                        c++;
        }
        *ret_root = only_dots;
        return NULL;
}

/* A regular file at path beneath dirfd, reached without any symlink. */
static bool regular_beneath(int dirfd, const char *path)
{
        struct open_how how = {.flags = O_PATH | O_NOFOLLOW | O_CLOEXEC,
                               .resolve =
                                   RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS};
        _cleanup_close_ int fd = (int)syscall(SYS_openat2, dirfd, path, &how, sizeof(how));
        struct stat st;
        return fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
}

/* A write to the staging tree failed: the archive's fault (a hostile
 * path libarchive's secure flags refused) or the disk's. */
static uint32_t write_kind(int e)
{
        switch (e) {
        case ENOSPC:
        case EDQUOT:
        case EIO:
        case EROFS:
        case ENOMEM:
        case EMFILE:
        case ENFILE:
                return SNAP_FAILED;
        default:
                return SNAP_MALFORMED;
        }
}

/* A read of the archive failed: over a bound, the pipe, or malformed. */
static int read_failed(struct worker *w, struct archive *in)
{
        if (w->pipe_error)
                return wfail(w, SNAP_FAILED, "%s", archive_error_string(in));
        return wfail(w, SNAP_MALFORMED, "%s%s", w->over_bound ? "" : "malformed archive: ",
                     archive_error_string(in) ? archive_error_string(in) : "unreadable");
}

static int check_entry(struct worker *w, struct archive_entry *e, int stage, bool *ret_skip)
{
        const char *path = archive_entry_pathname(e);
        const char *why = path_problem(path, ret_skip);
        if (why)
                return wfail(w, SNAP_MALFORMED, "archive entry %s: %s", path ? path : "", why);
        const char *link = archive_entry_hardlink(e);
        bool root;
        if (link && ((why = path_problem(link, &root)) || root || !regular_beneath(stage, link)))
                return wfail(w, SNAP_MALFORMED,
                             "archive entry %s: a hard link must name a regular file unpacked "
                             "before it, inside HOME",
                             path);
        mode_t type = archive_entry_filetype(e);
        if (!link && type != AE_IFREG && type != AE_IFDIR && type != AE_IFLNK)
                return wfail(w, SNAP_MALFORMED,
                             "archive entry %s: devices, fifos and sockets are not restored", path);
        if (*ret_skip && type != AE_IFDIR)
                return wfail(w, SNAP_MALFORMED, "archive entry %s: not a directory", path);
        /* no setuid, setgid or sticky bit, no owner, ACL or attribute */
        archive_entry_set_perm(e, archive_entry_perm(e) & 0777);
        return 0;
}

static int copy_data(struct worker *w, struct archive *in, struct archive *out)
{
        for (;;) {
                const void *b;
                size_t n;
                la_int64_t off;
                int r = archive_read_data_block(in, &b, &n, &off);
                if (r == ARCHIVE_EOF)
                        return 0;
                if (r < ARCHIVE_WARN)
                        return read_failed(w, in);
                if (w->res.bytes + n > w->s->max_bytes)
                        return wfail(w, SNAP_MALFORMED,
                                     "the archive unpacks to more than %llu bytes "
                                     "(shell.snapshot_max_bytes)",
                                     (unsigned long long)w->s->max_bytes);
                w->res.bytes += n;
                if (archive_write_data_block(out, b, n, off) < ARCHIVE_WARN)
                        return wfail(w, write_kind(archive_errno(out)), "%s",
                                     archive_error_string(out));
        }
}

static int restore_entries(struct worker *w, struct archive *in, struct archive *out, int stage)
{
        for (;;) {
                struct archive_entry *e;
                int r = archive_read_next_header(in, &e);
                if (r == ARCHIVE_EOF)
                        return 0;
                if (r < ARCHIVE_WARN)
                        return read_failed(w, in);
                if (++w->res.entries > w->s->max_entries)
                        return wfail(w, SNAP_MALFORMED,
                                     "the archive holds more than %llu entries "
                                     "(shell.snapshot_max_entries)",
                                     (unsigned long long)w->s->max_entries);
                bool skip = false;
                if (check_entry(w, e, stage, &skip) < 0)
                        return -1;
                if (skip)
                        continue;
                int64_t size = archive_entry_size_is_set(e) ? archive_entry_size(e) : 0;
                if (size < 0 || (uint64_t)size > w->s->max_bytes - w->res.bytes)
                        return wfail(w, SNAP_MALFORMED,
                                     "the archive unpacks to more than %llu bytes "
                                     "(shell.snapshot_max_bytes)",
                                     (unsigned long long)w->s->max_bytes);
                if (archive_write_header(out, e) < ARCHIVE_WARN)
                        return wfail(w, write_kind(archive_errno(out)), "archive entry %s: %s",
                                     archive_entry_pathname(e), archive_error_string(out));
                if (copy_data(w, in, out) < 0)
                        return -1;
                if (archive_write_finish_entry(out) < ARCHIVE_WARN)
                        return wfail(w, write_kind(archive_errno(out)), "archive entry %s: %s",
                                     archive_entry_pathname(e), archive_error_string(out));
        }
}

/* Unpack the whole archive into the staging directory (the cwd). */
static int restore_unpack(struct worker *w, int stage)
{
        const int flags = ARCHIVE_EXTRACT_TIME | ARCHIVE_EXTRACT_PERM |
                          ARCHIVE_EXTRACT_SECURE_SYMLINKS | ARCHIVE_EXTRACT_SECURE_NODOTDOT |
                          ARCHIVE_EXTRACT_SECURE_NOABSOLUTEPATHS;
        struct archive *in = archive_read_new(), *out = archive_write_disk_new();
        int r;
        if (!in || !out || archive_read_support_filter_zstd(in) != ARCHIVE_OK ||
            archive_read_support_format_tar(in) != ARCHIVE_OK ||
            archive_write_disk_set_options(out, flags) != ARCHIVE_OK)
                r = wfail(w, SNAP_FAILED, "starting libarchive");
        else if (archive_read_open(in, w, NULL, restore_read, NULL) != ARCHIVE_OK)
                r = read_failed(w, in);
        else
                r = restore_entries(w, in, out, stage);
        /* the directories' modes and times are set at close */
        if (r == 0 && archive_write_close(out) != ARCHIVE_OK)
                r = wfail(w, write_kind(archive_errno(out)), "%s", archive_error_string(out));
        archive_write_free(out);
        archive_read_free(in);
        return r;
}

/* HOME/.local (made when absent; never through a symlink). */
static int open_local(int home)
{
        if (mkdirat(home, ".local", 0700) < 0 && errno != EEXIST)
                return -errno;
        int fd = openat(home, ".local", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        return fd < 0 ? -errno : fd;
}

/* Staging directories a killed restore left behind. */
static void remove_stale(int local)
{
        int fd = fcntl(local, F_DUPFD_CLOEXEC, 3);
        DIR *d = fd < 0 ? NULL : fdopendir(fd);
        if (!d) {
                safe_close(fd);
                return;
        }
        for (struct dirent *de; (de = readdir(d));)
                if (strncmp(de->d_name, SNAP_STAGING_PREFIX, strlen(SNAP_STAGING_PREFIX)) == 0)
                        file_tree_remove(local, de->d_name, DEPTH_MAX);
        closedir(d);
}

static int make_staging(int local, char *name, size_t len)
{
        uint8_t rnd[8];
        if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
                return -EIO;
        int n = snprintf(name, len, SNAP_STAGING_PREFIX);
        for (size_t i = 0; i < sizeof(rnd); i++)
                n += snprintf(name + n, len - (size_t)n, "%02x", rnd[i]);
        if (mkdirat(local, name, 0700) < 0)
                return -errno;
        int fd = openat(local, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        return fd < 0 ? -errno : fd;
}

static void restore_home(struct worker *w)
{
        const struct snap_spec *s = w->s;
        char name[64];
        _cleanup_close_ int local = open_local(s->home_fd);
        if (local < 0) {
                wfail(w, SNAP_FAILED, "HOME/.local: %s", strerror(-local));
                return;
        }
        remove_stale(local);
        _cleanup_close_ int stage = make_staging(local, name, sizeof(name));
        if (stage < 0 || fchdir(stage) < 0) {
                wfail(w, SNAP_FAILED, "staging directory: %s",
                      strerror(stage < 0 ? -stage : errno));
                return;
        }
        int r = restore_unpack(w, stage);
        /* the upload is read: an HTTP side still writing sees EPIPE */
        close(s->data_fd);
        struct merge m = {.w = w};
        if (r == 0 && fstat(stage, &m.stage) < 0)
                r = wfail(w, SNAP_FAILED, "staging directory: %s", strerror(errno));
        if (r == 0 && (r = merge_dir(&m, stage, s->home_fd, 0)) < 0)
                wfail(w, SNAP_FAILED, "moving the restored files into HOME: %s", strerror(-r));
        if (fchdir(s->home_fd) == 0)
                file_tree_remove(local, name, DEPTH_MAX);
}

_Noreturn void snapshot_worker_main(const struct snap_spec *s)
{
        static struct worker w;
        w = (struct worker){.s = s};
        const char *step = "";
        int r = lock_down(s, &step);
        if (r < 0)
                wfail(&w, SNAP_FAILED, "snapshot worker: %s: %s", step, strerror(-r));
        else if (s->op == SHELL_SNAPSHOT_SAVE)
                save_home(&w);
        else
                restore_home(&w);
        if (w.res.kind != SNAP_OK)
                w.res.entries = w.res.bytes = 0;
        RETRY_EINTR(send(s->res_fd, &w.res, sizeof(w.res), MSG_NOSIGNAL));
        _exit(0);
}
