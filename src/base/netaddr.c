/* Parsing and printing of IPv4 prefixes and egress entries (netaddr.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/netaddr.h"
#include "base/parse.h"

static uint32_t mask_of(unsigned len)
{
        return len == 0 ? 0 : ~UINT32_C(0) << (32 - len);
}

static int fail(const char **ret_why, const char *why)
{
        if (ret_why)
                *ret_why = why;
        return -EINVAL;
}

int netaddr_parse_prefix(const char *s, struct netaddr_prefix *ret, const char **ret_why)
{
        char buf[INET_ADDRSTRLEN + 4];
        if (!s || !*s)
                return fail(ret_why, "empty");
        if (strchr(s, '[') || strchr(s, ':'))
                return fail(ret_why, "IPv6 is not offered to runs (they have no IPv6 route)");
        if (strlen(s) >= sizeof(buf))
                return fail(ret_why, "not an IPv4 address or CIDR");
        snprintf(buf, sizeof(buf), "%s", s);
        int len = 32;
        char *slash = strchr(buf, '/');
        if (slash) {
                *slash = '\0';
                if (parse_int_range(slash + 1, 0, 32, &len) < 0)
                        return fail(ret_why, "prefix length must be 0 to 32");
        }
        struct in_addr a;
        if (inet_pton(AF_INET, buf, &a) != 1)
                return fail(ret_why, "not an IPv4 address or CIDR (host names are not accepted)");
        uint32_t h = ntohl(a.s_addr);
        if (h & ~mask_of((unsigned)len))
                return fail(ret_why, "host bits set after the prefix length");
        *ret = (struct netaddr_prefix){.addr = h, .len = (unsigned)len};
        return 0;
}

int netaddr_parse_entry(const char *s, struct netaddr_entry *ret, const char **ret_why)
{
        char buf[INET_ADDRSTRLEN + 12];
        if (!s || !*s)
                return fail(ret_why, "empty");
        if (strchr(s, '['))
                return fail(ret_why, "IPv6 is not offered to runs (they have no IPv6 route)");
        if (strlen(s) >= sizeof(buf))
                return fail(ret_why, "not CIDR, CIDR:port or ADDRESS:port");
        snprintf(buf, sizeof(buf), "%s", s);
        int port = 0;
        char *colon = strchr(buf, ':');
        if (colon) {
                if (strchr(colon + 1, ':'))
                        return fail(ret_why,
                                    "IPv6 is not offered to runs (they have no IPv6 route)");
                *colon = '\0';
                if (parse_int_range(colon + 1, 1, 65535, &port) < 0)
                        return fail(ret_why, "port must be 1 to 65535");
        }
        struct netaddr_prefix p;
        int r = netaddr_parse_prefix(buf, &p, ret_why);
        if (r < 0)
                return r;
        *ret = (struct netaddr_entry){.dst = p, .port = (unsigned)port};
        return 0;
}

void netaddr_format_prefix(const struct netaddr_prefix *p, char *buf, size_t len)
{
        struct in_addr a = {.s_addr = htonl(p->addr)};
        char ip[INET_ADDRSTRLEN];
        inet_ntop(AF_INET, &a, ip, sizeof(ip));
        if (p->len == 32)
                snprintf(buf, len, "%s", ip);
        else
                snprintf(buf, len, "%s/%u", ip, p->len);
}

int netaddr_contains(const struct netaddr_prefix *p, uint32_t addr)
{
        return (addr & mask_of(p->len)) == p->addr;
}

uint64_t netaddr_size(const struct netaddr_prefix *p)
{
        return UINT64_C(1) << (32 - p->len);
}
