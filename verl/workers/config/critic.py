"""The critic section (``critic``): the value model of PPO with GAE."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from verl.base_config import BaseConfig
from verl.utils.profiler.config import ProfilerConfig
from verl.workers.config.actor import check_micro_batch_sizes
from verl.workers.config.checkpoint import CheckpointConfig
from verl.workers.config.engine import McoreEngineConfig
from verl.workers.config.model import FSDPCriticModelCfg
from verl.workers.config.optimizer import FSDPOptimizerConfig, McoreOptimizerConfig

__all__ = ["CriticConfig", "FSDPCriticConfig", "McoreCriticConfig"]


@dataclass
class CriticConfig(BaseConfig):
    """The value model's updates: batch sizes, value clipping, loss aggregation, its optimizer and placement.

    Built, it checks what verl's ``CriticConfig`` checks (fixed-size micro-batches): exactly one of
    ``ppo_micro_batch_size_per_gpu`` and verl's deprecated ``ppo_micro_batch_size``, which must divide
    ``ppo_mini_batch_size``."""

    _mutable_fields: ClassVar[frozenset[str]] = frozenset(
        {"ppo_mini_batch_size", "ppo_micro_batch_size", "ppo_micro_batch_size_per_gpu"}
    )

    enable: bool | None = None  # null: when the estimator needs values (gae)
    # dp | fsdp | fsdp2: the data-parallel worker (FSDP2 with backend=ray); megatron is not implemented
    strategy: str = "dp"
    model: FSDPCriticModelCfg = field(default_factory=FSDPCriticModelCfg)  # the value model
    enable_resource_pool: bool = False  # ray: the critic on its own processes (else colocated with the actor)
    nnodes: int = 1  # with enable_resource_pool: the critic's own nodes
    n_gpus_per_node: int = 1  # with enable_resource_pool: the critic's processes per node
    # the critic's AdamW (value head and body)
    optim: FSDPOptimizerConfig = field(
        default_factory=lambda: FSDPOptimizerConfig(lr=1.0e-5),
        metadata={"api": {"lr": ("OptimConfig.critic_lr", "train.critic_lr")}},
    )
    ppo_mini_batch_size: int = 16  # prompts per critic optimizer step
    # responses per forward/backward (null: only with the deprecated ppo_micro_batch_size)
    ppo_micro_batch_size_per_gpu: int | None = 128
    ppo_epochs: int = 1  # passes over each batch
    shuffle: bool = False  # shuffle rows before cutting mini-batches (seeded by the step)
    cliprange_value: float = 0.5  # value clipping around the old values
    loss_agg_mode: str = "token-mean"  # as the actor's
    # deprecated in verl: sets critic.ppo_micro_batch_size_per_gpu = it // workers
    ppo_micro_batch_size: int | None = None
    use_dynamic_bsz: bool = False  # no effect: the critic runs fixed micro-batches (same loss)
    ppo_max_token_len_per_gpu: int = 32768  # no effect (critic token budgets: see use_dynamic_bsz)
    forward_max_token_len_per_gpu: int = 32768  # no effect
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)  # what a checkpoint holds (verl key)
    rollout_n: int = 1  # (derived) responses per prompt: follows rollout.n (a different value is an error)
    data_loader_seed: int = 42  # no effect: mini-batch shuffles are seeded by the step (trainer.seed seeds the run)
    profiler: ProfilerConfig = field(default_factory=ProfilerConfig)  # profiling: not wired (enable=true warns)

    def __post_init__(self) -> None:
        if not self.use_dynamic_bsz:
            check_micro_batch_sizes(
                "critic", self.ppo_micro_batch_size, self.ppo_micro_batch_size_per_gpu, "ppo_micro_batch_size"
            )
            if self.ppo_micro_batch_size is not None and self.ppo_mini_batch_size % self.ppo_micro_batch_size:
                raise ValueError(
                    f"[critic] ppo_mini_batch_size ({self.ppo_mini_batch_size}) must be divisible by "
                    f"ppo_micro_batch_size ({self.ppo_micro_batch_size})"
                )

    def validate(self, n_gpus: int, train_batch_size: int) -> None:
        """verl's run-time check against ``data.train_batch_size`` (prompts)."""
        if not self.use_dynamic_bsz and train_batch_size < self.ppo_mini_batch_size:
            raise ValueError(
                f"data.train_batch_size ({train_batch_size}) must be >= critic.ppo_mini_batch_size "
                f"({self.ppo_mini_batch_size}): both count prompts"
            )


@dataclass
class FSDPCriticConfig(CriticConfig):
    """The critic of the data-parallel (FSDP2) worker."""

    _mutable_fields: ClassVar[frozenset[str]] = CriticConfig._mutable_fields | {
        "forward_micro_batch_size",
        "forward_micro_batch_size_per_gpu",
    }

    # max global gradient norm; a non-finite norm skips the optimizer step
    grad_clip: float = field(default=1.0, metadata={"api": ("OptimConfig.grad_clip",)})
    ulysses_sequence_parallel_size: int = 1  # Ulysses sequence parallelism: not implemented (> 1 warns)
    # deprecated in verl: sets forward_micro_batch_size_per_gpu = it // workers (follows ppo_micro_batch_size)
    forward_micro_batch_size: int | None = None
    # responses per forward in the value pass (compute_values); follows ppo_micro_batch_size_per_gpu
    forward_micro_batch_size_per_gpu: int | None = 128


@dataclass
class McoreCriticConfig(CriticConfig):
    """The critic of verl's Megatron worker (verl's ``McoreCriticConfig``). Megatron is not implemented: the class
    exists so configs written for it construct; a run uses `FSDPCriticConfig`."""

    strategy: str = "megatron"  # the strategy these settings are for
    optim: McoreOptimizerConfig = field(default_factory=McoreOptimizerConfig)  # Megatron's optimizer
    nccl_timeout: int = 600  # collective timeout, seconds
    megatron: McoreEngineConfig = field(default_factory=McoreEngineConfig)  # Megatron parallelism
    load_weight: bool = True  # load the HF weights at start
