"""Interpreter tricks: overriding builtins and the globals the runner's
bootstrap uses, poisoning preloaded modules for the next run (warm Python
runs share the zygote's modules), forging the sandbox's verdict,
process.binding, vm escapes, inspector sessions, native code from /tmp."""
from conftest import scaled
from attacklib import (assert_exception, assert_killed_by_signal, assert_memory_limit, assert_ok,
                       assert_timeout, attack_js, attack_py, program_error, src)

POISON_PY = src("""
    import builtins, sys, os, json, re, random, base64, collections
    builtins.print = lambda *a, **k: sys.stdout.write('POISONED\\n')
    builtins.len = lambda x: -1
    builtins.open = None
    json.dumps = lambda *a, **k: 'POISONED'
    json.loads = lambda *a, **k: 'POISONED'
    re.compile = None
    random.seed(12345)
    base64.b64encode = lambda b: b'POISONED'
    collections.OrderedDict = dict
    sys.modules['requests'] = None
    sys.modules['jinja2'] = None
    sys.path.insert(0, '/tmp')
    sys.excepthook = lambda *a: None
    os.environ['POISON'] = '1'
    os.environ['PYTHONPATH'] = '/tmp'
    sys.stdout.write('planted\\n')
""")

CHECK_PY = src("""
    import json, re, os, sys, base64, random, collections, builtins
    ok = [print is builtins.print, len('abc') == 3, open is builtins.open,
          json.dumps({'a': 1}) == '{"a": 1}', re.compile('a+').match('aa') is not None,
          base64.b64encode(b'hi') == b'aGk=', collections.OrderedDict is not dict,
          'POISON' not in os.environ, 'PYTHONPATH' not in os.environ, '/tmp' not in sys.path,
          sys.excepthook is sys.__excepthook__]
    import requests, jinja2
    ok.append(requests.__name__ == 'requests' and jinja2.__name__ == 'jinja2')
    print(all(ok), ok.index(False) if not all(ok) else '')
""")


def test_python_poisoned_builtins_and_modules_do_not_reach_the_next_run(daemon):
    d = attack_py(daemon, POISON_PY)
    assert_ok(d, "planted\n")
    seeds = set()
    for _ in range(8):  # more runs than the warm pool holds
        d = attack_py(daemon, CHECK_PY + "print(random.random())\n")
        assert_ok(d)
        first, second = d["stdout"].splitlines()
        assert first == "True ", d
        seeds.add(second)
    assert len(seeds) == 8, "random is not re-seeded per run"


def test_python_runner_globals_overridden_cannot_fake_or_break_the_verdict(daemon):
    """The program replaces what the bootstrap calls at exit (os._exit via a
    fake os module, sys.excepthook, print) and then fails. It only changes
    its own verdict, never into a sandbox one, and the run still ends (warm:
    exit 1; cold: the interpreter's own exit path then gives 0 -- as if the
    program had caught the error itself)."""
    d = attack_py(daemon, src("""
        import sys, types, builtins
        fake = types.ModuleType('os')
        fake._exit = lambda code: None
        sys.modules['os'] = fake
        sys.excepthook = lambda *a: None
        builtins.print = lambda *a, **k: None
        raise ValueError('boom')
    """))
    assert (d["exit_code"], d["status"]) in ((1, "runtime_error"), (0, "ok")), d
    assert d["error"] == (program_error(1, d["stderr"]) if d["exit_code"] else ""), d
    assert d["wall_ms"] < scaled(2) * 1000 and d["truncated"] is False, d


def test_python_forged_sandbox_messages_are_just_stderr(daemon):
    """A program that prints the sandbox's own reason lines cannot change
    the status or pass for a sandbox kill."""
    d = attack_py(daemon, src("""
        import sys
        sys.stderr.write("error: operation not permitted: syscall 'ptrace' is not allowed\\n"
                         "process exited with code -1\\nerror: timeout\\n")
        sys.exit(255)
    """))
    assert (d["exit_code"], d["status"], d["truncated"]) == (255, "runtime_error", False), d
    assert d["error"] == program_error(255, d["stderr"]), d


def test_python_threading_shutdown_hang_is_bounded(tight):
    """The bootstrap joins threads through threading._shutdown: replacing it
    with a hang only runs into the deadline."""
    d = attack_py(tight, "import threading, time\nthreading._shutdown = lambda: time.sleep(3600)\nprint('x')\n")
    assert_timeout(d, stdout="x\n")


def test_python_interpreter_crash_by_recursion_is_contained(tight):
    d = attack_py(tight, src("""
        import sys
        sys.setrecursionlimit(10 ** 8)
        def f(n):
            return f(n + 1) + 1
        print('start', flush=True)
        f(0)
    """))
    assert_memory_limit(d, stdout="start\n")


def test_python_pythoninspect_and_startup_variables_do_nothing(daemon):
    d = attack_py(daemon, src("""
        import os
        os.environ.update(PYTHONINSPECT='1', PYTHONSTARTUP='/tmp/s.py', PYTHONPATH='/tmp')
        open('/tmp/s.py', 'w').write('print("PWNED")')
        print('done')
    """))
    assert_ok(d, "done\n")


def test_python_code_pipe_and_bootstrap_are_gone(daemon):
    """The code arrived on fd 3, which the bootstrap closed; its helper
    functions are not in the program's globals."""
    d = attack_py(daemon, src("""
        import os, errno
        try:
            os.fstat(3); print('fd3 OPEN')
        except OSError as e:
            print('fd3', errno.errorcode[e.errno])
        try:
            open('/proc/self/fd/3', 'rb'); print('proc fd3 OPEN')
        except OSError as e:
            print('proc fd3', errno.errorcode[e.errno])
        print(sorted(k for k in globals() if k.startswith('_lockbox')), __name__)
    """))
    assert_ok(d, "fd3 EBADF\nproc fd3 ENOENT\n[] __main__\n")


def test_python_native_library_from_tmp_via_ctypes_is_refused(daemon):
    d = attack_py(daemon, src("""
        import ctypes, shutil
        shutil.copy('/usr/lib/x86_64-linux-gnu/libc.so.6', '/tmp/libevil.so')
        ctypes.CDLL('/tmp/libevil.so')
        print('PWNED loaded')
    """))
    assert_exception(d, "OSError", "failed to map segment from shared object")


# ------------------------------------------------------------------ Node.js

POISON_JS = src("""
    Object.prototype.polluted = 'POISONED';
    Array.prototype.map = () => 'POISONED';
    JSON.stringify = () => 'POISONED';
    globalThis.console = { log() {} };
    process.env.NODE_OPTIONS = '--require /tmp/evil.js';
    require('fs').writeFileSync('/tmp/evil.js', 'console.log("PWNED")');
    const Module = require('module');
    Module.prototype._compile = function () { return 'POISONED'; };
    Module._load = () => 'POISONED';
    process.stdout.write('planted\\n');
""")

CHECK_JS = src("""
    const ok = [({}).polluted === undefined, [1, 2].map(x => x * 2).join() === '2,4',
                JSON.stringify({a: 1}) === '{"a":1}', !('NODE_OPTIONS' in process.env),
                typeof require('path').join === 'function'];
    console.log(ok.every(Boolean), ok.indexOf(false));
""")


def test_node_poisoned_globals_and_loader_do_not_reach_the_next_run(daemon):
    d = attack_js(daemon, POISON_JS)
    assert_ok(d, "planted\n")
    for _ in range(5):
        d = attack_js(daemon, CHECK_JS)
        assert_ok(d, "true -1\n")


def test_node_overriding_the_exit_path_keeps_the_verdict(daemon):
    """The bootstrap reports a clean exit through fs.writeSync on its exit
    pipe; the program breaks that, and process.exit, then fails."""
    d = attack_js(daemon, src("""
        const fs = require('fs');
        fs.writeSync = () => { throw new Error('nope'); };
        process.exit = () => {};
        process.reallyExit = () => {};
        process.exitCode = 3;
        console.log('x');
    """))
    assert (d["stdout"], d["exit_code"], d["status"]) == ("x\n", 3, "runtime_error"), d
    assert d["error"] == program_error(3, d["stderr"]), d


def test_node_vm_escape_and_inspector_reach_only_the_jailed_process(daemon):
    d = attack_js(daemon, src("""
        const vm = require('vm');
        const p = vm.runInNewContext('this.constructor.constructor("return process")()');
        const s = new (require('inspector').Session)();
        s.connect();
        s.post('Runtime.evaluate', { expression: 'process.pid + " " + process.getuid()' }, (e, r) => {
            console.log(p === process, p.pid, p.ppid);
            console.log(r.result.value === process.pid + ' ' + process.getuid(), Object.keys(p.env).sort().join());
        });
    """))
    assert_ok(d, "true 1 0\ntrue HOME,LANG,PATH,TMPDIR\n")


def test_node_native_library_from_tmp_is_refused(daemon):
    d = attack_js(daemon, src("""
        const fs = require('fs');
        fs.copyFileSync('/usr/lib/x86_64-linux-gnu/libc.so.6', '/tmp/evil.node');
        const res = [];
        for (const f of [() => require('/tmp/evil.node'), () => process.dlopen({exports: {}}, '/tmp/evil.node'),
                         () => process.binding('fs') && require('module')._extensions['.node']({exports: {}}, '/tmp/evil.node')])
            try { f(); res.push('LOADED'); } catch (e) { res.push(e.code); }
        console.log(res.join(' '));
    """))
    assert_ok(d, "ERR_DLOPEN_DISABLED ERR_DLOPEN_DISABLED ERR_DLOPEN_DISABLED\n")


def test_node_internal_binding_misuse_crashes_only_the_run(daemon):
    """Calling an internal binding with bad arguments trips a native
    assertion in Node.js 20: the run dies (abort, seen as SIGSEGV in a PID
    1), the daemon does not care. Node.js 18 (Debian 12's own package, in
    the bookworm image) does not check them and opens the jail's own
    /etc/passwd: the run ends normally, which is as harmless."""
    d = attack_js(daemon, "console.log('start');\nprocess.binding('fs').open('/etc/passwd', 0, 0, undefined, {});\n")
    major = int(attack_js(daemon, "console.log(process.versions.node.split('.')[0])")["stdout"])
    if major < 20:
        assert (d["status"], d["stdout"]) == ("ok", "start\n"), d
        return
    assert_killed_by_signal(d, "SIGSEGV", stdout="start\n")
    assert d["exit_code"] == -1


def test_node_v8_natives_breakpoint_is_contained(daemon):
    d = attack_js(daemon, "require('v8').setFlagsFromString('--allow-natives-syntax');\n"
                          "console.log('start');\neval('%SystemBreak()');\n")
    assert_killed_by_signal(d, "SIGTRAP", stdout="start\n")
