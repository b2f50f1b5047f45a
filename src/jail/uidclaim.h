/* UID ranges claimed by the lockboxd daemons of one host: a daemon whose
 * jail.uid_min..jail.uid_max overlaps the range of another live daemon
 * would hand the same UIDs to its runs (RLIMIT_NPROC and file ownership
 * then cross daemons), so it refuses to start. One file per daemon under
 * /run/lockbox/uids/, read and written under a lock; a dead daemon's file
 * is removed by the next start. */
#pragma once

#include <stddef.h>
#include <sys/types.h>

/* Claim first..last for this process: 0, or -EBUSY (another live daemon
 * holds an overlapping range) or -errno, with err filled. */
int uidclaim_take(uid_t first, uid_t last, char *err, size_t errlen);
/* Give this process's claim back. */
void uidclaim_drop(void);
