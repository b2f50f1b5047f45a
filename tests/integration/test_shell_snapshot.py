"""HOME snapshots over the shell API (POST /v1/snapshot/save and /restore),
as Dify's sandbox gateway uses them: a tree saved, wiped by a job,
restored, and listed the same by a job; excludes (gitignore patterns, and
the top-level workspace and .local never); the trailers that say a stream
is whole, with the right SHA-256 and size; one snapshot call at a time;
bad bodies. The daemon has the UIDs of tests/snapshotlib.py."""
import hashlib
import io
import json
import socket
import tarfile
import threading

import pytest

from conftest import stop_shell_daemon
from snapshotlib import (host_listing, restore, save, snapshot_workers, start_snapshot_daemon,
                         wait_for, workers_gone, zstd)

LISTING = ("find . -mindepth 1 \\( -path ./.local -o -path ./workspace -o -path ./lost+found \\) "
           "-prune -o \\( -type f -printf '%p %m %s %y\\n' \\) -o \\( -type l -printf "
           "'%p %m %l %y\\n' \\) -o -printf '%p %m %y\\n' | LC_ALL=C sort; "
           "find . -path ./.local -prune -o -path ./workspace -prune -o -path ./lost+found "
           "-prune -o -type f -print0 | LC_ALL=C sort -z | xargs -0r sha256sum")


@pytest.fixture(scope="module")
def _snapd(_session_tmp):
    d = start_snapshot_daemon(_session_tmp, env={"SHELLCTL_SNAPSHOT_TIMEOUT": "8s"})
    yield d
    stop_shell_daemon(d)


@pytest.fixture
def snapd(_snapd):
    yield _snapd
    wait_for(lambda: workers_gone(_snapd))
    _snapd.shell_reset()
    sh(_snapd, WIPE_ALL)


# remove HOME's entries but lost+found (and workspace and .local, for
# WIPE): directories made writable first, never following a link
_WIPE = ("for f in * .[!.]* ..?*; do case $f in lost+found|'*'|'.[!.]*'|'..?*'{}) continue;; "
         "esac; find \"$f\" -type d -exec chmod u+rwx {{}} +; rm -rf \"$f\"; done")
WIPE = _WIPE.format("|workspace|.local")
WIPE_ALL = _WIPE.format("")


def sh(d, script):
    r, out = d.client.run_to_end(script, mode="stdio", deadline=60)
    assert r["exit_code"] == 0, (r, out)
    return out


def names_in(archive):
    with tarfile.open(fileobj=io.BytesIO(zstd(archive, decompress=True))) as t:
        return sorted(m.name.rstrip("/") for m in t.getmembers())


TREE = """
set -e
mkdir -p docs/deep/er empty locked
printf 'hello\\n' > docs/a.txt
head -c 300000 /dev/urandom > docs/deep/er/blob.bin
printf '#!/bin/sh\\necho hi\\n' > run.sh && chmod 755 run.sh
printf 'secret' > docs/private && chmod 600 docs/private
printf 'ro' > locked/inside && chmod 444 locked/inside && chmod 550 locked
chmod 700 empty
ln -s docs/a.txt link-to-a
ln -s deep/er docs/dirlink
ln -s /etc/hostname abs-link
mkdir -p workspace .local/share && echo w > workspace/w && echo l > .local/share/l
"""


def test_round_trip_restores_the_same_tree(snapd):
    sh(snapd, TREE)
    before = sh(snapd, LISTING)
    assert "./locked 550 d" in before and "./empty 700 d" in before, before
    assert "./link-to-a 777 docs/a.txt l" in before, before
    a = save(snapd)
    assert a.status == 200 and a.complete, a
    assert a.headers["content-type"] == "application/octet-stream"
    assert a.trailers["x-snapshot-status"] == "ok", a
    sh(snapd, WIPE)
    assert sh(snapd, LISTING) == ""
    r = restore(snapd, a.body)
    assert r.status == 200, r
    got = r.json()
    assert list(got) == ["entries", "bytes_written"], got
    assert got["entries"] == len(names_in(a.body)) == 13, names_in(a.body)
    assert got["bytes_written"] == 6 + 300000 + 18 + 6 + 2, got
    assert sh(snapd, LISTING) == before
    # workspace and .local were never in it, and stay as they were
    assert sh(snapd, "cat workspace/w .local/share/l") == "w\nl\n"
    assert sh(snapd, "ls .local") == "share\n"  # no staging directory left


CLOSED = """
set -e
mkdir -p shut/inner/deeper open/shut-too
printf 'in a closed tree' > shut/inner/deeper/f
printf 'closed file' > open/nobody && chmod 000 open/nobody
printf 'write only' > open/wo && chmod 200 open/wo
ln -s ../open shut/link
chmod 000 shut/inner/deeper shut/inner open/shut-too shut
chmod 300 open
"""


def saved_tree(home):
    return {k: v for k, v in host_listing(home).items()
            if k.split("/")[0] not in ("workspace", ".local", "lost+found")}


def test_a_save_reads_what_jobs_closed_and_restores_it_identically(snapd):
    """Directories and files a job made unreadable to itself (chmod 000,
    a directory it may only write and enter, a write-only file) are saved
    whole (the save's worker reads them through CAP_DAC_READ_SEARCH in a
    user namespace of its own: no mode is changed meanwhile), and the
    restore puts back every entry with its mode and content."""
    sh(snapd, CLOSED)
    before = saved_tree(snapd.home)
    assert before["shut"][0] & 0o7777 == 0 and before["open/nobody"][0] & 0o7777 == 0
    a = save(snapd)
    assert a.status == 200 and a.complete, a
    assert a.trailers["x-snapshot-status"] == "ok", a
    assert saved_tree(snapd.home) == before  # no mode lent meanwhile
    assert names_in(a.body) == sorted(before), names_in(a.body)
    with tarfile.open(fileobj=io.BytesIO(zstd(a.body, decompress=True))) as t:
        assert t.extractfile("shut/inner/deeper/f").read() == b"in a closed tree"
        assert t.getmember("shut").mode == 0 and t.getmember("open").mode == 0o300
    sh(snapd, "chmod -R u+rwx shut open && rm -r shut open")  # (opened before they are read)
    assert saved_tree(snapd.home) == {}
    r = restore(snapd, a.body)
    assert r.status == 200, r
    assert r.json()["entries"] == len(before), r.json()
    assert saved_tree(snapd.home) == before
    sh(snapd, "chmod -R u+rwx shut open && rm -r shut open")


def test_restore_unpacks_over_home(snapd):
    """As the reference: files the archive names are replaced, directories
    merged, files it does not name stay."""
    sh(snapd, "mkdir -p d/sub && echo old > d/f && echo keep > d/keep && echo x > gone")
    a = save(snapd)
    assert a.status == 200 and a.complete, a
    sh(snapd, "echo new-content > d/f && rm gone && mkdir gone2 && echo y > extra && "
              "rm -r d/sub && echo file > d/sub")
    r = restore(snapd, a.body)
    assert r.status == 200, r
    out = sh(snapd, "cat d/f d/keep gone extra; test -d d/sub && echo sub-is-dir")
    assert out == "old\nkeep\nx\ny\nsub-is-dir\n"


def test_excludes_and_the_parts_never_saved(snapd):
    sh(snapd, """set -e
mkdir -p workspace .local/share node_modules/x sub/node_modules build sub/build cache c2
touch a.log keep.log sub/b.log workspace/w .local/share/s node_modules/x/y sub/node_modules/z
touch build/o sub/build/o top.txt sub/top.txt cache/f c2/f
""")
    a = save(snapd, ["*.log", "!keep.log", "node_modules/", "/build", "# a comment", "cache",
                     "c?/"])
    assert a.status == 200 and a.trailers.get("x-snapshot-status") == "ok", a
    assert names_in(a.body) == ["keep.log", "sub", "sub/build", "sub/build/o", "sub/top.txt",
                                "top.txt"]
    everything = names_in(save(snapd).body)
    assert "workspace" not in everything and ".local" not in everything, everything
    assert not any(n.startswith(("workspace/", ".local/", "lost+found")) for n in everything)
    assert "node_modules/x/y" in everything and "a.log" in everything


def test_trailers_carry_the_sha256_and_size_of_what_was_sent(snapd):
    sh(snapd, "head -c 2000000 /dev/urandom > big && echo small > s")
    a = save(snapd)
    assert a.status == 200 and a.complete, a
    assert a.headers.get("transfer-encoding") == "chunked"
    assert a.trailers == {"x-snapshot-status": "ok",
                          "x-snapshot-sha256": hashlib.sha256(a.body).hexdigest(),
                          "x-snapshot-bytes": str(len(a.body))}, a.trailers
    assert len(a.body) > 2000000
    assert names_in(a.body) == ["big", "s"]


def test_a_second_snapshot_call_meanwhile_is_409_and_a_client_gone_ends_the_worker(snapd):
    """A save whose client does not read blocks its worker on the pipe:
    another save or a restore is 409 snapshot_busy; once that client hangs
    up, the worker is killed and the next save works."""
    sh(snapd, "head -c 48000000 /dev/urandom > big")
    s = socket.create_connection(("127.0.0.1", snapd.shell_port), timeout=30)
    s.sendall((f"POST /v1/snapshot/save HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
               f"{snapd.token}\r\nContent-Length: 0\r\n\r\n").encode())
    assert s.recv(12).startswith(b"HTTP/1.1 200"), "the save did not start"
    try:
        for call in (lambda: save(snapd), lambda: restore(snapd, b"x" * 100)):
            a = call()
            assert a.status == 409, a
            assert a.json() == {"error": {"code": "snapshot_busy",
                                          "message": "another snapshot operation is in progress"}}
        assert snapshot_workers(snapd), "no snapshot worker while the save is blocked"
    finally:
        s.close()
    wait_for(lambda: workers_gone(snapd))
    sh(snapd, "rm big && touch small")
    a = wait_for(lambda: _ok(save(snapd)))
    assert names_in(a.body) == ["small"]


def _ok(a):
    assert a.status == 200 and a.complete and a.trailers.get("x-snapshot-status") == "ok", a
    return a


def test_concurrent_saves_one_wins_the_others_are_busy(snapd):
    sh(snapd, "head -c 20000000 /dev/urandom > big")
    results = []

    def one():
        results.append(save(snapd))

    threads = [threading.Thread(target=one) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    statuses = sorted(a.status for a in results)
    assert statuses.count(200) >= 1 and set(statuses) <= {200, 409}, results
    for a in results:
        if a.status == 200:
            _ok(a)
        else:
            assert a.json()["error"]["code"] == "snapshot_busy"


@pytest.mark.parametrize("body", [b"not json", b'{"excludes":"*.log"}', b'{"excludes":[1]}',
                                  b"[]", b'{"excludes":["a\\u0000b"]}'])
def test_a_bad_save_body_is_400_invalid_request(snapd, body):
    a = save(snapd, body=body)
    assert a.status == 400, a
    assert a.json() == {"error": {"code": "invalid_request", "message": "Invalid JSON body"}}


def test_a_save_body_over_64_kib_is_refused(snapd):
    a = save(snapd, body=json.dumps({"excludes": ["x" * 70000]}).encode())
    assert a.status == 413, a


def test_snapshots_need_the_token(snapd):
    from snapshotlib import request
    for path in ("/v1/snapshot/save", "/v1/snapshot/restore"):
        a = request(snapd.shell_port, None, "POST", path, b"")
        assert a.status == 401, a
        assert a.json()["error"]["code"] == "unauthorized"
    a = request(snapd.shell_port, snapd.token, "GET", "/v1/snapshot/save")
    assert a.status == 405, a


def test_a_save_over_the_time_limit_is_cut_without_the_ok_trailer(snapd):
    """shell.snapshot_timeout (8 s here, from SHELLCTL_SNAPSHOT_TIMEOUT): a
    client that stops reading gets a stream that never ends cleanly, and
    the worker is gone."""
    sh(snapd, "head -c 48000000 /dev/urandom > big")
    s = socket.create_connection(("127.0.0.1", snapd.shell_port), timeout=30)
    s.sendall((f"POST /v1/snapshot/save HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
               f"{snapd.token}\r\nContent-Length: 0\r\n\r\n").encode())
    try:
        assert s.recv(12).startswith(b"HTTP/1.1 200")
        wait_for(lambda: workers_gone(snapd), timeout=30)
        data = b""
        s.settimeout(30)
        while (chunk := s.recv(1 << 20)):
            data += chunk
    finally:
        s.close()
    assert b"X-Snapshot-Status" not in data and not data.endswith(b"\r\n0\r\n\r\n")
    assert "snapshot save timed out after 8 s" in open(snapd.log_path).read()
