"""The runs' DNS relay under attack from inside runs: what one run sends to
its gateway's port 53 must not cost another run its lookups.

The relay is a thread of the HTTP process; the kernel queues what runs
send while that thread is not running (a busy host, a page fault, a log
write). These cases hold the HTTP process still for a moment (SIGSTOP,
then SIGCONT, always) while one run sends its burst, as a loaded host
would, and check that a second run's query, sent meanwhile, is answered
once the relay runs again.

The daemon relays to the lab's resolver (tests/netlab.py), so no query
leaves the machine. Floods are bounded in count (within nftables' burst
for one run) and time, and come from jailed runs only.
"""
import os
import signal
import threading
import time

import pytest

from attacklib import assert_ok, attack_py, src
from conftest import children_of, lab_daemon_config, scaled

# Every run here: the gateway, a query builder, one UDP question.
PRELUDE = src('''
    import socket, struct, time

    def gateway():
        for line in open("/etc/resolv.conf"):
            if line.split()[:1] == ["nameserver"]:
                return line.split()[1]

    def query(qid, size=0):
        """A standard query for public.lab.test, padded to size bytes."""
        q = struct.pack("!HHHHHH", qid, 0x0100, 1, 0, 0, 0)
        q += b"\\x06public\\x03lab\\x04test\\x00" + struct.pack("!HH", 1, 1)
        return q + b"\\0" * max(0, size - len(q))

    def wait_until(t):
        """Sleeps until time t; says so if this run started too late."""
        if time.time() > t:
            print("late")
        while time.time() < t:
            time.sleep(0.005)
''')


@pytest.fixture(scope="module")
def dd(module_daemon_factory, netlab):
    """Runs with network, DNS relayed to the lab's resolver."""
    return module_daemon_factory(max_workers=4, worker_timeout=20, **lab_daemon_config(netlab))


def http_pid(d):
    """The HTTP process: the jailer's child started as `lockboxd --http=FD`
    (a child it forks for something else may carry its name a moment)."""
    kids = []
    for k in children_of(d.pid):
        try:
            with open(f"/proc/{k}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if len(argv) > 1 and argv[1].startswith(b"--http="):
            kids.append(k)
    assert len(kids) == 1, kids
    return kids[0]


def with_relay_stalled(d, programs, start, stall):
    """Runs each program (Python, network on) at once; holds the HTTP
    process (and so the relay thread) still from start - 0.3 s for stall
    seconds. Returns each run's data, in order."""
    out = [None] * len(programs)

    def go(i):
        out[i] = attack_py(d, PRELUDE + src(programs[i]), enable_network=True)

    threads = [threading.Thread(target=go, args=(i,)) for i in range(len(programs))]
    for t in threads:
        t.start()
    pid = http_pid(d)
    time.sleep(max(0, start - 0.3 - time.time()))
    os.kill(pid, signal.SIGSTOP)
    try:
        time.sleep(stall)
    finally:
        os.kill(pid, signal.SIGCONT)
    for t in threads:
        t.join(scaled(30))
    assert all(o is not None for o in out), "a run did not finish"
    return out


def test_a_burst_of_oversized_datagrams_leaves_room_for_other_runs(dd):
    """The relay answers queries of at most 4096 bytes, but the kernel
    counts a run's DNS rate in datagrams (a burst of 800): 64 datagrams
    of 64 KiB fill the relay socket's buffer (8 MiB), a few small ones
    fill the rest, and every other run's query is dropped until the
    relay has read them all. Another run's query, sent while the relay
    is held still, must be answered when it runs again."""
    t = time.time() + scaled(5)
    flood = f'''
        wait_until({t})
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 20)
        s.connect((gateway(), 53))
        sent = 0
        # 790 datagrams in all, within the kernel's burst for one run
        for size, n in ((65507, 100), (4096, 500), (0, 190)):
            for i in range(n):
                try:
                    sent += s.send(query(0x7000 + i, size)) > 0
                except OSError:
                    time.sleep(0.001)
        print(sent)
    '''
    probe = f'''
        wait_until({t} + 0.5)
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.settimeout(8)
        s.sendto(query(0x5151), (gateway(), 53))
        try:
            a = s.recv(4096)
            print(struct.unpack("!H", a[:2])[0] == 0x5151, a[3] & 0xF)
        except socket.timeout:
            print("timeout")
    '''
    flooded, probed = with_relay_stalled(dd, [flood, probe], t, 1.5)
    assert_ok(flooded, "790\n")
    assert_ok(probed, "True 0\n")


def test_a_burst_of_connections_leaves_room_for_other_runs(dd):
    """Connections wait in the relay's accept queue until the relay takes
    them (and closes those over the run's share of 4), and a run may open
    800 at once within the kernel's rate: one run that connects and
    hangs up 200 times fills the queue, and every other run's connection
    is dropped until the relay has taken them all. Another run's
    connection, made while the relay is held still, must be taken at
    once: its SYN is not sent again."""
    t = time.time() + scaled(5)
    flood = f'''
        wait_until({t})
        made = 0
        for i in range(200):
            if time.time() > {t} + 1.1:
                break
            try:
                socket.create_connection((gateway(), 53), timeout=0.05).close()
                made += 1
            except OSError:
                pass
        print(made >= 8)  # at least its own allowance
    '''
    probe = f'''
        wait_until({t} + 0.6)
        q = query(0x5252)
        with socket.create_connection((gateway(), 53), timeout=8) as c:
            c.settimeout(8)
            c.sendall(struct.pack("!H", len(q)) + q)
            a = c.recv(4096)
            # struct tcp_info: tcpi_total_retrans at byte 100
            info = c.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 104)
        print(struct.unpack("!H", a[2:4])[0] == 0x5252, a[5] & 0xF)
        print("retransmitted", struct.unpack("I", info[100:104])[0])
    '''
    flooded, probed = with_relay_stalled(dd, [flood, probe], t, 1.5)
    assert_ok(flooded, "True\n")
    assert_ok(probed, "True 0\nretransmitted 0\n")
