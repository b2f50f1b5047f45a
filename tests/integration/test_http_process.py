"""The HTTP process is a fresh exec of lockboxd (`lockboxd --http=FD`),
not a fork of root's image, and confines itself: server.user, no
capabilities, no_new_privs, not dumpable, Landlock (the dependency layer
directory read-only and nothing else of the filesystem, TCP connects to
port 53 only) and a deny-by-default syscall allowlist."""
import os
import shutil
import subprocess
import tempfile

from conftest import LOCKBOXD, children_of, proc_status


def http_pid(daemon):
    kids = [k for k in children_of(daemon.pid)
            if (proc_status(k) or {}).get("Name") == "lockboxd"]
    assert len(kids) == 1, kids
    return kids[0]


def test_the_http_process_is_a_new_exec_without_the_jailers_memory(daemon):
    pid = http_pid(daemon)
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        argv = f.read().split(b"\0")[:-1]
    assert argv[0] == b"lockboxd" and argv[1].startswith(b"--http=") and len(argv) == 2, argv
    with open(f"/proc/{pid}/environ", "rb") as f:
        assert f.read() == b""  # nothing of lockboxd's environment
    st = proc_status(pid)
    assert st["Uid"].split() == ["65534"] * 4, st["Uid"]
    assert st["Gid"].split() == ["65534"] * 4, st["Gid"]
    assert st["Groups"].strip() == "", st["Groups"]
    assert int(st["CapEff"], 16) == int(st["CapPrm"], 16) == 0, st
    assert st["NoNewPrivs"].strip() == "1" and st["Seccomp"].strip() == "2", st
    # its descriptors: client and jailer sockets, the log; not the jailer's
    # pidfds, epoll, timers or memfds (the settings memfd is closed after
    # reading; the statistics page is mapped read-only)
    links = [os.readlink(f"/proc/{pid}/fd/{n}") for n in os.listdir(f"/proc/{pid}/fd")]
    bad = [ln for ln in links if any(x in ln for x in ("pidfd", "eventpoll", "timerfd", "memfd"))]
    assert not bad, links
    with open(f"/proc/{pid}/maps") as f:
        stats = [ln for ln in f if "lockbox-stats" in ln]
    assert len(stats) == 1 and stats[0].split()[1] == "r--s", stats


def test_the_http_processs_confinement_refuses_files_tcp_and_exec(tmp_path):
    """`lockboxd --check-http-confinement` confines a child exactly as the
    HTTP process confines itself, then tries to read /etc/passwd and its
    own /proc entry (both readable by server.user), write in the layer
    directory (writable by everyone here), connect to TCP port 22 and
    exec: every attempt is refused, by the confinement, not by file
    permissions."""
    top = tempfile.mkdtemp(prefix="lockbox-confine-")  # (pytest's tmp_path is root's, 0700)
    try:
        os.chmod(top, 0o755)
        layers = os.path.join(top, "layers")
        os.mkdir(layers)
        os.chmod(layers, 0o777)
        cfg = tmp_path / "config.yaml"
        cfg.write_text(f"dependencies:\n  layer_dir: {layers}\n")
        p = subprocess.run([LOCKBOXD, "--config", str(cfg), "--check-http-confinement"],
                           capture_output=True, text=True, timeout=30)
        written = os.path.exists(os.path.join(layers, "lockbox-confinement-check"))
    finally:
        shutil.rmtree(top)
    assert p.returncode == 0, p.stdout + p.stderr
    lines = [ln for ln in p.stdout.splitlines() if not ln.startswith(" ")]
    assert lines[0].startswith("landlock: available"), p.stdout
    assert lines[1:] == [
        "refused read: /etc/passwd",
        "refused read: /proc/self/status",
        f"refused write: {layers}/lockbox-confinement-check",
        "refused connect: 127.0.0.1:22",
        "refused execve: /bin/true",
    ], p.stdout
    assert not written


def test_status_json_is_still_readable_through_the_confinement(daemon):
    """What the HTTP process reads (the layer's status.json, behind the
    dependency routes and /ready) is within what Landlock leaves it."""
    r = daemon.get("/v1/sandbox/dependencies?language=python3")
    assert r.status_code == 200 and r.json()["code"] == 0, r.text
    m = daemon.new_session().get(daemon.url("/metrics"), timeout=10).text
    assert "lockbox_dependencies_last_install_ok" in m, m[:3000]
