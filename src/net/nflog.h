/* Refusals as they happen: the egress table logs each refused packet (at
 * most 50 a second per reason) to an nfnetlink_log group with its reason
 * as prefix; the jailer reads them here and tells them to the run whose
 * address sent them. Private to src/net/. */
#pragma once

#include <stdint.h>

#include "net/net.h"

/* A non-blocking NETLINK_NETFILTER socket bound to a free log group from
 * first on (tried in turn); the group in *ret_group. */
int nflog_open(uint16_t first, int *ret_fd, uint16_t *ret_group);
/* Every message waiting: fn for each refusal decoded. 0 or -errno. */
int nflog_drain(int fd, void (*fn)(void *data, const struct net_refusal *r), void *data);
