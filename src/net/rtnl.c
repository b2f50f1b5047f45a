/* Route netlink requests for the run network (rtnl.h), built with libmnl. */
#include <arpa/inet.h>
#include <errno.h>
#include <libmnl/libmnl.h>
#include <linux/if.h>
#include <linux/if_addr.h>
#include <linux/if_link.h>
#include <linux/ip.h>
#include <linux/rtnetlink.h>
#include <linux/veth.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "net/nlreq.h"
#include "net/rtnl.h"

/* Large enough for the biggest request (a veth with its peer) and an ack. */
#define RTNL_BUF 1024

int rtnl_open(struct rtnl *r)
{
        r->nl = mnl_socket_open2(NETLINK_ROUTE, SOCK_CLOEXEC);
        if (!r->nl)
                return -errno;
        if (mnl_socket_bind(r->nl, 0, MNL_SOCKET_AUTOPID) < 0) {
                int e = errno;
                mnl_socket_close(r->nl);
                r->nl = NULL;
                return -e;
        }
        r->portid = mnl_socket_get_portid(r->nl);
        r->seq = (uint32_t)time(NULL);
        return 0;
}

void rtnl_close(struct rtnl *r)
{
        if (r->nl)
                mnl_socket_close(r->nl);
        r->nl = NULL;
}

static struct nlmsghdr *request(char *buf, struct rtnl *r, uint16_t type, uint16_t flags)
{
        return nlreq_header(buf, &r->seq, type, flags);
}

static int transact(struct rtnl *r, struct nlmsghdr *nlh)
{
        return nlreq_transact(r->nl, nlh);
}

static struct ifinfomsg *put_ifinfo(struct nlmsghdr *nlh, int index, unsigned flags)
{
        struct ifinfomsg *ifi = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifi));
        ifi->ifi_family = AF_UNSPEC;
        ifi->ifi_index = index;
        ifi->ifi_flags = flags;
        ifi->ifi_change = flags;
        return ifi;
}

int rtnl_veth_create(struct rtnl *r, const char *name, const char *peer_name, int peer_index,
                     int netns_fd)
{
        char buf[RTNL_BUF];
        struct nlmsghdr *nlh = request(buf, r, RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL);
        put_ifinfo(nlh, 0, 0);
        mnl_attr_put_strz(nlh, IFLA_IFNAME, name);
        struct nlattr *info = mnl_attr_nest_start(nlh, IFLA_LINKINFO);
        mnl_attr_put_strz(nlh, IFLA_INFO_KIND, "veth");
        struct nlattr *data = mnl_attr_nest_start(nlh, IFLA_INFO_DATA);
        struct nlattr *peer = mnl_attr_nest_start(nlh, VETH_INFO_PEER);
        /* The peer's attributes follow an ifinfomsg of its own. */
        struct ifinfomsg *pifi = (struct ifinfomsg *)((char *)nlh + nlh->nlmsg_len);
        nlh->nlmsg_len += MNL_ALIGN(sizeof(*pifi));
        memset(pifi, 0, sizeof(*pifi));
        pifi->ifi_family = AF_UNSPEC;
        pifi->ifi_index = peer_index;
        mnl_attr_put_strz(nlh, IFLA_IFNAME, peer_name);
        mnl_attr_put_u32(nlh, IFLA_NET_NS_FD, (uint32_t)netns_fd);
        mnl_attr_nest_end(nlh, peer);
        mnl_attr_nest_end(nlh, data);
        mnl_attr_nest_end(nlh, info);
        return transact(r, nlh);
}

int rtnl_link_up(struct rtnl *r, int index)
{
        char buf[RTNL_BUF];
        struct nlmsghdr *nlh = request(buf, r, RTM_NEWLINK, 0);
        put_ifinfo(nlh, index, IFF_UP);
        return transact(r, nlh);
}

/* RTM_NEWLINK on a link with its IFLA_AF_SPEC nest of family opened (in
 * nests[0..1]); the caller adds the family's attributes. */
static struct nlmsghdr *af_request(char *buf, struct rtnl *r, int index, int family,
                                   struct nlattr *nests[2])
{
        struct nlmsghdr *nlh = request(buf, r, RTM_NEWLINK, 0);
        put_ifinfo(nlh, index, 0);
        nests[0] = mnl_attr_nest_start(nlh, IFLA_AF_SPEC);
        nests[1] = mnl_attr_nest_start(nlh, (uint16_t)family);
        return nlh;
}

static int af_transact(struct rtnl *r, struct nlmsghdr *nlh, struct nlattr *nests[2])
{
        mnl_attr_nest_end(nlh, nests[1]);
        mnl_attr_nest_end(nlh, nests[0]);
        return transact(r, nlh);
}

int rtnl_link_ipv4_forwarding(struct rtnl *r, int index, bool on)
{
        char buf[RTNL_BUF];
        struct nlattr *nests[2];
        struct nlmsghdr *nlh = af_request(buf, r, index, AF_INET, nests);
        struct nlattr *conf = mnl_attr_nest_start(nlh, IFLA_INET_CONF);
        mnl_attr_put_u32(nlh, IPV4_DEVCONF_FORWARDING, on ? 1 : 0);
        mnl_attr_nest_end(nlh, conf);
        return af_transact(r, nlh, nests);
}

int rtnl_link_no_ipv6_address(struct rtnl *r, int index)
{
        char buf[RTNL_BUF];
        struct nlattr *nests[2];
        struct nlmsghdr *nlh = af_request(buf, r, index, AF_INET6, nests);
        mnl_attr_put_u8(nlh, IFLA_INET6_ADDR_GEN_MODE, IN6_ADDR_GEN_MODE_NONE);
        return af_transact(r, nlh, nests);
}

int rtnl_link_delete(struct rtnl *r, const char *name)
{
        char buf[RTNL_BUF];
        struct nlmsghdr *nlh = request(buf, r, RTM_DELLINK, 0);
        put_ifinfo(nlh, 0, 0);
        mnl_attr_put_strz(nlh, IFLA_IFNAME, name);
        return transact(r, nlh);
}

static int count_packets(const struct nlmsghdr *nlh, void *data)
{
        uint64_t *sum = data;
        const struct nlattr *a;
        mnl_attr_for_each(a, nlh, sizeof(struct ifinfomsg))
        {
                struct rtnl_link_stats64 st;
                if (mnl_attr_get_type(a) != IFLA_STATS64 ||
                    mnl_attr_get_payload_len(a) < sizeof(st))
                        continue;
                memcpy(&st, mnl_attr_get_payload(a), sizeof(st));
                *sum += st.rx_packets + st.tx_packets + st.rx_dropped + st.tx_dropped;
        }
        return MNL_CB_OK;
}

int rtnl_links_packets(struct rtnl *r, uint64_t *ret)
{
        char buf[8192];
        struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
        nlh->nlmsg_type = RTM_GETLINK;
        nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
        nlh->nlmsg_seq = ++r->seq;
        struct rtgenmsg *g = mnl_nlmsg_put_extra_header(nlh, sizeof(*g));
        g->rtgen_family = AF_UNSPEC;
        if (mnl_socket_sendto(r->nl, nlh, nlh->nlmsg_len) < 0)
                return -errno;
        uint64_t sum = 0;
        uint32_t seq = nlh->nlmsg_seq;
        for (;;) {
                ssize_t n = mnl_socket_recvfrom(r->nl, buf, sizeof(buf));
                if (n < 0)
                        return -errno;
                int cb = mnl_cb_run(buf, (size_t)n, seq, r->portid, count_packets, &sum);
                if (cb == MNL_CB_ERROR)
                        return -errno;
                if (cb == MNL_CB_STOP)
                        break;
        }
        *ret = sum;
        return 0;
}

int rtnl_addr_add_peer(struct rtnl *r, int index, uint32_t local, uint32_t peer)
{
        char buf[RTNL_BUF];
        struct nlmsghdr *nlh = request(buf, r, RTM_NEWADDR, NLM_F_CREATE | NLM_F_EXCL);
        struct ifaddrmsg *ifa = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifa));
        ifa->ifa_family = AF_INET;
        ifa->ifa_prefixlen = 32;
        ifa->ifa_scope = RT_SCOPE_UNIVERSE;
        ifa->ifa_index = (uint32_t)index;
        mnl_attr_put_u32(nlh, IFA_LOCAL, htonl(local));
        mnl_attr_put_u32(nlh, IFA_ADDRESS, htonl(peer));
        return transact(r, nlh);
}

int rtnl_route_default(struct rtnl *r, int index, uint32_t gateway)
{
        char buf[RTNL_BUF];
        struct nlmsghdr *nlh = request(buf, r, RTM_NEWROUTE, NLM_F_CREATE | NLM_F_EXCL);
        struct rtmsg *rtm = mnl_nlmsg_put_extra_header(nlh, sizeof(*rtm));
        rtm->rtm_family = AF_INET;
        rtm->rtm_table = RT_TABLE_MAIN;
        rtm->rtm_protocol = RTPROT_STATIC;
        rtm->rtm_scope = RT_SCOPE_UNIVERSE;
        rtm->rtm_type = RTN_UNICAST;
        mnl_attr_put_u32(nlh, RTA_GATEWAY, htonl(gateway));
        mnl_attr_put_u32(nlh, RTA_OIF, (uint32_t)index);
        return transact(r, nlh);
}
