"""The trial loop: Optuna's ``study.optimize`` with our failure policy around the objective and three callbacks.

What Optuna does: asking for trials (queued ones first), the heartbeat thread of the running trial and, before
each new trial, failing heartbeat-stale trials (RDB storages, see ``verl.tune.storage``), telling results, the
timeout (no new trial after ``timeout`` seconds). What we add:

- ``RecordedObjective`` wraps the objective: it claims the trial for this tuner (``verl.tune.recovery``), turns an
  exception into the trial's ``fail_reason`` and ``error_tail`` (``on_failure="fail"``: FAIL; ``"worst"``:
  COMPLETE with ``failed_value`` and ``failed=true``), and on Ctrl-C queues the trial again before Optuna fails it.
- After each trial: one line saying how it ended, recovery of trials whose tuner died, the progress bar, and
  ``StudyBudget`` (``MaxTrialsCallback``'s rule on the study's own count) stopping the loop.
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
import traceback
from collections.abc import Callable, Sequence

from verl.tune.objective import TrialFailed
from verl.tune.recovery import (
    RetryInterruptedTrial,
    claim,
    count_trials,
    is_interrupted,
    recover_stale_trials,
    retried_numbers,
)


class RecordedObjective:
    """The objective as ``study.optimize`` calls it: every way a trial can end is recorded on the trial itself."""

    def __init__(
        self,
        objective: Callable,
        study,
        retry: RetryInterruptedTrial,
        on_failure: str = "fail",
        failed_value: float | Sequence[float] | None = None,
    ):
        self.objective, self.study, self.retry = objective, study, retry
        self.on_failure, self.failed_value = on_failure, failed_value
        self.current: int | None = None  # the trial between ask and its callbacks

    def __call__(self, trial) -> list[float]:
        import optuna

        self.current = trial.number
        claim(trial)
        try:
            return self._checked_values(self.objective(trial))
        except optuna.TrialPruned:
            raise
        except KeyboardInterrupt:
            trial.set_user_attr("fail_reason", "interrupted by Ctrl-C")
            self.retry(self.study, self._frozen(trial.number))
            raise  # optuna fails the trial and stops
        except Exception as e:
            return self._record_failure(trial, e)

    def _checked_values(self, values) -> list[float]:
        """Values Optuna can store as COMPLETE; anything else is a failed trial with the reason."""
        values = [float(values)] if not isinstance(values, (list, tuple)) else [float(v) for v in values]
        if any(not math.isfinite(v) for v in values):
            raise TrialFailed(f"objective value is {values} (NaN or inf)")
        if len(values) != len(self.study.directions):
            raise TrialFailed(f"the objective returned {len(values)} values for {len(self.study.directions)} metrics")
        return values

    def _record_failure(self, trial, e: Exception) -> list[float]:
        reason = e.reason if isinstance(e, TrialFailed) else f"{type(e).__name__}: {e}"
        tail = e.tail if isinstance(e, TrialFailed) else _traceback_tail(e)
        trial.set_user_attr("fail_reason", reason[:1000])
        if tail:
            trial.set_user_attr("error_tail", tail[-3000:])
        if self.on_failure == "worst" and self.failed_value is not None:
            trial.set_user_attr("failed", True)
            fv = list(self.failed_value) if isinstance(self.failed_value, (list, tuple)) else [self.failed_value]
            return [float(v) for v in (fv * len(self.study.directions) if len(fv) == 1 else fv)]
        raise TrialFailed(reason) from None  # in optimize's `catch`: FAIL, and the study goes on

    def _frozen(self, number: int):
        return next(t for t in self.study.get_trials(deepcopy=False) if t.number == number)

    def lost_current_trial(self) -> bool:
        """Whether another tuner judged the trial this tuner runs dead (its heartbeat was held up past the grace
        period) and failed it, so that Optuna could not record our result."""
        if self.current is None:
            return False
        trials = self.study.get_trials(deepcopy=False)
        return is_interrupted(next(t for t in trials if t.number == self.current), retried_numbers(trials))


class StudyBudget:
    """``optuna.study.MaxTrialsCallback`` counted the way ``n_trials`` means here: finished trials of the whole study,
    not counting interrupted ones (their retry counts), plus the ones other tuners run now; queued trials (retries,
    enqueued ones) run even past the count. A resumed tuner or a second worker therefore continues one count."""

    def __init__(self, n_trials: int):
        self.n_trials = n_trials

    def spent(self, counts: dict[str, int]) -> bool:
        return counts["waiting"] == 0 and counts["done"] + counts["running"] >= self.n_trials

    def __call__(self, study, trial) -> None:
        if self.spent(count_trials(study)):
            study.stop()


class Progress:
    """A tqdm bar of the study's finished trials (not this tuner's) with the best value so far."""

    def __init__(self, n_trials: int, enabled: bool, log: Callable[[str], None] = print):
        self.bar, self.log = None, log
        if enabled:
            from tqdm import tqdm

            self.bar = tqdm(total=n_trials, desc="trials", unit="trial", dynamic_ncols=True)

    def update(self, study, counts: dict[str, int]) -> None:
        if self.bar is not None:
            self.bar.n = min(counts["done"], self.bar.total)
            self.bar.set_postfix_str(best_value_text(study))
            self.bar.refresh()

    def write(self, line: str) -> None:
        (self.bar.write if self.bar is not None else self.log)(line)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def optimize(
    study,
    objective: Callable,
    n_trials: int,
    storage,
    retry: RetryInterruptedTrial,
    timeout: float | None = None,
    on_failure: str = "fail",
    failed_value: float | Sequence[float] | None = None,
    progress: bool = True,
    log: Callable[[str], None] = print,
) -> None:
    """Run trials until the study holds ``n_trials`` finished ones (or ``timeout`` seconds pass). ``storage`` is
    the one ``study`` was created on and ``retry`` the stale-trial callback it was given (``verl.tune.recovery``)."""
    recorded = RecordedObjective(objective, study, retry, on_failure, failed_value)
    budget, bar = StudyBudget(n_trials), Progress(n_trials, progress, log)

    def after_trial(study, trial) -> None:  # before the budget: a recovered trial is queued, so it counts
        recorded.current = None
        bar.write(trial_line(trial))
        recover_stale_trials(study, storage, retry)
        bar.update(study, count_trials(study))

    with _quiet_optuna_trial_failures():
        try:
            recover_stale_trials(study, storage, retry)
            _optimize_until_spent(study, recorded, [after_trial, budget], budget, bar, timeout)
        finally:
            bar.close()


def _optimize_until_spent(study, recorded, callbacks, budget: StudyBudget, bar: Progress, timeout) -> None:
    """``study.optimize`` until the budget is spent or ``timeout`` passes. Optuna stops at the budget callback; if
    another tuner failed our running trial meanwhile, Optuna cannot record it and raises: we note it and go on."""
    start = time.time()
    counts = count_trials(study)
    bar.update(study, counts)
    while not budget.spent(counts):
        left = None if timeout is None else timeout - (time.time() - start)
        if left is not None and left <= 0:
            bar.write(f"[tune] --timeout {timeout:g} s reached: no new trials")
            return
        try:
            study.optimize(recorded, timeout=left, catch=(TrialFailed,), callbacks=callbacks)
        except Exception as e:  # optuna's tell of a trial finished elsewhere: ValueError or AssertionError
            if not recorded.lost_current_trial():
                raise
            bar.write(f"[tune] trial {recorded.current}: its result was not recorded: {e!r}")
            recorded.current = None
        counts = count_trials(study)


@contextlib.contextmanager
def _quiet_optuna_trial_failures():
    """Optuna logs each failed trial (with a traceback of our wrapper) as a warning; ``trial_line`` already says
    why it failed, and the reason and log tail are on the trial. Other Optuna warnings still show."""
    logger = logging.getLogger("optuna.study._optimize")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def trial_line(trial) -> str:
    """``[tune] trial 3 value 0.62; params lr=0.0003, ...``: how a finished trial ended."""
    state, attrs = trial.state.name, trial.user_attrs
    if state == "COMPLETE" and attrs.get("failed"):
        msg = f"FAILED ({attrs.get('fail_reason')}); recorded as worst value {_fmt(trial.values)}"
    elif state == "COMPLETE":
        msg = f"value {_fmt(trial.values)}"
    elif state == "PRUNED":
        msg = f"pruned at step {trial.last_step}" if trial.last_step is not None else "pruned"
    else:
        msg = f"FAILED: {attrs.get('fail_reason', 'see the log above')}"
    return f"[tune] trial {trial.number} {msg}; params {_fmt_params(trial.params)}"


def best_value_text(study) -> str:
    try:
        if len(study.directions) > 1:
            return f"pareto={len(study.best_trials)}"
        return f"best={study.best_value:.4g} (#{study.best_trial.number})"
    except ValueError:
        return "best=-"


def _traceback_tail(e: BaseException) -> str:
    return "".join(traceback.format_exception(type(e), e, e.__traceback__))[-3000:]


def _fmt(values) -> str:
    return ", ".join(f"{v:.4g}" for v in values or [])


def _fmt_params(params: dict) -> str:
    return ", ".join(
        f"{k.rsplit('.', 1)[-1]}={v:.3g}" if isinstance(v, float) else f"{k.rsplit('.', 1)[-1]}={v}"
        for k, v in params.items()
    )
