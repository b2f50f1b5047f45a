/* The run's root filesystem, built in a private mount namespace: a small
 * tmpfs root holding read-only binds of what the runtime needs, a generated
 * /etc, a four-node /dev; then pivot_root, detach the host's tree and make /
 * read-only (jail_root_build, jail_root_enter). Per run (jail_run_mounts): a
 * size-capped /tmp owned by the run's UID, a pid-only /proc, and passwd and
 * group naming the run's identity. A cold run does all of it; a zygote
 * builds the root once and each warm run adds its own part. Nothing here
 * survives the run: the namespace dies with its last process. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <linux/mount.h>
#include <linux/openat2.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "base/file.h"
#include "base/util.h"
#include "jail/jail.h"

/* The mount point for the new root inside the private namespace. Every
 * Linux host has /tmp; the tmpfs over it is invisible to the host. */
#define NEWROOT "/tmp"

static int path_in_root(char *buf, size_t size, const char *path)
{
        if ((size_t)snprintf(buf, size, NEWROOT "%s", path) >= size)
                return -ENAMETOOLONG;
        return 0;
}

/* mkdir -p for a path inside the new root (components created 0755). */
static int mkdir_parents(const char *full)
{
        return file_mkdir_parents(full, strlen(NEWROOT));
}

/* A new file of the run's root. */
static int write_text(const char *path, const char *text, mode_t mode)
{
        return file_write(path, text, O_CREAT | O_EXCL, mode);
}

/* Carry over the per-mount flags of the source (a noexec or nodev source
 * must stay so) and add read-only, nosuid, nodev. */
static int remount_ro(const char *target, unsigned long extra)
{
        struct statvfs sv;
        if (statvfs(target, &sv) < 0)
                return -errno;
        unsigned long flags = MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | extra;
        if (sv.f_flag & ST_NOEXEC)
                flags |= MS_NOEXEC;
        if (sv.f_flag & ST_NODEV)
                flags |= MS_NODEV;
        if (sv.f_flag & ST_NOATIME)
                flags |= MS_NOATIME;
        if (mount(NULL, target, NULL, flags, NULL) < 0)
                return -errno;
        return 0;
}

/* Bind one host path read-only at the same place; symlinks are recreated
 * (merged-/usr hosts have /lib -> usr/lib); missing paths are skipped. */
static int bind_ro(const char *src)
{
        char dst[PATH_MAX];
        struct stat st;
        int r = path_in_root(dst, sizeof(dst), src);
        if (r < 0)
                return r;
        if (lstat(src, &st) < 0)
                return errno == ENOENT ? 0 : -errno;
        if ((r = mkdir_parents(dst)) < 0)
                return r;
        if (S_ISLNK(st.st_mode)) {
                char target[PATH_MAX];
                ssize_t n = readlink(src, target, sizeof(target) - 1);
                if (n < 0)
                        return -errno;
                target[n] = '\0';
                if (symlink(target, dst) < 0 && errno != EEXIST)
                        return -errno;
                return 0;
        }
        if (S_ISDIR(st.st_mode)) {
                if (mkdir(dst, 0755) < 0 && errno != EEXIST)
                        return -errno;
        } else {
                _cleanup_close_ int fd = open(dst, O_WRONLY | O_CREAT | O_CLOEXEC, 0444);
                if (fd < 0)
                        return -errno;
        }
        if (mount(src, dst, NULL, MS_BIND, NULL) < 0)
                return -errno;
        /* below /etc: made read-only together, by seal_etc() */
        if (strncmp(src, "/etc/", 5) == 0)
                return 0;
        return remount_ro(dst, MS_NODEV);
}

/* Copy a small host file (resolv.conf) so a dangling symlink on the
 * host (systemd-resolved) still gives the run a usable file. */
static int copy_small(const char *src, const char *dst_in_root)
{
        char buf[65536], dst[PATH_MAX];
        int r = path_in_root(dst, sizeof(dst), dst_in_root);
        if (r < 0)
                return r;
        file_read_buf(src, buf, sizeof(buf)); /* empty when missing */
        return write_text(dst, buf, 0444);
}

/* Whether a hosts-file name is the server's: its nodename, the short form
 * of it, or a qualified name starting with the short form. */
static bool names_server(const char *name, size_t n, const char *nodename)
{
        size_t full = strlen(nodename), shortn = strcspn(nodename, ".");
        if (shortn == 0)
                return false;
        if ((n == full && strncasecmp(name, nodename, n) == 0) ||
            (n == shortn && strncasecmp(name, nodename, n) == 0))
                return true;
        return n > shortn && name[shortn] == '.' && strncasecmp(name, nodename, shortn) == 0;
}

static void emit(char *out, size_t outlen, size_t *o, const char *p, size_t n)
{
        if (*o + n < outlen) {
                memcpy(out + *o, p, n);
                *o += n;
        }
}

void jail_hosts_text(const char *host_text, const char *nodename, const char *hostname, char *out,
                     size_t outlen)
{
        size_t o = 0;
        for (const char *l = host_text; *l;) {
                size_t len = strcspn(l, "\n");
                const char *end = l + len, *hash = memchr(l, '#', len);
                const char *stop = hash ? hash : end;
                /* the address, then names */
                const char *p = l;
                while (p < stop && (*p == ' ' || *p == '\t'))
                        p++;
                const char *addr = p;
                while (p < stop && *p != ' ' && *p != '\t')
                        p++;
                size_t alen = (size_t)(p - addr);
                char names[1024];
                size_t nn = 0;
                if (alen < 64) {
                        memcpy(names, addr, alen);
                        nn = alen;
                }
                while (p < stop) {
                        while (p < stop && (*p == ' ' || *p == '\t'))
                                p++;
                        const char *name = p;
                        while (p < stop && *p != ' ' && *p != '\t')
                                p++;
                        size_t n = (size_t)(p - name);
                        if (n && nn && !names_server(name, n, nodename) &&
                            nn + n + 2 < sizeof(names)) {
                                names[nn++] = ' ';
                                memcpy(names + nn, name, n);
                                nn += n;
                        }
                }
                if (nn > alen) { /* the address and at least one name: whole or not at all */
                        names[nn++] = '\n';
                        emit(out, outlen, &o, names, nn);
                }
                l = *end ? end + 1 : end;
        }
        char own[128];
        int n = snprintf(own, sizeof(own), "127.0.1.1 %s\n", hostname);
        if (n > 0)
                emit(out, outlen, &o, own, (size_t)n);
        if (outlen)
                out[o < outlen ? o : outlen - 1] = '\0';
}

/* The host's /etc/hosts without the server's own names (see jail.h). */
static int make_hosts(const char *hostname)
{
        char in[65536], text[65536], dst[PATH_MAX];
        struct utsname u;
        int r = path_in_root(dst, sizeof(dst), "/etc/hosts");
        if (r < 0)
                return r;
        file_read_buf("/etc/hosts", in, sizeof(in)); /* empty when missing */
        if (uname(&u) < 0)
                return -errno;
        jail_hosts_text(in, u.nodename, hostname, text, sizeof(text));
        return write_text(dst, text, 0444);
}

/* /etc is a small tmpfs of its own: the generated files, and mount
 * points for the host's files the runtime lists, each bound there; once
 * all are, one call makes the whole tree read-only (seal_etc), instead of
 * a remount per file (a shell job's start binds some forty). */
static int make_etc(const char *hostname, const char *resolv_conf)
{
        char text[128];
        int r;
        if (mkdir(NEWROOT "/etc", 0755) < 0 && errno != EEXIST)
                return -errno;
        if (mount("lockbox-etc", NEWROOT "/etc", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
                  "size=1m,nr_inodes=4096,mode=0755") < 0)
                return -errno;
        /* passwd and group are per run: empty mount points here, filled by
         * jail_run_mounts() */
        if ((r = write_text(NEWROOT "/etc/passwd", "", 0444)) < 0 ||
            (r = write_text(NEWROOT "/etc/group", "", 0444)) < 0)
                return r;
        snprintf(text, sizeof(text), "%s\n", hostname);
        if ((r = write_text(NEWROOT "/etc/hostname", text, 0444)) < 0)
                return r;
        if ((r = write_text(NEWROOT "/etc/nsswitch.conf",
                            "passwd: files\ngroup: files\nhosts: files dns\n", 0444)) < 0)
                return r;
        if (resolv_conf)
                r = write_text(NEWROOT "/etc/resolv.conf", resolv_conf, 0444);
        else
                r = copy_small("/etc/resolv.conf", "/etc/resolv.conf");
        if (r < 0)
                return r;
        return make_hosts(hostname);
}

/* /etc and every bind below it: read-only, nosuid, nodev (a bind keeps
 * its source's other flags, noexec say). */
static int seal_etc(void)
{
        struct mount_attr attr = {.attr_set =
                                      MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV};
        if (syscall(SYS_mount_setattr, AT_FDCWD, NEWROOT "/etc", AT_RECURSIVE, &attr,
                    sizeof(attr)) < 0)
                return -errno;
        return 0;
}

static int make_dev(void)
{
        static const char *const nodes[] = {"null", "zero", "random", "urandom"};
        static const char *const links[][2] = {
            {"/proc/self/fd", "fd"},
            {"/proc/self/fd/0", "stdin"},
            {"/proc/self/fd/1", "stdout"},
            {"/proc/self/fd/2", "stderr"},
        };
        char src[64], dst[64];
        if (mkdir(NEWROOT "/dev", 0755) < 0)
                return -errno;
        for (size_t i = 0; i < ELEMENTSOF(nodes); i++) {
                snprintf(src, sizeof(src), "/dev/%s", nodes[i]);
                snprintf(dst, sizeof(dst), NEWROOT "/dev/%s", nodes[i]);
                _cleanup_close_ int fd = open(dst, O_WRONLY | O_CREAT | O_CLOEXEC, 0666);
                if (fd < 0)
                        return -errno;
                if (mount(src, dst, NULL, MS_BIND, NULL) < 0)
                        return -errno;
                /* null and zero take writes; random and urandom read-only */
                unsigned long ro = i >= 2 ? MS_RDONLY : 0;
                if (mount(NULL, dst, NULL, MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NOEXEC | ro,
                          NULL) < 0)
                        return -errno;
        }
        for (size_t i = 0; i < ELEMENTSOF(links); i++) {
                snprintf(dst, sizeof(dst), NEWROOT "/dev/%s", links[i][1]);
                if (symlink(links[i][0], dst) < 0)
                        return -errno;
        }
        return 0;
}

/* Write a small file under dir (the run's own /tmp), bind it read-only over
 * target, and unlink it: the mount keeps the inode, the run sees no trace. */
static int bind_generated(const char *dir, const char *target, const char *text)
{
        char src[PATH_MAX];
        if ((size_t)snprintf(src, sizeof(src), "%s/.lockbox-%ld", dir, (long)getpid()) >=
            sizeof(src))
                return -ENAMETOOLONG;
        int r = write_text(src, text, 0444);
        if (r == 0 && mount(src, target, NULL, MS_BIND, NULL) < 0)
                r = -errno;
        if (r == 0 &&
            mount(NULL, target, NULL,
                  MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
                r = -errno;
        if (unlink(src) < 0 && r == 0)
                r = -errno;
        return r;
}

static int bind_identity(const char *base, const struct jail_spec *s)
{
        char tmp[PATH_MAX], target[PATH_MAX], text[256];
        snprintf(tmp, sizeof(tmp), "%s/tmp", base);
        snprintf(text, sizeof(text),
                 "root:x:0:0:root:/root:/usr/sbin/nologin\n"
                 "sandbox:x:%u:%u:sandbox:/tmp:/usr/sbin/nologin\n",
                 (unsigned)s->uid, (unsigned)s->gid);
        snprintf(target, sizeof(target), "%s/etc/passwd", base);
        int r = bind_generated(tmp, target, text);
        if (r < 0)
                return r;
        snprintf(text, sizeof(text), "root:x:0:\nsandbox:x:%u:\n", (unsigned)s->gid);
        snprintf(target, sizeof(target), "%s/etc/group", base);
        return bind_generated(tmp, target, text);
}

/* Attach a detached mount (made read-only by the jailer with open_tree
 * and mount_setattr) at target: the new mount API needs no host path. */
static int attach_tree(int tree, const char *target)
{
        if (syscall(SYS_move_mount, tree, "", AT_FDCWD, target, MOVE_MOUNT_F_EMPTY_PATH) < 0)
                return -errno;
        return 0;
}

int jail_run_mounts(const char *base, const struct jail_spec *s)
{
        char opts[128], path[PATH_MAX];
        /* base is the run's root (a constant) or "": the paths always fit */
        if ((size_t)snprintf(opts, sizeof(opts), "size=%lld,nr_inodes=%d,mode=0700,uid=%u,gid=%u",
                             (long long)s->limits.tmp_bytes, s->limits.tmp_inodes, (unsigned)s->uid,
                             (unsigned)s->gid) >= sizeof(opts) ||
            strlen(base) + sizeof(JAIL_DEPS_PATH) > sizeof(path))
                return -ENAMETOOLONG;
        snprintf(path, sizeof(path), "%s/tmp", base);
        if (mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, opts) < 0)
                return -errno;
        /* We are pid 1 of the run's pid namespace, so this /proc shows only
         * the run; subset=pid hides /proc/sys, kcore and the rest. */
        snprintf(path, sizeof(path), "%s/proc", base);
        if (mount("proc", path, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC,
                  "hidepid=invisible,subset=pid") < 0)
                return -errno;
        snprintf(path, sizeof(path), "%s" JAIL_DEPS_PATH, base);
        int r = s->deps_fd >= 0 ? attach_tree(s->deps_fd, path) : 0;
        return r < 0 ? r : bind_identity(base, s);
}

int jail_root_enter(void)
{
        if (chdir(NEWROOT) < 0)
                return -errno;
        /* pivot_root(".", ".") stacks the old root under the new one; the
         * detach then drops the host's whole tree from this namespace. */
        if (syscall(SYS_pivot_root, ".", ".") < 0)
                return -errno;
        if (umount2(".", MNT_DETACH) < 0)
                return -errno;
        if (chdir("/") < 0)
                return -errno;
        if (mount(NULL, "/", NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL) <
            0)
                return -errno;
        return 0;
}

int jail_root_build(const char *const *ro_paths, size_t n_ro_paths, const char *hostname,
                    const char *resolv_conf)
{
        int r;
        if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
                return -errno;
        if (mount("lockbox", NEWROOT, "tmpfs", MS_NOSUID | MS_NODEV,
                  "size=1m,nr_inodes=1024,mode=0755") < 0)
                return -errno;
        if ((r = make_etc(hostname, resolv_conf)) < 0)
                return r;
        for (size_t i = 0; i < n_ro_paths; i++)
                if ((r = bind_ro(ro_paths[i])) < 0)
                        return r;
        if ((r = seal_etc()) < 0 || (r = make_dev()) < 0)
                return r;
        if (mkdir(NEWROOT "/tmp", 0755) < 0 || mkdir(NEWROOT "/proc", 0555) < 0)
                return -errno;
        /* the dependency layer's mount point, empty when there is none */
        if ((r = mkdir_parents(NEWROOT JAIL_DEPS_PATH "/")) < 0)
                return r;
        return 0;
}

int jail_mounts_setup(const struct jail_spec *s)
{
        int r = jail_root_build(s->ro_paths, s->n_ro_paths, s->hostname, s->resolv_conf);
        if (r == 0)
                r = jail_run_mounts(NEWROOT, s);
        if (r == 0)
                r = jail_root_enter();
        return r;
}

/* ---- a shell job's view (jail_view_enter) ----------------------------- */

/* Bind an O_PATH directory (or a host path when fd < 0) at path inside the
 * new root, read-write but nosuid,nodev. The directory is the one the
 * jailer resolved, whatever was renamed or linked since. */
static int bind_rw(const struct jail_view_rw *rw)
{
        char dst[PATH_MAX];
        int r = path_in_root(dst, sizeof(dst), rw->path);
        if (r < 0)
                return r;
        if ((r = file_mkdir_parents(dst, strlen(NEWROOT))) < 0)
                return r;
        if (mkdir(dst, 0755) < 0 && errno != EEXIST)
                return -errno;
        if (rw->fd >= 0)
                return attach_tree(rw->fd, dst); /* nosuid,nodev already */
        if (mount(rw->path, dst, NULL, MS_BIND | MS_REC, NULL) < 0)
                return -errno;
        if (mount(NULL, dst, NULL, MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NODEV, NULL) < 0)
                return -errno;
        return 0;
}

static int bind_file_ro(const char *path, int fd)
{
        char dst[PATH_MAX];
        int r = path_in_root(dst, sizeof(dst), path);
        if (r < 0)
                return r;
        if ((r = file_mkdir_parents(dst, strlen(NEWROOT))) < 0)
                return r;
        _cleanup_close_ int t = open(dst, O_WRONLY | O_CREAT | O_CLOEXEC, 0444);
        if (t < 0)
                return -errno;
        return attach_tree(fd, dst); /* read-only, nosuid, nodev already */
}

int jail_tree_detach(int fd, bool readonly)
{
        int tree = (int)syscall(SYS_open_tree, fd, "",
                                OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH | AT_RECURSIVE);
        if (tree < 0)
                return -errno;
        struct mount_attr attr = {.attr_set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
                                              (readonly ? MOUNT_ATTR_RDONLY : 0)};
        if (syscall(SYS_mount_setattr, tree, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr,
                    sizeof(attr)) < 0) {
                int e = errno;
                close(tree);
                return -e;
        }
        return tree;
}

/* The terminal devices: /dev/tty (the caller's controlling terminal,
 * whatever instance it is on) and a devpts instance of the job's own, so
 * its pseudo-terminals are invisible to everyone else and theirs to it. */
static int make_pts(void)
{
        _cleanup_close_ int fd = open(NEWROOT "/dev/tty", O_WRONLY | O_CREAT | O_CLOEXEC, 0666);
        if (fd < 0)
                return -errno;
        if (mount("/dev/tty", NEWROOT "/dev/tty", NULL, MS_BIND, NULL) < 0 ||
            mount(NULL, NEWROOT "/dev/tty", NULL, MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NOEXEC,
                  NULL) < 0)
                return -errno;
        if (mkdir(NEWROOT "/dev/pts", 0755) < 0)
                return -errno;
        if (mount("devpts", NEWROOT "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
                  "newinstance,ptmxmode=0666,mode=0620") < 0)
                return -errno;
        if (symlink("pts/ptmx", NEWROOT "/dev/ptmx") < 0)
                return -errno;
        /* POSIX shared memory and semaphores (Python's multiprocessing) */
        if (mkdir(NEWROOT "/dev/shm", 01777) < 0 ||
            mount("shm", NEWROOT "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
                  "mode=1777,size=64m") < 0)
                return -errno;
        return 0;
}

/* The passwd line of the job's user: its HOME as the home directory (ssh
 * reads that, not $HOME), unless passwd cannot hold it (a ':' or a newline
 * would make fields or lines of its own). */
static int bind_view_passwd(const struct jail_view *v)
{
        char text[PATH_MAX + 128];
        const char *home = strpbrk(v->home, ":\n") ? "/nonexistent" : v->home;
        if ((size_t)snprintf(text, sizeof(text),
                             "root:x:0:0:root:/root:/usr/sbin/nologin\n"
                             "sandbox:x:%u:%u:sandbox:%s:/bin/sh\n",
                             (unsigned)v->uid, (unsigned)v->gid, home) >= sizeof(text))
                return -ENAMETOOLONG;
        return bind_generated(NEWROOT "/tmp", NEWROOT "/etc/passwd", text);
}

int jail_view_enter(const struct jail_view *v)
{
        char opts[128], text[512];
        int r = jail_root_build(v->ro_paths, v->n_ro_paths, v->hostname, v->resolv_conf);
        if (r == 0)
                r = make_pts();
        if (r < 0)
                return r;
        /* /tmp: private, its pages charged to the job's memory group; first,
         * so a HOME under /tmp (tests) is bound over it, not hidden by it */
        snprintf(opts, sizeof(opts), "size=%lld,nr_inodes=65536,mode=1777",
                 (long long)v->tmp_bytes);
        if (mount("tmpfs", NEWROOT "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, opts) < 0)
                return -errno;
        for (size_t i = 0; r == 0 && i < v->n_rw; i++)
                r = bind_rw(&v->rw[i]);
        if (r == 0 && v->file_path)
                r = bind_file_ro(v->file_path, v->file_fd);
        if (r < 0)
                return r;
        /* the binding's processes (all of them the job's UID), every job's
         * listed (a job stops what an earlier one started); read-only */
        if (mount("proc", NEWROOT "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0 ||
            mount(NULL, NEWROOT "/proc", NULL,
                  MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
                return -errno;
        if ((r = bind_view_passwd(v)) < 0)
                return r;
        snprintf(text, sizeof(text), "root:x:0:\nsandbox:x:%u:\n", (unsigned)v->gid);
        if ((r = bind_generated(NEWROOT "/tmp", NEWROOT "/etc/group", text)) < 0)
                return r;
        if ((r = jail_root_enter()) < 0)
                return r;
        return v->cwd ? jail_view_chdir(v->cwd) : 0;
}

int jail_view_chdir(const char *path)
{
        struct open_how how = {.flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
                               .resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS};
        int fd = (int)syscall(SYS_openat2, AT_FDCWD, path, &how, sizeof(how));
        if (fd < 0)
                return -errno;
        int r = fchdir(fd) < 0 ? -errno : 0;
        close(fd);
        return r;
}
