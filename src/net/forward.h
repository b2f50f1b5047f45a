/* IPv4 forwarding, which routing runs' traffic needs. A daemon turns it on
 * only if it is off, records the value it found under /run/lockbox, and the
 * last daemon of the host to stop puts it back; a crashed daemon's record
 * is found by the next start. Private to src/net/. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* Enable forwarding; *ret_was_off: the host had it off before any daemon.
 * -EROFS when it is off and /proc/sys cannot be written (a container's):
 * the caller turns it on link by link instead (rtnl.h). */
int forward_acquire(bool *ret_was_off, char *err, size_t errlen);
/* Give it back (restore when no other live daemon holds it). */
void forward_release(void);
