/* Per-namespace views of /proc/net, recorded and compared (netview.h).
 *
 * Which figures are host-wide was read from the kernel (6.x) and checked by
 * making TCP traffic on the host while a quiet namespace's files were read
 * twice: in protocols the memory and pressure columns (tcp_memory_allocated
 * and friends are per protocol, not per namespace); in sockstat TCP's
 * orphan, alloc and mem and UDP's mem (global counters). softnet_stat and
 * stat/ are per CPU for the whole host and are not read at all. netlink is
 * left out too: its only sockets in a run's namespace are the jailer's. */
#include "net/netview.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/util.h"
#include "net/sockcount.h"

/* Larger than any of these files in a namespace a run left untouched: a
 * file that fills it is never read as the same. */
#define VIEW_BUF 16384

static const char *const view_files[] = {
    /* counters */
    "snmp", "netstat", "snmp6", "sockstat", "sockstat6", "protocols", "dev", "xfrm_stat",
    /* sockets (orphans and TIME_WAIT included) */
    "tcp", "tcp6", "udp", "udp6", "udplite", "udplite6", "raw", "raw6", "icmp", "icmp6", "unix",
    "packet",
    /* multicast and anycast memberships, flow labels */
    "igmp", "igmp6", "mcfilter", "mcfilter6", "dev_mcast", "anycast6", "ip6_flowlabel",
    /* addresses, routes, neighbours */
    "if_inet6", "route", "ipv6_route", "rt6_stats", "fib_trie", "arp"};

#define VIEW_FILES ELEMENTSOF(view_files)

struct netview {
        int fd[VIEW_FILES]; /* -1: not on this kernel */
        char *fresh[VIEW_FILES];
        int protocols; /* an index of fd */
};

int netview_open(struct netview **ret)
{
        struct netview *v = calloc(1, sizeof(*v));
        if (!v)
                return -ENOMEM;
        v->protocols = -1;
        for (size_t i = 0; i < VIEW_FILES; i++) {
                char path[64];
                snprintf(path, sizeof(path), "/proc/self/net/%s", view_files[i]);
                v->fd[i] = open(path, O_RDONLY | O_CLOEXEC);
                if (v->fd[i] < 0 && errno != ENOENT) {
                        int e = errno;
                        netview_free(v);
                        return -e;
                }
                if (strcmp(view_files[i], "protocols") == 0)
                        v->protocols = v->fd[i] >= 0 ? (int)i : -1;
        }
        if (v->protocols < 0) {
                netview_free(v);
                return -ENOENT;
        }
        *ret = v;
        return 0;
}

struct netview *netview_free(struct netview *v)
{
        if (!v)
                return NULL;
        for (size_t i = 0; i < VIEW_FILES; i++) {
                safe_close(v->fd[i]);
                free(v->fresh[i]);
        }
        free(v);
        return NULL;
}

/* Replace the token after each word of names (on lines starting with
 * prefix) by "*". */
static void mask_after(char *line, size_t len, const char *const *names)
{
        for (const char *const *n = names; *n; n++) {
                size_t k = strlen(*n);
                for (char *p = line; p + k < line + len; p++) {
                        if (memcmp(p, *n, k) != 0 || p[k] != ' ' || (p > line && p[-1] != ' '))
                                continue;
                        for (char *q = p + k + 1; q < line + len && *q != ' '; q++)
                                *q = '*';
                        break;
                }
        }
}

/* Replace columns first..last (0-based, space separated) by stars. */
static void mask_columns(char *line, size_t len, int first, int last)
{
        int col = -1;
        bool in = false;
        for (size_t i = 0; i < len; i++) {
                if (line[i] != ' ') {
                        col += !in;
                        in = true;
                        if (col >= first && col <= last)
                                line[i] = '*';
                } else {
                        in = false;
                }
        }
}

void netview_mask(const char *name, char *text)
{
        static const char *const tcp[] = {"orphan", "alloc", "mem", NULL};
        static const char *const udp[] = {"mem", NULL};
        bool protocols = strcmp(name, "protocols") == 0, sockstat = strcmp(name, "sockstat") == 0;
        if (!protocols && !sockstat)
                return;
        bool header = true;
        for (char *line = text; *line;) {
                size_t len = strcspn(line, "\n");
                if (protocols && !header)
                        mask_columns(line, len, 3, 4); /* memory, press */
                else if (sockstat && strncmp(line, "TCP: ", 5) == 0)
                        mask_after(line, len, tcp);
                else if (sockstat && strncmp(line, "UDP: ", 5) == 0)
                        mask_after(line, len, udp);
                header = false;
                line += len + (line[len] == '\n');
        }
}

/* File i read whole and masked into buf (VIEW_BUF bytes). */
static int read_masked(struct netview *v, size_t i, char *buf)
{
        ssize_t n = pread(v->fd[i], buf, VIEW_BUF - 1, 0);
        if (n < 0)
                return -errno;
        if (n == VIEW_BUF - 1)
                return -EFBIG;
        buf[n] = '\0';
        netview_mask(view_files[i], buf);
        return 0;
}

int netview_record(struct netview *v)
{
        _cleanup_free_ char *buf = malloc(VIEW_BUF);
        if (!buf)
                return -ENOMEM;
        for (size_t i = 0; i < VIEW_FILES; i++) {
                if (v->fd[i] < 0)
                        continue;
                int r = read_masked(v, i, buf);
                if (r < 0)
                        return r;
                free(v->fresh[i]);
                if (!(v->fresh[i] = strdup(buf)))
                        return -ENOMEM;
        }
        return 0;
}

int netview_same(struct netview *v)
{
        char buf[VIEW_BUF];
        for (size_t i = 0; i < VIEW_FILES; i++) {
                if (v->fd[i] < 0)
                        continue;
                if (!v->fresh[i])
                        return -ENODATA;
                int r = read_masked(v, i, buf);
                if (r < 0)
                        return r;
                if (strcmp(buf, v->fresh[i]) != 0)
                        return 0;
        }
        return 1;
}

int netview_sockets(struct netview *v, unsigned long *ret)
{
        return sockcount_read(v->fd[v->protocols], ret);
}
