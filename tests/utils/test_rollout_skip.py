"""`RolloutSkip`: the first call generates and dumps, later calls load the same batch without generating."""

import torch

from verl.protocol import DataProto
from verl.utils.config import load_config
from verl.utils.rollout_skip import RolloutSkip


class CountingRollout:
    def __init__(self):
        self.calls = 0

    def generate_sequences(self, batch, **kwargs):
        self.calls += 1
        return DataProto.from_dict({"responses": torch.full((4, 3), self.calls)}, meta_info={"call": self.calls})


def _config(tmp_path, n=2):
    overrides = {
        "actor_rollout_ref.rollout.n": n,
        "actor_rollout_ref.rollout.skip_dump_dir": str(tmp_path),
        "data.train_batch_size": 2,
        "trainer.experiment_name": "exp",
        "trainer.project_name": "proj",
    }
    return load_config("ppo_trainer", overrides=overrides)


def test_dump_once_then_load(tmp_path):
    wg = CountingRollout()
    skip = RolloutSkip(_config(tmp_path), wg)
    skip.wrap_generate_sequences()
    first = wg.generate_sequences(None)
    assert skip.curr_path_dump.name == "exp_proj_GBS2_N2.pkl" and skip.curr_path_dump.exists()
    again = RolloutSkip(_config(tmp_path), wg)  # a later run of the same settings
    again.wrap_generate_sequences()
    second = wg.generate_sequences(None)
    assert torch.equal(first.batch["responses"], second.batch["responses"])
    assert second.meta_info["call"] == 1


def test_other_settings_get_their_own_dump_and_a_broken_dump_is_regenerated(tmp_path):
    wg = CountingRollout()
    skip = RolloutSkip(_config(tmp_path, n=4), wg)
    skip.curr_path_dump.write_bytes(b"not a pickle")
    skip.wrap_generate_sequences()
    out = wg.generate_sequences(None)
    assert wg.calls == 1 and out.meta_info["call"] == 1
    assert DataProto.load_from_disk(str(skip.curr_path_dump)).meta_info["call"] == 1
