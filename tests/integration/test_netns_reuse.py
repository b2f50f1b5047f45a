"""A run network namespace that serves another run is, from inside,
indistinguishable from a fresh one: what a run changed in it (counters,
multicast memberships, flow labels, sockets) either is refused to the run
or makes the namespace go. And whatever a run leaves in its namespace, the
namespace's link and address are gone within seconds of the run's end.

Each run prints its network namespace's cookie (NS below), which tells
when a later run got the same namespace; the daemon is the shared one, and
the runs that follow a changing run are spaced so that namespaces settle
and serve again (the tests check that some did)."""
import os
import subprocess
import textwrap
import time

import pytest

from conftest import scaled


# The namespace's identity: its cookie (SO_NETNS_COOKIE on a unix pair, the
# one socket a run without network may make), unique for the host's uptime
# where the inode number of /proc/self/ns/net is reused once freed.
NS = textwrap.dedent("""
    import socket
    _a, _b = socket.socketpair()
    print('ns', int.from_bytes(_a.getsockopt(socket.SOL_SOCKET, 71, 8), 'little'))
    _a.close(); _b.close()
""")

# What a later run could read of the namespace: IPv4 and IPv6 routing
# failures, its flow labels, IPv4 multicast groups beyond all-hosts, and the
# packets each link sent and received.
VIEW = textwrap.dedent("""
    def table(name):
        lines = open('/proc/self/net/' + name).read().splitlines()
        return dict(zip(lines[0].split()[1:], lines[1].split()[1:]))
    snmp6 = dict(l.split() for l in open('/proc/self/net/snmp6'))
    labels = len(open('/proc/self/net/ip6_flowlabel').read().splitlines()) - 1
    groups = [l.split()[0] for l in open('/proc/self/net/igmp').read().splitlines()[1:]
              if not l[0].isdigit() and l.split()[0] != '010000E0']  # all-hosts
    dev = {l.split(':')[0].strip(): (l.split(':')[1].split()[1], l.split(':')[1].split()[9])
           for l in open('/proc/self/net/dev').read().splitlines()[2:]}
    print('view', table('snmp')['OutNoRoutes'], snmp6['Ip6OutNoRoutes'], labels,
          sorted(groups), sorted(dev.items()))
""")


def run_ns(d, code, net):
    """Run NS + code; (namespace cookie, the rest of stdout's lines)."""
    data = d.run_data(NS + code, enable_network=net)
    assert data["exit_code"] == 0 and data["stderr"] == "", data
    lines = data["stdout"].splitlines()
    assert lines[0].startswith("ns "), data
    return lines[0].split()[1], lines[1:]


def later_runs(d, net, count=16, pause=0.4):
    """count runs reading VIEW, pause seconds apart (the namespaces runs
    leave settle before another run gets them): [(cookie, view line)]."""
    out = []
    for _ in range(count):
        ns, lines = run_ns(d, VIEW, net)
        out.append((ns, lines[-1]))
        time.sleep(pause)
    return out


def assert_fresh_views(d, dirty_ns, later):
    """Every later run saw a fresh namespace; some namespace served more
    than one run (reuse happened, so the check was not vacuous)."""
    views = {v for _, v in later}
    fresh = "view 0 0 0 [] [('eth0', ('0', '0')), ('lo', ('0', '0'))]"
    assert views == {fresh}, (dirty_ns, later)
    cookies = [ns for ns, _ in later]
    assert len(set(cookies)) < len(cookies), f"no namespace served twice: {cookies}"


# Ip6OutNoRoutes goes up without a packet: an IPv6 socket bound to an
# address it does not have (IPV6_FREEBIND, allowed to anyone) finds no
# route (IPv6 is off in runs); nothing leaves, no link counts a packet.
NO_ROUTE = textwrap.dedent("""
    import socket
    for kind in (socket.SOCK_DGRAM, socket.SOCK_STREAM):
        s = socket.socket(socket.AF_INET6, kind)
        s.setsockopt(socket.IPPROTO_IPV6, 78, 1)  # IPV6_FREEBIND
        s.bind(('fd7e:57ab:9::1', 0))
        try:
            s.connect(('fd7e:57ab:7::7', 9))
        except OSError as e:
            print('connect', e.errno)
        s.close()
""")


def test_snmp_counters_a_run_bumped_are_not_seen_by_later_runs(daemon):
    d = daemon
    ns, lines = run_ns(d, NO_ROUTE + VIEW, True)
    assert lines[:2] == ["connect 101", "connect 101"], lines  # ENETUNREACH
    assert lines[2].startswith("view 0 2 "), lines
    assert_fresh_views(d, ns, later_runs(d, True))


FLOW_LABEL = textwrap.dedent("""
    import socket, struct
    s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    # struct in6_flowlabel_req: dst, label, action, share, flags, expires, linger
    req = struct.pack('16sIBBHHHI', socket.inet_pton(socket.AF_INET6, 'fd7e:57ab:7::7'),
                      socket.htonl(0x12345), 0, 1, 1, 0, 150, 0)  # GET, EXCL, CREATE
    try:
        s.setsockopt(socket.IPPROTO_IPV6, 32, req)  # IPV6_FLOWLABEL_MGR
        print('label', 'made')
    except OSError as e:
        print('label', e.errno)
""")


def test_flow_labels_are_refused_and_never_seen_by_later_runs(daemon):
    """The flow-label manager keeps a label up to 150 s after its socket,
    listed in /proc/net/ip6_flowlabel: refused to runs (EPERM)."""
    d = daemon
    ns, lines = run_ns(d, FLOW_LABEL, True)
    assert_fresh_views(d, ns, later_runs(d, True))
    assert lines == ["label 1"], lines  # EPERM


IGMP_JOIN = textwrap.dedent("""
    import socket
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    mreq = socket.inet_aton('239.7.7.7') + socket.inet_aton('0.0.0.0')
    try:
        s.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, mreq)
        print('join', 'made')
    except OSError as e:
        print('join', e.errno)
""")


def test_multicast_joins_are_refused_and_no_late_report_reaches_later_runs(daemon):
    """A join sends its IGMP report from a kernel timer some ms later,
    after the run is gone: refused to runs (EPERM), so no later run starts
    with a packet on its link or a group it did not join."""
    d = daemon
    ns, lines = run_ns(d, IGMP_JOIN, True)
    assert_fresh_views(d, ns, later_runs(d, True))
    assert lines == ["join 1"], lines  # EPERM


def test_ordinary_socket_options_still_work(daemon):
    """What HTTP clients and resolvers set (TCP_NODELAY, SO_KEEPALIVE,
    IP_TOS, IPV6_V6ONLY, SO_REUSEADDR, multicast TTL for mDNS-like sends)
    is not refused."""
    d = daemon.run_data(textwrap.dedent("""
        import socket
        s = socket.socket()
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, 0x10)
        u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        u.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 1)
        u6 = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
        u6.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        print('ok')
    """), enable_network=True)
    assert d["stdout"] == "ok\n" and d["stderr"] == "", d


# A peer in the lab that accepts and never reads: its window closes, and a
# run's socket left with data to send stays, orphaned, as long as its
# TCP_USER_TIMEOUT (here 10 minutes) lets it.
SILENT_PEER = textwrap.dedent("""
    import socket, sys, time
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.bind((sys.argv[1], int(sys.argv[2])))
    s.listen(8)
    print('ready', flush=True)
    held = []
    end = time.monotonic() + 120
    s.settimeout(1)
    while time.monotonic() < end:
        try:
            held.append(s.accept()[0])
        except OSError:
            pass
""")

PINNED = textwrap.dedent("""
    import socket
    s = socket.create_connection(('{host}', {port}), timeout=5)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT, 600000)
    s.setblocking(False)
    try:
        while True:
            s.send(b'x' * 65536)
    except BlockingIOError:
        pass
    print('address', s.getsockname()[0])
""")


def link_of(address):
    a = [int(x) for x in address.split(".")]
    return "/sys/class/net/lbx%08x" % ((a[0] << 24) | (a[1] << 16) | (a[2] << 8) | a[3])


def destroyed(d):
    """lockbox_netns_sockets_destroyed_total of runs with network."""
    name = 'lockbox_netns_sockets_destroyed_total{network="true"} '
    lines = [l for l in d.get("/metrics").text.splitlines() if l.startswith(name)]
    assert len(lines) == 1, lines
    return int(lines[0].split()[1])


@pytest.mark.host_view
def test_an_orphaned_socket_does_not_pin_its_runs_link(daemon, netlab):
    """A run's socket left orphaned toward a peer that never reads, with
    TCP_USER_TIMEOUT at 10 minutes, would hold its namespace, link and
    address that long: it is destroyed, and the link is gone within
    seconds of the run's end."""
    port = 9099
    peer = subprocess.Popen(["ip", "netns", "exec", netlab.ns, "/usr/bin/python3", "-c", SILENT_PEER,
                             netlab.public, str(port)], stdout=subprocess.PIPE, text=True)
    try:
        assert peer.stdout.readline().strip() == "ready"
        before = destroyed(daemon)
        _, lines = run_ns(daemon, PINNED.format(host=netlab.public, port=port), True)
        assert lines[0].startswith("address "), lines
        link = link_of(lines[0].split()[1])
        deadline = time.monotonic() + scaled(5)
        while os.path.exists(link) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not os.path.exists(link), f"{link} still there {scaled(5):g} s after its run"
        # published once a second
        deadline = time.monotonic() + scaled(3)
        while destroyed(daemon) == before and time.monotonic() < deadline:
            time.sleep(0.2)
        assert destroyed(daemon) > before
    finally:
        peer.kill()
        peer.wait()
