"""The Ray backend's overhead per step (docs/scaling.md) on the tiny model at the default batch size.

    python benchmarks/ray_overhead.py                 # local vs ray (2 workers), A B A B, 6 steps each
    python benchmarks/ray_overhead.py --steps 10 --repeats 3

Each run is the default ``python -m verl.trainer.main_ppo`` (64 prompts x 8 responses per step) with validation and
checkpoints off. From the ``timing_s/*`` breakdown of the Ray runs it reports, per step (medians over steps 2..N
of all repeats, step 1 warms up):

- ``ray_overhead``: driver wall time inside worker-group calls minus the slowest rank's compute (Ray scheduling,
  pickling and moving the DataProto slices);
- ``reshard``: gathering the FSDP2-sharded actor weights into the rollout before each generation;
- their sum as a fraction of the step time (target: < 20%), and the step time of ray vs local.

The two backends alternate (A B A B) so machine load drifts hit both alike; compare only within one run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys


def run(backend: str, steps: int, out: str) -> list[dict]:
    shutil.rmtree(out, ignore_errors=True)
    extra = ["trainer.backend=ray", "trainer.n_gpus_per_node=2"] if backend == "ray" else []
    subprocess.run(
        [
            sys.executable,
            "-m",
            "verl.trainer.main_ppo",
            f"trainer.total_training_steps={steps}",
            "trainer.test_freq=-1",
            "trainer.val_before_train=false",
            "trainer.save_freq=-1",
            "trainer.logger=[file]",
            f"trainer.default_local_dir={out}",
            *extra,
        ],
        check=True,
        stdout=subprocess.DEVNULL,
        env={**os.environ, "TQDM_DISABLE": "1"},
    )
    rows = [json.loads(line) for line in open(os.path.join(out, "metrics.jsonl"))]
    return [r for r in rows if r.get("step", 0) >= 2 and "timing_s/step" in r]


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--out", default="outputs/bench-ray-overhead")
    args = p.parse_args()
    rows: dict[str, list[dict]] = {"local": [], "ray": []}
    for i in range(args.repeats):
        for backend in ("local", "ray"):
            rows[backend] += run(backend, args.steps, os.path.join(args.out, f"{backend}-{i}"))
            print(f"repeat {i + 1}/{args.repeats} {backend}: done", flush=True)

    def med(backend: str, key: str) -> float:
        return statistics.median(r.get(key, 0.0) for r in rows[backend])

    step_local, step_ray = med("local", "timing_s/step"), med("ray", "timing_s/step")
    overhead, reshard = med("ray", "timing_s/ray_overhead"), med("ray", "timing_s/reshard")
    fraction = statistics.median(
        (r["timing_s/ray_overhead"] + r.get("timing_s/reshard", 0.0)) / r["timing_s/step"] for r in rows["ray"]
    )
    print(f"steps measured: {len(rows['local'])} local, {len(rows['ray'])} ray (medians; step 1 excluded)")
    print("| backend | step (s) | gen (s) | old_log_prob (s) | update_actor (s) | ray_overhead (s) | reshard (s) |")
    print("|---|---|---|---|---|---|---|")
    for b in ("local", "ray"):
        cols = ["timing_s/step", "timing_s/gen", "timing_s/old_log_prob", "timing_s/update_actor"]
        vals = [med(b, k) for k in cols] + ([overhead, reshard] if b == "ray" else [0.0, 0.0])
        print(f"| {b} | " + " | ".join(f"{v:.3f}" for v in vals) + " |")
    print(
        f"ray overhead + reshard = {fraction:.1%} of the step (target < 20%); "
        f"step time ray/local = {step_ray / step_local:.2f}x"
    )


if __name__ == "__main__":
    main()
