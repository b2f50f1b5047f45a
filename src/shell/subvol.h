/* Per-binding disk bounds (see subvol.c): a HOME or a workspace under
 * shell.home made a btrfs subvolume with a quota group limit. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "jail/policy.h"

/* fd lies on btrfs. */
bool subvol_fs(int fd);
/* fd (a directory) is the root of a subvolume. */
bool subvol_is(int fd);
/* Quota groups on for the file system of fd (once; again is a no-op):
 * 0 or -errno. */
int subvol_quota_enable(int fd);
/* Quota groups off (every limit with them): 1, 0 if they were off, or
 * -errno. */
int subvol_quota_disable(int fd);
/* The referenced-bytes limit of the subvolume whose root is fd (0: none):
 * 0 or -errno. */
int subvol_limit(int fd, uint64_t bytes);
/* As subvol_limit, unless the limit is already that (read in sysfs: no
 * transaction joined, which may wait for a commit). */
int subvol_limit_ensure(int fd, uint64_t bytes);
/* The subvolume whose root is fd is at its limit (referenced and
 * reserved bytes within 1/32 of it): a write there fails with EDQUOT.
 * From /sys/fs/btrfs/<fsid>/qgroups; false when anything is unknown. */
bool subvol_full(int fd);
/* Quota groups of subvolumes that are gone, on the file system of fd,
 * removed: how many, or -errno. */
int subvol_sweep(int fd);
/* Temporary subvolumes of conversions a crash cut short (named
 * .lockbox-subvol-*, anywhere on the file system of fd) destroyed: how
 * many, or -errno. At a start, before any conversion. */
int subvol_sweep_tmp(int fd);

struct subvol_conv {
        int parent_fd;    /* the tree's parent directory, O_RDONLY, opened without a symlink */
        const char *name; /* the tree's name in it (one component) */
        const char *parent_rel; /* the parent's path beneath shell.home ("." for it) */
        int record_fd;          /* the records' directory (root's, 0700: see subvol_sweep_left) */
        const char *home;       /* shell.home: all the worker may touch (Landlock) */
        uid_t uid;              /* shell.uid */
        uint64_t limit;         /* bytes */
        int timeout_ms;
        const struct policy_prog *filter; /* policy_build_subvol */
};

/* Make parent/name a subvolume limited to c->limit: a new one beside it
 * (root makes it), the tree copied in with reflinks, swapped in and the
 * old tree removed by a jailed worker as shell.uid (root never walks the
 * tree), then the limit set (root, on the subvolume it holds): a tree
 * already past its bound is moved whole and stays past it.
 *
 * Asynchronous, in two calls: subvol_convert_start starts the worker (0
 * and *ret, or -errno with err saying why); once the worker's pidfd
 * (subvol_pending_fd) is readable, subvol_convert_finish does the rest and
 * frees *ret: 0, or -errno with err saying why (the tree is then left as
 * it was). Past c->timeout_ms the caller kills the worker with
 * subvol_convert_kill and waits for the pidfd as before (a worker in the
 * middle of a file system call may take a while to die: nobody blocks on
 * it); subvol_convert_finish with kill does both, blocking (at a stop). */
struct subvol_pending;
int subvol_convert_start(const struct subvol_conv *c, struct subvol_pending **ret, char *err,
                         size_t errlen);
int subvol_pending_fd(const struct subvol_pending *p);
/* The tree is in its subvolume already (the worker is removing the old
 * one): jobs may use it. */
bool subvol_pending_swapped(const struct subvol_pending *p);
void subvol_convert_kill(struct subvol_pending *p);
int subvol_convert_finish(struct subvol_pending *p, bool kill, char *err, size_t errlen);

/* Leftovers of conversions cut short after the exchange (a stop or a
 * crash while the worker removed the old tree): each conversion records
 * its temporary name and the parent's path in record_fd before its
 * worker starts, and drops the record once the old tree is gone. For each
 * record left, the tree of that name beside the converted one, if it is
 * a plain directory on the parent's file system, is removed by a worker
 * jailed as the conversion's (root opens only the parent, beneath
 * shell.home without a symlink); the records are dropped, but those whose
 * tree is not gone within timeout_ms (all of them together), kept for
 * the next start. Never a tree found by its name alone: a job may name
 * its own .lockbox-subvol-*. At a start, after subvol_sweep_tmp. How
 * many were removed, or -errno. */
struct subvol_sweep {
        int home_fd; /* shell.home */
        const char *home;
        uid_t uid;
        int record_fd;
        int timeout_ms;
        const struct policy_prog *filter; /* policy_build_subvol */
};
int subvol_sweep_left(const struct subvol_sweep *s);
