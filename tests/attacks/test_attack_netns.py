"""Run network namespaces that serve again, and the rules that keep them
fresh: the setsockopt options refused to runs (multicast memberships,
anycast, flow labels) stay refused however the call is spelled. The
per-run connection bounds do not break a program that looks names up and
connects one request after another."""
from attacklib import PY_SYSCALL, attack_py, short, src
from conftest import lab_daemon_config

# setsockopt(2) takes int level and optname: the kernel reads the low 32
# bits of each register. A filter that compares all 64 is passed by a value
# whose upper half is set and whose lower half is the refused option.
HIGH_BITS_JOIN = PY_SYSCALL + src("""
    import socket
    SYS_setsockopt = 54
    def groups():
        return [l.split()[0] for l in open('/proc/self/net/igmp').read().splitlines()[1:]
                if not l[0].isdigit() and l.split()[0] != '010000E0']  # all-hosts
    mreq = ctypes.create_string_buffer(socket.inet_aton('239.7.7.7') + socket.inet_aton('0.0.0.0'))
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    addr = ctypes.addressof(mreq)
    for name, level, opt in (('plain', socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP),
                             ('level', (1 << 32) | socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP),
                             ('optname', socket.IPPROTO_IP, (1 << 32) | socket.IP_ADD_MEMBERSHIP),
                             ('both', (7 << 40) | socket.IPPROTO_IP, (1 << 62) | socket.IP_ADD_MEMBERSHIP)):
        print(name, sc(SYS_setsockopt, s.fileno(), level, opt, addr, 8))
    print('groups', groups())
""")


def test_refused_socket_options_stay_refused_with_upper_bits_set(daemon):
    """A multicast join whose level or optname carries bits above the
    32 the kernel reads is the same join: refused (EPERM), no group."""
    d = attack_py(daemon, HIGH_BITS_JOIN, enable_network=True)
    out = dict(l.split(" ", 1) for l in d["stdout"].splitlines())
    assert out == {"plain": "EPERM", "level": "EPERM", "optname": "EPERM", "both": "EPERM",
                   "groups": "[]"}, short(d)


# A scraper: each request looks the name up (as requests and urllib do) and
# opens a connection that it closes; 60 of them, about 10 a second.
SCRAPER = src("""
    import socket, time
    ok, failed = 0, []
    for i in range(60):
        try:
            addr = socket.getaddrinfo('public.lab.test', 80, socket.AF_INET,
                                      socket.SOCK_STREAM)[0][4]
            s = socket.create_connection(addr, timeout=3)
            s.sendall(b'GET / HTTP/1.0\\r\\nHost: public.lab.test\\r\\n\\r\\n')
            while s.recv(4096):
                pass
            s.close()
            ok += 1
        except OSError as e:
            failed.append((i, str(e)))
            if len(failed) == 3:
                break
        time.sleep(0.1)
    print(ok, failed)
""")


def test_a_scraper_looking_names_up_stays_within_max_connections(lockboxd_factory, netlab):
    """Closed connections do not count against network.max_connections, so
    a run opening one at a time is never refused; neither may its DNS
    queries, answered at once by the relay, hold its count for conntrack's
    30 s (there, with 40 connections, the 37th lookup was refused)."""
    d = lockboxd_factory(worker_timeout=30, **lab_daemon_config(
        netlab, max_connections=40, new_connections_per_second=0))
    out = attack_py(d, SCRAPER, enable_network=True)
    assert out["stdout"] == "60 []\n", short(out)
