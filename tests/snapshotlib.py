"""Helpers of the HOME snapshot tests (tests/integration/test_shell_snapshot.py,
tests/attacks/test_attack_shell_snapshot.py): a raw HTTP/1.1 client that
shows a chunked body's trailers (http.client drops them) and whether the
stream ended cleanly, zstd through Debian's `zstd` binary, and a daemon
with the UIDs these suites own."""
import os
import socket
import subprocess

# jail.uid_min..uid_max and shell.uid of the snapshot suites' daemons
UID_MIN, UID_MAX, SHELL_UID = 76000, 76099, 77000
READ_MAX = 256 << 20  # bytes a test reads from one answer


class Answer:
    def __init__(self, status, headers, body, trailers, complete):
        self.status, self.headers, self.body = status, headers, body
        self.trailers, self.complete = trailers, complete

    def json(self):
        import json
        return json.loads(self.body)

    def __repr__(self):
        return (f"<{self.status} {self.headers} {self.body[:300]!r} trailers={self.trailers} "
                f"complete={self.complete}>")


def _read_line(f):
    line = f.readline(65536)
    if not line.endswith(b"\r\n"):
        raise EOFError("truncated line")
    return line[:-2]


def _read_chunked(f):
    body = bytearray()
    while True:
        size = int(_read_line(f).split(b";")[0], 16)
        if size == 0:
            break
        chunk = f.read(size)
        if len(chunk) != size or f.read(2) != b"\r\n":
            raise EOFError("truncated chunk")
        body += chunk
        if len(body) > READ_MAX:
            raise EOFError("answer too large for a test")
    trailers = {}
    while True:
        line = _read_line(f)
        if not line:
            return bytes(body), trailers
        k, _, v = line.decode().partition(":")
        trailers[k.strip().lower()] = v.strip()


def request(port, token, method, path, body=b"", headers=None, timeout=60, chunks=None):
    """One request on a connection of its own: an Answer. body (bytes) or
    chunks (an iterable of bytes, sent with a Content-Length of their
    total, piece by piece). complete: the body ended as its framing says
    (for chunked, with its last chunk and trailers)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        total = len(body) if chunks is None else sum(len(c) for c in chunks)
        head = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", "Connection: close",
                f"Content-Length: {total}"]
        if token:
            head.append(f"Authorization: Bearer {token}")
        head += [f"{k}: {v}" for k, v in (headers or {}).items()]
        s.sendall(("\r\n".join(head) + "\r\n\r\n").encode())
        try:
            for c in ([body] if chunks is None else chunks):
                s.sendall(c)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server answered before taking it all
        f = s.makefile("rb")
        status = int(_read_line(f).split()[1])
        hdrs = {}
        while (line := _read_line(f)):
            k, _, v = line.decode().partition(":")
            hdrs[k.strip().lower()] = v.strip()
        if hdrs.get("transfer-encoding") == "chunked":
            try:
                data, trailers = _read_chunked(f)
                return Answer(status, hdrs, data, trailers, True)
            except (EOFError, ValueError, ConnectionResetError):
                return Answer(status, hdrs, b"", {}, False)
        n = int(hdrs.get("content-length", "0"))
        data = f.read(n)
        return Answer(status, hdrs, data, {}, len(data) == n)
    finally:
        s.close()


def save(d, excludes=None, body=None, **kw):
    import json
    if body is None:
        body = b"" if excludes is None else json.dumps({"excludes": excludes}).encode()
    return request(d.shell_port, d.token, "POST", "/v1/snapshot/save", body, **kw)


def restore(d, archive, **kw):
    return request(d.shell_port, d.token, "POST", "/v1/snapshot/restore", archive, **kw)


def zstd(data, decompress=False):
    args = ["zstd", "-q", "-c"] + (["-d"] if decompress else ["-3"])
    return subprocess.run(args, input=data, stdout=subprocess.PIPE, check=True,
                          timeout=60).stdout


def start_snapshot_daemon(parent, env=None, **shell):
    """A shell daemon with this suite's UIDs (one at a time per suite)."""
    from conftest import start_shell_daemon  # the integration suite's
    return start_shell_daemon(parent, shell=shell, env=env, uids=(UID_MIN, UID_MAX, SHELL_UID))


def host_listing(top):
    """{relative path: (mode, type, size or link target, content)} of a
    tree, read on the host without following a link."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(top):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            st = os.lstat(p)
            rel = os.path.relpath(p, top)
            if os.path.islink(p):
                out[rel] = (st.st_mode, "l", os.readlink(p), None)
            elif os.path.isdir(p):
                out[rel] = (st.st_mode, "d", None, None)
            else:
                with open(p, "rb") as f:
                    out[rel] = (st.st_mode, "f", st.st_size, f.read(1 << 20))
    return out


def snapshot_workers(d):
    """Live snapshot workers of d (they run as the jobs' UID)."""
    out = []
    for pid, name, _ in d.shell_processes():
        try:
            with open(f"/proc/{pid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if name == "lockbox-snap" and state != "Z":
            out.append(pid)
    return out


def workers_gone(d):
    procs = snapshot_workers(d)
    assert not procs, f"snapshot workers left: {procs}"


def wait_for(check, timeout=10.0):
    from conftest import eventually  # the integration suite's
    return eventually(check, timeout)
