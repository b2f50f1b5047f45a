"""The `lockbox` command-line client against the real daemon: streams come
back byte-exact, the program's exit code passes through, sandbox kills map
to 124 (time) / 137 (other kills) / 128+N (signals) with the reason on
stderr, and lockbox's own errors are one "lockbox: " line with exit 2
(usage, file) or 3 (server, transport). A small fake server stands in for
the daemon's error answers that a well-formed client request cannot cause.
"""
import http.server
import json
import os
import re
import subprocess
import textwrap
import threading
import time

import pytest

from conftest import KEY, REPO, free_port, scaled

LOCKBOX = os.environ.get("LOCKBOX") or os.path.join(REPO, "build", "lockbox")
BASE_ENV = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "LANG": "C.UTF-8"}


def lockbox(*args, env=None, stdin=None, timeout=60):
    """Run the client with a clean environment (no LOCKBOX_*, API_KEY or
    proxy variables from the caller) plus env; returns bytes."""
    assert os.access(LOCKBOX, os.X_OK), f"{LOCKBOX} missing: run make build/lockbox"
    full_env = dict(BASE_ENV, **(env or {}))
    return subprocess.run([LOCKBOX, *args], env=full_env, input=stdin, capture_output=True,
                          timeout=timeout)


def run_on(daemon, path, *args, **kw):
    return lockbox("run", str(path), "--server", daemon.url(""), "--key", daemon.key, *args, **kw)


def program(tmp_path, name, src):
    p = tmp_path / name
    p.write_text(textwrap.dedent(src).lstrip("\n"))
    return p


def dead_server():
    return f"http://127.0.0.1:{free_port()}"


def assert_one_line(r, code, pattern=None):
    """lockbox's own failure: the exit code, nothing on stdout, exactly one
    line on stderr starting with 'lockbox: '."""
    err = r.stderr.decode()
    assert r.returncode == code, (r.returncode, err)
    assert r.stdout == b"", r.stdout
    assert err.startswith("lockbox: ") and err.endswith("\n") and err.count("\n") == 1, err
    if pattern:
        assert re.search(pattern, err), err
    return err


# ------------------------------------------------------------ runs

def test_python_file_streams_exactly(daemon, tmp_path):
    p = program(tmp_path, "hello.py", """
        import sys
        print("hello")
        print("to stderr", file=sys.stderr)
        sys.stdout.write("two\\nlines, no newline at the end")
    """)
    r = run_on(daemon, p)
    assert r.returncode == 0, r
    assert r.stdout == b"hello\ntwo\nlines, no newline at the end"
    assert r.stderr == b"to stderr\n"


@pytest.mark.parametrize("name", ["hello.js", "hello.cjs"])
def test_nodejs_file_streams_exactly(daemon, tmp_path, name):
    p = program(tmp_path, name, """
        process.stdout.write("from node\\n");
        console.error("node stderr");
        console.log([1, 2].map(x => x * 21).join(","));
    """)
    r = run_on(daemon, p)
    assert r.returncode == 0, r
    assert r.stdout == b"from node\n21,42\n"
    assert r.stderr == b"node stderr\n"


@pytest.mark.parametrize("name,src,code,out", [
    ("exit3.py", "import sys\nprint('bye')\nsys.exit(3)\n", 3, b"bye\n"),
    ("exit255.py", "import os\nos._exit(255)\n", 255, b""),
    ("exit5.js", "console.log('bye');\nprocess.exit(5);\n", 5, b"bye\n"),
    ("exit0.js", "process.exitCode = 0;\n", 0, b""),
])
def test_program_exit_code_passes_through(daemon, tmp_path, name, src, code, out):
    r = run_on(daemon, program(tmp_path, name, src))
    assert (r.returncode, r.stdout, r.stderr) == (code, out, b""), r


def test_python_exception_exits_1_with_traceback(daemon, tmp_path):
    p = program(tmp_path, "boom.py", "print('before', flush=True)\n1 / 0\n")
    r = run_on(daemon, p)
    err = r.stderr.decode()
    assert r.returncode == 1, r
    assert r.stdout == b"before\n"
    assert err.startswith("Traceback (most recent call last):\n"), err
    assert err.endswith("ZeroDivisionError: division by zero\n"), err
    assert "lockbox:" not in err and "process exited" not in err, err


def test_nodejs_exception_exits_1_with_stack(daemon, tmp_path):
    r = run_on(daemon, program(tmp_path, "boom.js", "throw new Error('boom');\n"))
    assert r.returncode == 1, r
    assert b"Error: boom" in r.stderr and b"lockbox:" not in r.stderr, r.stderr


def test_stdin_program_with_language(daemon):
    r = lockbox("run", "-", "--language", "python3", "--server", daemon.url(""),
                "--key", daemon.key, stdin=b"print(6 * 7)\n")
    assert (r.returncode, r.stdout, r.stderr) == (0, b"42\n", b""), r


@pytest.mark.parametrize("name,language,src,out", [
    ("prog.txt", "python3", "print('py')\n", b"py\n"),
    ("prog.py", "nodejs", "console.log('js in a .py file')\n", b"js in a .py file\n"),
    ("prog", "nodejs", "console.log('no extension')\n", b"no extension\n"),
])
def test_language_option_overrides_extension(daemon, tmp_path, name, language, src, out):
    r = run_on(daemon, program(tmp_path, name, src), "--language", language)
    assert (r.returncode, r.stdout, r.stderr) == (0, out, b""), r


# ----------------------------------------------------- binary safety

ASCII = bytes(range(128))
UTF8 = "héllo wörld ✓ 日本語 🎉 \u2028 end".encode()


@pytest.mark.parametrize("name,src", [
    ("bytes.py", """
        import sys
        sys.stdout.buffer.write(bytes(range(128)) + "{u}".encode())
        sys.stderr.buffer.write("{u}".encode() + bytes(range(127, -1, -1)))
    """),
    ("bytes.js", """
        const a = Buffer.from([...Array(128).keys()]);
        const u = Buffer.from("{u}");
        process.stdout.write(Buffer.concat([a, u]));
        process.stderr.write(Buffer.concat([u, Buffer.from(a).reverse()]));
    """),
])
def test_output_is_byte_exact(daemon, tmp_path, name, src):
    # \u2028 must reach the program as the character itself, not an escape.
    p = program(tmp_path, name, src.replace("{u}", UTF8.decode()))
    r = run_on(daemon, p)
    assert r.returncode == 0, r
    assert r.stdout == ASCII + UTF8
    assert r.stderr == UTF8 + ASCII[::-1]


def test_invalid_utf8_output_is_replaced_not_dropped(daemon, tmp_path):
    """docs/API.md: each invalid byte becomes U+FFFD on the wire."""
    p = program(tmp_path, "bad.py", "import sys\nsys.stdout.buffer.write(b'a\\xffb\\xfe')\n")
    r = run_on(daemon, p)
    assert (r.returncode, r.stdout) == (0, "a\ufffdb\ufffd".encode()), r


# -------------------------------------------------- sandbox verdicts

@pytest.fixture(scope="module")
def quick(module_daemon_factory):
    return module_daemon_factory(worker_timeout=1)


@pytest.mark.parametrize("src", ["while True: pass\n", "import time\ntime.sleep(60)\n"],
                         ids=["busy", "sleep"])
def test_timeout_prints_reason_and_exits_124(quick, tmp_path, src):
    p = program(tmp_path, "slow.py", "print('partial', flush=True)\n" + src)
    t0 = time.monotonic()
    r = run_on(quick, p)
    assert time.monotonic() - t0 < scaled(10)
    assert (r.returncode, r.stdout, r.stderr) == (124, b"partial\n", b"lockbox: error: timeout\n"), r
    quick.assert_idle()


def test_kill_list_syscall_prints_reason_and_exits_137(daemon, tmp_path):
    p = program(tmp_path, "evil.py", """
        import ctypes
        print('before', flush=True)
        ctypes.CDLL(None).unshare(0x00020000)
        print('after')
    """)
    r = run_on(daemon, p)
    assert r.returncode == 137, r
    assert r.stdout == b"before\n"
    assert r.stderr == b"lockbox: error: operation not permitted: syscall 'unshare' is not allowed\n"


def test_program_killed_by_signal_exits_128_plus_n(daemon, tmp_path):
    r = run_on(daemon, program(tmp_path, "segv.py", "import ctypes\nctypes.string_at(0)\n"))
    assert r.returncode == 128 + 11, r
    assert r.stderr.endswith(b"lockbox: error: killed by signal SIGSEGV\n"), r.stderr


def net_probe(host, port):
    return f"""
        import errno, socket
        try:
            s = socket.socket()
            s.settimeout(3)
            s.connect(("{host}", {port}))
            s.sendall(b"GET / HTTP/1.0\\r\\n\\r\\n")
            print("connected:" + s.recv(100).split(b"\\r\\n")[0].decode())
        except OSError as e:
            print("blocked:" + errno.errorcode.get(e.errno, str(e.errno)))
    """


def test_network_only_with_flag(daemon, netlab, tmp_path):
    netlab.reset_hits()
    p = program(tmp_path, "net.py", net_probe(netlab.public, 80))
    r = run_on(daemon, p)
    assert (r.returncode, r.stdout) == (0, b"blocked:EPERM\n"), r
    assert netlab.hits("tcp", netlab.public, 80) == []
    r = run_on(daemon, p, "--network")
    assert (r.returncode, r.stdout) == (0, b"connected:HTTP/1.1 200 OK\n"), r
    assert len(netlab.hits("tcp", netlab.public, 80)) == 1


# ------------------------------------------------- lockbox's errors

def test_wrong_key_exits_3(daemon, tmp_path):
    p = program(tmp_path, "ok.py", "print(1)\n")
    r = lockbox("run", str(p), "--server", daemon.url(""), "--key", "not-the-key")
    assert assert_one_line(r, 3) == "lockbox: the server refused the API key\n"


def test_unreachable_server_exits_3(tmp_path):
    server = dead_server()
    r = lockbox("run", str(program(tmp_path, "ok.py", "print(1)\n")), "--server", server)
    assert assert_one_line(r, 3) == f"lockbox: cannot reach {server}: Connection refused\n"


def test_unknown_extension_exits_2(tmp_path):
    # The dead server proves nothing was sent: a request would end in exit 3.
    p = program(tmp_path, "prog.rb", "puts 1\n")
    r = lockbox("run", str(p), "--server", dead_server())
    assert_one_line(r, 2, r"prog\.rb: cannot tell the language .* --language python3\|nodejs")
    r = lockbox("run", str(tmp_path / "prog.py"), "--language", "ruby", "--server", dead_server())
    assert_one_line(r, 2, r"unknown language 'ruby'")


def test_missing_file_exits_2(tmp_path):
    path = tmp_path / "nope.py"
    r = lockbox("run", str(path), "--server", dead_server())
    assert assert_one_line(r, 2) == f"lockbox: {path}: No such file or directory\n"


def make_empty(p):
    p.write_bytes(b"")


def make_huge(p):
    with open(p, "wb") as f:
        f.truncate(16 * 1024 * 1024 + 1)


def make_dir(p):
    p.mkdir()


@pytest.mark.parametrize("make,pattern", [
    (make_empty, r"the file is empty"),
    (make_huge, r"larger than 16 MiB"),
    (make_dir, r"Is a directory"),
    (lambda p: p.write_bytes(b"print(1)\x00\n"), r"NUL byte at offset 8"),
    (lambda p: p.write_bytes(b"print('\xff')\n"), r"not valid UTF-8 at offset 7"),
], ids=["empty", "over_16MiB", "directory", "nul", "invalid_utf8"])
def test_unusable_file_exits_2(tmp_path, make, pattern):
    p = tmp_path / "prog.py"
    make(p)
    r = lockbox("run", str(p), "--server", dead_server())
    assert_one_line(r, 2, re.escape(str(p)) + ": " + pattern)


def test_file_of_exactly_16MiB_is_sent(tmp_path):
    p = tmp_path / "big.py"
    p.write_bytes(b"#" * (16 * 1024 * 1024 - 1) + b"\n")
    r = lockbox("run", str(p), "--server", dead_server())
    assert_one_line(r, 3, "cannot reach")


@pytest.mark.parametrize("args", [
    [], ["frobnicate"], ["run"], ["run", "a.py", "b.py"], ["--bogus"], ["-x", "health"],
    ["health", "extra"], ["run", "a.py", "--server"],
])
def test_usage_errors_exit_2(args):
    assert_one_line(lockbox(*args), 2)


def test_help_and_version():
    r = lockbox("--help")
    out = r.stdout.decode()
    assert (r.returncode, r.stderr) == (0, b""), r
    assert out.startswith("usage: lockbox run FILE"), out
    for word in ("--network", "--server", "--key", "--language", "LOCKBOX_SERVER", "LOCKBOX_KEY",
                 "API_KEY", "124", "137", "128+N"):
        assert word in out, word
    r = lockbox("--version")
    assert r.returncode == 0 and re.fullmatch(rb"lockbox \d+\.\d+\.\d+\n", r.stdout), r


# --------------------------------------------------------- health

def test_health_ok(daemon):
    r = lockbox("health", "--server", daemon.url(""))
    assert (r.returncode, r.stdout, r.stderr) == (0, b"ok\n", b""), r
    r = lockbox("health", "--server", daemon.url("/"))  # a trailing slash is fine
    assert (r.returncode, r.stdout) == (0, b"ok\n"), r


def test_health_unreachable_exits_1():
    server = dead_server()
    r = lockbox("health", "--server", server)
    assert assert_one_line(r, 1) == f"lockbox: cannot reach {server}: Connection refused\n"


# ------------------------------------------------------- defaults

def test_server_and_key_from_environment(daemon, tmp_path):
    p = program(tmp_path, "env.py", "print('via env')\n")
    env = {"LOCKBOX_SERVER": daemon.url(""), "LOCKBOX_KEY": daemon.key}
    r = lockbox("run", str(p), env=env)
    assert (r.returncode, r.stdout, r.stderr) == (0, b"via env\n", b""), r
    r = lockbox("health", env=env)
    assert (r.returncode, r.stdout) == (0, b"ok\n"), r


def test_key_precedence(daemon, tmp_path):
    p = program(tmp_path, "key.py", "print('in')\n")
    server = {"LOCKBOX_SERVER": daemon.url("")}
    # API_KEY (the daemon's own variable) is the fallback ...
    r = lockbox("run", str(p), env=dict(server, API_KEY=daemon.key))
    assert (r.returncode, r.stdout) == (0, b"in\n"), r
    # ... LOCKBOX_KEY comes before it ...
    r = lockbox("run", str(p), env=dict(server, API_KEY=daemon.key, LOCKBOX_KEY="wrong"))
    assert_one_line(r, 3, "refused the API key")
    # ... and --key / --server before the environment.
    env = {"LOCKBOX_SERVER": dead_server(), "LOCKBOX_KEY": "wrong"}
    r = lockbox("run", str(p), "--key", daemon.key, "--server", daemon.url(""), env=env)
    assert (r.returncode, r.stdout) == (0, b"in\n"), r


def test_default_key_is_dify_sandbox(lockboxd_factory, tmp_path):
    d = lockboxd_factory(app={"key": "dify-sandbox"})
    p = program(tmp_path, "default.py", "print('default key')\n")
    r = lockbox("run", str(p), env={"LOCKBOX_SERVER": d.url("")})
    assert (r.returncode, r.stdout) == (0, b"default key\n"), r


# ------------------------------------------ answers from a fake server

class FakeServer:
    """Answers every request with (status, body) and records what came."""

    def __init__(self, status, body, port=0):
        self.requests = []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def answer(self):
                n = int(self.headers.get("Content-Length") or 0)
                outer.requests.append((self.command, self.path, dict(self.headers),
                                       self.rfile.read(n)))
                self.send_response(status)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = answer

            def log_message(self, *a):
                pass

        self.srv = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.url = f"http://127.0.0.1:{self.srv.server_address[1]}"
        self.thread = threading.Thread(target=self.srv.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.srv.shutdown()
        self.srv.server_close()


@pytest.fixture
def fake():
    servers = []

    def start(status, body, port=0):
        if not isinstance(body, bytes):
            body = json.dumps(body).encode()
        servers.append(FakeServer(status, body, port))
        return servers[-1]

    yield start
    for s in servers:
        s.close()


def envelope(code, message, data=None):
    return {"code": code, "message": message, "data": data}


@pytest.mark.parametrize("status,code,message", [
    (503, -503, "Too many requests"),
    (200, -400, "code: must be a non-empty string"),
    (413, -413, "request body larger than 16777216 bytes"),
    (200, -500, "sandbox failure: mounts: Permission denied"),
])
def test_server_error_answer_exits_3(fake, tmp_path, status, code, message):
    srv = fake(status, envelope(code, message))
    r = lockbox("run", str(program(tmp_path, "ok.py", "print(1)\n")), "--server", srv.url)
    assert assert_one_line(r, 3) == f"lockbox: server error {code}: {message}\n"


@pytest.mark.parametrize("status,body", [
    (502, b"<html>bad gateway</html>"),
    (200, json.dumps(envelope(0, "success", {"stdout": "x"})).encode()),
])
def test_foreign_answer_exits_3(fake, tmp_path, status, body):
    srv = fake(status, body)
    r = lockbox("run", str(program(tmp_path, "ok.py", "print(1)\n")), "--server", srv.url)
    assert_one_line(r, 3, re.escape(srv.url) + ": ")


def test_health_of_unhealthy_server_exits_1(fake):
    srv = fake(503, envelope(-503, "server is shutting down"))
    r = lockbox("health", "--server", srv.url)
    assert assert_one_line(r, 1) == f"lockbox: {srv.url}: not healthy (HTTP 503)\n"


@pytest.mark.parametrize("flag", [[], ["--network"]], ids=["plain", "network"])
def test_request_carries_language_code_network_and_key(fake, tmp_path, flag):
    srv = fake(200, envelope(0, "success", {
        "stdout": "a\u0000b", "stderr": "", "error": "", "exit_code": 0, "status": "ok"}))
    src = "print('ünïcode \"quoted\" \\\\ ok')\n"
    p = program(tmp_path, "req.py", src)
    r = lockbox("run", str(p), *flag, "--server", srv.url + "/", "--key", KEY)
    assert (r.returncode, r.stdout, r.stderr) == (0, b"a\x00b", b""), r
    (method, path, headers, body), = srv.requests
    assert (method, path) == ("POST", "/v1/sandbox/run")
    assert headers["X-Api-Key"] == KEY
    assert headers["Content-Type"] == "application/json"
    assert json.loads(body) == {"language": "python3", "code": src,
                                "enable_network": bool(flag)}


def test_default_server_is_local_8194(fake):
    """Without --server or LOCKBOX_SERVER the client asks 127.0.0.1:8194
    (the port must be free for this test: nothing of the suite uses it)."""
    srv = fake(200, "ok", port=8194)
    r = lockbox("health")
    assert r.returncode == 0, r
    assert [(m, p) for m, p, _, _ in srv.requests] == [("GET", "/health")]
