/* Unit tests for net/nlreq.c against the kernel's route netlink (no
 * privilege needed: a GETLINK is anyone's): the acknowledgement of the
 * request is found behind the answer that comes first, an error is the
 * kernel's own, and sequence numbers follow one another. */
#include <errno.h>
#include <libmnl/libmnl.h>
#include <linux/rtnetlink.h>
#include <sys/socket.h>

#include "net/nlreq.h"
#include "test.h"

static struct mnl_socket *route_socket(void)
{
        struct mnl_socket *nl = mnl_socket_open2(NETLINK_ROUTE, SOCK_CLOEXEC);
        if (nl && mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) < 0) {
                mnl_socket_close(nl);
                return NULL;
        }
        return nl;
}

static struct nlmsghdr *getlink(char *buf, uint32_t *seq, int index)
{
        struct nlmsghdr *nlh = nlreq_header(buf, seq, RTM_GETLINK, 0);
        struct ifinfomsg *ifi = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifi));
        ifi->ifi_family = AF_UNSPEC;
        ifi->ifi_index = index;
        return nlh;
}

TEST(nlreq_finds_the_acknowledgement_behind_an_answer)
{
        struct mnl_socket *nl = route_socket();
        EXPECT_NOT_NULL(nl);
        char buf[256];
        uint32_t seq = 41;
        struct nlmsghdr *nlh = getlink(buf, &seq, 1); /* lo: a NEWLINK answer, then the ack */
        EXPECT_UINT_EQ(nlh->nlmsg_seq, 42);
        EXPECT_UINT_EQ(nlh->nlmsg_flags & NLM_F_ACK, NLM_F_ACK);
        EXPECT_ERRNO(nlreq_transact(nl, nlh), 0);
        nlh = getlink(buf, &seq, 0x7ffffff0); /* no such link */
        EXPECT_UINT_EQ(nlh->nlmsg_seq, 43);
        EXPECT_ERRNO(nlreq_transact(nl, nlh), -ENODEV);
        /* the socket serves the next request: nothing of the last is left */
        nlh = getlink(buf, &seq, 1);
        EXPECT_ERRNO(nlreq_transact(nl, nlh), 0);
        mnl_socket_close(nl);
}
