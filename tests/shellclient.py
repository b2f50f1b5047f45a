"""A small client of lockbox's shell-job API (Dify's shellctl), for the
tests: the calls Dify's Python SDK makes, with its checks on every answer.

Like the SDK, a non-2xx answer with an error envelope raises ShellError
(status, code, message), and every body is held to the exact field sets
the SDK's models accept (they forbid extra fields): an answer Dify would
reject raises ProtocolError. `request` sends anything, for tests of bad
input. Standard library only (http.client); one connection per call.
"""
import http.client
import json
import re
import time
import urllib.parse

STATUSES = ("created", "starting", "running", "exited", "terminated", "failed", "lost")
TERMINAL = ("exited", "terminated", "failed", "lost")
RESULT_FIELDS = ["job_id", "done", "status", "exit_code", "output_path", "output", "offset",
                 "truncated"]
VIEW_FIELDS = ["job_id", "status", "done", "exit_code", "created_at", "started_at", "ended_at",
               "offset"]
TIME_RE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
JOB_ID_RE = re.compile(r"^[0-9a-f]{16}$")


class ShellError(Exception):
    """A non-2xx answer with the error envelope, as the SDK raises it."""

    def __init__(self, status, code, message):
        super().__init__(f"{status} {code}: {message}")
        self.status, self.code, self.message = status, code, message


class ProtocolError(AssertionError):
    """An answer Dify's SDK would refuse (not JSON, wrong fields or types)."""


class Response:
    def __init__(self, status, headers, body):
        self.status, self.headers, self.body = status, headers, body

    @property
    def text(self):
        return self.body.decode("utf-8", "replace")

    def json(self):
        return json.loads(self.body)

    def __repr__(self):
        body = self.body if len(self.body) < 600 else self.body[:600] + b"..."
        return f"<{self.status} {self.headers.get('content-type')} {body!r}>"


def _need(cond, what, body):
    if not cond:
        raise ProtocolError(f"{what}: {body!r}"[:2000])


def check_result(d):
    """A JobResult as the SDK's model takes it."""
    _need(isinstance(d, dict) and list(d) == RESULT_FIELDS, "JobResult fields", d)
    _need(JOB_ID_RE.match(d["job_id"] or ""), "job_id", d)
    _need(d["status"] in STATUSES, "status", d)
    _need(d["done"] is (d["status"] in TERMINAL), "done agrees with status", d)
    _need((d["exit_code"] is None) is (not d["done"]), "exit_code null until done", d)
    _need(d["exit_code"] is None or type(d["exit_code"]) is int, "exit_code type", d)
    _need(isinstance(d["output_path"], str) and d["output_path"].startswith("/")
          and d["output_path"].endswith(f"/jobs/{d['job_id']}/output.log"), "output_path", d)
    _need(isinstance(d["output"], str), "output", d)
    _need(type(d["offset"]) is int and d["offset"] >= 0, "offset", d)
    _need(type(d["truncated"]) is bool, "truncated", d)
    return d


def check_view(d):
    """A JobStatusView (GET /v1/jobs/{id}, terminate)."""
    _need(isinstance(d, dict) and list(d) == VIEW_FIELDS, "JobStatusView fields", d)
    _need(JOB_ID_RE.match(d["job_id"] or ""), "job_id", d)
    _need(d["status"] in STATUSES, "status", d)
    _need(d["done"] is (d["status"] in TERMINAL), "done agrees with status", d)
    _need((d["exit_code"] is None) is (not d["done"]), "exit_code null until done", d)
    _need(TIME_RE.match(d["created_at"] or ""), "created_at", d)
    for k in ("started_at", "ended_at"):
        _need(d[k] is None or TIME_RE.match(d[k]), k, d)
    _need((d["ended_at"] is None) is (not d["done"]), "ended_at set when done", d)
    _need(type(d["offset"]) is int and d["offset"] >= 0, "offset", d)
    return d


def check_info(d):
    """A JobInfo of the list: started_at/ended_at omitted, never null."""
    _need(isinstance(d, dict), "JobInfo", d)
    keys = [k for k in ["job_id", "status", "created_at", "started_at", "ended_at"] if k in d]
    _need(list(d) == keys and keys[:3] == ["job_id", "status", "created_at"], "JobInfo fields", d)
    _need(JOB_ID_RE.match(d["job_id"] or "") and d["status"] in STATUSES, "JobInfo values", d)
    for k in keys[2:]:
        _need(isinstance(d[k], str) and TIME_RE.match(d[k]), k, d)
    return d


class ShellClient:
    def __init__(self, base_url, token=None, timeout=30):
        u = urllib.parse.urlsplit(base_url)
        self.host, self.port = u.hostname, u.port
        self.token = token
        self.timeout = timeout
        self.seen = set()  # every job id a run returned

    # ------------------------------------------------------------- transport
    def request(self, method, path, body=None, headers=None, auth=True, timeout=None):
        """Send one request; body is bytes, or any other value sent as JSON.
        Returns the Response, whatever its status."""
        h = {"Connection": "close"}
        if auth and self.token:
            h["Authorization"] = f"Bearer {self.token}"
        if body is not None and not isinstance(body, (bytes, bytearray)):
            body = json.dumps(body).encode()
            h["Content-Type"] = "application/json"
        h.update(headers or {})
        c = http.client.HTTPConnection(self.host, self.port, timeout=timeout or self.timeout)
        try:
            c.request(method, path, body=body, headers=h)
            r = c.getresponse()
            data = r.read()
            return Response(r.status, {k.lower(): v for k, v in r.getheaders()}, data)
        finally:
            c.close()

    def call(self, method, path, body=None, timeout=None, check=None):
        """A call as the SDK makes it: 2xx gives the checked JSON object,
        an error envelope raises ShellError, anything else ProtocolError."""
        r = self.request(method, path, body, timeout=timeout)
        _need(r.headers.get("content-type", "").startswith("application/json"), "content type", r)
        _need(r.body.endswith(b"\n"), "Go's encoder ends the body with a newline", r)
        try:
            d = r.json()
        except ValueError:
            raise ProtocolError(f"not JSON: {r!r}")
        if not 200 <= r.status < 300:
            err = d.get("error") if isinstance(d, dict) else None
            _need(list(d) == ["error"] and isinstance(err, dict)
                  and list(err) == ["code", "message"]
                  and all(isinstance(err[k], str) for k in err), "error envelope", r)
            raise ShellError(r.status, err["code"], err["message"])
        return check(d) if check else d

    # ------------------------------------------------------------------ calls
    def health(self):
        r = self.request("GET", "/healthz", auth=False)
        _need(r.status == 200 and r.json() == {"status": "ok"}, "health", r)
        return r.json()

    def run(self, script, cwd=None, env=None, mode=None, terminal=None, session_id=None,
            timeout=10, output_limit=16384, idle_flush_seconds=0.5, http_timeout=None, **extra):
        """POST /v1/jobs/run; the HTTP read timeout is the SDK's, timeout +
        10 s, unless http_timeout says less."""
        body = {"script": script, "timeout": timeout, "output_limit": output_limit,
                "idle_flush_seconds": idle_flush_seconds}
        for k, v in (("cwd", cwd), ("env", env), ("mode", mode), ("terminal", terminal),
                     ("session_id", session_id)):
            if v is not None:
                body[k] = v
        body.update(extra)
        d = self.call("POST", "/v1/jobs/run", body, timeout=http_timeout or max(timeout, 0) + 10,
                      check=check_result)
        self.seen.add(d["job_id"])
        return d

    def wait(self, job_id, offset=0, timeout=0, output_limit=16384, idle_flush_seconds=0.5,
             http_timeout=None):
        body = {"timeout": timeout, "offset": offset, "output_limit": output_limit,
                "idle_flush_seconds": idle_flush_seconds}
        return self.call("POST", f"/v1/jobs/{job_id}/wait", body,
                         timeout=http_timeout or max(timeout, 0) + 10, check=check_result)

    def input(self, job_id, text, offset, timeout=5, output_limit=16384, idle_flush_seconds=0.5):
        body = {"text": text, "offset": offset, "timeout": timeout, "output_limit": output_limit,
                "idle_flush_seconds": idle_flush_seconds}
        return self.call("POST", f"/v1/jobs/{job_id}/input", body, timeout=max(timeout, 0) + 10,
                         check=check_result)

    def tail(self, job_id, output_limit=16384):
        q = "" if output_limit is None else f"?output_limit={output_limit}"
        return self.call("GET", f"/v1/jobs/{job_id}/log/tail{q}", check=check_result)

    def get(self, job_id):
        return self.call("GET", f"/v1/jobs/{job_id}", check=check_view)

    def list(self, status=None, limit=100):
        q = urllib.parse.urlencode({k: v for k, v in (("limit", limit), ("status", status))
                                    if v is not None})
        d = self.call("GET", "/v1/jobs" + (f"?{q}" if q else ""))
        _need(isinstance(d, dict) and list(d) == ["jobs"] and isinstance(d["jobs"], list),
              "ListJobsResponse", d)
        for item in d["jobs"]:
            check_info(item)
        return d["jobs"]

    def terminate(self, job_id, grace_seconds=None):
        body = {} if grace_seconds is None else {"grace_seconds": grace_seconds}
        grace = 10 if grace_seconds is None else grace_seconds
        return self.call("POST", f"/v1/jobs/{job_id}/terminate", body, timeout=grace + 10,
                         check=check_view)

    def delete(self, job_id, force=False, grace_seconds=None):
        q = {"force": "true" if force else "false"}
        if grace_seconds is not None:
            q["grace_seconds"] = grace_seconds
        grace = 10 if grace_seconds is None else grace_seconds
        d = self.call("DELETE", f"/v1/jobs/{job_id}?" + urllib.parse.urlencode(q),
                      timeout=grace + 10)
        _need(d == {"job_id": job_id, "deleted": True}, "DeleteJobResponse", d)
        return d

    # ---------------------------------------------------------------- helpers
    def follow(self, result, deadline=30, output_limit=16384):
        """Wait on from a JobResult until the job is done and its output
        read to the end (done and not truncated), as Dify's complete
        commands do; returns (last result, all output from result's start)."""
        out = [result["output"]]
        end = time.monotonic() + deadline
        while not (result["done"] and not result["truncated"]):
            left = end - time.monotonic()
            if left <= 0:
                raise AssertionError(f"job {result['job_id']} not done in {deadline} s: "
                                     f"{result!r}"[:2000])
            result = self.wait(result["job_id"], offset=result["offset"],
                               timeout=min(5, max(left, 0.1)), output_limit=output_limit)
            out.append(result["output"])
        return result, "".join(out)

    def run_to_end(self, script, deadline=30, **kw):
        """Run, then follow: (last result, the job's whole output)."""
        kw.setdefault("timeout", 5)
        r = self.run(script, **kw)
        return self.follow(r, deadline, kw.get("output_limit", 16384))

    def output_of(self, job_id, limit=1 << 20):
        """The whole output so far, paged from offset 0."""
        out, offset = [], 0
        while True:
            r = self.wait(job_id, offset=offset, output_limit=limit)
            out.append(r["output"])
            if r["offset"] == offset or not r["truncated"]:
                return "".join(out)
            offset = r["offset"]
