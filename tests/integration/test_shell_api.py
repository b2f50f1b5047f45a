"""The shell-job API (docs/API.md "Shell jobs") route by route, as Dify's
SDK calls it: authentication, every route's answer and field set, every
error code, and bad input of every kind. The `shelld` fixture deletes
every job after each test, checks nothing of them is left (processes,
cgroups, job directories) and that both APIs still serve."""
import os
import re

import pytest

from conftest import SHELL_TOKEN, ShellError
from shellclient import RESULT_FIELDS, ShellClient

UNKNOWN = "0123456789abcdef"  # well-formed, never issued


def raises(call, status, code, message=None):
    """call() fails with this status and code (and message, if given)."""
    with pytest.raises(ShellError) as e:
        call()
    assert (e.value.status, e.value.code) == (status, code), e.value
    if message is not None:
        assert e.value.message == message, e.value
    return e.value


def routes(job_id):
    """(method, path, body) of every route but /healthz."""
    return [("POST", "/v1/jobs/run", {"script": "true"}),
            ("POST", f"/v1/jobs/{job_id}/wait", {"timeout": 0, "offset": 0}),
            ("POST", f"/v1/jobs/{job_id}/input", {"text": "x\n", "offset": 0}),
            ("GET", f"/v1/jobs/{job_id}/log/tail", None),
            ("GET", f"/v1/jobs/{job_id}", None),
            ("GET", "/v1/jobs", None),
            ("POST", f"/v1/jobs/{job_id}/terminate", {"grace_seconds": 0}),
            ("DELETE", f"/v1/jobs/{job_id}?force=true", None)]


# ------------------------------------------------------------ authentication

def test_healthz_is_open_and_answers_like_go(shelld):
    r = shelld.client.request("GET", "/healthz", auth=False)
    assert (r.status, r.headers["content-type"], r.body) == (
        200, "application/json", b'{"status":"ok"}\n')


@pytest.mark.parametrize("authorization", [
    None, "", "Bearer", "Bearer ", "Bearer wrong", f"bearer {SHELL_TOKEN}",
    f"Bearer  {SHELL_TOKEN}", f"Bearer {SHELL_TOKEN} ", f"Bearer {SHELL_TOKEN[:-1]}",
    f"Basic {SHELL_TOKEN}", SHELL_TOKEN])
def test_every_route_but_healthz_needs_the_exact_bearer_token(shelld, authorization):
    c = shelld.client
    job = c.run("sleep 30", timeout=0.1)
    for method, path, body in routes(job["job_id"]):
        headers = {} if authorization is None else {"Authorization": authorization}
        r = c.request(method, path, body, headers=headers, auth=False)
        assert (r.status, r.json()) == (401, {"error": {
            "code": "unauthorized", "message": "Missing or invalid bearer token"}}), (method, path)
    # nothing of it happened: the job still runs, alone
    assert not c.get(job["job_id"])["done"]
    assert [j["job_id"] for j in c.list()] == [job["job_id"]]


def test_the_token_comes_from_SHELLCTL_AUTH_TOKEN(shelld):
    """The fixture passes it in the environment only: the right one works,
    the config's default (empty: every route open) is not in force."""
    assert ShellClient(f"http://127.0.0.1:{shelld.shell_port}", SHELL_TOKEN).list() == []
    raises(lambda: ShellClient(f"http://127.0.0.1:{shelld.shell_port}").list(), 401,
           "unauthorized")


# ------------------------------------------------------------- routing

@pytest.mark.parametrize("method,path", [
    ("GET", "/"), ("GET", "/v1"), ("GET", "/v1/job"), ("GET", "/v1/jobs/run/x"),
    ("GET", f"/v1/jobs/{UNKNOWN}/log"), ("POST", f"/v1/jobs/{UNKNOWN}/kill"),
    ("GET", "/v1/sandbox/run"), ("GET", "/health"), ("POST", "/v1/snapshot")])
def test_unknown_path_is_go_s_plain_404(shelld, method, path):
    r = shelld.client.request(method, path)
    assert (r.status, r.body) == (404, b"404 page not found\n"), r
    assert r.headers["content-type"].startswith("text/plain"), r


@pytest.mark.parametrize("method,path,allowed", [
    ("PUT", "/v1/jobs", "GET"), ("PUT", "/v1/jobs/run", "POST"),
    ("POST", f"/v1/jobs/{UNKNOWN}/log/tail", "GET"), ("GET", f"/v1/jobs/{UNKNOWN}/wait", "POST"),
    ("POST", "/healthz", "GET"), ("GET", "/v1/snapshot/save", "POST"),
    ("PUT", "/v1/snapshot/restore", "POST")])
def test_known_path_with_another_method_is_405_with_allow(shelld, method, path, allowed):
    r = shelld.client.request(method, path)
    assert r.status == 405, r
    assert allowed in r.headers.get("allow", ""), r


def test_head_is_get_without_a_body_and_every_answer_has_a_traceparent(shelld):
    c = shelld.client
    r = c.request("HEAD", "/healthz", auth=False)
    assert (r.status, r.body) == (200, b""), r
    for method, path in (("GET", "/healthz"), ("GET", "/v1/jobs"), ("GET", "/nope"),
                         ("GET", f"/v1/jobs/{UNKNOWN}")):
        r = c.request(method, path)
        assert re.match(r"^00-[0-9a-f]{32}-[0-9a-f]{16}-0[01]$", r.headers.get("traceparent", "")), r


def test_answers_are_encoded_as_go_encodes_them(shelld):
    """<, >, & and U+2028/U+2029 escaped; bytes that are not UTF-8 as
    U+FFFD; a trailing newline."""
    c = shelld.client
    r, out = c.run_to_end("printf '<a>&\\342\\200\\250\\342\\200\\251\\377|'", mode="stdio")
    assert out == "<a>&\u2028\u2029\ufffd|", out
    raw = c.request("POST", f"/v1/jobs/{r['job_id']}/wait", {"offset": 0}).body
    assert b'"output":"\\u003ca\\u003e\\u0026\\u2028\\u2029\\ufffd|"' in raw, raw
    assert raw.endswith(b"}\n"), raw


# ---------------------------------------------------------- a job's life

def test_a_pty_job_from_run_to_delete(shelld):
    c = shelld.client
    r, out = c.run_to_end("echo hello; printf 'w\\303\\251rld\\n'; exit 0")
    job = r["job_id"]
    assert (r["status"], r["done"], r["exit_code"], out) == ("exited", True, 0,
                                                            "hello\nwérld\n"), r
    size = len(out.encode())
    # output_path is the job's output.log, and it holds what was returned
    path = os.path.join(shelld.state_dir, "jobs", job, "output.log")
    assert r["output_path"] == path
    with open(path, "rb") as f:
        assert f.read() == out.encode()
    v = c.get(job)
    assert (v["job_id"], v["status"], v["done"], v["exit_code"], v["offset"]) == (
        job, "exited", True, 0, size), v
    assert v["created_at"] <= v["started_at"] <= v["ended_at"], v
    [info] = [i for i in c.list() if i["job_id"] == job]
    assert info == {"job_id": job, "status": "exited", "created_at": v["created_at"],
                    "started_at": v["started_at"], "ended_at": v["ended_at"]}
    t = c.tail(job, output_limit=7)
    assert (t["output"], t["offset"], t["truncated"], t["done"]) == ("wérld\n", size, False,
                                                                   True), t
    assert c.delete(job) == {"job_id": job, "deleted": True}
    for method, path, body in routes(job)[1:]:
        if path == "/v1/jobs":
            continue
        raises(lambda: c.call(method, path, body), 404, "job_not_found", "Unknown job id")
    assert not os.path.exists(os.path.dirname(path))


def test_a_stdio_job_returns_stdout_byte_exact_and_never_stderr(shelld):
    c = shelld.client
    script = ("printf 'out\\r\\n\\033[31mred\\033[0m\\tx\\r'\n"
              "echo secret-stderr >&2\n"
              "[ -t 0 ] || [ -t 1 ] || printf '|no tty|'\n"
              "cat; printf '|stdin %s|' \"$(readlink /proc/self/fd/0)\"\n"
              "exit 3\n")
    r, out = c.run_to_end(script, mode="stdio")
    assert (r["status"], r["exit_code"]) == ("exited", 3), r
    assert out == "out\r\n\x1b[31mred\x1b[0m\tx\r|no tty||stdin /dev/null|"
    assert "secret-stderr" not in c.output_of(r["job_id"])


def test_input_to_a_stdio_job_is_409_input_unsupported(shelld):
    c = shelld.client
    r = c.run("sleep 30", mode="stdio", timeout=0.1)
    raises(lambda: c.input(r["job_id"], "x\n", 0), 409, "input_unsupported",
           "stdio jobs do not support input")
    assert not c.get(r["job_id"])["done"]


def test_input_to_a_finished_job_is_409_job_not_running(shelld):
    c = shelld.client
    r, _ = c.run_to_end("true")
    raises(lambda: c.input(r["job_id"], "x\n", 0), 409, "job_not_running",
           f"Job {r['job_id']} is already terminal")


@pytest.mark.parametrize("mode", ["pty", "stdio"])
@pytest.mark.parametrize("script,code", [
    ("exit 7", 7), ("exit 0", 0), ("false", 1), ("no-such-command-x", 127),
    ("kill -TERM $$", 143), ("kill -KILL $$", 137), ("kill -SEGV $$", 139)])
def test_exit_codes_as_a_shell_shows_them(shelld, mode, script, code):
    r, _ = shelld.client.run_to_end(script, mode=mode)
    assert (r["status"], r["done"], r["exit_code"]) == ("exited", True, code), r


def test_a_job_that_cannot_start_is_200_failed(shelld):
    c = shelld.client
    r, out = c.run_to_end("#!/nonexistent/interpreter\necho STARTED\n")
    assert (r["status"], r["done"]) == ("failed", True), r
    assert type(r["exit_code"]) is int and r["exit_code"] != 0, r
    assert "STARTED" not in out
    assert c.get(r["job_id"])["status"] == "failed"


def test_terminal_size_is_the_requested_one_or_200x50(shelld):
    c = shelld.client
    _, out = c.run_to_end("stty size", terminal={"cols": 91, "rows": 17})
    assert out == "17 91\n"
    _, out = c.run_to_end("stty size")
    assert out == "50 200\n"


# ------------------------------------------------------------------ list

def test_list_of_nothing_is_an_empty_list_not_null(shelld):
    r = shelld.client.request("GET", "/v1/jobs")
    assert (r.status, r.body) == (200, b'{"jobs":[]}\n'), r


def test_list_filters_by_status_and_limit_newest_first(shelld):
    c = shelld.client
    done = [c.run_to_end(f"echo {i}")[0]["job_id"] for i in range(3)]
    running = c.run("sleep 30", timeout=0.1)["job_id"]
    jobs = c.list()
    assert sorted(j["job_id"] for j in jobs) == sorted(done + [running])
    created = [j["created_at"] for j in jobs]
    assert created == sorted(created, reverse=True)
    assert {j["job_id"] for j in c.list(status="exited")} == set(done)
    assert [j["job_id"] for j in c.list(status="running")] == [running]
    assert "ended_at" not in c.list(status="running")[0]
    assert c.list(status="terminated") == []
    assert c.list(status="no-such-status") == []
    assert len(c.list(limit=2)) == 2
    for limit in ("0", "-3", "abc", "99999"):
        assert len(c.call("GET", f"/v1/jobs?limit={limit}")["jobs"]) == 4, limit


# ------------------------------------------------------------------ tail

def test_tail_is_the_last_bytes_at_a_character_start(shelld):
    c = shelld.client
    r, out = c.run_to_end("printf '0123456789\\n\\342\\202\\254\\342\\202\\254'", mode="stdio")
    assert out == "0123456789\n€€"
    job = r["job_id"]
    t = c.tail(job, output_limit=4)  # the last 4 bytes start inside a "€"
    assert (t["output"], t["offset"], t["truncated"], t["done"]) == ("€", 17, False, True), t
    assert c.tail(job, output_limit=6)["output"] == "€€"
    for q in ("", "?output_limit=abc", "?output_limit=-5", "?output_limit=0"):
        t = c.call("GET", f"/v1/jobs/{job}/log/tail{q}")
        assert (t["output"], t["offset"], t["truncated"]) == (out, 17, False), q
        assert list(t) == RESULT_FIELDS


def test_tail_is_capped_at_512_kib(shelld):
    c = shelld.client
    r, _ = c.run_to_end("head -c 600000 /dev/zero | tr '\\0' x", mode="stdio",
                        output_limit=1 << 20)
    t = c.tail(r["job_id"], output_limit=10**12)
    assert (len(t["output"]), t["offset"], t["truncated"]) == (524288, 600000, False), \
        {k: v for k, v in t.items() if k != "output"}


# ------------------------------------------------------------- bad input

def test_run_body_errors(shelld):
    c = shelld.client
    post = lambda body: c.call("POST", "/v1/jobs/run", body)  # noqa: E731
    for body in (b"", b"{", b"[]", b'"script"', b"12", b'{"script":5}',
                 b'{"script":"true","timeout":"5"}', b'{"script":"true","env":["A"]}',
                 b'{"script":"true","env":{"A":1}}', b'{"script":"true","output_limit":1.5}',
                 b'{"script":"true","cwd":7}', b'{"script":"true","terminal":{"cols":"a"}}'):
        raises(lambda: post(body), 400, "invalid_request", "Invalid JSON body")
    for body in ({}, {"script": ""}, {"script": None}, {"cwd": "/"}):
        raises(lambda: post(body), 400, "invalid_request", "script is required")
    raises(lambda: post({"script": "true", "env": {"A=B": "x"}}), 422, "validation_error",
           "env name must not contain '=': \"A=B\"")
    raises(lambda: post({"script": "true", "env": {"": "x"}}), 422, "validation_error",
           "env names must be non-empty")
    raises(lambda: post({"script": "true", "env": {"A": "x\u0000y"}}), 422, "validation_error",
           "env entries must not contain NUL")
    raises(lambda: post({"script": "true", "mode": "stdout"}), 422, "validation_error",
           'invalid job mode "stdout"')
    for terminal in ({"cols": 4097, "rows": 10}, {"cols": 10, "rows": 10**9}):
        raises(lambda: post({"script": "true", "terminal": terminal}), 422, "validation_error",
               "terminal cols and rows must be at most 4096")
    for session in ("a b", "x" * 129, "caf\u00e9", "../x"):
        raises(lambda: post({"script": "true", "session_id": session}), 422, "validation_error",
               "session_id must be a non-empty string of letters, digits, '-', or '_' "
               "(max 128 chars)")
    raises(lambda: post({"script": "true", "cwd": shelld.home + "\u0000/x"}), 400, "invalid_cwd")
    assert c.list() == []  # none of them made a job


def test_a_nul_in_an_env_name_is_422_like_one_in_a_value(shelld):
    """The reference refuses NUL in a name or a value alike (422); a JSON
    parser that cannot hold NUL in an object key must not turn it into 400."""
    raises(lambda: shelld.client.call("POST", "/v1/jobs/run",
                                      {"script": "true", "env": {"A\u0000B": "x"}}),
           422, "validation_error", "env entries must not contain NUL")
    assert shelld.client.list() == []


def test_run_with_a_cwd_that_is_not_a_usable_directory_is_400_invalid_cwd(shelld):
    c = shelld.client
    os.makedirs(shelld.home_path("ws", "cwdtest"), exist_ok=True)
    with open(shelld.home_path("ws", "cwdtest", "file"), "w") as f:
        f.write("x")
    for cwd in (shelld.home_path("ws", "cwdtest", "file"), shelld.home_path("no", "such"),
                "/etc", "/tmp", "/", shelld.root, shelld.outside, "~",
                shelld.home + "/../outside", shelld.home + "/./../outside",
                "/proc/self/cwd"):
        e = raises(lambda: c.run("echo RAN", cwd=cwd, mode="stdio"), 400, "invalid_cwd")
        assert e.message, cwd
    assert c.list() == []


def test_unknown_job_ids_are_404_on_every_route(shelld):
    c = shelld.client
    for job_id in (UNKNOWN, "nothex", "0123456789ABCDEF", "0" * 17):
        for method, path, body in routes(job_id)[1:]:
            if path == "/v1/jobs":
                continue
            raises(lambda: c.call(method, path, body), 404, "job_not_found", "Unknown job id")


def test_offsets_past_the_end_or_negative_are_400_invalid_offset(shelld):
    c = shelld.client
    r, out = c.run_to_end("echo abc")  # 4 bytes
    job = r["job_id"]
    w = c.wait(job, offset=4)
    assert (w["output"], w["offset"], w["truncated"], w["done"]) == ("", 4, False, True), w
    for offset in (5, 1 << 40, 2**63 - 1):
        e = raises(lambda: c.wait(job, offset=offset), 400, "invalid_offset")
        assert str(offset) in e.message, e
    for offset in (-1, -(2**63)):
        raises(lambda: c.wait(job, offset=offset), 400, "invalid_offset")
    live = c.run("cat", timeout=0.1)["job_id"]
    raises(lambda: c.input(live, "x\n", offset=10**6), 400, "invalid_offset")
    raises(lambda: c.input(live, "x\n", offset=-1), 400, "invalid_offset")
    for body in (b'{"offset":1.5}', b'{"offset":"1"}', b'{"timeout":"1"}', b"", b"[1]"):
        raises(lambda: c.call("POST", f"/v1/jobs/{job}/wait", body), 400, "invalid_request",
               "Invalid JSON body")
    raises(lambda: c.call("POST", f"/v1/jobs/{live}/input", {"text": 5, "offset": 0}), 400,
           "invalid_request", "Invalid JSON body")


def test_negative_and_huge_numbers_are_clamped_not_refused(shelld):
    c = shelld.client
    r, _ = c.run_to_end("head -c 1200000 /dev/zero | tr '\\0' y", mode="stdio",
                        output_limit=1 << 20)
    job = r["job_id"]
    w = c.wait(job, offset=0, output_limit=10**12, timeout=-5, idle_flush_seconds=-1)
    assert (len(w["output"]), w["offset"], w["truncated"]) == (1 << 20, 1 << 20, True)
    w = c.wait(job, offset=0, output_limit=-7)  # the default window, 16 KiB
    assert (len(w["output"]), w["truncated"]) == (16384, True)
    # a run with negative numbers gets the defaults and runs
    r = c.run("echo negative-ok", timeout=-1, output_limit=-1, idle_flush_seconds=-1,
              terminal={"cols": -3, "rows": 0})
    assert c.follow(r)[1] == "negative-ok\n"
    # terminate and delete bodies and queries that do not decode mean the defaults
    live = c.run("sleep 30", timeout=0.1)["job_id"]
    r = c.request("POST", f"/v1/jobs/{live}/terminate", b"{not json", timeout=30)
    assert r.status == 200 and r.json()["status"] == "terminated", r
    r = c.request("DELETE", f"/v1/jobs/{live}?force=yes&grace_seconds=abc")
    assert r.status == 200, r  # terminal already: no force needed


def test_a_5_mb_script_runs(shelld):
    script = ("# " + "x" * 97 + "\n") * 50000 + "echo five-mb-ok\n"
    assert len(script) >= 5_000_000
    r, out = shelld.client.run_to_end(script, mode="stdio", deadline=60)
    assert (r["exit_code"], out) == (0, "five-mb-ok\n"), r


def test_bodies_over_their_route_s_limit_are_413(shelld):
    """A run body over server.max_body_bytes (16 MiB), an input over 1 MiB,
    a wait over 4 KiB: refused whole with the error envelope."""
    c = shelld.client
    live = c.run("cat", timeout=0.1)["job_id"]
    for path, body in (
            ("/v1/jobs/run", {"script": "#" * (17 << 20)}),
            (f"/v1/jobs/{live}/input", {"text": "x" * ((1 << 20) + 1), "offset": 0}),
            (f"/v1/jobs/{live}/wait", {"offset": 0, "pad": "x" * 5000})):
        try:
            r = c.request("POST", path, body)
        except (BrokenPipeError, ConnectionResetError):
            continue  # refused before the body was read: nothing ran either
        assert (r.status, r.json()["error"]["code"]) == (413, "request_too_large"), r
    assert [j["job_id"] for j in c.list()] == [live]
    assert c.output_of(live) == ""
