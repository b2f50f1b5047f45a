"""The daemon's life (docs/DEPLOY.md, docs/ARCHITECTURE.md): --check-config, start-up
errors, environment overrides, SIGTERM with runs in flight, recovery
after a crash. Each test has daemons of its own."""
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

from conftest import (LOCKBOXD, daemon_cgroups, eventually, processes_in_uid_range, raw_post,
                      scaled)


MARK = "open('/tmp/.running', 'w').close()\n"


def wait_for_run_in_progress(d, timeout=10.0):
    """Block until a run that began with MARK is executing: a process of
    d's sandbox UID range whose own /tmp holds the marker. (Processes of
    the warm pools live in that range too, waiting for code, so the UID
    alone does not tell a run from an armed one.)"""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for pid, _, _ in processes_in_uid_range(d.uid_min, d.uid_max):
            if os.path.exists(f"/proc/{pid}/root/tmp/.running"):
                return
        time.sleep(0.01)
    pytest.fail("the run never started")


def check_config(tmp_path, text, name="config.yaml"):
    path = tmp_path / name
    path.write_text(text)
    p = subprocess.run([LOCKBOXD, "--check-config", "--config", str(path)],
                       capture_output=True, text=True, timeout=20,
                       env={"PATH": "/usr/bin:/bin"})
    return p, str(path)


# ----------------------------------------------------------- check-config

def test_check_config_good(tmp_path):
    p, path = check_config(tmp_path, "app:\n  port: 8194\n  key: abc\nmax_workers: 2\n"
                                     "limits:\n  memory: 256M\nallowed_syscalls: [personality]\n")
    assert p.returncode == 0, p.stderr
    assert "valid" in p.stdout


def test_check_config_unknown_key(tmp_path):
    p, path = check_config(tmp_path, "app:\n  port: 8194\n  bogus: 3\n")
    assert p.returncode != 0
    assert f"{path}:3:3: app.bogus: unknown key" in p.stderr, p.stderr
    assert p.stderr.count("\n") == 1, p.stderr


def test_check_config_unknown_top_level_key(tmp_path):
    p, path = check_config(tmp_path, "max_workers: 2\nmax_wrokers: 3\n")
    assert p.returncode != 0
    assert re.search(re.escape(path) + r":2:1: max_wrokers: unknown key", p.stderr), p.stderr


@pytest.mark.parametrize("text,line,key", [
    ("max_workers: 0\n", 1, "max_workers"),
    ("worker_timeout: soon\n", 1, "worker_timeout"),
    ("app:\n  port: 70000\n", 2, "app.port"),
    ("limits:\n  memory: lots\n", 2, "limits.memory"),
    ("enable_network: maybe\n", 1, "enable_network"),
    ("allowed_syscalls: [mount]\n", 1, "allowed_syscalls"),
    ("allowed_syscalls: [no_such_call]\n", 1, "allowed_syscalls"),
], ids=["below_min", "not_int", "port_range", "bad_size", "bad_bool", "never_allowed",
        "unknown_syscall"])
def test_check_config_bad_value(tmp_path, text, line, key):
    p, path = check_config(tmp_path, text)
    assert p.returncode != 0
    assert re.search(re.escape(path) + rf":{line}:\d+: {re.escape(key)}: \S", p.stderr), p.stderr


def test_check_config_deprecated_key_warns(tmp_path):
    p, path = check_config(tmp_path, "python_lib_path: /usr/lib/python3\n")
    assert p.returncode == 0, p.stderr
    assert "python_lib_path" in p.stderr


def test_check_config_missing_file(tmp_path):
    p = subprocess.run([LOCKBOXD, "--check-config", "--config", str(tmp_path / "nope.yaml")],
                       capture_output=True, text=True, timeout=20)
    assert p.returncode != 0
    assert "nope.yaml" in p.stderr


def test_daemon_refuses_to_start_on_bad_config(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text("app:\n  port: 18999\nmax_requests: -1\n")
    p = subprocess.run([LOCKBOXD, "--config", str(path)], capture_output=True, text=True,
                       timeout=20)
    assert p.returncode != 0
    assert f"{path}:3:" in p.stderr and "max_requests" in p.stderr, p.stderr


# -------------------------------------------------------------- env vars

def test_api_key_from_environment_overrides_config(lockboxd_factory):
    d = lockboxd_factory(_env={"API_KEY": "from-env-key"})
    s = requests.Session()
    s.trust_env = False
    body = {"language": "python3", "code": "print('env')"}
    r = s.post(d.url("/v1/sandbox/run"), json=body, headers={"X-Api-Key": d.key}, timeout=30)
    assert r.status_code == 401
    r = s.post(d.url("/v1/sandbox/run"), json=body, headers={"X-Api-Key": "from-env-key"},
               timeout=30)
    assert r.status_code == 200 and r.json()["data"]["stdout"] == "env\n"
    # and the key reaches neither the run nor the log
    r = s.post(d.url("/v1/sandbox/run"), headers={"X-Api-Key": "from-env-key"}, timeout=30,
               json={"language": "python3", "code": "import os\nprint(dict(os.environ))"})
    assert "from-env-key" not in r.text
    assert "from-env-key" not in d.log


# --------------------------------------------------------------- SIGTERM

def test_sigterm_idle_exits_zero_quickly(lockboxd_factory):
    d = lockboxd_factory()
    d.run_data("print(1)")
    t0 = time.monotonic()
    d.stop()  # asserts exit 0 and that nothing is left behind
    assert time.monotonic() - t0 < scaled(3)


def test_sigterm_lets_the_run_in_flight_finish(lockboxd_factory):
    d = lockboxd_factory()
    result = {}

    def go():
        t0 = time.monotonic()
        r = d.run_response(MARK + "import time\nprint('started', flush=True)\ntime.sleep(2)\n"
                           "print('finished')", session=d.new_session())
        result["status"] = r.status_code
        result["body"] = r.json()
        result["elapsed"] = time.monotonic() - t0

    t = threading.Thread(target=go)
    t.start()
    wait_for_run_in_progress(d)
    t0 = time.monotonic()
    d.stop()  # SIGTERM; exit 0 within 20 s; nothing left behind
    stop_took = time.monotonic() - t0
    t.join(30)
    assert result.get("status") == 200, result
    body = result["body"]
    assert body["code"] == 0, body
    assert body["data"]["stdout"] == "started\nfinished\n"
    assert body["data"]["exit_code"] == 0 and body["data"]["status"] == "ok"
    assert result["elapsed"] >= 1.9
    assert stop_took >= 1.0, "the daemon exited before its run finished"


def test_sigterm_still_sends_a_finished_runs_whole_answer(lockboxd_factory):
    """The run is over, but its answer (4 MB) is still on its way to a
    client that reads slowly when SIGTERM comes: the daemon must finish
    sending it before it closes the connection and exits."""
    d = lockboxd_factory()
    n = 4 * 1024 * 1024
    body = json.dumps({"language": "python3",
                       "code": f"import sys\nsys.stdout.write('x' * {n})"}).encode()
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.connect(("127.0.0.1", d.port))
        s.sendall(raw_post("/v1/sandbox/run", body, close=False))
        first = s.recv(1024)  # the answer has started: the run is over
        assert first.startswith(b"HTTP/1.1 200"), first
        kids = d.sigterm()
        time.sleep(0.5)  # the daemon is stopping while most of the answer is unsent
        s.settimeout(scaled(30))
        rest = [first]
        while chunk := s.recv(65536):
            rest.append(chunk)
    raw = b"".join(rest)
    head, _, payload = raw.partition(b"\r\n\r\n")
    length = int(re.search(rb"(?i)content-length: *(\d+)", head).group(1))
    assert len(payload) == length, (len(payload), length)
    data = json.loads(payload)["data"]
    assert len(data["stdout"]) == n and data["status"] == "ok", {k: v for k, v in data.items()
                                                                 if k != "stdout"}
    d.finish_stop(kids)


def test_sigterm_refuses_new_work_while_draining(lockboxd_factory):
    d = lockboxd_factory()
    keepalive = d.new_session()
    d.run_data("print('warm')", session=keepalive)
    t = threading.Thread(target=lambda: d.run(MARK + "import time\ntime.sleep(2)",
                                              session=d.new_session()))
    t.start()
    wait_for_run_in_progress(d)
    d.proc.send_signal(signal.SIGTERM)
    time.sleep(0.3)
    # a new connection is refused; a request on a kept-alive connection
    # gets 503 "server is shutting down" (or the connection is closed)
    anon = requests.Session()
    anon.trust_env = False
    with pytest.raises(requests.ConnectionError):
        anon.get(d.url("/health"), timeout=5)
    try:
        r = d.run_response("print('late')", session=keepalive)
        assert r.status_code == 503, r.text
        assert r.json() == {"code": -503, "message": "server is shutting down", "data": None}
    except requests.ConnectionError:
        pass
    t.join(30)
    rc = d.proc.wait(20)
    assert rc == 0, d.log[-3000:]
    d.stopped = True
    d.log_file.close()
    d.assert_nothing_left([])


def test_sigterm_with_runaway_run_still_exits_zero(lockboxd_factory):
    d = lockboxd_factory(worker_timeout=2)
    result = {}
    t = threading.Thread(target=lambda: result.update(
        r=d.run(MARK + "while True: pass", session=d.new_session())))
    t.start()
    wait_for_run_in_progress(d)
    t0 = time.monotonic()
    d.stop()
    assert time.monotonic() - t0 < scaled(20)
    t.join(30)
    assert result["r"]["code"] == 0, result
    assert result["r"]["data"]["status"] == "timeout"


def test_sigkilled_daemon_leftovers_are_reaped_by_the_next(lockboxd_factory):
    """A crashed daemon's runs and cgroups do not leak: the next daemon on
    the host removes them (nothing leaks)."""
    a = lockboxd_factory()
    slots, own = daemon_cgroups(a.pid)
    cg = list(slots.values()) + own
    def doomed():
        try:
            a.run(MARK + "import time\ntime.sleep(8)", session=a.new_session())
        except requests.ConnectionError:
            pass  # expected: the daemon dies under it

    t = threading.Thread(target=doomed, daemon=True)
    t.start()
    wait_for_run_in_progress(a)
    a.stopped = True  # we kill it ourselves
    a.proc.send_signal(signal.SIGKILL)
    a.proc.wait(10)
    a.log_file.close()
    b = lockboxd_factory()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and (
            processes_in_uid_range(a.uid_min, a.uid_max) or any(map(os.path.exists, cg))):
        time.sleep(0.05)
    assert not processes_in_uid_range(a.uid_min, a.uid_max)
    for path in cg:
        assert not os.path.exists(path), f"cgroup of the killed daemon left: {path}"
    b.assert_serving()


# ------------------------------------------------------------ operations

def test_http_process_is_unprivileged(daemon):
    from conftest import children_of, proc_status
    kids = [k for k in children_of(daemon.pid)
            if (proc_status(k) or {}).get("Name") == "lockboxd"]
    assert len(kids) == 1, kids
    st = proc_status(kids[0])
    uids = [int(x) for x in st["Uid"].split()]
    assert uids == [65534] * 4, st["Uid"]  # server.user default: nobody
    assert st["CapEff"] == "0000000000000000" and st["CapPrm"] == "0000000000000000"
    assert st["NoNewPrivs"] == "1"
    assert st["Groups"].strip() == "", st["Groups"]
    assert st["Seccomp"] == "2"  # its own filter: no exec, no fork, no ptrace
    assert st["CapBnd"] == "0000000000000000", st["CapBnd"]  # nothing to regain, ever


LOGFMT = re.compile(r'^time=\S+ level=(debug|info|warn|error) proc=\w+ pid=\d+ '
                    r'(trace_id=[0-9a-f]{32} )?event=[\w.]+( |$)')


def test_log_is_logfmt_one_line_per_event(daemon):
    daemon.run_data("print('x')")
    daemon.run("import os\nos.fork()")
    lines = daemon.log.splitlines()
    assert lines
    bad = [l for l in lines if not LOGFMT.match(l)]
    assert not bad, bad[:5]


def test_clean_start_logs_no_warnings(lockboxd_factory):
    """A valid configuration on a supported host starts without warnings
    (an operator alerting on level=warn must not be paged at every start)."""
    d = lockboxd_factory()
    d.assert_serving()
    warns = [l for l in d.log.splitlines() if "level=warn" in l or "level=error" in l]
    assert not warns, warns


def test_a_message_off_the_menu_ends_the_http_process(lockboxd_factory):
    """The jailer serves a closed menu on its control channel: a message that
    is not on it means the HTTP process is broken or not ours any more. The
    jailer kills it, kills every run and exits 1 (for the supervisor to
    restart it clean). The message is planted from outside: a copy of the
    HTTP process's end of the channel (pidfd_getfd), as a hijacked HTTP
    process would send it."""
    import ctypes
    from conftest import children_of, proc_status
    d = lockboxd_factory()
    http = [k for k in children_of(d.pid) if (proc_status(k) or {}).get("Name") == "lockboxd"][0]
    # its SEQPACKET unix sockets: the control channel (no log file, no run
    # now); a channel of a passing call may show beside it, or close while
    # it is looked at: looked at again until the control channel is alone
    def link(fd):
        try:
            return os.readlink(f"/proc/{http}/fd/{fd}")
        except FileNotFoundError:
            return ""

    def control_channel():
        seqpacket = set()
        with open("/proc/net/unix") as f:
            for line in f.read().splitlines()[1:]:
                parts = line.split()
                if parts[4] == "0005":
                    seqpacket.add(parts[6])
        ctrl = [int(fd) for fd in os.listdir(f"/proc/{http}/fd")
                if link(fd).removeprefix("socket:[").rstrip("]") in seqpacket]
        assert len(ctrl) == 1, ctrl
        return ctrl
    ctrl = eventually(control_channel, scaled(10))
    libc = ctypes.CDLL(None, use_errno=True)
    pidfd = os.pidfd_open(http)
    fd = libc.syscall(438, pidfd, ctrl[0], 0)  # pidfd_getfd
    assert fd >= 0, ctypes.get_errno()
    os.close(pidfd)
    os.write(fd, b"\x00" * 64)  # no magic, no type, no fd
    os.close(fd)
    d.stopped = True  # it stops by itself
    assert d.proc.wait(scaled(20)) == 1, d.log[-3000:]
    d.log_file.close()
    assert "event=ipc.bad_message" in d.log and "the HTTP process is killed" in d.log, d.log
    assert not processes_in_uid_range(d.uid_min, d.uid_max)
