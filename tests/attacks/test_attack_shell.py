"""Hostile shell jobs (Dify's shellctl API): escaping the job's view of the
host, other bindings, the daemon and its secrets; privileged system calls;
exhausting processes, memory and disk. Each attack is bounded (at most 64
processes, 30 s, 64 MB) and runs against a daemon whose jobs have 32 tasks
and 48 MiB each. After every case the jobs are deleted, nothing of them
may be left (processes of the jobs' UID, job cgroups, job directories,
files in the host's /tmp), and the autouse after-check proves the daemon
still serves both APIs."""
import os
import socket
import uuid

import pytest

from attacklib import PY_SYSCALL, concurrently, src
from conftest import SHELL_TOKEN, ShellError, scaled, start_shell_daemon, stop_shell_daemon

TIGHT_SHELL = {"max_jobs": 8, "processes": 32, "memory": "48M", "disk_size": "48M",
               "max_output": "64K"}
MAX_OUTPUT = 64 << 10
HOMES = ".dify-agent-materialized-homes"
WORKSPACES = ".dify-agent-workspaces"


@pytest.fixture(scope="module")
def _tight_shell(_session_tmp):
    d = start_shell_daemon(_session_tmp, TIGHT_SHELL)
    yield d
    stop_shell_daemon(d)


@pytest.fixture
def sh(_tight_shell):
    yield _tight_shell
    _tight_shell.shell_reset()


def lease(d, name=None):
    """A binding's HOME and workspace, made by a control job: (home, ws)."""
    name = name or uuid.uuid4().hex[:10]
    home, ws = d.home_path(HOMES, name), d.home_path(WORKSPACES, name)
    r, _ = d.client.run_to_end(f"mkdir -p '{home}' '{ws}'", mode="stdio")
    assert r["exit_code"] == 0, r
    return home, ws


def bound(d, script, home_ws=None, deadline=30, **kw):
    """Run script to its end in a binding of its own (stdio unless told)."""
    home, ws = home_ws or lease(d)
    kw.setdefault("mode", "stdio")
    return d.client.run_to_end(script, env={"HOME": home}, cwd=ws, deadline=deadline, **kw)


def python(code):
    return "python3 - <<'PY'\n" + src(code) + "PY\n"


def probes(out):
    return dict(line.split(":", 1) for line in out.splitlines() if ":" in line)


def assert_never(out, *secrets):
    for s in secrets:
        assert s not in out, f"{s!r} leaked: {out[:3000]}"


# ------------------------------------------------------- the mount view

def test_host_files_outside_the_view_cannot_be_read(sh):
    """World-readable files beside shell.home, the state directory (where
    other jobs' output lives), root's files and shadow: none of them."""
    other = sh.client.run_to_end("echo OTHER-JOB-OUTPUT", mode="stdio")[0]
    own_state = os.path.join(sh.state_dir, "jobs")
    checks = {
        "canary": f"cat '{sh.outside}/canary'",
        "outside-list": f"ls '{sh.outside}'",
        "state-list": f"ls '{own_state}' | grep -q {other['job_id']}",
        "other-output": f"cat '{other['output_path']}'",
        "shadow": "cat /etc/shadow",
        "root": "ls -A /root | grep -q .",
        "config": f"cat '{sh.config_path}'",
        "daemon-log": f"cat '{sh.log_path}'",
        "proc1-root-canary": f"cat '/proc/1/root{sh.outside}/canary'",
        "proc1-root-state": f"ls '/proc/1/root{own_state}'",
        "proc1-cwd": "ls /proc/1/cwd/",
        "sys-cgroup": "ls /sys/fs/cgroup/memory",
        "dev-disk": "ls /dev | grep -q -e '^sd' -e '^vd' -e '^nvme'",
    }
    script = "\n".join(f"if ( {cmd} ) >/dev/null 2>&1; then echo {k}:yes; else echo {k}:no; fi"
                       for k, cmd in checks.items())
    for mode in ("stdio", "pty"):
        r, out = bound(sh, script, mode=mode)
        assert probes(out) == {k: "no" for k in checks}, out
        r, out = sh.client.run_to_end(script, mode=mode)  # a control job: all of shell.home
        assert probes(out) == {k: "no" for k in checks}, out


def test_symlinks_made_in_shell_home_lead_nowhere_outside(sh):
    """Links a control job made to the host's directories: from inside a
    job they point into its own view; as HOME, cwd or workspace the daemon
    (root) must not follow them out of shell.home."""
    c = sh.client
    tag = uuid.uuid4().hex[:8]
    links = {"home-link": f"{HOMES}/{tag}", "ws-link": f"{WORKSPACES}/{tag}",
             "top-link": f"top-{tag}"}
    made = " && ".join(f"mkdir -p \"$(dirname '{sh.home}/{p}')\" && ln -s '{sh.outside}' "
                       f"'{sh.home}/{p}'" for p in links.values())
    r, _ = c.run_to_end(made + f" && ln -s /etc/shadow '{sh.home}/shadow-{tag}'", mode="stdio")
    assert r["exit_code"] == 0, r
    # read through the links from inside: the view has no such target
    r, out = c.run_to_end(f"cat '{sh.home}/{links['top-link']}/canary' "
                          f"'{sh.home}/shadow-{tag}'", mode="stdio")
    assert r["exit_code"] != 0 and sh.canary not in out
    home, ws = lease(sh)
    attempts = [
        ({"HOME": f"{sh.home}/{links['home-link']}"}, ws),
        ({"HOME": f"{sh.home}/{links['home-link']}/h-{tag}"}, ws),
        ({"HOME": f"{sh.home}/{links['top-link']}/h-{tag}"}, ws),
        ({"HOME": home}, f"{sh.home}/{links['ws-link']}"),
        ({"HOME": home}, f"{sh.home}/{links['top-link']}"),
        ({}, f"{sh.home}/{links['ws-link']}"),
        ({}, f"{sh.home}/{links['top-link']}"),
    ]
    for env, cwd in attempts:
        script = (f"cat '{sh.outside}/canary' ./canary \"$HOME/canary\" 2>/dev/null; "
                  f"touch ./planted-{tag} \"$HOME/planted-{tag}\" 2>/dev/null; echo ran")
        try:
            r, out = c.run_to_end(script, env=env, cwd=cwd, mode="stdio")
        except ShellError as e:
            assert e.status in (400, 422), (env, cwd, e)
            continue
        assert_never(out, sh.canary)
    assert sorted(os.listdir(sh.outside)) == ["canary"], os.listdir(sh.outside)
    with open(os.path.join(sh.outside, "canary")) as f:
        assert f.read() == sh.canary + "\n"


def test_no_secret_of_the_daemon_is_anywhere_a_job_can_read(sh):
    """The API token (in the daemon's environment) and the canary beside
    shell.home: not in the job's environment, in any visible process's
    environment or command line, nor in any file it can read. The needles
    come in halves (the job's own environment and script hold neither)."""
    code = """
        import os
        needles = [os.environ["A1"] + os.environ["A2"], os.environ["B1"] + os.environ["B2"]]
        hits = [k for k, v in os.environ.items() if any(n in k + "=" + v for n in needles)]
        # "/" itself may not be listable (Landlock): every usual top-level
        # directory and the job's own, but the system's programs
        tops = ["/etc", "/tmp", "/var", "/opt", "/home", "/root", "/srv", "/run", "/mnt",
                "/media", "/boot", "/dev/shm", os.environ["HOME"], os.getcwd()]
        files = 0
        for root, dirs, names in (w for top in tops for w in os.walk(top)):
            for n in names:
                p = os.path.join(root, n)
                try:
                    if os.path.islink(p) or os.path.getsize(p) > (1 << 20):
                        continue
                    with open(p, "rb") as f:
                        data = f.read()
                except OSError:
                    continue
                files += 1
                if any(x.encode() in data for x in needles):
                    hits.append("file " + p)
        for pid in [p for p in os.listdir("/proc") if p.isdigit()]:
            for what in ("environ", "cmdline"):
                try:
                    with open(f"/proc/{pid}/{what}", "rb") as f:
                        data = f.read()
                except OSError:
                    continue
                if any(x.encode() in data for x in needles):
                    hits.append(f"/proc/{pid}/{what}")
        print("files:", files > 10)
        print("hits:", hits)
    """
    t, k = SHELL_TOKEN, sh.canary
    halves = {"A1": t[:len(t) // 2], "A2": t[len(t) // 2:],
              "B1": k[:len(k) // 2], "B2": k[len(k) // 2:]}
    for mode in ("stdio", "pty"):
        home, ws = lease(sh)
        for env, cwd in ((dict(halves, HOME=home), ws), (halves, None)):
            r, out = sh.client.run_to_end(python(code), env=env, cwd=cwd, mode=mode,
                                          deadline=60)
            assert "files: True" in out and "hits: []" in out, out


# ------------------------------------------------------------ privileges

def test_jobs_run_without_privileges(sh):
    r, out = bound(sh, "id -u; id -g; grep -E '^(CapEff|CapPrm|CapBnd|NoNewPrivs|Seccomp):' "
                       "/proc/self/status | tr -s '\\t' ' '")
    lines = out.splitlines()
    assert lines[:2] == [str(sh.shell_uid)] * 2, out
    status = dict(line.split(": ", 1) for line in lines[2:])
    assert status == {"CapPrm": "0" * 16, "CapEff": "0" * 16, "CapBnd": "0" * 16,
                      "NoNewPrivs": "1", "Seccomp": "2"}, out


@pytest.mark.parametrize("command", [
    "su -c id root </dev/null", "mount -t tmpfs none /tmp", "unshare -r true",
    "unshare -Urm true", "unshare -n true", "nsenter -t 1 -n true", "chroot / true",
    "python3 -c 'import os; os.setuid(0)'", "python3 -c 'import os; os.setgroups([0])'"])
def test_privilege_tools_fail_or_end_the_job(sh, command):
    r, out = bound(sh, f"{command} && echo WORKED; echo after", mode="pty")
    assert "WORKED" not in out, out
    assert r["done"], r
    # refused with an error (the script goes on), or the job was ended for it
    assert out.endswith("after\n") or "[lockbox] job killed: forbidden system call" in out, out


PRIVILEGED = {
    # name: Python lines printing "<name> <ERRNO or OK>"
    "ptrace_traceme": "print('ptrace_traceme', sc(101, 0, 0, 0, 0))",
    "ptrace_attach_child": src("""
        import os, time
        pid = os.fork()
        if pid == 0:
            time.sleep(20); os._exit(0)
        print('ptrace_attach_child', sc(101, 16, pid, 0, 0))
        os.kill(pid, 9)
    """),
    "mount": src("""
        r = libc.mount(b'none', b'/tmp', b'tmpfs', 0, None)
        print('mount', 'OK' if r == 0 else errno.errorcode[ctypes.get_errno()])
    """),
    "umount_proc": src("""
        r = libc.umount2(b'/proc', 2)
        print('umount_proc', 'OK' if r == 0 else errno.errorcode[ctypes.get_errno()])
    """),
    "unshare_user": "print('unshare_user', sc(272, 0x10000000))",
    "unshare_mount": "print('unshare_mount', sc(272, 0x20000))",
    "unshare_net": "print('unshare_net', sc(272, 0x40000000))",
    "setns_host_net": src("""
        import os
        try:
            fd = os.open('/proc/1/ns/net', os.O_RDONLY)
            print('setns_host_net', sc(308, fd, 0))
        except OSError as e:
            print('setns_host_net', errno.errorcode[e.errno])
    """),
    "keyctl_join": "print('keyctl_join', sc(250, 1, 0))",
    "add_key": src("""
        r = libc.syscall(ctypes.c_long(248), b'user', b'lockbox', b'secret', ctypes.c_long(6),
                     ctypes.c_long(-3))
        print('add_key', 'OK' if r >= 0 else errno.errorcode[ctypes.get_errno()])
    """),
    "bpf_map_create": src("""
        attr = (ctypes.c_uint32 * 30)(2, 4, 4, 4)
        print('bpf_map_create', sc(321, 0, ctypes.addressof(attr), 120))
    """),
    "init_module": "print('init_module', sc(175, 0, 0, 0))",
    "finit_module": "print('finit_module', sc(313, 0, 0, 0))",
    "delete_module": src("""
        r = libc.syscall(ctypes.c_long(176), b'loop', ctypes.c_long(0))
        print('delete_module', 'OK' if r >= 0 else errno.errorcode[ctypes.get_errno()])
    """),
    "kexec_load": "print('kexec_load', sc(246, 0, 0, 0, 0))",
    "perf_event_open": src("""
        attr = (ctypes.c_uint32 * 32)(1, 128)
        print('perf_event_open', sc(298, ctypes.addressof(attr), 0, -1, -1, 0))
    """),
    "userfaultfd_user_mode": "print('userfaultfd_user_mode', sc(323, 1))",  # UFFD_USER_MODE_ONLY
}


@pytest.mark.parametrize("name", sorted(PRIVILEGED))
def test_privileged_calls_fail_or_end_the_job(sh, name):
    code = PY_SYSCALL + PRIVILEGED[name] + "\nprint('alive')\n"
    # on a terminal, where a verdict line shows (stdio keeps it to stderr)
    r, out = bound(sh, "python3 - <<'PY'\n" + code + "PY\nsleep 0.2; echo done-" + name,
                   mode="pty")
    results = dict(l.split(" ", 1) for l in out.splitlines() if l.startswith(name + " "))
    assert results.get(name) != "OK", out
    if "[lockbox] job killed: forbidden system call " in out:
        # ended for it (the call itself failed first), and the output says so
        assert r["exit_code"] >= 128 and f"done-{name}" not in out, (r, out)
    else:
        # refused with an error, and the program went on
        assert name in results and "alive" in out and f"done-{name}" in out, out


# --------------------------------------------------------------- network

def test_a_job_cannot_reach_the_hosts_loopback(sh, tcp_server):
    """The daemon's own ports and a server of the host's on 127.0.0.1, by
    TCP and an abstract unix socket: refused, and the host saw nothing."""
    name = "lockbox-shtest-" + uuid.uuid4().hex[:8]
    lsock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    lsock.bind("\0" + name)
    lsock.listen(4)
    lsock.settimeout(0.1)
    try:
        code = f"""
            import errno, socket
            for label, port in (("shell", {sh.shell_port}), ("api", {sh.port}),
                                ("host", {tcp_server.port})):
                for addr in ("127.0.0.1", "127.0.0.2"):
                    try:
                        s = socket.create_connection((addr, port), timeout=3)
                        print(label, addr, "CONNECTED", s.recv(64))
                    except OSError as e:
                        print(label, addr, e.errno and errno.errorcode[e.errno] or repr(e))
            try:
                u = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                u.settimeout(3)
                u.connect("\\0{name}")
                print("abstract CONNECTED")
            except OSError as e:
                print("abstract", e.errno and errno.errorcode[e.errno] or repr(e))
        """
        for r, out in (bound(sh, python(code)), sh.client.run_to_end(python(code), mode="stdio")):
            assert "CONNECTED" not in out, out
            assert len(out.splitlines()) == 7 and "timeout" not in out, out
        assert tcp_server.accepted == 0
        with pytest.raises(socket.timeout):
            lsock.accept()
    finally:
        lsock.close()


# ---------------------------------------------------------- exhaustion

def test_a_fork_bomb_stops_at_shell_processes_and_leaves_others_alone(sh):
    c = sh.client
    bomb_home = lease(sh)
    code = """
        import errno, os, time
        n, err, end = 0, None, time.monotonic() + 10
        while n < 64 and time.monotonic() < end:
            try:
                pid = os.fork()
            except OSError as e:
                err = errno.errorcode[e.errno]
                break
            if pid == 0:
                time.sleep(30)
                os._exit(0)
            n += 1
        print("forked", n, err, flush=True)
        time.sleep(30)
    """
    r = c.run(python(code), env={"HOME": bomb_home[0]}, cwd=bomb_home[1], mode="stdio",
              timeout=20)
    words = r["output"].split()
    assert words[:1] == ["forked"] and words[2] == "EAGAIN", r
    assert int(words[1]) < TIGHT_SHELL["processes"], r
    # the classic one too, in the same binding, for a moment
    bomb = c.run("b() { b | b & }; b; sleep 3", env={"HOME": bomb_home[0]}, cwd=bomb_home[1],
                 mode="stdio", timeout=1)
    # meanwhile another binding works normally
    r2, out = bound(sh, "sh -c 'echo inner' >/dev/null; echo still-fine")
    assert (r2["exit_code"], out) == (0, "still-fine\n"), (r2, out)
    for job in (r["job_id"], bomb["job_id"]):
        v = c.terminate(job, grace_seconds=1)
        assert v["done"], v
    assert not sh.job_processes(), sh.shell_processes()


def test_threads_count_against_shell_processes(sh):
    code = """
        import threading, time
        n = 0
        try:
            for _ in range(64):
                threading.Thread(target=time.sleep, args=(5,), daemon=True).start()
                n += 1
        except RuntimeError as e:
            print("refused", n, e)
        else:
            print("started", n)
    """
    r, out = bound(sh, python(code))
    assert out.startswith("refused "), out
    assert int(out.split()[1]) < TIGHT_SHELL["processes"], out


def test_a_memory_bomb_is_killed_at_shell_memory(sh):
    code = """
        blocks = []
        for i in range(64):
            blocks.append(bytearray(1 << 20))
            for j in range(0, 1 << 20, 4096):
                blocks[-1][j] = 1
            print("allocated", i + 1, flush=True)
        print("ALL-64-MB")
    """
    r, out = bound(sh, python(code))
    assert "ALL-64-MB" not in out, out
    assert r["done"] and r["exit_code"] == 137, (r, out[-500:])
    got = [int(l.split()[1]) for l in out.splitlines() if l.startswith("allocated ")]
    assert got and max(got) < 48, out[-500:]


def test_filling_tmp_stops_at_its_size_and_leaves_the_host_alone(sh):
    """/tmp is private to the job and no larger than shell.memory (48 MiB
    here): a 64 MiB write there fails (no space, or the job's memory is
    full); the next job's /tmp is empty; the host's /tmp holds nothing."""
    home_ws = lease(sh)
    r, out = bound(sh, "dd if=/dev/zero of=/tmp/fill bs=1M count=64 2>/dev/null "
                       "&& echo dd:complete; echo size:$(stat -c %s /tmp/fill)", home_ws)
    assert r["done"] and "dd:complete" not in out, (r, out)
    size = probes(out).get("size")
    assert size is None or int(size or 0) < 64 << 20, out
    r, out = bound(sh, "ls -A /tmp | wc -l", home_ws)
    assert out.strip() == "0", out
    assert not sh.files_left()


def test_filling_shell_home_stops_at_shell_disk_size(sh):
    """shell.home is a file system of shell.disk_size (48 MiB here): a
    64 MiB write fails with no space left, the host's disk holds no more
    than the image, and once the file is gone writes work again."""
    home_ws = lease(sh)
    r, out = bound(sh, "head -c 67108864 /dev/zero > big 2>/dev/null; echo rc:$?; "
                       "echo size:$(stat -c %s big)", home_ws, deadline=60)
    p = probes(out)
    assert p["rc"] != "0" and int(p["size"]) < 48 << 20, out
    img = os.path.join(sh.state_dir, "home.img")
    assert os.stat(img).st_blocks * 512 <= (48 << 20) + (1 << 20), os.stat(img)
    r, out = bound(sh, "rm big && echo ok > small && cat small", home_ws)
    assert (r["exit_code"], out) == (0, "ok\n"), (r, out)


@pytest.mark.parametrize("mode", ["pty", "stdio"])
def test_output_flood_stops_at_shell_max_output(sh, mode):
    r, out = bound(sh, "head -c 1000000 /dev/zero | tr '\\0' x; echo; echo after", mode=mode,
                   output_limit=1 << 20)
    assert r["exit_code"] == 0, r
    log = os.path.getsize(r["output_path"])
    assert log == len(out.encode()) and log <= MAX_OUTPUT + 200, log
    assert out.startswith("x" * 60000) and "after" not in out
    if mode == "pty":  # the terminal says so; stdio's output stays byte-exact
        assert out.rstrip("\n").endswith("[lockbox] output limit reached: the rest of this "
                                          "job's output is dropped"), out[-300:]
    else:
        assert out == "x" * MAX_OUTPUT


def test_what_a_stdio_job_writes_to_stderr_is_bounded_too(sh):
    """A stdio job's stderr is kept (never returned) in the state directory,
    on the host's disk: it must be bounded like its output, or a job fills
    the disk shell.disk_size protects. 64 MiB written, at most
    shell.max_output (64 KiB here) kept."""
    r, out = bound(sh, "head -c 67108864 /dev/zero >&2; echo done", deadline=60)
    assert (r["exit_code"], out) == (0, "done\n"), (r, out[:300])
    err = os.path.join(os.path.dirname(r["output_path"]), "stderr.log")
    assert os.path.getsize(err) <= MAX_OUTPUT + 200, os.path.getsize(err)


def test_max_jobs_is_held_by_many_quick_runs_at_once(sh):
    """Runs beyond shell.max_jobs are refused with 429, never queued
    without bound; a burst from threads leaves the daemon serving."""
    c = sh.client

    def one():
        try:
            return c.run("sleep 5", timeout=0.1)["job_id"]
        except ShellError as e:
            assert (e.status, e.code) == (429, "too_many_jobs"), e
            return None

    ids = concurrently(*[one for _ in range(16)], timeout=scaled(60))
    started = [i for i in ids if i]
    assert len(started) == TIGHT_SHELL["max_jobs"], ids
