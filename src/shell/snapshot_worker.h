/* The snapshot worker (snapshot_worker.c): the process snapshot.c forks
 * for one save or restore of shell.home. It locks itself up (its steps
 * below), does the archive work with libarchive and reports one struct
 * snap_result on its socket before it exits. */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "jail/policy.h"

enum snap_kind {
        SNAP_OK = 0,
        SNAP_FAILED = 1,    /* 500 snapshot_failed / restore_failed */
        SNAP_MALFORMED = 2, /* restore: 400 archive_malformed (hostile or over a bound too) */
};

struct snap_result {
        uint32_t kind; /* enum snap_kind */
        uint64_t entries;
        uint64_t bytes; /* save: the archive's; restore: file data written */
        char message[400];
};

struct snap_spec {
        uint32_t op; /* SHELL_SNAPSHOT_SAVE or _RESTORE */
        int data_fd; /* save: the pipe's write end; restore: its read end */
        int res_fd;  /* the worker's end of its SEQPACKET socket to the jailer */
        int home_fd; /* shell.home, O_DIRECTORY */
        const char *home;
        uid_t uid;
        const char *const *patterns; /* save: exclude patterns */
        size_t n_patterns;
        uint64_t max_bytes;
        uint64_t max_entries;
        const struct policy_prog *filter;
};

/* Where a restore unpacks first, inside HOME's ".local" (which a save
 * never includes): this prefix and a random suffix. */
#define SNAP_STAGING_PREFIX "lockbox-restore-"

/* In the forked child, as root: never returns. */
_Noreturn void snapshot_worker_main(const struct snap_spec *s);
