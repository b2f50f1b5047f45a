"""Node.js runs (`language: nodejs`): the code is a CommonJS module named
<code> run by /usr/bin/node behind the same jail as Python (docs/SECURITY.md). Features a Dify code node uses work; process creation stops the
run and names the call; native code cannot be loaded; the jail, the
network switch and the limits behave as for Python."""
import base64
import gzip
import hashlib
import json
import os
import re
import shutil
import textwrap
import threading
import time

import pytest

from conftest import KEY, scaled

KILL_RE = re.compile(r"process exited with code -1\n"
                     r"error: operation not permitted: syscall '(clone|fork|vfork)' is not allowed\n")


def js(src):
    return textwrap.dedent(src).lstrip("\n")


def node(d, src, **fields):
    """Run `src` as Node.js on daemon `d`; return `data` of a successful envelope."""
    return d.run_data(js(src), language="nodejs", **fields)


def assert_ok(d, stdout):
    assert (d["stdout"], d["stderr"], d["error"], d["exit_code"], d["status"]) == \
        (stdout, "", "", 0, "ok"), d


def assert_process_creation_stopped(d, stdout=""):
    """The run was stopped by the syscall policy at its process creation."""
    assert d["exit_code"] == -1, d
    assert d["status"] == "syscall_denied", d
    assert d["stdout"] == stdout, d
    m = KILL_RE.match(d["error"])
    assert m, d
    assert d["error"] == m.group(0) + d["stderr"], d
    assert "operation not permitted" in d["error"] and "syscall '" in d["error"]


# ------------------------------------------------------------------ basics

def test_base64_via_buffer(daemon):
    text = "héllo wörld ✓ 中文 😀"
    enc = base64.b64encode(text.encode()).decode()
    d = node(daemon, f"""
        const s = {json.dumps(text)};
        const b64 = Buffer.from(s, 'utf8').toString('base64');
        console.log(b64);
        console.log(Buffer.from({json.dumps(enc)}, 'base64').toString('utf-8'));
        console.log(Buffer.byteLength(s), s.length);
    """)
    assert_ok(d, f"{enc}\n{text}\n{len(text.encode())} {len(text.encode('utf-16-le')) // 2}\n")


def test_json_stringify_round_trip(daemon):
    obj = {"s": "Grüße, 世界 🎉", "n": [1, -2, 3.5, 1e21, 0], "b": [True, False], "z": None,
           "nested": {"list": [[], {}, [{"k": "v"}]], "quote": "a\"b\\c\n\t"}}
    d = node(daemon, f"""
        const obj = {json.dumps(obj)};
        const again = JSON.parse(JSON.stringify(obj));
        console.log(JSON.stringify(again));
        console.log(JSON.stringify(again) === JSON.stringify(obj));
    """)
    first, second = d["stdout"].split("\n")[:2]
    assert json.loads(first) == obj, d
    assert second == "true", d
    assert d["stdout"] == first + "\ntrue\n" and d["exit_code"] == 0 and d["error"] == ""


def test_console_error_goes_to_stderr(daemon):
    d = node(daemon, """
        console.log('to stdout');
        console.error('to stderr');
        console.warn('warned');
        process.stderr.write('raw\\n');
    """)
    assert d["stdout"] == "to stdout\n", d
    assert d["stderr"] == "to stderr\nwarned\nraw\n", d
    assert (d["error"], d["exit_code"], d["status"]) == ("", 0, "ok"), d


def test_uncaught_throw(daemon):
    d = node(daemon, """
        console.log('before');
        throw new Error("bad input");
    """)
    assert d["stdout"] == "before\n", d
    assert "Error: bad input" in d["stderr"], d
    assert "<code>:2" in d["stderr"], d  # the module is named <code>
    assert d["exit_code"] == 1 and d["exit_code"] != 0, d
    assert d["status"] == "runtime_error", d
    assert d["error"] == "process exited with code 1\n" + d["stderr"], d


def test_unhandled_rejection_fails_the_run(daemon):
    d = node(daemon, "Promise.reject(new Error('later'));")
    assert d["exit_code"] == 1, d
    assert "Error: later" in d["stderr"], d
    assert d["error"] == "process exited with code 1\n" + d["stderr"]


def test_process_exit_code(daemon):
    d = node(daemon, """
        console.log('bye');
        process.exit(5);
        console.log('not reached');
    """)
    assert (d["stdout"], d["stderr"], d["exit_code"]) == ("bye\n", "", 5), d
    assert d["error"] == "process exited with code 5", d
    assert d["status"] == "runtime_error", d


def test_commonjs_module_globals(daemon):
    d = node(daemon, """
        console.log(typeof require, typeof module, typeof exports, module.exports === exports);
        console.log(__filename, require.main === module, process.cwd());
        console.log(typeof setTimeout, typeof setImmediate, typeof queueMicrotask, typeof TextEncoder);
    """)
    assert_ok(d, "function object object true\n<code> true /tmp\nfunction function function function\n")


# ------------------------------------------------------------ core modules

CORE_MODULE_CASES = {
    "fs_in_tmp": ("""
        const fs = require('fs');
        fs.writeFileSync('/tmp/a.txt', 'hello');
        fs.appendFileSync('/tmp/a.txt', ' world');
        fs.mkdirSync('/tmp/dir/sub', {recursive: true});
        fs.writeFileSync('/tmp/dir/sub/b.json', JSON.stringify({x: 1}));
        console.log(fs.readFileSync('/tmp/a.txt', 'utf8'), fs.statSync('/tmp/a.txt').size);
        console.log(JSON.parse(fs.readFileSync('/tmp/dir/sub/b.json')).x, fs.readdirSync('/tmp').sort().join(','));
        fs.unlinkSync('/tmp/a.txt');
        console.log(fs.existsSync('/tmp/a.txt'));
        fs.promises.readFile('/tmp/dir/sub/b.json', 'utf8').then(t => console.log('async', t));
    """, 'hello world 11\n1 a.txt,dir\nfalse\nasync {"x":1}\n'),
    "path": ("""
        const path = require('path');
        console.log(path.join('/a', 'b', '../c', 'd.txt'), path.basename('/x/y.tar.gz', '.gz'),
                    path.extname('f.js'), path.resolve('rel'), path.sep);
    """, "/a/c/d.txt y.tar .js /tmp/rel /\n"),
    "crypto": ("""
        const crypto = require('crypto');
        const r = crypto.randomBytes(16);
        console.log(r.length, r.toString('hex').length, crypto.randomBytes(16).equals(r));
        console.log(crypto.createHash('sha256').update('abc').digest('hex'));
        console.log(crypto.createHash('md5').update('中文', 'utf8').digest('base64'));
        console.log(crypto.createHmac('sha1', 'key').update('msg').digest('hex'));
        console.log(/^[0-9a-f-]{36}$/.test(crypto.randomUUID()));
    """, "16 32 false\n"
         f"{hashlib.sha256(b'abc').hexdigest()}\n"
         f"{base64.b64encode(hashlib.md5('中文'.encode()).digest()).decode()}\n"
         f"{__import__('hmac').new(b'key', b'msg', 'sha1').hexdigest()}\n"
         "true\n"),
    "zlib": ("""
        const zlib = require('zlib');
        const src = Buffer.from('lockbox '.repeat(1000));
        const gz = zlib.gzipSync(src);
        console.log(gz.length < 200, zlib.gunzipSync(gz).equals(src));
        console.log(zlib.inflateSync(zlib.deflateSync(src)).toString().length);
        console.log(zlib.gzipSync(Buffer.from('payload from node')).toString('base64'));
    """, None),
    "util": ("""
        const util = require('util');
        console.log(util.format('%s=%d %j', 'a', 5, {k: [1]}));
        console.log(util.inspect({a: [1, 2], b: {c: 'd'}}));
        console.log(util.isDeepStrictEqual({a: [1]}, {a: [1]}), util.types.isPromise(Promise.resolve()));
        const f = util.promisify((x, cb) => cb(null, x * 2));
        f(21).then(v => console.log('promisified', v));
    """, "a=5 {\"k\":[1]}\n{ a: [ 1, 2 ], b: { c: 'd' } }\ntrue true\npromisified 42\n"),
    "events": ("""
        const EventEmitter = require('events');
        const e = new EventEmitter();
        const seen = [];
        e.on('x', v => seen.push('a' + v));
        e.once('x', v => seen.push('b' + v));
        e.prependListener('x', v => seen.push('c' + v));
        e.emit('x', 1); e.emit('x', 2);
        console.log(seen.join(','), e.listenerCount('x'));
        EventEmitter.once(e, 'y').then(([v]) => console.log('once', v));
        e.emit('y', 'done');
    """, "c1,a1,b1,c2,a2 2\nonce done\n"),
    "url": ("""
        const url = require('url');
        const u = new URL('https://user:pw@example.com:8080/p/a%20b?x=1&y=%E4%B8%AD#frag');
        console.log(u.hostname, u.port, u.pathname, u.searchParams.get('y'), u.hash, u.username);
        const q = new URLSearchParams({a: '1', b: 'two words'});
        console.log(q.toString(), url.format({protocol: 'http', host: 'h', pathname: '/p'}));
        console.log(url.fileURLToPath('file:///tmp/x'), require('querystring').parse('a=1&a=2').a.join('+'));
    """, "example.com 8080 /p/a%20b 中 #frag user\na=1&b=two+words http://h/p\n/tmp/x 1+2\n"),
    "os": ("""
        const os = require('os');
        console.log(os.platform(), os.tmpdir(), os.homedir(), JSON.stringify(os.EOL));
        console.log(os.hostname(), os.userInfo().username, os.userInfo().uid === process.getuid());
        console.log(os.totalmem() > 0, typeof os.arch(), typeof os.release());
    """, "linux /tmp /tmp \"\\n\"\nsandbox sandbox true\ntrue string string\n"),
}


@pytest.mark.parametrize("name", sorted(CORE_MODULE_CASES))
def test_core_modules(daemon, name):
    src, expected = CORE_MODULE_CASES[name]
    d = node(daemon, src)
    if name == "zlib":
        lines = d["stdout"].split("\n")
        assert lines[:2] == ["true true", "8000"], d
        assert gzip.decompress(base64.b64decode(lines[2])) == b"payload from node", d
        expected = "\n".join(lines[:3]) + "\n"
    assert_ok(d, expected)


def test_timers_ordering(daemon):
    d = node(daemon, """
        const out = [];
        // 40 ms apart: the order holds even if these lines run slowly
        setTimeout(() => out.push('t120'), 120);
        setTimeout(() => out.push('t40'), 40);
        setTimeout(() => out.push('t80'), 80);
        Promise.resolve().then(() => out.push('micro'));
        process.nextTick(() => out.push('tick'));
        queueMicrotask(() => out.push('micro2'));
        let n = 0;
        const iv = setInterval(() => {
            out.push('iv' + (++n));
            if (n === 3) { clearInterval(iv); setImmediate(() => console.log(out.join(' '))); }
        }, 200);
        const cancelled = setTimeout(() => out.push('never'), 5);
        clearTimeout(cancelled);
        out.push('sync');
    """)
    assert_ok(d, "sync tick micro micro2 t40 t80 t120 iv1 iv2 iv3\n")


def test_promises_and_async_await(daemon):
    d = node(daemon, """
        const { setTimeout: sleep } = require('timers/promises');
        async function work(x, ms) { await sleep(ms); return x * 2; }
        async function fails() { await sleep(1); throw new Error('inner'); }
        (async () => {
            const all = await Promise.all([work(1, 30), work(2, 10), work(3, 20)]);
            console.log('all', all.join(','));
            const race = await Promise.race([work(10, 50), work(20, 5)]);
            console.log('race', race);
            try { await fails(); } catch (e) { console.log('caught', e.message); }
            const settled = await Promise.allSettled([fails(), work(4, 1)]);
            console.log(settled.map(s => s.status).join(','));
            for await (const v of (async function* () { yield 'a'; yield 'b'; })()) console.log('gen', v);
        })();
    """)
    assert_ok(d, "all 2,4,6\nrace 40\ncaught inner\nrejected,fulfilled\ngen a\ngen b\n")


# ---------------------------------------------------------- process creation

CHILD_PROCESS_CASES = {
    "spawn": "require('child_process').spawn('ls', ['-lh', '/usr']).stdout.on('data', d => console.log(String(d)));",
    "execSync": "console.log(require('child_process').execSync('ls').toString());",
    "exec": "require('child_process').exec('ls /', (e, out) => console.log(out));",
    "execFile": "require('child_process').execFile('/bin/ls', ['/'], (e, out) => console.log(out));",
    "execFileSync": "console.log(String(require('child_process').execFileSync('/bin/ls', ['/'])));",
    "spawnSync": "console.log(String(require('child_process').spawnSync('ls', ['/usr']).stdout));",
    "fork": "require('fs').writeFileSync('/tmp/c.js', 'console.log(1)');\n"
            "require('child_process').fork('/tmp/c.js');",
    "shell_option": "console.log(String(require('child_process').execSync('echo pwned; ls /', {shell: '/bin/sh'})));",
}


@pytest.mark.parametrize("name", sorted(CHILD_PROCESS_CASES))
def test_child_process_stops_the_run(daemon, name):
    d = node(daemon, "console.log('before');\n" + CHILD_PROCESS_CASES[name] + "\nconsole.log('after');\n")
    # the synchronous calls stop at once; the async ones stop at spawn time,
    # before 'after' is printed (the spawn happens inside the call)
    assert_process_creation_stopped(d, stdout="before\n")
    for ls_output in ("bin", "usr", "total", "pwned", "lib"):
        assert ls_output not in d["stdout"] + d["stderr"], d


def test_child_process_in_a_try_block_still_stops_the_run(daemon):
    """The run is stopped, not handed an exception it could swallow."""
    d = node(daemon, """
        try { require('child_process').execSync('id'); } catch (e) { console.log('caught', e.code); }
        console.log('continued');
    """)
    assert_process_creation_stopped(d)


def test_redeclared_parseint_does_not_run_execsync(daemon):
    """dify-sandbox's test: a script that redeclares parseInt (which the
    runtime's own code might call) must not get its body run outside the
    program; the program just sees its own main()."""
    d = node(daemon, """
        var data;
        function main(){return {result: data}}
        function parseInt(){ const {execSync}=require('child_process'); data = execSync("ls -la /", {encoding:"utf8"}); return 0; }
        console.log(main())
    """)
    assert "result: undefined" in d["stdout"], d
    assert_ok(d, "{ result: undefined }\n")


def test_worker_threads_run(daemon):
    d = node(daemon, """
        const { Worker } = require('worker_threads');
        const results = [];
        let done = 0;
        for (let i = 0; i < 3; i++) {
            const w = new Worker(`
                const { parentPort, workerData } = require('worker_threads');
                let s = 0; for (let k = 0; k <= workerData; k++) s += k;
                parentPort.postMessage(s);`, { eval: true, workerData: (i + 1) * 100 });
            w.on('message', m => { results[i] = m; });
            w.on('exit', c => { if (++done === 3) console.log(results.join(','), c); });
        }
    """)
    assert_ok(d, "5050,20100,45150 0\n")


def test_worker_thread_cannot_spawn_either(daemon):
    d = node(daemon, """
        const { Worker } = require('worker_threads');
        console.log('before');
        const w = new Worker(`
            const out = require('child_process').execSync('ls /').toString();
            require('worker_threads').parentPort.postMessage(out);`, { eval: true });
        w.on('message', m => console.log('escaped', m));
        w.on('error', e => console.log('worker error', e.message));
    """)
    assert_process_creation_stopped(d, stdout="before\n")


def test_dynamic_import_of_child_process_is_stopped_too(daemon):
    d = node(daemon, """
        import('child_process').then(cp => { console.log('imported'); cp.execSync('ls /'); console.log('ran'); });
    """)
    assert_process_creation_stopped(d, stdout="imported\n")


def test_identity_is_locked(daemon):
    """No capability, no_new_privs, a seccomp filter; process.setuid(0)
    is a kill-list call that stops the run and is named."""
    d = node(daemon, """
        const s = require('fs').readFileSync('/proc/self/status', 'utf8');
        console.log(s.split('\\n').filter(l => /^(Cap(Prm|Eff|Bnd|Amb)|NoNewPrivs|Seccomp):/.test(l))
                     .map(l => l.replace(/\\s+/g, ' ')).join('|'));
        process.setuid(0);
        console.log('root now');
    """)
    assert d["stdout"] == ("CapPrm: 0000000000000000|CapEff: 0000000000000000|"
                           "CapBnd: 0000000000000000|CapAmb: 0000000000000000|"
                           "NoNewPrivs: 1|Seccomp: 2\n"), d
    assert (d["exit_code"], d["status"]) == (-1, "syscall_denied"), d
    assert d["error"] == ("process exited with code -1\n"
                          "error: operation not permitted: syscall 'setuid' is not allowed\n"), d


# ------------------------------------------------------------- native code

def test_process_binding_spawn_sync_is_stopped(daemon):
    """The internal binding behind spawnSync is reachable, but using it is
    process creation all the same: the run is stopped, nothing runs."""
    d = node(daemon, """
        const b = process.binding('spawn_sync');
        console.log('binding', Object.keys(b).join(','));
        const r = b.spawn({file: '/bin/ls', args: ['ls', '/'], envPairs: [],
                           stdio: [{type: 'pipe', readable: true},
                                   {type: 'pipe', writable: true},
                                   {type: 'pipe', writable: true}]});
        console.log('spawned', JSON.stringify(r));
    """)
    assert_process_creation_stopped(d, stdout="binding spawn\n")


def test_native_addons_are_refused(daemon):
    """node runs with --no-addons: process.dlopen and require of a .node
    file fail with ERR_DLOPEN_DISABLED, whether the file is a copy in /tmp
    (which is noexec anyway) or a real shared library under /usr."""
    d = node(daemon, """
        const fs = require('fs');
        fs.writeFileSync('/tmp/garbage.node', Buffer.from('\\x7fELF garbage'));
        fs.writeFileSync('/tmp/real.node', fs.readFileSync('/usr/lib/x86_64-linux-gnu/libz.so.1'));
        const tries = {
            dlopen_tmp: () => process.dlopen({exports: {}}, '/tmp/real.node'),
            dlopen_garbage: () => process.dlopen({exports: {}}, '/tmp/garbage.node'),
            dlopen_usr: () => process.dlopen({exports: {}}, '/usr/lib/x86_64-linux-gnu/libz.so.1'),
            require_tmp: () => require('/tmp/real.node'),
            module_dlopen: () => require('module')._extensions['.node']({exports: {}}, '/tmp/real.node'),
        };
        for (const [k, f] of Object.entries(tries)) {
            try { f(); console.log(k, 'LOADED'); } catch (e) { console.log(k, e.code); }
        }
        console.log(process.execArgv[0]);
    """)
    assert_ok(d, "dlopen_tmp ERR_DLOPEN_DISABLED\ndlopen_garbage ERR_DLOPEN_DISABLED\n"
                 "dlopen_usr ERR_DLOPEN_DISABLED\nrequire_tmp ERR_DLOPEN_DISABLED\n"
                 "module_dlopen ERR_DLOPEN_DISABLED\n--no-addons\n")


def test_vm_escape_reaches_only_the_jailed_process(daemon):
    """The classic vm escape gives back the very same process object: PID 1
    of the run's namespace, the pooled UID, and it cannot spawn."""
    d = node(daemon, """
        const vm = require('vm');
        const p = vm.runInNewContext('this.constructor.constructor("return process")()');
        console.log(p === process, p.pid, p.ppid, p.getuid() === process.getuid());
        console.log(JSON.stringify(Object.keys(p.env).sort()));
        console.log(p.getuid());
        p.mainModule.require('child_process').execSync('id');
        console.log('spawned');
    """)
    lines = d["stdout"].split("\n")
    assert lines[:2] == ["true 1 0 true", '["HOME","LANG","PATH","TMPDIR"]'], d
    uid = int(lines[2])
    assert daemon.uid_min <= uid <= daemon.uid_max, (uid, daemon.uid_min)
    assert_process_creation_stopped(d, stdout="\n".join(lines[:3]) + "\n")


# ---------------------------------------------------------------- the jail

def test_etc_passwd_is_the_sandbox_file(daemon):
    d = node(daemon, """
        console.log(process.getuid());
        process.stdout.write(require('fs').readFileSync('/etc/passwd', 'utf8'));
    """)
    uid, passwd = d["stdout"].split("\n", 1)
    assert daemon.uid_min <= int(uid) <= daemon.uid_max
    assert passwd == ("root:x:0:0:root:/root:/usr/sbin/nologin\n"
                      f"sandbox:x:{uid}:{uid}:sandbox:/tmp:/usr/sbin/nologin\n"), d
    assert d["exit_code"] == 0


def test_root_is_read_only_and_host_files_absent(daemon):
    d = node(daemon, """
        const fs = require('fs');
        for (const p of ['/usr/x', '/etc/x', '/x']) {
            try { fs.writeFileSync(p, 'x'); console.log(p, 'WRITTEN'); } catch (e) { console.log(p, e.code); }
        }
        console.log(fs.readdirSync('/proc').sort().join(','));
        console.log(['/root', '/home', '/etc/shadow', '/var/log'].map(fs.existsSync).join(','));
    """)
    assert_ok(d, "/usr/x EROFS\n/etc/x EROFS\n/x EROFS\n1,self,thread-self\nfalse,false,false,false\n")


NET_PROBE = """
    const net = require('net');
    const c = net.connect({port: %d, host: '127.0.0.1'});
    c.on('data', d => { console.log('connected:' + d); c.destroy(); });
    c.on('error', e => console.log('blocked:' + e.code));
"""


def test_no_network_without_enable_network(daemon, tcp_server):
    d = node(daemon, NET_PROBE % tcp_server.port, enable_network=False)
    assert_ok(d, "blocked:EPERM\n")
    assert tcp_server.accepted == 0


def test_network_with_enable_network(daemon, tcp_server, netlab):
    """With network: a public host answers, the host's loopback does not."""
    d = node(daemon, """
        require('http').get('http://%s:8080/', r => console.log('status:' + r.statusCode))
            .on('error', e => console.log('blocked:' + e.code));
    """ % netlab.public, enable_network=True)
    assert_ok(d, "status:200\n")
    d = node(daemon, NET_PROBE % tcp_server.port, enable_network=True)
    assert_ok(d, "blocked:ECONNREFUSED\n")
    assert tcp_server.accepted == 0


def test_environment_holds_only_the_basics(daemon):
    d = node(daemon, """
        console.log(JSON.stringify(Object.keys(process.env).sort()));
        console.log(process.env.LANG, process.env.HOME, process.env.TMPDIR);
        const fs = require('fs');
        console.log(JSON.stringify(process.argv));
        process.stdout.write(fs.readFileSync('/proc/self/environ', 'latin1').split('\\0').sort().join('|') + '\\n');
        process.stdout.write(fs.readFileSync('/proc/self/cmdline', 'latin1') + '\\n');
    """)
    lines = d["stdout"].split("\n")
    assert lines[:3] == ['["HOME","LANG","PATH","TMPDIR"]', "C.UTF-8 /tmp /tmp", '["/usr/bin/node"]'], d
    env = [e for e in lines[3].split("|") if e]
    assert sorted(e.split("=", 1)[0] for e in env) == ["HOME", "LANG", "PATH", "TMPDIR"], d
    assert KEY not in d["stdout"], "the API key reached the program"
    assert d["exit_code"] == 0 and d["error"] == ""


def test_tmp_is_not_shared_between_runs(daemon):
    d = node(daemon, """
        const fs = require('fs');
        fs.writeFileSync('/tmp/marker', 'from the first run');
        globalThis.leak = 1;
        console.log(fs.readdirSync('/tmp').join(','));
    """)
    assert_ok(d, "marker\n")
    d = node(daemon, """
        const fs = require('fs');
        console.log(JSON.stringify(fs.readdirSync('/tmp')), fs.existsSync('/tmp/marker'), typeof globalThis.leak);
    """)
    assert_ok(d, "[] false undefined\n")


# ------------------------------------------------------------ concurrency

def test_ten_concurrent_node_runs(daemon):
    results = {}

    def one(i):
        s = daemon.new_session()
        try:
            results[i] = daemon.run(js(f"""
                setTimeout(() => console.log('index {i}', process.pid, {i} * {i}), 50);
            """), session=s, language="nodejs")
        finally:
            s.close()

    threads = [threading.Thread(target=one, args=(i,)) for i in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sorted(results) == list(range(10))
    for i, r in results.items():
        assert r["code"] == 0, (i, r)
        assert_ok(r["data"], f"index {i} 1 {i * i}\n")


def test_node_and_python_interleaved_concurrently(daemon):
    results = {}

    def one(i):
        s = daemon.new_session()
        try:
            if i % 2:
                results[i] = daemon.run(f"import sys\nprint('py', {i}, sys.version_info[0])",
                                        session=s, language="python3")
            else:
                results[i] = daemon.run(f"console.log('js', {i}, typeof process.versions.node)",
                                        session=s, language="nodejs")
        finally:
            s.close()

    threads = [threading.Thread(target=one, args=(i,)) for i in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sorted(results) == list(range(12))
    for i, r in results.items():
        assert r["code"] == 0, (i, r)
        want = f"py {i} 3\n" if i % 2 else f"js {i} string\n"
        assert_ok(r["data"], want)


# ------------------------------------------------------------------ limits

MEMORY_CAP = 256 * 1024 * 1024
OUTPUT_CAP = 64 * 1024


@pytest.fixture(scope="module")
def small(module_daemon_factory):
    return module_daemon_factory(worker_timeout=2, max_workers=2,
                                 limits={"memory": "256M", "output": "64K"})


@pytest.fixture(scope="module")
def bomb(module_daemon_factory):
    """small's limits with a run time limit as long as test_memory_bomb's
    own bound on it: the bomb must be stopped by the memory limit, and the
    V8 heap one needs ~1.5 s of CPU to get there, which 2 s of wall time
    did not always hold on a busy host (it ended as a timeout)."""
    return module_daemon_factory(worker_timeout=6, max_workers=2,
                                 limits={"memory": "256M", "output": "64K"})


@pytest.mark.parametrize("src", [
    "while (true) {}",
    "setTimeout(() => { for (;;) {} }, 10);",
    "new Promise(() => {}); setInterval(() => {}, 1000);",
], ids=["busy_loop", "busy_timer", "idle_interval"])
def test_timeout(small, src):
    t0 = time.monotonic()
    d = node(small, "console.log('start');\n" + src)
    elapsed = time.monotonic() - t0
    assert scaled(1.5) <= elapsed <= scaled(6.0), elapsed
    assert (d["stdout"], d["exit_code"], d["status"]) == ("start\n", -1, "timeout"), d
    assert d["error"] == "process exited with code -1\nerror: timeout\n" + d["stderr"], d
    small.assert_idle()


@pytest.mark.parametrize("src", [
    # Buffer.alloc(n) with no fill is calloc'd: untouched zero pages cost
    # nothing, so the bomb fills each buffer to really use the memory.
    "const a = []; while (true) { a.push(Buffer.alloc(10 << 20, 1)); }",
    "const a = []; while (true) { a.push(Buffer.allocUnsafe(10 << 20).fill(7)); }",
    "const a = []; while (true) { a.push(new Array(1e6).fill(1.5)); }",
], ids=["buffer_alloc_filled", "buffer_alloc_unsafe", "js_heap"])
def test_memory_bomb(bomb, src):
    t0 = time.monotonic()
    d = node(bomb, "console.log('start');\n" + src)
    elapsed = time.monotonic() - t0
    assert (d["stdout"], d["exit_code"], d["status"]) == ("start\n", -1, "memory_limit"), d
    assert d["error"].startswith("process exited with code -1\nerror: memory limit exceeded\n"), d
    assert d["memory_peak_bytes"] <= MEMORY_CAP * 1.05, d
    assert elapsed < scaled(6.0), elapsed
    bomb.assert_idle()
    bomb.assert_serving()


def test_memory_under_the_limit_works(small):
    d = node(small, """
        const a = [];
        for (let i = 0; i < 10; i++) a.push(Buffer.alloc(10 << 20, i + 1));
        console.log(a.length, a[9][12345]);
    """)
    assert_ok(d, "10 10\n")
    assert d["memory_peak_bytes"] >= 100 * 1024 * 1024, d


@pytest.mark.parametrize("stream", ["stdout", "stderr"])
def test_output_limit(small, stream):
    fn = "console.log" if stream == "stdout" else "console.error"
    d = node(small, f"const s = 'x'.repeat(999); while (true) {{ {fn}(s); }}")
    assert d["exit_code"] == -1, {k: v for k, v in d.items() if k not in ("stdout", "stderr", "error")}
    assert d["status"] == "output_limit", d["status"]
    assert d["truncated"] is True
    assert d["error"].startswith("process exited with code -1\nerror: output limit exceeded\n")
    out = len(d["stdout"].encode()) + len(d["stderr"].encode())
    assert 0 < out <= OUTPUT_CAP, out
    assert d[stream] and set(d[stream]) <= {"x", "\n"}
    small.assert_serving()


def test_output_just_under_the_cap_is_complete(small):
    n = OUTPUT_CAP - 100
    d = node(small, f"process.stdout.write('y'.repeat({n}));")
    assert_ok(d, "y" * n)
    assert d["truncated"] is False


def test_nodejs_path_from_the_environment_outside_usr(lockboxd_factory):
    """NODEJS_PATH naming a Node.js that is not /usr/bin/node: runs use that
    binary, and its prefix (two levels up) is visible read-only in the jail."""
    prefix = f"/var/tmp/lockbox-test-node-{os.getpid()}"
    os.makedirs(prefix + "/bin")
    exe = prefix + "/bin/node"
    try:
        try:
            os.link("/usr/bin/node", exe)  # same file system: no 100 MB copy
        except OSError:
            shutil.copy2("/usr/bin/node", exe)
        d = lockboxd_factory(_env={"NODEJS_PATH": exe})
        data = node(d, "const fs = require('fs');\n"
                       "console.log(process.execPath, fs.existsSync('" + exe + "'), 1 + 1);\n"
                       "try { fs.writeFileSync('" + prefix + "/x', 'x') } catch (e) { console.log(e.code) }")
        assert_ok(data, f"{exe} true 2\nEROFS\n")
        d.stop()
    finally:
        shutil.rmtree(prefix, ignore_errors=True)
