"""The shell side's operations: PUT /v1/prepare (the credentials line,
refused in the reference's order since lockbox runs no egress proxy, with
the session's jobs unaffected), the shell series of /metrics counted
exactly after a known sequence of jobs, and /ready reporting the shell
side. The daemon is this module's own (fresh counters), on the UIDs given
to this suite's helper block (jail 78000-78099, jobs 79000)."""
import re

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
    d = conftest.start_shell_daemon(_session_tmp, uids=UIDS)
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
