"""compat.stderr_is_error: whether a run that exits 0 but wrote to stderr
reports that stderr in data.error, as dify-sandbox 0.2.15 and earlier do
(Dify's client then fails the node), or leaves error empty (the default,
as in dify-sandbox after 0.2.15). Both settings, both languages, from the
file and from LOCKBOX_COMPAT_STDERR_IS_ERROR; runs that fail are reported
the same either way."""
import subprocess

import pytest

from conftest import LOCKBOXD

WARN_PY = "import logging, sys\nprint('result')\nlogging.warning('careful')\n" \
          "sys.stderr.buffer.write(b'bad \\xff byte\\n')"
WARN_PY_STDERR = "WARNING:root:careful\nbad \ufffd byte\n"
WARN_JS = "console.log('result'); console.error('careful'); process.stderr.write('more\\n');"
WARN_JS_STDERR = "careful\nmore\n"


@pytest.fixture(scope="module")
def compat(module_daemon_factory):
    return module_daemon_factory(compat={"stderr_is_error": True}, worker_timeout=2)


def check_clean_runs(d, stderr_is_error):
    """Exit 0 with and without stderr, in Python and Node.js."""
    for lang, code, stderr in (("python3", WARN_PY, WARN_PY_STDERR),
                               ("nodejs", WARN_JS, WARN_JS_STDERR)):
        r = d.run_data(code, language=lang)
        assert r["exit_code"] == 0 and r["status"] == "ok", r
        assert r["stdout"] == "result\n" and r["stderr"] == stderr, r
        assert r["error"] == (stderr if stderr_is_error else ""), r
    for lang, code in (("python3", "print('quiet')"), ("nodejs", "console.log('quiet')")):
        r = d.run_data(code, language=lang)
        assert (r["stdout"], r["stderr"], r["error"], r["exit_code"]) == ("quiet\n", "", "", 0), r


def check_failed_runs(d):
    """A run that fails has the same error text whatever the setting."""
    r = d.run_data("import sys\nprint('x', file=sys.stderr)\nsys.exit(3)")
    assert r["exit_code"] == 3 and r["error"] == "process exited with code 3\nx\n", r
    r = d.run_data("import sys\nsys.stderr.write('spin\\n')\nsys.stderr.flush()\nwhile True: pass")
    assert r["status"] == "timeout", r
    assert r["error"] == "process exited with code -1\nerror: timeout\nspin\n", r
    r = d.run_data("console.error('boom'); process.exit(2)", language="nodejs")
    assert r["exit_code"] == 2 and r["error"] == "process exited with code 2\nboom\n", r


def test_default_leaves_error_empty_on_exit_0(daemon):
    check_clean_runs(daemon, stderr_is_error=False)


def test_default_failed_runs(daemon):
    r = daemon.run_data("import sys\nprint('x', file=sys.stderr)\nsys.exit(3)")
    assert r["exit_code"] == 3 and r["error"] == "process exited with code 3\nx\n", r
    r = daemon.run_data("console.error('boom'); process.exit(2)", language="nodejs")
    assert r["exit_code"] == 2 and r["error"] == "process exited with code 2\nboom\n", r


def test_stderr_is_error_puts_stderr_in_error(compat):
    check_clean_runs(compat, stderr_is_error=True)


def test_stderr_is_error_failed_runs_unchanged(compat):
    check_failed_runs(compat)


def test_stderr_is_error_from_environment(lockboxd_factory):
    # the variable wins over the file, as every override does
    d = lockboxd_factory(_env={"LOCKBOX_COMPAT_STDERR_IS_ERROR": "true"},
                         compat={"stderr_is_error": False})
    check_clean_runs(d, stderr_is_error=True)


def test_dump_config_shows_the_key(tmp_path):
    conf = tmp_path / "c.yaml"
    conf.write_text("compat:\n  stderr_is_error: yes\n")
    out = subprocess.run([LOCKBOXD, "--config", str(conf), "--dump-config"], env={},
                         capture_output=True, text=True, check=True).stdout
    assert "compat:\n  stderr_is_error: true\n" in out, out
    conf.write_text("compat:\n  stderr_is_error: maybe\n")
    r = subprocess.run([LOCKBOXD, "--config", str(conf), "--check-config"], env={},
                       capture_output=True, text=True)
    assert r.returncode != 0 and "compat.stderr_is_error" in r.stdout + r.stderr, r
