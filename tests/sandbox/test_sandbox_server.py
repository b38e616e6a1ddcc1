"""python -m verl.sandbox.server: SandboxFusion's /run_code over the local sandbox, called by our verl-style client
over real HTTP (a uvicorn server in a thread), and bad requests answered with a 400 naming the field."""

from __future__ import annotations

import json
import socket
import threading
import time
import urllib.error
import urllib.request

import pytest

from verl.sandbox import bwrap_status

pytestmark = pytest.mark.skipif(bwrap_status() is not None, reason=f"no bubblewrap here: {bwrap_status()}")
uvicorn = pytest.importorskip("uvicorn", reason='the server needs pip install -e ".[serve]"')


@pytest.fixture(scope="module")
def url():
    from verl.sandbox.server import create_app

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(
        uvicorn.Config(create_app(max_concurrent=2), host="127.0.0.1", port=port, log_level="error")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    for _ in range(100):
        if server.started:
            break
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=10)
    assert not thread.is_alive()


def post(url: str, body) -> tuple[int, dict]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    request = urllib.request.Request(url + "/run_code", data, {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


@pytest.mark.slow
def test_run_code_answers_in_sandboxfusion_shape(url):
    with urllib.request.urlopen(url + "/v1/ping", timeout=10) as r:
        assert json.loads(r.read()) == "pong"
    status, ok = post(url, {"code": "print(input()[::-1])", "stdin": "abc", "language": "python", "run_timeout": 5,
                            "compile_timeout": 5, "memory_limit_MB": 256, "files": {}, "fetch_files": []})  # fmt: skip
    assert status == 200 and ok["status"] == "Success" and ok["compile_result"] is None
    assert ok["run_result"]["status"] == "Finished" and ok["run_result"]["return_code"] == 0
    assert ok["run_result"]["stdout"] == "cba\n" and isinstance(ok["run_result"]["execution_time"], float)
    _, crash = post(url, {"code": "raise ValueError('x')"})
    assert crash["status"] == "Failed" and crash["run_result"]["return_code"] == 1
    assert "ValueError: x" in crash["run_result"]["stderr"]
    _, loop = post(url, {"code": "while True: pass", "run_timeout": 1})
    assert loop["status"] == "Failed" and loop["run_result"]["status"] == "TimeLimitExceeded"


@pytest.mark.parametrize(
    "body, field",
    [
        ({"stdin": "x"}, "'code'"),
        ({"code": "print(1)", "language": "cpp"}, "'language' 'cpp' is not supported"),
        ({"code": "print(1)", "run_timeout": -1}, "'run_timeout' must be a number"),
        ({"code": "print(1)", "memory_limit_MB": "lots"}, "'memory_limit_MB' must be a number"),
        ({"code": "print(1)", "files": {"a.py": "eA=="}}, "'files' is not supported"),
        (b"{not json", "not valid JSON"),
    ],
)
def test_bad_requests_get_a_400_naming_the_field(url, body, field):
    status, answer = post(url, body)
    assert status == 400 and field in answer["message"]


@pytest.mark.slow
def test_verl_client_scores_against_our_server(url):
    """The same test cases judged through the HTTP API and by the local judge agree."""
    from verl.utils.reward_score import default_compute_score, prime_code, sandbox_fusion

    stdio = json.dumps({"inputs": ["1 2\n", "5 5\n"], "outputs": ["3", "10"]})
    calls = {"fn_name": "add", "inputs": [[1, 2], [3, 4]], "outputs": [3, 7]}
    semaphore = threading.Semaphore(2)
    run = url + "/run_code"
    for program, cases in [
        ("a, b = map(int, input().split())\nprint(a + b)", stdio),
        ("print(3)", stdio),
        ("def add(a, b):\n    return a + b", calls),
        ("class Solution:\n    def add(self, a, b):\n        return a * b", calls),
        ("def add(a, b:\n", calls),
    ]:
        remote = sandbox_fusion.compute_score(run, semaphore, 256, program, cases, continuous=True, timeout=5)
        local = prime_code.compute_score(program, cases, continuous=True)
        assert remote[0] == local[0], (program, remote, local)
    via_source = default_compute_score(
        "apps", "print(3)", stdio, sandbox_fusion_url=run, concurrent_semaphore=semaphore
    )
    assert via_source["score"] == 0.5


@pytest.mark.slow
def test_an_unreachable_service_fails_the_cases_not_the_run():
    from verl.utils.reward_score import sandbox_fusion

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}/run_code"
    score, meta = sandbox_fusion.compute_score(dead, None, 256, "print(3)", {"inputs": ["\n"], "outputs": ["3"]})
    assert score is False and meta[0]["status"] == "api_error" and "Connection refused" in meta[0]["api_request_error"]


@pytest.mark.slow
def test_the_code_interpreter_tool_runs_on_the_service(url):
    import asyncio

    from verl.tools import SandboxFusionTool, call_tool

    tool = SandboxFusionTool({"sandbox_fusion_url": url + "/run_code", "default_timeout": 2})
    ok = asyncio.run(call_tool(tool, {"code": "print(4821 * 37)"}, timeout_s=30))
    assert ok.response.text == "178377\n" and ok.metrics == {"status": "ok"}
    loop = asyncio.run(call_tool(tool, {"code": "while True: pass"}, timeout_s=30))
    assert loop.response.text.startswith("Error (timed out after 2 s)") and loop.metrics == {"status": "timeout"}
