"""Compare two runs' metrics.jsonl step by step, ignoring wall-clock metrics: are they the same run, bit for bit?

    python scripts/compare_runs.py outputs/a/metrics.jsonl outputs/b/metrics.jsonl

Every metric except the timing and throughput ones (``timing_s/*``, ``async/*``, ``timing_per_token_ms/*``, ``perf/throughput``,
``perf/time_per_step``, ``perf/ray_overhead_fraction``, ``time``) must be present in both and equal exactly (NaN equals
NaN). Prints each difference and exits 1 if there is any, else prints IDENTICAL and exits 0. Used to check that a
refactor leaves a same-seed run unchanged and that a run is reproducible.

``--allow-new-metrics``: a change that adds metrics (a new diagnostic) leaves the old ones alone: metrics only in the
second run are listed by name and not counted as differences; every shared metric must still match.
"""

from __future__ import annotations

import argparse
import json
import math
import sys

from verl.utils.wall_clock import WALL_CLOCK


def load(path: str) -> list[dict]:
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def differences(a: list[dict], b: list[dict], new_metrics: set[str] | None = None) -> list[str]:
    """Every difference between the runs, one line each; with ``new_metrics`` given, metrics only in the second
    run are added to it instead of counted."""
    out = [] if len(a) == len(b) else [f"{len(a)} records against {len(b)}"]
    for x, y in zip(a, b):
        step = x.get("step")
        kx = {k for k in x if k != "time" and not k.startswith(WALL_CLOCK)}
        ky = {k for k in y if k != "time" and not k.startswith(WALL_CLOCK)}
        if new_metrics is not None:
            new_metrics.update(ky - kx)
            ky &= kx
        out += [f"step {step}: {k} only in {'the first' if k in kx else 'the second'}" for k in sorted(kx ^ ky)]
        for k in sorted(kx & ky):
            u, v = x[k], y[k]
            if u != v and not (isinstance(u, float) and isinstance(v, float) and math.isnan(u) and math.isnan(v)):
                out.append(f"step {step}: {k} {u!r} != {v!r}")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python scripts/compare_runs.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("first")
    parser.add_argument("second")
    parser.add_argument("--allow-new-metrics", action="store_true", help="metrics only in the second run are listed")
    args = parser.parse_args(argv)
    a, b = load(args.first), load(args.second)
    new = set() if args.allow_new_metrics else None
    diffs = differences(a, b, new)
    for line in diffs:
        print(line)
    if new:
        print(f"{len(new)} metrics only in the second run: {', '.join(sorted(new))}")
    print(f"IDENTICAL ({len(a)} records)" if not diffs else f"{len(diffs)} differences")
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())
