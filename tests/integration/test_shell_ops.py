"""The shell side's operations: PUT /v1/prepare (the credentials line,
refused in the reference's order since lockbox runs no egress proxy, with
the session's jobs unaffected), the shell series of /metrics counted
exactly after a known sequence of jobs, and /ready reporting the shell
side. The daemon is this module's own (fresh counters), on the UIDs given
to this suite's helper block (jail 78000-78099, jobs 79000)."""
import os
import re
import subprocess

import pytest
import requests

import conftest
from conftest import ShellError

UIDS = (78000, 78099, 79000)
CREDENTIAL = {"provider": "github", "name": "token", "value": "ghp_x",
              "inject": {"type": "http-header",
                         "config": {"name": "Authorization", "expr": "Bearer {{.Value}}",
                                    "domains": ["api.github.com"]}},
              "env_name": "GITHUB_TOKEN"}


@pytest.fixture(scope="module")
def opsd(_session_tmp):
    d = conftest.start_shell_daemon(
        _session_tmp, uids=UIDS,
        shell={"max_output": "64K", "max_jobs": 2, "memory": "64M", "job_timeout": "3s"})
    yield d
    conftest.stop_shell_daemon(d)


@pytest.fixture
def sd(opsd):
    yield opsd
    assert opsd.proc.poll() is None, opsd.log[-4000:]
    opsd.shell_reset()


def prepare(d, body, auth=True):
    return d.client.request("PUT", "/v1/prepare", body, auth=auth)


def error_of(r):
    assert r.headers["content-type"] == "application/json" and r.body.endswith(b"\n"), r
    e = r.json()
    assert list(e) == ["error"] and list(e["error"]) == ["code", "message"], e
    return r.status, e["error"]["code"], e["error"]["message"]


# ------------------------------------------------------------ PUT /v1/prepare

def test_prepare_refusals_come_in_the_reference_s_order(sd):
    assert error_of(prepare(sd, {"session_id": "s", "credentials": [CREDENTIAL]}, auth=False)) \
        == (401, "unauthorized", "Missing or invalid bearer token")
    invalid = (400, "invalid_request", "Invalid JSON body")
    for body in (b"", b"{", b"[]", {"session_id": 7}, {"session_id": "s", "credentials": {}},
                 {"session_id": "s", "credentials": [{"env_names": "X"}]}):
        assert error_of(prepare(sd, body)) == invalid, body
    assert error_of(prepare(sd, {"credentials": [CREDENTIAL]})) == (
        422, "validation_error", "session_id is required")
    for creds in (None, []):
        assert error_of(prepare(sd, {"session_id": "s", "credentials": creds})) == (
            400, "invalid_request", "credentials must not be empty")
    # no egress proxy: refused, whatever the session id's form
    for session in ("sess_1", "not a valid id"):
        status, code, message = error_of(prepare(sd, {"session_id": session,
                                                      "credentials": [CREDENTIAL]}))
        assert (status, code) == (409, "egressproxy_disabled"), message
        assert message.startswith("Egress proxy is not enabled"), message
    r = sd.client.request("POST", "/v1/prepare", {"session_id": "s", "credentials": []})
    assert (r.status, r.headers.get("allow")) == (405, "PUT"), r


def test_a_session_refused_credentials_still_runs_jobs_without_them(sd):
    """Dify's SDK raises on the 409; the session's jobs then run as any
    others: no proxy variables, no placeholders, the secret nowhere."""
    r = prepare(sd, {"session_id": "agent-7", "credentials": [CREDENTIAL]})
    assert r.status == 409, r
    res, out = sd.client.run_to_end(
        'echo "[$GITHUB_TOKEN][$HTTPS_PROXY][$https_proxy]"; echo second', mode="stdio",
        session_id="agent-7")
    assert (res["status"], res["exit_code"], out) == ("exited", 0, "[][][]\nsecond\n"), res
    assert "ghp_x" not in sd.log


# ------------------------------------------------------------ /metrics

SAMPLE = re.compile(r'^(lockbox_shell_[a-z_]+)(\{[^}]*\})? (\S+)$', re.M)


def shell_metrics(d):
    r = requests.get(d.url("/metrics"), timeout=10)
    assert r.status_code == 200, r
    return {name + (labels or ""): float(v) for name, labels, v in SAMPLE.findall(r.text)}


def delta(before, after):
    return {k: after[k] - before.get(k, 0) for k in after if after[k] != before.get(k, 0)}


def counted(got):
    """The figures a test can know exactly: not the durations or free space,
    nor how jobs started (the binding's spare may be ready or not)."""
    return {k: v for k, v in got.items() if not k.startswith((
        "lockbox_shell_job_duration_seconds_bucket", "lockbox_shell_job_duration_seconds_sum",
        "lockbox_shell_home_free_bytes", "lockbox_shell_output_bytes_total",
        "lockbox_shell_job_starts_total"))}


def ended(d, job_id, deadline=20):
    return d.client.follow(d.client.wait(job_id, timeout=1), deadline)


def test_metrics_count_stdio_jobs_and_their_output_exactly(sd):
    before = shell_metrics(sd)
    assert before['lockbox_shell_jobs{status="running"}'] == 0, before
    a, out_a = sd.client.run_to_end("printf abc; exit 3", mode="stdio")
    d_, out_d = sd.client.run_to_end("head -c 100000 /dev/zero | tr '\\0' a", mode="stdio")
    assert (a["exit_code"], out_a, d_["exit_code"], len(out_d)) == (3, "abc", 0, 65536), (a, d_)
    got = delta(before, shell_metrics(sd))
    assert got.pop("lockbox_shell_output_bytes_total") == 3 + 65536, got
    # started cold or from the binding's spare, as the module's earlier cases left it
    assert (got.pop('lockbox_shell_job_starts_total{start="cold"}', 0) +
            got.pop('lockbox_shell_job_starts_total{start="spare"}', 0)) == 2, got
    assert counted(got) == {'lockbox_shell_jobs_ended_total{status="exited"}': 2,
                            'lockbox_shell_job_duration_seconds_count': 2,
                            'lockbox_shell_limits_total{limit="output"}': 1}, got


def test_metrics_count_live_jobs_ends_and_limits_exactly(sd):
    c = sd.client
    before = shell_metrics(sd)
    syscall, _ = c.run_to_end("python3 -c 'import ctypes; ctypes.CDLL(None).syscall(101, 0, 0, 0, 0)'",
                              mode="stdio")
    assert (syscall["status"], syscall["exit_code"]) == ("exited", 159), syscall
    memory, _ = c.run_to_end("python3 -c 'b = b\"x\" * (100 << 20)'", mode="stdio")
    assert (memory["status"], memory["exit_code"]) == ("exited", 137), memory
    sleeper = c.run("sleep 60", timeout=0.1)["job_id"]
    timed = c.run("sleep 30", timeout=0.1)["job_id"]  # ended by shell.job_timeout
    with pytest.raises(ShellError) as e:
        c.run("true", timeout=0.1)
    assert (e.value.status, e.value.code) == (429, "too_many_jobs"), e.value
    live = shell_metrics(sd)
    assert live['lockbox_shell_jobs{status="running"}'] + \
        live['lockbox_shell_jobs{status="starting"}'] == 2, live
    assert c.terminate(sleeper, grace_seconds=0)["status"] == "terminated"
    t = ended(sd, timed)[0]
    assert t["status"] == "terminated", t
    got = delta(before, shell_metrics(sd))
    assert counted(got) == {'lockbox_shell_jobs_ended_total{status="exited"}': 2,
                       'lockbox_shell_jobs_ended_total{status="terminated"}': 2,
                       'lockbox_shell_job_duration_seconds_count': 4,
                       'lockbox_shell_limits_total{limit="syscall"}': 1,
                       'lockbox_shell_limits_total{limit="memory"}': 1,
                       'lockbox_shell_limits_total{limit="job_timeout"}': 1,
                       'lockbox_shell_limits_total{limit="too_many_jobs"}': 1}, got
    # the job that ran past shell.job_timeout (3 s) is in a bucket above 1 s
    assert got['lockbox_shell_job_duration_seconds_bucket{le="+Inf"}'] == 4
    assert got.get('lockbox_shell_job_duration_seconds_bucket{le="1"}', 0) <= 3
    after = shell_metrics(sd)
    assert after['lockbox_shell_jobs{status="running"}'] == 0, after
    assert after['lockbox_shell_home_free_bytes'] > 0, after


def test_snapshot_counters_count_each_call_by_route_and_result(sd):
    import snapshotlib
    name = 'lockbox_shell_snapshots_total{{route="{}",result="{}"}}'
    before = shell_metrics(sd)
    saved = snapshotlib.save(sd)
    assert saved.status == 200 and saved.trailers.get("x-snapshot-status") == "ok", saved
    assert snapshotlib.restore(sd, saved.body).status == 200
    assert snapshotlib.restore(sd, b"not an archive").status == 400
    after = shell_metrics(sd)
    got = {(r, x): after[name.format(r, x)] - before[name.format(r, x)]
           for r in ("save", "restore") for x in ("ok", "failed")}
    assert got == {("save", "ok"): 1, ("save", "failed"): 0,
                   ("restore", "ok"): 1, ("restore", "failed"): 1}, got


# ------------------------------------------------------------ /ready

def test_ready_reports_the_shell_side(sd):
    r = requests.get(sd.url("/ready"), timeout=10)
    assert r.status_code == 200, r.text
    assert r.json()["data"]["shell"] == "ok", r.json()


def test_ready_says_when_the_jobs_directory_is_read_only(sd):
    """The jobs directory made read-only under the daemon (a read-only bind
    mount over it): /ready turns 503 with the reason within a few seconds,
    and 200 again once it is writable."""
    jobs = os.path.join(sd.state_dir, "jobs")
    subprocess.run(["mount", "--bind", jobs, jobs], check=True)
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", jobs], check=True)

        def not_ready():
            r = requests.get(sd.url("/ready"), timeout=10)
            assert r.status_code == 503, r.text
            return r.json()
        body = conftest.eventually(not_ready, conftest.scaled(5))
        assert body["message"] == ("not ready: the shell jobs directory (shell.state_dir/jobs) "
                                   "is missing or read-only"), body
    finally:
        subprocess.run(["umount", jobs], check=True)

    def ready():
        r = requests.get(sd.url("/ready"), timeout=10)
        assert r.status_code == 200, r.text
    conftest.eventually(ready, conftest.scaled(5))
