"""A pytest plugin of the suite (`-p tests.failedlog`): when
LOCKBOX_TEST_FAILED_LOG names a file, every test that failed or errored
(in setup, call or teardown) is appended to it, one node id a line with
its file's absolute path, so `scripts/rerun-failed` can run exactly those
again."""
import os


def pytest_runtest_logreport(report):
    path = os.environ.get("LOCKBOX_TEST_FAILED_LOG")
    if not path or not report.failed:
        return
    _, sep, rest = report.nodeid.partition("::")
    node = os.path.abspath(str(report.fspath)) + sep + rest
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "a") as f:
        f.write(node + "\n")
