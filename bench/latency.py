#!/usr/bin/python3
"""Latency and throughput of lockboxd over HTTP on loopback.

Starts build/lockboxd on a temporary config (as root), then measures p50/p99
of several programs run one after another over a keep-alive connection, and
runs per second with N concurrent clients. Prints a table and one
machine-readable line starting with "BENCH ". Run by hand, never in CI:

    /usr/bin/python3 bench/latency.py [--runs 50] [--clients 4,16]
"""
import argparse
import concurrent.futures
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
    "trivial": "print(1+1)",
    "dify_runner": (
        "def main(a: int, b: int) -> dict:\n    return {'sum': a + b}\n"
        "import json\nfrom base64 import b64decode\n"
        "inputs = json.loads(b64decode('eyJhIjogMSwgImIiOiAyfQ==').decode('utf-8'))\n"
        "output = json.dumps(main(**inputs), indent=4)\n"
        "print(f'<<RESULT>>{output}<<RESULT>>')\n"
    ),
    "import_requests": "import requests\nprint(requests.__version__)",
}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_daemon(port, extra):
    cfg = tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False)
    cfg.write(f"app:\n  port: {port}\n  key: {KEY}\nserver:\n  listen: 127.0.0.1\n"
              f"max_requests: 1000\n{extra}")
    cfg.close()
    log = open(os.path.join(tempfile.gettempdir(), f"lockboxd-bench-{port}.log"), "w")
    proc = subprocess.Popen([os.path.join(ROOT, "build/lockboxd"), "--config", cfg.name],
                            stdout=log, stderr=log)
    url = f"http://127.0.0.1:{port}"
    for _ in range(100):
        try:
            if requests.get(url + "/health", timeout=1).ok:
                return proc, url, cfg.name
        except requests.ConnectionError:
            time.sleep(0.05)
    proc.kill()
    sys.exit("lockboxd did not start; see " + log.name)


def run_once(session, url, code):
    t = time.perf_counter()
    r = session.post(url + "/v1/sandbox/run", headers={"X-Api-Key": KEY},
                     json={"language": "python3", "code": code})
    ms = (time.perf_counter() - t) * 1000
    body = r.json()
    if r.status_code != 200 or body["code"] != 0 or body["data"]["exit_code"] != 0:
        raise RuntimeError(f"run failed: {r.status_code} {body}")
    return ms


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def latency(url, code, runs):
    s = requests.Session()
    run_once(s, url, code)  # warm the page cache
    xs = [run_once(s, url, code) for _ in range(runs)]
    return statistics.median(xs), pct(xs, 99)


def throughput(url, clients, seconds=5.0):
    def client():
        s = requests.Session()
        n, end = 0, time.perf_counter() + seconds
        while time.perf_counter() < end:
            run_once(s, url, PROGRAMS["trivial"])
            n += 1
        return n
    with concurrent.futures.ThreadPoolExecutor(clients) as ex:
        total = sum(ex.map(lambda _: client(), range(clients)))
    return total / seconds


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--clients", default="4,16")
    ap.add_argument("--extra-config", default="", help="YAML appended to the config")
    args = ap.parse_args()
    proc, url, cfg = start_daemon(free_port(), args.extra_config)
    results = {}
    try:
        for name, code in PROGRAMS.items():
            results[name] = latency(url, code, args.runs)
        for c in (int(x) for x in args.clients.split(",")):
            results[f"rps_{c}"] = throughput(url, c)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
        os.unlink(cfg)
    print(f"{'measure':<22}{'p50 ms':>10}{'p99 ms':>10}")
    for name in PROGRAMS:
        p50, p99 = results[name]
        print(f"{name:<22}{p50:>10.1f}{p99:>10.1f}")
    for k, v in results.items():
        if k.startswith("rps_"):
            print(f"{'runs/s, ' + k[4:] + ' clients':<22}{v:>10.1f}")
    print("BENCH " + json.dumps({k: (list(v) if isinstance(v, tuple) else v)
                                 for k, v in results.items()}))


if __name__ == "__main__":
    main()
