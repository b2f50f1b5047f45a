"""Network when disabled (TCP, UDP, raw, netlink, packet, unix and abstract
sockets to host services, DNS) and what stays forbidden when enabled
(raw/netlink/packet/unix sockets, listening, host abstract sockets, the
daemon's own port)."""
import json
import os
import socket
import threading
import time

import pytest
import requests

from attacklib import (assert_exception, assert_ok, attack_js, attack_py, concurrently,
                       errno_lines, src)


@pytest.fixture
def host_abstract():
    """A host service listening on an abstract unix datagram socket (as
    systemd's notify socket or an X server's abstract endpoint would):
    records what reaches it."""
    name = b"\0lockbox-attack-" + os.urandom(6).hex().encode()
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind(name)
    s.settimeout(0.1)
    got = []
    stop = threading.Event()

    def serve():
        while not stop.is_set():
            try:
                got.append(s.recv(4096))
            except socket.timeout:
                continue
            except OSError:
                return

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    yield name, got
    stop.set()
    t.join(5)
    s.close()


# probe(name, family, type, proto, addr, send) opens a socket (and
# connects or sends when addr is given) and prints "name OPEN" or "name
# ERRNO".
PY_PROBE = src("""
    import socket, errno
    def probe(name, fam, typ, proto=0, addr=None, send=False):
        try:
            s = socket.socket(fam, typ, proto)
            if send:
                s.sendto(b'x', addr)
            elif addr is not None:
                s.settimeout(2)
                s.connect(addr)
            print(name, 'OPEN')
        except OSError as e:
            print(name, errno.errorcode.get(e.errno, e.errno))
""")

NO_NET_PY = PY_PROBE + src("""
    probe('tcp4_host', socket.AF_INET, socket.SOCK_STREAM, 0, ('127.0.0.1', PORT))
    probe('tcp6_host', socket.AF_INET6, socket.SOCK_STREAM, 0, ('::1', PORT))
    probe('tcp4_remote', socket.AF_INET, socket.SOCK_STREAM, 0, ('1.1.1.1', 443))
    probe('udp4_dns', socket.AF_INET, socket.SOCK_DGRAM, 0, ('8.8.8.8', 53), send=True)
    probe('udp6', socket.AF_INET6, socket.SOCK_DGRAM, 0, ('::1', 53), send=True)
    probe('raw_icmp', socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
    probe('ping_dgram', socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_ICMP)
    probe('netlink_route', socket.AF_NETLINK, socket.SOCK_RAW, 0)
    probe('netlink_uevent', socket.AF_NETLINK, socket.SOCK_DGRAM, 15)
    probe('packet', socket.AF_PACKET, socket.SOCK_RAW, 0x0300)
    probe('unix_stream_path', socket.AF_UNIX, socket.SOCK_STREAM, 0, '/run/systemd/private')
    probe('unix_abstract', socket.AF_UNIX, socket.SOCK_STREAM, 0, '\\0/tmp/.X11-unix/X0')
    probe('alg', 38, socket.SOCK_SEQPACKET)
    probe('vsock', 40, socket.SOCK_STREAM)
""")


def test_python_no_socket_of_any_kind_without_network(daemon, tcp_server):
    d = attack_py(daemon, NO_NET_PY.replace("PORT", str(tcp_server.port)), enable_network=False)
    assert_ok(d)
    got = errno_lines(d)
    assert len(got) == 14 and set(got.values()) == {"EPERM"}, d
    assert tcp_server.accepted == 0


def test_python_dns_and_http_fail_without_network(daemon, tcp_server):
    d = attack_py(daemon, src(f"""
        import socket, requests
        for host in ('example.com', 'localhost'):
            try:
                print(host, socket.getaddrinfo(host, 80, socket.AF_INET)[0][4][0])
            except socket.gaierror as e:
                print(host, 'gaierror')
        try:
            requests.get('http://127.0.0.1:{tcp_server.port}/', timeout=2)
            print('http REACHED')
        except requests.ConnectionError:
            print('http ConnectionError')
        import urllib.request
        try:
            urllib.request.urlopen('http://example.com', timeout=2)
            print('urllib REACHED')
        except OSError as e:
            print('urllib', type(e).__name__)
    """))
    # localhost resolves from /etc/hosts, without any socket
    assert_ok(d, "example.com gaierror\nlocalhost 127.0.0.1\nhttp ConnectionError\nurllib URLError\n")
    assert tcp_server.accepted == 0


def test_python_run_without_network_has_only_loopback(daemon):
    d = attack_py(daemon, src("""
        print(sorted(l.split(':')[0].strip() for l in open('/proc/1/net/dev').read().splitlines()[2:]))
        rows = lambda p: len(open(p).read().splitlines()[1:])   # after the header
        print(rows('/proc/1/net/route'), rows('/proc/1/net/tcp'), rows('/proc/1/net/udp'), rows('/proc/1/net/unix'))
    """))
    # no interface but loopback, no route, no socket: an empty namespace
    assert_ok(d, "['lo']\n0 0 0 0\n")


def test_python_abstract_socket_to_host_service_without_network(daemon, host_abstract):
    """Only stream socketpair(AF_UNIX) is allowed (asyncio needs it); a
    datagram pair, which could sendto() an abstract name, is refused.
    Without network the run's own namespace has no host names anyway."""
    name, got = host_abstract
    d = attack_py(daemon, src(f"""
        import socket, errno
        try:
            a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
            b.sendto(b'PWNED from the sandbox', {name!r})
            print('SENT')
        except OSError as e:
            print(errno.errorcode[e.errno])
    """), enable_network=False)
    assert_ok(d, "EPERM\n")
    time.sleep(0.3)
    assert got == []


def test_node_no_network_without_enable_network(daemon, tcp_server):
    d = attack_js(daemon, src(f"""
        const net = require('net'), dgram = require('dgram'), dns = require('dns'), http = require('http');
        const res = {{}};
        const done = () => {{ if (Object.keys(res).length === 8) console.log(JSON.stringify(res)); }};
        const rec = (k) => (e) => {{ res[k] = e ? (e.code || String(e)) : 'OK'; done(); }};
        net.connect({tcp_server.port}, '127.0.0.1').on('error', rec('tcp')).on('connect', () => rec('tcp')(null));
        net.connect({tcp_server.port}, '::1').on('error', rec('tcp6')).on('connect', () => rec('tcp6')(null));
        const u = dgram.createSocket('udp4'); u.on('error', rec('udp')); u.send('x', 53, '8.8.8.8', (e) => {{ if (!e) rec('udp')(null); }});
        dns.lookup('example.com', rec('lookup'));
        dns.resolve4('example.com', rec('resolve'));
        http.get('http://127.0.0.1:{tcp_server.port}/', () => rec('http')(null)).on('error', rec('http'));
        net.connect('/run/systemd/private').on('error', rec('unix')).on('connect', () => rec('unix')(null));
        net.connect({{path: '\\0/tmp/.X11-unix/X0'}}).on('error', rec('abstract')).on('connect', () => rec('abstract')(null));
    """))
    assert_ok(d)
    res = json.loads(d["stdout"])
    assert res == {"tcp": "EPERM", "tcp6": "EPERM", "udp": "EPERM", "lookup": "EAI_AGAIN",
                   "resolve": "ECONNREFUSED", "http": "EPERM", "unix": "EPERM",
                   "abstract": "EPERM"}, d
    assert tcp_server.accepted == 0


# --------------------------------------------------- with network: still forbidden

def test_python_with_network_raw_netlink_packet_unix_stay_forbidden(daemon):
    d = attack_py(daemon, PY_PROBE + src("""
        probe('raw', socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_TCP)
        probe('raw6', socket.AF_INET6, socket.SOCK_RAW, 58)
        probe('netlink', socket.AF_NETLINK, socket.SOCK_RAW, 0)
        probe('packet', socket.AF_PACKET, socket.SOCK_DGRAM, 0x0300)
        probe('unix', socket.AF_UNIX, socket.SOCK_STREAM, 0)
        probe('unix_dgram', socket.AF_UNIX, socket.SOCK_DGRAM, 0)
        probe('alg', 38, socket.SOCK_SEQPACKET, 0)
        probe('inet_packet_type', socket.AF_INET, 10, 0)
        s = socket.socket(); s.bind(('127.0.0.1', 0))
        try:
            s.listen(); print('listen OPEN')
        except OSError as e:
            print('listen', errno.errorcode[e.errno])
    """), enable_network=True)
    assert_ok(d)
    got = errno_lines(d)
    assert len(got) == 9 and set(got.values()) == {"EPERM"}, d


def test_python_with_network_only_tcp_and_udp_protocols(daemon):
    """socket() of AF_INET/AF_INET6 stream or datagram sockets is allowed for
    TCP and UDP only: UDP-Lite, MPTCP, SCTP and ICMP echo sockets are
    refused, while naming TCP and UDP explicitly still works."""
    d = attack_py(daemon, PY_PROBE + src("""
        probe('udplite', socket.AF_INET, socket.SOCK_DGRAM, 136)
        probe('udplite6', socket.AF_INET6, socket.SOCK_DGRAM, 136)
        probe('mptcp', socket.AF_INET, socket.SOCK_STREAM, 262)
        probe('mptcp6', socket.AF_INET6, socket.SOCK_STREAM, 262)
        probe('sctp', socket.AF_INET, socket.SOCK_STREAM, 132)
        probe('sctp_dgram', socket.AF_INET, socket.SOCK_DGRAM, 132)
        probe('icmp_echo', socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_ICMP)
        probe('icmp6_echo', socket.AF_INET6, socket.SOCK_DGRAM, 58)
        probe('tcp_by_name', socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        probe('udp_by_name', socket.AF_INET6, socket.SOCK_DGRAM, socket.IPPROTO_UDP)
        probe('tcp_default', socket.AF_INET6, socket.SOCK_STREAM | socket.SOCK_NONBLOCK, 0)
    """), enable_network=True)
    assert_ok(d)
    got = errno_lines(d)
    assert got == {"udplite": "EPERM", "udplite6": "EPERM", "mptcp": "EPERM", "mptcp6": "EPERM",
                   "sctp": "EPERM", "sctp_dgram": "EPERM", "icmp_echo": "EPERM",
                   "icmp6_echo": "EPERM", "tcp_by_name": "OPEN", "udp_by_name": "OPEN",
                   "tcp_default": "OPEN"}, d


def test_node_with_network_cannot_listen_or_open_inspector(daemon):
    d = attack_js(daemon, src("""
        const net = require('net');
        const srv = net.createServer();
        srv.on('error', (e) => {
            console.log('listen', e.code);
            try { require('inspector').open(0, '127.0.0.1'); console.log('inspector', require('inspector').url() || 'none'); }
            catch (e) { console.log('inspector', e.code); }
        });
        srv.listen(0, '127.0.0.1', () => console.log('LISTENING'));
    """), enable_network=True)
    assert (d["exit_code"], d["status"]) == (0, "ok"), d
    assert d["stdout"] == "listen EPERM\ninspector none\n", d
    assert "operation not permitted" in d["stderr"], d


def test_networked_run_cannot_reach_host_abstract_unix_sockets(daemon, host_abstract):
    """Found by this suite, fixed by allowing only stream socketpair(): a run
    with network shares the host's network namespace and its abstract unix
    names, and a datagram socketpair() socket could sendto() any abstract
    name, reaching host services. Refused now, like every other unix socket."""
    name, got = host_abstract
    d = attack_py(daemon, src(f"""
        import socket, errno
        try:
            a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
            b.sendto(b'PWNED from the sandbox', {name!r})
            print('SENT')
        except OSError as e:
            print(errno.errorcode[e.errno])
    """), enable_network=True)
    time.sleep(0.3)
    assert got == [], f"a host abstract socket received {got} from the run ({d['stdout']!r})"
    assert_ok(d)
    assert d["stdout"].strip() in ("EPERM", "ECONNREFUSED", "EACCES"), d


def test_networked_runs_cannot_exhaust_the_daemons_connections(daemon):
    """Found by this suite, fixed by refusing connections that sandbox UIDs
    open (src/http/peer.c): two runs with network used to hold ~250
    connections each to the daemon's own port, past server.max_connections
    (256), and every client was refused. The service keeps answering."""
    port = daemon.port
    hog = src(f"""
        import socket, time
        socks = []
        try:
            while True:
                socks.append(socket.create_connection(('127.0.0.1', {port}), timeout=2))
        except OSError:
            pass
        print(len(socks), flush=True)
        time.sleep(2.5)
    """)
    results = {}

    def probe():
        time.sleep(1.2)
        codes = []
        s = requests.Session()
        s.trust_env = False
        for _ in range(4):
            try:
                codes.append(s.get(daemon.url("/health"), timeout=2).status_code)
            except requests.RequestException as e:
                codes.append(type(e).__name__)
            time.sleep(0.2)
        results["health"] = codes

    a, b, _ = concurrently(lambda: attack_py(daemon, hog, enable_network=True, session=daemon.new_session()),
                           lambda: attack_py(daemon, hog, enable_network=True, session=daemon.new_session()),
                           probe)
    assert_ok(a)
    assert_ok(b)
    assert results["health"] == [200] * 4, f"/health while runs hold connections: {results['health']}"


def test_python_uncaught_connection_error_verdict(daemon, tcp_server):
    """What a user sees for a plain hostile connect without network."""
    d = attack_py(daemon, f"import socket\nsocket.create_connection(('127.0.0.1', {tcp_server.port}))\n")
    assert_exception(d, "PermissionError", "[Errno 1] Operation not permitted")
    assert tcp_server.accepted == 0
