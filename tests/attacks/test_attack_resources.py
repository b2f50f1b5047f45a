"""Resource exhaustion against the `tight` daemon (worker_timeout 4 s,
memory 128M, output 64K, /tmp 8M and 512 inodes, files 2M, 32 tasks, 64
open files): fork and thread bombs, memory bombs, CPU spin, sleeping past
the deadline, threads left behind, output floods, fd exhaustion, filling
/tmp. The sandbox ends the run and says why, or the program gets an
ordinary error; either way the daemon serves on and nothing is left."""
import time

import pytest

from attacklib import (assert_exception, assert_memory_limit, assert_ok, assert_output_limit,
                       assert_timeout, attack_js, attack_py, concurrently, src)

from conftest import TIGHT, TIGHT_MEMORY, TIGHT_OUTPUT, scaled, worker_timeout_for

# The tight daemon's deadline as it really is (scaled, whole seconds).
DEADLINE_MS = worker_timeout_for(TIGHT["worker_timeout"]) * 1000


def timed(f):
    t0 = time.monotonic()
    d = f()
    return d, time.monotonic() - t0


# ------------------------------------------------------------------ deadline

PY_TIMEOUTS = {
    "busy_loop": "while True: pass",
    "sleep": "import time\ntime.sleep(3600)",
    "spinning_threads": src("""
        import threading
        def spin():
            while True: pass
        for _ in range(8):
            threading.Thread(target=spin, daemon=True).start()
        threading.Event().wait()
    """),
    "ignores_every_signal": src("""
        import signal, time
        for s in range(1, 65):
            try:
                signal.signal(s, signal.SIG_IGN)
            except (OSError, ValueError, RuntimeError):
                pass
        while True:
            time.sleep(0.01)
    """),
    "thread_outlives_main": src("""
        import threading, time
        threading.Thread(target=time.sleep, args=(3600,)).start()   # non-daemon: joined at exit
    """),
    "atexit_hang": "import atexit, time\natexit.register(lambda: time.sleep(3600))",
    "fork_attempts_then_spin": src("""
        import os
        for _ in range(100):
            try:
                os.fork()
            except OSError:
                pass
        while True: pass
    """),
}




JS_TIMEOUTS = {
    "busy_loop": "for (;;) {}",
    "interval": "setInterval(() => {}, 1000);",
    "atomics_wait": "Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0);",
    "microtask_loop": "const f = () => queueMicrotask(f); f();",
    "busy_workers": src("""
        const { Worker } = require('worker_threads');
        for (let i = 0; i < 4; i++) new Worker('for (;;) {}', { eval: true });
    """),
    "exit_handler_hang": "process.on('exit', () => { for (;;) {} });",
}




@pytest.fixture(scope="module")
def deadline_runs(tight):
    """Every program above, run at the same time (they would take 2 s each
    one after the other); each test below checks one verdict."""
    calls = {("python3", n): (lambda c=c: attack_py(tight, "print('start', flush=True)\n" + c, session=tight.new_session()))
             for n, c in PY_TIMEOUTS.items()}
    calls.update({("nodejs", n): (lambda c=c: attack_js(tight, "console.log('start');\n" + c, session=tight.new_session()))
                  for n, c in JS_TIMEOUTS.items()})
    keys = list(calls)
    return dict(zip(keys, concurrently(*(calls[k] for k in keys))))


@pytest.mark.parametrize("name", sorted(PY_TIMEOUTS))
def test_python_running_past_the_deadline_is_killed(tight, deadline_runs, name):
    d = deadline_runs["python3", name]
    assert_timeout(d, stdout="start\n")
    assert DEADLINE_MS - 100 <= d["wall_ms"] < DEADLINE_MS + scaled(2) * 1000, d["wall_ms"]


@pytest.mark.parametrize("name", sorted(JS_TIMEOUTS))
def test_node_running_past_the_deadline_is_killed(tight, deadline_runs, name):
    d = deadline_runs["nodejs", name]
    assert_timeout(d, stdout="start\n")
    assert DEADLINE_MS - 100 <= d["wall_ms"] < DEADLINE_MS + scaled(2) * 1000, d["wall_ms"]


def test_python_daemon_threads_die_with_the_program(tight):
    """Threads still running when the program ends are not waited for."""
    d, elapsed = timed(lambda: attack_py(tight, src("""
        import threading, time
        for _ in range(10):
            threading.Thread(target=time.sleep, args=(3600,), daemon=True).start()
        print('done')
    """)))
    assert_ok(d, "done\n")
    assert elapsed < scaled(1.5), elapsed


# ------------------------------------------------------------------ tasks

def test_python_fork_bomb_gets_nothing(tight):
    d = attack_py(tight, src("""
        import os
        failed = 0
        for _ in range(20000):
            try:
                os.fork()
            except OSError:
                failed += 1
        print(failed)
    """))
    assert_ok(d, "20000\n")


def test_python_thread_bomb_is_capped(tight):
    d = attack_py(tight, src("""
        import threading
        ev = threading.Event()
        n = 0
        try:
            while n < 10000:
                threading.Thread(target=ev.wait).start()
                n += 1
        except RuntimeError as e:
            print(e, n < 32)
        ev.set()
    """))
    assert_ok(d, "can't start new thread True\n")


def test_node_worker_bomb_is_capped(tight):
    """Each worker is a thread: the task cap stops the bomb, either at once
    (EAGAIN from the constructor) or when the thread fails to start."""
    d = attack_js(tight, src("""
        const { Worker } = require('worker_threads');
        const capped = (how) => { console.log('capped'); process.exit(0); };
        try {
            for (let i = 0; i < 100; i++)
                new Worker('setInterval(() => {}, 1000)', { eval: true }).on('error', capped);
        } catch (e) { capped(e.message); }
        setTimeout(() => { console.log('NOT CAPPED'); process.exit(0); }, 1500);
    """))
    assert_ok(d, "capped\n")


# ------------------------------------------------------------------ memory

PY_MEMORY = {
    "list_of_bytes": "x = []\nwhile True:\n    x.append(b'x' * (8 << 20))",
    "bytes_doubling": "b = b'x' * (1 << 20)\nwhile True:\n    b = b + b",
    "shared_anonymous_mmap": src("""
        import mmap
        ms = []
        while True:
            m = mmap.mmap(-1, 8 << 20, flags=mmap.MAP_SHARED | mmap.MAP_ANONYMOUS)
            m.write(b'x' * (8 << 20))
            ms.append(m)
    """),
    "in_threads": src("""
        import threading
        hog = []
        def eat():
            while True:
                hog.append(bytearray(4 << 20))
        for _ in range(4):
            threading.Thread(target=eat, daemon=True).start()
        threading.Event().wait()
    """),
}




JS_MEMORY = {
    "buffers": "const a = []; for (;;) a.push(Buffer.allocUnsafe(32 << 20).fill(1));",
    "wasm_memory": src("""
        const m = new WebAssembly.Memory({ initial: 1, maximum: 65536 });
        for (;;) { m.grow(160); new Uint8Array(m.buffer).fill(1); }
    """),
    "typed_arrays_in_workers": src("""
        const { Worker } = require('worker_threads');
        for (let i = 0; i < 4; i++)
            new Worker('const a = []; for (;;) a.push(new Float64Array(1 << 20).fill(1));', { eval: true });
        setInterval(() => {}, 1000);
    """),
}




@pytest.fixture(scope="module")
def memory_runs(tight):
    """The bombs above, four at a time (each in its own memory cgroup)."""
    calls = {("python3", n): (lambda c=c: attack_py(tight, "print('start', flush=True)\n" + c, session=tight.new_session()))
             for n, c in PY_MEMORY.items()}
    calls.update({("nodejs", n): (lambda c=c: attack_js(tight, "console.log('start');\n" + c, session=tight.new_session()))
                  for n, c in JS_MEMORY.items()})
    keys = list(calls)
    out = {}
    for i in range(0, len(keys), 4):
        out.update(zip(keys[i:i + 4], concurrently(*(calls[k] for k in keys[i:i + 4]))))
    return out


@pytest.mark.parametrize("name", sorted(PY_MEMORY))
def test_python_memory_bomb_is_stopped(tight, memory_runs, name):
    d = memory_runs["python3", name]
    assert_memory_limit(d, stdout="start\n")
    assert d["memory_peak_bytes"] <= TIGHT_MEMORY * 1.05, d["memory_peak_bytes"]
    assert d["wall_ms"] < scaled(4) * 1000, d["wall_ms"]


@pytest.mark.parametrize("name", sorted(JS_MEMORY))
def test_node_memory_bomb_is_stopped(tight, memory_runs, name):
    d = memory_runs["nodejs", name]
    assert_memory_limit(d, stdout="start\n")
    assert d["memory_peak_bytes"] <= TIGHT_MEMORY * 1.05, d["memory_peak_bytes"]


def test_python_kernel_pipe_buffers_are_charged_to_the_run(tight):
    """Pipe buffers are kernel memory: filled 1 MiB pipes count against the
    run's memory, not the host's."""
    d = attack_py(tight, src("""
        import os, fcntl
        pipes = []
        try:
            while True:
                r, w = os.pipe()
                fcntl.fcntl(w, 1031, 1 << 20)          # F_SETPIPE_SZ
                os.set_blocking(w, False)
                try:
                    while True:
                        os.write(w, b'x' * 65536)
                except BlockingIOError:
                    pass
                pipes.append((r, w))
        except OSError as e:
            print(e.strerror, len(pipes) > 20)
    """))
    assert_ok(d, "Too many open files True\n")
    assert d["memory_peak_bytes"] >= 20 << 20, d["memory_peak_bytes"]


# ------------------------------------------------------------------ output

PY_FLOODS = {
    "stdout_lines": "while True:\n    print('x' * 999)",
    "stderr_lines": "import sys\nwhile True:\n    sys.stderr.write('e' * 999 + '\\n')",
    "one_huge_write": "import os\nos.write(1, b'y' * (50 << 20))",
    "threads": src("""
        import os, threading
        def flood():
            while True:
                os.write(2, b'z' * 4096)
        for _ in range(8):
            threading.Thread(target=flood, daemon=True).start()
        threading.Event().wait()
    """),
}


@pytest.mark.parametrize("name", sorted(PY_FLOODS))
def test_python_output_flood_is_cut(tight, name):
    d = attack_py(tight, PY_FLOODS[name])
    assert_output_limit(d, TIGHT_OUTPUT)


@pytest.mark.parametrize("code", [
    "const s = 'x'.repeat(999); for (;;) console.log(s);",
    "const s = 'e'.repeat(999); for (;;) console.error(s);",
    "process.stdout.write('y'.repeat(50 << 20));",
], ids=["stdout_lines", "stderr_lines", "one_huge_write"])
def test_node_output_flood_is_cut(tight, code):
    d = attack_js(tight, code)
    assert_output_limit(d, TIGHT_OUTPUT)


# ------------------------------------------------------------------ files

def test_python_fd_exhaustion_is_an_ordinary_error(tight):
    d = attack_py(tight, src("""
        import socket, os
        fds = []
        try:
            while True:
                fds.append(os.open('/dev/null', os.O_RDONLY))
        except OSError as e:
            print(e.strerror, len(fds) < 64)
    """))
    assert_ok(d, "Too many open files True\n")


def test_node_fd_exhaustion_is_an_ordinary_error(tight):
    d = attack_js(tight, src("""
        const fs = require('fs');
        const fds = [];
        try { for (;;) fds.push(fs.openSync('/dev/null', 'r')); }
        catch (e) { console.log(e.code, fds.length < 64); }
    """))
    assert_ok(d, "EMFILE true\n")


def test_python_filling_tmp_stops_at_its_size(tight):
    d = attack_py(tight, src("""
        import errno
        n = 0
        try:
            while True:
                with open(f'/tmp/f{n}', 'wb') as f:
                    f.write(b'\\0' * (1 << 20))
                n += 1
        except OSError as e:
            print(errno.errorcode[e.errno], n <= 8)
    """))
    assert_ok(d, "ENOSPC True\n")


def test_python_filling_inodes_stops_at_the_cap(tight):
    d = attack_py(tight, src("""
        import errno, os
        n = 0
        try:
            while True:
                os.mkdir(f'/tmp/d{n}') if n % 2 else open(f'/tmp/f{n}', 'w').close()
                n += 1
        except OSError as e:
            print(errno.errorcode[e.errno], 400 <= n <= 512)
    """))
    assert_ok(d, "ENOSPC True\n")


def test_python_file_size_limit(tight):
    d = attack_py(tight, "open('/tmp/big', 'wb').write(b'x' * (3 << 20))\n")
    assert_exception(d, "OSError", "[Errno 27] File too large")


def test_python_sparse_and_fallocate_tricks(tight):
    d = attack_py(tight, src("""
        import os, errno
        fd = os.open('/tmp/sparse', os.O_CREAT | os.O_RDWR)
        for name, f in (('truncate_1T', lambda: os.truncate(fd, 1 << 40)),
                        ('seek_write_1G', lambda: (os.lseek(fd, 1 << 30, 0), os.write(fd, b'x'))),
                        ('fallocate_100M', lambda: os.posix_fallocate(fd, 0, 100 << 20))):
            try:
                f(); print(name, 'OK')
            except OSError as e:
                print(name, errno.errorcode[e.errno])
        print(os.statvfs('/tmp').f_bfree * os.statvfs('/tmp').f_frsize > 7 << 20)
    """))
    assert_ok(d)
    lines = d["stdout"].splitlines()
    assert lines[0] == "truncate_1T EFBIG" and lines[1] == "seek_write_1G EFBIG", d
    assert lines[2] in ("fallocate_100M EFBIG", "fallocate_100M ENOSPC"), d
    assert lines[3] == "True", d  # nothing was really allocated


def test_node_filling_tmp_and_file_size(tight):
    d = attack_js(tight, src("""
        const fs = require('fs');
        try { fs.writeFileSync('/tmp/big', Buffer.alloc(3 << 20, 1)); console.log('big OK'); }
        catch (e) { console.log('big', e.code); }
        let n = 0;
        try { for (;;) { fs.writeFileSync('/tmp/f' + n, Buffer.alloc(1 << 20, 1)); n++; } }
        catch (e) { console.log('fill', e.code, n <= 8); }
        let k = 0;
        try { for (;;) { fs.writeFileSync('/tmp/i' + k, ''); k++; } }
        catch (e) { console.log('inodes', e.code, k <= 512); }
    """))
    assert_ok(d, "big EFBIG\nfill ENOSPC true\ninodes ENOSPC true\n")
