"""Automated hyperparameter search with Optuna (``python -m verl.trainer.main_tune``, ``verl tune``; docs/tune.md).

    from verl.tune import run_study
    result = run_study("examples/tune/search_space.yaml", base_overrides=["trainer.total_training_steps=20"],
                       n_trials=12)
    print(result.study.best_params)

Every setting of a study is a field of :class:`StudyConfig` (``verl.tune.config``); ``run_study`` takes one, or the
same names as keywords as above, and the worker processes of ``n_jobs`` receive the whole object:

    from verl.tune import StudyConfig, run_study
    run_study(StudyConfig(search_space="examples/tune/search_space.yaml", n_trials=12, n_jobs=2))

Optuna runs the loop (``study.optimize``), its heartbeat finds trials of a tuner that died on an RDB storage and
its retry callback queues them again with the same parameters (``verl.tune.recovery``; a tuner on the same host
is found dead at once, which also covers journal storage, which has no heartbeat).

An ``objective(trial)`` that trains in-process works too (docs/tune.md, "Your own objective"): sample with ``suggest_overrides(trial)``,
train with ``verl.trainer.main_ppo.run_ppo`` (or ``PPOTrainer``) and pass a :class:`PruningCallback` so pruners
see each validation; ``run_study(objective=objective)`` then adds storage, resume, failure handling and the report.
"""

from verl.tune.callbacks import PruningCallback
from verl.tune.config import StudyConfig
from verl.tune.search_space import (
    DEFAULT_SEARCH_SPACE_YAML,
    Param,
    SearchSpace,
    SearchSpaceError,
    load_search_space,
    parse_search_space,
)
from verl.tune.study import (
    EarlyStop,
    Objective,
    StudyResult,
    SubprocessObjective,
    TrialFailed,
    make_pruner,
    make_sampler,
    make_storage,
    recover_stale_trials,
    run_study,
)


def suggest_overrides(trial, search_space: "str | SearchSpace | None" = None) -> list[str]:
    """Sample ``search_space`` (a file, a SearchSpace, or None for the default space) on an Optuna ``trial``;
    returns ``key=value`` overrides (fixed block included) for ``load_config`` / ``main_ppo``."""
    space = search_space if isinstance(search_space, SearchSpace) else load_search_space(search_space)
    return space.overrides(space.suggest(trial))


__all__ = [
    "DEFAULT_SEARCH_SPACE_YAML",
    "EarlyStop",
    "Objective",
    "Param",
    "PruningCallback",
    "SearchSpace",
    "SearchSpaceError",
    "StudyConfig",
    "StudyResult",
    "SubprocessObjective",
    "TrialFailed",
    "load_search_space",
    "make_pruner",
    "make_sampler",
    "make_storage",
    "parse_search_space",
    "recover_stale_trials",
    "run_study",
    "suggest_overrides",
]
