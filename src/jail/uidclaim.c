/* Claims of UID ranges among daemons (uidclaim.h). */
#include "jail/uidclaim.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/fd.h"
#include "base/file.h"
#include "base/strbuf.h"
#include "base/util.h"

#define CLAIM_DIR "/run/lockbox/uids"

static int lock_claims(void)
{
        return fd_lock_in(CLAIM_DIR, ".lock");
}

/* The range in a claim file, or -1. */
static int read_claim(const char *name, unsigned long *first, unsigned long *last)
{
        char path[PATH_MAX];
        struct strbuf sb = {0};
        snprintf(path, sizeof(path), "%s/%s", CLAIM_DIR, name);
        int r = file_read(path, O_NOFOLLOW, 64, &sb);
        if (r == 0 && sscanf(sb.data ? sb.data : "", "%lu %lu", first, last) != 2)
                r = -1;
        strbuf_free(&sb);
        return r < 0 ? -1 : 0;
}

/* A live daemon's claim overlapping first..last: its pid, else 0 (dead
 * daemons' claims are removed on the way). */
static long find_overlap(uid_t first, uid_t last, unsigned long *ofirst, unsigned long *olast)
{
        DIR *d = opendir(CLAIM_DIR);
        long found = 0;
        for (struct dirent *e; d && !found && (e = readdir(d));) {
                char *end;
                long pid = strtol(e->d_name, &end, 10);
                if (*end || pid <= 0 || pid == getpid())
                        continue;
                if (kill((pid_t)pid, 0) < 0 && errno == ESRCH) {
                        unlinkat(dirfd(d), e->d_name, 0);
                        continue;
                }
                if (read_claim(e->d_name, ofirst, olast) == 0 && *ofirst <= last && first <= *olast)
                        found = pid;
        }
        if (d)
                closedir(d);
        return found;
}

static void own_path(char *buf, size_t len)
{
        snprintf(buf, len, CLAIM_DIR "/%ld", (long)getpid());
}

int uidclaim_take(uid_t first, uid_t last, char *err, size_t errlen)
{
        _cleanup_close_ int lock = lock_claims();
        if (lock < 0) {
                snprintf(err, errlen, "cannot lock " CLAIM_DIR ": %s", strerror(-lock));
                return lock;
        }
        unsigned long ofirst, olast;
        long pid = find_overlap(first, last, &ofirst, &olast);
        if (pid) {
                snprintf(err, errlen,
                         "jail.uid_min..jail.uid_max %lu-%lu overlaps %lu-%lu of the lockboxd "
                         "running as pid %ld: give every lockboxd on a host a range of its own",
                         (unsigned long)first, (unsigned long)last, ofirst, olast, pid);
                return -EBUSY;
        }
        char path[64], text[64];
        own_path(path, sizeof(path));
        snprintf(text, sizeof(text), "%lu %lu\n", (unsigned long)first, (unsigned long)last);
        _cleanup_close_ int fd =
            open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
        if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text)) {
                snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
                return -EIO;
        }
        return 0;
}

void uidclaim_drop(void)
{
        char path[64];
        own_path(path, sizeof(path));
        unlink(path);
}
