"""A disk bound per binding (shell.binding_disk) and per workspace
(shell.workspace_disk): shell.home is a btrfs image with quota groups, a
HOME or a workspace becomes a subvolume with a limit before its first job
(a directory made by a control script is moved in, contents, modes and
links kept). A job writing past its bound gets "Disk quota exceeded", the
job's output and the limits metric say so, other bindings still write;
control scripts delete bounded trees with rm -rf (their quota groups go
with them); the bound holds after a restart; snapshots save and restore
over subvolumes; an ext4 image of an earlier version keeps working
without the bounds. A stop leaves no mount or loop device (the suite's
stop checks).

One daemon for the module: a 192 MiB image, 16 MiB per HOME, 24 MiB per
workspace; the ext4 case starts one of its own."""
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import uuid

import requests

from conftest import job_stderr as stderr_of
from conftest import (ShellDaemon, eventually, module_shell_fixtures, scaled, start_shell_daemon,
                      stop_shell_daemon)
from snapshotlib import restore, save
from test_shell_restart import down, restart, up

MIB = 1 << 20
SHELL = {"disk_size": "192M", "binding_disk": "16M", "workspace_disk": "24M", "max_jobs": 8}


_module_shelld, sh = module_shell_fixtures(SHELL, enable_network=False)


def qgroups(d):
    """Quota groups of shell.home's file system and its subvolumes' (once
    the deleted ones are cleaned up): ({"0/5", "0/256"...}, {"0/256"...})."""
    # a commit wakes the cleaner, which drops deleted subvolumes once the
    # last job's mount of them is gone (the kernel's own commit comes
    # every 30 s)
    def cleaned():
        subprocess.run(["btrfs", "filesystem", "sync", d.home], check=True, timeout=scaled(30))
        deleted = subprocess.run(["btrfs", "subvolume", "list", "-d", d.home],
                                 capture_output=True, text=True, check=True).stdout
        assert not deleted.strip(), deleted
    eventually(cleaned, scaled(15))
    subs = subprocess.run(["btrfs", "subvolume", "list", d.home], capture_output=True,
                          text=True, check=True).stdout.split("\n")
    show = subprocess.run(["btrfs", "qgroup", "show", "--raw", d.home], capture_output=True,
                          text=True, check=True).stdout.split("\n")
    return ({line.split()[0] for line in show if line.startswith("0/")},
            {"0/" + line.split()[1] for line in subs if line})


def home(d):
    return d.home_path("homes", uuid.uuid4().hex[:12])


def run(d, script, h=None, cwd=None, deadline=30):
    env = {"HOME": h} if h else None
    r, out = d.client.run_to_end(script, cwd=cwd, env=env, mode="stdio", deadline=scaled(deadline))
    return r, out


def limits(d, which):
    text = requests.get(d.url("/metrics"), timeout=10).text
    for line in text.split("\n"):
        if line.startswith(f'lockbox_shell_limits_total{{limit="{which}"}}'):
            return int(line.split()[-1])
    raise AssertionError(f"no {which} limit in /metrics")


def is_subvolume(path):
    return os.stat(path).st_ino == 256


def test_home_is_btrfs_with_quotas(sh):
    with open("/proc/self/mountinfo") as f:
        line = [m for m in f if f" {sh.home} " in m][0]
    assert " - btrfs /dev/loop" in line, line
    r, out = run(sh, "df -m . | tail -1", h=home(sh))
    assert r["exit_code"] == 0, (r, out)


def test_a_job_past_its_bound_gets_edquot_and_is_told(sh):
    """16 MiB of HOME: writing 40 MiB stops near 16 with "Disk quota
    exceeded"; the job's stderr.log says the HOME is full, the limits
    metric counts it; another binding still writes 8 MiB; once the file is
    gone the first one writes again."""
    before = limits(sh, "disk")
    a, b = home(sh), home(sh)
    r, out = run(sh, "head -c 41943040 /dev/zero > big; du -k big | cut -f1", h=a)
    err = stderr_of(sh, r["job_id"])
    assert "Disk quota exceeded" in err, (r, out, err)
    kib = int(out.split()[0])
    assert 12 * 1024 <= kib <= 16 * 1024, out
    assert f"the job's HOME {a} is full" in err and "shell.binding_disk, 16 MiB" in err, err
    assert is_subvolume(a)
    assert limits(sh, "disk") == before + 1
    r, out = run(sh, "head -c 8388608 /dev/zero > f && du -k f | cut -f1", h=b)
    assert (r["exit_code"], int(out)) == (0, 8192), (r, out)
    r, out = run(sh, "rm big; head -c 4194304 /dev/zero > again && echo ok", h=a)
    assert (r["exit_code"], out) == (0, "ok\n"), (r, out)


def test_control_script_pattern_converts_and_deletes(sh):
    """Dify's control script makes a HOME and a workspace from a default
    HOME with cp -a (files, modes, a symlink, a hard link, a fifo, an
    unreadable file, timestamps); a bound job then sees them unchanged in
    subvolumes and is bounded in both trees (its workspace by 24 MiB);
    the control script deletes both with rm -rf."""
    tag = uuid.uuid4().hex[:8]
    h, ws = sh.home_path("homes", tag), sh.home_path("ws", tag)
    proj = os.path.join(ws, "proj")
    setup = f"""set -e
mkdir -p default/sub homes ws/{tag}/proj
printf data > default/file; chmod 640 default/file
printf secret > default/sub/locked
ln -s file default/link; ln default/file default/hard
mkfifo default/pipe; chmod 700 default/sub
touch -d '2001-02-03 04:05:06' default/file
head -c 3000000 /dev/urandom > default/blob
cp -a default {h}
chmod 000 {h}/sub/locked
cp -a default/blob ws/{tag}/proj/
"""
    r, out = run(sh, setup)
    assert r["exit_code"] == 0, (r, out, stderr_of(sh, r["job_id"]))
    assert not is_subvolume(h)
    check = """set -e
stat -c '%n %a %s %Y %h' file sub sub/locked link hard pipe blob | sort
readlink link; test -p pipe; chmod 600 sub/locked; cat sub/locked; echo
cmp blob "$OLDPWD/blob" && echo same
"""
    r, out = run(sh, f"cd {h}; " + check, h=h, cwd=proj)
    assert r["exit_code"] == 0, (r, out, stderr_of(sh, r["job_id"]))
    lines = out.split("\n")
    assert lines[:7] == sorted(lines[:7])
    stats = dict(l.split(" ", 1) for l in lines[:7])
    assert stats["file"] == "640 4 981173106 2", stats
    assert stats["hard"] == stats["file"], stats
    assert stats["link"].split()[0] == "777" and stats["sub"].split()[0] == "700", stats
    assert stats["sub/locked"].split()[:2] == ["0", "6"], stats
    assert stats["pipe"].split()[0] == "644", stats
    assert lines[7:10] == ["file", "secret", "same"], out
    assert is_subvolume(h) and is_subvolume(ws)
    # the workspace is bounded by its own 24 MiB (3 MB in it already)
    r, out = run(sh, "head -c 41943040 /dev/zero > big; du -k big | cut -f1", h=h, cwd=proj)
    assert 18 * 1024 <= int(out.split()[0]) <= 24 * 1024, (r, out)
    err = stderr_of(sh, r["job_id"])
    assert "Disk quota exceeded" in err and f"workspace {ws} is full" in err, err
    # nothing of the conversion beside them
    left = [n for n in os.listdir(sh.home_path("homes")) + os.listdir(sh.home_path("ws"))
            if n.startswith(".lockbox")]
    assert not left, left
    r, out = run(sh, f"rm -rf {h} ws/{tag} default && ls -A ws && echo done")
    assert (r["exit_code"], out) == (0, "done\n"), (r, out, stderr_of(sh, r["job_id"]))
    assert not os.path.exists(h)
    # made again at the same path (the jobs that used it have ended): a
    # subvolume again at its next job
    r, out = run(sh, f"mkdir -p {h} && echo again > {h}/f")
    assert r["exit_code"] == 0, (r, out)
    r, out = run(sh, "cat f", h=h)
    assert out == "again\n" and is_subvolume(h), (r, out)
    r, out = run(sh, f"rm -rf {h}")
    assert r["exit_code"] == 0, (r, out)
    # the deleted subvolumes' quota groups go with them
    groups, subs = qgroups(sh)
    assert groups == subs | {"0/5"}, (groups, subs)


def subvol_workers(d):
    """Pids of the daemon's tree movers (comm lockbox-subvol, the jobs' UID)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/comm") as f:
                comm = f.read().strip()
            with open(f"/proc/{pid}/status") as f:
                uid = int([line for line in f if line.startswith("Uid:")][0].split()[1])
        except (OSError, IndexError):
            continue
        if comm == "lockbox-subvol" and uid == d.shell_uid:
            found.append(int(pid))
    return found


def test_a_conversion_never_stalls_other_calls(sh):
    """A HOME of 20,000 files made by a control script is moved into its
    subvolume by a worker while the run that needs it waits. With the
    worker stopped, the jailer still answers: a list, another binding's
    job; a second run of the same HOME waits too, and so does a control
    job (it could write into the tree being copied). Once the worker goes
    on, all three start; the two see every file, in the subvolume, and
    what the control job wrote is there."""
    h = home(sh)
    r, out = run(sh, f"mkdir -p {h}/many && cd {h}/many && seq 20000 | xargs touch && "
                     "ls | wc -l", deadline=120)
    assert (r["exit_code"], out) == (0, "20000\n"), (r, out)
    results = {}

    def bound_run(key):
        c = sh.shell_client()
        results[key] = c.run_to_end("ls many | wc -l", env={"HOME": h}, mode="stdio",
                                    deadline=scaled(120))

    first = threading.Thread(target=bound_run, args=("first",))
    first.start()
    stopped = []
    try:
        def caught():
            for pid in subvol_workers(sh):
                os.kill(pid, signal.SIGSTOP)
                stopped.append(pid)
            assert stopped, "no tree mover seen"
        eventually(caught, scaled(20))
        second = threading.Thread(target=bound_run, args=("second",))
        second.start()
        assert sh.shell_client().list() is not None
        r, out = run(sh, "echo other", h=home(sh))
        assert (r["exit_code"], out) == (0, "other\n"), (r, out)
        control = threading.Thread(target=lambda: results.setdefault("control", run(
            sh, f"echo late > {h}/late && echo wrote", deadline=120)))
        control.start()
        control.join(1.0)
        assert not results, results  # all three still wait for the tree
    finally:
        for pid in stopped:
            os.kill(pid, signal.SIGCONT)
    first.join(scaled(120))
    second.join(scaled(120))
    control.join(scaled(120))
    for key in ("first", "second"):
        r, out = results[key]
        assert (r["exit_code"], out) == (0, "20000\n"), (key, r, out)
    assert results["control"][1] == "wrote\n", results["control"]
    assert is_subvolume(h)
    with open(f"{h}/late") as f:
        assert f.read() == "late\n"


def test_a_move_waits_for_a_live_control_job_then_goes_on_unbounded(sh):
    """A control job that left a process running (it may write anywhere
    below shell.home): a binding's first job waits for it, up to 10 s,
    then starts with its HOME unbounded this time, and the log says why.
    Once that process is gone, the next job of the binding moves the
    HOME in."""
    h = home(sh)
    r, out = run(sh, f"mkdir -p {h} && echo hi > {h}/f && (sleep 60 >/dev/null 2>&1 &) && "
                     "echo left")
    assert out == "left\n", (r, out)
    ctl = r["job_id"]
    t0 = time.monotonic()
    r, out = run(sh, "cat f", h=h, deadline=60)
    took = time.monotonic() - t0
    assert (r["exit_code"], out) == (0, "hi\n"), (r, out)
    assert 9.5 <= took < 10 + scaled(10), took
    assert not is_subvolume(h)
    assert f"control job {ctl} still runs" in sh.log, sh.log[-2000:]
    sh.client.delete(ctl, force=True, grace_seconds=0)
    r, out = run(sh, "cat f", h=h)
    assert (r["exit_code"], out) == (0, "hi\n"), (r, out)
    assert is_subvolume(h)


def test_the_bound_holds_after_a_restart(sh):
    """A bounded HOME, the daemon restarted (the image mounted again, its
    quota groups as they were): the next job is bounded the same."""
    h = home(sh)
    r, out = run(sh, "head -c 1048576 /dev/zero > one && echo ok", h=h)
    assert out == "ok\n", (r, out)
    restart(sh, signal.SIGTERM)
    groups, subs = qgroups(sh)
    assert groups == subs | {"0/5"}, (groups, subs)
    r, out = run(sh, "head -c 41943040 /dev/zero > big; du -k big | cut -f1", h=h)
    assert int(out.split()[0]) <= 15 * 1024, (r, out)
    assert "Disk quota exceeded" in stderr_of(sh, r["job_id"])


def test_snapshots_save_and_restore_over_subvolumes(sh):
    """A save of shell.home walks bounded trees as directories; a restore
    over them puts their files back into the subvolumes (copied in where
    a rename cannot cross into one), which stay bounded; one past the
    bound fails with a clear answer."""
    h = home(sh)
    r, out = run(sh, "mkdir -p d && printf keep > d/f && ln -s d/f link && "
                     "head -c 6291456 /dev/urandom > blob && sha256sum blob > sum", h=h)
    assert r["exit_code"] == 0, (r, out)
    a = save(sh)
    assert a.status == 200 and a.complete, a
    r, out = run(sh, "rm -rf d link blob && echo changed > sum", h=h)
    assert r["exit_code"] == 0, (r, out)
    got = restore(sh, a.body)
    assert got.status == 200, got
    assert is_subvolume(h)
    r, out = run(sh, "cat d/f; readlink link; sha256sum -c sum >/dev/null && echo same; "
                     "head -c 41943040 /dev/zero > big; du -k big | cut -f1", h=h)
    lines = out.split("\n")
    assert lines[:2] == ["keepd/f", "same"], out
    assert int(lines[2]) <= 10 * 1024, out  # 6 MiB of the 16 already there
    assert "Disk quota exceeded" in stderr_of(sh, r["job_id"])
    # 40 MiB more of a restore into the same full HOME: refused
    r, out = run(sh, "rm big; head -c 10485760 /dev/urandom > big2", h=h)
    b = save(sh)
    assert b.status == 200 and b.complete, b
    r, out = run(sh, "rm big2", h=h)
    r, out = run(sh, "head -c 9437184 /dev/urandom > other", h=h)
    got = restore(sh, b.body)
    assert got.status == 500 and b"Disk quota exceeded" in got.body, got


def test_an_ext4_image_of_an_earlier_version_keeps_working(_session_tmp):
    """A shell.state_dir holding an ext4 home.img (what an earlier version
    made) is mounted as ext4 and serves as before, with the one bound of
    its size: a HOME takes more than shell.binding_disk, and the log says
    once that the bounds per binding need a btrfs image."""
    workdir = tempfile.mkdtemp(prefix="d", dir=_session_tmp)
    os.chmod(workdir, 0o755)
    root = tempfile.mkdtemp(prefix="shelltest-", dir="/var/tmp")
    os.chmod(root, 0o755)
    d = ShellDaemon({"enable_network": False}, workdir, root, dict(SHELL, disk_size="64M"))
    os.makedirs(d.state_dir, 0o700)
    img = os.path.join(d.state_dir, "home.img")
    with open(img, "wb") as f:
        f.truncate(64 * MIB)
    subprocess.run(["mkfs.ext4", "-q", "-F", "-m", "0", "-E",
                    f"root_owner={d.shell_uid}:{d.shell_uid}", img], check=True)
    try:
        d.start()
    except BaseException:
        d.kill_hard()
        shutil.rmtree(root, ignore_errors=True)
        raise
    try:
        with open("/proc/self/mountinfo") as f:
            line = [m for m in f if f" {d.home} " in m][0]
        assert " - ext4 /dev/loop" in line, line
        r, out = run(d, "head -c 25165824 /dev/zero > f && du -k f | cut -f1", h=home(d))
        assert (r["exit_code"], out) == (0, "24576\n"), (r, out, stderr_of(d, r["job_id"]))
        assert d.log.count("event=shell.disk_bounds_off") == 1, d.log[-3000:]
        d.shell_reset()
    finally:
        stop_shell_daemon(d)


def test_a_tree_an_adopted_job_uses_is_left_unbounded(_session_tmp):
    """Bounds turned on across a restart (shell.keep_jobs): a job left
    running in an unbounded HOME is adopted, and the next job of that HOME
    leaves it as it is (the running job's mount would keep the old tree),
    says so in the log, and runs; a new HOME is bounded at once."""
    d = start_shell_daemon(_session_tmp, dict(SHELL, binding_disk=0, workspace_disk=0,
                                              keep_jobs=True), enable_network=False)
    try:
        h, other = home(d), home(d)
        long = d.client.run("echo started; sleep 30", env={"HOME": h}, mode="stdio", timeout=1)
        assert long["status"] == "running", long
        down(d, signal.SIGTERM)
        d.shell_settings.update(binding_disk="16M", workspace_disk="24M")
        up(d)
        r, out = run(d, "echo next", h=h)
        assert (r["exit_code"], out) == (0, "next\n"), (r, out)
        assert not is_subvolume(h)
        assert f'event=shell.subvol_in_use tree="{h}"' in d.log, d.log[-3000:]
        assert d.client.get(long["job_id"])["status"] == "running"
        r, out = run(d, "echo new", h=other)
        assert out == "new\n" and is_subvolume(other), (r, out)
        d.shell_reset()
    finally:
        stop_shell_daemon(d)
