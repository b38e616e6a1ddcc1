"""A step callback that reports validation metrics to an Optuna trial from inside an in-process training run."""

from __future__ import annotations

import math
from typing import Any


class PruningCallback:
    """Report ``metric`` to ``trial`` at each validation and stop the run when the pruner says so.

        cb = PruningCallback(trial, "val-core/acc")
        result = run_ppo(config, callbacks=[cb])
        cb.raise_if_pruned()          # raises optuna.TrialPruned when the run was cut short

    Works with any controller that calls ``on_step_end(trainer, batch, metrics)`` and stops on ``False``."""

    def __init__(self, trial, metric: str = "val-core/acc"):
        self.trial, self.metric = trial, metric
        self.pruned_at: int | None = None

    def on_step_end(self, trainer: Any, batch: Any, metrics: dict) -> bool | None:
        v = metrics.get(self.metric)
        if v is None or not math.isfinite(float(v)):
            return None
        step = int(getattr(trainer, "global_steps", 0))
        self.trial.report(float(v), step)
        if self.trial.should_prune():
            self.pruned_at = step
            return False
        return None

    def raise_if_pruned(self) -> None:
        if self.pruned_at is not None:
            import optuna

            raise optuna.TrialPruned(f"pruned at step {self.pruned_at}")
