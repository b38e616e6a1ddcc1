"""The off-policy metrics against hand-computed values, the trainer-mode checks, and the colocate_async schedule
(which version samples which round) with a worker group that records its calls."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from verl.protocol import DataProto
from verl.trainer.ppo.v1 import AheadGeneration, check_trainer_mode
from verl.trainer.ppo.v1.off_policy import is_on_policy, off_policy_metrics, stamp_versions
from verl.utils.config import load_config


def rows(n: int) -> DataProto:
    return DataProto.from_dict({"x": torch.zeros(n, 1)})


def test_off_policy_metrics_hand_computed():
    batch = rows(4)
    stamp_versions(batch, np.array([3, 3, 2, 1]), np.array([3, 4, 2, 4]))
    m = off_policy_metrics(batch, version=5)
    # spans: last - first + 1 = [1, 2, 1, 4]; staleness: 5 - last = [2, 1, 3, 1]; worst: 5 - first = [2, 2, 3, 4]
    assert m["training/off_policy/trajectory_spans/mean"] == 2.0
    assert (m["training/off_policy/trajectory_spans/max"], m["training/off_policy/trajectory_spans/min"]) == (4, 1)
    assert m["training/off_policy/trajectory_staleness/mean"] == 1.75
    assert m["training/off_policy/trajectory_staleness/max"] == 3.0
    assert m["training/off_policy/trajectory_staleness_worst/mean"] == 2.75
    assert m["training/off_policy/trajectory_staleness_worst/min"] == 2.0


def test_versions_survive_the_batch_operations_a_step_uses():
    batch = stamp_versions(rows(2), 7)
    assert is_on_policy(batch, 7) and not is_on_policy(batch, 8)
    repeated = batch.repeat(3, interleave=True)
    assert repeated.non_tensor_batch["policy_version_first"].tolist() == [7] * 6
    assert off_policy_metrics(rows(3), 4) == {}  # no record: nothing to report
    assert is_on_policy(rows(3), 4)


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["trainer.v1.trainer_mode=later"], "use one of sync, colocate_async, separate_async"),
        (["trainer.v1.sampler.max_off_policy_strategy=keep"], "use drop or wait"),
        (["trainer.v1.separate_async.hybrid_rollout.enable_switch=true"], "enable_switch=true is not implemented"),
        (["trainer.v1.sampler.custom_sampler.path=x.py"], "custom_sampler is not supported"),
    ],
)
def test_bad_mode_keys_are_one_clear_error(overrides, message):
    with pytest.raises(Exception, match=message):
        load_config("ppo_trainer", overrides)


def test_colocate_async_lag_beyond_the_threshold_names_both_keys():
    cfg = load_config(
        "ppo_trainer",
        [
            "trainer.v1.trainer_mode=colocate_async",
            "trainer.v1.colocate_async.num_warmup_batches=3",
            "trainer.v1.sampler.max_off_policy_threshold=2",
        ],
    )
    with pytest.raises(ValueError, match=r"num_warmup_batches=3 .*max_off_policy_threshold=2"):
        check_trainer_mode(cfg)
    ray = load_config("ppo_trainer", ["trainer.v1.trainer_mode=colocate_async", "trainer.backend=ray"])
    with pytest.raises(ValueError, match="trainer.backend=local"):
        check_trainer_mode(ray)


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["trainer.v1.trainer_mode=colocate_async", "actor_rollout_ref.rollout.name=vllm"], "rollout.name=hf"),
        (
            ["trainer.v1.trainer_mode=colocate_async", "trainer.v1.partial_rollout_tokens=4", "+multi_turn"],
            "partial_rollout_tokens=4",
        ),
    ],
)
def test_what_an_async_mode_does_not_serve_is_one_error_naming_the_keys(overrides, message):
    multi_turn = "+multi_turn" in overrides
    overrides = [o for o in overrides if o != "+multi_turn"]
    if multi_turn:
        overrides += ["actor_rollout_ref.rollout.multi_turn.enable=true", "actor_rollout_ref.rollout.mode=async"]
    with pytest.raises(ValueError, match=message):
        check_trainer_mode(load_config("ppo_trainer", overrides))
    plain = load_config(
        "ppo_trainer", ["trainer.v1.trainer_mode=colocate_async", "trainer.v1.partial_rollout_tokens=4"]
    )
    check_trainer_mode(plain)  # partial rollout with the batch call: fine


class RecordingGroup:
    """The four calls `AheadGeneration` makes of the actor worker group, recording which version generated what."""

    def __init__(self):
        self.current = {"w": torch.zeros(1)}
        self.loaded = None
        self.generated: list[tuple[int, int]] = []  # (round tag, version loaded)

    def init_ahead_rollout(self):
        return [None]

    def policy_weights(self):
        return [{"w": self.current["w"].clone()}]

    def load_ahead_weights(self, weights, version):
        self.loaded = (int(weights["w"].item()), version)
        return [0.0]

    def generate_sequences_ahead(self, gen_batch):
        tag = int(gen_batch.batch["x"][0].item())
        weight_value, version = self.loaded
        assert weight_value == version  # the weights handed over are those of the version named
        self.generated.append((tag, version))
        return gen_batch


@pytest.mark.parametrize("lag", [0, 1, 2])
def test_round_r_is_sampled_by_the_version_of_its_request_minus_lag(lag):
    wg = RecordingGroup()
    ahead = AheadGeneration(wg, lag, max_rounds=6)
    counter = iter(range(1, 100))

    def new_round():
        tag = next(counter)
        batch = DataProto.from_dict({"x": torch.full((2, 1), float(tag))})
        return batch, batch

    versions = []
    for step in range(1, 7):
        version = step - 1  # one actor update per step
        wg.current["w"].fill_(version)
        _, out, sampled_by = ahead.next_round(version, new_round)
        assert int(out.batch["x"][0].item()) == step  # rounds come back in order
        versions.append(sampled_by)
    ahead.shutdown()
    assert versions == [max(0, s - 1 - lag) for s in range(1, 7)]
    assert [tag for tag, _ in wg.generated] == list(range(1, 7))  # nothing generated past max_rounds
    assert all(v == max(0, tag - 1 - lag) for tag, v in wg.generated)


def test_separate_async_needs_ray_and_verls_batch_invariant():
    local = load_config("ppo_trainer", ["trainer.v1.trainer_mode=separate_async"])
    with pytest.raises(ValueError, match="separate_async runs on trainer.backend=ray"):
        check_trainer_mode(local)
    ray = ["trainer.v1.trainer_mode=separate_async", "trainer.backend=ray"]
    check_trainer_mode(
        load_config("ppo_trainer", [*ray, "data.train_batch_size=64", "actor_rollout_ref.actor.ppo_mini_batch_size=16"])
    )
    bad = load_config(
        "ppo_trainer", [*ray, "data.train_batch_size=64", "actor_rollout_ref.actor.ppo_mini_batch_size=8"]
    )
    with pytest.raises(ValueError, match=r"parameter_sync_step=4 .*ppo_mini_batch_size=8.* \(32\), not 64"):
        check_trainer_mode(bad)
