/* File-descriptor helpers shared by the processes lockboxd forks. */
#pragma once

#include <stddef.h>

/* Close every fd from `from` up, except those listed (negative entries
 * are ignored): with close_range, or where a kernel or a filter refuses
 * it, one by one (each fd /proc/self/fd lists, else every number below
 * RLIMIT_NOFILE), so no inherited fd survives unseen. */
void fd_close_all_except(int from, const int *keep, size_t n);
/* The same with nothing kept. */
void fd_close_from(int from);
/* dir (made, with its parents, 0755 where missing) and in it the file
 * name (0600), held with an exclusive flock: the fd, or -errno. Closing it
 * lets go. For state shared by the daemons of a host, under /run/lockbox. */
int fd_lock_in(const char *dir, const char *name);
