"""The fake hosts of tests/netlab.py, run inside the lab's network namespace
(`ip netns exec lbtlab<pid> /usr/bin/python3 tests/netlab_server.py ...`).

On every lab address: HTTP on the TCP ports given (GET, or any method,
answers 200 with {"host": <local address>, "port": <local port>, "peer":
<peer address>} and closes the connection), UDP echo on the UDP ports given (answers b"echo:" +
the datagram). On the DNS address, a DNS server on UDP and TCP port 53
(see ZONE; big.lab.test is larger than 512 bytes: over UDP it is truncated,
TC set and no answers, over TCP it is whole).

Every TCP connection accepted and every UDP datagram received is recorded
as a hit (proto, local address, local port, peer address); every DNS
question too, with its name and type.

Control: one command a line on standard input, one JSON line answering it
on standard output. Before answering, the server takes in everything the
kernel already holds for it (connections waiting in the listen queues,
datagrams in the receive queues), so what was sent before the command was
written is counted.
  hits     -> {"hits": [[proto, addr, port, peer], ...]}
  reset    -> {"ok": true}   (forgets hits, DNS questions, HTTP requests)
  queries  -> {"queries": [[proto, peer, name, type], ...]}
  requests -> {"requests": [[addr, port, peer, method, path], ...]} (HTTP)
  ping     -> {"ok": true}
Standard input at its end (the test process is gone): the server exits.
Standard library only.
"""
import argparse
import json
import os
import selectors
import socket
import struct
import sys
import threading

ZONE = {}  # name -> [IPv4 addresses], given by netlab.py (--zone)
UDP_DNS_LIMIT = 512

lock = threading.Lock()
hits = []      # [proto, local addr, local port, peer addr]
queries = []   # [proto, peer addr, name, type]
requests = []  # HTTP: [local addr, local port, peer addr, method, path]


def record_hit(proto, local, peer):
    with lock:
        hits.append([proto, local[0], local[1], peer[0]])


# ------------------------------------------------------------------ DNS
def parse_question(msg):
    """(id, flags, name, qtype, qclass, end of question) or None."""
    if len(msg) < 12:
        return None
    qid, flags, qd = struct.unpack("!HHH", msg[:6])
    if qd != 1 or flags & 0x8000:
        return None
    pos, labels = 12, []
    while True:
        if pos >= len(msg):
            return None
        n = msg[pos]
        pos += 1
        if n == 0:
            break
        if n & 0xC0 or pos + n > len(msg):
            return None
        labels.append(msg[pos:pos + n].decode("ascii", "replace"))
        pos += n
    if pos + 4 > len(msg):
        return None
    qtype, qclass = struct.unpack("!HH", msg[pos:pos + 4])
    return qid, flags, ".".join(labels), qtype, qclass, pos + 4


def dns_answer(msg, proto, peer):
    """The response to the query msg, or None to stay silent."""
    q = parse_question(msg)
    if q is None:
        if len(msg) >= 12 and not msg[2] & 0x80:  # FORMERR, question echoed none
            qid = struct.unpack("!H", msg[:2])[0]
            return struct.pack("!HHHHHH", qid, 0x8001, 0, 0, 0, 0)
        return None
    qid, flags, name, qtype, qclass, end = q
    with lock:
        queries.append([proto, peer[0], name, qtype])
    key = name.lower().rstrip(".")
    question = msg[12:end]
    rflags = 0x8000 | (flags & 0x7800) | 0x0400 | (flags & 0x0100) | 0x0080  # QR, opcode, AA, RD, RA
    addrs = []
    if key not in ZONE:
        rflags |= 3  # NXDOMAIN
    elif qtype in (1, 255) and qclass == 1:
        addrs = ZONE[key]
    # other types of a known name: NOERROR without answers (NODATA)
    answers = b"".join(struct.pack("!HHHIH", 0xC00C, 1, 1, 60, 4) + socket.inet_aton(a) for a in addrs)
    resp = struct.pack("!HHHHHH", qid, rflags, 1, len(addrs), 0, 0) + question + answers
    if proto == "udp" and len(resp) > UDP_DNS_LIMIT:
        resp = struct.pack("!HHHHHH", qid, rflags | 0x0200, 1, 0, 0, 0) + question  # TC
    return resp


def serve_dns_tcp(conn, peer):
    conn.settimeout(10)
    try:
        buf = b""
        while True:
            while len(buf) < 2 or len(buf) < 2 + struct.unpack("!H", buf[:2])[0]:
                data = conn.recv(65536)
                if not data:
                    return
                buf += data
            n = struct.unpack("!H", buf[:2])[0]
            msg, buf = buf[2:2 + n], buf[2 + n:]
            resp = dns_answer(msg, "tcp", peer)
            if resp is None:
                return
            conn.sendall(struct.pack("!H", len(resp)) + resp)
    except OSError:
        pass
    finally:
        conn.close()


# ----------------------------------------------------------------- HTTP
def serve_http(conn, local, peer):
    conn.settimeout(10)
    try:
        buf = b""
        while b"\r\n\r\n" not in buf:
            data = conn.recv(65536)
            if not data:
                return
            buf += data
            if len(buf) > 65536:
                return
        head, rest = buf.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        method, _, rest_line = lines[0].partition(" ")
        with lock:
            requests.append([local[0], local[1], peer[0], method, rest_line.rpartition(" ")[0]])
        length = 0
        for line in lines[1:]:
            k, _, v = line.partition(":")
            if k.strip().lower() == "content-length":
                length = int(v.strip() or 0)
        while len(rest) < length:  # read the body, so closing sends no reset
            data = conn.recv(65536)
            if not data:
                break
            rest += data
        body = json.dumps({"host": local[0], "port": local[1], "peer": peer[0]}).encode()
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                     b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body)
                     + (b"" if method == "HEAD" else body))
        conn.shutdown(socket.SHUT_WR)
        conn.settimeout(2)
        while conn.recv(65536):  # until the client closes too
            pass
    except (OSError, ValueError):
        pass
    finally:
        conn.close()


# ----------------------------------------------------------------- main
class Server:
    def __init__(self, addrs, tcp_ports, udp_ports, dns_addr):
        self.sel = selectors.DefaultSelector()
        self.tcp, self.udp = [], []
        for a in addrs:
            fam = socket.AF_INET6 if ":" in a else socket.AF_INET
            for p in tcp_ports:
                self.tcp.append((self.listen(fam, a, p), "http"))
            for p in udp_ports:
                self.udp.append((self.bind_udp(fam, a, p), "echo"))
        if dns_addr:
            self.tcp.append((self.listen(socket.AF_INET, dns_addr, 53), "dns"))
            self.udp.append((self.bind_udp(socket.AF_INET, dns_addr, 53), "dns"))
        for s, kind in self.tcp:
            self.sel.register(s, selectors.EVENT_READ, ("tcp", kind))
        for s, kind in self.udp:
            self.sel.register(s, selectors.EVENT_READ, ("udp", kind))
        self.sel.register(sys.stdin.fileno(), selectors.EVENT_READ, ("control", None))

    @staticmethod
    def listen(fam, addr, port):
        s = socket.socket(fam, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if fam == socket.AF_INET6:
            s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        s.bind((addr, port))
        s.listen(128)
        s.setblocking(False)
        return s

    @staticmethod
    def bind_udp(fam, addr, port):
        s = socket.socket(fam, socket.SOCK_DGRAM)
        if fam == socket.AF_INET6:
            s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        s.bind((addr, port))
        s.setblocking(False)
        return s

    def take_tcp(self, s, kind):
        """Accept every connection waiting; False when none was."""
        took = False
        while True:
            try:
                conn, peer = s.accept()
            except (BlockingIOError, InterruptedError):
                return took
            took = True
            conn.setblocking(True)
            local = conn.getsockname()
            record_hit("tcp", local[:2], peer)
            if kind == "dns":
                target, args = serve_dns_tcp, (conn, peer)
            else:
                target, args = serve_http, (conn, local[:2], peer)
            threading.Thread(target=target, args=args, daemon=True).start()

    def take_udp(self, s, kind):
        local = s.getsockname()[:2]
        while True:
            try:
                data, peer = s.recvfrom(65536)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:  # e.g. ICMP error of an earlier answer
                continue
            record_hit("udp", local, peer)
            resp = b"echo:" + data if kind == "echo" else dns_answer(data, "udp", peer)
            if resp is not None:
                try:
                    s.sendto(resp, peer)
                except OSError:
                    pass

    def drain(self):
        for s, kind in self.tcp:
            self.take_tcp(s, kind)
        for s, kind in self.udp:
            self.take_udp(s, kind)

    def reply(self, obj):
        sys.stdout.write(json.dumps(obj) + "\n")
        sys.stdout.flush()

    def control(self, line):
        cmd = line.strip()
        self.drain()
        with lock:
            if cmd == "hits":
                self.reply({"hits": list(hits)})
            elif cmd == "queries":
                self.reply({"queries": list(queries)})
            elif cmd == "requests":
                self.reply({"requests": list(requests)})
            elif cmd == "reset":
                hits.clear()
                queries.clear()
                requests.clear()
                self.reply({"ok": True})
            elif cmd == "ping":
                self.reply({"ok": True})
            else:
                self.reply({"error": f"unknown command {cmd!r}"})

    def run(self):
        self.reply({"ready": True, "pid": os.getpid()})
        fd, pending = sys.stdin.fileno(), b""
        while True:
            for key, _ in self.sel.select():
                proto, kind = key.data
                if proto == "control":
                    data = os.read(fd, 4096)
                    if not data:
                        return  # the test process is gone
                    pending += data
                    while b"\n" in pending:
                        line, pending = pending.split(b"\n", 1)
                        self.control(line.decode())
                elif proto == "tcp":
                    self.take_tcp(key.fileobj, kind)
                else:
                    self.take_udp(key.fileobj, kind)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--addrs", required=True, help="comma-separated addresses to serve on")
    ap.add_argument("--tcp-ports", default="80,8080,8081")
    ap.add_argument("--udp-ports", default="7,8080")
    ap.add_argument("--dns", default="", help="address of the DNS server")
    ap.add_argument("--zone", default="{}", help="the DNS zone: JSON, name -> [addresses]")
    a = ap.parse_args()
    ZONE.update(json.loads(a.zone))
    ports = lambda s: [int(p) for p in s.split(",") if p]  # noqa: E731
    Server([x for x in a.addrs.split(",") if x], ports(a.tcp_ports), ports(a.udp_ports), a.dns).run()


if __name__ == "__main__":
    main()
