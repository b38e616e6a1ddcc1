"""Same seed, same bits: the default main job run N times with 2 intra-op threads, every metric compared.

    python benchmarks/reproducibility.py --runs 20 --steps 5        # the full check: 20 runs of 5 steps
    python benchmarks/reproducibility.py --runs 3 --steps 3 --threads 1

Each run is a fresh ``python -m verl.trainer.main_ppo`` subprocess (its own allocations, its own thread pool) with
nothing changed but the step count and the run directory. Every metric but wall-clock ones (``timing_s/``,
``timing_per_token_ms/``, ``perf/throughput``, ``perf/time_per_step``, the ``time`` stamp) is compared with the first run's, bit for bit
(JSON floats round-trip exactly). Prints the number of runs that differ and, for each, the first step and metric.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

from verl.utils.wall_clock import WALL_CLOCK

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_metrics(out_dir: str, steps: int, threads: int, extra: list[str]) -> dict[int, dict[str, float]]:
    cmd = [sys.executable, "-m", "verl.trainer.main_ppo", f"trainer.total_training_steps={steps}"]
    cmd += [f"trainer.default_local_dir={out_dir}", "trainer.save_freq=-1", "trainer.logger=[file]", *extra]
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "PYTHONPATH": ROOT, "TQDM_DISABLE": "1"}
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"run failed:\n{proc.stderr[-3000:]}")
    steps_seen: dict[int, dict[str, float]] = {}
    with open(os.path.join(out_dir, "metrics.jsonl")) as f:
        for row in map(json.loads, f):
            kept = {k: v for k, v in row.items() if k != "step" and not k.startswith(WALL_CLOCK)}
            steps_seen.setdefault(row["step"], {}).update(kept)
    return steps_seen


def first_difference(a: dict, b: dict) -> str | None:
    for step in sorted(set(a) | set(b)):
        for key in sorted(set(a.get(step, {})) | set(b.get(step, {}))):
            if a.get(step, {}).get(key) != b.get(step, {}).get(key):
                return f"step {step} {key}: {a.get(step, {}).get(key)!r} vs {b.get(step, {}).get(key)!r}"
    return None


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("overrides", nargs="*", help="extra key=value overrides for every run")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        reference, differing = None, []
        for i in range(args.runs):
            metrics = run_metrics(os.path.join(tmp, f"run{i}"), args.steps, args.threads, args.overrides)
            if reference is None:
                reference = metrics
                continue
            diff = first_difference(reference, metrics)
            if diff:
                differing.append((i, diff))
            print(f"run {i}: {'differs, ' + diff if diff else 'identical to run 0'}", flush=True)
    count = sum(len(v) for v in reference.values())
    print(
        f"{args.runs} runs of {args.steps} steps, {args.threads} threads, {count} metric values each: "
        f"{len(differing)} differ from run 0"
    )
    return {"runs": args.runs, "differing": differing, "values": count}


if __name__ == "__main__":
    main()
