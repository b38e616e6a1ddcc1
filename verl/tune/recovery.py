"""Trials whose tuner died: found, failed and queued again with the same parameters.

Two detectors, one retry:

- Optuna's heartbeat (RDB storages, ``verl.tune.storage``): ``study.optimize`` records a heartbeat of each running
  trial; a trial silent for ``grace_period`` seconds is failed by Optuna (``optuna.storages.fail_stale_trials``,
  which ``study.optimize`` runs before each new trial) and handed to the storage's stale-trial callback. This finds
  a dead tuner on any machine, after the grace period.
- The same host, at once: each trial records the tuner process running it (user attr ``worker``). A tuner resumed
  on that host sees that the process is gone and fails the trial without waiting for the grace period (``kill -9``
  then resume). It is also the only detector for journal storage, which has no heartbeat in Optuna 5.

Both hand the failed trial to ``RetryInterruptedTrial``, which lets Optuna's
``RetryHeartbeatStaleTrialCallback`` queue a WAITING copy (same parameters, ``retry_history``, at most
``max_retries`` times) and marks the copy ``retry_of``. An interrupted trial does not count toward ``n_trials``.
"""

from __future__ import annotations

import copy
import os
import socket
import warnings
from collections.abc import Callable

from verl.tune import runner

WORKER = "worker"  # trial user attr: {"host", "pid", "pid_start"} of the tuner process that runs the trial
INTERRUPTED = "interrupted"  # the start of the fail_reason of every trial whose tuner stopped under it


def claim(trial) -> None:
    """Record on ``trial`` which tuner process runs it, so that a tuner on this host can tell at once that the trial
    lost its tuner (the heartbeat would take ``grace_period``; a journal storage has none)."""
    trial.set_user_attr(
        WORKER, {"host": socket.gethostname(), "pid": os.getpid(), "pid_start": runner.proc_start_time(os.getpid())}
    )


def tuner_is_gone(trial) -> bool:
    """Whether the RUNNING ``trial`` was claimed by a tuner process of this host that no longer runs. A trial of
    another host, or claimed by no one yet, is left to the heartbeat."""
    worker = trial.user_attrs.get(WORKER)
    if not isinstance(worker, dict) or worker.get("host") != socket.gethostname() or worker.get("pid") is None:
        return False
    pid = int(worker["pid"])
    return pid != os.getpid() and not runner.pid_alive(pid, worker.get("pid_start"))


def _optuna_retry_class():
    """Optuna 4.9 renamed ``RetryFailedTrialCallback`` (a deprecated alias until Optuna 6)."""
    import optuna

    return (
        getattr(optuna.storages, "RetryHeartbeatStaleTrialCallback", None) or optuna.storages.RetryFailedTrialCallback
    )


class RetryInterruptedTrial:
    """Queue an interrupted trial again: Optuna's retry callback adds the WAITING copy (same parameters and
    distributions, ``failed_trial``/``retry_history`` system attrs, at most ``max_retries`` retries of one original);
    we give the copy the user attrs the report shows (``retry_of``: the trial it repeats, ``retries``) instead of
    the dead trial's. The storage calls it for heartbeat-stale trials; we call it for the other interruptions."""

    def __init__(self, max_retries: int = 2, log: Callable[[str], None] = print):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # experimental / deprecated-alias warnings
            self._retry_cls = _optuna_retry_class()
            self._retry = self._retry_cls(max_retry=max_retries)
        self.max_retries, self.log = max_retries, log

    def retries_of(self, trial) -> int:
        """How many times the original of ``trial`` has been queued again, counting a retry of ``trial`` itself."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return len(self._retry_cls.retry_history(trial)) + 1

    def __call__(self, study, trial) -> None:
        trial_dir = trial.user_attrs.get("trial_dir")
        if trial_dir and runner.kill_orphan(trial_dir):  # a trainer that outlived its tuner (same host only)
            self.log(f"[tune] ended the orphaned trainer of trial {trial.number}")
        retries = self.retries_of(trial)
        if retries > self.max_retries:
            self.log(f"[tune] trial {trial.number} was interrupted {retries} times: not queued again")
            return
        template = copy.deepcopy(trial)
        template.user_attrs = {"retry_of": trial.number, "retries": retries}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self._retry(study, template)
        self.log(f"[tune] trial {trial.number} was interrupted: queued again with the same parameters")


def recover_stale_trials(study, storage, retry: RetryInterruptedTrial | None = None, max_retries: int = 2) -> list[int]:
    """Fail the RUNNING trials whose tuner is gone and queue them again; returns the numbers of those found on this
    host (the trials Optuna's heartbeat fails are retried by the storage's callback, which logs them).

    ``storage`` is the object ``verl.tune.storage.make_storage`` returned for ``study``: Optuna has no study-level
    call that sets an attribute on a trial another process runs, so the reason is written through it."""
    import optuna
    from optuna.trial import TrialState

    retry = retry or RetryInterruptedTrial(max_retries)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        optuna.storages.fail_stale_trials(study)  # RDB heartbeat; a no-op for storages without one
    recovered = []
    for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        if tuner_is_gone(t) and _fail_interrupted(study, storage, t.number):
            retry(study, t)
            recovered.append(t.number)
    return recovered


def _fail_interrupted(study, storage, number: int) -> bool:
    """Mark trial ``number`` FAIL with the interruption as its reason; False if another tuner did it first."""
    import optuna
    from optuna.trial import TrialState

    try:
        study_id = storage.get_study_id_from_name(study.study_name)
        trial_id = storage.get_trial_id_from_study_id_trial_number(study_id, number)
        storage.set_trial_user_attr(
            trial_id, "fail_reason", f"{INTERRUPTED}: its tuner stopped (Ctrl-C, kill or crash)"
        )
        study.tell(number, state=TrialState.FAIL)
    except (optuna.exceptions.UpdateFinishedTrialError, ValueError):  # finished meanwhile: recovered elsewhere
        return False
    return True


def retried_numbers(trials) -> set[int]:
    """Numbers of the trials some other trial repeats (``retry_of``)."""
    return {int(t.user_attrs["retry_of"]) for t in trials if t.user_attrs.get("retry_of") is not None}


def is_interrupted(trial, retried: set[int]) -> bool:
    """A FAIL trial whose tuner stopped under it: its reason says so, or (failed by Optuna's heartbeat, which sets
    no reason) it was queued again."""
    if trial.state.name != "FAIL":
        return False
    return str(trial.user_attrs.get("fail_reason", "")).startswith(INTERRUPTED) or trial.number in retried


def count_trials(study) -> dict[str, int]:
    """``done`` (finished trials that count toward ``n_trials``: interrupted ones do not), ``running``, ``waiting``
    and one count per finished state."""
    trials = study.get_trials(deepcopy=False)
    retried = retried_numbers(trials)
    c = {"done": 0, "running": 0, "waiting": 0, "complete": 0, "pruned": 0, "fail": 0}
    for t in trials:
        if t.state.name in ("WAITING", "RUNNING"):
            c[t.state.name.lower()] += 1
        elif not is_interrupted(t, retried):
            c["done"] += 1
            c[t.state.name.lower()] += 1
    return c
