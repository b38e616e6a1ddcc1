"""verl's import path of `TokenOutput` (``from verl.workers.rollout.replica import TokenOutput``), which agent loops
written against verl use.

verl's ``RolloutReplica`` (inference-server processes, one per replica) is not part of this version: the rollout runs
inside the actor worker, and its per-request ``generate`` is reached in process (docs/rollout.md).
"""

from verl.workers.rollout.base import TokenOutput

__all__ = ["TokenOutput"]
