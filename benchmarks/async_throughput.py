"""Asynchronous training against the synchronous trainer on the quick start, side by side in one run, 3 seeds each.

    python benchmarks/async_throughput.py                       # the quick start's 200 steps, 3 seeds, 3 modes
    python benchmarks/async_throughput.py --modes colocate_async_decoupled,one_step_off
    python benchmarks/async_throughput.py --steps 20 --seeds 1  # a smoke run

Modes (each a fresh ``python -m verl.trainer.main_ppo`` subprocess on the built-in task and recipe):

- ``sync``: the synchronous trainer with 2 torch threads (the whole machine);
- ``colocate_async``: ``trainer.v1.trainer_mode=colocate_async`` one step off, 1 thread: the trainer's Python thread
  and the ahead rollout's thread each get a core;
- ``colocate_async_decoupled`` (not run by default): the same with decoupled PPO's correction, each token weighted by
  the current policy's probability (the old-log-prob pass) over the sampler's, capped at 2 (``rollout_is=token``);
- ``separate_async``: ``trainer.v1.trainer_mode=separate_async`` one step off on the Ray backend: one trainer process
  and one standalone rollout replica, one core and one thread each;
- ``one_step_off`` (not run by default): verl's one-step-off entry point (colocate_async + bypass mode), 1 thread.

Seeds run interleaved (seed 1 of every mode, then seed 2, ...) so a slow spell of the machine hits every mode alike.
Reported per mode: the median step time, steps per hour, the trainer's idle fraction (time waiting for generation
over step time), the rollout's idle fraction, the staleness histogram of the trained batches, and each seed's
held-out accuracy (the mean of the last 3 evaluations, as the run's final line) with the mean and spread; then
held-out accuracy against wall time. ``--json`` writes everything.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODES = {
    "sync": ("verl.trainer.main_ppo", ["trainer.num_threads=2"]),
    "colocate_async": (
        "verl.trainer.main_ppo",
        [
            "trainer.num_threads=1",
            "trainer.v1.trainer_mode=colocate_async",
            "trainer.v1.colocate_async.num_warmup_batches=1",
        ],
    ),
    "colocate_async_decoupled": (
        "verl.trainer.main_ppo",
        [
            "trainer.num_threads=1",
            "trainer.v1.trainer_mode=colocate_async",
            "trainer.v1.colocate_async.num_warmup_batches=1",
            "actor_rollout_ref.rollout.calculate_log_probs=true",
            "algorithm.rollout_correction.rollout_is=token",
            "algorithm.rollout_correction.rollout_is_threshold=2.0",
        ],
    ),
    "separate_async": (
        "verl.trainer.main_ppo",
        ["trainer.backend=ray", "trainer.n_gpus_per_node=1", "trainer.v1.trainer_mode=separate_async"],
    ),
    "one_step_off": ("verl.experimental.one_step_off_policy.main_ppo", ["trainer.num_threads=1"]),
}
DEFAULT_MODES = "sync,colocate_async,separate_async"


def run_mode(module: str, overrides: list[str], out_dir: str, seed: int, steps: int) -> dict:
    cmd = [sys.executable, "-m", module, f"trainer.seed={seed}", f"trainer.total_training_steps={steps}"]
    cmd += ["trainer.save_freq=-1", f"trainer.default_local_dir={out_dir}", "trainer.logger=[file]", *overrides]
    env = {**os.environ, "PYTHONPATH": ROOT, "TQDM_DISABLE": "1"}
    env.pop("OMP_NUM_THREADS", None)
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stderr[-3000:]}")
    with open(os.path.join(out_dir, "metrics.jsonl")) as f:
        records = [json.loads(line) for line in f]
    return summarize(records, wall)


def summarize(records: list[dict], wall: float) -> dict:
    steps = [r for r in records if "timing_s/step" in r]
    t0 = records[0]["time"]
    step_s = [r["timing_s/step"] for r in steps]
    total = sum(step_s)
    gen = sum(r.get("timing_s/gen", 0.0) for r in steps)
    if any("async/rollout_idle_s" in r for r in steps):
        rollout_idle = sum(r.get("async/rollout_idle_s", 0.0) for r in steps) / total
    else:  # sync: the rollout works only while the trainer waits for it
        rollout_idle = 1 - gen / total
    staleness = Counter(r.get("training/off_policy/trajectory_staleness/max", 0) for r in steps)
    evals = [(r["time"] - t0, r["step"], r["val-core/acc"]) for r in records if "val-core/acc" in r]
    final = statistics.mean(acc for _, _, acc in evals[1:][-3:]) if len(evals) > 1 else evals[0][2]
    return {
        "wall_s": wall,
        "median_step_s": statistics.median(step_s),
        "steps_per_hour": 3600 * len(steps) / total,
        "trainer_idle_fraction": gen / total,
        "rollout_idle_fraction": rollout_idle,
        "staleness_histogram": {int(k): v for k, v in sorted(staleness.items())},
        "final_acc": final,
        "evals": evals,
    }


def report(results: dict[str, list[dict]]) -> str:
    lines = [
        "| mode | median step (s) | steps/hour | trainer idle | rollout idle | staleness (steps at 0/1) | "
        "final held-out acc per seed | mean +- spread |",
        "|---|---|---|---|---|---|---|---|",
    ]
    base = statistics.median(r["median_step_s"] for r in results["sync"]) if "sync" in results else None
    for mode, runs in results.items():
        med = statistics.median(r["median_step_s"] for r in runs)
        accs = [r["final_acc"] for r in runs]
        spread = (max(accs) - min(accs)) / 2
        hist = Counter()
        for r in runs:
            hist.update(r["staleness_histogram"])
        ratio = f" ({base / med:.2f}x sync)" if base else ""
        lines.append(
            f"| {mode} | {med:.3f}{ratio} | {statistics.median(r['steps_per_hour'] for r in runs):.0f} | "
            f"{statistics.median(r['trainer_idle_fraction'] for r in runs):.0%} | "
            f"{statistics.median(r['rollout_idle_fraction'] for r in runs):.0%} | "
            f"{dict(sorted(hist.items()))} | {', '.join(f'{a:.1%}' for a in accs)} | "
            f"{statistics.mean(accs):.1%} +- {spread:.1%} |"
        )
    lines.append("")
    lines.append("held-out accuracy against wall time (seed 1; seconds since the run's first record):")
    for mode, runs in results.items():
        curve = ", ".join(f"{t:.0f}s/{step}: {acc:.1%}" for t, step, acc in runs[0]["evals"])
        lines.append(f"- {mode}: {curve}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--modes", default=DEFAULT_MODES, help="comma-separated, of: " + ", ".join(MODES))
    p.add_argument("--json", help="write the results here")
    p.add_argument("overrides", nargs="*", help="extra key=value overrides for every run")
    args = p.parse_args(argv)
    modes = args.modes.split(",")
    results: dict[str, list[dict]] = {m: [] for m in modes}
    with tempfile.TemporaryDirectory() as tmp:
        for seed in range(1, args.seeds + 1):
            for mode in modes:
                module, overrides = MODES[mode]
                out = os.path.join(tmp, f"{mode}-{seed}")
                results[mode].append(run_mode(module, [*overrides, *args.overrides], out, seed, args.steps))
                r = results[mode][-1]
                print(f"{mode} seed {seed}: {r['median_step_s']:.3f} s/step, final {r['final_acc']:.1%}", flush=True)
    print(report(results))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return results


if __name__ == "__main__":
    main()
