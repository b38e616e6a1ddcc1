"""Regenerate the shipped tool-task warm start ``verl/assets/models/tiny-qwen2-calc-sft``.

    python scripts/make_tool_warmstart.py                 # trains (about 12 min on 2 quiet cores), then scores
    python scripts/make_tool_warmstart.py --skip-train    # only score the checkpoints already in --work-dir

Multi-turn SFT (``data.multiturn.enable=true``) of a fresh tiny Qwen2 with the tool-calling tokenizer
(``builtin://tiny-qwen2?tools=true&num_layers=4``: hidden 128, 4 layers; the 2-layer size of the arithmetic model
learns to copy the calculator's answer in some runs and not in others) on a mix of demonstrations, all of the same
training problems:

- the calculator demonstrations of ``builtin://calc_multiply/train`` (call, the calculator's answer, the product);
- as many with the calculator offered and *not* used (``demonstration=direct``: the product stated at once, which a
  model this size cannot compute);
- 500 direct answers without tools (``agent_name=single_turn_agent``), so that a prompt without tools gets an answer.

So the warm start has both habits: it calls the calculator in about half of its samples, and copies its answer when
it does. Greedy decoding picks one habit for every problem, and at the shipped step that is answering without the
tool (held-out success 0% with and without it). That is the situation RL with tools is for: the samples that call
earn the reward, and GRPO has to turn "sometimes calls" into "calls".

Checkpoints from ``--first`` on are scored on the held-out problems: greedy replay success
(:mod:`verl.data.multiturn_eval`: the call turn must be exactly the right call, the answer turn given the
calculator's true answer must state the product), the answer turn alone, and the probability that the first turn
starts with ``<tool_call>`` (how often a sampled first turn calls). The latest checkpoint whose answer turn is right
for at least ``--min-copy`` of the problems and whose call probability is between 0.3 and 0.7 is shipped, with those
numbers and the success without the tool in its ``warmstart.json``. fp32 training drifts apart on other CPUs'
kernels over thousands of steps, so a rerun elsewhere may ship another step: the card states what was measured.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402

from verl.data.multiturn_eval import evaluate_replay_success, first_turn_token_probability  # noqa: E402
from verl.trainer.main_sft import run_sft  # noqa: E402
from verl.utils.config import load_config  # noqa: E402
from verl.utils.dataset.parquet import read_parquet_rows  # noqa: E402
from verl.utils.evaluation import evaluate_greedy_accuracy  # noqa: E402
from verl.utils.model import load_causal_lm, load_tokenizer  # noqa: E402

BASE = "builtin://tiny-qwen2?tools=true&num_layers=4"
TRAIN = [
    "builtin://calc_multiply/train",
    "builtin://calc_multiply/train?demonstration=direct",
    "builtin://calc_multiply/train?agent_name=single_turn_agent&size=500",
]
HELD_OUT = "builtin://calc_multiply/test?size=200"  # problems never seen in training (split by problem)
HELD_OUT_NO_TOOL = "builtin://calc_multiply/test?size=200&agent_name=single_turn_agent"  # the same problems
SCREEN = "builtin://calc_multiply/test?size=50"  # the SFT job's own validation
CALL_TOKEN = "<tool_call>"
ASSET = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "verl", "assets", "models", "tiny-qwen2-calc-sft"
)
EVAL_BATCH = 64
FINAL_TURN_TOKENS = 16  # "#### " + up to 7 digits + end of turn fits


def sft_overrides(args: argparse.Namespace, shown: bool = False) -> list[str]:
    """The SFT job's overrides; ``shown``: for the card, with the default work dir instead of this machine's path."""
    work_dir = "outputs/tool_warmstart" if shown else args.work_dir
    return [
        "data.multiturn.enable=true",
        f"model.partial_pretrain={BASE}",
        f"data.train_files=[{','.join(TRAIN)}]",
        f"data.val_files=[{SCREEN}]",
        "data.train_batch_size=16",
        "data.micro_batch_size_per_gpu=16",
        f"trainer.total_training_steps={args.steps}",
        f"trainer.save_freq={args.every}",
        "trainer.log_freq=10",
        f"trainer.default_local_dir={work_dir}",
        "trainer.logger=[console,file]",
    ]


def score_with_tool(model_dir: str, spec: str) -> dict:
    """Greedy replay success on ``spec``'s tool rows (call turn exact, final turn scored) and the mean probability
    that the first turn is a call."""
    tokenizer, model = load_tokenizer(model_dir), load_causal_lm(model_dir)
    rows = read_parquet_rows(spec)
    result = evaluate_replay_success(model, tokenizer, rows, max_new_tokens=FINAL_TURN_TOKENS, batch_size=EVAL_BATCH)
    calls = first_turn_token_probability(model, tokenizer, rows, CALL_TOKEN)
    return {k: result[k] for k in ("acc", "turn_acc", "final_acc", "num_samples")} | {"p_call": sum(calls) / len(calls)}


def score_without_tool(model_dir: str, spec: str) -> dict:
    """Single-turn greedy success on ``spec``'s rows rendered without tools."""
    tokenizer, model = load_tokenizer(model_dir), load_causal_lm(model_dir)
    result = evaluate_greedy_accuracy(model, tokenizer, read_parquet_rows(spec), FINAL_TURN_TOKENS, EVAL_BATCH)
    return {k: result[k] for k in ("acc", "num_samples")}


def sft_wall_seconds(work_dir: str) -> float:
    """The SFT job's wall time, all steps to the last validation: from its config.yaml (written first) to the last
    write of its metrics.jsonl."""
    return os.path.getmtime(os.path.join(work_dir, "metrics.jsonl")) - os.path.getmtime(
        os.path.join(work_dir, "config.yaml")
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--work-dir", default="outputs/tool_warmstart")
    p.add_argument("--steps", type=int, default=2500)
    p.add_argument("--every", type=int, default=100)
    p.add_argument("--first", type=int, default=1500, help="first step scored (the answer is not copied before)")
    p.add_argument("--min-copy", type=float, default=0.45, help="least answer-turn accuracy shipped")
    p.add_argument("--skip-train", action="store_true", help="score the checkpoints already in --work-dir")
    p.add_argument("--out", default=ASSET)
    args = p.parse_args()
    args.work_dir = os.path.abspath(args.work_dir)
    torch.set_num_threads(1)  # the tests score the shipped checkpoint with one thread: same numbers

    if not args.skip_train:
        run_sft(load_config("sft_trainer", sft_overrides(args)))

    scores: dict[int, dict] = {}
    for step in range(args.first, args.steps + 1, args.every):
        scores[step] = score_with_tool(os.path.join(args.work_dir, f"global_step_{step}"), HELD_OUT)
        print(f"step {step}: {scores[step]}", flush=True)
    fit = [s for s, r in scores.items() if r["final_acc"] >= args.min_copy and 0.3 <= r["p_call"] <= 0.7]
    if not fit:
        sys.exit(f"no checkpoint copies the answer (>= {args.min_copy}) and calls in 30%-70% of samples: {scores}")
    step = max(fit)
    src = os.path.join(args.work_dir, f"global_step_{step}")
    no_tool = score_without_tool(src, HELD_OUT_NO_TOOL)
    shutil.rmtree(args.out, ignore_errors=True)
    shutil.copytree(src, args.out)
    card = {
        "base": f"{BASE} (hidden 128, 4 layers, seed 0; 263-token tool tokenizer)",
        "training": "python -m verl.trainer.main_sft " + " ".join(sft_overrides(args, shown=True)) + f", step {step}",
        "sft_job_minutes": round(sft_wall_seconds(args.work_dir) / 60, 1),
        "held_out": HELD_OUT,
        "held_out_success_with_tool": round(scores[step]["acc"], 4),
        "held_out_call_accuracy": round(scores[step]["turn_acc"], 4),
        "held_out_answer_accuracy_given_tool_response": round(scores[step]["final_acc"], 4),
        "held_out_first_turn_call_probability": round(scores[step]["p_call"], 4),
        "held_out_no_tool": HELD_OUT_NO_TOOL,
        "held_out_success_without_tool": round(no_tool["acc"], 4),
        "measured_by": "greedy replay (verl.data.multiturn_eval.evaluate_replay_success, batch 64, one thread): the "
        "call turn must be exactly the demonstration's, the answer turn (given the calculator's true result) is "
        "scored; the call probability is first_turn_token_probability(<tool_call>), averaged. Without tool: "
        f"single-turn greedy, no tools in the prompt, {FINAL_TURN_TOKENS} new tokens",
        "regenerate": "python scripts/make_tool_warmstart.py",
    }
    with open(os.path.join(args.out, "warmstart.json"), "w") as f:
        json.dump(card, f, indent=2)
    print(f"shipped global_step_{step} to {args.out}: {json.dumps(card, indent=1)}")


if __name__ == "__main__":
    main()
