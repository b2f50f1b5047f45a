/* The shared statistics page (see stats.h). */
#include "ipc/stats.h"

#include <fcntl.h>
#include <stddef.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/util.h"

/* 100 ms to an hour (shell.job_timeout's default) */
const uint64_t stats_shell_bucket_ms[STATS_SHELL_BUCKETS] = {
    100, 500, 1000, 5000, 10000, 30000, 60000, 300000, 600000, 1800000, 3600000, 7200000};

struct shared_stats *stats_create(int *ret_fd)
{
        _cleanup_close_ int fd = memfd_create("lockbox-stats", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        if (fd < 0 || ftruncate(fd, sizeof(struct shared_stats)) < 0)
                return NULL;
        void *p =
            mmap(NULL, sizeof(struct shared_stats), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED)
                return NULL;
        /* this mapping stays writable; no other may be made, no write(2) */
        if (fcntl(fd, F_ADD_SEALS,
                  F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_FUTURE_WRITE | F_SEAL_SEAL) < 0) {
                munmap(p, sizeof(struct shared_stats));
                return NULL;
        }
        *ret_fd = TAKE_FD(fd);
        return p;
}

const struct shared_stats *stats_attach(int fd)
{
        void *p = mmap(NULL, sizeof(struct shared_stats), PROT_READ, MAP_SHARED, fd, 0);
        return p == MAP_FAILED ? NULL : p;
}

void stats_unmap(const struct shared_stats *s)
{
        if (s)
                munmap((void *)s, sizeof(*s));
}
