"""Fixtures that drive the real lockboxd on loopback.

`lockboxd_factory` starts daemons with a temporary YAML config (free port,
a UID range of their own, a temporary requirements file and dependency layer directory) and, on teardown,
stops them with SIGTERM and checks that nothing is left behind: processes,
cgroups, mounts, files. `daemon` is the shared default daemon, checked to
be alive and idle (no process of its UID range) after every test.
"""
import glob
import itertools
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

import pytest
import requests

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "tests"))
from hostcheck import (children_of, daemon_cgroups, files_owned_in_range,  # noqa: E402,F401
                       lockbox_mounts, proc_status, processes_in_uid_range)
LOCKBOXD = os.environ.get("LOCKBOXD") or os.path.join(REPO, "build", "lockboxd")
KEY = "integration-test-key-7f3a"
# No package by default: pip stays idle; tests/integration/test_deps.py
# installs wheels it builds itself.
REQUIREMENTS = "# nothing to install\n"
# Every daemon gets 100 UIDs of its own; two daemons never share one. The
# base moves with our pid so two suites running at once do not collide;
# LOCKBOX_TEST_UID_BASE fixes it instead (make test's lanes, whose pids are
# too close for that: see docs/TESTING.md).
UID_BASE = int(os.environ.get("LOCKBOX_TEST_UID_BASE") or 20000 + (os.getpid() % 4000) * 2000)
# second octet of the daemons' run subnets (10.N.k.0/24): a second suite run
# at the same time on this host (another checkout) sets another base
NET_OCTET = int(os.environ.get("LOCKBOX_TEST_NET_OCTET", "192"))
_uid_blocks = itertools.count()
# LOCKBOX_TEST_TIME_SCALE (default 1) stretches every daemon's run time
# limit (worker_timeout) and the tests' bounds on elapsed time, for slow
# machines such as the emulated VM of tests/vm/cgroup2.
TIME_SCALE = float(os.environ.get("LOCKBOX_TEST_TIME_SCALE") or 1)


def scaled(seconds):
    return seconds * TIME_SCALE


def worker_timeout_for(seconds):
    """The worker_timeout of a daemon configured with `seconds`: scaled as
    write_config scales it, in whole seconds."""
    return seconds if TIME_SCALE == 1 else max(1, round(scaled(seconds)))


# Tests that rely on runs overlapping prove it: each run prints the
# system-wide monotonic clock (CLOCK_MONOTONIC; runs get no time namespace,
# so it is the same clock in every run) on a line "@start T" first and
# "@end T" last, and the test checks that all the intervals share a moment.
PY_CLOCK = "__import__('time').clock_gettime(__import__('time').CLOCK_MONOTONIC)"
JS_CLOCK = "Number(process.hrtime.bigint()) / 1e9"  # libuv's hrtime is CLOCK_MONOTONIC


def py_clocked(code):
    """Python code between its "@start" and "@end" clock lines."""
    return f"print('@start', {PY_CLOCK}, flush=True)\n{code}\nprint('@end', {PY_CLOCK})\n"


def js_clocked(code):
    """Node.js code between its clock lines; the end line is printed at
    exit, after any timer the code set."""
    return (f"console.log('@start', {JS_CLOCK});\n"
            f"process.on('exit', () => console.log('@end', {JS_CLOCK}));\n{code}\n")


def take_interval(data):
    """Remove the clock lines from a run's data["stdout"]; (start, end)."""
    lines = data["stdout"].splitlines(keepends=True)
    marks = {l.split()[0]: float(l.split()[1]) for l in lines if l.startswith("@")}
    assert set(marks) == {"@start", "@end"}, data
    data["stdout"] = "".join(l for l in lines if not l.startswith("@"))
    return marks["@start"], marks["@end"]


def assert_overlapped(intervals):
    """Every run was running at one same moment: the last start comes
    before the first end."""
    assert intervals, intervals
    last_start = max(s for s, _ in intervals)
    first_end = min(e for _, e in intervals)
    assert last_start < first_end, f"runs did not overlap: {sorted(intervals)}"


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def yaml_scalar(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    return '"' + str(v).replace("\\", "\\\\").replace('"', '\\"') + '"'


def to_yaml(obj, indent=0):
    """Tiny YAML emitter for nested dicts of scalars and lists of scalars."""
    pad = "  " * indent
    lines = []
    for k, v in obj.items():
        if isinstance(v, dict):
            lines.append(f"{pad}{k}:")
            lines.append(to_yaml(v, indent + 1))
        elif isinstance(v, list):
            lines.append(f"{pad}{k}: [" + ", ".join(yaml_scalar(x) for x in v) + "]")
        else:
            lines.append(f"{pad}{k}: {yaml_scalar(v)}")
    return "\n".join(lines)


def merge(base, extra):
    out = dict(base)
    for k, v in extra.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = merge(out[k], v)
        else:
            out[k] = v
    return out


def eventually(check, timeout):
    """Call check() until it stops raising AssertionError; the last failure
    is raised after timeout seconds."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return check()
        except AssertionError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.01)


def raw_post(path, body, content_type="application/json", extra=b"", close=True):
    """The bytes of an authenticated POST of body (bytes), for tests that
    write HTTP themselves; close=False keeps the connection alive."""
    return (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Api-Key: {KEY}\r\n"
            f"Content-Type: {content_type}\r\nContent-Length: {len(body)}\r\n"
            + ("Connection: close\r\n" if close else "")).encode() + extra + b"\r\n" + body


class Daemon:
    def __init__(self, config, workdir, env=None, pool=100, requirements=REQUIREMENTS):
        self.k = next(_uid_blocks)
        self.uid_min = UID_BASE + 100 * self.k
        self.uid_max = self.uid_min + min(pool, 100) - 1
        self.workdir = workdir
        self.port = None
        self.proc = None
        self.key = KEY
        self.requirements_path = os.path.join(workdir, "python-requirements.txt")
        self.requirements = requirements  # None: no file at all
        self.layer_dir = os.path.join(workdir, "layers")
        self.config_path = os.path.join(workdir, "config.yaml")
        self.log_path = os.path.join(workdir, "lockboxd.stderr")
        self.extra_env = env or {}
        self.session = None
        self.cgroup_dirs, self.cgroup_own = {}, []
        self.stopped = False
        self.kid_names = {}  # pid: name of each child at SIGTERM (sigterm())
        # LOCKBOX_TEST_MODE=cold runs the whole suite against cold daemons.
        mode = (config.get("warm") or {}).get("mode") or os.environ.get("LOCKBOX_TEST_MODE", "warm")
        self.base_config = merge({"warm": {"mode": mode}}, config)
        self.warm = mode == "warm"
        warm = self.base_config.get("warm", {})
        # armed processes at most: each language's pool, for both network modes
        self.armed_max = 2 * (warm.get("python_pool", 4) + warm.get("nodejs_pool", 2)) if self.warm else 0

    # ------------------------------------------------------------------ start
    def write_config(self):
        cfg = {
            "app": {"port": self.port, "key": KEY},
            "server": {"listen": "127.0.0.1"},
            "jail": {"uid_min": self.uid_min, "uid_max": self.uid_max},
            # each daemon its own run subnet; DNS relayed to nowhere (the
            # loopback, where nothing answers) unless a test names the
            # lab's resolver: a test daemon never asks the host's
            "network": {"subnet": f"10.{NET_OCTET + (self.k // 256) % 16}.{self.k % 256}.0/24",
                        "dns_servers": ["127.0.0.1"]},
            "dependencies": {"python_requirements": self.requirements_path,
                             "layer_dir": self.layer_dir},
        }
        cfg = merge(cfg, self.base_config)
        if TIME_SCALE != 1:
            cfg["worker_timeout"] = worker_timeout_for(cfg.get("worker_timeout", 5))
        with open(self.config_path, "w") as f:
            f.write(to_yaml(cfg) + "\n")

    def start(self):
        assert os.access(LOCKBOXD, os.X_OK), f"{LOCKBOXD} missing: run make build/lockboxd"
        stray = processes_in_uid_range(self.uid_min, self.uid_max)
        assert not stray, f"UID range {self.uid_min}-{self.uid_max} already in use: {stray}"
        if self.requirements is not None:
            with open(self.requirements_path, "w") as f:
                f.write(self.requirements)
        self.mounts_before = lockbox_mounts()
        # Clean environment: the reference's override variables (API_KEY,
        # SANDBOX_PORT, ...) must not leak in from the caller's shell.
        env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
               "LANG": "C.UTF-8"}
        env.update(self.extra_env)
        for attempt in range(5):
            self.port = free_port()
            self.write_config()
            self.log_file = open(self.log_path, "wb")
            self.proc = subprocess.Popen([LOCKBOXD, "--config", self.config_path],
                                         cwd=self.workdir, env=env,
                                         stdin=subprocess.DEVNULL,
                                         stdout=self.log_file, stderr=self.log_file)
            if self.wait_healthy():
                break
            rc = self.proc.poll()
            if rc is not None and "cannot listen" in self.log:
                self.log_file.close()
                continue  # someone took the port between probe and bind
            self.kill_hard()
            pytest.fail(f"lockboxd did not become healthy (rc={rc}):\n{self.log}")
        else:
            pytest.fail(f"lockboxd could not bind a port:\n{self.log}")
        self.session = self.new_session()
        self.cgroup_dirs, self.cgroup_own = daemon_cgroups(self.pid)
        for d in list(self.cgroup_dirs.values()) + self.cgroup_own:
            assert os.path.isdir(d), f"daemon's cgroup {d} missing:\n{self.log}"
        return self

    def wait_healthy(self, timeout=10.0):
        deadline = time.monotonic() + scaled(timeout)
        probe = requests.Session()
        probe.trust_env = False
        try:
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    return False
                try:
                    r = probe.get(self.url("/health"), timeout=scaled(1))
                    if r.status_code == 200:
                        # still ours (not another server that won the port)?
                        time.sleep(0.05)
                        return self.proc.poll() is None
                except requests.RequestException:
                    pass
                time.sleep(0.02)
            return False
        finally:
            probe.close()

    # ---------------------------------------------------------------- clients
    @property
    def pid(self):
        return self.proc.pid

    @property
    def log(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def url(self, path):
        return f"http://127.0.0.1:{self.port}{path}"

    def new_session(self):
        s = requests.Session()
        s.trust_env = False  # no proxies from the environment
        s.headers["X-Api-Key"] = KEY
        return s

    def post(self, path, session=None, **kw):
        kw.setdefault("timeout", 60)
        return (session or self.session).post(self.url(path), **kw)

    def get(self, path, session=None, **kw):
        kw.setdefault("timeout", 60)
        return (session or self.session).get(self.url(path), **kw)

    def run_response(self, code, session=None, headers=None, **fields):
        body = {"language": "python3", "code": code, "preload": "", "enable_network": False}
        body.update(fields)
        return self.post("/v1/sandbox/run", session=session, json=body, headers=headers)

    def run(self, code, session=None, **fields):
        """POST /v1/sandbox/run and return the parsed JSON envelope."""
        r = self.run_response(code, session=session, **fields)
        assert r.headers.get("Content-Type", "").startswith("application/json"), r.text
        return r.json()

    def run_data(self, code, **fields):
        """Run and return `data` after checking the envelope says success."""
        r = self.run(code, **fields)
        assert r["code"] == 0 and r["message"] == "success", r
        return r["data"]

    def assert_serving(self):
        """/health answers and a normal run works."""
        assert self.proc.poll() is None, f"lockboxd died:\n{self.log[-4000:]}"
        s = self.new_session()
        r = s.get(self.url("/health"), timeout=10)
        assert (r.status_code, r.text) == (200, '"ok"')
        d = self.run("print(6 * 7)", session=s)
        assert d["code"] == 0, d
        assert (d["data"]["stdout"], d["data"]["exit_code"]) == ("42\n", 0), d

    def armed(self, procs):
        """Warm mode keeps armed processes, each with a UID and run cgroup of
        its own: children of the jailer waiting for code (or starting)."""
        out = []
        for pid, name, uids in procs:
            st = proc_status(pid)
            if st and st.get("PPid") == str(self.pid):
                out.append((pid, name, uids))
        return out

    def assert_idle(self, timeout=2.0):
        """After every response: no process of a finished run is left, only
        armed processes of the warm pools, and no run cgroup beyond theirs.
        A run that reported its own end is answered while the kernel still
        tears its process down (~1.5 ms), so this looks again for a moment
        before it fails."""
        eventually(self._check_idle, timeout)

    def _check_idle(self):
        left = processes_in_uid_range(self.uid_min, self.uid_max)
        armed = self.armed(left)
        assert len(armed) <= self.armed_max, f"more armed processes than the pools hold: {armed}"
        left = [p for p in left if p not in armed]
        assert not left, f"processes left in the sandbox UID range: {left}"
        # armed processes, and ones starting (still root) to refill the pools
        starting = {str(k) for k in children_of(self.pid)}
        for c, d in self.cgroup_dirs.items():
            in_slots = set()
            for slot in os.listdir(d):
                path = os.path.join(d, slot)
                if not os.path.isdir(path):
                    continue
                assert slot.startswith("uid-"), f"unexpected cgroup {path}"
                uid = int(slot[4:])
                assert self.uid_min <= uid <= self.uid_max, f"cgroup of a foreign uid: {path}"
                procs = set(open(os.path.join(path, "cgroup.procs")).read().split())
                # a refill may have started (or a process ended) since the
                # children were listed: look at those again
                strays = {p for p in procs - starting
                          if (st := proc_status(p)) is not None and st.get("PPid") != str(self.pid)}
                assert not strays, f"processes left in {path}: {strays}"
                in_slots |= procs
            assert len(in_slots) <= self.armed_max, f"more processes in {d} than pools hold"

    def assert_uid_gone(self, uid, timeout=2.0):
        """The UID a finished run reported has no process, and its slot's
        cgroups (kept for the UID's next run) are empty (within a moment:
        see assert_idle)."""
        def check():
            assert not processes_in_uid_range(uid, uid), f"uid {uid} still has processes"
            for c, d in self.cgroup_dirs.items():
                procs = os.path.join(d, f"uid-{uid}", "cgroup.procs")
                assert not os.path.exists(procs) or not open(procs).read().strip(), procs
        eventually(check, timeout)

    # ------------------------------------------------------------------- stop
    def kill_hard(self):
        if self.proc and self.proc.poll() is None:
            for kid in children_of(self.proc.pid):
                try:
                    os.kill(kid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            self.proc.kill()
            self.proc.wait()

    def stop(self):
        """SIGTERM; exit 0 within 20 s; nothing left behind."""
        if not self.stopped:
            self.finish_stop(self.sigterm())

    def sigterm(self):
        """Send the daemon SIGTERM; returns its children of that moment,
        for finish_stop()."""
        self.stopped = True
        if self.session:
            self.session.close()
        if self.proc.poll() is not None:
            pytest.fail(f"lockboxd exited early with {self.proc.returncode}:\n{self.log[-4000:]}")
        kids = children_of(self.pid)
        # what each was, to tell a survivor from a number used again
        self.kid_names = {k: (proc_status(k) or {}).get("Name", "?") for k in kids}
        self.proc.send_signal(signal.SIGTERM)
        return kids

    def finish_stop(self, kids):
        """After sigterm(): exit 0 within 20 s; nothing left behind."""
        try:
            rc = self.proc.wait(timeout=scaled(20))
        except subprocess.TimeoutExpired:
            self.kill_hard()
            pytest.fail(f"lockboxd did not exit within {scaled(20):g} s of SIGTERM:\n{self.log[-4000:]}")
        finally:
            self.log_file.close()
        assert rc == 0, f"lockboxd exited with {rc} after SIGTERM:\n{self.log[-4000:]}"
        self.assert_nothing_left(kids)

    def describe_survivor(self, pid):
        st = proc_status(pid) or {}
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read(200).replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            cmd = "?"
        was = self.kid_names.get(pid, "?")
        return (f"{pid} (at SIGTERM: {was}; now: {st.get('Name', 'gone')}, "
                f"state {st.get('State', '?')}, parent {st.get('PPid', '?')}, {cmd!r})")

    def assert_nothing_left(self, kids):
        still = [k for k in kids if proc_status(k) is not None
                 and proc_status(k).get("State", "").split()[0] != "Z"]
        assert not still, "daemon's child processes survived it: " + "; ".join(
            self.describe_survivor(k) for k in still)
        left = processes_in_uid_range(self.uid_min, self.uid_max)
        assert not left, f"processes left in UID range {self.uid_min}-{self.uid_max}: {left}"
        for d in list(self.cgroup_dirs.values()) + self.cgroup_own:
            assert not os.path.exists(d), f"cgroup {d} left behind"
        new_mounts = lockbox_mounts() - self.mounts_before
        assert not new_mounts, f"mounts left behind: {new_mounts}"
        files = files_owned_in_range(self.uid_min, self.uid_max)
        assert not files, f"files owned by sandbox UIDs left behind: {files}"
        ours = {"config.yaml", "python-requirements.txt", "lockboxd.stderr", "layers"}
        extra = set(os.listdir(self.workdir)) - ours
        assert not extra, f"files left in the daemon's working directory: {extra}"


# ------------------------------------------------- a daemon started elsewhere

# LOCKBOX_EXTERNAL_URL points the `daemon` fixture at a lockboxd this suite
# did not start (with the suite's KEY as its app.key), such as the
# container tests/container/run starts: its tests run over HTTP alone. Tests that
# need a daemon of their own, or the host's view of the daemon's processes,
# are deselected (pytest reports how many), never run half-way.
EXTERNAL_URL = os.environ.get("LOCKBOX_EXTERNAL_URL", "").rstrip("/")
EXTERNAL_FIXTURES_OK = {"daemon", "request", "tmp_path", "tmp_path_factory", "_aftermath",
                        "_default_daemon", "_session_tmp"}


class _Running:
    @staticmethod
    def poll():
        return None  # what the suite can know of a process it did not start


class ExternalDaemon(Daemon):
    def __init__(self, url, key):  # noqa: super().__init__ would plan a daemon to start
        self.base = url
        self.port = int(url.rsplit(":", 1)[1])
        self.key = key
        self.proc = _Running()
        self.warm = True
        self.stopped = False
        self.session = self.new_session()

    @property
    def log(self):
        return "(the daemon's log is wherever it runs)"

    def url(self, path):
        return self.base + path

    def new_session(self):
        s = super().new_session()
        s.headers["X-Api-Key"] = self.key
        return s

    def assert_idle(self, timeout=2.0):
        pass  # its processes are not in this suite's view


def pytest_configure(config):
    config.addinivalue_line("markers", "host_view: looks at the daemon from the host "
                            "(its pid, config file, working directory): not for an external one")


def pytest_collection_modifyitems(config, items):
    if not EXTERNAL_URL:
        return
    keep, drop = [], []
    for item in items:
        needs = set(getattr(item, "fixturenames", ())) - EXTERNAL_FIXTURES_OK
        (drop if needs or item.get_closest_marker("host_view") else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


@pytest.fixture(scope="session")
def _session_tmp():
    d = tempfile.mkdtemp(prefix="lockbox-it-")
    os.chmod(d, 0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def _start(config, parent, env=None, pool=100, requirements=REQUIREMENTS):
    workdir = tempfile.mkdtemp(prefix="d", dir=parent)
    # The HTTP process (server.user, unprivileged) reads the layer's status.
    os.chmod(workdir, 0o755)
    return Daemon(config or {}, workdir, env, pool, requirements).start()


@pytest.fixture(scope="session")
def _default_daemon(_session_tmp):
    if EXTERNAL_URL:
        yield ExternalDaemon(EXTERNAL_URL, KEY)
        return
    d = _start({"max_workers": 4, "max_requests": 50}, _session_tmp)
    yield d
    d.stop()


@pytest.fixture
def daemon(_default_daemon):
    """The shared default daemon; after the test it must still be alive,
    answer /health and hold no process in its UID range."""
    yield _default_daemon
    d = _default_daemon
    assert d.proc.poll() is None, f"lockboxd died during the test:\n{d.log[-4000:]}"
    r = d.new_session().get(d.url("/health"), timeout=10)
    assert (r.status_code, r.text) == (200, '"ok"')
    d.assert_idle()


@pytest.fixture
def lockboxd_factory(_session_tmp):
    """start(_env=None, _pool=100, _requirements=..., **config) -> Daemon;
    every daemon started is stopped (and checked) at the end of the test
    unless the test stopped it first. _env adds environment variables, _pool
    sizes the UID range, _requirements is the requirements file's text (None:
    no file)."""
    started = []

    def start(_env=None, _pool=100, _requirements=REQUIREMENTS, **config):
        d = _start(config, _session_tmp, _env, _pool, _requirements)
        started.append(d)
        return d

    yield start
    errors = []
    for d in started:
        try:
            d.stop()
        except BaseException as e:  # report every daemon, not just the first
            d.kill_hard()
            errors.append(e)
    if errors:
        raise errors[0]


@pytest.fixture(scope="module")
def module_daemon_factory(_session_tmp):
    """Like lockboxd_factory, for a daemon shared by one test module."""
    started = []

    def start(**config):
        d = _start(config, _session_tmp)
        started.append(d)
        return d

    yield start
    for d in started:
        try:
            d.stop()
        finally:
            d.kill_hard()


# ------------------------------------------------------------ shell jobs
# Dify's shell-job API (tests/shellclient.py is its client). A shell daemon
# is a Daemon with shell.enabled on a port of its own, the token from
# SHELLCTL_AUTH_TOKEN (as Dify's compose file passes it), and a directory
# of its own, /var/tmp/shelltest-*: home/ (shell.home, owned by the jobs'
# UID; the daemon mounts its shell.disk_size file system there), state/
# (shell.state_dir, made by the daemon) and outside/ (a world-readable
# canary beside shell.home that no job may reach). Not under /tmp: a job's
# /tmp is its own, and a shell.home below it would show there. Not named
# "lockbox": the home mount is the daemon's while it runs (the suites'
# mount checks look for that name); it is checked gone at stop. Its jobs'
# UID is the last of its UID block, outside its run range.
from shellclient import ShellClient, ShellError  # noqa: E402,F401  (tests/ is on sys.path)

SHELL_TOKEN = "shell-token-4be1c0ffee-" + str(os.getpid())
# keep_jobs off: a suite's stop must end every job (test_shell_restart.py
# turns it on, the default, to see jobs outlive the daemon)
SHELL_DEFAULTS = {"max_jobs": 8, "processes": 128, "memory": "256M", "keep_jobs": False,
                  "binding_linger": 0}


def shell_cgroup_tag(state_dir):
    """The name lockboxd gives its shell jobs' cgroup parent,
    lockbox-shell-<FNV-1a 64 of shell.state_dir>."""
    h = 0xcbf29ce484222325
    for b in state_dir.encode():
        h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return f"lockbox-shell-{h:016x}"
SHELL_WARM = {"python_pool": 1, "nodejs_pool": 0}


class ShellDaemon(Daemon):
    def __init__(self, config, workdir, shell_root, shell=None, env=None):
        env = dict(env or {}, SHELLCTL_AUTH_TOKEN=SHELL_TOKEN)
        super().__init__(merge({"warm": SHELL_WARM}, config), workdir, env, pool=90)
        self.shell_uid = self.uid_min + 99
        self.root = shell_root
        self.home = os.path.join(shell_root, "home")
        self.state_dir = os.path.join(shell_root, "state")
        self.outside = os.path.join(shell_root, "outside")
        self.canary = "CANARY-" + os.urandom(8).hex()
        self.shell_settings = merge(SHELL_DEFAULTS, shell or {})
        self.shell_port = None
        self.token = SHELL_TOKEN
        self.client = None

    # The mount checks (here and in the attack suite) compare the host's
    # lockbox mounts with those before the start. Other suites' shell
    # daemons mount their shell.home (btrfs, or ext4 made by an older
    # version, on a loop device) at any time: such a mount outside this
    # daemon's directory counts as there before.
    @property
    def mounts_before(self):
        foreign = {m for m in lockbox_mounts()
                   if (" - btrfs /dev/loop" in m or " - ext4 /dev/loop" in m)
                   and not m.split()[4].startswith(self.root + "/")}
        return self._mounts_before | foreign

    @mounts_before.setter
    def mounts_before(self, value):
        self._mounts_before = value

    def write_config(self):
        self.shell_port = free_port()
        self.base_config["shell"] = merge(
            {"enabled": True, "listen": "127.0.0.1", "port": self.shell_port,
             "state_dir": self.state_dir, "home": self.home, "uid": self.shell_uid},
            self.shell_settings)
        super().write_config()

    def wait_healthy(self, timeout=10.0):
        if not super().wait_healthy(timeout):
            return False
        probe = ShellClient(f"http://127.0.0.1:{self.shell_port}", timeout=scaled(2))
        deadline = time.monotonic() + scaled(timeout)
        while time.monotonic() < deadline and self.proc.poll() is None:
            try:
                probe.health()
                return True
            except (OSError, AssertionError):
                time.sleep(0.05)
        return False

    def start(self):
        stray = processes_in_uid_range(self.shell_uid, self.shell_uid)
        assert not stray, f"shell UID {self.shell_uid} already in use: {stray}"
        os.makedirs(self.home, 0o755)
        os.chown(self.home, self.shell_uid, self.shell_uid)
        os.makedirs(self.outside, 0o755)
        with open(os.path.join(self.outside, "canary"), "w") as f:
            f.write(self.canary + "\n")
        os.chmod(os.path.join(self.outside, "canary"), 0o644)
        super().start()
        self.client = self.shell_client()
        return self

    def shell_client(self, token=SHELL_TOKEN):
        return ShellClient(f"http://127.0.0.1:{self.shell_port}", token)

    def home_path(self, *parts):
        return os.path.join(self.home, *parts)

    # ------------------------------------------------------------ what is left
    def shell_processes(self):
        return processes_in_uid_range(self.shell_uid, self.shell_uid)

    def job_processes(self):
        """Processes of the jobs' UID that are not a binding's own: its init
        (PID 1 of its namespaces) and its spare's keeper (the next job,
        made ahead), which live as long as the binding."""
        return [p for p in self.shell_processes()
                if p[1] not in ("lockbox-binding", "lockbox-spare")]

    def shell_cgroup_parents(self):
        """Where the daemon keeps its bindings' and jobs' cgroups (beside
        its own groups, named after shell.state_dir)."""
        tag = shell_cgroup_tag(self.state_dir)
        return [os.path.join(os.path.dirname(d), tag) for d in self.cgroup_dirs.values()]

    def shell_cpu_parent(self):
        """The same in cgroup v1's cpu hierarchy (CPU weights), where
        lockboxd puts it beside its own group there (the suite's, as its
        child), or None."""
        try:
            with open("/proc/self/cgroup") as f:
                own = [line.rstrip("\n").split(":", 2)[2] for line in f
                       if "cpu" in line.split(":")[1].split(",")]
        except (OSError, IndexError):
            return None
        base = "/sys/fs/cgroup/cpu"
        if not own or not os.path.isdir(base):
            return None
        return os.path.join(base + own[0].rstrip("/"), shell_cgroup_tag(self.state_dir))

    def shell_cgroups(self):
        """Cgroups of bindings and jobs (below the shell parent; shell-*,
        and the groups in them, in the daemon's groups), or named after a
        job this suite ran beside them."""
        found = []
        for p in self.shell_cgroup_parents():
            for dirpath, dirnames, _ in os.walk(p, onerror=lambda e: None):
                found += [os.path.join(dirpath, n) for n in dirnames]
        ids = set(self.client.seen) if self.client else set()
        for d in self.cgroup_dirs.values():
            for dirpath, dirnames, _ in os.walk(d, onerror=lambda e: None):
                inside = "/shell-" in dirpath[len(d):]
                found += [os.path.join(dirpath, n) for n in dirnames
                          if inside or n.startswith("shell-")]
            parent = os.path.dirname(d)
            try:
                names = os.listdir(parent)
            except OSError:
                names = []
            found += [os.path.join(parent, n) for n in names
                      if n.startswith("shell-") and any(i in n for i in ids)]
        return found

    def job_dirs(self):
        try:
            return os.listdir(os.path.join(self.state_dir, "jobs"))
        except FileNotFoundError:
            return []

    def files_left(self):
        """Files of the jobs' UID in /tmp, /var/tmp, /dev/shm and /run but
        in this daemon's own directory (shell.home is there)."""
        return [p for p in files_owned_in_range(self.shell_uid, self.shell_uid)
                if not p.startswith(self.root + "/") and p != self.root]

    def check_shell_idle(self):
        procs = self.shell_processes()
        assert not procs, f"processes of the jobs' UID {self.shell_uid} left: {procs}"
        cgroups = self.shell_cgroups()
        assert not cgroups, f"job cgroups left: {cgroups}"
        dirs = self.job_dirs()
        assert not dirs, f"job directories left in {self.state_dir}/jobs: {dirs}"

    def shell_reset(self):
        """Delete every job (force, no grace), then nothing of them may be
        left, once their bindings have ended (shell.binding_linger): no
        process of the jobs' UID, no job cgroup, no job directory."""
        c = self.client
        for j in c.list(limit=200):
            try:
                c.delete(j["job_id"], force=True, grace_seconds=0)
            except ShellError as e:
                assert e.code == "job_not_found", e  # removed by retention meanwhile
        assert c.list(limit=200) == []
        # bindings whose jobs are all removed end shell.binding_linger later
        linger = float(self.shell_settings.get("binding_linger", 0))
        eventually(self.check_shell_idle, scaled(5) + linger)

    def assert_serving(self):
        """Both APIs answer: /health and a run, /healthz and a job."""
        super().assert_serving()
        c = self.shell_client()
        c.health()
        r, out = c.run_to_end("echo serving", mode="stdio")
        assert (r["status"], r["exit_code"], out) == ("exited", 0, "serving\n"), r
        c.delete(r["job_id"])

    def assert_nothing_left(self, kids):
        super().assert_nothing_left(kids)
        procs = self.shell_processes()
        assert not procs, f"processes of the jobs' UID {self.shell_uid} outlived the daemon: {procs}"
        cgroups = self.shell_cgroups() + [p for p in self.shell_cgroup_parents()
                                          if os.path.exists(p)]
        assert not cgroups, f"job cgroups outlived the daemon: {cgroups}"
        dirs = self.job_dirs()
        assert not dirs, f"job directories outlived the daemon: {dirs}"
        files = self.files_left()
        assert not files, f"files of the jobs' UID outside shell.home: {files}"
        assert not os.path.ismount(self.home), f"{self.home} still mounted"
        eventually(self.check_loop_released, scaled(5))

    def check_loop_released(self):
        """The home's loop device is detached, or released by lockbox
        (autoclear: the kernel detaches it with the last mount) and held
        only by another daemon's namespaces: a mount namespace made while
        the home was mounted (another lockboxd's zygote, say) keeps a copy
        of it until it goes; lockbox cannot take that copy back."""
        for b in glob.glob("/sys/block/loop*/loop/backing_file"):
            try:
                with open(b) as f:
                    if not f.read().startswith(self.root + "/"):
                        continue
                with open(os.path.join(os.path.dirname(b), "autoclear")) as f:
                    autoclear = f.read().strip() == "1"
            except OSError:
                continue
            holders = mount_holders(self.home)
            mine = [h for h in holders if self.config_path in h[1] or self.workdir in h[1]]
            assert autoclear and holders and not mine, (
                f"loop device {b} still attached to {self.root} (autoclear={autoclear}); "
                f"mounts of it held by {holders}")


def start_shell_daemon(parent, shell=None, env=None, uids=None, **config):
    """uids: (jail.uid_min, jail.uid_max, shell.uid) instead of a block's."""
    workdir = tempfile.mkdtemp(prefix="d", dir=parent)
    os.chmod(workdir, 0o755)
    root = tempfile.mkdtemp(prefix="shelltest-", dir="/var/tmp")
    os.chmod(root, 0o755)
    d = ShellDaemon(config, workdir, root, shell, env)
    if uids:
        d.uid_min, d.uid_max, d.shell_uid = uids
    try:
        return d.start()
    except BaseException:
        d.kill_hard()
        shutil.rmtree(root, ignore_errors=True)
        raise


def mount_holders(path):
    """(pid, command) of processes whose mount namespace shows path."""
    found = []
    for m in glob.glob("/proc/[0-9]*/mountinfo"):
        try:
            with open(m) as f:
                if f" {path} " in f.read():
                    pid = m.split("/")[2]
                    with open(f"/proc/{pid}/cmdline", "rb") as c:
                        found.append((int(pid), c.read().replace(b"\0", b" ").decode(errors="replace")))
        except OSError:
            pass
    return found


def scrub_shell_daemon(d):
    """After a failed test: what a shell daemon may have left (jobs it
    kept, their cgroups, its home's mount and loop device) is removed, so
    one failure does not leak into the machine or the next tests. Only
    processes of the daemon's own jobs' UID are killed."""
    for pid, _, _ in d.shell_processes():
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    parents = d.shell_cgroup_parents() if d.cgroup_dirs else []
    # the cpu hierarchy's too: a stop that kept jobs leaves it, and only
    # the next lockboxd of the same shell.state_dir would take it over
    parents += [p for p in [d.shell_cpu_parent()] if p]
    for parent in parents:
        for dirpath, _, _ in sorted(os.walk(parent), key=lambda w: -len(w[0])):
            for _ in range(100):
                try:
                    os.rmdir(dirpath)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.02)
    if os.path.ismount(d.home):
        subprocess.run(["umount", "-l", d.home], check=False)
    for b in glob.glob("/sys/block/loop*/loop/backing_file"):
        try:
            if open(b).read().startswith(d.root + "/"):
                subprocess.run(["losetup", "-d", "/dev/" + b.split("/")[3]], check=False)
        except OSError:
            pass


def stop_shell_daemon(d):
    try:
        d.stop()  # SIGTERM, exit 0, nothing left
    finally:
        d.kill_hard()
        scrub_shell_daemon(d)
        shutil.rmtree(d.root, ignore_errors=True)


def module_shell_fixtures(shell, **config):
    """The fixtures of a test module whose cases share a shell daemon of
    their own, started with start_shell_daemon(shell, **config):
    `_module_shelld, sh = module_shell_fixtures(SHELL)`. sh gives the
    daemon; after each case it must still live, and every job is deleted
    with nothing of them left."""
    @pytest.fixture(scope="module", name="_module_shelld")
    def _module_shelld(_session_tmp):
        d = start_shell_daemon(_session_tmp, shell, **config)
        try:
            yield d
        finally:
            stop_shell_daemon(d)

    @pytest.fixture(name="sh")
    def sh(_module_shelld):
        yield _module_shelld
        assert _module_shelld.proc.poll() is None, f"lockboxd died:\n{_module_shelld.log[-4000:]}"
        _module_shelld.shell_reset()
    return _module_shelld, sh


def job_stderr(d, job_id):
    """What a shell job wrote to its stderr (kept in its job directory)."""
    with open(os.path.join(d.state_dir, "jobs", job_id, "stderr.log")) as f:
        return f.read()


@pytest.fixture(scope="session")
def _shell_daemon(_session_tmp):
    d = start_shell_daemon(_session_tmp)
    yield d
    stop_shell_daemon(d)


@pytest.fixture
def shelld(_shell_daemon):
    """The session's shell daemon (ShellDaemon; .client is a ShellClient).
    After the test every job is deleted and nothing of them may be left,
    and both APIs still serve."""
    yield _shell_daemon
    d = _shell_daemon
    assert d.proc.poll() is None, f"lockboxd died during the test:\n{d.log[-4000:]}"
    d.shell_reset()
    d.assert_serving()
    d.shell_reset()


@pytest.fixture
def shell_daemon_factory(_session_tmp):
    """start(shell={...}, **config) -> ShellDaemon with those shell.*
    settings; each is reset, checked and stopped after the test."""
    started = []

    def start(shell=None, **config):
        d = start_shell_daemon(_session_tmp, shell, **config)
        started.append(d)
        return d

    yield start
    errors = []
    for d in started:
        try:
            if not d.stopped:
                d.shell_reset()
            stop_shell_daemon(d)
        except BaseException as e:
            d.kill_hard()
            errors.append(e)
    if errors:
        raise errors[0]


class TcpServer:
    """A one-shot TCP server on 127.0.0.1 that greets each client, for
    network tests: it records how many clients reached it."""

    def __init__(self, greeting=b"hello-from-host"):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.greeting = greeting
        self.accepted = 0
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._serve, daemon=True)
        self._t.start()

    def _serve(self):
        while not self._stop.is_set():
            try:
                c, _ = self.sock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            self.accepted += 1
            with c:
                c.sendall(self.greeting)

    def close(self):
        self._stop.set()
        self._t.join(5)
        self.sock.close()


@pytest.fixture
def tcp_server():
    s = TcpServer()
    yield s
    s.close()


# ------------------------------------------------------------ network lab
# Fake hosts in a network namespace of the tests' own (tests/netlab.py):
# "public" 203.0.113.7 and .8, "private" 10.213.7.2, a DNS server on
# 10.213.7.53, "cloud metadata" 169.254.169.254, 100.64.7.7, 172.16.7.7,
# 192.168.7.7, each with HTTP on TCP 80/8080/8081 and UDP echo on 7.
import netlab as _netlab  # noqa: E402  (tests/ is on sys.path, see above)


@pytest.fixture(scope="session")
def netlab():
    """The started lab (netlab.Lab) for the whole session; closed at its end
    (and by atexit, and by its watchdog if this process dies)."""
    lab = _netlab.Lab().start()
    try:
        yield lab
    finally:
        lab.close()


def lab_daemon_config(lab, **network):
    """Config for a daemon whose runs have network, namespaced, and relay
    their DNS to the lab's resolver: a test daemon never asks the host's.
    network= entries (allow, egress_only, subnet, ...) are added to the
    `network` section."""
    return {"enable_network": True,
            "network": dict({"mode": "namespace", "dns_servers": [lab.dns]}, **network)}
