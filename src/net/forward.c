/* Holding IPv4 forwarding on for as long as some daemon needs it
 * (forward.h). State, under an exclusive lock on /run/lockbox/forward.lock:
 * forward.orig holds the value found before the first daemon, and one
 * forward.<pid> file per daemon holding it. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/fd.h"
#include "base/file.h"
#include "base/util.h"
#include "net/forward.h"

#define STATE_DIR "/run/lockbox"
#define SYSCTL "/proc/sys/net/ipv4/ip_forward"

static int read_char(const char *path, char *ret)
{
        char text[4];
        ssize_t n = file_read_buf(path, text, sizeof(text));
        *ret = text[0]; /* '\0' when nothing was read */
        return n > 0 ? 0 : n < 0 ? (int)n : -EIO;
}

static int lock_state(void)
{
        return fd_lock_in(STATE_DIR, "forward.lock");
}

/* Live daemons holding forwarding, other than us; removes dead ones' files. */
static int other_holders(void)
{
        DIR *d = opendir(STATE_DIR);
        int n = 0;
        if (!d)
                return 0;
        for (struct dirent *e; (e = readdir(d));) {
                char *end;
                if (strncmp(e->d_name, "forward.", 8) != 0)
                        continue;
                long pid = strtol(e->d_name + 8, &end, 10);
                if (*end || pid <= 0 || pid == getpid())
                        continue;
                if (kill((pid_t)pid, 0) == 0 || errno != ESRCH)
                        n++;
                else
                        unlinkat(dirfd(d), e->d_name, 0);
        }
        closedir(d);
        return n;
}

static void own_file(char *buf, size_t len)
{
        snprintf(buf, len, STATE_DIR "/forward.%ld", (long)getpid());
}

int forward_acquire(bool *ret_was_off, char *err, size_t errlen)
{
        _cleanup_close_ int lock = lock_state();
        char now, orig, own[64];
        int r;
        if (lock < 0) {
                snprintf(err, errlen, "cannot lock " STATE_DIR "/forward.lock: %s",
                         strerror(-lock));
                return lock;
        }
        if ((r = read_char(SYSCTL, &now)) < 0) {
                snprintf(err, errlen, "cannot read " SYSCTL ": %s", strerror(-r));
                return r;
        }
        /* The value before any daemon: recorded by one still running or by
         * one that crashed; else what the host has now. */
        if (read_char(STATE_DIR "/forward.orig", &orig) < 0 || (other_holders() == 0 && now == '0'))
                orig = now;
        char text[2] = {orig, '\0'};
        if ((r = file_write(STATE_DIR "/forward.orig", text, O_CREAT | O_TRUNC, 0644)) < 0 ||
            (own_file(own, sizeof(own)), r = file_write(own, "", O_CREAT | O_TRUNC, 0644)) < 0) {
                snprintf(err, errlen, "cannot write under " STATE_DIR ": %s", strerror(-r));
                return r;
        }
        if (now == '0' && (r = file_write(SYSCTL, "1", 0, 0)) < 0) {
                unlink(own);
                if (r == -EROFS || r == -EACCES || r == -EPERM) {
                        *ret_was_off = true;
                        return -EROFS;
                }
                snprintf(err, errlen,
                         "cannot turn on IPv4 forwarding (" SYSCTL "): %s; in a container start "
                         "it with --sysctl net.ipv4.ip_forward=1",
                         strerror(-r));
                return r;
        }
        *ret_was_off = orig == '0';
        return 0;
}

void forward_release(void)
{
        _cleanup_close_ int lock = lock_state();
        char own[64], orig;
        own_file(own, sizeof(own));
        unlink(own);
        if (lock < 0 || other_holders() > 0)
                return;
        if (read_char(STATE_DIR "/forward.orig", &orig) == 0 && orig == '0')
                file_write(SYSCTL, "0", 0, 0);
        unlink(STATE_DIR "/forward.orig");
}
