/* shell.home on a file system of its own (shell.disk_size): an ext4 image
 * under shell.state_dir, attached to a loop device and mounted at
 * shell.home, so whatever jobs write there (every binding's HOME and
 * workspace) can never fill the host's disk: at the bound a write fails
 * with ENOSPC. Made once (mkfs.ext4, sparse), mounted again at the next
 * start, or found still mounted after a crash. */
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
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/fd.h"
#include "base/file.h"
#include "base/log.h"
#include "base/util.h"
#include "config/config.h"

#define MKFS_TIMEOUT_MS 120000

static void image_path(const struct config *cfg, char *buf, size_t len)
{
        snprintf(buf, len, "%s/home.img", cfg->shell_state_dir);
}

/* The loop device mounted at home, if its backing file is img: 1, else 0. */
static int mounted_from(const char *home, const char *img)
{
        struct stat st;
        char path[128], backing[4096] = "";
        if (stat(home, &st) < 0)
                return 0;
        if (major(st.st_dev) != 7) /* not a loop device */
                return 0;
        snprintf(path, sizeof(path), "/sys/dev/block/%u:%u/loop/backing_file", major(st.st_dev),
                 minor(st.st_dev));
        ssize_t n = file_read_buf(path, backing, sizeof(backing));
        while (n > 0 && backing[n - 1] == '\n')
                backing[--n] = '\0';
        return n > 0 && strcmp(backing, img) == 0;
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
                execl("/sbin/mkfs.ext4", "mkfs.ext4", "-q", "-F", "-m", "0", "-E", owner, "-L",
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
                snprintf(err, errlen, "mkfs.ext4 %s failed (status %d; is e2fsprogs installed?)",
                         img, status);
                unlink(img);
                return -EIO;
        }
        log_info(NULL, "shell.disk_made", "image=%s bytes=%lld", log_q(img),
                 (long long)cfg->shell_disk_bytes);
        return 0;
}

/* Attach the image (file) to the loop device dev and mount it at home: 0;
 * -EBUSY when the device is taken; -ENOENT, -EPERM or -EACCES when the
 * node is absent or refused (a container sees only the devices it was
 * given); any other error with a message in err. */
static int loop_try(const char *dev, int file, const char *home, char *err, size_t errlen)
{
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
        if (mount(dev, home, "ext4", MS_NOSUID | MS_NODEV, "") < 0) {
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

int shell_disk_mount(const struct config *cfg, char *err, size_t errlen)
{
        char img[4096];
        if (cfg->shell_disk_bytes == 0)
                return 0;
        image_path(cfg, img, sizeof(img));
        if (mounted_from(cfg->shell_home, img)) {
                log_info(NULL, "shell.disk_mounted", "image=%s home=%s already=true", log_q(img),
                         log_q(cfg->shell_home));
                return 0;
        }
        if (!empty_dir(cfg->shell_home)) {
                snprintf(err, errlen,
                         "shell.home %s is not empty: shell.disk_size mounts a file system of its "
                         "own there; empty it (or set shell.disk_size to 0 for none)",
                         cfg->shell_home);
                return -ENOTEMPTY;
        }
        int r = access(img, F_OK) == 0 ? 0 : make_image(cfg, img, err, errlen);
        if (r == 0)
                r = mount_image(img, cfg->shell_home, err, errlen);
        if (r == 0)
                log_info(NULL, "shell.disk_mounted", "image=%s home=%s", log_q(img),
                         log_q(cfg->shell_home));
        return r;
}

/* At stop the last job's mount namespace may still be going (the kernel
 * tears namespaces down after their last process): a plain unmount is
 * tried for up to 2 s, then a lazy one; the loop device is then let go
 * at once rather than when the kernel gets to it. */
void shell_disk_unmount(const struct config *cfg)
{
        char img[4096], dev[32];
        struct stat st;
        if (cfg->shell_disk_bytes == 0)
                return;
        image_path(cfg, img, sizeof(img));
        if (!mounted_from(cfg->shell_home, img) || stat(cfg->shell_home, &st) < 0)
                return;
        snprintf(dev, sizeof(dev), "/dev/loop%u", minor(st.st_dev));
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
        snprintf(backing, sizeof(backing), "/sys/block/loop%u/loop/backing_file", minor(st.st_dev));
        for (int i = 0; i < 100 && access(backing, F_OK) == 0; i++)
                poll(NULL, 0, 20);
}
