"""Network per run: only when both the configuration and the request allow
it; otherwise an empty network namespace where socket() fails with EPERM,
and the run still completes normally."""
import textwrap

import pytest


def probe(port):
    """A program that tries the test's TCP server on 127.0.0.1 and prints
    what happened; it never fails, so exit 0 either way."""
    return textwrap.dedent(f"""
        import socket, errno
        try:
            s = socket.create_connection(("127.0.0.1", {port}), timeout=3)
            print("connected:" + s.recv(100).decode())
        except OSError as e:
            print("blocked:" + errno.errorcode.get(e.errno, str(e.errno)))
    """).lstrip()


NETNS_PROBE = textwrap.dedent("""
    lines = open('/proc/self/net/dev').read().splitlines()[2:]
    print(sorted(l.split(':')[0].strip() for l in lines))
""").lstrip()


def test_network_when_requested_and_allowed(daemon, tcp_server):
    d = daemon.run_data(probe(tcp_server.port), enable_network=True)
    assert d["stdout"] == "connected:hello-from-host\n", d
    assert d["exit_code"] == 0 and d["error"] == ""
    assert tcp_server.accepted == 1


def test_requests_library_reaches_host_http_server(daemon):
    import http.server
    import threading

    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = b'{"pong": true}'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        port = srv.server_address[1]
        d = daemon.run_data(textwrap.dedent(f"""
            import requests, httpx
            print(requests.get("http://127.0.0.1:{port}/ping", timeout=5).json())
            print(httpx.get("http://127.0.0.1:{port}/ping", timeout=5).json())
        """), enable_network=True)
        assert d["stderr"] == "", d
        assert d["stdout"] == "{'pong': True}\n{'pong': True}\n"
    finally:
        srv.shutdown()
        srv.server_close()


@pytest.mark.parametrize("fields", [{}, {"enable_network": False}], ids=["absent", "false"])
def test_no_network_unless_requested(daemon, tcp_server, fields):
    body = {"language": "python3", "code": probe(tcp_server.port)}
    body.update(fields)
    r = daemon.post("/v1/sandbox/run", json=body)
    assert r.status_code == 200
    d = r.json()["data"]
    assert d["stdout"] == "blocked:EPERM\n", d
    assert d["exit_code"] == 0 and d["error"] == ""
    assert tcp_server.accepted == 0


def test_no_network_run_is_in_an_empty_namespace(daemon):
    d = daemon.run_data(NETNS_PROBE, enable_network=False)
    assert d["stdout"] == "['lo']\n", d
    # and a networked run shares the host's interfaces
    d = daemon.run_data(NETNS_PROBE, enable_network=True)
    with open("/proc/self/net/dev") as f:
        host = sorted(l.split(":")[0].strip() for l in f.read().splitlines()[2:])
    assert d["stdout"] == f"{host}\n", d


@pytest.fixture(scope="module")
def nonet_daemon(module_daemon_factory):
    return module_daemon_factory(enable_network=False)


def test_config_disables_network_even_if_request_asks(nonet_daemon, tcp_server):
    """Dify always sends enable_network: true; the run proceeds without
    network instead of being refused."""
    r = nonet_daemon.run(probe(tcp_server.port), enable_network=True)
    assert r["code"] == 0 and r["message"] == "success", r
    d = r["data"]
    assert d["stdout"] == "blocked:EPERM\n", d
    assert d["exit_code"] == 0 and d["error"] == "" and d["status"] == "ok"
    assert tcp_server.accepted == 0


def test_config_disabled_network_plain_runs_work(nonet_daemon):
    d = nonet_daemon.run_data("print('fine')", enable_network=True)
    assert d["stdout"] == "fine\n"
    d = nonet_daemon.run_data(NETNS_PROBE, enable_network=True)
    assert d["stdout"] == "['lo']\n", d
