"""Shared by the server tests: a tiny model taught to call a calculator tool, and the server run as a subprocess.

A random tiny model never writes a well-formed ``<tool_call>`` by chance, so `train_tool_call_model` fits one (a few
seconds on a CPU) to three conversations rendered by a Qwen2.5-style template that renders tools, assistant tool calls
and tool results (`TOOL_TEMPLATE`, this test's own): asked "What is 4821*37?" with the calculator offered, it calls
the calculator; given the tool's result, it answers with it; asked without tools, it declines. Served, the model
answers as trained only if the server renders the request's tools, tool calls and tool messages through the template
exactly as training did -- so a tool call coming back proves the whole path, not just the parser.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

TOOL_TEMPLATE = (
    "{%- if tools %}<|im_start|>system\n"
    "{%- if messages[0].role == 'system' %}{{ messages[0].content }}\n{% endif %}"
    "# Tools\n<tools>\n{%- for tool in tools %}{{ tool | tojson }}\n{%- endfor %}</tools>\n"
    'Call one as <tool_call>{"name": ..., "arguments": ...}</tool_call><|im_end|>\n'
    "{%- elif messages[0].role == 'system' %}<|im_start|>system\n{{ messages[0].content }}<|im_end|>\n"
    "{%- endif %}"
    "{%- for message in messages %}"
    "{%- if message.role == 'system' and loop.first %}"
    "{%- elif message.role == 'tool' %}"
    "{%- if loop.first or messages[loop.index0 - 1].role != 'tool' %}<|im_start|>user{% endif %}"
    "\n<tool_response>\n{{ message.content }}\n</tool_response>"
    "{%- if loop.last or messages[loop.index0 + 1].role != 'tool' %}<|im_end|>\n{% endif %}"
    "{%- else %}<|im_start|>{{ message.role }}\n{{ message.content }}"
    "{%- for call in message.tool_calls or [] %}"
    '\n<tool_call>\n{"name": "{{ call.function.name }}", "arguments": {{ call.function.arguments | tojson }}}'
    "\n</tool_call>"
    "{%- endfor %}<|im_end|>\n"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

CALCULATOR = {
    "type": "function",
    "function": {
        "name": "calculator",
        "description": "Evaluate an arithmetic expression.",
        "parameters": {
            "type": "object",
            "properties": {"expression": {"type": "string"}},
            "required": ["expression"],
        },
    },
}
QUESTION = "What is 4821*37?"
RESULT = "178377"
ANSWER = f"4821*37 = {RESULT}."
DECLINE = "I need a calculator."
CALL = {"type": "function", "function": {"name": "calculator", "arguments": {"expression": "4821*37"}}}
# (messages, tools): the model learns the last assistant message of each
CONVERSATIONS = [
    ([{"role": "user", "content": QUESTION}, {"role": "assistant", "content": "", "tool_calls": [CALL]}], [CALCULATOR]),
    (
        [
            {"role": "user", "content": QUESTION},
            {"role": "assistant", "content": "", "tool_calls": [CALL]},
            {"role": "tool", "content": RESULT},
            {"role": "assistant", "content": ANSWER},
        ],
        [CALCULATOR],
    ),
    ([{"role": "user", "content": QUESTION}, {"role": "assistant", "content": DECLINE}], None),
]


def train_tool_call_model(out_dir: str, max_steps: int = 400) -> str:
    """A tiny Qwen2 with `TOOL_TEMPLATE`, fitted to `CONVERSATIONS` (loss on each final assistant turn) until greedy
    decoding reproduces them; saved to ``out_dir``."""
    import torch

    from verl.models.tiny import TinyModelConfig, build_tiny_model, build_tokenizer

    torch.manual_seed(0)
    tokenizer = build_tokenizer()
    tokenizer.chat_template = TOOL_TEMPLATE
    model = build_tiny_model(
        tokenizer,
        TinyModelConfig(
            hidden_size=64,
            num_layers=2,
            num_heads=2,
            num_kv_heads=1,
            intermediate_size=128,
            max_position_embeddings=1024,
        ),
    )
    rows = []
    for messages, tools in CONVERSATIONS:
        prompt = tokenizer.apply_chat_template(messages[:-1], tools=tools, add_generation_prompt=True, tokenize=False)
        full = tokenizer.apply_chat_template(messages, tools=tools, tokenize=False)
        assert full.startswith(prompt)
        ids = tokenizer(full.rstrip("\n"), add_special_tokens=False)["input_ids"]
        n_prompt = len(tokenizer(prompt, add_special_tokens=False)["input_ids"])
        labels = [-100] * n_prompt + ids[n_prompt:]
        rows.append((torch.tensor([ids]), torch.tensor([labels])))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    model.train()
    for _ in range(max_steps):
        loss = sum(model(input_ids=ids, labels=labels).loss for ids, labels in rows) / len(rows)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if loss.item() < 5e-3:
            break
    model.eval()
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    return out_dir


def alive(pids: list[int]) -> list[int]:
    """Those of ``pids`` still running (zombies count as gone)."""
    out = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().split(")")[-1].split()[0] != "Z":
                    out.append(pid)
        except FileNotFoundError:
            pass
    return out


def alive_after(pids: list[int], timeout_s: float = 20.0) -> list[int]:
    """Those of ``pids`` still running after up to ``timeout_s`` (helpers such as multiprocessing's resource tracker
    exit a moment after their parent)."""
    deadline = time.monotonic() + timeout_s
    while alive(pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    return alive(pids)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_is_free(port: int) -> bool:
    """Whether a new server could listen on ``port``: as servers do (uvicorn included), with SO_REUSEADDR, which
    passes over the TIME_WAIT entries of connections the old server closed, but not over a listening socket."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
            s.listen()
        except OSError:
            return False
        return True


class Server:
    """A running ``main_generation_server`` subprocess: its ``process``, ``port`` and ``base_url`` (``.../v1``)."""

    def __init__(self, process: subprocess.Popen, port: int, log: Path):
        self.process, self.port, self.log = process, port, log
        self.base_url = f"http://127.0.0.1:{port}/v1"

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def descendants(self) -> list[int]:
        """The pids of the server's child processes and theirs (taken while it runs: after it exits, an orphan
        belongs to init and no longer shows here)."""
        found, todo = [], [self.process.pid]
        while todo:
            out = subprocess.run(["pgrep", "-P", str(todo.pop())], capture_output=True, text=True).stdout
            kids = [int(p) for p in out.split()]
            found += kids
            todo += kids
        return found

    def post(self, path: str, body: bytes | dict, timeout: float = 60) -> tuple[int, dict]:
        """``(status, json)`` of a raw POST (for bodies the openai client will not send)."""
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        req = urllib.request.Request(f"{self.base_url}{path}", data=data, headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())


@contextlib.contextmanager
def running_server(
    model_path: str, *extra: str, python: str = sys.executable, startup_s: float = 300, tmp_dir: Path | None = None
) -> Iterator[Server]:
    """Start the server on a free port and wait until ``/health`` answers; stop it (SIGTERM, then SIGKILL) after."""
    port = free_port()
    log = Path(tmp_dir or "/tmp") / f"server-{port}.log"
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}".rstrip(os.pathsep)}
    cmd = [python, "-m", "verl.trainer.main_generation_server", "--model_path", model_path, "--port", str(port), *extra]
    with open(log, "w") as out:
        process = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=REPO)
    server = Server(process, port, log)
    try:
        deadline = time.monotonic() + startup_s
        while True:
            if process.poll() is not None:
                raise RuntimeError(
                    f"the server exited with {process.returncode} before it was ready:\n{server.output()}"
                )
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"the server was not ready after {startup_s} s:\n{server.output()}")
            time.sleep(0.5)
        yield server
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
