#!/usr/bin/python3
"""Soak test: N concurrent clients (default 8) run a mix of normal and
hostile programs, Python and Node.js, against a lockboxd this script starts
itself (as root, on loopback, with its own temporary config, working
directory and UID range), for a bounded time (default 10 minutes).

Every response is checked against the verdict its program must get (exact
output for normal programs; status, exit code and error text for hostile
ones); anything else, and any HTTP error, counts as an error. The daemon's
memory (VmRSS of the jailer, the HTTP process and the Python zygote, from
/proc) and descriptor counts are sampled at start (after a short warm-up),
in the middle and at the end, and every 30 s in between. Then the daemon
gets SIGTERM and must exit 0 leaving nothing behind: no process in its UID
range, no cgroup, no mount, no file owned by its UIDs, nothing new in its
working directory.

Prints a table and one machine-readable line starting with "SOAK ". Exit
status 0 when there was no error, no leftover and no memory growth beyond
--max-growth-kb. By hand, never in CI:

    /usr/bin/python3 bench/soak.py [--minutes 10] [--clients 8] [--mode warm|cold]
                                   [--lockboxd build/lockboxd] [--seed 1]
"""
import argparse
import collections
import http.client
import json
import os
import random
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))
from hostcheck import (children_of, daemon_cgroups, files_owned_in_range,  # noqa: E402
                       lockbox_mounts, proc_status, processes_in_uid_range)
MAX_MINUTES = 24 * 60          # the run is always bounded
WORKER_TIMEOUT = 5             # seconds (the default): hostile timeouts end the run
OUTPUT_CAP = 64 * 1024


# ------------------------------------------------------------------ programs
# name: (weight, language, enable_network, code, check(data) -> None or why)

def exact(stdout):
    def check(d):
        if (d["stdout"], d["stderr"], d["exit_code"], d["status"], d["error"]) != (stdout, "", 0, "ok", ""):
            return f"want ok {stdout!r}"
    return check


def ended(status, reason, stdout=None):
    def check(d):
        if (d["exit_code"], d["status"]) != (-1, status):
            return f"want {status}"
        if not d["error"].startswith(f"process exited with code -1\n{reason}\n"):
            return f"want error {reason!r}"
        if stdout is not None and d["stdout"] != stdout:
            return f"want stdout {stdout!r}"
    return check


def output_limit(d):
    if (d["exit_code"], d["status"], d["truncated"]) != (-1, "output_limit", True):
        return "want output_limit"
    if len(d["stdout"].encode()) + len(d["stderr"].encode()) > OUTPUT_CAP:
        return "output beyond the cap"
    if not d["error"].startswith("process exited with code -1\nerror: output limit exceeded\n"):
        return "want error output limit"


def signal_death(sig):
    def check(d):
        if d["status"] != "runtime_error" or f"\nerror: killed by signal {sig}\n" not in d["error"]:
            return f"want killed by {sig}"
    return check


def primes_line():
    ps = [n for n in range(2, 5000) if all(n % p for p in range(2, int(n ** 0.5) + 1))]
    return f"{len(ps)} {sum(ps)}\n"


PY_MACHINE_CODE = (
    "import ctypes, mmap\n"
    "buf = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)\n"
    "buf.write(b'\\x53\\xb8\\x14\\x00\\x00\\x00\\xcd\\x80\\x5b\\xc3')  # push rbx; mov eax,20; int 0x80; pop rbx; ret\n"
    "print('pre', flush=True)\n"
    "ctypes.CFUNCTYPE(ctypes.c_long)(ctypes.addressof(ctypes.c_char.from_buffer(buf)))()\n"
)


def programs(daemon_pid):
    return {
        # ---- normal
        "py_primes": (12, "python3", True,
                      "ps = [n for n in range(2, 5000) if all(n % p for p in range(2, int(n ** 0.5) + 1))]\n"
                      "print(len(ps), sum(ps))", exact(primes_line())),
        "py_dify_runner": (12, "python3", True,
                           "def main(a: int, b: int) -> dict:\n    return {'sum': a + b}\n"
                           "import json\nfrom base64 import b64decode\n"
                           "inputs = json.loads(b64decode('eyJhIjogMSwgImIiOiAyfQ==').decode('utf-8'))\n"
                           "output = json.dumps(main(**inputs), indent=4)\n"
                           "print(f'<<RESULT>>{output}<<RESULT>>')\n",
                           exact('<<RESULT>>{\n    "sum": 3\n}<<RESULT>>\n')),
        "py_jinja2": (8, "python3", True,
                      "import jinja2\nprint(jinja2.Template('{% for x in xs %}{{ x }}-{% endfor %}').render(xs=[1, 2, 3]))",
                      exact("1-2-3-\n")),
        "py_requests_import": (4, "python3", True, "import requests, httpx\nprint('ok')", exact("ok\n")),
        "js_crypto": (10, "nodejs", True,
                      "console.log(require('crypto').createHash('sha256').update('lockbox').digest('hex').slice(0, 12))",
                      exact("5e5d6123886c\n")),
        "js_json": (8, "nodejs", True,
                    "const o = {a: [1, 2, {b: 'grüße ✓'}]}; console.log(JSON.stringify(JSON.parse(JSON.stringify(o))))",
                    exact('{"a":[1,2,{"b":"grüße ✓"}]}\n')),
        # ---- hostile, with the verdicts a user must see
        "py_fork_bomb": (4, "python3", True,
                         "import os\nn = 0\nfor _ in range(300):\n    try:\n        os.fork()\n"
                         "    except OSError:\n        n += 1\nprint(n)", exact("300\n")),
        "py_exec": (3, "python3", True,
                    "import os\ntry:\n    os.execv('/bin/sh', ['sh'])\nexcept PermissionError:\n    print('EPERM')",
                    exact("EPERM\n")),
        "py_setuid": (3, "python3", True, "print('pre', flush=True)\nimport os\nos.setuid(0)",
                      ended("syscall_denied", "error: operation not permitted: syscall 'setuid' is not allowed", "pre\n")),
        "py_ptrace_thread": (2, "python3", True,
                             "import ctypes, threading\nt = threading.Thread(target=lambda: ctypes.CDLL(None).ptrace(0, 0, None, None))\n"
                             "t.start(); t.join()\nimport time; time.sleep(1)",
                             ended("syscall_denied", "error: operation not permitted: syscall 'ptrace' is not allowed", "")),
        "js_child_process": (3, "nodejs", True,
                             "console.log('pre');\nrequire('child_process').execSync('id');",
                             ended("syscall_denied", "error: operation not permitted: syscall 'clone' is not allowed", "pre\n")),
        "py_memory_bomb": (2, "python3", True, "print('pre', flush=True)\nx = []\nwhile True: x.append(b'x' * (8 << 20))",
                           ended("memory_limit", "error: memory limit exceeded", "pre\n")),
        "js_memory_bomb": (2, "nodejs", True, "console.log('pre');\nconst a = []; for (;;) a.push(Buffer.allocUnsafe(32 << 20).fill(1));",
                           ended("memory_limit", "error: memory limit exceeded", "pre\n")),
        "py_output_flood": (2, "python3", True, "while True: print('x' * 999)", output_limit),
        "js_output_flood": (2, "nodejs", True, "const s = 'x'.repeat(999); for (;;) console.log(s);", output_limit),
        "py_spin": (1, "python3", True, "print('pre', flush=True)\nwhile True: pass",
                    ended("timeout", "error: timeout", "pre\n")),
        "js_interval": (1, "nodejs", True, "console.log('pre');\nsetInterval(() => {}, 1000);",
                        ended("timeout", "error: timeout", "pre\n")),
        "py_i386_syscall": (2, "python3", True, PY_MACHINE_CODE, signal_death("SIGSYS")),
        "py_tmp_fill": (2, "python3", True,
                        "import errno\nn = 0\ntry:\n    while True:\n        open(f'/tmp/f{n}', 'wb').write(b'0' * (1 << 20)); n += 1\n"
                        "except OSError as e:\n    print(errno.errorcode[e.errno])", exact("ENOSPC\n")),
        "py_thread_bomb": (2, "python3", True,
                           "import threading\nev = threading.Event()\ntry:\n    while True: threading.Thread(target=ev.wait).start()\n"
                           "except RuntimeError:\n    print('capped')\nev.set()", exact("capped\n")),
        "py_no_network": (3, "python3", False,
                          "import socket\ntry:\n    socket.create_connection(('127.0.0.1', 9), timeout=1)\n"
                          "except PermissionError:\n    print('EPERM')", exact("EPERM\n")),
        "py_secrets": (3, "python3", True,
                       "import os\ntry:\n    open('/etc/shadow')\nexcept FileNotFoundError:\n    print('ENOENT', sorted(os.environ))",
                       exact("ENOENT ['HOME', 'LANG', 'PATH', 'TMPDIR']\n")),
        "py_kill_daemon": (2, "python3", True,
                           f"import os\ntry:\n    os.kill({daemon_pid}, 9)\nexcept PermissionError:\n    print('EPERM')",
                           exact("EPERM\n")),
        "js_fs_escape": (3, "nodejs", True,
                         "const fs = require('fs');\nconst r = [];\nfor (const p of ['/etc/x', '/usr/x', '/x'])\n"
                         "  try { fs.writeFileSync(p, 'x'); r.push('WROTE'); } catch (e) { r.push(e.code); }\n"
                         "console.log(r.join(' '));", exact("EROFS EROFS EROFS\n")),
    }


# ------------------------------------------------------------------ /proc

_HTTP_PID = {}


def daemon_parts(jailer):
    """{'jailer': pid, 'http': pid, 'zygote': pid} (those that exist). The
    HTTP process is the jailer's oldest lockboxd-named child at the first
    (idle) sample, kept from then on: a cold run is also a lockboxd-named
    child of the jailer until it executes its interpreter."""
    parts = {"jailer": jailer}
    named = []
    for k in children_of(jailer):
        st = proc_status(k) or {}
        uid = st.get("Uid", "").split()[:1]
        if st.get("Name") == "lockboxd":
            named.append(k)
        elif st.get("Name", "").startswith("lockbox-pyzygo") and uid == ["0"]:
            parts["zygote"] = k
    if jailer not in _HTTP_PID and named:
        _HTTP_PID[jailer] = min(named)
    if jailer in _HTTP_PID:
        parts["http"] = _HTTP_PID[jailer]
    return parts


def rss_kb(pid):
    st = proc_status(pid) or {}
    return int(st.get("VmRSS", "0 kB").split()[0])


def fd_count(pid):
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return 0


def sample(jailer, label, t0):
    parts = daemon_parts(jailer)
    rss = {k: rss_kb(p) for k, p in parts.items()}
    return {"label": label, "t": round(time.monotonic() - t0, 1), "rss_kb": rss,
            "rss_total_kb": sum(rss.values()),
            "fds": {k: fd_count(p) for k, p in parts.items() if k != "zygote"},
            "threads_http": int((proc_status(parts.get("http", 0)) or {}).get("Threads", 0))}


# ------------------------------------------------------------------ daemon

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def supports_key(lockboxd, workdir, text):
    path = os.path.join(workdir, "probe.yaml")
    with open(path, "w") as f:
        f.write(text)
    r = subprocess.run([lockboxd, "--check-config", "--config", path], capture_output=True, text=True)
    os.unlink(path)
    return r.returncode == 0


class Daemon:
    def __init__(self, args):
        self.lockboxd = os.path.abspath(args.lockboxd)
        self.workdir = tempfile.mkdtemp(prefix="lockbox-soak-")
        os.chmod(self.workdir, 0o755)
        self.key = secrets.token_hex(16)
        self.uid_min = args.uid_base
        self.uid_max = args.uid_base + 99
        self.mode = args.mode
        self.port = free_port()
        self.config_path = os.path.join(self.workdir, "config.yaml")
        self.log_path = os.path.join(self.workdir, "lockboxd.log")
        req = os.path.join(self.workdir, "python-requirements.txt")
        with open(req, "w") as f:
            f.write("# nothing\n")
        deps = f"dependencies:\n  python_requirements: {req}\n"
        layer = f"  layer_dir: {self.workdir}/layers\n"
        if supports_key(self.lockboxd, self.workdir, deps + layer):
            deps += layer
        self.config = (
            f"app:\n  port: {self.port}\n  key: {self.key}\n"
            f"server:\n  listen: 127.0.0.1\n"
            f"max_workers: {args.clients}\nmax_requests: 100\nworker_timeout: {WORKER_TIMEOUT}\n"
            f"enable_network: true\n"
            f"limits:\n  memory: 128M\n  output: 64K\n  tmp_size: 8M\n  tmp_inodes: 1024\n"
            f"jail:\n  uid_min: {self.uid_min}\n  uid_max: {self.uid_max}\n"
            f"warm:\n  mode: {self.mode}\n" + deps)
        with open(self.config_path, "w") as f:
            f.write(self.config)
        self.before_files = None
        self.proc = None

    def start(self):
        stray = processes_in_uid_range(self.uid_min, self.uid_max)
        if stray:
            sys.exit(f"UID range {self.uid_min}-{self.uid_max} already in use: {stray}")
        self.mounts_before = lockbox_mounts()
        self.log = open(self.log_path, "wb")
        env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"}
        self.proc = subprocess.Popen([self.lockboxd, "--config", self.config_path], cwd=self.workdir,
                                     env=env, stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log,
                                     start_new_session=True)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
            try:
                if self.request("GET", "/health")[0] == 200:
                    slots, own = daemon_cgroups(self.proc.pid)
                    self.cgroups = sorted(slots.values()) + own
                    self.before_files = set(os.listdir(self.workdir))
                    return
            except OSError:
                pass
            time.sleep(0.05)
        self.proc.kill()
        sys.exit("lockboxd did not start:\n" + open(self.log_path, errors="replace").read()[-3000:])

    def wait_warm(self, timeout=60):
        """Until runs of both languages come from the armed pools: the soak
        measures the steady state, not the zygote's start."""
        deadline = time.monotonic() + timeout
        pending = {"python3": "print(1)", "nodejs": "console.log(1)"}
        while pending and time.monotonic() < deadline:
            for lang, code in list(pending.items()):
                _, raw = self.request("POST", "/v1/sandbox/run",
                                      {"language": lang, "code": code, "enable_network": True})
                if (json.loads(raw).get("data") or {}).get("warm"):
                    del pending[lang]
            time.sleep(0.2)

    def request(self, method, path, body=None, conn=None, timeout=60):
        own = conn is None
        c = conn or http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            headers = {"X-Api-Key": self.key}
            data = None
            if body is not None:
                data = json.dumps(body).encode()
                headers["Content-Type"] = "application/json"
            c.request(method, path, body=data, headers=headers)
            r = c.getresponse()
            return r.status, r.read()
        finally:
            if own:
                c.close()

    def stop(self):
        """SIGTERM; returns (exit code, seconds, leftovers)."""
        t = time.monotonic()
        kids = children_of(self.proc.pid)
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            for k in children_of(self.proc.pid):
                os.kill(k, signal.SIGKILL)
            self.proc.kill()
            rc = self.proc.wait()
        secs = time.monotonic() - t
        self.log.close()
        time.sleep(0.2)
        left = {
            "daemon_children": [k for k in kids if (proc_status(k) or {}).get("State", "Z")[:1] not in ("Z", "")],
            "uid_processes": processes_in_uid_range(self.uid_min, self.uid_max),
            "cgroups": [d for d in self.cgroups if os.path.exists(d)],
            "mounts": sorted(lockbox_mounts() - self.mounts_before),
            "uid_files": files_owned_in_range(self.uid_min, self.uid_max),
            "workdir_files": sorted(set(os.listdir(self.workdir)) - self.before_files - {"layers"}),
        }
        return rc, secs, left


# ------------------------------------------------------------------ clients

class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.runs = collections.Counter()
        self.errors = collections.Counter()
        self.samples = []          # first error details
        self.lat = collections.defaultdict(list)

    def record(self, name, ms, why):
        with self.lock:
            self.runs[name] += 1
            self.lat[name].append(ms)
            if why:
                self.errors[name] += 1
                if len(self.samples) < 20:
                    self.samples.append({"program": name, "why": why})


def client(daemon, progs, stop, stats, seed):
    rng = random.Random(seed)
    names = list(progs)
    weights = [progs[n][0] for n in names]
    conn = http.client.HTTPConnection("127.0.0.1", daemon.port, timeout=60)
    while not stop.is_set():
        name = rng.choices(names, weights)[0]
        _, lang, net, code, check = progs[name]
        t = time.monotonic()
        why = None
        try:
            status, raw = daemon.request("POST", "/v1/sandbox/run",
                                         {"language": lang, "code": code, "enable_network": net}, conn=conn)
            body = json.loads(raw)
            if status != 200 or body.get("code") != 0:
                why = f"HTTP {status} {raw[:200]!r}"
            else:
                why = check(body["data"])
                if why:
                    d = body["data"]
                    why += f" (got status={d['status']} exit={d['exit_code']} stdout={d['stdout'][:80]!r} error={d['error'][:160]!r})"
        except (OSError, http.client.HTTPException, ValueError) as e:
            why = f"{type(e).__name__}: {e}"
            conn.close()
            conn = http.client.HTTPConnection("127.0.0.1", daemon.port, timeout=60)
        stats.record(name, (time.monotonic() - t) * 1000, why)
    conn.close()


# ------------------------------------------------------------------ main

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=10.0, help="duration (bounded to 24 h)")
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--mode", choices=("warm", "cold"), default="warm")
    ap.add_argument("--lockboxd", default=os.path.join(ROOT, "build", "lockboxd"))
    ap.add_argument("--uid-base", type=int, default=60000 + (os.getpid() % 400) * 100)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--max-growth-kb", type=int, default=8192,
                    help="RSS growth from start to end tolerated (kB)")
    ap.add_argument("--keep", action="store_true", help="keep the working directory (config, log)")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("soak.py starts lockboxd, which needs root")
    if not 0 < args.minutes <= MAX_MINUTES:
        sys.exit(f"--minutes must be in (0, {MAX_MINUTES}]")
    duration = args.minutes * 60

    daemon = Daemon(args)
    daemon.start()
    if args.mode == "warm":
        daemon.wait_warm()
    progs = programs(daemon.proc.pid)
    stats = Stats()
    stop = threading.Event()
    t0 = time.monotonic()
    samples = [sample(daemon.proc.pid, "idle", t0)]
    threads = [threading.Thread(target=client, args=(daemon, progs, stop, stats, args.seed * 1000 + i), daemon=True)
               for i in range(args.clients)]
    for t in threads:
        t.start()

    warmup = min(60.0, duration * 0.1)
    marks = [(warmup, "start"), (duration / 2, "middle")]
    marks += [(x, "t") for x in range(60, int(duration), 60)
              if abs(x - duration / 2) > 15 and abs(x - warmup) > 15]
    marks = sorted(marks)
    try:
        for when, label in marks:
            time.sleep(max(0.0, t0 + when - time.monotonic()))
            if daemon.proc.poll() is not None:
                break
            samples.append(sample(daemon.proc.pid, label, t0))
            samples[-1]["runs"] = sum(stats.runs.values())
            print(f"  t={samples[-1]['t']:>6}s runs={samples[-1]['runs']:>7} errors={sum(stats.errors.values())} "
                  f"rss={samples[-1]['rss_kb']}", flush=True)
        time.sleep(max(0.0, t0 + duration - time.monotonic()))
    except KeyboardInterrupt:
        print("interrupted: stopping early", flush=True)
    # "end" under load, like "start" and "middle"; "idle_end" once the
    # clients have stopped, like "idle"
    alive = daemon.proc.poll() is None
    end = sample(daemon.proc.pid, "end", t0) if alive else None
    if end:
        end["runs"] = sum(stats.runs.values())
        samples.append(end)
    stop.set()
    for t in threads:
        t.join(WORKER_TIMEOUT + 30)
    alive = daemon.proc.poll() is None
    if alive:
        time.sleep(1)
        samples.append(dict(sample(daemon.proc.pid, "idle_end", t0), runs=sum(stats.runs.values())))
    health = daemon.request("GET", "/health")[0] if alive else None
    rc, stop_secs, left = daemon.stop() if alive else (daemon.proc.returncode, 0, {})
    elapsed = time.monotonic() - t0

    start = next((s for s in samples if s["label"] == "start"), samples[0])
    middle = next((s for s in samples if s["label"] == "middle"), None)
    growth = (end["rss_total_kb"] - start["rss_total_kb"]) if end else None
    total_runs = sum(stats.runs.values())
    total_errors = sum(stats.errors.values())
    leftovers = sum(len(v) for v in left.values())

    print()
    print(f"lockbox soak: {args.clients} clients, {args.mode} mode, {elapsed / 60:.1f} min, "
          f"{total_runs} runs ({total_runs / max(elapsed, 1):.1f}/s), {total_errors} errors")
    print(f"{'program':<20}{'runs':>8}{'errors':>8}{'p50 ms':>9}{'p99 ms':>9}")
    for name in sorted(progs):
        lat = sorted(stats.lat.get(name, [0]))
        p50, p99 = lat[len(lat) // 2], lat[min(len(lat) - 1, int(len(lat) * 0.99))]
        print(f"{name:<20}{stats.runs[name]:>8}{stats.errors[name]:>8}{p50:>9.0f}{p99:>9.0f}")
    print()
    print(f"{'memory (VmRSS kB)':<20}{'t (s)':>8}{'runs':>9}{'jailer':>9}{'http':>9}{'zygote':>9}{'total':>9}"
          f"{'fds j/h':>10}{'http thr':>9}")
    for s in samples:
        r = s["rss_kb"]
        print(f"{s['label']:<20}{s['t']:>8}{s.get('runs', 0):>9}{r.get('jailer', 0):>9}{r.get('http', 0):>9}"
              f"{r.get('zygote', 0):>9}{s['rss_total_kb']:>9}"
              f"{str(s['fds'].get('jailer', 0)) + '/' + str(s['fds'].get('http', 0)):>10}{s['threads_http']:>9}")
    print()
    print(f"growth start->end: {growth} kB; /health before stop: {health}; SIGTERM -> exit {rc} in {stop_secs:.1f}s")
    print("leftovers after SIGTERM: " + ", ".join(f"{k}={len(v)}" for k, v in left.items()))
    for k, v in left.items():
        if v:
            print(f"  {k}: {v[:10]}")
    for e in stats.samples[:10]:
        print(f"  error: {e['program']}: {e['why']}")

    ok = (alive and total_errors == 0 and leftovers == 0 and rc == 0 and health == 200
          and growth is not None and growth <= args.max_growth_kb)
    result = {
        "ok": ok, "mode": args.mode, "clients": args.clients, "minutes": round(elapsed / 60, 2),
        "runs": total_runs, "runs_per_s": round(total_runs / max(elapsed, 1), 2), "errors": total_errors,
        "errors_by_program": dict(stats.errors), "runs_by_program": dict(stats.runs),
        "error_samples": stats.samples[:10],
        "rss_kb": {s["label"] if s["label"] != "t" else f"t{int(s['t'])}": s["rss_kb"] for s in samples},
        "rss_total_kb": {"idle": samples[0]["rss_total_kb"], "start": start["rss_total_kb"],
                         "middle": middle["rss_total_kb"] if middle else None,
                         "end": end["rss_total_kb"] if end else None,
                         "idle_end": samples[-1]["rss_total_kb"] if samples[-1]["label"] == "idle_end" else None},
        "rss_growth_kb": growth, "fds_end": end["fds"] if end else None,
        "daemon_alive": alive, "health": health, "exit_code": rc, "stop_seconds": round(stop_secs, 2),
        "leftovers": {k: len(v) for k, v in left.items()},
    }
    print("SOAK " + json.dumps(result, sort_keys=True))
    if args.keep or not ok:
        print(f"working directory kept: {daemon.workdir}")
    else:
        shutil.rmtree(daemon.workdir, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
