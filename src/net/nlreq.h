/* One netlink request and its acknowledgement, for every netlink socket
 * of src/net/ (route netlink in rtnl.c, nfnetlink_log in nflog.c). */
#pragma once

#include <stdint.h>

struct mnl_socket;
struct nlmsghdr;

/* A header for a request of type with NLM_F_REQUEST | NLM_F_ACK | flags
 * at the start of buf, its sequence number the next of *seq. */
struct nlmsghdr *nlreq_header(char *buf, uint32_t *seq, uint16_t type, uint16_t flags);
/* Sends nlh and waits for the kernel's acknowledgement of that very
 * request (an NLMSG_ERROR carrying its sequence number): 0, the error the
 * kernel gave, or the socket's -errno. Any other message read meanwhile
 * (a group's multicast, a late answer to an earlier request) is skipped. */
int nlreq_transact(struct mnl_socket *nl, const struct nlmsghdr *nlh);
