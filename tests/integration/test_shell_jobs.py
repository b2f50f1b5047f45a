"""Shell jobs at work: long output paged by offsets, the wait semantics
Dify relies on (timeout 0, idle flush, full windows, done with more to
read), the terminal (input, prompts, progress bars, colours), terminate and
delete with every process a job made, the environment, and the bound on
live jobs. What is checked is what Dify's client sees, and with ps what is
left on the host."""
import os
import time
import uuid

import pytest

from conftest import SHELL_TOKEN, ShellError, eventually, scaled


def raises(call, status, code, message=None):
    with pytest.raises(ShellError) as e:
        call()
    assert (e.value.status, e.value.code) == (status, code), e.value
    if message is not None:
        assert e.value.message == message, e.value
    return e.value


def cmdlines(d):
    """{host pid: command line} of the jobs' UID's processes."""
    out = {}
    for pid, _, _ in d.shell_processes():
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                out[pid] = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            pass
    return out


def left_of(d, *needles):
    """Live (not zombie) processes of the jobs' UID whose command line
    holds a needle."""
    return {p: c for p, c in cmdlines(d).items()
            if any(n in c for n in needles) and not _is_zombie(p)}


def only_binding_inits(d):
    """Live processes of the jobs' UID that are not a binding's own (its
    init and its spare's keeper, which live as long as its jobs)."""
    return [p for p in d.job_processes() if not _is_zombie(p[0])]


# ---------------------------------------------------------------- paging

UNIT = "a€é😀\n"  # 1, 3, 2 and 4 bytes, and a newline: 11 bytes


def test_200_kb_of_stdio_output_paged_by_offsets_never_splits_a_character(shelld):
    c = shelld.client
    n = 20000
    expected = (UNIT * n).encode()
    script = f"python3 - <<'PY'\nimport sys\nsys.stdout.write({UNIT!r} * {n})\nPY\n"
    r = c.run(script, mode="stdio", output_limit=1000, timeout=10)
    pages, offset = [], 0
    while True:
        assert r["offset"] - offset == len(r["output"].encode()) <= 1000, r["offset"]
        assert r["output"].encode() == expected[offset:r["offset"]]
        pages.append(r["output"])
        offset = r["offset"]
        if r["done"] and not r["truncated"]:
            break
        r = c.wait(r["job_id"], offset=offset, output_limit=1000, timeout=5)
    assert "".join(pages).encode() == expected
    assert offset == len(expected) == 220000
    assert len(pages) >= 220
    assert r["exit_code"] == 0
    job = r["job_id"]
    # an offset inside "€" (bytes 1-3) starts at the next character
    w = c.wait(job, offset=2, output_limit=100)
    assert w["output"].startswith("é😀\na€") and w["output"].encode() == expected[4:w["offset"]]
    # a window too small for a character holds that one character
    w = c.wait(job, offset=6, output_limit=1)
    assert (w["output"], w["offset"], w["truncated"]) == ("😀", 10, True)
    # a window that would end inside "😀" stops before it
    w = c.wait(job, offset=0, output_limit=8)
    assert (w["output"], w["offset"]) == ("a€é", 6)


def test_200_kb_of_pty_output_paged_by_offsets(shelld):
    c = shelld.client
    r, out = c.run_to_end("seq 1 40000", output_limit=16384, deadline=60)
    assert out == "".join(f"{i}\n" for i in range(1, 40001))
    assert r["offset"] == len(out) > 200000
    assert c.get(r["job_id"])["offset"] == len(out)


# ---------------------------------------------------------- wait semantics

def test_wait_with_timeout_0_answers_at_once(shelld):
    """Dify's read_output: the client's read timeout (timeout + 10 s) would
    expire if the call waited for the job."""
    c = shelld.client
    r = c.run("echo ready; sleep 60", timeout=10)
    assert (r["output"], r["done"]) == ("ready\n", False), r
    for _ in range(3):
        w = c.wait(r["job_id"], offset=0, timeout=0)
        assert (w["output"], w["offset"], w["truncated"], w["done"]) == ("ready\n", 6, False,
                                                                        False), w
        w = c.wait(r["job_id"], offset=6, timeout=0)
        assert (w["output"], w["offset"], w["truncated"], w["done"]) == ("", 6, False, False), w
        assert w["status"] == "running"


def test_wait_returns_what_there_is_when_output_goes_quiet(shelld):
    """The idle flush: a running job's partial output comes back once no
    byte came for idle_flush_seconds, long before the call's timeout (300 s
    asked; the client gives up after 20)."""
    c = shelld.client
    r = c.run("echo first; sleep 300", timeout=300, idle_flush_seconds=0.3,
              http_timeout=scaled(20))
    assert (r["output"], r["done"], r["truncated"]) == ("first\n", False, False), r
    # nothing new: the call ends at its timeout with nothing
    w = c.wait(r["job_id"], offset=r["offset"], timeout=1)
    assert (w["output"], w["offset"], w["done"]) == ("", 6, False), w


def test_a_full_window_returns_at_once_and_the_rest_follows(shelld):
    """A full window answers at once, though output never goes quiet (the
    job ticks every 0.1 s) and the call could wait 300 s."""
    c = shelld.client
    expected = "".join(f"{i}\n" for i in range(1, 30001))
    r = c.run("seq 1 30000; while :; do echo tick; sleep 0.1; done", timeout=300,
              output_limit=1000, http_timeout=scaled(20))
    assert (r["truncated"], r["done"]) == (True, False), r
    assert (r["output"], r["offset"]) == (expected[:1000], 1000)
    w = c.wait(r["job_id"], offset=1000, timeout=300, output_limit=1000, http_timeout=scaled(20))
    assert (w["output"], w["offset"], w["truncated"]) == (expected[1000:2000], 2000, True)
    while w["offset"] < len(expected):  # the rest, without waiting
        w = c.wait(r["job_id"], offset=w["offset"], timeout=0, output_limit=1 << 20)
    assert c.output_of(r["job_id"]).startswith(expected + "tick\n")
    assert not w["done"]


def test_a_finished_job_answers_done_and_truncated_until_read_to_the_end(shelld):
    c = shelld.client
    r, out = c.run_to_end("seq 1 20000", mode="stdio")
    job = r["job_id"]
    w = c.wait(job, offset=0, output_limit=1000, timeout=30)
    assert (w["done"], w["truncated"], w["status"], w["offset"]) == (True, True, "exited", 1000)
    assert w["output"] == out[:1000]
    w = c.wait(job, offset=len(out) - 10, output_limit=1000, timeout=30)
    assert (w["done"], w["truncated"], w["output"]) == (True, False, out[-10:])


# ------------------------------------------------------------ the terminal

def test_pty_input_answers_a_prompt_and_is_echoed(shelld):
    c = shelld.client
    r = c.run("printf 'name? '; read x; echo got:$x", timeout=10)
    # the prompt has no newline; it still shows once the terminal is quiet
    assert (r["output"], r["done"]) == ("name? ", False), r
    w = c.input(r["job_id"], "alice\n", offset=r["offset"], timeout=10)
    w, rest = c.follow(w)
    assert (w["status"], w["exit_code"]) == ("exited", 0), w
    assert r["output"] + rest == "name? alice\ngot:alice\n"
    assert c.output_of(r["job_id"]) == "name? alice\ngot:alice\n"


def test_pty_input_lines_and_no_echo_when_the_program_turns_it_off(shelld):
    c = shelld.client
    r = c.run("read a; read b; stty -echo; echo quiet; read s; stty echo; echo \"$a+$b+${#s}\"",
              timeout=1)
    w = c.input(r["job_id"], "one\ntwo\n", offset=r["offset"], timeout=10)
    eventually(lambda: _output_is(c, r["job_id"], "one\ntwo\nquiet\n"), scaled(10))
    w = c.input(r["job_id"], "hunter2\n", offset=len("one\ntwo\nquiet\n"), timeout=10)
    w, _ = c.follow(w)
    assert (w["status"], w["exit_code"]) == ("exited", 0), w
    assert c.output_of(r["job_id"]) == "one\ntwo\nquiet\none+two+7\n"


def _output_is(c, job_id, text):
    out = c.output_of(job_id)
    assert out == text, out


def test_ctrl_c_typed_at_the_terminal_interrupts_the_job(shelld):
    c = shelld.client
    r = c.run("echo waiting; sleep 60; echo NOT-REACHED", timeout=10)
    assert r["output"] == "waiting\n"
    w = c.input(r["job_id"], "\x03", offset=r["offset"], timeout=10)
    w, _ = c.follow(w)
    assert (w["status"], w["exit_code"]) == ("exited", 130), w
    assert "NOT-REACHED" not in c.output_of(r["job_id"])


def test_progress_bars_colours_and_titles_are_cleaned_from_pty_output(shelld):
    script = ("printf '10%%\\r50%%\\r100%%\\ndone\\n'\n"
              "printf '\\033[1;31mred\\033[0m plain\\n'\n"
              "printf '\\033]0;a title\\007titled\\n'\n"
              "printf 'crlf\\r\\n'\n"
              "printf '\\033[2K\\rredrawn\\n'\n")
    r, out = shelld.client.run_to_end(script)
    assert out == "100%\ndone\nred plain\ntitled\ncrlf\nredrawn\n"
    assert r["exit_code"] == 0


def test_stdio_output_is_not_cleaned(shelld):
    r, out = shelld.client.run_to_end("printf '10%%\\r100%%\\n\\033[1mb\\033[0m\\r\\n'",
                                      mode="stdio")
    assert out == "10%\r100%\n\x1b[1mb\x1b[0m\r\n"


# --------------------------------------------------------------- terminate

def test_terminate_kills_setsid_daemons_and_background_children(shelld):
    c = shelld.client
    script = (
        "setsid sleep 1001 &\n"
        "sleep 1002 &\n"
        "nohup sleep 1003 >/dev/null 2>&1 &\n"
        "(trap '' HUP INT TERM; exec sleep 1004) &\n"
        "python3 -c 'import os, time\n"
        "if os.fork(): os._exit(0)\n"
        "os.setsid()\n"
        "if os.fork(): os._exit(0)\n"
        "time.sleep(1005)' &\n"
        "sleep 0.5; echo started; sleep 1000\n")
    r = c.run(script, timeout=20)
    assert r["output"] == "started\n", r
    names = ("sleep 1001", "sleep 1002", "sleep 1003", "sleep 1004", "time.sleep(1005)",
             "sleep 1000")
    seen = eventually(lambda: _all_there(shelld, names), scaled(5))
    # the job's cgroup is where the fixture's after-check looks for leftovers
    assert [p for p in shelld.shell_cgroups() if p.endswith("/" + r["job_id"])], \
        shelld.shell_cgroups()
    v = c.terminate(r["job_id"], grace_seconds=2)
    assert (v["status"], v["done"]) == ("terminated", True), v
    assert v["exit_code"] in (130, 137), v
    # when terminate answers, every process the job made is gone
    assert not left_of(shelld, *names), left_of(shelld, *names)
    for pid in seen:
        assert not os.path.exists(f"/proc/{pid}") or _is_zombie(pid), pid
    assert not only_binding_inits(shelld), cmdlines(shelld)
    w = c.wait(r["job_id"], offset=0)
    assert (w["status"], w["exit_code"]) == ("terminated", v["exit_code"])
    c.delete(r["job_id"])
    eventually(lambda: _none_left(shelld), scaled(5))


def _none_left(d):
    assert not d.shell_processes(), cmdlines(d)


def _all_there(d, names):
    found = left_of(d, *names)
    assert all(any(n in cmd for cmd in found.values()) for n in names), found
    return list(found)


def _is_zombie(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


@pytest.mark.parametrize("mode", ["pty", "stdio"])
def test_terminate_interrupts_and_answers_before_the_grace_runs_out(shelld, mode):
    c = shelld.client
    r = c.run("echo up; sleep 60; echo NOT-REACHED", mode=mode, timeout=10)
    assert r["output"] == "up\n"
    t0 = time.monotonic()
    v = c.terminate(r["job_id"], grace_seconds=30)
    # the grace is an upper bound: the job ended on the interrupt
    assert time.monotonic() - t0 < scaled(20)
    assert (v["status"], v["exit_code"]) == ("terminated", 130), v
    assert "NOT-REACHED" not in c.output_of(r["job_id"])
    assert not only_binding_inits(shelld), cmdlines(shelld)


def test_terminate_kills_a_job_that_ignores_the_interrupt_after_the_grace(shelld):
    c = shelld.client
    r = c.run("trap '' INT TERM HUP; echo deaf; sleep 1000", timeout=10)
    assert r["output"] == "deaf\n"
    v = c.terminate(r["job_id"], grace_seconds=1)
    assert (v["status"], v["exit_code"]) == ("terminated", 137), v
    assert not left_of(shelld, "sleep 1000")
    # terminate of a finished job changes nothing
    assert c.terminate(r["job_id"], grace_seconds=1) == c.get(r["job_id"])
    r2, _ = c.run_to_end("exit 4")
    v = c.terminate(r2["job_id"], grace_seconds=0)
    assert (v["status"], v["exit_code"]) == ("exited", 4), v


# ------------------------------------------------------------------ delete

def test_delete_of_a_running_job_needs_force(shelld):
    c = shelld.client
    r = c.run("echo up; sleep 1007", timeout=10)
    job = r["job_id"]
    msg = f"Job {job} is still running"
    raises(lambda: c.delete(job), 409, "job_running", msg)
    raises(lambda: c.call("DELETE", f"/v1/jobs/{job}"), 409, "job_running", msg)
    raises(lambda: c.call("DELETE", f"/v1/jobs/{job}?force=TRUE"), 409, "job_running", msg)
    assert c.get(job)["status"] == "running" and left_of(shelld, "sleep 1007")
    assert c.delete(job, force=True, grace_seconds=5) == {"job_id": job, "deleted": True}
    raises(lambda: c.get(job), 404, "job_not_found")
    raises(lambda: c.delete(job, force=True), 404, "job_not_found")
    assert not left_of(shelld, "sleep 1007")
    assert job not in shelld.job_dirs()
    assert job not in [j["job_id"] for j in c.list()]


# A daemon the script leaves behind: started in a session of its own, and
# waited for, so the terminal's hangup when the script ends cannot reach it
# before its setsid (in the reference too).
LEAVE = ("setsid sh -c 'echo > /tmp/up; exec sleep {n}' >/dev/null 2>&1 &\n"
         "while [ ! -e /tmp/up ]; do sleep 0.05; done\n")


def test_what_a_finished_job_left_running_lives_until_the_job_is_deleted(shelld):
    c = shelld.client
    r, out = c.run_to_end(LEAVE.format(n=1008) + "echo left")
    assert (r["status"], r["exit_code"], out) == ("exited", 0, "left\n"), r
    assert left_of(shelld, "sleep 1008")
    c.delete(r["job_id"])  # finished: no force needed; its processes go with it
    assert not left_of(shelld, "sleep 1008"), cmdlines(shelld)


# ---------------------------------------------------------- the environment

def test_environment_overlay_tmp_variables_and_no_secret(shelld):
    c = shelld.client
    ws = shelld.home_path("envtest")
    os.makedirs(ws, exist_ok=True)
    env = {"FOO": "bar baz", "TERM": "dumb", "LANG": "C", "PATH": "/usr/bin:/bin",
           "TMPDIR": "/nowhere", "TMP": "/x", "TEMP": "/y", "EMPTY": ""}
    script = ('printf "%s|" "$FOO" "$TERM" "$LANG" "$PATH" "$TMPDIR" "$TMP" "$TEMP" "${EMPTY-unset}" '
              '"$HOME" "$(pwd)"; echo; env')
    r, out = c.run_to_end(script, cwd=ws, env=env, mode="stdio")
    first, envdump = out.split("\n", 1)
    assert first.split("|")[:10] == ["bar baz", "dumb", "C", "/usr/bin:/bin", ws, ws, ws, "",
                                     shelld.home, ws]
    assert SHELL_TOKEN not in out
    assert "SHELLCTL_" not in envdump, envdump


def test_a_job_without_home_is_a_control_job_in_shell_home(shelld):
    _, out = shelld.client.run_to_end('printf "%s|%s|%s" "$HOME" "$(pwd)" "$TMPDIR"')
    assert out == f"{shelld.home}|{shelld.home}|{shelld.home}"


def test_home_is_made_when_missing_and_owned_by_the_jobs_uid(shelld):
    c = shelld.client
    home = shelld.home_path("homes", uuid.uuid4().hex[:8], "deeper")
    assert not os.path.exists(home)
    r, out = c.run_to_end('cd; [ -d "$HOME" ] && [ -w "$HOME" ] && echo ok > "$HOME/made"; '
                          'cat "$HOME/made"', env={"HOME": home})
    assert (r["exit_code"], out) == (0, "ok\n"), r
    for p in (home, os.path.dirname(home), os.path.join(home, "made")):
        st = os.stat(p)
        assert (st.st_uid, st.st_gid) == (shelld.shell_uid, shelld.shell_uid), p


# -------------------------------------------------------------- max jobs

def test_a_run_beyond_max_jobs_live_jobs_is_429_and_the_service_goes_on(shelld):
    c = shelld.client
    limit = shelld.shell_settings["max_jobs"]
    for _ in range(3):  # finished jobs with nothing left do not count
        c.run_to_end("true")
    sleepers = [c.run("sleep 1009", timeout=0.1)["job_id"] for _ in range(limit)]
    e = raises(lambda: c.run("echo NO"), 429, "too_many_jobs")
    assert e.message
    assert sum(not c.get(j)["done"] for j in sleepers) == limit
    # a finished job whose processes are still there counts too
    c.terminate(sleepers.pop(), grace_seconds=0)
    r, _ = c.run_to_end(LEAVE.format(n=1010))
    assert r["status"] == "exited"
    raises(lambda: c.run("echo NO"), 429, "too_many_jobs")
    c.delete(r["job_id"])
    r, out = c.run_to_end("echo yes")
    assert out == "yes\n"
    assert "NO" not in "".join(c.output_of(j["job_id"]) for j in c.list())


# ------------------------------------------------- job_timeout and retention

def test_job_timeout_ends_a_job_and_retention_removes_it(shell_daemon_factory):
    d = shell_daemon_factory(shell={"job_timeout": 1, "retention": 1})
    c = d.client
    r = c.run("echo started; sleep 1011", timeout=10)
    w = c.follow(c.wait(r["job_id"], offset=r["offset"], timeout=20), deadline=30)[0]
    assert w["done"] and w["status"] in ("terminated", "exited"), w
    assert w["exit_code"] == 130, w
    assert not left_of(d, "sleep 1011")
    # one second after it ended it is gone, output and all
    def gone():
        try:
            c.get(r["job_id"])
        except ShellError as e:
            assert (e.status, e.code) == (404, "job_not_found"), e
            return
        raise AssertionError("the job is still kept")

    eventually(gone, scaled(10))
    assert r["job_id"] not in d.job_dirs()
    assert c.list() == []


def test_bindings_share_the_cpu_by_weight_not_by_process_count(shelld):
    """Each binding's processes are in a CPU group of its own below the
    shell parent (cgroup v1: the cpu hierarchy, cpu.shares from
    shell.cpu_weight; v2: cpu.weight in its group), its jobs in equal
    groups inside: a binding that starts many busy processes takes no more
    than its share from another under contention."""
    c = shelld.client
    r = c.run("echo up; sleep 600", mode="stdio", timeout=5)
    assert r["output"] == "up\n", r
    pid = eventually(lambda: _all_there(shelld, ("sleep 600",)), scaled(5))[0]
    with open(f"/proc/{pid}/cgroup") as f:
        lines = dict(line.rstrip("\n").split(":", 2)[1:] for line in f)
    v1 = "cpu" in lines or "cpu,cpuacct" in lines
    if v1:
        path = lines.get("cpu", lines.get("cpu,cpuacct"))
        parts = path.split("/")
        assert parts[-1] == r["job_id"] and parts[-2].startswith("shell-b") and \
            parts[-3].startswith("lockbox-shell-"), path
        mnt = "/sys/fs/cgroup/" + ("cpu" if "cpu" in lines else "cpu,cpuacct")
        with open(mnt + os.path.dirname(path) + "/cpu.shares") as f:
            assert f.read().strip() == "1024"  # shell.cpu_weight 100
    else:
        path = lines[""]
        with open("/sys/fs/cgroup" + os.path.dirname(path) + "/cpu.weight") as f:
            assert f.read().strip() == "100"
    c.delete(r["job_id"], force=True, grace_seconds=0)
