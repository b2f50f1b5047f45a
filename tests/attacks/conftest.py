"""Fixtures of the attack suite.

The daemon fixtures are the integration suite's own (tests/integration/
conftest.py, loaded here, not copied): `daemon`, `lockboxd_factory`,
`module_daemon_factory`, `tcp_server`. On top of them:

* `tight`: one daemon for the whole attack session with small limits
  (worker_timeout 4 s, 128M memory, 64K output, 8M/512-inode /tmp, 2M files,
  32 tasks, 64 open files, 8 workers), for exhaustion and concurrency cases.
  4 s, not less: on a host where page faults are dear (a guest whose page
  tables the hypervisor shadows), a memory bomb sharing two cores with
  spinners takes over 2 s to reach its limit and would end by the clock.
* an autouse after-check: after every test, each daemon the test used must
  still answer /health, run a normal program in every language the test
  attacked with, hold no process of a finished run, no run cgroup beyond the
  armed pools', no new lockbox mount on the host and no file owned by its
  UID range in /tmp, /var/tmp, /dev/shm, /run or its working directory.

Run: LOCKBOXD=$PWD/build/lockboxd /usr/bin/python3 -m pytest -q -p no:cacheprovider tests/attacks
(LOCKBOX_TEST_MODE=cold for cold daemons, as for the integration suite).
"""
import importlib.util
import itertools
import os
import sys
import time

import pytest

_HERE = os.path.dirname(os.path.abspath(__file__))
_INTEGRATION_CONFTEST = os.path.join(os.path.dirname(_HERE), "integration", "conftest.py")
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)


def _load_integration_conftest():
    name = "lockbox_integration_conftest"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, _INTEGRATION_CONFTEST)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    # If tests/integration runs in the same pytest session it loads its own
    # copy of that module, with its own UID block counter starting at 0:
    # start ours far away so two live daemons never share a UID range.
    mod._uid_blocks = itertools.count(500)
    return mod


_it = _load_integration_conftest()

# Everything public of the integration conftest is re-exported: pytest
# registers the fixtures it finds in this module, and when tests/integration
# runs in the same session its modules' `from conftest import ...` may
# resolve to this module.
for _name in dir(_it):
    if not _name.startswith("__"):
        globals().setdefault(_name, getattr(_it, _name))

KEY = _it.KEY
Daemon = _it.Daemon
TcpServer = _it.TcpServer
processes_in_uid_range = _it.processes_in_uid_range
files_owned_in_range = _it.files_owned_in_range
lockbox_mounts = _it.lockbox_mounts
children_of = _it.children_of
proc_status = _it.proc_status
_session_tmp = _it._session_tmp
_default_daemon = _it._default_daemon
daemon = _it.daemon
lockboxd_factory = _it.lockboxd_factory
module_daemon_factory = _it.module_daemon_factory
tcp_server = _it.tcp_server

TIGHT = {
    "worker_timeout": 4,
    "max_workers": 8,
    "max_requests": 50,
    "limits": {"memory": "128M", "output": "64K", "tmp_size": "8M", "tmp_inodes": 512,
               "file_size": "2M", "processes": 32, "open_files": 64},
}
TIGHT_OUTPUT = 64 * 1024
TIGHT_MEMORY = 128 * 1024 * 1024


@pytest.fixture(scope="session")
def tight(_session_tmp):
    d = _it._start(TIGHT, _session_tmp)
    yield d
    try:
        d.stop()  # SIGTERM, exit 0, nothing left behind
    finally:
        d.kill_hard()


def describe(pid):
    st = proc_status(pid) or {}
    return f"{pid}({st.get('Name')}, state {st.get('State')}, ppid {st.get('PPid')}, uid {st.get('Uid')})"


def idle_problems(d):
    """What Daemon.assert_idle checks, as a list of problems with details:
    no process in the UID range but the armed pools' (children of the
    jailer), no process in a run cgroup that is not a child of the jailer.
    The jailer's children are listed after the cgroups, so a refill forked
    in between is not mistaken for a leftover."""
    problems = []
    left = processes_in_uid_range(d.uid_min, d.uid_max)
    armed = d.armed(left)
    if len(armed) > d.armed_max:
        problems.append(f"more armed processes than the pools hold: {armed}")
    stray = [p for p in left if p not in armed]
    if stray:
        problems.append("processes left in the UID range: " + ", ".join(describe(p[0]) for p in stray))
    in_slots = {}
    for c, base in d.cgroup_dirs.items():
        for slot in os.listdir(base):
            path = os.path.join(base, slot)
            if not os.path.isdir(path):
                continue
            if not slot.startswith("uid-") or not d.uid_min <= int(slot[4:]) <= d.uid_max:
                problems.append(f"unexpected cgroup {path}")
                continue
            with open(os.path.join(path, "cgroup.procs")) as f:
                for pid in f.read().split():
                    in_slots[int(pid)] = path
    kids = set(children_of(d.pid))
    for pid, path in sorted(in_slots.items()):
        if pid not in kids and proc_status(pid) is not None:
            problems.append(f"process left in {path}: {describe(pid)}")
    return problems


def check_aftermath(d, languages=("python3",)):
    """The daemon survived the attack and nothing of it is left."""
    assert d.proc.poll() is None, f"lockboxd died:\n{d.log[-4000:]}"
    s = d.new_session()
    try:
        r = s.get(d.url("/health"), timeout=10)
        assert (r.status_code, r.text) == (200, '"ok"'), (r.status_code, r.text)
        d.assert_serving()  # a normal Python run
        if "nodejs" in languages:
            r = d.run("console.log(6 * 7)", session=s, language="nodejs")
            assert r["code"] == 0, r
            assert (r["data"]["stdout"], r["data"]["exit_code"]) == ("42\n", 0), r
    finally:
        s.close()
    if isinstance(d, _it.ExternalDaemon):
        return  # the rest is the host's view of a daemon it started
    # No process of a finished run, no stray run cgroup (retried: a pool
    # refill may be half-way through its start when we look).
    for attempt in range(10):
        problems = idle_problems(d)
        if not problems:
            break
        time.sleep(0.2)
    assert not problems, "\n".join(problems)
    new_mounts = lockbox_mounts() - d.mounts_before
    assert not new_mounts, f"mounts left on the host: {new_mounts}"
    files = files_owned_in_range(d.uid_min, d.uid_max)
    assert not files, f"files owned by sandbox UIDs left behind: {files}"
    extra = set(os.listdir(d.workdir)) - {"config.yaml", "python-requirements.txt",
                                       "lockboxd.stderr", "layers"}
    assert not extra, f"files left in the daemon's working directory: {extra}"


@pytest.fixture(autouse=True)
def _aftermath(request):
    yield
    funcargs = getattr(request.node, "funcargs", None) or {}
    seen = set()
    for v in funcargs.values():
        if isinstance(v, Daemon) and id(v) not in seen and not v.stopped:
            seen.add(id(v))
            check_aftermath(v, v.__dict__.pop("_attack_languages", {"python3"}))
