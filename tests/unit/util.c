/* Helpers several unit-test files share (declared in test.h): descriptors
 * open in this process, and writing a buffer whole (in pieces if asked).
 * Time comes from base/clock.h's monotonic_ms(). */
#include <dirent.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test.h"

int test_open_fds(void)
{
        DIR *d = opendir("/proc/self/fd");
        if (!d)
                return -1;
        int n = 0;
        while (readdir(d))
                n++;
        closedir(d);
        return n; /* ".", ".." and the DIR's own fd too: the same each time */
}

int test_write_all(int fd, const void *buf, size_t len, size_t piece)
{
        struct stat st;
        bool sock = fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode);
        const char *p = buf;
        while (len > 0) {
                size_t n = piece && len > piece ? piece : len;
                /* a socket whose peer is gone fails with EPIPE, not SIGPIPE */
                ssize_t w = sock ? send(fd, p, n, MSG_NOSIGNAL) : write(fd, p, n);
                if (w <= 0)
                        return -1;
                p += w;
                len -= (size_t)w;
        }
        return 0;
}
