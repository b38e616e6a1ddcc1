"""Which policy versions sampled a batch, and how far behind the trained policy they are (verl's metric names).

A policy version counts the actor's updates: version ``v`` is the policy after ``v`` updates. Every response row
records the first and the last version that sampled its tokens (``policy_version_first``/``_last`` in the batch's
``non_tensor_batch``); they differ only when a partial rollout resumed the row under newer weights.
"""

from __future__ import annotations

import numpy as np

from verl.protocol import DataProto

__all__ = ["FIRST", "LAST", "is_on_policy", "off_policy_metrics", "stamp_versions"]

FIRST, LAST = "policy_version_first", "policy_version_last"


def stamp_versions(
    batch: DataProto, first: int | np.ndarray | tuple, last: int | np.ndarray | None = None
) -> DataProto:
    """Record on every row of ``batch`` the versions that sampled it (``last`` defaults to ``first``; ``first`` may
    be the ``(first, last)`` pair a source of rounds returns)."""
    if isinstance(first, tuple):
        first, last = first
    rows = len(batch)
    first_a = np.broadcast_to(np.asarray(first, dtype=np.int64), (rows,)).copy()
    last_a = first_a.copy() if last is None else np.broadcast_to(np.asarray(last, dtype=np.int64), (rows,)).copy()
    batch.non_tensor_batch[FIRST], batch.non_tensor_batch[LAST] = first_a, last_a
    return batch


def is_on_policy(batch: DataProto, version: int) -> bool:
    """Whether every row of ``batch`` was sampled entirely by policy ``version`` (a batch with no record: yes)."""
    ntb = batch.non_tensor_batch
    if FIRST not in ntb:
        return True
    return bool((ntb[FIRST] == version).all() and (ntb[LAST] == version).all())


def off_policy_metrics(batch: DataProto, version: int) -> dict[str, float]:
    """verl's off-policy metrics of a batch trained at policy ``version``, over its response rows:

    - ``training/off_policy/trajectory_spans/*``: versions a row's tokens came from (``last - first + 1``; 1: one);
    - ``training/off_policy/trajectory_staleness/*``: ``version - last`` (the newest version that sampled it);
    - ``training/off_policy/trajectory_staleness_worst/*``: ``version - first`` (the oldest).
    Each as ``mean``, ``max`` and ``min``; nothing for a batch with no version record."""
    ntb = batch.non_tensor_batch
    if FIRST not in ntb or len(batch) == 0:
        return {}
    first, last = ntb[FIRST].astype(np.int64), ntb[LAST].astype(np.int64)
    series = {"trajectory_spans": last - first + 1, "trajectory_staleness": version - last}
    series["trajectory_staleness_worst"] = version - first
    out = {}
    for name, values in series.items():
        for stat, fn in (("mean", np.mean), ("max", np.max), ("min", np.min)):
            out[f"training/off_policy/{name}/{stat}"] = float(fn(values))
    return out
