"""`lockbox shell` (the client's shell-job commands) against a real shell
daemon: run --follow writes the job's output and exits with its exit code
(stdio byte-exact, PTY through the terminal), input reaches a `read`,
ls/tail/kill/rm show and change what the API holds, and errors are the
API's code and message on one "lockbox: " line with exit 3 (2 for usage).
The daemon is this module's own, on the UIDs given to this suite's
helper block (jail 78000-78099, jobs 79000)."""
import json
import os
import re
import subprocess

import pytest

from conftest import REPO, SHELL_TOKEN, free_port
import conftest

LOCKBOX = os.environ.get("LOCKBOX") or os.path.join(REPO, "build", "lockbox")
BASE_ENV = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "LANG": "C.UTF-8"}
UID_MIN, UID_MAX, SHELL_UID = 78000, 78099, 79000


@pytest.fixture(scope="module")
def cli_daemon(_session_tmp):
    """A shell daemon on this module's UIDs, stopped (nothing left) at the end."""
    d = conftest.start_shell_daemon(_session_tmp, uids=(UID_MIN, UID_MAX, SHELL_UID))
    yield d
    conftest.stop_shell_daemon(d)


@pytest.fixture
def sd(cli_daemon):
    yield cli_daemon
    assert cli_daemon.proc.poll() is None, cli_daemon.log[-4000:]
    cli_daemon.shell_reset()


def shell(d, *args, stdin=None, env=None, token=SHELL_TOKEN, timeout=60):
    assert os.access(LOCKBOX, os.X_OK), f"{LOCKBOX} missing"
    full = dict(BASE_ENV, LOCKBOX_SHELL_URL=f"http://127.0.0.1:{d.shell_port}")
    full.update(env or {})
    if token is not None:
        full["SHELLCTL_AUTH_TOKEN"] = token
    return subprocess.run([LOCKBOX, "shell", *args], env=full, input=stdin, capture_output=True,
                          timeout=timeout)


def one_line(r, code, pattern):
    err = r.stderr.decode()
    assert r.returncode == code, (r.returncode, err, r.stdout)
    assert err.startswith("lockbox: ") and err.count("\n") == 1, err
    assert re.search(pattern, err), err
    return err


def job_id_of(r):
    assert r.returncode == 0, r
    out = r.stdout.decode()
    assert re.fullmatch(r"[0-9a-f]{16}\n", out), out
    return out.strip()


# ------------------------------------------------------------ run --follow

def test_run_follow_stdio_is_byte_exact_with_the_exit_code(sd):
    r = shell(sd, "run", "--mode", "stdio", "--follow",
              "printf 'a\\0b\\n'; echo err >&2; printf 'no newline'; exit 7")
    assert r.returncode == 7, r
    assert r.stdout == b"a\0b\nno newline"
    assert r.stderr == b""  # stdio jobs' stderr is private (stderr.log)


def test_run_follow_pty_streams_a_long_output_to_its_end(sd):
    r = shell(sd, "run", "--follow", "--cols", "80", "--rows", "24",
              "seq 1 40000; tput cols; exit 3")
    assert r.returncode == 3, r
    lines = r.stdout.decode().split("\n")
    assert lines[:40000] == [str(i) for i in range(1, 40001)]
    assert lines[40000] == "80"


def test_run_script_from_file_and_stdin_with_env_and_cwd(sd, tmp_path):
    os.makedirs(sd.home_path("work"), exist_ok=True)
    os.chown(sd.home_path("work"), sd.shell_uid, sd.shell_uid)
    script = tmp_path / "s.sh"
    script.write_text('echo "$GREETING from $(pwd)"\n')
    r = shell(sd, "run", "--file", str(script), "--env", "GREETING=hi=there", "--cwd",
              sd.home_path("work"), "--mode", "stdio", "--follow")
    assert (r.returncode, r.stdout) == (0, f"hi=there from {sd.home_path('work')}\n".encode()), r
    r = shell(sd, "run", "--mode", "stdio", "--follow", stdin=b"echo from-stdin; exit 0\n")
    assert (r.returncode, r.stdout) == (0, b"from-stdin\n"), r


def test_run_without_follow_prints_the_id_at_once_and_json_the_answer(sd):
    job = job_id_of(shell(sd, "run", "sleep 30"))
    assert sd.client.get(job)["status"] in ("starting", "running")
    r = shell(sd, "run", "--json", "--mode", "stdio", "--timeout", "10", "echo hi")
    body = json.loads(r.stdout)
    assert (body["status"], body["exit_code"], body["output"]) == ("exited", 0, "hi\n"), body


def test_run_follow_of_a_terminated_job_says_so(sd):
    job = job_id_of(shell(sd, "run", "sleep 60"))
    r_kill = shell(sd, "kill", job, "--grace", "0")
    assert r_kill.returncode == 0 and r_kill.stdout.decode().startswith(f"{job} terminated"), r_kill
    r = shell(sd, "wait", job)
    assert r.returncode in (130, 137), r
    one_line(r, r.returncode, rf"job {job} terminated \(exit code 1(30|37)\)")


# ------------------------------------------------------------ input, wait, tail, ls, rm

def test_input_reaches_a_read_and_wait_follow_ends_with_the_code(sd):
    job = job_id_of(shell(sd, "run", "printf 'name? '; read x; echo got:$x; exit 5"))
    r = shell(sd, "input", job, "alice\n")
    assert r.returncode == 0, r
    r = shell(sd, "wait", job, "--follow")
    assert r.returncode == 5, r
    assert r.stdout.decode().endswith("got:alice\n"), r.stdout
    assert "name? alice\n" in r.stdout.decode()
    # input from standard input; an ended job refuses it
    r = shell(sd, "input", job, stdin=b"late\n")
    one_line(r, 3, rf"lockbox: job_not_running: Job {job} is already terminal")


def test_tail_ls_and_rm(sd):
    done = job_id_of(shell(sd, "run", "--mode", "stdio", "seq 1 1000"))
    assert shell(sd, "wait", done).returncode == 0
    running = job_id_of(shell(sd, "run", "sleep 60"))
    r = shell(sd, "tail", done, "--limit", "9")
    assert (r.returncode, r.stdout) == (0, b"999\n1000\n"), r
    r = shell(sd, "ls")
    lines = r.stdout.decode().splitlines()
    assert r.returncode == 0 and lines[0].split() == ["JOB", "STATUS", "CREATED", "STARTED",
                                                      "ENDED"], lines
    rows = {ln.split()[0]: ln.split() for ln in lines[1:]}
    assert rows[done][1] == "exited" and rows[running][1] == "running", rows
    assert rows[running][4] == "-"
    r = shell(sd, "ls", "--status", "running", "--json")
    assert [j["job_id"] for j in json.loads(r.stdout)["jobs"]] == [running]
    # rm of a running job needs --force
    one_line(shell(sd, "rm", running), 3, rf"lockbox: job_running: Job {running} is still running")
    assert shell(sd, "rm", running, "--force", "--grace", "0").returncode == 0
    assert shell(sd, "rm", done).returncode == 0
    assert sd.client.list() == []


# ------------------------------------------------------------ errors

def test_errors_are_the_api_s_code_and_message(sd):
    one_line(shell(sd, "tail", "0123456789abcdef"), 3, r"lockbox: job_not_found: Unknown job id")
    one_line(shell(sd, "ls", token="wrong"), 3,
             r"lockbox: unauthorized: Missing or invalid bearer token \(set SHELLCTL_AUTH_TOKEN\)")
    one_line(shell(sd, "run", "--mode", "stdout", "true"), 3,
             r'lockbox: validation_error: invalid job mode "stdout"')
    one_line(shell(sd, "run", "--cwd", "/nonexistent-dir", "true"), 3, r"lockbox: invalid_cwd: ")
    dead = f"http://127.0.0.1:{free_port()}"
    one_line(shell(sd, "ls", env={"LOCKBOX_SHELL_URL": dead}), 3, r"cannot reach .*refused")
    one_line(shell(sd, "ls", "--url", dead), 3, r"cannot reach")


def test_usage_errors_exit_2(sd):
    one_line(shell(sd, "rm", "not-a-job"), 2, r"not a job id")
    one_line(shell(sd, "ls", "--force"), 2, r"--force does not go with this command")
    one_line(shell(sd, "frobnicate"), 2, r"unknown command 'frobnicate'")
    one_line(shell(sd, "run", "--env", "NOEQUALS", "true"), 2, r"NAME=VALUE")
    one_line(shell(sd, "run", "--cols", "0", "true"), 2, r"not a whole number")
    one_line(shell(sd, "wait"), 2, r"usage: lockbox shell wait JOB")
    r = shell(sd, "--help")
    assert r.returncode == 0 and b"lockbox shell run" in r.stdout
