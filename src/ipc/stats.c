/* The shared statistics page (see stats.h). */
#include "ipc/stats.h"

#include <stddef.h>
#include <sys/mman.h>

struct shared_stats *stats_map(void)
{
        void *p = mmap(NULL, sizeof(struct shared_stats), PROT_READ | PROT_WRITE,
                       MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        return p == MAP_FAILED ? NULL : p;
}

void stats_unmap(struct shared_stats *s)
{
        if (s)
                munmap(s, sizeof(*s));
}
