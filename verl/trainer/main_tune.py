"""Hyperparameter search over the main job with Optuna (docs/tune.md).

    python -m verl.trainer.main_tune --n-trials 20                          # default space, val-core/acc
    python -m verl.trainer.main_tune --search-space examples/tune/search_space.yaml \\
        --n-trials 30 --timeout 3600 --pruner hyperband trainer.total_training_steps=40
    python -m verl.trainer.main_tune --metric val-core/acc:max --metric response_length/mean:min   # Pareto front
    python -m verl.trainer.main_tune --storage postgresql+psycopg2://user:pw@db/optuna --study-name shared  # several machines

Every ``key=value`` (and ``--config FILE``) after the options is a base override given to every trial. Running
the same command again resumes the study from its storage (default: ``<output-dir>/study.db``).
"""

from __future__ import annotations

import argparse
import sys

from verl.tune.search_space import DEFAULT_SEARCH_SPACE_YAML


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="verl tune",
        description="Optuna hyperparameter search: each trial runs python -m verl.trainer.main_ppo in a subprocess.",
        epilog="Trailing key=value arguments (and --config FILE) are base overrides for every trial.",
    )
    p.add_argument("--search-space", default=None, help="YAML: config path -> distribution (default: built-in space)")
    p.add_argument("--config", action="append", default=[], help="base config YAML for every trial (repeatable)")
    p.add_argument(
        "--metric",
        action="append",
        default=None,
        help="objective metric[:max|min], repeatable (several: multi-objective). Default val-core/acc:max",
    )
    p.add_argument("--aggregation", default="last", help="last | best | mean | meanK (mean of the last K points)")
    p.add_argument("--weights", default=None, help="comma list: fold the metrics into one weighted score (maximized)")
    p.add_argument("--n-trials", type=int, default=20, help="finished trials the study should hold (default 20)")
    p.add_argument("--timeout", type=float, default=None, help="seconds after which this tuner starts no new trial")
    p.add_argument("--trial-timeout", type=float, default=None, help="wall-clock limit of one trial in seconds")
    p.add_argument(
        "--storage",
        default=None,
        help="sqlite:///f.db | postgresql+psycopg2://... | mysql+pymysql://... | journal:PATH (default: sqlite in output dir)",
    )
    p.add_argument("--study-name", default="ppo-tune")
    p.add_argument("--output-dir", default=None, help="default outputs/verl-tune/<study-name>")
    p.add_argument("--sampler", default="tpe", help="tpe (default) | random | cmaes | grid | nsga2")
    p.add_argument(
        "--pruner", default="median", help="median (default) | hyperband | none | percentile:P | threshold:LOWER"
    )
    p.add_argument("--seed", type=int, default=None, help="sampler seed (worker i uses seed + i)")
    p.add_argument("--n-jobs", type=int, default=1, help="local worker processes sharing the study")
    p.add_argument(
        "--on-failure",
        choices=["fail", "worst"],
        default="fail",
        help="fail: record FAIL (default); worst: record --failed-value",
    )
    p.add_argument(
        "--failed-value", type=float, default=None, help="value recorded for a failed trial with --on-failure worst"
    )
    p.add_argument(
        "--early-stop",
        default=None,
        help="METRIC<THRESH:K | METRIC>THRESH:K | plateau:K[:MIN_DELTA], e.g. 'eval/reward_std<0.05:3'",
    )
    p.add_argument("--enqueue-base", action="store_true", help="run the base config's own values as the first trial")
    p.add_argument("--max-retries", type=int, default=2, help="times an interrupted trial is queued again")
    p.add_argument(
        "--grace-period",
        type=float,
        default=120.0,
        help="seconds without Optuna's heartbeat (RDB storages) before another machine's RUNNING trial counts as dead",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--no-report", action="store_true", help="skip the end-of-study report and plots")
    p.add_argument("--print-default-space", action="store_true", help="print the built-in search space and exit")
    return p


def study_config(args: argparse.Namespace, base_overrides: list[str]):
    """The :class:`verl.tune.StudyConfig` the parsed options describe; a bad option value exits with its name."""
    from verl.tune import Objective, StudyConfig

    try:
        weights = [float(w) for w in args.weights.split(",")] if args.weights else None
    except ValueError:
        raise SystemExit(f"error: --weights {args.weights!r}: write comma-separated numbers, e.g. 0.6,0.4") from None
    if args.on_failure == "worst" and args.failed_value is None:
        raise SystemExit("error: --on-failure worst records failed trials with --failed-value V: give V")
    try:
        obj = Objective.parse(args.metric or ["val-core/acc:max"], args.aggregation, weights)
    except ValueError as e:
        raise SystemExit(f"error: --metric/--aggregation/--weights: {e}") from None
    return StudyConfig(
        search_space=args.search_space,
        base_overrides=base_overrides,
        metrics=obj.metrics,
        directions=obj.directions,
        aggregation=obj.aggregation,
        weights=obj.weights,
        n_trials=args.n_trials,
        timeout=args.timeout,
        trial_timeout=args.trial_timeout,
        storage=args.storage,
        study_name=args.study_name,
        output_dir=args.output_dir,
        sampler=args.sampler,
        pruner=args.pruner,
        seed=args.seed,
        n_jobs=args.n_jobs,
        on_failure=args.on_failure,
        failed_value=args.failed_value,
        early_stop=args.early_stop,
        enqueue_base=args.enqueue_base,
        max_retries=args.max_retries,
        grace_period=args.grace_period,
        progress=not args.no_progress,
        report=not args.no_report,
    )


def main(argv: list[str] | None = None):
    args, rest = build_parser().parse_known_args(sys.argv[1:] if argv is None else argv)
    if args.print_default_space:
        print(DEFAULT_SEARCH_SPACE_YAML, end="")
        return None
    bad = [a for a in rest if a.startswith("-")]
    if bad:
        raise SystemExit(f"error: unknown option {bad[0]!r} (see --help); base overrides are written key=value")
    base = [x for f in args.config for x in ("--config", f)] + rest
    from verl.tune import run_study

    result = run_study(study_config(args, base))
    rep = result.report or {}
    if "best_value" in rep:
        print(
            f"best trial {rep['best_trial']}: {rep['best_value']:.4g} with "
            + " ".join(f"{k}={v}" for k, v in rep["best_params"].items())
        )
        if rep.get("best_config"):
            print(f"ready to run: python -m verl.trainer.main_ppo --config {rep['best_config']}")
    elif "pareto_front" in rep:
        print(
            f"Pareto front: {len(rep['pareto_front'])} trials: "
            + ", ".join(f"#{t['number']} {t['values']}" for t in rep["pareto_front"])
        )
    print(f"report: {result.output_dir}/report.md")
    return result


if __name__ == "__main__":
    from verl.tune.search_space import SearchSpaceError
    from verl.utils.config import ConfigError
    from verl.utils.disk import DiskFullError

    try:
        main()
    except KeyboardInterrupt:
        sys.exit("interrupted: run the same command again to resume the study")
    except (ConfigError, SearchSpaceError, ValueError, ImportError, DiskFullError) as e:
        sys.exit(f"error: {e}")
