"""The shell-job API's answers with real jobs (docs/API.md, "Shell jobs"),
as Dify's client reads them: exactly the reference's fields in its order
(the client refuses any other), Go's escapes and U+FFFD in the bytes on
the wire, byte offsets that page a job's output whole, input typed into
a terminal, the job views and the list with its filter, terminate and
DELETE, and the refusals the job service words."""
import json
import os
import re

import pytest
import requests

from test_shell_listener import TOKEN, error, shell_config

RESULT_KEYS = ["job_id", "done", "status", "exit_code", "output_path", "output", "offset",
               "truncated"]
VIEW_KEYS = ["job_id", "status", "done", "exit_code", "created_at", "started_at", "ended_at",
             "offset"]
TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")


class Shell:
    """A client of one daemon's shell port, as Dify's SDK talks to it."""

    def __init__(self, daemon):
        self.d = daemon
        self.cfg = daemon.base_config["shell"]
        self.s = requests.Session()
        self.s.trust_env = False
        self.s.headers["Authorization"] = f"Bearer {TOKEN}"

    def call(self, method, path, body=None, expect=200):
        """(parsed body as [(key, value)] pairs, raw text) of a call that
        must answer `expect` with JSON."""
        r = self.s.request(method, f"http://127.0.0.1:{self.cfg['port']}{path}", timeout=60,
                           data=None if body is None else json.dumps(body))
        assert r.status_code == expect, (method, path, r.status_code, r.text)
        assert r.headers["Content-Type"] == "application/json", r.headers
        assert r.text.endswith("}\n") and "\n" not in r.text[:-1], r.text
        return json.loads(r.text, object_pairs_hook=list), r.text

    def result(self, method, path, body=None):
        pairs, raw = self.call(method, path, body)
        assert [k for k, _ in pairs] == RESULT_KEYS, raw
        return dict(pairs), raw

    def run(self, script, **kw):
        body = {"script": script, "timeout": 10, "output_limit": 16384,
                "idle_flush_seconds": 0.5}
        body.update(kw)
        return self.result("POST", "/v1/jobs/run", body)

    def finish(self, job, offset=0, limit=16384):
        """Wait from offset until the job is done and its output read: the
        concatenated output, the last JobResult, the raw answers."""
        out, raws = [], []
        while True:
            r, raw = self.result("POST", f"/v1/jobs/{job}/wait",
                                 {"offset": offset, "timeout": 10, "output_limit": limit})
            assert r["offset"] >= offset, raw
            out.append(r["output"])
            raws.append(raw)
            offset = r["offset"]
            if r["done"] and not r["truncated"]:
                return "".join(out), r, raws

    def delete(self, job):
        self.call("DELETE", f"/v1/jobs/{job}?force=true&grace_seconds=0")

    def listed(self, query=""):
        """The list's items, each as its [(key, value)] pairs."""
        pairs, raw = self.call("GET", "/v1/jobs" + query)
        assert [k for k, _ in pairs] == ["jobs"], raw
        return dict(pairs)["jobs"]

    def listed_ids(self, query=""):
        return [dict(j)["job_id"] for j in self.listed(query)]


@pytest.fixture(scope="module")
def sh(module_daemon_factory, _session_tmp):
    d = module_daemon_factory(shell=shell_config(_session_tmp, token=TOKEN))
    c = Shell(d)
    yield c
    for job in c.listed_ids("?limit=200"):
        c.delete(job)


def test_a_job_result_as_go_writes_it(sh):
    r, raw = sh.run("printf 'a<b>&c\\n'; exit 3", mode="stdio")
    out, last, raws = sh.finish(r["job_id"])
    assert out == "a<b>&c\n"
    assert any("a\\u003cb\\u003e\\u0026c\\n" in x for x in [raw] + raws), raws
    assert re.fullmatch(r"[0-9a-f]{16}", last["job_id"]), last
    assert (last["status"], last["exit_code"], last["done"]) == ("exited", 3, True), last
    path = os.path.join(sh.cfg["state_dir"], "jobs", last["job_id"], "output.log")
    assert last["output_path"] == path
    with open(path, "rb") as f:
        assert f.read() == b"a<b>&c\n"
    sh.delete(last["job_id"])


def test_bytes_that_are_not_utf8_come_back_as_ufffd(sh):
    r, _ = sh.run("printf '\\377ok\\n'", mode="stdio")
    out, last, raws = sh.finish(r["job_id"])
    assert out == "\ufffdok\n"
    assert any('"output":"\\ufffdok\\n"' in x for x in raws), raws
    assert last["offset"] == 4, last  # bytes of the output, not of the text sent
    sh.delete(last["job_id"])


def test_windows_page_the_output_whole(sh):
    want = "".join(f"line {i:03d}\n" for i in range(100))
    r, _ = sh.run("i=0; while [ $i -lt 100 ]; do printf 'line %03d\\n' $i; i=$((i+1)); done",
                  mode="stdio", output_limit=256)
    job = r["job_id"]
    # once done: 256-byte pages, each but the last truncated
    sh.finish(job)
    offset, pages = 0, []
    while True:
        p, _ = sh.result("POST", f"/v1/jobs/{job}/wait",
                         {"offset": offset, "timeout": 0, "output_limit": 256})
        assert len(p["output"]) <= 256 and p["offset"] == offset + len(p["output"]), p
        pages.append(p)
        offset = p["offset"]
        if not p["truncated"]:
            break
    assert "".join(p["output"] for p in pages) == want
    assert len(pages) == -(-len(want) // 256) and all(p["truncated"] for p in pages[:-1])
    # at the end: nothing more, not truncated; past it: refused
    p, _ = sh.result("POST", f"/v1/jobs/{job}/wait", {"offset": len(want), "timeout": 0})
    assert (p["output"], p["offset"], p["truncated"]) == ("", len(want), False), p
    _, raw = sh.call("POST", f"/v1/jobs/{job}/wait", {"offset": len(want) + 1, "timeout": 0},
                     expect=400)
    assert json.loads(raw)["error"]["code"] == "invalid_offset", raw
    # the tail: the last bytes at once, never truncated
    t, _ = sh.result("GET", f"/v1/jobs/{job}/log/tail?output_limit=9")
    assert (t["output"], t["offset"], t["truncated"]) == ("line 099\n", len(want), False), t
    sh.delete(job)


# The input's text arrives as the blob's TEXT record; the keeper types the
# record's text alone (it once typed the record's header too).
def test_input_is_typed_into_a_pty_job(sh):
    r, _ = sh.run("printf 'name? '; read x; echo got:$x", timeout=1)
    job = r["job_id"]
    assert not r["done"], r
    i, _ = sh.result("POST", f"/v1/jobs/{job}/input",
                     {"text": "alice\n", "offset": r["offset"], "timeout": 10})
    out, last, _ = sh.finish(job, i["offset"])
    assert "got:alice" in r["output"] + i["output"] + out, (r, i, out)
    assert (last["status"], last["exit_code"]) == ("exited", 0), last
    # a finished job takes no more input
    _, raw = sh.call("POST", f"/v1/jobs/{job}/input", {"text": "x\n"}, expect=409)
    assert json.loads(raw)["error"]["code"] == "job_not_running", raw
    sh.delete(job)


def test_views_and_the_list(sh):
    r, _ = sh.run("echo hi", mode="stdio")
    job = r["job_id"]
    sh.finish(job)
    pairs, raw = sh.call("GET", f"/v1/jobs/{job}")
    v = dict(pairs)
    assert [k for k, _ in pairs] == VIEW_KEYS, raw
    assert (v["job_id"], v["status"], v["done"], v["exit_code"], v["offset"]) == \
        (job, "exited", True, 0, 3), v
    for k in ("created_at", "started_at", "ended_at"):
        assert TIME.match(v[k]), v
    r = sh.s.head(f"http://127.0.0.1:{sh.cfg['port']}/v1/jobs/{job}", timeout=30)
    assert (r.status_code, r.content) == (200, b""), r
    mine = [j for j in sh.listed("?status=exited") if dict(j)["job_id"] == job]
    assert [[k for k, _ in j] for j in mine] == \
        [["job_id", "status", "created_at", "started_at", "ended_at"]], mine
    assert dict(mine[0])["status"] == "exited"
    assert job not in sh.listed_ids("?status=running")
    assert sh.call("GET", "/v1/jobs?status=nonsense")[1] == '{"jobs":[]}\n'
    assert len(sh.listed("?limit=1")) == 1
    sh.delete(job)


def test_terminate_and_delete(sh):
    r, _ = sh.run("sleep 60", mode="stdio", timeout=0.2)
    job = r["job_id"]
    assert (r["done"], r["status"]) == (False, "running"), r
    _, raw = sh.call("DELETE", f"/v1/jobs/{job}", expect=409)
    assert raw == error("job_running", f"Job {job} is still running"), raw
    pairs, raw = sh.call("POST", f"/v1/jobs/{job}/terminate", {"grace_seconds": 0})
    v = dict(pairs)
    assert [k for k, _ in pairs] == VIEW_KEYS, raw
    assert (v["status"], v["done"]) == ("terminated", True), v
    assert TIME.match(v["ended_at"]), v
    pairs, raw = sh.call("DELETE", f"/v1/jobs/{job}")
    assert raw == json.dumps({"job_id": job, "deleted": True}, separators=(",", ":")) + "\n"
    _, raw = sh.call("GET", f"/v1/jobs/{job}", expect=404)
    assert raw == error("job_not_found", "Unknown job id"), raw
    assert job not in sh.listed_ids()
