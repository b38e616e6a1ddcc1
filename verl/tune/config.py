"""``StudyConfig``: every setting of a study in one object.

``run_study(StudyConfig(...))`` runs it; ``run_study(search_space, n_trials=..., ...)`` builds one from the same
keyword names. The worker processes of ``n_jobs > 1`` receive the whole (resolved) object, so a new setting is one
new field here and reaches every worker without being listed again anywhere.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from verl.tune.objective import Objective
from verl.tune.search_space import SearchSpace
from verl.tune.storage import default_storage

FAILURE_POLICIES = ("fail", "worst")


@dataclass
class StudyConfig:
    """Settings of one study (docs/tune.md lists the matching ``verl tune`` options).

    The objective: ``metrics`` with ``directions`` (several: multi-objective), ``aggregation`` over each metric's
    logged points, optional ``weights`` folding them into one maximized score. The budget: ``n_trials`` finished
    trials in the *study* (resumed or parallel tuners continue one count), ``timeout`` seconds after which this
    tuner starts no new trial, ``trial_timeout`` per trial. Resume: a trial whose tuner died is queued again up
    to ``max_retries`` times; on an RDB storage Optuna's heartbeat (every ``heartbeat_interval`` s) finds a dead
    tuner on another machine after ``grace_period`` s. ``objective`` replaces the built-in subprocess objective
    with your own ``fn(trial) -> float | list``. ``worker_index`` is set for the worker processes of ``n_jobs``."""

    search_space: str | SearchSpace | None = None
    base_overrides: Sequence[str] = ()
    metrics: Sequence[str] | str = ("val-core/acc",)
    directions: Sequence[str] | str = ("maximize",)
    aggregation: str = "last"
    weights: Sequence[float] | None = None
    n_trials: int = 20
    timeout: float | None = None
    trial_timeout: float | None = None
    storage: str | None = None
    study_name: str = "ppo-tune"
    output_dir: str | None = None
    sampler: str = "tpe"
    pruner: str = "median"
    seed: int | None = None
    n_jobs: int = 1
    on_failure: str = "fail"
    failed_value: float | Sequence[float] | None = None
    early_stop: str | None = None
    objective: Callable | None = None
    enqueue_base: bool = False
    max_retries: int = 2
    grace_period: float = 120.0
    heartbeat_interval: float = 10.0
    progress: bool = True
    report: bool = True
    poll_interval: float = 1.0
    worker_index: int = 0

    def __post_init__(self):
        self.base_overrides = list(self.base_overrides)
        self.metrics = [self.metrics] if isinstance(self.metrics, str) else list(self.metrics)
        self.directions = [self.directions] if isinstance(self.directions, str) else list(self.directions)
        self.weights = list(self.weights) if self.weights else None
        if self.on_failure not in FAILURE_POLICIES:
            raise ValueError(f"on_failure {self.on_failure!r}: use fail or worst")
        if self.n_jobs < 1:
            raise ValueError(f"n_jobs {self.n_jobs}: at least 1")
        if self.n_jobs > 1 and self.objective is not None:
            raise ValueError(
                "n_jobs > 1 runs the built-in subprocess objective; for your own objective start several "
                "scripts on one shared storage instead"
            )
        if self.grace_period <= 0 or self.heartbeat_interval <= 0:
            raise ValueError("grace_period and heartbeat_interval are seconds > 0")

    def objective_spec(self) -> Objective:
        """The metrics objective these settings describe (validates names, directions and aggregation)."""
        return Objective(self.metrics, self.directions, self.aggregation, self.weights)

    def resolved(self) -> StudyConfig:
        """A copy with the defaults that depend on others filled in: an absolute ``output_dir``
        (``outputs/verl-tune/<study_name>``) and the ``storage`` URL (``<output_dir>/study.db``), so that every
        worker process opens the same study whatever its working directory."""
        output_dir = os.path.abspath(self.output_dir or os.path.join("outputs", "verl-tune", self.study_name))
        return dataclasses.replace(self, output_dir=output_dir, storage=self.storage or default_storage(output_dir))

    def for_worker(self, index: int) -> StudyConfig:
        """The settings of local worker process ``index`` of ``n_jobs``: one job, no progress bar, no report (the
        tuner that started it writes the report)."""
        return dataclasses.replace(self, n_jobs=1, progress=False, report=False, worker_index=index)

    @property
    def heartbeat_seconds(self) -> float:
        """The heartbeat interval actually used: at most a quarter of ``grace_period``, so that a live trial always
        has a fresh heartbeat when another tuner checks it."""
        return max(1.0, min(self.heartbeat_interval, self.grace_period / 4))

    @classmethod
    def from_call(cls, config: StudyConfig | str | SearchSpace | None = None, **settings) -> StudyConfig:
        """What ``run_study`` was given: a StudyConfig (``settings`` then replace its fields), or the search space
        and keyword settings of the older call ``run_study(search_space, n_trials=..., ...)``."""
        if isinstance(config, StudyConfig):
            return dataclasses.replace(config, **settings) if settings else config
        if config is not None:
            if "search_space" in settings:
                raise TypeError("run_study() got the search space both as its first argument and as search_space=")
            settings["search_space"] = config
        return cls(**settings)
