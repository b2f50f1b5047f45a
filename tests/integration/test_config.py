"""Configuration that changes what a run sees: enable_preload, the CPU
time limit, the task limit, /tmp size, the jail's hostname and extra
read-only paths -- all on one daemon configured for it."""
import os
import tempfile
import textwrap

import pytest


def code(src):
    return textwrap.dedent(src).lstrip("\n")


@pytest.fixture(scope="module")
def extra_dir():
    # not under /tmp: the run gets a fresh /tmp that would hide it
    d = tempfile.mkdtemp(prefix="lockbox-it-ro-", dir="/var/tmp")
    os.chmod(d, 0o755)
    with open(os.path.join(d, "data.txt"), "w") as f:
        f.write("read-only data\n")
    os.chmod(os.path.join(d, "data.txt"), 0o644)
    yield d
    os.unlink(os.path.join(d, "data.txt"))
    os.rmdir(d)


@pytest.fixture(scope="module")
def custom(module_daemon_factory, extra_dir):
    return module_daemon_factory(
        enable_preload=True, worker_timeout=4,
        limits={"cpu_time": 1, "processes": 8, "tmp_size": "2M"},
        jail={"hostname": "lockbox-test", "extra_ro_paths": [extra_dir]})


def test_preload_runs_first_in_the_same_interpreter(custom):
    d = custom.run_data("print(P, __name__)", preload="P = 'from preload'\nprint('pre')")
    assert d["stdout"] == "pre\nfrom preload __main__\n", d
    assert d["exit_code"] == 0


def test_preload_is_locked_too(custom):
    d = custom.run_data("print('never')", preload="import os\nos.fork()")
    assert d["exit_code"] == 1, d
    assert "operation not permitted" in d["error"].lower()
    assert "never" not in d["stdout"]
    d = custom.run_data("print('never')",
                        preload="import ctypes\nctypes.CDLL(None).mount(b'n', b'/', b't', 0, None)")
    assert d["exit_code"] == -1 and "syscall 'mount' is not allowed" in d["error"], d


def test_empty_preload_is_fine(custom):
    d = custom.run_data("print('plain')", preload="")
    assert d["stdout"] == "plain\n"


def test_cpu_time_limit(custom):
    r = custom.run("while True: pass")
    d = r["data"]
    assert d["exit_code"] == -1, d
    assert d["status"] == "timeout", d
    # the CPU limit (1 s), not the wall timeout (4 s), ended it
    assert d["error"].startswith("process exited with code -1\nerror: cpu time limit exceeded\n"), d


def test_sleeping_uses_no_cpu_time(custom):
    d = custom.run_data("import time\ntime.sleep(1.5)\nprint('rested')")
    assert d["stdout"] == "rested\n" and d["status"] == "ok", d


def test_task_limit(custom):
    d = custom.run_data(code("""
        import threading
        ev = threading.Event()
        n = 0
        try:
            for _ in range(100):
                threading.Thread(target=ev.wait).start()
                n += 1
        except RuntimeError:
            pass
        ev.set()
        print(n)
    """))
    assert d["exit_code"] == 0, d
    assert 1 <= int(d["stdout"]) < 8, d


def test_tmp_size(custom):
    d = custom.run_data(code("""
        import errno
        try:
            with open('/tmp/f', 'wb') as f:
                for _ in range(100):
                    f.write(b'x' * 65536)
                    f.flush()
        except OSError as e:
            print(errno.errorcode[e.errno])
        import os
        print(os.path.getsize('/tmp/f') <= 2 * 1024 * 1024)
    """))
    assert d["stdout"] == "ENOSPC\nTrue\n", d


def test_hostname(custom):
    d = custom.run_data("import socket\nprint(socket.gethostname())")
    assert d["stdout"] == "lockbox-test\n"


def test_extra_ro_path(custom, extra_dir):
    d = custom.run_data(code(f"""
        import errno
        print(open('{extra_dir}/data.txt').read(), end='')
        try:
            open('{extra_dir}/data.txt', 'a').write('x')
            print('written')
        except OSError as e:
            print(errno.errorcode[e.errno])
    """))
    assert d["stdout"] in ("read-only data\nEROFS\n", "read-only data\nEACCES\n"), d
    with open(os.path.join(extra_dir, "data.txt")) as f:
        assert f.read() == "read-only data\n"
