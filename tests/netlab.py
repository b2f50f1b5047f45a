"""A lab of fake hosts for network tests, in a network namespace of its own.

    lab = Lab().start()        # or the session fixture `netlab` of tests/integration
    requests.get("http://203.0.113.7/").json()  # {"host": "203.0.113.7", "port": 80, "peer": "198.18.0.1"}
    lab.hits("tcp", "203.0.113.7", 80)          # ["198.18.0.1"]
    lab.close()

The namespace lbtlab<pid> (pid: the test process's) is joined to the host by
a veth pair: lbt<pid>h on the host (HOST_ADDR/30) and eth0 in the lab
(LAB_ADDR/30). The lab holds the addresses of LAB_HOSTS (on its lo, /32)
and the host routes each of them (and the 40 sink addresses SINK_HOSTS,
and LAB_HOST6) into it, one /32 (/128) route each, so traffic to them never
leaves this machine and no range of the host's is taken over. Before it
builds anything, start() checks that none of these addresses is one this
host uses (check_lab_addresses) and refuses, naming it, if one is;
LOCKBOX_TEST_LAB_ADDRS chooses others. The lab
has no default route: it answers only the host's address on the veth (so a
run of the daemon reaches it through the daemon's NAT, seen as HOST_ADDR).

netlab_server.py, started inside the namespace, serves on every lab
address: HTTP on TCP 80, 8080 and 8081 (200 with {"host", "port", "peer"}),
UDP echo on 7 and 8080 (b"echo:" + datagram), and DNS on DNS_ADDR port 53, UDP and
TCP (see netlab_server.ZONE). It records every hit; lab.hits() asks it.

Only one lab can exist on a machine at a time (the routes to the lab
addresses are the host's): a lab takes the lock LOCK_PATH, and a second
one waits for it (up to `wait` seconds) and then fails.

Cleanup: close() (idempotent, also registered with atexit) kills the
server, deletes the routes, the veth and the namespace. A watchdog process
(this file run as a script) holds the other end of a pipe from the test
process: if that one dies without close() (SIGKILL...), the watchdog does
the same cleanup. start() also removes what a dead lab left: namespaces
lbtlab<pid> and links lbt<pid>h whose pid is not alive (or is another
process now).

Never send anything to an address that is not in LAB_HOSTS, LAB_HOST6,
SINK_HOSTS or 127.0.0.0/8: lab.assert_routed(addr) checks the host routes it
into the lab. Standard library only; uses `ip` (iproute2). Needs root.
"""
import atexit
import fcntl
import ipaddress
import json
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

IP = "/usr/sbin/ip" if os.path.exists("/usr/sbin/ip") else "/sbin/ip"
PYTHON = "/usr/bin/python3"
HERE = os.path.dirname(os.path.abspath(__file__))
SERVER = os.path.join(HERE, "netlab_server.py")
STATE_DIR = "/run/lbtlab"
LOCK_PATH = os.path.join(STATE_DIR, "lock")

# The lab's addresses: each stands for a kind of destination (the first
# two for public hosts, the others for the ranges a run may not reach).
# LOCKBOX_TEST_LAB_ADDRS=name=address,... replaces any of them, for a host
# where a default collides with an address it uses (start() checks, see
# check_lab_addresses): names public, public2, sink (the first of 40
# consecutive addresses where nothing answers), private, dns, metadata,
# cgnat, private172, private192, host6, and link (the /30 of the veth
# between the host, its first address, and the lab, its second).
DEFAULTS = {
    "public": "203.0.113.7", "public2": "203.0.113.8", "sink": "203.0.113.100",
    "private": "10.213.7.2", "dns": "10.213.7.53", "metadata": "169.254.169.254",
    "cgnat": "100.64.7.7", "private172": "172.16.7.7", "private192": "192.168.7.7",
    "host6": "fd7e:57ab:7::7", "link": "198.18.0.0/30",
}
ADDRS_ENV = "LOCKBOX_TEST_LAB_ADDRS"
# Where each kind must lie: the egress policy treats the lab's hosts by
# these ranges, so a replacement must keep its kind.
_DENIED = [ipaddress.ip_network(n) for n in (
    "0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16",
    "172.16.0.0/12", "192.168.0.0/16", "224.0.0.0/4", "240.0.0.0/4")]
_KINDS = {
    "private": "10.0.0.0/8", "dns": "10.0.0.0/8", "metadata": "169.254.0.0/16",
    "cgnat": "100.64.0.0/10", "private172": "172.16.0.0/12", "private192": "192.168.0.0/16",
    "host6": "fd00::/8",
}
SINK_COUNT = 40


def lab_addresses(text=None):
    """DEFAULTS with LOCKBOX_TEST_LAB_ADDRS's replacements (text, if given,
    instead of the environment), each checked for its kind."""
    out = dict(DEFAULTS)
    text = os.environ.get(ADDRS_ENV, "") if text is None else text
    for item in filter(None, (x.strip() for x in text.split(","))):
        name, _, value = item.partition("=")
        if name not in DEFAULTS:
            raise ValueError(f"{ADDRS_ENV}: unknown name {name!r} (names: {', '.join(DEFAULTS)})")
        out[name] = value.strip()
    for name, value in out.items():
        if name == "link":
            net = ipaddress.ip_network(value)
            if net.version != 4 or net.prefixlen != 30:
                raise ValueError(f"{ADDRS_ENV}: link={value} must be an IPv4 /30")
            continue
        addr = ipaddress.ip_address(value)
        want = _KINDS.get(name)
        if want and addr not in ipaddress.ip_network(want):
            raise ValueError(f"{ADDRS_ENV}: {name}={value} must be in {want}")
        last = addr + (SINK_COUNT - 1 if name == "sink" else 0)
        if not want and (addr.version != 4 or any(a in n for n in _DENIED for a in (addr, last))):
            raise ValueError(f"{ADDRS_ENV}: {name}={value} must be an IPv4 address outside "
                             "the private, loopback, link-local, CGNAT and multicast ranges")
    return out


ADDRS = lab_addresses()
_link = list(ipaddress.ip_network(ADDRS["link"]).hosts())
HOST_ADDR = str(_link[0])  # the host's end of the veth (lbt<pid>h)
LAB_ADDR = str(_link[1])   # the lab's end (eth0 in the namespace)
PREFIX = 30
HOST_ADDR6 = "fd7e:57ab:1::1"
LAB_ADDR6 = "fd7e:57ab:1::2"

PUBLIC = ADDRS["public"]
PUBLIC2 = ADDRS["public2"]
PRIVATE = ADDRS["private"]
DNS_ADDR = ADDRS["dns"]
METADATA = ADDRS["metadata"]
CGNAT = ADDRS["cgnat"]
PRIVATE172 = ADDRS["private172"]
PRIVATE192 = ADDRS["private192"]
LAB_HOSTS = (PUBLIC, PUBLIC2, PRIVATE, DNS_ADDR, METADATA, CGNAT, PRIVATE172, PRIVATE192)
# an IPv6 host (unique local address) in the lab, so a test of "no IPv6 in
# runs" has a target that would answer, and that is not the host's gateway
LAB_HOST6 = ADDRS["host6"]
# addresses in the lab where nothing answers (big.lab.test's), each routed
# on its own: the lab never routes a whole range over the host
SINK_HOSTS = tuple(str(ipaddress.ip_address(ADDRS["sink"]) + i) for i in range(SINK_COUNT))
TCP_PORTS = (80, 8080, 8081)
UDP_PORTS = (7, 8080)
# The lab server's DNS zone.
ZONE = {
    "public.lab.test": [PUBLIC],
    "public2.lab.test": [PUBLIC2],
    "private.lab.test": [PRIVATE],
    "metadata.lab.test": [METADATA],
    # 40 addresses: 12 + 18 + 40 * 16 = 670 bytes, more than DNS over UDP
    # carries without EDNS
    "big.lab.test": list(SINK_HOSTS),
}

# Every route the lab adds is one of these (checked before it is added).
ALLOWED_ROUTES = frozenset([f"{a}/32" for a in LAB_HOSTS + SINK_HOSTS] + [f"{LAB_HOST6}/128"])
# Names: the daemon's own interfaces start with lbx; ours with lbt.
NS_RE = re.compile(r"^lbtlab(\d+)$")
LINK_RE = re.compile(r"^lbt(\d+)h$")


def ns_name(pid):
    return f"lbtlab{pid}"


def link_name(pid):
    return f"lbt{pid}h"


def _ip(*args, ns=None, check=True):
    cmd = [IP] + (["netns", "exec", ns, IP] if ns else []) + [str(a) for a in args]
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}): {r.stderr.strip()}")
    return r


def _starttime(pid):
    """The start time of process pid (clock ticks since boot), or None."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def _owner_alive(pid):
    """Is the process that made lab pid still there (not a later process
    that got the same pid)?"""
    now = _starttime(pid)
    if now is None:
        return False
    try:
        with open(os.path.join(STATE_DIR, str(pid))) as f:
            return f.read().strip() == now
    except OSError:
        return True  # no record: cannot tell, so leave it alone


def list_namespaces():
    r = _ip("netns", "list", check=False)
    return [line.split()[0] for line in r.stdout.splitlines() if line.strip()]


def list_links():
    r = _ip("-o", "link", "show", check=False)
    out = []
    for line in r.stdout.splitlines():
        parts = line.split(":", 2)
        if len(parts) >= 2:
            out.append(parts[1].strip().split("@")[0])
    return out


def lab_routes(pid):
    """The host's routes through lab pid's link (IPv4 and IPv6)."""
    out = []
    for fam in ("-4", "-6"):
        r = _ip(fam, "-j", "route", "show", "dev", link_name(pid), check=False)
        if r.returncode == 0 and r.stdout.strip():
            out += [(fam, x["dst"]) for x in json.loads(r.stdout)]
    return out


def cleanup(pid):
    """Remove everything of lab pid: its server and other processes in its
    namespace, its routes, its link, its namespace, its state file. Quiet
    about what is already gone."""
    ns, link = ns_name(pid), link_name(pid)
    if ns in list_namespaces():
        r = _ip("netns", "pids", ns, check=False)
        for p in r.stdout.split():
            try:
                os.kill(int(p), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                pass
    if link in list_links():
        for fam, dst in lab_routes(pid):
            if "/" not in dst and dst != "default":
                dst += "/128" if fam == "-6" else "/32"
            if dst in ALLOWED_ROUTES:
                _ip(fam, "route", "del", dst, "dev", link, check=False)
        _ip("link", "del", link, check=False)
    if ns in list_namespaces():
        for _ in range(50):  # the killed processes may still hold it a moment
            if _ip("netns", "del", ns, check=False).returncode == 0:
                break
            time.sleep(0.05)
    try:
        os.unlink(os.path.join(STATE_DIR, str(pid)))
    except OSError:
        pass


def cleanup_stale():
    """Remove the labs whose test process is gone."""
    pids = set()
    for ns in list_namespaces():
        m = NS_RE.match(ns)
        if m:
            pids.add(int(m.group(1)))
    for link in list_links():
        m = LINK_RE.match(link)
        if m:
            pids.add(int(m.group(1)))
    try:
        pids |= {int(n) for n in os.listdir(STATE_DIR) if n.isdigit()}
    except OSError:
        pass
    for pid in sorted(pids):
        if pid != os.getpid() and not _owner_alive(pid):
            cleanup(pid)


# -------------------------------------------------- address collisions
def routed_addresses():
    """Every address the lab routes into its namespace or puts on its link."""
    return LAB_HOSTS + SINK_HOSTS + (LAB_HOST6, HOST_ADDR, LAB_ADDR)


def lab_conflicts(addrs, host_addrs, routes, hosts_text, resolv_text, peers):
    """[(address, why)] for each of addrs the host already uses: an address
    of its own, inside a route other than the default (routes: [(prefix,
    where)]), named in /etc/hosts or /etc/resolv.conf, or the peer of an
    open socket. Pure, for tests; host_state() gathers the real values."""
    out = []
    words = set(re.split(r"[\s,]+", hosts_text + "\n" + resolv_text))
    for a in addrs:
        ip = ipaddress.ip_address(a)
        if a in host_addrs:
            out.append((a, "an address of this host"))
        for prefix, where in routes:
            net = ipaddress.ip_network(prefix, strict=False)
            if net.version == ip.version and ip in net:
                out.append((a, f"inside the host's route {prefix} ({where})"))
        if a in words:
            out.append((a, "named in /etc/hosts or /etc/resolv.conf"))
        if a in peers:
            out.append((a, "the peer of an open socket of this host"))
    return out


def _proc_net_peers():
    peers = set()
    for name, fam in (("tcp", 4), ("udp", 4), ("tcp6", 6), ("udp6", 6)):
        try:
            with open(f"/proc/net/{name}") as f:
                lines = f.read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            # connected or connecting only: what a closed lab's tests left
            # (TIME_WAIT, FIN_WAIT, ...) is not a service of the host
            if line.split()[3] not in ("01", "02"):
                continue
            raw = bytes.fromhex(line.split()[2].split(":")[0])
            if fam == 4:
                peers.add(str(ipaddress.IPv4Address(raw[::-1])))
            else:  # four 32-bit words, each in host (little-endian) order
                words = b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4))
                peers.add(str(ipaddress.IPv6Address(words)))
    return peers


def host_state():
    """The host's addresses, non-default routes of every table (outside any
    lab's links), /etc/hosts and /etc/resolv.conf, and its sockets' peers."""
    host_addrs = set()
    for x in json.loads(_ip("-j", "addr", "show").stdout or "[]"):
        host_addrs |= {i["local"] for i in x.get("addr_info", [])}
    routes = []
    for fam in ("-4", "-6"):
        for r in json.loads(_ip(fam, "-j", "route", "show", "table", "all").stdout or "[]"):
            dst, dev = r.get("dst", ""), r.get("dev", "")
            if dst in ("default", "") or LINK_RE.match(dev) or r.get("type") == "multicast":
                continue
            routes.append((dst if "/" in dst else f"{dst}/{32 if fam == '-4' else 128}",
                           f"dev {dev or '?'}, table {r.get('table', 'main')}"))

    def text(path):
        try:
            with open(path) as f:
                return f.read()
        except OSError:
            return ""
    return host_addrs, routes, text("/etc/hosts"), text("/etc/resolv.conf"), _proc_net_peers()


def check_lab_addresses():
    """Refuse to build the lab over anything this host uses (its traffic
    would go into the lab while the tests run), naming the address and
    how to choose others."""
    found = lab_conflicts(routed_addresses(), *host_state())
    if found:
        lines = "\n".join(f"  {a}: {why}" for a, why in found)
        raise RuntimeError(
            f"the network lab's addresses collide with this host's:\n{lines}\n"
            f"choose others with {ADDRS_ENV}=name=address,... (names: "
            f"{', '.join(DEFAULTS)}; see tests/netlab.py)")


# ------------------------------------------------------------------ DNS
def dns_query(name, qtype=1, server=DNS_ADDR, tcp=False, timeout=3.0, port=53):
    """Ask server about name; returns (rcode, truncated, [A addresses])."""
    assert server == DNS_ADDR or ipaddress.ip_address(server).is_loopback, server
    qid = int.from_bytes(os.urandom(2), "big")
    q = struct.pack("!HHHHHH", qid, 0x0100, 1, 0, 0, 0)
    q += b"".join(bytes([len(p)]) + p.encode() for p in name.rstrip(".").split(".")) + b"\0"
    q += struct.pack("!HH", qtype, 1)
    if tcp:
        with socket.create_connection((server, port), timeout=timeout) as s:
            s.sendall(struct.pack("!H", len(q)) + q)
            buf = b""
            while len(buf) < 2 or len(buf) < 2 + struct.unpack("!H", buf[:2])[0]:
                d = s.recv(65536)
                if not d:
                    raise ConnectionError("DNS server closed the connection")
                buf += d
            msg = buf[2:]
    else:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.settimeout(timeout)
            s.sendto(q, (server, port))
            msg, _ = s.recvfrom(65536)
    rid, flags, qd, an = struct.unpack("!HHHH", msg[:8])
    assert rid == qid, "DNS answer to another query"
    pos = 12
    for _ in range(qd):
        while msg[pos]:
            pos += 1 + msg[pos]
        pos += 5
    addrs = []
    for _ in range(an):
        if msg[pos] & 0xC0:
            pos += 2
        else:
            while msg[pos]:
                pos += 1 + msg[pos]
            pos += 1
        rtype, _cls, _ttl, rdlen = struct.unpack("!HHIH", msg[pos:pos + 10])
        pos += 10
        if rtype == 1 and rdlen == 4:
            addrs.append(socket.inet_ntoa(msg[pos:pos + 4]))
        pos += rdlen
    return flags & 0xF, bool(flags & 0x0200), addrs


# ----------------------------------------------------------- host service
class HostService:
    """TCP on the host, one port on each of addrs (default 127.0.0.1): greets
    each client with greeting and records the peers of the connections it
    accepted. Binds with IP_FREEBIND, so an address that is not (yet) on an
    interface, such as a daemon's gateway between runs, can be listened on."""

    IP_FREEBIND = getattr(socket, "IP_FREEBIND", 15)

    def __init__(self, addrs=("127.0.0.1",), greeting=b"hello-from-host"):
        self.addrs = tuple(addrs)
        self.greeting = greeting
        self.peers = []
        for _ in range(20):
            try:
                self.socks, self.port = self._bind_all()
                break
            except OSError:
                continue  # the port was free on the first address only
        else:
            raise RuntimeError(f"no common free port on {self.addrs}")
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._serve, args=(s,), daemon=True) for s in self.socks]
        for t in self._threads:
            t.start()

    def _bind_all(self):
        socks, port = [], 0
        try:
            for a in self.addrs:
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                socks.append(s)
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                s.setsockopt(socket.IPPROTO_IP, self.IP_FREEBIND, 1)
                s.bind((a, port))
                port = s.getsockname()[1]
                s.listen(16)
                s.settimeout(0.2)
            return socks, port
        except OSError:
            for s in socks:
                s.close()
            raise

    @property
    def accepted(self):
        return len(self.peers)

    def _serve(self, sock):
        while not self._stop.is_set():
            try:
                c, peer = sock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            self.peers.append(peer[0])
            with c:
                try:
                    c.sendall(self.greeting)
                except OSError:
                    pass

    def close(self):
        self._stop.set()
        for t in self._threads:
            t.join(5)
        for s in self.socks:
            s.close()


LoopbackService = HostService  # on 127.0.0.1 only


# ------------------------------------------------------------------- lab
class Lab:
    public, public2, private, dns, metadata = PUBLIC, PUBLIC2, PRIVATE, DNS_ADDR, METADATA
    cgnat, private172, private192 = CGNAT, PRIVATE172, PRIVATE192
    host6 = LAB_HOST6
    host_addr, lab_addr = HOST_ADDR, LAB_ADDR
    hosts = LAB_HOSTS

    def __init__(self, wait=900.0):
        self.pid = os.getpid()
        self.ns = ns_name(self.pid)
        self.link = link_name(self.pid)
        self.wait = wait
        self.server = None
        self.watchdog = None
        self.loopback = None
        self._lockf = None
        self._ctl = threading.Lock()
        self._closed = False
        self._started = False

    # ---------------------------------------------------------------- start
    def start(self):
        assert os.geteuid() == 0, "the network lab needs root"
        os.makedirs(STATE_DIR, exist_ok=True)
        self._lockf = open(LOCK_PATH, "a+")
        deadline = time.monotonic() + self.wait
        while True:
            try:
                fcntl.flock(self._lockf, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    self._lockf.close()
                    raise RuntimeError(f"another network lab holds {LOCK_PATH} (one lab per machine at a time)")
                time.sleep(0.5)
        atexit.register(self.close)
        self._started = True
        try:
            cleanup_stale()
            cleanup(self.pid)  # a lab of ours from before a fork or a failed start
            check_lab_addresses()
            with open(os.path.join(STATE_DIR, str(self.pid)), "w") as f:
                f.write(_starttime(self.pid) + "\n")
            self._start_watchdog()
            self._build()
            self._start_server()
            self.loopback = HostService()
        except BaseException:
            self.close()
            raise
        return self

    def _start_watchdog(self):
        # The watchdog gets the lock too: a next lab waits until it is done.
        self.watchdog = subprocess.Popen(
            [PYTHON, os.path.abspath(__file__), "--watchdog", str(self.pid)],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=None,
            pass_fds=(self._lockf.fileno(),), start_new_session=True)

    def _build(self):
        ns, link = self.ns, self.link
        _ip("netns", "add", ns)
        _ip("link", "set", "lo", "up", ns=ns)
        _ip("link", "add", link, "type", "veth", "peer", "name", "eth0", "netns", ns)
        for a in LAB_HOSTS:
            _ip("addr", "add", f"{a}/32", "dev", "lo", ns=ns)
        _ip("-6", "addr", "add", f"{LAB_HOST6}/128", "dev", "lo", ns=ns)
        _ip("addr", "add", f"{LAB_ADDR}/{PREFIX}", "dev", "eth0", ns=ns)
        _ip("-6", "addr", "add", f"{LAB_ADDR6}/64", "dev", "eth0", "nodad", ns=ns)
        _ip("link", "set", "eth0", "up", ns=ns)
        _ip("addr", "add", f"{HOST_ADDR}/{PREFIX}", "dev", link)
        _ip("-6", "addr", "add", f"{HOST_ADDR6}/64", "dev", link, "nodad")
        _ip("link", "set", link, "up")
        for a in LAB_HOSTS + SINK_HOSTS:
            self._route(f"{a}/32", LAB_ADDR)
        self._route(f"{LAB_HOST6}/128", LAB_ADDR6)
        for a in LAB_HOSTS + SINK_HOSTS + (LAB_HOST6,):
            self.assert_routed(a)

    def _route(self, dst, via):
        assert dst in ALLOWED_ROUTES, f"refusing to route {dst}: not a lab address"
        fam = "-6" if ":" in dst else "-4"
        _ip(fam, "route", "add", dst, "via", via, "dev", self.link)

    def _start_server(self):
        self.server = subprocess.Popen(
            [IP, "netns", "exec", self.ns, PYTHON, SERVER,
             "--addrs", ",".join(LAB_HOSTS + (LAB_HOST6,)),
             "--tcp-ports", ",".join(map(str, TCP_PORTS)),
             "--udp-ports", ",".join(map(str, UDP_PORTS)), "--dns", DNS_ADDR,
             "--zone", json.dumps(ZONE)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=None,
            start_new_session=True)
        ready = self._read_reply(timeout=20)
        assert ready.get("ready"), f"lab server did not start: {ready}"

    # -------------------------------------------------------------- checks
    def assert_routed(self, addr):
        """The host sends addr into the lab (and nowhere else)."""
        fam = "-6" if ":" in addr else "-4"
        r = _ip(fam, "-j", "route", "get", addr, check=False)
        route = json.loads(r.stdout)[0] if r.returncode == 0 and r.stdout.strip() else {}
        assert route.get("dev") == self.link, f"{addr} is not routed into the lab: {route or r.stderr}"

    # ------------------------------------------------------------- control
    def _read_reply(self, timeout=10.0):
        out = self.server.stdout
        result = {}

        def read():
            result["line"] = out.readline()

        t = threading.Thread(target=read, daemon=True)
        t.start()
        t.join(timeout)
        line = result.get("line")
        if not line:
            raise RuntimeError(f"lab server gave no answer (exit status {self.server.poll()})")
        return json.loads(line)

    def _command(self, cmd):
        with self._ctl:
            assert self.server and self.server.poll() is None, "lab server is not running"
            self.server.stdin.write(cmd.encode() + b"\n")
            self.server.stdin.flush()
            return self._read_reply()

    def all_hits(self):
        """[(proto, local addr, local port, peer addr), ...] in arrival order."""
        return [tuple(h) for h in self._command("hits")["hits"]]

    def hits(self, proto, addr, port):
        """The peer addresses of the hits on (proto, addr, port): TCP
        connections accepted, UDP datagrams received (DNS queries over UDP
        too)."""
        return [h[3] for h in self.all_hits() if (h[0], h[1], h[2]) == (proto, addr, port)]

    def hits_on(self, addr):
        """Every hit on addr, any protocol and port."""
        return [h for h in self.all_hits() if h[1] == addr]

    def http_requests(self):
        """[(addr, port, peer, method, path), ...] of the HTTP requests
        read so far (recorded by the connection's thread: poll for them)."""
        return [tuple(q) for q in self._command("requests")["requests"]]

    def dns_queries(self):
        """[(proto, peer, name, qtype), ...] the DNS server was asked."""
        return [tuple(q) for q in self._command("queries")["queries"]]

    def reset_hits(self):
        """Forget every hit and DNS query (the loopback service's too)."""
        self._command("reset")
        if self.loopback:
            self.loopback.peers.clear()

    # --------------------------------------------------------------- close
    def close(self):
        if self._closed or not self._started:
            return
        self._closed = True
        try:
            if self.loopback:
                self.loopback.close()
            if self.server:
                try:
                    self.server.stdin.close()
                except OSError:
                    pass
                try:
                    self.server.wait(2)
                except subprocess.TimeoutExpired:
                    self.server.kill()
                    self.server.wait()
                self.server.stdout.close()
            cleanup(self.pid)
        finally:
            if self.watchdog:
                try:
                    self.watchdog.stdin.close()  # nothing left for it to do
                    self.watchdog.wait(30)
                except (OSError, subprocess.TimeoutExpired):
                    self.watchdog.kill()
            if self._lockf:
                self._lockf.close()
            try:
                atexit.unregister(self.close)
            except Exception:
                pass

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.close()


def leftovers():
    """What of any lab is on this machine: namespaces, links, host routes."""
    out = [n for n in list_namespaces() if NS_RE.match(n)]
    out += [l for l in list_links() if LINK_RE.match(l)]
    for fam in ("-4", "-6"):
        r = _ip(fam, "route", "show", check=False)
        out += [line for line in r.stdout.splitlines()
                if re.search(r"\bdev lbt\d+h\b", line) or line.split()[0] in ALLOWED_ROUTES]
    return out


def _watchdog(pid):
    """Wait for the test process's pipe to close, then remove its lab."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        while sys.stdin.buffer.read(4096):
            pass
    except OSError:
        pass
    cleanup(pid)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--watchdog":
        _watchdog(int(sys.argv[2]))
    elif len(sys.argv) == 2 and sys.argv[1] == "--cleanup":
        cleanup_stale()
        print("\n".join(leftovers()) or "no lab left")
    else:
        sys.exit("usage: netlab.py --watchdog PID | --cleanup")
