/* Messages between the jailer and the Python zygote (lockbox-pyzygote) on
 * a SEQPACKET socket, the zygote's fd 3. The zygote answers READY once its
 * interpreter holds the preloaded modules, then one SPAWNED per SPAWN, in
 * order. The zygote never sees a request: only identities, limits and the
 * fds its child needs. */
#pragma once

#include <stdint.h>

#include "jail/jail.h"

#define ZYGOTE_MAGIC 0x7a79676fu /* "zygo" */

/* Exit status of a zygote whose embedded interpreter is not python_path:
 * the jailer then stops trying and serves Python cold. */
#define ZYGOTE_EXIT_MISMATCH 3

enum zygote_msg_type {
        ZYGOTE_READY = 1,
        ZYGOTE_SPAWN = 2,
        ZYGOTE_SPAWNED = 3,
};

/* jailer -> zygote, with fds [sync, code read end, stdout write end, stderr
 * write end, then n_cgroup_procs cgroup.procs fds (v1) or one cgroup
 * directory (v2, cgroup_dirfd = 1), then the dependency layer's directory
 * if deps_fd = 1, then the exit report's write end if report_fd = 1, then
 * the run's network namespace if netns_fd = 1]. */
struct zygote_spawn {
        uint32_t magic;
        uint32_t type;
        uint32_t uid;
        uint32_t network;
        uint32_t n_cgroup_procs;
        uint32_t cgroup_dirfd;
        uint32_t deps_fd;
        uint32_t report_fd;
        uint32_t netns_fd;
        struct jail_limits limits;
        /* network runs: what their environment adds to the zygote's (the
         * proxy variables), NUL-separated NAME=value entries; else empty */
        char net_env[2048];
};

/* zygote -> jailer: READY (pid, error unused) or SPAWNED. */
struct zygote_reply {
        uint32_t magic;
        uint32_t type;
        int32_t pid;   /* the child, now a child of the jailer; 0 on error */
        int32_t error; /* errno of a failed clone */
};
