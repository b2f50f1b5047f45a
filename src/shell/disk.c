/* shell.home on a file system of its own (shell.disk_size): an image
 * under shell.state_dir, attached to a loop device and mounted at
 * shell.home, so whatever jobs write there (every binding's HOME and
 * workspace) can never fill the host's disk: at the bound a write fails
 * with ENOSPC. Made once (sparse), mounted again at the next start, or
 * found still mounted after a crash.
 *
 * A new image is btrfs, with quota groups on, so that a HOME or a
 * workspace can be bounded too (subvol.c); an ext4 image an earlier
 * version made is mounted as it is (its type read from its superblock),
 * without per-binding bounds. */
#include "shell/disk.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/loop.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/fd.h"
#include "base/file.h"
#include "base/log.h"
#include "base/util.h"
#include "config/config.h"
#include "shell/subvol.h"

#define MKFS_TIMEOUT_MS 120000
#define MIXED_BELOW (1LL << 30) /* btrfs's advice: mixed block groups below 1 GiB */
#define MKFS_BTRFS "/sbin/mkfs.btrfs"
#define MKFS_EXT4 "/sbin/mkfs.ext4"

static void image_path(const struct config *cfg, char *buf, size_t len)
{
        snprintf(buf, len, "%s/home.img", cfg->shell_state_dir);
}

/* mountinfo's escapes (\ooo for space, tab, newline, backslash) undone in
 * place. */
static void unescape(char *p)
{
        char *o = p;
        for (; *p; p++, o++) {
                if (p[0] == '\\' && p[1] >= '0' && p[1] <= '3' && p[2] >= '0' && p[2] <= '7' &&
                    p[3] >= '0' && p[3] <= '7') {
                        *o = (char)((p[1] - '0') * 64 + (p[2] - '0') * 8 + (p[3] - '0'));
                        p += 3;
                } else {
                        *o = *p;
                }
        }
        *o = '\0';
}

/* The loop device of the top mount at home (its source in mountinfo,
 * /dev/loopN: a btrfs mount's st_dev is an anonymous device, not the
 * loop device's): N, or -1. */
static int home_loop(const char *home)
{
        FILE *f = fopen("/proc/self/mountinfo", "re");
        if (!f)
                return -1;
        char *line = NULL;
        size_t cap = 0;
        int found = -1;
        while (getline(&line, &cap, f) > 0) {
                char mnt[4096], src[4096];
                const char *dash = strstr(line, " - ");
                unsigned n;
                char tail;
                if (!dash || sscanf(line, "%*s %*s %*s %*s %4095s", mnt) != 1 ||
                    sscanf(dash + 3, "%*s %4095s", src) != 1)
                        continue;
                unescape(mnt);
                if (strcmp(mnt, home) != 0)
                        continue;
                /* the last one at home is the top one */
                found = sscanf(src, "/dev/loop%u%c", &n, &tail) == 1 ? (int)n : -1;
        }
        free(line);
        fclose(f);
        return found;
}

/* The loop device mounted at home, if its backing file is img: N, else
 * -1. */
static int mounted_from(const char *home, const char *img)
{
        char path[128], backing[4096] = "";
        int n = home_loop(home);
        if (n < 0)
                return -1;
        snprintf(path, sizeof(path), "/sys/block/loop%d/loop/backing_file", n);
        ssize_t len = file_read_buf(path, backing, sizeof(backing));
        while (len > 0 && backing[len - 1] == '\n')
                backing[--len] = '\0';
        return len > 0 && strcmp(backing, img) == 0 ? n : -1;
}

/* Only lost+found, or nothing: what an image may be mounted over. */
static bool empty_dir(const char *dir)
{
        DIR *d = opendir(dir);
        if (!d)
                return false;
        bool empty = true;
        struct dirent *de;
        while ((de = readdir(d)))
                if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") &&
                    strcmp(de->d_name, "lost+found"))
                        empty = false;
        closedir(d);
        return empty;
}

/* The image's file system, from its superblock: "btrfs" (magic
 * "_BHRfS_M" at 64 KiB + 0x40) or "ext4" (0xEF53 at 0x438). */
static const char *image_type(int fd)
{
        char magic[8];
        if (pread(fd, magic, sizeof(magic), 0x10040) == (ssize_t)sizeof(magic) &&
            memcmp(magic, "_BHRfS_M", 8) == 0)
                return "btrfs";
        return "ext4";
}

static int make_image(const struct config *cfg, const char *img, char *err, size_t errlen)
{
        _cleanup_close_ int fd = open(img, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd < 0 || ftruncate(fd, cfg->shell_disk_bytes) < 0) {
                snprintf(err, errlen, "%s: %s", img, strerror(errno));
                unlink(img);
                return -errno;
        }
        char owner[64];
        snprintf(owner, sizeof(owner), "root_owner=%d:%d", cfg->shell_uid, cfg->shell_uid);
        /* btrfs: one copy of metadata (the image is a file: DUP would
         * only double its cost); below 1 GiB (mkfs.btrfs refuses less
         * than about 110 MiB otherwise) data and metadata share block
         * groups. Without btrfs-progs, ext4 as before. */
        bool btrfs = access(MKFS_BTRFS, X_OK) == 0;
        bool mixed = cfg->shell_disk_bytes < MIXED_BELOW;
        const char *tool = btrfs ? "mkfs.btrfs" : "mkfs.ext4";
        if (!btrfs)
                log_warn(NULL, "shell.disk_no_btrfs",
                         "tool=%s image=%s: making ext4, without per-binding bounds", MKFS_BTRFS,
                         log_q(img));
        pid_t pid = fork();
        if (pid < 0)
                return -errno;
        if (pid == 0) {
                int null = open("/dev/null", O_RDWR | O_CLOEXEC);
                dup2(null, 0);
                dup2(null, 1);
                dup2(null, 2);
                fd_close_from(3);
                sigset_t none;
                sigemptyset(&none);
                sigprocmask(SIG_SETMASK, &none, NULL);
                if (btrfs && mixed)
                        execl(MKFS_BTRFS, tool, "-q", "-f", "-M", "-m", "single", "-d", "single",
                              "-L", "lockbox-home", img, (char *)NULL);
                else if (btrfs)
                        execl(MKFS_BTRFS, tool, "-q", "-f", "-m", "single", "-d", "single", "-L",
                              "lockbox-home", img, (char *)NULL);
                else
                        execl(MKFS_EXT4, tool, "-q", "-F", "-m", "0", "-E", owner, "-L",
                              "lockbox-home", img, (char *)NULL);
                _exit(127);
        }
        int status = 0;
        int64_t end = monotonic_ms() + MKFS_TIMEOUT_MS;
        while (waitpid(pid, &status, WNOHANG) == 0) {
                if (monotonic_ms() > end) {
                        kill(pid, SIGKILL);
                        waitpid(pid, &status, 0);
                        break;
                }
                poll(NULL, 0, 20);
        }
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                snprintf(err, errlen, "%s %s failed (status %d; is %s installed?)", tool, img,
                         status, btrfs ? "btrfs-progs" : "e2fsprogs");
                unlink(img);
                return -EIO;
        }
        log_info(NULL, "shell.disk_made", "image=%s bytes=%lld type=%s", log_q(img),
                 (long long)cfg->shell_disk_bytes, btrfs ? "btrfs" : "ext4");
        return 0;
}

/* Attach the image (file) to the loop device dev and mount it at home: 0;
 * -EBUSY when the device is taken; -ENOENT, -EPERM or -EACCES when the
 * node is absent or refused (a container sees only the devices it was
 * given); any other error with a message in err. */
static int loop_try(const char *dev, int file, const char *home, char *err, size_t errlen)
{
        const char *type = image_type(file);
        _cleanup_close_ int loop = open(dev, O_RDWR | O_CLOEXEC);
        if (loop < 0)
                return -errno;
        struct loop_config lc = {.fd = (uint32_t)file, .info = {.lo_flags = LO_FLAGS_AUTOCLEAR}};
        if (ioctl(loop, LOOP_CONFIGURE, &lc) < 0) {
                if (errno == EBUSY)
                        return -EBUSY; /* taken in between */
                snprintf(err, errlen, "%s: LOOP_CONFIGURE: %s", dev, strerror(errno));
                return -errno;
        }
        if (mount(dev, home, type, MS_NOSUID | MS_NODEV, "") < 0) {
                int e = errno;
                ioctl(loop, LOOP_CLR_FD, 0);
                snprintf(err, errlen, "mount %s on %s: %s", dev, home, strerror(e));
                return -e;
        }
        return 0;
}

static bool loop_unusable(int r)
{
        return r == -EBUSY || r == -ENOENT || r == -EPERM || r == -EACCES;
}

/* The loop devices this /dev holds, in turn: a container is given a few
 * (/dev/loop0..7, say), and the kernel's first free device may be none of
 * them. */
static int loop_try_present(int file, const char *home, char *err, size_t errlen)
{
        DIR *d = opendir("/dev");
        if (!d)
                return -errno;
        int r = -ENOENT;
        struct dirent *de;
        while ((de = readdir(d))) {
                unsigned n;
                char dev[300], tail;
                if (sscanf(de->d_name, "loop%u%c", &n, &tail) != 1)
                        continue;
                snprintf(dev, sizeof(dev), "/dev/%s", de->d_name);
                r = loop_try(dev, file, home, err, errlen);
                if (!loop_unusable(r))
                        break;
        }
        closedir(d);
        return r;
}

/* A loop device still backed by img though mounted nowhere here: the
 * file system of a stop whose mount lives on in a namespace being torn
 * down (a job's, a worker's), which the kernel keeps until the last one
 * goes. Attaching img to another device would mount a second instance of
 * it (btrfs gives it a temporary fsid) that reads what the first has not
 * committed yet as never written, and both would write the image; this
 * device mounted again gives back the live one. Mounted at home: 1; 0
 * when there is none (or it went in between); -errno. */
static int mount_lingering(const char *img, const char *home)
{
        struct stat st;
        _cleanup_close_ int file = open(img, O_RDONLY | O_CLOEXEC);
        if (file < 0 || fstat(file, &st) < 0)
                return errno == ENOENT ? 0 : -errno;
        DIR *d = opendir("/dev");
        if (!d)
                return -errno;
        int r = 0;
        for (struct dirent *de; r == 0 && (de = readdir(d));) {
                unsigned n;
                char dev[300], tail;
                if (sscanf(de->d_name, "loop%u%c", &n, &tail) != 1)
                        continue;
                snprintf(dev, sizeof(dev), "/dev/%s", de->d_name);
                _cleanup_close_ int loop = open(dev, O_RDONLY | O_CLOEXEC);
                struct loop_info64 li;
                if (loop < 0 || ioctl(loop, LOOP_GET_STATUS64, &li) < 0 ||
                    li.lo_device != st.st_dev || li.lo_inode != st.st_ino)
                        continue;
                if (mount(dev, home, image_type(file), MS_NOSUID | MS_NODEV, "") == 0)
                        r = 1;
                else if (errno != ENXIO && errno != ENOENT) /* (gone in between) */
                        r = -errno;
        }
        closedir(d);
        return r;
}

/* Attach img to a free loop device (detached again by the kernel once
 * unmounted) and mount it at home: the kernel's first free device, else
 * any free one of those this /dev holds. */
static int mount_image(const char *img, const char *home, char *err, size_t errlen)
{
        _cleanup_close_ int ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
        _cleanup_close_ int file = open(img, O_RDWR | O_CLOEXEC);
        if (ctl < 0 || file < 0) {
                snprintf(err, errlen, "%s: %s", ctl < 0 ? "/dev/loop-control" : img,
                         strerror(errno));
                return -errno;
        }
        char dev[32] = "";
        for (int attempt = 0; attempt < 8; attempt++) {
                int n = ioctl(ctl, LOOP_CTL_GET_FREE);
                if (n < 0) {
                        snprintf(err, errlen, "no free loop device: %s", strerror(errno));
                        return -errno;
                }
                snprintf(dev, sizeof(dev), "/dev/loop%d", n);
                int r = loop_try(dev, file, home, err, errlen);
                if (r != -EBUSY && loop_unusable(r))
                        break; /* not in this /dev */
                if (r != -EBUSY)
                        return r;
        }
        int r = loop_try_present(file, home, err, errlen);
        if (loop_unusable(r))
                snprintf(err, errlen,
                         "no free loop device: the first free one, %s, cannot be opened here, "
                         "and no /dev/loopN here is free",
                         dev);
        return loop_unusable(r) ? -ENODEV : r;
}

/* A btrfs home: its top owned by shell.uid (mkfs.btrfs has no
 * root_owner), no temporary subvolume of a conversion a crash cut short,
 * quota groups on, stale quota groups gone (or quota groups off, without
 * bounds). Per-binding bounds asked of an ext4 home are said
 * once to be off. */
static int home_ready(const struct config *cfg, char *err, size_t errlen)
{
        bool bounds = cfg->shell_binding_disk_bytes || cfg->shell_workspace_disk_bytes;
        _cleanup_close_ int fd = open(cfg->shell_home, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0) {
                snprintf(err, errlen, "%s: %s", cfg->shell_home, strerror(errno));
                return -errno;
        }
        if (!subvol_fs(fd)) {
                if (bounds)
                        log_warn(NULL, "shell.disk_bounds_off",
                                 "home=%s: shell.binding_disk and shell.workspace_disk need a "
                                 "btrfs image; this one is ext4 (docs/DEPLOY.md says how to "
                                 "move to btrfs)",
                                 log_q(cfg->shell_home));
                return 0;
        }
        struct stat st;
        if (fstat(fd, &st) == 0 && st.st_uid == 0 &&
            fchown(fd, (uid_t)cfg->shell_uid, (gid_t)cfg->shell_uid) < 0) {
                snprintf(err, errlen, "%s: chown: %s", cfg->shell_home, strerror(errno));
                return -errno;
        }
        int swept = subvol_sweep_tmp(fd);
        if (swept > 0)
                log_info(NULL, "shell.subvol_tmp_swept", "removed=%d", swept);
        if (!bounds) {
                /* quota groups cost at every commit: on only when used;
                 * off again (with the limits an earlier start set) when
                 * the bounds are */
                int r = subvol_quota_disable(fd);
                if (r > 0)
                        log_info(NULL, "shell.disk_quotas_off", "home=%s", log_q(cfg->shell_home));
                else if (r < 0)
                        log_warn(NULL, "shell.disk_quotas_off_failed", "home=%s error=%s",
                                 log_q(cfg->shell_home), log_q(strerror(-r)));
                return 0;
        }
        int r = subvol_quota_enable(fd);
        if (r < 0) {
                snprintf(err, errlen, "%s: enabling btrfs quotas: %s", cfg->shell_home,
                         strerror(-r));
                return r;
        }
        r = subvol_sweep(fd);
        if (r > 0)
                log_info(NULL, "shell.disk_qgroups_swept", "removed=%d", r);
        return 0;
}

int shell_disk_mount(const struct config *cfg, char *err, size_t errlen)
{
        char img[4096];
        if (cfg->shell_disk_bytes == 0)
                return 0;
        image_path(cfg, img, sizeof(img));
        if (mounted_from(cfg->shell_home, img) >= 0) {
                log_info(NULL, "shell.disk_mounted", "image=%s home=%s already=true", log_q(img),
                         log_q(cfg->shell_home));
                return home_ready(cfg, err, errlen);
        }
        if (!empty_dir(cfg->shell_home)) {
                snprintf(err, errlen,
                         "shell.home %s is not empty: shell.disk_size mounts a file system of its "
                         "own there; empty it (or set shell.disk_size to 0 for none)",
                         cfg->shell_home);
                return -ENOTEMPTY;
        }
        int r = mount_lingering(img, cfg->shell_home);
        if (r != 0) {
                if (r < 0)
                        snprintf(err, errlen, "mount %s (still attached) on %s: %s", img,
                                 cfg->shell_home, strerror(-r));
                else
                        log_info(NULL, "shell.disk_mounted", "image=%s home=%s lingering=true",
                                 log_q(img), log_q(cfg->shell_home));
                return r < 0 ? r : home_ready(cfg, err, errlen);
        }
        r = access(img, F_OK) == 0 ? 0 : make_image(cfg, img, err, errlen);
        if (r == 0)
                r = mount_image(img, cfg->shell_home, err, errlen);
        if (r == 0)
                log_info(NULL, "shell.disk_mounted", "image=%s home=%s", log_q(img),
                         log_q(cfg->shell_home));
        return r == 0 ? home_ready(cfg, err, errlen) : r;
}

/* At stop the last job's mount namespace may still be going (the kernel
 * tears namespaces down after their last process): a plain unmount is
 * tried for up to 2 s, then a lazy one; the loop device is then let go
 * at once rather than when the kernel gets to it. */
void shell_disk_unmount(const struct config *cfg)
{
        char img[4096], dev[32];
        if (cfg->shell_disk_bytes == 0)
                return;
        image_path(cfg, img, sizeof(img));
        int n = mounted_from(cfg->shell_home, img);
        if (n < 0)
                return;
        snprintf(dev, sizeof(dev), "/dev/loop%d", n);
        /* written through first: what a namespace still holding the file
         * system past this stop would otherwise commit later */
        _cleanup_close_ int top = open(cfg->shell_home, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (top < 0 || syncfs(top) < 0)
                log_warn(NULL, "shell.disk_sync_failed", "home=%s error=%s", log_q(cfg->shell_home),
                         log_q(strerror(errno)));
        top = safe_close(top);
        int r = -1;
        for (int i = 0; i < 100 && (r = umount2(cfg->shell_home, 0)) < 0 && errno == EBUSY; i++)
                poll(NULL, 0, 20);
        if (r < 0 && umount2(cfg->shell_home, MNT_DETACH) < 0) {
                log_warn(NULL, "shell.disk_unmount_failed", "home=%s error=%s",
                         log_q(cfg->shell_home), log_q(strerror(errno)));
                return;
        }
        _cleanup_close_ int loop = open(dev, O_RDWR | O_CLOEXEC);
        if (loop >= 0 && ioctl(loop, LOOP_CLR_FD, 0) < 0 && errno != ENXIO)
                log_warn(NULL, "shell.disk_detach_failed", "device=%s error=%s", dev,
                         log_q(strerror(errno)));
        loop = safe_close(loop);
        /* still held (a mount namespace of a job's being torn down), the
         * kernel lets it go with the last user: waited for, up to 2 s, so
         * a stop leaves no device attached */
        char backing[128];
        snprintf(backing, sizeof(backing), "/sys/block/loop%d/loop/backing_file", n);
        for (int i = 0; i < 100 && access(backing, F_OK) == 0; i++)
                poll(NULL, 0, 20);
        if (access(backing, F_OK) == 0) /* the next start mounts it again */
                log_info(NULL, "shell.disk_lingering", "device=%s", dev);
}
