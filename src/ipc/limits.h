/* The resource limits of one run, as the jailer builds them from the
 * configuration and as they cross to the zygote in a SPAWN: plain data,
 * applied in the run by jail/rlimits.c. */
#pragma once

#include <stdint.h>

struct run_limits {
        int64_t data_bytes; /* RLIMIT_DATA; 0 = unlimited (memory cgroup in use) */
        int nproc;
        int cpu_seconds;
        int open_files;
        int64_t file_bytes;
        int64_t tmp_bytes;
        int tmp_inodes;
};
