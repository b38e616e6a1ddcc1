"""Measure held-out accuracy against step for several estimators on the default task; write a PNG and a table.

    python benchmarks/rl_curves.py                                   # grpo gae rloo reinforce_plus_plus, ~25 min
    python benchmarks/rl_curves.py --estimators grpo --steps 30      # quicker

Each estimator runs the default main job (`python -m verl.trainer.main_ppo`, shipped warm start, built-in 2-digit
addition) with only `algorithm.adv_estimator` changed, in its own subprocess, one after another. Results go to
docs/results.md (table) and docs/img/rl_curves.png (curves), measured on the machine that runs this.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_one(estimator: str, out_dir: str, extra: list[str]) -> dict:
    args = [
        sys.executable,
        "-m",
        "verl.trainer.main_ppo",
        f"algorithm.adv_estimator={estimator}",
        f"trainer.default_local_dir={out_dir}",
        "trainer.resume_mode=disable",
        "trainer.logger=[file]",
        *extra,
    ]
    start = time.time()
    proc = subprocess.run(args, cwd=ROOT, capture_output=True, text=True)
    wall = time.time() - start
    if proc.returncode != 0:
        raise RuntimeError(f"{estimator} failed:\n{proc.stderr[-3000:]}")
    curve, step_times = [], []
    with open(os.path.join(out_dir, "metrics.jsonl")) as f:
        for line in f:
            m = json.loads(line)
            if "val-core/acc" in m:
                curve.append((m["step"], m["val-core/acc"]))
            if "timing_s/step" in m:
                step_times.append(m["timing_s/step"])
    step_times.sort()
    return {
        "estimator": estimator,
        "curve": curve,
        "wall_s": wall,
        "median_step_s": step_times[len(step_times) // 2] if step_times else float("nan"),
    }


def write_outputs(results: list[dict], img_path: str, md_path: str, extra: list[str]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    for r in results:
        steps, accs = zip(*r["curve"])
        ax.plot(steps, [100 * a for a in accs], marker="o", label=r["estimator"])
    ax.set_xlabel("training step")
    ax.set_ylabel("held-out greedy accuracy (%)")
    ax.set_title("main_ppo defaults, tiny Qwen2 warm start, 2-digit addition")
    ax.grid(alpha=0.3)
    ax.legend()
    os.makedirs(os.path.dirname(img_path), exist_ok=True)
    fig.tight_layout()
    fig.savefig(img_path, dpi=120)

    steps = sorted({s for r in results for s, _ in r["curve"]})
    lines = [
        "# Measured results",
        "",
        f"Measured by `python benchmarks/rl_curves.py{' ' + ' '.join(extra) if extra else ''}` on "
        f"{platform.machine()} with {os.cpu_count()} CPU cores, {time.strftime('%Y-%m-%d')}. Each run is the default "
        "`python -m verl.trainer.main_ppo` with only `algorithm.adv_estimator` changed (same seed, same data, "
        "shipped warm start). Held-out greedy accuracy on the 200 test problems, in %:",
        "",
        "| step | " + " | ".join(r["estimator"] for r in results) + " |",
        "|---|" + "---|" * len(results),
    ]
    for s in steps:
        row = []
        for r in results:
            acc = dict(r["curve"]).get(s)
            row.append("" if acc is None else f"{100 * acc:.1f}")
        lines.append(f"| {s} | " + " | ".join(row) + " |")
    lines += [
        "",
        "| estimator | start | end | gain (points) | wall time (s) | median step (s) |",
        "|---|---|---|---|---|---|",
    ]
    for r in results:
        a0, a1 = r["curve"][0][1], r["curve"][-1][1]
        lines.append(
            f"| {r['estimator']} | {100 * a0:.1f} | {100 * a1:.1f} | {100 * (a1 - a0):+.1f} | "
            f"{r['wall_s']:.0f} | {r['median_step_s']:.2f} |"
        )
    lines += ["", "![accuracy against step](img/rl_curves.png)", ""]
    with open(md_path, "w") as f:
        f.write("\n".join(lines))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--estimators", nargs="+", default=["grpo", "gae", "rloo", "reinforce_plus_plus"])
    p.add_argument("--work-dir", default=os.path.join(ROOT, "outputs", "rl_curves"))
    p.add_argument("--img", default=os.path.join(ROOT, "docs", "img", "rl_curves.png"))
    p.add_argument("--md", default=os.path.join(ROOT, "docs", "results.md"))
    p.add_argument("overrides", nargs="*", help="extra key=value overrides for every run")
    args = p.parse_args()
    results = []
    for est in args.estimators:
        r = run_one(est, os.path.join(args.work_dir, est), args.overrides)
        print(f"{est}: {r['curve'][0][1]:.1%} -> {r['curve'][-1][1]:.1%} in {r['wall_s']:.0f}s", flush=True)
        results.append(r)
    write_outputs(results, args.img, args.md, args.overrides)
    print(f"wrote {args.md} and {args.img}")


if __name__ == "__main__":
    main()
