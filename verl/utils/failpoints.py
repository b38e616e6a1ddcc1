"""Failpoints: named places where a fault-injection test kills the process, as a crash or ``kill -9`` would.

``failpoint("checkpoint.write")`` does nothing unless the environment names that point:

    VERL_FAILPOINTS=checkpoint.write@3             SIGKILL this process on its 3rd pass through checkpoint.write
    VERL_FAILPOINTS=actor.update@2,validation@1    several points: the first one reached kills
    VERL_FAILPOINTS_TRACE=/tmp/hits.txt            append each point passed, one name a line (to plan kills)

The kill is a real ``SIGKILL`` of the process itself: no ``finally``, no flush, no atexit handler runs, exactly what
a machine losing the job does. Passes are counted per process and per point from 1. The points (each one line in the
code it names) are listed in ``POINTS``; ``benchmarks/fault_injection.py`` and ``tests/reliability/`` use them.
"""

from __future__ import annotations

import os
import signal
from collections import Counter

__all__ = ["ENV", "POINTS", "TRACE_ENV", "failpoint", "parse"]

ENV = "VERL_FAILPOINTS"
TRACE_ENV = "VERL_FAILPOINTS_TRACE"
POINTS = {
    "rollout.generate": "a rollout's responses are generated, nothing of them used yet (training and validation)",
    "actor.update": "after an optimizer step of the actor's update: the weights in memory half-way through the step",
    "validation": "after a validation batch is generated and scored",
    "checkpoint.write": "every role's checkpoint files written to global_step_N.tmp, before data.pt and the rename",
    "checkpoint.saved": "global_step_N renamed into place, latest_checkpointed_iteration.txt not yet updated",
    "metrics.logged": "a step's metrics written to the loggers, its checkpoint (if any) not yet committed",
}

_hits: Counter = Counter()
_parsed: tuple[str, dict[str, int]] | None = None


def parse(spec: str) -> dict[str, int]:
    """``"a@3,b@1"`` -> ``{"a": 3, "b": 1}``; a point without ``@N`` fires on its first pass. Unknown names fail, so
    that a typo in a test does not silently inject nothing."""
    out = {}
    for part in filter(None, (p.strip() for p in spec.split(","))):
        name, _, hit = part.partition("@")
        if name not in POINTS:
            raise ValueError(f"{ENV}: unknown failpoint {name!r}; known: {', '.join(POINTS)}")
        out[name] = int(hit) if hit else 1
    return out


def _armed() -> dict[str, int]:
    global _parsed
    spec = os.environ.get(ENV, "")
    if _parsed is None or _parsed[0] != spec:
        _parsed = (spec, parse(spec))
    return _parsed[1]


def failpoint(name: str) -> None:
    """Count a pass through ``name``; SIGKILL this process when ``VERL_FAILPOINTS`` names this pass."""
    if not (os.environ.get(ENV) or os.environ.get(TRACE_ENV)):
        return  # the normal case: two dictionary lookups
    _hits[name] += 1
    trace = os.environ.get(TRACE_ENV)
    if trace:
        with open(trace, "a") as f:
            f.write(name + "\n")
    if _armed().get(name) == _hits[name]:
        os.kill(os.getpid(), signal.SIGKILL)
