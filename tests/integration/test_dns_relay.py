"""The runs' DNS relay on their gateway, hardened: a run that floods it (UDP
or TCP) slows only itself; it serves runs only, not the host or a
neighbour that routes the gateway's address here; it passes standard
queries only (DNS UPDATE, NOTIFY, zone transfers are answered by the relay,
never reach the resolver). What a user sees: the answers a run gets, the
lab resolver's record of what it was asked, /metrics and the daemon's log.

The daemon relays to the lab's resolver (tests/netlab.py, 10.213.7.53), so
no query leaves the machine. Floods are bounded in time (a few seconds) and
count, and come from jailed runs only. The probes from outside a run go
from the lab's namespace (a /32 route there, removed after) and from the
host to the daemon's gateway address.
"""
import re
import socket
import struct
import subprocess
import textwrap
import threading
import time

import pytest

import netlab as nl
from conftest import eventually, lab_daemon_config, scaled

FLOOD_S = 6


def py(src):
    return textwrap.dedent(src).lstrip("\n")


# What every run here gets: the gateway, its own address, a query builder
# and a reader of answers.
PRELUDE = py('''
    import os, socket, struct, time

    def gateway():
        for line in open("/etc/resolv.conf"):
            if line.split()[:1] == ["nameserver"]:
                return line.split()[1]

    def my_address():
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.connect((gateway(), 53))
        return s.getsockname()[0]

    def query(qid, name="public.lab.test", qtype=1, flags=0x0100, ns=0):
        body = b"".join(bytes([len(p)]) + p.encode() for p in name.split(".")) + b"\\0"
        return struct.pack("!HHHHHH", qid, flags, 1, 0, ns, 0) + body + struct.pack("!HH", qtype, 1)

    def rcode_of(msg, qid):
        """The answer's rcode, or 'wrong-id' / 'not-a-response'."""
        rid, flags = struct.unpack("!HH", msg[:4])
        if rid != qid:
            return "wrong-id"
        if not flags & 0x8000:
            return "not-a-response"
        return str(flags & 0xF)

    def ask_udp(q, timeout):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.settimeout(timeout)
        try:
            s.sendto(q, (gateway(), 53))
            return rcode_of(s.recv(4096), struct.unpack("!H", q[:2])[0])
        except OSError as e:
            return "timeout" if isinstance(e, socket.timeout) else type(e).__name__
        finally:
            s.close()

    def read_frame(c):
        buf = b""
        while len(buf) < 2 or len(buf) < 2 + struct.unpack("!H", buf[:2])[0]:
            d = c.recv(4096)
            if not d:
                raise ConnectionError("closed")
            buf += d
        return buf[2:2 + struct.unpack("!H", buf[:2])[0]]

    def ask_tcp(q, timeout):
        try:
            with socket.create_connection((gateway(), 53), timeout=timeout) as c:
                c.sendall(struct.pack("!H", len(q)) + q)
                return rcode_of(read_frame(c), struct.unpack("!H", q[:2])[0])
        except OSError as e:
            return "timeout" if isinstance(e, socket.timeout) else type(e).__name__
''')


def run(d, code, **fields):
    fields.setdefault("enable_network", True)
    data = d.run_data(PRELUDE + py(code), **fields)
    assert (data["exit_code"], data["status"], data["stderr"]) == (0, "ok", ""), data
    return data["stdout"].splitlines()


@pytest.fixture(scope="module")
def dd(module_daemon_factory, netlab):
    """The module's daemon: runs with network, DNS relayed to the lab."""
    return module_daemon_factory(max_workers=4, worker_timeout=FLOOD_S + 14,
                                 **lab_daemon_config(netlab))


@pytest.fixture
def lab(netlab):
    netlab.reset_hits()
    yield netlab


@pytest.fixture(scope="module")
def gw(dd):
    return run(dd, "print(gateway())")[0]


def metric(d, name, **labels):
    """A sample's value in /metrics (0 when absent)."""
    text = d.get("/metrics").text
    want = name + ("{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}" if labels else "")
    for line in text.splitlines():
        if line.startswith(want + " "):
            return float(line.split()[-1])
    return 0.0


def flood_and_probe(d, flood_code, probe_code):
    """Starts the flooding run, lets it get going, runs the probe run while
    it floods; returns (flood's lines, probe's lines)."""
    out = {}

    def flood():
        out["flood"] = run(d, flood_code)

    t = threading.Thread(target=flood)
    t.start()
    try:
        time.sleep(scaled(1.5))
        out["probe"] = run(d, probe_code)
    finally:
        t.join(scaled(FLOOD_S + 30))
    assert "flood" in out, "the flooding run did not finish"
    return out["flood"], out["probe"]


PROBE_5 = '''
    answers = []
    for i in range(5):
        answers.append(ask_{proto}(query(0x5100 + i), {timeout}))
        time.sleep(0.2)
    print(answers)
'''


# ------------------------------------------------------------ one run's flood
def test_a_udp_flood_leaves_another_run_resolving(dd, lab):
    """~10,000 datagrams a second for a few seconds, most of them queries with
    the QR bit set (which the resolver ignores: each held a relay slot until
    the upstream timeout), the rest ordinary queries: another run still gets
    its 5 answers. The flooder's excess is counted and its address logged."""
    flood_code = f'''
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.setblocking(False)
        s.connect((gateway(), 53))
        end, sent = time.monotonic() + {FLOOD_S}, 0
        while time.monotonic() < end and sent < 80000:
            for i in range(100):
                q = query((sent + i) & 0xFFFF, flags=0x8180 if i % 10 else 0x0100)
                try:
                    s.send(q)
                except OSError:
                    pass
            sent += 100
            time.sleep(0.01)
        print(my_address())
        print(sent)
    '''
    rate_before = metric(dd, "lockbox_dns_refused_total", reason="rate")
    flood, probe = flood_and_probe(dd, flood_code,
                                   PROBE_5.format(proto="udp", timeout=scaled(2)))
    flooder, sent = flood[0], int(flood[1])
    assert sent >= 20000, flood  # it did flood
    assert probe == ["['0', '0', '0', '0', '0']"], probe
    # the flood's excess: the relay's own rate and the kernel's per-run one
    assert metric(dd, "lockbox_dns_refused_total", reason="rate") > rate_before
    assert eventually(lambda: metric(dd, "lockbox_network_refused_total", reason="dns_rate") > 0,
                      scaled(5))
    assert re.search(rf"event=dns\.refused source={re.escape(flooder)} reason=\w+", dd.log)


def test_a_tcp_flood_leaves_another_run_resolving(dd, lab):
    """A run holding 48 TCP connections to the relay and asking on each again
    as soon as it is answered: another run's 5 TCP queries are answered."""
    flood_code = f'''
        q = query(0x4444)
        frame = struct.pack("!H", len(q)) + q
        conns, opened = [], 0
        end = time.monotonic() + {FLOOD_S}
        while time.monotonic() < end and opened < 3000:
            while len(conns) < 48 and opened < 3000 and time.monotonic() < end:
                opened += 1
                try:
                    c = socket.create_connection((gateway(), 53), timeout=0.5)
                    c.settimeout(0.5)
                    c.sendall(frame)
                    conns.append(c)
                except OSError:
                    break
            for c in list(conns):
                try:
                    read_frame(c)
                    c.sendall(frame)  # and again, at once
                except OSError:
                    conns.remove(c)
                    c.close()
        print(my_address())
        print(opened)
    '''
    share_before = metric(dd, "lockbox_dns_refused_total", reason="share")
    flood, probe = flood_and_probe(dd, flood_code,
                                   PROBE_5.format(proto="tcp", timeout=scaled(2)))
    flooder, opened = flood[0], int(flood[1])
    assert opened >= 48, flood
    assert probe == ["['0', '0', '0', '0', '0']"], probe
    assert metric(dd, "lockbox_dns_refused_total", reason="share") > share_before
    assert re.search(rf"event=dns\.refused source={re.escape(flooder)} reason=share", dd.log)


# ------------------------------------------------------- standard queries only
def test_update_notify_and_zone_transfers_are_answered_by_the_relay(dd, lab):
    """DNS UPDATE and NOTIFY get NOTIMP, AXFR and IXFR REFUSED, from the relay:
    the resolver (which would accept them from the host) never sees them; a
    standard query still goes through."""
    out = run(dd, '''
        print(ask_udp(query(0x0101, "lab.test", qtype=6, flags=0x2800, ns=1), 3))  # UPDATE
        print(ask_udp(query(0x0102, "lab.test", qtype=6, flags=0x2400), 3))        # NOTIFY
        print(ask_tcp(query(0x0103, "lab.test", qtype=252, flags=0), 3))           # AXFR
        print(ask_udp(query(0x0104, "lab.test", qtype=251, flags=0), 3))           # IXFR
        print(ask_udp(query(0x0105, "public.lab.test"), 3))
    ''')
    assert out == ["4", "4", "5", "5", "0"], out
    asked = [(q[2].lower(), q[3]) for q in lab.dns_queries()]
    assert asked == [("public.lab.test", 1)], asked
    assert metric(dd, "lockbox_dns_refused_total", reason="opcode") >= 2
    assert metric(dd, "lockbox_dns_refused_total", reason="question") >= 2


def test_a_response_sent_to_the_relay_is_not_answered(dd, lab):
    """A message with QR set is dropped: never relayed, never answered (two
    reflectors must not answer each other for ever)."""
    out = run(dd, 'print(ask_udp(query(0x0201, flags=0x8180), 1))')
    assert out == ["timeout"], out
    # the lab's resolver (silent to responses too) got no datagram at all
    assert lab.hits("udp", nl.DNS_ADDR, 53) == []
    assert metric(dd, "lockbox_dns_refused_total", reason="response") >= 1


# --------------------------------------------------------------- runs only
def lab_ns_query(lab, gw, timeout):
    """A DNS query to gw:53 from the lab's namespace (198.18.0.2 on its own
    link, not a run's): 'answer' or 'timeout'. The /32 route to gw it needs
    there is removed after."""
    code = textwrap.dedent(f'''
        import socket, struct
        q = struct.pack("!HHHHHH", 0x0303, 0x0100, 1, 0, 0, 0) + b"\\x06public\\x03lab\\x04test\\x00\\x00\\x01\\x00\\x01"
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.settimeout({timeout})
        s.sendto(q, ("{gw}", 53))
        try:
            s.recv(4096)
            print("answer")
        except socket.timeout:
            print("timeout")
    ''')
    route = ["route", "add", f"{gw}/32", "via", nl.HOST_ADDR, "dev", "eth0"]
    subprocess.run([nl.IP, "netns", "exec", lab.ns, nl.IP] + route, check=True)
    try:
        r = subprocess.run([nl.IP, "netns", "exec", lab.ns, nl.PYTHON, "-c", code],
                           capture_output=True, text=True, timeout=timeout + 10)
    finally:
        route[0:2] = ["route", "del"]
        subprocess.run([nl.IP, "netns", "exec", lab.ns, nl.IP] + route, check=False)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def host_query(gw, timeout):
    """The same query from the host itself (it leaves from the gateway's
    address, over lo): 'answer' or 'timeout'."""
    q = struct.pack("!HHHHHH", 0x0404, 0x0100, 1, 0, 0, 0) + \
        b"\x06public\x03lab\x04test\x00\x00\x01\x00\x01"
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(timeout)
        s.sendto(q, (gw, 53))
        try:
            s.recv(4096)
            return "answer"
        except socket.timeout:
            return "timeout"


def test_queries_from_hosts_that_are_not_runs_are_dropped(dd, lab, gw):
    """A neighbour that routes the gateway's address to this machine, and a
    process of the host itself, get no answer (the relay would hand them
    the host's resolvers); runs still do. Probed while a run holds the
    gateway's address up."""
    holder = threading.Thread(target=run, args=(dd, "time.sleep(5)"))
    holder.start()
    try:
        time.sleep(scaled(1))
        assert lab_ns_query(lab, gw, scaled(2)) == "timeout"
        assert host_query(gw, scaled(2)) == "timeout"
    finally:
        holder.join(scaled(30))
    assert lab.dns_queries() == []
    assert run(dd, 'print(ask_udp(query(0x0505), 3))') == ["0"]
    assert [q[2] for q in lab.dns_queries()] == ["public.lab.test"]
