"""The rollout-correction stage (verl.trainer.ppo.rollout_correction) on a step's batch, verl's helper names
(rollout_corr_helper), and end to end: a tiny GRPO run with sequence-level importance weights and the
geometric-mean filter plus the seq_max veto logs every metric, finite, with weights ~ 1 (the HF sampler and the
trainer run the same weights, so only kernel differences separate them)."""

from __future__ import annotations

import math

import pytest
import torch

from verl.core_algos.rollout_correction import compute_rollout_correction
from verl.core_algos.rollout_correction_metrics import compute_mismatch_metrics
from verl.protocol import DataProto
from verl.trainer.config.algorithm import RolloutCorrectionConfig
from verl.trainer.main_ppo import run_ppo
from verl.trainer.ppo.rollout_corr_helper import compute_rollout_correction_and_rejection_mask
from verl.trainer.ppo.rollout_correction import apply_rollout_correction, mismatch_metrics_after_update
from verl.utils.config import load_config

MISMATCH_KEYS = {
    "training/rollout_probs_diff_valid",
    "training/rollout_probs_diff_max",
    "training/rollout_probs_diff_mean",
    "training/rollout_probs_diff_std",
    "training/rollout_actor_probs_pearson_corr",
}
OFFPOLICY_KEYS = {
    f"rollout_corr/{k}"
    for k in (
        "training_ppl",
        "training_log_ppl",
        "kl",
        "k3_kl",
        "rollout_ppl",
        "rollout_log_ppl",
        "log_ppl_diff",
        "log_ppl_abs_diff",
        "log_ppl_diff_max",
        "log_ppl_diff_min",
        "ppl_ratio",
        "chi2_token",
        "chi2_seq",
    )
}


def _batch(seed: int = 0, bs: int = 6, length: int = 5) -> DataProto:
    g = torch.Generator().manual_seed(seed)
    old = -torch.rand(bs, length, generator=g) * 2 - 0.1
    mask = torch.ones(bs, length, dtype=torch.long)
    mask[1, 3:] = 0
    return DataProto.from_dict(
        {
            "old_log_probs": old,
            "rollout_log_probs": old + 0.3 * torch.randn(bs, length, generator=g),
            "response_mask": mask,
        }
    )


def test_metrics_only_leaves_the_batch_as_it_is():
    batch = _batch()
    mask = batch.batch["response_mask"]
    out, metrics = apply_rollout_correction(batch, RolloutCorrectionConfig())
    assert set(metrics) == MISMATCH_KEYS | OFFPOLICY_KEYS
    assert "rollout_is_weights" not in out.batch and out.batch["response_mask"] is mask


def test_weights_and_rejection_land_in_the_batch():
    batch = _batch(seed=1)
    b = batch.batch
    old, rollout, mask = b["old_log_probs"], b["rollout_log_probs"], b["response_mask"].clone()
    config = RolloutCorrectionConfig(rollout_is="sequence", rollout_rs="token_k1", rollout_rs_threshold="0.8_1.25")
    out, metrics = apply_rollout_correction(batch, config)
    weights, new_mask, expected = compute_rollout_correction(
        old, rollout, mask, "sequence", 2.0, False, "token_k1", "0.8_1.25"
    )
    assert torch.equal(out.batch["rollout_is_weights"], weights)
    assert torch.equal(out.batch["response_mask"], new_mask) and new_mask.sum() < mask.sum()
    assert {k: metrics[k] for k in expected} == expected
    assert {k: metrics[k] for k in MISMATCH_KEYS} == compute_mismatch_metrics(old, rollout, mask)  # before rejection


def test_verl_helper_returns_weights_as_a_batch():
    b = _batch(seed=2).batch
    proto, mask, metrics = compute_rollout_correction_and_rejection_mask(
        b["old_log_probs"], b["rollout_log_probs"], b["response_mask"], rollout_is="token", rollout_is_threshold=2.0
    )
    assert isinstance(proto, DataProto) and proto.batch["rollout_is_weights"].max() <= 2.0
    assert "rollout_corr/rollout_is_eff_sample_size" in metrics and torch.equal(mask, b["response_mask"])


def test_a_correction_without_the_samplers_log_probs_names_the_key_to_set():
    batch = _batch()
    batch.batch.pop("rollout_log_probs")
    assert apply_rollout_correction(batch, RolloutCorrectionConfig()) == (batch, {})  # nothing to measure
    with pytest.raises(ValueError, match=r"rollout_rs='seq_mean_k3'.*rollout\.calculate_log_probs=true"):
        apply_rollout_correction(batch, RolloutCorrectionConfig.decoupled_k3_rs())


def test_mismatch_metrics_of_an_on_policy_update():
    batch = _batch(seed=3)
    old = batch.batch.pop("old_log_probs")
    output = DataProto.from_dict({"old_log_probs": old}, meta_info={"metrics": {}})
    metrics = mismatch_metrics_after_update(batch, output)
    batch.batch["old_log_probs"] = old
    assert metrics == apply_rollout_correction(batch, RolloutCorrectionConfig())[1]
    assert mismatch_metrics_after_update(batch, DataProto(meta_info={"metrics": {}})) == {}


SMALL = [
    "data.train_files=builtin://arithmetic/train?train_size=32",
    "data.val_files=builtin://arithmetic/test?test_size=8",
    "data.train_batch_size=4",
    "data.max_response_length=16",
    "actor_rollout_ref.rollout.n=4",
    "actor_rollout_ref.actor.ppo_mini_batch_size=4",
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=16",
    "actor_rollout_ref.actor.optim.lr=1e-4",
    "trainer.total_training_steps=2",
    "trainer.val_before_train=false",
    "trainer.test_freq=-1",
    "trainer.save_freq=-1",
    "trainer.logger=[file]",
]


def test_grpo_with_sequence_weights_and_rejection_end_to_end(tmp_path):
    """One mini-batch, one epoch: the correction turns off the on-policy skip, so the old log-probs come from the
    trainer's pass and the sampler's from its decoding. Measured here (tiny model, CPU, fp32): probabilities agree to
    ~1e-6, sequence weights are 1 within ~1e-5, nothing is rejected at +-0.1% (geometric) / k2 <= 1e-4 (veto)."""
    config = load_config(
        "ppo_trainer",
        [
            *SMALL,
            f"trainer.default_local_dir={tmp_path}",
            "actor_rollout_ref.rollout.calculate_log_probs=true",
            "algorithm.rollout_correction.rollout_is=sequence",
            "algorithm.rollout_correction.rollout_rs=seq_mean_k1,seq_max_k2",
            "algorithm.rollout_correction.rollout_rs_threshold=0.999_1.001,0.0001",
        ],
    )
    history = run_ppo(config)["history"]
    for step in (1, 2):
        metrics = {k: v for k, points in history.items() for s, v in points if s == step}
        assert "timing_s/old_log_prob" in metrics and "timing_s/rollout_corr" in metrics
        for key in (
            MISMATCH_KEYS
            | OFFPOLICY_KEYS
            | {
                "rollout_corr/rollout_is_mean",
                "rollout_corr/rollout_is_eff_sample_size",
                "rollout_corr/rollout_rs_seq_mean_k1_mean",
                "rollout_corr/rollout_rs_seq_max_k2_max",
                "rollout_corr/rollout_rs_masked_fraction",
            }
        ):
            assert math.isfinite(metrics[key]), key
        assert metrics["training/rollout_probs_diff_max"] < 1e-4
        assert metrics["training/rollout_actor_probs_pearson_corr"] > 0.9999
        for key in ("rollout_is_min", "rollout_is_max", "rollout_is_mean", "rollout_is_eff_sample_size"):
            assert metrics[f"rollout_corr/{key}"] == pytest.approx(1.0, abs=1e-4), key
        assert metrics["rollout_corr/rollout_rs_masked_fraction"] == 0.0
        assert abs(metrics["rollout_corr/kl"]) < 1e-5
