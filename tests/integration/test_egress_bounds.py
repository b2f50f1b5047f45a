"""The per-run bounds of the run network (network.max_connections,
network.new_connections_per_second): a run that opens connections past its
bound is refused (or, over the rate, dropped), counted in /metrics and
logged with its reason, while another run still connects to the same
host:port; open connections are never limited.

The destinations are the lab's fake hosts (tests/netlab.py, fixture
`netlab`): UDP echo on 203.0.113.7 port 7, HTTP on port 80; no packet
leaves the machine. The daemons are configured with small bounds (40
connections, 10 a second), so a test leaves at most a few dozen UDP
conntrack entries behind, which the kernel forgets after 30 s.
"""
import json
import textwrap
import threading

import pytest
import requests

import netlab as nl
from conftest import (assert_overlapped, eventually, lab_daemon_config, py_clocked, scaled,
                      take_interval)

MAX_CONNECTIONS = 40
RATE = 10
WORKER_TIMEOUT = 20
# how long the sweeping run holds its connections while the other run
# connects (the test checks that the two runs did overlap)
HOLD = 8


def py(src):
    return textwrap.dedent(src).lstrip("\n")


@pytest.fixture(scope="module")
def counted(module_daemon_factory, netlab):
    """A daemon whose runs hold at most MAX_CONNECTIONS, with no rate bound."""
    return module_daemon_factory(
        max_workers=4, worker_timeout=WORKER_TIMEOUT,
        **lab_daemon_config(netlab, max_connections=MAX_CONNECTIONS,
                            new_connections_per_second=0))


@pytest.fixture(scope="module")
def rated(module_daemon_factory, netlab):
    """A daemon whose runs open at most RATE connections a second, with no
    bound on how many they hold."""
    return module_daemon_factory(
        max_workers=4, worker_timeout=WORKER_TIMEOUT,
        **lab_daemon_config(netlab, max_connections=0, new_connections_per_second=RATE))


@pytest.fixture
def lab(netlab):
    netlab.reset_hits()
    yield netlab


def refused_counts(d):
    """lockbox_network_refused_total by reason, from /metrics."""
    from prometheus_client.parser import text_string_to_metric_families
    s = requests.Session()
    s.trust_env = False
    r = s.get(d.url("/metrics"), timeout=10)
    assert r.status_code == 200, r.text
    return {smp.labels["reason"]: smp.value
            for fam in text_string_to_metric_families(r.text) for smp in fam.samples
            if smp.name == "lockbox_network_refused_total"}


def ok_stdout(data):
    assert (data["exit_code"], data["status"], data["stderr"]) == (0, "ok", ""), data
    return data["stdout"].splitlines()


# A run sweeping source ports toward one host:port, as the NAT exhaustion
# attack does: one connected UDP socket after another, each sending one
# datagram and waiting for its echo, until one is refused (or 200). It
# holds what it got for HOLD seconds, then uses five of them again.
SWEEP = py(f"""
    import errno, socket, time
    socks, refused = [], None
    for i in range(200):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.settimeout(3)
        s.connect(({nl.PUBLIC!r}, 7))
        try:
            s.send(b"sweep")
            s.recv(100)
            socks.append(s)
        except OSError as e:
            refused = "timeout" if isinstance(e, socket.timeout) else errno.errorcode[e.errno]
            s.close()
            break
    print("answered", len(socks), "refused", refused, flush=True)
    time.sleep({HOLD})
    again = 0
    for s in socks[:5]:
        s.send(b"again")
        again += s.recv(100) == b"echo:again"
    print("again", again)
""")

# The other run: 30 UDP connections to the same host:port, 10 HTTP
# requests, each answered.
OTHER = py(f"""
    import socket
    udp = 0
    socks = []
    for i in range(30):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.settimeout(3)
        s.connect(({nl.PUBLIC!r}, 7))
        s.send(b"other")
        udp += s.recv(100) == b"echo:other"
        socks.append(s)
    http = 0
    for i in range(10):
        c = socket.create_connection(({nl.PUBLIC!r}, 80), timeout=3)
        c.sendall(b"GET / HTTP/1.0\\r\\nHost: x\\r\\n\\r\\n")
        http += b"200" in c.recv(100)
        c.close()
    print("udp", udp, "http", http)
""")


def test_a_sweeping_run_is_refused_at_max_connections_while_another_connects(counted, lab):
    d = counted
    before = refused_counts(d)
    results = {}

    def sweep():
        results["sweep"] = d.run_data(py_clocked(SWEEP), enable_network=True,
                                      session=d.new_session())

    t = threading.Thread(target=sweep)
    t.start()
    try:
        # the sweeping run has met its bound (the jailer logs each refusal
        # as it reads it): the other run connects while it holds them all
        def bound_met():
            assert f"dst={nl.PUBLIC} port=7 proto=udp reason=connections" in d.log
        eventually(bound_met, scaled(HOLD - 2))
        other = d.run_data(py_clocked(OTHER), enable_network=True)
    finally:
        t.join(scaled(WORKER_TIMEOUT + 5))
    sweep_data = results["sweep"]
    spans = [take_interval(sweep_data), take_interval(other)]
    assert_overlapped(spans)
    # exactly the bound, then refused at once; what it holds still works
    assert ok_stdout(sweep_data) == [f"answered {MAX_CONNECTIONS} refused ECONNREFUSED",
                                     "again 5"], sweep_data
    # the other run reached the same host:port, on every connection
    assert ok_stdout(other) == ["udp 30 http 10"], other
    # the refused datagram never left: the lab saw the sweep's 40 (and 5
    # again) and the other run's 30
    assert len(lab.hits("udp", nl.PUBLIC, 7)) == MAX_CONNECTIONS + 5 + 30

    def reported():
        after = refused_counts(d)
        assert after.get("connections", 0) == before.get("connections", 0) + 1, (before, after)
        lines = [l for l in d.log.splitlines() if "event=run.net_refused" in l]
        assert any(f"dst={nl.PUBLIC} port=7 proto=udp reason=connections" in l for l in lines), lines
    eventually(reported, scaled(5))


def test_closed_connections_do_not_count(counted, lab):
    """A scraper's sequential requests: every TCP connection closes before
    the next, so a run makes more than max_connections of them; the
    connections it then keeps open meet the bound as before."""
    n = MAX_CONNECTIONS + 20
    data = counted.run_data(py(f"""
        import errno, socket
        ok = 0
        for i in range({n}):
            c = socket.create_connection(({nl.PUBLIC!r}, 80), timeout=3)
            c.sendall(b"GET / HTTP/1.0\\r\\nHost: x\\r\\n\\r\\n")
            while c.recv(4096):
                pass
            c.close()
            ok += 1
        print("http", ok)
        socks, refused = [], None
        for i in range(100):
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.settimeout(3)
            s.connect(({nl.PUBLIC!r}, 7))
            try:
                s.send(b"held")
                s.recv(100)
                socks.append(s)
            except OSError as e:
                refused = "timeout" if isinstance(e, socket.timeout) else errno.errorcode[e.errno]
                break
        print("udp", len(socks), "refused", refused)
    """), enable_network=True)
    # a TCP connection that has just closed may still count for a moment
    # (nf_conncount forgets closed ones as it walks the list)
    out = ok_stdout(data)
    assert out[0] == f"http {n}", data
    held = int(out[1].split()[1])
    assert MAX_CONNECTIONS - 3 <= held <= MAX_CONNECTIONS, data
    assert out[1].endswith("refused ECONNREFUSED"), data
    assert len(lab.hits("tcp", nl.PUBLIC, 80)) == n


def test_new_connections_over_the_rate_are_dropped_and_open_ones_flow(rated, lab):
    d = rated
    before = refused_counts(d)
    sent = 100
    data = d.run_data(py(f"""
        import json, select, socket, time
        socks = []
        t0 = time.monotonic()
        for i in range({sent}):
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.setblocking(False)
            s.connect(({nl.PUBLIC!r}, 7))
            s.send(b"burst")
            socks.append(s)
        window = time.monotonic() - t0
        answered = set()
        end = time.monotonic() + 1.5
        while time.monotonic() < end and len(answered) < len(socks):
            ready, _, _ = select.select([s for s in socks if s not in answered], [], [], 0.1)
            for s in ready:
                try:
                    s.recv(100)
                    answered.add(s)
                except OSError:
                    pass
        print(json.dumps({{"answered": len(answered), "window": window}}), flush=True)
        # a connection conntrack holds is not limited: 30 more datagrams
        s = next(iter(answered))
        s.setblocking(True)
        s.settimeout(3)
        flow = 0
        for i in range(30):
            s.send(b"flow")
            flow += s.recv(100) == b"echo:flow"
        print("flow", flow, flush=True)
        # a second later the run opens new connections again
        time.sleep(1.2)
        later = 0
        for i in range(5):
            c = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            c.settimeout(3)
            c.connect(({nl.PUBLIC!r}, 7))
            c.send(b"later")
            later += c.recv(100) == b"echo:later"
        print("later", later)
    """), enable_network=True)
    out = ok_stdout(data)
    first = json.loads(out[0])
    answered = first["answered"]
    # at most the burst plus what the rate adds while the run was sending
    assert 1 <= answered <= RATE + RATE * first["window"] + 1, data
    assert out[1:] == ["flow 30", "later 5"], data
    assert len(lab.hits("udp", nl.PUBLIC, 7)) == answered + 30 + 5
    # another run, another address: its own rate
    other = d.run_data(py(f"""
        import socket
        ok = 0
        for i in range(5):
            c = socket.create_connection(({nl.PUBLIC!r}, 80), timeout=3)
            c.sendall(b"GET / HTTP/1.0\\r\\nHost: x\\r\\n\\r\\n")
            ok += b"200" in c.recv(100)
            c.close()
        print(ok)
    """), enable_network=True)
    assert ok_stdout(other) == ["5"], other

    def reported():
        after = refused_counts(d)
        dropped = after.get("connection_rate", 0) - before.get("connection_rate", 0)
        assert dropped == sent - answered, (before, after, answered)
        assert after.get("connections", 0) == before.get("connections", 0)
    eventually(reported, scaled(5))

