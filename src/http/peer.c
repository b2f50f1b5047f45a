/* Sandbox runs as clients (see peer.h). */
#include "http/peer.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/util.h"

/* The host's own addresses, refreshed every few seconds: only a peer with
 * one of them can be a process of this host (hence maybe a run). As many
 * as the host has: a list cut short would leave some out of the check. */
static struct {
        pthread_mutex_t lock;
        time_t when;
        size_t n, cap;
        struct in6_addr *addr; /* IPv4 as v4-mapped */
} local = {.lock = PTHREAD_MUTEX_INITIALIZER};

static struct in6_addr *local_add(void)
{
        if (local.n == local.cap) {
                size_t cap = local.cap ? 2 * local.cap : 16;
                struct in6_addr *a = realloc(local.addr, cap * sizeof(*a));
                if (!a)
                        return NULL;
                local.addr = a;
                local.cap = cap;
        }
        return &local.addr[local.n++];
}

static void to_mapped(const struct in_addr *a4, struct in6_addr *ret)
{
        memset(ret, 0, sizeof(*ret));
        ret->s6_addr[10] = ret->s6_addr[11] = 0xff;
        memcpy(&ret->s6_addr[12], a4, 4);
}

static void refresh_local(void)
{
        struct ifaddrs *ifs = NULL;
        local.n = 0;
        if (getifaddrs(&ifs) < 0)
                return;
        for (struct ifaddrs *i = ifs; i; i = i->ifa_next) {
                int family = i->ifa_addr ? i->ifa_addr->sa_family : AF_UNSPEC;
                struct in6_addr *slot =
                    family == AF_INET || family == AF_INET6 ? local_add() : NULL;
                if (slot && family == AF_INET)
                        to_mapped(&((struct sockaddr_in *)i->ifa_addr)->sin_addr, slot);
                else if (slot)
                        *slot = ((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr;
        }
        freeifaddrs(ifs);
}

static bool is_local(const struct in6_addr *a)
{
        if (IN6_IS_ADDR_LOOPBACK(a) || (IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127))
                return true;
        bool found = false;
        pthread_mutex_lock(&local.lock);
        time_t now = time(NULL);
        if (now - local.when >= 5) {
                refresh_local();
                local.when = now;
        }
        for (size_t i = 0; i < local.n && !found; i++)
                found = memcmp(&local.addr[i], a, sizeof(*a)) == 0;
        pthread_mutex_unlock(&local.lock);
        return found;
}

/* The owner of the TCP socket of this host whose local port is sport and
 * remote port dport, asked of the kernel (sock_diag, as ss(8) does, with a
 * filter so the kernel returns only that socket): its UID, or -1. */
long peer_owner_uid(int family, unsigned sport, unsigned dport)
{
        _cleanup_close_ int fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
        if (fd < 0)
                return -1;
        /* each op: on a match jump `yes` bytes, else `no` (past the end:
         * reject); reaching the end exactly accepts */
        struct inet_diag_bc_op bc[4] = {
            {INET_DIAG_BC_S_EQ, 8, 16 + 4},
            {0, 0, (uint16_t)sport},
            {INET_DIAG_BC_D_EQ, 8, 8 + 4},
            {0, 0, (uint16_t)dport},
        };
        struct {
                struct nlmsghdr nh;
                struct inet_diag_req_v2 r;
                struct rtattr rta;
                struct inet_diag_bc_op bc[4];
        } req = {
            .nh = {.nlmsg_len = sizeof(req),
                   .nlmsg_type = SOCK_DIAG_BY_FAMILY,
                   .nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP},
            .r = {.sdiag_family = (uint8_t)family,
                  .sdiag_protocol = IPPROTO_TCP,
                  .idiag_states = ~0U},
            .rta = {.rta_len = RTA_LENGTH(sizeof(bc)), .rta_type = INET_DIAG_REQ_BYTECODE},
        };
        memcpy(req.bc, bc, sizeof(bc));
        struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
        if (sendto(fd, &req, sizeof(req), 0, (struct sockaddr *)&kernel, sizeof(kernel)) < 0)
                return -1;
        long uid = -1;
        for (;;) {
                char buf[8192];
                ssize_t n = recv(fd, buf, sizeof(buf), 0);
                if (n <= 0)
                        return uid;
                for (struct nlmsghdr *h = (struct nlmsghdr *)buf; NLMSG_OK(h, (size_t)n);
                     h = NLMSG_NEXT(h, n)) {
                        if (h->nlmsg_type == NLMSG_DONE || h->nlmsg_type == NLMSG_ERROR)
                                return uid;
                        if (h->nlmsg_type == SOCK_DIAG_BY_FAMILY &&
                            h->nlmsg_len >= NLMSG_LENGTH(sizeof(struct inet_diag_msg)))
                                uid = ((struct inet_diag_msg *)NLMSG_DATA(h))->idiag_uid;
                }
        }
}

bool peer_is_sandbox_run(const struct sockaddr *sa, socklen_t len, unsigned local_port,
                         uid_t uid_min, uid_t uid_max)
{
        struct in6_addr a;
        unsigned port;
        if (sa->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
                const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
                to_mapped(&in->sin_addr, &a);
                port = ntohs(in->sin_port);
        } else if (sa->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
                const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
                a = in6->sin6_addr;
                port = ntohs(in6->sin6_port);
        } else {
                return false;
        }
        if (!is_local(&a))
                return false;
        /* an IPv4 peer may hold an IPv4 socket, or an IPv6 one with a
         * v4-mapped address */
        long uid = IN6_IS_ADDR_V4MAPPED(&a) ? peer_owner_uid(AF_INET, port, local_port) : -1;
        if (uid < 0)
                uid = peer_owner_uid(AF_INET6, port, local_port);
        return uid >= (long)uid_min && uid <= (long)uid_max;
}
