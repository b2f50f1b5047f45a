"""Hostile archives for POST /v1/snapshot/restore, built here with Python's
tarfile and compressed by the `zstd` binary: paths out of HOME (.., an
absolute path, a symlink and then a file through it, hard links out or to
a symlink), device nodes and fifos, a zstd bomb and archives over the
byte and entry bounds, truncated and garbage archives. Each is refused
with the right code, HOME and the directory beside it are exactly as
before (nothing half-written, no staging left), no worker is left, and
the daemon still serves. Bounded: the daemon takes 16 MiB and 1000
entries; the largest test archive is 17 MiB (refused by its length)."""
import io
import os
import tarfile
import threading
import time

import pytest

from conftest import stop_shell_daemon
from snapshotlib import (host_listing, restore, save, start_snapshot_daemon, wait_for,
                         workers_gone, zstd)

MAX_BYTES = 16 << 20
MAX_ENTRIES = 1000


@pytest.fixture(scope="module")
def _snapd(_session_tmp):
    d = start_snapshot_daemon(_session_tmp, snapshot_max_bytes="16M",
                              snapshot_max_entries=MAX_ENTRIES)
    r, out = d.client.run_to_end("mkdir -p docs/sub .local/share && echo a > docs/a && "
                                 "echo b > docs/sub/b && ln -s docs/a l && echo s > .local/share/s",
                                 mode="stdio")
    assert r["exit_code"] == 0, (r, out)
    yield d
    stop_shell_daemon(d)


@pytest.fixture
def snapd(_snapd):
    d = _snapd
    home, outside = host_listing(d.home), host_listing(d.outside)
    yield d
    wait_for(lambda: workers_gone(d))
    assert host_listing(d.home) == home, "HOME changed"
    assert host_listing(d.outside) == outside, "the directory beside HOME changed"
    with open(os.path.join(d.outside, "canary")) as f:
        assert f.read() == d.canary + "\n"
    d.client.health()
    d.shell_reset()


def member(name, data=b"", kind=tarfile.REGTYPE, linkname="", mode=0o644):
    ti = tarfile.TarInfo(name)
    ti.type, ti.linkname, ti.mode = kind, linkname, mode
    ti.size = len(data) if kind == tarfile.REGTYPE else 0
    if kind == tarfile.CHRTYPE:
        ti.devmajor, ti.devminor = 1, 3
    return ti, (data if kind == tarfile.REGTYPE else None)


def archive(*members, compress=True):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        for ti, data in members:
            t.addfile(ti, io.BytesIO(data) if data is not None else None)
    return zstd(buf.getvalue()) if compress else buf.getvalue()


def refused(d, data, code="archive_malformed", status=400, says=None):
    a = restore(d, data)
    assert a.status == status, a
    err = a.json()["error"]
    assert err["code"] == code, a
    if says:
        assert says in err["message"], err
    return err["message"]


def test_dot_dot_out_of_home(snapd):
    refused(snapd, archive(member("first", b"1"), member("../outside/evil", b"x")), says="..")
    refused(snapd, archive(member("docs/../../outside/evil", b"x")), says="..")


def test_absolute_paths(snapd):
    refused(snapd, archive(member(os.path.join(snapd.outside, "evil"), b"x")),
            says="absolute")
    refused(snapd, archive(member("/etc/lockbox-evil", b"x")), says="absolute")


def test_a_symlink_and_then_a_file_through_it(snapd):
    refused(snapd, archive(member("out", kind=tarfile.SYMTYPE, linkname=snapd.outside),
                           member("out/evil", b"x")))
    refused(snapd, archive(member("rel", kind=tarfile.SYMTYPE, linkname="../outside"),
                           member("rel/evil", b"x")))
    # replacing a directory unpacked a moment ago by a link, then through it
    refused(snapd, archive(member("dir", kind=tarfile.DIRTYPE, mode=0o755),
                           member("dir", kind=tarfile.SYMTYPE, linkname=snapd.outside),
                           member("dir/evil", b"x")))


def test_hard_links_out_of_home_or_to_a_symlink(snapd):
    canary = os.path.join(snapd.outside, "canary")
    refused(snapd, archive(member("h", kind=tarfile.LNKTYPE, linkname="../outside/canary")),
            says="hard link")
    refused(snapd, archive(member("h", kind=tarfile.LNKTYPE, linkname=canary)),
            says="hard link")
    refused(snapd, archive(member("s", kind=tarfile.SYMTYPE, linkname=canary),
                           member("h", kind=tarfile.LNKTYPE, linkname="s")), says="hard link")
    refused(snapd, archive(member("h", kind=tarfile.LNKTYPE, linkname="not-there")),
            says="hard link")


@pytest.mark.parametrize("kind", [tarfile.FIFOTYPE, tarfile.CHRTYPE, tarfile.BLKTYPE])
def test_devices_and_fifos(snapd, kind):
    refused(snapd, archive(member("ok", b"1"), member("node", kind=kind)),
            says="devices, fifos and sockets")


def test_a_zstd_bomb_is_stopped_at_the_bound(snapd):
    """64 MiB of zeros in a few KiB: refused by its declared size; 20 files
    of 1 MiB each, every one under the bound: refused once their sum
    passes it, with what was unpacked so far thrown away."""
    one = archive(member("bomb", bytes(64 << 20)))
    assert len(one) < 64 << 10
    refused(snapd, one, says="unpacks to more than 16777216 bytes")
    many = archive(*(member(f"part{i}", bytes(1 << 20)) for i in range(20)))
    assert len(many) < 64 << 10
    refused(snapd, many, says="unpacks to more than 16777216 bytes")


def test_entries_past_the_bound(snapd):
    data = archive(*(member(f"e{i}") for i in range(20000)))
    assert len(data) < 1 << 20
    refused(snapd, data, says=f"more than {MAX_ENTRIES} entries")


def test_an_archive_larger_than_the_bound(snapd):
    big = os.urandom(MAX_BYTES + (1 << 20))
    refused(snapd, big, code="request_too_large", status=413)


def test_truncated_and_garbage_archives(snapd):
    good = archive(member("x", os.urandom(100000)), member("y", b"y"))
    refused(snapd, good[: len(good) // 2])
    refused(snapd, os.urandom(10000))
    refused(snapd, b"")
    refused(snapd, zstd(os.urandom(5000)))


def test_setuid_setgid_and_sticky_bits_are_dropped(_snapd):
    d = _snapd
    a = restore(d, archive(member("suid", b"#!/bin/sh\n", mode=0o6755),
                           member("sticky", kind=tarfile.DIRTYPE, mode=0o1777)))
    assert a.status == 200, a
    try:
        assert os.lstat(d.home_path("suid")).st_mode & 0o7777 == 0o755
        assert os.lstat(d.home_path("sticky")).st_mode & 0o7777 == 0o777
        assert os.lstat(d.home_path("suid")).st_uid == d.shell_uid
    finally:
        r, _ = d.client.run_to_end("rm -rf suid sticky", mode="stdio")
        assert r["exit_code"] == 0
        d.shell_reset()
    assert save(d).status == 200  # and the daemon still serves


SWAPPER = """
import os, sys, time
out, end, n = sys.argv[1], time.monotonic() + float(sys.argv[2]), 0
targets = [out, out + "/canary", out + "/secret", out + "/own000"]
os.makedirs("race", exist_ok=True)
os.chdir("race")
while time.monotonic() < end:
    os.mkdir("d")
    with open("d/f", "w") as f:
        f.write("inside")
    with open("f", "w") as f:
        f.write("inside")
    os.chmod("d", 0)
    os.chmod("f", 0)
    os.rename("d", "d.old")
    os.symlink(targets[n % 4], "d")
    os.rename("f", "f.old")
    os.symlink(targets[(n + 1) % 4], "f")
    os.chmod("d.old", 0o700)
    os.unlink("d.old/f")
    for name in ("d", "f", "f.old"):
        os.unlink(name)
    os.rmdir("d.old")
    n += 1
print(n)
"""


def test_entries_swapped_for_links_during_saves_never_read_outside(snapd):
    """A job swaps closed (mode 000) entries of HOME for symlinks to what
    lies outside it (a directory, a world-readable file, a root-only file,
    a file of the jobs' UID closed to all), as fast as it can for a few
    seconds, while saves run one after another: no save holds a byte of
    what lies outside (the worker never follows a link, and Landlock keeps
    it beneath HOME), a link is saved as a link, and nothing outside
    changes (no mode lent)."""
    d = snapd
    secret, owned = "SECRET-" + os.urandom(8).hex(), "OWNED-" + os.urandom(8).hex()
    made = {os.path.join(d.outside, "secret"): (secret, 0o600, 0),
            os.path.join(d.outside, "own000"): (owned, 0o000, d.shell_uid)}
    for p, (text, mode, uid) in made.items():
        with open(p, "w") as f:
            f.write(text)
        os.chown(p, uid, uid)
        os.chmod(p, mode)
    outside = host_listing(d.outside)
    box = {}

    def swap():
        box["run"] = d.client.run_to_end(f"python3 -c '{SWAPPER}' {d.outside} 4", mode="stdio",
                                         deadline=60)
    t = threading.Thread(target=swap)
    t.start()
    saves = complete = 0
    try:
        t0 = time.monotonic()
        while t.is_alive() and time.monotonic() - t0 < 30:
            a = save(d)
            saves += 1
            for marker in (secret, owned, d.canary):
                assert marker.encode() not in a.body
            if not (a.status == 200 and a.complete):
                continue
            complete += 1
            body = zstd(a.body, decompress=True)
            for marker in (secret, owned, d.canary):
                assert marker.encode() not in body, marker
            with tarfile.open(fileobj=io.BytesIO(body)) as tf:
                for m in tf.getmembers():
                    if m.name.startswith("race/"):
                        assert m.issym() or m.isdir() or (
                            m.isfile() and tf.extractfile(m).read() in (b"", b"inside")), m.name
    finally:
        t.join()
        r, out = box["run"]
        after = host_listing(d.outside)
        for p in made:
            os.unlink(p)
        d.client.run_to_end("rm -rf race", mode="stdio")
    print(f"{out.strip()} swaps, {saves} saves, {complete} complete")
    assert r["exit_code"] == 0, (r, out)
    assert int(out) > 100 and saves >= 3, (out, saves)
    assert after == outside
