"""The metrics whose values depend on timing: left out wherever two runs are compared bit for bit (reproducibility,
fault injection, thread counts, ``scripts/compare_runs.py``). Everything else a run logs is a function of its seed."""

from __future__ import annotations

__all__ = ["WALL_CLOCK", "is_wall_clock"]

# prefixes: step and stage timings, the async modes' queue and idle figures, throughput, Ray's share of a step,
# and the record's own time stamp
WALL_CLOCK = (
    "timing_s/",
    "async/",
    "timing_per_token_ms/",
    "perf/throughput",
    "perf/time_per_step",
    "perf/ray_overhead",
    "time",
)


def is_wall_clock(key: str) -> bool:
    """Whether metric ``key`` depends on timing (see `WALL_CLOCK`)."""
    return key.startswith(WALL_CLOCK)
