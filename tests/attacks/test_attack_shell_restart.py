"""Hostile shell jobs against restarts of lockboxd (shell.keep_jobs): a
job that acts while lockboxd is down, and records a crash or an operator
leaves damaged. Each case runs one daemon (shell.uid 81000) whose jobs
are bounded (sleepers of at most 600 s, deleted at the end); after it
nothing of the jobs may be left: no process of the jobs' UID, no job
cgroup or directory, no mount or loop device (stop_shell_daemon)."""
import os
import signal
import sys
import time

import pytest

from conftest import Daemon, eventually, scaled, start_shell_daemon, stop_shell_daemon

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                "integration"))
from test_shell_restart import down, keeper_of, up, wait_for  # noqa: E402

UIDS = (80000, 80099, 81000)  # jail.uid_min, jail.uid_max, shell.uid


@pytest.fixture
def keepd(_session_tmp):
    d = start_shell_daemon(_session_tmp, shell={"keep_jobs": True}, uids=UIDS,
                           enable_network=False)
    try:
        yield d
    except BaseException:
        print(d.log[-6000:])
        raise
    finally:
        try:
            if d.proc.poll() is None:
                d.shell_reset()
        finally:
            try:
                stop_shell_daemon(d)
            finally:
                reap_leftovers(d)


def reap_leftovers(d):
    """After a failure: what the daemon left of its jobs' UID is killed,
    and gone (a binding's init takes a moment to end its namespace)
    before the next case starts a daemon on the same UID."""
    for pid, _, _ in d.shell_processes():
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    for _ in range(200):
        if not d.shell_processes():
            return
        time.sleep(0.05)


def output_file(d, job_id, name="output.log"):
    try:
        with open(os.path.join(d.state_dir, "jobs", job_id, name)) as f:
            return f.read()
    except FileNotFoundError:
        return ""


PTRACE = "python3 -c 'import ctypes; ctypes.CDLL(None).syscall(101, 0, 0, 0, 0)'\n"


def test_a_forbidden_call_while_lockboxd_is_down_still_ends_the_job(keepd):
    """ptrace is on the jobs' kill list: the call fails and the job is
    ended for it. Made while lockboxd is down (the keeper refuses it but
    has no one to tell), it must end the job all the same once lockboxd
    is back, not be forgotten (a job could then probe the kill list for
    free during every restart)."""
    d, c = keepd, keepd.client
    script = ("echo ready\nwhile [ ! -e go ]; do sleep 0.05; done\n" + PTRACE +
              "echo survived\nsleep 600\n")
    j = c.run(script, mode="stdio", timeout=0.5)
    assert j["status"] == "running" and j["output"] == "ready\n", j
    # the same call with lockboxd up ends the job: the verdict this case wants
    r, out = c.run_to_end(PTRACE + "echo survived\n", mode="stdio")
    assert (r["status"], r["exit_code"], out) == ("exited", 128 + signal.SIGSYS, ""), (r, out)
    down(d, signal.SIGKILL)
    with open(d.home_path("go"), "w"):
        pass
    wait_for(lambda: "survived" in output_file(d, j["job_id"]), scaled(10))
    c = up(d)
    r = c.wait(j["job_id"], offset=0, timeout=10)
    assert (r["status"], r["exit_code"]) == ("exited", 128 + signal.SIGSYS), r
    assert "job killed: forbidden system call ptrace" in output_file(d, j["job_id"],
                                                                     "stderr.log")


@pytest.mark.parametrize("damage", ["emptied", "wal_lost"])
def test_lost_records_leave_no_process_behind(keepd, damage):
    """shell.db loses its rows (an operator empties it, or its WAL, which
    holds the last commits until a checkpoint, is lost with a crash):
    lockboxd starts, and what the rows named (a binding's init, a job's
    keeper and processes) does not run on for ever, unseen and unowned."""
    d, c = keepd, keepd.client
    j = c.run("echo up\nsleep 600\n", mode="stdio", timeout=5)
    assert j["status"] == "running" and j["output"] == "up\n", j
    wait_for(lambda: keeper_of(j["job_id"]), scaled(5))
    down(d, signal.SIGKILL)
    db = os.path.join(d.state_dir, "shell.db")
    for suffix in ("-wal", "-shm"):
        if os.path.exists(db + suffix):
            os.unlink(db + suffix)
    if damage == "emptied":
        os.truncate(db, 0)
    c = up(d)
    assert c.list() == []

    def nothing_left():
        left = d.shell_processes()
        assert not left, f"processes nothing claims any more: {left}"
    eventually(nothing_left, scaled(5))


def test_a_restart_without_the_shell_keeps_the_run_network(_session_tmp):
    """lockboxd is killed while a job of a binding on the run network is
    running, and started again with shell.enabled false (an operator
    turns the shell API off): the kept binding still holds a link and
    address of the last run network. Code runs with network must work
    all the same, not be refused for a subnet "in use on this host"."""
    d = start_shell_daemon(_session_tmp, shell={"keep_jobs": True}, uids=UIDS)
    try:
        j = d.client.run("echo up\nsleep 600\n", mode="stdio", timeout=5)
        assert j["status"] == "running" and j["output"] == "up\n", j
        down(d, signal.SIGKILL)
        d.shell_settings["enabled"] = False
        # no shell port to probe: healthy is the code API's /health
        d.wait_healthy = lambda timeout=10.0: Daemon.wait_healthy(d, timeout)
        Daemon.start(d)
        r = d.run("print('with network')", enable_network=True)
        assert r["code"] == 0 and r["data"]["stdout"] == "with network\n", r
        # the shell back on: its job is still there, and ends on request
        d.sigterm()
        d.proc.wait(timeout=scaled(20))
        d.log_file.close()
        del d.wait_healthy
        d.shell_settings["enabled"] = True
        c = up(d)
        assert c.get(j["job_id"])["status"] == "running"
        c.delete(j["job_id"], force=True, grace_seconds=0)
        eventually(d.check_shell_idle, scaled(5))
    except BaseException:
        print(d.log[-6000:])
        raise
    finally:
        try:
            stop_shell_daemon(d)
        finally:
            reap_leftovers(d)
