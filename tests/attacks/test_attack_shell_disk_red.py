"""Red team (second pass) of the per-binding disk bounds and of three
jail-side changes made beside them: the event loop dropping events of a
watch removed in the same batch, the keeper no longer polling a seccomp
listener that reported POLLHUP, and /etc as a sealed tmpfs of its own.

Disk: a control script writes into a HOME while the binding's first job
converts it; a huge tree stalls the jailer at most the conversion's time
bound and is left as it was; metadata (many small files, xattrs,
directories), fallocate, mmap and copy_file_range stay within a bound;
nothing of a conversion (subvolume, quota group, temporary tree) is left;
a job kept over a restart leaves no new workspace unbounded, ended jobs
do not keep a tree unbounded, a bound turned off leaves no limit behind;
a snapshot saved during a conversion holds the HOME once.

One daemon for the module: a 256 MiB image, 16 MiB per HOME, 24 MiB per
workspace; every case is bounded (tens of MB, seconds). After every case
all jobs are deleted and nothing of them may be left."""
import os
import re
import signal
import subprocess
import sys
import threading
import time
import uuid

import pytest

from attacklib import src
from conftest import job_stderr as stderr_of
from conftest import (ShellError, eventually, module_shell_fixtures, scaled, start_shell_daemon,
                      stop_shell_daemon)

# the restart helpers of the integration suite's restart tests
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
from test_shell_restart import down, up  # noqa: E402

MIB = 1 << 20
SHELL = {"disk_size": "256M", "binding_disk": "16M", "workspace_disk": "24M", "max_jobs": 12,
         "processes": 32, "memory": "128M"}


_module_shelld, sh = module_shell_fixtures(SHELL, enable_network=False)


def run(d, script, h=None, cwd=None, mode="stdio", deadline=30):
    env = {"HOME": h} if h else None
    # a first job may wait for two conversions (HOME, workspace) of up to
    # 10 s each: longer than the SDK's read timeout for a short run
    return d.client.run_to_end(src(script), cwd=cwd, env=env, mode=mode,
                               deadline=scaled(deadline), http_timeout=scaled(40))


def fresh(d):
    tag = uuid.uuid4().hex[:10]
    return d.home_path("homes", tag), d.home_path("ws", tag)


def fs_sync(d):
    subprocess.run(["btrfs", "filesystem", "sync", d.home], check=True, timeout=scaled(30))


def qgroups(d):
    """{"0/N": (referenced, exclusive, max_referenced or None)} of the
    image, after a commit."""
    fs_sync(d)
    out = subprocess.run(["btrfs", "qgroup", "show", "-r", "--raw", d.home],
                         capture_output=True, text=True, check=True).stdout
    groups = {}
    for line in out.splitlines():
        f = line.split()
        if f and re.fullmatch(r"\d+/\d+", f[0]):
            groups[f[0]] = (int(f[1]), int(f[2]), None if f[3] == "none" else int(f[3]))
    return groups


def subvolumes(d):
    out = subprocess.run(["btrfs", "subvolume", "list", "-o", d.home], capture_output=True,
                         text=True, check=True).stdout
    return [line.split(" path ", 1)[1] for line in out.splitlines() if " path " in line]


def rootid(path):
    return subprocess.run(["btrfs", "inspect-internal", "rootid", path], capture_output=True,
                          text=True, check=True).stdout.strip()


def leftovers(d):
    """Temporary trees (.lockbox-subvol-*) anywhere in the first two
    levels of shell.home."""
    found = []
    for top in [d.home] + [os.path.join(d.home, n) for n in os.listdir(d.home)]:
        if os.path.isdir(top) and not os.path.islink(top):
            found += [os.path.join(top, n) for n in os.listdir(top)
                      if n.startswith(".lockbox-subvol-")]
    return found


# ------------------------------------------------------------ conversion

WRITER = """\
i=0; ok=""; bad=0
end=$(( $(date +%s%N) + {ns} ))
while [ "$(date +%s%N)" -lt "$end" ]; do
  if echo "$i" > {target}/w$i; then ok="$ok $i"; else bad=$((bad+1)); fi
  i=$((i+1))
done
echo "ok:$ok"
echo "bad: $bad"
"""


def test_a_control_script_writing_while_the_first_job_converts_loses_nothing(sh):
    """Dify's control script may still write into a HOME (absolute paths,
    or from a cwd inside it) when the binding's first job starts and the
    tree is moved into its subvolume. Every write the script saw succeed
    must be in the HOME afterwards: the conversion waits for the control
    jobs (up to 10 s); nothing of the old tree may be left beside it. (It
    lost some tens of writes of a hundred when the move did not wait.)"""
    h, _ = fresh(sh)
    r, out = run(sh, f"""\
        set -e
        mkdir -p {h}/a {h}/b {h}/many
        cd {h}/many && python3 -c 'import os
        for i in range(6000): open(str(i), "w").close()'
        echo made""")
    assert out == "made\n", (r, out, stderr_of(sh, r["job_id"]))
    # two writers, one by absolute path, one from a cwd in the tree
    ns = int(scaled(3) * 1e9)
    logs = {n: sh.home_path(f"log-{n}-{uuid.uuid4().hex[:6]}") for n in ("a", "b")}
    for name, target, cwd in (("a", f"{h}/a", None), ("b", ".", f"{h}/b")):
        script = WRITER.format(ns=ns, target=target)
        r, out = run(sh, f"( {script} ) >{logs[name]} 2>/dev/null &\necho started", cwd=cwd)
        assert out == "started\n", (r, out)
    time.sleep(0.3)  # both are writing
    t0 = time.monotonic()
    first, out = run(sh, "echo first", h=h)
    took = time.monotonic() - t0
    assert out == "first\n", (first, out, stderr_of(sh, first["job_id"]))
    lost = {}
    for name in ("a", "b"):
        def done():
            with open(logs[name]) as f:
                assert "bad:" in f.read()
        eventually(done, scaled(30))
        with open(logs[name]) as f:
            wout = f.read()
        ok = wout.split("\n")[0].split(":", 1)[1].split()
        present = set(os.listdir(os.path.join(h, name)))
        lost[name] = [i for i in ok if f"w{i}" not in present]
        assert len(ok) >= 5, wout
        os.unlink(logs[name])
    print(f"first job took {took:.2f} s; lost {[(k, len(v)) for k, v in lost.items()]}")
    assert os.stat(h).st_ino == 256
    assert not leftovers(sh), leftovers(sh)
    assert lost == {"a": [], "b": []}, f"writes that succeeded are gone: {lost}"


XATTRS = """\
import os, struct
acl = struct.pack("<I", 2) + b"".join(struct.pack("<HHI", tag, perm, uid) for tag, perm, uid in (
    (1, 6, 0xFFFFFFFF), (2, 4, 1234), (4, 4, 0xFFFFFFFF), (0x10, 4, 0xFFFFFFFF),
    (0x20, 4, 0xFFFFFFFF)))
for path in (".", "d", "d/f"):
    os.setxattr(path, "user.tag", path.encode() * 100)
os.setxattr("d/f", "system.posix_acl_access", acl)
os.setxattr("d", "system.posix_acl_default", acl)
os.setxattr("d/f", "user.big", os.urandom(3000))
"""


def test_the_conversion_keeps_extended_attributes_and_acls(sh):
    """cp -a keeps extended attributes and ACLs, and a control script may
    set them: moving the tree into its subvolume keeps the user.*
    attributes of the HOME, a directory and a file, a file's ACL and a
    directory's default ACL, byte for byte, and the modes with them."""
    h, _ = fresh(sh)
    r, out = run(sh, f"mkdir -p {h}/d && cd {h} && echo data > d/f && "
                     f"python3 - <<'EOF'\n{XATTRS}EOF\necho set")
    assert out == "set\n", (r, out, stderr_of(sh, r["job_id"]))
    paths = (h, f"{h}/d", f"{h}/d/f")
    before = {p: ({n: os.getxattr(p, n) for n in os.listxattr(p)}, os.stat(p).st_mode)
              for p in paths}
    assert len(before[f"{h}/d/f"][0]) == 3 and len(before[f"{h}/d"][0]) == 2, before
    r, out = run(sh, "cat d/f", h=h)
    assert out == "data\n", (r, out, stderr_of(sh, r["job_id"]))
    assert os.stat(h).st_ino == 256
    after = {p: ({n: os.getxattr(p, n) for n in os.listxattr(p)}, os.stat(p).st_mode)
             for p in paths}
    assert after == before


def test_a_huge_tree_stalls_the_jailer_no_longer_than_the_bound_and_stays(sh):
    """A tree of 200,000 files (made by a control script) takes longer to
    move in than the conversion's bound (10 s): the run is refused with a
    clear 500 within the bound (plus slack), other calls are answered
    meanwhile (before main's parked conversions a list waited 8-10 s), the
    tree is left as it was, and nothing of the attempt (the temporary
    subvolume, a tree, its quota group) is left. Under load the copy may
    end just inside the bound and the old tree's removal be cut: that
    leftover (a finding) marks the case xfail."""
    h, _ = fresh(sh)
    n = 200000
    r, out = run(sh, f"""\
        mkdir -p {h}/d && cd {h}/d && python3 -c 'import os
        for i in range({n}): open(str(i), "w").close()' && echo made""", deadline=120)
    assert out == "made\n", (r, out, stderr_of(sh, r["job_id"]))
    before_sub, before_q = subvolumes(sh), set(qgroups(sh))
    stalls, stop = [], threading.Event()

    def probe():
        c = sh.shell_client()
        while not stop.is_set():
            t = time.monotonic()
            c.list(limit=1)
            stalls.append(time.monotonic() - t)
            time.sleep(0.05)

    p = threading.Thread(target=probe)
    p.start()
    t0 = time.monotonic()
    try:
        try:
            try:
                r = sh.client.run("echo first", env={"HOME": h}, mode="stdio", timeout=5,
                                  http_timeout=scaled(60))
                refused = None
            except ShellError as e:
                refused = e
            took = time.monotonic() - t0
        finally:
            stop.set()
            p.join()
        events = [ln for ln in sh.log.splitlines() if "shell.subvol" in ln]
        said = (f"first run {took:.1f} s, longest list {max(stalls):.1f} s over {len(stalls)}"
                f" calls; {refused or 'converted'}; the log: {events[-6:]}")
        print(said)
        assert took < 10 + scaled(8), said
        # the run waits for the worker, the jailer does not: other calls go
        # on (before, a list waited 8-10 s: all of the copy)
        assert max(stalls) < scaled(5), said
        if refused:
            assert (refused.status, refused.code) == (500, "disk_bound_failed"), said
            assert "longer than" in str(refused), said
            assert os.stat(h).st_ino != 256 and len(os.listdir(f"{h}/d")) == n
        else:
            assert os.stat(h).st_ino == 256 and len(os.listdir(f"{h}/d")) == n
        left = leftovers(sh)
        if left and not refused:
            # moved in near the bound: the worker, killed at it, had not yet
            # removed the old tree, which stays under the temporary name
            pytest.xfail(f"finding: the old tree left as {left[0]} (its removal cut at 10 s)")
        assert not left, left
        assert subvolumes(sh) == before_sub + ([] if refused else [os.path.relpath(h, sh.home)])

        def no_group_left():
            now = set(qgroups(sh))
            assert now - before_q <= ({f"0/{rootid(h)}"} if not refused else set()), (now, before_q)
        eventually(no_group_left, scaled(10))
    finally:
        # whatever happened: 200,000 files left behind would fill the
        # snapshots and walks of every later case
        gone = " ".join([h] + leftovers(sh))
        r, out = run(sh, f"rm -rf {gone} && echo gone", deadline=180)
        assert out == "gone\n", (r, out)


def start_ten(d, at_of, keep):
    """Ten jobs started from threads of their own (stdio and pty), job i
    sleeping until at_of(i) (time.time()) and then exiting with i, every
    odd one leaving `sleep keep` running: their ids (None where a start
    failed)."""
    ids = [None] * 10

    def start(i):
        left = f"(sleep {keep} &)" if i % 2 else ""
        script = (f"python3 -c 'import time; time.sleep(max(0, {at_of(i)} - time.time()))'; "
                  f"{left} exit {i}")
        ids[i] = d.shell_client().run(script, mode="stdio" if i % 3 else "pty",
                                      timeout=1)["job_id"]
    starters = [threading.Thread(target=start, args=(i,)) for i in range(10)]
    for t in starters:
        t.start()
    for t in starters:
        t.join()
    return ids


def end_all(d, ids, at=None):
    """Each job ended at once from a thread of its own (every third
    terminated first, then deleted with force), from `at` (time.time(),
    2 ms apart) if given: the errors, but for job_not_found."""
    errors = []

    def hit(job, n):
        c = d.shell_client()
        if at is not None:
            time.sleep(max(0, at - time.time() + 0.002 * n))
        try:
            if n % 3 == 0:
                c.terminate(job, grace_seconds=0)
            c.delete(job, force=True, grace_seconds=0)
        except ShellError as e:
            if e.code != "job_not_found":
                errors.append(e)
        except Exception as e:  # noqa: a dropped connection is a failure too
            errors.append(e)

    threads = [threading.Thread(target=hit, args=(j, n)) for n, j in enumerate(ids)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


# ------------------------------------------------------------ the keeper

LATE_CALL = """\
python3 - <<'PY' &
import ctypes, os, sys, time
if {fork} and os.fork():
    sys.exit(0)  # the first background process ends too: only a grandchild is left
time.sleep(1.5)
libc = ctypes.CDLL(None, use_errno=True)
r = libc.syscall(165, b"none", b"/tmp", b"tmpfs", 0, None)  # mount: on the kill list
with open(os.path.join(os.environ["HOME"], "after-{tag}"), "w") as f:
    f.write(f"{{r}} {{ctypes.get_errno()}}")
PY
echo leader-done
"""


@pytest.mark.parametrize("fork", [False, True], ids=["background", "grandchild"])
def test_a_forbidden_call_after_the_leader_ended_still_ends_the_job(sh, fork):
    """The keeper stops polling the seccomp listener once it reports
    POLLHUP (no process uses the filter). A process left running after the
    job's leader exited (and one forked by a process that then exited too)
    makes a forbidden call 1.5 s later: the call fails, the verdict still
    comes, the job's processes are killed and its stderr says so."""
    h, _ = fresh(sh)
    tag = uuid.uuid4().hex[:6]
    r, out = run(sh, LATE_CALL.format(fork=fork, tag=tag), h=h)
    assert "leader-done" in out, (r, out)
    job = r["job_id"]

    marker = os.path.join(h, f"after-{tag}")

    def ended():
        err = stderr_of(sh, job)
        assert "[lockbox] job killed: forbidden system call mount" in err, err
        procs = sh.job_processes()
        assert not procs, procs
    time.sleep(1.5)
    eventually(ended, scaled(10))
    # the call itself failed (EPERM, answered before the kill, as for a
    # leader's call); it never mounted anything. The kill may land after
    # the answer, while the process writes its marker: absent, empty, or
    # the failure, never a success
    if os.path.exists(marker):
        with open(marker) as f:
            assert f.read() in ("", "-1 1")
    assert sh.client.get(job)["done"]


# ------------------------------------------------------------------ /etc

ETC = """\
import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
def attempt(what, fn):
    try:
        fn()
        print(what, "OK")
    except OSError as e:
        print(what, errno.errorcode.get(e.errno, e.errno))
def sc(*a):
    r = libc.syscall(*a)
    if r < 0:
        raise OSError(ctypes.get_errno(), "")
target = os.path.join(os.environ["HOME"], "x")
open(target, "w").close()
attempt("create", lambda: open("/etc/lockbox-new", "w"))
attempt("mkdir", lambda: os.mkdir("/etc/lockbox-dir"))
attempt("write hosts", lambda: open("/etc/hosts", "a").write("1.2.3.4 evil\\n"))
attempt("write passwd", lambda: open("/etc/passwd", "a").write("x::0:0::/:/bin/sh\\n"))
attempt("truncate resolv", lambda: os.truncate("/etc/resolv.conf", 0))
attempt("rename hosts", lambda: os.rename("/etc/hosts", "/etc/hosts2"))
attempt("rename into", lambda: os.rename(target, "/etc/x"))
attempt("unlink group", lambda: os.unlink("/etc/group"))
attempt("rmdir ssl", lambda: os.rmdir("/etc/ssl"))
attempt("symlink", lambda: os.symlink("/tmp", "/etc/lockbox-link"))
attempt("link", lambda: os.link("/etc/hosts", "/etc/lockbox-hard"))
attempt("chmod etc", lambda: os.chmod("/etc", 0o777))
attempt("utime hosts", lambda: os.utime("/etc/hosts"))
attempt("setxattr", lambda: os.setxattr("/etc/hosts", "user.x", b"1"))
attempt("mknod fifo", lambda: os.mkfifo("/etc/lockbox-fifo"))
st = os.statvfs("/etc")
print("etc readonly", bool(st.f_flag & os.ST_RDONLY))
ro = {}
with open("/proc/self/mountinfo") as f:
    for line in f:
        p = line.split()
        if p[4] == "/etc" or p[4].startswith("/etc/"):
            ro[p[4]] = "ro" in p[5].split(",")
print("etc mounts", len(ro), "writable:", sorted(k for k, v in ro.items() if not v))
"""


def test_a_job_cannot_change_etc(sh):
    """/etc is a tmpfs of its own sealed read-only with its binds in one
    mount_setattr: from a shell job nothing in it can be created, written,
    renamed, linked, removed or chmodded, every mount at or below /etc is
    read-only, and mounting over it or remounting it ends the job (the
    mount API is on the kill list)."""
    h, _ = fresh(sh)
    r, out = run(sh, f"python3 - <<'EOF'\n{ETC}EOF\nls -A /etc | wc -l", h=h)
    assert r["exit_code"] == 0, (r, out, stderr_of(sh, r["job_id"]))
    lines = out.splitlines()
    results = dict(line.rsplit(" ", 1) for line in lines[:15])
    print(out)
    assert len(results) == 15 and "OK" not in results.values(), out
    assert lines[15] == "etc readonly True", out
    assert lines[16].endswith("writable: []") and int(lines[16].split()[2]) >= 5, out
    for call in ("mount -o remount,rw /etc", "mount -t tmpfs none /etc",
                 "mount --bind /tmp /etc/hosts"):
        r, out = run(sh, f"{call}; echo after-$?", h=h, mode="pty")
        assert "after-0" not in out, (call, out)
        assert "forbidden system call" in out or "after-" in out, (call, out)
    r, out = run(sh, "cat /etc/hosts | grep -c evil; test -e /etc/lockbox-new || echo none",
                 h=h)
    assert out == "0\nnone\n", out


# ------------------------------------------------------------ event loop

def test_jobs_ending_together_while_deletes_and_terminates_arrive(sh):
    """The event loop drops events of a watch a handler of the same batch
    removed. Ten jobs end at the same instant (each leaving a process
    behind, or not) while DELETEs (forced, no grace) and terminates for
    them arrive from ten threads at that instant; three rounds. The jailer
    never calls a stale watch: it stays up, every call gets an answer (a
    job gone meanwhile is job_not_found), and nothing of the jobs is
    left."""
    for rnd in range(3):
        at = time.time() + scaled(3)
        ids = start_ten(sh, lambda i: at, 0.2)
        assert None not in ids and time.time() < at, (ids, at - time.time())
        errors = end_all(sh, ids, at)
        assert not errors, errors
        assert sh.proc.poll() is None, f"lockboxd died:\n{sh.log[-4000:]}"
        sh.client.health()
        assert sh.client.list(limit=50) == []
    r, out = run(sh, "echo alive")
    assert out == "alive\n", (r, out)


# ------------------------------------------------------------ the bound

FILL = """\
import errno, mmap, os, sys, time
how, n_done, why = sys.argv[1], 0, "cap"
os.chdir(os.environ["HOME"])
os.makedirs(how, exist_ok=True)
os.chdir(how)
end = time.monotonic() + 20
try:
    if how == "xattrs":
        v = os.urandom(3800)
        for i in range(40000):
            open(f"f{i}", "w").close()
            for k in range(3):
                os.setxattr(f"f{i}", f"user.k{k}", v)
            n_done += 1
            if time.monotonic() > end: why = "time"; break
    elif how == "inline":
        for i in range(40000):
            with open(f"f{i}", "wb") as f:
                f.write(os.urandom(2000))
            n_done += 1
            if time.monotonic() > end: why = "time"; break
    elif how == "dirs":
        for i in range(40000):
            os.mkdir(f"d{i}" + "x" * 200)
            n_done += 1
            if time.monotonic() > end: why = "time"; break
    elif how == "symlinks":
        t = "t" * 3000
        for i in range(40000):
            os.symlink(t, f"l{i}")
            n_done += 1
            if time.monotonic() > end: why = "time"; break
    elif how == "fallocate":
        fd = os.open("big", os.O_WRONLY | os.O_CREAT, 0o600)
        os.posix_fallocate(fd, 0, 64 << 20)
        n_done = 1
    elif how == "mmap":
        fd = os.open("big", os.O_RDWR | os.O_CREAT, 0o600)
        os.ftruncate(fd, 64 << 20)
        m = mmap.mmap(fd, 64 << 20)
        for off in range(0, 64 << 20, 4096):
            m[off] = 1
            n_done += 1
        m.flush()
    elif how == "direct":
        fd = os.open("big", os.O_WRONLY | os.O_CREAT | os.O_DIRECT, 0o600)
        buf = mmap.mmap(-1, 1 << 20)
        buf.write(os.urandom(1 << 20))
        for i in range(64):
            os.write(fd, buf)
            n_done += 1
    elif how == "copy_range":
        # data written in the workspace, copied (reflinked by btrfs) into
        # HOME, the workspace's copy removed: over and over
        ws = sys.argv[2]
        for i in range(40):
            src = os.path.join(ws, "chunk")
            with open(src, "wb") as f:
                f.write(os.urandom(4 << 20))
            a = os.open(src, os.O_RDONLY)
            b = os.open(f"c{i}", os.O_WRONLY | os.O_CREAT, 0o600)
            left = 4 << 20
            while left:
                left -= os.copy_file_range(a, b, left)
            os.close(a); os.close(b); os.unlink(src)
            n_done += 1
    why = "done"
except OSError as e:
    why = errno.errorcode[e.errno]
print(how, n_done, why)
"""


@pytest.mark.parametrize("how", ["xattrs", "inline", "dirs", "symlinks", "fallocate", "mmap",
                                 "direct", "copy_range"])
def test_metadata_and_odd_writes_stay_within_the_bound(sh, how):
    """HOME has a 16 MiB bound. Metadata-heavy trees (files carrying
    xattrs, small files stored inline in the tree, directories with long
    names, long symlinks), fallocate, writes through a shared mapping,
    O_DIRECT writes and copy_file_range (reflinks) from the workspace fill
    it: they end with EDQUOT (a mapping's write with SIGBUS), and once
    committed the HOME's quota group holds at most its bound plus a
    little (what one transaction may let through: at most the workspace's
    bound for data cloned in)."""
    h, ws = fresh(sh)
    r, out = run(sh, f"mkdir -p {h} {ws} && echo ok")
    assert out == "ok\n", (r, out)
    r, out = run(sh, f"python3 - {how} {ws} <<'EOF'\n{FILL}EOF\necho rc=$?", h=h, cwd=ws,
                 deadline=60)
    err = stderr_of(sh, r["job_id"])
    print(out.strip(), err[-300:].strip())
    rid = rootid(h)
    ref, excl, lim = qgroups(sh)[f"0/{rid}"]
    print(f"{how}: referenced {ref / MIB:.2f} MiB, exclusive {excl / MIB:.2f} MiB,"
          f" limit {lim / MIB:.0f} MiB")
    assert lim == 16 * MIB
    if how == "mmap":
        assert "rc=135" in out or "EDQUOT" in out, (out, err)  # SIGBUS, or refused
    else:
        assert f"{how} " in out and " EDQUOT" in out, (out, err)
    slack = (24 + 2) * MIB if how == "copy_range" else 2 * MIB
    assert ref <= lim + slack, (how, ref)
    r, out = run(sh, f"rm -rf {h} {ws} && echo gone", deadline=60)
    assert out == "gone\n", (r, out)


# --------------------------------------------------------------- restarts

def test_a_job_kept_over_a_restart_leaves_no_new_workspace_unbounded(_session_tmp):
    """A job keeps running in a workspace over a restart of lockboxd
    (shell.keep_jobs) that turns shell.workspace_disk on. The next
    lockboxd knows the workspaces of the jobs it adopts (the table records
    them): a new workspace of another binding is converted and bounded
    (its writes past the bound fail), not left to fill the image while the
    kept job lives; the kept job's own workspace, a plain directory, is not
    moved from under it (another binding's job there runs unbounded, said
    in the log)."""
    d = start_shell_daemon(_session_tmp, dict(SHELL, keep_jobs=True, workspace_disk="0"),
                           enable_network=False)
    try:
        ha, wsa = fresh(d)
        hb, wsb = fresh(d)
        hc, _ = fresh(d)
        r, out = run(d, f"mkdir -p {wsb}/p {wsa}/p {wsa}/q && echo ok")
        assert out == "ok\n", (r, out)
        kept = d.client.run(f"sleep 60; cat {wsa}/q/f", env={"HOME": ha}, cwd=f"{wsa}/p",
                            mode="stdio", timeout=1)["job_id"]
        assert os.stat(wsa).st_ino != 256
        down(d, signal.SIGTERM)
        d.shell_settings["workspace_disk"] = "24M"
        up(d)
        assert d.client.get(kept)["status"] == "running"
        r, out = run(d, "head -c 41943040 /dev/zero > big; du -k big | cut -f1", h=hb,
                     cwd=f"{wsb}/p")
        print(out, [line for line in d.log.splitlines() if "subvol" in line][-2:])
        assert os.stat(wsb).st_ino == 256, "the workspace was left a plain directory"
        assert int(out.split()[0]) <= 24 * 1024 + 1024, out
        assert "Disk quota exceeded" in stderr_of(d, r["job_id"])
        r, out = run(d, "echo shared > f && echo ok", h=hc, cwd=f"{wsa}/q")
        assert out == "ok\n", (r, out)
        assert os.stat(wsa).st_ino != 256, "a kept job's workspace was moved from under it"
        assert "shell.subvol_in_use" in d.log
    finally:
        if d.proc.poll() is None:
            d.shell_reset()
        stop_shell_daemon(d)


def test_a_home_with_ended_jobs_is_bounded_once_its_bound_is_turned_on(_session_tmp):
    """A binding ran jobs while shell.binding_disk was off; a restart turns
    it on. Its ended jobs (kept in the table, nothing of them running) do
    not hold its HOME: the next job moves the HOME into its subvolume and
    is bounded, rather than the HOME staying unbounded for as long as the
    table keeps a job of it."""
    d = start_shell_daemon(_session_tmp, dict(SHELL, keep_jobs=True, binding_disk="0"),
                           enable_network=False)
    try:
        h, _ = fresh(d)
        r, out = run(d, "echo before > f; cat f", h=h)
        assert out == "before\n", (r, out)
        assert os.stat(h).st_ino != 256
        down(d, signal.SIGTERM)
        d.shell_settings["binding_disk"] = "16M"
        up(d)
        assert [j["job_id"] for j in d.client.list()] == [r["job_id"]]
        r, out = run(d, "cat f; head -c 41943040 /dev/zero > big; du -k big | cut -f1", h=h)
        lines = out.split()
        assert lines[0] == "before", out
        assert os.stat(h).st_ino == 256, "the HOME was left a plain directory"
        assert int(lines[1]) <= 17 * 1024, out
        assert "Disk quota exceeded" in stderr_of(d, r["job_id"])
    finally:
        if d.proc.poll() is None:
            d.shell_reset()
        stop_shell_daemon(d)


def test_jobs_ending_across_a_restart_while_deletes_arrive(_session_tmp):
    """Ten jobs kept over a restart of lockboxd end at staggered instants
    around it (while it is down, while it starts and its keepers
    reconnect, right after); DELETEs (forced) and terminates for all of
    them arrive from ten threads as soon as it answers. The jailer never
    calls a stale watch: it stays up, every call is answered, nothing of
    the jobs is left."""
    d = start_shell_daemon(_session_tmp, dict(SHELL, keep_jobs=True), enable_network=False)
    try:
        t0 = time.time() + scaled(2)
        ids = start_ten(d, lambda i: t0 + 0.3 * i, 0.3)
        assert None not in ids, ids
        down(d, signal.SIGTERM)
        up(d)
        errors = end_all(d, ids)
        assert not errors, errors
        assert d.proc.poll() is None, f"lockboxd died:\n{d.log[-4000:]}"
        assert d.client.list(limit=50) == []
        r, out = run(d, "echo alive")
        assert out == "alive\n", (r, out)
    finally:
        if d.proc.poll() is None:
            d.shell_reset()
        stop_shell_daemon(d)


def test_bounds_turned_off_are_gone_from_the_trees(_session_tmp):
    """shell.binding_disk: 0 (and shell.workspace_disk: 0) mean "no bound
    but shell.disk_size's" (docs/CONFIG.md). Turned off by a restart after
    trees were bounded: the HOME's limit is gone at its next job while the
    workspace keeps its own; both off, the workspace's is gone too and the
    image's quota groups are off (they cost at every commit)."""
    d = start_shell_daemon(_session_tmp, dict(SHELL), enable_network=False)
    try:
        h, ws = fresh(d)
        r, out = run(d, f"mkdir -p {ws}/p && echo ok")
        assert out == "ok\n", (r, out)
        try:
            r, out = run(d, "echo x > $HOME/f && echo ok", h=h, cwd=f"{ws}/p")
        except Exception:
            print("\n".join(x for x in d.log.splitlines() if "http.request" not in x)[-6000:])
            raise
        assert out == "ok\n", (r, out)
        assert os.stat(h).st_ino == 256 and os.stat(ws).st_ino == 256
        write = ("cat $HOME/f; head -c 20971520 /dev/zero > $HOME/big && echo home-ok; "
                 "head -c 31457280 /dev/zero > big && echo ws-ok; rm -f $HOME/big big")
        # (the trees, subvolumes, come through the restarts whole: the
        # start's sweep of temporary subvolumes leaves them)
        for binding, workspace, want in (("0", "24M", "x\nhome-ok\n"),
                                         ("0", "0", "x\nhome-ok\nws-ok\n")):
            down(d, signal.SIGTERM)
            d.shell_settings.update(binding_disk=binding, workspace_disk=workspace)
            up(d)
            r, out = run(d, write, h=h, cwd=f"{ws}/p")
            assert out == want, (binding, workspace, out, stderr_of(d, r["job_id"]))
        q = subprocess.run(["btrfs", "qgroup", "show", d.home], capture_output=True, text=True)
        assert q.returncode != 0 and "quota" in q.stderr.lower(), (q.stdout, q.stderr)
    finally:
        if d.proc.poll() is None:
            d.shell_reset()
        stop_shell_daemon(d)


# -------------------------------------------------------------- snapshots

def test_a_snapshot_saved_while_a_home_is_converted_holds_it_once(sh):
    """A snapshot of shell.home is saved (by its worker, beside the
    jailer) while a binding's first job moves its HOME into a subvolume.
    The archive holds the HOME's files, each once, and nothing of the
    conversion's temporary tree (restored, a .lockbox-subvol-* tree would
    come back as an unbounded copy nobody removes). It did not always (a
    broken stream once, 2,256 of the 3,000 files once): now a move waits
    for a snapshot at work, and a snapshot asked for while a tree moves
    is refused with 409 snapshot_busy (then asked for again)."""
    import io
    import tarfile
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    from snapshotlib import save, zstd  # noqa: E402
    h, _ = fresh(sh)
    bulk = h + "-0bulk"  # walked first: listed before the HOME, made after it
    n, nb = 3000, 2000
    r, out = run(sh, f"""\
        mkdir -p {bulk} {h}/many && cd {bulk} && python3 -c 'import os
        for i in range({nb}): open(str(i), "w").close()' && cd {h}/many && python3 -c 'import os
        for i in range({n}): open(str(i), "wb").write(os.urandom(8192))' && echo made""",
                 deadline=120)
    assert out == "made\n", (r, out, stderr_of(sh, r["job_id"]))
    rel = os.path.relpath(h, sh.home)
    got = {}

    def saver():
        t0 = time.monotonic()
        got["a"] = save(sh, timeout=scaled(60))
        got["took"] = time.monotonic() - t0
    t = threading.Thread(target=saver)
    t.start()
    time.sleep(0.1)
    t1 = time.monotonic()
    first, out = run(sh, "echo first", h=h)
    conv = time.monotonic() - t1
    t.join()
    print(f"save took {got['took']:.2f} s, the first run {conv:.2f} s from 0.1 s in")
    assert out == "first\n", (first, out)
    a = got["a"]
    if a.status == 409:  # the move began first: the save is refused, never cut
        assert b"snapshot_busy" in a.body, a
        a = save(sh, timeout=scaled(60))
    assert a.status == 200 and a.complete, a
    with tarfile.open(fileobj=io.BytesIO(zstd(a.body, decompress=True))) as tf:
        names = tf.getnames()
    tmp = [x for x in names if ".lockbox-subvol-" in x]
    mine = [x for x in names if x.startswith(rel + "/many/")]
    print(f"{len(names)} names, {len(tmp)} temporary, {len(mine)} of the HOME's {n}")
    assert not tmp, tmp[:5]
    run(sh, f"rm -rf {bulk} && echo gone", deadline=60)
    assert len(mine) == len(set(mine)) == n, len(mine)


def test_a_conversion_cut_by_a_crash_leaves_the_tree_and_nothing_else(_session_tmp):
    """lockboxd is killed (SIGKILL) while a binding's first job moves a
    big HOME into its subvolume. The worker dies with it; the HOME is whole
    (as it was, or moved whole); the next lockboxd removes the temporary
    subvolume the copy was going to (it holds reflinks of the HOME's data,
    counted nowhere, for good otherwise), and the next job bounds the
    HOME. (A crash after the exchange, while the old tree is removed,
    leaves that tree under its temporary name: a plain directory the start
    cannot find without a walk; not covered.)"""
    d = start_shell_daemon(_session_tmp, dict(SHELL, keep_jobs=True), enable_network=False)
    try:
        h, _ = fresh(d)
        n = 20000  # a copy of some seconds, cut early
        r, out = run(d, f"""\
            mkdir -p {h}/d && cd {h}/d && python3 -c 'import os
            for i in range({n}): open(str(i), "w").close()' && echo made""", deadline=120)
        assert out == "made\n", (r, out)

        def first():
            try:
                d.client.run("true", env={"HOME": h}, mode="stdio", timeout=1,
                             http_timeout=scaled(30))
            except Exception:  # noqa: the daemon is killed under it
                pass
        t = threading.Thread(target=first)
        t.start()

        def copying():  # the temporary subvolume made, the HOME not swapped yet
            assert leftovers(d) and os.stat(h).st_ino != 256
        eventually(copying, scaled(10))
        time.sleep(0.2)
        down(d, signal.SIGKILL)
        assert os.stat(h).st_ino != 256, "swapped before the kill: the case missed"
        t.join()

        def worker_gone():  # its parent's death signal (it may be in a btrfs call)
            workers = [p for p in d.shell_processes() if "lockbox-subvol" in p[1]]
            assert not workers, workers
        eventually(worker_gone, scaled(5))
        up(d)
        assert len(os.listdir(f"{h}/d")) == n
        left = leftovers(d)
        print("left after the crash:", left, subvolumes(d))
        r, out = run(d, "ls d | wc -l", h=h, deadline=60)
        assert out == f"{n}\n", (r, out)
        assert os.stat(h).st_ino == 256
        assert not left, left
        assert not leftovers(d), leftovers(d)
    finally:
        if d.proc.poll() is None:
            d.shell_reset()
        stop_shell_daemon(d)
