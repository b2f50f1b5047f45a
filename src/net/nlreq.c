/* Netlink request and acknowledgement (nlreq.h), over libmnl. */
#include "net/nlreq.h"

#include <errno.h>
#include <libmnl/libmnl.h>
#include <linux/netlink.h>

#include "base/util.h"

/* Room for an acknowledgement, or for several multicast messages read in
 * one go before it. */
#define NLREQ_BUF 8192

struct nlmsghdr *nlreq_header(char *buf, uint32_t *seq, uint16_t type, uint16_t flags)
{
        struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
        nlh->nlmsg_type = type;
        nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | flags;
        nlh->nlmsg_seq = ++*seq;
        return nlh;
}

int nlreq_transact(struct mnl_socket *nl, const struct nlmsghdr *nlh)
{
        char buf[NLREQ_BUF] __attribute__((aligned(NLMSG_ALIGNTO)));
        uint32_t portid = mnl_socket_get_portid(nl);
        if (mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) < 0)
                return -errno;
        for (;;) {
                ssize_t n = RETRY_EINTR(mnl_socket_recvfrom(nl, buf, sizeof(buf)));
                if (n < 0)
                        return -errno;
                int len = (int)n;
                for (const struct nlmsghdr *m = (const struct nlmsghdr *)buf; mnl_nlmsg_ok(m, len);
                     m = mnl_nlmsg_next(m, &len)) {
                        if (m->nlmsg_type != NLMSG_ERROR || m->nlmsg_seq != nlh->nlmsg_seq ||
                            (m->nlmsg_pid && m->nlmsg_pid != portid))
                                continue;
                        if (m->nlmsg_len < mnl_nlmsg_size(sizeof(struct nlmsgerr)))
                                return -EBADMSG;
                        const struct nlmsgerr *e = mnl_nlmsg_get_payload(m);
                        return e->error; /* 0 for an acknowledgement, else -errno */
                }
        }
}
