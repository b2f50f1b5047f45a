"""Network per run: only when both the configuration and the request allow
it, in a network namespace of the run's own (tests/integration/test_egress.py
tests its policy in depth); otherwise an empty network namespace where
socket() fails with EPERM, and the run still completes normally."""
import textwrap

import pytest


def probe(port):
    """A program that tries the test's TCP server on 127.0.0.1 and prints
    what happened; it never fails, so exit 0 either way."""
    return textwrap.dedent(f"""
        import socket, errno
        try:
            s = socket.create_connection(("127.0.0.1", {port}), timeout=3)
            print("connected:" + s.recv(100).decode())
        except OSError as e:
            print("blocked:" + errno.errorcode.get(e.errno, str(e.errno)))
    """).lstrip()


NETNS_PROBE = textwrap.dedent("""
    lines = open('/proc/self/net/dev').read().splitlines()[2:]
    print(sorted(l.split(':')[0].strip() for l in lines))
""").lstrip()


def lab_probe(host, port):
    """Like probe(), against a lab host: prints what the HTTP service
    answered (its JSON) or why it could not connect."""
    return textwrap.dedent(f"""
        import socket, errno
        try:
            s = socket.create_connection(("{host}", {port}), timeout=3)
            s.sendall(b"GET / HTTP/1.0\\r\\n\\r\\n")
            print("connected:" + s.recv(4096).split(b"\\r\\n")[0].decode())
        except OSError as e:
            print("blocked:" + errno.errorcode.get(e.errno, str(e.errno)))
    """).lstrip()


def test_network_when_requested_and_allowed(daemon, netlab, tcp_server):
    """A run with network reaches a public host, and not the host's own
    loopback (it has a loopback of its own)."""
    netlab.reset_hits()
    d = daemon.run_data(lab_probe(netlab.public, 80), enable_network=True)
    assert d["stdout"] == "connected:HTTP/1.1 200 OK\n", d
    assert d["exit_code"] == 0 and d["error"] == ""
    assert len(netlab.hits("tcp", netlab.public, 80)) >= 1
    d = daemon.run_data(probe(tcp_server.port), enable_network=True)
    assert d["stdout"] == "blocked:ECONNREFUSED\n", d
    assert tcp_server.accepted == 0


def test_requests_library_reaches_a_public_http_server(daemon, netlab):
    d = daemon.run_data(textwrap.dedent(f"""
        import requests, httpx
        print(requests.get("http://{netlab.public}:8080/ping", timeout=5).json()["port"])
        print(httpx.get("http://{netlab.public}:8081/ping", timeout=5).json()["port"])
    """), enable_network=True)
    assert d["stderr"] == "", d
    assert d["stdout"] == "8080\n8081\n"


OWN_ADDRESS = textwrap.dedent("""
    import socket, struct
    for line in open('/proc/self/net/route').read().splitlines()[1:]:
        f = line.split()
        if f[1] == '00000000':
            gateway = socket.inet_ntoa(struct.pack('<I', int(f[2], 16)))
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.connect((gateway, 9))  # a UDP connect sends nothing
    print(s.getsockname()[0])
""").lstrip()


def test_an_untouched_namespace_serves_again_and_a_used_one_never(daemon):
    """A run's namespace keeps its address, so the address tells which
    namespace a run had. One that no packet crossed serves later runs once
    it has settled (250 ms after its run, hence the pauses); one whose run
    sent a packet (here on its own loopback) is let go."""
    import time

    def address(extra=""):
        d = daemon.run_data(OWN_ADDRESS + extra, enable_network=True)
        assert d["exit_code"] == 0 and d["stderr"] == "", d
        time.sleep(0.3)
        return d["stdout"].strip()
    seen = [address() for _ in range(12)]
    assert len(set(seen)) < len(seen), seen
    used = address("socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'x', ('127.0.0.1', 9))\n")
    later = [address() for _ in range(12)]
    assert used not in later, (used, later)


@pytest.mark.host_view
def test_runs_without_network_reuse_the_jailers_empty_namespaces(daemon):
    """A run without network is in an empty namespace (loopback only, down;
    socket() refused) that the jailer made and keeps for the next such run
    once nothing is left in it: the namespaces the runs report are among
    the ones the jailer holds open."""
    import os
    inodes = set()
    for _ in range(8):
        d = daemon.run_data(textwrap.dedent("""
            import os, socket
            print(os.readlink('/proc/self/ns/net'))
            print(sorted(l.split(':')[0].strip()
                         for l in open('/proc/self/net/dev').read().splitlines()[2:]))
            try:
                socket.socket()
            except PermissionError:
                print('no socket')
        """).lstrip(), enable_network=False)
        ns, links, refused = d["stdout"].splitlines()
        assert (links, refused) == ("['lo']", "no socket"), d
        inodes.add(ns)
    held = set()
    for fd in os.listdir(f"/proc/{daemon.pid}/fd"):
        try:
            held.add(os.readlink(f"/proc/{daemon.pid}/fd/{fd}"))
        except OSError:
            pass
    assert inodes & held, (inodes, sorted(h for h in held if h.startswith("net:")))


@pytest.mark.parametrize("fields", [{}, {"enable_network": False}], ids=["absent", "false"])
def test_no_network_unless_requested(daemon, tcp_server, fields):
    body = {"language": "python3", "code": probe(tcp_server.port)}
    body.update(fields)
    r = daemon.post("/v1/sandbox/run", json=body)
    assert r.status_code == 200
    d = r.json()["data"]
    assert d["stdout"] == "blocked:EPERM\n", d
    assert d["exit_code"] == 0 and d["error"] == ""
    assert tcp_server.accepted == 0


def test_no_network_run_is_in_an_empty_namespace(daemon):
    d = daemon.run_data(NETNS_PROBE, enable_network=False)
    assert d["stdout"] == "['lo']\n", d
    # and a networked run has a namespace of its own, not the host's
    d = daemon.run_data(NETNS_PROBE, enable_network=True)
    assert d["stdout"] == "['eth0', 'lo']\n", d


@pytest.fixture(scope="module")
def host_mode_daemon(module_daemon_factory):
    return module_daemon_factory(network={"mode": "host"})


def test_host_mode_shares_the_hosts_network(host_mode_daemon, tcp_server):
    """network.mode: host (documented as unsafe) keeps the old behaviour:
    the run is in the host's network and reaches its loopback."""
    d = host_mode_daemon.run_data(probe(tcp_server.port), enable_network=True)
    assert d["stdout"] == "connected:hello-from-host\n", d
    d = host_mode_daemon.run_data(NETNS_PROBE, enable_network=True)
    with open("/proc/self/net/dev") as f:
        host = sorted(l.split(":")[0].strip() for l in f.read().splitlines()[2:])
    assert d["stdout"] == f"{host}\n", d


@pytest.fixture(scope="module")
def nonet_daemon(module_daemon_factory):
    return module_daemon_factory(enable_network=False)


def test_config_disables_network_even_if_request_asks(nonet_daemon, tcp_server):
    """Dify always sends enable_network: true; the run proceeds without
    network instead of being refused."""
    r = nonet_daemon.run(probe(tcp_server.port), enable_network=True)
    assert r["code"] == 0 and r["message"] == "success", r
    d = r["data"]
    assert d["stdout"] == "blocked:EPERM\n", d
    assert d["exit_code"] == 0 and d["error"] == "" and d["status"] == "ok"
    assert tcp_server.accepted == 0


def test_config_disabled_network_plain_runs_work(nonet_daemon):
    d = nonet_daemon.run_data("print('fine')", enable_network=True)
    assert d["stdout"] == "fine\n"
    d = nonet_daemon.run_data(NETNS_PROBE, enable_network=True)
    assert d["stdout"] == "['lo']\n", d


def test_host_mode_runs_cannot_use_the_daemon_from_any_address_of_the_host(lockboxd_factory):
    """In host mode a run reaches lockboxd's port on every address of the
    host; the daemon closes connections that a sandbox UID opened, whatever
    that address. Here a bridge of the test's gives the host 80 more
    addresses (a list of the host's addresses with a fixed size, 64, left
    the last ones out of that check)."""
    import os
    import subprocess
    link = f"lbtbr{os.getpid() % 100000}"
    addrs = [f"198.18.100.{i}" for i in range(1, 81)]
    subprocess.run(["ip", "link", "add", link, "type", "bridge"], check=True)
    try:
        for a in addrs:
            subprocess.run(["ip", "addr", "add", f"{a}/32", "dev", link], check=True)
        subprocess.run(["ip", "link", "set", link, "up"], check=True)
        d = lockboxd_factory(network={"mode": "host"}, server={"listen": "0.0.0.0"})
        data = d.run_data(textwrap.dedent(f"""
            import socket
            for host in ("{addrs[0]}", "{addrs[-1]}"):
                s = socket.create_connection((host, {d.port}), timeout=5)
                s.sendall(b"GET /health HTTP/1.0\\r\\n\\r\\n")
                s.settimeout(5)
                try:
                    print(host, s.recv(100)[:12] or b"closed")
                except OSError as e:
                    print(host, type(e).__name__)
        """), enable_network=True)
        lines = data["stdout"].splitlines()
        assert [l.split()[0] for l in lines] == [addrs[0], addrs[-1]], data
        assert all(l.split()[1] in ("b'closed'", "ConnectionResetError") for l in lines), data
    finally:
        subprocess.run(["ip", "link", "del", link])
