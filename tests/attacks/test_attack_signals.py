"""Signalling or killing the daemon (jailer, HTTP process, zygote) and the
host. Signals between concurrent runs: test_attack_concurrency.py."""
import pytest
import os
import signal
import time

from attacklib import assert_ok, attack_js, attack_py, errno_lines, src

from conftest import children_of


def host_pids(daemon):
    return [daemon.pid] + children_of(daemon.pid) + [os.getpid(), 1]


@pytest.mark.host_view
def test_python_cannot_signal_the_daemon_or_host_by_pid(daemon):
    pids = host_pids(daemon)
    d = attack_py(daemon, src(f"""
        import os, signal, errno
        for pid in {pids!r}:
            for sig in (signal.SIGKILL, signal.SIGTERM, signal.SIGSTOP):
                try:
                    os.kill(pid, sig); r = 'SENT'
                except OSError as e:
                    r = errno.errorcode[e.errno]
                print(f'{{pid}}/{{sig}}', r)
    """))
    assert_ok(d)
    got = errno_lines(d)
    assert len(got) == 3 * len(pids), d
    # pid 1 is the program itself (immune as its namespace's init)
    others = {k: v for k, v in got.items() if not k.startswith("1/")}
    assert set(others.values()) <= {"EPERM", "ESRCH"}, d
    assert daemon.proc.poll() is None


@pytest.mark.host_view
def test_python_broadcast_and_group_kills_are_refused(daemon):
    d = attack_py(daemon, src(f"""
        import os, signal, errno, ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        def call(name, f):
            try:
                f(); print(name, 'SENT')
            except OSError as e:
                print(name, errno.errorcode[e.errno])
        call('kill_-1', lambda: os.kill(-1, signal.SIGKILL))
        call('killpg_daemon', lambda: os.killpg({os.getpgid(daemon.pid)}, signal.SIGKILL))
        call('kill_-daemon', lambda: os.kill(-{daemon.pid}, signal.SIGTERM))
        def tgkill(tgid, tid, sig):
            if libc.syscall(234, tgid, tid, sig) < 0:
                raise OSError(ctypes.get_errno(), 'tgkill')
        call('tgkill_daemon', lambda: tgkill({daemon.pid}, {daemon.pid}, 9))
        def tkill(tid, sig):
            if libc.syscall(200, tid, sig) < 0:
                raise OSError(ctypes.get_errno(), 'tkill')
        call('tkill_daemon', lambda: tkill({daemon.pid}, 9))
        def sigqueue(pid, sig):
            if libc.syscall(129, pid, sig, ctypes.c_void_p(0)) < 0:
                raise OSError(ctypes.get_errno(), 'rt_sigqueueinfo')
        call('rt_sigqueueinfo_daemon', lambda: sigqueue({daemon.pid}, 9))
    """))
    assert_ok(d)
    got = errno_lines(d)
    assert len(got) == 6, d
    assert set(got.values()) <= {"EPERM", "ESRCH", "ENOSYS"}, d
    assert daemon.proc.poll() is None


def test_python_signals_to_itself_cannot_end_pid_1(daemon):
    """The program is PID 1 of its namespace: signals it sends itself
    without a handler are dropped (documented), so it cannot fake a
    sandbox kill either; the run ends normally."""
    d = attack_py(daemon, src("""
        import os, signal
        os.kill(1, signal.SIGKILL)
        os.kill(1, signal.SIGTERM)
        signal.raise_signal(signal.SIGUSR1)
        print('alive')
    """))
    assert_ok(d, "alive\n")


@pytest.mark.host_view
def test_run_cannot_signal_the_daemons_process_group(daemon):
    """Found by this suite, fixed by a session per run (setsid in the jail):
    runs used to stay in the daemon's session and process group, the filter
    lets kill(0, sig) through, and the kernel lets SIGCONT cross UIDs inside
    a session, so a run reached every process of the daemon's group (the
    jailer, the HTTP process, the zygote, other runs, and here this test
    process, whose SIGCONT handler fired). A run signals nothing but its
    own processes."""
    assert os.getpgid(daemon.pid) == os.getpgrp(), "the daemon is not in the test's process group"
    got = []
    old = signal.signal(signal.SIGCONT, lambda s, f: got.append(s))
    try:
        d = attack_py(daemon, "import os, signal\ntry:\n    os.kill(0, signal.SIGCONT)\nexcept OSError:\n"
                              "    pass\nprint('sent')\n")
        time.sleep(0.2)
    finally:
        signal.signal(signal.SIGCONT, old)
    assert_ok(d, "sent\n")
    assert got == [], "SIGCONT from a run reached a process of the daemon's process group"


@pytest.mark.host_view
def test_node_cannot_signal_the_daemon(daemon):
    pids = host_pids(daemon)[:-1]
    d = attack_js(daemon, src(f"""
        const res = [];
        for (const pid of {pids!r}.concat([-1, -{daemon.pid}]))
            for (const sig of ['SIGKILL', 'SIGTERM', 'SIGSTOP']) {{
                try {{ process.kill(pid, sig); res.push('SENT'); }} catch (e) {{ res.push(e.code); }}
            }}
        try {{ process._debugProcess({daemon.pid}); res.push('SENT'); }} catch (e) {{ res.push(e.code || 'threw'); }}
        console.log([...new Set(res)].sort().join(','));
    """))
    assert_ok(d)
    assert set(d["stdout"].strip().split(",")) <= {"EPERM", "ESRCH", "threw"}, d
    assert daemon.proc.poll() is None
