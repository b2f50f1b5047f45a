"""Red team of the per-binding disk bounds (shell.binding_disk,
shell.workspace_disk: btrfs subvolumes with quota group limits under
shell.home). A job tries to make, snapshot or destroy a subvolume or
change a quota (the btrfs ioctls), to move data past its bound by hard
links, renames and reflinks between its HOME and its workspace; a control
script plants links and a subvolume in a tree before it is converted, or
makes one larger than its bound.

One daemon for the module: a 256 MiB image, 16 MiB per HOME, 24 MiB per
workspace; every case is bounded (tens of MB, seconds). After every case
all jobs are deleted and nothing of them may be left."""
import os
import subprocess
import uuid

import pytest

from attacklib import src
from conftest import job_stderr as stderr_of
from conftest import ShellError, module_shell_fixtures, scaled

MIB = 1 << 20
SHELL = {"disk_size": "256M", "binding_disk": "16M", "workspace_disk": "24M", "max_jobs": 8,
         "processes": 32, "memory": "128M"}


_module_shelld, sh = module_shell_fixtures(SHELL, enable_network=False)


def run(d, script, h=None, cwd=None):
    env = {"HOME": h} if h else None
    return d.client.run_to_end(src(script), cwd=cwd, env=env, mode="stdio",
                               deadline=scaled(30))


def qgroup_limit(d, path):
    """max_referenced of the subvolume at path (sysfs), or None."""
    out = subprocess.run(["btrfs", "inspect-internal", "rootid", path], capture_output=True,
                         text=True, check=True).stdout.strip()
    fsid = subprocess.run(["findmnt", "-no", "UUID", d.home], capture_output=True,
                          text=True).stdout.strip()
    try:
        with open(f"/sys/fs/btrfs/{fsid}/qgroups/0_{out}/max_referenced") as f:
            return int(f.read())
    except OSError:
        return None


def fresh(d):
    tag = uuid.uuid4().hex[:10]
    return d.home_path("homes", tag), d.home_path("ws", tag)


IOCTLS = """\
import errno, fcntl, os, struct
def ioc(d, nr, size):
    return (d << 30) | (size << 16) | (0x94 << 8) | nr
W, R, RW = 1, 2, 3
calls = {
    "SNAP_CREATE": ioc(W, 1, 4096), "SUBVOL_CREATE": ioc(W, 14, 4096),
    "SNAP_DESTROY": ioc(W, 15, 4096), "DEFAULT_SUBVOL": ioc(W, 19, 8),
    "SNAP_CREATE_V2": ioc(W, 23, 4096), "SUBVOL_CREATE_V2": ioc(W, 24, 4096),
    "SUBVOL_SETFLAGS": ioc(W, 26, 8), "QUOTA_CTL": ioc(RW, 40, 16),
    "QGROUP_ASSIGN": ioc(W, 41, 24), "QGROUP_CREATE": ioc(W, 42, 16),
    "QGROUP_LIMIT": ioc(R, 43, 48), "QUOTA_RESCAN": ioc(W, 44, 64),
    "SNAP_DESTROY_V2": ioc(W, 63, 4096),
}
home = os.open(os.environ["HOME"], os.O_RDONLY | os.O_DIRECTORY)
for name, req in sorted(calls.items()):
    size = (req >> 16) & 0x3fff
    if "CREATE" in name and "QGROUP" not in name or "DESTROY" in name:
        buf = bytearray(size)
        struct.pack_into("q", buf, 0, home)  # a snapshot's source fd
        buf[8:13] = b"inner"
        if name.endswith("_V2"):
            buf[0x28:0x2d] = b"inner"  # past the v2 flags and sizes
    elif name == "QUOTA_CTL":
        buf = bytearray(struct.pack("QQ", 2, 0))  # disable
    elif name == "QGROUP_LIMIT":
        buf = bytearray(struct.pack("QQQQQQ", 0, 1, 1 << 40, 0, 0, 0))  # no limit
    elif name == "QGROUP_CREATE":
        buf = bytearray(struct.pack("QQ", 0, 0))  # remove this one's group
    else:
        buf = bytearray(size)
    try:
        fcntl.ioctl(home, req, buf)
        print(name, "ALLOWED")
    except OSError as e:
        print(name, errno.errorcode[e.errno])
"""


def test_a_job_cannot_make_destroy_or_unlimit_subvolumes(sh):
    """The btrfs ioctls that make, snapshot or destroy a subvolume, set
    the default one, or touch quotas (off, a limit, a group) are refused
    (ENOTTY: the job filter allows FICLONE and FICLONERANGE only); the
    HOME has no new subvolume, its limit is unchanged and it is still
    bounded."""
    h, _ = fresh(sh)
    r, out = run(sh, f"python3 - <<'EOF'\n{IOCTLS}EOF\nls -A", h=h)
    assert r["exit_code"] == 0, (r, out, stderr_of(sh, r["job_id"]))
    lines = out.split("\n")
    answers = dict(line.split() for line in lines[:13])
    assert len(answers) == 13 and set(answers.values()) == {"ENOTTY"}, out
    assert "inner" not in out, out
    assert qgroup_limit(sh, h) == 16 * MIB
    r, out = run(sh, "head -c 33554432 /dev/zero > f; du -k f | cut -f1", h=h)
    assert int(out) <= 16 * 1024, out


BYPASS = """\
set -u
cd "$WS"
python3 - <<'EOF'
import errno, fcntl, os
FICLONE = 0x40049409
home, ws = os.environ["HOME"], os.getcwd()
with open("seed", "wb") as f:
    f.write(os.urandom(1 << 20))
for how in ("link", "rename"):
    try:
        (os.link if how == "link" else os.rename)("seed", os.path.join(home, how))
        print(how, "ok")
    except OSError as e:
        print(how, errno.errorcode[e.errno])
# reflinks: 8 MiB written in the workspace, cloned into files made in
# HOME beforehand, removed from the workspace; eight times
targets = [os.open(os.path.join(home, f"c{i}"), os.O_WRONLY | os.O_CREAT, 0o600)
           for i in range(8)]
cloned = 0
for t in targets:
    with open("chunk", "wb") as f:
        f.write(os.urandom(8 << 20))
    src = os.open("chunk", os.O_RDONLY)
    try:
        fcntl.ioctl(t, FICLONE, src)
        cloned += 1
    except OSError as e:
        print("clone", errno.errorcode[e.errno])
    os.close(src)
    os.unlink("chunk")
print("cloned", cloned)
EOF
mv seed "$HOME/moved" && echo moved
du -sk "$HOME" | cut -f1
du -sk "$WS" | cut -f1
"""


def test_links_renames_and_reflinks_do_not_carry_data_past_the_bounds(sh):
    """From the workspace into HOME: a hard link and a rename fail with
    EXDEV (two subvolumes); mv copies, counted in HOME; data cloned in
    from the workspace counts in HOME in full: once HOME is past its
    bound every clone fails with EDQUOT, so HOME ends within its bound and
    one clone (at most the workspace's bound) however often it is tried."""
    h, ws = fresh(sh)
    r, out = run(sh, f"mkdir -p {ws}")
    assert r["exit_code"] == 0, (r, out)
    r, out = run(sh, BYPASS.replace("$WS", ws), h=h, cwd=ws)
    lines = out.split("\n")
    assert lines[:2] == ["link EXDEV", "rename EXDEV"], (out, stderr_of(sh, r["job_id"]))
    assert "clone EDQUOT" in lines, out
    cloned = int([x for x in lines if x.startswith("cloned ")][0].split()[1])
    assert 1 <= cloned <= 3, out
    home_kib = int(lines[-3])
    assert home_kib <= (16 + 8 + 1) * 1024, out
    r, out = run(sh, "head -c 1048576 /dev/zero > more", h=h)
    assert "Disk quota exceeded" in stderr_of(sh, r["job_id"])


def test_conversion_never_follows_links_the_tree_holds(sh):
    """A control script plants, in a tree that becomes a HOME, symbolic
    links to /etc, to the canary beside shell.home and up the tree, a
    hard link to another binding's file and a fifo: the conversion (a
    worker as shell.uid, never following a link) keeps the links as links
    and copies nothing they point to; the fifo stays a fifo and never
    blocks it."""
    h, _ = fresh(sh)
    other, _ = fresh(sh)
    r, out = run(sh, f"""\
        set -e
        mkdir -p {other} {h}/sub
        echo theirs > {other}/file
        ln -s /etc {h}/etc; ln -s {sh.outside}/canary {h}/canary; ln -s ../.. {h}/sub/up
        ln {other}/file {h}/hard; mkfifo {h}/fifo
        """)
    assert r["exit_code"] == 0, (r, out, stderr_of(sh, r["job_id"]))
    r, out = run(sh, "for f in etc canary sub/up; do readlink $f; done; test -p fifo && "
                     "echo fifo; cat hard; du -sk --apparent-size . | cut -f1", h=h)
    assert r["exit_code"] == 0, (r, out, stderr_of(sh, r["job_id"]))
    lines = out.split("\n")
    assert lines[:5] == ["/etc", f"{sh.outside}/canary", "../..", "fifo", "theirs"], out
    assert int(lines[5]) < 64, out
    assert os.stat(h).st_ino == 256 and os.path.islink(os.path.join(h, "etc"))
    assert os.stat(os.path.join(other, "file")).st_nlink == 1  # the old tree's link is gone


def test_a_tree_holding_a_subvolume_is_refused_one_past_its_bound_stays_full(sh):
    """A tree that holds a subvolume (a bounded workspace moved into it by
    a control script) is not converted: the run is refused with a clear
    500, the tree stays as it was, nothing of the attempt is left beside
    it. A tree already holding more than its bound is moved in whole
    (reflinks: no new space) and its jobs' writes fail until they remove
    some."""
    h, ws = fresh(sh)
    r, out = run(sh, f"mkdir -p {ws}/p && echo x")
    assert r["exit_code"] == 0, (r, out)
    r, out = run(sh, "echo in-ws > f", h=h, cwd=f"{ws}/p")  # the workspace is bounded now
    assert r["exit_code"] == 0, (r, out)
    big, _ = fresh(sh)
    r, out = run(sh, f"mkdir -p {big} && mv {ws} {big}/inner && echo moved")
    assert out == "moved\n", (r, out, stderr_of(sh, r["job_id"]))
    with pytest.raises(ShellError) as e:
        sh.client.run("true", env={"HOME": big}, mode="stdio")
    assert (e.value.status, e.value.code) == (500, "disk_bound_failed"), e.value
    assert "another subvolume" in str(e.value), e.value
    assert os.stat(big).st_ino != 256 and os.path.exists(os.path.join(big, "inner", "p", "f"))
    left = [n for n in os.listdir(sh.home_path("homes")) if n.startswith(".lockbox")]
    assert not left, left
    huge, _ = fresh(sh)
    r, out = run(sh, f"mkdir -p {huge} && head -c 20971520 /dev/urandom > {huge}/blob && echo ok")
    assert out == "ok\n", (r, out)
    r, out = run(sh, "du -k blob | cut -f1", h=huge)
    assert int(out) == 20 << 10, out
    # quota groups count the moved tree at the next commit (the kernel's
    # come every 30 s): one asked for here
    subprocess.run(["btrfs", "filesystem", "sync", sh.home], check=True, timeout=scaled(30))
    r, out = run(sh, "echo more > more", h=huge)
    err = stderr_of(sh, r["job_id"])
    assert "Disk quota exceeded" in err and f"HOME {huge} is full" in err, err
    assert os.stat(huge).st_ino == 256
    r, out = run(sh, f"rm -rf {big} {huge} && echo gone")
    assert out == "gone\n", (r, out, stderr_of(sh, r["job_id"]))
