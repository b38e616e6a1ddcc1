"""The ``algorithm`` section: advantage estimator, discounting, reward-side KL, DAPO's dynamic sampling and rollout correction."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from verl.base_config import BaseConfig
from verl.workers.config.rollout_correction import RolloutCorrectionConfig

__all__ = ["AlgoConfig", "FilterGroupsConfig", "KLControlConfig", "RolloutCorrectionConfig"]


@dataclass
class KLControlConfig(BaseConfig):
    """The coefficient of the KL penalty in the reward: fixed, or adapted towards a target KL (Ziegler et al.)."""

    type: str = "fixed"  # fixed | adaptive
    # the KL coefficient (the starting one when adaptive)
    kl_coef: float = field(default=0.001, metadata={"api": ("EngineConfig.kl_coef",)})
    horizon: int = 10000  # adaptive: steps over which the coefficient adapts
    target_kl: float = 0.1  # adaptive: the KL it steers towards


@dataclass
class FilterGroupsConfig(BaseConfig):
    """DAPO dynamic sampling: drop prompt groups whose rewards are all equal and refill the batch."""

    enable: bool = False  # on: refill the batch with groups that vary
    metric: str = "seq_reward"  # seq_reward | seq_final_reward | acc
    max_num_gen_batches: int = 10  # 0: unlimited


@dataclass
class AlgoConfig(BaseConfig):
    """The RL algorithm of a PPO-family run. The dataclass defaults are verl's (``adv_estimator=gae``); the
    ``ppo_trainer`` job starts from GRPO (``verl.trainer.config.ppo_trainer``)."""

    # gae | grpo | rloo | reinforce_plus_plus | reinforce_plus_plus_baseline | remax | opo | grpo_passk | gpg | gdpo |
    # grpo_vectorized | rloo_vectorized | optimal_token_baseline | tir_optimal_token_baseline (docs/ppo.md)
    adv_estimator: str = field(default="gae", metadata={"api": ("EngineConfig.adv_estimator",)})
    # discount; used by gae and reinforce_plus_plus only
    gamma: float = field(default=1.0, metadata={"api": ("EngineConfig.gamma",)})
    lam: float = field(default=1.0, metadata={"api": ("EngineConfig.lam",)})  # GAE lambda
    # rewards = scores / reward_temp before KL and advantages (1.0: unchanged)
    reward_temp: float = field(default=1.0, metadata={"api": ("EngineConfig.reward_temp",)})
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
