/* IPv4 prefixes and egress entries as operators write them in
 * network.allow, network.egress_only and network.subnet: "10.0.0.0/8",
 * "10.213.7.2" (a /32), "10.0.0.0/8:443", "10.213.7.2:8080". Runs have no
 * IPv6 route, so IPv6 entries are refused with a reason. */
#pragma once

#include <stdint.h>
#include <stddef.h>

struct netaddr_prefix {
        uint32_t addr; /* host byte order, host bits zero */
        unsigned len;  /* 0..32 */
};

struct netaddr_entry {
        struct netaddr_prefix dst;
        unsigned port; /* 0: every port */
};

/* "A.B.C.D/LEN" or "A.B.C.D" (/32). -EINVAL with *ret_why (a static
 * sentence) when malformed, when host bits are set or for IPv6. */
int netaddr_parse_prefix(const char *s, struct netaddr_prefix *ret, const char **ret_why);
/* A prefix, optionally followed by ":PORT" (1-65535). */
int netaddr_parse_entry(const char *s, struct netaddr_entry *ret, const char **ret_why);
/* "10.0.0.0/8" (or "10.213.7.2" for a /32) into buf. */
void netaddr_format_prefix(const struct netaddr_prefix *p, char *buf, size_t len);
/* Whether addr (host order) lies in p. */
int netaddr_contains(const struct netaddr_prefix *p, uint32_t addr);
/* Addresses in p: 2^(32 - len). */
uint64_t netaddr_size(const struct netaddr_prefix *p);
