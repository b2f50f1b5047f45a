"""Privilege: setuid(0), capabilities, ptrace, /proc/pid/mem, mount,
unshare, setns, keyctl, bpf, perf_event_open, userfaultfd, io_uring, kernel
modules and the rest of the kill list; ioctl and prctl argument filters.

A kill-list call stops the run at once, and the verdict names it:
exit_code -1, status syscall_denied, error "process exited with code -1\\n
error: operation not permitted: syscall 'NAME' is not allowed\\n" + stderr.
"""
import pytest

from attacklib import (PY_SYSCALL, assert_denied, assert_ok, attack_js, attack_py,
                       errno_lines, src)

# name: Python statement (libc wrappers where they exist, raw numbers
# otherwise; arguments are irrelevant: the filter acts before the kernel)
KILL_LIST = {
    "setuid": "import os; os.setuid(0)",
    "setgid": "import os; os.setgid(0)",
    "setreuid": "import os; os.setreuid(0, 0)",
    "setresuid": "import os; os.setresuid(0, 0, 0)",
    "setresgid": "import os; os.setresgid(0, 0, 0)",
    "setgroups": "import os; os.setgroups([0])",
    "setfsuid": "sc(122, 0)",
    "capset": "sc(126, 0, 0)",
    "ptrace": "libc.ptrace(0, 0, None, None)",            # PTRACE_TRACEME
    "process_vm_readv": "sc(310, 1, 0, 0, 0, 0, 0)",
    "process_vm_writev": "sc(311, 1, 0, 0, 0, 0, 0)",
    "mount": "libc.mount(b'proc', b'/tmp', b'proc', 0, None)",
    "umount2": "libc.umount2(b'/proc', 2)",
    "pivot_root": "sc(155, 0, 0)",
    "chroot": "libc.chroot(b'/tmp')",
    "unshare": "libc.unshare(0x10000000)",                # CLONE_NEWUSER
    "setns": "sc(308, 0, 0)",
    "keyctl": "sc(250, 0, 0, 0, 0, 0)",
    "add_key": "sc(248, 0, 0, 0, 0, 0)",
    "request_key": "sc(249, 0, 0, 0, 0)",
    "bpf": "sc(321, 0, 0, 0)",
    "perf_event_open": "sc(298, 0, 0, -1, -1, 0)",
    "userfaultfd": "sc(323, 0)",
    "init_module": "sc(175, 0, 0, 0)",
    "finit_module": "sc(313, 0, 0, 0)",
    "delete_module": "sc(176, 0, 0)",
    "kexec_load": "sc(246, 0, 0, 0, 0)",
    "kexec_file_load": "sc(320, 0, 0, 0, 0, 0)",
    "open_by_handle_at": "sc(304, 0, 0, 0)",
    "pidfd_getfd": "sc(438, 0, 0, 0)",
    "seccomp": "sc(317, 1, 0, 0)",                        # SECCOMP_SET_MODE_FILTER
    "personality": "libc.personality(0x0400000)",         # READ_IMPLIES_EXEC
    "modify_ldt": "sc(154, 0, 0, 0)",
    "iopl": "sc(172, 3)",
    "ioperm": "sc(173, 0, 1024, 1)",
    "reboot": "sc(169, 0xfee1dead, 672274793, 0x4321fedc, 0)",
    "syslog": "sc(103, 3, 0, 0)",
    "swapon": "sc(167, 0, 0)",
    "acct": "sc(163, 0)",
    "quotactl": "sc(179, 0, 0, 0, 0)",
    "settimeofday": "sc(164, 0, 0)",
    "clock_settime": "sc(227, 0, 0)",
    "adjtimex": "sc(159, 0)",
    "sethostname": "libc.sethostname(b'pwned', 5)",
    "setdomainname": "sc(171, 0, 0)",
    "fsopen": "sc(430, 0, 0)",
    "fsmount": "sc(432, 0, 0, 0)",
    "move_mount": "sc(429, 0, 0, 0, 0, 0)",
    "mount_setattr": "sc(442, 0, 0, 0, 0, 0)",
}


@pytest.mark.parametrize("name", sorted(KILL_LIST))
def test_python_kill_list_call_stops_the_run_and_is_named(daemon, name):
    d = attack_py(daemon, PY_SYSCALL + "print('pre', flush=True)\n" + KILL_LIST[name] +
                  "\nprint('PWNED: the call returned')\n")
    assert_denied(d, name, stdout="pre\n")


def test_python_kill_list_call_in_a_caught_block_still_stops(daemon):
    """The program cannot catch the verdict: it is a kill, not an error."""
    d = attack_py(daemon, PY_SYSCALL + src("""
        import os
        try:
            os.setuid(0)
        except BaseException as e:
            print('caught', e)
        print('PWNED')
    """))
    assert_denied(d, "setuid", stdout="")


def test_python_probes_that_fail_with_enosys(daemon):
    """io_uring (its operations bypass the filter), memfd, splice and
    friends, pidfd and SysV IPC: ENOSYS, the run goes on."""
    d = attack_py(daemon, PY_SYSCALL + src("""
        for name, nr, args in (('io_uring_setup', 425, (8, 0)), ('io_uring_enter', 426, (0, 0, 0, 0)),
                               ('io_uring_register', 427, (0, 0, 0, 0)), ('memfd_create', 319, (0, 0)),
                               ('splice', 275, (0, 0, 0, 0, 0, 0)), ('tee', 276, (0, 0, 0, 0)),
                               ('vmsplice', 278, (0, 0, 0, 0)), ('clone3', 435, (0, 0)),
                               ('pidfd_open', 434, (1, 0)), ('pidfd_send_signal', 424, (0, 9, 0, 0)),
                               ('shmget', 29, (1234, 4096, 0o1666)), ('msgget', 68, (1234, 0o1666)),
                               ('landlock_create_ruleset', 444, (0, 0, 1)), ('kcmp', 312, (1, 1, 0, 0, 0))):
            print(name, sc(nr, *args))
    """))
    assert_ok(d)
    got = errno_lines(d)
    assert len(got) == 14 and set(got.values()) == {"ENOSYS"}, d


def test_python_no_capabilities_and_no_way_to_gain_them(daemon):
    """No capability in any set, no_new_privs, seccomp mode 2; prctl that
    would raise ambient capabilities, change securebits, set a subreaper or
    parent-death signal, or edit the memory map: EPERM."""
    d = attack_py(daemon, PY_SYSCALL + src("""
        st = dict(l.split(':\\t', 1) for l in open('/proc/self/status').read().splitlines() if ':\\t' in l)
        print(*(st[k].strip() for k in ('CapInh', 'CapPrm', 'CapEff', 'CapBnd', 'CapAmb', 'NoNewPrivs', 'Seccomp')))
        for name, args in (('PR_CAP_AMBIENT_RAISE', (47, 2, 21, 0, 0)), ('PR_SET_SECUREBITS', (28, 0, 0, 0, 0)),
                           ('PR_SET_CHILD_SUBREAPER', (36, 1, 0, 0, 0)), ('PR_SET_PDEATHSIG', (1, 9, 0, 0, 0)),
                           ('PR_SET_MM', (35, 8, 0, 0, 0)), ('PR_SET_DUMPABLE', (4, 1, 0, 0, 0)),
                           ('PR_SET_PTRACER_ANY', (0x59616d61, -1, 0, 0, 0)),
                           ('PR_SET_SECCOMP_strict_hi', (22 | (1 << 32), 1, 0, 0, 0))):
            print(name, sc(157, *args))
        print('PR_GET_NO_NEW_PRIVS', libc.prctl(39, 0, 0, 0, 0))
    """))
    assert_ok(d)
    lines = d["stdout"].splitlines()
    assert lines[0] == "0000000000000000 " * 5 + "1 2", d
    got = errno_lines({"stdout": "\n".join(lines[1:-1])})
    assert len(got) == 8 and set(got.values()) == {"EPERM"}, d
    assert lines[-1] == "PR_GET_NO_NEW_PRIVS 1", d


def test_python_tiocsti_and_other_ioctls_are_refused(daemon):
    """TIOCSTI (push input into a terminal), TIOCLINUX, console and
    block-device ioctls: EPERM, also with junk in the upper 32 bits."""
    d = attack_py(daemon, PY_SYSCALL + src("""
        import os
        fd = os.open('/dev/null', os.O_RDWR)
        for name, req in (('TIOCSTI', 0x5412), ('TIOCSTI_hi', 0x5412 | (1 << 32)), ('TIOCLINUX', 0x541C),
                          ('TIOCSCTTY', 0x540E), ('KDSETMODE', 0x4B3A), ('BLKRRPART', 0x125F),
                          ('FIBMAP', 1), ('TIOCSETD', 0x5423)):
            print(name, sc(16, fd, req, 0))
        print('FIONREAD_allowed', sc(16, fd, 0x541B, 0))
    """))
    assert_ok(d)
    got = errno_lines(d)
    allowed = got.pop("FIONREAD_allowed")
    assert len(got) == 8 and set(got.values()) == {"EPERM"}, d
    assert allowed in ("OK", "ENOTTY", "EFAULT", "EINVAL"), d


def test_python_proc_mem_and_process_vm_cannot_touch_anything_else(daemon):
    """Only the run's own process exists in its /proc; writing its own
    memory through /proc/1/mem is refused or harmless; no other pid."""
    d = attack_py(daemon, src("""
        import os, errno
        for p in ('/proc/2/mem', '/proc/0/mem'):
            try:
                open(p, 'rb'); print(p, 'OPEN')
            except OSError as e:
                print(p, errno.errorcode[e.errno])
        try:
            with open('/proc/1/mem', 'r+b', buffering=0) as f:
                print('/proc/1/mem', 'own')
        except OSError as e:
            print('/proc/1/mem', errno.errorcode[e.errno])
    """))
    assert_ok(d)
    got = errno_lines(d)
    assert (got["/proc/2/mem"], got["/proc/0/mem"]) == ("ENOENT", "ENOENT"), d
    assert got["/proc/1/mem"] in ("own", "EACCES", "EPERM"), d


def test_python_raising_limits_and_priority_is_refused(daemon):
    d = attack_py(daemon, PY_SYSCALL + src("""
        import os, resource, ctypes
        try:
            resource.setrlimit(resource.RLIMIT_NPROC, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
            print('setrlimit RAISED')
        except (OSError, ValueError) as e:
            print('setrlimit', type(e).__name__)
        new = (ctypes.c_ulong * 2)(1 << 40, 1 << 40)
        print('prlimit64', sc(302, 0, 7, ctypes.addressof(new), 0))
        try:
            os.setpriority(os.PRIO_PROCESS, 0, -20); print('nice RAISED')
        except OSError as e:
            print('nice', errno.errorcode[e.errno])
        print('sched_setscheduler', sc(144, 0, 1, ctypes.addressof(ctypes.c_int(99))))
    """))
    assert_ok(d, "setrlimit ValueError\nprlimit64 EPERM\nnice EACCES\nsched_setscheduler ENOSYS\n")


# ------------------------------------------------------------------ Node.js

@pytest.mark.parametrize("name,code,syscall", [
    ("process_setuid", "process.setuid(0)", "setuid"),
    ("process_setgid", "process.setgid(0)", "setgid"),
    ("process_seteuid", "process.seteuid(0)", "setresuid"),
    ("process_setegid", "process.setegid(0)", "setresgid"),
    ("process_setgroups", "process.setgroups([0])", "setgroups"),
    ("process_initgroups", "process.initgroups('root', 0)", "setgroups"),
])
def test_node_identity_changes_stop_the_run(daemon, name, code, syscall):
    d = attack_js(daemon, "console.log('pre');\ntry { " + code + "; } catch (e) { console.log('caught', e.code); }\n"
                  "console.log('PWNED');\n")
    assert_denied(d, syscall, stdout="pre\n")


def test_node_capabilities_priority_and_internal_bindings(daemon):
    d = attack_js(daemon, src("""
        const fs = require('fs'), os = require('os');
        const st = fs.readFileSync('/proc/self/status', 'utf8');
        console.log(st.split('\\n').filter(l => /^(Cap(Inh|Prm|Eff|Bnd|Amb)|NoNewPrivs|Seccomp):/.test(l))
                      .map(l => l.split(/\\s+/)[1]).join(' '));
        try { os.setPriority(0, -20); console.log('nice RAISED'); } catch (e) { console.log('nice', e.info ? e.info.code : e.code); }
        try { process.dlopen({exports: {}}, '/usr/lib/x86_64-linux-gnu/libc.so.6'); console.log('dlopen LOADED'); }
        catch (e) { console.log('dlopen', e.code); }
        let b; try { b = Object.keys(process.binding('fs')).length > 0; } catch (e) { b = e.code; }
        console.log('binding fs', b);
        try { fs.openSync('/proc/1/root/etc/shadow'); console.log('shadow OPEN'); }
        catch (e) { console.log('shadow', e.code); }
    """))
    assert_ok(d)
    lines = d["stdout"].splitlines()
    assert lines[0] == "0000000000000000 " * 5 + "1 2", d
    assert lines[1] == "nice EACCES", d
    assert lines[2] == "dlopen ERR_DLOPEN_DISABLED", d
    assert lines[4] == "shadow ENOENT", d


# ------------------------------------------------------------------ races

def test_python_kill_list_calls_from_many_threads_at_once(daemon):
    """Twenty threads make twenty different kill-list calls at the same
    moment: one of them is named, the run ends, the jailer copes with the
    burst of notifications."""
    names = sorted(KILL_LIST)[:20]
    calls = ",\n".join(f"    lambda: ({KILL_LIST[n]!r}, exec({KILL_LIST[n]!r}))" for n in names)
    d = attack_py(daemon, PY_SYSCALL + src("""
        import threading
        go = threading.Event()
        calls = [
        CALLS
        ]
        def worker(f):
            go.wait()
            f()
        ts = [threading.Thread(target=worker, args=(f,)) for f in calls]
        [t.start() for t in ts]
        print('pre', flush=True)
        go.set()
        [t.join() for t in ts]
        print('PWNED: all calls returned')
    """).replace("CALLS", calls))
    assert (d["exit_code"], d["status"], d["stdout"]) == (-1, "syscall_denied", "pre\n"), d
    named = d["error"].split("syscall '")[1].split("'")[0]
    assert named in names, d
    assert_denied(d, named, stdout="pre\n")


def test_python_kill_list_call_racing_the_exit(daemon):
    """A thread makes a kill-list call while the main thread is ending the
    program: either verdict is fine, the daemon must not trip over it."""
    for _ in range(5):
        d = attack_py(daemon, PY_SYSCALL + src("""
            import threading, os
            threading.Thread(target=lambda: sc(101, 0, 0, 0, 0), daemon=True).start()
            os._exit(0)
        """))
        assert (d["exit_code"], d["status"]) in ((0, "ok"), (-1, "syscall_denied")), d
        if d["exit_code"] == -1:
            assert_denied(d, "ptrace", stdout="")
