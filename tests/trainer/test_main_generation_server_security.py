"""The OpenAI-compatible server's safe defaults, with the real server in a subprocess and the real ``openai`` client:
beyond loopback it refuses to start without an API key; with one, a request without it gets a 401 (compared in
constant time: `verl.utils.http_guard.keys_match`); ``n``, ``max_tokens``, the body and the requests in flight are
bounded, each with its 4xx/429. docs/security.md."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request

import pytest
from server_helpers import REPO, running_server

openai = pytest.importorskip("openai")
pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

MODEL = "builtin://tiny-qwen2-arith-sft"  # the shipped 2 MB policy: loads in seconds
KEY = "test-key-0123456789"


@pytest.mark.slow
def test_beyond_loopback_without_a_key_it_refuses_before_the_model_loads():
    cmd = [sys.executable, "-m", "verl.trainer.main_generation_server", "--model_path", "/does/not/exist"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("VERL_API_KEY", None)
    out = subprocess.run([*cmd, "--host", "0.0.0.0"], capture_output=True, text=True, env=env, cwd=REPO, timeout=120)
    assert out.returncode == 2
    assert "refuses to listen on 0.0.0.0 without an API key" in out.stderr and "--api_key KEY" in out.stderr
    assert "/does/not/exist" not in out.stderr  # refused before it looked at the model


@pytest.fixture(scope="module")
def guarded(tmp_path_factory):
    logs = tmp_path_factory.mktemp("guarded-server")
    args = ("--host", "0.0.0.0", "--api_key", KEY, "--max_n", "4", "--max_tokens_limit", "6")
    args += ("--max_request_bytes", "4000", "--max_concurrent_requests", "1")
    with running_server(MODEL, *args, tmp_dir=logs) as server:  # reached over 127.0.0.1, the test's only address
        yield server


@pytest.mark.slow
def test_a_request_without_the_key_gets_a_401(guarded):
    for key in ("none", KEY[:-1] + "X"):
        client = openai.OpenAI(base_url=guarded.base_url, api_key=key, max_retries=0, timeout=60)
        with pytest.raises(openai.AuthenticationError, match="invalid or missing API key"):
            client.models.list()
    with pytest.raises(urllib.error.HTTPError) as no_header:
        urllib.request.urlopen(guarded.base_url + "/models", timeout=30)
    assert no_header.value.code == 401
    with urllib.request.urlopen(f"http://127.0.0.1:{guarded.port}/health", timeout=30) as r:  # health: no key
        assert r.status == 200
    client = openai.OpenAI(base_url=guarded.base_url, api_key=KEY, max_retries=0, timeout=60)
    assert [m.id for m in client.models.list().data] == [MODEL]


@pytest.mark.slow
def test_n_max_tokens_and_the_body_are_bounded(guarded):
    client = openai.OpenAI(base_url=guarded.base_url, api_key=KEY, max_retries=0, timeout=60)
    with pytest.raises(openai.BadRequestError, match=r"n=5 is more than this server returns per request \(4\)"):
        client.completions.create(model=MODEL, prompt="12+34=", n=5)
    with pytest.raises(openai.BadRequestError, match="n=2 x 3 prompts = 6 choices"):
        client.completions.create(model=MODEL, prompt=["1+1=", "2+2=", "3+3="], n=2)
    with pytest.raises(openai.BadRequestError, match=r"max_tokens=7 is more than this server generates per choice"):
        client.completions.create(model=MODEL, prompt="12+34=", max_tokens=7)
    unset = client.completions.create(model=MODEL, prompt="12+34=", n=4, temperature=1.0, seed=1)
    assert len(unset.choices) == 4 and unset.usage.completion_tokens <= 4 * 6  # cut to the limit, not refused
    request = urllib.request.Request(
        guarded.base_url + "/completions",
        json.dumps({"model": MODEL, "prompt": "1" * 5000}).encode(),
        {"Content-Type": "application/json", "Authorization": f"Bearer {KEY}"},
    )
    with pytest.raises(urllib.error.HTTPError) as big:
        urllib.request.urlopen(request, timeout=30)
    assert big.value.code == 413 and "larger than this server accepts (4000 bytes)" in big.value.read().decode()


@pytest.mark.slow
def test_requests_beyond_the_concurrent_limit_get_a_429_and_the_rest_are_served(guarded):
    """A client that sends half its body holds the one slot (a slow sender counts from its first byte): the next
    request is a 429 through the openai client; once the slow one completes, requests are served again."""
    import socket

    client = openai.OpenAI(base_url=guarded.base_url, api_key=KEY, max_retries=0, timeout=60)
    with socket.create_connection(("127.0.0.1", guarded.port), timeout=30) as slow:
        body = json.dumps({"model": MODEL, "prompt": "12+34="}).encode()
        head = (
            f"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {KEY}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        )
        slow.sendall(head.encode() + body[:10])
        for _ in range(100):  # until the server has read the first bytes
            try:
                client.completions.create(model=MODEL, prompt="1+1=", max_tokens=2)
            except openai.RateLimitError as e:
                assert "too many requests in flight (at most 1)" in str(e) and e.response.headers["retry-after"] == "1"
                break
        else:
            pytest.fail("the server never counted the slow request")
        slow.sendall(body[10:])  # the slow request completes and is answered
        assert b"200 OK" in slow.recv(65536)
    answer = client.completions.create(model=MODEL, prompt="1+1=", max_tokens=2)
    assert len(answer.choices) == 1
