"""A full disk, on a real tmpfs that fills up: a checkpoint write that runs out of space ends the run with one error
that names the directory, the space and the fix; the previous checkpoint, the pointer to it and the metrics written
stay intact, and the rerun resumes from it exactly. The tuning study's storage (SQLite, journal) likewise keeps the
trials completed before and ends with one error naming the storage."""

from __future__ import annotations

import os

import optuna
import pytest
from small_run import records, run  # tests/reliability/small_run.py

from verl.tune import make_storage, run_study
from verl.utils.disk import DiskFullError, tree_bytes

pytestmark = pytest.mark.slow


def test_a_checkpoint_that_does_not_fit_keeps_the_previous_one_and_says_what_to_do(tmp_path, tmpfs):
    run(tmp_path / "full", 2)  # the uninterrupted run; its checkpoint's size sizes the disk
    size = tree_bytes(str(tmp_path / "full" / "global_step_1")) / 2**20
    disk = tmpfs(size * 1.4 + 0.5)  # step 1's checkpoint fits, step 2's does not
    with pytest.raises(DiskFullError) as e:
        run(disk, 2)
    message = str(e.value)
    assert f"trainer.default_local_dir={disk}" in message and "writing checkpoint global_step_2" in message
    assert "MiB free" in message and "a checkpoint of this run takes" in message
    assert "free space" in message and "resumes from step 1" in message
    assert sorted(os.listdir(disk)) == [
        "config.yaml",
        "global_step_1",
        "latest_checkpointed_iteration.txt",
        "metrics.jsonl",
    ]  # the half-written global_step_2.tmp is gone, its space free again
    assert open(os.path.join(disk, "latest_checkpointed_iteration.txt")).read() == "1"
    assert records(disk) == records(tmp_path / "full")[:2]  # steps 0 and 1, whole
    # the rerun (no more checkpoints: they do not fit) resumes from step 1 and its step 2 is the uninterrupted one
    resumed = run(disk, 2, "trainer.save_freq=-1")
    assert [s for s, _ in resumed["history"]["actor/pg_loss"]] == [2]
    assert records(disk) == records(tmp_path / "full")


def _filling_objective(disk: str, fill_at: int):
    """A quick objective; trial ``fill_at`` fills the disk the storage lives on, as another job's output would."""

    def objective(trial):
        x = trial.suggest_float("x", 0.0, 1.0)
        if trial.number == fill_at:
            try:
                with open(os.path.join(disk, "filler"), "wb") as f:
                    f.write(b"\0" * (64 << 20))
            except OSError:
                pass  # full: what we wanted
        return x

    return objective


@pytest.mark.parametrize("kind", ["sqlite", "journal"])
def test_a_full_disk_under_the_study_storage_keeps_the_trials_before_and_says_what_to_do(tmp_path, tmpfs, kind):
    disk = tmpfs(0.5)
    url = f"sqlite:///{disk}/study.db" if kind == "sqlite" else f"journal:{disk}/study.journal"
    common = dict(storage=url, output_dir=str(tmp_path / "out"), progress=False, report=False, seed=0)
    with pytest.raises(DiskFullError) as e:
        run_study(objective=_filling_objective(disk, fill_at=3), n_trials=200, **common)
    message = str(e.value)
    assert f"the study's storage {url} could not be written: no space left" in message
    assert "trials completed before" in message and "run the same command again to resume" in message
    os.remove(os.path.join(disk, "filler"))
    study = optuna.load_study(study_name="ppo-tune", storage=make_storage(url, str(tmp_path / "out")))
    done = [t for t in study.trials if t.state.name == "COMPLETE"]
    assert len(done) >= 3 and [t.number for t in done] == list(range(len(done)))
    assert all(t.value == t.params["x"] for t in done)
    # room again: the same study goes on in the same storage, every earlier trial still there
    before = {t.number: t.value for t in done}
    result = run_study(objective=_filling_objective(disk, fill_at=-1), n_trials=len(study.trials) + 2, **common)
    after = {t.number: t.value for t in result.study.trials if t.state.name == "COMPLETE"}
    assert before.items() <= after.items() and len(after) >= len(before) + 2
