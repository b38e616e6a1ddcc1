"""A truncated or corrupt latest checkpoint is detected and reported, and the run resumes from the previous good
one: its next steps equal the uninterrupted run's exactly (same seed, same bits on CPU)."""

from __future__ import annotations

import os

import pytest
from small_run import numeric, run

pytestmark = pytest.mark.slow


def truncate(path) -> None:
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) // 2)


@pytest.mark.parametrize("damage", ["actor shards truncated", "controller state corrupt"])
def test_a_damaged_latest_checkpoint_is_reported_and_the_previous_one_resumes_exactly(tmp_path, capsys, damage):
    full = run(tmp_path / "full", 3)
    run(tmp_path / "broken", 2)
    step2 = tmp_path / "broken" / "global_step_2"
    if damage == "actor shards truncated":
        (shard,) = (step2 / "actor" / "dcp").glob("*.distcp")
        truncate(shard)
    else:
        (step2 / "data.pt").write_bytes(b"not a checkpoint")
    capsys.readouterr()
    resumed = run(tmp_path / "broken", 3)
    out = capsys.readouterr().out
    assert f"checkpoint {step2} cannot be read" in out and "resumed from" in out and "global_step_1 at step 1" in out
    # steps 2 and 3 are computed again from step 1's checkpoint: exactly the uninterrupted run's
    assert [s for s, _ in resumed["history"]["actor/pg_loss"]] == [2, 3]
    for step in (2, 3):
        assert numeric(resumed["history"], step) == numeric(full["history"], step)


def test_no_readable_checkpoint_is_one_error_listing_each(tmp_path):
    run(tmp_path / "run", 1)
    (tmp_path / "run" / "global_step_1" / "data.pt").write_bytes(b"")
    with pytest.raises(RuntimeError, match=r"no checkpoint of this run can be read:\n  .*global_step_1") as e:
        run(tmp_path / "run", 2)
    assert "trainer.resume_mode=disable" in str(e.value)
