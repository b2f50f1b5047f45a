"""Hand-written machine code: the program copies x86 instructions into an
anonymous executable mapping (allowed; files in /tmp cannot be mapped
executable) and makes system calls without libc, so no wrapper, cached pid
or errno convention is in the way. The x86_64 results are raw -errno values;
the i386 (`int 0x80`) and x32 ABIs kill the process with SIGSYS (on a host
whose kernel has no i386 entry, the CPU's SIGSEGV comes first)."""
import signal
import subprocess

import pytest

from attacklib import (PY_MACHINE_CODE, assert_denied, assert_killed_by_signal, assert_ok,
                       attack_py)

EPERM, ENOSYS = -1, -38

X86_64_CASES = {
    # name: (expression, expected value)
    "getpid_runs": ("raw64(39)", 1),  # the code runs: PID 1 of its namespace
    "fork": ("raw64(57)", EPERM),
    "vfork": ("raw64(58)", EPERM),
    "clone_process": ("raw64(56, 17, 0, 0, 0, 0)", EPERM),
    "clone_vm_vfork": ("raw64(56, 0x100 | 0x4000 | 17, 0, 0, 0, 0)", EPERM),
    "clone3": ("raw64(435, 0, 0)", ENOSYS),
    "execve_bin_sh": ("raw64(59, addr(b'/bin/sh'), argv(b'sh', b'-c', b'echo PWNED'), 0)", EPERM),
    "execveat_absolute": ("raw64(322, -100, addr(b'/bin/sh'), argv(b'sh'), 0, 0x1000)", EPERM),
    "socket_netlink": ("raw64(41, 16, 3, 0)", EPERM),
    "socket_packet": ("raw64(41, 17, 3, 0x0300)", EPERM),
    "kill_all": ("raw64(62, -1, 9)", EPERM),
    "io_uring_setup": ("raw64(425, 8, addr(bytes(120)))", ENOSYS),
    "memfd_create": ("raw64(319, addr(b'x'), 0)", ENOSYS),
}

HELPERS = """
def addr(b):
    buf = ctypes.create_string_buffer(b)
    _keep.append(buf)
    return ctypes.addressof(buf)
def argv(*items):
    arr = (ctypes.c_char_p * (len(items) + 1))(*items, None)
    _keep.append(arr)
    return ctypes.addressof(arr)
_keep = []
"""


@pytest.mark.parametrize("name", sorted(X86_64_CASES))
def test_raw_x86_64_syscalls_get_the_policy_answer(daemon, name):
    expr, want = X86_64_CASES[name]
    d = attack_py(daemon, PY_MACHINE_CODE + HELPERS + f"print({expr})\nprint('alive')\n")
    assert_ok(d, f"{want}\nalive\n")


@pytest.mark.parametrize("name,expr,syscall", [
    ("ptrace_attach", "raw64(101, 16, 1, 0, 0)", "ptrace"),
    ("mount", "raw64(165, 0, 0, 0, 0, 0)", "mount"),
    ("unshare_newuser", "raw64(272, 0x10000000)", "unshare"),
    ("setuid_0", "raw64(105, 0)", "setuid"),
    ("bpf", "raw64(321, 0, 0, 0)", "bpf"),
    ("init_module", "raw64(175, 0, 0, 0)", "init_module"),
])
def test_raw_kill_list_syscalls_stop_the_run(daemon, name, expr, syscall):
    d = attack_py(daemon, PY_MACHINE_CODE + f"print('pre', flush=True)\nprint({expr})\nprint('after')\n")
    assert_denied(d, syscall, stdout="pre\n")


@pytest.mark.parametrize("name,expr", [
    ("i386_getpid", "raw32(20)"),
    ("i386_fork", "raw32(2)"),
    ("i386_execve", "raw32(11, 0, 0, 0)"),
    ("i386_setuid", "raw32(23, 0)"),
    ("x32_getpid", "raw64(39 | 0x40000000)"),
    ("x32_execve", "raw64(520 | 0x40000000, 0, 0, 0)"),
])
def test_foreign_architecture_syscalls_kill_with_sigsys(daemon, name, expr):
    """The filter kills a run that uses another architecture's syscall
    entry (SIGSYS). Some hosts (a kernel booted with ia32_emulation=0, some
    hypervisors) have no `int 0x80` entry at all: there the CPU faults
    before the filter is asked (SIGSEGV), which this host check tells apart;
    either way the call never runs."""
    d = attack_py(daemon, PY_MACHINE_CODE + f"print('pre', flush=True)\nprint({expr})\nprint('after')\n")
    assert d["exit_code"] == -1, d
    want = "SIGSYS" if name.startswith("x32_") or host_has_int80() else "SIGSEGV"
    assert_killed_by_signal(d, want, stdout="pre\n")


_INT80 = []


def host_has_int80():
    """Whether this host's kernel serves the i386 syscall entry: a getpid
    through `int 0x80` in a plain process of the test's own (harmless: it
    only asks for its pid), which either answers or dies of SIGSEGV."""
    if not _INT80:
        r = subprocess.run(["/usr/bin/python3", "-c", PY_MACHINE_CODE + "import os\n"
                            "print(raw32(20) == os.getpid())\n"],
                           capture_output=True, text=True, timeout=30)
        assert r.returncode in (0, -signal.SIGSEGV), (r.returncode, r.stderr)
        _INT80.append(r.returncode == 0 and r.stdout.strip() == "True")
    return _INT80[0]
