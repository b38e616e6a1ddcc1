"""The agent-loop learning check (docs/agent_loop.md): GRPO with ``tool_agent`` on the built-in tool task, per seed,
against a wall-clock budget, with the success without the tool beside it.

    python benchmarks/tool_task_curves.py                      # 3 seeds, 15-minute budget each, ~50 min
    python benchmarks/tool_task_curves.py --seeds 1 --steps 20 # quicker look
    python benchmarks/tool_task_curves.py --report-only --work-dir DIR --write-results   # a finished run's report

Each seed is one main job (``python -m verl.trainer.main_ppo``, this script's interpreter) from the shipped
tool-calling warm start (``builtin://tiny-qwen2-calc-sft``) on ``builtin://calc_multiply``, validated with greedy
decoding through the agent loop on the 200 held-out problems every ``--test-freq`` steps. While it runs, every line
its file logger writes is stamped with the seconds since the job was launched (imports and model build included),
so "within the budget" means: the last validation whose line arrived by then. After the run, the final checkpoint
and the warm start are evaluated without the tool (the same problems as single-turn rows, no tools in the prompt;
``trainer.val_only``). Writes ``<work-dir>/summary.json`` and, with ``--write-results``, the section
"## Tool task: GRPO with the calculator" of docs/results.md.

The training recipe is in ``RECIPE`` below (the keys are the main job's; docs/agent_loop.md explains them).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SECTION = "## Tool task: GRPO with the calculator"
WARM_START = "builtin://tiny-qwen2-calc-sft"
HELD_OUT = "builtin://calc_multiply/test?size=200"
HELD_OUT_NO_TOOL = "builtin://calc_multiply/test?size=200&agent_name=single_turn_agent"
# 20,000 training problems: the warm start's SFT saw the first 4,000 (the default split); the held-out 200 stay
# disjoint from every train_size (the split is by problem)
TRAIN = "builtin://calc_multiply/train?train_size=20000"
RECIPE = [
    f"actor_rollout_ref.model.path={WARM_START}",
    "actor_rollout_ref.rollout.mode=async",
    "actor_rollout_ref.rollout.multi_turn.enable=true",
    "actor_rollout_ref.rollout.multi_turn.tool_config_path=examples/agent_loop/tool_configs/calculator.yaml",
    "actor_rollout_ref.rollout.agent.default_agent_loop=tool_agent",
    f"data.train_files={TRAIN}",
    f"data.val_files={HELD_OUT}",
    "data.max_prompt_length=96",
    "data.max_response_length=128",
]


def run_stamped(args: list[str], metrics_path: str, log_path: str, threads: int) -> tuple[list[dict], float]:
    """Run ``args``; every metrics.jsonl line gets ``elapsed_s`` (seconds since launch) as it arrives."""
    env = {**os.environ, "PYTHONPATH": ROOT}
    if threads > 0:
        env.update(OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    rows: list[dict] = []
    start = time.perf_counter()
    with open(log_path, "w") as log:
        proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=ROOT)
        offset = 0
        while True:
            done = proc.poll() is not None
            if os.path.exists(metrics_path):
                with open(metrics_path) as f:
                    f.seek(offset)
                    chunk = f.read()
                complete = chunk[: chunk.rfind("\n") + 1]
                offset += len(complete)
                now = time.perf_counter() - start
                rows += [{**json.loads(line), "elapsed_s": now} for line in complete.splitlines() if line.strip()]
            if done:
                break
            time.sleep(0.5)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} exited {proc.returncode}; see {log_path}")
    return rows, time.perf_counter() - start


def main_job(
    out_dir: str, overrides: list[str], resume: tuple[str, ...] = ("trainer.resume_mode=disable",)
) -> list[str]:
    """The main job's command line, writing into ``out_dir``; ``resume``: its resume keys (default: start over)."""
    args = [sys.executable, "-m", "verl.trainer.main_ppo", f"trainer.default_local_dir={out_dir}", *resume]
    return args + ["trainer.logger=[file]", *overrides]


def no_tool_success(out_dir: str, checkpoint: str | None, seed: int, threads: int) -> float:
    """Greedy held-out success without the tool, of ``checkpoint`` (None: the warm start)."""
    resume = ("trainer.resume_mode=resume_path", f"trainer.resume_from_path={checkpoint}")
    overrides = [f"actor_rollout_ref.model.path={WARM_START}", f"data.val_files={HELD_OUT_NO_TOOL}"]
    overrides += [
        f"data.train_files={TRAIN}",
        "data.max_prompt_length=96",
        "trainer.val_only=true",
        f"trainer.seed={seed}",
    ]
    args = main_job(out_dir, overrides, resume) if checkpoint else main_job(out_dir, overrides)
    shutil.rmtree(out_dir, ignore_errors=True)
    rows, _ = run_stamped(args, os.path.join(out_dir, "metrics.jsonl"), out_dir + ".log", threads)
    return next(r["val-core/acc"] for r in rows if "val-core/acc" in r)


def train_seed(seed: int, args: argparse.Namespace, recipe: list[str]) -> tuple[str, list[dict], dict]:
    """One seed's main job (``recipe`` + the command line's overrides, ``--steps``, ``--test-freq``, a checkpoint at
    the last step) in ``<work-dir>/seed<N>``: its directory, its stamped metrics rows, and the held-out series with
    the gain counted at the last validation within ``--budget-s`` (this script's and code_task_curves.py's rule)."""
    out_dir = os.path.join(args.work_dir, f"seed{seed}")
    shutil.rmtree(out_dir, ignore_errors=True)
    overrides = recipe + args.overrides
    overrides += [
        f"trainer.seed={seed}",
        f"trainer.total_training_steps={args.steps}",
        f"trainer.test_freq={args.test_freq}",
        f"trainer.save_freq={args.steps}",
    ]
    rows, wall = run_stamped(
        main_job(out_dir, overrides), os.path.join(out_dir, "metrics.jsonl"), out_dir + ".log", args.threads
    )
    evals = [(r["step"], r["val-core/acc"], r["elapsed_s"]) for r in rows if "val-core/acc" in r]
    within = [e for e in evals if e[2] <= args.budget_s]
    summary = {
        "seed": seed,
        "evals": evals,
        "start": evals[0][1],
        "in_budget": within[-1],
        "end": evals[-1],
        "gain_in_budget": within[-1][1] - evals[0][1],
        "wall_s": wall,
    }
    return out_dir, rows, summary


def run_seed(seed: int, args: argparse.Namespace) -> dict:
    out_dir, rows, summary = train_seed(seed, args, RECIPE)
    checkpoint = os.path.join(out_dir, f"global_step_{args.steps}")
    return {
        **summary,
        **train_series(rows),
        "no_tool_start": no_tool_success(out_dir + "-notool-start", None, seed, args.threads),
        "no_tool_end": no_tool_success(out_dir + "-notool-end", checkpoint, seed, args.threads),
    }


def train_series(rows: list[dict]) -> dict:
    """Per training step: the mean reward and the tool calls per sampled trajectory."""
    steps = [r for r in rows if "critic/score/mean" in r]
    return {
        "train_score": [(r["step"], r["critic/score/mean"]) for r in steps],
        "tool_calls": [(r["step"], r["agent_loop/num_tool_calls/mean"]) for r in steps],
    }


def warm_start_card() -> dict:
    from verl.utils.model import resolve_model_path

    with open(os.path.join(resolve_model_path(WARM_START), "warmstart.json")) as f:
        return json.load(f)


def report(runs: list[dict], args: argparse.Namespace) -> str:
    card = warm_start_card()
    gains = [r["gain_in_budget"] * 100 for r in runs]
    spread = f"{statistics.mean(gains):+.1f} ± {statistics.stdev(gains):.1f}" if len(gains) > 1 else f"{gains[0]:+.1f}"
    lines = [
        SECTION,
        "",
        f"`python benchmarks/tool_task_curves.py {' '.join(runs[0].get('argv', sys.argv[1:]))}` "
        f"({time.strftime('%Y-%m-%d')}, "
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, {args.threads or 'default'} threads per job). "
        f"GRPO with `tool_agent` from the shipped warm start `{WARM_START}`; greedy held-out success on the 200 "
        f"problems of `{HELD_OUT}`, with the calculator (through the agent loop) and without it (single turn, "
        f"no tools in the prompt); budget {args.budget_s / 60:.0f} minutes from launch. The warm start calls the "
        f"calculator in {card['held_out_first_turn_call_probability']:.0%} of its sampled first turns and, given its "
        f"answer, copies it in {card['held_out_answer_accuracy_given_tool_response']:.0%} of the held-out problems "
        "(`warmstart.json`, [models.md](models.md#the-shipped-tool-task-warm-start)).",
        "",
        "| seed | with tool, step 0 | with tool, last eval within budget (step, minutes) | gain | with tool, last step | without tool, warm start / end | tool calls per sampled trajectory, step 1 / last | wall min |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in runs:
        s, acc, t = r["in_budget"]
        calls = f"{r['tool_calls'][0][1]:.2f} / {r['tool_calls'][-1][1]:.2f}"
        lines.append(
            f"| {r['seed']} | {r['start']:.1%} | {acc:.1%} (step {s}, {t / 60:.1f}) | {r['gain_in_budget'] * 100:+.1f} | "
            f"{r['end'][1]:.1%} (step {r['end'][0]}) | {r['no_tool_start']:.1%} / {r['no_tool_end']:.1%} | {calls} | "
            f"{r['wall_s'] / 60:.1f} |"
        )
    lines += ["", f"Gain within the budget, mean ± standard deviation over seeds: **{spread} points**.", ""]
    lines.append("Per-seed held-out success with the tool at each validation (step: success, minutes since launch):")
    lines.append("")
    for r in runs:
        lines.append(f"- seed {r['seed']}: " + ", ".join(f"{s}: {a:.1%} ({t / 60:.1f})" for s, a, t in r["evals"]))
    extra = " ".join(args.overrides)
    lines += ["", f"Recipe: `{' '.join(RECIPE)}`" + (f" plus `{extra}`" if extra else "") + ".", ""]
    return "\n".join(lines)


def write_section(text: str, path: str) -> None:
    body = open(path).read() if os.path.exists(path) else ""
    if SECTION in body:
        start = body.index(SECTION)
        nxt = body.find("\n## ", start + len(SECTION))
        body = body[:start] + text + (body[nxt + 1 :] if nxt >= 0 else "")
    else:
        body = body.rstrip("\n") + "\n\n" + text
    with open(path, "w") as f:
        f.write(body)


def curve_arguments(doc: str, steps: int, work_dir: str) -> argparse.ArgumentParser:
    """The command line of a learning-curve benchmark (this one and benchmarks/code_task_curves.py)."""
    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seeds", default="1,2,3")
    p.add_argument("--steps", type=int, default=steps)
    p.add_argument("--test-freq", type=int, default=10)
    p.add_argument("--budget-s", type=float, default=900.0)
    p.add_argument("--threads", type=int, default=2, help="OMP threads per job (0: the library default)")
    p.add_argument("--work-dir", default=work_dir)
    p.add_argument("--write-results", action="store_true", help="write the section of docs/results.md")
    p.add_argument("--report-only", action="store_true", help="report the finished run in --work-dir, train nothing")
    p.add_argument("overrides", nargs="*", help="extra key=value overrides for the training job")
    return p


def seed_runs(args: argparse.Namespace, run_seed, argv: list[str] | None) -> list[dict]:
    """Each seed's run (``run_seed(seed, args)``), or with ``--report-only`` the ones in ``<work-dir>/summary.json``;
    the summary is rewritten after every seed, so a long run's finished seeds are never lost."""
    os.makedirs(args.work_dir, exist_ok=True)
    summary = os.path.join(args.work_dir, "summary.json")
    if args.report_only:
        with open(summary) as f:
            return json.load(f)
    runs = []
    for seed in [int(s) for s in args.seeds.split(",")]:
        runs.append({**run_seed(seed, args), "argv": sys.argv[1:] if argv is None else argv})
        print(json.dumps({k: v for k, v in runs[-1].items() if not isinstance(v, list)}), flush=True)
        with open(summary, "w") as f:
            json.dump(runs, f, indent=1)
    return runs


def publish(text: str, args: argparse.Namespace) -> None:
    """The report to stdout and, with ``--write-results``, into its section of docs/results.md."""
    print(text)
    if args.write_results:
        write_section(text, os.path.join(ROOT, "docs", "results.md"))


def main(argv: list[str] | None = None) -> list[dict]:
    args = curve_arguments(__doc__, 60, "outputs/tool_task_curves").parse_args(argv)
    runs = seed_runs(args, run_seed, argv)
    for r in runs:  # a summary written before the tool-call series was recorded: read it from the run's log
        if "tool_calls" not in r:
            with open(os.path.join(args.work_dir, f"seed{r['seed']}", "metrics.jsonl")) as f:
                r.update(train_series([json.loads(line) for line in f if line.strip()]))
    publish(report(runs, args), args)
    return runs


if __name__ == "__main__":
    main()
