/* Route netlink requests the run network needs, over libmnl: a veth pair
 * whose peer is born in another network namespace, links up, point-to-point
 * IPv4 addresses, a default route, link removal. Private to src/net/. Each
 * call sends one request and waits for its acknowledgement; 0 or -errno. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

struct mnl_socket;

struct rtnl {
        struct mnl_socket *nl;
        uint32_t seq;
        uint32_t portid;
};

/* A route netlink socket in the caller's current network namespace (it
 * stays bound to that namespace after a setns). */
int rtnl_open(struct rtnl *r);
void rtnl_close(struct rtnl *r);

/* veth pair, both ends down: name here; the peer, named peer_name with
 * index peer_index, in the namespace netns_fd. */
int rtnl_veth_create(struct rtnl *r, const char *name, const char *peer_name, int peer_index,
                     int netns_fd);
int rtnl_link_up(struct rtnl *r, int index);
/* IPv4 forwarding of packets arriving on the link (its devconf), for hosts
 * whose /proc/sys cannot be written (containers). */
int rtnl_link_ipv4_forwarding(struct rtnl *r, int index, bool on);
/* No IPv6 link-local address on the link (address generation mode none). */
int rtnl_link_no_ipv6_address(struct rtnl *r, int index);
int rtnl_link_delete(struct rtnl *r, const char *name);
/* Packets every link of the socket's namespace has sent and received, in
 * all (0: nothing ever crossed any of them, loopback included). */
int rtnl_links_packets(struct rtnl *r, uint64_t *ret);
/* local/32 with peer/32 on the link (addresses in host byte order): the
 * kernel adds the route to peer through the link. */
int rtnl_addr_add_peer(struct rtnl *r, int index, uint32_t local, uint32_t peer);
int rtnl_route_default(struct rtnl *r, int index, uint32_t gateway);
