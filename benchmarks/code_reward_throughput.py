"""Code-reward throughput: scoring programs against test cases in the sandbox, 1 worker against 2, side by side.

    python benchmarks/code_reward_throughput.py                         # 256 programs x 5 cases, 10% loop forever
    python benchmarks/code_reward_throughput.py --samples 32 --workers 1,2,4

Each program is scored by the code data sources' reward (``verl.utils.reward_score.prime_code.score_code_sample``)
in a pool of threads, as ``reward_model.num_workers`` runs it in the reward manager; with ``--group 8`` the programs
go in groups of 8 to ``score_code_samples`` (one sandbox run per group, as the reward manager judges a prompt's
``rollout.n`` samples). ``--host-mb`` makes this process as large as a trainer first (the sandbox's start must not
cost more in a large process). The programs: 90% solve a+b (half right, half off by one), 10%
(``--loop-every``) loop forever on their first case. A looping program costs its ``--sample-timeout`` and no more,
so one program per run should take about

    ideal = (loopers x sample_timeout + the others' own times) / workers

and every batch must stay within the bound: every program's sample timeout divided across the pool
(``bound = programs x sample_timeout / workers``). The script reports both ratios, samples/s, the median time per
program (for groups: the group's time over its programs), and whether every score was what it should be. Markdown
to stdout; ``--json`` writes the numbers.
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


def programs(n: int, loop_every: int = 10) -> list[tuple[str, float]]:
    """(program, the score it must get): every ``loop_every``-th loops (0: none), the rest alternate right / wrong."""
    out = []
    for i in range(n):
        if loop_every and i % loop_every == loop_every - 1:
            out.append((LOOP, 0.0))
        else:
            out.append((RIGHT, 1.0) if i % 2 == 0 else (OFF_BY_ONE, 0.0))
    return out


def score_batch(
    batch: list[tuple[str, float]], workers: int, case_timeout: float, sample_timeout: float, group: int = 1
) -> dict:
    from verl.utils.reward_score import default_compute_score, default_compute_score_group

    def chunk(items: list[tuple[str, float]]) -> list[tuple[float, float, float]]:
        start = time.perf_counter()
        kwargs = {"case_timeout_s": case_timeout, "sample_timeout_s": sample_timeout}
        if group == 1:
            scored = [default_compute_score("apps", items[0][0], CASES, **kwargs)]
        else:
            scored = default_compute_score_group("apps", [p for p, _ in items], CASES, **kwargs)
        each = (time.perf_counter() - start) / len(items)  # a group's time, shared by its programs
        return [(r["score"], want, each) for r, (_, want) in zip(scored, items)]

    chunks = [batch[i : i + group] for i in range(0, len(batch), group)]
    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        results = [r for part in pool.map(chunk, chunks) for r in part]
    wall = time.perf_counter() - start
    loopers = sum(p == LOOP for p, _ in batch)
    ok_times = [t for (p, _), (_, _, t) in zip(batch, results) if p != LOOP]
    # the bound: every program may take its sample timeout, divided across the pool; and for one program
    # per run, what the batch should take when a looper costs its timeout and no more (a group's programs share
    # their run's time, so for groups only the bound applies)
    bound = len(batch) * sample_timeout / workers
    ideal = (loopers * sample_timeout + sum(ok_times)) / workers if group == 1 else None
    return {
        "workers": workers,
        "group": group,
        "samples": len(batch),
        "wall_s": wall,
        "samples_per_s": len(batch) / wall,
        "median_program_s": statistics.median(ok_times) if ok_times else 0.0,
        "loop_program_s": statistics.median([t for (p, _), (_, _, t) in zip(batch, results) if p == LOOP] or [0]),
        "bound_s": bound,
        "ratio_to_bound": wall / bound,
        "ideal_s": ideal,
        "ratio_to_ideal": wall / ideal if ideal else None,
        "scores_right": all(abs(got - want) < 1e-9 for got, want, _ in results),
    }


def main(argv: list[str] | None = None) -> list[dict]:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--samples", type=int, default=256)
    p.add_argument("--workers", default="1,2")
    p.add_argument("--case-timeout", type=float, default=1.0)
    p.add_argument("--sample-timeout", type=float, default=2.0)
    p.add_argument("--group", default="1", help="programs per sandbox run, comma-separated (e.g. 1,8)")
    p.add_argument("--loop-every", type=int, default=10, help="every N-th program loops forever (0: none)")
    p.add_argument("--host-mb", type=int, default=0, help="allocate this many MB in this process first")
    p.add_argument("--json", help="write the numbers here")
    args = p.parse_args(argv)
    ballast = bytearray(args.host_mb << 20)  # noqa: F841 (kept alive: a trainer-sized process)
    for i in range(0, len(ballast), 4096):
        ballast[i] = 1  # touched, so the pages are really mapped
    batch = programs(args.samples, args.loop_every)
    rows = [
        score_batch(batch, int(w), args.case_timeout, args.sample_timeout, int(g))
        for g in args.group.split(",")
        for w in args.workers.split(",")
    ]
    print(f"`python benchmarks/code_reward_throughput.py {' '.join(argv if argv is not None else sys.argv[1:])}`")
    print()
    print("| workers | programs per sandbox run | programs | wall s | programs/s | median s per program (not looping) | "
          "looping program s | wall / bound | wall / ideal | scores right |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['workers']} | {r['group']} | {r['samples']} | {r['wall_s']:.1f} | {r['samples_per_s']:.1f} | "
              f"{r['median_program_s']:.3f} | {r['loop_program_s']:.2f} | {r['ratio_to_bound']:.2f} | "
              f"{'-' if r['ratio_to_ideal'] is None else format(r['ratio_to_ideal'], '.2f')} | {r['scores_right']} |")  # fmt: skip
    if len(rows) > 1:
        print(f"\nspeed-up of the last row over the first: {rows[0]['wall_s'] / rows[-1]['wall_s']:.2f}x")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return rows


if __name__ == "__main__":
    main()
