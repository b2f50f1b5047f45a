"""Helpers of the attack suite: run a hostile program, assert the verdict a
user would see, and check that the daemon came through unharmed.

Every attack goes through `attack()` (or `attack_py`/`attack_js`), which
remembers the languages a daemon ran so the after-check (conftest.py,
autouse) can prove a normal run of each still works.
"""
import errno
import textwrap
import threading

def src(text):
    return textwrap.dedent(text).lstrip("\n")


def attack(d, code, language="python3", **fields):
    """Run `code` on daemon `d`; return `data` of a successful envelope."""
    langs = d.__dict__.setdefault("_attack_languages", set())
    langs.add(language)
    r = d.run(src(code), session=fields.pop("session", None), language=language, **fields)
    assert r["code"] == 0 and r["message"] == "success", r
    return r["data"]


def attack_py(d, code, **fields):
    return attack(d, code, "python3", **fields)


def attack_js(d, code, **fields):
    return attack(d, code, "nodejs", **fields)


def short(d):
    """The verdict without huge streams, for assertion messages."""
    out = {k: v for k, v in d.items() if k not in ("stdout", "stderr", "error")}
    for k in ("stdout", "stderr", "error"):
        v = d.get(k, "")
        out[k] = v if len(v) < 1500 else v[:700] + f"...<{len(v)} chars>..." + v[-700:]
    return out


# ----------------------------------------------------------------- verdicts

def assert_ok(d, stdout=None):
    """The program ran to its end, exit 0, nothing on stderr."""
    assert (d["exit_code"], d["status"], d["error"]) == (0, "ok", ""), short(d)
    assert d["stderr"] == "", short(d)
    if stdout is not None:
        assert d["stdout"] == stdout, short(d)


def program_error(code, stderr):
    """`error` of a run the program itself ended with a non-zero code."""
    return f"process exited with code {code}" + (f"\n{stderr}" if stderr else "")


def assert_exception(d, exc, message=None, stdout=None):
    """Python: an uncaught exception of type `exc` ended the run with code 1;
    `error` is the exit line plus the traceback."""
    assert (d["exit_code"], d["status"]) == (1, "runtime_error"), short(d)
    assert d["error"] == program_error(1, d["stderr"]), short(d)
    last = d["stderr"].rstrip("\n").split("\n")[-1]
    assert last.startswith(exc + ":") or last == exc, short(d)
    if message is not None:
        assert message in last, short(d)
    if stdout is not None:
        assert d["stdout"] == stdout, short(d)


def sandbox_ended(d, status, reason, stdout=None):
    assert (d["exit_code"], d["status"]) == (-1, status), short(d)
    assert d["error"] == f"process exited with code -1\n{reason}\n" + d["stderr"], short(d)
    if stdout is not None:
        assert d["stdout"] == stdout, short(d)


def assert_denied(d, syscall, stdout=None):
    """A kill-list call: the run was stopped and the call is named."""
    sandbox_ended(d, "syscall_denied",
                  f"error: operation not permitted: syscall '{syscall}' is not allowed", stdout)


def assert_timeout(d, stdout=None):
    sandbox_ended(d, "timeout", "error: timeout", stdout)


def assert_memory_limit(d, stdout=None):
    sandbox_ended(d, "memory_limit", "error: memory limit exceeded", stdout)


def assert_output_limit(d, cap):
    assert (d["exit_code"], d["status"], d["truncated"]) == (-1, "output_limit", True), short(d)
    assert d["error"].startswith("process exited with code -1\nerror: output limit exceeded\n"), short(d)
    size = len(d["stdout"].encode()) + len(d["stderr"].encode())
    assert 0 < size <= cap, (size, cap)


def assert_killed_by_signal(d, sig, stdout=None):
    """Died of a signal the sandbox did not send (SIGSYS of a foreign
    architecture, a crash)."""
    assert d["exit_code"] != 0 and d["status"] == "runtime_error", short(d)
    assert d["error"].startswith(f"process exited with code {d['exit_code']}\n"
                                 f"error: killed by signal {sig}\n"), short(d)
    if stdout is not None:
        assert d["stdout"] == stdout, short(d)


def assert_not_printed(d, marker="PWNED"):
    """Nothing the attack would print on success came out (tracebacks may
    quote the source line that holds the marker)."""
    assert marker not in d["stdout"], short(d)
    assert not any(line.lstrip().startswith(marker) for line in d["stderr"].splitlines()), short(d)


def errno_lines(d):
    """'name ERRNO' lines printed by the probes, as a dict."""
    out = {}
    for line in d["stdout"].splitlines():
        k, _, v = line.rpartition(" ")
        out[k] = v
    return out


# ------------------------------------------------------- program fragments

# Python preamble: `sc(nr, *args)` makes a raw syscall through libc and
# returns its errno name ("OK" on success).
PY_SYSCALL = src("""
    import ctypes, errno
    libc = ctypes.CDLL(None, use_errno=True)
    def sc(nr, *args):
        ctypes.set_errno(0)
        r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args])
        return "OK" if r >= 0 else errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno()))
""")

# Python preamble: hand-written machine code in an anonymous executable
# mapping. raw64(nr, ...) executes the `syscall` instruction (x86_64 ABI,
# returns -errno); raw32(nr, ...) executes `int 0x80` (the i386 ABI).
PY_MACHINE_CODE = src("""
    import ctypes, mmap, struct
    def _exec(code):
        buf = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
        buf.write(code)
        addr = ctypes.addressof(ctypes.c_char.from_buffer(buf))
        return ctypes.CFUNCTYPE(ctypes.c_long)(addr)()
    def raw64(nr, *args):
        regs = [b"\\x48\\xbf", b"\\x48\\xbe", b"\\x48\\xba", b"\\x49\\xba", b"\\x49\\xb8", b"\\x49\\xb9"]
        code = b"\\x48\\xb8" + struct.pack("<Q", nr & 0xffffffffffffffff)
        for r, a in zip(regs, args):
            code += r + struct.pack("<Q", a & 0xffffffffffffffff)
        return _exec(code + b"\\x0f\\x05\\xc3")          # syscall; ret
    def raw32(nr, *args):
        regs = [b"\\xbb", b"\\xb9", b"\\xba"]
        code = b"\\x53\\xb8" + struct.pack("<I", nr)      # push rbx; mov eax, nr
        for r, a in zip(regs, args):
            code += r + struct.pack("<I", a & 0xffffffff)
        return _exec(code + b"\\xcd\\x80\\x5b\\xc3")      # int 0x80; pop rbx; ret
""")


# Python preamble: own_memory(n) yields (maps line, bytes) for every
# readable mapping of the program's own address space, in 64 KiB pieces
# that overlap by n - 1 bytes (so a string of n bytes is never cut). The
# kernel does the reading (write(2) from the address into a pipe), so a
# mapping that goes away meanwhile (a block this very scan freed) is an
# EFAULT, not a crash; /proc/self/mem is closed to the run. Mappings over
# 4 GiB are skipped: only ASan's shadow (sanitized builds) is that big,
# terabytes of its metadata.
PY_OWN_MEMORY = src("""
    import ctypes, os
    def own_memory(n):
        libc = ctypes.CDLL(None, use_errno=True)
        r, w = os.pipe()
        step = 65536 - (n - 1)
        for line in open('/proc/self/maps').read().splitlines():
            rng, perms = line.split()[:2]
            if perms[0] != 'r' or line.endswith(('[vvar]', '[vsyscall]', '[vvar_vclock]')):
                continue
            lo, hi = (int(x, 16) for x in rng.split('-'))
            if hi - lo > 1 << 32:
                continue
            for off in range(lo, hi, step):
                k = libc.syscall(1, w, ctypes.c_void_p(off), ctypes.c_size_t(min(65536, hi - off)))
                if k <= 0:
                    break
                yield line, os.read(r, k)
""")

# Node.js preamble: search(needle) walks the whole visible file system
# (but /usr, /dev and the process's own /proc entries that are huge or
# hang) and returns the paths whose name or content holds needle.
JS_SEARCH = src("""
    const fs = require('fs');
    function search(needle) {
        const hits = [];
        const skip = ['/usr', '/dev', '/proc/1/task', '/proc/self', '/proc/thread-self',
                      '/proc/1/mem', '/proc/1/pagemap', '/proc/1/clear_refs'];
        const walk = (dir) => {
            let names; try { names = fs.readdirSync(dir); } catch (e) { return; }
            for (const n of names) {
                const p = dir === '/' ? '/' + n : dir + '/' + n;
                if (skip.includes(p)) continue;
                if (n.includes(needle)) hits.push(p);
                let st; try { st = fs.lstatSync(p); } catch (e) { continue; }
                if (st.isDirectory()) walk(p);
                else if (st.isFile()) {
                    try { if (fs.readFileSync(p, 'latin1').includes(needle)) hits.push(p); } catch (e) {}
                }
            }
        };
        walk('/');
        return hits;
    }
""")


def concurrently(*calls, timeout=60):
    """Run each zero-argument callable in its own thread, started together;
    return their results in order (re-raising the first exception)."""
    results = [None] * len(calls)
    errors = [None] * len(calls)
    barrier = threading.Barrier(len(calls))

    def go(i, f):
        try:
            barrier.wait(10)
            results[i] = f()
        except BaseException as e:  # reported below
            errors[i] = e

    ts = [threading.Thread(target=go, args=(i, f), daemon=True) for i, f in enumerate(calls)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout)
    assert not any(t.is_alive() for t in ts), "a concurrent call did not finish"
    for e in errors:
        if e is not None:
            raise e
    return results


def errname(e):
    return errno.errorcode.get(e, str(e))

