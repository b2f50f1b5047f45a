/* File-descriptor helpers shared by the processes lockboxd forks. */
#pragma once

#include <stddef.h>

/* Close every fd from `from` up, except those listed (negative entries
 * are ignored). */
void fd_close_all_except(int from, const int *keep, size_t n);
