"""Red team (third pass) of the disk bounds' later changes: control jobs
and the moves of trees into subvolumes excluding each other, the walks
shared through file_dir_each.

A control job asked for while a tree is copied must start once that copy
is over, not after copies that began after it asked; a process a control
job leaves behind holds every first job of a binding for the control
wait (10 s) and leaves its trees unbounded, each job again, until it
ends; trees a control script makes odd (unreadable directories, names
with newlines, deep, wide, links, FIFOs) move in whole.

One daemon for the module (the red module's settings); every case is
bounded (at most some 10^5 empty files, tens of seconds). After every
case all jobs are deleted and nothing of them may be left."""
import os
import stat
import threading
import time

import pytest

from conftest import eventually, module_shell_fixtures, scaled
from conftest import job_stderr as stderr_of
from test_attack_shell_disk_red import SHELL, fresh, leftovers, run

_module_shelld, sh = module_shell_fixtures(SHELL, enable_network=False)


def make_files(d, path, n):
    r, out = run(d, f"""\
        mkdir -p {path}/d && cd {path}/d && python3 -c 'import os
        for i in range({n}): open(str(i), "w").close()' && echo made""", deadline=120)
    assert out == "made\n", (r, out, stderr_of(d, r["job_id"]))


def in_thread(fn, *args):
    box = {}

    def body():
        try:
            box["value"] = fn(*args)
        except BaseException as e:  # noqa: B036 (handed to the test)
            box["error"] = e
        box["at"] = time.time()
    t = threading.Thread(target=body)
    t.start()
    return t, box


def first_job(d, h):
    c = d.shell_client()
    r = c.run("echo first", env={"HOME": h}, mode="stdio", timeout=5, http_timeout=scaled(60))
    return c.follow(r, scaled(30))


def control_job(d):
    c = d.shell_client()
    r = c.run("date +%s.%N", mode="stdio", timeout=5, http_timeout=scaled(60))
    return c.follow(r, scaled(30))


def test_a_control_job_waits_for_the_copy_it_found_not_for_later_ones(sh):
    """SECURITY.md: a control job asked for while a tree is being copied
    starts once the trees are exchanged (at most the copy's 10 s). Here
    binding A's tree is being copied when the control job is asked for,
    and binding B's first job arrives just after: B's copy (longer than
    A's) must not hold the control job too; else a stream of first jobs
    of new bindings keeps every control job waiting, past any bound."""
    ha, _ = fresh(sh)
    hb, _ = fresh(sh)
    make_files(sh, ha, 20000)
    make_files(sh, hb, 80000)
    ta, a = in_thread(first_job, sh, ha)
    try:
        # A is copying once its temporary subvolume is there
        def copying():
            assert leftovers(sh)
        eventually(copying, scaled(10))
        asked = time.time()
        tc, ctl = in_thread(control_job, sh)
        time.sleep(0.2)
        tb, b = in_thread(first_job, sh, hb)
    finally:
        ta.join()
    tc.join()
    tb.join()
    for box in (a, b, ctl):
        assert "error" not in box, box
    started = float(ctl["value"][1])
    said = (f"control asked at +0, started at +{started - asked:.2f} s; A's first job done at"
            f" +{a['at'] - asked:.2f} s, B's at +{b['at'] - asked:.2f} s")
    print(said)
    assert a["value"][1] == b["value"][1] == "first\n"
    assert os.stat(ha).st_ino == 256, said
    assert os.stat(hb).st_ino == 256, said
    assert not leftovers(sh), leftovers(sh)
    # A's run answers once A's trees are exchanged; the control job starts
    # then too (slack for a loaded machine), not after B's copy
    assert started < a["at"] + scaled(1.5), said


def test_a_process_left_by_a_control_job_leaves_new_bindings_unbounded(sh):
    """A control script that lasts milliseconds but leaves one process
    behind (here `sleep`) is a live control job until that process ends
    (or the job is deleted, or shell.retention passes): every job of a
    binding whose trees are not yet bounded waits the control wait (10 s)
    and starts with its HOME unbounded, each job again. Deleting the
    control job ends it; the next job of the binding is bounded at once."""
    r, out = run(sh, "sleep 60 >/dev/null 2>&1 &\necho left")
    assert out == "left\n", (r, out)
    ctl = r["job_id"]
    h, _ = fresh(sh)
    took = []
    for _ in range(2):
        t0 = time.monotonic()
        r, out = run(sh, "echo first", h=h)
        took.append(time.monotonic() - t0)
        assert out == "first\n", (r, out, stderr_of(sh, r["job_id"]))
        assert os.stat(h).st_ino != 256, "bounded although a control job lives"
    said = f"two jobs of one binding took {took[0]:.1f} s and {took[1]:.1f} s"
    print(said)
    assert all(t >= 9.5 for t in took), said
    assert sum(f"control job {ctl} still runs" in ln for ln in sh.log.splitlines()) >= 2
    sh.client.delete(ctl, force=True, grace_seconds=0)
    t0 = time.monotonic()
    r, out = run(sh, "echo third", h=h)
    took = time.monotonic() - t0
    assert out == "third\n", (r, out)
    assert os.stat(h).st_ino == 256
    assert took < scaled(5), took
    assert not leftovers(sh), leftovers(sh)


ODD = r"""
import os, stat
root = os.environ["T"]
os.makedirs(root + "/deep", exist_ok=True)
p = root + "/deep"
for i in range(200):
    p += "/d"
    os.mkdir(p)
with open(p + "/bottom", "w") as f:
    f.write("bottom")
os.mkdir(root + "/wide")
for i in range(5000):
    open(root + "/wide/%d" % i, "w").close()
os.mkdir(root + "/new\nline")
with open(root + "/new\nline/a\nb", "w") as f:
    f.write("nl")
os.mkdir(root + "/locked")
os.mkdir(root + "/locked/inner")
with open(root + "/locked/inner/secret", "w") as f:
    f.write("s" * 5000)
with open(root + "/locked/unreadable", "w") as f:
    f.write("u")
os.chmod(root + "/locked/unreadable", 0)
os.chmod(root + "/locked/inner", 0)
os.chmod(root + "/locked", 0)
os.symlink("/etc/passwd", root + "/abs-link")
os.symlink("deep/d", root + "/rel-link")
os.symlink("missing\nname", root + "/dangling")
os.mkfifo(root + "/fifo")
with open(root + "/hard1", "w") as f:
    f.write("hh")
os.link(root + "/hard1", root + "/hard2")
os.mkdir(root + "/sticky")
os.chmod(root + "/sticky", 0o1750)
print("made")
"""


def manifest(top):
    """Every entry below top (as root: mode 000 does not stop it): its
    type and mode bits, size, content of small files, link target."""
    seen = {}
    for dirpath, dirs, files in os.walk(top):
        for name in dirs + files:
            p = os.path.join(dirpath, name)
            st = os.lstat(p)
            rel = os.path.relpath(p, top)
            what = [stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode), st.st_nlink]
            if stat.S_ISREG(st.st_mode):
                what.append(st.st_size)
                if st.st_size:
                    with open(p, "rb") as f:
                        what.append(f.read(64))
            elif stat.S_ISLNK(st.st_mode):
                what.append(os.readlink(p))
            seen[rel] = tuple(what)
    return seen


def test_odd_trees_made_by_a_control_script_move_in_whole(sh):
    """The copy now walks with file_dir_each: a tree with unreadable
    directories and files (mode 000), names with newlines, 200 levels,
    5000 entries in one directory, symbolic links (one dangling, named
    with a newline), a FIFO, hard links and a sticky directory moves into
    its subvolume as it was, and nothing of the move is left."""
    h, _ = fresh(sh)
    r, out = run(sh, f"mkdir -p {h}/t && T={h}/t python3 -c '{ODD.replace(chr(39), '')}'",
                 deadline=60)
    assert out == "made\n", (r, out, stderr_of(sh, r["job_id"]))
    before = manifest(h)
    assert len(before) > 5200
    r, out = run(sh, "echo first", h=h)
    assert out == "first\n", (r, out, stderr_of(sh, r["job_id"]))
    assert os.stat(h).st_ino == 256, "not moved into a subvolume"
    after = manifest(h)
    assert set(after) == set(before), (set(before) ^ set(after))
    differ = {k: (before[k], after[k]) for k in before if before[k] != after[k]}
    assert not differ, list(differ.items())[:10]
    assert not leftovers(sh), leftovers(sh)
    # the job itself can still remove what its control script made
    r, out = run(sh, f"chmod -R u+rwx {h}/t && rm -rf {h}/t && echo gone", h=h)
    assert out == "gone\n", (r, out, stderr_of(sh, r["job_id"]))
