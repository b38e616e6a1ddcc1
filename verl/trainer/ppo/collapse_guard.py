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

``trainer.lr_plateau`` steers the same learning-rate scale from the validation curve: after ``patience``
validations in a row without a new best of ``val_metric`` (by more than ``threshold``) it reloads the best
validation's policy (``rollback``) and multiplies the rate by ``factor`` (PyTorch's ReduceLROnPlateau, with the
rollback). The update-size control (``actor.trust_region``) steers each step's move by its KL to the sampling
policy, which cannot tell a rate that sharpens the held-out answers from one that moves as far but undoes them
(the learning suite's sub2-30, docs/results.md); only the held-out curve can. Counted in ``plateau/cuts``. With
``initial_scale`` < 1 and ``growth`` > 1 it is a bold driver: the run starts at a fraction of the rate and each new
best raises it, up to the configured rate.
"""

from __future__ import annotations

import math
import os
import shutil
from collections import deque
from typing import Any

from verl.trainer.config.ppo_trainer import CollapseGuardConfig, LrPlateauConfig

__all__ = ["CollapseGuard", "PlateauRule"]


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


class PlateauRule:
    """Counts validations without a new best; ``observe`` says ``"best"`` on a new best, ``"cut"`` when the rate is
    due for a cut, else ``""``."""

    def __init__(self, config: LrPlateauConfig):
        self.config = config
        self.best: float | None = None
        self.stale = 0  # validations since the last new best (or the last cut)

    def observe(self, value: float) -> str:
        if self.best is None or value > self.best + self.config.threshold:
            first = self.best is None
            self.best, self.stale = value, 0
            return "" if first else "best"
        self.stale += 1
        if self.stale < self.config.patience:
            return ""
        self.stale = 0  # the next cut needs another patience of validations at the new rate
        return "cut"


def _number(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


class CollapseWatch:
    """The guard wired to a trainer: ``after(step, metrics)`` once per logged set of metrics (the validation before
    training, then each step). Keeps the policy of the best validation in ``<default_local_dir>/best_val/`` when
    ``trainer.rollback_on_collapse`` or ``trainer.lr_plateau.rollback`` is on, and goes back to it on a collapse or
    a plateau."""

    def __init__(self, trainer: Any):
        self.trainer = trainer
        cfg = trainer.config.trainer
        self.guard = CollapseGuard(cfg.collapse_guard) if cfg.collapse_guard.enable else None
        self.rollback, self.lr_factor = bool(cfg.rollback_on_collapse), float(cfg.rollback_lr_factor)
        if self.rollback and self.guard is None:
            raise ValueError("trainer.rollback_on_collapse=true needs trainer.collapse_guard.enable=true")
        if not 0.0 < self.lr_factor <= 1.0:
            raise ValueError(f"trainer.rollback_lr_factor must be in (0, 1], got {self.lr_factor}")
        plateau = cfg.lr_plateau
        self.plateau = PlateauRule(plateau) if plateau.enable else None
        if self.plateau is not None and self.guard is None:
            raise ValueError("trainer.lr_plateau.enable=true needs trainer.collapse_guard.enable=true (its val_metric)")
        self.keep_best = self.rollback or (self.plateau is not None and plateau.rollback)
        self.snapshot: str | None = None
        self.lr_scale, self.rollbacks, self.cuts = (plateau.initial_scale if self.plateau else 1.0), 0, 0
        self.scale_applied = self.lr_scale == 1.0  # lr_plateau.initial_scale: set on the schedule at the first check

    def state_dict(self) -> dict[str, Any]:
        """The bests, the learning-rate scale and the counts: a resumed run goes on with them (its schedule's scale is
        in the workers' checkpoint; without this the next cut would scale from 1 again)."""
        guard, plateau = self.guard, self.plateau
        return {
            "guard": None
            if guard is None
            else {
                "best_val": guard.best_val,
                "best_train": guard.best_train,
                "first_entropy": guard.first_entropy,
                "recent": list(guard.recent),
                "collapsed": guard.collapsed,
                "count": guard.count,
            },
            "plateau": None if plateau is None else {"best": plateau.best, "stale": plateau.stale},
            "snapshot": self.snapshot,
            "lr_scale": self.lr_scale,
            "rollbacks": self.rollbacks,
            "cuts": self.cuts,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if self.guard is not None and state.get("guard"):
            g = state["guard"]
            self.guard.best_val = tuple(g["best_val"]) if g["best_val"] is not None else None
            self.guard.best_train, self.guard.first_entropy = g["best_train"], g["first_entropy"]
            self.guard.recent.extend(g["recent"])
            self.guard.collapsed, self.guard.count = g["collapsed"], g["count"]
        if self.plateau is not None and state.get("plateau"):
            self.plateau.best, self.plateau.stale = state["plateau"]["best"], state["plateau"]["stale"]
        self.scale_applied = True  # the checkpointed schedule carries the scale
        snapshot = state.get("snapshot")
        self.snapshot = snapshot if snapshot and os.path.isdir(snapshot) else None
        self.lr_scale, self.rollbacks, self.cuts = state["lr_scale"], state["rollbacks"], state["cuts"]

    def observed(self, metrics: dict[str, Any], step: int) -> dict[str, Any]:
        """``after(step, metrics)``, then ``metrics``."""
        self.after(step, metrics)
        return metrics

    def after(self, step: int, metrics: dict[str, Any], batch: Any = None) -> None:
        """Watch this step's metrics (adding the ``collapse/*`` ones); report, and roll back or keep the best. With
        the step's ``batch``, its training reward is read from it (the step's data metrics are not summed yet)."""
        if self.guard is None:
            return
        if batch is not None and "critic/score/mean" not in metrics:  # as metric_utils.compute_data_metrics
            metrics["critic/score/mean"] = batch.batch["token_level_scores"].sum(-1).float().mean().item()
        best = self.guard.new_best_validation(metrics)
        report = self.guard.observe(step, metrics)
        if not self.scale_applied:
            self._set_scale(self.lr_scale)
        val = _number(metrics.get(self.guard.config.val_metric))
        action = self.plateau.observe(val) if self.plateau is not None and val is not None else ""
        stalled = action == "cut"
        if action == "best" and self.lr_scale < 1.0 and self.plateau.config.growth > 1.0:
            self._set_scale(min(1.0, self.lr_scale * self.plateau.config.growth))  # bold driver: a new best, larger
        if report is not None:
            print(report + (self._roll_back(self.lr_factor) if self.rollback else ""), flush=True)
            if self.rollback and self.snapshot is not None:
                self.guard.rearm()  # still collapsed at the next check: back again, with a smaller rate
        elif stalled:
            print(self._cut(step), flush=True)
        elif best and self.keep_best:
            self._keep_best(step)
        if self.rollback or self.plateau is not None:
            metrics.update({"collapse/rollbacks": float(self.rollbacks), "collapse/lr_scale": self.lr_scale})
        if self.plateau is not None:
            metrics["plateau/cuts"] = float(self.cuts)

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

    def _cut(self, step: int) -> str:
        """The plateau rule's cut: back to the best validation's policy (lr_plateau.rollback), the rate scaled."""
        cfg, best = self.plateau.config, self.plateau.best
        head = (
            f"PLATEAU at step {step}: held-out {self.guard.config.val_metric} has not beaten its best {best:.4g} "
            f"in {cfg.patience} validation(s)"
        )
        factor = max(cfg.factor, cfg.min_scale / self.lr_scale) if self.lr_scale > cfg.min_scale else 1.0
        if factor >= 1.0:
            return head + f"; the learning rate stays at x{self.lr_scale:g} (trainer.lr_plateau.min_scale)"
        self.cuts += 1
        if cfg.rollback and self.snapshot is not None:
            return head + self._roll_back(factor)
        self._set_scale(self.lr_scale * factor)
        return head + f"; learning rate x{self.lr_scale:g}"

    def _set_scale(self, scale: float) -> None:
        self.lr_scale, self.scale_applied = scale, True
        for group in self._roles().values():
            group.scale_lr(scale)

    def _roll_back(self, factor: float) -> str:
        if self.snapshot is None:
            return " (no best validation kept yet: nothing to roll back to)"
        for name, group in self._roles().items():
            group.load_checkpoint(os.path.join(self.snapshot, name))
        self._set_scale(self.lr_scale * factor)  # the loaded schedule is the best one's: scale it again
        self.rollbacks += 1
        return f"; rolled back to the best validation's policy, learning rate x{self.lr_scale:g}"
