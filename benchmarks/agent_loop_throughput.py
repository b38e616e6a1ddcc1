"""Agent-loop rollout throughput: a batch of multi-turn trajectories run concurrently, against the same trajectories
run one at a time.

    python benchmarks/agent_loop_throughput.py --rows 16 --turns 3 --threads 1 [--tool-delay-s 0.05] [--md out.md]

Every row runs ``tool_agent`` on the given model through the HF sampler's per-request ``generate``, as the trainer
runs it. The model's turns are read as calls of a ``sleep`` tool answering after ``--tool-delay-s`` (a small model
writes no tool calls by itself), so each trajectory has ``--turns`` model turns with a tool turn between each two.

Three ways, the same seeds (one batch-call key, each row its own ``sample_index``), so the same trajectories:

- ``concurrent, lockstep``: all rows at once; each round's turns decoded in one batch (the default);
- ``concurrent``: all rows at once, each turn sent as soon as its trajectory asks (``rollout.agent.lockstep=false``);
- ``one at a time``: each row alone, one after the other.

Reported per way: seconds (median of ``--repeats``), trajectories/s, model tokens/s (tokens the model sampled) and
response tokens/s (model and tool turns), the sampler's decode batches, and how many rows' tokens equal the first
way's (sampling is seeded per row and turn; a decode batch of another size rounds logits differently in the last
bits, which can flip a sampled token rarely).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from typing import Any

import torch

from verl.experimental.agent_loop import FunctionCall, ParsedToolCalls, ToolAgentLoop, ToolParser, register
from verl.experimental.agent_loop.worker import AgentLoopWorker
from verl.single_controller.base.worker_group import ClassWithInitArgs, LocalWorkerGroup
from verl.tools import BaseTool, ToolResponse
from verl.utils.config import load_config, replace_keys
from verl.utils.dataset.rl_dataset import RLHFDataset, collate_prompts
from verl.workers.fsdp_workers import ActorRolloutRefWorker

TOOL_DELAY_S = {"value": 0.0}


@ToolParser.register("benchmark_every_turn_calls_sleep")
class EveryTurnCallsSleep(ToolParser):
    def parse_text(self, text: str) -> ParsedToolCalls:
        return ParsedToolCalls(content=text, calls=[FunctionCall("sleep", json.dumps({"chars": len(text)}))])


class SleepTool(BaseTool):
    """Answers after ``--tool-delay-s`` seconds (a stand-in for a tool's latency)."""

    def __init__(self):
        params = {"type": "object", "properties": {"chars": {"type": "integer"}}, "required": []}
        schema = {"name": "sleep", "description": "Wait, then answer.", "parameters": params}
        super().__init__({}, {"type": "function", "function": schema})

    async def execute(self, instance_id, parameters, **kwargs):
        await asyncio.sleep(TOOL_DELAY_S["value"])
        return ToolResponse(text=f"slept; {parameters.get('chars', 0)} characters"), 0.0, {}


@register("benchmark_sleep_agent")
class SleepAgent(ToolAgentLoop):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, tools=[SleepTool()], **kwargs)


def build(args) -> tuple[Any, Any, Any]:
    overrides = [
        "recipe=quickstart",  # the built-in task's sizes, whichever model is measured
        f"actor_rollout_ref.model.path={args.model}",
        "actor_rollout_ref.rollout.mode=async",
        "actor_rollout_ref.rollout.agent.default_agent_loop=benchmark_sleep_agent",
        "actor_rollout_ref.rollout.multi_turn.format=benchmark_every_turn_calls_sleep",
        f"actor_rollout_ref.rollout.multi_turn.max_assistant_turns={args.turns}",
        f"actor_rollout_ref.rollout.response_length={args.response_length}",
        f"data.max_response_length={args.response_length}",
    ]
    config = load_config("ppo_trainer", overrides)
    spec = ClassWithInitArgs(ActorRolloutRefWorker, (config.actor_rollout_ref,), {"role": "actor_rollout"})
    group = LocalWorkerGroup({"actor_rollout": spec}).role("actor_rollout")
    group.init_model()
    ds = RLHFDataset(
        "builtin://arithmetic/test?test_size=64", group.tokenizer, max_prompt_length=64, return_raw_chat=True
    )
    batch = collate_prompts([ds[i] for i in range(args.rows)], group.tokenizer.pad_token_id)
    batch.batch["sample_index"] = torch.arange(args.rows, dtype=torch.int64)
    return config, group, batch


def decode_batch_sizes(group) -> list[int]:
    """Every decode batch of the sampler so far (the count carries over from one event loop's batcher to the next)."""
    batcher = group.rollout._batcher
    return list(batcher.batch_sizes) if batcher is not None else []


def run_way(way: str, config, group, batch, call_key: int) -> tuple[float, Any, list[int]]:
    """(seconds, output rows, the sampler's decode batch sizes) of one way."""
    config = replace_keys(config, {"actor_rollout_ref.rollout.agent.lockstep": way != "concurrent"})
    worker = AgentLoopWorker(config, [group], group.tokenizer)
    done_before = len(decode_batch_sizes(group))
    start = time.perf_counter()
    if way == "one at a time":
        outs = [asyncio.run(worker.generate_sequences(batch[row : row + 1], call_key)) for row in range(len(batch))]
    else:
        outs = [asyncio.run(worker.generate_sequences(batch, call_key))]
    sizes = decode_batch_sizes(group)[done_before:]
    return time.perf_counter() - start, outs, sizes


def rows_of(outs) -> list[list[int]]:
    rows = []
    for out in outs:
        for ids, mask in zip(out.batch["responses"], out.batch["response_mask"]):
            rows.append(ids[mask.bool()].tolist())
    return rows


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--model", default="builtin://tiny-qwen2-arith-sft")
    p.add_argument("--rows", type=int, default=16, help="trajectories (%(default)s)")
    p.add_argument("--turns", type=int, default=3, help="model turns per trajectory (%(default)s)")
    p.add_argument("--response-length", type=int, default=192, help="response budget in tokens (%(default)s)")
    p.add_argument("--tool-delay-s", type=float, default=0.0, help="seconds each tool call takes (%(default)s)")
    p.add_argument("--repeats", type=int, default=3, help="timed runs per way; the median is reported")
    p.add_argument("--threads", type=int, default=1, help="torch threads (%(default)s)")
    p.add_argument("--quick", action="store_true", help="smoke setting: 4 rows, 2 turns, 1 repeat")
    p.add_argument("--md", help="also write the table to this markdown file")
    args = p.parse_args(argv)
    if args.quick:
        args.rows, args.turns, args.repeats, args.response_length = 4, 2, 1, 64
    torch.set_num_threads(args.threads)
    TOOL_DELAY_S["value"] = args.tool_delay_s
    config, group, batch = build(args)
    ways = ["concurrent, lockstep", "concurrent", "one at a time"]
    results: dict[str, dict[str, Any]] = {}
    reference = None
    run_way(ways[0], config, group, batch, call_key=7)  # warm-up: allocator, first-call costs
    for way in ways:
        times, outs, sizes = [], None, []
        for _ in range(args.repeats):
            seconds, outs, sizes = run_way(way, config, group, batch, call_key=7)
            times.append(seconds)
        seconds = statistics.median(times)
        model_tokens = sum(int(o.batch["response_mask"].sum()) for o in outs)
        side = sum(int(o.batch["attention_mask"][:, o.batch["prompts"].shape[1] :].sum()) for o in outs)
        rows = rows_of(outs)
        reference = reference or rows
        results[way] = {
            "seconds": seconds,
            "trajectories_per_s": args.rows / seconds,
            "model_tokens_per_s": model_tokens / seconds,
            "response_tokens_per_s": side / seconds,
            "decode_batches": len(sizes),
            "mean_batch": statistics.mean(sizes) if sizes else 0.0,
            "rows_equal_to_first_way": sum(a == b for a, b in zip(rows, reference)),
        }
    table = markdown(args, results)
    print(table)
    if args.md:
        with open(args.md, "w") as f:
            f.write(table)
    return {"args": vars(args), "results": results}


def markdown(args, results: dict[str, dict[str, Any]]) -> str:
    lines = [
        f"{args.rows} trajectories x {args.turns} model turns, tool delay {args.tool_delay_s} s, {args.model}, "
        f"{args.threads} thread(s), median of {args.repeats}",
        "",
        "| way | s | trajectories/s | model tokens/s | response tokens/s | decode batches (mean size) | rows equal |",
        "|---|---|---|---|---|---|---|",
    ]
    for way, r in results.items():
        lines.append(
            f"| {way} | {r['seconds']:.2f} | {r['trajectories_per_s']:.2f} | {r['model_tokens_per_s']:.0f} | "
            f"{r['response_tokens_per_s']:.0f} | {r['decode_batches']} ({r['mean_batch']:.1f}) | "
            f"{r['rows_equal_to_first_way']}/{args.rows} |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
