"""python -m verl.sandbox.server fails closed and is safe by default: the real server in a subprocess, a real HTTP
client. Without bubblewrap (hidden from its PATH, as on a fresh machine) it refuses to start unless told
``--isolation rlimit``, and then every answer says so; beyond loopback it needs an API key; bodies and requests in
flight are bounded. docs/security.md."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from contextlib import contextmanager

import pytest

pytest.importorskip("uvicorn", reason='the server needs pip install -e ".[serve]"')

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_env(path: str | None = None, **extra: str) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": ROOT, **extra}
    env.pop("VERL_SANDBOX_ISOLATION", None)
    if path is not None:
        env["PATH"] = path
    return env


def start(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "verl.sandbox.server", "--port", str(free_port()), *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)


@contextmanager
def running(*args: str, env: dict[str, str]):
    port = free_port()
    cmd = [sys.executable, "-m", "verl.sandbox.server", "--port", str(port), *args]
    process = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=ROOT)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            assert process.poll() is None, process.stdout.read()
            try:
                with urllib.request.urlopen(url + "/v1/ping", timeout=2):
                    break
            except OSError:
                time.sleep(0.1)
        yield url, process
    finally:
        process.terminate()
        process.wait(timeout=30)


def call(url: str, path: str, body=None, key: str | None = None) -> tuple[int, dict, object]:
    data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    headers = {"Content-Type": "application/json"}
    if key is not None:
        headers["Authorization"] = f"Bearer {key}"
    request = urllib.request.Request(url + path, data, headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as r:
            return r.status, dict(r.headers), json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), json.loads(e.read())


def test_without_bubblewrap_it_refuses_to_start_naming_the_cause_and_both_fixes(path_without_bwrap):
    out = start(env=server_env(path_without_bwrap))
    assert out.returncode == 2
    line = out.stderr.strip()
    assert len(line.splitlines()) == 1 and line.startswith("error: ")
    assert "bubblewrap (bwrap) is not installed" in line
    assert "apt-get install bubblewrap" in line and "--isolation rlimit" in line


@pytest.mark.slow
def test_isolation_rlimit_is_an_explicit_choice_that_every_answer_names(path_without_bwrap, tmp_path):
    with running("--isolation", "rlimit", env=server_env(path_without_bwrap)) as (url, process):
        status, headers, health = call(url, "/health")
        assert status == 200 and health["isolation"] == "rlimit" and headers["x-sandbox-isolation"] == "rlimit"
        status, headers, ok = call(url, "/run_code", {"code": "print(6 * 7)"})
        assert status == 200 and ok["status"] == "Success" and ok["run_result"]["stdout"] == "42\n"
        assert ok["isolation"] == "rlimit" and headers["x-sandbox-isolation"] == "rlimit"
        status, headers, bad = call(url, "/run_code", {"stdin": "no code"})
        assert status == 400 and bad["isolation"] == "rlimit" and headers["x-sandbox-isolation"] == "rlimit"
        # what rlimit does not stop (docs/security.md): the code reads this machine's world-readable files
        fd, host_file = tempfile.mkstemp(prefix="verl-host-file-", dir="/tmp")
        try:
            os.write(fd, b"host secret")
            os.close(fd)
            os.chmod(host_file, 0o644)
            _, _, read = call(url, "/run_code", {"code": f"print(open({host_file!r}).read())"})
        finally:
            os.unlink(host_file)
        assert read["run_result"]["stdout"] == "host secret\n"
    log = process.stdout.read()
    assert "SANDBOX WITHOUT ISOLATION (isolation=rlimit)" in log and "isolation: rlimit" in log


@pytest.mark.slow
def test_beyond_loopback_it_needs_a_key_and_checks_it(tmp_path):
    out = start("--host", "0.0.0.0", "--isolation", "rlimit", env=server_env())
    assert out.returncode == 2 and "refuses to listen on 0.0.0.0 without an API key" in out.stderr
    assert "--api-key KEY" in out.stderr and "--insecure-no-auth" in out.stderr
    env = server_env(VERL_SANDBOX_API_KEY="s3cret-key")  # the key from the environment, not the command line
    with running("--host", "0.0.0.0", "--isolation", "rlimit", env=env) as (url, _):
        assert call(url, "/run_code", {"code": "print(1)"})[0] == 401
        status, headers, wrong = call(url, "/run_code", {"code": "print(1)"}, key="s3cret-kez")
        assert status == 401 and "API key" in wrong["message"] and headers["www-authenticate"] == "Bearer"
        status, _, ok = call(url, "/run_code", {"code": "print(1)"}, key="s3cret-key")
        assert status == 200 and ok["run_result"]["stdout"] == "1\n"
        assert call(url, "/health")[0] == 200  # health checks need no key
        # verl's client sends the key from the same variable
        from verl.utils.reward_score.sandbox_fusion import call_sandbox_api

        os.environ["VERL_SANDBOX_API_KEY"] = "s3cret-key"
        try:
            response, error = call_sandbox_api(url + "/run_code", "print(5)", None, 5, 5, 256)
        finally:
            del os.environ["VERL_SANDBOX_API_KEY"]
        assert error is None and response["run_result"]["stdout"] == "5\n"
        response, error = call_sandbox_api(url + "/run_code", "print(5)", None, 5, 5, 256)
        assert response is None and "HTTP 401" in error


@pytest.mark.slow
def test_insecure_no_auth_is_explicit_and_warned():
    with running("--host", "0.0.0.0", "--insecure-no-auth", "--isolation", "rlimit", env=server_env()) as (url, p):
        assert call(url, "/run_code", {"code": "print(1)"})[0] == 200
    assert "without an API key (--insecure-no-auth)" in p.stdout.read()


@pytest.mark.slow
def test_bodies_and_requests_in_flight_are_bounded():
    args = ("--isolation", "rlimit", "--max-body-bytes", "2000", "--max-pending", "1", "--max-concurrent", "1")
    with running(*args, env=server_env()) as (url, _):
        status, _, big = call(url, "/run_code", {"code": "x = '" + "a" * 3000 + "'"})
        assert status == 413 and "larger than this server accepts (2000 bytes)" in big["message"]
        slow: dict = {}
        first = threading.Thread(
            target=lambda: slow.update(answer=call(url, "/run_code", {"code": "import time; time.sleep(3)"}))
        )
        first.start()
        time.sleep(1.0)  # the first request holds the one slot
        status, headers, busy = call(url, "/run_code", {"code": "print(1)"})
        assert status == 429 and headers["retry-after"] == "1" and "too many requests" in busy["message"]
        first.join()
        assert slow["answer"][0] == 200
        assert call(url, "/run_code", {"code": "print(1)"})[0] == 200  # free again
