"""Throughput and latency of the OpenAI-compatible server at 1, 8 and 32 concurrent clients, side by side.

    python benchmarks/serve_throughput.py --base_url http://127.0.0.1:8000/v1          # a running server
    python benchmarks/serve_throughput.py --model_path builtin://tiny-qwen2-arith-sft  # start one, measure, stop it

Each level runs ``C`` clients (the real ``openai.AsyncOpenAI`` client, one event loop) that each send ``--rounds``
chat requests one after the other, so ``C`` requests are in flight at any time; every request asks for exactly
``--max_tokens`` tokens (``ignore_eos``), so the levels do the same work per request. Reported per level: requests/s
and completion tokens/s over the level's wall time, p50/p95 latency of a request (send to full response), and the
mean batch the engine decoded (the server's ``GET /stats``, before and after the level). One warm-up request runs
first. Writes a Markdown table (``--md``) and the raw numbers (``--json``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
QUESTIONS = ["12+34=", "57+18=", "90+9=", "23+45=", "61+27=", "8+76=", "44+44=", "15+62="]


def _stats(base_url: str) -> dict:
    with urllib.request.urlopen(base_url.rsplit("/v1", 1)[0] + "/stats", timeout=30) as r:
        return json.load(r)


async def run_level(client, model: str, clients: int, rounds: int, max_tokens: int) -> dict:
    """``clients`` concurrent clients, ``rounds`` sequential requests each."""
    latencies: list[float] = []
    tokens = 0

    async def one_client(c: int) -> None:
        nonlocal tokens
        for r in range(rounds):
            question = QUESTIONS[(c * rounds + r) % len(QUESTIONS)]
            start = time.perf_counter()
            out = await client.chat.completions.create(
                model=model,
                messages=[{"role": "user", "content": question}],
                max_tokens=max_tokens,
                temperature=1.0,
                extra_body={"ignore_eos": True},
            )
            latencies.append(time.perf_counter() - start)
            tokens += out.usage.completion_tokens

    start = time.perf_counter()
    await asyncio.gather(*[one_client(c) for c in range(clients)])
    wall = time.perf_counter() - start
    cuts = statistics.quantiles(latencies, n=100, method="inclusive") if len(latencies) > 1 else latencies * 99
    return {
        "clients": clients,
        "requests": len(latencies),
        "wall_s": wall,
        "requests_per_s": len(latencies) / wall,
        "tokens_per_s": tokens / wall,
        "latency_p50_s": statistics.median(latencies),
        "latency_p95_s": cuts[94],
        "completion_tokens": tokens,
    }


def markdown(rows: list[dict], title: str) -> str:
    lines = [
        f"**{title}**",
        "",
        "| concurrent clients | requests | requests/s | completion tokens/s | latency p50 s | latency p95 s | mean engine batch |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['clients']} | {r['requests']} | {r['requests_per_s']:.2f} | {r['tokens_per_s']:.0f} | "
            f"{r['latency_p50_s']:.3f} | {r['latency_p95_s']:.3f} | {r['mean_engine_batch']:.1f} |"
        )
    return "\n".join(lines) + "\n"


def start_server(args: argparse.Namespace) -> tuple[subprocess.Popen, str]:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [sys.executable, "-m", "verl.trainer.main_generation_server", "--model_path", args.model_path]
    cmd += ["--engine", args.engine, "--port", str(port), "--max_num_seqs", str(max(args.concurrency))]
    cmd += ["--log_level", "warning"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p)}
    process = subprocess.Popen(cmd, env=env, cwd=ROOT)
    base_url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + args.startup_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the server exited with {process.returncode} before it was ready")
        try:
            _stats(base_url)
            return process, base_url
        except OSError:
            time.sleep(0.5)
    process.terminate()
    raise TimeoutError(f"the server was not ready after {args.startup_s} s")


async def measure(args: argparse.Namespace, base_url: str) -> tuple[list[dict], str]:
    import openai

    client = openai.AsyncOpenAI(base_url=base_url, api_key=args.api_key, max_retries=0, timeout=args.timeout_s)
    model = args.model or (await client.models.list()).data[0].id
    await client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": "1+1="}], max_tokens=args.max_tokens
    )  # warm-up
    rows = []
    for clients in args.concurrency:
        before = _stats(base_url)
        row = await run_level(client, model, clients, args.rounds, args.max_tokens)
        after = _stats(base_url)
        batches = after["batches"] - before["batches"]
        row["mean_engine_batch"] = (after["requests"] - before["requests"]) / batches if batches else 0.0
        row["engine"] = after["engine"]
        rows.append(row)
        print(json.dumps(row), flush=True)
    await client.close()
    return rows, model


def main(argv: list[str] | None = None) -> list[dict]:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--base_url", default=None, help="a running server's .../v1 (default: start one from --model_path)")
    p.add_argument("--model_path", default="builtin://tiny-qwen2-arith-sft", help="the model a started server serves")
    p.add_argument("--engine", default="hf", choices=["hf", "vllm"], help="the engine of a started server")
    p.add_argument("--model", default=None, help="the model name in requests (default: the server's first)")
    p.add_argument("--api_key", default="none")
    p.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32])
    p.add_argument("--rounds", type=int, default=4, help="requests each client sends, one after the other")
    p.add_argument("--max_tokens", type=int, default=64)
    p.add_argument("--timeout_s", type=float, default=600)
    p.add_argument("--startup_s", type=float, default=600)
    p.add_argument("--md", default=None, help="write the Markdown table here")
    p.add_argument("--json", default=None, help="write the rows as JSON here")
    args = p.parse_args(argv)

    process = None
    base_url = args.base_url
    if base_url is None:
        process, base_url = start_server(args)
    try:
        rows, model = asyncio.run(measure(args, base_url))
    finally:
        if process is not None:
            process.terminate()
            process.wait(timeout=120)
    title = (
        f"{model}, engine {rows[0]['engine']}: chat requests of {args.max_tokens} tokens each, {args.rounds} per client"
    )
    table = markdown(rows, title)
    print(table)
    for path, text in ((args.md, table), (args.json, json.dumps(rows, indent=2))):
        if path:
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
            with open(path, "w") as f:
                f.write(text)
    return rows


if __name__ == "__main__":
    main()
