"""The HTTP API as Dify and operators see it (docs/API.md):
routes, auth, dependency routes, form bodies, trace ids, concurrency,
keep-alive, max_requests and allowed_syscalls."""
import http.client
import json
import re
import threading
import time

import pytest
import requests

from conftest import KEY, scaled

TP_RE = re.compile(r"^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$")
AUTH_ROUTES = [
    ("POST", "/v1/sandbox/run", {"json": {"language": "python3", "code": "print(1)"}}),
    ("GET", "/v1/sandbox/dependencies?language=python3", {}),
    ("POST", "/v1/sandbox/dependencies/update", {"json": {"language": "python3"}}),
    ("GET", "/v1/sandbox/dependencies/refresh?language=python3", {}),
]


def anon():
    s = requests.Session()
    s.trust_env = False
    return s


# ------------------------------------------------------------------ routes

def test_health(daemon):
    r = anon().get(daemon.url("/health"), timeout=10)
    assert r.status_code == 200
    assert r.text == '"ok"'
    assert r.json() == "ok"
    assert TP_RE.match(r.headers["traceparent"]), r.headers


def test_unknown_path_is_404_json(daemon):
    for path in ("/", "/v1/sandbox", "/v1/sandbox/run/x", "/healthz", "/v1/sandbox/runs"):
        r = daemon.get(path)
        assert r.status_code == 404, path
        assert r.json() == {"code": -404, "message": "not found", "data": None}, path


@pytest.mark.parametrize("method,path", [("GET", "/v1/sandbox/run"), ("PUT", "/v1/sandbox/run"),
                                         ("POST", "/health"), ("DELETE", "/health"),
                                         ("POST", "/v1/sandbox/dependencies"),
                                         ("GET", "/v1/sandbox/dependencies/update")])
def test_wrong_method_is_405_json(daemon, method, path):
    r = daemon.session.request(method, daemon.url(path), timeout=10)
    assert r.status_code == 405
    body = r.json()
    assert body["code"] == -405 and body["data"] is None and body["message"] == "method not allowed"


# -------------------------------------------------------------------- auth

@pytest.mark.parametrize("method,path,kw", AUTH_ROUTES, ids=[p for _, p, _ in AUTH_ROUTES])
@pytest.mark.parametrize("key", [None, "", "wrong", KEY[:-1], KEY + "x", KEY.upper(), KEY + " x"],
                         ids=["missing", "empty", "wrong", "prefix", "longer", "upper", "suffix"])
def test_unauthorized_is_401_with_json_body(daemon, method, path, kw, key):
    headers = {} if key is None else {"X-Api-Key": key}
    r = anon().request(method, daemon.url(path), headers=headers, timeout=10, **kw)
    assert r.status_code == 401
    # the reference's 401 is empty; Dify looks only at the status, and a
    # person with curl learns what is wrong
    assert r.headers["Content-Type"] == "application/json"
    assert r.json() == {"code": -401, "message": "missing or wrong API key (X-Api-Key header)",
                        "data": None}


def test_unauthorized_run_does_not_execute(daemon, tmp_path):
    r = anon().post(daemon.url("/v1/sandbox/run"), headers={"X-Api-Key": "nope"},
                    json={"language": "python3", "code": "while True: pass"}, timeout=10)
    assert r.status_code == 401
    assert r.elapsed.total_seconds() < scaled(2)


def test_api_key_header_name_is_case_insensitive(daemon):
    r = anon().post(daemon.url("/v1/sandbox/run"), headers={"x-api-key": KEY},
                    json={"language": "python3", "code": "print('in')"}, timeout=30)
    assert r.status_code == 200
    assert r.json()["data"]["stdout"] == "in\n"


def test_health_needs_no_key(daemon):
    r = anon().get(daemon.url("/health"), headers={"X-Api-Key": "wrong"}, timeout=10)
    assert (r.status_code, r.text) == (200, '"ok"')


# ------------------------------------------------------------ dependencies

# The default daemon's requirements file installs nothing (test_deps.py
# covers real installs): the routes answer in the reference's shapes plus the
# last install's outcome.

def check_empty_listing(body):
    assert body["code"] == 0 and body["message"] == "success", body
    data = body["data"]
    assert data["dependencies"] == []
    assert data["installing"] is False
    assert data["last_install"]["status"] == "ok"
    assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$", data["last_install"]["time"])


def test_dependencies_list(daemon):
    r = daemon.get("/v1/sandbox/dependencies", params={"language": "python3"})
    assert r.status_code == 200
    check_empty_listing(r.json())


def test_dependencies_update(daemon):
    r = daemon.post("/v1/sandbox/dependencies/update", json={"language": "python3"})
    assert r.status_code == 200
    assert r.json() == {"code": 0, "message": "success", "data": {}}


def test_dependencies_refresh(daemon):
    r = daemon.get("/v1/sandbox/dependencies/refresh", params={"language": "python3"})
    assert r.status_code == 200
    check_empty_listing(r.json())


def test_ready(daemon):
    # pools may still be filling right after start-up
    deadline = time.monotonic() + 30
    while (r := anon().get(daemon.url("/ready"), timeout=10)).status_code != 200:
        assert r.status_code == 503 and time.monotonic() < deadline, r.text
        time.sleep(0.1)
    data = r.json()["data"]
    assert data["ready"] is True and data["dependencies"] == "ok", data


@pytest.mark.parametrize("method,path", [("GET", "/v1/sandbox/dependencies"),
                                         ("GET", "/v1/sandbox/dependencies/refresh")])
def test_dependencies_unsupported_language(daemon, method, path):
    r = daemon.get(path, params={"language": "ruby"})
    assert r.status_code == 400
    assert r.json() == {"code": -400, "message": "unsupported language", "data": None}


def test_dependencies_update_unsupported_language(daemon):
    r = daemon.post("/v1/sandbox/dependencies/update", json={"language": "cobol"})
    assert r.status_code == 400
    assert r.json() == {"code": -400, "message": "unsupported language", "data": None}


@pytest.mark.parametrize("method,path,kw", [
    ("GET", "/v1/sandbox/dependencies", {}),
    ("GET", "/v1/sandbox/dependencies/refresh", {}),
    ("POST", "/v1/sandbox/dependencies/update", {"json": {}}),
    ("POST", "/v1/sandbox/dependencies/update", {"json": {"language": 3}}),
], ids=["list", "refresh", "update", "update_int"])
def test_dependencies_missing_language(daemon, method, path, kw):
    r = daemon.session.request(method, daemon.url(path), timeout=10, **kw)
    assert r.status_code == 200
    body = r.json()
    assert body["code"] == -400 and body["data"] is None
    assert "language" in body["message"], body


# ------------------------------------------------------------ body formats

def test_form_encoded_run(daemon):
    r = daemon.post("/v1/sandbox/run", data={"language": "python3",
                                              "code": "print('form', 1 + 1)\nprint('&=+')",
                                              "preload": "", "enable_network": "false"})
    assert r.status_code == 200
    body = r.json()
    assert body["code"] == 0, body
    assert body["data"]["stdout"] == "form 2\n&=+\n"


def test_form_encoded_missing_code(daemon):
    r = daemon.post("/v1/sandbox/run", data={"language": "python3"})
    assert r.status_code == 200
    body = r.json()
    assert body["code"] == -400 and body["data"] is None and "code" in body["message"]


def test_json_without_content_type_and_with_charset(daemon):
    payload = json.dumps({"language": "python3", "code": "print('ct')"}).encode()
    for ct in (None, "application/json; charset=utf-8", "application/x-www-form-urlencoded"):
        headers = {"X-Api-Key": KEY}
        if ct:
            headers["Content-Type"] = ct
        r = anon().post(daemon.url("/v1/sandbox/run"), data=payload, headers=headers, timeout=30)
        assert r.status_code == 200, ct
        assert r.json()["data"]["stdout"] == "ct\n", (ct, r.text)


def test_unknown_fields_ignored_and_null_is_absent(daemon):
    d = daemon.run("print('x')", preload=None, enable_network=None, extra={"a": 1})
    assert d["code"] == 0, d
    assert d["data"]["stdout"] == "x\n"


def test_preload_ignored_when_disabled(daemon):
    d = daemon.run_data("print(globals().get('P', 'absent'))", preload="P = 'preloaded'")
    assert d["stdout"] == "absent\n"


# ---------------------------------------------------------------- tracing

def test_traceparent_is_honoured(daemon):
    trace = "4bf92f3577b34da6a3ce929d0e0e4736"
    r = daemon.run_response("print('t')", headers={
        "traceparent": f"00-{trace}-00f067aa0ba902b7-01"})
    assert r.status_code == 200
    m = TP_RE.match(r.headers["traceparent"])
    assert m, r.headers
    assert m.group(1) == trace
    assert f"trace_id={trace}" in daemon.log


def test_traceparent_generated_when_absent_or_invalid(daemon):
    ids = set()
    for tp in (None, "garbage", "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
               "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01"):
        headers = {"traceparent": tp} if tp else {}
        r = daemon.get("/health", headers=headers)
        m = TP_RE.match(r.headers["traceparent"])
        assert m, (tp, r.headers)
        assert m.group(1) != "0" * 32
        ids.add(m.group(1))
    assert len(ids) == 4


def test_log_does_not_contain_code_or_output(daemon):
    marker = "sekret-marker-5a9c"
    daemon.run_data(f"print('{marker}' * 2)")
    assert marker not in daemon.log


# ----------------------------------------------------------- concurrency

def test_twenty_concurrent_runs(daemon):
    n = 20
    results = [None] * n
    barrier = threading.Barrier(n)

    def go(i):
        s = daemon.new_session()
        barrier.wait()
        try:
            results[i] = daemon.run(
                f"import time\ntime.sleep(0.2)\nprint({i})\nprint('err{i}', file=__import__('sys').stderr)",
                session=s)
        except Exception as e:  # reported below
            results[i] = e

    ts = [threading.Thread(target=go, args=(i,)) for i in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(120)
    for i, r in enumerate(results):
        assert isinstance(r, dict), (i, r)
        assert r["code"] == 0, (i, r)
        assert r["data"]["stdout"] == f"{i}\n", (i, r)
        assert r["data"]["stderr"] == f"err{i}\n", (i, r)
        assert r["data"]["exit_code"] == 0


def test_thirty_sequential_runs_over_one_keepalive_connection(daemon):
    conn = http.client.HTTPConnection("127.0.0.1", daemon.port, timeout=30)
    ports = set()
    try:
        for i in range(30):
            body = json.dumps({"language": "python3", "code": f"print({i} * {i})"})
            conn.request("POST", "/v1/sandbox/run", body=body,
                         headers={"X-Api-Key": KEY, "Content-Type": "application/json"})
            resp = conn.getresponse()
            data = json.loads(resp.read())
            assert resp.status == 200
            assert resp.getheader("Connection", "").lower() != "close"
            assert data["data"]["stdout"] == f"{i * i}\n", data
            ports.add(conn.sock.getsockname()[1])
    finally:
        conn.close()
    assert len(ports) == 1, f"connection was not kept alive: {len(ports)} connections"


def test_thirty_sequential_runs_on_session(daemon):
    s = daemon.new_session()
    for i in range(30):
        r = daemon.run(f"print('seq', {i})", session=s)
        assert r["data"]["stdout"] == f"seq {i}\n"


def test_max_requests_gives_503(lockboxd_factory):
    d = lockboxd_factory(max_requests=2, max_workers=1)
    n = 6
    results = [None] * n
    barrier = threading.Barrier(n)

    def go(i):
        s = d.new_session()
        barrier.wait()
        try:
            r = d.run_response(f"import time\ntime.sleep(1)\nprint({i})", session=s)
            results[i] = (r.status_code, r.json())
        except Exception as e:
            results[i] = e

    ts = [threading.Thread(target=go, args=(i,)) for i in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(60)
    busy = [r for r in results if isinstance(r, tuple) and r[0] == 503]
    ok = [(i, r) for i, r in enumerate(results) if isinstance(r, tuple) and r[0] == 200]
    assert len(busy) + len(ok) == n, results
    assert busy, results
    assert ok, results
    for _, body in busy:
        assert body == {"code": -503, "message": "Too many requests", "data": None}
    for i, (_, body) in ok:
        assert body["code"] == 0 and body["data"]["stdout"] == f"{i}\n", body
    # with 2 slots and all 6 arriving at once, exactly 2 are served
    assert len(ok) == 2, results
    d.assert_serving()


def test_max_workers_queue_runs_without_refusing(lockboxd_factory):
    """Runs beyond max_workers but within max_requests wait, then run; the
    wait does not count against worker_timeout."""
    d = lockboxd_factory(max_requests=10, max_workers=1, worker_timeout=2)
    n = 3
    results = [None] * n

    def go(i):
        results[i] = d.run(f"import time\ntime.sleep(0.9)\nprint({i})", session=d.new_session())

    ts = [threading.Thread(target=go, args=(i,)) for i in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(60)
    for i, r in enumerate(results):
        assert r["code"] == 0, r
        assert r["data"]["status"] == "ok" and r["data"]["stdout"] == f"{i}\n", r


# -------------------------------------------------------- allowed_syscalls

def test_allowed_syscalls_adds_to_defaults(lockboxd_factory):
    d = lockboxd_factory(allowed_syscalls=["personality"])
    data = d.run_data("import ctypes\nprint(ctypes.CDLL(None).personality(0xffffffff))\n"
                      "import json, threading\nprint(json.dumps([1]))")
    assert data["exit_code"] == 0, data
    assert data["status"] == "ok"
    assert data["stdout"] == "0\n[1]\n"
    # the defaults are still in force: fork EPERM, mount stops the run
    data = d.run_data("import os\nos.fork()")
    assert data["exit_code"] == 1 and "operation not permitted" in data["error"].lower()
    data = d.run_data("import ctypes\nctypes.CDLL(None).mount(b'n', b'/tmp', b'tmpfs', 0, None)")
    assert data["exit_code"] == -1
    assert "syscall 'mount' is not allowed" in data["error"]


def test_personality_denied_by_default(daemon):
    data = daemon.run_data("import ctypes\nprint(ctypes.CDLL(None).personality(0xffffffff))")
    assert data["exit_code"] == -1
    assert data["status"] == "syscall_denied"
    assert "error: operation not permitted: syscall 'personality' is not allowed" in data["error"]
