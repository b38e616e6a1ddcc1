"""The actor and reference sections: ``actor_rollout_ref.actor`` and ``actor_rollout_ref.ref``."""

from __future__ import annotations

from dataclasses import dataclass, field

from verl.base_config import BaseConfig
from verl.trainer.config.config import CheckpointConfig
from verl.workers.config.engine import FSDPEngineConfig
from verl.workers.config.optimizer import FSDPOptimizerConfig

__all__ = ["ActorConfig", "FSDPActorConfig", "PolicyLossConfig", "RefConfig"]


@dataclass
class PolicyLossConfig(BaseConfig):
    """Which policy loss the actor minimises (``core_algos`` registry) and its own knobs."""

    loss_mode: str = "vanilla"  # vanilla | gspo | gpg | clip_cov | kl_cov | cispo
    clip_cov_ratio: float = 0.0002  # clip_cov: share of tokens whose gradient is cut (highest covariance)
    clip_cov_lb: float = 1.0  # clip_cov: covariance lower bound of the cut tokens
    clip_cov_ub: float = 5.0  # clip_cov: covariance upper bound of the cut tokens
    kl_cov_ratio: float = 0.0002  # kl_cov: share of tokens given the KL penalty (highest covariance)
    ppo_kl_coef: float = 0.1  # kl_cov: weight of that penalty


@dataclass
class ActorConfig(BaseConfig):
    """The policy update: batch sizes, PPO clipping, loss aggregation, entropy and KL terms, the optimizer."""

    # dp | fsdp | fsdp2: the data-parallel worker (FSDP2 with backend=ray); megatron is not implemented
    strategy: str = "dp"
    ppo_mini_batch_size: int = 16  # prompts per optimizer step (x rollout.n responses), over all workers
    ppo_micro_batch_size_per_gpu: int = 128  # responses per forward/backward
    use_dynamic_bsz: bool = False  # micro-batches by token budget instead of ppo_micro_batch_size_per_gpu
    ppo_max_token_len_per_gpu: int = 16384  # real (prompt + response) tokens per micro-batch with use_dynamic_bsz
    autocast_dtype: str = "fp32"  # fp32 | bf16: torch.autocast for the actor/ref passes (fp32 weights kept)
    skip_old_log_prob_on_policy: bool = True  # one epoch, one mini-batch: old_log_probs = current ones (no extra pass)
    ppo_epochs: int = 1  # passes over each batch of responses
    shuffle: bool = False  # shuffle rows before cutting mini-batches (seeded by the step)
    clip_ratio: float = 0.2  # PPO clip epsilon; clip_ratio_low/high default to it
    clip_ratio_low: float = 0.2  # ratio lower bound 1 - clip_ratio_low
    clip_ratio_high: float = 0.2  # DAPO clip-higher: 0.28
    clip_ratio_c: float = 3.0  # dual-clip bound for negative advantages
    loss_agg_mode: str = "token-mean"  # token-mean | seq-mean-token-sum | seq-mean-token-mean | seq-mean-token-sum-norm
    entropy_coeff: float = 0.0  # entropy bonus weight in the actor loss
    use_kl_loss: bool = False  # KL to the reference as a loss term (GRPO paper style)
    kl_loss_coef: float = 0.001  # weight of the KL loss term (use_kl_loss)
    kl_loss_type: str = "low_var_kl"  # kl | abs | mse | low_var_kl
    tis_imp_ratio_cap: float = -1  # > 0: truncated importance sampling of the sampler/trainer mismatch, capped
    policy_loss: PolicyLossConfig = field(default_factory=PolicyLossConfig)  # the loss function and its knobs
    optim: FSDPOptimizerConfig = field(default_factory=lambda: FSDPOptimizerConfig(lr=2.0e-4))  # the actor's AdamW
    # deprecated in verl: responses per micro-batch over all workers; sets ppo_micro_batch_size_per_gpu = it // workers
    ppo_micro_batch_size: int | None = None
    # no effect: the passes run eagerly (benchmarks/RESULTS.md: compile did not pay on CPU)
    use_torch_compile: bool = True
    # no effect: the loss is normalised by the mini-batch's token or sequence count
    loss_scale_factor: float | None = None
    use_fused_kernels: bool = False  # as actor_rollout_ref.model.use_fused_kernels
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)  # what a checkpoint holds (verl key)


@dataclass
class FSDPActorConfig(ActorConfig):
    """The actor of the data-parallel (FSDP2) worker: gradient clipping and sharding on top of `ActorConfig`."""

    grad_clip: float = 1.0  # max global gradient norm; a non-finite norm skips the optimizer step
    # Ulysses sequence parallelism: not implemented (> 1 warns; whole sequences per worker)
    ulysses_sequence_parallel_size: int = 1
    fsdp_config: FSDPEngineConfig = field(default_factory=FSDPEngineConfig)  # FSDP2 sharding (trainer.backend=ray)


@dataclass
class RefConfig(BaseConfig):
    """The frozen reference policy: its log-prob passes and sharding."""

    enable: bool | None = None  # null: only when a KL term needs it (use_kl_loss or use_kl_in_reward)
    log_prob_micro_batch_size_per_gpu: int = 128  # responses per forward in a log-prob pass
    log_prob_use_dynamic_bsz: bool = False  # token-budget micro-batches in log-prob passes
    log_prob_max_token_len_per_gpu: int = 16384  # tokens per log-prob micro-batch with log_prob_use_dynamic_bsz
    fsdp_config: FSDPEngineConfig = field(default_factory=FSDPEngineConfig)  # FSDP2 sharding (trainer.backend=ray)
    strategy: str = "dp"  # as the actor's
    # deprecated in verl: sets log_prob_micro_batch_size_per_gpu = it // workers
    log_prob_micro_batch_size: int | None = None
    ulysses_sequence_parallel_size: int = 1  # as the actor's
    use_torch_compile: bool = True  # no effect
