"""The collapse guard: say in one line when a run falls off a cliff, and optionally roll back to the last good state.

A policy pushed too hard (a learning rate tuned on another task, another model size) can collapse in a few steps:
held-out accuracy and training reward fall far below what the run had reached, or the entropy vanishes. Each signal
is compared with the run's own best so far (``trainer.collapse_guard``):

- held-out: ``val_metric`` (default ``val-core/acc``) below its best by more than ``val_drop``;
- training reward: the mean of ``critic/score/mean`` over the last ``window`` steps below its best such mean by
  more than ``train_drop`` (a window, so one noisy batch is not a collapse);
- entropy: ``actor/entropy`` below ``entropy_ratio`` times its first value (0 turns this signal off).

A collapse is reported once, with the values, when it starts (``collapse/detected`` is 1 on that step and
``collapse/count`` counts them); it is reported again only after the run recovered. With
``trainer.rollback_on_collapse`` the trainer then reloads the policy (weights, optimizer, learning-rate schedule) it
had at its best validation and multiplies the learning rate by ``rollback_lr_factor`` (``collapse/rollbacks``,
``collapse/lr_scale``); the data order goes on, so the run does not replay the batches that broke it. Still
collapsed at the next check (a validation, or a full training-reward window), it rolls back again with the rate
scaled once more.
"""

from __future__ import annotations

import math
import os
import shutil
from collections import deque
from typing import Any

from verl.trainer.config.ppo_trainer import CollapseGuardConfig

__all__ = ["CollapseGuard"]


class CollapseGuard:
    """Watches one run's metrics, step by step (``observe``), against its own best values."""

    def __init__(self, config: CollapseGuardConfig):
        self.config = config
        self.best_val: tuple[float, int] | None = None  # (value, step)
        self.best_train: float | None = None
        self.first_entropy: float | None = None
        self.recent = deque(maxlen=max(1, config.window))
        self.collapsed = False
        self.count = 0

    def rearm(self) -> None:
        """After a rollback: the next collapse is a new one, and the training-reward window starts over."""
        self.collapsed = False
        self.recent.clear()

    def new_best_validation(self, metrics: dict[str, Any]) -> bool:
        """Whether ``metrics`` holds a held-out value above every earlier one (the trainer keeps that state)."""
        value = _number(metrics.get(self.config.val_metric))
        return value is not None and (self.best_val is None or value > self.best_val[0])

    def observe(self, step: int, metrics: dict[str, Any]) -> str | None:
        """Update the bests with this step's metrics; the one-line report when a collapse starts here, else None.
        Adds ``collapse/detected`` and ``collapse/count`` to ``metrics``."""
        cfg, reasons = self.config, []
        val = _number(metrics.get(cfg.val_metric))
        if val is not None:
            if self.best_val is not None and val < self.best_val[0] - cfg.val_drop:
                best, at = self.best_val
                reasons.append(
                    f"held-out {cfg.val_metric} {val:.4g} is {best - val:.4g} below its best {best:.4g} (step {at})"
                )
            if self.best_val is None or val > self.best_val[0]:
                self.best_val = (val, step)
        score = _number(metrics.get("critic/score/mean"))
        if score is not None:
            self.recent.append(score)
            if len(self.recent) == self.recent.maxlen:
                mean = sum(self.recent) / len(self.recent)
                if self.best_train is not None and mean < self.best_train - cfg.train_drop:
                    reasons.append(
                        f"training reward (mean of {len(self.recent)} steps) {mean:.4g} is {self.best_train - mean:.4g} "
                        f"below its best {self.best_train:.4g}"
                    )
                self.best_train = mean if self.best_train is None else max(self.best_train, mean)
        entropy = _number(metrics.get("actor/entropy"))
        if entropy is not None:
            if self.first_entropy is None:
                self.first_entropy = entropy
            elif cfg.entropy_ratio > 0 and entropy < cfg.entropy_ratio * self.first_entropy:
                reasons.append(
                    f"entropy {entropy:.4g} is below {cfg.entropy_ratio:g} x its first value {self.first_entropy:.4g}"
                )
        started = bool(reasons) and not self.collapsed
        self.collapsed = bool(reasons)
        self.count += started
        metrics["collapse/detected"] = float(started)
        metrics["collapse/count"] = float(self.count)
        if not started:
            return None
        return f"COLLAPSE at step {step}: " + "; ".join(reasons)


def _number(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


class CollapseWatch:
    """The guard wired to a trainer: ``after(step, metrics)`` once per logged set of metrics (the validation before
    training, then each step). Keeps the policy of the best validation in ``<default_local_dir>/best_val/`` when
    ``trainer.rollback_on_collapse`` is on, and goes back to it on a collapse."""

    def __init__(self, trainer: Any):
        self.trainer = trainer
        cfg = trainer.config.trainer
        self.guard = CollapseGuard(cfg.collapse_guard) if cfg.collapse_guard.enable else None
        self.rollback, self.lr_factor = bool(cfg.rollback_on_collapse), float(cfg.rollback_lr_factor)
        if self.rollback and self.guard is None:
            raise ValueError("trainer.rollback_on_collapse=true needs trainer.collapse_guard.enable=true")
        if not 0.0 < self.lr_factor <= 1.0:
            raise ValueError(f"trainer.rollback_lr_factor must be in (0, 1], got {self.lr_factor}")
        self.snapshot: str | None = None
        self.lr_scale, self.rollbacks = 1.0, 0

    def observed(self, metrics: dict[str, Any], step: int) -> dict[str, Any]:
        """``after(step, metrics)``, then ``metrics``."""
        self.after(step, metrics)
        return metrics

    def after(self, step: int, metrics: dict[str, Any]) -> None:
        """Watch this step's metrics (adding the ``collapse/*`` ones); report, and roll back or keep the best."""
        if self.guard is None:
            return
        best = self.guard.new_best_validation(metrics)
        report = self.guard.observe(step, metrics)
        if report is not None:
            print(report + (self._roll_back() if self.rollback else ""), flush=True)
            if self.rollback and self.snapshot is not None:
                self.guard.rearm()  # still collapsed at the next check: back again, with a smaller rate
        elif best and self.rollback:
            self._keep_best(step)
        if self.rollback:
            metrics.update({"collapse/rollbacks": float(self.rollbacks), "collapse/lr_scale": self.lr_scale})

    def _roles(self) -> dict[str, Any]:
        return self.trainer._checkpoint_roles()

    def _keep_best(self, step: int) -> None:
        path = os.path.join(self.trainer.checkpoints.root, "best_val")
        tmp = path + ".tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        for name, group in self._roles().items():
            group.save_checkpoint(os.path.join(tmp, name))
        shutil.rmtree(path, ignore_errors=True)
        os.replace(tmp, path)  # all or nothing, as a checkpoint
        self.snapshot = path

    def _roll_back(self) -> str:
        if self.snapshot is None:
            return " (no best validation kept yet: nothing to roll back to)"
        for name, group in self._roles().items():
            group.load_checkpoint(os.path.join(self.snapshot, name))
        self.lr_scale *= self.lr_factor
        for group in self._roles().values():  # the loaded schedule is the best one's: scale it again
            group.scale_lr(self.lr_scale)
        self.rollbacks += 1
        return f"; rolled back to the best validation's policy, learning rate x{self.lr_scale:g}"
