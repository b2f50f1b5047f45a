"""What ordinary Python programs (and Dify's runner shape) see in a run:
exact output, the libraries Dify relies on, time zones, logging, errors,
threads, /tmp, and a fresh state per run."""
import base64
import json
import textwrap

import pytest


def code(src):
    return textwrap.dedent(src).lstrip("\n")


def test_hello_world_exact_response(daemon):
    r = daemon.run("print('hello, world')")
    assert r["code"] == 0
    assert r["message"] == "success"
    d = r["data"]
    assert d["stdout"] == "hello, world\n"
    assert d["stderr"] == ""
    assert d["error"] == ""
    assert d["exit_code"] == 0
    assert d["status"] == "ok"
    assert d["truncated"] is False
    assert isinstance(d["wall_ms"], int) and d["wall_ms"] >= 0
    assert isinstance(d["cpu_ms"], int) and d["cpu_ms"] >= 0
    assert isinstance(d["memory_peak_bytes"], int) and d["memory_peak_bytes"] > 0


def test_runs_as_main_module(daemon):
    d = daemon.run_data(code("""
        import sys
        print(__name__)
        print(sys.version_info[0])
    """))
    assert d["stdout"] == "__main__\n3\n"


def test_base64_round_trip(daemon):
    payload = bytes(range(256)) * 4
    enc = base64.b64encode(payload).decode()
    d = daemon.run_data(code(f"""
        import base64, hashlib
        raw = base64.b64decode('{enc}')
        print(len(raw), hashlib.sha256(raw).hexdigest())
        print(base64.b64encode(raw[:12]).decode())
    """))
    import hashlib
    assert d["stdout"] == (f"1024 {hashlib.sha256(payload).hexdigest()}\n"
                           f"{base64.b64encode(payload[:12]).decode()}\n")
    assert d["exit_code"] == 0


def test_json_round_trip_with_unicode(daemon):
    obj = {"hello": "world", "n": [1, 2.5, None, True], "zh": "你好，世界", "emoji": "🚀",
           "nested": {"a": {"b": ["c"]}}}
    d = daemon.run_data(code(f"""
        import json, base64
        obj = json.loads(base64.b64decode('{base64.b64encode(json.dumps(obj).encode()).decode()}'))
        print(json.dumps(obj, ensure_ascii=False, sort_keys=True))
    """))
    assert d["exit_code"] == 0
    assert json.loads(d["stdout"]) == obj
    assert d["stdout"] == json.dumps(obj, ensure_ascii=False, sort_keys=True) + "\n"


def test_dify_python_runner_shape(daemon):
    """Dify's python3 runner: main() in the code, inputs base64 JSON, the
    result between <<RESULT>> markers."""
    inputs = base64.b64encode(json.dumps({"arg1": 20, "arg2": "x"}).encode()).decode()
    d = daemon.run_data(code(f"""
        def main(arg1: int, arg2: str) -> dict:
            return {{"result": arg1 * 2, "s": arg2 * 3}}

        from json import loads, dumps
        from base64 import b64decode
        inputs = b64decode('{inputs}').decode('utf-8')
        output = main(**loads(inputs))
        output = dumps(output, indent=4)
        result = f'''<<RESULT>>{{output}}<<RESULT>>'''
        print(result)
    """), enable_network=True)
    assert d["exit_code"] == 0 and d["error"] == ""
    body = d["stdout"].split("<<RESULT>>")[1]
    assert json.loads(body) == {"result": 40, "s": "xxx"}


def test_large_output_exact_length(daemon):
    """The reference's own large-output test: Dify's runner printing a
    json.dumps(indent=4) of fruit names repeated comes back as exactly
    304487 bytes."""
    src = code("""
        def main() -> dict:
            fruits = ["apple", "", "cherry", "date", "", "fig", "grape", "honeydew", "kiwi", "",
                      "mango", "nectarine", "orange", "papaya", "quince", "raspberry",
                      "strawberry", "tangerine", "ugli fruit", "vanilla bean", "watermelon",
                      "xigua", "yellow passionfruit", "zucchini"] * 5
            return {"result": [(s * 600)[:3000] if s else s for s in fruits]}

        from json import loads, dumps
        from base64 import b64decode

        inputs = b64decode('e30=').decode('utf-8')
        output = dumps(main(**loads(inputs)), indent=4)
        print(f'''<<RESULT>>
        {output}
        <<RESULT>>''')
    """)
    d = daemon.run_data(src, enable_network=True)
    assert d["stderr"] == ""
    assert d["exit_code"] == 0
    assert len(d["stdout"].encode()) == 304487
    assert d["truncated"] is False
    body = d["stdout"].split("<<RESULT>>")[1]
    result = json.loads(body)["result"]
    assert len(result) == 120 and result[0] == ("apple" * 600)[:3000]


def test_binary_and_invalid_utf8_output_is_replaced_not_dropped(daemon):
    d = daemon.run_data(code("""
        import sys
        sys.stdout.buffer.write(b"ok\\xff\\xfeend\\n")
        sys.stdout.write("héllo ✓\\n")
    """))
    assert d["exit_code"] == 0
    # each invalid byte becomes U+FFFD (docs/API.md); nothing is dropped
    assert d["stdout"] == "ok\ufffd\ufffdend\nhéllo ✓\n", repr(d["stdout"])


def test_requests_httpx_jinja2_importable(daemon):
    d = daemon.run_data(code("""
        import requests, httpx, jinja2
        print(requests.__name__, httpx.__name__, jinja2.__name__)
        print(jinja2.Template("Hello {{ name }}! {% for i in xs %}{{ i }},{% endfor %}")
              .render(name="lockbox", xs=[1, 2, 3]))
    """))
    assert d["stderr"] == ""
    assert d["exit_code"] == 0
    assert d["stdout"] == "requests httpx jinja2\nHello lockbox! 1,2,3,\n"


SCIENTIFIC = """
    import io
    import numpy, pandas
    df = pandas.DataFrame({"city": ["a", "b", "a"], "n": [1, 2, 4]})
    print(df.groupby("city")["n"].sum().to_dict(), float(numpy.linalg.norm([3.0, 4.0])))
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots()
    ax.plot([1, 2, 3], [2, 4, 1])
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    print(buf.getvalue()[:8] == b"\\x89PNG\\r\\n\\x1a\\n", len(buf.getvalue()) > 1000)
"""


def test_debians_scientific_stack_works_in_a_run(lockboxd_factory):
    """What works for python3 -c on the host works in a run: numpy (BLAS
    and LAPACK through /etc/alternatives), a pandas sum, a matplotlib chart
    saved to PNG in memory. scripts/install-deps installs the packages."""
    import subprocess
    host = subprocess.run(["/usr/bin/python3", "-c", textwrap.dedent(SCIENTIFIC)],
                          capture_output=True, text=True, timeout=120)
    assert host.returncode == 0, f"not installed on the host (scripts/install-deps): {host.stderr}"
    d = lockboxd_factory(worker_timeout=60)
    r = d.run_data(code(SCIENTIFIC))
    assert (r["status"], r["exit_code"]) == ("ok", 0), r
    assert r["stdout"] == host.stdout == "{'a': 5, 'b': 2} 5.0\nTrue True\n", (r, host.stdout)


def test_dify_jinja2_template_runner_shape(daemon):
    """Dify's template-transform runner: a jinja2 template and inputs, both
    base64, the rendering between <<RESULT>> markers."""
    tmpl = base64.b64encode("{{ a }} + {{ b }} = {{ a + b }}".encode()).decode()
    inputs = base64.b64encode(json.dumps({"a": 2, "b": 3}).encode()).decode()
    d = daemon.run_data(code(f"""
        import jinja2
        from base64 import b64decode
        import json
        def main(**inputs):
            return jinja2.Template(b64decode('{tmpl}').decode()).render(**inputs)
        inputs = json.loads(b64decode('{inputs}').decode('utf-8'))
        output = main(**inputs)
        print(f'<<RESULT>>{{output}}<<RESULT>>')
    """))
    assert d["exit_code"] == 0, d
    assert d["stdout"] == "<<RESULT>>2 + 3 = 5<<RESULT>>\n"


def test_zoneinfo_asia_shanghai(daemon):
    d = daemon.run_data(code("""
        from datetime import datetime, timezone
        from zoneinfo import ZoneInfo
        t = datetime(2024, 1, 15, 4, 0, tzinfo=timezone.utc).astimezone(ZoneInfo("Asia/Shanghai"))
        print(t.isoformat())
        print(datetime.now(ZoneInfo("Asia/Shanghai")).isoformat()[-6:])
    """))
    assert d["stderr"] == ""
    assert d["stdout"] == "2024-01-15T12:00:00+08:00\n+08:00\n"


def test_logging_goes_to_stderr_not_error(daemon):
    d = daemon.run_data(code("""
        import logging
        logging.basicConfig(level=logging.INFO)
        logging.info("hello from logging")
        logging.warning("careful")
        print("done")
    """))
    assert d["stdout"] == "done\n"
    assert d["stderr"] == "INFO:root:hello from logging\nWARNING:root:careful\n"
    assert d["error"] == ""
    assert d["exit_code"] == 0
    assert d["status"] == "ok"


def test_exception_fills_stderr_and_error(daemon):
    d = daemon.run_data(code("""
        print("before")
        def parse(x):
            raise ValueError("bad input")
        parse(1)
    """))
    assert d["stdout"] == "before\n"
    assert d["exit_code"] == 1
    assert d["status"] == "runtime_error"
    assert "Traceback (most recent call last):" in d["stderr"]
    assert "ValueError: bad input" in d["stderr"]
    assert 'raise ValueError("bad input")' in d["stderr"]
    assert d["error"] == "process exited with code 1\n" + d["stderr"]


def test_sys_exit_code_passes_through(daemon):
    d = daemon.run_data("import sys\nprint('x')\nsys.exit(3)")
    assert d["exit_code"] == 3
    assert d["status"] == "runtime_error"
    assert d["stdout"] == "x\n"
    assert d["error"] == "process exited with code 3"


def test_syntax_error_reported(daemon):
    d = daemon.run_data("def broken(:\n    pass\n")
    assert d["exit_code"] == 1
    assert "SyntaxError" in d["stderr"]
    assert d["error"] == "process exited with code 1\n" + d["stderr"]


def test_stdout_and_stderr_are_separate_and_ordered(daemon):
    d = daemon.run_data(code("""
        import sys
        for i in range(5):
            print(f"out{i}")
            print(f"err{i}", file=sys.stderr)
    """))
    assert d["stdout"] == "".join(f"out{i}\n" for i in range(5))
    assert d["stderr"] == "".join(f"err{i}\n" for i in range(5))
    assert d["error"] == ""


def test_threads_run_and_join(daemon):
    d = daemon.run_data(code("""
        import threading
        results = []
        lock = threading.Lock()
        def work(i):
            s = sum(range(i * 1000))
            with lock:
                results.append((i, s))
        ts = [threading.Thread(target=work, args=(i,)) for i in range(8)]
        for t in ts: t.start()
        for t in ts: t.join()
        print(sorted(i for i, _ in results))
        print(threading.active_count())
    """))
    assert d["stderr"] == ""
    assert d["stdout"] == "[0, 1, 2, 3, 4, 5, 6, 7]\n1\n"


def test_a_program_ends_as_python_would(daemon):
    """What a run does at its end is the interpreter's, warm or cold: its
    non-daemon threads are joined, its atexit handlers run, and the logging
    handlers it made are flushed and closed (the zygote leaves out only
    the fork and exit work of the preloaded libraries' own handlers and
    locks, which has no effect a program can see). Logging from a thread
    works: no lock is left held by the fork."""
    d = daemon.run_data(code("""
        import atexit, logging, os, sys, threading
        class Shout(logging.Handler):
            def emit(self, record):
                print("emit", record.getMessage())
            def close(self):
                print("closed")
                super().close()
        log = logging.getLogger("mine")
        log.addHandler(Shout())
        log.propagate = False
        def worker():
            log.warning("from a thread")
            logging.getLogger("urllib3").warning("library logger, no handler of ours")
        t = threading.Thread(target=worker)
        t.start()
        t.join(5)
        print("thread done", not t.is_alive())
        print("main", threading.current_thread() is threading.main_thread(), threading.active_count())
        print("bind", "LD_BIND_NOW" in os.environ)
        def late():
            import time
            time.sleep(0.2)
            print("non-daemon thread joined")
        threading.Thread(target=late).start()
        atexit.register(lambda: print("atexit ran"))
    """))
    assert d["stdout"] == ("emit from a thread\nthread done True\nmain True 1\nbind False\n"
                           "non-daemon thread joined\natexit ran\nclosed\n"), d
    assert d["exit_code"] == 0, d


@pytest.mark.parametrize("threads", [0, 1])
def test_at_exit_the_main_thread_is_stopped_as_in_python(daemon, threads):
    """atexit handlers run after threading's shutdown, as in `python3 -c`:
    the main thread reads as stopped and no thread-pool may start, with
    or without threads of the program's own (two ways to the same end)."""
    d = daemon.run_data(code(f"""
        import atexit, threading
        for _ in range({threads}):
            threading.Thread(target=lambda: None).start()
        def report():
            print("main alive", threading.main_thread().is_alive())
            try:
                from concurrent.futures import ThreadPoolExecutor
                ThreadPoolExecutor(1).submit(print, "late")
            except RuntimeError as e:
                print("refused:", e)
        atexit.register(report)
    """))
    assert d["stdout"] == ("main alive False\n"
                           "refused: can't register atexit after shutdown\n"), d


def test_thread_pool_executor(daemon):
    d = daemon.run_data(code("""
        from concurrent.futures import ThreadPoolExecutor
        with ThreadPoolExecutor(max_workers=4) as ex:
            print(list(ex.map(lambda x: x * x, range(10))))
    """))
    assert d["stdout"] == "[0, 1, 4, 9, 16, 25, 36, 49, 64, 81]\n"


def test_tempfile_works_and_is_private_to_the_run(daemon):
    d = daemon.run_data(code("""
        import os, tempfile
        print(tempfile.gettempdir())
        with tempfile.NamedTemporaryFile("w", delete=False, suffix=".txt") as f:
            f.write("secret-of-run-1")
        print(open(f.name).read())
        with open("/tmp/marker-run-1", "w") as g:
            g.write("x")
        print(os.getcwd())
        print(sorted(os.listdir("/tmp")) == sorted([os.path.basename(f.name), "marker-run-1"]))
    """))
    assert d["stderr"] == ""
    assert d["stdout"] == "/tmp\nsecret-of-run-1\n/tmp\nTrue\n"
    d2 = daemon.run_data(code("""
        import os
        print(os.path.exists("/tmp/marker-run-1"), os.listdir("/tmp"))
    """))
    assert d2["stdout"] == "False []\n"


def test_globals_and_monkey_patches_do_not_survive(daemon):
    d = daemon.run_data(code("""
        import builtins, json, os
        builtins.LEAK = 1
        json.dumps = lambda *a, **k: "patched"
        os.environ["LEAK"] = "1"
        print("set")
    """))
    assert d["stdout"] == "set\n"
    d2 = daemon.run_data(code("""
        import builtins, json, os
        print(hasattr(builtins, "LEAK"), json.dumps([1]), "LEAK" in os.environ)
    """))
    assert d2["stdout"] == "False [1] False\n"


def test_stdin_is_empty(daemon):
    d = daemon.run_data("import sys\nprint(repr(sys.stdin.read()))")
    assert d["stdout"] == "''\n"


def test_non_ascii_code_and_output(daemon):
    d = daemon.run_data("s = 'Grüße, 世界 🌍'\nprint(s, len(s))")
    assert d["stdout"] == "Grüße, 世界 🌍 11\n"


def test_multi_megabyte_output_is_byte_exact(daemon):
    import hashlib
    d = daemon.run_data(code("""
        import hashlib, sys
        chunks = [hashlib.sha256(str(i).encode()).hexdigest() for i in range(50000)]
        data = "\\n".join(chunks) + "\\n"
        sys.stdout.write(data)
        sys.stderr.write(hashlib.sha256(data.encode()).hexdigest())
    """))
    assert d["exit_code"] == 0 and d["truncated"] is False
    assert len(d["stdout"]) == 50000 * 65
    assert hashlib.sha256(d["stdout"].encode()).hexdigest() == d["stderr"]


def test_interleaved_large_stdout_and_stderr(daemon):
    """Both pipes are drained at once: a program filling stderr while the
    sandbox reads stdout must not deadlock."""
    d = daemon.run_data(code("""
        import sys
        for i in range(200):
            sys.stderr.write("e" * 4096)
            sys.stdout.write("o" * 4096)
        sys.stderr.write("E" * 300000)
        sys.stdout.write("O")
    """))
    assert d["exit_code"] == 0, {k: v for k, v in d.items() if k not in ("stdout", "stderr")}
    assert d["stdout"] == "o" * 4096 * 200 + "O"
    assert d["stderr"] == "e" * 4096 * 200 + "E" * 300000


def test_whitespace_only_code_runs(daemon):
    d = daemon.run_data("   \n\n")
    assert (d["stdout"], d["stderr"], d["exit_code"], d["error"]) == ("", "", 0, "")


def test_crlf_source(daemon):
    d = daemon.run_data("x = 1\r\nif x:\r\n    print('crlf')\r\n")
    assert d["stdout"] == "crlf\n"


@pytest.mark.parametrize("network", [False, True])
def test_asyncio_event_loop_works(daemon, network):
    # asyncio's self-pipe is a stream socketpair(AF_UNIX), the one kind of
    # unix socket the policy allows
    d = daemon.run_data(code("""
        import asyncio
        async def twice(x):
            await asyncio.sleep(0.01)
            return 2 * x
        async def main():
            return await asyncio.gather(*(twice(i) for i in range(5)))
        print(asyncio.run(main()))
    """), enable_network=network)
    assert d["stdout"] == "[0, 2, 4, 6, 8]\n", d
