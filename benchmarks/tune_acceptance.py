"""Tuner acceptance check (docs/tune.md#acceptance-measurement): a 6-trial study on the built-in task with a small
budget, against the default config on the same budget. Prints both held-out accuracies and the study's wall time
(target: <= 600 s on 2 CPU cores).

    python benchmarks/tune_acceptance.py                       # 6 trials x 10 steps, default space, TPE + median
    python benchmarks/tune_acceptance.py --steps 15 --recheck  # also re-run best and default with another seed

The default config's run uses exactly the budget overrides the trials get (same steps, validation set, seed);
the study tunes the default search space (docs/tune.md). The best trial's value is selected on the validation
set, so it is an optimistic number; --recheck re-runs the best config and the default with trainer.seed=2 for
an unselected comparison. Run it on a quiet machine: the trials are CPU-bound.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time


def run_main_ppo(argv: list[str], out_dir: str) -> tuple[float, float]:
    t = time.time()
    subprocess.run(
        [
            sys.executable,
            "-m",
            "verl.trainer.main_ppo",
            *argv,
            f"trainer.default_local_dir={out_dir}",
            "trainer.resume_mode=disable",
            "trainer.logger=[file]",
            "trainer.save_freq=-1",
        ],
        check=True,
        stdout=subprocess.DEVNULL,
        env={**os.environ, "TQDM_DISABLE": "1"},
    )
    acc = [json.loads(x)["val-core/acc"] for x in open(os.path.join(out_dir, "metrics.jsonl")) if "val-core/acc" in x]
    return acc[-1], time.time() - t


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--test-freq", type=int, default=5)
    p.add_argument("--val-size", type=int, default=64)
    p.add_argument("--n-trials", type=int, default=6)
    p.add_argument("--out", default="outputs/tune-acceptance")
    p.add_argument("--recheck", action="store_true")
    p.add_argument("--search-space", default=None, help="a search-space YAML (default: the built-in default space)")
    args = p.parse_args()
    shutil.rmtree(args.out, ignore_errors=True)
    budget = [
        f"trainer.total_training_steps={args.steps}",
        f"trainer.test_freq={args.test_freq}",
        f"data.val_files=builtin://arithmetic/test?test_size={args.val_size}",
    ]
    base_acc, base_s = run_main_ppo(budget, os.path.join(args.out, "default"))
    print(f"default config: held-out acc {base_acc:.3f} after {args.steps} steps ({base_s:.0f} s)", flush=True)
    t = time.time()
    subprocess.run(
        [
            sys.executable,
            "-m",
            "verl.trainer.main_tune",
            "--n-trials",
            str(args.n_trials),
            "--seed",
            "0",
            "--output-dir",
            os.path.join(args.out, "study"),
            "--trial-timeout",
            "300",
            *(["--search-space", args.search_space] if args.search_space else []),
            *budget,
        ],
        check=True,
    )
    study_s = time.time() - t
    summary = json.load(open(os.path.join(args.out, "study", "best_params.json")))
    print(
        f"study: {args.n_trials} trials in {study_s:.0f} s (target <= 600 s); best trial {summary['best_trial']} "
        f"held-out acc {summary['best_value']:.3f} vs default {base_acc:.3f} "
        f"({'beats' if summary['best_value'] > base_acc else 'does NOT beat'} the default)"
    )
    print("best params: " + json.dumps(summary["best_params"]))
    if args.recheck:
        best_cfg = ["--config", summary["best_config"], *budget, "trainer.seed=2"]
        b, _ = run_main_ppo(best_cfg, os.path.join(args.out, "recheck-best"))
        d, _ = run_main_ppo([*budget, "trainer.seed=2"], os.path.join(args.out, "recheck-default"))
        print(f"recheck with trainer.seed=2: best config {b:.3f} vs default {d:.3f}")


if __name__ == "__main__":
    main()
