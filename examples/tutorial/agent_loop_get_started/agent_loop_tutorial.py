"""Agent loop, get started: write a tool, show it to a model, train with it for a few RL steps, read the trajectories.

    python examples/tutorial/agent_loop_get_started/agent_loop_tutorial.py             # 4 steps, a few minutes on 2 CPU cores
    python examples/tutorial/agent_loop_get_started/agent_loop_tutorial.py --steps 20  # longer

Read it top to bottom; each part prints what it shows. The model is the shipped tool-calling warm start
(``builtin://tiny-qwen2-calc-sft``, 4 MB), the task the built-in long multiplications (``builtin://calc_multiply``),
which the model answers by calling a calculator and copying its result (the warm start calls it in half of its
samples; RL teaches it to call). Replace them with your model directory and your parquet files; the rest stays. The concepts: docs/agent_loop.md and docs/tools.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os

from multiply_tool import MultiplyTool  # the file next to this one: the tool we write

from verl.tools import call_tool, initialize_tools_from_config
from verl.trainer.main_ppo import run_ppo
from verl.utils.config import load_config
from verl.utils.model import load_tokenizer

HERE = os.path.dirname(os.path.abspath(__file__))
TOOL_YAML = os.path.join(HERE, "multiply_tool.yaml")
MODEL = "builtin://tiny-qwen2-calc-sft"


def part1_call_the_tool() -> None:
    """1. A tool is a class (``multiply_tool.py``: ``execute`` is what a call does) and an entry in a tool YAML
    (``multiply_tool.yaml``: the class, its config, the schema the model reads). Load the YAML as the trainer does
    and call the tool through the function the agent loop uses: it checks the arguments against the schema and
    turns every failure into an observation the model reads, never an exception."""
    print("== 1. the tool on its own")
    (tool,) = initialize_tools_from_config(TOOL_YAML)
    assert isinstance(tool, MultiplyTool) and tool.name == "calculator"
    for arguments in ({"expression": "4821*37"}, {"expression": "4821+37"}, {"expr": "1*2"}):
        result = asyncio.run(call_tool(tool, arguments))
        print(f"  {json.dumps(arguments):28} -> {result.response.text!r:70} error kind: {result.error_kind}")


def part2_what_the_model_reads() -> None:
    """2. The agent loop renders the tools' schemas into the prompt with the model's chat template
    (``apply_chat_template(messages, tools=...)``); this tiny model's template shows only names and parameters."""
    print("\n== 2. the prompt the model reads, with the tool")
    tools = initialize_tools_from_config(TOOL_YAML)
    schemas = [t.tool_schema.model_dump(exclude_unset=True, exclude_none=True) for t in tools]
    tokenizer = load_tokenizer(MODEL)
    messages = [{"role": "user", "content": "What is 4821 * 37?"}]
    print(tokenizer.apply_chat_template(messages, tools=schemas, add_generation_prompt=True, tokenize=False))


def part3_train(out_dir: str, steps: int, batch_size: int, n: int, val_size: int) -> dict:
    """3. GRPO with the ``tool_agent`` loop: every sample is a trajectory (model turn, tool turn, model turn ...),
    trained on with the tool's tokens masked out of the loss. The keys are verl's; ``trainer.rollout_data_dir`` and
    ``validation_data_dir`` write every trajectory as JSON lines."""
    print(f"\n== 3. {steps} GRPO steps with the tool agent loop (held-out success before and after)")
    config = load_config(
        "ppo_trainer",
        [
            f"actor_rollout_ref.model.path={MODEL}",
            "actor_rollout_ref.rollout.mode=async",
            "actor_rollout_ref.rollout.multi_turn.enable=true",
            f"actor_rollout_ref.rollout.multi_turn.tool_config_path={TOOL_YAML}",
            "actor_rollout_ref.rollout.agent.default_agent_loop=tool_agent",
            f"actor_rollout_ref.rollout.n={n}",
            f"actor_rollout_ref.actor.ppo_mini_batch_size={batch_size}",
            "data.train_files=builtin://calc_multiply/train",
            f"data.val_files=builtin://calc_multiply/test?size={val_size}",
            f"data.train_batch_size={batch_size}",
            "data.max_prompt_length=96",
            "data.max_response_length=128",
            f"trainer.total_training_steps={steps}",
            f"trainer.test_freq={steps}",
            f"trainer.default_local_dir={out_dir}",
            f"trainer.rollout_data_dir={out_dir}/rollouts",
            f"trainer.validation_data_dir={out_dir}/validation",
            "trainer.resume_mode=disable",
            "trainer.logger=[console,file]",
        ],
    )
    result = run_ppo(config)
    (s0, a0), (s1, a1) = result["history"]["val-core/acc"][0], result["history"]["val-core/acc"][-1]
    print(f"held-out success with the tool: {a0:.1%} at step {s0} -> {a1:.1%} at step {s1}")
    return result


def part4_read_trajectories(out_dir: str, steps: int) -> None:
    """4. Each line of ``<rollout_data_dir>/<step>.jsonl`` is one trajectory: the prompt, the whole multi-turn
    transcript (model turns and tool answers), its score, turns, why it ended and its tool calls."""
    print("\n== 4. the trajectories")
    rows = [json.loads(line) for line in open(os.path.join(out_dir, "rollouts", f"{steps}.jsonl"))]
    best = max(rows, key=lambda r: r["score"])
    print(
        f"one trajectory of step {steps} (score {best['score']}, {best['num_turns']} turns, "
        f"{best['num_tool_calls']} tool call(s), ended by {best['finish_reason']}):"
    )
    print("  input:  " + best["input"].replace("\n", "\n          "))
    print("  output: " + best["output"].replace("\n", "\n          "))
    calls = sum(r["num_tool_calls"] for r in rows)
    errors = sum(r["tool_errors"] for r in rows)
    solved = sum(r["score"] > 0 for r in rows)
    print(f"step {steps}: {len(rows)} trajectories, {calls} tool calls ({errors} errors), {solved} solved")
    held_out = [json.loads(line) for line in open(os.path.join(out_dir, "validation", "0.jsonl"))]
    print(
        f"held-out before training: {len(held_out)} trajectories, "
        f"{sum(r['num_tool_calls'] > 0 for r in held_out)} called the tool, {sum(r['score'] > 0 for r in held_out)} solved"
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=4, help="GRPO steps")
    p.add_argument("--batch-size", type=int, default=32, help="prompts per step")
    p.add_argument("--n", type=int, default=8, help="trajectories per prompt (GRPO's group)")
    p.add_argument("--val-size", type=int, default=100, help="held-out problems")
    p.add_argument("--out-dir", default="outputs/agent_loop_tutorial")
    args = p.parse_args()
    part1_call_the_tool()
    part2_what_the_model_reads()
    part3_train(args.out_dir, args.steps, args.batch_size, args.n, args.val_size)
    part4_read_trajectories(args.out_dir, args.steps)


if __name__ == "__main__":
    main()
