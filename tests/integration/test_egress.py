"""The network of a run (network.mode: namespace): its own namespace with lo
and eth0 behind the daemon's NAT, IPv4 only; public destinations reachable;
the host itself, private, CGNAT, link-local, multicast and reserved ranges,
other runs and IPv6 refused; DNS relayed by the daemon through the gateway
to network.dns_servers; network.allow and network.egress_only; the refusals
counted in /metrics; nothing left on the host when the daemon stops.

The destinations are the fake hosts of tests/netlab.py (fixture `netlab`),
in a network namespace of the tests' own: 203.0.113.7 and .8 stand for
public hosts, 10.213.7.2 (and the lab's DNS server 10.213.7.53),
172.16.7.7, 192.168.7.7, 100.64.7.7 and 169.254.169.254 for private ones,
fd7e:57ab:7::7 for an IPv6 host. Each records every connection and datagram
it gets: a refusal is checked on the lab's side too (no hit), not only by
the error the run saw. Every daemon here relays DNS to the lab's resolver,
never to the host's. No test sends anything to an address outside the lab
or the host itself.
"""
import ast
import ipaddress
import json
import os
import socket
import subprocess
import textwrap
import threading
import time

import pytest
import requests

import netlab as nl
from conftest import eventually, lab_daemon_config, scaled

WORKER_TIMEOUT = 10


def py(src):
    return textwrap.dedent(src).lstrip("\n")


# Helpers every Python run gets: each returns a line that says what the
# run saw, so a test compares what a user would read.
PRELUDE = py('''
    import errno, json, socket

    def _err(e):
        if isinstance(e, socket.timeout):
            return "timeout"
        return errno.errorcode.get(e.errno, type(e).__name__) if e.errno else type(e).__name__

    def tcp(host, port, timeout=3):
        """connected:<first bytes the server sent> (HTTP: the body), or
        blocked:<ERRNO>."""
        try:
            s = socket.create_connection((host, port), timeout=timeout)
        except OSError as e:
            return "blocked:" + _err(e)
        try:
            if port in (80, 8080, 8081):
                s.sendall(b"GET / HTTP/1.0\\r\\nHost: x\\r\\n\\r\\n")
            data = b""
            while True:
                d = s.recv(4096)
                if not d:
                    break
                data += d
            return "connected:" + data.split(b"\\r\\n\\r\\n")[-1].decode()
        except OSError as e:
            return "connected-then:" + _err(e)
        finally:
            s.close()

    def udp(host, port, payload=b"ping", timeout=1.0):
        """answer:<datagram>, noanswer, or blocked:<ERRNO>."""
        try:
            fam = socket.getaddrinfo(host, port, 0, socket.SOCK_DGRAM)[0][0]
            s = socket.socket(fam, socket.SOCK_DGRAM)
            s.settimeout(timeout)
            s.sendto(payload, (host, port))
            return "answer:" + s.recvfrom(4096)[0].decode()
        except socket.timeout:
            return "noanswer"
        except OSError as e:
            return "blocked:" + _err(e)

    def gateway():
        for line in open("/etc/resolv.conf"):
            if line.split()[:1] == ["nameserver"]:
                return line.split()[1]

    def my_address():
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.connect((gateway(), 53))  # a UDP connect sends nothing
        return s.getsockname()[0]
''')


def dotted(addr, base):
    """addr in inet_aton's other notations: 'int' (3405803783), 'hex'
    (0xcb.0x0.0x71.0x7), 'octal' (0313.0.0161.07), 'short' (203.0.28935)."""
    n = int(ipaddress.IPv4Address(addr))
    parts = [int(p) for p in addr.split(".")]
    if base == "int":
        return str(n)
    if base == "hex":
        return ".".join(hex(p) for p in parts)
    if base == "octal":
        return ".".join("0" + oct(p)[2:] if p else "0" for p in parts)
    if base == "short":
        return f"{parts[0]}.{parts[1]}.{parts[2] * 256 + parts[3]}"
    raise ValueError(base)


# ------------------------------------------------------------------ fixtures
@pytest.fixture(scope="module")
def ed(module_daemon_factory, netlab):
    """The module's daemon: namespaced network, DNS to the lab."""
    return module_daemon_factory(max_workers=4, worker_timeout=WORKER_TIMEOUT,
                                 **lab_daemon_config(netlab))


@pytest.fixture
def lab(netlab):
    netlab.reset_hits()
    yield netlab


def run(d, code, **fields):
    """Run Python code (after PRELUDE) with network; the run must end
    normally; returns its stdout lines."""
    fields.setdefault("enable_network", True)
    data = d.run_data(PRELUDE + py(code), **fields)
    assert (data["exit_code"], data["status"], data["stderr"]) == (0, "ok", ""), data
    return data["stdout"].splitlines()


def node(d, code, **fields):
    fields.setdefault("enable_network", True)
    data = d.run_data(py(code), language="nodejs", **fields)
    assert (data["exit_code"], data["status"], data["stderr"]) == (0, "ok", ""), data
    return data["stdout"].splitlines()


@pytest.fixture(scope="module")
def net_info(ed):
    """What a run of the module's daemon sees: its gateway (resolv.conf's
    nameserver) and its own address."""
    gw, me = run(ed, "print(gateway()); print(my_address())")
    ipaddress.IPv4Address(gw), ipaddress.IPv4Address(me)
    return {"gateway": gw, "address": me}


def assert_no_hit(lab, addr):
    # a datagram or connection that did get through is in the lab's queues
    # by now; hits() takes them in before it answers
    time.sleep(scaled(0.1))
    assert lab.hits_on(addr) == [], f"{addr} was reached: {lab.hits_on(addr)}"


# ---------------------------------------------------------- what a run has
def test_run_has_lo_and_eth0_and_a_nameserver_that_is_its_gateway(ed, net_info):
    out = run(ed, """
        lines = open('/proc/self/net/dev').read().splitlines()[2:]
        print(sorted(l.split(':')[0].strip() for l in lines))
        print([l.split() for l in open('/etc/resolv.conf') if l.strip() and not l.startswith('#')])
        print(my_address() != gateway())
    """)
    assert out == ["['eth0', 'lo']", f"[['nameserver', '{net_info['gateway']}']]", "True"]


def test_run_sees_only_its_own_sockets(ed, lab):
    """/proc/self/net/tcp of a run lists its own sockets (here a self-connected
    one), not the daemon's listener nor the test's connections to it."""
    client = socket.create_connection(("127.0.0.1", ed.port), timeout=5)
    try:
        client_port = client.getsockname()[1]
        out = run(ed, """
            s = socket.socket()
            s.bind(('127.0.0.1', 0))
            mine = s.getsockname()[1]
            s.connect(('127.0.0.1', mine))  # simultaneous open: to itself
            ports = set()
            for line in open('/proc/self/net/tcp').read().splitlines()[1:]:
                local, remote = line.split()[1:3]
                ports |= {int(local.split(':')[1], 16), int(remote.split(':')[1], 16)}
            print(mine in ports)
            print(sorted(ports - {mine, 0}))  # 0: the remote port of a listener
        """)
    finally:
        client.close()
    assert out[0] == "True", out
    others = json.loads(out[1])
    assert ed.port not in others and client_port not in others, out
    assert others == [], out


# --------------------------------------------------------- public reachable
def test_public_http_with_requests_and_httpx(ed, lab, net_info):
    out = run(ed, f"""
        import requests, httpx
        print(json.dumps(requests.get("http://{nl.PUBLIC}/a", timeout=5).json()))
        print(json.dumps(httpx.get("http://{nl.PUBLIC2}:8080/b", timeout=5).json()))
        print(json.dumps(requests.get("http://public.lab.test:8081/c", timeout=5).json()))
        print(my_address())
    """)
    a, b, c = (json.loads(x) for x in out[:3])
    me = out[3]
    assert (a["host"], a["port"]) == (nl.PUBLIC, 80)
    assert (b["host"], b["port"]) == (nl.PUBLIC2, 8080)
    assert (c["host"], c["port"]) == (nl.PUBLIC, 8081)
    # the lab saw the daemon's NAT, not the run's own address
    for r in (a, b, c):
        assert r["peer"] != me, (r, me)
    assert len(lab.hits("tcp", nl.PUBLIC, 80)) == 1
    assert len(lab.hits("tcp", nl.PUBLIC2, 8080)) == 1
    assert len(lab.hits("tcp", nl.PUBLIC, 8081)) == 1
    assert me not in lab.hits("tcp", nl.PUBLIC, 80)


def test_public_http_from_node(ed, lab):
    out = node(ed, f"""
        const http = require('http');
        function get(url) {{
          return new Promise((resolve, reject) => {{
            http.get(url, res => {{
              let body = '';
              res.on('data', c => body += c);
              res.on('end', () => resolve(res.statusCode + ' ' + body));
            }}).on('error', reject);
          }});
        }}
        (async () => {{
          console.log(await get('http://{nl.PUBLIC}/node'));
          console.log(await get('http://public2.lab.test:8081/node'));
        }})().catch(e => console.log('error ' + e.code));
    """)
    assert len(out) == 2, out
    s1, b1 = out[0].split(" ", 1)
    s2, b2 = out[1].split(" ", 1)
    assert s1 == s2 == "200", out
    assert (json.loads(b1)["host"], json.loads(b1)["port"]) == (nl.PUBLIC, 80)
    assert (json.loads(b2)["host"], json.loads(b2)["port"]) == (nl.PUBLIC2, 8081)
    assert len(lab.hits("tcp", nl.PUBLIC, 80)) == 1
    assert len(lab.hits("tcp", nl.PUBLIC2, 8081)) == 1


@pytest.mark.parametrize("form", ["int", "hex", "octal", "short", "mapped"])
def test_public_in_other_notations_is_reachable(ed, lab, form):
    """The control of the refusals below: the same notations reach a public
    host, so a refusal is the policy's, not a failed parse."""
    host = "::ffff:" + nl.PUBLIC if form == "mapped" else dotted(nl.PUBLIC, form)
    out = run(ed, f"print(tcp({host!r}, 8080))")
    assert out[0].startswith("connected:"), out
    assert json.loads(out[0].split(":", 1)[1])["host"] == nl.PUBLIC
    assert len(lab.hits("tcp", nl.PUBLIC, 8080)) == 1


def test_public_udp_echo_from_python_and_node(ed, lab):
    out = run(ed, f"print(udp({nl.PUBLIC!r}, 7, b'py'))")
    assert out == ["answer:echo:py"]
    out = node(ed, f"""
        const dgram = require('dgram');
        const s = dgram.createSocket('udp4');
        const t = setTimeout(() => {{ console.log('noanswer'); s.close(); }}, 3000);
        s.on('message', m => {{ console.log('answer:' + m); clearTimeout(t); s.close(); }});
        s.send(Buffer.from('js'), 7, '{nl.PUBLIC2}');
    """)
    assert out == ["answer:echo:js"]
    assert len(lab.hits("udp", nl.PUBLIC, 7)) == 1
    assert len(lab.hits("udp", nl.PUBLIC2, 7)) == 1


# ---------------------------------------------------------------- refused
REFUSED_TCP = [
    ("private", nl.PRIVATE, nl.PRIVATE, 80),
    ("private-8080", nl.PRIVATE, nl.PRIVATE, 8080),
    ("private-int", dotted(nl.PRIVATE, "int"), nl.PRIVATE, 80),
    ("private-hex", dotted(nl.PRIVATE, "hex"), nl.PRIVATE, 8081),
    ("private-octal", dotted(nl.PRIVATE, "octal"), nl.PRIVATE, 80),
    ("private-short", dotted(nl.PRIVATE, "short"), nl.PRIVATE, 80),
    ("private-mapped", "::ffff:" + nl.PRIVATE, nl.PRIVATE, 80),
    ("dns-server-http", nl.DNS_ADDR, nl.DNS_ADDR, 80),
    ("172.16", nl.PRIVATE172, nl.PRIVATE172, 80),
    ("192.168", nl.PRIVATE192, nl.PRIVATE192, 80),
    ("cgnat", nl.CGNAT, nl.CGNAT, 80),
    ("metadata", nl.METADATA, nl.METADATA, 80),
    ("metadata-int", dotted(nl.METADATA, "int"), nl.METADATA, 80),
    ("metadata-hex", dotted(nl.METADATA, "hex"), nl.METADATA, 80),
    ("metadata-mapped", "::ffff:" + nl.METADATA, nl.METADATA, 80),
]


@pytest.mark.parametrize("host,lab_addr,port", [x[1:] for x in REFUSED_TCP],
                         ids=[x[0] for x in REFUSED_TCP])
def test_private_and_link_local_tcp_is_refused_at_once(ed, lab, host, lab_addr, port):
    t0 = time.monotonic()
    out = run(ed, f"print(tcp({host!r}, {port}))")
    assert out == ["blocked:ECONNREFUSED"], out
    assert time.monotonic() - t0 < scaled(3)  # a reset, not a silent drop
    assert_no_hit(lab, lab_addr)


def test_metadata_with_requests_in_decimal(ed, lab):
    """The classic SSRF form of the metadata endpoint."""
    out = run(ed, f"""
        import requests
        try:
            r = requests.get("http://{dotted(nl.METADATA, 'int')}/latest/meta-data/", timeout=5)
            print("status", r.status_code)
        except requests.ConnectionError as e:
            print("refused" if "Connection refused" in str(e) else "other: " + str(e))
    """)
    assert out == ["refused"], out
    assert_no_hit(lab, nl.METADATA)


def test_private_names_resolve_but_cannot_be_reached(ed, lab):
    out = run(ed, """
        print(socket.gethostbyname('private.lab.test'))
        print(socket.gethostbyname('metadata.lab.test'))
        print(tcp('private.lab.test', 80))
        print(tcp('metadata.lab.test', 80))
    """)
    assert out == [nl.PRIVATE, nl.METADATA, "blocked:ECONNREFUSED", "blocked:ECONNREFUSED"]
    assert_no_hit(lab, nl.PRIVATE)
    assert_no_hit(lab, nl.METADATA)


def test_private_from_node_is_refused(ed, lab):
    out = node(ed, f"""
        const net = require('net');
        const http = require('http');
        const c = net.connect(80, '{nl.PRIVATE}');
        c.on('connect', () => {{ console.log('connected'); c.destroy(); }});
        c.on('error', e => {{
          console.log(e.code);
          http.get('http://{nl.METADATA}/latest/meta-data/', () => console.log('answered'))
              .on('error', e => console.log(e.code));
        }});
    """)
    assert out == ["ECONNREFUSED", "ECONNREFUSED"], out
    assert_no_hit(lab, nl.PRIVATE)
    assert_no_hit(lab, nl.METADATA)


@pytest.mark.parametrize("host,lab_addr", [
    (nl.PRIVATE, nl.PRIVATE), (nl.DNS_ADDR, nl.DNS_ADDR), (nl.METADATA, nl.METADATA),
    (nl.CGNAT, nl.CGNAT), (nl.PRIVATE172, nl.PRIVATE172), (nl.PRIVATE192, nl.PRIVATE192),
    ("::ffff:" + nl.PRIVATE, nl.PRIVATE)], ids=["private", "dns-server", "metadata", "cgnat",
                                                 "172.16", "192.168", "private-mapped"])
def test_private_udp_gets_no_answer_and_reaches_nothing(ed, lab, host, lab_addr):
    out = run(ed, f"print(udp({host!r}, 7)); print(udp({host!r}, 8080))")
    assert all(x == "noanswer" or x.startswith("blocked:") for x in out), out
    assert_no_hit(lab, lab_addr)


def test_ipv6_is_unreachable(ed, lab):
    """No IPv6 route in a run: an IPv6 host that would answer (the lab's,
    routed from the host) is not reached, by TCP or UDP."""
    out = run(ed, f"""
        print(tcp({nl.LAB_HOST6!r}, 80))
        print(udp({nl.LAB_HOST6!r}, 7))
    """)
    assert out[0].startswith("blocked:"), out
    assert out[0] in ("blocked:ENETUNREACH", "blocked:EHOSTUNREACH", "blocked:EADDRNOTAVAIL",
                      "blocked:EAFNOSUPPORT", "blocked:ECONNREFUSED", "blocked:EACCES"), out
    assert out[1] == "noanswer" or out[1].startswith("blocked:"), out
    assert_no_hit(lab, nl.LAB_HOST6)


# -------------------------------------------------------- the host itself
@pytest.fixture
def host_service(net_info, netlab):
    """A TCP service of the host on its loopback, its address on the lab's
    veth and the daemon's gateway address, one port on all three."""
    svc = nl.HostService(["127.0.0.1", netlab.host_addr, net_info["gateway"]])
    yield svc
    svc.close()


def test_the_host_is_refused_on_every_address(ed, lab, net_info, host_service):
    gw, port = net_info["gateway"], host_service.port
    out = run(ed, f"""
        for host, port in [({gw!r}, {port}), ({lab.host_addr!r}, {port}),
                           ('127.0.0.1', {port}), ('0.0.0.0', {port}),
                           ({gw!r}, {ed.port}), ('127.0.0.1', {ed.port}),
                           ({dotted(gw, 'int')!r}, {port}), ('::ffff:' + {gw!r}, {port})]:
            print(tcp(host, port))
    """)
    assert out == ["blocked:ECONNREFUSED"] * 8, out
    assert host_service.peers == [], "the run reached the host"


def test_the_host_gets_no_udp(ed, lab, net_info):
    """The host's UDP services (except DNS on the gateway) are not reached."""
    rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    rx.setsockopt(socket.IPPROTO_IP, nl.HostService.IP_FREEBIND, 1)
    rx.bind((net_info["gateway"], 0))
    rx.settimeout(0.2)
    try:
        port = rx.getsockname()[1]
        out = run(ed, f"print(udp({net_info['gateway']!r}, {port})); print(udp({lab.host_addr!r}, {port}))")
        assert all(x == "noanswer" or x.startswith("blocked:") for x in out), out
        with pytest.raises(socket.timeout):
            rx.recvfrom(100)
    finally:
        rx.close()


# ------------------------------------------------------------------- DNS
def test_dns_through_the_gateway(ed, lab, net_info):
    out = run(ed, """
        print(socket.gethostbyname('public.lab.test'))
        print(socket.gethostbyname('PUBLIC2.lab.test'))
        try:
            socket.gethostbyname('nothing.lab.test')
            print('resolved')
        except socket.gaierror as e:
            print('gaierror', e.errno == socket.EAI_NONAME)
        print(my_address())
    """)
    assert out[:3] == [nl.PUBLIC, nl.PUBLIC2, "gaierror True"], out
    me = out[3]
    names = {q[2].lower() for q in lab.dns_queries()}
    assert {"public.lab.test", "public2.lab.test", "nothing.lab.test"} <= names
    # relayed by the daemon: the lab's resolver never saw the run's address
    assert me not in {q[1] for q in lab.dns_queries()}


def test_dns_from_node(ed, lab):
    out = node(ed, """
        const dns = require('dns');
        dns.lookup('public.lab.test', 4, (err, addr) => console.log(err ? err.code : addr));
    """)
    assert out == [nl.PUBLIC]


def test_big_answer_comes_through_the_tcp_fallback(ed, lab):
    """big.lab.test has 40 addresses: over UDP the answer is truncated, the
    resolver asks again over TCP, the relay carries both."""
    out = run(ed, """
        infos = socket.getaddrinfo('big.lab.test', 80, socket.AF_INET, socket.SOCK_STREAM)
        print(json.dumps(sorted({i[4][0] for i in infos})))
    """)
    addrs = json.loads(out[0])
    assert sorted(addrs) == sorted(nl.SINK_HOSTS), out
    assert "big.lab.test" in {q[2] for q in lab.dns_queries()}


def test_dns_over_tcp_to_the_gateway(ed, lab):
    """A resolver that talks TCP from the start (like `dig +tcp`)."""
    out = run(ed, """
        import struct
        q = struct.pack('!HHHHHH', 0x4242, 0x0100, 1, 0, 0, 0)
        q += b'\\x06public\\x03lab\\x04test\\x00' + struct.pack('!HH', 1, 1)
        s = socket.create_connection((gateway(), 53), timeout=5)
        s.sendall(struct.pack('!H', len(q)) + q)
        buf = b''
        while len(buf) < 2 or len(buf) < 2 + struct.unpack('!H', buf[:2])[0]:
            buf += s.recv(4096)
        m = buf[2:]
        print(struct.unpack('!H', m[:2])[0] == 0x4242, struct.unpack('!H', m[6:8])[0])
        pos = len(q)  # past the question, as long as the query's
        pos += 2 if m[pos] & 0xC0 else m.index(b'\\x00', pos) + 1 - pos
        rtype, _, _, rdlen = struct.unpack('!HHIH', m[pos:pos + 10])
        print(rtype, socket.inet_ntoa(m[pos + 10:pos + 14]))
    """)
    assert out == ["True 1", f"1 {nl.PUBLIC}"], out


def test_direct_queries_to_the_lab_resolver_are_refused(ed, lab):
    """Only the gateway's relay resolves: the run's own queries to the
    upstream resolver get nothing, and the resolver sees none."""
    out = run(ed, f"""
        import struct
        q = struct.pack('!HHHHHH', 0x4243, 0x0100, 1, 0, 0, 0)
        q += b'\\x06public\\x03lab\\x04test\\x00' + struct.pack('!HH', 1, 1)
        print(udp({nl.DNS_ADDR!r}, 53, q).split(':')[0])
        print(tcp({nl.DNS_ADDR!r}, 53))
    """)
    assert out[0] in ("noanswer", "blocked"), out
    assert out[1] == "blocked:ECONNREFUSED", out
    time.sleep(scaled(0.1))
    assert lab.hits("udp", nl.DNS_ADDR, 53) == [] and lab.hits("tcp", nl.DNS_ADDR, 53) == []
    assert lab.dns_queries() == []


# ---------------------------------------------------------- between runs
def test_two_runs_cannot_reach_each_other(ed, lab):
    """Run A announces its address (an HTTP request to the lab), then waits
    for a datagram; run B, started meanwhile, sends it some and tries TCP."""
    wait = scaled(3)
    a_code = f"""
        import time
        me = my_address()
        rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        rx.bind(('0.0.0.0', 0))
        port = rx.getsockname()[1]
        # announce: the lab records the path
        s = socket.create_connection(({nl.PUBLIC!r}, 8081), timeout=5)
        s.sendall(f'GET /announce/{{me}}/{{port}} HTTP/1.0\\r\\n\\r\\n'.encode())
        s.recv(4096); s.close()
        rx.settimeout({wait})
        try:
            print('got:' + rx.recvfrom(100)[0].decode())
        except socket.timeout:
            print('nothing')
    """
    result = {}

    def run_a():
        try:
            result["a"] = ed.run_data(PRELUDE + py(a_code), enable_network=True)
        except BaseException as e:  # reported below
            result["a"] = e

    t = threading.Thread(target=run_a)
    t.start()
    try:
        def announced():
            ann = [r[4] for r in lab.http_requests() if r[4].startswith("/announce/")]
            assert ann, "run A did not announce itself"
            return ann[0].split("/")[2:4]
        a_addr, a_port = eventually(announced, scaled(15))
        out = run(ed, f"""
            import time
            res = set()
            for i in range(5):
                res.add(udp({a_addr!r}, {a_port}, b'from-b', timeout=0.1))
            print(sorted(res))
            print(tcp({a_addr!r}, {a_port}))
            print(my_address())
        """)
    finally:
        t.join(scaled(30))
    a = result["a"]
    assert not isinstance(a, BaseException), a
    assert (a["exit_code"], a["status"]) == (0, "ok"), a
    assert a["stdout"].splitlines() == ["nothing"], a
    assert out[2] != a_addr  # two runs, two addresses
    assert all(x == "noanswer" or x.startswith("blocked:") for x in ast.literal_eval(out[0])), out
    assert out[1] == "blocked:ECONNREFUSED", out


# ---------------------------------------------------------------- metrics
def refused_counts(d):
    from prometheus_client.parser import text_string_to_metric_families
    s = requests.Session()
    s.trust_env = False
    r = s.get(d.url("/metrics"), timeout=10)
    assert r.status_code == 200, r.text
    out = {}
    for fam in text_string_to_metric_families(r.text):
        for smp in fam.samples:
            if smp.name == "lockbox_network_refused_total":
                out[smp.labels["reason"]] = smp.value
    return out


def test_refusals_are_counted_in_metrics(ed, lab, net_info, host_service):
    before = refused_counts(ed)
    out = run(ed, f"""
        print(tcp({nl.PRIVATE!r}, 80))
        print(tcp({nl.METADATA!r}, 80))
        print(tcp({net_info['gateway']!r}, {host_service.port}))
    """)
    assert out == ["blocked:ECONNREFUSED"] * 3

    def counted():  # the jailer reads the counters once a second
        after = refused_counts(ed)
        for reason in ("private", "link_local", "host"):
            assert after.get(reason, 0) >= before.get(reason, 0) + 1, (reason, before, after)
    eventually(counted, scaled(5))


# ------------------------------------------------- allow and egress_only
def test_allow_from_the_environment_opens_exactly_that_port(lockboxd_factory, lab):
    d = lockboxd_factory(_env={"LOCKBOX_NETWORK_ALLOW": f"{nl.PRIVATE}:8080"},
                         worker_timeout=WORKER_TIMEOUT, **lab_daemon_config(lab))
    out = run(d, f"""
        print(tcp({nl.PRIVATE!r}, 8080))
        print(udp({nl.PRIVATE!r}, 8080))
        print(tcp({nl.PRIVATE!r}, 8081))
        print(tcp({nl.PRIVATE!r}, 80))
        print(udp({nl.PRIVATE!r}, 7))
        print(tcp({nl.DNS_ADDR!r}, 80))
        print(tcp({nl.DNS_ADDR!r}, 8080))
    """)
    assert json.loads(out[0].split(":", 1)[1])["host"] == nl.PRIVATE, out
    assert out[1] == "answer:echo:ping", out
    assert out[2:4] == ["blocked:ECONNREFUSED"] * 2, out
    assert out[4] == "noanswer" or out[4].startswith("blocked:"), out
    assert out[5:] == ["blocked:ECONNREFUSED"] * 2, out
    assert len(lab.hits("tcp", nl.PRIVATE, 8080)) == 1
    assert len(lab.hits("udp", nl.PRIVATE, 8080)) == 1
    assert lab.hits("tcp", nl.PRIVATE, 8081) == lab.hits("tcp", nl.PRIVATE, 80) == []
    assert lab.hits("udp", nl.PRIVATE, 7) == []
    assert lab.hits_on(nl.DNS_ADDR) == []


def test_allow_in_the_config_with_cidrs(lockboxd_factory, lab):
    d = lockboxd_factory(worker_timeout=WORKER_TIMEOUT, **lab_daemon_config(
        lab, allow=["172.16.7.0/24:8081", f"{nl.CGNAT}/32"]))
    out = run(d, f"""
        print(tcp({nl.PRIVATE172!r}, 8081).split(':')[0])
        print(tcp({nl.PRIVATE172!r}, 80))
        print(tcp({nl.CGNAT!r}, 80).split(':')[0])
        print(tcp({nl.CGNAT!r}, 8080).split(':')[0])
        print(udp({nl.CGNAT!r}, 7))
        print(tcp({nl.PRIVATE!r}, 80))
        print(tcp({nl.METADATA!r}, 80))
    """)
    assert out == ["connected", "blocked:ECONNREFUSED", "connected", "connected",
                   "answer:echo:ping", "blocked:ECONNREFUSED", "blocked:ECONNREFUSED"], out
    assert lab.hits("tcp", nl.PRIVATE172, 80) == []
    assert lab.hits_on(nl.PRIVATE) == [] and lab.hits_on(nl.METADATA) == []


def test_egress_only_leaves_only_its_entries(lockboxd_factory, lab):
    d = lockboxd_factory(_env={"LOCKBOX_NETWORK_EGRESS_ONLY": f"{nl.PUBLIC}:80"},
                         worker_timeout=WORKER_TIMEOUT, **lab_daemon_config(lab))
    before = refused_counts(d)
    out = run(d, f"""
        print(tcp({nl.PUBLIC!r}, 80).split(':')[0])
        print(tcp({nl.PUBLIC!r}, 8080))
        print(tcp({nl.PUBLIC2!r}, 80))
        print(udp({nl.PUBLIC!r}, 7))
        print(socket.gethostbyname('public2.lab.test'))
        print(tcp({nl.PRIVATE!r}, 80))
    """)
    assert out[:3] == ["connected", "blocked:ECONNREFUSED", "blocked:ECONNREFUSED"], out
    assert out[3] == "noanswer" or out[3].startswith("blocked:"), out
    assert out[4:] == [nl.PUBLIC2, "blocked:ECONNREFUSED"], out  # DNS still works
    assert len(lab.hits("tcp", nl.PUBLIC, 80)) == 1
    assert lab.hits("tcp", nl.PUBLIC, 8080) == [] and lab.hits("udp", nl.PUBLIC, 7) == []
    assert lab.hits_on(nl.PUBLIC2) == [] and lab.hits_on(nl.PRIVATE) == []
    def counted():  # the jailer reads the counters once a second
        after = refused_counts(d)
        assert after.get("egress_only", 0) >= before.get("egress_only", 0) + 2, (before, after)
    eventually(counted, scaled(5))


# ------------------------------------------------------------ offline runs
OFFLINE = """
    import errno, socket
    try:
        socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        print("socket")
    except OSError as e:
        print(errno.errorcode[e.errno])
    lines = open('/proc/self/net/dev').read().splitlines()[2:]
    print(sorted(l.split(':')[0].strip() for l in lines))
"""


def test_offline_run_reaches_nothing(ed, lab):
    d = ed.run_data(py(OFFLINE) + "print(socket.gethostbyname('public.lab.test'))\n",
                    enable_network=False)
    assert d["stdout"].splitlines()[:2] == ["EPERM", "['lo']"], d
    assert d["exit_code"] != 0 and "gaierror" in d["stderr"], d
    time.sleep(scaled(0.1))
    assert lab.all_hits() == [] and lab.dns_queries() == []


def test_daemon_without_network_gives_offline_runs(lockboxd_factory, lab):
    d = lockboxd_factory(**dict(lab_daemon_config(lab), enable_network=False))
    data = d.run_data(py(OFFLINE) + f"socket.create_connection(({nl.PUBLIC!r}, 80), timeout=2)\n",
                      enable_network=True)
    assert data["stdout"].splitlines() == ["EPERM", "['lo']"], data
    assert "PermissionError" in data["stderr"], data
    out = node(d, f"""
        require('net').connect(80, '{nl.PUBLIC}').on('error', e => console.log(e.code))
            .on('connect', () => console.log('connected'));
    """)
    assert out == ["EPERM"], out
    time.sleep(scaled(0.1))
    assert lab.all_hits() == []


# --------------------------------------------------------------- memory
SELF_CONNECT = """
    import errno, json, socket
    LIMIT = {limit}
    socks, queued, stop = [], 0, "cap"
    chunk = b"x" * 65536
    try:
        while queued < 8 * LIMIT and len(socks) < 2000:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 30)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 30)
            s.bind(("127.0.0.1", 0))
            s.connect(s.getsockname())  # simultaneous open: connected to itself
            socks.append(s)
            s.setblocking(False)
            while True:
                try:
                    queued += s.send(chunk)
                except BlockingIOError:
                    break
    except OSError as e:
        stop = errno.errorcode.get(e.errno, str(e))
    except MemoryError:
        stop = "MemoryError"
    print(json.dumps({{"sockets": len(socks), "queued": queued, "stop": stop}}), flush=True)
    # then memory on top, a MiB at a time, until the limit ends the run
    ballast = []
    while len(ballast) < 2 * LIMIT >> 20:
        ballast.append(bytearray(1 << 20))
        print("ballast", len(ballast), flush=True)
"""


def test_socket_buffers_count_against_the_memory_limit(lockboxd_factory, lab):
    """Data queued in the run's own TCP sockets (sent to itself, never read)
    is the run's memory: what it queues and the memory it then takes on top
    stay within limits.memory together (cgroup v1 counts socket buffers
    apart, in memory.kmem.tcp: its budget is split between the two)."""
    limit = 64 * 2**20
    d = lockboxd_factory(worker_timeout=WORKER_TIMEOUT, limits={"memory": "64M"},
                         **lab_daemon_config(lab))
    data = d.run_data(py(SELF_CONNECT.format(limit=limit)), enable_network=True)
    assert data["status"] == "memory_limit", data
    lines = data["stdout"].splitlines()
    if not lines and not os.path.isdir("/sys/fs/cgroup/memory"):
        # cgroup v2 counts the queue in memory.max: the limit ended the run
        # while it queued, before it could report (seen in tests/vm/cgroup2)
        return
    r = json.loads(lines[0])
    assert r["sockets"] >= 1 and r["queued"] > 0, r  # self-connected sockets work
    ballast = max([int(x.split()[1]) for x in lines[1:] if x.startswith("ballast ")] or [0])
    held = r["queued"] + ballast * 2**20
    assert ballast > 0 and held <= limit, \
        f"queued {r['queued'] >> 20} MiB + {ballast} MiB of memory with a 64 MiB limit: {r}"


# ------------------------------------------------------- after the daemon
def nft_tables():
    r = subprocess.run(["nft", "list", "tables"], capture_output=True, text=True)
    return {line.split()[-1] for line in r.stdout.splitlines() if line.startswith("table")}


def lbx_links():
    r = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True)
    names = {line.split(":", 2)[1].strip().split("@")[0] for line in r.stdout.splitlines()}
    return {n for n in names if n.startswith("lbx")}


def ip_forward():
    with open("/proc/sys/net/ipv4/ip_forward") as f:
        return f.read().strip()


def test_nothing_left_on_the_host_after_stop(lockboxd_factory, lab):
    """Links, nftables tables and ip_forward: after Daemon.stop() the host
    is as before the daemon (other daemons of the session may have theirs)."""
    links0, tables0, fwd0 = lbx_links(), nft_tables(), ip_forward()
    d = lockboxd_factory(worker_timeout=WORKER_TIMEOUT, **lab_daemon_config(lab))
    out = run(d, f"print(tcp({nl.PUBLIC!r}, 80).split(':')[0])")
    assert out == ["connected"]
    d.stop()
    assert lbx_links() - links0 == set(), lbx_links() - links0
    assert {t for t in nft_tables() - tables0 if t.startswith("lockbox")} == set()
    assert ip_forward() == fwd0


def test_stopping_one_daemon_leaves_the_others_network(lockboxd_factory, lab):
    """Two daemons on one host: the first one's stop (its cleanup, its
    ip_forward restore) does not break the second one's runs."""
    links0, tables0, fwd0 = lbx_links(), nft_tables(), ip_forward()
    a = lockboxd_factory(worker_timeout=WORKER_TIMEOUT, **lab_daemon_config(lab))
    b = lockboxd_factory(worker_timeout=WORKER_TIMEOUT, **lab_daemon_config(lab))
    assert run(a, "print(gateway())") != run(b, "print(gateway())"), "two daemons, one subnet"
    a.stop()
    out = run(b, f"""
        print(tcp({nl.PUBLIC!r}, 80).split(':')[0])
        print(socket.gethostbyname('public.lab.test'))
    """)
    assert out == ["connected", nl.PUBLIC], out
    b.stop()
    assert ip_forward() == fwd0
    assert lbx_links() - links0 == set(), lbx_links() - links0
    assert {t for t in nft_tables() - tables0 if t.startswith("lockbox")} == set()


# ------------------------------------------------------------- proxies
def test_proxies_are_open_even_on_private_and_host_addresses(lockboxd_factory, lab):
    """proxy.http on a private lab host and proxy.https on an address of
    the host itself: both ports are open to runs (and only those ports),
    in egress_only mode too, and the variables reach the run."""
    svc = nl.HostService([lab.host_addr])
    try:
        d = lockboxd_factory(
            worker_timeout=WORKER_TIMEOUT,
            proxy={"http": f"http://user:secret@{nl.PRIVATE}:8081",
                   "https": f"http://{lab.host_addr}:{svc.port}"},
            **lab_daemon_config(lab, egress_only=[f"{nl.PUBLIC}:80"]))
        out = run(d, f"""
            import os
            print(tcp({nl.PRIVATE!r}, 8081).split(':')[0])
            print(tcp({nl.PRIVATE!r}, 8080))
            print(tcp({lab.host_addr!r}, {svc.port}).split(':')[0])
            print(os.environ.get('HTTP_PROXY') == 'http://user:secret@{nl.PRIVATE}:8081')
        """)
        assert out == ["connected", "blocked:ECONNREFUSED", "connected", "True"], out
        assert len(lab.hits("tcp", nl.PRIVATE, 8081)) == 1
        assert lab.hits("tcp", nl.PRIVATE, 8080) == []
        assert len(svc.peers) == 1
    finally:
        svc.close()


def test_the_runs_log_lines_record_its_refusals(ed, lab):
    """Each refused packet is logged with the run's trace id and reason,
    and the run's run.done line counts them."""
    trace = "4bf92f3577b34da6a3ce929d0e0e4736"
    r = ed.run_response(PRELUDE + py(f"""
        print(tcp({nl.PRIVATE!r}, 80))
        print(tcp({nl.METADATA!r}, 80))
    """), headers={"traceparent": f"00-{trace}-00f067aa0ba902b7-01"}, enable_network=True)
    assert r.json()["data"]["stdout"] == "blocked:ECONNREFUSED\n" * 2, r.json()

    def logged():
        lines = [l for l in ed.log.splitlines() if f"trace_id={trace}" in l]
        assert any(f"event=run.net_refused dst={nl.PRIVATE} port=80 proto=tcp reason=private" in l
                   for l in lines), lines
        assert any(f"event=run.net_refused dst={nl.METADATA} port=80 proto=tcp "
                   "reason=link_local" in l for l in lines), lines
        assert any("event=run.done" in l and "network=1 net_refused=2" in l for l in lines), lines
    eventually(logged, scaled(5))


def test_read_only_proc_sys_turns_forwarding_on_link_by_link(tmp_path):
    """As in a container (Docker mounts /proc/sys read-only) or under the
    systemd unit's ProtectKernelTunables: lockboxd, alone in a network
    namespace of the test's, turns IPv4 forwarding on through netlink for
    its links, and off again at stop, leaving no table behind."""
    from conftest import LOCKBOXD, UID_BASE, _uid_blocks, free_port
    ns = f"lbtro{os.getpid()}"
    uid_min = UID_BASE + 100 * next(_uid_blocks)
    cfg = tmp_path / "config.yaml"
    cfg.write_text(
        f"app:\n  port: {free_port()}\nserver:\n  listen: 127.0.0.1\n"
        f"jail:\n  uid_min: {uid_min}\n  uid_max: {uid_min + 99}\n"
        f"dependencies:\n  python_requirements: {tmp_path}/none.txt\n"
        f"  layer_dir: {tmp_path}/layers\n"
        f"network:\n  subnet: 10.224.0.0/24\n  dns_servers: [127.0.0.1]\n")
    script = ("echo 0 > /proc/sys/net/ipv4/ip_forward && ip link set lo up && "
              "mount --bind /proc/sys /proc/sys && mount -o remount,bind,ro /proc/sys && "
              f"exec {LOCKBOXD} --config {cfg}")
    subprocess.run(["ip", "netns", "add", ns], check=True)
    log = tmp_path / "lockboxd.log"
    try:
        with open(log, "wb") as out:
            proc = subprocess.Popen(["ip", "netns", "exec", ns, "unshare", "-m", "sh", "-c", script],
                                    stdout=out, stderr=out, cwd=tmp_path)
        try:
            def ready():
                text = log.read_text()
                assert "event=network.ready" in text, text
                return text
            text = eventually(ready, scaled(10))
            assert "event=network.forwarding" in text, text
            fwd = subprocess.run(["ip", "netns", "exec", ns, "cat",
                                  "/proc/sys/net/ipv4/ip_forward",
                                  "/proc/sys/net/ipv4/conf/lo/forwarding"],
                                 capture_output=True, text=True).stdout.split()
            assert fwd == ["0", "1"], fwd  # global untouched, the link's on
        finally:
            proc.terminate()
            assert proc.wait(scaled(20)) == 0, log.read_text()
        fwd = subprocess.run(["ip", "netns", "exec", ns, "cat",
                              "/proc/sys/net/ipv4/conf/lo/forwarding"],
                             capture_output=True, text=True).stdout.split()
        assert fwd == ["0"], fwd
        tables = subprocess.run(["ip", "netns", "exec", ns, "nft", "list", "tables"],
                                capture_output=True, text=True).stdout
        assert "lockbox" not in tables, tables
    finally:
        subprocess.run(["ip", "netns", "del", ns])


def test_a_host_that_cannot_build_the_network_refuses_runs_with_network(lockboxd_factory, lab):
    """Safe failure: when the run network cannot be built (here its subnet
    is in use on the host: 127.0.0.0/16 holds the loopback's address), the
    daemon says so once at start-up, serves runs without network, and
    refuses runs with network with the reason; it never shares its own
    network with them."""
    d = lockboxd_factory(**lab_daemon_config(lab, subnet="127.0.0.0/16"))
    assert "event=network.unavailable" in d.log and "network.subnet 127.0.0.0/16 is in use" in d.log
    r = d.run("print('offline fine')", enable_network=False)
    assert r["data"]["stdout"] == "offline fine\n", r
    r = d.run(f"import socket\nsocket.create_connection(({nl.PUBLIC!r}, 80), timeout=3)\n"
              "print('reached')", enable_network=True)
    assert r["code"] == -500, r
    assert "network unavailable: network.subnet 127.0.0.0/16 is in use" in r["message"], r
    assert lab.hits_on(nl.PUBLIC) == []
    # each refusal closes the run's channel in the jailer: no fd is left
    fds = len(os.listdir(f"/proc/{d.pid}/fd"))
    for _ in range(50):
        assert d.run("print(1)", enable_network=True)["code"] == -500
    # a pool refill holds a few fds for a moment; a leak holds one per refusal
    def settled():
        now = len(os.listdir(f"/proc/{d.pid}/fd"))
        assert now <= fds + 3, f"{now} fds in the jailer after 50 refusals, {fds} before"
    eventually(settled, scaled(5))


class LoopbackResolver:
    """A DNS server on the host's loopback (as systemd-resolved's
    127.0.0.53): answers every A query with 203.0.113.8, records the
    queries' names."""

    def __init__(self, addr="127.0.0.153"):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind((addr, 53))
        self.sock.settimeout(0.2)
        self.names = []
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._serve, daemon=True)
        self._t.start()

    def _serve(self):
        while not self._stop.is_set():
            try:
                q, peer = self.sock.recvfrom(4096)
            except OSError:
                continue
            labels, i = [], 12
            while q[i]:
                labels.append(q[i + 1:i + 1 + q[i]].decode())
                i += 1 + q[i]
            self.names.append(".".join(labels))
            question = q[12:i + 5]
            answer = (b"\xc0\x0c\x00\x01\x00\x01\x00\x00\x00\x3c\x00\x04"
                      + socket.inet_aton(nl.PUBLIC2))
            self.sock.sendto(q[:2] + b"\x81\x80\x00\x01\x00\x01\x00\x00\x00\x00"
                             + question + answer, peer)

    def close(self):
        self._stop.set()
        self._t.join(5)
        self.sock.close()


def test_dns_through_a_resolver_on_the_hosts_loopback(lockboxd_factory, lab):
    """The host's resolver on its loopback (systemd-resolved's 127.0.0.53)
    is unreachable from a run, yet names resolve: the gateway's relay asks
    it from the host."""
    res = LoopbackResolver()
    try:
        d = lockboxd_factory(worker_timeout=WORKER_TIMEOUT,
                             **lab_daemon_config(lab, dns_servers=["127.0.0.153"]))
        out = run(d, f"""
            print(socket.gethostbyname('anything.example'))
            print(tcp('127.0.0.153', 53))
            print(tcp({nl.PUBLIC2!r}, 80).split(':')[0])
        """)
        assert out == [nl.PUBLIC2, "blocked:ECONNREFUSED", "connected"], out
        assert "anything.example" in res.names, res.names
    finally:
        res.close()


COUNTERS = """
    lines = open('/proc/self/net/dev').read().splitlines()[2:]
    print(sum(int(f) for l in lines for f in l.split(':')[1].split()))
    print(len(open('/proc/self/net/tcp').read().splitlines()) - 1,
          len(open('/proc/self/net/udp').read().splitlines()) - 1)
"""


def test_no_run_inherits_anything_of_an_earlier_runs_network(lockboxd_factory, lab):
    """A namespace is handed to a later run only if no packet ever crossed
    its links: whatever earlier runs did (public TCP and UDP, loopback
    traffic, a socket left open), each run starts with every interface
    counter at zero and no socket in its table."""
    d = lockboxd_factory(worker_timeout=WORKER_TIMEOUT, max_workers=2,
                         warm={"python_pool": 2, "nodejs_pool": 0},
                         **lab_daemon_config(lab))
    users = [
        f"print(tcp({nl.PUBLIC!r}, 80).split(':')[0])",
        f"print(udp({nl.PUBLIC!r}, 7))",
        "s = socket.socket(); s.bind(('127.0.0.1', 0)); s.connect(s.getsockname())\n"
        "s.send(b'x' * 1000); print('self')",
        "u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind(('0.0.0.0', 5353))\n"
        "print('bound')",
    ]
    for i in range(12):
        out = run(d, users[i % len(users)])
        assert out and out[0] in ("connected", "answer:echo:ping", "self", "bound"), out
        for _ in range(3):
            assert run(d, COUNTERS) == ["0", "0 0"]


def test_a_proxy_without_an_address_stays_closed_and_the_network_works(lockboxd_factory, lab):
    """A proxy setting lockbox cannot turn into an address and port (here
    the port is out of range; a name no resolver knows is the same) leaves
    that proxy closed to runs with one warning, which does not show its
    password; runs keep their network."""
    d = lockboxd_factory(worker_timeout=WORKER_TIMEOUT,
                         proxy={"http": "http://user:pw-7781@203.0.113.250:99999"},
                         **lab_daemon_config(lab))
    assert "event=network.proxy_unresolved proxy=\"203.0.113.250:99999\"" in d.log, d.log
    assert "pw-7781" not in d.log
    assert "event=network.ready" in d.log
    assert run(d, f"print(tcp({nl.PUBLIC!r}, 80).split(':')[0])") == ["connected"]
