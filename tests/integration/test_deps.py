"""The Python dependency layer (docs/API.md, docs/ARCHITECTURE.md).

Wheels are built offline during the test from throwaway packages; daemons
install them from a wheel directory (`dependencies.wheel_dir`) or from a
PEP 503 index served on loopback over plain http (`python_pip_mirror_url`).
"""
import http.server
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time

import pytest

PYTHON = "/usr/bin/python3"
LAYER = "/opt/lockbox/python"
PACKAGES = [("demo-alpha", "1.0"), ("demo-alpha", "2.0"), ("demo-beta", "0.1")]
SHOW = ("import demo_alpha, os; print(demo_alpha.VERSION, "
        "os.path.dirname(os.path.dirname(demo_alpha.__file__)))")


def build_wheel(src_root, out, name, version):
    mod = name.replace("-", "_")
    pkg = os.path.join(src_root, f"{mod}-{version}")
    os.makedirs(os.path.join(pkg, mod))
    with open(os.path.join(pkg, mod, "__init__.py"), "w") as f:
        f.write(f"VERSION = {version!r}\n")
    with open(os.path.join(pkg, "setup.py"), "w") as f:
        f.write("from setuptools import setup\n"
                f"setup(name={name!r}, version={version!r}, packages=[{mod!r}])\n")
    subprocess.run([PYTHON, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "--no-index", "--disable-pip-version-check", "-q", "-w", out, pkg],
                   check=True, cwd=pkg, capture_output=True, timeout=120)


NATIVE_C = r"""
#define PY_SSIZE_T_CLEAN
#include <Python.h>
static PyObject *triple(PyObject *self, PyObject *arg)
{
        long v = PyLong_AsLong(arg);
        if (v == -1 && PyErr_Occurred())
                return NULL;
        return PyLong_FromLong(3 * v);
}
static PyMethodDef methods[] = {{"triple", triple, METH_O, NULL}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef mod = {PyModuleDef_HEAD_INIT, "_speed", NULL, -1, methods};
PyMODINIT_FUNC PyInit__speed(void) { return PyModule_Create(&mod); }
"""


def build_native_wheel(src_root, out):
    """A wheel with a compiled extension module (like numpy's)."""
    pkg = os.path.join(src_root, "demo_native")
    os.makedirs(os.path.join(pkg, "demo_native"))
    with open(os.path.join(pkg, "demo_native", "__init__.py"), "w") as f:
        f.write("from ._speed import triple\n")
    with open(os.path.join(pkg, "speed.c"), "w") as f:
        f.write(NATIVE_C)
    with open(os.path.join(pkg, "setup.py"), "w") as f:
        f.write("from setuptools import setup, Extension\n"
                "setup(name='demo-native', version='0.3', packages=['demo_native'],\n"
                "      ext_modules=[Extension('demo_native._speed', ['speed.c'])])\n")
    subprocess.run([PYTHON, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "--no-index", "--disable-pip-version-check", "-q", "-w", out, pkg],
                   check=True, cwd=pkg, capture_output=True, timeout=300)


@pytest.fixture(scope="module")
def wheels(_session_tmp):
    """A directory of wheels readable by the unprivileged pip."""
    root = tempfile.mkdtemp(prefix="wheels-", dir=_session_tmp)
    out = os.path.join(root, "dist")
    os.makedirs(out)
    for name, version in PACKAGES:
        build_wheel(os.path.join(root, "src"), out, name, version)
    build_native_wheel(os.path.join(root, "src"), out)
    for d in (root, out):
        os.chmod(d, 0o755)
    assert len(os.listdir(out)) == len(PACKAGES) + 1, os.listdir(out)
    yield out
    shutil.rmtree(root, ignore_errors=True)


def write_requirements(daemon, text):
    with open(daemon.requirements_path, "w") as f:
        f.write(text)


def wait_ready(daemon, timeout=120):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        r = daemon.get("/ready")
        if r.status_code == 200:
            return r.json()
        assert r.status_code == 503, r.text
        time.sleep(0.1)
    log = "\n".join(x for x in daemon.log.splitlines() if "route=/ready" not in x)
    pytest.fail(f"not ready after {timeout} s:\n{log[-4000:]}")


def ready_deps(body):
    """The dependency state a 200 /ready reports."""
    assert body["code"] == 0 and body["data"]["ready"] is True, body
    return body["data"]["dependencies"]


def listing(daemon):
    r = daemon.get("/v1/sandbox/dependencies", params={"language": "python3"})
    assert r.status_code == 200
    body = r.json()
    assert body["code"] == 0, body
    return body["data"]


def show(daemon):
    d = daemon.run_data(SHOW)
    assert d["exit_code"] == 0, d
    return d["stdout"].split()


def update(daemon):
    r = daemon.post("/v1/sandbox/dependencies/update", json={"language": "python3"}, timeout=300)
    assert r.status_code == 200
    return r.json()


def layers_on_disk(daemon):
    return sorted(n for n in os.listdir(daemon.layer_dir) if n.startswith("layer-"))


def settled_layers(daemon, timeout=10):
    """The layers on disk once runs holding replaced ones (armed processes
    retired by a switch) are gone."""
    deadline = time.monotonic() + timeout
    while len(layers_on_disk(daemon)) > 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    return layers_on_disk(daemon)


@pytest.fixture(scope="module")
def dd(module_daemon_factory, wheels):
    """One daemon for the module's sequence of installs, from the wheel dir."""
    d = module_daemon_factory(dependencies={"wheel_dir": wheels})
    write_requirements(d, "demo-alpha==1.0\n")
    assert update(d) == {"code": 0, "message": "success", "data": {}}
    return d


def test_package_from_wheel_dir_is_importable_and_listed(dd):
    assert ready_deps(wait_ready(dd)) == "ok"
    data = listing(dd)
    assert data["dependencies"] == [{"name": "demo-alpha", "version": "1.0"}]
    assert data["last_install"]["status"] == "ok" and data["last_install"]["message"] == ""
    assert data["installing"] is False
    assert show(dd) == ["1.0", LAYER]


def test_layer_is_last_on_sys_path(dd):
    d = dd.run_data("import sys; print(sys.path.index(%r) == len(sys.path) - 1)" % LAYER)
    assert d["stdout"] == "True\n", d


def test_system_python_untouched(dd):
    r = subprocess.run([PYTHON, "-c", "import demo_alpha"], capture_output=True)
    assert r.returncode != 0 and b"No module named" in r.stderr


def test_layer_is_read_only_for_runs(dd):
    code = f"""
import os, demo_alpha
for what, fn in [
    ("create", lambda: open("{LAYER}/evil.py", "w")),
    ("modify", lambda: open(demo_alpha.__file__, "a")),
    ("remove", lambda: os.unlink(demo_alpha.__file__)),
    ("mkdir", lambda: os.mkdir("{LAYER}/demo_alpha/x")),
    ("chmod", lambda: os.chmod(demo_alpha.__file__, 0o777)),
    ("rename", lambda: os.rename("{LAYER}/demo_alpha", "{LAYER}/other")),
]:
    try:
        fn()
        print(what, "WORKED")
    except OSError as e:
        print(what, "denied", e.errno)
"""
    d = dd.run_data(code)
    lines = d["stdout"].splitlines()
    assert len(lines) == 6, d
    for line in lines:
        assert " denied " in line, d
    assert show(dd) == ["1.0", LAYER]


def test_layer_on_disk_is_roots_and_sealed(dd):
    root = os.path.join(dd.layer_dir, "current")
    assert os.path.islink(root)
    for dirpath, dirnames, filenames in os.walk(root + "/"):
        for n in dirnames + filenames:
            st = os.lstat(os.path.join(dirpath, n))
            assert (st.st_uid, st.st_gid) == (0, 0), (dirpath, n)
            assert not st.st_mode & 0o022, (dirpath, n, oct(st.st_mode))


def test_requirements_change_is_picked_up_by_update(dd):
    write_requirements(dd, "demo-alpha==2.0\ndemo-beta\n")
    assert update(dd) == {"code": 0, "message": "success", "data": {}}
    assert sorted(map(tuple, (x.values() for x in listing(dd)["dependencies"]))) == \
        [("demo-alpha", "2.0"), ("demo-beta", "0.1")]
    # every new run sees the new layer at once: armed processes holding the
    # old one were replaced (no restart)
    for _ in range(8):
        assert show(dd) == ["2.0", LAYER]
    d = dd.run_data("import demo_beta; print(demo_beta.VERSION)")
    assert d["stdout"] == "0.1\n", d
    # the old layer is gone from disk once no run holds it
    assert len(settled_layers(dd)) == 1


def test_refresh_installs_and_lists(dd):
    write_requirements(dd, "demo-alpha==1.0\n")
    r = dd.get("/v1/sandbox/dependencies/refresh", params={"language": "python3"}, timeout=300)
    body = r.json()
    assert body["code"] == 0, body
    assert body["data"]["dependencies"] == [{"name": "demo-alpha", "version": "1.0"}]
    assert show(dd) == ["1.0", LAYER]


def test_run_in_flight_keeps_its_layer(dd):
    write_requirements(dd, "demo-alpha==1.0\n")
    assert update(dd)["code"] == 0
    result = {}

    def slow_run():
        # imports only after the switch below
        result["d"] = dd.new_session().post(dd.url("/v1/sandbox/run"), json={
            "language": "python3", "code": "import time; time.sleep(2.5)\n" + SHOW},
            headers={"X-Api-Key": dd.key}, timeout=60).json()

    t = threading.Thread(target=slow_run)
    t.start()
    time.sleep(0.8)
    write_requirements(dd, "demo-alpha==2.0\n")
    assert update(dd)["code"] == 0
    assert show(dd) == ["2.0", LAYER]
    t.join()
    assert result["d"]["data"]["stdout"].split() == ["1.0", LAYER], result
    assert len(settled_layers(dd)) == 1  # the old one went with its last run


@pytest.mark.parametrize("bad", ["demo-missing==1.0\n", "demo-alpha==1.0\nthis is not ( a requirement\n",
                                 "demo-alpha==9.9\n"])
def test_broken_requirement_keeps_old_layer(dd, bad):
    write_requirements(dd, "demo-alpha==2.0\n")
    assert update(dd)["code"] == 0
    before = settled_layers(dd)
    assert len(before) == 1
    write_requirements(dd, bad)
    body = update(dd)
    assert body["code"] == -500 and body["data"] is None, body
    assert body["message"].startswith("dependency install failed: pip failed: "), body
    assert "ERROR" in body["message"], body
    dd.assert_serving()
    assert show(dd) == ["2.0", LAYER]
    data = listing(dd)
    assert data["dependencies"] == [{"name": "demo-alpha", "version": "2.0"}]
    assert data["last_install"]["status"] == "failed"
    assert "ERROR" in data["last_install"]["message"]
    assert layers_on_disk(dd) == before  # no half-built layer left
    assert ready_deps(wait_ready(dd)) == "failed"
    assert "deps.install_failed" in dd.log


def test_compiled_extension_module_imports(dd):
    write_requirements(dd, "demo-native\n")
    assert update(dd)["code"] == 0
    d = dd.run_data("import demo_native, demo_native._speed as s\n"
                    "print(demo_native.triple(14), s.__file__.endswith('.so'))")
    assert d["stdout"] == "42 True\n", d


def test_dependencies_routes_do_not_touch_node(dd):
    d = dd.run_data("console.log(1+1)", language="nodejs")
    assert d["stdout"] == "2\n", d


@pytest.mark.parametrize("text", ["", "# only comments\n\n   \n# more\n", None],
                         ids=["empty", "comments", "absent"])
def test_empty_or_absent_file_installs_nothing(lockboxd_factory, wheels, text):
    d = lockboxd_factory(_requirements=text, dependencies={"wheel_dir": wheels})
    assert ready_deps(wait_ready(d)) == "ok"
    data = listing(d)
    assert data["dependencies"] == [] and data["last_install"]["status"] == "ok", data
    assert update(d)["code"] == 0
    assert "deps.installing" not in d.log  # pip never ran
    assert layers_on_disk(d) == []
    r = d.run_data("import demo_alpha")
    assert "No module named 'demo_alpha'" in r["stderr"], r


def test_empty_requirements_path_means_no_packages(lockboxd_factory, wheels):
    """python_requirements: "" is what CONFIG.md says it is: no packages
    (it was refused at start with "must not be empty")."""
    d = lockboxd_factory(_requirements=None,
                         dependencies={"wheel_dir": wheels, "python_requirements": ""})
    assert ready_deps(wait_ready(d)) == "ok"
    data = listing(d)
    assert data["dependencies"] == [] and data["last_install"]["status"] == "ok", data
    assert "deps.installing" not in d.log
    assert d.run_data("print(6 * 7)")["stdout"] == "42\n"


def test_failed_install_at_start_up_keeps_serving(lockboxd_factory, wheels):
    d = lockboxd_factory(_requirements="demo-nowhere\n", dependencies={"wheel_dir": wheels})
    assert ready_deps(wait_ready(d)) == "failed"
    data = listing(d)
    assert data["dependencies"] == [] and data["last_install"]["status"] == "failed"
    assert "demo-nowhere" in data["last_install"]["message"]
    d.assert_serving()


def test_layer_survives_restart(lockboxd_factory, wheels):
    d = lockboxd_factory(_requirements="demo-beta\n", dependencies={"wheel_dir": wheels})
    wait_ready(d)
    first = layers_on_disk(d)
    assert len(first) == 1
    d.stop()
    d.stopped = False
    d.start()
    # the layer is in use before the (unchanged) requirements are checked
    r = d.run_data("import demo_beta; print(demo_beta.VERSION)")
    assert r["stdout"] == "0.1\n", r
    wait_ready(d)
    assert layers_on_disk(d) == first


def test_interval_reinstalls_when_the_file_changes(lockboxd_factory, wheels):
    d = lockboxd_factory(_requirements="demo-alpha==1.0\n", dependencies={"wheel_dir": wheels},
                         python_deps_update_interval="1s")
    wait_ready(d)
    assert show(d) == ["1.0", LAYER]
    installs = d.log.count("deps.installing")
    time.sleep(2.5)
    assert d.log.count("deps.installing") == installs  # unchanged: no pip
    write_requirements(d, "demo-alpha==2.0\n")
    deadline = time.monotonic() + 60
    while listing(d)["dependencies"] != [{"name": "demo-alpha", "version": "2.0"}]:
        assert time.monotonic() < deadline, d.log[-3000:]
        time.sleep(0.2)
    assert show(d) == ["2.0", LAYER]


class Index(http.server.ThreadingHTTPServer):
    """A PEP 503 'simple' index of the wheel directory, on loopback over
    plain http; requests wait while `hold` is clear."""
    daemon_threads = True

    def __init__(self, wheel_dir):
        self.wheel_dir = wheel_dir
        self.hold = threading.Event()
        self.hold.set()
        self.hits = []
        self.client_uids = set()  # owners of the client sockets, from /proc/net/tcp
        super().__init__(("127.0.0.1", 0), IndexHandler)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.server_address[1]}/simple/"


def socket_owner(ip, port, server_port):
    """The UID owning the loopback TCP socket ip:port connected to
    server_port, as the kernel lists it (None if not found)."""
    want = f"0100007F:{port:04X}"
    with open("/proc/net/tcp") as f:
        for line in f.readlines()[1:]:
            fields = line.split()
            if fields[1] == want and fields[2].endswith(f":{server_port:04X}"):
                return int(fields[7])
    return None


class IndexHandler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def do_GET(self):
        srv = self.server
        srv.hold.wait(60)
        srv.hits.append(self.path)
        srv.client_uids.add(socket_owner(*self.client_address[:2], srv.server_address[1]))
        m = re.match(r"^/simple/([a-z0-9-]+)/$", self.path)
        files = sorted(os.listdir(srv.wheel_dir))
        if m:
            mine = [f for f in files if f.lower().startswith(m.group(1).replace("-", "_") + "-")]
            if not mine:
                return self.send_error(404)
            body = "".join(f'<a href="/files/{f}">{f}</a>\n' for f in mine).encode()
            ctype = "text/html"
        elif self.path.startswith("/files/") and self.path[7:] in files:
            with open(os.path.join(srv.wheel_dir, self.path[7:]), "rb") as f:
                body = f.read()
            ctype = "application/octet-stream"
        else:
            return self.send_error(404)
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def test_http_mirror_and_background_install(lockboxd_factory, wheels):
    index = Index(wheels)
    index.hold.clear()  # pip hangs on the index until we let it go
    try:
        d = lockboxd_factory(_requirements="demo-alpha==2.0\n", python_pip_mirror_url=index.url)
        # the service answers at once; not ready while the install runs
        deadline = time.monotonic() + 30
        while True:
            r = d.get("/ready")
            assert r.status_code == 503, r.text
            if listing(d)["installing"]:
                break
            assert time.monotonic() < deadline, d.log[-3000:]
            time.sleep(0.05)
        # warm pools fill meanwhile: then the install is what is awaited
        deadline = time.monotonic() + 30
        while (r := d.get("/ready").json())["message"] != "not ready: installing Python dependencies":
            assert r["code"] == -503 and time.monotonic() < deadline, r
            time.sleep(0.05)
        r = d.run_data("print('serving')")
        assert r["stdout"] == "serving\n", r
        r = d.run_data("import demo_alpha")
        assert "No module named" in r["stderr"], r
        index.hold.set()
        assert ready_deps(wait_ready(d)) == "ok"
        assert show(d) == ["2.0", LAYER]
        assert "/simple/demo-alpha/" in index.hits
        # pip ran as the installer's UID (jail.uid_max): neither server.user
        # (the HTTP process's account, which can ask for installs) nor root
        assert index.client_uids == {d.uid_max}, index.client_uids
    finally:
        index.hold.set()
        index.shutdown()


def test_install_timeout_kills_pip_and_keeps_serving(lockboxd_factory, wheels):
    index = Index(wheels)
    index.hold.clear()  # never answers in time
    try:
        d = lockboxd_factory(_requirements="demo-alpha==2.0\n", python_pip_mirror_url=index.url,
                             dependencies={"install_timeout": "10s"})
        assert ready_deps(wait_ready(d, timeout=60)) == "failed"
        msg = listing(d)["last_install"]["message"]
        assert msg.startswith("pip did not finish within 10s (install_timeout)"), msg
        assert settled_layers(d) == []  # the half-built layer is gone
        d.assert_serving()
    finally:
        index.hold.set()
        index.shutdown()


def test_pip_takes_the_operators_pip_settings_from_the_environment(lockboxd_factory, wheels):
    """PIP_INDEX_URL and PIP_TRUSTED_HOST in lockboxd's environment reach pip
    (as dify-sandbox's pip sees them); they reach no run."""
    index = Index(wheels)
    try:
        d = lockboxd_factory(_requirements="demo-alpha==2.0\n",
                             _env={"PIP_INDEX_URL": index.url, "PIP_TRUSTED_HOST": "127.0.0.1"})
        assert ready_deps(wait_ready(d)) == "ok", d.log[-3000:]
        assert show(d) == ["2.0", LAYER]
        assert "/simple/demo-alpha/" in index.hits
        r = d.run_data("import os\nprint(sorted(k for k in os.environ if k.startswith('PIP')))")
        assert r["stdout"] == "[]\n", r
    finally:
        index.shutdown()
