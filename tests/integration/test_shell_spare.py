"""Spares: each binding's next job is made ahead (its directory, cgroup,
keeper and first process waiting in its mount view), so a job of a known
binding starts without building a jail; and a binding whose last job was
removed lingers (shell.binding_linger) with its spare, so control scripts
and file transfers (each one job, run and removed) start warm too.

A job started from a spare must be indistinguishable from one started
cold: the same view, identity, limits, environment and cwd. A spare whose
trees are not the job's (HOME replaced, another workspace) is dropped and
the job starts cold; a job cannot touch its binding's spare; a lingering
binding keeps nothing of its removed jobs and ends on time."""
import os
import re
import time

from conftest import eventually, module_shell_fixtures, scaled, start_shell_daemon, \
    stop_shell_daemon

_module_shelld, sh = module_shell_fixtures({"binding_linger": 3})

PROBE = "\n".join([
    'echo "id:$(id -u):$(id -g):$(id -G)"',
    'echo "pwd:$(pwd)"',
    'echo "home:$HOME:$TMPDIR:$EXTRA"',
    'echo "mounts:$(wc -l < /proc/self/mountinfo)"',
    'echo "tmp:$(df -k /tmp | tail -1 | tr -s " " | cut -d" " -f2)"',
    'echo "root:$(ls / | tr "\\n" " ")"',
    'grep -E "^(CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs|Seccomp):" /proc/self/status'
    ' | tr -s "\\t" " "',
    'echo "nofile:$(ulimit -n)"',
    'touch /etc/x 2>/dev/null && echo etc:writable || echo etc:read-only',
    'touch "$HOME/p-$$" && rm "$HOME/p-$$" && echo homew:yes',
    'echo "ns:$(readlink /proc/self/ns/net /proc/self/ns/pid | tr "\\n" " ")"',
    'tty >/dev/null 2>&1 && echo tty:yes || echo tty:no',
])


def starts(d, job_id):
    """How the job started, from the daemon's log: 'spare' or 'cold'."""
    m = re.search(r"event=shell\.job_started job=%s .* start=(\w+)" % job_id, d.log)
    return m and m.group(1)


def probe_lines(out):
    # the namespaces' inode numbers are the binding's: the same for both
    return sorted(out.splitlines())


def home_of(d, name):
    h = d.home_path("homes", name)
    return h


def make_dirs(d, *paths):
    r, out = d.client.run_to_end("set -eu\nmkdir -p " + " ".join(f"'{p}'" for p in paths) +
                                 "\necho ok\n", mode="stdio")
    assert (r["exit_code"], out) == (0, "ok\n"), (r, out)
    d.client.delete(r["job_id"])


def spares(d):
    """The spares' keepers: processes named lockbox-spare of the jobs' UID."""
    return [p for p in d.shell_processes() if p[1] == "lockbox-spare"]


def wait_spare(d, count=1):
    """Until count spares are there (the log does not say when one is
    ready: a go sent earlier waits in its socket, so this is only for the
    tests that look at spares themselves)."""
    def there():
        assert len(spares(d)) >= count, d.shell_processes()
    eventually(there, scaled(5))


def test_a_job_from_a_spare_is_the_same_as_a_cold_one(sh):
    c = sh.client
    h = home_of(sh, "same")
    make_dirs(sh, h)
    env = {"HOME": h, "EXTRA": "x y"}
    for mode in ("stdio", "pty"):
        r1, out1 = c.run_to_end(PROBE, env=env, mode=mode, session_id="same-" + mode)
        r2, out2 = c.run_to_end(PROBE, env=env, mode=mode, session_id="same-" + mode)
        assert (r1["exit_code"], r2["exit_code"]) == (0, 0), (r1, out1, r2, out2)
        assert (starts(sh, r1["job_id"]), starts(sh, r2["job_id"])) == ("cold", "spare"), sh.log[-3000:]
        assert probe_lines(out1) == probe_lines(out2), (out1, out2)
        assert f"home:{h}:{h}:x y" in out1, out1
        assert "etc:read-only" in out2 and "homew:yes" in out2, out2
        assert ("tty:yes" in out2) == (mode == "pty"), out2
    # a script that runs itself (#!) and one that fails, from spares
    r, out = c.run_to_end("#!/bin/sh\necho \"self:$0\"\nexit 3\n", env=env, mode="stdio",
                          session_id="same-stdio")
    assert starts(sh, r["job_id"]) == "spare"
    assert (r["exit_code"], out) == (3, f"self:{sh.state_dir}/jobs/{r['job_id']}/script\n"), (r, out)
    r, out = c.run_to_end("cat; echo done", env=env, mode="stdio", session_id="same-stdio")
    assert (starts(sh, r["job_id"]), r["exit_code"], out) == ("spare", 0, "done\n"), (r, out)


def test_input_and_terminal_size_reach_a_job_from_a_spare(sh):
    c = sh.client
    h = home_of(sh, "input")
    make_dirs(sh, h)
    c.run_to_end("true", env={"HOME": h}, mode="stdio")
    r = c.run('stty size; read line; echo "got:$line"', env={"HOME": h},
              terminal={"cols": 91, "rows": 33}, timeout=1)
    assert starts(sh, r["job_id"]) == "spare"
    size = r["output"]
    r, out = c.follow(c.input(r["job_id"], "hello\n", r["offset"]), 10, 16384)
    assert (r["exit_code"], size) == (0, "33 91\n"), (r, size)
    assert "got:hello\n" in out, out


def test_a_spare_is_dropped_when_its_home_is_replaced_or_the_workspace_differs(sh):
    c = sh.client
    h = home_of(sh, "replaced")
    ws1, ws2 = sh.home_path("ws", "one"), sh.home_path("ws", "two")
    make_dirs(sh, h, ws1, ws2)
    r, _ = c.run_to_end("echo old > marker", env={"HOME": h}, mode="stdio")
    wait_spare(sh)
    # a control script replaces the HOME (as Dify's release and a new lease)
    r, out = c.run_to_end(f"set -eu\nrm -rf '{h}'\nmkdir '{h}'\necho new > '{h}/marker'\necho ok\n",
                          mode="stdio")
    assert out == "ok\n", (r, out)
    r, out = c.run_to_end("cat marker; ls", env={"HOME": h}, cwd=h, mode="stdio")
    assert (starts(sh, r["job_id"]), out) == ("cold", "new\nmarker\n"), (r, out)
    # the workspace is part of the view: another one starts cold, and sees
    # only itself
    r, out = c.run_to_end("touch in-one; echo ok", env={"HOME": h}, cwd=ws1, mode="stdio")
    assert out == "ok\n", (r, out)
    r, out = c.run_to_end(f"ls; ls '{ws1}' 2>&1 >/dev/null | grep -c 'No such'", env={"HOME": h},
                          cwd=ws2, mode="stdio")
    assert (starts(sh, r["job_id"]), out) == ("cold", "1\n"), (r, out)
    r, out = c.run_to_end("ls", env={"HOME": h}, cwd=ws2, mode="stdio")
    assert (starts(sh, r["job_id"]), out) == ("spare", ""), (r, out)


def test_a_job_cannot_touch_its_bindings_spare(sh):
    """The spare's first process waits as root in the binding's PID
    namespace: a job sees it but may not signal, trace or read it; its
    keeper is outside the namespace."""
    c = sh.client
    h = home_of(sh, "touch")
    make_dirs(sh, h)
    c.run_to_end("true", env={"HOME": h}, mode="stdio")
    wait_spare(sh)
    script = "\n".join([
        "for p in /proc/[0-9]*; do",
        '  n=$(cat $p/comm 2>/dev/null); [ "$n" = lockbox-spare ] || continue',
        '  pid=${p#/proc/}; echo "seen:$pid:$(stat -c %u $p)"',
        '  kill -STOP $pid 2>/dev/null && echo stop:yes || echo stop:no',
        '  kill -KILL $pid 2>/dev/null && echo kill:yes || echo kill:no',
        '  cat $p/environ >/dev/null 2>&1 && echo environ:yes || echo environ:no',
        '  ls $p/root/ >/dev/null 2>&1 && echo root:yes || echo root:no',
        '  cat $p/mem >/dev/null 2>&1 && echo mem:yes || echo mem:no',
        "done; echo end"])
    r, out = c.run_to_end(script, env={"HOME": h}, mode="stdio")
    assert starts(sh, r["job_id"]) == "spare"
    # the job's own spare was used; the next one was made after it started
    lines = out.splitlines()
    assert lines[-1] == "end", out
    for bad in ("stop:yes", "kill:yes", "environ:yes", "root:yes", "mem:yes"):
        assert bad not in lines, out
    assert not [ln for ln in lines if ln.startswith("seen:") and not ln.endswith(":0")], out
    r, out = c.run_to_end("echo after", env={"HOME": h}, mode="stdio")
    assert (starts(sh, r["job_id"]), out) == ("spare", "after\n"), (r, out)


def test_a_lingering_binding_keeps_nothing_of_its_removed_jobs_and_ends(sh):
    c = sh.client
    h = home_of(sh, "linger")
    make_dirs(sh, h)
    r, out = c.run_to_end("(sleep 1031 >/dev/null 2>&1 &); echo x > /tmp/left; echo started",
                          env={"HOME": h},
                          mode="stdio")
    assert out == "started\n"
    c.delete(r["job_id"], force=True, grace_seconds=0)
    # the job's processes ended with it; the binding (init, spare) stays
    def only_the_bindings():
        assert not sh.job_processes(), sh.job_processes()
    eventually(only_the_bindings, scaled(5))
    assert [p for p in sh.shell_processes() if p[1] == "lockbox-binding"], sh.shell_processes()
    r, out = c.run_to_end("cat /tmp/left 2>&1 | grep -c 'No such'; pgrep -c sleep || true",
                          env={"HOME": h}, mode="stdio")
    assert (starts(sh, r["job_id"]), out) == ("spare", "1\n0\n"), (r, out)
    c.delete(r["job_id"], force=True, grace_seconds=0)
    # binding_linger (3 s) later the binding ends: nothing of it is left
    time.sleep(3)
    eventually(sh.check_shell_idle, scaled(5))
    assert "shell.binding_ended binding=\"%s\"" % h in sh.log


def test_at_most_max_jobs_bindings_linger(sh):
    c = sh.client
    n = sh.shell_settings["max_jobs"] + 3
    homes = [home_of(sh, "many%d" % i) for i in range(n)]
    make_dirs(sh, *homes)
    for h in homes:
        r, out = c.run_to_end("echo up", env={"HOME": h}, mode="stdio")
        assert out == "up\n"
        c.delete(r["job_id"], force=True, grace_seconds=0)
    inits = [p for p in sh.shell_processes() if p[1] == "lockbox-binding"]
    # the control binding (make_dirs) lingers too
    assert len(inits) <= sh.shell_settings["max_jobs"], inits


def test_a_daemon_stopped_with_spares_and_lingering_bindings_leaves_nothing(_session_tmp):
    d = start_shell_daemon(_session_tmp, {"binding_linger": 600})
    try:
        c = d.client
        for i in range(3):
            h = d.home_path("stop%d" % i)
            r, out = c.run_to_end(f"mkdir -p '{h}'; echo ok", mode="stdio")
            assert out == "ok\n"
            r, out = c.run_to_end("echo one", env={"HOME": h}, mode="stdio")
            if i:
                c.delete(r["job_id"], force=True, grace_seconds=0)
        wait_spare(d, 3)
    finally:
        stop_shell_daemon(d)


def test_removing_a_bindings_last_running_job_does_not_stall_the_daemon(_session_tmp):
    """The binding ends with its job (binding_linger 0), its spare with
    it. A keeper must reap its first process before it goes: one left
    unreaped goes to the host's init (or to lockboxd, PID 1 in its
    container), and the binding's init, killed with the binding, cannot
    end until it is reaped. A spare's keeper that left its process so
    made each of these removals wait 1.5-2 s here (this machine's init
    reaps late); a removed job's keeper now also waits for its exit to
    be told before it is killed."""
    d = start_shell_daemon(_session_tmp, {"binding_linger": 0})
    try:
        c = d.client
        took = []
        for i, mode in enumerate(("stdio", "pty", "stdio", "pty")):
            r = c.run("echo up; sleep 1000", mode=mode, session_id="stall%d" % i, timeout=0.3)
            assert r["status"] == "running", r
            t = time.monotonic()
            c.delete(r["job_id"], force=True, grace_seconds=0)
            took.append(time.monotonic() - t)
        assert max(took) < scaled(1.0), took
        d.check_shell_idle()
    finally:
        stop_shell_daemon(d)
