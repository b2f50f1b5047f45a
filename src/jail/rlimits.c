/* Resource limits of a run, set in the child before it drops root (so the
 * hard limits stick: without CAP_SYS_RESOURCE they can only go down).
 * RLIMIT_AS is deliberately not set: V8 reserves large ranges up front. */
#include <errno.h>
#include <sys/resource.h>

#include "base/util.h"
#include "jail/jail.h"

static int set_both(int resource, rlim_t value)
{
        struct rlimit rl = {.rlim_cur = value, .rlim_max = value};
        return setrlimit(resource, &rl) < 0 ? -errno : 0;
}

int jail_rlimits_apply(const struct run_limits *l)
{
        const struct {
                int resource;
                rlim_t value;
        } table[] = {
            /* NPROC counts the run's UID, which no other live run has. */
            {RLIMIT_NPROC, (rlim_t)l->nproc},
            /* Below JAIL_EXEC_FD: that fd number can never exist again. */
            {RLIMIT_NOFILE, (rlim_t)l->open_files},
            {RLIMIT_FSIZE, (rlim_t)l->file_bytes},
            {RLIMIT_CORE, 0},
            {RLIMIT_MEMLOCK, 0},
            {RLIMIT_MSGQUEUE, 0},
            {RLIMIT_RTPRIO, 0},
            {RLIMIT_NICE, 0},
            {RLIMIT_SIGPENDING, 256},
            {RLIMIT_DATA, l->data_bytes > 0 ? (rlim_t)l->data_bytes : RLIM_INFINITY},
        };
        for (size_t i = 0; i < ELEMENTSOF(table); i++) {
                int r = set_both(table[i].resource, table[i].value);
                if (r < 0)
                        return r;
        }
        /* CPU: SIGXCPU at the soft limit, SIGKILL one second later. */
        struct rlimit cpu = {.rlim_cur = (rlim_t)l->cpu_seconds,
                             .rlim_max = (rlim_t)l->cpu_seconds + 1};
        if (setrlimit(RLIMIT_CPU, &cpu) < 0)
                return -errno;
        return 0;
}
