/* Destroying a namespace's TCP and UDP sockets (sockdiag.h): one dump per
 * family and protocol, then a SOCK_DESTROY request for each socket found,
 * answered one at a time. */
#include "net/sockdiag.h"

#include <errno.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/util.h"

/* Sockets destroyed per call at most: a run holds at most its file limit
 * of them, and the rest go at the next call. */
#define DESTROY_MAX 1024

struct diag_req {
        struct nlmsghdr nh;
        struct inet_diag_req_v2 r;
};

int sockdiag_open(void)
{
        int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
        if (fd < 0)
                return -errno;
        struct timeval tv = {.tv_sec = 1};
        if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0) {
                int e = errno;
                close(fd);
                return -e;
        }
        return fd;
}

static int send_req(int fd, uint16_t type, uint16_t flags, uint8_t family, uint8_t protocol,
                    const struct inet_diag_sockid *id)
{
        struct diag_req req = {
            .nh = {.nlmsg_len = sizeof(req),
                   .nlmsg_type = type,
                   .nlmsg_flags = NLM_F_REQUEST | flags},
            .r = {.sdiag_family = family, .sdiag_protocol = protocol, .idiag_states = ~0U}};
        if (id)
                req.r.id = *id;
        struct sockaddr_nl nl = {.nl_family = AF_NETLINK};
        return sendto(fd, &req, sizeof(req), 0, (struct sockaddr *)&nl, sizeof(nl)) < 0 ? -errno
                                                                                        : 0;
}

/* The ids of the dump's sockets into ids (up to max), their count in *n. */
static int dump(int fd, uint8_t family, uint8_t protocol, struct inet_diag_sockid *ids, size_t max,
                size_t *n)
{
        int r = send_req(fd, SOCK_DIAG_BY_FAMILY, NLM_F_DUMP, family, protocol, NULL);
        if (r < 0)
                return r;
        static char buf[32768];
        for (;;) {
                ssize_t len = recv(fd, buf, sizeof(buf), 0);
                if (len < 0)
                        return -errno;
                for (struct nlmsghdr *h = (struct nlmsghdr *)buf; NLMSG_OK(h, (size_t)len);
                     h = NLMSG_NEXT(h, len)) {
                        if (h->nlmsg_type == NLMSG_DONE)
                                return 0;
                        if (h->nlmsg_type == NLMSG_ERROR) {
                                const struct nlmsgerr *e = NLMSG_DATA(h);
                                return e->error ? e->error : -EPROTO;
                        }
                        const struct inet_diag_msg *m = NLMSG_DATA(h);
                        if (h->nlmsg_type == SOCK_DIAG_BY_FAMILY && *n < max)
                                ids[(*n)++] = m->id;
                }
        }
}

/* One SOCK_DESTROY and its acknowledgement: 0 or the kernel's -errno. */
static int destroy(int fd, uint8_t family, uint8_t protocol, const struct inet_diag_sockid *id)
{
        int r = send_req(fd, SOCK_DESTROY, NLM_F_ACK, family, protocol, id);
        if (r < 0)
                return r;
        char buf[512];
        ssize_t len = recv(fd, buf, sizeof(buf), 0);
        if (len < 0)
                return -errno;
        struct nlmsghdr *h = (struct nlmsghdr *)buf;
        if (!NLMSG_OK(h, (size_t)len) || h->nlmsg_type != NLMSG_ERROR)
                return -EPROTO;
        return ((const struct nlmsgerr *)NLMSG_DATA(h))->error;
}

int sockdiag_destroy_all(int fd, unsigned *ret)
{
        static const struct {
                uint8_t family, protocol;
        } kinds[] = {{AF_INET, IPPROTO_TCP},
                     {AF_INET6, IPPROTO_TCP},
                     {AF_INET, IPPROTO_UDP},
                     {AF_INET6, IPPROTO_UDP}};
        static struct inet_diag_sockid ids[DESTROY_MAX];
        unsigned destroyed = 0;
        int first_error = 0;
        for (size_t k = 0; k < ELEMENTSOF(kinds); k++) {
                size_t n = 0;
                int r = dump(fd, kinds[k].family, kinds[k].protocol, ids, ELEMENTSOF(ids), &n);
                for (size_t i = 0; r == 0 && i < n; i++) {
                        int d = destroy(fd, kinds[k].family, kinds[k].protocol, &ids[i]);
                        if (d == 0)
                                destroyed++;
                        else if (d != -ENOENT && !first_error)
                                first_error = d; /* gone meanwhile: not an error */
                }
                if (r < 0 && !first_error)
                        first_error = r;
        }
        *ret = destroyed;
        return first_error;
}
