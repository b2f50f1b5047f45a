/* File-descriptor helpers (see fd.h). */
#include "base/fd.h"

#include <limits.h>
#include <sys/syscall.h>
#include <unistd.h>

void fd_close_all_except(int from, const int *keep, size_t n)
{
        int lo = from;
        for (;;) {
                int next = INT_MAX;
                for (size_t i = 0; i < n; i++)
                        if (keep[i] >= lo && keep[i] < next)
                                next = keep[i];
                if (next > lo)
                        syscall(SYS_close_range, lo, next == INT_MAX ? ~0U : (unsigned)next - 1, 0);
                if (next == INT_MAX)
                        return;
                lo = next + 1;
        }
}
