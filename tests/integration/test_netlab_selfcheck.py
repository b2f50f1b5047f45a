"""The network lab (tests/netlab.py) from the test process itself, on the
host: its fake hosts answer, its DNS server answers and truncates, and it
records every hit. The daemon's egress tests (test_egress.py) rely on it."""
import socket

import pytest
import requests

import netlab as nl


@pytest.fixture
def lab(netlab):
    netlab.reset_hits()
    return netlab


@pytest.fixture
def http():
    s = requests.Session()
    s.trust_env = False
    yield s
    s.close()


def test_every_lab_address_is_routed_into_the_lab(lab):
    for addr in nl.LAB_HOSTS + nl.SINK_HOSTS + (nl.LAB_HOST6,):
        lab.assert_routed(addr)


@pytest.mark.parametrize("addr", [nl.PUBLIC, nl.PUBLIC2, nl.PRIVATE, nl.METADATA, nl.CGNAT,
                                  nl.PRIVATE172, nl.PRIVATE192])
@pytest.mark.parametrize("port", [80, 8080, 8081])
def test_http_on_every_lab_host_and_port(lab, http, addr, port):
    r = http.get(f"http://{addr}:{port}/some/path?q=1", timeout=5)
    assert r.status_code == 200
    assert r.headers["Connection"] == "close"
    assert r.json() == {"host": addr, "port": port, "peer": lab.host_addr}
    assert lab.hits("tcp", addr, port) == [lab.host_addr]
    assert lab.all_hits() == [("tcp", addr, port, lab.host_addr)]


def test_http_on_the_ipv6_host(lab, http):
    r = http.get(f"http://[{nl.LAB_HOST6}]:80/", timeout=5)
    assert r.json()["host"] == nl.LAB_HOST6
    assert len(lab.hits("tcp", nl.LAB_HOST6, 80)) == 1


def test_udp_echo(lab):
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(3)
        for addr in (nl.PUBLIC, nl.PRIVATE):
            for port in (7, 8080):
                s.sendto(b"ping", (addr, port))
                data, src = s.recvfrom(100)
                assert (data, src) == (b"echo:ping", (addr, port))
    for port in (7, 8080):
        assert lab.hits("udp", nl.PUBLIC, port) == [lab.host_addr]
        assert lab.hits("udp", nl.PRIVATE, port) == [lab.host_addr]


def test_unanswered_tcp_is_recorded_at_once(lab):
    """A connection that sends nothing counts as soon as hits() is asked:
    the server takes in its listen queue first."""
    with socket.create_connection((nl.PRIVATE, 8080), timeout=3):
        assert lab.hits("tcp", nl.PRIVATE, 8080) == [lab.host_addr]


def test_reset_forgets_hits(lab, http):
    http.get(f"http://{nl.PUBLIC}/", timeout=5)
    assert lab.all_hits()
    lab.reset_hits()
    assert lab.all_hits() == [] and lab.dns_queries() == []


@pytest.mark.parametrize("tcp", [False, True], ids=["udp", "tcp"])
def test_dns_names(lab, tcp):
    assert nl.dns_query("public.lab.test", tcp=tcp) == (0, False, [nl.PUBLIC])
    assert nl.dns_query("PUBLIC2.lab.test.", tcp=tcp) == (0, False, [nl.PUBLIC2])
    assert nl.dns_query("private.lab.test", tcp=tcp) == (0, False, [nl.PRIVATE])
    assert nl.dns_query("metadata.lab.test", tcp=tcp) == (0, False, [nl.METADATA])
    assert nl.dns_query("public.lab.test", qtype=28, tcp=tcp) == (0, False, [])  # AAAA: none
    assert nl.dns_query("nothing.lab.test", tcp=tcp) == (3, False, [])  # NXDOMAIN
    proto = "tcp" if tcp else "udp"
    assert [q[:3] for q in lab.dns_queries()] == [(proto, lab.host_addr, n) for n in (
        "public.lab.test", "PUBLIC2.lab.test", "private.lab.test", "metadata.lab.test",
        "public.lab.test", "nothing.lab.test")]
    assert len(lab.hits(proto, nl.DNS_ADDR, 53)) == 6  # datagrams, or connections


def test_big_answer_is_truncated_over_udp_and_whole_over_tcp(lab):
    assert nl.dns_query("big.lab.test") == (0, True, [])
    rcode, tc, addrs = nl.dns_query("big.lab.test", tcp=True)
    assert (rcode, tc) == (0, False)
    assert addrs == list(nl.SINK_HOSTS)
    for a in (addrs[0], addrs[-1]):  # never anywhere but the lab
        lab.assert_routed(a)


def test_loopback_service(lab):
    with socket.create_connection(("127.0.0.1", lab.loopback.port), timeout=3) as s:
        assert s.recv(100) == b"hello-from-host"
    assert lab.loopback.peers == ["127.0.0.1"]



def test_http_requests_are_recorded(lab, http):
    http.get(f"http://{nl.PUBLIC}:8081/announce/1.2.3.4/99", timeout=5)
    assert lab.http_requests() == [(nl.PUBLIC, 8081, lab.host_addr, "GET", "/announce/1.2.3.4/99")]


def test_host_service_on_several_addresses(lab):
    svc = nl.HostService(["127.0.0.1", lab.host_addr, "198.18.0.3"])  # the last: on no interface
    try:
        for a in ("127.0.0.1", lab.host_addr):
            with socket.create_connection((a, svc.port), timeout=3) as s:
                assert s.recv(100) == b"hello-from-host"
        assert svc.peers == ["127.0.0.1", lab.host_addr]
    finally:
        svc.close()


def test_lab_routes_only_single_addresses(lab):
    """The host's routes into the lab are /32 (/128) each: no range of the
    host's (a package mirror in TEST-NET-3, say) is taken over."""
    link_net = f"{nl.ADDRS['link'].split('/')[0]}/30"  # the veth's own, from its address
    routes = [dst for _, dst in nl.lab_routes(lab.pid) if dst != link_net and not dst.startswith("fe80:")
              and not dst.startswith("fd7e:57ab:1::")]
    assert routes and all("/" not in dst for dst in routes), routes
    assert len(routes) == len(nl.ALLOWED_ROUTES)


def test_lab_refuses_addresses_the_host_uses():
    """Each way an address can be in use is found, and the message names
    the address and the variable that chooses others."""
    a, b, c, d, e = nl.PUBLIC, nl.PUBLIC2, nl.PRIVATE, nl.DNS_ADDR, nl.SINK_HOSTS[5]
    found = nl.lab_conflicts(
        nl.routed_addresses(), host_addrs={a}, routes=[("203.0.113.0/24", "dev eth1, table main")],
        hosts_text=f"127.0.0.1 localhost\n{c} mirror.example\n", resolv_text=f"nameserver {d}\n",
        peers={e})
    why = {}
    for addr, reason in found:
        why.setdefault(addr, []).append(reason)
    assert "an address of this host" in why[a]
    assert any("203.0.113.0/24" in r for r in why[b]) and any("203.0.113.0/24" in r for r in why[e])
    assert why[c] == ["named in /etc/hosts or /etc/resolv.conf"]
    assert why[d] == ["named in /etc/hosts or /etc/resolv.conf"]
    assert "the peer of an open socket of this host" in why[e]
    assert nl.lab_conflicts(nl.routed_addresses(), set(), [], "", "", set()) == []


def test_lab_addresses_can_be_chosen_and_keep_their_kind():
    got = nl.lab_addresses("public=198.51.100.7, sink=198.51.100.100, private=10.9.9.9")
    assert (got["public"], got["sink"], got["private"]) == ("198.51.100.7", "198.51.100.100", "10.9.9.9")
    assert got["public2"] == nl.DEFAULTS["public2"]
    for bad in ("public=10.1.2.3", "private=203.0.113.9", "metadata=10.0.0.1", "nosuch=1.2.3.4",
                "link=198.18.0.0/29", "sink=10.0.0.1", "sink=126.255.255.250"):
        with pytest.raises(ValueError, match=nl.ADDRS_ENV):
            nl.lab_addresses(bad)


def test_lab_start_refuses_a_collision(monkeypatch):
    """start() refuses before building anything when an address is in use."""
    monkeypatch.setattr(nl, "host_state", lambda: ({nl.PUBLIC}, [], "", "", set()))
    with pytest.raises(RuntimeError, match=f"(?s){nl.PUBLIC}: an address of this host.*{nl.ADDRS_ENV}"):
        nl.check_lab_addresses()
