"""The ``algorithm`` section: advantage estimator, discounting, reward-side KL, DAPO's dynamic sampling and rollout correction."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from verl.base_config import BaseConfig

__all__ = ["AlgoConfig", "FilterGroupsConfig", "KLControlConfig", "RolloutCorrectionConfig"]


@dataclass
class KLControlConfig(BaseConfig):
    """The coefficient of the KL penalty in the reward: fixed, or adapted towards a target KL (Ziegler et al.)."""

    type: str = "fixed"  # fixed | adaptive
    kl_coef: float = 0.001  # the KL coefficient (the starting one when adaptive)
    horizon: int = 10000  # adaptive: steps over which the coefficient adapts
    target_kl: float = 0.1  # adaptive: the KL it steers towards


@dataclass
class FilterGroupsConfig(BaseConfig):
    """DAPO dynamic sampling: drop prompt groups whose rewards are all equal and refill the batch."""

    enable: bool = False  # on: refill the batch with groups that vary
    metric: str = "seq_reward"  # seq_reward | seq_final_reward | acc
    max_num_gen_batches: int = 10  # 0: unlimited


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


@dataclass
class AlgoConfig(BaseConfig):
    """The RL algorithm of a PPO-family run. The dataclass defaults are verl's (``adv_estimator=gae``); the
    ``ppo_trainer`` job starts from GRPO (``verl.trainer.config.ppo_trainer``)."""

    # gae | grpo | rloo | reinforce_plus_plus | reinforce_plus_plus_baseline | remax | opo | grpo_passk | gpg | gdpo |
    # grpo_vectorized | rloo_vectorized | optimal_token_baseline | tir_optimal_token_baseline (docs/ppo.md)
    adv_estimator: str = "gae"
    gamma: float = 1.0  # discount; used by gae and reinforce_plus_plus only
    lam: float = 1.0  # GAE lambda
    reward_temp: float = 1.0  # rewards = scores / reward_temp before KL and advantages (1.0: unchanged)
    norm_adv_by_std_in_grpo: bool = True  # false: Dr. GRPO
    # subtract kl_ctrl.kl_coef x KL(actor || ref) from the token rewards (PPO/RLHF style)
    use_kl_in_reward: bool = False
    kl_penalty: str = "kl"  # kl | abs | mse | low_var_kl
    kl_ctrl: KLControlConfig = field(default_factory=KLControlConfig)  # the reward-side KL coefficient
    filter_groups: FilterGroupsConfig = field(default_factory=FilterGroupsConfig)  # DAPO dynamic sampling
    # gdpo: the reward function's fields normalised separately per group, then summed (reward extra keys)
    gdpo_reward_keys: list[str] | None = None
    gdpo_reward_weights: list[float] | None = None  # gdpo: a weight per key (null: all 1)
    use_pf_ppo: bool = False  # preference-feedback PPO reweighting: not implemented (true is an error)
    # pf_ppo's settings (reweight_method: pow | max_min | max_random, weight_pow): only with use_pf_ppo
    pf_ppo: dict[str, Any] = field(default_factory=dict)
    # importance weights and rejection against the sampler/trainer mismatch (docs/rollout.md)
    rollout_correction: RolloutCorrectionConfig = field(default_factory=RolloutCorrectionConfig)
