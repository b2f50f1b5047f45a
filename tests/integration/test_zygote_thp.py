"""The Python zygote under each transparent-huge-page mode of the host's
kernel (madvise, always, never), set for the test by writing
/sys/kernel/mm/transparent_hugepage/enabled and written back to what it
was in a `finally`, whatever happens. This changes a host-wide setting
for the file's duration: never run it beside other suites (docs/TESTING.md).
Where the host does not let the mode be set (no THP in the kernel, /sys
read-only, not root, the 2 MiB size's own setting not inheriting the
global one) each case skips, saying why.

In every mode the zygote logs the mode it found, once; with madvise and
always it holds huge pages, with never none at all (MADV_COLLAPSE does
not ask the mode: the zygote must not call it then), nor do its armed
children. And runs are what they are without huge pages: the output of
`python3 -c`, a stack canary and random state of their own, and nothing
one run writes over the zygote's memory (splitting its shared huge
pages in that run alone) reaches a run going on at the same time."""
import contextlib
import os
import re
import subprocess
import threading
import time

import pytest

from conftest import assert_overlapped, py_clocked, scaled, take_interval
from test_warm import armed, wait_for, zygote_pid

THP = "/sys/kernel/mm/transparent_hugepage"


def mode_of(path):
    with open(path) as f:
        m = re.search(r"\[(\w+)\]", f.read())
    return m.group(1) if m else None


def set_mode(mode):
    with open(os.path.join(THP, "enabled"), "w") as f:
        f.write(mode)


@contextlib.contextmanager
def thp_mode(mode):
    """The host's THP mode set to mode for the block, then back to what it
    was, also when the block fails; skips where the host forbids it."""
    enabled = os.path.join(THP, "enabled")
    if not os.path.exists(enabled):
        pytest.skip(f"THP {mode}: the kernel has no transparent huge pages ({enabled} missing)")
    if os.geteuid() != 0:
        pytest.skip(f"THP {mode}: setting the mode needs root")
    with open(os.path.join(THP, "hpage_pmd_size")) as f:
        own = os.path.join(THP, f"hugepages-{int(f.read()) >> 10}kB", "enabled")
    if os.path.exists(own) and mode_of(own) != "inherit":
        pytest.skip(f"THP {mode}: {own} is {mode_of(own)}, not inherit: the global mode "
                    "does not apply to 2 MiB pages here")
    original = mode_of(enabled)
    try:
        try:
            set_mode(mode)
        except OSError as e:
            pytest.skip(f"THP {mode}: the host refuses the mode ({e})")
        assert mode_of(enabled) == mode
        yield
    finally:
        set_mode(original)
        assert mode_of(enabled) == original, f"THP mode not restored to {original}"


def anon_huge_kib(pid):
    """AnonHugePages of a process, in KiB (None if it is gone)."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("AnonHugePages:"):
                    return int(line.split()[1])
    except (FileNotFoundError, ProcessLookupError):
        return None
    return 0


def run(d, code):
    data = d.run_data(code, enable_network=True)
    assert data["status"] == "ok" and data["warm"] is True, data
    return data


# Touches the preloaded libraries and enough fresh memory to take new
# arenas; its output depends on nothing but Python.
SAME = """
import hashlib, json, jinja2, requests, httpx
t = jinja2.Template('{% for i in r %}{{ i }},{% endfor %}').render(r=range(5))
d = {str(i): [i] * (i % 7) for i in range(60000)}
h = hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()
print(t, requests.__title__, httpx.__name__, len(d), h)
"""

CANARY_AND_RANDOM = """
import ctypes, random
libc = ctypes.CDLL(None)
libc.pthread_self.restype = ctypes.c_void_p
print(ctypes.string_at(libc.pthread_self() + 0x28, 8).hex(), random.getrandbits(64))
"""

# Reads this process's memory through a pipe (write(2) from each mapped
# range), as a run can: is prefix followed by the bytes of tail (a list,
# so the whole needle is never in this program's own memory)?
IN_MEMORY = """
import ctypes, os
def in_memory(prefix, tail):
    libc = ctypes.CDLL(None, use_errno=True)
    r, w = os.pipe()
    n = len(prefix) + len(tail)
    for line in open('/proc/self/maps').read().splitlines():
        rng, perms = line.split()[:2]
        if perms[0] != 'r' or line.endswith(('[vvar]', '[vsyscall]', '[vvar_vclock]')):
            continue
        lo, hi = (int(x, 16) for x in rng.split('-'))
        if hi - lo > 1 << 32:
            continue
        for off in range(lo, hi, 65536 - n):
            k = libc.syscall(1, w, ctypes.c_void_p(off), ctypes.c_size_t(min(65536, hi - off)))
            if k <= 0:
                break
            data = os.read(r, k)
            at = data.find(prefix)
            while at >= 0:
                if list(data[at + len(prefix):at + n]) == tail:
                    return True
                at = data.find(prefix, at + 1)
    return False
"""


def writer(token):
    """Writes token over objects the zygote made (on its shared pages),
    then holds still while the reader runs."""
    return py_clocked(f"""
import builtins, json, requests, sys, time
tok = 'THPLEAK-' + {token!r}
requests.__title__ = tok
json.LEAK = tok
builtins.LEAK = tok
sys.modules['jinja2'].__dict__['LEAK'] = tok
held = [bytearray(tok.encode()) * 4096 for _ in range(64)]
time.sleep(3)
print('held', len(held))
""")


def reader(token):
    return py_clocked(IN_MEMORY + f"""
import builtins, json, requests, sys
print(requests.__title__, hasattr(json, 'LEAK'), hasattr(builtins, 'LEAK'),
      'LEAK' in sys.modules['jinja2'].__dict__,
      in_memory(b'THPLEAK-', {list(token.encode())}))
""")


@pytest.mark.parametrize("mode", ["madvise", "always", "never"])
def test_zygote_under_thp_mode(lockboxd_factory, mode):
    expected = subprocess.run(["/usr/bin/python3", "-I", "-c", SAME], capture_output=True,
                              text=True, check=True, timeout=60).stdout
    with thp_mode(mode):
        d = lockboxd_factory(warm={"mode": "warm", "python_pool": 3, "nodejs_pool": 0})
        assert wait_for(lambda: zygote_pid(d) and len(armed(d)) >= 3, scaled(20)), armed(d)
        z = zygote_pid(d)
        found = re.findall(r"event=zygote\.thp mode=(\w+) huge_bytes=(\d+)", d.log)
        assert len(found) == 1 and found[0][0] == mode, d.log[-3000:]
        huge = anon_huge_kib(z)
        if mode == "never":
            assert found[0][1] == "0" and huge == 0, (found, huge)
            children = [anon_huge_kib(p) for p, _ in armed(d)]
            assert all(h in (0, None) for h in children), children
        else:
            # the preloads fill ~20 MiB of arenas and heap
            assert int(found[0][1]) >= 4 << 20 and huge >= 4 << 10, (found, huge)

        for _ in range(3):
            assert run(d, SAME)["stdout"] == expected

        seen = [run(d, CANARY_AND_RANDOM)["stdout"].split() for _ in range(4)]
        canaries, draws = [s[0] for s in seen], [s[1] for s in seen]
        assert len(set(canaries)) == 4 and all(c.startswith("00") for c in canaries), seen
        assert len(set(draws)) == 4, seen

        token = os.urandom(8).hex()
        results = {}
        held = threading.Thread(target=lambda: results.update(w=run(d, writer(token))))
        held.start()
        try:
            time.sleep(0.3)  # the writer first (the clock lines prove the overlap)
            results["r"] = run(d, reader(token))
        finally:
            held.join(scaled(30))
        w, r = results["w"], results["r"]
        assert_overlapped([take_interval(w), take_interval(r)])
        assert w["stdout"] == "held 64\n", w
        assert r["stdout"] == "requests False False False False\n", r
        # the runs' writes split their own mappings, never the zygote's
        # (khugepaged may still add to it)
        if mode != "never":
            assert anon_huge_kib(z) >= huge, (huge, anon_huge_kib(z))
