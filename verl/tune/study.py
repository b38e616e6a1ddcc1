"""Studies: samplers, pruners and ``run_study``, the entry point of ``verl tune`` and of scripts.

Optuna runs the loop: ``study.optimize`` with our callbacks (``verl.tune.loop``), its heartbeat and stale-trial
retry on RDB storages plus a same-host check for dead tuners (``verl.tune.recovery``). Here: opening the study a
``StudyConfig`` describes, refusing to resume it with another objective or distribution kind, the local worker
processes of ``n_jobs`` (each receives the whole StudyConfig) and the report.
"""

from __future__ import annotations

import os
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from verl.tune.config import StudyConfig
from verl.tune.loop import optimize
from verl.tune.objective import (
    EarlyStop,
    Objective,
    SubprocessObjective,
    TrialFailed,
    _Watch,  # noqa: F401  (tests import it from here, where it used to live)
)
from verl.tune.recovery import WORKER, RetryInterruptedTrial, count_trials, recover_stale_trials
from verl.tune.search_space import SearchSpace, check_against_config, load_search_space
from verl.tune.storage import default_storage, disk_full_error, make_storage

__all__ = [  # the objective, storage and recovery names are re-exported: scripts and tests import them from here
    "EarlyStop",
    "Objective",
    "StudyConfig",
    "StudyResult",
    "SubprocessObjective",
    "TrialFailed",
    "WORKER",
    "count_trials",
    "default_storage",
    "make_pruner",
    "make_sampler",
    "make_storage",
    "recover_stale_trials",
    "run_study",
]


def make_sampler(name: str, seed: int | None, space: SearchSpace, multi: bool, n_trials: int):
    import optuna

    name = name.lower()
    if name == "tpe":
        startup = max(2, min(10, n_trials // 3))
        return optuna.samplers.TPESampler(seed=seed, n_startup_trials=startup, multivariate=True, constant_liar=True)
    if name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    if name in ("cmaes", "cma-es", "cma"):
        if multi:
            raise ValueError("the CMA-ES sampler is single-objective: use tpe or nsga2 for several metrics")
        try:
            import cmaes  # noqa: F401
        except ImportError:
            raise ImportError("the CMA-ES sampler needs the cmaes package: pip install cmaes") from None
        return optuna.samplers.CmaEsSampler(seed=seed, warn_independent_sampling=False)
    if name == "grid":
        return optuna.samplers.GridSampler(space.grid(), seed=seed)
    if name in ("nsga2", "nsgaii"):
        return optuna.samplers.NSGAIISampler(seed=seed)
    raise ValueError(f"unknown sampler {name!r}: use tpe, random, cmaes, grid or nsga2")


def make_pruner(spec: str, max_steps: int, min_steps: int = 1):
    """``median``, ``hyperband``, ``none``, ``percentile:P`` or ``threshold:LOWER`` (prune a trial whose value is
    below LOWER at any report; for tests and hard floors)."""
    import optuna

    name, _, arg = spec.lower().partition(":")
    if name == "median":
        return optuna.pruners.MedianPruner(n_startup_trials=2, n_warmup_steps=0)
    if name == "hyperband":
        return optuna.pruners.HyperbandPruner(
            min_resource=max(1, min_steps), max_resource=max(max_steps, min_steps + 1), reduction_factor=3
        )
    if name in ("none", "nop", "off"):
        return optuna.pruners.NopPruner()
    try:
        if name == "percentile":
            return optuna.pruners.PercentilePruner(float(arg or 25.0), n_startup_trials=2)
        if name == "threshold":
            return optuna.pruners.ThresholdPruner(lower=float(arg))
    except ValueError:
        raise ValueError(
            f"--pruner {spec!r}: percentile:P needs a number P in 0..100, threshold:LOWER a number"
        ) from None
    raise ValueError(f"unknown pruner {spec!r}: use median, hyperband, none, percentile:P or threshold:LOWER")


@dataclass
class StudyResult:
    study: Any
    output_dir: str
    storage: str
    report: dict | None = None

    @property
    def best_params(self) -> dict:
        return self.study.best_trial.params if len(self.study.directions) == 1 else {}


def run_study(config: StudyConfig | str | SearchSpace | None = None, **settings: Any) -> StudyResult:
    """Create or resume the study a :class:`StudyConfig` describes and run trials until it holds ``n_trials``.

    ``run_study(StudyConfig(...))``, or the same settings as keywords: ``run_study(search_space, n_trials=12,
    base_overrides=[...])`` (keywords given with a StudyConfig replace its fields). By default each trial runs
    ``python -m verl.trainer.main_ppo`` in a subprocess with ``base_overrides`` + the sampled parameters (see
    ``SubprocessObjective``). ``objective=fn`` (``fn(trial) -> float | list``) uses your own, e.g. the
    pattern with ``PPOTrainer`` in-process (then ``search_space`` is optional). Returns the study and writes the
    report (best params and config, trials table, plots) under ``output_dir``."""
    import optuna

    cfg = StudyConfig.from_call(config, **settings).resolved()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    os.makedirs(cfg.output_dir, exist_ok=True)
    obj_spec = cfg.objective_spec()
    objective_fn, space = _objective_and_space(cfg, obj_spec)
    retry = RetryInterruptedTrial(cfg.max_retries)
    study, storage = _open_study(cfg, obj_spec, space, retry)
    _check_resume_compatible(study, cfg.study_name, cfg.storage, obj_spec, space)
    if cfg.worker_index == 0:
        _introduce(study, cfg, obj_spec, space)
    workers = _start_workers(cfg)
    try:
        optimize(
            study,
            objective_fn,
            cfg.n_trials,
            storage,
            retry,
            timeout=cfg.timeout,
            on_failure=cfg.on_failure,
            failed_value=cfg.failed_value,
            progress=cfg.progress,
        )
    except Exception as e:  # a full disk under the storage file: one error with the fix, not Optuna's traceback
        full = disk_full_error(cfg.storage, e, study)
        if full is None:
            raise
        raise full from e
    finally:
        for p in workers:
            p.join()
    result = StudyResult(study, cfg.output_dir, cfg.storage)
    if cfg.report:
        from verl.tune.report import write_report

        result.report = write_report(study, cfg.output_dir, obj_spec)
    return result


def _objective_and_space(cfg: StudyConfig, obj_spec: Objective):
    """The objective trials run and the search space the sampler sees (None for your own objective without one).
    The built-in objective's space is checked against the config schema first (a typo fails here, not per trial)."""
    if cfg.objective is not None:
        space = cfg.search_space
        if not isinstance(space, SearchSpace):
            space = load_search_space(space) if space else None
        return cfg.objective, space
    space = cfg.search_space if isinstance(cfg.search_space, SearchSpace) else load_search_space(cfg.search_space)
    space, notes = check_against_config(space, cfg.base_overrides, drop_unknown=cfg.search_space is None)
    if cfg.worker_index == 0:
        for n in notes:
            print(f"[tune] note: {n}")
    objective = SubprocessObjective(
        space, cfg.base_overrides, obj_spec, cfg.output_dir, cfg.trial_timeout, cfg.early_stop, cfg.poll_interval
    )
    return objective, space


def _pruner_steps(cfg: StudyConfig) -> tuple[int, int]:
    """(training steps of a trial, steps between validations): the resource range of the hyperband pruner."""
    if cfg.objective is not None:
        return 100, 1
    from verl.utils.config import load_config

    base_cfg = load_config("ppo_trainer", cfg.base_overrides)
    return int(base_cfg.trainer.total_training_steps or 100), max(1, int(base_cfg.trainer.test_freq))


def _open_study(cfg: StudyConfig, obj_spec: Objective, space, retry: RetryInterruptedTrial):
    """Create or load the study; returns it and the storage it lives in (with Optuna's heartbeat on RDB storages,
    ``retry`` as the stale-trial callback). Workers starting together race to create the tables or the study:
    that is retried, a bad setting (pruner, storage URL) is not."""
    import optuna

    sampler = None
    if space is not None or cfg.sampler != "grid":
        seed = None if cfg.seed is None else cfg.seed + cfg.worker_index
        sampler = make_sampler(cfg.sampler, seed, space, obj_spec.multi, cfg.n_trials)
    pruner = make_pruner(cfg.pruner, *_pruner_steps(cfg))
    for attempt in range(5):
        try:
            storage = make_storage(
                cfg.storage,
                cfg.output_dir,
                heartbeat_interval=cfg.heartbeat_seconds,
                grace_period=cfg.grace_period,
                stale_trial_callback=retry,
            )
            study = optuna.create_study(
                storage=storage,
                study_name=cfg.study_name,
                directions=obj_spec.study_directions,
                sampler=sampler,
                pruner=pruner,
                load_if_exists=True,
            )
            return study, storage
        except ValueError:
            raise
        except Exception:
            if attempt == 4:
                raise
            time.sleep(0.5 + attempt)
    raise AssertionError("unreachable")


def _introduce(study, cfg: StudyConfig, obj_spec: Objective, space) -> None:
    """The first tuner's bookkeeping: the study's settings as study attributes (the resume check reads them), the
    baseline trial with ``enqueue_base``, one line saying what runs where."""
    meta = {
        "objective": obj_spec.__dict__,
        "base_overrides": list(cfg.base_overrides),
        "search_space": space.source if space is not None else None,
        "params": list(space.params) if space is not None else None,
        "storage": cfg.storage,
    }
    for k, v in meta.items():
        study.set_user_attr(k, v)
    if cfg.enqueue_base and space is not None and not study.trials:
        _enqueue_base(study, space, cfg.base_overrides)
    print(
        f"[tune] study {cfg.study_name!r} in {cfg.storage}: {len(study.trials)} trials so far; objective "
        f"{obj_spec.describe()}; output {cfg.output_dir}"
    )


def _start_workers(cfg: StudyConfig) -> list:
    """``n_jobs - 1`` local worker processes on the same study, each given the whole StudyConfig (spawned: no
    database connection is inherited)."""
    if cfg.n_jobs <= 1:
        return []
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    workers = []
    for i in range(1, cfg.n_jobs):
        p = ctx.Process(target=_worker, args=(cfg.for_worker(i),), daemon=False)
        p.start()
        workers.append(p)
    return workers


def _worker(cfg: StudyConfig) -> None:
    run_study(cfg)


def _check_resume_compatible(study, study_name: str, storage_url: str, obj_spec, space) -> None:
    """A study resumed with another objective or another kind of distribution for a parameter would mix results
    (or fail every new trial): one error naming what changed, before any trial runs."""
    where = f"study {study_name!r} in {storage_url}"
    fix = "use a new --study-name (or --output-dir), or the study's own settings"
    stored = study.user_attrs.get("objective")
    if stored and (
        list(stored.get("metrics", [])) != list(obj_spec.metrics)
        or list(stored.get("directions", [])) != list(obj_spec.directions)
    ):
        raise ValueError(
            f"{where} was created with objective {stored.get('metrics')} {stored.get('directions')}, not "
            f"{obj_spec.metrics} {obj_spec.directions}: {fix}"
        )
    if len(study.directions) != len(obj_spec.study_directions):
        raise ValueError(
            f"{where} has {len(study.directions)} objective(s), not {len(obj_spec.study_directions)}: {fix}"
        )
    if space is None:
        return
    import optuna.distributions

    for trial in study.trials:
        if not trial.distributions:  # e.g. a trial that failed before sampling
            continue
        for name, old in trial.distributions.items():
            if name not in space.params:
                continue
            try:
                optuna.distributions.check_distribution_compatibility(old, space.params[name].distribution())
            except ValueError:
                raise ValueError(
                    f"{where}: parameter {name!r} was searched as {type(old).__name__} in trial {trial.number}, "
                    f"the search space now makes it {type(space.params[name].distribution()).__name__}: {fix}"
                ) from None
        return  # the distributions of one trial are those of all (one search space per study)


def _enqueue_base(study, space: SearchSpace, base_overrides: Sequence[str]) -> None:
    """Queue the base config's own values as the first trial (a baseline inside the study)."""
    from verl.utils.config import load_config, select

    cfg = load_config("ppo_trainer", [*base_overrides, *space.overrides({})])
    params = {}
    for path, p in space.params.items():
        v = select(cfg, path, default=None)
        if p.type == "categorical" and v not in p.choices:
            return
        if p.type != "categorical" and (v is None or not (p.low <= v <= p.high)):
            return  # the base value is outside the search (or off): no baseline trial
        params[path] = v
    study.enqueue_trial(params, user_attrs={"baseline": True})
