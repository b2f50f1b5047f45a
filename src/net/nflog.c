/* Reading refused packets from an nfnetlink_log group (nflog.h). The
 * kernel sends them; we copy at most the first 64 bytes of each packet,
 * enough for the IPv4 header and the ports. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <libmnl/libmnl.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_log.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/util.h"
#include "net/nflog.h"
#include "net/nlreq.h"

#define COPY_BYTES 64

static struct nlmsghdr *config_msg(char *buf, uint32_t *seq, uint16_t group)
{
        struct nlmsghdr *nlh =
            nlreq_header(buf, seq, (NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_CONFIG, 0);
        struct nfgenmsg *g = mnl_nlmsg_put_extra_header(nlh, sizeof(*g));
        g->nfgen_family = AF_INET;
        g->version = NFNETLINK_V0;
        g->res_id = htons(group);
        return nlh;
}

/* Bind the group, copy the start of each packet, send each at once. */
static int bind_group(struct mnl_socket *nl, uint16_t group)
{
        char buf[256];
        uint32_t seq = (uint32_t)time(NULL);
        struct nlmsghdr *nlh = config_msg(buf, &seq, group);
        struct nfulnl_msg_config_cmd cmd = {.command = NFULNL_CFG_CMD_BIND};
        mnl_attr_put(nlh, NFULA_CFG_CMD, sizeof(cmd), &cmd);
        int r = nlreq_transact(nl, nlh);
        if (r < 0)
                return r;
        nlh = config_msg(buf, &seq, group);
        struct nfulnl_msg_config_mode mode = {.copy_range = htonl(COPY_BYTES),
                                              .copy_mode = NFULNL_COPY_PACKET};
        mnl_attr_put(nlh, NFULA_CFG_MODE, sizeof(mode), &mode);
        mnl_attr_put_u32(nlh, NFULA_CFG_QTHRESH, htonl(1));
        return nlreq_transact(nl, nlh);
}

int nflog_open(uint16_t first, int *ret_fd, uint16_t *ret_group)
{
        for (unsigned g = first; g < (unsigned)first + 64 && g <= 0xffff; g++) {
                struct mnl_socket *nl = mnl_socket_open2(NETLINK_NETFILTER, SOCK_CLOEXEC);
                if (!nl)
                        return -errno;
                int r = mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) < 0
                            ? -errno
                            : bind_group(nl, (uint16_t)g);
                if (r == 0) {
                        /* keep the fd, drop libmnl's wrapper around it */
                        int fd = fcntl(mnl_socket_get_fd(nl), F_DUPFD_CLOEXEC, 3);
                        mnl_socket_close(nl);
                        if (fd < 0)
                                return -errno;
                        *ret_fd = fd;
                        *ret_group = (uint16_t)g;
                        return 0;
                }
                mnl_socket_close(nl);
                if (r != -EBUSY)
                        return r;
        }
        return -EBUSY;
}

struct drain_ctx {
        void (*fn)(void *data, const struct net_refusal *r);
        void *data;
};

static void decode(const struct nlattr *payload, const struct nlattr *prefix, struct net_refusal *r)
{
        const uint8_t *p = mnl_attr_get_payload(payload);
        size_t len = mnl_attr_get_payload_len(payload);
        struct iphdr ip;
        if (len < sizeof(ip))
                return;
        memcpy(&ip, p, sizeof(ip));
        size_t hl = (size_t)ip.ihl * 4;
        r->src = ntohl(ip.saddr);
        r->dst = ntohl(ip.daddr);
        r->proto = ip.protocol;
        if ((ip.protocol == IPPROTO_TCP || ip.protocol == IPPROTO_UDP) && hl >= sizeof(ip) &&
            len >= hl + 4) {
                uint16_t port;
                memcpy(&port, p + hl + 2, 2);
                r->dport = ntohs(port);
        }
        if (prefix)
                snprintf(r->reason, sizeof(r->reason), "%.*s",
                         (int)strnlen(mnl_attr_get_str(prefix), mnl_attr_get_payload_len(prefix)),
                         mnl_attr_get_str(prefix));
}

static int on_message(const struct nlmsghdr *nlh, void *data)
{
        struct drain_ctx *c = data;
        const struct nlattr *payload = NULL, *prefix = NULL;
        const struct nlattr *a;
        if ((nlh->nlmsg_type & 0xff) != NFULNL_MSG_PACKET)
                return MNL_CB_OK;
        mnl_attr_for_each(a, nlh, sizeof(struct nfgenmsg))
        {
                if (mnl_attr_get_type(a) == NFULA_PAYLOAD)
                        payload = a;
                else if (mnl_attr_get_type(a) == NFULA_PREFIX)
                        prefix = a;
        }
        struct net_refusal r = {0};
        if (payload) {
                decode(payload, prefix, &r);
                if (r.src)
                        c->fn(c->data, &r);
        }
        return MNL_CB_OK;
}

int nflog_drain(int fd, void (*fn)(void *data, const struct net_refusal *r), void *data)
{
        char buf[8192];
        struct drain_ctx c = {fn, data};
        for (;;) {
                ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
                if (n < 0)
                        return errno == EAGAIN ? 0 : errno == ENOBUFS ? 0 : -errno;
                if (mnl_cb_run(buf, (size_t)n, 0, 0, on_message, &c) == MNL_CB_ERROR)
                        return -errno;
        }
}
