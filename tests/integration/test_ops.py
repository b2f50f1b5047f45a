"""Operations (issue 7, docs/API.md, docs/DEPLOY.md): /metrics, /ready,
structured logs and log rotation, trace ids, failures a client can tell
apart, and the start-up checks."""
import json
import os
import re
import signal
import socket
import subprocess
import threading
import time

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from conftest import KEY, LOCKBOXD, eventually, free_port, scaled

PTRACE = "import ctypes\nctypes.CDLL(None).ptrace(0, 0, None, None)"
SECRET = "zq-secret-7781"  # in code and output: must never reach a log


def anon():
    s = requests.Session()
    s.trust_env = False
    return s


def scrape(daemon, port=None):
    """{(name, frozenset(labels)): value} of a /metrics scrape, parsed by
    the Prometheus client's own parser (so the format is checked too)."""
    r = anon().get(f"http://127.0.0.1:{port or daemon.port}/metrics", timeout=10)
    assert r.status_code == 200, r.text
    assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4"), r.headers
    out = {}
    for fam in text_string_to_metric_families(r.text):
        for s in fam.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def val(m, name, **labels):
    return m.get((name, frozenset(labels.items())), 0.0)


@pytest.fixture(scope="module")
def od(module_daemon_factory):
    return module_daemon_factory(worker_timeout=2, limits={"memory": "64M", "output": "4K"})


# ------------------------------------------------------------------ metrics

RUNS = [
    ("python3", "print(1)", "ok"),
    ("python3", "raise SystemExit(3)", "runtime_error"),
    ("python3", "while True: pass", "timeout"),
    ("python3", PTRACE, "syscall_denied"),
    ("python3", "b = bytearray(200 * 1024 * 1024)\nb[::4096] = b'x' * len(b[::4096])",
     "memory_limit"),
    ("python3", "print('x' * 100000)", "output_limit"),
    ("nodejs", "console.log(1)", "ok"),
    ("nodejs", "process.exit(4)", "runtime_error"),
]


def test_metrics_count_runs_by_language_and_outcome(od):
    before = scrape(od)
    for lang, code, outcome in RUNS:
        d = od.run_data(code, language=lang)
        assert d["status"] == outcome, (code, d)
    after = scrape(od)
    for lang in ("python3", "nodejs"):
        for outcome in ("ok", "runtime_error", "timeout", "syscall_denied", "memory_limit",
                        "output_limit", "error"):
            want = sum(1 for l, _, o in RUNS if l == lang and o == outcome)
            got = (val(after, "lockbox_runs_total", language=lang, outcome=outcome)
                   - val(before, "lockbox_runs_total", language=lang, outcome=outcome))
            assert got == want, (lang, outcome, got, want)
        n = sum(1 for l, _, _ in RUNS if l == lang)
        for h in ("lockbox_run_duration_seconds", "lockbox_run_queue_seconds"):
            moved = (val(after, h + "_count", language=lang)
                     - val(before, h + "_count", language=lang))
            assert moved == n, (h, lang, moved)
            inf = val(after, h + "_bucket", language=lang, le="+Inf")
            assert inf == val(after, h + "_count", language=lang)
    # the timeout run took about worker_timeout: the sum moved by at least that
    grew = (val(after, "lockbox_run_duration_seconds_sum", language="python3")
            - val(before, "lockbox_run_duration_seconds_sum", language="python3"))
    assert grew >= 2.0, grew
    assert (val(after, "lockbox_denied_syscalls_total", syscall="ptrace")
            - val(before, "lockbox_denied_syscalls_total", syscall="ptrace")) == 1
    assert (val(after, "lockbox_http_requests_total", route="/v1/sandbox/run", code="200")
            - val(before, "lockbox_http_requests_total", route="/v1/sandbox/run", code="200")) \
        == len(RUNS)


def test_metrics_count_requests_by_route_and_status(od):
    before = scrape(od)
    anon().post(od.url("/v1/sandbox/run"), json={"language": "python3", "code": "1"},
                headers={"X-Api-Key": "wrong"}, timeout=10)
    od.get("/nope")
    od.get("/nope")
    od.session.put(od.url("/health"), timeout=10)
    od.run("print(1)", language="cobol")
    od.get("/v1/sandbox/dependencies", params={"language": "python3"})
    anon().get(od.url("/health"), timeout=10)
    scrapes = [0]

    def counted():
        # a request is counted once it is over, which may be just after
        # its client read the answer and sent the next one: scrape again
        scrapes[0] += 1
        after = scrape(od)

        def moved(route, code):
            return (val(after, "lockbox_http_requests_total", route=route, code=code)
                    - val(before, "lockbox_http_requests_total", route=route, code=code))

        assert moved("/v1/sandbox/run", "401") == 1
        assert moved("other", "404") == 2
        assert moved("other", "405") == 1
        assert moved("/v1/sandbox/run", "400") == 1
        assert moved("/v1/sandbox/dependencies", "200") == 1
        assert moved("/health", "200") == 1
        # the first scrape, and perhaps later ones of this loop, not this one
        assert 1 <= moved("/metrics", "200") <= scrapes[0], scrapes
    eventually(counted, 5)


def test_metrics_gauges(od):
    m = scrape(od)
    assert val(m, "lockbox_build_info", version="0.1.0") == 1
    for proc in ("http", "jailer"):
        rss = val(m, "lockbox_process_resident_memory_bytes", process=proc)
        assert 1 << 20 < rss < 512 << 20, (proc, rss)
    assert val(m, "lockbox_runs_in_flight") == 0 and val(m, "lockbox_runs_queued") == 0
    assert val(m, "lockbox_runtime_available", language="python3") == 1
    assert val(m, "lockbox_runtime_available", language="nodejs") == 1
    assert val(m, "lockbox_dependencies_last_install_ok") == 1
    assert val(m, "lockbox_dependencies_installed") == 0
    if od.warm:
        assert val(m, "lockbox_pool_target", language="python3") == 4
        assert val(m, "lockbox_pool_target", language="nodejs") == 2
        deadline = time.monotonic() + 20
        while val(m, "lockbox_pool_armed", language="python3", network="true") < 4:
            assert time.monotonic() < deadline, m
            time.sleep(0.2)
            m = scrape(od)
        assert val(m, "lockbox_process_resident_memory_bytes", process="zygote") > 1 << 20
    else:
        assert val(m, "lockbox_pool_armed", language="python3", network="true") == 0


def test_metrics_show_in_flight_and_queued_runs(lockboxd_factory):
    d = lockboxd_factory(max_workers=1)
    threads = [threading.Thread(target=d.run_data, args=("import time; time.sleep(2)",))
               for _ in range(3)]
    for t in threads:
        t.start()
    # one runs, two wait (for a moment at the start all three may be
    # counted as waiting, before the first takes the worker)
    deadline = time.monotonic() + 10
    m = scrape(d)
    while (val(m, "lockbox_runs_queued"), val(m, "lockbox_runs_in_flight")) != (2, 1):
        assert time.monotonic() < deadline, m
        time.sleep(0.05)
        m = scrape(d)
    for t in threads:
        t.join()
    m = scrape(d)
    assert val(m, "lockbox_runs_in_flight") == 0 and val(m, "lockbox_runs_queued") == 0
    # two waited about 2 and 4 s for the one worker
    assert val(m, "lockbox_run_queue_seconds_sum", language="python3") >= 5.0


def test_metrics_can_be_turned_off(lockboxd_factory):
    d = lockboxd_factory(server={"metrics": False})
    r = anon().get(d.url("/metrics"), timeout=10)
    assert r.status_code == 404
    assert r.json() == {"code": -404, "message": "not found", "data": None}


def test_metrics_on_their_own_listener(lockboxd_factory):
    port = free_port()
    d = lockboxd_factory(server={"metrics_listen": f"127.0.0.1:{port}"})
    assert anon().get(d.url("/metrics"), timeout=10).status_code == 404
    d.run_data("print(1)")
    m = scrape(d, port=port)
    assert val(m, "lockbox_runs_total", language="python3", outcome="ok") == 1
    # the metrics listener serves nothing else
    for path in ("/health", "/v1/sandbox/run", "/ready"):
        r = anon().get(f"http://127.0.0.1:{port}{path}", timeout=10)
        assert r.status_code == 404, path


def test_spawn_failures_and_readiness_when_a_pool_cannot_fill(lockboxd_factory):
    # an "interpreter" that exits at once: Node.js runs can never start
    d = lockboxd_factory(nodejs_path="/usr/bin/true")
    m = scrape(d)
    deadline = time.monotonic() + 15
    while val(m, "lockbox_spawn_failures_total") < 1 and d.warm:
        assert time.monotonic() < deadline, m
        time.sleep(0.1)
        m = scrape(d)
    r = anon().get(d.url("/ready"), timeout=10)
    if d.warm:
        assert r.status_code == 503
        assert r.json() == {"code": -503, "message": "not ready: starting the warm pools",
                            "data": None}
    else:
        assert r.status_code == 200
    d.assert_serving()  # Python still runs


# -------------------------------------------------------------------- ready

def test_ready_reports_what_it_checked(od):
    deadline = time.monotonic() + 30
    while (r := anon().get(od.url("/ready"), timeout=10)).status_code != 200:
        assert time.monotonic() < deadline, r.text
        time.sleep(0.1)
    assert r.json() == {"code": 0, "message": "success", "data": {
        "ready": True, "dependencies": "ok", "pools": "warm" if od.warm else "cold",
        "runtimes": {"python3": True, "nodejs": True}}}


def test_ready_without_nodejs(lockboxd_factory):
    d = lockboxd_factory(nodejs_path="/nonexistent/node")
    deadline = time.monotonic() + 30
    while (r := anon().get(d.url("/ready"), timeout=10)).status_code != 200:
        assert time.monotonic() < deadline, r.text
        time.sleep(0.1)
    assert r.json()["data"]["runtimes"] == {"python3": True, "nodejs": False}
    body = d.run("console.log(1)", language="nodejs")
    assert body["code"] == -500 and "nodejs" in body["message"].lower(), body
    # every refusal closes the run's channel in the jailer: no fd is left
    fds = len(os.listdir(f"/proc/{d.pid}/fd"))
    for _ in range(50):
        assert d.run("console.log(1)", language="nodejs")["code"] == -500
    # a pool refill holds a few fds for a moment; a leak holds one per refusal
    def settled():
        now = len(os.listdir(f"/proc/{d.pid}/fd"))
        assert now <= fds + 3, f"{now} fds in the jailer after 50 refusals, {fds} before"
    eventually(settled, scaled(5))


# --------------------------------------------------------------------- logs

def test_json_logs_carry_trace_and_never_code_output_or_key(lockboxd_factory):
    d = lockboxd_factory(server={"log_format": "json"})
    trace = "4bf92f3577b34da6a3ce929d0e0e4736"
    r = d.run_response(f"print('{SECRET}')", headers={
        "traceparent": f"00-{trace}-00f067aa0ba902b7-01"})
    assert r.json()["data"]["stdout"] == SECRET + "\n"
    assert r.headers["traceparent"].split("-")[1] == trace
    d.run_data(f"raise ValueError('{SECRET}')")
    d.stop()
    lines = [ln for ln in d.log.splitlines() if ln.strip()]
    assert len(lines) > 5
    events = []
    for ln in lines:
        obj = json.loads(ln)  # every line is one JSON object
        assert {"time", "level", "proc", "pid", "event"} <= obj.keys(), obj
        assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$", obj["time"])
        events.append(obj)
    runs = [e for e in events if e["event"] == "run" and e.get("trace_id") == trace]
    assert len(runs) == 1, events
    assert runs[0]["lang"] == "python3" and runs[0]["outcome"] == "ok"
    assert isinstance(runs[0]["run_ms"], int) and isinstance(runs[0]["exit_code"], int)
    reqs = [e for e in events if e["event"] == "http.request" and e.get("trace_id") == trace]
    assert reqs and reqs[0]["route"] == "/v1/sandbox/run" and reqs[0]["status"] == 200
    assert SECRET not in d.log and KEY not in d.log


def test_logfmt_is_the_default(daemon):
    lines = [ln for ln in daemon.log.splitlines() if ln.startswith("time=")]
    assert lines
    for ln in lines[:50]:
        assert re.match(r"^time=\S+ level=(debug|info|warn|error) proc=\w+ pid=\d+ "
                        r"(trace_id=[0-9a-f]{32} )?event=\S+", ln), ln


def test_log_file_is_reopened_on_sighup(lockboxd_factory, tmp_path):
    logdir = str(tmp_path / "logs")
    d = lockboxd_factory(log_path=logdir)
    path = os.path.join(logdir, "lockboxd.log")
    d.run_data("print(1)")
    assert "event=run " in open(path).read()
    os.rename(path, path + ".1")
    d.proc.send_signal(signal.SIGHUP)
    deadline = time.monotonic() + 10
    while not os.path.exists(path) or "proc=http" not in open(path).read():
        assert time.monotonic() < deadline, d.log[-2000:]
        time.sleep(0.05)
    trace = "0af7651916cd43dd8448eb211c80319c"
    r = d.run_response("print(2)", headers={"traceparent": f"00-{trace}-b7ad6b7169203331-01"})
    assert r.status_code == 200
    d.stop()
    new = open(path).read()
    assert f"trace_id={trace} event=run " in new  # the HTTP process writes to the new file
    assert "proc=jailer" in new and "event=log.reopened" in new
    assert f"trace_id={trace}" not in open(path + ".1").read()
    assert d.proc.returncode == 0
    for p in (path, path + ".1"):
        os.unlink(p)
    os.rmdir(logdir)


# ---------------------------------------------------- failures told apart

def test_wrong_key_full_queue_and_timeout_are_distinct(lockboxd_factory):
    d = lockboxd_factory(max_workers=1, max_requests=1, worker_timeout=1)
    r = anon().post(d.url("/v1/sandbox/run"), json={"language": "python3", "code": "1"},
                    headers={"X-Api-Key": "wrong"}, timeout=10)
    assert r.status_code == 401 and r.json()["code"] == -401
    assert "traceparent" in r.headers
    t = threading.Thread(target=d.run_data, args=("import time; time.sleep(0.9)",))
    t.start()
    deadline = time.monotonic() + 5
    while val(scrape(d), "lockbox_runs_in_flight") < 1:  # the slow run holds the slot
        assert time.monotonic() < deadline
        time.sleep(0.01)
    r = d.run_response("print(1)")
    t.join()
    assert r.status_code == 503
    assert r.json() == {"code": -503, "message": "Too many requests", "data": None}
    assert "traceparent" in r.headers
    r = d.run_response("while True: pass")
    assert r.status_code == 200
    data = r.json()["data"]
    assert data["status"] == "timeout" and "error: timeout" in data["error"]


# ------------------------------------------------------------ start-up checks

def start_fails(args, env=None, prefix=()):
    """Run lockboxd to its exit; (exit code, stderr)."""
    p = subprocess.run([*prefix, LOCKBOXD, *args], capture_output=True, timeout=30,
                       env=env or {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"})
    return p.returncode, p.stderr.decode()


def write_config(tmp_path, text):
    path = tmp_path / "config.yaml"
    path.write_text(text)
    return str(path)


def test_refuses_port_in_use(tmp_path):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(1)
    port = s.getsockname()[1]
    cfg = write_config(tmp_path, f"app:\n  port: {port}\nserver:\n  listen: 127.0.0.1\n")
    rc, err = start_fails(["--config", cfg])
    s.close()
    assert rc == 1
    assert err.strip().splitlines() == [
        f"lockboxd: cannot listen on 127.0.0.1 port {port} (app.port): Address already in use; "
        "another process (another lockboxd, or dify-sandbox?) holds it"], err


def test_refuses_missing_interpreter(tmp_path):
    cfg = write_config(tmp_path, f"app:\n  port: {free_port()}\npython_path: /nowhere/python3\n")
    rc, err = start_fails(["--config", cfg])
    assert rc == 1
    assert err.strip().splitlines()[-1].startswith("lockboxd: /nowhere/python3"), err


def test_refuses_without_root(_session_tmp):
    # readable by nobody: the session directory is 0755
    cfg = os.path.join(_session_tmp, "nobody.yaml")
    with open(cfg, "w") as f:
        f.write(f"app:\n  port: {free_port()}\n")
    os.chmod(cfg, 0o644)
    rc, err = start_fails(["--config", cfg],
                          prefix=("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"))
    assert rc == 1
    assert err.strip().splitlines() == [
        "lockboxd: must run as root: it creates namespaces and cgroups and switches runs to "
        "sandbox UIDs"], err


def test_refuses_without_capabilities(tmp_path):
    cfg = write_config(tmp_path, f"app:\n  port: {free_port()}\n")
    rc, err = start_fails(["--config", cfg],
                          prefix=("setpriv", "--bounding-set=-sys_admin,-kill", "--"))
    assert rc == 1
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("lockboxd: missing capabilities: CAP_SYS_ADMIN (namespaces and "
                               "mounts), CAP_KILL (stopping runs);"), err


def test_warns_about_the_public_key_beyond_loopback(lockboxd_factory):
    d = lockboxd_factory(app={"key": "dify-sandbox"}, server={"listen": "0.0.0.0"})
    assert "event=security.default_key" in d.log
    assert "anyone who reaches port" in d.log
    d2 = lockboxd_factory(app={"key": "dify-sandbox"})  # the fixture's 127.0.0.1
    assert "security.default_key" not in d2.log


def test_refuses_a_uid_range_another_daemon_holds(lockboxd_factory, tmp_path):
    """Two daemons on one host must not hand out the same UIDs: the second
    one, whose range overlaps the first's, refuses to start and says whose
    range it is; the first keeps serving."""
    a = lockboxd_factory()
    lo, hi = a.uid_min + 50, a.uid_min + 149
    cfg = write_config(tmp_path, f"app:\n  port: {free_port()}\nserver:\n  listen: 127.0.0.1\n"
                                 f"jail:\n  uid_min: {lo}\n  uid_max: {hi}\n")
    rc, err = start_fails(["--config", cfg])
    assert rc == 1
    assert err.strip().splitlines() == [
        f"lockboxd: jail.uid_min..jail.uid_max {lo}-{hi} overlaps {a.uid_min}-{a.uid_max} of "
        f"the lockboxd running as pid {a.pid}: give every lockboxd on a host a range of its "
        "own"], err
    assert a.run_data("print('still here')")["stdout"] == "still here\n"


def test_refuses_a_server_user_inside_the_uid_range(tmp_path):
    """The range's UIDs are the runs' and pip's: the HTTP process's account
    (nobody, 65534, here inside 65000-65599) must not be one of them."""
    cfg = write_config(tmp_path, f"app:\n  port: {free_port()}\nserver:\n  listen: 127.0.0.1\n"
                                 "jail:\n  uid_min: 65000\n  uid_max: 65599\n"
                                 f"dependencies:\n  layer_dir: {tmp_path}/layers\n")
    rc, err = start_fails(["--config", cfg])
    assert rc == 1
    assert err.strip().splitlines()[-1] == (
        "lockboxd: server.user 'nobody' has uid 65534, inside jail.uid_min..jail.uid_max "
        "(65000..65599): give it an account outside the range"), err


def test_refuses_a_wheel_dir_pip_cannot_read(tmp_path):
    """A root-only wheel directory would fail every install with
    'Permission denied': found at start-up, with what to change."""
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    os.chmod(wheels, 0o700)
    cfg = write_config(tmp_path, f"app:\n  port: {free_port()}\nserver:\n  listen: 127.0.0.1\n"
                                 f"dependencies:\n  wheel_dir: {wheels}\n"
                                 f"  layer_dir: {tmp_path}/layers\n")
    rc, err = start_fails(["--config", cfg])
    assert rc == 1
    assert err.strip().splitlines()[-1] == (
        f"lockboxd: dependencies.wheel_dir {wheels} cannot be read by pip, which runs as uid "
        "10999 (jail.uid_max, an identity of its own, in no group): make it and every "
        "directory above it readable and searchable by others (chmod o+rx)"), err
