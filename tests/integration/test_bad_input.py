"""Bad input (docs/API.md, errors): every malformed request gets a clear JSON
error and nothing else happens; the service keeps serving after each."""
import json
import socket
import threading
import time

import pytest

from conftest import KEY, raw_post, scaled


def raw_exchange(port, data, timeout=None, send_in_thread=False):
    """Send raw bytes, return (status, headers, body) of the first response
    (status None if the server closed without answering)."""
    s = socket.create_connection(("127.0.0.1", port),
                                 timeout=scaled(10) if timeout is None else timeout)
    try:
        def send():
            try:
                s.sendall(data)
            except OSError:
                pass  # the server may answer and close before reading it all
        t = None
        if send_in_thread:
            t = threading.Thread(target=send, daemon=True)
            t.start()
        else:
            send()
        buf = b""
        while b"\r\n\r\n" not in buf:
            try:
                chunk = s.recv(65536)
            except ConnectionResetError:
                chunk = b""
            except socket.timeout:
                return "timeout", {}, buf
            if not chunk:
                return None, {}, buf
            buf += chunk
        head, body = buf.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        headers = {k.strip().lower(): v.strip() for k, v in
                   (l.split(":", 1) for l in lines[1:] if ":" in l)}
        n = int(headers.get("content-length", "0"))
        while len(body) < n:
            try:
                chunk = s.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            body += chunk
        return status, headers, body[:n]
    finally:
        s.close()


def post_bytes(daemon, body, content_type="application/json"):
    r = daemon.post("/v1/sandbox/run", data=body, headers={"Content-Type": content_type})
    return r.status_code, r.json()


@pytest.fixture(autouse=True)
def still_serving_afterwards(request):
    """After every bad request: /health answers and a normal run works."""
    # resolved before the test so they outlive it (teardown is LIFO)
    targets = [request.getfixturevalue(real) for name, real in
               (("daemon", "_default_daemon"), ("capped", "capped"))
               if name in request.fixturenames]
    yield
    for d in targets:
        d.assert_serving()


def assert_field_error(status, body, field):
    assert status == 200, (status, body)
    assert body["code"] == -400, body
    assert body["data"] is None, body
    assert isinstance(body["message"], str) and field in body["message"], body


# ------------------------------------------------------------ JSON shape

@pytest.mark.parametrize("raw", [
    b'{"language":"python3","code":"print(1)"',
    b'{"language":"python3","code":"print(1)',
    b'{"language":"python3",',
    b'{',
], ids=["no_brace", "in_string", "after_comma", "lone_brace"])
def test_truncated_json(daemon, raw):
    status, body = post_bytes(daemon, raw)
    assert_field_error(status, body, "JSON")
    daemon.assert_serving()


@pytest.mark.parametrize("raw", [
    b"not json at all",
    b"{language: python3, code: print(1)}",
    b"{'language': 'python3', 'code': 'print(1)'}",
    b'{"language":"python3","code":"print(1)"} trailing',
    b'{"language":"python3","code":"print(1)",}',
    b"[" * 50000 + b"]" * 50000,
], ids=["text", "unquoted", "single_quotes", "trailing", "trailing_comma", "deep_nesting"])
def test_invalid_json(daemon, raw):
    status, body = post_bytes(daemon, raw)
    assert status == 200
    assert body["code"] == -400 and body["data"] is None, body
    assert "JSON" in body["message"], body
    daemon.assert_serving()


@pytest.mark.parametrize("raw", [b"[]", b'"python3"', b"null", b"42", b"true"])
def test_json_that_is_not_an_object(daemon, raw):
    status, body = post_bytes(daemon, raw)
    assert status == 200
    assert body["code"] == -400 and body["data"] is None, body
    assert "object" in body["message"], body


def test_empty_body(daemon):
    status, body = post_bytes(daemon, b"")
    assert status == 200
    assert body["code"] == -400 and body["data"] is None, body
    assert body["message"], body
    daemon.assert_serving()


# ---------------------------------------------------------------- fields

@pytest.mark.parametrize("field,value", [
    ("language", 3), ("language", None), ("language", ["python3"]), ("language", {"a": 1}),
    ("language", True),
    ("code", 3), ("code", ["print(1)"]), ("code", {"c": 1}), ("code", False), ("code", 1.5),
    ("preload", 5), ("preload", ["x"]), ("preload", True),
    ("enable_network", "yes"), ("enable_network", "true"), ("enable_network", 1),
    ("enable_network", ["x"]),
])
def test_wrong_type(daemon, field, value):
    body = {"language": "python3", "code": "print(1)", "preload": "", "enable_network": False}
    body[field] = value
    status, resp = post_bytes(daemon, json.dumps(body).encode())
    assert_field_error(status, resp, field)
    daemon.assert_serving()


@pytest.mark.parametrize("missing", ["language", "code"])
def test_missing_required_field(daemon, missing):
    body = {"language": "python3", "code": "print(1)"}
    del body[missing]
    status, resp = post_bytes(daemon, json.dumps(body).encode())
    assert_field_error(status, resp, missing)


@pytest.mark.parametrize("field", ["language", "code"])
def test_empty_required_field(daemon, field):
    body = {"language": "python3", "code": "print(1)"}
    body[field] = ""
    status, resp = post_bytes(daemon, json.dumps(body).encode())
    assert_field_error(status, resp, field)


@pytest.mark.parametrize("language", ["ruby", "python2", "PYTHON3", "python3 ", "javascript"])
def test_unsupported_language(daemon, language):
    r = daemon.run_response("print(1)", language=language)
    assert r.status_code == 400
    assert r.json() == {"code": -400, "message": "unsupported language", "data": None}


@pytest.mark.parametrize("field", ["code", "language"])
def test_nul_byte(daemon, field):
    body = {"language": "python3", "code": "print('a')"}
    body[field] = body[field] + "\u0000print('b')"
    raw = json.dumps(body).encode()
    assert b"\\u0000" in raw
    status, resp = post_bytes(daemon, raw)
    assert_field_error(status, resp, field)
    daemon.assert_serving()


@pytest.mark.parametrize("bad", [b"\xff", b"\xc3\x28", b"\xe2\x82", b"\xed\xa0\x80", b"\xc0\xaf"],
                         ids=["ff", "bad_continuation", "truncated_seq", "surrogate", "overlong"])
def test_invalid_utf8_in_body(daemon, bad):
    raw = b'{"language":"python3","code":"print(\'' + bad + b'\')"}'
    status, resp = post_bytes(daemon, raw)
    assert status == 200
    assert resp["code"] == -400 and resp["data"] is None, resp
    assert resp["message"], resp
    daemon.assert_serving()


def test_invalid_utf8_in_form_body(daemon):
    status, resp = post_bytes(daemon, b"language=python3&code=print(%27%FF%27)",
                              content_type="application/x-www-form-urlencoded")
    assert_field_error(status, resp, "code")


def test_large_code_is_fine(daemon):
    src = "# " + "x" * (1 << 20) + "\nprint('big')"
    d = daemon.run_data(src)
    assert d["stdout"] == "big\n"


# ------------------------------------------------------------ transport

@pytest.fixture(scope="module")
def capped(module_daemon_factory):
    return module_daemon_factory(server={"max_body_bytes": "64K"})


def test_oversized_body_declared_length(capped):
    body = json.dumps({"language": "python3", "code": "#" + "x" * 100_000}).encode()
    status, headers, resp = raw_exchange(capped.port, raw_post("/v1/sandbox/run", body),
                                         send_in_thread=True)
    assert status == 413, (status, resp)
    assert json.loads(resp) == {"code": -413, "message": "request body larger than 65536 bytes",
                                "data": None}
    capped.assert_serving()


def test_oversized_body_chunked(capped):
    body = json.dumps({"language": "python3", "code": "#" + "x" * 100_000}).encode()
    chunks = b"".join(b"%x\r\n%s\r\n" % (len(body[i:i + 8192]), body[i:i + 8192])
                      for i in range(0, len(body), 8192)) + b"0\r\n\r\n"
    req = (f"POST /v1/sandbox/run HTTP/1.1\r\nHost: x\r\nX-Api-Key: {KEY}\r\n"
           "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n"
           "Connection: close\r\n\r\n").encode() + chunks
    status, headers, resp = raw_exchange(capped.port, req, send_in_thread=True)
    assert status == 413, (status, resp)
    assert json.loads(resp)["code"] == -413
    capped.assert_serving()


def test_oversized_body_via_requests(capped):
    r = capped.post("/v1/sandbox/run", json={"language": "python3", "code": "#" * 70_000})
    assert r.status_code == 413
    assert r.json()["code"] == -413


def test_body_just_under_cap_runs(capped):
    src = "#" + "y" * (60 * 1024) + "\nprint('fits')"
    d = capped.run_data(src)
    assert d["stdout"] == "fits\n"


def test_unauthorized_oversized_body_is_401(capped):
    body = b"x" * 100_000
    req = (f"POST /v1/sandbox/run HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n"
           "Connection: close\r\n\r\n").encode() + body
    status, _, resp = raw_exchange(capped.port, req, send_in_thread=True)
    assert status == 401 and b'"code":-401' in resp


MALFORMED_HTTP = {
    "garbage": b"GARBAGE\r\n\r\n",
    "two_words": b"A B\r\n\r\n",
    "bad_version": b"POST /v1/sandbox/run HTTP/9.9\r\nHost: x\r\n\r\n",
    "negative_length": b"POST /v1/sandbox/run HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n",
    "text_length": b"POST /v1/sandbox/run HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n",
    "huge_header": (f"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: {'a' * 100_000}\r\n"
                    "Connection: close\r\n\r\n").encode(),
    "binary": b"\x00\x01\x02\xff\r\n\r\n",
}


@pytest.mark.parametrize("name", sorted(MALFORMED_HTTP))
def test_malformed_http_keeps_serving(daemon, name):
    """Whatever the answer to a malformed request, it harms no one else."""
    status, _, _ = raw_exchange(daemon.port, MALFORMED_HTTP[name], timeout=scaled(2),
                                send_in_thread=True)
    assert status in (None, "timeout") or 400 <= status < 600, status
    daemon.assert_serving()


# Requests that are not parseable HTTP at all ("garbage", "binary", an
# unsupported HTTP version, an unparseable Content-Length) are refused by
# libmicrohttpd before lockbox sees them, with its own short HTML body (see
# docs/API.md); test_malformed_http_keeps_serving covers them. Oversized
# headers are lockbox's to answer, in JSON.
@pytest.mark.parametrize("name", ["huge_header"])
def test_malformed_http_gets_one_json_error(daemon, name):
    """Every response body is JSON, and every malformed
    request lockbox can see gets a clear JSON error."""
    s = socket.create_connection(("127.0.0.1", daemon.port), timeout=scaled(5))
    raw = b""
    try:
        try:
            s.sendall(MALFORMED_HTTP[name])
        except OSError:
            pass
        while True:
            try:
                chunk = s.recv(65536)
            except (ConnectionResetError, socket.timeout):
                break
            if not chunk:
                break
            raw += chunk
    finally:
        s.close()
    assert raw.startswith(b"HTTP/1.1 4") or raw.startswith(b"HTTP/1.1 5"), \
        f"no HTTP error response at all: {raw[:200]!r}"
    assert raw.count(b"HTTP/1.1 ") == 1, f"more than one status line: {raw[:400]!r}"
    head, body = raw.split(b"\r\n\r\n", 1)
    assert b"content-type: application/json" in head.lower(), raw[:400]
    doc = json.loads(body)
    assert doc["code"] < 0 and doc["data"] is None and doc["message"], doc


def test_huge_header(daemon):
    status, headers, body = raw_exchange(daemon.port, MALFORMED_HTTP["huge_header"],
                                         send_in_thread=True)
    assert status == 431, (status, body[:200])
    assert json.loads(body) == {"code": -431, "data": None,
                                "message": "request headers larger than 65536 bytes"}
    daemon.assert_serving()


def test_many_headers(daemon):
    hdrs = "".join(f"X-H{i}: {'v' * 50}\r\n" for i in range(3000))
    req = f"GET /health HTTP/1.1\r\nHost: x\r\n{hdrs}Connection: close\r\n\r\n".encode()
    status, _, body = raw_exchange(daemon.port, req, send_in_thread=True)
    assert status is not None and 400 <= status < 500, (status, body[:200])
    daemon.assert_serving()


def test_huge_api_key_header(daemon):
    r = daemon.post("/v1/sandbox/run", headers={"X-Api-Key": "k" * 50_000},
                    json={"language": "python3", "code": "print(1)"})
    assert 400 <= r.status_code < 500
    daemon.assert_serving()


def test_slow_client_does_not_block_others(daemon):
    """A client that sends half a request and stalls holds only its own
    connection."""
    stalled = []
    try:
        for part in (b"POST /v1/sandbox/run HTTP/1.1\r\nHost: x\r\nX-Api-",
                     raw_post("/v1/sandbox/run", b'{"language":"python3","code":"print(1)"}')[:-20]):
            s = socket.create_connection(("127.0.0.1", daemon.port))
            s.sendall(part)
            stalled.append(s)
        t0 = time.monotonic()
        for _ in range(3):
            daemon.assert_serving()
        assert time.monotonic() - t0 < scaled(10)
    finally:
        for s in stalled:
            s.close()
    daemon.assert_serving()


def test_client_disconnects_mid_run(daemon):
    """The client goes away while its run is executing: the run still ends,
    nothing of it is left, and the daemon keeps serving."""
    body = json.dumps({"language": "python3", "code": "import time\ntime.sleep(1)\nprint(1)"})
    s = socket.create_connection(("127.0.0.1", daemon.port))
    s.sendall(raw_post("/v1/sandbox/run", body.encode()))
    time.sleep(0.3)
    s.close()
    daemon.assert_serving()
    deadline = time.monotonic() + scaled(10)
    while time.monotonic() < deadline:
        try:
            daemon.assert_idle()
            break
        except AssertionError:
            time.sleep(0.1)
    daemon.assert_idle()


def test_pipelined_requests(daemon):
    one = b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n"
    s = socket.create_connection(("127.0.0.1", daemon.port), timeout=scaled(10))
    try:
        s.sendall(one * 3)
        buf = b""
        deadline = time.monotonic() + scaled(10)
        while buf.count(b'"ok"') < 3 and time.monotonic() < deadline:
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
        assert buf.count(b"HTTP/1.1 200") == 3, buf
    finally:
        s.close()


def test_stalled_clients_are_dropped_after_connection_timeout(lockboxd_factory):
    """Slow clients cannot hold the server: with every connection slot
    taken by stalled half-requests (authorized, body promised but not
    sent), the idle timeout frees them and the service comes back."""
    d = lockboxd_factory(server={"connection_timeout": 1, "max_connections": 4})
    half = raw_post("/v1/sandbox/run", b'{"language":"python3","code":"print(1)"}' + b" " * 60)
    half = half[:half.index(b"\r\n\r\n") + 5]  # headers and one byte of the body
    stalled = []
    try:
        for _ in range(4):
            s = socket.create_connection(("127.0.0.1", d.port), timeout=scaled(6))
            s.sendall(half)
            stalled.append(s)
        t0 = time.monotonic()
        for s in stalled:
            try:
                while s.recv(4096):
                    pass  # an error reply is fine; then the server must close
            except ConnectionResetError:
                pass
        waited = time.monotonic() - t0
        # the lower bound is connection_timeout (1 s, not scaled) less slack
        assert 0.5 <= waited < scaled(4), f"stalled connections were dropped after {waited:.1f} s"
    finally:
        for s in stalled:
            s.close()
    d.assert_serving()


# ------------------------------------------- what clients without the key hold

def http_rss(daemon):
    from conftest import children_of, proc_status
    kid = [k for k in children_of(daemon.pid) if (proc_status(k) or {}).get("Name") == "lockboxd"][0]
    return int(proc_status(kid)["VmRSS"].split()[0]) * 1024


@pytest.mark.parametrize("path", ["/health", "/ready", "/metrics"])
def test_routes_without_a_body_refuse_one(daemon, path):
    """No key is needed on these routes, so none of them may make the
    server hold a body: a declared one is refused before it is read."""
    status, _, body = raw_exchange(
        daemon.port, (f"GET {path} HTTP/1.1\r\nHost: x\r\nContent-Length: 15000000\r\n"
                      "Connection: close\r\n\r\n").encode() + b"x" * 65536, send_in_thread=True)
    assert status == 413, (status, body[:200])
    assert json.loads(body) == {"code": -413, "data": None,
                                "message": f"GET {path} takes no request body"}
    daemon.assert_serving()


def test_unauthenticated_bodies_are_not_buffered(daemon):
    """Six clients without a key each stream 15 MB of chunked body to
    /health (no length declared): the HTTP process reads and drops it; it
    grew by 86-112 MiB when it kept them."""
    before = http_rss(daemon)
    chunk = b"%x\r\n%s\r\n" % (1 << 20, b"y" * (1 << 20))

    def client(res, i):
        s = socket.create_connection(("127.0.0.1", daemon.port), timeout=scaled(30))
        try:
            s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
            for _ in range(15):
                s.sendall(chunk)
            s.sendall(b"0\r\n\r\n")
            res[i] = s.recv(4096)
        except OSError as e:
            res[i] = repr(e).encode()
        finally:
            s.close()
    res = [b""] * 6
    ts = [threading.Thread(target=client, args=(res, i)) for i in range(6)]
    for t in ts:
        t.start()
    peak = before
    while any(t.is_alive() for t in ts):
        peak = max(peak, http_rss(daemon))
        time.sleep(0.01)
    for r in res:
        assert r.startswith(b"HTTP/1.1 413") or b"Reset" in r or b"Broken" in r or r == b"", r[:200]
    assert peak - before < 16 << 20, f"HTTP process grew by {(peak - before) >> 20} MiB"
    daemon.assert_serving()


def test_dependencies_update_takes_only_a_small_body(daemon):
    r = daemon.post("/v1/sandbox/dependencies/update",
                    data=json.dumps({"language": "python3", "pad": "x" * 10000}),
                    headers={"Content-Type": "application/json"})
    assert r.status_code == 413, r.text
    assert r.json() == {"code": -413, "data": None,
                        "message": "request body larger than 4096 bytes"}


def test_one_address_cannot_take_every_connection(lockboxd_factory):
    """server.max_connections_per_ip: idle connections from one address
    (here 127.0.0.2) beyond it are closed at accept, and a client on
    another address is served."""
    d = lockboxd_factory(server={"max_connections_per_ip": 4})
    held = []
    try:
        for _ in range(4):
            s = socket.socket()
            s.bind(("127.0.0.2", 0))
            s.connect(("127.0.0.1", d.port))
            held.append(s)
        s = socket.socket()
        s.bind(("127.0.0.2", 0))
        s.settimeout(scaled(5))
        s.connect(("127.0.0.1", d.port))
        held.append(s)
        s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        try:
            got = s.recv(100)
        except ConnectionResetError:
            got = b""
        assert got == b"", got  # closed at accept: no answer
        r = d.new_session().get(d.url("/health"), timeout=scaled(5))
        assert (r.status_code, r.text) == (200, '"ok"')
    finally:
        for s in held:
            s.close()


# ------------------------------------------------- deadlines for slow clients

def closed_by_server(s, within):
    """True if the server ends the connection within `within` seconds
    (EOF or reset), reading and dropping whatever it sends first."""
    s.settimeout(within)
    try:
        while s.recv(4096):
            pass
        return True
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


def drip(socks, data, every, stop):
    """Send data one byte at a time to every socket, a byte each `every`
    seconds (each byte resets an idle timeout), until stop is set."""
    i = 0
    while not stop.wait(every):
        for s in list(socks):
            try:
                s.send(data[i % len(data):i % len(data) + 1])
            except OSError:
                socks.remove(s)
        i += 1


def deadline_closed(d, phase):
    import re
    text = d.new_session().get(d.url("/metrics"), timeout=scaled(5)).text
    m = re.search(r'^lockbox_http_deadline_closed_total\{phase="%s"\} (\d+)' % phase, text, re.M)
    assert m, text[:2000]
    return int(m.group(1))


@pytest.mark.parametrize("phase", ["headers", "body"])
def test_a_trickling_request_is_cut_at_its_deadline(lockboxd_factory, phase):
    """server.header_timeout / server.body_timeout: a client that sends a
    byte every 0.2 s never trips the idle timeout (30 s), but its request
    must arrive in full within the deadline (1 s), or it is disconnected."""
    d = lockboxd_factory(server={"connection_timeout": 30, "header_timeout": 1,
                                 "body_timeout": 1})
    body = b'{"language":"python3","code":"print(1)"}' + b" " * 200
    req = raw_post("/v1/sandbox/run", body)
    head, rest = req[:req.index(b"\r\n\r\n") + 4], body
    s = socket.create_connection(("127.0.0.1", d.port))
    stop = threading.Event()
    socks = [s]
    if phase == "headers":
        s.sendall(head[:20])
        feeder = threading.Thread(target=drip, args=(socks, head[20:], 0.2, stop))
    else:
        s.sendall(head + rest[:5])
        feeder = threading.Thread(target=drip, args=(socks, rest[5:], 0.2, stop))
    t0 = time.monotonic()
    feeder.start()
    try:
        assert closed_by_server(s, scaled(6)), f"a trickling {phase} was never cut"
        waited = time.monotonic() - t0
        assert 0.7 <= waited < scaled(3), f"cut after {waited:.1f} s (deadline 1 s)"
    finally:
        stop.set()
        feeder.join()
        s.close()
    assert deadline_closed(d, phase) == 1
    d.assert_serving()


def test_deadlines_spare_kept_alive_clients(lockboxd_factory):
    """A keep-alive client (Dify's HTTP client keeps its connections) that
    stays idle longer than header_timeout between requests, and sends a
    large body at full speed, is served on the same connection."""
    d = lockboxd_factory(server={"connection_timeout": 5, "header_timeout": 1,
                                 "body_timeout": 1})
    code = "print('kept')\n#" + "x" * (4 << 20)
    body = json.dumps({"language": "python3", "code": code}).encode()
    s = socket.create_connection(("127.0.0.1", d.port), timeout=scaled(20))
    try:
        for i in range(2):
            if i:
                time.sleep(2.5)  # idle: longer than header_timeout, shorter than the idle limit
            s.sendall(raw_post("/v1/sandbox/run", body, close=False))
            got = b""
            while b"\r\n\r\n" not in got or not got.rstrip().endswith(b"}"):
                chunk = s.recv(65536)
                assert chunk, f"request {i}: the server closed the connection: {got!r}"
                got += chunk
            assert got.startswith(b"HTTP/1.1 200"), got[:300]
            assert b'"stdout":"kept\\n"' in got, got[-300:]
    finally:
        s.close()
    assert deadline_closed(d, "headers") == deadline_closed(d, "body") == 0


def test_slowloris_from_one_address_leaves_the_service_up(lockboxd_factory):
    """270 connections from one address (127.0.0.2) send their headers a
    byte at a time, fast enough never to be idle: the per-address limit
    refuses those past it, the header deadline (2 s) ends the others, and
    meanwhile /health and an authenticated run on another address answer
    within a second or two."""
    d = lockboxd_factory(server={"header_timeout": 2})
    d.assert_serving()
    req = b"GET /health HTTP/1.1\r\nHost: x\r\n" + b"X-Pad: " + b"a" * 200 + b"\r\n\r\n"
    socks, stop = [], threading.Event()
    try:
        for _ in range(270):
            s = socket.socket()
            s.bind(("127.0.0.2", 0))
            s.connect(("127.0.0.1", d.port))
            s.sendall(req[:1])
            socks.append(s)
        feeder = threading.Thread(target=drip, args=(list(socks), req[1:], 0.3, stop))
        feeder.start()
        time.sleep(0.5)
        sess = d.new_session()
        t0 = time.monotonic()
        r = sess.get(d.url("/health"), timeout=scaled(5))
        assert (r.status_code, r.text) == (200, '"ok"')
        r = sess.post(d.url("/v1/sandbox/run"), timeout=scaled(10),
                      json={"language": "python3", "code": "print(6*7)"})
        assert r.json()["data"]["stdout"] == "42\n", r.text
        assert time.monotonic() - t0 < scaled(2.5)
        # every connection of the attacker is gone soon after the deadline
        still_open = [s for s in socks if not closed_by_server(s, scaled(4))]
        assert not still_open, f"{len(still_open)} trickling connections were never cut"
    finally:
        stop.set()
        for s in socks:
            s.close()
    assert deadline_closed(d, "headers") >= 100
    d.assert_serving()
