"""The shell-job API's listener (docs/API.md, "Shell jobs"), as a client
of the real daemon sees it before any call reaches the jailer: it listens
only with shell.enabled, /healthz is open, every other route needs the
bearer token, routing failures are Go's plain-text 404 and 405 (with
Allow), ids that cannot be a job's and malformed requests are answered
by the HTTP process itself, bodies are bounded, slow clients are cut, and
the code API keeps working beside it. A port already taken stops
start-up with a clear line."""
import json
import os
import socket
import subprocess
import tempfile

import pytest
import requests

from conftest import LOCKBOXD, free_port, scaled

TOKEN = "shell-test-token-5c1e"
JOB = "0123456789abcdef"
JSON = "application/json"
TEXT = "text/plain; charset=utf-8"


def anon():
    s = requests.Session()
    s.trust_env = False
    return s


def bearer(token=TOKEN):
    return {"Authorization": f"Bearer {token}"}


def error(code, message):
    return json.dumps({"error": {"code": code, "message": message}}, separators=(",", ":")) + "\n"


def shell_config(parent, **extra):
    """shell.* of a test daemon: on loopback, its state and jobs' home in
    a directory of its own (no file system image), never the host's."""
    top = tempfile.mkdtemp(prefix="shell-", dir=parent)
    os.chmod(top, 0o755)
    cfg = {"enabled": True, "listen": "127.0.0.1", "port": free_port(),
           "state_dir": os.path.join(top, "state"), "home": os.path.join(top, "home"),
           "disk_size": 0}
    cfg.update(extra)
    return cfg


@pytest.fixture(scope="module")
def sd(module_daemon_factory, _session_tmp):
    """A daemon with the shell API on a port of its own, and a header
    deadline short enough to watch."""
    d = module_daemon_factory(server={"header_timeout": 2},
                              shell=shell_config(_session_tmp, token=TOKEN))
    d.shell_port = d.base_config["shell"]["port"]
    return d


def shell_url(d, path):
    return f"http://127.0.0.1:{d.shell_port}{path}"


def call(d, method, path, headers=None, **kw):
    kw.setdefault("timeout", 30)
    return anon().request(method, shell_url(d, path), headers=headers, **kw)


def expect(r, status, body, content_type=JSON):
    assert (r.status_code, r.text) == (status, body), (r.status_code, r.text)
    assert r.headers["Content-Type"] == content_type, r.headers


def test_healthz_is_open(sd):
    expect(call(sd, "GET", "/healthz"), 200, '{"status":"ok"}\n')
    expect(call(sd, "GET", "/healthz", headers=bearer("wrong")), 200, '{"status":"ok"}\n')
    r = call(sd, "HEAD", "/healthz")
    assert (r.status_code, r.content) == (200, b""), r
    assert r.headers["Content-Length"] == str(len('{"status":"ok"}\n')), r.headers


@pytest.mark.parametrize("headers", [
    None,
    {"Authorization": TOKEN},
    {"Authorization": f"bearer {TOKEN}"},
    {"Authorization": f"Bearer  {TOKEN}"},
    {"Authorization": f"Bearer {TOKEN}x"},
    {"Authorization": f"Bearer {TOKEN[:-1]}"},
    {"X-Api-Key": TOKEN},
])
def test_routes_need_the_exact_bearer_token(sd, headers):
    for method, path in [("GET", "/v1/jobs"), ("POST", "/v1/jobs/run"),
                         ("GET", f"/v1/jobs/{JOB}"), ("DELETE", f"/v1/jobs/{JOB}"),
                         ("POST", f"/v1/jobs/{JOB}/wait"), ("GET", f"/v1/jobs/{JOB}/log/tail")]:
        r = call(sd, method, path, headers=headers, data=b"{}" if method == "POST" else None)
        expect(r, 401, error("unauthorized", "Missing or invalid bearer token"))


def test_unknown_paths_and_wrong_methods(sd):
    for path in ["/", "/health", "/v1/sandbox/run", "/v1/jobs/", f"/v1/jobs/{JOB}/log",
                 f"/v1/jobs/{JOB}/wait/x"]:
        expect(call(sd, "GET", path, headers=bearer()), 404, "404 page not found\n", TEXT)
    for method, path, allow in [("POST", "/healthz", "GET, HEAD"),
                                ("DELETE", "/v1/jobs", "GET, HEAD"),
                                ("PUT", "/v1/jobs/run", "DELETE, GET, HEAD, POST"),
                                ("POST", f"/v1/jobs/{JOB}", "DELETE, GET, HEAD"),
                                ("GET", f"/v1/jobs/{JOB}/wait", "POST")]:
        r = call(sd, method, path, headers=bearer())
        expect(r, 405, "Method Not Allowed\n", TEXT)
        assert r.headers["Allow"] == allow, (method, path, r.headers)


def test_ids_that_cannot_be_a_job_are_not_found(sd):
    not_found = error("job_not_found", "Unknown job id")
    for method, path, body in [("GET", "/v1/jobs/run", None),
                               ("GET", f"/v1/jobs/{JOB.upper()}", None),
                               ("DELETE", f"/v1/jobs/{JOB}0?force=true", None),
                               ("POST", "/v1/jobs/x/wait", b'{"timeout":0}'),
                               ("POST", "/v1/jobs/x/input", b'{"text":"y\\n"}'),
                               ("POST", "/v1/jobs/x/terminate", b""),
                               ("GET", "/v1/jobs/x/log/tail?output_limit=5", None)]:
        expect(call(sd, method, path, headers=bearer(), data=body), 404, not_found)
    # the body is decoded first, as in the reference
    expect(call(sd, "POST", "/v1/jobs/x/wait", headers=bearer(), data=b""), 400,
           error("invalid_request", "Invalid JSON body"))


@pytest.mark.parametrize("body,status,code,message", [
    (b"", 400, "invalid_request", "Invalid JSON body"),
    (b"[]", 400, "invalid_request", "Invalid JSON body"),
    (b'{"script":"true","timeout":"5"}', 400, "invalid_request", "Invalid JSON body"),
    (b'{"script":""}', 400, "invalid_request", "script is required"),
    (b'{"script":"true","env":{"":"x"}}', 422, "validation_error", "env names must be non-empty"),
    (b'{"script":"true","env":{"A=B":"x"}}', 422, "validation_error",
     "env name must not contain '=': \"A=B\""),
    (b'{"script":"true","env":{"A":"x\\u0000"}}', 422, "validation_error",
     "env entries must not contain NUL"),
    (b'{"script":"true","mode":"stdout"}', 422, "validation_error", 'invalid job mode "stdout"'),
    (b'{"script":"true","terminal":{"cols":5000,"rows":10}}', 422, "validation_error",
     "terminal cols and rows must be at most 4096"),
    (b'{"script":"true","session_id":"a/b"}', 422, "validation_error",
     "session_id must be a non-empty string of letters, digits, '-', or '_' (max 128 chars)"),
])
def test_run_requests_refused_before_the_jailer(sd, body, status, code, message):
    expect(call(sd, "POST", "/v1/jobs/run", headers=bearer(), data=body), status,
           error(code, message))


def test_offsets_must_not_be_negative(sd):
    expect(call(sd, "POST", f"/v1/jobs/{JOB}/wait", headers=bearer(), data=b'{"offset":-1}'),
           400, error("invalid_offset", "offset -1 is negative"))


def test_bodies_are_bounded(sd):
    # a wait or terminate body is a small JSON object
    big = b'{"timeout":0,"pad":"' + b"x" * 5000 + b'"}'
    expect(call(sd, "POST", f"/v1/jobs/{JOB}/wait", headers=bearer(), data=big), 413,
           error("request_too_large", "request body larger than 4096 bytes"))
    # an input's text up to 1 MiB
    big = b'{"text":"' + b"x" * (1 << 20) + b'"}'
    expect(call(sd, "POST", f"/v1/jobs/{JOB}/input", headers=bearer(), data=big), 413,
           error("request_too_large", "request body larger than 1048576 bytes"))
    expect(call(sd, "GET", "/v1/jobs", headers=bearer(), data=b"{}"), 413,
           error("request_too_large", "GET /v1/jobs takes no request body"))


def test_slow_headers_are_cut(sd):
    with socket.create_connection(("127.0.0.1", sd.shell_port), timeout=scaled(15)) as s:
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")  # and never the blank line
        assert s.recv(100) == b""  # closed by the header deadline (2 s), not the socket timeout


def test_code_api_beside_the_shell_api(sd):
    d = sd.run_data("print(6 * 7)")
    assert d["stdout"] == "42\n", d
    # each port has its own routes
    r = anon().get(sd.url("/healthz"), timeout=10)
    assert (r.status_code, r.json()["code"]) == (404, -404), r.text
    expect(call(sd, "GET", "/health"), 404, "404 page not found\n", TEXT)
    assert sd.proc.poll() is None


def test_nothing_listens_when_disabled(lockboxd_factory, _session_tmp):
    port = free_port()
    d = lockboxd_factory(shell=shell_config(_session_tmp, enabled=False, port=port))
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
    assert "event=http.listening" in d.log and "shell=off" in d.log, d.log


def test_token_from_the_environment(lockboxd_factory, _session_tmp):
    d = lockboxd_factory(_env={"SHELLCTL_AUTH_TOKEN": "from-env-91"},
                         shell=shell_config(_session_tmp))
    d.shell_port = d.base_config["shell"]["port"]
    expect(call(d, "GET", "/v1/jobs/run", headers=bearer("from-env-91")), 404,
           error("job_not_found", "Unknown job id"))
    expect(call(d, "GET", "/v1/jobs/run", headers=bearer()), 401,
           error("unauthorized", "Missing or invalid bearer token"))


def test_refuses_shell_port_in_use(tmp_path):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(1)
    port = s.getsockname()[1]
    cfg = tmp_path / "config.yaml"
    cfg.write_text(f"app:\n  port: {free_port()}\nserver:\n  listen: 127.0.0.1\n"
                   f"shell:\n  enabled: true\n  listen: 127.0.0.1\n  port: {port}\n"
                   f"  state_dir: {tmp_path}/state\n  home: {tmp_path}/home\n  disk_size: 0\n")
    p = subprocess.run([LOCKBOXD, "--config", str(cfg)], capture_output=True, timeout=30,
                       env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"})
    s.close()
    err = p.stderr.decode()
    assert p.returncode == 1, err
    assert err.strip().splitlines()[-1] == (
        f"lockboxd: cannot listen on 127.0.0.1 port {port} (shell.port): Address already in "
        "use; another process (another lockboxd, or shellctl?) holds it"), err
