"""verl's ``RolloutCorrectionConfig`` (its import path is ``verl.trainer.config.algorithm``): a section both the
algorithm (``algorithm.rollout_correction``) and the actor's bypass-mode loss read, so it lives with the worker
sections the trainer's config builds on."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from verl.base_config import BaseConfig

__all__ = ["RolloutCorrectionConfig"]


@dataclass
class RolloutCorrectionConfig(BaseConfig):
    """verl's rollout correction of the train/inference mismatch (docs/rollout.md): importance weights that reweight,
    and rejection that masks, tokens or sequences whose sampler (``rollout_log_probs``) and trainer
    (``old_log_probs``) probabilities disagree. Off by default; the mismatch metrics are logged whenever the sampler
    returns its log-probs. With ``bypass_mode`` the sampler's log-probs are the old ones (no old-log-prob pass) and
    the weights and rejection are measured inside the loss against the policy being trained
    (`verl.core_algos.policy_loss_bypass`). The classmethods are verl's presets
    (``RolloutCorrectionConfig.decoupled_seq_is()``, ``bypass_ppo_clip()``, ...)."""

    # importance weights: null (none) | token | sequence | geometric (needs rollout.calculate_log_probs=true)
    rollout_is: str | None = None
    rollout_is_threshold: float = 2.0  # the weights' cap C: w = min(ratio, C) (only with rollout_is; > 0)
    rollout_is_batch_normalize: bool = False  # divide the weights by their batch mean (only with rollout_is)
    # rejection: null (none) or comma-separated token_k1|k2|k3, seq_sum_k1|k2|k3, seq_mean_k1|k2|k3, seq_max_k2|k3
    rollout_rs: str | None = None
    # rejection bounds, one for all options or one per option: lower_upper ratios for k1 (e.g. 0.5_2.0), an upper
    # bound for k2/k3 (e.g. 0.01)
    rollout_rs_threshold: Any = None
    # the sampler's log-probs as the old ones: no old-log-prob pass; rollout_is / rollout_rs act inside the loss
    bypass_mode: bool = False
    loss_type: str = "ppo_clip"  # bypass mode's loss: ppo_clip | reinforce (only with bypass_mode)

    @classmethod
    def disabled(cls) -> RolloutCorrectionConfig:
        """No weights, no rejection: metrics only."""
        return cls(rollout_is=None, rollout_rs=None)

    @classmethod
    def decoupled_token_is(cls, threshold: float = 2.0) -> RolloutCorrectionConfig:
        """Token-TIS: per-token weights capped at ``threshold``."""
        return cls(rollout_is="token", rollout_is_threshold=threshold)

    @classmethod
    def decoupled_seq_is(cls, threshold: float = 2.0) -> RolloutCorrectionConfig:
        """Seq-TIS: one weight per sequence (product of its ratios) capped at ``threshold``."""
        return cls(rollout_is="sequence", rollout_is_threshold=threshold)

    @classmethod
    def decoupled_seq_is_rs(cls, is_threshold: float = 2.0, rs_threshold: Any = "0.5_2.0") -> RolloutCorrectionConfig:
        """Seq-MIS: Seq-TIS plus rejection of sequences whose ratio leaves ``rs_threshold`` (seq_sum_k1)."""
        return cls(
            rollout_is="sequence",
            rollout_is_threshold=is_threshold,
            rollout_rs="seq_sum_k1",
            rollout_rs_threshold=rs_threshold,
        )

    @classmethod
    def decoupled_geo_rs(cls, rs_threshold: Any = "0.999_1.001") -> RolloutCorrectionConfig:
        """Geo-RS: reject sequences whose geometric-mean ratio leaves ``rs_threshold`` (seq_mean_k1); no weights."""
        return cls(rollout_rs="seq_mean_k1", rollout_rs_threshold=rs_threshold)

    @classmethod
    def decoupled_geo_rs_seq_tis(
        cls, is_threshold: float = 2.0, rs_threshold: Any = "0.999_1.001"
    ) -> RolloutCorrectionConfig:
        """Geo-RS plus Seq-TIS."""
        return cls(
            rollout_is="sequence",
            rollout_is_threshold=is_threshold,
            rollout_rs="seq_mean_k1",
            rollout_rs_threshold=rs_threshold,
        )

    @classmethod
    def decoupled_geo_rs_token_tis(
        cls, is_threshold: float = 2.0, rs_threshold: Any = "0.999_1.001"
    ) -> RolloutCorrectionConfig:
        """Geo-RS plus Token-TIS."""
        return cls(
            rollout_is="token",
            rollout_is_threshold=is_threshold,
            rollout_rs="seq_mean_k1",
            rollout_rs_threshold=rs_threshold,
        )

    @classmethod
    def decoupled_k3_rs(cls, rs_threshold: float = 0.01) -> RolloutCorrectionConfig:
        """K3-RS: reject sequences whose mean k3 divergence exceeds ``rs_threshold`` (seq_mean_k3); no weights."""
        return cls(rollout_rs="seq_mean_k3", rollout_rs_threshold=rs_threshold)

    @classmethod
    def decoupled_k3_rs_seq_tis(cls, is_threshold: float = 2.0, rs_threshold: float = 0.01) -> RolloutCorrectionConfig:
        """K3-RS plus Seq-TIS."""
        return cls(
            rollout_is="sequence",
            rollout_is_threshold=is_threshold,
            rollout_rs="seq_mean_k3",
            rollout_rs_threshold=rs_threshold,
        )

    @classmethod
    def decoupled_k3_rs_token_tis(
        cls, is_threshold: float = 2.0, rs_threshold: float = 0.01
    ) -> RolloutCorrectionConfig:
        """K3-RS plus Token-TIS."""
        return cls(
            rollout_is="token",
            rollout_is_threshold=is_threshold,
            rollout_rs="seq_mean_k3",
            rollout_rs_threshold=rs_threshold,
        )

    @classmethod
    def bypass_ppo_clip(cls) -> RolloutCorrectionConfig:
        """verl's bypass mode with the PPO loss."""
        return cls(bypass_mode=True, loss_type="ppo_clip")

    @classmethod
    def bypass_ppo_clip_geo_rs(cls, rs_threshold: Any = "0.999_1.001") -> RolloutCorrectionConfig:
        """Bypass mode, PPO loss, Geo-RS."""
        return cls(rollout_rs="seq_mean_k1", rollout_rs_threshold=rs_threshold, bypass_mode=True, loss_type="ppo_clip")

    @classmethod
    def bypass_ppo_clip_k3_rs(cls, rs_threshold: float = 0.01) -> RolloutCorrectionConfig:
        """Bypass mode, PPO loss, K3-RS."""
        return cls(rollout_rs="seq_mean_k3", rollout_rs_threshold=rs_threshold, bypass_mode=True, loss_type="ppo_clip")

    @classmethod
    def bypass_pg_is(cls, threshold: float = 2.0) -> RolloutCorrectionConfig:
        """Bypass mode, REINFORCE loss, Seq-TIS."""
        return cls(rollout_is="sequence", rollout_is_threshold=threshold, bypass_mode=True, loss_type="reinforce")

    @classmethod
    def bypass_pg_geo_rs(cls, rs_threshold: Any = "0.999_1.001") -> RolloutCorrectionConfig:
        """Bypass mode, REINFORCE loss, Geo-RS."""
        return cls(rollout_rs="seq_mean_k1", rollout_rs_threshold=rs_threshold, bypass_mode=True, loss_type="reinforce")

    @classmethod
    def bypass_pg_geo_rs_seq_tis(
        cls, is_threshold: float = 2.0, rs_threshold: Any = "0.999_1.001"
    ) -> RolloutCorrectionConfig:
        """Bypass mode, REINFORCE loss, Geo-RS plus Seq-TIS."""
        return cls(
            rollout_is="sequence",
            rollout_is_threshold=is_threshold,
            rollout_rs="seq_mean_k1",
            rollout_rs_threshold=rs_threshold,
            bypass_mode=True,
            loss_type="reinforce",
        )

    @classmethod
    def bypass_pg_geo_rs_token_tis(
        cls, is_threshold: float = 2.0, rs_threshold: Any = "0.999_1.001"
    ) -> RolloutCorrectionConfig:
        """Bypass mode, REINFORCE loss, Geo-RS plus Token-TIS."""
        return cls(
            rollout_is="token",
            rollout_is_threshold=is_threshold,
            rollout_rs="seq_mean_k1",
            rollout_rs_threshold=rs_threshold,
            bypass_mode=True,
            loss_type="reinforce",
        )
