/* Per-namespace socket counts from /proc/net/protocols (sockcount.h). */
#include "net/sockcount.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int sockcount_open(void)
{
        int fd = open("/proc/self/net/protocols", O_RDONLY | O_CLOEXEC);
        return fd < 0 ? -errno : fd;
}

int sockcount_read(int fd, unsigned long *ret)
{
        char buf[8192];
        ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
        if (n < 0)
                return -errno;
        if (n == (ssize_t)sizeof(buf) - 1)
                return -EFBIG; /* never cut a count short: treat as unknown */
        buf[n] = '\0';
        /* "protocol  size sockets  memory ..." then a line per protocol */
        char *line = strchr(buf, '\n');
        if (!line || strncmp(buf, "protocol", 8) != 0)
                return -EPROTO;
        unsigned long sum = 0;
        unsigned rows = 0;
        for (line++; *line; rows++) {
                char name[32];
                unsigned long size, sockets;
                if (sscanf(line, "%31s %lu %lu", name, &size, &sockets) != 3)
                        return -EPROTO;
                if (strcmp(name, "NETLINK") != 0)
                        sum += sockets;
                char *next = strchr(line, '\n');
                if (!next)
                        break;
                line = next + 1;
        }
        if (rows == 0)
                return -EPROTO;
        *ret = sum;
        return 0;
}
