"""Process creation by every route, and execve/execveat of anything.

Python: fork, vfork, clone of a process and execve/execveat fail with EPERM
(the program sees PermissionError and may go on); clone3 is ENOSYS (glibc
falls back to clone). Node.js: child_process, whatever the route, stops the
run and names 'clone'. Hand-written machine code is in
test_attack_machine_code.py. After every case the autouse after-check
proves the daemon serves and nothing is left behind.
"""
import pytest

from attacklib import (PY_SYSCALL, assert_denied, assert_exception, assert_not_printed,
                       assert_ok, attack_js, attack_py, src)

EPERM_MSG = "[Errno 1] Operation not permitted"

# ------------------------------------------------------------------ Python
# Each program tries to start a process and, should that work, to prove it
# (the child prints PWNED). The verdict: the uncaught PermissionError.

PY_UNCAUGHT = {
    "os_fork": "import os\nif os.fork() == 0:\n    print('PWNED child')\n",
    "os_fork_bomb": "import os\nwhile True:\n    os.fork()\n",
    "subprocess_run": "import subprocess\nsubprocess.run(['/bin/sh', '-c', 'echo PWNED'])\n",
    "subprocess_shell": "import subprocess\nprint(subprocess.check_output('echo PWNED', shell=True))\n",
    "subprocess_popen_detached": src("""
        import subprocess
        subprocess.Popen(['/bin/sleep', '1000'], start_new_session=True)
        print('PWNED orphan')
    """),
    "os_popen": "import os\nprint(os.popen('echo PWNED').read())\n",
    "posix_spawn": "import os\nos.posix_spawn('/bin/sh', ['sh', '-c', 'echo PWNED'], {})\n",
    "posix_spawnp": "import os\nos.posix_spawnp('sh', ['sh', '-c', 'echo PWNED'], {})\n",
    "multiprocessing": src("""
        import multiprocessing as mp
        p = mp.Process(target=print, args=('PWNED child',))
        p.start(); p.join()
    """),
    "os_execv_python": "import os\nos.execv('/usr/bin/python3', ['python3', '-c', 'print(\"PWNED\")'])\n",
    "os_execve_sh": "import os\nos.execve('/bin/sh', ['sh', '-c', 'echo PWNED'], {})\n",
    "os_execl_env": "import os\nos.execl('/usr/bin/env', 'env')\n",
    "fexecve_fd": src("""
        import os
        fd = os.open('/usr/bin/python3', os.O_RDONLY)
        os.execve(fd, ['python3', '-c', 'print("PWNED")'], {})
    """),
    "exec_script_from_tmp": src("""
        import os
        with open('/tmp/x.sh', 'w') as f:
            f.write('#!/bin/sh\\necho PWNED\\n')
        os.chmod('/tmp/x.sh', 0o755)
        os.execv('/tmp/x.sh', ['x.sh'])
    """),
    "exec_elf_copied_to_tmp": src("""
        import os, shutil
        shutil.copy('/usr/bin/python3', '/tmp/py')
        os.chmod('/tmp/py', 0o755)
        os.execv('/tmp/py', ['py', '-c', 'print("PWNED")'])
    """),
}


@pytest.mark.parametrize("name", sorted(PY_UNCAUGHT))
def test_python_process_creation_and_exec_fail_with_eperm(daemon, name):
    d = attack_py(daemon, PY_UNCAUGHT[name])
    assert_exception(d, "PermissionError", EPERM_MSG)
    assert_not_printed(d)


@pytest.mark.parametrize("name,flags,expect", [
    ("clone_sigchld", 17, "EPERM"),                                  # plain fork
    ("clone_vm_vfork", 0x100 | 0x4000 | 17, "EPERM"),                # posix_spawn's way
    ("clone_newuser", 0x10000000 | 17, "EPERM"),
    ("clone_newpid_newns", 0x20000000 | 0x20000 | 17, "EPERM"),
    ("clone_thread_flag_in_high_bits", (0x10000 << 32) | 17, "EPERM"),  # kernel uses low 32 bits
    ("clone_thread_with_newns", 0x10000 | 0x800 | 0x100 | 0x20000, "ENOSYS"),
])
def test_python_raw_clone_of_a_process_is_refused(daemon, name, flags, expect):
    d = attack_py(daemon, PY_SYSCALL + f"print(sc(56, {flags}, 0, 0, 0, 0))\nprint('alive')\n")
    assert_ok(d, f"{expect}\nalive\n")


def test_python_libc_fork_vfork_clone3_posix_spawn_system(daemon):
    """glibc's own entry points: fork() and vfork() return -1/EPERM,
    clone3 is ENOSYS, posix_spawn() returns EPERM, system() reports 127."""
    d = attack_py(daemon, PY_SYSCALL + src("""
        pid = ctypes.c_int(0)
        argv = (ctypes.c_char_p * 4)(b'sh', b'-c', b'echo PWNED', None)
        ctypes.set_errno(0); r = libc.fork(); print('fork', r, errno.errorcode[ctypes.get_errno()])
        ctypes.set_errno(0); r = libc.vfork(); print('vfork', r, errno.errorcode[ctypes.get_errno()])
        print('clone3', sc(435, 0, 0))
        print('posix_spawn', errno.errorcode[libc.posix_spawn(ctypes.byref(pid), b'/bin/sh', None, None, argv, None)], pid.value)
        print('system', libc.system(b'echo PWNED') >> 8)
        import os
        print('os.system', os.system('echo PWNED') >> 8)
    """))
    assert_ok(d, "fork -1 EPERM\nvfork -1 EPERM\nclone3 ENOSYS\nposix_spawn EPERM 0\n"
                 "system 127\nos.system 127\n")


def test_python_execveat_of_anything_is_refused(daemon):
    """execveat by fd (AT_EMPTY_PATH), by absolute path with any dirfd (the
    kernel ignores dirfd then), relative to a directory fd: all EPERM."""
    d = attack_py(daemon, PY_SYSCALL + src("""
        import os
        sh = ctypes.create_string_buffer(b'/bin/sh')
        empty = ctypes.create_string_buffer(b'')
        rel = ctypes.create_string_buffer(b'python3')
        argv = (ctypes.c_char_p * 4)(b'sh', b'-c', b'echo PWNED', None)
        envp = (ctypes.c_char_p * 1)(None)
        a, e = ctypes.addressof(argv), ctypes.addressof(envp)
        fd = os.open('/usr/bin/python3', os.O_RDONLY)
        dfd = os.open('/usr/bin', os.O_RDONLY | os.O_DIRECTORY)
        print('by_fd', sc(322, fd, ctypes.addressof(empty), a, e, 0x1000))
        print('absolute_fd1000', sc(322, 1000, ctypes.addressof(sh), a, e, 0x1000))
        print('absolute_atfdcwd', sc(322, -100, ctypes.addressof(sh), a, e, 0))
        print('relative_dirfd', sc(322, dfd, ctypes.addressof(rel), a, e, 0))
        print('execve', sc(59, ctypes.addressof(sh), a, e))
    """))
    assert_ok(d, "by_fd EPERM\nabsolute_fd1000 EPERM\nabsolute_atfdcwd EPERM\n"
                 "relative_dirfd EPERM\nexecve EPERM\n")


def test_python_execve_from_many_threads(daemon):
    """Each thread's first execve is refused too (cold runs route execve to
    the jailer, which continued only the interpreter's own)."""
    d = attack_py(daemon, src("""
        import os, threading
        out = []
        def go():
            try:
                os.execv('/bin/sh', ['sh', '-c', 'echo PWNED'])
            except OSError as e:
                out.append(e.errno)
        ts = [threading.Thread(target=go) for _ in range(16)]
        [t.start() for t in ts]; [t.join() for t in ts]
        print(sorted(set(out)), len(out))
    """))
    assert_ok(d, "[1] 16\n")


def test_python_other_process_apis_find_nothing_to_run(daemon):
    """Routes that fail before the fork: the pool needs /dev/shm semaphores,
    a pty needs /dev/ptmx. Nothing starts either way."""
    d = attack_py(daemon, src("""
        import os, pty, concurrent.futures as cf
        for name, f in (('forkpty', os.forkpty), ('pty.spawn', lambda: pty.spawn('/bin/sh')),
                        ('pool', lambda: cf.ProcessPoolExecutor(2).submit(print, 'PWNED').result())):
            try:
                f()
                print(name, 'STARTED')
            except OSError as e:
                print(name, type(e).__name__)
    """))
    assert_ok(d, "forkpty FileNotFoundError\npty.spawn OSError\npool FileNotFoundError\n")


def test_python_fork_in_a_thread_fails_too(daemon):
    d = attack_py(daemon, src("""
        import os, threading, warnings
        # (Python 3.12+ warns of a fork in a threaded process before trying)
        warnings.simplefilter('ignore', DeprecationWarning)
        out = []
        def go():
            try:
                os.fork(); out.append('forked')
            except OSError as e:
                out.append(e.errno)
        ts = [threading.Thread(target=go) for _ in range(8)]
        [t.start() for t in ts]; [t.join() for t in ts]
        print(out)
    """))
    assert_ok(d, "[1, 1, 1, 1, 1, 1, 1, 1]\n")


# ------------------------------------------------------------------ Node.js
# Every child_process route ends in clone(): the run is stopped and named.

JS_CASES = {
    "spawnSync": "require('child_process').spawnSync('/bin/sh', ['-c', 'echo PWNED'], {stdio: 'inherit'});",
    "execSync": "console.log(String(require('child_process').execSync('echo PWNED')));",
    "exec_async": "require('child_process').exec('echo PWNED', (e, o) => console.log(o));",
    "execFile": "require('child_process').execFile('/bin/echo', ['PWNED'], (e, o) => console.log(o));",
    "fork_module": "require('fs').writeFileSync('/tmp/c.js', 'console.log(\"PWNED\")');\n"
                   "require('child_process').fork('/tmp/c.js');",
    "spawn_detached_orphan": "const c = require('child_process').spawn('/bin/sleep', ['1000'], "
                             "{detached: true, stdio: 'ignore'});\nc.unref();",
    "spawn_shell_option": "require('child_process').spawn('echo PWNED', {shell: true, stdio: 'inherit'});",
    "process_wrap_binding": src("""
        const { Process } = process.binding('process_wrap');
        const p = new Process(); p.onexit = () => {};
        p.spawn({file: '/bin/sh', args: ['sh', '-c', 'echo PWNED'], envPairs: [],
                 stdio: [{type: 'ignore'}, {type: 'ignore'}, {type: 'ignore'}]});
    """),
    "spawn_sync_binding": src("""
        process.binding('spawn_sync').spawn({file: '/bin/sh', args: ['sh', '-c', 'echo PWNED'],
            envPairs: [], stdio: [{type: 'pipe', readable: true}, {type: 'pipe', writable: true},
                                  {type: 'pipe', writable: true}]});
    """),
    "worker_thread_execSync": src("""
        const { Worker } = require('worker_threads');
        new Worker("require('child_process').execSync('echo PWNED')", { eval: true });
        setTimeout(() => {}, 3000);
    """),
    "vm_escape_execSync": src("""
        const p = require('vm').runInNewContext('this.constructor.constructor("return process")()');
        p.mainModule.require('child_process').execSync('echo PWNED');
    """),
    "caught_and_retried": src("""
        for (let i = 0; i < 100; i++) {
            try { require('child_process').execSync('echo PWNED'); } catch (e) {}
        }
    """),
}


@pytest.mark.parametrize("name", sorted(JS_CASES))
def test_node_child_process_stops_the_run(daemon, name):
    d = attack_js(daemon, "console.log('before');\n" + JS_CASES[name] + "\nconsole.log('after');\n")
    # the spawn happens inside the call, so 'after' is never printed, except
    # where the spawning code runs later in a worker thread
    assert_denied(d, "clone", stdout="before\nafter\n" if "worker" in name else "before\n")
    assert_not_printed(d)
