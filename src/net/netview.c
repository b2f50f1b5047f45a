/* Per-namespace views of /proc/net, recorded and compared (netview.h).
 *
 * Which figures are host-wide was read from the kernel (6.x) and checked by
 * making TCP traffic on the host while a quiet namespace's files were read
 * twice: in protocols the memory and pressure columns (tcp_memory_allocated
 * and friends are per protocol, not per namespace); in sockstat TCP's
 * orphan, alloc and mem and UDP's mem (global counters). softnet_stat and
 * stat/ are per CPU for the whole host and are not read at all. netlink is
 * left out too: its only sockets in a run's namespace are the jailer's.
 * So are tcp, udp and raw (and their IPv6 and Lite kinds): each read walks
 * the host's whole table for that protocol (~3-4 ms for TCP here, where
 * every other file takes ~5-20 us), and the per-namespace socket counts
 * of protocols and sockstat already show any socket left. */
#include "net/netview.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/util.h"
#include "net/netns.h"
#include "net/sockcount.h"

/* Larger than any of these files in a namespace a run left untouched: a
 * file that fills it is never read as the same. */
#define VIEW_BUF 16384

static const char *const view_files[] = {
    /* counters */
    "snmp", "netstat", "snmp6", "sockstat", "sockstat6", "protocols", "dev", "xfrm_stat",
    /* sockets: the tables of namespaces of their own (the counts of
     * protocols and sockstat cover TCP, UDP and raw ones, orphans and
     * TIME_WAIT included) */
    "icmp", "icmp6", "unix", "packet",
    /* multicast and anycast memberships, flow labels */
    "igmp", "igmp6", "mcfilter", "mcfilter6", "dev_mcast", "anycast6", "ip6_flowlabel",
    /* addresses, routes, neighbours */
    "if_inet6", "route", "ipv6_route", "rt6_stats", "fib_trie", "arp"};

#define VIEW_FILES ELEMENTSOF(view_files)

struct netview {
        int protocols; /* its /proc/net/protocols, kept open (sockcount.h) */
        bool absent[VIEW_FILES];
        char *fresh[VIEW_FILES];
};

int netview_open(struct netview **ret)
{
        struct netview *v = calloc(1, sizeof(*v));
        if (!v)
                return -ENOMEM;
        v->protocols = sockcount_open();
        if (v->protocols < 0) {
                int r = v->protocols;
                free(v);
                return r;
        }
        *ret = v;
        return 0;
}

struct netview *netview_free(struct netview *v)
{
        if (!v)
                return NULL;
        safe_close(v->protocols);
        for (size_t i = 0; i < VIEW_FILES; i++)
                free(v->fresh[i]);
        free(v);
        return NULL;
}

enum line_kind { LINE_PROTOCOL, LINE_TCP, LINE_UDP, LINE_OTHER };

/* Whether the token at index col of a line is host-wide; prev is the token
 * before it ("" for the first). */
static bool host_wide(enum line_kind kind, int col, const char *prev)
{
        switch (kind) {
        case LINE_PROTOCOL:
                return col == 3 || col == 4; /* memory, press */
        case LINE_TCP:
                return strcmp(prev, "orphan") == 0 || strcmp(prev, "alloc") == 0 ||
                       strcmp(prev, "mem") == 0;
        case LINE_UDP:
                return strcmp(prev, "mem") == 0;
        default:
                return false;
        }
}

/* One line rewritten in place at out (never past what it reads): its
 * tokens one space apart, the host-wide ones as "*", so that neither
 * their digits nor the padding before them (which shrinks as they grow)
 * shows. The end of what was written. */
static char *mask_line(bool protocols, char *line, size_t len, char *out)
{
        enum line_kind kind = protocols                        ? LINE_PROTOCOL
                              : strncmp(line, "TCP: ", 5) == 0 ? LINE_TCP
                              : strncmp(line, "UDP: ", 5) == 0 ? LINE_UDP
                                                               : LINE_OTHER;
        char prev[16] = "";
        int col = 0;
        for (size_t i = 0; i < len;) {
                while (i < len && line[i] == ' ')
                        i++;
                if (i == len)
                        break;
                size_t start = i;
                while (i < len && line[i] != ' ')
                        i++;
                size_t n = i - start;
                bool hide = host_wide(kind, col, prev);
                if (kind == LINE_TCP || kind == LINE_UDP) {
                        size_t k = n < sizeof(prev) - 1 ? n : sizeof(prev) - 1;
                        memcpy(prev, line + start, k);
                        prev[k] = '\0';
                }
                if (col++ > 0)
                        *out++ = ' ';
                if (hide) {
                        *out++ = '*';
                } else {
                        memmove(out, line + start, n);
                        out += n;
                }
        }
        return out;
}

void netview_mask(const char *name, char *text)
{
        bool protocols = strcmp(name, "protocols") == 0;
        if (!protocols && strcmp(name, "sockstat") != 0)
                return;
        char *out = text;
        bool header = true;
        for (char *line = text; *line;) {
                size_t len = strcspn(line, "\n");
                bool end = line[len] == '\0';
                if (header && protocols) {
                        memmove(out, line, len);
                        out += len;
                } else {
                        out = mask_line(protocols, line, len, out);
                }
                if (!end)
                        *out++ = '\n';
                header = false;
                line += len + !end;
        }
        *out = '\0';
}

/* File i of the current namespace read whole and masked into buf
 * (VIEW_BUF bytes), through dir (its /proc/self/net). */
static int read_masked(int dir, size_t i, char *buf)
{
        int fd = openat(dir, view_files[i], O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        ssize_t n = pread(fd, buf, VIEW_BUF - 1, 0);
        int e = errno;
        close(fd);
        if (n < 0)
                return -e;
        if (n == VIEW_BUF - 1)
                return -EFBIG;
        buf[n] = '\0';
        netview_mask(view_files[i], buf);
        return 0;
}

struct pass {
        struct netview *v;
        bool record;
        char *buf;
};

/* Inside the namespace (netns_run): every file recorded, or compared with
 * its record (1 same, 0 not). Files are opened for each pass rather than
 * kept: a namespace waiting in a pool then holds a few descriptors, not
 * thirty. */
static int pass_inside(void *data)
{
        struct pass *ps = data;
        struct netview *v = ps->v;
        int dir = open("/proc/self/net", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dir < 0)
                return -errno;
        int r = 1;
        for (size_t i = 0; r == 1 && i < VIEW_FILES; i++) {
                if (!ps->record && v->absent[i])
                        continue;
                int k = read_masked(dir, i, ps->buf);
                if (k == -ENOENT && ps->record) {
                        v->absent[i] = true; /* not on this kernel */
                } else if (k < 0) {
                        r = k;
                } else if (ps->record) {
                        free(v->fresh[i]);
                        if (!(v->fresh[i] = strdup(ps->buf)))
                                r = -ENOMEM;
                } else if (!v->fresh[i]) {
                        r = -ENODATA;
                } else if (strcmp(ps->buf, v->fresh[i]) != 0) {
                        r = 0;
                }
        }
        close(dir);
        return r;
}

static int pass(struct netview *v, int nsfd, bool record)
{
        _cleanup_free_ char *buf = malloc(VIEW_BUF);
        if (!buf)
                return -ENOMEM;
        struct pass ps = {v, record, buf};
        return netns_run(nsfd, pass_inside, &ps);
}

int netview_record(struct netview *v, int nsfd)
{
        int r = pass(v, nsfd, true);
        return r < 0 ? r : 0;
}

int netview_same(struct netview *v, int nsfd)
{
        return pass(v, nsfd, false);
}

int netview_sockets(struct netview *v, unsigned long *ret)
{
        return sockcount_read(v->protocols, ret);
}
