"""The actor and reference sections: ``actor_rollout_ref.actor`` and ``actor_rollout_ref.ref``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

from verl.base_config import BaseConfig
from verl.utils.config import as_section
from verl.utils.profiler.config import ProfilerConfig
from verl.workers.config.checkpoint import CheckpointConfig
from verl.workers.config.engine import FSDPEngineConfig, McoreEngineConfig
from verl.workers.config.model import HFModelConfig
from verl.workers.config.optimizer import FSDPOptimizerConfig, McoreOptimizerConfig
from verl.workers.config.rollout_correction import RolloutCorrectionConfig

__all__ = [
    "ActorConfig",
    "FSDPActorConfig",
    "McoreActorConfig",
    "PolicyLossConfig",
    "RefConfig",
    "RouterReplayConfig",
    "TrustRegionConfig",
    "trust_region_enabled",
]


def check_loss_agg_mode(section: str, mode: str) -> None:
    """``mode`` is one ``core_algos.agg_loss`` implements. The default needs no look-up: loading a config (which
    builds the default sections) must not import torch through ``core_algos``."""
    if mode == "token-mean":
        return
    from verl.core_algos.aggregation import LOSS_AGG_MODES

    if mode not in LOSS_AGG_MODES:
        raise ValueError(f"[{section}] Invalid loss_agg_mode {mode!r}: use one of {list(LOSS_AGG_MODES)}")


def check_micro_batch_sizes(section: str, deprecated: int | None, per_gpu: int | None, key: str) -> None:
    """One of verl's deprecated global micro-batch size ``<key>`` and its per-worker ``<key>_per_gpu``, not both and
    not neither (when the micro-batches are fixed-size, ``use_dynamic_bsz=false``)."""
    if deprecated is not None and per_gpu is not None:
        raise ValueError(
            f"[{section}] You have set both '{section}.{key}' ({deprecated}, verl's deprecated global size) AND "
            f"'{section}.{key}_per_gpu' ({per_gpu}): remove '{section}.{key}'"
        )
    if deprecated is None and per_gpu is None:
        raise ValueError(
            f"[{section}] Please set at least one of '{section}.{key}_per_gpu' (responses per forward/backward on a "
            f"worker) or '{section}.{key}', or use_dynamic_bsz=true"
        )


@dataclass
class RouterReplayConfig(BaseConfig):
    """MoE router replay: record the rollout's expert routing and replay it in the update. Not implemented (a mode
    other than disabled is an error: the update's routing, so its gradient, would differ)."""

    mode: str = "disabled"  # disabled | R2 | R3: not implemented (another value is an error)
    record_file: str | None = None  # where routing decisions are recorded
    replay_file: str | None = None  # where recorded routing decisions are read


@dataclass
class PolicyLossConfig(BaseConfig):
    """Which policy loss the actor minimises (``core_algos`` registry) and its own knobs."""

    # vanilla | gspo | gpg | clip_cov | kl_cov | cispo | geo_mean | sapo | dro | dppo_tv | dppo_kl (docs/ppo.md);
    # bypass_mode is set by algorithm.rollout_correction.bypass_mode (docs/rollout.md)
    loss_mode: str = "vanilla"
    clip_cov_ratio: float = 0.0002  # clip_cov: share of tokens whose gradient is cut (highest covariance)
    clip_cov_lb: float = 1.0  # clip_cov: covariance lower bound of the cut tokens
    clip_cov_ub: float = 5.0  # clip_cov: covariance upper bound of the cut tokens
    kl_cov_ratio: float = 0.0002  # kl_cov: share of tokens given the KL penalty (highest covariance)
    ppo_kl_coef: float = 0.1  # kl_cov: weight of that penalty
    dro_beta: float | None = None  # dro: weight of the quadratic log-ratio penalty (required with loss_mode=dro)
    # bypass_mode: algorithm.rollout_correction, copied here by the trainer when its bypass_mode is on (leave null)
    rollout_correction: Any = None

    def __post_init__(self) -> None:
        # the trainer copies the section in as a dict (a free-form key of the job config): the bypass loss reads it
        # typed, so it becomes a RolloutCorrectionConfig here, once, before the section is frozen for readers
        if isinstance(self.rollout_correction, Mapping):
            section = as_section(self.rollout_correction, RolloutCorrectionConfig)
            object.__setattr__(self, "rollout_correction", section)


@dataclass
class TrustRegionConfig(BaseConfig):
    """Update-size control (``actor.trust_region``; `verl.core_algos.trust_region`): each mini-batch after a step's
    first measures the KL between the policy being trained and the one that sampled the batch (k3 on the old
    log-probs: free, the loss has both); above ``early_stop_ratio * target_kl`` the step's remaining mini-batches
    are skipped, and the learning rate's multiplier moves toward ``target_kl`` (down by ``lr_factor``, up by
    ``lr_increase_factor``) within [min_lr_ratio, max_lr_ratio] of optim.lr, from ``initial_lr_ratio`` (a warm-up as
    fast as the KL allows: Adam's first steps are its largest). Needs more than one mini-batch per step or
    ppo_epochs > 1 (the first mini-batch is on-policy); ``actor/policy_drift_kl`` is logged either way."""

    # off: verl's fixed learning rate (verl has no trust region); the quickstart recipe turns it on
    enable: bool = False
    target_kl: float = 0.0005  # the drift, KL(pi_old || pi_theta) per response token, a mini-batch step should reach
    early_stop_ratio: float = 4.0  # skip the step's remaining mini-batches past this x target_kl (0: never)
    adapt_lr: bool = True  # steer the learning rate toward target_kl (false: only the early stop)
    lr_factor: float = 1.5  # the multiplier's fall per mini-batch above 2 x target: / it
    # the multiplier's rise per mini-batch below target / 2: x it (slow up, fast down; null: lr_factor both ways)
    lr_increase_factor: float | None = 1.1
    initial_lr_ratio: float = 0.1  # the multiplier at the first step
    min_lr_ratio: float = 0.01  # the multiplier's floor, as a share of optim.lr
    max_lr_ratio: float = 1.0  # its ceiling: optim.lr is the largest learning rate used

    def __post_init__(self) -> None:
        if self.target_kl <= 0:
            raise ValueError(f"actor.trust_region.target_kl={self.target_kl}: must be > 0")
        if self.lr_factor < 1:
            raise ValueError(f"actor.trust_region.lr_factor={self.lr_factor}: must be >= 1")
        if self.lr_increase_factor is not None and self.lr_increase_factor < 1:
            raise ValueError(
                f"actor.trust_region.lr_increase_factor={self.lr_increase_factor}: must be >= 1 (or null: lr_factor)"
            )
        if not self.min_lr_ratio <= self.initial_lr_ratio <= self.max_lr_ratio:
            raise ValueError(
                f"actor.trust_region.initial_lr_ratio={self.initial_lr_ratio}: must be within [min_lr_ratio "
                f"({self.min_lr_ratio}), max_lr_ratio ({self.max_lr_ratio})]"
            )
        if not 0 < self.min_lr_ratio <= self.max_lr_ratio:
            raise ValueError(
                f"actor.trust_region: need 0 < min_lr_ratio ({self.min_lr_ratio}) <= max_lr_ratio ({self.max_lr_ratio})"
            )


def trust_region_enabled(actor: Any) -> bool:
    """Whether ``actor.trust_region`` steers this actor's updates (``trust_region.enable``)."""
    return bool(actor.trust_region.enable)


@dataclass
class ActorConfig(BaseConfig):
    """The policy update: batch sizes, PPO clipping, loss aggregation, entropy and KL terms, the optimizer.

    Built, it checks what verl's ``ActorConfig`` checks: a known ``loss_agg_mode``, and (fixed-size micro-batches)
    exactly one of ``ppo_micro_batch_size_per_gpu`` and verl's deprecated ``ppo_micro_batch_size``."""

    _mutable_fields: ClassVar[frozenset[str]] = frozenset(
        {"ppo_mini_batch_size", "ppo_micro_batch_size", "ppo_micro_batch_size_per_gpu"}
    )

    # dp | fsdp | fsdp2: the data-parallel worker (FSDP2 with backend=ray); megatron is not implemented
    strategy: str = "dp"
    # prompts per optimizer step (x rollout.n responses), over all workers
    ppo_mini_batch_size: int = field(
        default=256, metadata={"api": ("DataConfig.num_rollout_steps", "train.mini_batch_size")}
    )
    # responses per forward/backward (null: only with use_dynamic_bsz or the deprecated ppo_micro_batch_size)
    ppo_micro_batch_size_per_gpu: int | None = 128
    use_dynamic_bsz: bool = False  # micro-batches by token budget instead of ppo_micro_batch_size_per_gpu
    ppo_max_token_len_per_gpu: int = 16384  # real (prompt + response) tokens per micro-batch with use_dynamic_bsz
    autocast_dtype: str = "fp32"  # fp32 | bf16: torch.autocast for the actor/ref passes (fp32 weights kept)
    skip_old_log_prob_on_policy: bool = True  # one epoch, one mini-batch: old_log_probs = current ones (no extra pass)
    # passes over each batch of responses
    ppo_epochs: int = field(default=1, metadata={"api": ("DataConfig.num_rollout_steps", "train.ppo_epochs")})
    shuffle: bool = False  # shuffle rows before cutting mini-batches (seeded by the step)
    clip_ratio: float = 0.2  # PPO clip epsilon: the losses read clip_ratio_low/high (a dict without them: this)
    clip_ratio_low: float = 0.2  # ratio lower bound 1 - clip_ratio_low
    clip_ratio_high: float = 0.2  # DAPO clip-higher: 0.28
    clip_ratio_c: float = 3.0  # dual-clip bound for negative advantages (dppo_*: the ratio's truncation cap)
    # token-mean | token-sum | seq-mean-token-sum | seq-mean-token-mean | seq-mean-token-sum-norm (Dr. GRPO: / (G L))
    loss_agg_mode: str = "token-mean"
    # entropy bonus weight in the actor loss
    entropy_coeff: float = field(default=0.0, metadata={"api": ("EngineConfig.entropy_coeff",)})
    use_kl_loss: bool = False  # KL to the reference as a loss term (GRPO paper style)
    kl_loss_coef: float = 0.001  # weight of the KL loss term (use_kl_loss)
    kl_loss_type: str = "low_var_kl"  # kl | abs | mse | low_var_kl
    # > 0: truncated token-level importance sampling of the sampler/trainer mismatch, capped (the same weight as
    # algorithm.rollout_correction.rollout_is=token with rollout_is_threshold=cap; setting both is an error)
    tis_imp_ratio_cap: float = -1
    policy_loss: PolicyLossConfig = field(default_factory=PolicyLossConfig)  # the loss function and its knobs
    # AdamW
    optim: FSDPOptimizerConfig = field(
        default_factory=lambda: FSDPOptimizerConfig(lr=1.0e-6),
        metadata={"api": {"lr": ("OptimConfig.actor_lr", "train.lr")}},
    )
    trust_region: TrustRegionConfig = field(default_factory=TrustRegionConfig)  # update-size control (KL to pi_old)
    # deprecated in verl: responses per micro-batch over all workers; sets ppo_micro_batch_size_per_gpu = it // workers
    ppo_micro_batch_size: int | None = None
    # no effect: the passes run eagerly (benchmarks/RESULTS.md: compile did not pay on CPU)
    use_torch_compile: bool = True
    # no effect: the loss is normalised by the mini-batch's token or sequence count
    loss_scale_factor: float | None = None
    use_fused_kernels: bool = False  # as actor_rollout_ref.model.use_fused_kernels
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)  # what a checkpoint holds (verl key)
    # (derived) responses per prompt: follows rollout.n, which the update reads (a different value is an error)
    rollout_n: int = 1
    tau_pos: float = 1.0  # SAPO soft-gate temperature for positive advantages (policy_loss.loss_mode=sapo)
    tau_neg: float = 1.05  # SAPO soft-gate temperature for negative advantages (policy_loss.loss_mode=sapo)
    freeze_vision_tower: bool = False  # no effect: text-only models here
    # no effect: the entropy is computed when the loss needs it (entropy_coeff != 0) and on the on-policy pass
    # (actor/entropy metric)
    calculate_entropy: bool = False
    # no effect: actor_rollout_ref.model.use_shared_prefix computes each repeated prompt once (exact)
    use_prefix_grouper: bool = False
    data_loader_seed: int = 42  # no effect: mini-batch shuffles are seeded by the step (trainer.seed seeds the run)
    profiler: ProfilerConfig = field(default_factory=ProfilerConfig)  # profiling: not wired (enable=true warns)
    router_replay: RouterReplayConfig = field(default_factory=RouterReplayConfig)  # MoE router replay
    # (runtime) verl's engine fills it per micro-batch for the policy losses' global normalisation (dp_size,
    # batch_num_tokens, global_batch_size, loss_scale_factor); this worker weights micro-batches itself: leave empty
    global_batch_info: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def ported_layout(cls, data: dict[str, Any]) -> dict[str, Any]:
        """A dict config as the policy losses once read it: the ``policy_loss`` options may sit at the top level,
        and an absent (or null) ``clip_ratio_low`` / ``clip_ratio_high`` follows ``clip_ratio``."""
        data = dict(data)
        loss_keys = {f.name for f in fields(PolicyLossConfig)} & data.keys()
        if loss_keys:
            nested = dict(data.get("policy_loss") or {})
            data["policy_loss"] = {**{key: data.pop(key) for key in loss_keys}, **nested}
        if data.get("clip_ratio") is not None:
            for key in ("clip_ratio_low", "clip_ratio_high"):
                if data.get(key) is None:
                    data[key] = data["clip_ratio"]
        return data

    def __post_init__(self) -> None:
        check_loss_agg_mode("actor", self.loss_agg_mode)
        if not self.use_dynamic_bsz:
            check_micro_batch_sizes(
                "actor", self.ppo_micro_batch_size, self.ppo_micro_batch_size_per_gpu, "ppo_micro_batch_size"
            )

    def validate(self, n_gpus: int, train_batch_size: int, model_config: dict | None = None) -> None:
        """verl's run-time checks against the worker count and ``data.train_batch_size`` (prompts)."""
        if self.use_dynamic_bsz:
            return
        if train_batch_size < self.ppo_mini_batch_size:
            raise ValueError(
                f"data.train_batch_size ({train_batch_size}) must be >= actor.ppo_mini_batch_size "
                f"({self.ppo_mini_batch_size}): both count prompts"
            )
        if self.ppo_micro_batch_size is not None:
            if self.ppo_mini_batch_size % self.ppo_micro_batch_size:
                raise ValueError(
                    f"actor.ppo_mini_batch_size ({self.ppo_mini_batch_size}) must be divisible by "
                    f"actor.ppo_micro_batch_size ({self.ppo_micro_batch_size})"
                )
            sp = getattr(self, "ulysses_sequence_parallel_size", 1)
            if self.ppo_micro_batch_size * sp < n_gpus:
                raise ValueError(
                    f"actor.ppo_micro_batch_size ({self.ppo_micro_batch_size}) x ulysses_sequence_parallel_size ({sp}) "
                    f"must be >= n_gpus ({n_gpus}): each worker needs a row; or set ppo_micro_batch_size_per_gpu"
                )


@dataclass
class FSDPActorConfig(ActorConfig):
    """The actor of the data-parallel (FSDP2) worker: gradient clipping and sharding on top of `ActorConfig`."""

    # max global gradient norm; a non-finite norm skips the optimizer step
    grad_clip: float = field(default=1.0, metadata={"api": ("OptimConfig.grad_clip",)})
    # Ulysses sequence parallelism: not implemented (> 1 warns; whole sequences per worker)
    ulysses_sequence_parallel_size: int = 1
    fsdp_config: FSDPEngineConfig = field(default_factory=FSDPEngineConfig)  # FSDP2 sharding (trainer.backend=ray)
    # log-probs and entropy 1,024 tokens at a time, each chunk's softmax recomputed in the backward: no (tokens, vocab)
    # float32 tensor is kept (docs/auto_config.md); values equal the default pass's to float rounding
    entropy_from_logits_with_chunking: bool = False
    entropy_checkpointing: bool = False  # no effect: the chunked pass above always recomputes in the backward
    # (derived) follows actor_rollout_ref.model.use_remove_padding, which the passes read (a different value warns)
    use_remove_padding: bool = True
    # sum of squared token probabilities for the optimal-token baseline: not computed here (true warns)
    calculate_sum_pi_squared: bool = False
    sum_pi_squared_checkpointing: bool = False  # no effect (see calculate_sum_pi_squared)

    def validate(self, n_gpus: int, train_batch_size: int, model_config: dict | None = None) -> None:
        super().validate(n_gpus, train_batch_size, model_config)
        if self.ulysses_sequence_parallel_size > 1 and model_config is not None:
            # verl passes actor_rollout_ref.model as a dict: read it as the model section
            if not as_section(model_config, HFModelConfig).use_remove_padding:
                raise ValueError(
                    "actor.ulysses_sequence_parallel_size > 1: you must enable `use_remove_padding` "
                    "(actor_rollout_ref.model.use_remove_padding=true) for sequence parallelism"
                )


@dataclass
class McoreActorConfig(ActorConfig):
    """The actor of verl's Megatron worker (verl's ``McoreActorConfig``). Megatron is not implemented: the class
    exists so configs written for it construct; a run uses `FSDPActorConfig`."""

    strategy: str = "megatron"  # the strategy these settings are for
    optim: McoreOptimizerConfig = field(default_factory=McoreOptimizerConfig)  # Megatron's optimizer
    load_weight: bool = True  # load the HF weights at start
    megatron: McoreEngineConfig = field(default_factory=McoreEngineConfig)  # Megatron parallelism
    profile: dict[str, Any] = field(default_factory=dict)  # Megatron profiling options
    use_rollout_log_probs: bool = False  # use the sampler's log-probs as the old ones


@dataclass
class RefConfig(BaseConfig):
    """The frozen reference policy: its log-prob passes and sharding."""

    enable: bool | None = None  # null: only when a KL term needs it (use_kl_loss or use_kl_in_reward)
    # responses per forward in a log-prob pass (null: only with log_prob_use_dynamic_bsz or the deprecated
    # log_prob_micro_batch_size)
    log_prob_micro_batch_size_per_gpu: int | None = 128
    log_prob_use_dynamic_bsz: bool = False  # token-budget micro-batches in log-prob passes
    log_prob_max_token_len_per_gpu: int = 16384  # tokens per log-prob micro-batch with log_prob_use_dynamic_bsz
    # FSDP2 sharding (trainer.backend=ray)
    fsdp_config: FSDPEngineConfig = field(default_factory=lambda: FSDPEngineConfig(forward_only=True))
    strategy: str = "dp"  # as the actor's
    # deprecated in verl: sets log_prob_micro_batch_size_per_gpu = it // workers
    log_prob_micro_batch_size: int | None = None
    ulysses_sequence_parallel_size: int = 1  # as the actor's
    use_torch_compile: bool = True  # no effect
    rollout_n: int = 1  # (derived) responses per prompt: follows rollout.n (a different value is an error)
    entropy_from_logits_with_chunking: bool = False  # the reference's log-prob pass, chunked (see the actor's)
    entropy_checkpointing: bool = False  # no effect
    profiler: ProfilerConfig = field(default_factory=ProfilerConfig)  # profiling: not wired (enable=true warns)
    router_replay: RouterReplayConfig = field(default_factory=RouterReplayConfig)  # MoE router replay
