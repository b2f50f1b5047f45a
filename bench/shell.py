#!/usr/bin/python3
"""Shell-job figures against a running lockboxd (shell.enabled), beside
the floor of the same work done directly on this machine.

    bench/shell.py [--url http://127.0.0.1:5004] [--token T] [-n 30]

Prints, each with its floor:
  start   job start to first output byte (run of `echo x`, stdio, then
          removed, as Dify's control scripts), p50/p90: after the first, from
          the binding's spare (its next job made ahead)
  new     the same for a new binding's first job (a new session id each time)
  exit    how long after a job's exit the waiting call answers: the job
          sleeps 300 ms, prints the clock (ns) and ends; the figure is the
          client's clock when the answer arrived less the printed one (the
          job's last two exits, `date`'s and `sh`'s, are counted in it)
  paging  200 KB of output read back through 16 KiB windows, MB/s (the
          median of 20 read-throughs of one job's output), by a lean client
          (LeanClient) and by http.client with json.loads (whose own work
          is about half of a call's time)
  bindings  50 bindings with a live job each: started, all running, removed
Run by hand; figures go in notes, never in tests (docs/TESTING.md)."""
import argparse
import http.client
import json
import os
import re
import socket
import subprocess
import time
import urllib.parse

_conn = None


def call(args, method, path, body=None):
    """One request on a kept-alive connection, as Dify's client keeps one."""
    global _conn
    if _conn is None:
        u = urllib.parse.urlsplit(args.url)
        _conn = http.client.HTTPConnection(u.hostname, u.port or 80, timeout=120)
    headers = {"Content-Type": "application/json"}
    if args.token:
        headers["Authorization"] = "Bearer " + args.token
    _conn.request(method, path, None if body is None else json.dumps(body), headers)
    r = _conn.getresponse()
    data = r.read()
    if r.status != 200:
        raise RuntimeError("%s %s: %d %s" % (method, path, r.status, data[:200]))
    return json.loads(data)


def run(args, script, **kw):
    body = {"script": script, "timeout": 30, "output_limit": 16384, "idle_flush_seconds": 0.5}
    body.update(kw)
    return call(args, "POST", "/v1/jobs/run", body)


def delete(args, job_id):
    call(args, "DELETE", "/v1/jobs/%s?force=true&grace_seconds=1" % job_id)


def pct(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * p))]


def floor_start(n):
    times = []
    for _ in range(n):
        t = time.perf_counter()
        p = subprocess.Popen(["/bin/sh", "-c", "echo x"], stdout=subprocess.PIPE)
        p.stdout.read(1)
        times.append((time.perf_counter() - t) * 1000)
        p.wait()
    return times


def bench_start(args):
    times = []
    for _ in range(args.n):
        t = time.perf_counter()
        r = run(args, "echo x", mode="stdio")
        times.append((time.perf_counter() - t) * 1000)
        assert r["output"] == "x\n", r
        delete(args, r["job_id"])
    return times


def bench_start_new_binding(args):
    """The same, each run the first of a new binding (a session id never
    used): its namespaces, init and jail made for it, no spare yet."""
    times = []
    for i in range(max(5, args.n // 3)):
        t = time.perf_counter()
        r = run(args, "echo x", mode="stdio", session_id="bench-new-%d-%d" % (os.getpid(), i))
        times.append((time.perf_counter() - t) * 1000)
        assert r["output"] == "x\n", r
        delete(args, r["job_id"])
    return times


def bench_exit(args):
    lags = []
    for _ in range(max(5, args.n // 3)):
        r = run(args, "sleep 0.3; date +%s%N", mode="stdio")
        now = time.time_ns()
        assert r["done"], r
        lags.append((now - int(r["output"])) / 1e6)
        delete(args, r["job_id"])
    return lags


def page_through(args, job):
    """Read the job's whole output through 16 KiB windows: (bytes, calls,
    seconds)."""
    t = time.perf_counter()
    offset, total, calls = 0, 0, 0
    while True:
        w = call(args, "POST", "/v1/jobs/%s/wait" % job,
                 {"timeout": 0, "offset": offset, "output_limit": 16384})
        calls += 1
        total += len(w["output"])
        offset = w["offset"]
        if not w["truncated"]:
            break
    return total, calls, time.perf_counter() - t


def bench_paging(args, rounds=20):
    """The median of rounds read-throughs of one finished job's 200 KB."""
    r = run(args, "head -c 150000 /dev/urandom | base64 -w 100", mode="stdio")
    job = r["job_id"]
    while not r["done"]:
        r = call(args, "POST", "/v1/jobs/%s/wait" % job, {"timeout": 10, "offset": 0})
    reads = sorted((page_through(args, job) for _ in range(rounds)), key=lambda x: x[2])
    total, calls, secs = reads[len(reads) // 2]
    lean = bench_paging_lean(args, job, rounds)
    delete(args, job)
    t = time.perf_counter()
    subprocess.run(["/bin/sh", "-c", "head -c 150000 /dev/urandom | base64 -w 100"],
                   stdout=subprocess.PIPE, check=True)
    floor = time.perf_counter() - t
    return total, calls, secs, floor, lean


class LeanClient:
    """HTTP/1.1 on one kept-alive socket, with no parsing but the status
    line, Content-Length and (for paging) the window's offset and
    truncated flag, read off the body's end: what is left of a read-through
    is the server's time, not the client's (http.client and json.loads of
    16 KiB take about as long as lockbox does)."""

    def __init__(self, args):
        u = urllib.parse.urlsplit(args.url)
        self.s = socket.create_connection((u.hostname, u.port or 80), timeout=120)
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.auth = b"Authorization: Bearer %s\r\n" % args.token.encode() if args.token else b""
        self.buf = b""

    def call(self, method, path, body=b""):
        self.s.sendall(b"%s %s HTTP/1.1\r\nHost: lockbox\r\n%sContent-Type: application/json\r\n"
                       b"Content-Length: %d\r\n\r\n%s" % (method, path, self.auth, len(body), body))
        while b"\r\n\r\n" not in self.buf:
            self.buf += self.s.recv(65536)
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        n = int(re.search(rb"(?i)\r\ncontent-length: *(\d+)", head).group(1))
        while len(self.buf) < n:
            self.buf += self.s.recv(65536)
        body, self.buf = self.buf[:n], self.buf[n:]
        if not head.startswith(b"HTTP/1.1 200"):
            raise RuntimeError("%s %s: %s %s" % (method, path, head[:40], body[:200]))
        return body


def bench_paging_lean(args, job, rounds=20):
    """The same read-through with LeanClient: (bytes, calls, seconds)."""
    lc = LeanClient(args)
    tail = re.compile(rb'"offset":(\d+),"truncated":(true|false)')
    path = b"/v1/jobs/%s/wait" % job.encode()
    reads = []
    for _ in range(rounds):
        t = time.perf_counter()
        offset, calls = 0, 0
        while True:
            body = lc.call(b"POST", path, b'{"timeout":0,"offset":%d,"output_limit":16384}' % offset)
            calls += 1
            m = tail.search(body, max(0, len(body) - 200))
            offset = int(m.group(1))
            if m.group(2) == b"false":
                break
        reads.append((offset, calls, time.perf_counter() - t))
    return sorted(reads, key=lambda x: x[2])[len(reads) // 2]


def bench_bindings(args, count=50):
    jobs, errors = [], 0
    t = time.perf_counter()
    for i in range(count):
        try:
            r = run(args, "echo up; sleep 60", session_id="bench%d" % i, timeout=5)
            jobs.append(r["job_id"])
        except Exception as e:  # noqa: BLE001 (counted and shown)
            errors += 1
            print("  binding %d: %s" % (i, e))
    started = time.perf_counter() - t
    running = sum(call(args, "GET", "/v1/jobs/" + j)["status"] == "running" for j in jobs)
    t = time.perf_counter()
    for j in jobs:
        delete(args, j)
    removed = time.perf_counter() - t
    return len(jobs), running, errors, started, removed


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", default="http://127.0.0.1:5004")
    ap.add_argument("--token", default=os.environ.get("SHELLCTL_AUTH_TOKEN", ""))
    ap.add_argument("-n", type=int, default=30)
    args = ap.parse_args()

    floor = floor_start(args.n)
    start = bench_start(args)
    print("start    p50 %.1f ms  p90 %.1f ms   (floor: sh -c 'echo x' p50 %.1f ms, p90 %.1f ms;"
          " p50 above the floor %.1f ms)" % (pct(start, .5), pct(start, .9), pct(floor, .5),
                                             pct(floor, .9), pct(start, .5) - pct(floor, .5)))
    new = bench_start_new_binding(args)
    print("new      p50 %.1f ms  p90 %.1f ms   (a new binding's first job: namespaces, init and"
          " jail made for it)" % (pct(new, .5), pct(new, .9)))
    lags = bench_exit(args)
    print("exit     the call answers %.1f ms (p50) after the job's last output and exit,"
          " p90 %.1f ms" %
          (pct(lags, .5), pct(lags, .9)))
    total, calls, secs, floor_s, (ltotal, lcalls, lsecs) = bench_paging(args)
    print("paging   %d bytes in %.1f ms through %d 16 KiB windows (%.2f ms a call; median of 20"
          " read-throughs): %.1f MB/s   (floor: the job run directly %.1f ms)" %
          (ltotal, lsecs * 1000, lcalls, lsecs * 1000 / lcalls, ltotal / lsecs / 1e6,
           floor_s * 1000))
    print("         with http.client and json.loads as the client: %.1f ms, %.1f MB/s"
          " (%.2f ms a call)" % (secs * 1000, total / secs / 1e6, secs * 1000 / calls))
    n, running, errors, started, removed = bench_bindings(args)
    print("bindings %d started in %.1f s, %d running, %d errors, removed in %.1f s" %
          (n, started, running, errors, removed))


if __name__ == "__main__":
    main()
