"""Code-reward throughput: scoring programs against test cases in the sandbox, 1 worker against 2, side by side.

    python benchmarks/code_reward_throughput.py                         # 256 programs x 5 cases, 10% loop forever
    python benchmarks/code_reward_throughput.py --samples 32 --workers 1,2,4

Each program is scored by the code data sources' reward (``verl.utils.reward_score.prime_code.score_code_sample``)
in a pool of threads, as ``reward_model.num_workers`` runs it in the reward manager. The programs: 90% solve
a+b (half right, half off by one), 10% loop forever on their first case. A looping program costs its
``--sample-timeout`` and no more, so the whole batch should take about

    (loopers x sample_timeout + others x the time of one program) / workers

which the script reports beside the measured time ("budget" and "ratio"), with samples/s per worker count, the
median time per program, and whether every score was what it should be. Markdown to stdout; ``--json`` writes the
numbers.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor

CASES = json.dumps({"inputs": [f"{a} {b}\n" for a, b in [(1, 2), (3, 4), (10, -2), (0, 0), (7, 8)]],
                    "outputs": ["3", "7", "8", "0", "15"]})  # fmt: skip
RIGHT = "a, b = map(int, input().split())\nprint(a + b)"
OFF_BY_ONE = "a, b = map(int, input().split())\nprint(a + b + 1)"
LOOP = "while True:\n    pass"


def programs(n: int) -> list[tuple[str, float]]:
    """(program, the score it must get): every tenth loops, the rest alternate right / wrong."""
    out = []
    for i in range(n):
        if i % 10 == 9:
            out.append((LOOP, 0.0))
        else:
            out.append((RIGHT, 1.0) if i % 2 == 0 else (OFF_BY_ONE, 0.0))
    return out


def score_batch(batch: list[tuple[str, float]], workers: int, case_timeout: float, sample_timeout: float) -> dict:
    from verl.utils.reward_score import default_compute_score

    def one(item: tuple[str, float]) -> tuple[float, float, float]:
        start = time.perf_counter()
        result = default_compute_score(
            "apps", item[0], CASES, case_timeout_s=case_timeout, sample_timeout_s=sample_timeout
        )
        return result["score"], item[1], time.perf_counter() - start

    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        results = list(pool.map(one, batch))
    wall = time.perf_counter() - start
    loopers = sum(p == LOOP for p, _ in batch)
    ok_times = [t for (p, _), (_, _, t) in zip(batch, results) if p != LOOP]
    budget = (loopers * sample_timeout + sum(ok_times)) / workers
    return {
        "workers": workers,
        "samples": len(batch),
        "wall_s": wall,
        "samples_per_s": len(batch) / wall,
        "median_program_s": statistics.median(ok_times) if ok_times else 0.0,
        "loop_program_s": statistics.median([t for (p, _), (_, _, t) in zip(batch, results) if p == LOOP] or [0]),
        "budget_s": budget,
        "ratio_to_budget": wall / budget if budget else 0.0,
        "scores_right": all(abs(got - want) < 1e-9 for got, want, _ in results),
    }


def main(argv: list[str] | None = None) -> list[dict]:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--samples", type=int, default=256)
    p.add_argument("--workers", default="1,2")
    p.add_argument("--case-timeout", type=float, default=1.0)
    p.add_argument("--sample-timeout", type=float, default=2.0)
    p.add_argument("--json", help="write the numbers here")
    args = p.parse_args(argv)
    batch = programs(args.samples)
    rows = [score_batch(batch, int(w), args.case_timeout, args.sample_timeout) for w in args.workers.split(",")]
    print(f"`python benchmarks/code_reward_throughput.py {' '.join(argv if argv is not None else sys.argv[1:])}`")
    print()
    print("| workers | programs | wall s | programs/s | median s per program (not looping) | looping program s | "
          "budget s | wall / budget | scores right |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['workers']} | {r['samples']} | {r['wall_s']:.1f} | {r['samples_per_s']:.1f} | "
              f"{r['median_program_s']:.3f} | {r['loop_program_s']:.2f} | {r['budget_s']:.1f} | "
              f"{r['ratio_to_budget']:.2f} | {r['scores_right']} |")  # fmt: skip
    if len(rows) > 1:
        print(f"\nspeed-up {rows[0]['workers']} -> {rows[-1]['workers']} workers: "
              f"{rows[0]['wall_s'] / rows[-1]['wall_s']:.2f}x")  # fmt: skip
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return rows


if __name__ == "__main__":
    main()
