"""Bindings: what a job sees of shell.home and who it shares namespaces
with, in the shapes Dify uses (its Local backend's layout under
shell.home, control scripts, the bootstrap job, file transfer through the
output). A job without HOME is a control job and sees all of shell.home;
a job with HOME=H sees H and its cwd's workspace (two levels below
shell.home), nothing else of it; jobs with the same binding key
(session_id, else HOME) share PID, IPC, UTS and network namespaces."""
import base64
import io
import json
import os
import random
import re
import socket
import tarfile
import uuid

import pytest

from conftest import ShellError, free_port

HOMES = ".dify-agent-materialized-homes"
WORKSPACES = ".dify-agent-workspaces"


class Lease:
    """A binding's HOME and workspace in Dify's Local layout, made by a
    control script as Dify makes them."""

    def __init__(self, d, name=None):
        self.d, self.c = d, d.client
        self.name = name or uuid.uuid4().hex[:10]
        self.home = d.home_path(HOMES, self.name)
        self.ws = d.home_path(WORKSPACES, self.name)

    def create(self):
        r, out = self.c.run_to_end(
            f"set -eu\nmkdir -p '{self.home}' '{self.ws}'\necho created\n", mode="stdio")
        assert (r["exit_code"], out) == (0, "created\n"), (r, out)
        return self

    def run(self, script, **kw):
        kw.setdefault("cwd", self.ws)
        kw["env"] = dict(kw.get("env") or {}, HOME=self.home)
        return self.c.run_to_end(script, **kw)

    def start(self, script, **kw):
        kw.setdefault("cwd", self.ws)
        kw["env"] = dict(kw.get("env") or {}, HOME=self.home)
        kw.setdefault("timeout", 10)
        return self.c.run(script, **kw)


def probes(out):
    """'name:result' lines as a dict."""
    return dict(line.split(":", 1) for line in out.splitlines() if ":" in line)


def host_write(d, path, text):
    """A file under shell.home written on the host, owned by the jobs' UID
    (as a job would have made it), world-readable."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    for p in (path, os.path.dirname(path)):
        os.chown(p, d.shell_uid, d.shell_uid)
    os.chmod(path, 0o644)


# ----------------------------------------------------------- control scripts

def test_control_scripts_make_a_lease_a_bound_job_uses_it_and_control_removes_it(shelld):
    d, c = shelld, shelld.client
    lease = Lease(d).create()
    for p in (lease.home, lease.ws, os.path.dirname(lease.home)):
        st = os.stat(p)
        assert (st.st_uid, os.path.isdir(p)) == (d.shell_uid, True), p
    script = ('set -eu\necho h > "$HOME/h.txt"\necho w > w.txt\nmkdir -p src/deep\n'
              'printf "%s|%s|" "$HOME" "$(pwd)"\ncat "$HOME/h.txt" w.txt\n')
    r, out = lease.run(script, mode="stdio")
    assert (r["exit_code"], out) == (0, f"{lease.home}|{lease.ws}|h\nw\n"), (r, out)
    # a cwd deeper in the workspace: the whole workspace is the job's
    r, out = lease.run('echo deep > ../../from-deep.txt; cat ../../w.txt "$HOME/h.txt"',
                       cwd=os.path.join(lease.ws, "src", "deep"), mode="stdio")
    assert (r["exit_code"], out) == (0, "w\nh\n"), (r, out)
    with open(os.path.join(lease.ws, "from-deep.txt")) as f:
        assert f.read() == "deep\n"
    # a cwd inside HOME: no workspace needed
    r, out = lease.run("pwd", cwd=lease.home, mode="stdio")
    assert (r["exit_code"], out) == (0, lease.home + "\n")
    c.delete(r["job_id"])
    # the control script removes both, as Dify's release does
    r, out = c.run_to_end(f"set -eu\nrm -rf -- '{lease.home}' '{lease.ws}'\necho removed\n",
                          mode="stdio")
    assert (r["exit_code"], out) == (0, "removed\n"), (r, out)
    assert not os.path.exists(lease.home) and not os.path.exists(lease.ws)


def test_a_bound_job_sees_only_its_home_and_workspace_of_shell_home(shelld):
    d = shelld
    lease = Lease(d).create()
    other = Lease(d).create()
    top = d.home_path("top-" + lease.name + ".txt")
    host_write(d, top, "TOP-SECRET\n")
    host_write(d, os.path.join(other.home, "f"), "OTHER-HOME\n")
    host_write(d, os.path.join(other.ws, "f"), "OTHER-WS\n")
    script = "\n".join([
        f"cat '{top}' 2>/dev/null && echo read-top:yes || echo read-top:no",
        f"cat '{other.home}/f' 2>/dev/null && echo read-home:yes || echo read-home:no",
        f"cat '{other.ws}/f' 2>/dev/null && echo read-ws:yes || echo read-ws:no",
        f"touch '{d.home}/new-{lease.name}' 2>/dev/null && echo write-top:yes || echo write-top:no",
        f"touch '{other.ws}/new' 2>/dev/null && echo write-ws:yes || echo write-ws:no",
        f"mkdir '{d.home}/{WORKSPACES}/{lease.name}x' 2>/dev/null && echo mkdir:yes || echo mkdir:no",
        f"ls -a '{d.home}' '{d.home}/{HOMES}' '{d.home}/{WORKSPACES}' 2>/dev/null | "
        f"grep -c -e '{other.name}' -e 'top-' | sed 's/^/listed:/'",
        'touch "$HOME/mine" && echo write-home:yes || echo write-home:no',
        "touch ./mine && echo write-own-ws:yes || echo write-own-ws:no",
        "for p in /usr/x /bin/x /etc/x /x /proc/x; do touch $p 2>/dev/null && echo system:$p; done",
        "echo end:yes"])
    r, out = lease.run(script, mode="stdio")
    assert probes(out) == {"read-top": "no", "read-home": "no", "read-ws": "no",
                           "write-top": "no", "write-ws": "no", "mkdir": "no", "listed": "0",
                           "write-home": "yes", "write-own-ws": "yes", "end": "yes"}, out
    assert "SECRET" not in out and "OTHER" not in out
    assert not os.path.exists(os.path.join(other.ws, "new"))
    assert not os.path.exists(d.home_path(f"new-{lease.name}"))
    # a control job sees all of shell.home
    r, out = d.client.run_to_end(f"cat '{top}' '{other.home}/f' '{other.ws}/f' "
                                 f"'{lease.home}/mine'", mode="stdio")
    assert (r["exit_code"], out) == (0, "TOP-SECRET\nOTHER-HOME\nOTHER-WS\n"), (r, out)


def test_tmp_is_private_per_job_and_tmpdir_is_the_cwd(shelld):
    lease = Lease(shelld).create()
    r, out = lease.run('echo mark > /tmp/mark-x && echo "$TMPDIR|$TMP|$TEMP"', mode="stdio")
    assert (r["exit_code"], out) == (0, f"{lease.ws}|{lease.ws}|{lease.ws}\n"), (r, out)
    r, out = lease.run("[ -e /tmp/mark-x ] && echo SEEN || echo fresh", mode="stdio")
    assert out == "fresh\n", out
    assert not [p for p in shelld.files_left() if "mark-x" in p]


def test_home_or_cwd_outside_what_a_binding_may_have_is_refused(shelld):
    d, c = shelld, shelld.client
    lease = Lease(d).create()
    before = c.list()
    for home in ("/etc", "/tmp/h-" + lease.name, d.root, d.home + "/../outside/h", d.outside):
        with pytest.raises(ShellError) as e:
            c.run("echo RAN", env={"HOME": home}, cwd=lease.ws, mode="stdio")
        assert e.value.status in (400, 422), (home, e.value)
    assert not os.path.exists("/tmp/h-" + lease.name)
    assert not os.path.exists(os.path.join(d.outside, "h"))
    # a bound job's cwd must be in its HOME or in a workspace (two levels
    # down): shell.home itself or one level down would hand it everything
    for cwd in (d.home, d.home_path(WORKSPACES), d.home_path(HOMES)):
        with pytest.raises(ShellError) as e:
            c.run("echo RAN", env={"HOME": lease.home}, cwd=cwd, mode="stdio")
        assert (e.value.status, e.value.code) == (400, "invalid_cwd"), (cwd, e.value)
    assert c.list() == before  # none of them made a job


# ----------------------------------------------------------- Dify's shapes

def tool_tarball():
    """A gzipped tar of bin/hello, a tool that prints its settings."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        data = b'#!/bin/sh\necho "hello from tool $TOOL_VERSION, $GREETING"\n'
        info = tarfile.TarInfo("bin/hello")
        info.size, info.mode = len(data), 0o755
        tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def upload_script(path, data):
    """Dify's upload: the bytes travel base64 inside the script."""
    b64 = base64.b64encode(data).decode()
    return f"set -eu\nmkdir -p \"$(dirname -- '{path}')\"\nprintf %s '{b64}' | base64 -d > '{path}'"


def download_script(path):
    return (f"if [ ! -f '{path}' ]; then exit 66; fi\n"
            "printf '%s\\n' '<<<DIFY_SHELL_FILE_BEGIN>>>'\n"
            f"base64 -- '{path}'\n"
            "printf '%s\\n' '<<<DIFY_SHELL_FILE_END>>>'\n")


def between(out, begin, end):
    m = re.search(re.escape(begin) + r"(.*?)" + re.escape(end), out, re.S)
    assert m, out[:2000]
    return m.group(1)


def test_bootstrap_job_installs_into_home_and_the_next_job_uses_it(shelld):
    lease = Lease(shelld).create()
    r, _ = lease.run(upload_script("./tool.tgz", tool_tarball()), deadline=60)
    assert r["exit_code"] == 0, r
    exports = ("export GREETING='it'\\''s me'\n"
               "export SECRET_REF=\"${SECRET_REF:-}\"\n"
               "export TOOL_VERSION='1.2'\n")
    bootstrap = ("set -eu\n" + exports +
                 'mkdir -p "$HOME/.local"\n'
                 'tar -xzf ./tool.tgz -C "$HOME/.local"\n'
                 '"$HOME/.local/bin/hello" > "$HOME/.local/installed.txt"')
    r, out = lease.run(bootstrap, output_limit=16384)
    assert (r["status"], r["exit_code"]) == ("exited", 0), (r, out)
    r, out = lease.run(exports + 'export PATH="$HOME/.local/bin:$PATH"\nhello\n'
                       'cat "$HOME/.local/installed.txt"')
    assert (r["exit_code"], out) == (0, "hello from tool 1.2, it's me\n" * 2), (r, out)
    # a bootstrap that fails stops at once, and says so with its code
    r, out = lease.run("set -eu\n" + exports + "false\necho NOT-REACHED")
    assert (r["status"], r["exit_code"]) == ("exited", 1) and "NOT-REACHED" not in out


def test_file_upload_and_download_through_the_output(shelld):
    lease = Lease(shelld).create()
    payload = random.Random(7).randbytes(100_000) + bytes(range(256))
    path = os.path.join(lease.ws, "data", "blob.bin")
    r, out = lease.run(upload_script(path, payload), deadline=60)
    assert (r["exit_code"], out) == (0, ""), (r, out[:500])
    with open(path, "rb") as f:
        assert f.read() == payload
    r, out = lease.run(download_script(path), deadline=60)
    assert r["exit_code"] == 0, r
    b64 = between(out, "<<<DIFY_SHELL_FILE_BEGIN>>>", "<<<DIFY_SHELL_FILE_END>>>")
    assert base64.b64decode("".join(b64.split())) == payload
    r, out = lease.run(download_script(os.path.join(lease.ws, "missing.bin")))
    assert (r["status"], r["exit_code"]) == ("exited", 66), r
    # the workspace listing, as Dify reads it: JSON through a python3 script
    listing = ("python3 - \"$1\" <<'PY'\n"
               "import base64, json, os, sys\n"
               "d = os.path.join(os.getcwd(), 'data')\n"
               "items = [{'name': n, 'size': os.path.getsize(os.path.join(d, n))}"
               " for n in sorted(os.listdir(d))]\n"
               "print('<<<DIFY_WORKSPACE_BEGIN>>>' + base64.b64encode(json.dumps(items)"
               ".encode()).decode() + '<<<DIFY_WORKSPACE_END>>>')\n"
               "PY")
    r, out = lease.run(listing)
    assert r["exit_code"] == 0, (r, out)
    payload_json = between(out, "<<<DIFY_WORKSPACE_BEGIN>>>", "<<<DIFY_WORKSPACE_END>>>")
    assert json.loads(base64.b64decode(payload_json)) == [{"name": "blob.bin",
                                                          "size": len(payload)}]


# ---------------------------------------------------- namespaces per binding

SERVER = """cat > "$HOME/srv.py" <<'PY'
import os, socket
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", {port}))
s.listen(8)
open(os.environ["HOME"] + "/ready", "w").close()
while True:
    c, _ = s.accept()
    c.sendall(b"hello from {tag}")
    c.close()
PY
rm -f "$HOME/ready"
setsid python3 "$HOME/srv.py" >/dev/null 2>&1 </dev/null &
for i in $(seq 100); do [ -e "$HOME/ready" ] && break; sleep 0.1; done
[ -e "$HOME/ready" ] && echo listening
"""

CLIENT = """python3 - <<'PY'
import socket
try:
    s = socket.create_connection(("127.0.0.1", {port}), timeout=5)
    print("got:" + s.recv(100).decode())
except OSError as e:
    print("err:" + type(e).__name__)
PY
"""


def test_a_server_one_job_left_running_answers_the_next_job_of_its_binding(shelld):
    d, c = shelld, shelld.client
    port = free_port()  # free on the host too: the test connects there
    a, b = Lease(d).create(), Lease(d).create()
    srv, out = a.run(SERVER.format(port=port, tag=a.name), mode="stdio")
    assert (srv["status"], srv["exit_code"], out) == ("exited", 0, "listening\n"), (srv, out)
    r, out = a.run(CLIENT.format(port=port), mode="stdio")
    assert out == f"got:hello from {a.name}\n", out
    # another binding has a network of its own: nothing listens there
    r, out = b.run(CLIENT.format(port=port), mode="stdio")
    assert out == "err:ConnectionRefusedError\n", out
    # nor on the host's loopback
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
    # deleting the job that started the server ends the server
    c.delete(srv["job_id"])
    r, out = a.run(CLIENT.format(port=port), mode="stdio")
    assert out == "err:ConnectionRefusedError\n", out


def test_session_id_is_the_binding_key_when_sent(shelld):
    d = shelld
    port = random.randrange(20000, 60000)
    a, b = Lease(d).create(), Lease(d).create()
    session = "lease_" + a.name
    _, out = a.run(SERVER.format(port=port, tag=a.name), session_id=session, mode="stdio")
    assert out == "listening\n", out
    # another HOME in the same session shares the network...
    _, out = b.run(CLIENT.format(port=port), session_id=session, mode="stdio")
    assert out == f"got:hello from {a.name}\n", out
    # ...and the same HOME without it does not
    _, out = a.run(CLIENT.format(port=port), mode="stdio")
    assert out == "err:ConnectionRefusedError\n", out


def test_two_bindings_cannot_read_write_or_signal_each_other(shelld):
    d, c = shelld, shelld.client
    a, b = Lease(d).create(), Lease(d).create()
    stay = a.start('echo A-HOME > "$HOME/secret"; echo A-WS > secret; '
                   'sleep 1031 >/dev/null 2>&1 & echo ready; wait', mode="stdio")
    assert stay["output"] == "ready\n", stay
    script = "\n".join([
        f"cat '{a.home}/secret' 2>/dev/null && echo read-home:yes || echo read-home:no",
        f"cat '{a.ws}/secret' 2>/dev/null && echo read-ws:yes || echo read-ws:no",
        f"echo x > '{a.home}/evil' 2>/dev/null && echo write-home:yes || echo write-home:no",
        f"echo x > '{a.ws}/evil' 2>/dev/null && echo write-ws:yes || echo write-ws:no",
        f"ln -s '{a.home}/secret' \"$HOME/link\" 2>/dev/null; "
        "cat \"$HOME/link\" 2>/dev/null && echo via-link:yes || echo via-link:no",
        "echo procs:$(ps -eo args | grep -c '^sleep 1031')",
        "pkill -f 'sleep 1031' && echo pkill:yes || echo pkill:no",
        "kill -9 -1 2>/dev/null; echo killall:done"])
    r, out = b.run(script, mode="stdio")
    assert probes(out) == {"read-home": "no", "read-ws": "no", "write-home": "no",
                           "write-ws": "no", "via-link": "no", "procs": "0",
                           "pkill": "no", "killall": "done"}, out
    assert "A-HOME" not in out and "A-WS" not in out
    # A is untouched: its job runs, its sleep lives, its files are as they were
    assert not c.get(stay["job_id"])["done"]
    assert [cmd for _, cmd in sleeps_1031(d)] == ["sleep 1031"]
    r, out = a.run("cat \"$HOME/secret\" secret; ls \"$HOME\" . | grep -c evil", mode="stdio")
    assert out.split() == ["A-HOME", "A-WS", "0"], out
    assert not os.path.exists(os.path.join(a.home, "evil"))
    assert not os.path.exists(os.path.join(a.ws, "evil"))


def sleeps_1031(d):
    """(host pid, command line) of live processes running "sleep 1031"."""
    out = []
    for pid, _, _ in d.shell_processes():
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode().strip()
            with open(f"/proc/{pid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if cmd == "sleep 1031" and state != "Z":
            out.append((pid, cmd))
    return out
