"""Hostile snippets and their expected verdicts (docs/SECURITY.md):
no new processes, no exec, kill-list syscalls stop the run and are named,
the run sees only its own jail (files, pids, identity, environment)."""
import os
import textwrap

import pytest

from conftest import KEY, assert_overlapped, py_clocked, scaled, take_interval


def code(src):
    return textwrap.dedent(src).lstrip("\n")


# ---------------------------------------------------------------- processes

NO_PROCESS_CASES = {
    "fork": "import os\nos.fork()\nprint('forked')",
    "subprocess_run": "import subprocess\nsubprocess.run(['/bin/echo', 'pwned'])\nprint('ran')",
    "execl": "import os\nos.execl('/usr/bin/python3', 'python3', '-c', 'print(1)')",
    "posix_spawn": "import os\nos.posix_spawn('/bin/echo', ['echo', 'pwned'], {})\nprint('ran')",
    "multiprocessing": code("""
        import multiprocessing as mp
        p = mp.Process(target=print, args=('child',))
        p.start(); p.join()
        print('ran')
    """),
}


@pytest.mark.parametrize("name", sorted(NO_PROCESS_CASES))
def test_new_processes_are_not_permitted(daemon, name):
    d = daemon.run_data(NO_PROCESS_CASES[name])
    assert d["exit_code"] == 1, d
    assert d["status"] == "runtime_error", d
    assert "pwned" not in d["stdout"] and "ran" not in d["stdout"], d
    assert "forked" not in d["stdout"] and "child" not in d["stdout"], d
    assert "PermissionError" in d["stderr"], d
    assert "operation not permitted" in d["error"].lower(), d
    assert d["error"].startswith("process exited with code 1\n"), d


def test_os_system_does_not_run_a_shell(daemon):
    d = daemon.run_data("import os\nrc = os.system('echo pwned')\nprint('rc', rc != 0)")
    assert d["stdout"] == "rc True\n", d
    assert d["exit_code"] == 0


def test_fork_failure_is_catchable(daemon):
    d = daemon.run_data(code("""
        import os, errno
        try:
            os.fork()
        except OSError as e:
            print(errno.errorcode[e.errno], e.strerror)
    """))
    assert d["stdout"] == "EPERM Operation not permitted\n"
    assert d["exit_code"] == 0 and d["error"] == ""


# ------------------------------------------------------------- kill list

KILL_CASES = {
    "mount": "libc.mount(b'none', b'/tmp', b'tmpfs', 0, None)",
    "umount2": "libc.umount2(b'/tmp', 2)",
    "ptrace": "libc.ptrace(0, 0, None, None)",
    "unshare": "libc.unshare(0x00020000)",
    "setuid": "import os; os.setuid(0)",
    "chroot": "libc.chroot(b'/tmp')",
    "setns": "libc.setns(0, 0)",
    "keyctl": "libc.syscall(250, 0, 0, 0, 0, 0)",
    "bpf": "libc.syscall(321, 0, 0, 0)",
    "personality": "libc.personality(0xffffffff)",
}


@pytest.mark.parametrize("name", sorted(KILL_CASES))
def test_kill_list_syscall_stops_the_run_and_is_named(daemon, name):
    src = ("import ctypes, sys\nlibc = ctypes.CDLL(None, use_errno=True)\n"
           "print('before', flush=True)\n" + KILL_CASES[name] + "\nprint('after')\n")
    d = daemon.run_data(src)
    assert d["exit_code"] == -1, d
    assert d["status"] == "syscall_denied", d
    assert d["stdout"] == "before\n", d
    assert d["error"].startswith(
        f"process exited with code -1\n"
        f"error: operation not permitted: syscall '{name}' is not allowed\n"), d


def test_mount_by_raw_syscall_number(daemon):
    d = daemon.run_data("import ctypes\nctypes.CDLL(None).syscall(165, 0, 0, 0, 0, 0)\n")
    assert d["exit_code"] == -1
    assert d["status"] == "syscall_denied"
    assert "syscall 'mount' is not allowed" in d["error"]


def test_daemon_serves_after_kill_list_run(daemon):
    daemon.run_data("import ctypes\nctypes.CDLL(None).ptrace(0, 0, None, None)")
    daemon.assert_serving()


# --------------------------------------------------------- what the run sees

def test_etc_passwd_is_the_sandbox_one(daemon):
    d = daemon.run_data(code("""
        import os
        print(os.getuid())
        print(open('/etc/passwd').read(), end='')
    """))
    uid_line, passwd = d["stdout"].split("\n", 1)
    uid = int(uid_line)
    assert daemon.uid_min <= uid <= daemon.uid_max
    assert f"sandbox:x:{uid}:" in passwd
    for host_only in ("daemon:", "_apt", "nobody:", "bin:", "sys:"):
        assert host_only not in passwd, passwd
    assert len(passwd.splitlines()) <= 2, passwd


def test_identity_is_a_pool_uid_without_groups_or_privileges(daemon):
    d = daemon.run_data(code("""
        import os, pwd
        st = dict(l.split(":\\t", 1) for l in open('/proc/self/status').read().splitlines()
                  if ":\\t" in l)
        print(os.getuid(), os.geteuid(), os.getgid(), os.getegid())
        print(os.getgroups())
        print(st["CapEff"].strip(), st["CapPrm"].strip(), st["CapBnd"].strip() == "0" * 16)
        print(st["NoNewPrivs"].strip(), st["Seccomp"].strip())
        print(pwd.getpwuid(os.getuid()).pw_name)
    """))
    assert d["stderr"] == "", d
    lines = d["stdout"].splitlines()
    uid, euid, gid, egid = map(int, lines[0].split())
    assert uid == euid and gid == egid
    assert daemon.uid_min <= uid <= daemon.uid_max
    assert daemon.uid_min <= gid <= daemon.uid_max
    assert lines[1] == "[]"
    cap_eff, cap_prm, _ = lines[2].split()
    assert (cap_eff, cap_prm) == ("0000000000000000", "0000000000000000")
    assert lines[3] == "1 2"  # no_new_privs, seccomp filter mode
    assert lines[4] == "sandbox"


def test_environment_holds_no_secrets(daemon):
    d = daemon.run_data(code("""
        import os
        for k in sorted(os.environ):
            print(f"{k}={os.environ[k]}")
    """))
    env = dict(line.split("=", 1) for line in d["stdout"].splitlines())
    assert set(env) == {"PATH", "LANG", "HOME", "TMPDIR"}, env
    assert env["HOME"] == "/tmp" and env["TMPDIR"] == "/tmp"
    assert KEY not in d["stdout"]
    assert str(daemon.port) not in d["stdout"]


def test_api_key_not_readable_anywhere_in_the_jail(daemon):
    d = daemon.run_data(code(f"""
        import os
        hits = []
        for root, dirs, files in os.walk('/', onerror=lambda e: None):
            if root.startswith(('/usr', '/lib', '/proc/self/task')):
                dirs[:] = []
                continue
            for f in files:
                p = os.path.join(root, f)
                try:
                    with open(p, 'rb') as fh:
                        if b'{KEY}' in fh.read(1 << 20):
                            hits.append(p)
                except OSError:
                    pass
        print(hits)
    """))
    assert d["stdout"] == "[]\n", d


def test_hostname_is_sandbox(daemon):
    d = daemon.run_data("import os, socket\nprint(socket.gethostname(), os.uname().nodename)")
    assert d["stdout"] == "sandbox sandbox\n"


def test_run_sees_only_its_own_pid(daemon):
    d = daemon.run_data(code("""
        import os
        print(os.getpid(), os.getppid())
        print(sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))
    """))
    assert d["stdout"] == "1 0\n[1]\n"


def test_cannot_signal_host_processes(daemon):
    d = daemon.run_data(code(f"""
        import os, signal, errno
        for pid in ({daemon.pid}, {os.getpid()}, 2):
            try:
                os.kill(pid, signal.SIGKILL)
                print(pid, "killed")
            except OSError as e:
                print(pid, errno.errorcode[e.errno])
    """))
    assert "killed" not in d["stdout"], d
    assert d["exit_code"] == 0
    assert daemon.proc.poll() is None


@pytest.mark.parametrize("path", ["/etc/evil", "/usr/evil", "/evil", "/dev/evil",
                                  "/proc/evil", "/usr/lib/python3/dist-packages/evil.py"])
def test_writing_outside_tmp_fails(daemon, path):
    d = daemon.run_data(code(f"""
        import errno
        try:
            with open('{path}', 'w') as f:
                f.write('x')
            print('written')
        except OSError as e:
            print(errno.errorcode[e.errno])
    """))
    allowed = {"EROFS", "EACCES", "EPERM"} | ({"ENOENT"} if path.startswith("/proc") else set())
    assert d["stdout"].strip() in allowed, d
    assert not os.path.exists(path)


def test_root_is_read_only(daemon):
    d = daemon.run_data(code("""
        import os
        st = os.statvfs('/')
        print(bool(st.f_flag & os.ST_RDONLY), bool(os.statvfs('/tmp').f_flag & os.ST_RDONLY))
    """))
    assert d["stdout"] == "True False\n"


def test_interpreter_tree_is_the_hosts_own_not_a_copy(daemon):
    """/usr in the jail is a read-only bind of the host's: the very same
    files (device and inode), nothing copied per run or per daemon."""
    paths = ("/usr/bin/python3.11", "/usr/lib/python3.11/os.py",
             "/usr/lib/python3/dist-packages/requests/__init__.py")
    d = daemon.run_data(code(f"""
        import os
        for p in {paths!r}:
            st = os.stat(p)
            print(st.st_dev, st.st_ino)
        print(bool(os.statvfs('/usr').f_flag & os.ST_RDONLY))
    """))
    host = "".join(f"{os.stat(p).st_dev} {os.stat(p).st_ino}\n" for p in paths)
    assert d["stdout"] == host + "True\n", d


def test_host_files_are_not_reachable(daemon):
    d = daemon.run_data(code(f"""
        import os
        for p in ('/etc/shadow', '/root', '/home', '/var/log', '{daemon.config_path}',
                  '{daemon.workdir}', '/sys/fs/cgroup', '/proc/sys/kernel', '/boot'):
            print(p, os.path.exists(p))
    """))
    assert "True" not in d["stdout"], d
    assert d["stdout"].count("False") == 9


def test_dev_is_minimal(daemon):
    """Four device nodes; the usual fd symlinks are allowed besides."""
    d = daemon.run_data(code("""
        import os
        names = sorted(os.listdir('/dev'))
        print([n for n in names if not os.path.islink('/dev/' + n)])
        print(sorted(os.readlink('/dev/' + n) for n in names if os.path.islink('/dev/' + n)))
        print(len(open('/dev/urandom', 'rb').read(16)), open('/dev/zero', 'rb').read(2))
    """))
    lines = d["stdout"].splitlines()
    assert lines[0] == "['null', 'random', 'urandom', 'zero']", d
    assert all(t.startswith("/proc/self/fd") for t in eval(lines[1])), d
    assert lines[2] == "16 b'\\x00\\x00'", d


def test_thread_bomb_is_capped(daemon):
    d = daemon.run_data(code("""
        import threading, time
        ev = threading.Event()
        n = 0
        try:
            for _ in range(1000):
                threading.Thread(target=ev.wait).start()
                n += 1
        except RuntimeError as e:
            print("stopped:", e)
        ev.set()
        print(n < 1000)
    """))
    assert d["exit_code"] == 0, d
    assert d["stdout"].endswith("True\n"), d
    assert "can't start new thread" in d["stdout"], d


def test_tmp_is_size_capped(daemon):
    d = daemon.run_data(code("""
        import errno
        n = 0
        try:
            with open('/tmp/fill', 'wb') as f:
                for _ in range(200):
                    f.write(b'\\0' * (1 << 20))
                    f.flush()
                    n += 1
        except OSError as e:
            print(errno.errorcode[e.errno], n)
    """))
    assert d["exit_code"] == 0, d
    name, n = d["stdout"].split()
    assert name in ("ENOSPC", "EFBIG"), d
    assert int(n) <= 64


def test_unix_and_raw_sockets_refused_even_with_network(daemon):
    d = daemon.run_data(code("""
        import socket, errno
        for fam, typ in ((socket.AF_UNIX, socket.SOCK_STREAM), (socket.AF_INET, socket.SOCK_RAW),
                         (socket.AF_NETLINK, socket.SOCK_RAW), (socket.AF_PACKET, socket.SOCK_RAW)):
            try:
                socket.socket(fam, typ)
                print("open")
            except OSError as e:
                print(errno.errorcode[e.errno])
    """), enable_network=True)
    assert d["stdout"] == "EPERM\nEPERM\nEPERM\nEPERM\n", d


def test_listen_is_refused(daemon):
    d = daemon.run_data(code("""
        import socket, errno
        s = socket.socket()
        s.bind(('127.0.0.1', 0))
        try:
            s.listen(1)
            print("listening")
        except OSError as e:
            print(errno.errorcode[e.errno])
    """), enable_network=True)
    assert d["stdout"] == "EPERM\n", d


def test_execve_of_interpreter_refused_after_start(daemon):
    d = daemon.run_data(code("""
        import os, errno
        try:
            os.execv('/usr/bin/python3', ['python3', '-c', 'print("escaped")'])
        except OSError as e:
            print(errno.errorcode[e.errno])
    """))
    assert d["stdout"] == "EPERM\n", d
    assert d["exit_code"] == 0


# ------------------------------------------------------ signals and fds

@pytest.mark.parametrize("src,sigs", [
    ("import ctypes\nctypes.string_at(0)", ("SIGSEGV",)),
    # The program is pid 1 of its namespace, so the kernel drops the
    # default-action SIGABRT that abort() raises; glibc then faults.
    ("import os\nos.abort()", ("SIGABRT", "SIGSEGV")),
], ids=["segfault", "abort"])
def test_program_killed_by_a_signal(daemon, src, sigs):
    d = daemon.run_data("print('pre', flush=True)\n" + src)
    assert d["stdout"] == "pre\n", d
    assert d["exit_code"] != 0, d
    assert d["status"] == "runtime_error", d
    assert any(f"\nerror: killed by signal {s}\n" in d["error"] for s in sigs), d
    assert d["error"].startswith(f"process exited with code {d['exit_code']}\n"), d


def test_only_standard_fds_are_open(daemon):
    """No descriptor of the daemon (listening socket, control channel, the
    code pipe) leaks into the run."""
    d = daemon.run_data(code("""
        import os
        fds = sorted(int(f) for f in os.listdir('/proc/self/fd'))
        for fd in fds:
            try:
                print(fd, os.readlink(f'/proc/self/fd/{fd}'))
            except OSError as e:
                print(fd, 'closed')
    """))
    lines = d["stdout"].splitlines()
    fds = [int(l.split()[0]) for l in lines]
    # 0, 1, 2, the directory listdir had open (closed by now), and 5: the
    # pipe the bootstrap reports the exit status on
    assert fds[:3] == [0, 1, 2], d
    assert [f for f in fds if f not in (0, 1, 2, 5)] in ([], [3]), d
    assert any(l.startswith("5 pipe:") for l in lines), d
    assert all("socket" not in l for l in lines), d


def test_stdout_nul_bytes_are_kept(daemon):
    d = daemon.run_data("import sys\nsys.stdout.write('a\\x00b\\n')\nsys.stderr.write('c\\x00d')")
    assert d["stdout"] == "a\x00b\n"
    assert d["stderr"] == "c\x00d"


def test_closed_stdout_run_still_completes(daemon):
    d = daemon.run_data(code("""
        import os, sys, time
        print('bye', flush=True)
        os.close(1); os.close(2)
        time.sleep(0.5)
        open('/tmp/x', 'w').write('still running')
    """))
    assert d["stdout"] == "bye\n"
    assert d["exit_code"] == 0, d


def test_open_files_limit(daemon):
    d = daemon.run_data(code("""
        import errno
        fs = []
        try:
            for i in range(5000):
                fs.append(open('/dev/null'))
        except OSError as e:
            print(errno.errorcode[e.errno], len(fs) < 5000)
    """))
    assert d["stdout"] == "EMFILE True\n", d


def test_deep_recursion_is_an_ordinary_error(daemon):
    d = daemon.run_data("def f(n): return f(n + 1)\nf(0)")
    assert d["exit_code"] == 1
    assert "RecursionError" in d["stderr"]


def test_concurrent_runs_get_distinct_uids(daemon):
    import threading
    n = 4
    out = [None] * n
    barrier = threading.Barrier(n)

    def go(i):
        s = daemon.new_session()
        barrier.wait()
        out[i] = daemon.run(py_clocked("import os, time\ntime.sleep(0.7)\nprint(os.getuid())"),
                            session=s)

    ts = [threading.Thread(target=go, args=(i,)) for i in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(60)
    # distinct UIDs prove something only for runs that held them at once
    assert_overlapped([take_interval(r["data"]) for r in out])
    uids = [int(r["data"]["stdout"]) for r in out]
    assert len(set(uids)) == n, uids
    assert all(daemon.uid_min <= u <= daemon.uid_max for u in uids), uids


def test_wall_and_cpu_time_are_plausible(daemon):
    d = daemon.run_data("import time\ntime.sleep(1)")
    assert 1000 <= d["wall_ms"] < scaled(3) * 1000, d  # the sleep itself is not scaled
    assert 0 <= d["cpu_ms"] < scaled(0.8) * 1000, d
    d = daemon.run_data("import time\nt = time.process_time()\nwhile time.process_time() - t < 0.6: pass")
    assert d["cpu_ms"] >= 550, d


def test_ca_certificates_and_resolver_files_present(daemon):
    d = daemon.run_data(code("""
        import os, ssl, socket
        import requests.certs
        print(ssl.create_default_context().cert_store_stats()['x509_ca'] > 0
              or os.path.exists(requests.certs.where()))
        print(os.path.exists(requests.certs.where()))
        print(os.path.exists('/etc/resolv.conf') or os.path.exists('/etc/hosts'))
        print(socket.getaddrinfo('localhost', 80, socket.AF_INET)[0][4][0])
    """), enable_network=True)
    assert d["stdout"] == "True\nTrue\nTrue\n127.0.0.1\n", d


def test_kill_list_syscall_in_a_thread_ends_the_whole_run(daemon):
    d = daemon.run_data(code("""
        import ctypes, threading, time
        def bad():
            ctypes.CDLL(None).unshare(0x00020000)
        t = threading.Thread(target=bad)
        t.start()
        t.join()
        time.sleep(0.5)
        print("main survived")
    """))
    assert d["exit_code"] == -1, d
    assert d["status"] == "syscall_denied", d
    assert "main survived" not in d["stdout"], d
    assert "syscall 'unshare' is not allowed" in d["error"], d


@pytest.mark.parametrize("nr,name,expect", [
    (425, "io_uring_setup", "ENOSYS"),
    (319, "memfd_create", "ENOSYS"),
    (435, "clone3", "ENOSYS"),
    (57, "fork", "EPERM"),
    (58, "vfork", "EPERM"),
    (999, "no_such_call", "ENOSYS"),
])
def test_harmless_probes_fail_inside_the_program(daemon, nr, name, expect):
    d = daemon.run_data(code(f"""
        import ctypes, errno
        libc = ctypes.CDLL(None, use_errno=True)
        rc = libc.syscall({nr}, 0, 0, 0, 0, 0)
        print(rc, errno.errorcode.get(ctypes.get_errno()))
    """))
    assert d["exit_code"] == 0, d
    assert d["stdout"] == f"-1 {expect}\n", d


def test_setrlimit_probe_is_refused_but_harmless(daemon):
    d = daemon.run_data(code("""
        import resource, errno
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            print("raised")
        except (OSError, ValueError) as e:
            print(type(e).__name__)
    """))
    assert d["exit_code"] == 0, d
    # CPython reports setrlimit's EPERM as ValueError("not allowed to raise ...")
    assert d["stdout"] in ("PermissionError\n", "ValueError\n"), d
