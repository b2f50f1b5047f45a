"""Shell jobs outlive lockboxd (shell.keep_jobs, the default): stop it
(SIGTERM) or kill it (SIGKILL) in the middle of a job, start it again on
the same state directory, and the jobs are there: a stdio job that ended
while it was down reports its exit code and whole output, a PTY job still
running takes input, the list shows both, finished jobs keep their
output; a job whose keeper is gone becomes lost. Many restarts in a row
leave nothing behind."""
import glob
import os
import signal
import sqlite3
import time

import pytest

from conftest import (Daemon, eventually, processes_in_uid_range, scaled, start_shell_daemon,
                      stop_shell_daemon)
from test_shell_bindings import Lease

NO_NET = {"enable_network": False}


def wait_for(fn, timeout):
    """fn()'s first true value within timeout seconds."""
    def check():
        v = fn()
        assert v, v
        return v
    return eventually(check, timeout)


def down(d, sig):
    """Stop (SIGTERM: exit 0) or kill the daemon; once killed, its runs
    (which die with it) are gone too."""
    d.session.close()
    d.proc.send_signal(sig)
    rc = d.proc.wait(timeout=scaled(20))
    d.log_file.close()
    if sig == signal.SIGTERM:
        assert rc == 0, f"lockboxd exited with {rc} after SIGTERM:\n{d.log[-3000:]}"

    def runs_gone():
        left = processes_in_uid_range(d.uid_min, d.uid_max)
        assert not left, f"runs outlived lockboxd: {left}"
    eventually(runs_gone, scaled(10))


def up(d):
    """A new lockboxd on the same configuration, state directory and
    shell.home (a new port, and the client with it)."""
    Daemon.start(d)
    d.client = d.shell_client()
    return d.client


def restart(d, sig=signal.SIGTERM):
    down(d, sig)
    return up(d)


@pytest.fixture
def keepd(_session_tmp):
    d = start_shell_daemon(_session_tmp, shell={"keep_jobs": True}, **NO_NET)
    try:
        yield d
    except BaseException:
        print(d.log[-6000:])
        raise
    if d.proc.poll() is None:
        d.shell_reset()
    stop_shell_daemon(d)


def keeper_of(job_id):
    """PID of the keeper writing the job's output.log, or None."""
    for fd in glob.glob("/proc/[0-9]*/fd/*"):
        try:
            if os.readlink(fd).endswith(f"/jobs/{job_id}/output.log"):
                pid = int(fd.split("/")[2])
                with open(f"/proc/{pid}/comm") as f:
                    if f.read().strip() == "lockbox-keeper":
                        return pid
        except OSError:
            continue
    return None


def db_rows(d):
    con = sqlite3.connect(f"file:{d.state_dir}/shell.db?mode=ro", uri=True)
    try:
        return (sorted(r[0] for r in con.execute("SELECT id FROM jobs")),
                con.execute("SELECT count(*) FROM bindings").fetchone()[0])
    finally:
        con.close()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
def test_jobs_outlive_a_restart(keepd, sig):
    d, c = keepd, keepd.client
    gate = d.home_path("go")
    done = c.run("echo finished-before; exit 3", mode="stdio", timeout=10)
    assert (done["status"], done["exit_code"]) == ("exited", 3), done
    # a stdio job that ends while lockboxd is down: it waits for a file
    stdio = c.run("echo start\nwhile [ ! -e go ]; do sleep 0.05; done\necho end\nexit 7\n",
                  mode="stdio", timeout=0.5)
    pty = c.run("echo ready\nread x\necho got:$x\n", timeout=10)
    assert pty["status"] == "running" and "ready" in pty["output"], pty
    down(d, sig)
    # lockboxd is down: the stdio job ends now, its keeper holds the exit
    with open(gate, "w"):
        pass
    wait_for(lambda: keeper_of(stdio["job_id"]), scaled(5))
    time.sleep(0.5)
    c = up(d)
    listed = {j["job_id"]: j for j in c.list()}
    assert set(listed) == {done["job_id"], stdio["job_id"], pty["job_id"]}, listed
    r = c.wait(stdio["job_id"], offset=0, timeout=10)
    assert (r["status"], r["exit_code"], r["output"]) == ("exited", 7, "start\nend\n"), r
    r = c.wait(done["job_id"], offset=0, timeout=0)
    assert (r["status"], r["exit_code"], r["output"]) == ("exited", 3, "finished-before\n"), r
    # the PTY job was running all along and still takes input
    assert c.get(pty["job_id"])["status"] == "running"
    r, _ = c.follow(c.input(pty["job_id"], "hello\n", offset=0, timeout=10))
    assert (r["status"], r["exit_code"]) == ("exited", 0), r
    assert "got:hello" in c.output_of(pty["job_id"]), c.output_of(pty["job_id"])
    # its keeper went once the exit was on record
    wait_for(lambda: keeper_of(stdio["job_id"]) is None and keeper_of(pty["job_id"]) is None,
             scaled(5))


def test_a_job_whose_keeper_is_gone_is_lost(keepd):
    d, c = keepd, keepd.client
    j = c.run("sleep 600", mode="stdio", timeout=0.5)
    keeper = wait_for(lambda: keeper_of(j["job_id"]), scaled(5))
    down(d, signal.SIGKILL)
    # what a machine restart does to it
    os.kill(keeper, signal.SIGKILL)
    wait_for(lambda: keeper_of(j["job_id"]) is None, scaled(5))
    c = up(d)
    r = c.get(j["job_id"])
    assert r["status"] == "lost", r
    # its processes do not run on unseen: the group of a lost job is
    # emptied when it is removed
    c.delete(j["job_id"])
    eventually(d.check_shell_idle, scaled(5))


def test_terminate_after_a_restart_ends_every_process(keepd):
    d, c = keepd, keepd.client
    j = c.run("setsid sleep 600 &\nsleep 600 &\necho up\nwait\n", mode="stdio", timeout=5)
    assert j["status"] == "running" and "up" in j["output"], j
    c = restart(d, signal.SIGKILL)
    r = c.terminate(j["job_id"], grace_seconds=1)
    assert r["status"] == "terminated", r
    c.delete(j["job_id"])
    eventually(d.check_shell_idle, scaled(5))


SLEEPER = ("setsid /usr/bin/python3 -c 'import time; time.sleep(900)' {mark} "
           ">/dev/null 2>&1 </dev/null &\necho started\n")
def marked(d, mark):
    """Processes of the jobs' UID whose command line holds mark."""
    found = []
    for pid, _, _ in d.shell_processes():
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if mark.encode() in f.read():
                    found.append(pid)
        except OSError:
            pass
    return found


LOOK = "grep -l {mark} /proc/[0-9]*/cmdline >/dev/null 2>&1 && echo seen || echo unseen\n"


def test_a_binding_keeps_its_processes_across_a_restart(keepd):
    """A binding's namespaces are adopted with it: a process one job left
    running is seen by the binding's next job after a restart, and by no
    other binding's."""
    d = keepd
    mark = "mark-" + os.urandom(4).hex()
    a, b = Lease(d).create(), Lease(d).create()
    srv, out = a.run(SLEEPER.format(mark=mark), mode="stdio")
    assert (srv["exit_code"], out) == (0, "started\n"), (srv, out)
    assert a.run(LOOK.format(mark=mark), mode="stdio")[1] == "seen\n"
    restart(d, signal.SIGTERM)
    a.c = b.c = d.client
    assert a.run(LOOK.format(mark=mark), mode="stdio")[1] == "seen\n", d.log[-3000:]
    assert b.run(LOOK.format(mark=mark), mode="stdio")[1] == "unseen\n"
    # the job that started it still owns it: deleting it ends the process
    d.client.delete(srv["job_id"])
    assert a.run(LOOK.format(mark=mark), mode="stdio")[1] == "unseen\n"


def test_a_binding_on_the_run_network_is_retired_by_a_restart(_session_tmp):
    """With the run network (namespaced), what lockboxd set up for a
    binding goes with it: after a restart the old binding's jobs go on
    (and stay the jobs' to end), the binding's next job gets a new one."""
    d = start_shell_daemon(_session_tmp, shell={"keep_jobs": True})
    try:
        mark = "mark-" + os.urandom(4).hex()
        a = Lease(d).create()
        srv, out = a.run(SLEEPER.format(mark=mark), mode="stdio")
        assert (srv["exit_code"], out) == (0, "started\n"), (srv, out)
        restart(d, signal.SIGKILL)
        a.c = d.client
        assert a.run(LOOK.format(mark=mark), mode="stdio")[1] == "unseen\n"
        assert marked(d, mark), "the old binding's process went with the restart"
        d.client.delete(srv["job_id"])
        wait_for(lambda: not marked(d, mark), scaled(5))
        d.shell_reset()
    finally:
        stop_shell_daemon(d)


def test_many_restarts_leave_nothing_behind(keepd):
    """20 restarts, SIGTERM and SIGKILL in turn, with a job kept across
    them: the same processes, cgroups, job files, rows and keeper after
    each, and no mount, file or descriptor more at the end. A leak is one
    per restart at least, so 20 show it as 50 did (~7 s less)."""
    d, c = keepd, keepd.client
    j = c.run("echo up\nsetsid sleep 900 &\nread x\necho got:$x\n", timeout=5)
    assert j["status"] == "running", j
    keeper = wait_for(lambda: keeper_of(j["job_id"]), scaled(5))
    # the binding's spare (its next job, made ahead) ends at the first
    # stop and is made again only by the binding's next job
    restart(d, signal.SIGTERM)
    procs = sorted(d.shell_processes())
    cgroups = sorted(d.shell_cgroups())

    def mounts():
        with open("/proc/self/mountinfo") as f:
            return sorted(line.split()[4] for line in f if d.root in line)

    def fds(pid):
        return len(os.listdir(f"/proc/{pid}/fd"))

    before = (mounts(), fds(keeper), os.listdir(f"{d.state_dir}/jobs/{j['job_id']}"))
    for i in range(1, 20):
        restart(d, signal.SIGKILL if i % 2 else signal.SIGTERM)
        assert sorted(d.shell_processes()) == procs, i
        assert sorted(d.shell_cgroups()) == cgroups, i
        assert d.job_dirs() == [j["job_id"]], i
        assert db_rows(d) == ([j["job_id"]], 1), i
    # the same keeper all along, holding one connection, not one per
    # restart; no mount, file or descriptor more
    assert keeper_of(j["job_id"]) == keeper
    assert (mounts(), fds(keeper), os.listdir(f"{d.state_dir}/jobs/{j['job_id']}")) == before
    c = d.client
    r, _ = c.follow(c.input(j["job_id"], "bye\n", offset=0, timeout=10))
    assert r["exit_code"] == 0 and "got:bye" in c.output_of(j["job_id"]), r


def test_keep_jobs_false_ends_jobs_at_stop(_session_tmp):
    """The switch: a stop ends every job and binding, as the suites' own
    daemons do; nothing is left (stop_shell_daemon checks it)."""
    d = start_shell_daemon(_session_tmp, shell={"keep_jobs": False}, **NO_NET)
    try:
        j = d.client.run("setsid sleep 600 &\nsleep 600\n", mode="stdio", timeout=0.5)
        assert j["status"] in ("starting", "running"), j
    finally:
        stop_shell_daemon(d)
