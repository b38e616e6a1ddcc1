"""Several tuner processes on one storage each get a different queued trial: the pop of a WAITING trial must be
atomic across processes (on SQLite it was not: 5 of 40 pops ran a trial twice before BEGIN IMMEDIATE)."""

from __future__ import annotations

import multiprocessing as mp

import optuna
import pytest

from verl.tune import make_storage

pytestmark = pytest.mark.slow
TRIALS, WORKERS = 64, 4


def _pop_and_finish(url: str, out_dir: str, per_worker: int, start, queue) -> None:
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    study = optuna.load_study(study_name="race", storage=make_storage(url, out_dir))
    got, errors = [], []
    start.wait()  # all workers pop at once
    for _ in range(per_worker):
        trial = study.ask()
        got.append(trial.number)
        try:
            study.tell(trial, float(trial.suggest_int("x", 0, TRIALS)))
        except Exception as e:  # another worker finished "our" trial: the race this test is about
            errors.append(f"{type(e).__name__}: {e}")
    queue.put((got, errors))


@pytest.mark.parametrize("kind", ["sqlite", "journal"])
def test_parallel_workers_never_pop_the_same_queued_trial(tmp_path, kind):
    url = f"sqlite:///{tmp_path}/study.db" if kind == "sqlite" else f"journal:{tmp_path}/study.journal"
    study = optuna.create_study(study_name="race", storage=make_storage(url, str(tmp_path)))
    for i in range(TRIALS):
        study.enqueue_trial({"x": i})
    ctx = mp.get_context("spawn")  # fresh processes: no connection inherited from this one
    queue, start = ctx.Queue(), ctx.Barrier(WORKERS)
    procs = [
        ctx.Process(target=_pop_and_finish, args=(url, str(tmp_path), TRIALS // WORKERS, start, queue))
        for _ in range(WORKERS)
    ]
    for p in procs:
        p.start()
    results = [queue.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=30)
        assert p.exitcode == 0
    popped = sorted(n for got, _ in results for n in got)
    errors = [e for _, errs in results for e in errs]
    assert popped == list(range(TRIALS)), f"some trial was popped twice: {popped}; errors {errors}"
    assert not errors
    done = optuna.load_study(study_name="race", storage=make_storage(url, str(tmp_path))).trials
    assert [t.state.name for t in done] == ["COMPLETE"] * TRIALS
    assert [t.value for t in done] == [float(i) for i in range(TRIALS)]  # each ran with its own queued params
