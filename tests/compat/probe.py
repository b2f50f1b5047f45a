#!/usr/bin/python3
"""Send the same requests to dify-sandbox and to lockbox and print what
each answered, one row per probe, as the Markdown table behind
docs/API.md's "Differences from dify-sandbox". Run by hand, never in CI;
it starts no server: give it two running ones.

    /usr/bin/python3 tests/compat/probe.py REF_URL REF_KEY LOCKBOX_URL LOCKBOX_KEY
        [--first-run [--since EPOCH]] [--only NAME,...] [--json FILE]

e.g. tests/compat/probe.py http://127.0.0.1:18194 refkey http://127.0.0.1:18195 lbkey.
Both servers should run their default configuration (apart from port, key
and lockbox's jail/network keys); the memory, process and output probes
assume lockbox's default limits (512M, 64 tasks, 8M).

--first-run first polls both servers, side by side, every half second
with a trivial Python program and with one importing json, requests and
jinja2, until each answers each correctly, and reports how long that
took from --since (a Unix time, e.g. `date +%s.%N` taken when the
servers were started) or from the probe's own start. Start the servers,
then the probe at once. `--only none` skips the other probes.

Runs ask for network (enable_network true), as Dify's do, except where
a probe says otherwise. Probes only ever talk to the two URLs; the network probe makes each
sandbox connect to its own server's port on 127.0.0.1.
"""
import argparse
import json
import statistics
import sys
import threading
import time
from urllib.parse import urlsplit

import requests

TRIVIAL = "print(1+1)"


class Server:
    def __init__(self, name, url, key):
        self.name, self.url, self.key = name, url.rstrip("/"), key
        self.port = urlsplit(url).port
        self.s = requests.Session()
        self.s.trust_env = False  # loopback only: no proxy from the environment

    def request(self, method, path, key=True, **kw):
        headers = kw.pop("headers", {})
        if key is True:
            headers["X-Api-Key"] = self.key
        elif key:
            headers["X-Api-Key"] = key
        kw.setdefault("timeout", 120)
        return self.s.request(method, self.url + path, headers=headers, **kw)

    def run(self, code, language="python3", **fields):
        # with network, as Dify always asks
        body = {"language": language, "code": code, "preload": "", "enable_network": True}
        body.update(fields)
        t = time.monotonic()
        r = self.request("POST", "/v1/sandbox/run", json=body)
        ms = (time.monotonic() - t) * 1000
        try:
            j = r.json()
        except ValueError:
            j = None
        return r, j, ms


def short(v, n=70):
    """A JSON-ish rendering of v cut to about n characters."""
    s = json.dumps(v, ensure_ascii=False)
    return s if len(s) <= n else s[: n - 3] + "..."


def last_line(text):
    lines = (text or "").splitlines()
    return lines[-1] if lines else ""


def data_of(j):
    return (j or {}).get("data") or {}


def run_summary(r, j, ms=None, fields=("exit_code", "error", "stdout")):
    """HTTP status, then the chosen data fields (missing ones left out)."""
    if j is None:
        return f"HTTP {r.status_code}, body {short(r.text)}"
    if j.get("code") != 0:
        return f"HTTP {r.status_code}, code {j.get('code')}: {short(j.get('message'), 60)}"
    d = data_of(j)
    parts = [f"{f}={short(d[f], 60)}" for f in fields if f in d]
    return ", ".join(parts)


# ---------------------------------------------------------------- probes
# Each probe takes a Server and returns a short text; rows whose texts
# differ are marked.

def p_health(sv):
    r = sv.request("GET", "/health", key=False)
    return f"HTTP {r.status_code} {short(r.text)}"


def p_no_key(sv):
    r = sv.request("POST", "/v1/sandbox/run", key=False, json={"language": "python3", "code": "1"})
    return f"HTTP {r.status_code}, body {short(r.text, 60)}"


def p_wrong_key(sv):
    r = sv.request("POST", "/v1/sandbox/run", key="not-the-key",
                   json={"language": "python3", "code": "1"})
    return f"HTTP {r.status_code}, body {short(r.text, 60)}"


def p_data_fields(sv):
    r, j, _ = sv.run(TRIVIAL)
    return f"stdout={short(data_of(j).get('stdout'))}, data keys: {', '.join(data_of(j))}"


def p_stderr_exit0(sv):
    r, j, _ = sv.run("import logging\nprint('result')\nlogging.warning('careful')")
    return run_summary(r, j, fields=("exit_code", "stderr", "error"))


def p_exception(sv):
    r, j, _ = sv.run("raise ValueError('bad')")
    d = data_of(j)
    return f"exit_code={d.get('exit_code')}, error={short(d.get('error'), 45)}"


def p_exit3(sv):
    r, j, _ = sv.run("import sys\nprint('e', file=sys.stderr)\nsys.exit(3)")
    return run_summary(r, j, fields=("exit_code", "error"))


def p_timeout(sv):
    r, j, ms = sv.run("while True: pass")
    return run_summary(r, j, fields=("exit_code", "error")) + f", answered after {ms / 1000:.1f} s"


def p_segfault(sv):
    r, j, _ = sv.run("import ctypes\nctypes.string_at(0)")
    return run_summary(r, j, fields=("exit_code", "error"))


def p_pid(sv):
    r, j, _ = sv.run("import os\nprint(os.getpid())")
    return run_summary(r, j, fields=("stdout",))


def p_fork(sv):
    code = ("import os, sys\npid = os.fork()\nif pid == 0:\n    print('child')\n    sys.stdout.flush()\n"
            "    os._exit(0)\nos.waitpid(pid, 0)\nprint('parent')")
    r, j, _ = sv.run(code)
    return run_summary(r, j, fields=("exit_code", "stdout", "error"))


def p_subprocess(sv):
    r, j, _ = sv.run("import subprocess\nprint(subprocess.run(['/bin/echo', 'hi'], "
                     "capture_output=True).stdout)")
    return run_summary(r, j, fields=("exit_code", "stdout", "error"))


def p_threads(sv):
    code = ("import threading, time\nts = [threading.Thread(target=time.sleep, args=(0.5,)) "
            "for _ in range(100)]\n[t.start() for t in ts]\n[t.join() for t in ts]\nprint(len(ts))")
    r, j, _ = sv.run(code)
    d = data_of(j)
    return f"exit_code={d.get('exit_code')}, stdout={short(d.get('stdout'))}, " \
           f"error={short(last_line(d.get('error')), 50)}"


def p_memory(sv):
    code = "b = bytearray(1024 * 1024 * 1024)\nfor i in range(0, len(b), 4096): b[i] = 1\nprint('1 GiB ok')"
    r, j, _ = sv.run(code)
    d = data_of(j)
    first = (d.get("error") or "").split("\n")
    return f"exit_code={d.get('exit_code')}, stdout={short(d.get('stdout'))}, " \
           f"error={short(chr(10).join(first[:2]), 60)}"


def p_output(sv):
    r, j, _ = sv.run("import sys\nsys.stdout.write('x' * (10 * 1024 * 1024))")
    d = data_of(j)
    return f"exit_code={d.get('exit_code')}, len(stdout)={len(d.get('stdout') or '')}, " \
           f"error={short(d.get('error'), 60)}"


def p_invalid_utf8(sv):
    r, j, _ = sv.run("import sys\nsys.stdout.buffer.write(b'a\\xffb\\n')")
    return run_summary(r, j, fields=("stdout",))


def p_socket_no_network(sv):
    r, j, _ = sv.run("import socket\nsocket.socket()\nprint('socket made')", enable_network=False)
    d = data_of(j)
    return f"exit_code={d.get('exit_code')}, stdout={short(d.get('stdout'))}, " \
           f"error={short(last_line(d.get('error')), 50)}"


def p_loop_no_network(sv):
    r, j, _ = sv.run("x = 0\nfor i in range(3 * 10**6): x += 1\nprint(x)", enable_network=False)
    return run_summary(r, j, fields=("exit_code", "stdout", "error"))


def p_trivial_no_network(sv):
    r, j, _ = sv.run(TRIVIAL, enable_network=False)
    return run_summary(r, j, fields=("exit_code", "stdout", "error"))


def p_host_loopback(sv):
    code = ("import socket\ns = socket.socket()\ns.settimeout(3)\ntry:\n"
            f"    s.connect(('127.0.0.1', {sv.port}))\n    print('connected to the server port')\n"
            "except OSError as e:\n    print('refused:', e)")
    r, j, _ = sv.run(code)
    return run_summary(r, j, fields=("exit_code", "stdout"))


def p_forbidden_syscall(sv):
    r, j, _ = sv.run("import ctypes\nprint(ctypes.CDLL(None).mount(b'n', b'/', b't', 0, None))")
    return run_summary(r, j, fields=("exit_code", "stdout", "error"))


def p_identity(sv):
    r, j, _ = sv.run("import os, socket\nprint(os.getuid(), os.getcwd(), socket.gethostname())")
    return run_summary(r, j, fields=("stdout",))


def p_root(sv):
    r, j, _ = sv.run("import os\nprint(' '.join(sorted(os.listdir('/'))))")
    return run_summary(r, j, fields=("stdout",))


def p_tmp(sv):
    r, j, _ = sv.run("open('/tmp/probe', 'w').write('x')\nprint('tmp writable')")
    d = data_of(j)
    return f"exit_code={d.get('exit_code')}, stdout={short(d.get('stdout'))}, " \
           f"error={short(last_line(d.get('error')), 50)}"


def p_packages(sv):
    r, j, _ = sv.run("import requests, httpx, jinja2\n"
                     "print(requests.__version__, httpx.__version__, jinja2.__version__)")
    return run_summary(r, j, fields=("stdout", "error"))


def p_preload(sv):
    r, j, _ = sv.run("print('code')", preload="print('preload')")
    return run_summary(r, j, fields=("stdout",))


def p_node_stderr(sv):
    r, j, _ = sv.run("console.log('out'); console.error('careful');", language="nodejs")
    return run_summary(r, j, fields=("exit_code", "stdout", "stderr", "error"))


def p_node_child(sv):
    r, j, _ = sv.run("try { console.log(require('child_process').execSync('echo hi').toString()); }"
                     " catch (e) { console.log('caught', e.code); }", language="nodejs")
    return run_summary(r, j, fields=("exit_code", "stdout", "error"))


def p_unknown_language(sv):
    r, j, _ = sv.run("1", language="cobol")
    return f"HTTP {r.status_code}, body {short(r.text, 60)}"


def p_missing_code(sv):
    r = sv.request("POST", "/v1/sandbox/run", json={"language": "python3"})
    return f"HTTP {r.status_code}, body {short(r.text, 60)}"


def p_empty_code(sv):
    r = sv.request("POST", "/v1/sandbox/run", json={"language": "python3", "code": ""})
    return f"HTTP {r.status_code}, body {short(r.text, 60)}"


def p_bad_json(sv):
    r = sv.request("POST", "/v1/sandbox/run", data=b'{"language": "python3", "code": ',
                   headers={"Content-Type": "application/json"})
    return f"HTTP {r.status_code}, body {short(r.text, 60)}"


def p_network_string(sv):
    r = sv.request("POST", "/v1/sandbox/run",
                   json={"language": "python3", "code": "print(1)", "enable_network": "yes"})
    return f"HTTP {r.status_code}, body {short(r.text, 60)}"


def p_not_found(sv):
    r = sv.request("GET", "/nope", key=False)
    return f"HTTP {r.status_code} {r.headers.get('Content-Type', '-')}, body {short(r.text, 40)}"


def p_wrong_method(sv):
    r = sv.request("GET", "/v1/sandbox/run")
    return f"HTTP {r.status_code}, body {short(r.text, 50)}"


def p_ready_metrics(sv):
    a = sv.request("GET", "/ready", key=False).status_code
    b = sv.request("GET", "/metrics", key=False).status_code
    return f"/ready HTTP {a}, /metrics HTTP {b}"


def p_dependencies(sv):
    r = sv.request("GET", "/v1/sandbox/dependencies?language=python3")
    try:
        d = r.json()
        return f"HTTP {r.status_code}, code {d.get('code')}, data keys: {', '.join(d.get('data') or {})}"
    except ValueError:
        return f"HTTP {r.status_code}, body {short(r.text, 50)}"


def p_traceparent(sv):
    tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    r = sv.request("POST", "/v1/sandbox/run", headers={"traceparent": tp},
                   json={"language": "python3", "code": "1"})
    return f"traceparent in answer: {short(r.headers.get('traceparent', '-'), 60)}"


def p_latency(sv):
    times = []
    for _ in range(12):
        r, j, ms = sv.run(TRIVIAL)
        if data_of(j).get("stdout") == "2\n":
            times.append(ms)
        time.sleep(0.05)
    if not times:
        return "no successful run"
    return f"median {statistics.median(times):.1f} ms over {len(times)} runs"


PROBES = [
    ("health", "GET /health", p_health),
    ("no_key", "POST /v1/sandbox/run without X-Api-Key", p_no_key),
    ("wrong_key", "POST /v1/sandbox/run with a wrong key", p_wrong_key),
    ("data_fields", "`print(1+1)`: fields of `data`", p_data_fields),
    ("stderr_exit0", "`logging.warning(...)`, exit 0", p_stderr_exit0),
    ("exception", "`raise ValueError('bad')`", p_exception),
    ("exit3", "stderr then `sys.exit(3)`", p_exit3),
    ("timeout", "`while True: pass` (worker_timeout 5)", p_timeout),
    ("segfault", "`ctypes.string_at(0)` (SIGSEGV)", p_segfault),
    ("pid", "`os.getpid()`", p_pid),
    ("fork", "`os.fork()`, child prints", p_fork),
    ("subprocess", "`subprocess.run(['/bin/echo','hi'])`", p_subprocess),
    ("threads", "100 threads at once", p_threads),
    ("memory", "touch a 1 GiB bytearray", p_memory),
    ("output", "write 10 MiB to stdout", p_output),
    ("invalid_utf8", "stdout bytes `a\\xffb\\n`", p_invalid_utf8),
    ("socket_no_network", "`socket.socket()`, enable_network false", p_socket_no_network),
    ("trivial_no_network", "`print(1+1)`, enable_network false", p_trivial_no_network),
    ("loop_no_network", "a 0.1 s loop, enable_network false", p_loop_no_network),
    ("host_loopback", "connect to the server's own port on 127.0.0.1",
     p_host_loopback),
    ("forbidden_syscall", "`mount()` through ctypes", p_forbidden_syscall),
    ("identity", "uid, cwd, hostname", p_identity),
    ("root", "`os.listdir('/')`", p_root),
    ("tmp", "write /tmp/probe", p_tmp),
    ("packages", "import requests, httpx, jinja2", p_packages),
    ("preload", "`preload` field (enable_preload false)", p_preload),
    ("node_stderr", "Node.js `console.error`, exit 0", p_node_stderr),
    ("node_child", "Node.js `child_process.execSync`", p_node_child),
    ("unknown_language", "language `cobol`", p_unknown_language),
    ("missing_code", "no `code` field", p_missing_code),
    ("empty_code", "`code: \"\"`", p_empty_code),
    ("bad_json", "truncated JSON body", p_bad_json),
    ("network_string", "`enable_network: \"yes\"` (a string)", p_network_string),
    ("not_found", "GET /nope", p_not_found),
    ("wrong_method", "GET /v1/sandbox/run", p_wrong_method),
    ("ready_metrics", "GET /ready, GET /metrics", p_ready_metrics),
    ("dependencies", "GET /v1/sandbox/dependencies", p_dependencies),
    ("traceparent", "a run with a `traceparent` header", p_traceparent),
    ("latency", "`print(1+1)`, 12 runs one after another", p_latency),
]


# What --first-run waits for: the trivial program, and one that imports
# what Dify's Python and Jinja2 nodes need (the reference copies the
# interpreter's library tree into its chroot after start; modules the
# interpreter loaded before the chroot work at once, others once copied).
FIRST_RUNS = [
    ("first_run", "first correct `print(1+1)` after start", TRIVIAL, "2\n"),
    ("first_import", "first correct `import json, requests, jinja2` after start",
     "import json, requests, jinja2\nprint(json.dumps('ok'))", '"ok"\n'),
]


def first_run(servers, since):
    """Seconds from since until each server first runs each FIRST_RUNS
    program correctly: {(probe, server name): text}."""
    out = {}

    def poll(sv, name, code, expect):
        while time.time() - since < 600:
            try:
                r, j, _ = sv.run(code)
                if data_of(j).get("stdout") == expect:
                    out[name, sv.name] = f"{time.time() - since:.1f} s"
                    return
            except requests.RequestException:
                pass
            time.sleep(0.5)
        out[name, sv.name] = "no run within 600 s"

    threads = [threading.Thread(target=poll, args=(sv, name, code, expect))
               for sv in servers for name, _, code, expect in FIRST_RUNS]
    [t.start() for t in threads]
    [t.join() for t in threads]
    return out


def cell(s):
    return s.replace("|", "\\|").replace("\n", " ")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("ref_url")
    ap.add_argument("ref_key")
    ap.add_argument("lockbox_url")
    ap.add_argument("lockbox_key")
    ap.add_argument("--first-run", action="store_true")
    ap.add_argument("--since", type=float)
    ap.add_argument("--only", help="comma-separated probe names")
    ap.add_argument("--json", help="also write the results to this file")
    a = ap.parse_args()
    since = a.since or time.time()
    servers = [Server("reference", a.ref_url, a.ref_key), Server("lockbox", a.lockbox_url, a.lockbox_key)]
    rows = []
    if a.first_run:
        fr = first_run(servers, since)
        for name, what, _, _ in FIRST_RUNS:
            rows.append((name, what, fr[name, "reference"], fr[name, "lockbox"]))
    only = set(a.only.split(",")) if a.only else None
    for name, what, fn in PROBES:
        if only and name not in only:
            continue
        got = []
        for sv in servers:
            try:
                got.append(fn(sv))
            except Exception as e:  # a probe that breaks says so in its cell
                got.append(f"probe failed: {type(e).__name__}: {e}")
        rows.append((name, what, got[0], got[1]))
        print(f"{name}: done", file=sys.stderr)
    print("| probe | request | dify-sandbox | lockbox | same |")
    print("|---|---|---|---|---|")
    for name, what, ref, lb in rows:
        same = "yes" if ref == lb else "**no**"
        print(f"| {name} | {cell(what)} | {cell(ref)} | {cell(lb)} | {same} |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump([dict(zip(("probe", "request", "reference", "lockbox"), r)) for r in rows],
                      f, indent=1, ensure_ascii=False)


if __name__ == "__main__":
    main()
