"""Red team of the shell-job jail (Dify's shellctl API), as the script:
what one job can do to a later job's view (links planted in shell.home),
to the other bindings (their files, processes, sockets), to itself
(privileges), to the daemon (the keeper's terminal, the jailer's loop, the
disk), and what the jailer, root, does to the host when a job ends.

One daemon for the module (the suites' shell daemon: conftest.py's
start_shell_daemon), with jobs of 32 tasks and 64 MiB, 4 MiB of output
and a 256 MiB shell.home; each attack is bounded (a few processes,
seconds, tens of MB). After every case all jobs are deleted and nothing of
them may be left, and the autouse after-check proves the code-run API
still serves. The cases that give a host process a job's old pid write
/proc/sys/kernel/ns_last_pid, which only picks the host's next pid.
"""
import os
import subprocess
import time
import uuid

import pytest

from attacklib import src
from conftest import (Daemon, ShellError, eventually, scaled, start_shell_daemon,
                      stop_shell_daemon)

MAX_OUTPUT = 4 << 20
DISK = 256 << 20
SHELL = {"max_jobs": 16, "processes": 32, "memory": "64M", "max_output": MAX_OUTPUT,
         "disk_size": DISK}


@pytest.fixture(scope="module")
def _shelld(_session_tmp):
    d = start_shell_daemon(_session_tmp, SHELL)
    yield d
    stop_shell_daemon(d)


@pytest.fixture
def sh(_shelld):
    yield _shelld
    assert _shelld.proc.poll() is None, f"lockboxd died:\n{_shelld.log[-4000:]}"
    _shelld.shell_reset()


def binding(d):
    """A fresh binding's HOME (made by the jailer at the first job)."""
    return d.home_path(".homes", uuid.uuid4().hex[:12])


def call(d, method, path, body=None, timeout=30):
    return d.client.call(method, path, body, timeout=scaled(timeout))


def submit(d, script, home=None, cwd=None, mode="stdio", env=None, timeout=10):
    """POST /v1/jobs/run, answered after at most 0.5 s of the job:
    (HTTP status, the answer or the error's code)."""
    env = dict(env or {}, **({"HOME": home} if home else {}))
    try:
        return 200, d.client.run(src(script), cwd=cwd, env=env or None, mode=mode, timeout=0.5,
                                 http_timeout=scaled(timeout))
    except ShellError as e:
        return e.status, e.code


def start_job(d, script, **kw):
    status, r = submit(d, script, **kw)
    assert status == 200, (status, r)
    return r


def wait_end(d, job, deadline=20):
    """(the job's last answer, its whole output) once it is over."""
    return d.client.follow(d.client.wait(job, timeout=1), scaled(deadline))


def run_to_end(d, script, **kw):
    return wait_end(d, start_job(d, script, **kw)["job_id"])


def type_in(d, job, text):
    return d.client.input(job, text, offset=0, timeout=0.2)


# ------------------------------------------------------- the terminal (input)

def test_input_reaches_the_program_as_typed_and_nothing_else(sh):
    """/input types the text, not the framing the HTTP side sends it in: a
    record header whose length bytes read as ^D (end of file on an empty
    line), ^C (3 bytes: SIGINT) or ^Z (26: SIGTSTP) would end or stop the
    job on the user's behalf."""
    r = start_job(sh, 'read a; echo "[$a]"; read b; echo "[$b]"', home=binding(sh), mode="pty")
    job = r["job_id"]
    type_in(sh, job, "ab\n")  # 3 bytes
    type_in(sh, job, "z" * 25 + "\n")  # 26 bytes
    r, out = wait_end(sh, job)
    assert (r["status"], r["exit_code"]) == ("exited", 0), (r, out)
    assert out == "ab\n[ab]\n" + "z" * 25 + "\n[" + "z" * 25 + "]\n", repr(out)


# ------------------------------------------------------------ ending a job

def test_terminate_interrupts_a_stdio_job_even_after_its_leader_ended(sh):
    """Terminate sends SIGINT to a stdio job's process group (its keeper
    cannot: Landlock scopes the keeper's signals to its own domain), also
    once the script's shell has ended and a background process of its
    group still holds stdout: the program's handler runs and the job ends
    within its grace."""
    script = """\
        python3 -c '
        import os, signal, time
        def bye(*_):
            print("interrupted", flush=True)
            os._exit(4)
        signal.signal(signal.SIGINT, bye)
        print("ready", flush=True)
        time.sleep(60)
        ' &
        sleep 0.3; echo "leader ends"
        """
    job = start_job(sh, script, home=binding(sh))["job_id"]

    def started():
        assert sh.client.wait(job)["output"] == "ready\nleader ends\n"
    eventually(started, scaled(10))
    r = call(sh, "POST", f"/v1/jobs/{job}/terminate", {"grace_seconds": 30}, timeout=60)
    assert r["status"] == "terminated", r
    r, out = wait_end(sh, job)
    assert out == "ready\nleader ends\ninterrupted\n", repr(out)
    assert r["exit_code"] != 137, r  # not killed at the grace's end


def job_leader(d):
    """Host pid of the first process (sh) of the job d runs now."""
    ps = subprocess.run(["ps", "-e", "-o", "pid=,ppid=,uid=,comm="],
                        capture_output=True, text=True, check=True).stdout
    rows = [line.split() for line in ps.splitlines()]
    keepers = {r[0] for r in rows if r[3] == "lockbox-keeper"}
    leader = [int(r[0]) for r in rows
              if r[2] == str(d.shell_uid) and r[1] in keepers and r[3] == "sh"]
    assert len(leader) == 1, ps
    return leader[0]


def take_pid(pid):
    """A root process of the host, leading a session (and a group) of its
    own, with the number pid (free again): the next fork of the host gets
    it once ns_last_pid says pid - 1 (other forks may come first: retried)."""
    for _ in range(200):
        with open("/proc/sys/kernel/ns_last_pid", "w") as f:
            f.write(str(pid - 1))
        p = subprocess.Popen(["setsid", "sleep", "60"])
        if p.pid == pid:
            break
        p.kill()
        p.wait()
    else:
        raise AssertionError(f"pid {pid} could not be had again")

    def leads_its_group():
        assert os.getpgid(p.pid) == p.pid
    eventually(leads_its_group, scaled(5))
    return p


def test_interrupting_never_signals_a_group_that_reused_the_leaders_number(sh):
    """A stdio job whose shell has ended while a process of a session of
    its own holds its stdout is still running: its group is empty, and the
    leader's number, reaped, free. A root process of the host that got
    that number and leads its own group must survive the job's terminate
    (SIGINT to the job's group, sent by the jailer, root)."""
    job = start_job(sh, "setsid sleep 30 & sleep 1.5", home=binding(sh))["job_id"]
    leader = job_leader(sh)

    def reaped():
        assert not os.path.exists(f"/proc/{leader}")
    eventually(reaped, scaled(10))
    victim = take_pid(leader)
    try:
        assert call(sh, "GET", f"/v1/jobs/{job}")["status"] == "running"
        r = call(sh, "POST", f"/v1/jobs/{job}/terminate", {"grace_seconds": 0}, timeout=30)
        assert r["status"] == "terminated", r
        time.sleep(0.3)
        assert victim.poll() is None, f"the host's process {victim.pid} got {victim.poll()}"
    finally:
        victim.kill()
        victim.wait()


def test_what_a_job_leaves_running_dies_with_the_job(sh):
    """A daemon that forks twice, leaves the session and ignores every
    signal it can outlives its script (as in the reference), but not the
    job: DELETE ends it, its children included."""
    home = binding(sh)
    script = """\
        python3 - <<'PY'
        import os, signal, time
        for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGTSTP):
            signal.signal(s, signal.SIG_IGN)
        if os.fork():
            os._exit(0)
        os.setsid()
        if os.fork():
            os._exit(0)
        os.close(0); os.close(1); os.close(2)
        while True:
            if os.fork() == 0:
                time.sleep(0.05)
                os._exit(0)
            os.wait()
        PY
        echo detached
        """
    r, out = run_to_end(sh, script, home=home)
    assert (r["exit_code"], out) == (0, "detached\n"), (r, out)
    assert sh.shell_processes(), "the daemon did not start"
    call(sh, "DELETE", f"/v1/jobs/{r['job_id']}?force=true&grace_seconds=0")
    # sh.reset() (after the test) checks that no process of the UID is left


# ------------------------------------------------------------ the disk

def test_a_stdio_jobs_stderr_log_is_bounded(sh):
    """stderr.log of a stdio job is never served by the API, but it lies
    on the state directory's disk: it keeps shell.max_output bytes, like
    output.log; stdout stays byte-exact and the job ends normally."""
    r, out = run_to_end(sh, "head -c 10000000 /dev/zero >&2; printf out", home=binding(sh))
    assert (r["status"], r["exit_code"], out) == ("exited", 0, "out"), (r, out)
    path = os.path.join(sh.state_dir, "jobs", r["job_id"], "stderr.log")
    with open(path, "rb") as f:
        assert f.read() == bytes(MAX_OUTPUT)


def test_writing_home_stops_at_its_file_system(sh):
    """shell.home is a file system of shell.disk_size: a job writing
    without end gets "No space left on device" there (its error goes to
    /tmp: HOME has no room left for it), the host's disk never sees more,
    and once the file is gone the job writes there again."""
    r, out = run_to_end(sh, "head -c 400000000 /dev/zero > big 2>/tmp/err; "
                           "grep -c 'No space left on device' /tmp/err; du -m big | cut -f1; "
                           "rm big; echo again > small && cat small", home=binding(sh))
    assert r["exit_code"] == 0, (r, out)
    nospace, mib, again = out.split("\n")[:3]
    assert (nospace, again) == ("1", "again"), out
    assert 100 < int(mib) <= DISK >> 20, out


# ------------------------------------------------------------ the jailer's loop

def test_a_huge_environment_is_answered_at_once(sh):
    """The env overlay of a 6 MB body (400000 names) is merged with the
    base environment in O(n log n): merged pairwise, it kept the jailer,
    which serves every call and every code run from one thread, busy for
    minutes. The job then fails at exec (the kernel's ARG_MAX)."""
    env = {f"V{i}": "" for i in range(400000)}
    status, r = submit(sh, "true", home=binding(sh), env=env, timeout=60)
    assert status == 200, (status, r)
    r, _ = wait_end(sh, r["job_id"])
    assert (r["status"], r["exit_code"]) == ("failed", 126), r
    path = os.path.join(sh.state_dir, "jobs", r["job_id"], "stderr.log")
    with open(path) as f:
        assert "exec: Argument list too long" in f.read()


# ------------------------------------------------------------ the mount view

def test_links_planted_in_shell_home_never_widen_a_later_jobs_view(sh):
    """A job plants symbolic links (to /, /etc, up the tree, into another
    binding's HOME) and tries a hard link to a host file; later jobs whose
    HOME or cwd pass through them are refused, '..', '.' and '//' are
    refused, and the hard link fails (another mount)."""
    a, b = binding(sh), binding(sh)
    r, _ = run_to_end(sh, "echo secret > secret", home=b)
    assert r["exit_code"] == 0, r
    r, out = run_to_end(sh, f"""\
        mkdir -p d && ln -s / root && ln -s /etc etc && ln -s ../../.. d/up && ln -s {b} other
        ln /etc/hostname hard 2>/dev/null && echo linked || echo "no hard link"
        """, home=a)
    assert (r["exit_code"], out) == (0, "no hard link\n"), (r, out)
    refused = [
        dict(home=a + "/root/root"), dict(home=a + "/etc"), dict(home=a + "/other"),
        dict(home=a, cwd=a + "/root"), dict(home=a, cwd=a + "/d/up"), dict(home=a, cwd="../.."),
        dict(home=a, cwd=a + "/other"), dict(home=a, cwd=a + "/etc/ssl"),
        dict(home=sh.home + "/../.."), dict(home=a + "/../x"), dict(home=a + "/./x"),
        dict(home=a.replace("/.homes/", "/.homes//")), dict(home=sh.home + "x/y"),
    ]
    for case in refused:
        status, r = submit(sh, "cat secret; cat /etc/shadow", **case)
        assert status in (400, 422), (case, status, r)
    # followed from inside, the links lead only into the job's own view
    r, out = run_to_end(sh, "cat root/root/.profile etc/shadow other/secret 2>&1 | "
                           "grep -c 'No such file'", home=a)
    assert out == "3\n", (r, out)


def test_passwd_holds_a_long_home_whole_and_gains_no_line(sh):
    """The job's /etc/passwd names its HOME: a long one (passwd read by ssh
    and getpwnam) comes whole, not cut, and one with ':' or a newline (a
    HOME may hold any byte) cannot add fields or users."""
    long_home = sh.home_path(*(["p" * 100] * 6))
    r, out = run_to_end(sh, "getent passwd sandbox | cut -d: -f6-", home=long_home)
    assert (r["exit_code"], out) == (0, long_home + ":/bin/sh\n"), (r, out)
    odd = sh.home_path("odd:x\nevil::0:0:x:", ":", "bin", "sh")
    r, out = run_to_end(sh, "wc -l < /etc/passwd; getent passwd evil || echo no-evil; "
                           "getent passwd sandbox | cut -d: -f6-", home=odd)
    assert (r["exit_code"], out) == (0, "2\nno-evil\n/nonexistent:/bin/sh\n"), (r, out)


def test_only_the_jobs_own_trees_are_mounted_writable(sh):
    """Every mount of a job's view is read-only but its HOME, its
    workspace, its /tmp, /dev/shm, its devpts instance and three devices
    (so /etc, generated and with the host's files bound in it, is
    read-only below Landlock too); writes into /etc fail."""
    home = binding(sh)
    ws = sh.home_path(".ws", uuid.uuid4().hex[:12])
    os.makedirs(ws)
    for d in (ws, os.path.dirname(ws)):  # as a control script makes them
        os.chown(d, sh.shell_uid, sh.shell_uid)
    r, out = run_to_end(sh, """
        awk '$6 ~ /(^|,)rw(,|$)/ {print "rw", $5}' /proc/self/mountinfo
        for f in /etc/x /etc/ssh/x /etc/ssl/x; do
            (: > "$f") 2>/dev/null && echo "wrote $f"
        done
        mkdir /etc/d 2>/dev/null && echo "made /etc/d"
        echo done
    """, home=home, cwd=ws)
    lines = out.split("\n")
    assert r["exit_code"] == 0 and "done" in lines, (r, out)
    rw = {line.split(" ", 1)[1] for line in lines if line.startswith("rw ")}
    assert rw <= {home, ws, "/tmp", "/dev/shm", "/dev/pts", "/dev/null", "/dev/zero",
                  "/dev/tty"}, out
    assert {home, ws, "/tmp"} <= rw, out
    assert not [line for line in lines if line.startswith(("wrote", "made"))], out


# ------------------------------------------------------------ other bindings

def test_bindings_cannot_reach_each_others_servers_processes_or_files(sh):
    """Binding A leaves a server on 127.0.0.1 and on an abstract Unix
    socket, and a file in its HOME; binding B cannot connect to either,
    sees none of A's processes, and kill -9 -1 from B leaves them alive:
    A's next job still reaches its own server."""
    a, b = binding(sh), binding(sh)
    port = 7000 + os.getpid() % 1000
    server = f"""\
        python3 - > ready 2>&1 <<'PY' &
        import socket, time
        u = socket.socket(socket.AF_UNIX); u.bind("\\0rt-shell-{port}"); u.listen(8)
        t = socket.socket(); t.bind(("127.0.0.1", {port})); t.listen(8)
        print("listening", flush=True)
        while True:
            c, _ = t.accept(); c.sendall(b"A"); c.close()
        PY
        while [ ! -s ready ]; do sleep 0.05; done
        cat ready; echo secret-of-a > secret
        """
    r, out = run_to_end(sh, server, home=a)
    assert out == "listening\n", (r, out)
    probe = f"""\
        python3 - <<'PY'
        import os, socket
        for name, addr, fam in (("tcp", ("127.0.0.1", {port}), socket.AF_INET),
                                ("abstract", "\\0rt-shell-{port}", socket.AF_UNIX)):
            s = socket.socket(fam)
            s.settimeout(2)
            try:
                s.connect(addr)
                print(name, "CONNECTED")
            except OSError as e:
                print(name, "refused", e.errno)
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
        cmds = [open(f"/proc/{{p}}/cmdline", "rb").read() for p in pids]
        print("python servers seen:", sum(b"socket" in c for c in cmds))
        PY
        cat {a}/secret 2>&1 | grep -c 'No such file'
        kill -9 -1 2>/dev/null; echo killed-all
        """
    r, out = run_to_end(sh, probe, home=b)
    assert out == ("tcp refused 111\nabstract refused 111\npython servers seen: 0\n1\n"
                   "killed-all\n"), (r, out)
    r, out = run_to_end(sh, f"python3 -c 'import socket; s = socket.create_connection("
                           f"(\"127.0.0.1\", {port})); print(s.recv(1).decode())'", home=a)
    assert (r["exit_code"], out) == (0, "A\n"), (r, out)


# ------------------------------------------------------------ privileges

def test_the_jobs_terminal_and_filter_give_no_way_up(sh):
    """On its own terminal a job may not type into the input queue
    (TIOCSTI), change the line discipline, or take the console; it cannot
    add a seccomp listener of its own (that would take the forbidden calls'
    notifications from its keeper); the binding's init (PID 1, root's
    mount view) is out of reach, and no capability or setuid bit applies."""
    probe = """\
        python3 - <<'PY'
        import ctypes, fcntl, os, termios
        for name, req, arg in (("TIOCSTI", termios.TIOCSTI, b"x"),
                               ("TIOCSETD", termios.TIOCSETD, b"\\x15\\0\\0\\0"),
                               ("TIOCCONS", termios.TIOCCONS, 0)):
            try:
                fcntl.ioctl(0, req, arg)
                print(name, "ALLOWED")
            except OSError as e:
                print(name, e.errno)
        class Insn(ctypes.Structure):
            _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte),
                        ("jf", ctypes.c_ubyte), ("k", ctypes.c_uint)]
        class Prog(ctypes.Structure):
            _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(Insn))]
        allow = (Insn * 1)(Insn(0x06, 0, 0, 0x7fff0000))
        libc = ctypes.CDLL(None, use_errno=True)
        # seccomp(SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER)
        r = libc.syscall(317, 1, 8, ctypes.byref(Prog(1, allow)))
        print("listener", r, ctypes.get_errno())
        try:
            os.listdir("/proc/1/root")
            print("pid 1 root LISTED")
        except OSError as e:
            print("pid 1 root", e.errno)
        status = dict(l.split(":", 1) for l in open("/proc/self/status"))
        print("CapEff", status["CapEff"].strip(), "NoNewPrivs", status["NoNewPrivs"].strip())
        PY
        su -c id root </dev/null >/dev/null 2>&1 || echo "su fails"
        """
    r, out = run_to_end(sh, probe, home=binding(sh), mode="pty")
    assert out == ("TIOCSTI 1\nTIOCSETD 1\nTIOCCONS 1\nlistener -1 16\npid 1 root 13\n"
                   "CapEff 0000000000000000 NoNewPrivs 1\nsu fails\n"), (r, out)


# ------------------------------------------------------------ without cgroups

def test_ending_a_job_never_signals_a_group_that_reused_its_number(_session_tmp, monkeypatch):
    """Without cgroups (read-only, as in a container without the rights)
    ending a job signals its process group. The jailer is root and the
    job's first process has long been reaped when a finished job is
    deleted (or removed after shell.retention): its number may then lead a
    group of the host's own. A root process in a session of its own that
    got that number must survive the DELETE; the group is named by the
    leader's pidfd, never by its number."""
    wrapper = os.path.join(_session_tmp, "lockboxd-no-cgroups")
    with open(wrapper, "w") as f:
        f.write(src(f"""\
            #!/bin/sh
            # lockboxd in a mount namespace of its own where the cgroup file
            # systems are read-only: it runs without cgroups
            exec unshare -m sh -c '
                mount --make-rprivate /
                awk "\\$3 ~ /^cgroup/ {{print \\$2}}" /proc/self/mounts | while read -r m; do
                    mount -o remount,bind,ro "$m"
                done
                exec "$0" "$@"' {Daemon.start.__globals__["LOCKBOXD"]} "$@"
            """))
    os.chmod(wrapper, 0o755)
    monkeypatch.setitem(Daemon.start.__globals__, "LOCKBOXD", wrapper)
    monkeypatch.setitem(Daemon.start.__globals__, "daemon_cgroups", lambda pid: ({}, []))
    d = start_shell_daemon(_session_tmp, {"disk_size": 0})
    victim = None
    try:
        assert "cgroup=none" in d.log, d.log[-2000:]
        job = start_job(d, "sleep 1; echo done", home=binding(d))["job_id"]
        leader = job_leader(d)
        r, out = wait_end(d, job)
        assert (r["exit_code"], out) == (0, "done\n"), (r, out)
        assert not os.path.exists(f"/proc/{leader}")
        victim = take_pid(leader)
        call(d, "DELETE", f"/v1/jobs/{job}")
        time.sleep(0.3)
        assert victim.poll() is None, f"the host's process {victim.pid} was killed: {victim.poll()}"
    finally:
        if victim:
            victim.kill()
            victim.wait()
        try:
            d.shell_reset()
        finally:
            stop_shell_daemon(d)


def test_another_bindings_home_is_neither_a_workspace_nor_a_home(sh):
    """A job names a live binding's HOME, or a directory in it, as its
    workspace (cwd), or a HOME inside it: refused, and the victim's file is
    untouched; the victim's own next job is served."""
    victim = binding(sh)
    start_job(sh, "echo secret > $HOME/s; mkdir $HOME/x; sleep 5", home=victim)
    eventually(lambda: os_path_exists(os.path.join(victim, "x")), scaled(5))
    attacker = binding(sh)
    for kw in ({"home": attacker, "cwd": os.path.join(victim, "x")},
               {"home": attacker, "cwd": victim},
               {"home": os.path.join(victim, "x")}):
        status, code = submit(sh, "echo owned > s; echo owned > $HOME/../s", **kw)
        assert (status, code) in ((400, "invalid_cwd"), (422, "validation_error")), (kw, status,
                                                                                    code)
    with open(os.path.join(victim, "s")) as f:
        assert f.read() == "secret\n"
    status, r = submit(sh, "cat $HOME/s", home=victim, env={})
    assert status == 200, r


def os_path_exists(p):
    assert os.path.exists(p), p
    return True
