"""Regenerate the shipped tool-task warm start ``verl/assets/models/tiny-qwen2-calc-sft``.

    python scripts/make_tool_warmstart.py                 # trains, then scores checkpoints (about 1.5 h on 2 busy cores)
    python scripts/make_tool_warmstart.py --skip-train    # only score the checkpoints already in --work-dir

Multi-turn SFT (``data.multiturn.enable=true``) of a fresh tiny Qwen2 with the tool-calling tokenizer
(``builtin://tiny-qwen2?tools=true``, the shipped arithmetic model's size) on the calculator demonstrations of
``builtin://calc_multiply/train`` plus 500 direct answers without the tool (the same problems'
``agent_name=single_turn_agent`` rows, so that a prompt without tools gets an answer, not a call into the void).
A checkpoint is saved every ``--every`` steps; each is scored on a small screen of held-out problems, those near the
target are scored on the whole held-out set, and the one closest to ``--target`` within 30%-50% is shipped: RL needs
room to improve it.

Success is measured by greedy replay (:mod:`verl.data.multiturn_eval`), a stand-in until the agent loop measures it
end to end: the first turn must be exactly the right calculator call, and the second turn, given the calculator's
true answer, must state the product. Beside it, the single-turn success without the tool (the prompt rendered
without tools, greedy, scored): the tool is what makes the difference.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402

from verl.data.multiturn_eval import evaluate_replay_success  # noqa: E402
from verl.trainer.main_sft import run_sft  # noqa: E402
from verl.utils.config import load_config  # noqa: E402
from verl.utils.dataset.parquet import read_parquet_rows  # noqa: E402
from verl.utils.evaluation import evaluate_greedy_accuracy  # noqa: E402
from verl.utils.model import load_causal_lm, load_tokenizer  # noqa: E402

BASE = "builtin://tiny-qwen2?tools=true"
TRAIN = ["builtin://calc_multiply/train", "builtin://calc_multiply/train?agent_name=single_turn_agent&size=500"]
HELD_OUT = "builtin://calc_multiply/test?size=200"  # problems never seen in training (split by problem)
HELD_OUT_NO_TOOL = "builtin://calc_multiply/test?size=200&agent_name=single_turn_agent"  # the same problems
SCREEN = "builtin://calc_multiply/test?size=50"
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
    """Greedy replay success on ``spec``'s tool rows (call turn exact, final turn scored)."""
    tokenizer, model = load_tokenizer(model_dir), load_causal_lm(model_dir)
    rows = read_parquet_rows(spec)
    result = evaluate_replay_success(model, tokenizer, rows, max_new_tokens=FINAL_TURN_TOKENS, batch_size=EVAL_BATCH)
    return {k: result[k] for k in ("acc", "turn_acc", "final_acc", "num_samples")}


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
    p.add_argument("--steps", type=int, default=1500)
    p.add_argument("--every", type=int, default=50)
    p.add_argument("--first", type=int, default=600, help="first step scored (no call is right before ~700)")
    p.add_argument("--target", type=float, default=0.40)
    p.add_argument("--skip-train", action="store_true", help="score the checkpoints already in --work-dir")
    p.add_argument("--out", default=ASSET)
    args = p.parse_args()
    args.work_dir = os.path.abspath(args.work_dir)
    torch.set_num_threads(1)  # the tests score the shipped checkpoint with one thread: same numbers

    if not args.skip_train:
        run_sft(load_config("sft_trainer", sft_overrides(args)))

    screen: dict[int, float] = {}
    for step in range(args.first, args.steps + 1, args.every):
        ckpt = os.path.join(args.work_dir, f"global_step_{step}")
        screen[step] = score_with_tool(ckpt, SCREEN)["acc"]
        print(f"step {step}: screen success with the tool {screen[step]:.0%}", flush=True)
        if screen[step] > 0.8:  # far past the range: later checkpoints only get better
            break
    full: dict[int, dict] = {}
    for step in [s for s, acc in screen.items() if 0.15 <= acc <= 0.65]:
        full[step] = score_with_tool(os.path.join(args.work_dir, f"global_step_{step}"), HELD_OUT)
        print(f"step {step}: held-out success with the tool {full[step]['acc']:.1%} ({full[step]})", flush=True)
    in_range = {s: r for s, r in full.items() if 0.30 <= r["acc"] <= 0.50}
    if not in_range:
        sys.exit(f"no checkpoint between 30% and 50% held-out success: {full or screen}; try other --steps/--every")
    step = min(in_range, key=lambda s: abs(in_range[s]["acc"] - args.target))
    src = os.path.join(args.work_dir, f"global_step_{step}")
    no_tool = score_without_tool(src, HELD_OUT_NO_TOOL)
    shutil.rmtree(args.out, ignore_errors=True)
    shutil.copytree(src, args.out)
    card = {
        "base": f"{BASE} (hidden 128, 2 layers, seed 0; 263-token tool tokenizer)",
        "training": "python -m verl.trainer.main_sft " + " ".join(sft_overrides(args, shown=True)) + f", step {step}",
        "sft_job_minutes": round(sft_wall_seconds(args.work_dir) / 60, 1),
        "held_out": HELD_OUT,
        "held_out_success_with_tool": round(in_range[step]["acc"], 4),
        "held_out_call_accuracy": round(in_range[step]["turn_acc"], 4),
        "held_out_answer_accuracy_given_tool_response": round(in_range[step]["final_acc"], 4),
        "held_out_no_tool": HELD_OUT_NO_TOOL,
        "held_out_success_without_tool": round(no_tool["acc"], 4),
        "measured_by": "greedy replay (verl.data.multiturn_eval.evaluate_replay_success, batch 64, one thread): the "
        "call turn must be exactly the demonstration's, the answer turn (given the calculator's true result) is "
        "scored; a stand-in for the agent loop's end-to-end success. Without tool: single-turn greedy, no tools "
        f"in the prompt, {FINAL_TURN_TOKENS} new tokens",
        "regenerate": "python scripts/make_tool_warmstart.py",
    }
    with open(os.path.join(args.out, "warmstart.json"), "w") as f:
        json.dump(card, f, indent=2)
    print(f"shipped global_step_{step} to {args.out}: {json.dumps(card, indent=1)}")


if __name__ == "__main__":
    main()
