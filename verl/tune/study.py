"""Studies: storage, samplers, pruners, the trial loop with failure handling, resume and parallel workers.

The loop is ours rather than ``study.optimize`` so that ``n_trials`` means trials *finished in the study* (a resumed
or second worker continues the count instead of starting its own), failures follow one policy, and trials left
RUNNING by a dead tuner are found, marked failed and queued again with the same parameters.
"""

from __future__ import annotations

import json
import math
import os
import socket
import threading
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from verl.tune import runner
from verl.tune.search_space import SearchSpace, check_against_config, load_search_space

HEARTBEAT = "verl:heartbeat"
HOST = "verl:host"
PID = "verl:pid"
PID_START = "verl:pid_start"
INTERRUPTED = "verl:interrupted"


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
    below/above the threshold at K consecutive logged points (the article's rule: reward std < 0.05 three times);
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
        from omegaconf import OmegaConf

        from verl.utils.config import ConfigError, load_config

        values = self.space.suggest(trial)
        trial_dir = os.path.abspath(os.path.join(self.study_dir, f"trial_{trial.number}"))
        os.makedirs(trial_dir, exist_ok=True)
        trial.set_user_attr("trial_dir", trial_dir)
        try:
            argv = runner.build_argv(self.base_argv, self.space.overrides(values), trial_dir)
            cfg = load_config("ppo_trainer", argv)
            from verl.trainer.main_ppo import check_config

            check_config(cfg)
        except ConfigError as e:
            raise TrialFailed(f"invalid config: {e}") from None
        with open(os.path.join(trial_dir, "config.yaml"), "w") as f:
            f.write(OmegaConf.to_yaml(cfg))
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


# --------------------------------------------------------------------------- storage, samplers, pruners
def default_storage(output_dir: str) -> str:
    return f"sqlite:///{os.path.abspath(os.path.join(output_dir, 'study.db'))}"


def make_storage(url: str | None, output_dir: str):
    """``sqlite:///path``, ``postgresql://user:pw@host/db``, ``mysql+pymysql://...`` (RDB) or ``journal:PATH`` (a
    journal file: several processes, or machines on one network file system, may share it)."""
    import optuna

    os.makedirs(output_dir, exist_ok=True)
    url = url or default_storage(output_dir)
    if url.startswith("journal:") or url.endswith((".log", ".journal")) and "://" not in url:
        path = url.split(":", 1)[1] if url.startswith("journal:") else url
        from optuna.storages.journal import JournalFileBackend, JournalFileOpenLock

        path = os.path.abspath(os.path.expanduser(path))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        return optuna.storages.JournalStorage(JournalFileBackend(path, lock_obj=JournalFileOpenLock(path)))
    if "://" not in url:  # a bare path: an SQLite file, as the default is
        url = "sqlite:///" + os.path.abspath(os.path.expanduser(url))
    if not url.startswith("sqlite"):
        return optuna.storages.RDBStorage(url, engine_kwargs={"pool_pre_ping": True})
    if url.startswith("sqlite:///"):
        os.makedirs(os.path.dirname(os.path.abspath(url[len("sqlite:///") :])) or ".", exist_ok=True)
    # sqlite3 starts a transaction only at the first write, so optuna's SELECT ... FOR UPDATE when a worker pops a
    # queued trial locks nothing: two workers both read WAITING and both run the trial (5 of 40 pops doubled with 4
    # processes). Taking the write lock at BEGIN serialises the read-then-write; other connections wait `timeout`.
    storage = optuna.storages.RDBStorage(url, engine_kwargs={"connect_args": {"timeout": 60, "isolation_level": None}})
    sqlite_begin_immediate(storage.engine)
    return storage


def sqlite_begin_immediate(engine) -> None:
    """Make every transaction on a pysqlite ``engine`` start with ``BEGIN IMMEDIATE`` (the SQLAlchemy recipe for
    serializable SQLite); the connection must be in autocommit mode (``isolation_level=None``) so that sqlite3 does
    not issue its own deferred BEGIN."""
    from sqlalchemy import event

    event.listen(engine, "begin", lambda conn: conn.exec_driver_sql("BEGIN IMMEDIATE"))


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


# --------------------------------------------------------------------------- resume
def _sys(trial, key, default=None):
    return trial.system_attrs.get(key, default)


def recover_stale_trials(study, grace_period: float = 120.0, max_retries: int = 2) -> list[int]:
    """Mark RUNNING trials whose tuner is gone as FAIL and queue them again (same parameters).

    A trial is stale when its tuner ran on this host and that process is dead (found at once, e.g. after kill -9),
    or when its heartbeat is older than ``grace_period`` seconds (a tuner on another machine died). Returns the
    numbers of the trials recovered."""
    from optuna.trial import TrialState

    storage = study._storage
    now, host = time.time(), socket.gethostname()
    recovered = []
    for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        t_host, pid = _sys(t, HOST), _sys(t, PID)
        if t_host == host and pid == os.getpid():
            continue  # ours
        if t_host == host and pid is not None:
            stale = not runner.pid_alive(int(pid), _sys(t, PID_START))
        else:
            beat = _sys(t, HEARTBEAT) or (t.datetime_start.timestamp() if t.datetime_start else now)
            stale = now - beat > grace_period
        if not stale:
            continue
        trial_dir = t.user_attrs.get("trial_dir")
        if trial_dir and runner.kill_orphan(trial_dir):
            print(f"[tune] ended the orphaned trainer of trial {t.number}")
        try:
            storage.set_trial_user_attr(
                t._trial_id, "fail_reason", "interrupted: its tuner stopped (Ctrl-C, kill or crash)"
            )
            storage.set_trial_system_attr(t._trial_id, INTERRUPTED, True)
            if not storage.set_trial_state_values(t._trial_id, TrialState.FAIL):
                continue
        except Exception:  # another worker recovered it first
            continue
        _requeue(study, t, max_retries)
        recovered.append(t.number)
    return recovered


def _requeue(study, t, max_retries: int) -> None:
    retries = int(t.user_attrs.get("retries", 0))
    if retries >= max_retries:
        print(f"[tune] trial {t.number} was interrupted {retries + 1} times: not queued again")
        return
    study.enqueue_trial(dict(t.params), user_attrs={"retry_of": t.number, "retries": retries + 1}, skip_if_exists=False)
    print(f"[tune] trial {t.number} was interrupted: queued again with the same parameters")


def _counts(study) -> dict[str, int]:
    from optuna.trial import TrialState

    c = {"done": 0, "running": 0, "waiting": 0, "complete": 0, "pruned": 0, "fail": 0}
    for t in study.get_trials(deepcopy=False):
        if t.state == TrialState.WAITING:
            c["waiting"] += 1
        elif t.state == TrialState.RUNNING:
            c["running"] += 1
        elif t.state == TrialState.FAIL and _sys(t, INTERRUPTED):
            continue  # retried under another number; not counted
        else:
            c["done"] += 1
            c[t.state.name.lower()] += 1
    return c


def best_value_text(study) -> str:
    try:
        if len(study.directions) > 1:
            return f"pareto={len(study.best_trials)}"
        return f"best={study.best_value:.4g} (#{study.best_trial.number})"
    except ValueError:
        return "best=-"


# --------------------------------------------------------------------------- the loop
def optimize(
    study,
    objective: Callable,
    n_trials: int,
    timeout: float | None = None,
    on_failure: str = "fail",
    failed_value: float | Sequence[float] | None = None,
    grace_period: float = 120.0,
    heartbeat_interval: float = 10.0,
    max_retries: int = 2,
    progress: bool = True,
    log: Callable[[str], None] = print,
) -> int:
    """Run trials until the study holds ``n_trials`` finished ones (or ``timeout`` seconds pass); returns how many
    this call ran. ``on_failure``: ``fail`` records a failed trial as FAIL; ``worst`` records ``failed_value``."""
    import optuna
    from optuna.trial import TrialState

    start = time.time()
    storage = study._storage
    ran = 0
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=n_trials, desc="trials", unit="trial", dynamic_ncols=True)
    try:
        while True:
            recovered = recover_stale_trials(study, grace_period, max_retries)
            c = _counts(study)
            if bar is not None:
                bar.n = min(c["done"], n_trials)
                bar.set_postfix_str(best_value_text(study))
                bar.refresh()
            if c["waiting"] == 0 and c["done"] + c["running"] >= n_trials:
                break
            if timeout is not None and time.time() - start > timeout:
                log(f"[tune] --timeout {timeout:g} s reached: no new trials")
                break
            if recovered:
                log(f"[tune] recovered interrupted trials {recovered}")
            trial = study.ask()
            storage.set_trial_system_attr(trial._trial_id, HOST, socket.gethostname())
            storage.set_trial_system_attr(trial._trial_id, PID, os.getpid())
            storage.set_trial_system_attr(trial._trial_id, PID_START, runner.proc_start_time(os.getpid()))
            storage.set_trial_system_attr(trial._trial_id, HEARTBEAT, time.time())
            stop_beat = threading.Event()
            beat = threading.Thread(
                target=_beat, args=(storage, trial._trial_id, heartbeat_interval, stop_beat), daemon=True
            )
            beat.start()
            ran += 1
            try:
                values = objective(trial)
                values = [float(values)] if not isinstance(values, (list, tuple)) else [float(v) for v in values]
                if any(not math.isfinite(v) for v in values):
                    raise TrialFailed(f"objective value is {values} (NaN or inf)")
                state, msg = TrialState.COMPLETE, f"value {_fmt(values)}"
            except optuna.TrialPruned as e:
                state, values, msg = TrialState.PRUNED, None, str(e) or "pruned"
            except KeyboardInterrupt:
                stop_beat.set()
                storage.set_trial_user_attr(trial._trial_id, "fail_reason", "interrupted by Ctrl-C")
                storage.set_trial_system_attr(trial._trial_id, INTERRUPTED, True)
                study.tell(trial, state=TrialState.FAIL)
                _requeue(study, _frozen(study, trial), max_retries)
                raise
            except Exception as e:
                reason = e.reason if isinstance(e, TrialFailed) else f"{type(e).__name__}: {e}"
                tail = e.tail if isinstance(e, TrialFailed) else _traceback_tail(e)
                trial.set_user_attr("fail_reason", reason[:1000])
                if tail:
                    trial.set_user_attr("error_tail", tail[-3000:])
                if on_failure == "worst" and failed_value is not None:
                    fv = [failed_value] if not isinstance(failed_value, (list, tuple)) else list(failed_value)
                    values = fv * len(study.directions) if len(fv) == 1 else fv
                    trial.set_user_attr("failed", True)
                    state, msg = TrialState.COMPLETE, f"FAILED ({reason}); recorded as worst value {_fmt(values)}"
                else:
                    state, values, msg = TrialState.FAIL, None, f"FAILED: {reason}"
            finally:
                stop_beat.set()
            try:
                study.tell(trial, values if state == TrialState.COMPLETE else None, state=state)
            except (ValueError, RuntimeError) as e:  # another worker judged this trial dead and requeued it
                msg = f"{msg}; its result was not recorded: {e}"
            line = f"[tune] trial {trial.number} {msg}; params {_fmt_params(trial.params)}"
            if bar is not None:
                bar.write(line)
            else:
                log(line)
    finally:
        if bar is not None:
            bar.close()
    return ran


def _frozen(study, trial):
    return study._storage.get_trial(trial._trial_id)


def _beat(storage, trial_id: int, interval: float, stop: threading.Event) -> None:
    while not stop.wait(interval):
        try:
            storage.set_trial_system_attr(trial_id, HEARTBEAT, time.time())
        except Exception:
            return  # finished meanwhile


def _traceback_tail(e: BaseException) -> str:
    import traceback

    return "".join(traceback.format_exception(type(e), e, e.__traceback__))[-3000:]


def _fmt(values) -> str:
    return ", ".join(f"{v:.4g}" for v in values)


def _fmt_params(params: dict) -> str:
    return ", ".join(
        f"{k.rsplit('.', 1)[-1]}={v:.3g}" if isinstance(v, float) else f"{k.rsplit('.', 1)[-1]}={v}"
        for k, v in params.items()
    )


# --------------------------------------------------------------------------- the entry point for scripts
@dataclass
class StudyResult:
    study: Any
    output_dir: str
    storage: str
    report: dict | None = None

    @property
    def best_params(self) -> dict:
        return self.study.best_trial.params if len(self.study.directions) == 1 else {}


def run_study(
    search_space: str | SearchSpace | None = None,
    base_overrides: Sequence[str] = (),
    metrics: Sequence[str] | str = ("val-core/acc",),
    directions: Sequence[str] | str = ("maximize",),
    aggregation: str = "last",
    weights: Sequence[float] | None = None,
    n_trials: int = 20,
    timeout: float | None = None,
    trial_timeout: float | None = None,
    storage: str | None = None,
    study_name: str = "ppo-tune",
    output_dir: str | None = None,
    sampler: str = "tpe",
    pruner: str = "median",
    seed: int | None = None,
    n_jobs: int = 1,
    on_failure: str = "fail",
    failed_value: float | Sequence[float] | None = None,
    early_stop: str | None = None,
    objective: Callable | None = None,
    enqueue_base: bool = False,
    max_retries: int = 2,
    grace_period: float = 120.0,
    progress: bool = True,
    report: bool = True,
    poll_interval: float = 1.0,
    _worker_index: int = 0,
) -> StudyResult:
    """Create or resume the study ``study_name`` in ``storage`` and run trials until it holds ``n_trials``.

    By default each trial runs ``python -m verl.trainer.main_ppo`` in a subprocess with ``base_overrides`` + the
    sampled parameters (see ``SubprocessObjective``). Pass ``objective`` (a ``fn(trial) -> float | list``) to use
    your own, e.g. the article's pattern with ``PPOTrainer`` in-process (then ``search_space`` is unused).
    Returns the study and writes the report (best params and config, trials table, plots) under ``output_dir``."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    output_dir = os.path.abspath(output_dir or os.path.join("outputs", "verl-tune", study_name))
    os.makedirs(output_dir, exist_ok=True)
    storage_url = storage or default_storage(output_dir)
    obj_spec = Objective(
        list([metrics] if isinstance(metrics, str) else metrics),
        list([directions] if isinstance(directions, str) else directions),
        aggregation,
        list(weights) if weights else None,
    )
    if objective is None:
        space = search_space if isinstance(search_space, SearchSpace) else load_search_space(search_space)
        space, notes = check_against_config(space, list(base_overrides), drop_unknown=search_space is None)
        if _worker_index == 0:
            for n in notes:
                print(f"[tune] note: {n}")
        objective_fn = SubprocessObjective(
            space, base_overrides, obj_spec, output_dir, trial_timeout, early_stop, poll_interval
        )
    else:
        space = (
            search_space
            if isinstance(search_space, SearchSpace)
            else (load_search_space(search_space) if search_space else None)
        )
        objective_fn = objective
    from verl.utils.config import load_config

    base_cfg = load_config("ppo_trainer", list(base_overrides)) if objective is None else None
    max_steps = int(base_cfg.trainer.total_training_steps or 100) if base_cfg is not None else 100
    min_steps = max(1, int(base_cfg.trainer.test_freq)) if base_cfg is not None else 1
    sampler_obj = (
        make_sampler(sampler, None if seed is None else seed + _worker_index, space, obj_spec.multi, n_trials)
        if space is not None or sampler != "grid"
        else None
    )
    for attempt in range(5):  # workers starting together race to create the tables / the study: retry
        try:
            study = optuna.create_study(
                storage=make_storage(storage_url, output_dir),
                study_name=study_name,
                directions=obj_spec.study_directions,
                sampler=sampler_obj,
                pruner=make_pruner(pruner, max_steps, min_steps),
                load_if_exists=True,
            )
            break
        except ValueError:  # a bad setting (pruner, storage URL), not a race: retrying cannot help
            raise
        except Exception:
            if attempt == 4:
                raise
            time.sleep(0.5 + attempt)
    _check_resume_compatible(study, study_name, storage_url, obj_spec, space)
    if _worker_index == 0:
        meta = {
            "objective": obj_spec.__dict__,
            "base_overrides": list(base_overrides),
            "search_space": space.source if space is not None else None,
            "params": list(space.params) if space is not None else None,
            "storage": storage_url,
        }
        for k, v in meta.items():
            study.set_user_attr(k, v)
        if enqueue_base and space is not None and not study.trials:
            _enqueue_base(study, space, base_overrides)
        print(
            f"[tune] study {study_name!r} in {storage_url}: {len(study.trials)} trials so far; objective "
            f"{obj_spec.describe()}; output {output_dir}"
        )
    workers = []
    if n_jobs > 1:
        if objective is not None:
            raise ValueError(
                "n_jobs > 1 runs the built-in subprocess objective; for your own objective start several "
                "scripts on one shared storage instead"
            )
        import multiprocessing as mp

        ctx = mp.get_context("spawn")
        kwargs = dict(
            search_space=search_space,
            base_overrides=list(base_overrides),
            metrics=obj_spec.metrics,
            directions=obj_spec.directions,
            aggregation=aggregation,
            weights=weights,
            n_trials=n_trials,
            timeout=timeout,
            trial_timeout=trial_timeout,
            storage=storage_url,
            study_name=study_name,
            output_dir=output_dir,
            sampler=sampler,
            pruner=pruner,
            seed=seed,
            n_jobs=1,
            on_failure=on_failure,
            failed_value=failed_value,
            early_stop=early_stop,
            max_retries=max_retries,
            grace_period=grace_period,
            progress=False,
            report=False,
            poll_interval=poll_interval,
        )
        for i in range(1, n_jobs):
            p = ctx.Process(target=_worker, kwargs={**kwargs, "_worker_index": i}, daemon=False)
            p.start()
            workers.append(p)
    try:
        optimize(
            study,
            objective_fn,
            n_trials,
            timeout,
            on_failure,
            failed_value,
            grace_period,
            max_retries=max_retries,
            progress=progress,
        )
    finally:
        for p in workers:
            p.join()
    result = StudyResult(study, output_dir, storage_url)
    if report:
        from verl.tune.report import write_report

        result.report = write_report(study, output_dir, obj_spec)
    return result


def _worker(**kwargs) -> None:
    run_study(**kwargs)


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
    from omegaconf import OmegaConf

    from verl.utils.config import load_config

    cfg = load_config("ppo_trainer", [*base_overrides, *space.overrides({})])
    params = {}
    for path, p in space.params.items():
        v = OmegaConf.select(cfg, path)
        if p.type == "categorical" and v not in p.choices:
            return
        if p.type != "categorical" and (v is None or not (p.low <= v <= p.high)):
            return  # the base value is outside the search (or off): no baseline trial
        params[path] = v
    study.enqueue_trial(params, user_attrs={"baseline": True})
