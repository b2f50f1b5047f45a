#!/usr/bin/python3
"""Latency and throughput of lockboxd over HTTP on loopback, cold against
warm execution in the same run.

For each mode it starts build/lockboxd on a temporary config (as root),
measures p50/p99 of several programs run one after another over a
keep-alive connection, and runs per second of a trivial program with N
concurrent clients. Requests carry enable_network: true, as Dify's do,
but for trivial_offline and node_offline (the same programs without
network: the difference is the cost of a run's own network namespace).
Prints a table and one machine-readable line starting with "BENCH ". The
client is Python's http.client over keep-alive connections. Run
by hand, never in CI:

    /usr/bin/python3 bench/latency.py [--runs 100] [--clients 4,16] [--modes cold,warm]
                                      [--gap-ms 50]

The latency runs are spaced (--gap-ms, default 50 ms, like the code nodes
of a workflow) so warm pools can refill between them; --gap-ms 0 measures
them back to back, where Node.js's pool (refilled by 60 ms cold starts)
runs dry.
"""
import argparse
import concurrent.futures
import http.client
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

import requests

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KEY = "bench-key"

PROGRAMS = {
    "trivial": ("python3", "print(1+1)"),
    "dify_runner": ("python3", (
        "def main(a: int, b: int) -> dict:\n    return {'sum': a + b}\n"
        "import json\nfrom base64 import b64decode\n"
        "inputs = json.loads(b64decode('eyJhIjogMSwgImIiOiAyfQ==').decode('utf-8'))\n"
        "output = json.dumps(main(**inputs), indent=4)\n"
        "print(f'<<RESULT>>{output}<<RESULT>>')\n"
    )),
    "import_requests": ("python3", "import requests\nprint(requests.__version__)"),
    "node_trivial": ("nodejs", "console.log(1+1)"),
    # the same trivial program without network: the price of a run's own
    # network namespace is the difference to "trivial" (both warm)
    "trivial_offline": ("python3", "print(1+1)", False),
    "node_offline": ("nodejs", "console.log(1+1)", False),
}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_daemon(port, mode, extra):
    cfg = tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False)
    cfg.write(f"app:\n  port: {port}\n  key: {KEY}\nserver:\n  listen: 127.0.0.1\n"
              f"max_requests: 1000\nwarm:\n  mode: {mode}\n{extra}")
    cfg.close()
    log = open(os.path.join(tempfile.gettempdir(), f"lockboxd-bench-{port}.log"), "w")
    proc = subprocess.Popen([os.path.join(ROOT, "build/lockboxd"), "--config", cfg.name],
                            stdout=log, stderr=log)
    url = f"http://127.0.0.1:{port}"
    for _ in range(100):
        try:
            if requests.get(url + "/health", timeout=1).ok:
                time.sleep(2)  # let warm pools fill
                return proc, url, cfg.name, log.name
        except requests.ConnectionError:
            time.sleep(0.05)
    proc.kill()
    sys.exit("lockboxd did not start; see " + log.name)


def connect(url):
    """A keep-alive connection. http.client, not requests: requests spends
    about 1.2 ms of client CPU per call here, which would be counted in
    every figure (and taken from the daemon's two cores under load)."""
    host, port = url.split("//", 1)[1].rsplit(":", 1)
    return http.client.HTTPConnection(host, int(port), timeout=60)


def run_once(conn, program):
    language, code, network = (program + (True,))[:3]
    body = json.dumps({"language": language, "code": code, "enable_network": network})
    t = time.perf_counter()
    conn.request("POST", "/v1/sandbox/run", body=body,
                 headers={"X-Api-Key": KEY, "Content-Type": "application/json"})
    r = conn.getresponse()
    data = r.read()
    ms = (time.perf_counter() - t) * 1000
    out = json.loads(data)
    if r.status != 200 or out["code"] != 0 or out["data"]["exit_code"] != 0:
        raise RuntimeError(f"run failed: {r.status} {out}")
    return ms


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def latency(url, program, runs, gap_ms):
    conn = connect(url)
    run_once(conn, program)  # warm the page cache
    xs = []
    for _ in range(runs):
        time.sleep(gap_ms / 1000)
        xs.append(run_once(conn, program))
    conn.close()
    return statistics.median(xs), pct(xs, 99)


def throughput(url, clients, program, seconds=5.0):
    def client():
        conn = connect(url)
        n, end = 0, time.perf_counter() + seconds
        while time.perf_counter() < end:
            run_once(conn, program)
            n += 1
        conn.close()
        return n
    with concurrent.futures.ThreadPoolExecutor(clients) as ex:
        total = sum(ex.map(lambda _: client(), range(clients)))
    return total / seconds


def measure(mode, args):
    proc, url, cfg, log = start_daemon(free_port(), mode, args.extra_config)
    results = {}
    try:
        for name, program in PROGRAMS.items():
            results[name] = latency(url, program, args.runs, args.gap_ms)
        for c in (int(x) for x in args.clients.split(",")):
            results[f"rps_{c}"] = throughput(url, c, PROGRAMS["trivial"])
            results[f"rps_{c}_offline"] = throughput(url, c, PROGRAMS["trivial_offline"])
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
        os.unlink(cfg)
        if proc.returncode == 0:
            os.unlink(log)  # kept when the daemon did not stop cleanly
        else:
            print(f"lockboxd exited with {proc.returncode}; its log: {log}", file=sys.stderr)
    return results


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--clients", default="4,16")
    ap.add_argument("--modes", default="cold,warm")
    ap.add_argument("--gap-ms", type=float, default=50,
                    help="pause between the latency runs (0: back to back)")
    ap.add_argument("--extra-config", default="", help="YAML appended to the config")
    args = ap.parse_args()
    modes = args.modes.split(",")
    res = {m: measure(m, args) for m in modes}
    head = "".join(f"{m + ' p50':>12}{m + ' p99':>12}" for m in modes)
    print(f"latency: one client, {args.runs} runs each, {args.gap_ms:g} ms apart; "
          f"throughput: trivial runs back to back")
    print(f"{'ms':<22}{head}{'p50 ratio':>12}" if len(modes) == 2 else f"{'ms':<22}{head}")
    for name in PROGRAMS:
        row = "".join(f"{res[m][name][0]:>12.1f}{res[m][name][1]:>12.1f}" for m in modes)
        ratio = (f"{res[modes[0]][name][0] / res[modes[1]][name][0]:>11.1f}x"
                 if len(modes) == 2 else "")
        print(f"{name:<22}{row}{ratio}")
    for k in res[modes[0]]:
        if k.startswith("rps_"):
            row = "".join(f"{res[m][k]:>24.1f}" for m in modes)
            ratio = (f"{res[modes[1]][k] / res[modes[0]][k]:>11.1f}x" if len(modes) == 2 else "")
            label = "runs/s, " + k[4:].replace("_offline", " cl. offline")
            print(f"{label if 'offline' in k else label + ' clients':<22}{row}{ratio}")
    out = {m: {k: (list(v) if isinstance(v, tuple) else v) for k, v in r.items()}
           for m, r in res.items()}
    out["gap_ms"] = args.gap_ms
    print("BENCH " + json.dumps(out))


if __name__ == "__main__":
    main()
