"""The code-RL learning check (docs/code_rl.md): GRPO with sandbox-judged rewards on the built-in code task, per seed,
against a wall-clock budget, and the evaluation script's number for the final checkpoint beside the trainer's.

    python benchmarks/code_task_curves.py                       # 3 seeds, 15-minute budget each, ~50 min
    python benchmarks/code_task_curves.py --seeds 1 --steps 20  # quicker look
    python benchmarks/code_task_curves.py --report-only --work-dir DIR --write-results   # a finished run's report

Each seed is one main job (``python -m verl.trainer.main_ppo``, this script's interpreter) from the shipped warm
start (``builtin://tiny-qwen2-code-sft``) on ``builtin://code_functions``: every response is a Python program, run
against the problem's five hidden test cases in the local sandbox (bubblewrap), its reward the share passed; the
``rollout.n`` programs of a prompt are judged in one sandbox run, in ``reward_model.num_workers`` threads. Held-out
pass@1 is the trainer's validation (greedy, 100 problems never trained on) every ``--test-freq`` steps; a metrics
line's time is the seconds since launch (imports and model build included), so "within the budget" means: the last
validation whose line arrived by then. After the run, ``examples/evaluation/code_generation_eval.py`` scores the
final checkpoint on the same problems, which must give the trainer's last number. Writes
``<work-dir>/summary.json`` and, with ``--write-results``, the section "## Code task: GRPO with sandbox rewards" of
docs/results.md.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from tool_task_curves import curve_arguments, publish, seed_runs, train_seed  # noqa: E402

SECTION = "## Code task: GRPO with sandbox rewards"
WARM_START = "builtin://tiny-qwen2-code-sft"
HELD_OUT = "builtin://code_functions/test?size=100"
MAX_PROMPT_LENGTH, MAX_RESPONSE_LENGTH = 160, 96
RECIPE = [
    f"actor_rollout_ref.model.path={WARM_START}",
    "data.train_files=builtin://code_functions/train",
    f"data.val_files={HELD_OUT}",
    f"data.max_prompt_length={MAX_PROMPT_LENGTH}",
    f"data.max_response_length={MAX_RESPONSE_LENGTH}",
    "reward_model.num_workers=2",
]


def eval_script_pass_at_1(checkpoint: str, out: str, held_out: str = HELD_OUT) -> dict:
    """``examples/evaluation/code_generation_eval.py`` on ``checkpoint``, greedy, with the trainer's lengths."""
    path = os.path.join(ROOT, "examples", "evaluation", "code_generation_eval.py")
    spec = importlib.util.spec_from_file_location("code_generation_eval", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    argv = ["--model_path", checkpoint, "--test_set", held_out, "--output", out]
    argv += ["--max_new_tokens", str(MAX_RESPONSE_LENGTH), "--max_prompt_length", str(MAX_PROMPT_LENGTH)]
    result = module.main(argv)
    return {k: result[k] for k in ("syntax_rate", "execution_success_rate", "case_pass_rate", "pass@1")}


def run_seed(seed: int, args: argparse.Namespace) -> dict:
    out_dir, rows, summary = train_seed(seed, args, RECIPE + [f"data.val_files={args.held_out}"])
    steps = [r for r in rows if "critic/score/mean" in r]
    checkpoint = os.path.join(out_dir, f"global_step_{args.steps}", "actor", "huggingface")
    return {
        **summary,
        "train_score": [(r["step"], r["critic/score/mean"]) for r in steps],
        "reward_s": statistics.median(r["timing_s/reward"] for r in steps),
        "step_s": statistics.median(r["timing_s/step"] for r in steps),
        "eval_script_end": eval_script_pass_at_1(checkpoint, out_dir + "-eval.json", args.held_out),
    }


def warm_start_card() -> dict:
    from verl.utils.model import resolve_model_path

    with open(os.path.join(resolve_model_path(WARM_START), "warmstart.json")) as f:
        return json.load(f)


def report(runs: list[dict], args: argparse.Namespace) -> str:
    card = warm_start_card()["held_out_greedy"]
    gains = [r["gain_in_budget"] * 100 for r in runs]
    spread = f"{statistics.mean(gains):+.1f} ± {statistics.stdev(gains):.1f}" if len(gains) > 1 else f"{gains[0]:+.1f}"
    lines = [
        SECTION,
        "",
        f"`python benchmarks/code_task_curves.py {' '.join(runs[0].get('argv', sys.argv[1:]))}` "
        f"({time.strftime('%Y-%m-%d')}, {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"{args.threads or 'default'} threads per job). GRPO (64 prompts x 8 programs per step) from the shipped warm "
        f"start `{WARM_START}` on `builtin://code_functions`, each program run against its problem's 5 hidden test "
        f"cases in the sandbox (reward: the share passed). Held-out pass@1: greedy, on the problems of "
        f"`{args.held_out}`; budget {args.budget_s / 60:.0f} minutes from launch. The warm start writes a program that "
        f"parses for {card['syntax_rate']:.0%} of the held-out problems and a right one for {card['pass@1']:.0%} "
        "(`warmstart.json`).",
        "",
        "| seed | pass@1, step 0 | last eval within budget (step, minutes) | gain | last step | eval script on the final checkpoint: pass@1, syntax | median s per step (of which scoring) | wall min |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in runs:
        s, acc, t = r["in_budget"]
        ev = r["eval_script_end"]
        lines.append(
            f"| {r['seed']} | {r['start']:.0%} | {acc:.0%} (step {s}, {t / 60:.1f}) | {r['gain_in_budget'] * 100:+.0f} | "
            f"{r['end'][1]:.0%} (step {r['end'][0]}) | {ev['pass@1']:.0%}, {ev['syntax_rate']:.0%} | "
            f"{r['step_s']:.1f} ({r['reward_s']:.1f}) | {r['wall_s'] / 60:.1f} |"
        )
    same = all(abs(r["eval_script_end"]["pass@1"] - r["end"][1]) < 1e-9 for r in runs)
    lines += ["", f"Gain within the budget, mean ± standard deviation over seeds: **{spread} points**. "]
    lines[-1] += (
        "The evaluation script's pass@1 on each final checkpoint equals the trainer's last held-out number."
        if same
        else "The evaluation script's pass@1 on a final checkpoint differs from the trainer's last number: see the table."
    )
    lines += ["", "Per-seed held-out pass@1 at each validation (step: pass@1, minutes since launch):", ""]
    for r in runs:
        lines.append(f"- seed {r['seed']}: " + ", ".join(f"{s}: {a:.0%} ({t / 60:.1f})" for s, a, t in r["evals"]))
    extra = " ".join(args.overrides)
    lines += ["", f"Recipe: `{' '.join(RECIPE)}`" + (f" plus `{extra}`" if extra else "") + ".", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> list[dict]:
    p = curve_arguments(__doc__, 120, "outputs/code_task_curves")
    p.add_argument("--held-out", default=HELD_OUT, help="the validation set (the trainer's and the eval script's)")
    args = p.parse_args(argv)
    runs = seed_runs(args, run_seed, argv)
    publish(report(runs, args), args)
    return runs


if __name__ == "__main__":
    main()
