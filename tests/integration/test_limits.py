"""Per-run limits on a daemon with small ones (worker_timeout 2 s, memory
128M, output 64K): the sandbox ends the run, says why, and keeps serving.
The memory bombs run on a daemon with the same memory bound and a long
timeout: on a loaded machine filling 128M can take longer than 2 s, and
the verdict would then be the timeout's."""
import textwrap
import time

import pytest

from conftest import scaled

OUTPUT_CAP = 64 * 1024
MEMORY_CAP = 128 * 1024 * 1024


@pytest.fixture(scope="module")
def small(module_daemon_factory):
    return module_daemon_factory(worker_timeout=2, max_workers=2,
                                 limits={"memory": "128M", "output": "64K"})


@pytest.fixture(scope="module")
def bombs(module_daemon_factory):
    return module_daemon_factory(worker_timeout=30, max_workers=2,
                                 limits={"memory": "128M", "output": "64K"})


def code(src):
    return textwrap.dedent(src).lstrip("\n")


def timed_run(d, src, **fields):
    t0 = time.monotonic()
    r = d.run(src, **fields)
    return r, time.monotonic() - t0


@pytest.mark.parametrize("src", [
    "while True: pass",
    "import time\ntime.sleep(100)",
    code("""
        import threading
        def spin():
            while True: pass
        for _ in range(4):
            threading.Thread(target=spin, daemon=True).start()
        threading.Event().wait()
    """),
], ids=["busy_loop", "sleep", "spinning_threads"])
def test_timeout(small, src):
    r, elapsed = timed_run(small, "print('partial', flush=True)\n" + src)
    assert r["code"] == 0, r
    d = r["data"]
    assert scaled(1.5) <= elapsed <= scaled(6.0), elapsed
    assert d["exit_code"] == -1, d
    assert d["status"] == "timeout", d
    assert d["stdout"] == "partial\n", d
    assert d["error"].startswith("process exited with code -1\nerror: timeout\n"), d
    small.assert_idle()


def test_run_just_under_the_timeout_completes(small):
    d = small.run_data("import time\ntime.sleep(1.0)\nprint('made it')")
    assert d["stdout"] == "made it\n" and d["exit_code"] == 0 and d["status"] == "ok"


def test_memory_bomb(bombs):
    r, elapsed = timed_run(bombs, code("""
        print('start', flush=True)
        x = []
        while True:
            x.append(bytearray(10**7))
    """))
    assert r["code"] == 0, r
    d = r["data"]
    assert d["exit_code"] == -1, d
    assert d["status"] == "memory_limit", d
    assert d["stdout"] == "start\n"
    assert d["error"].startswith("process exited with code -1\nerror: memory limit exceeded\n"), d
    assert d["memory_peak_bytes"] <= MEMORY_CAP * 1.05, d
    assert elapsed < scaled(20.0)  # the memory bound ended it, not the timeout
    bombs.assert_idle()
    bombs.assert_serving()


def test_memory_bomb_in_a_thread(bombs):
    d = bombs.run_data(code("""
        import threading
        def eat():
            x = []
            while True:
                x.append(bytearray(10**7))
        threading.Thread(target=eat).start()
    """))
    assert d["exit_code"] == -1, d
    assert d["status"] == "memory_limit", d
    assert "error: memory limit exceeded" in d["error"]


def test_memory_under_the_limit_works(bombs):
    d = bombs.run_data("x = bytearray(60 * 1024 * 1024)\nprint(len(x))")
    assert d["stdout"] == f"{60 * 1024 * 1024}\n", d
    assert d["exit_code"] == 0
    assert d["memory_peak_bytes"] >= 60 * 1024 * 1024, d


@pytest.mark.parametrize("stream", ["stdout", "stderr"])
def test_output_limit(small, stream):
    r, _ = timed_run(small, code(f"""
        import sys
        while True:
            print("x" * 999, file=sys.{stream})
    """))
    assert r["code"] == 0, r
    d = r["data"]
    assert d["exit_code"] == -1, d
    assert d["status"] == "output_limit", {k: v for k, v in d.items() if k not in ("stdout", "stderr", "error")}
    assert d["error"].startswith("process exited with code -1\nerror: output limit exceeded\n")
    assert d["truncated"] is True
    out = len(d["stdout"].encode()) + len(d["stderr"].encode())
    assert 0 < out <= OUTPUT_CAP, out
    assert len(d[stream].encode()) <= OUTPUT_CAP
    assert set(d[stream]) <= {"x", "\n"}
    small.assert_serving()


def test_output_just_under_the_cap_is_complete(small):
    n = OUTPUT_CAP - 100
    d = small.run_data(f"import sys\nsys.stdout.write('y' * {n})")
    assert d["stdout"] == "y" * n
    assert d["status"] == "ok" and d["truncated"] is False and d["exit_code"] == 0


def test_limits_config_does_not_leak_between_runs(small):
    """After a run hit every limit, a normal run is unaffected."""
    small.run("while True: pass")
    d = small.run_data("print('clean')")
    assert (d["stdout"], d["exit_code"], d["status"]) == ("clean\n", 0, "ok")


def test_memory_bomb_does_not_disturb_a_neighbour(bombs):
    """max_workers 2: a memory bomb and a normal run side by side."""
    import threading
    out = {}

    def bomb():
        out["bomb"] = bombs.run("x = []\nwhile True: x.append(bytearray(10**7))",
                                session=bombs.new_session())

    t = threading.Thread(target=bomb)
    t.start()
    d = bombs.run_data("import time\ntime.sleep(0.5)\nprint(sum(range(1000)))")
    t.join(60)
    assert d["stdout"] == "499500\n" and d["status"] == "ok", d
    assert out["bomb"]["data"]["status"] == "memory_limit", out


def test_uids_are_recycled_after_every_kind_of_ending(lockboxd_factory):
    """A pool of 2 UIDs for runs (the range's third is pip's) survives many
    runs ended in every way: each ending gives its UID back (otherwise runs
    would fail with code -429)."""
    d = lockboxd_factory(_pool=3, max_workers=2, worker_timeout=1,
                         limits={"memory": "32M", "output": "4K"},
                         warm={"python_pool": 0, "nodejs_pool": 0})
    endings = {
        "ok": ("print('ok')", "ok"),
        "exception": ("raise SystemExit(4)", "runtime_error"),
        "syscall": ("import ctypes\nctypes.CDLL(None).ptrace(0, 0, None, None)", "syscall_denied"),
        "memory": ("x = []\nwhile True: x.append(bytearray(10**6))", "memory_limit"),
        "output": ("while True: print('z' * 100)", "output_limit"),
        "segfault": ("import ctypes\nctypes.string_at(0)", "runtime_error"),
    }
    for round_ in range(3):
        for name, (src, status) in endings.items():
            r = d.run(src)
            assert r["code"] == 0, (round_, name, r)
            assert r["data"]["status"] == status, (round_, name, r["data"]["status"])
    r = d.run("while True: pass")
    assert r["data"]["status"] == "timeout"
    seen = set()
    for _ in range(4):
        data = d.run_data("import os\nprint(os.getuid())")
        seen.add(int(data["stdout"]))
    assert seen <= {d.uid_min, d.uid_min + 1}, seen
    d.assert_idle()


def test_no_more_runs_alive_than_max_workers(lockboxd_factory):
    """A run answered at its exit report frees its worker slot while the
    kernel still tears its process down (with 300 MB that takes a while):
    the next run waits for it, so no more than max_workers runs, each up
    to limits.memory, are ever alive at once."""
    import threading
    import time
    from conftest import processes_in_uid_range
    # a long timeout: its subject is how many run at once, and touching 300 MB
    # can take seconds on a loaded host
    d = lockboxd_factory(warm={"mode": "cold"}, max_workers=1, max_requests=10, worker_timeout=30)
    code = "x = bytearray(300 * 1024 * 1024)\nfor i in range(0, len(x), 4096): x[i] = 1\nprint('ok')"
    stop = time.monotonic() + 4
    most, errors = 0, []

    def client():
        s = d.new_session()
        while time.monotonic() < stop:
            r = d.run(code, session=s)
            if r["data"] is None or r["data"]["stdout"] != "ok\n":
                errors.append(r)
    ts = [threading.Thread(target=client) for _ in range(2)]
    for t in ts:
        t.start()
    while any(t.is_alive() for t in ts):
        most = max(most, len({p for p, _, _ in processes_in_uid_range(d.uid_min, d.uid_max)}))
    for t in ts:
        t.join()
    assert not errors, errors[:2]
    assert most == 1, f"{most} runs alive at once with max_workers 1"
