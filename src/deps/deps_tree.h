/* Root's work on the tree an unprivileged installer wrote (the staging
 * directory pip filled, as server.user): sealing it root's and read-only,
 * and removing it. Only through descriptors: each directory is opened
 * relative to its parent with O_NOFOLLOW, each file is opened the same way
 * and changed through its fd, entries are removed with unlinkat relative
 * to a directory fd: a symlink or a rename the installer's account plants
 * mid-walk can never make root touch anything outside the tree. */
#pragma once

#include <sys/types.h>

/* Seal dirfd/rel ("layer-1"): directories first, each made root's and 0755
 * before its entries are looked at (from then on the installer cannot
 * change its entries), files root's and 0644 (0755 if executable by
 * anyone), symlinks root's (never followed). Refuses (-EPERM) an inode
 * owned by another account than installer or root, or a regular file with
 * other hard links; sockets and fifos are removed. 0 or -errno. */
int deps_tree_seal(int dirfd, const char *rel, uid_t installer);
/* Remove dirfd/rel ("layer-1" or "layer-1/.home") and everything in it;
 * the components of rel are opened with O_NOFOLLOW. 0 (also when it is not
 * there) or -errno. */
int deps_tree_remove(int dirfd, const char *rel);
