#!/usr/bin/python3
"""lockbox beside the real dify-sandbox: latency, throughput, start-up,
memory and CPU per run, measured alternately on the same machine.

It starts both servers itself, on loopback only: build/lockboxd on a
temporary config of its own (port, UID range 95000-95099, run subnet
10.234.0.0/24, DNS relayed to 127.0.0.1), and the reference from a build
folder of it (docs/TESTING.md, "Benchmarks"), through bench/ref-run.sh under
the lock /var/tmp/dify-ref.lock (one reference per host; the script says when
it waits for it). Both are stopped at the end, with every process of
theirs, also on Ctrl-C or an error. As root, by hand, never in CI:

    /usr/bin/python3 bench/compare.py [REF_BUILD] [--quick] [--only lockbox]
        [--runs 100] [--seconds 10] [--clients 1,4,16,64] [--gap-ms 20] [--ref-fresh]

What it measures, over one keep-alive connection per client (http.client):
p50/p99 of five programs (a trivial Python run, Dify's Python runner script,
`import requests`, Dify's Jinja2 runner script, a trivial Node.js run), each
run once on one server then once on the other; runs/s of the trivial
Python run at each client count, one server then the other; time from
start to /health, to the first successful run, to every program working
and to the server's own readiness (measuring starts after it); resident
memory of the whole service (every process of its tree, summed: RSS and
PSS) idle and under load; the CPU a run costs in all (the whole machine from /proc/stat, minus this
script's own CPU, divided by runs; and the service's own processes). The
trivial programs and the throughput run both with and without network
(enable_network); the other programs with it, as Dify sends them. The
programs with network never connect anywhere.

Prints one table and one machine-readable line starting with "COMPARE ".
Only ratios within one run mean much on a shared machine.
"""
import argparse
import collections
import fcntl
import http.client
import json
import os
import resource
import secrets
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
import latency  # noqa: E402  (connect, pct, free_port, the trivial programs)
import soak  # noqa: E402  (Daemon: start, stop and leftover checks of a lockboxd)
from test_dify_runners import transform_caller  # noqa: E402  (Dify's runner scripts)

REF_LOCK = "/var/tmp/dify-ref.lock"
REF_RUN_SH = os.path.join(ROOT, "bench", "ref-run.sh")
REF_TREE = "/var/sandbox/sandbox-python"  # fixed in the reference (internal/core/runner/python)
REF_LINKED = b"python dependencies sandbox initialized"
CLK_TCK = os.sysconf("SC_CLK_TCK")
PATH_ENV = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

Program = collections.namedtuple("Program", "language code preload network expect")


def programs():
    """name -> Program. expect: the exact stdout, or None for any non-empty one."""
    dify_py, _ = transform_caller("python3", "def main(a: int, b: int) -> dict:\n"
                                  "    return {'result': a + b}\n", {"a": 1, "b": 2})
    jinja, jinja_preload = transform_caller(
        "jinja2", "Hello {{ name }}! {% for x in items %}{{ x }},{% endfor %}",
        {"name": "lockbox", "items": [1, 2, 3]})
    trivial = latency.PROGRAMS["trivial"][1]
    node = latency.PROGRAMS["node_trivial"][1]
    return {
        "python_trivial": Program("python3", trivial, "", True, "2\n"),
        "python_trivial_offline": Program("python3", trivial, "", False, "2\n"),
        "dify_python_runner": Program("python3", dify_py, "", True,
                                      '<<RESULT>>{\n    "result": 3\n}<<RESULT>>\n'),
        "import_requests": Program("python3", latency.PROGRAMS["import_requests"][1], "", True, None),
        "jinja2_template": Program("python3", jinja, jinja_preload, True,
                                   "<<RESULT>>Hello lockbox! 1,2,3,<<RESULT>>\n"),
        "node_trivial": Program("nodejs", node, "", True, "2\n"),
        "node_trivial_offline": Program("nodejs", node, "", False, "2\n"),
    }


# ------------------------------------------------------------------ /proc

def proc_table():
    """{pid: (ppid, starttime, cpu ticks of itself and its reaped children)}"""
    table = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                f_ = f.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        # after "comm)": state ppid ... utime(11) stime cutime cstime ... starttime(19)
        table[int(name)] = (int(f_[1]), int(f_[19]), sum(int(x) for x in f_[11:15]))
    return table


def tree(root, table=None):
    """[(pid, starttime)] of root and all its descendants."""
    table = table or proc_table()
    kids = collections.defaultdict(list)
    for pid, (ppid, _, _) in table.items():
        kids[ppid].append(pid)
    out, todo = [], [root] if root in table else []
    while todo:
        pid = todo.pop()
        out.append((pid, table[pid][1]))
        todo.extend(kids[pid])
    return out


def tree_cpu_ms(root):
    """CPU of the service: its live processes plus the children they reaped."""
    table = proc_table()
    return sum(table[p][2] for p, _ in tree(root, table)) * 1000 / CLK_TCK


def machine_busy_ms():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    # user nice system idle iowait irq softirq steal (guest is inside user)
    return (v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) * 1000 / CLK_TCK


def self_cpu_ms():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return (r.ru_utime + r.ru_stime) * 1000


def pss_kb(pid):
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def memory(root):
    procs = tree(root)
    return {"processes": len(procs), "rss_kb": sum(soak.rss_kb(p) for p, _ in procs),
            "pss_kb": sum(pss_kb(p) for p, _ in procs)}


def alive(pid, start):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[19]) == start
    except (OSError, IndexError):
        return False


# ------------------------------------------------------------------ client

class Client:
    """One keep-alive connection to one server; reconnects after an error."""

    def __init__(self, server, timeout=60):
        self.server, self.timeout, self.conn = server, timeout, None

    def run(self, prog):
        """(milliseconds, None) or (milliseconds, why it failed)."""
        body = json.dumps({"language": prog.language, "code": prog.code, "preload": prog.preload,
                           "enable_network": prog.network})
        t = time.perf_counter()
        try:
            if self.conn is None:
                self.conn = latency.connect(self.server.url)
                self.conn.timeout = self.timeout
            self.conn.request("POST", "/v1/sandbox/run", body=body,
                              headers={"X-Api-Key": self.server.key, "Content-Type": "application/json"})
            r = self.conn.getresponse()
            raw = r.read()
            if (r.getheader("Connection") or "").lower() == "close":
                self.close()
        except (OSError, http.client.HTTPException) as e:
            self.close()
            return (time.perf_counter() - t) * 1000, f"{type(e).__name__}: {e}"
        ms = (time.perf_counter() - t) * 1000
        return ms, judge(r.status, raw, prog.expect)

    def close(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None


def judge(status, raw, expect):
    """As Dify judges an answer: HTTP 200, code 0, no data.error; then the output."""
    try:
        out = json.loads(raw)
    except ValueError:
        return f"HTTP {status}: not JSON: {raw[:120]!r}"
    if status != 200 or out.get("code") != 0:
        return f"HTTP {status} code {out.get('code')}: {out.get('message')}"
    d = out.get("data") or {}
    if d.get("error"):
        return f"error: {d['error'][:200]!r}"
    stdout = d.get("stdout") or ""
    if (expect is None and not stdout) or (expect is not None and stdout != expect):
        return f"stdout {stdout[:120]!r}"
    return None


# ------------------------------------------------------------------ servers

class Lockbox(soak.Daemon):
    """build/lockboxd on a temporary config of its own (soak.Daemon starts,
    stops and checks it; only the configuration differs)."""
    name = "lockbox"

    def __init__(self, args):
        super().__init__(argparse.Namespace(lockboxd=args.lockboxd, uid_base=args.uid_base,
                                            mode="warm", clients=4))
        req = os.path.join(self.workdir, "python-requirements.txt")
        net = f"network:\n  subnet: {args.subnet}\n  dns_servers: [127.0.0.1]\n"
        if not soak.supports_key(self.lockboxd, self.workdir, net):
            net = ""  # a build older than runs' own network (A/B against an old commit)
        self.config = (
            f"app:\n  port: {self.port}\n  key: {self.key}\n"
            f"server:\n  listen: 127.0.0.1\n"
            + (f"max_requests: {args.max_requests}\n" if args.max_requests else "")
            + f"enable_network: true\n"
            f"jail:\n  uid_min: {self.uid_min}\n  uid_max: {self.uid_max}\n"
            + net
            + f"dependencies:\n  python_requirements: {req}\n  layer_dir: {self.workdir}/layers\n")
        with open(self.config_path, "w") as f:
            f.write(self.config)
        self.url = f"http://127.0.0.1:{self.port}"

    @property
    def root(self):
        return self.proc.pid

    def ready(self):
        """GET /ready: 200 once the warm pools are filled."""
        return self.request("GET", "/ready")[0] == 200

    def launch(self):
        t0 = time.monotonic()
        self.start()
        return t0

    def shutdown(self):
        if self.proc is None:
            shutil.rmtree(self.workdir, ignore_errors=True)
            return True
        if self.proc.poll() is not None:
            print(f"lockbox: exited early with {self.proc.returncode}; log kept in {self.workdir}")
            return False
        rc, secs, left = self.stop()
        bad = {k: v for k, v in left.items() if v}
        if rc != 0 or bad:
            print(f"lockbox: exit {rc} after SIGTERM; left behind: {bad}; log kept in {self.workdir}")
            return False
        shutil.rmtree(self.workdir, ignore_errors=True)
        return True


class Reference:
    """The reference dify-sandbox, run by bench/ref-run.sh under flock."""
    name = "reference"

    def __init__(self, args, tmp):
        self.build, self.run_sh = os.path.abspath(args.ref_build), args.run_sh
        self.port = latency.free_port()
        self.key = secrets.token_hex(16)
        self.url = f"http://127.0.0.1:{self.port}"
        self.max_requests = args.max_requests
        self.log_path = os.path.join(tmp, "reference.log")
        self.fresh = args.ref_fresh
        self.proc = self.root = self.linked_at = None

    def launch(self):
        """Start flock + run.sh and wait for the lock; returns the moment
        the server itself started (flock has forked it)."""
        with open(REF_LOCK, "a") as f:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                fcntl.flock(f, fcntl.LOCK_UN)
            except BlockingIOError:
                print(f"waiting for {REF_LOCK}: another reference instance is running", flush=True)
        env = {"PATH": PATH_ENV, "LANG": "C.UTF-8"}
        if self.max_requests:
            env["MAX_REQUESTS"] = str(self.max_requests)
        self.log = open(self.log_path, "wb")
        cmd = [self.run_sh, self.build, str(self.port), self.key]
        if self.fresh:  # as in a new container: no linked Python tree yet (removed under the lock)
            cmd = ["sh", "-c", f'rm -rf {REF_TREE} && exec "$0" "$@"'] + cmd
        self.proc = subprocess.Popen(["flock", REF_LOCK] + cmd,
                                     env=env, stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log,
                                     start_new_session=True)
        threading.Thread(target=self.watch_log, daemon=True).start()
        while True:  # flock's child is run.sh, which execs (unshare, sh) into the server
            if self.proc.poll() is not None:
                raise RuntimeError(f"reference exited with {self.proc.returncode}:\n{self.tail()}")
            kids = [p for p, (ppid, _, _) in proc_table().items() if ppid == self.proc.pid]
            if kids:
                self.root = kids[0]
                return time.monotonic()
            time.sleep(0.05)

    def watch_log(self):
        """Notes when the reference has linked its Python tree (its own
        readiness: imports can fail before, and the copy loads the machine)."""
        with open(self.log_path, "rb") as f:
            buf = b""
            while self.proc.poll() is None and self.linked_at is None:
                buf = buf[-200:] + f.read()
                if REF_LINKED in buf:
                    self.linked_at = time.monotonic()
                time.sleep(0.1)

    def ready(self):
        return self.linked_at is not None

    def tail(self):
        if self.proc is None:
            return ""
        self.log.flush()
        with open(self.log_path, "rb") as f:
            return f.read()[-3000:].decode(errors="replace")

    def shutdown(self):
        """SIGTERM to every process under flock, SIGKILL to what is left
        after 10 s; flock exits (releasing the lock) with its child."""
        if self.proc is None:
            return True
        if self.root is not None and self.linked_at is None and self.proc.poll() is None:
            # stopped while linking, the tree would stay half-made for the next instance
            print("reference: letting it finish linking its Python tree before stopping it", flush=True)
            deadline = time.monotonic() + 300
            while self.linked_at is None and self.proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.2)
        procs = [(p, s) for p, s in tree(self.proc.pid) if p != self.proc.pid]
        for pid, _ in procs:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(alive(p, s) for p, s in procs):
            time.sleep(0.1)
        left = [p for p, s in procs if alive(p, s)]
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()
        if left:
            print(f"reference: {len(left)} processes needed SIGKILL: {left}")
        return True


# ------------------------------------------------------------------ measures

def first_runs(server, t0, timeout, progs):
    """Seconds from t0 (the server's start) to /health answering, to the
    first successful trivial run, to the moment every program has
    succeeded once, and to the server's own readiness: lockbox's /ready,
    the reference's log line saying its Python tree is linked (until then
    its imports may fail, and the copy loads the machine)."""
    client, why, health, first, pending = Client(server, timeout=30), None, None, None, dict(progs)
    all_ok = ready = None
    while time.monotonic() - t0 < timeout:
        if health is None:
            try:
                c = latency.connect(server.url)
                c.request("GET", "/health")
                if c.getresponse().status == 200:
                    health = time.monotonic() - t0
                c.close()
            except (OSError, http.client.HTTPException):
                time.sleep(0.05)
                continue
        for name, prog in list(pending.items()):
            _, why = client.run(prog)
            if why is None:
                del pending[name]
                if first is None:
                    first = time.monotonic() - t0
            elif first is None:
                break  # the trivial program (first in the list) until it works
        if not pending and all_ok is None:
            all_ok = time.monotonic() - t0
        if ready is None and server.ready():
            ready = (getattr(server, "linked_at", None) or time.monotonic()) - t0
        if all_ok is not None and ready is not None:
            client.close()
            return {"health_s": round(health, 2), "first_run_s": round(first, 2),
                    "all_programs_s": round(all_ok, 2), "ready_s": round(ready, 2)}
        time.sleep(0.2)
    client.close()
    raise RuntimeError(f"{server.name}: not ready after {timeout} s; failing: {sorted(pending)} "
                       f"(last: {why})")


def latency_alternating(servers, prog, runs, gap_ms):
    """p50/p99 of prog on each server, one run on each in turn (the order
    flips every round), one keep-alive connection per server."""
    clients = [Client(s) for s in servers]
    for c in clients:
        for _ in range(2):
            c.run(prog)  # warm the page cache and the pools
    ms = [[] for _ in servers]
    failed = [0 for _ in servers]
    why = [None for _ in servers]
    for i in range(runs):
        order = range(len(servers)) if i % 2 == 0 else reversed(range(len(servers)))
        for k in order:
            time.sleep(gap_ms / 1000)
            t, w = clients[k].run(prog)
            if w:
                failed[k] += 1
                why[k] = why[k] or w
            else:
                ms[k].append(t)
    for c in clients:
        c.close()
    return [{"p50_ms": round(statistics.median(x), 2) if x else None,
             "p99_ms": round(latency.pct(x, 99), 2) if x else None,
             "ok": len(x), "failed": f, "first_error": w}
            for x, f, w in zip(ms, failed, why)]


def throughput(server, prog, clients, seconds):
    """Runs/s of prog with N clients back to back; CPU per run; memory peak."""
    stop = threading.Event()
    counts = collections.Counter()
    errors = []
    lock = threading.Lock()
    peak = {"rss_kb": 0, "pss_kb": 0, "processes": 0}

    def client():
        c = Client(server)
        n = bad = 0
        while not stop.is_set():
            _, why = c.run(prog)
            if why:
                bad += 1
                if len(errors) < 3:
                    errors.append(why)
            else:
                n += 1
        c.close()
        with lock:
            counts["ok"] += n
            counts["failed"] += bad

    def sampler():
        while not stop.wait(0.5):
            m = memory(server.root)
            for k in peak:
                peak[k] = max(peak[k], m[k])

    cpu0, self0, svc0 = machine_busy_ms(), self_cpu_ms(), tree_cpu_ms(server.root)
    t0 = time.monotonic()
    threads = [threading.Thread(target=client, daemon=True) for _ in range(clients)]
    threads.append(threading.Thread(target=sampler, daemon=True))
    try:
        for t in threads:
            t.start()
        time.sleep(seconds)
    finally:
        stop.set()  # also on Ctrl-C: the clients must not outlive the servers
    for t in threads:
        t.join()
    elapsed = time.monotonic() - t0
    svc = tree_cpu_ms(server.root) - svc0
    machine = machine_busy_ms() - cpu0 - (self_cpu_ms() - self0)
    ok = counts["ok"]
    return {"clients": clients, "seconds": round(elapsed, 2), "ok": ok, "failed": counts["failed"],
            "runs_per_s": round(ok / elapsed, 1),
            "cpu_ms_per_run_machine": round(machine / ok, 2) if ok else None,
            "cpu_ms_per_run_service": round(svc / ok, 2) if ok else None,
            "memory_peak": dict(peak), "first_error": errors[0] if errors else None}


# ------------------------------------------------------------------ report

def ratio(a, b):
    """b / a as 'N.Nx' (how many times lockbox's a beats the reference's b)."""
    if not a or not b:
        return ""
    return f"{b / a:.1f}x"


def table(res, names, only_lockbox):
    cols = ["lockbox"] + ([] if only_lockbox else ["reference"])
    head = f"{'':<38}" + "".join(f" {c:>25}" for c in cols) + ("" if only_lockbox else f"{'advantage':>11}")
    lines = [head]

    def row(label, cells, adv=""):
        lines.append(f"{label:<38}" + "".join(f" {c:>25}" for c in cells) + (f"{adv:>11}" if not only_lockbox else ""))

    def get(srv, *path):
        v = res.get(srv)
        for p in path:
            v = v.get(p) if isinstance(v, dict) else None
        return v

    for n in names:
        cells = []
        for c in cols:
            r = get(c, "latency", n) or {}
            fail = f" ({r['failed']} failed)" if r.get("failed") else ""
            cells.append(f"{r.get('p50_ms')} / {r.get('p99_ms')}{fail}")
        row(f"{n} p50/p99 ms", cells, ratio(get("lockbox", "latency", n, "p50_ms"),
                                             get("reference", "latency", n, "p50_ms")))
    for key in res["lockbox"]["throughput"]:
        cells, cpu = [], []
        for c in cols:
            r = get(c, "throughput", key) or {}
            fail = f" ({r['failed']} failed)" if r.get("failed") else ""
            cells.append(f"{r.get('runs_per_s')}{fail}")
            cpu.append(f"{r.get('cpu_ms_per_run_machine')} / {r.get('cpu_ms_per_run_service')}")
        row(f"runs/s, {key}", cells,
            ratio(get("reference", "throughput", key, "runs_per_s"), get("lockbox", "throughput", key, "runs_per_s")))
        row("  cpu ms/run: machine / service", cpu,
            ratio(get("lockbox", "throughput", key, "cpu_ms_per_run_machine"),
                  get("reference", "throughput", key, "cpu_ms_per_run_machine")))
    row("start s: health/1st run/all/ready", [" / ".join(str(get(c, "start", k)) for k in
                                                ("health_s", "first_run_s", "all_programs_s", "ready_s"))
                                                for c in cols],
        ratio(get("lockbox", "start", "ready_s"), get("reference", "start", "ready_s")))
    for label, key in (("idle", "memory_idle"), ("under load (peak)", "memory_load")):
        row(f"memory {label}: RSS / PSS MiB",
            [f"{(get(c, key, 'rss_kb') or 0) / 1024:.0f} / {(get(c, key, 'pss_kb') or 0) / 1024:.0f}"
             for c in cols],
            ratio(get("lockbox", key, "pss_kb"), get("reference", key, "pss_kb")))
        row("  processes", [str(get(c, key, "processes")) for c in cols])
    return "\n".join(lines)


# ------------------------------------------------------------------ main

def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("ref_build", nargs="?", default="/var/tmp/dify-ref",
                    help="build folder of the reference (its run/main; default %(default)s)")
    ap.add_argument("--only", choices=("lockbox",), help="measure lockbox alone")
    ap.add_argument("--quick", action="store_true", help="--runs 20 --seconds 2: about 3 minutes with the reference")
    ap.add_argument("--runs", type=int, help="latency runs per program and server (default 100, quick 20)")
    ap.add_argument("--seconds", type=float, help="length of each throughput phase (default 10, quick 2)")
    ap.add_argument("--clients", default="1,4,16,64", help="client counts of the throughput phases")
    ap.add_argument("--gap-ms", type=float, default=20, help="pause before each latency run")
    ap.add_argument("--max-requests", type=int, default=100,
                    help="max_requests of both servers (0: their default, 50, which refuses 64 clients)")
    ap.add_argument("--start-timeout", type=float, default=1200,
                    help="seconds until every program has run once (the reference links its Python "
                         "tree first: 1-11 min seen on the test machine)")
    ap.add_argument("--lockboxd", default=os.path.join(ROOT, "build", "lockboxd"))
    ap.add_argument("--run-sh", default=REF_RUN_SH)
    ap.add_argument("--ref-fresh", action="store_true",
                    help=f"remove {REF_TREE} before the reference starts (under the lock), as in a "
                         "new container: its imports then fail until it has linked the tree again")
    ap.add_argument("--uid-base", type=int, default=95000, help="lockbox's runs use UIDs BASE..BASE+99")
    ap.add_argument("--subnet", default="10.234.0.0/24", help="lockbox's run subnet")
    args = ap.parse_args()
    if args.runs is None:
        args.runs = 20 if args.quick else 100
    if args.seconds is None:
        args.seconds = 2.0 if args.quick else 10.0
    if os.geteuid() != 0:
        sys.exit("compare.py starts lockboxd and the reference, which need root")
    return args


def terminate(signum, frame):
    raise KeyboardInterrupt


def measure(servers, args, res):
    progs = programs()
    lat_names = list(progs)
    # start-up: the reference first (it copies its Python tree, 1-11 min,
    # which would disturb lockbox's start), then lockbox
    for s in reversed(servers):
        t0 = s.launch()
        print(f"{s.name}: started, waiting for its first successful run", flush=True)
        st = res[s.name]["start"] = first_runs(s, t0, args.start_timeout, progs)
        s.started = t0
        print(f"{s.name}: first run after {st['first_run_s']} s, every program after "
              f"{st['all_programs_s']} s, ready after {st['ready_s']} s", flush=True)
    for s in servers:  # the first run of each program, off the record
        c = Client(s)
        for p in progs.values():
            c.run(p)
        c.close()
    time.sleep(2)
    for s in servers:
        res[s.name]["memory_idle"] = memory(s.root)
    print(f"latency: {args.runs} runs per program and server, alternating", flush=True)
    for n in lat_names:
        for s, r in zip(servers, latency_alternating(servers, progs[n], args.runs, args.gap_ms)):
            res[s.name]["latency"][n] = r
    print(f"throughput: {args.seconds:g} s per phase, one server then the other", flush=True)
    for c in (int(x) for x in args.clients.split(",")):
        noun = "client" if c == 1 else "clients"
        for n, key in (("python_trivial", f"{c} {noun}"), ("python_trivial_offline", f"{c} {noun} offline")):
            for s in servers:
                time.sleep(1)  # let lockbox's pools refill between phases
                res[s.name]["throughput"][key] = throughput(s, progs[n], c, args.seconds)
    for s in servers:
        peak = {"rss_kb": 0, "pss_kb": 0, "processes": 0}
        for r in res[s.name]["throughput"].values():
            for k in peak:
                peak[k] = max(peak[k], r["memory_peak"][k])
        res[s.name]["memory_load"] = peak
    time.sleep(2)
    for s in servers:
        res[s.name]["memory_idle_end"] = memory(s.root)
        res[s.name]["uptime_s"] = round(time.monotonic() - s.started, 1)
    if res.get("reference", {}).get("uptime_s", 0) > 29 * 60:
        print("note: the reference repeats its Python tree copy every 30 minutes "
              "(python_deps_update_interval); this run lasted long enough to overlap it")
    return lat_names


def main():
    args = parse_args()
    signal.signal(signal.SIGTERM, terminate)
    signal.signal(signal.SIGHUP, terminate)
    tmp = tempfile.mkdtemp(prefix="lockbox-compare-")
    servers = []
    res = {}
    clean = True
    try:
        servers.append(Lockbox(args))
        if not args.only:
            servers.append(Reference(args, tmp))
        res = {s.name: {"latency": {}, "throughput": {}} for s in servers}
        names = measure(servers, args, res)
    except KeyboardInterrupt:
        print("interrupted: stopping the servers", flush=True)
        clean = False
    except Exception:  # noqa: BLE001  (report, then stop the servers)
        traceback.print_exc()
        if len(servers) > 1 and servers[1].proc is not None:
            print("reference log:\n" + servers[1].tail())
        clean = False
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)  # a second Ctrl-C must not stop the clean-up
        for s in servers:
            clean = s.shutdown() and clean
        shutil.rmtree(tmp, ignore_errors=True)
    if not res or "start" not in res.get("lockbox", {}) or "memory_load" not in res["lockbox"]:
        return 1
    print()
    print(f"lockbox vs dify-sandbox: latency {args.runs} runs per program, {args.gap_ms:g} ms apart; "
          f"throughput {args.seconds:g} s per phase of python_trivial; advantage > 1: lockbox better")
    print(table(res, names, bool(args.only)))
    res["settings"] = {"runs": args.runs, "seconds": args.seconds, "clients": args.clients,
                       "gap_ms": args.gap_ms, "max_requests": args.max_requests or 50,
                       "max_workers": 4, "cpus": os.cpu_count(),
                       "load_avg": [round(x, 2) for x in os.getloadavg()]}
    print("COMPARE " + json.dumps(res, sort_keys=True))
    return 0 if clean else 1


if __name__ == "__main__":
    sys.exit(main())
