"""What a trial is scored on and how the built-in objective runs one: ``Objective`` (metrics, directions,
aggregation, weights), ``EarlyStop`` rules, the per-trial watcher that reports to the pruner, and
``SubprocessObjective`` (each trial is ``python -m verl.trainer.main_ppo`` in its own subprocess).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field

from verl.tune import runner
from verl.tune.search_space import SearchSpace


class TrialFailed(Exception):
    """A trial that ran but produced no usable value; ``tail`` is the end of its log."""

    def __init__(self, reason: str, tail: str = ""):
        super().__init__(reason)
        self.reason, self.tail = reason, tail


_DIRS = {"max": "maximize", "maximize": "maximize", "min": "minimize", "minimize": "minimize"}


@dataclass
class Objective:
    """What a trial is scored on: one or more logged metrics with directions, an aggregation over each metric's
    points (``last``, ``best``, ``mean``, ``meanK``), and optional weights folding several into one maximized score
    (``sum w_i * (+/-) metric_i``; minimized metrics enter with a minus sign)."""

    metrics: list[str] = field(default_factory=lambda: ["val-core/acc"])
    directions: list[str] = field(default_factory=lambda: ["maximize"])
    aggregation: str = "last"
    weights: list[float] | None = None

    def __post_init__(self):
        if isinstance(self.metrics, str):
            self.metrics = [self.metrics]
        if isinstance(self.directions, str):
            self.directions = [self.directions]
        if len(self.directions) == 1 and len(self.metrics) > 1:
            self.directions = self.directions * len(self.metrics)
        if len(self.directions) != len(self.metrics):
            raise ValueError(f"{len(self.metrics)} metrics but {len(self.directions)} directions")
        bad = [d for d in self.directions if d not in _DIRS]
        if bad:
            raise ValueError(f"direction {bad[0]!r}: use maximize or minimize")
        self.directions = [_DIRS[d] for d in self.directions]
        if self.weights is not None and len(self.weights) != len(self.metrics):
            raise ValueError(f"{len(self.weights)} weights for {len(self.metrics)} metrics")
        runner.aggregate([(1, 0.0)], self._how(0))  # validates the aggregation name

    @classmethod
    def parse(cls, specs: Sequence[str], aggregation: str = "last", weights: Sequence[float] | None = None):
        """``["val-core/acc:max", "response_length/mean:min"]``; a spec without ``:dir`` is maximized."""
        metrics, dirs = [], []
        for s in specs:
            name, _, d = s.rpartition(":") if s.rsplit(":", 1)[-1].lower() in _DIRS else (s, "", "maximize")
            d = d.lower()
            metrics.append(name)
            dirs.append(d)
        return cls(metrics, dirs, aggregation, list(weights) if weights else None)

    @property
    def multi(self) -> bool:
        return len(self.metrics) > 1 and self.weights is None

    @property
    def study_directions(self) -> list[str]:
        return list(self.directions) if self.multi else ["maximize" if self.weights else self.directions[0]]

    def _how(self, i: int) -> str:
        how = self.aggregation
        if how == "best":
            return "max" if self.directions[i] == "maximize" else "min"
        return how

    def values(self, run: runner.TrialRun) -> list[float]:
        vals = []
        for i, m in enumerate(self.metrics):
            v, why = runner.objective_value(run, m, self._how(i))
            if why:
                raise TrialFailed(why, run.log_tail)
            vals.append(v)
        return self.fold(vals)

    def fold(self, vals: list[float]) -> list[float]:
        if self.weights is None:
            return vals
        sign = [1.0 if d == "maximize" else -1.0 for d in self.directions]
        return [sum(w * s * v for w, s, v in zip(self.weights, sign, vals))]

    def describe(self) -> str:
        parts = [f"{m} ({d}, {self.aggregation})" for m, d in zip(self.metrics, self.directions)]
        if self.weights:
            return "maximize " + " + ".join(
                f"{w:g}*{'+' if d == 'maximize' else '-'}{m}"
                for w, m, d in zip(self.weights, self.metrics, self.directions)
            )
        return ", ".join(parts)


@dataclass
class EarlyStop:
    """End a trial early, keeping its value so far. ``METRIC<THRESH:K`` / ``METRIC>THRESH:K``: the metric was
    below/above the threshold at K consecutive logged points (e.g. reward std < 0.05 three times: the policy has collapsed);
    ``plateau:K[:MIN_DELTA]``: the (first) objective metric did not improve by MIN_DELTA for K validations."""

    metric: str | None
    op: str  # "<" | ">" | "plateau"
    threshold: float = 0.0
    patience: int = 3

    @classmethod
    def parse(cls, spec: str) -> EarlyStop:
        try:
            if spec.startswith("plateau"):
                parts = spec.split(":")
                patience = int(parts[1]) if len(parts) > 1 else 3
                if patience < 1:
                    raise ValueError
                return cls(None, "plateau", float(parts[2]) if len(parts) > 2 else 0.0, patience)
            body, _, k = spec.rpartition(":")
            op = "<" if "<" in body else ">"
            metric, thr = body.split(op)
            if int(k) < 1:
                raise ValueError
            return cls(metric.strip(), op, float(thr), int(k))
        except (ValueError, IndexError):
            raise ValueError(
                f"--early-stop {spec!r}: write METRIC<THRESHOLD:K, METRIC>THRESHOLD:K or plateau:K[:MIN_DELTA], K >= 1"
            ) from None


class _Watch:
    """Per-trial state fed by each metrics line: reports to the pruner, checks early stopping."""

    def __init__(self, trial, objective: Objective, early: EarlyStop | None):
        self.trial, self.obj, self.early = trial, objective, early
        self.latest: dict[str, float] = {}
        self.streak = 0
        self.best: float | None = None
        self.stale = 0
        self.pruned_at: int | None = None
        self.stopped_at: int | None = None

    def __call__(self, rec: dict) -> str | None:
        step = int(rec.get("step", 0))
        for m in self.obj.metrics:
            if m in rec and rec[m] is not None:
                self.latest[m] = float(rec[m])
        first = self.obj.metrics[0]
        if step > 0 and first in rec and not self.obj.multi and all(m in self.latest for m in self.obj.metrics):
            value = self.obj.fold([self.latest[m] for m in self.obj.metrics])[0]
            if math.isfinite(value):
                self.trial.report(value, step)
                if self.trial.should_prune():
                    self.pruned_at = step
                    return "prune"
        e = self.early
        if e is None or step == 0:
            return None
        if e.op == "plateau":
            if first not in rec or rec[first] is None:
                return None
            v = float(rec[first]) * (1 if self.obj.directions[0] == "maximize" else -1)
            if self.best is None or v > self.best + e.threshold:
                self.best, self.stale = v, 0
            else:
                self.stale += 1
        elif e.metric in rec and rec[e.metric] is not None:
            v = float(rec[e.metric])
            self.streak = self.streak + 1 if (v < e.threshold if e.op == "<" else v > e.threshold) else 0
        if (e.op == "plateau" and self.stale >= e.patience) or (e.op != "plateau" and self.streak >= e.patience):
            self.stopped_at = step
            return "stop"
        return None


class SubprocessObjective:
    """The built-in objective: each trial runs the real trainer in its own subprocess (see ``runner``)."""

    def __init__(
        self,
        space: SearchSpace,
        base_argv: Sequence[str] = (),
        objective: Objective | None = None,
        study_dir: str = "outputs/verl-tune",
        trial_timeout: float | None = None,
        early_stop: EarlyStop | str | None = None,
        poll_interval: float = 1.0,
    ):
        self.space, self.base_argv = space, list(base_argv)
        self.objective = objective or Objective()
        self.study_dir, self.trial_timeout, self.poll = study_dir, trial_timeout, poll_interval
        self.early = EarlyStop.parse(early_stop) if isinstance(early_stop, str) else early_stop

    def __call__(self, trial) -> list[float]:
        from verl.utils.config import ConfigError, load_config, to_yaml
        from verl.utils.ppo_config import check_ppo_config

        values = self.space.suggest(trial)
        trial_dir = os.path.abspath(os.path.join(self.study_dir, f"trial_{trial.number}"))
        os.makedirs(trial_dir, exist_ok=True)
        trial.set_user_attr("trial_dir", trial_dir)
        try:
            argv = runner.build_argv(self.base_argv, self.space.overrides(values), trial_dir)
            cfg = load_config("ppo_trainer", argv)
            check_ppo_config(cfg)
        except ConfigError as e:
            raise TrialFailed(f"invalid config: {e}") from None
        with open(os.path.join(trial_dir, "config.yaml"), "w") as f:
            f.write(to_yaml(cfg))
        with open(os.path.join(trial_dir, "trial.json"), "w") as f:
            json.dump({"number": trial.number, "params": values, "argv": argv}, f, indent=1)
        watch = _Watch(trial, self.objective, self.early)
        run = runner.run_trial_process(argv, trial_dir, watch, self.trial_timeout, self.poll)
        trial.set_user_attr("seconds", round(run.seconds, 1))
        if run.ended_by == "prune":
            trial.set_user_attr("pruned_at_step", watch.pruned_at)
            import optuna

            raise optuna.TrialPruned(f"pruned at step {watch.pruned_at}")
        if run.ended_by == "timeout" or (run.ended_by is None and run.returncode != 0):
            raise TrialFailed(runner.describe_failure(run), run.log_tail)
        if run.ended_by == "stop":
            trial.set_user_attr("early_stopped_at_step", watch.stopped_at)
        return self.objective.values(run)
