"""Dify's code executor, reproduced: the runner scripts are built exactly as
Dify's template transformers build them (python3, javascript, jinja2), sent
as Dify sends them, and the result is judged and extracted as Dify does
(non-200, `code != 0` or a non-empty `data.error` is a failure; the text
between the first and the last <<RESULT>> is the result). Dify's python3,
jinja2 and javascript runner scripts must work unchanged."""
import base64
import http.client
import json
import re
import socket
import textwrap
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests
from requests.adapters import HTTPAdapter

from conftest import KEY, raw_post

# ------------------------------------------------------- Dify's templates

CODE_PLACEHOLDER = "{{code}}"
INPUTS_PLACEHOLDER = "{{inputs}}"
RESULT_TAG = "<<RESULT>>"

PYTHON3_RUNNER = textwrap.dedent("""
    {{code}}

    import json
    from base64 import b64decode

    # decode and prepare input dict
    inputs_obj = json.loads(b64decode('{{inputs}}').decode('utf-8'))

    # execute main function
    output_obj = main(**inputs_obj)

    # convert output to json and print
    output_json = json.dumps(output_obj, indent=4)
    result = f'''<<RESULT>>{output_json}<<RESULT>>'''
    print(result)
    """)

JAVASCRIPT_RUNNER = textwrap.dedent("""
    // declare main function
    {{code}}

    // decode and prepare input object
    var inputs_obj = JSON.parse(Buffer.from('{{inputs}}', 'base64').toString('utf-8'))

    // execute main function
    var output_obj = main(inputs_obj)

    // convert output to json and print
    var output_json = JSON.stringify(output_obj)
    var result = `<<RESULT>>${output_json}<<RESULT>>`
    console.log(result)
    """)

JINJA2_RUNNER = textwrap.dedent("""
    # declare main function
    def main(**inputs):
        import jinja2
        template = jinja2.Template('''{{code}}''')
        return template.render(**inputs)

    import json
    from base64 import b64decode

    # decode and prepare input dict
    inputs_obj = json.loads(b64decode('{{inputs}}').decode('utf-8'))

    # execute main function
    output = main(**inputs_obj)

    # convert output and print
    result = f'''<<RESULT>>{output}<<RESULT>>'''
    print(result)
    """)

JINJA2_PRELOAD = textwrap.dedent("""
    import jinja2
    from base64 import b64decode

    def _jinja2_preload_():
        # prepare jinja2 environment, load template and render before to avoid sandbox issue
        template = jinja2.Template('{{s}}')
        template.render(s='a')

    if __name__ == '__main__':
        _jinja2_preload_()

    """)

RUNNERS = {  # Dify's language -> (runner template, preload, sandbox language)
    "python3": (PYTHON3_RUNNER, "", "python3"),
    "javascript": (JAVASCRIPT_RUNNER, "", "nodejs"),
    "jinja2": (JINJA2_RUNNER, JINJA2_PRELOAD, "python3"),
}


class CodeExecutionError(Exception):
    pass


def serialize_inputs(inputs):
    return base64.b64encode(json.dumps(inputs, ensure_ascii=False).encode()).decode("utf-8")


def transform_caller(language, code, inputs):
    runner, preload, _ = RUNNERS[language]
    script = runner.replace(CODE_PLACEHOLDER, code)
    script = script.replace(INPUTS_PLACEHOLDER, serialize_inputs(inputs))
    return script, preload


def execute_code(daemon, session, language, preload, code):
    """Dify's CodeExecutor.execute_code: POST, then judge the answer."""
    body = {"language": RUNNERS[language][2], "code": code, "preload": preload,
            "enable_network": True}
    r = session.post(daemon.url("/v1/sandbox/run"), json=body,
                     headers={"X-Api-Key": KEY}, timeout=(10, 60))
    if r.status_code == 503:
        raise CodeExecutionError("Code execution service is unavailable")
    if r.status_code != 200:
        raise CodeExecutionError(f"Failed to execute code, got status code {r.status_code}")
    envelope = r.json()
    if envelope.get("code") != 0:
        raise CodeExecutionError(f"Got error code: {envelope.get('code')}. "
                                 f"Got error msg: {envelope.get('message')}")
    data = envelope["data"]
    if data.get("error"):
        raise CodeExecutionError(data["error"])
    return data.get("stdout") or ""


def extract_result(stdout):
    m = re.search(rf"{RESULT_TAG}(.*){RESULT_TAG}", stdout, re.DOTALL)
    if not m:
        raise ValueError(f"Failed to parse result from {stdout!r}")
    return m.group(1)


def transform_response(language, stdout):
    if language == "jinja2":
        return {"result": extract_result(stdout)}
    result = json.loads(extract_result(stdout))
    if not isinstance(result, dict):
        raise ValueError("Result must be a dict.")
    return result


def execute_workflow_code_template(daemon, language, code, inputs, session=None):
    script, preload = transform_caller(language, code, inputs)
    own = session is None
    session = session or requests.Session()
    session.trust_env = False
    try:
        stdout = execute_code(daemon, session, language, preload, script)
    finally:
        if own:
            session.close()
    return transform_response(language, stdout)


def canonical(obj):
    """Type-exact comparison form (True vs 1, 1.0 vs 1 differ)."""
    return json.dumps(obj, sort_keys=True, ensure_ascii=False)


# ------------------------------------------------------------------ python3

PY_MIXED = textwrap.dedent('''
    def main(name: str, count: int, ratio: float, tags: list, meta: dict) -> dict:
        return {
            "greeting": f"你好, {name}! 👋🏽 café",
            "count_plus_one": count + 1,
            "ratio": ratio,
            "third": 1 / 3,
            "big": 2 ** 53 + 1,
            "negative": -17,
            "sci": 6.02e23,
            "tiny": 5e-324,
            "none": None,
            "yes": True,
            "no": False,
            "tags": [t.upper() for t in tags],
            "nested": [[1, [2, [3, None]]], {"k": ["v", 1.5, False]}, []],
            "meta_keys": sorted(meta),
            "echo": meta,
            "escapes": "quote \\" backslash \\\\ tab \\t newline \\n nul-free ☃",
            "emoji_key_😀": "ok",
        }
''').lstrip("\n")

PY_INPUTS = {"name": "Zoë 李", "count": 41, "ratio": 0.1 + 0.2, "tags": ["α", "b", "日本"],
             "meta": {"ключ": "значение", "n": [1, 2.5, None, True], "emoji": "🚀✨"}}


def test_python3_node_returns_mixed_types(daemon):
    result = execute_workflow_code_template(daemon, "python3", PY_MIXED, PY_INPUTS)
    expected = {
        "greeting": "你好, Zoë 李! 👋🏽 café",
        "count_plus_one": 42,
        "ratio": 0.30000000000000004,
        "third": 1 / 3,
        "big": 9007199254740993,
        "negative": -17,
        "sci": 6.02e23,
        "tiny": 5e-324,
        "none": None,
        "yes": True,
        "no": False,
        "tags": ["Α", "B", "日本"],
        "nested": [[1, [2, [3, None]]], {"k": ["v", 1.5, False]}, []],
        "meta_keys": sorted(PY_INPUTS["meta"]),
        "echo": PY_INPUTS["meta"],
        "escapes": "quote \" backslash \\ tab \t newline \n nul-free ☃",
        "emoji_key_😀": "ok",
    }
    assert canonical(result) == canonical(expected)
    assert result == expected


def test_python3_runner_stdout_is_what_dify_expects(daemon):
    """The raw stdout: the indented JSON between the tags and one newline;
    anything the code prints before is outside the tags."""
    code = "def main(x: int) -> dict:\n    print('log line <<not a tag>>')\n    return {'x': x}\n"
    script, _ = transform_caller("python3", code, {"x": 7})
    s = requests.Session()
    s.trust_env = False
    stdout = execute_code(daemon, s, "python3", "", script)
    assert stdout == 'log line <<not a tag>>\n<<RESULT>>{\n    "x": 7\n}<<RESULT>>\n'
    assert transform_response("python3", stdout) == {"x": 7}


# --------------------------------------------------------------- javascript

JS_DESTRUCTURED = textwrap.dedent('''
    function main({a, b, name, list}) {
        return {
            sum: a + b,
            text: `${name}: ${a} + ${b} = ${a + b} ✓ 中文 🎉`,
            doubled: list.map(x => x * 2),
            lengths: list.length,
            nested: {ok: true, none: null, empty: [], obj: {}},
            fraction: 0.1 + 0.2,
            neg: -a,
        }
    }
''').lstrip("\n")


def test_javascript_node_with_destructured_arguments(daemon):
    result = execute_workflow_code_template(
        daemon, "javascript", JS_DESTRUCTURED,
        {"a": 2, "b": 40, "name": "Zoë 李 🚀", "list": [1, 2.5, -3]})
    expected = {
        "sum": 42,
        "text": "Zoë 李 🚀: 2 + 40 = 42 ✓ 中文 🎉",
        "doubled": [2, 5, -6],
        "lengths": 3,
        "nested": {"ok": True, "none": None, "empty": [], "obj": {}},
        "fraction": 0.30000000000000004,
        "neg": -2,
    }
    assert canonical(result) == canonical(expected)


def test_javascript_node_with_async_helpers_and_modules(daemon):
    """A JS node that uses core modules synchronously, as Dify users do."""
    code = textwrap.dedent('''
        const crypto = require('crypto');
        function main({text}) {
            return {
                sha1: crypto.createHash('sha1').update(text).digest('hex'),
                b64: Buffer.from(text).toString('base64'),
                words: text.split(' ').length,
            };
        }
    ''')
    import hashlib
    text = "hello 世界 from dify"
    result = execute_workflow_code_template(daemon, "javascript", code, {"text": text})
    assert result == {"sha1": hashlib.sha1(text.encode()).hexdigest(),
                      "b64": base64.b64encode(text.encode()).decode(), "words": 4}


# ------------------------------------------------------------------- jinja2

JINJA_TEMPLATE = textwrap.dedent("""\
    # {{ title | upper }}
    {% for item in items -%}
    {{ loop.index }}. {{ item.name | upper }}{% if item.tags %} [{{ item.tags | join(", ") }}]{% endif %} — {{ item.price }}€
    {% endfor -%}
    Count: {{ items | length }}; note: {{ note | default("默认值 ✨") }}
    {% if vip %}⭐ VIP {{ user }}{% elif items | length > 2 %}many{% else %}regular {{ user }}{% endif %}""")

JINJA_INPUTS = {
    "title": "Bestellübersicht 注文",
    "user": "Zoë 李",
    "vip": False,
    "items": [
        {"name": "äpfel", "tags": ["bio", "régional"], "price": 2.5},
        {"name": "寿司", "tags": [], "price": 12},
    ],
}

JINJA_EXPECTED = ("# BESTELLÜBERSICHT 注文\n"
                  "1. ÄPFEL [bio, régional] — 2.5€\n"
                  "2. 寿司 — 12€\n"
                  "Count: 2; note: 默认值 ✨\n"
                  "regular Zoë 李")


def test_jinja2_template(daemon):
    result = execute_workflow_code_template(daemon, "jinja2", JINJA_TEMPLATE, JINJA_INPUTS)
    assert result == {"result": JINJA_EXPECTED}
    # the same as jinja2 renders it here
    import jinja2
    assert jinja2.Template(JINJA_TEMPLATE).render(**JINJA_INPUTS) == JINJA_EXPECTED


def test_jinja2_template_vip_branch(daemon):
    inputs = dict(JINJA_INPUTS, vip=True, note="eilig 🚚")
    result = execute_workflow_code_template(daemon, "jinja2", JINJA_TEMPLATE, inputs)
    assert result["result"].endswith("Count: 2; note: eilig 🚚\n⭐ VIP Zoë 李"), result


@pytest.fixture(scope="module")
def preload_daemon(module_daemon_factory):
    return module_daemon_factory(enable_preload=True, max_workers=2)


def test_jinja2_with_preload_enabled(preload_daemon, daemon):
    """With enable_preload the preload runs, locked, in the same
    interpreter before the runner; the template still renders."""
    result = execute_workflow_code_template(preload_daemon, "jinja2", JINJA_TEMPLATE, JINJA_INPUTS)
    assert result == {"result": JINJA_EXPECTED}
    probe = "print('_jinja2_preload_' in globals(), 'jinja2' in globals())"
    d = preload_daemon.run_data(probe, preload=JINJA2_PRELOAD, enable_network=True)
    assert (d["stdout"], d["exit_code"], d["error"]) == ("True True\n", 0, ""), d
    # ... and the default daemon ignores it
    d = daemon.run_data(probe, preload=JINJA2_PRELOAD, enable_network=True)
    assert (d["stdout"], d["exit_code"], d["error"]) == ("False False\n", 0, ""), d


# ------------------------------------------------------------------- errors

def test_python3_node_that_raises_is_an_error_for_dify(daemon):
    code = "def main(x: int) -> dict:\n    raise ValueError(f'boom {x} 中')\n"
    with pytest.raises(CodeExecutionError) as e:
        execute_workflow_code_template(daemon, "python3", code, {"x": 3})
    msg = str(e.value)
    assert msg.startswith("process exited with code 1\nTraceback (most recent call last):\n"), msg
    assert msg.endswith("ValueError: boom 3 中\n"), msg
    assert "<<RESULT>>" not in msg


def test_python3_syntax_error_is_an_error_for_dify(daemon):
    with pytest.raises(CodeExecutionError) as e:
        execute_workflow_code_template(daemon, "python3", "def main(:\n    pass\n", {})
    assert "SyntaxError" in str(e.value) and str(e.value).startswith("process exited with code 1\n")


def test_javascript_node_that_throws_is_an_error_for_dify(daemon):
    code = "function main({x}) {\n    throw new Error('js boom ' + x + ' ✗');\n}\n"
    with pytest.raises(CodeExecutionError) as e:
        execute_workflow_code_template(daemon, "javascript", code, {"x": 9})
    msg = str(e.value)
    assert msg.startswith("process exited with code 1\n"), msg
    assert "Error: js boom 9 ✗" in msg, msg


def test_javascript_reference_error_is_an_error_for_dify(daemon):
    code = "function main(args) {\n    return {v: notDefined.x};\n}\n"
    with pytest.raises(CodeExecutionError) as e:
        execute_workflow_code_template(daemon, "javascript", code, {})
    assert "ReferenceError: notDefined is not defined" in str(e.value)


def test_raw_envelope_of_a_failing_node(daemon):
    """What Dify reads, in the envelope: HTTP 200, code 0, error non-empty,
    exit_code non-zero, no result tags in stdout."""
    for lang, code in (("python3", "def main() -> dict:\n    return 1 / 0\n"),
                       ("javascript", "function main() { throw new TypeError('t') }\n")):
        script, preload = transform_caller(lang, code, {})
        r = daemon.run_response(script, language=RUNNERS[lang][2], preload=preload,
                                enable_network=True)
        assert r.status_code == 200
        env = r.json()
        assert env["code"] == 0 and env["message"] == "success", env
        data = env["data"]
        assert data["error"] and data["exit_code"] != 0, data
        assert RESULT_TAG not in data["stdout"], data
        assert data["error"] == f"process exited with code {data['exit_code']}\n" + data["stderr"]


def test_jinja2_template_error_is_an_error_for_dify(daemon):
    with pytest.raises(CodeExecutionError) as e:
        execute_workflow_code_template(daemon, "jinja2", "{% for x in %}", {})
    assert "TemplateSyntaxError" in str(e.value)


# --------------------------------------------------------- large results

N_ROWS = 5000


def expected_rows():
    return {"rows": [{"id": i, "name": f"row-{i}-名前-🙂", "half": i // 2, "flag": i % 3 == 0,
                      "tags": ["a" * (i % 7), None]} for i in range(N_ROWS)],
            "blob": "ß" * 50000}


def test_large_python3_result_is_intact(daemon):
    code = textwrap.dedent('''
        def main(n: int) -> dict:
            return {"rows": [{"id": i, "name": f"row-{i}-名前-🙂", "half": i // 2, "flag": i % 3 == 0,
                              "tags": ["a" * (i % 7), None]} for i in range(n)],
                    "blob": "ß" * 50000}
    ''')
    script, _ = transform_caller("python3", code, {"n": N_ROWS})
    s = requests.Session()
    s.trust_env = False
    stdout = execute_code(daemon, s, "python3", "", script)
    n = len(extract_result(stdout).encode())
    assert n > 400_000, n
    assert transform_response("python3", stdout) == expected_rows()


def test_large_javascript_result_is_intact(daemon):
    code = textwrap.dedent('''
        function main({n}) {
            const rows = [];
            for (let i = 0; i < n; i++)
                rows.push({id: i, name: `row-${i}-名前-🙂`, half: Math.floor(i / 2), flag: i % 3 === 0,
                           tags: ['a'.repeat(i % 7), null]});
            return {rows, blob: 'ß'.repeat(50000)};
        }
    ''')
    script, _ = transform_caller("javascript", code, {"n": N_ROWS})
    s = requests.Session()
    s.trust_env = False
    stdout = execute_code(daemon, s, "javascript", "", script)
    n = len(extract_result(stdout).encode())
    assert n > 400_000, n
    assert canonical(transform_response("javascript", stdout)) == canonical(expected_rows())


def test_large_input_round_trips(daemon):
    """A big input (about 600 KB of base64 in the script) comes back whole."""
    big = {"text": "日本語テキスト 🚀 " * 20000, "nums": list(range(5000))}
    for lang, code in (("python3", "def main(text: str, nums: list) -> dict:\n"
                                   "    return {'text': text, 'total': sum(nums)}\n"),
                       ("javascript", "function main({text, nums}) {\n"
                                      "    return {text, total: nums.reduce((a, b) => a + b, 0)};\n}\n")):
        result = execute_workflow_code_template(daemon, lang, code, big)
        assert result == {"text": big["text"], "total": sum(big["nums"])}, lang


# ------------------------------------------------------------- keep-alive

def one_case(i):
    """(language, code, inputs, expected result) for the i-th run."""
    kind = i % 3
    if kind == 0:
        return ("python3", "def main(i: int, s: str) -> dict:\n    return {'i': i, 'sq': i * i, 's': s[::-1]}\n",
                {"i": i, "s": f"ab{i}中"}, {"i": i, "sq": i * i, "s": f"中{str(i)[::-1]}ba"})
    if kind == 1:
        return ("javascript", "function main({i, s}) { return {i, sq: i * i, s: s.toUpperCase()} }\n",
                {"i": i, "s": f"ab{i}é"}, {"i": i, "sq": i * i, "s": f"AB{i}É"})
    return ("jinja2", "{{ i }}:{% for c in s %}{{ c }}-{% endfor %}", {"i": i, "s": "xyz"},
            {"result": f"{i}:x-y-z-"})


def port_recorder(ports):
    """A response hook that records the client-side port of the connection
    the response came on (read before the body is consumed, while urllib3
    still holds the connection)."""
    lock = threading.Lock()

    def hook(r, *args, **kwargs):
        conn = getattr(r.raw, "_connection", None)
        sock = getattr(conn, "sock", None)
        closing = r.headers.get("Connection", "").lower() == "close"
        with lock:  # None: urllib3 already dropped a connection the server closes
            ports.append(None if sock is None or closing else sock.getsockname()[1])
        return r
    return hook


def test_sequential_runs_over_one_keep_alive_connection(daemon):
    s = requests.Session()
    s.trust_env = False
    adapter = HTTPAdapter(pool_connections=1, pool_maxsize=1)
    s.mount("http://", adapter)
    ports = []
    s.hooks["response"].append(port_recorder(ports))
    try:
        for i in range(30):
            lang, code, inputs, expected = one_case(i)
            assert execute_workflow_code_template(daemon, lang, code, inputs, session=s) == expected, i
        pool = adapter.poolmanager.connection_from_url(daemon.url("/"))
        assert len(ports) == 30
        assert None not in ports and len(set(ports)) == 1, f"the server closed the connection: {ports}"
        assert pool.num_connections == 1, pool.num_connections
        assert pool.num_requests == 30, pool.num_requests
    finally:
        s.close()


def test_concurrent_runs_over_a_keep_alive_pool(daemon):
    """Like Dify's pooled httpx client: 10 runs at once through a session
    with a pool of 10, twice; every result right, connections reused."""
    s = requests.Session()
    s.trust_env = False
    adapter = HTTPAdapter(pool_connections=1, pool_maxsize=10, pool_block=True)
    s.mount("http://", adapter)
    ports = []
    s.hooks["response"].append(port_recorder(ports))

    def job(i):
        lang, code, inputs, expected = one_case(i)
        return i, execute_workflow_code_template(daemon, lang, code, inputs, session=s), expected

    try:
        with ThreadPoolExecutor(max_workers=10) as ex:
            for round_ in range(2):
                results = list(ex.map(job, range(round_ * 10, round_ * 10 + 10)))
                for i, got, expected in results:
                    assert got == expected, (i, got, expected)
        pool = adapter.poolmanager.connection_from_url(daemon.url("/"))
        assert len(ports) == 20
        assert pool.num_requests == 20
        assert pool.num_connections <= 10, pool.num_connections
        assert None not in ports, f"the server closed connections: {ports}"
        assert len(set(ports)) <= 10, ports
    finally:
        s.close()


def test_ten_runs_pipelined_on_one_keep_alive_connection(daemon):
    """The strict reading of "10 concurrent runs over one keep-alive
    connection": all ten requests written at once on a single socket
    (HTTP/1.1 pipelining), before any answer is read; the ten answers come
    back in order on that same connection, each right."""
    cases = [one_case(i) for i in range(10)]
    wire = b""
    for lang, code, inputs, _ in cases:
        script, preload = transform_caller(lang, code, inputs)
        body = json.dumps({"language": RUNNERS[lang][2], "code": script, "preload": preload,
                           "enable_network": True}).encode()
        wire += raw_post("/v1/sandbox/run", body, close=False)
    class OneReader:
        """Every response parsed from one buffered reader (http.client
        would make, and close, one per response, losing read-ahead)."""
        def __init__(self, f):
            self.f = f

        def makefile(self, mode):
            return self

        def close(self):
            pass

        def __getattr__(self, name):
            return getattr(self.f, name)

    with socket.create_connection(("127.0.0.1", daemon.port), timeout=60) as sock:
        sock.sendall(wire)
        reader = OneReader(sock.makefile("rb"))
        for lang, _, _, expected in cases:
            r = http.client.HTTPResponse(reader)
            r.begin()
            envelope = json.loads(r.read())
            assert r.status == 200 and envelope["code"] == 0, envelope
            assert not r.will_close, "the server closed the connection"
            assert envelope["data"]["error"] == "", envelope
            assert transform_response(lang, envelope["data"]["stdout"]) == expected
