"""Reading secrets and leaks of the server: /etc/shadow, the daemon's config
file and API key, the environment of the daemon, the supervisor's /proc
entries, the server's hostname. (Other runs' files and code: see
test_attack_concurrency.py.)"""
import hashlib
import json
import socket
import time

import pytest

from attacklib import (JS_SEARCH, PY_OWN_MEMORY, assert_exception, assert_ok, attack_js,
                       attack_py, src)

from conftest import KEY

SANDBOX_ENV = {"PATH", "LANG", "HOME", "TMPDIR"}


# ------------------------------------------------------------------ files

@pytest.mark.parametrize("path", ["/etc/shadow", "/etc/gshadow", "/root/.bash_history",
                                  "/etc/sudoers", "/etc/ssh/ssh_host_ed25519_key"])
def test_python_reading_host_secrets_finds_nothing(daemon, path):
    d = attack_py(daemon, f"print(open({path!r}).read())")
    assert_exception(d, "FileNotFoundError", path)


@pytest.mark.host_view
def test_python_reading_the_daemon_config_by_every_path(daemon):
    """The config (with the API key) by its host path, through /proc/1/root,
    /proc/self/cwd, and by walking up from /tmp."""
    cfg = daemon.config_path
    d = attack_py(daemon, src(f"""
        import errno
        cfg = {cfg!r}
        for p in (cfg, '/proc/1/root' + cfg, '/proc/self/root' + cfg, '/proc/self/cwd/../..' + cfg,
                  '/tmp/../../../../..' + cfg, '/proc/1/cwd/' + cfg):
            try:
                print(p, open(p).read()[:20])
            except OSError as e:
                print(p, errno.errorcode[e.errno])
    """))
    assert_ok(d)
    lines = d["stdout"].splitlines()
    assert len(lines) == 6 and all(l.endswith(" ENOENT") for l in lines), d
    assert KEY not in d["stdout"]


@pytest.mark.host_view
def test_python_api_key_is_nowhere_in_files_or_proc(daemon):
    """Every readable file outside /usr (with /proc/1/* of the program and
    its threads) searched for the API key and the config's path."""
    needles = [KEY, daemon.config_path]
    d = attack_py(daemon, src(f"""
        import os
        needles = [n.encode() for n in {needles!r}]
        hits, scanned = [], 0
        for root, dirs, files in os.walk('/', onerror=lambda e: None):
            if root in ('/usr', '/dev') or root.startswith(('/usr/', '/proc/1/task', '/proc/self', '/proc/thread-self')):
                dirs[:] = []
                continue
            for f in files:
                p = os.path.join(root, f)
                if p in ('/proc/1/pagemap', '/proc/1/mem', '/proc/1/clear_refs'):
                    continue
                try:
                    with open(p, 'rb') as fh:
                        data = fh.read(4 << 20)
                except OSError:
                    continue
                scanned += 1
                hits += [(p, n) for n in needles if n in data]
        print(scanned > 50, hits)
    """))
    assert_ok(d, "True []\n")


def test_python_api_key_is_not_in_the_programs_memory(daemon):
    """The run was forked from the root jailer (cold) or the zygote (warm):
    nothing of the jailer's memory, where the key lives, may be left. The
    program scans every readable mapping of its own address space for the
    key, which it knows only by prefix and hash (so the search itself does
    not put the key in memory)."""
    prefix, digest = KEY[:10], hashlib.sha256(KEY.encode()).hexdigest()
    d = attack_py(daemon, PY_OWN_MEMORY + src(f"""
        import hashlib
        prefix, digest, n = {prefix!r}.encode(), {digest!r}, {len(KEY)}
        hits = scanned = 0
        for _, data in own_memory(n):
            scanned += len(data)
            i = data.find(prefix)
            while i >= 0:
                if hashlib.sha256(data[i:i + n]).hexdigest() == digest:
                    hits += 1
                i = data.find(prefix, i + 1)
        print(scanned > 1 << 20, hits)
    """))
    assert_ok(d, "True 0\n")


@pytest.mark.host_view
def test_python_supervisor_proc_entries_are_invisible(daemon):
    """The jailer, the HTTP process and the zygote are not in the run's /proc;
    by number they do not exist; the program is PID 1 with parent 0."""
    from conftest import children_of
    host_pids = [daemon.pid] + children_of(daemon.pid)
    d = attack_py(daemon, src(f"""
        import os
        print(sorted(p for p in os.listdir('/proc') if p.isdigit()), os.getpid(), os.getppid())
        seen = []
        for pid in {host_pids!r}:
            for f in ('environ', 'cmdline', 'mem', 'root', 'fd'):
                if os.path.lexists(f'/proc/{{pid}}/{{f}}'):
                    seen.append((pid, f))
        print(seen)
        print(open('/proc/1/status').read().count('PPid:\\t0'))
    """))
    assert_ok(d, "['1'] 1 0\n[]\n1\n")


def test_python_proc_environ_holds_only_the_sandbox_environment(daemon):
    d = attack_py(daemon, src("""
        import os, json
        try:
            env = open('/proc/1/environ', 'rb').read().split(b'\\0')
            print(json.dumps(sorted(e.split(b'=')[0].decode() for e in env if e)))
        except PermissionError:
            print('EACCES')   # warm: the run was never dumpable
        print(json.dumps(sorted(os.environ)))
    """))
    assert_ok(d)
    first, second = d["stdout"].splitlines()
    assert first == "EACCES" or set(json.loads(first)) <= SANDBOX_ENV, d
    assert set(json.loads(second)) == SANDBOX_ENV, d
    assert KEY not in d["stdout"]


def test_server_environment_does_not_reach_runs(lockboxd_factory):
    """A daemon started with secrets in its environment (API_KEY is the
    reference's override of the key): no run sees any of them, in Python or
    Node.js, in its environment or anywhere in /proc/1 or /etc."""
    secret_env = {"API_KEY": "env-key-31337-zz", "LOCKBOX_TEST_SECRET": "tok-5e3c2e7-secret",
                  "AWS_SECRET_ACCESS_KEY": "aws-9f8e7d6c5b4a", "DATABASE_URL": "postgres://u:pw-77aa@db/x"}
    d = lockboxd_factory(_env=secret_env)
    needles = sorted(secret_env.values())
    d.key = secret_env["API_KEY"]  # the environment overrides the config's key
    s = d.new_session()
    s.headers["X-Api-Key"] = d.key
    py = d.run(src(f"""
        import os
        blob = repr(dict(os.environ)).encode()
        for p in ('/proc/1/environ', '/proc/1/cmdline', '/etc/hosts', '/etc/hostname', '/etc/passwd'):
            try:
                blob += open(p, 'rb').read()
            except OSError:
                pass
        print([n for n in {needles!r} if n.encode() in blob], sorted(os.environ))
    """), session=s)
    assert py["code"] == 0, py
    assert_ok(py["data"], f"[] {sorted(SANDBOX_ENV)}\n")
    js = d.run(src(f"""
        const fs = require('fs');
        let blob = JSON.stringify(process.env);
        for (const p of ['/proc/1/environ', '/proc/1/cmdline', '/etc/hosts', '/etc/hostname']) {{
            try {{ blob += fs.readFileSync(p, 'latin1'); }} catch (e) {{}}
        }}
        console.log(JSON.stringify({needles!r}.filter(n => blob.includes(n))), Object.keys(process.env).sort().join(','));
    """), session=s, language="nodejs")
    assert js["code"] == 0, js
    assert_ok(js["data"], "[] HOME,LANG,PATH,TMPDIR\n")
    # and the daemon still serves (the factory's teardown checks leftovers)
    assert s.get(d.url("/health"), timeout=10).text == '"ok"'
    r = d.run("print(6 * 7)", session=s)
    assert (r["code"], r["data"]["stdout"]) == (0, "42\n"), r
    s.close()


# ------------------------------------------------------------------ hostname

def host_names():
    names = {socket.gethostname(), socket.getfqdn()}
    try:
        names.add(open("/etc/hostname").read().strip())
    except OSError:
        pass
    return sorted(n for n in names if n and n not in ("localhost", "sandbox", "localhost.localdomain"))


HOSTNAME_PROBE_PY = src("""
    import os, socket, json
    words = set()
    for p in ('/etc/hosts', '/etc/hostname', '/etc/resolv.conf', '/etc/mailname'):
        try:
            words |= set(open(p).read().replace('\\t', ' ').split())
        except OSError:
            pass
    words |= {socket.gethostname(), os.uname().nodename, socket.getfqdn()}
    print(json.dumps(sorted(words)))
""")

HOSTNAME_PROBE_JS = src("""
    const fs = require('fs'), os = require('os');
    const words = new Set([os.hostname()]);
    for (const p of ['/etc/hosts', '/etc/hostname', '/etc/resolv.conf', '/etc/mailname']) {
        try { fs.readFileSync(p, 'utf8').split(/\\s+/).forEach(w => w && words.add(w)); } catch (e) {}
    }
    console.log(JSON.stringify([...words].sort()));
""")


def test_python_sees_no_server_hostname_in_etc_hosts(daemon):
    """Found by this suite, fixed by filtering /etc/hosts: the run's copy of
    the host's file named the server ('127.0.0.1 <hostname>'). The run
    learns no name of the server; its hostname is 'sandbox' everywhere."""
    d = attack_py(daemon, HOSTNAME_PROBE_PY)
    assert_ok(d)
    words = json.loads(d["stdout"])
    assert "sandbox" in words, d
    leaked = [n for n in host_names() if n in words]
    assert not leaked, f"the server's hostname {leaked} is visible in the run: {words}"


def test_node_sees_no_server_hostname_in_etc_hosts(daemon):
    """As above, for Node.js."""
    d = attack_js(daemon, HOSTNAME_PROBE_JS)
    assert_ok(d)
    words = json.loads(d["stdout"])
    assert "sandbox" in words, d
    leaked = [n for n in host_names() if n in words]
    assert not leaked, f"the server's hostname {leaked} is visible in the run: {words}"


def test_python_uname_and_hostname_are_the_sandboxs(daemon):
    d = attack_py(daemon, "import os, socket\nprint(socket.gethostname(), os.uname().nodename, open('/etc/hostname').read().strip())")
    assert_ok(d, "sandbox sandbox sandbox\n")


# ------------------------------------------------------------------ Node.js

@pytest.mark.host_view
def test_node_reading_secrets_and_config(daemon):
    d = attack_js(daemon, src(f"""
        const fs = require('fs');
        for (const p of ['/etc/shadow', {daemon.config_path!r}, '/proc/1/root' + {daemon.config_path!r},
                         '/tmp/../../..' + {daemon.config_path!r}, '/root/.ssh/id_rsa']) {{
            try {{ console.log(p, fs.readFileSync(p, 'utf8').slice(0, 20)); }}
            catch (e) {{ console.log(p, e.code); }}
        }}
    """))
    assert_ok(d)
    lines = d["stdout"].splitlines()
    assert len(lines) == 5 and all(l.endswith(" ENOENT") for l in lines), d


def test_node_environment_proc_and_identity(daemon):
    d = attack_js(daemon, JS_SEARCH + src(f"""
        const os = require('os');
        console.log(Object.keys(process.env).sort().join(','));
        let environ;
        try {{ environ = fs.readFileSync('/proc/1/environ', 'latin1'); }} catch (e) {{ environ = e.code; }}
        console.log(environ.includes({KEY!r}), fs.readdirSync('/proc').filter(p => /^\\d+$/.test(p)).join(','));
        console.log(process.pid, process.ppid, os.userInfo().username, os.hostname());
        console.log(JSON.stringify(search({KEY!r})));
    """))
    assert_ok(d)
    lines = d["stdout"].splitlines()
    assert lines[0] == "HOME,LANG,PATH,TMPDIR", d
    assert lines[1] == "false 1", d
    assert lines[2] == "1 0 sandbox sandbox", d
    assert lines[3] == "[]", d


MEMORY_SEARCH = PY_OWN_MEMORY + src("""
    def in_memory(prefix, tail):
        # is prefix followed by the bytes of tail (a list of ints, so that
        # the whole needle never exists in this program's own memory)
        # anywhere in this process's memory, as the kernel reads it? what
        # the zygote held when it forked us would be there
        for _, data in own_memory(len(prefix) + len(tail)):
            at = data.find(prefix)
            while at >= 0:
                if list(data[at + len(prefix):at + len(prefix) + len(tail)]) == tail:
                    return True
                at = data.find(prefix, at + 1)
        return False
""")


def test_warm_runs_learn_nothing_of_the_zygotes_settings(lockboxd_factory):
    """A warm Python run is a fork of the zygote: its command line shows no
    setting of the daemon (install path, binds, preload list), and the proxy
    settings (here with a password) are nowhere in a run without network,
    not even in its memory; a run with network gets them in its
    environment."""
    proxy = "http://user:pw-proxy-4411@203.0.113.7:8080"
    d = lockboxd_factory(proxy={"http": proxy}, warm={"mode": "warm"},  # also in the cold pass
                         network={"dns_servers": ["127.0.0.1"]})
    code = MEMORY_SEARCH + src(f"""
        import os
        print(repr(open('/proc/self/cmdline', 'rb').read()))
        print(in_memory(b'pw-proxy-', [52, 52, 49, 49]), os.environ.get('HTTP_PROXY'))
    """)
    for _ in range(50):  # the offline pool fills after the first offline run
        off = d.run_data(code, enable_network=False)
        if off["warm"]:
            break
        time.sleep(0.1)
    assert off["warm"] is True, off
    cmdline, secrets = off["stdout"].splitlines()
    assert cmdline.endswith("lockbox-pyzygote\\x00'") and "--" not in cmdline, cmdline  # its name only
    assert secrets == "False None", off
    on = d.run_data(code, enable_network=True)
    assert on["warm"] is True and on["stdout"].splitlines()[1] == f"True {proxy}", on


def test_warm_runs_do_not_share_the_stack_canary(daemon):
    """Warm Python runs are forks of one zygote; each gets a stack-protector
    canary of its own (glibc's form: first byte zero), so what one run
    learns of its canary tells nothing of the next run's."""
    code = src("""
        import ctypes
        libc = ctypes.CDLL(None)
        libc.pthread_self.restype = ctypes.c_void_p
        print(ctypes.string_at(libc.pthread_self() + 0x28, 8).hex())
    """)
    seen, warm = [], 0
    for _ in range(40):  # a daemon just started fills its pool first
        d = daemon.run_data(code, enable_network=True)  # the configured mode's pool
        assert d["status"] == "ok", d
        seen.append(d["stdout"].strip())
        warm += d["warm"]
        if len(seen) >= 4 and (warm >= 3 or not daemon.warm):
            break
        time.sleep(0.05)
    assert warm >= 3 or not daemon.warm, (warm, seen)
    assert len(set(seen)) == len(seen), seen
    assert all(c.startswith("00") and c != "00" * 8 for c in seen), seen
