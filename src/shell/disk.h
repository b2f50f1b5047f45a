/* shell.home on a file system of its own (see disk.c). */
#pragma once

#include <stddef.h>

struct config;

/* With shell.disk_size: mount its image at shell.home (made at the first
 * start). 0, or -errno with err saying what to do. */
int shell_disk_mount(const struct config *cfg, char *err, size_t errlen);
/* At stop: unmount it (the loop device goes with it). */
void shell_disk_unmount(const struct config *cfg);
