/* Messages between the jailer and the Python zygote (lockbox-pyzygote) on
 * a SEQPACKET socket, the zygote's fd 3. The zygote answers READY once its
 * interpreter holds the preloaded modules, then one SPAWNED per SPAWN, in
 * order. The zygote never sees a request: only identities, limits and the
 * fds its child needs. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "ipc/limits.h"

#define ZYGOTE_MAGIC 0x7a79676fu /* "zygo" */

/* Exit status of a zygote whose embedded interpreter is not python_path:
 * the jailer then stops trying and serves Python cold. */
#define ZYGOTE_EXIT_MISMATCH 3

enum zygote_msg_type {
        ZYGOTE_READY = 1,
        ZYGOTE_SPAWN = 2,
        ZYGOTE_SPAWNED = 3,
};

/* jailer -> zygote, with the fds of a struct zygote_fds in the order
 * zygote_fds_encode() gives them (the counts below say which are there). */
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
        struct run_limits limits;
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

/* The descriptors a SPAWN carries for the zygote's child; -1 where absent. */
struct zygote_fds {
        int sync, code, out, err; /* sync socket, code read end, stdout/stderr write ends */
        int cgroup_procs[2];      /* v1: cgroup.procs files */
        int cgroup_dirfd;         /* v2: the run's group */
        int deps;                 /* the dependency layer's directory */
        int report;               /* the exit report's write end */
        int netns;                /* the run's network namespace */
};

/* Most fds one SPAWN carries. */
#define ZYGOTE_SPAWN_MAX_FDS 10

/* Put f's fds in their order into fds[ZYGOTE_SPAWN_MAX_FDS] (sync, code,
 * stdout, stderr, the cgroup directory or the cgroup.procs files, layer,
 * report, namespace) and say in m which are there: how many. */
size_t zygote_fds_encode(const struct zygote_fds *f, struct zygote_spawn *m, int *fds);
/* The other end: the n fds received with m back into ret (-1 where m says
 * none); -EBADMSG when m's counts do not match n. */
int zygote_fds_decode(const struct zygote_spawn *m, const int *fds, size_t n,
                      struct zygote_fds *ret);
