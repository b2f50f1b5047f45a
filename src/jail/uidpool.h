/* Pool of sandbox identities: each concurrent run borrows one UID (used as
 * its GID too) and returns it only after every process of the run is gone,
 * so RLIMIT_NPROC and file ownership never cross runs. Not thread-safe: the
 * jailer is single-threaded. */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

struct uidpool;

int uidpool_new(uid_t first, uid_t last, struct uidpool **ret);
struct uidpool *uidpool_free(struct uidpool *p);
/* Borrow the least recently returned free UID; -EAGAIN when none is free. */
int uidpool_acquire(struct uidpool *p, uid_t *ret_uid);
/* Return a UID; -EINVAL if it is outside the pool or not borrowed. */
int uidpool_release(struct uidpool *p, uid_t uid);
unsigned uidpool_in_use(const struct uidpool *p);
bool uidpool_contains(const struct uidpool *p, uid_t uid);
